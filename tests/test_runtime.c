/* test_runtime.c — the runtime (theseus.h's "runtime" section) without HTTP:
 * admission and a full queue, chunked prefill against an unchunked one and
 * plain th_decode, cancellation freeing the slot and its KV blocks, n > 1
 * choices sharing the prompt's KV blocks (seeds), stop strings across token
 * boundaries (and their logprob entries), UTF-8 holdback with byte-fallback
 * tokens, max_tokens, a full context, prefix reuse, the runtime's own thread,
 * argmax-only contexts, the logits-processor seam and the ChatML fallback.
 *
 * Most cases force the tokens with a logits processor (every logit -inf but
 * the wanted one), so what they check does not depend on model numerics.
 * Models: the tiny SPM fixture (byte-fallback tokens <0x00>..<0xFF> are ids
 * 3..258) and SmolLM2 (BPE); a missing one skips its tests. */
#include "check.h"
#include "theseus.h"
#include <pthread.h>
#include <time.h>

static th_model *g_tiny, *g_smol;

#define MAX_CH 4
#define MAX_TOK 512

/* ---------------------------------------------------------------- events */

typedef struct col {
    char text[MAX_CH][4096];
    size_t n[MAX_CH];
    th_token tok[MAX_CH][MAX_TOK];
    int n_tok[MAX_CH];
    th_token_info ent[MAX_CH][MAX_TOK];
    int n_ent[MAX_CH];
    char delta[MAX_CH][MAX_TOK][64];   /* text released by each TOKEN event */
    th_finish finish[MAX_CH];
    int n_start, n_end, n_finish, bad_utf8;
    th_status status;
    int start_order;                   /* value of *order when START came */
    int *order;
    bool cancel_after_3;               /* for the `cancelled` callback */
} col;

/* Whole UTF-8 characters only (no truncated sequence at the end). */
static bool utf8_complete(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++) if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

static void on_event(const th_event *ev, void *user) {
    col *c = user;
    int ch = ev->choice;
    switch (ev->kind) {
    case TH_EVENT_START:
        c->n_start++;
        if (c->order) c->start_order = (*c->order)++;
        return;
    case TH_EVENT_END:
        c->n_end++;
        c->status = ev->status;
        return;
    case TH_EVENT_TOKEN:
        if (c->n_tok[ch] < MAX_TOK) {
            size_t k = ev->n_text < 63 ? ev->n_text : 63;
            memcpy(c->delta[ch][c->n_tok[ch]], ev->text, k);
            c->delta[ch][c->n_tok[ch]][k] = 0;
            c->tok[ch][c->n_tok[ch]++] = ev->token;
        }
        break;
    case TH_EVENT_FINISH:
        c->finish[ch] = ev->finish;
        c->n_finish++;
        break;
    }
    if (!utf8_complete(ev->text, ev->n_text)) c->bad_utf8++;
    if (c->n[ch] + ev->n_text < sizeof c->text[ch]) {
        memcpy(c->text[ch] + c->n[ch], ev->text, ev->n_text);
        c->n[ch] += ev->n_text;
        c->text[ch][c->n[ch]] = 0;
    }
    for (int i = 0; i < ev->n_tokens && c->n_ent[ch] < MAX_TOK; i++) c->ent[ch][c->n_ent[ch]++] = ev->tokens[i];
}

static bool poll_cancel(void *user) {
    col *c = user;
    return c->cancel_after_3 && c->n_tok[0] >= 3;
}

/* ---------------------------------------------------------------- forcing tokens */

typedef struct force {
    const th_token *seq;        /* tokens to force, in order, per choice */
    int n;
    int pos[MAX_CH];
    const th_model *ban_eog;    /* after seq (or without one): end-of-generation tokens banned */
} force;

static th_status force_apply(void *user, int32_t choice, float *logits, int32_t n_vocab) {
    force *f = user;
    if (f->pos[choice] < f->n) {
        th_token want = f->seq[f->pos[choice]];
        for (int32_t i = 0; i < n_vocab; i++) logits[i] = i == want ? 0.0f : -INFINITY;
    } else if (f->ban_eog) {
        for (int32_t i = 0; i < n_vocab; i++) if (th_token_is_eog(f->ban_eog, i)) logits[i] = -INFINITY;
    }
    return TH_OK;
}

static void force_accept(void *user, int32_t choice, th_token t) { ((force *)user)->pos[choice]++; }

/* Bans end-of-generation tokens; no state (several requests may share it). */
static th_status ban_eog_apply(void *user, int32_t choice, float *logits, int32_t n_vocab) {
    for (int32_t i = 0; i < n_vocab; i++) if (th_token_is_eog(user, i)) logits[i] = -INFINITY;
    return TH_OK;
}

static th_logits_processor forcing(force *f) {
    return (th_logits_processor){ .apply = force_apply, .accept = force_accept, .user = f };
}

/* ---------------------------------------------------------------- helpers */

static th_runtime *mk(th_model *m, int slots, int slot_ctx, int n_batch, int queue, bool inv, bool keep) {
    th_runtime_params p = th_runtime_default_params();
    p.context.n_threads = 2;
    p.n_slots = slots;
    p.slot_ctx = slot_ctx;
    p.n_batch = n_batch;
    p.max_queue = queue;
    p.batch_invariant = inv;
    p.keep_prefix = keep;
    th_runtime *rt = NULL;
    th_status s = th_runtime_new(m, &p, &rt);
    CHECK(s == TH_OK, "th_runtime_new: %s", th_last_error());
    return rt;
}

static th_request_params req_params(col *c, int max_tokens) {
    th_request_params p = th_request_default_params();
    p.max_tokens = max_tokens;
    p.on_event = on_event;
    p.user = c;
    return p;
}

/* Steps until r is done (at most max_steps); returns the steps taken. */
static int drive(th_runtime *rt, th_request *r, int max_steps) {
    int k = 0;
    while (!th_request_done(r) && k < max_steps) {
        th_status s = th_runtime_step(rt, NULL);
        CHECK(s == TH_OK, "step: %s", th_last_error());
        k++;
    }
    CHECK(th_request_done(r), "not done after %d steps", max_steps);
    return k;
}

static th_request *submit(th_runtime *rt, const th_request_params *p, const th_token *prompt, int n) {
    th_request *r = NULL;
    th_status s = th_runtime_submit(rt, p, prompt, n, &r);
    CHECK(s == TH_OK, "submit: %s", th_last_error());
    return r;
}

static int tokenize(th_model *m, const char *text, bool bos, th_token *out, int cap) {
    size_t n = 0;
    th_status s = th_tokenize(m, text, strlen(text), bos, false, out, (size_t)cap, &n);
    CHECK(s == TH_OK, "tokenize: %s", th_last_error());
    return s ? 0 : (int)n;
}

static th_token byte_tok(unsigned b) { return (th_token)(3 + b); }   /* tiny SPM vocab: <0xNN> */

static th_runtime_stats stats(th_runtime *rt) {
    th_runtime_stats st;
    th_runtime_stats_get(rt, &st);
    return st;
}

/* ---------------------------------------------------------------- admission */

static void test_admission_and_full_queue(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 1, 64, 32, 2, false, false);
    if (!rt) return;
    th_token prompt[8] = { 1, 450, 274, 271, 3290, 373, 278, 1775 };
    int order = 0;
    col *c = calloc(3, sizeof *c);
    for (int i = 0; i < 3; i++) c[i].order = &order;
    th_request_params p[3];
    th_request *r[3] = { 0 };
    for (int i = 0; i < 3; i++) p[i] = req_params(&c[i], 3);
    r[0] = submit(rt, &p[0], prompt, 8);
    r[1] = submit(rt, &p[1], prompt, 8);
    th_request *x = NULL;
    th_status s = th_runtime_submit(rt, &p[2], prompt, 8, &x);
    CHECK(s == TH_ERR_BUSY && x == NULL && strstr(th_last_error(), "busy"), "third: %d %s", s, th_last_error());
    CHECK(stats(rt).queued == 2, "queued %d", stats(rt).queued);
    /* what submit refuses */
    th_request_params bad = p[2];
    bad.n_choices = 2;
    CHECK(th_runtime_submit(rt, &bad, prompt, 8, &x) == TH_ERR_ARG, "n_choices above the slots");
    th_token longp[64] = { 0 };
    CHECK(th_runtime_submit(rt, &p[2], longp, 64, &x) == TH_ERR_CAPACITY, "a prompt filling the slot");
    CHECK(th_runtime_submit(rt, &p[2], prompt, 0, &x) == TH_ERR_ARG, "an empty prompt");
    th_token oov[2] = { 1, 4096 };
    CHECK(th_runtime_submit(rt, &p[2], oov, 2, &x) == TH_ERR_ARG && strstr(th_last_error(), "index 1"), "%s", th_last_error());
    bad = p[2];
    bad.top_logprobs = TH_MAX_TOP_LOGPROBS + 1;
    CHECK(th_runtime_submit(rt, &bad, prompt, 8, &x) == TH_ERR_ARG, "top_logprobs");
    bad = p[2];
    bad.sampling.top_p = 2;
    CHECK(th_runtime_submit(rt, &bad, prompt, 8, &x) == TH_ERR_ARG, "bad sampler params");
    /* one step admits the head; then the third fits in the queue */
    bool work = false;
    th_runtime_step(rt, &work);
    CHECK(work && c[0].n_start == 1 && c[1].n_start == 0, "after one step: %d %d", c[0].n_start, c[1].n_start);
    CHECK(stats(rt).queued == 1 && stats(rt).active_slots == 1, "queued %d active %d", stats(rt).queued, stats(rt).active_slots);
    r[2] = submit(rt, &p[2], prompt, 8);
    for (int i = 0; i < 3; i++) if (r[i]) drive(rt, r[i], 100);
    for (int i = 0; i < 3; i++) {
        CHECK(c[i].start_order == i, "request %d started %d-th", i, c[i].start_order);
        CHECK(r[i] && th_request_status(r[i]) == TH_OK && th_request_finish(r[i], 0) == TH_FINISH_LENGTH && c[i].n_tok[0] == 3,
              "request %d: %d tokens", i, c[i].n_tok[0]);
        CHECK(c[i].n_end == 1, "END events %d", c[i].n_end);
    }
    CHECK(!memcmp(c[0].tok[0], c[2].tok[0], 3 * sizeof(th_token)), "same greedy tokens");
    th_runtime_stats st = stats(rt);
    CHECK(st.queued == 0 && st.active_slots == 0 && st.kv_blocks_used == 0, "idle: %d %d %u", st.queued, st.active_slots, st.kv_blocks_used);
    work = true;
    th_runtime_step(rt, &work);
    CHECK(!work, "an idle step does nothing");
    for (int i = 0; i < 3; i++) th_request_release(r[i]);
    th_runtime_free(rt);
    free(c);
}

/* ---------------------------------------------------------------- chunked prefill */

/* Greedy continuation with plain th_decode: the prompt in one batch, then one token a step. */
static void plain_greedy(th_model *m, const th_token *prompt, int n, int n_gen, th_token *out) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    th_context *ctx = NULL;
    CHECK(th_context_new(m, &cp, &ctx) == TH_OK, "%s", th_last_error());
    if (!ctx) return;
    th_batch b = { .n_tokens = n, .token = prompt };
    CHECK(th_decode(ctx, &b) == TH_OK, "%s", th_last_error());
    for (int g = 0; g < n_gen; g++) {
        out[g] = th_get_argmax(ctx, b.n_tokens - 1);
        b = (th_batch){ .n_tokens = 1, .token = &out[g] };
        if (g + 1 < n_gen) CHECK(th_decode(ctx, &b) == TH_OK, "%s", th_last_error());
    }
    th_context_free(ctx);
}

static void chunked_case(th_model *m, const char *name) {
    th_token prompt[128];
    int n = tokenize(m, "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, "
                        "there lived an old fisherman who told stories to the children every evening.", true, prompt, 128);
    CHECK(n > 30, "%s: prompt of %d tokens", name, n);
    const int G = 12;
    th_token ref[12] = { 0 };
    plain_greedy(m, prompt, n, G, ref);
    for (int nb = 0; nb < 2; nb++) {
        int n_batch = nb ? 7 : 512;
        th_runtime *rt = mk(m, 1, 256, n_batch, 4, false, false);
        if (!rt) return;
        col *c = calloc(1, sizeof *c);
        th_request_params p = req_params(c, G);
        th_request *r = submit(rt, &p, prompt, n);
        int steps = r ? drive(rt, r, 200) : 0;
        CHECK(c->n_tok[0] == G && !memcmp(c->tok[0], ref, G * sizeof(th_token)),
              "%s n_batch %d: runtime tokens differ from plain th_decode (first %d vs %d)", name, n_batch, c->tok[0][0], ref[0]);
        int want_steps = (n + n_batch - 1) / n_batch + G - 1;   /* prompt chunks, then one token a step */
        CHECK(steps == want_steps && stats(rt).steps == (uint64_t)want_steps, "%s n_batch %d: %d steps, want %d", name,
              n_batch, steps, want_steps);
        th_request_stats rs;
        th_request_stats_get(r, &rs);
        CHECK(rs.n_prompt == n && rs.n_prompt_cached == 0 && rs.n_generated == G, "stats %d %d %d", rs.n_prompt,
              rs.n_prompt_cached, rs.n_generated);
        th_request_release(r);
        th_runtime_free(rt);
        free(c);
    }
}

static void test_chunked_prefill(void) {
    if (!g_tiny && !g_smol) SKIP("no model");
    if (g_tiny) chunked_case(g_tiny, "tiny");
    if (g_smol) chunked_case(g_smol, "SmolLM2");
}

/* ---------------------------------------------------------------- cancellation */

static void test_cancel_mid_stream(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 2, 256, 64, 4, false, false);
    if (!rt) return;
    th_token prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = (th_token)(300 + i);
    force f = { .ban_eog = g_tiny };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(3, sizeof *c);
    th_request_params p = req_params(&c[0], 200);
    p.processor = &fp;
    th_request *r = submit(rt, &p, prompt, 20);
    while (r && c[0].n_tok[0] < 5) th_runtime_step(rt, NULL);
    th_runtime_stats st = stats(rt);
    /* 20 prompt tokens + 4 decoded generated ones: 2 blocks of 16 */
    CHECK(st.active_slots == 1 && st.kv_blocks_used == 2, "running: %d slots, %u blocks", st.active_slots, st.kv_blocks_used);
    th_request_cancel(r);
    th_runtime_step(rt, NULL);
    st = stats(rt);
    CHECK(th_request_done(r) && th_request_status(r) == TH_ERR_CANCELLED && c[0].status == TH_ERR_CANCELLED, "cancelled");
    CHECK(c[0].n_tok[0] == 5 && c[0].n_end == 1 && c[0].n_finish == 0, "%d tokens, %d END", c[0].n_tok[0], c[0].n_end);
    CHECK(st.active_slots == 0 && st.kv_blocks_used == 0, "after: %d slots, %u blocks", st.active_slots, st.kv_blocks_used);
    th_request_release(r);
    /* the cancelled() callback: polled every step */
    memset(f.pos, 0, sizeof f.pos);
    p = req_params(&c[1], 200);
    p.processor = &fp;
    p.cancelled = poll_cancel;
    c[1].cancel_after_3 = true;
    r = submit(rt, &p, prompt, 20);
    if (r) drive(rt, r, 50);
    CHECK(th_request_status(r) == TH_ERR_CANCELLED && c[1].n_tok[0] == 3, "polled cancel after %d tokens", c[1].n_tok[0]);
    CHECK(stats(rt).kv_blocks_used == 0, "blocks %u", stats(rt).kv_blocks_used);
    th_request_release(r);
    /* a queued request cancelled before it starts: no START, no slot */
    th_runtime *one = mk(g_tiny, 1, 256, 64, 4, false, false);
    col *d = calloc(2, sizeof *d);
    th_request_params pa = req_params(&d[0], 4), pb = req_params(&d[1], 4);
    th_request *ra = submit(one, &pa, prompt, 20), *rb = submit(one, &pb, prompt, 20);
    th_request_cancel(rb);
    if (ra) drive(one, ra, 50);
    if (rb) drive(one, rb, 5);
    CHECK(th_request_status(ra) == TH_OK && d[0].n_tok[0] == 4, "the running one finishes");
    CHECK(th_request_status(rb) == TH_ERR_CANCELLED && d[1].n_start == 0 && d[1].n_end == 1, "the queued one never starts");
    th_request_release(ra);
    th_request_release(rb);
    th_runtime_free(one);
    /* the freed slot serves the next request */
    p = req_params(&c[2], 3);
    r = submit(rt, &p, prompt, 20);
    if (r) drive(rt, r, 50);
    CHECK(th_request_status(r) == TH_OK && c[2].n_tok[0] == 3, "next request");
    th_request_release(r);
    th_runtime_free(rt);
    free(c);
    free(d);
}

/* ---------------------------------------------------------------- n > 1 */

static void sample_n(th_runtime *rt, int n_choices, uint64_t seed, col *c, th_runtime_stats *after1, th_runtime_stats *after2) {
    th_token prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = (th_token)(500 + 7 * i);
    th_request_params p = req_params(c, 8);
    p.n_choices = n_choices;
    p.sampling = th_sampler_default_params();
    p.sampling.temperature = 1.0f;
    p.sampling.top_k = 0;
    p.sampling.top_p = 1.0f;
    p.sampling.min_p = 0.0f;
    p.sampling.seed = seed;
    th_request *r = submit(rt, &p, prompt, 40);
    if (!r) return;
    th_runtime_step(rt, NULL);
    if (after1) *after1 = stats(rt);
    th_runtime_step(rt, NULL);
    if (after2) *after2 = stats(rt);
    drive(rt, r, 50);
    CHECK(th_request_status(r) == TH_OK, "%s", th_request_message(r));
    th_request_release(r);
}

static void test_n_choices_share_kv(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 4, 128, 64, 4, true, false);
    if (!rt) return;
    col *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *one = calloc(1, sizeof *one);
    th_runtime_stats s1 = { 0 }, s2 = { 0 };
    sample_n(rt, 3, 77, a, &s1, &s2);
    /* the 40-token prompt is 3 blocks of 16, decoded once: after the fork all
     * three choices hold the same 3 blocks; after their first token each has
     * its own copy of the partial tail block, the 2 full ones stay shared */
    CHECK(s1.active_slots == 3 && s1.kv_blocks_used == 3, "after the fork: %d slots, %u blocks (3 shared)", s1.active_slots,
          s1.kv_blocks_used);
    CHECK(s2.kv_blocks_used == 5, "after one token: %u blocks (2 shared + 3 tails)", s2.kv_blocks_used);
    for (int c = 0; c < 3; c++) CHECK(a->n_tok[c] == 8 && a->finish[c] == TH_FINISH_LENGTH, "choice %d: %d tokens", c, a->n_tok[c]);
    CHECK(memcmp(a->tok[0], a->tok[1], 8 * sizeof(th_token)) && memcmp(a->tok[1], a->tok[2], 8 * sizeof(th_token)) &&
          memcmp(a->tok[0], a->tok[2], 8 * sizeof(th_token)), "choices with seeds 77, 78, 79 differ");
    sample_n(rt, 3, 77, b, NULL, NULL);
    for (int c = 0; c < 3; c++) CHECK(!memcmp(a->tok[c], b->tok[c], 8 * sizeof(th_token)), "same seed, same tokens (choice %d)", c);
    /* choice 1 samples with seed 78: alone with that seed, the same tokens
     * (its logits came from the shared blocks) */
    sample_n(rt, 1, 78, one, NULL, NULL);
    CHECK(!memcmp(a->tok[1], one->tok[0], 8 * sizeof(th_token)), "choice 1 of seed 77 == a single choice of seed 78");
    CHECK(stats(rt).kv_blocks_used == 0, "all blocks freed");
    th_runtime_free(rt);
    free(a); free(b); free(one);
}

/* ---------------------------------------------------------------- stop strings */

static void stop_case(th_runtime *rt, const th_token *seq, int n_seq, const char *const *stops, int n_stops,
                      const char *want, th_finish want_finish, int want_entries, bool exact_cover) {
    force f = { .seq = seq, .n = n_seq };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(1, sizeof *c);
    th_request_params p = req_params(c, n_seq);
    p.processor = &fp;
    p.stop = stops;
    p.n_stop = n_stops;
    p.logprobs = true;
    p.top_logprobs = 2;
    th_token prompt[2] = { 1, 450 };
    th_request *r = submit(rt, &p, prompt, 2);
    if (!r) { free(c); return; }
    drive(rt, r, 100);
    size_t len = 0;
    const char *text = th_request_text(r, 0, &len);
    CHECK(text && !strcmp(text, want), "stop '%s': text '%s', want '%s'", stops[0], text ? text : "", want);
    CHECK(!strcmp(c->text[0], want), "released pieces '%s' != '%s'", c->text[0], want);
    CHECK(th_request_finish(r, 0) == want_finish && c->finish[0] == want_finish, "finish %d", th_request_finish(r, 0));
    CHECK(c->n_ent[0] == want_entries, "stop '%s': %d logprob entries, want %d", stops[0], c->n_ent[0], want_entries);
    char joined[512] = "";
    for (int i = 0; i < c->n_ent[0]; i++) {
        CHECK(c->ent[0][i].text_offset < len, "entry %d offset %u outside the %zu bytes", i, c->ent[0][i].text_offset, len);
        /* forced: one finite logit, so log-probability 0 and one alternative (no -inf ones) */
        CHECK(c->ent[0][i].n_top == 1 && c->ent[0][i].logprob == 0.0f && c->ent[0][i].top[0].token == c->ent[0][i].token,
              "forced: logprob %g, %d tops", c->ent[0][i].logprob, c->ent[0][i].n_top);
        char piece[64];
        int32_t k = th_token_to_piece(g_tiny, c->ent[0][i].token, piece, sizeof piece, false);
        if (k > 0 && strlen(joined) + (size_t)k < sizeof joined) strncat(joined, piece, (size_t)k);
    }
    if (exact_cover) CHECK(!strcmp(joined, want), "entries spell '%s', text '%s'", joined, want);
    th_request_release(r);
    free(c);
}

static void test_stop_strings(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 1, 128, 64, 4, false, false);
    if (!rt) return;
    /* SPM's dummy prefix makes the text start with a space */
    const char *full = " The cat sat on the mat. The end.";
    th_token seq[64];
    int n = tokenize(g_tiny, full + 1, false, seq, 64);   /* " The"," c","at"," sat"," on"," the"," mat","." ... */
    CHECK(n == 11, "%d tokens", n);
    /* a stop string across three tokens, starting at a token boundary: the
     * tokens that carried it lose their entries too */
    const char *s1[] = { " on the m" };
    stop_case(rt, seq, n, s1, 1, " The cat sat", TH_FINISH_STOP, 4, true);
    /* starting inside a token: that token's entry stays (its offset is inside the text) */
    const char *s2[] = { "t on t" };
    stop_case(rt, seq, n, s2, 1, " The cat sa", TH_FINISH_STOP, 4, false);
    /* inside one token's piece */
    const char *s3[] = { "at" };
    stop_case(rt, seq, n, s3, 1, " The c", TH_FINISH_STOP, 2, true);
    /* the earliest of two */
    const char *s4[] = { "end", " the m" };
    stop_case(rt, seq, n, s4, 2, " The cat sat on", TH_FINISH_STOP, 5, true);
    /* a prefix that never completes is held back, then released whole */
    const char *s5[] = { "mat!" };
    stop_case(rt, seq, n, s5, 1, full, TH_FINISH_LENGTH, n, true);
    /* the holdback itself: the token " mat" releases " " only (mat could begin "mat!") */
    force f = { .seq = seq, .n = n };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(1, sizeof *c);
    th_request_params p = req_params(c, n);
    p.processor = &fp;
    p.stop = s5;
    p.n_stop = 1;
    th_token prompt[2] = { 1, 450 };
    th_request *r = submit(rt, &p, prompt, 2);
    if (r) drive(rt, r, 100);
    CHECK(n > 7 && !strcmp(c->delta[0][6], " ") && !strcmp(c->delta[0][7], "mat."), "deltas '%s' '%s'", c->delta[0][6], c->delta[0][7]);
    th_request_release(r);
    free(c);
    th_runtime_free(rt);
}

/* ---------------------------------------------------------------- UTF-8 */

static void test_utf8_holdback(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 1, 128, 64, 4, false, false);
    if (!rt) return;
    th_token prompt[2] = { 1, 450 };
    /* "é" = C3 A9 and "😀" = F0 9F 98 80 as byte-fallback tokens, one byte each */
    th_token seq[6] = { byte_tok(0xC3), byte_tok(0xA9), byte_tok(0xF0), byte_tok(0x9F), byte_tok(0x98), byte_tok(0x80) };
    force f = { .seq = seq, .n = 6 };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(1, sizeof *c);
    th_request_params p = req_params(c, 6);
    p.processor = &fp;
    p.logprobs = true;
    th_request *r = submit(rt, &p, prompt, 2);
    if (r) drive(rt, r, 50);
    static const char *want[6] = { "", "\xC3\xA9", "", "", "", "\xF0\x9F\x98\x80" };
    for (int i = 0; i < 6 && c->n_tok[0] == 6; i++) CHECK(!strcmp(c->delta[0][i], want[i]), "token %d released '%s'", i, c->delta[0][i]);
    CHECK(c->n_tok[0] == 6 && c->bad_utf8 == 0 && !strcmp(c->text[0], "\xC3\xA9\xF0\x9F\x98\x80"), "text '%s'", c->text[0]);
    CHECK(c->n_ent[0] == 6, "%d entries", c->n_ent[0]);
    for (int i = 0; i < c->n_ent[0]; i++) CHECK(c->ent[0][i].text_offset == (uint32_t)i, "entry %d at byte %u", i, c->ent[0][i].text_offset);
    th_request_release(r);
    /* a character still open at max_tokens becomes U+FFFD, never half a character */
    memset(c, 0, sizeof *c);
    memset(f.pos, 0, sizeof f.pos);
    f.seq = seq + 2;
    f.n = 2;
    p = req_params(c, 2);
    p.processor = &fp;
    r = submit(rt, &p, prompt, 2);
    if (r) drive(rt, r, 50);
    CHECK(c->n_tok[0] == 2 && !c->delta[0][0][0] && !c->delta[0][1][0] && !strcmp(c->text[0], "\xEF\xBF\xBD") && c->bad_utf8 == 0,
          "open character at the end: '%s'", c->text[0]);
    th_request_release(r);
    /* a stop string that is a multi-byte character split across byte tokens */
    memset(c, 0, sizeof *c);
    memset(f.pos, 0, sizeof f.pos);
    f.seq = seq;
    f.n = 6;
    const char *stop[] = { "\xF0\x9F\x98\x80" };
    p = req_params(c, 6);
    p.processor = &fp;
    p.stop = stop;
    p.n_stop = 1;
    r = submit(rt, &p, prompt, 2);
    if (r) drive(rt, r, 50);
    CHECK(th_request_finish(r, 0) == TH_FINISH_STOP && !strcmp(c->text[0], "\xC3\xA9"), "'%s' finish %d", c->text[0],
          th_request_finish(r, 0));
    th_request_release(r);
    /* a stop string that is not valid UTF-8 (a lone continuation byte) matches
     * inside "é": the text ends before the whole character, not inside it */
    memset(c, 0, sizeof *c);
    memset(f.pos, 0, sizeof f.pos);
    const char *bad_stop[] = { "\xA9" };
    th_token ab[3] = { 450, byte_tok(0xC3), byte_tok(0xA9) };   /* " The", then "é" */
    f.seq = ab;
    f.n = 3;
    p = req_params(c, 3);
    p.processor = &fp;
    p.stop = bad_stop;
    p.n_stop = 1;
    r = submit(rt, &p, prompt, 2);
    if (r) drive(rt, r, 50);
    CHECK(th_request_finish(r, 0) == TH_FINISH_STOP && !strcmp(c->text[0], " The") && c->bad_utf8 == 0, "'%s'", c->text[0]);
    th_request_release(r);
    free(c);
    th_runtime_free(rt);
}

/* ---------------------------------------------------------------- limits */

static void test_max_tokens(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 1, 128, 64, 4, false, false);
    if (!rt) return;
    th_token prompt[3] = { 1, 450, 274 };
    force f = { .ban_eog = g_tiny };
    th_logits_processor fp = forcing(&f);
    int limits[3] = { 5, 1, 0 };
    for (int k = 0; k < 3; k++) {
        col *c = calloc(1, sizeof *c);
        th_request_params p = req_params(c, limits[k]);
        p.processor = &fp;
        th_request *r = submit(rt, &p, prompt, 3);
        if (r) drive(rt, r, 50);
        th_request_stats st;
        th_request_stats_get(r, &st);
        CHECK(c->n_tok[0] == limits[k] && st.n_generated == limits[k] && th_request_finish(r, 0) == TH_FINISH_LENGTH &&
              c->finish[0] == TH_FINISH_LENGTH, "max_tokens %d: %d tokens, finish %d", limits[k], c->n_tok[0], c->finish[0]);
        if (limits[k] == 0) CHECK(c->n[0] == 0, "no text");
        th_request_release(r);
        free(c);
    }
    CHECK(stats(rt).kv_blocks_used == 0, "freed");
    th_runtime_free(rt);
}

static void test_context_limit(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 1, 24, 64, 4, false, false);
    if (!rt) return;
    th_token prompt[10];
    for (int i = 0; i < 10; i++) prompt[i] = (th_token)(700 + i);
    force f = { .ban_eog = g_tiny };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(1, sizeof *c);
    th_request_params p = req_params(c, -1);
    p.processor = &fp;
    th_request *r = submit(rt, &p, prompt, 10);
    if (r) drive(rt, r, 100);
    /* the sequence holds 24 tokens: the 14th sampled token would need a 25th place */
    CHECK(th_request_status(r) == TH_OK && th_request_finish(r, 0) == TH_FINISH_CONTEXT && c->n_tok[0] == 24 - 10,
          "finish %d after %d tokens", th_request_finish(r, 0), c->n_tok[0]);
    CHECK(stats(rt).kv_blocks_used == 0, "freed");
    th_request_release(r);
    th_token big[24] = { 0 };
    th_request *x = NULL;
    CHECK(th_runtime_submit(rt, &p, big, 24, &x) == TH_ERR_CAPACITY && strstr(th_last_error(), "24 tokens"), "%s", th_last_error());
    CHECK(th_runtime_submit(rt, &p, big, 23, &x) == TH_OK, "23 of 24 fit");
    th_request_release(x);
    th_runtime_free(rt);
    free(c);
}

/* ---------------------------------------------------------------- prefix reuse */

static void test_keep_prefix(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 1, 128, 64, 4, false, true);
    if (!rt) return;
    th_token p1[20], p2[40];
    for (int i = 0; i < 20; i++) p1[i] = (th_token)(900 + i);
    force f = { .ban_eog = g_tiny };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(1, sizeof *c);
    th_request_params p = req_params(c, 6);
    p.processor = &fp;
    th_request *r = submit(rt, &p, p1, 20);
    /* 1 prefill step, 5 more steps for tokens 2..6, then one for the last token's KV */
    int steps = r ? drive(rt, r, 50) : 0;
    CHECK(c->n_tok[0] == 6 && c->n_finish == 1 && steps == 7, "%d tokens in %d steps", c->n_tok[0], steps);
    CHECK(stats(rt).kv_blocks_used == 2, "the slot keeps 26 tokens: %u blocks", stats(rt).kv_blocks_used);
    memcpy(p2, p1, sizeof p1);
    memcpy(p2 + 20, c->tok[0], 6 * sizeof(th_token));
    for (int i = 26; i < 40; i++) p2[i] = (th_token)(1200 + i);
    th_request_release(r);
    /* 0: the cache holds 26 of its 40; 1: all 40 (the last one is decoded again
     * for its logits); 2: it differs from the cache at token 28 */
    int n2s[3] = { 40, 40, 30 }, want_cached[3] = { 26, 39, 28 };
    for (int k = 0; k < 3; k++) {
        if (k == 2) p2[28] = 5;
        memset(c, 0, sizeof *c);
        memset(f.pos, 0, sizeof f.pos);
        p.max_tokens = k == 1 ? 0 : 2;
        r = submit(rt, &p, p2, n2s[k]);
        if (r) drive(rt, r, 50);
        th_request_stats st;
        th_request_stats_get(r, &st);
        CHECK(st.n_prompt_cached == want_cached[k], "request %d: %d cached, want %d", k, st.n_prompt_cached, want_cached[k]);
        th_request_release(r);
    }
    th_runtime_free(rt);
    free(c);
}

/* ---------------------------------------------------------------- the runtime's thread */

typedef struct client_arg { th_runtime *rt; th_token prompt[8]; th_token out[3][6]; int ok; } client_arg;

static void *client(void *arg) {
    client_arg *a = arg;
    for (int k = 0; k < 3; k++) {
        col *c = calloc(1, sizeof *c);
        th_request_params p = req_params(c, 6);
        th_logits_processor ban = { .apply = ban_eog_apply, .user = g_tiny };
        p.processor = &ban;
        th_request *r = NULL;
        if (th_runtime_submit(a->rt, &p, a->prompt, 8, &r) == TH_OK) {
            th_request_wait(r);
            if (th_request_status(r) == TH_OK && c->n_tok[0] == 6) a->ok++;
            memcpy(a->out[k], c->tok[0], sizeof a->out[k]);
            th_request_release(r);
        }
        free(c);
    }
    return NULL;
}

static void test_threaded(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 3, 64, 32, 16, true, false);
    if (!rt) return;
    CHECK(th_runtime_start(rt) == TH_OK, "%s", th_last_error());
    CHECK(th_runtime_step(rt, NULL) == TH_ERR_ARG, "no stepping while the thread runs");
    client_arg a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].rt = rt;
        for (int k = 0; k < 8; k++) a[i].prompt[k] = (th_token)(1 + (k == 0 ? 0 : 100 * (i % 2) + 10 * k));
        pthread_create(&th[i], NULL, client, &a[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK(a[i].ok == 3, "client %d: %d of 3", i, a[i].ok);
    /* greedy, batch-invariant: the same prompt gives the same tokens whoever ran with it */
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++) CHECK(!memcmp(a[i].out[k], a[i % 2].out[0], sizeof a[i].out[k]), "client %d request %d", i, k);
    /* stop: a running and a queued request end cancelled; submits are refused */
    th_runtime_free(rt);
    rt = mk(g_tiny, 1, 64, 32, 4, false, false);
    force f = { .ban_eog = g_tiny };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(2, sizeof *c);
    th_request_params p0 = req_params(&c[0], 40), p1 = req_params(&c[1], 40);
    p0.processor = &fp;
    th_request *r0 = submit(rt, &p0, a[0].prompt, 8), *r1 = submit(rt, &p1, a[0].prompt, 8);
    th_runtime_start(rt);
    while (c[0].n_tok[0] < 2) { struct timespec ts = { 0, 1000000 }; nanosleep(&ts, NULL); }
    th_runtime_stop(rt);
    CHECK(th_request_done(r0) && th_request_status(r0) == TH_ERR_CANCELLED && !strcmp(th_request_message(r0), "the runtime stopped"),
          "running: %d '%s'", th_request_status(r0), th_request_message(r0));
    CHECK(th_request_done(r1) && th_request_status(r1) == TH_ERR_CANCELLED && c[1].n_start == 0, "queued");
    th_request *x = NULL;
    CHECK(th_runtime_submit(rt, &p1, a[0].prompt, 8, &x) == TH_ERR_BUSY, "submit after stop");
    th_request_release(r0);
    th_request_release(r1);
    th_runtime_free(rt);
    free(c);
}

/* ---------------------------------------------------------------- contexts, seams */

static void test_argmax_only_context(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime_params rp = th_runtime_default_params();
    rp.context.logits_argmax_only = true;
    rp.context.n_threads = 2;
    rp.slot_ctx = 64;
    th_runtime *rt = NULL;
    CHECK(th_runtime_new(g_tiny, &rp, &rt) == TH_OK, "%s", th_last_error());
    th_runtime *full = mk(g_tiny, 1, 64, 512, 4, false, false);
    if (!rt || !full) return;
    th_token prompt[4] = { 1, 450, 274, 271 };
    col *c = calloc(2, sizeof *c);
    th_request_params p = req_params(&c[0], 8);
    th_request *x = NULL;
    p.sampling.temperature = 0.8f;
    CHECK(th_runtime_submit(rt, &p, prompt, 4, &x) == TH_ERR_ARG && strstr(th_last_error(), "logits_argmax_only"), "sampling");
    p = req_params(&c[0], 8);
    p.logprobs = true;
    CHECK(th_runtime_submit(rt, &p, prompt, 4, &x) == TH_ERR_ARG, "logprobs");
    p = req_params(&c[0], 8);
    th_request_params q = req_params(&c[1], 8);
    th_request *a = submit(rt, &p, prompt, 4), *b = submit(full, &q, prompt, 4);
    if (a) drive(rt, a, 50);
    if (b) drive(full, b, 50);
    CHECK(c[0].n_tok[0] == 8 && !memcmp(c[0].tok[0], c[1].tok[0], 8 * sizeof(th_token)), "greedy: the same tokens");
    th_request_release(a);
    th_request_release(b);
    th_runtime_free(rt);
    th_runtime_free(full);
    free(c);
}

static th_status failing_apply(void *user, int32_t choice, float *logits, int32_t n_vocab) {
    return th_set_error(TH_ERR_FORMAT, "constraint: no token allowed at step %d", *(int *)user);
}

static void test_processor_seam(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_runtime *rt = mk(g_tiny, 2, 64, 32, 4, false, false);
    if (!rt) return;
    th_token prompt[4] = { 1, 450, 274, 271 };
    /* forced tokens reach every choice; each choice's state is its own */
    th_token seq[3] = { 450, 274, 271 };
    force f = { .seq = seq, .n = 3 };
    th_logits_processor fp = forcing(&f);
    col *c = calloc(1, sizeof *c);
    th_request_params p = req_params(c, 3);
    p.processor = &fp;
    p.n_choices = 2;
    p.sampling.temperature = 1.0f;
    th_request *r = submit(rt, &p, prompt, 4);
    if (r) drive(rt, r, 20);
    for (int ch = 0; ch < 2; ch++) CHECK(!memcmp(c->tok[ch], seq, sizeof seq) && f.pos[ch] == 3, "choice %d", ch);
    th_request_release(r);
    /* a failing processor fails its request with its status and message */
    int step = 0;
    th_logits_processor bad = { .apply = failing_apply, .user = &step };
    memset(c, 0, sizeof *c);
    p = req_params(c, 3);
    p.processor = &bad;
    r = submit(rt, &p, prompt, 4);
    if (r) drive(rt, r, 20);
    CHECK(th_request_status(r) == TH_ERR_FORMAT && strstr(th_request_message(r), "no token allowed"), "%d '%s'",
          th_request_status(r), th_request_message(r));
    CHECK(stats(rt).kv_blocks_used == 0 && stats(rt).active_slots == 0, "freed");
    th_request_release(r);
    th_runtime_free(rt);
    free(c);
}

static void test_chatml(void) {
    char *out = NULL;
    th_chat_opts o = { .add_generation_prompt = true };
    th_status s = th_chat_render_chatml("{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
                                        " {\"role\": \"user\", \"content\": \"Hi\\nthere\"}, {\"role\": \"assistant\", \"content\": null}]}",
                                        &o, &out);
    CHECK(s == TH_OK && out && !strcmp(out, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n"
                                            "<|im_start|>assistant\n<|im_end|>\n<|im_start|>assistant\n"), "'%s'", out ? out : "");
    free(out);
    o.add_generation_prompt = false;
    CHECK(th_chat_render_chatml("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", &o, &out) == TH_OK &&
          !strcmp(out, "<|im_start|>user\nx<|im_end|>\n"), "without the generation prompt");
    free(out);
    out = NULL;
    CHECK(th_chat_render_chatml("{\"messages\": [{\"content\": \"x\"}]}", &o, &out) == TH_ERR_FORMAT && !out &&
          strstr(th_last_error(), "messages[0]"), "%s", th_last_error());
    CHECK(th_chat_render_chatml("[1,", &o, &out) == TH_ERR_FORMAT, "bad JSON");
    CHECK(th_chat_render_chatml("{\"messages\": 3}", &o, &out) == TH_ERR_FORMAT, "no array");
}

int main(void) {
    th_model_params mp = th_model_default_params();
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), &mp, &g_tiny)) g_tiny = NULL;
    if (th_model_load(default_model_path(), &mp, &g_smol)) g_smol = NULL;
    RUN(test_admission_and_full_queue);
    RUN(test_chunked_prefill);
    RUN(test_cancel_mid_stream);
    RUN(test_n_choices_share_kv);
    RUN(test_stop_strings);
    RUN(test_utf8_holdback);
    RUN(test_max_tokens);
    RUN(test_context_limit);
    RUN(test_keep_prefix);
    RUN(test_threaded);
    RUN(test_argmax_only_context);
    RUN(test_processor_seam);
    RUN(test_chatml);
    th_model_free(g_tiny);
    th_model_free(g_smol);
    return CHECK_DONE();
}
