/* test_argmax.c — greedy decoding without the logits: th_get_argmax and its rule
 * (NaN counts as -inf, +inf as FLT_MAX, the lowest id wins ties, 0 when nothing
 * is above -inf), th_sampler_is_greedy, and logits_argmax_only on the CPU
 * (th_get_logits refuses, the argmax is unchanged). Expectations come from
 * hand-worked rows, a naive scan written here, and the sampler (separate code)
 * as a second opinion. The GPU side (the device kernel, the flag on a GPU
 * context) is in test_cuda.c. */
#include "check.h"
#include "logits.h"
#include "theseus.h"
#include "sample/greedy.h"
#include <float.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

/* The documented rule, written plainly: compare each value with the best element so far. */
static float key(float x) { return x != x ? -INFINITY : x == INFINITY ? FLT_MAX : x; }
static int naive_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (key(x[i]) > key(x[best])) best = i;
    return best;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng % n); }

static th_sampler *sampler(float temp, int32_t top_k, int32_t n_vocab) {
    th_sampler_params p = th_sampler_default_params();
    p.temperature = temp;
    p.top_k = top_k;
    th_sampler *s = NULL;
    CHECK(th_sampler_new(&p, n_vocab, &s) == TH_OK, "%s", th_last_error());
    return s;
}

static th_model *load(const char *path) {
    th_model *m = NULL;
    if (th_model_load(path, NULL, &m)) fprintf(stderr, "  %s: %s\n", path, th_last_error());
    return m;
}

static th_context *context(th_model *m, bool argmax_only, uint32_t n_seq) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 128; cp.n_batch = 64; cp.n_seq_max = n_seq; cp.n_threads = 2; cp.kv_type = TH_KV_F32;
    cp.logits_argmax_only = argmax_only;
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) == TH_OK, "%s", th_last_error());
    return c;
}

static const int32_t prompt[17] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567, 975, 278, 2501, 263, 931, 47 };

/* ------------------------------------------------------------------ the rule */

static void test_greedy_rule(void) {
    const float nan = NAN, inf = INFINITY;
    struct { float x[6]; int n, want; const char *why; } cases[] = {
        { { 1, 3, 3, 2 }, 4, 1, "a tie goes to the lower id" },
        { { nan, 1, nan, 1 }, 4, 1, "NaN never wins; then the first 1" },
        { { -inf, -inf }, 2, 0, "all -inf: 0" },
        { { nan, nan, nan }, 3, 0, "all NaN: 0" },
        { { nan, -inf, -5 }, 3, 2, "-5 is the only value above -inf" },
        { { FLT_MAX, inf }, 2, 0, "+inf counts as FLT_MAX: a tie, the lower id" },
        { { 1, inf, inf }, 3, 1, "two +inf: the first" },
        { { -inf, -FLT_MAX }, 2, 1, "-FLT_MAX is above -inf" },
        { { 0.0f, -0.0f }, 2, 0, "0 and -0 are equal" },
        { { -0.0f, 0.0f }, 2, 0, "-0 and 0 are equal" },
        { { 7 }, 1, 0, "one value" },
        { { -3, -2, -1, -1, -2, -1 }, 6, 2, "negative values, three-way tie" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        CHECK(th_greedy_argmax(cases[k].x, cases[k].n) == cases[k].want, "case %zu (%s): got %d", k, cases[k].why,
              th_greedy_argmax(cases[k].x, cases[k].n));
    static float row[5000];
    row[4999] = 1e-30f;
    CHECK(th_greedy_argmax(row, 5000) == 4999, "the last value is the only positive one");
    row[4999] = 0;
    CHECK(th_greedy_argmax(row, 5000) == 0, "5000 zeros: 0");
}

/* Random rows full of ties and non-finite values: the rule, the naive scan and
 * the greedy samplers (temperature 0; top-k 1 at temperature 1.3) agree. */
static void test_greedy_rule_vs_sampler(void) {
    enum { V = 97 };
    const float special[5] = { NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX };
    th_sampler *t0 = sampler(0.0f, 40, V), *k1 = sampler(1.3f, 1, V);
    if (!t0 || !k1) { th_sampler_free(t0); th_sampler_free(k1); return; }
    float row[V];
    int bad = 0;
    for (int trial = 0; trial < 2000; trial++) {
        for (int i = 0; i < V; i++) row[i] = (float)rnd(5) - 2.0f;
        for (int j = (int)rnd(6); j > 0; j--) row[rnd(V)] = special[rnd(5)];
        if (trial % 16 == 15)   /* nothing above -inf: the pick is 0 */
            for (int i = 0; i < V; i++) row[i] = rnd(2) ? NAN : -INFINITY;
        int want = naive_argmax(row, V);
        int got = th_greedy_argmax(row, V), a = th_sampler_sample(t0, row), b = th_sampler_sample(k1, row);
        if ((got != want || a != want || b != want) && bad++ < 5)
            CHECK(0, "trial %d: naive %d, th_greedy_argmax %d, temperature 0 %d, top-k 1 %d", trial, want, got, a, b);
    }
    CHECK(bad == 0, "%d rows disagree", bad);
    th_sampler_free(t0);
    th_sampler_free(k1);
}

/* ------------------------------------------------------------------ th_sampler_is_greedy */

typedef struct { float temp; int32_t top_k; float top_p, min_p, repeat, presence, frequency; bool want; const char *why; } greedy_case;

static void test_sampler_is_greedy(void) {
    const greedy_case cases[] = {
        { 0.0f, 40, 0.95f, 0.05f, 1, 0, 0, true, "temperature 0 (truncation does not matter)" },
        { -1.0f, 0, 1, 0, 1, 0, 0, true, "negative temperature" },
        { 0.8f, 1, 0.95f, 0.05f, 1, 0, 0, true, "top-k 1 at temperature 0.8" },
        { 2.0f, 1, 0.1f, 1.0f, 1, 0, 0, true, "top-k 1 with top-p and min-p" },
        { 0.8f, 40, 0.95f, 0.05f, 1, 0, 0, false, "the usual sampling defaults" },
        { 1.0f, 2, 1, 0, 1, 0, 0, false, "top-k 2" },
        { 1.0f, 0, 1, 1.0f, 1, 0, 0, false, "min-p 1 (ties stay random)" },
        { 1e-30f, 0, 1, 0, 1, 0, 0, false, "a tiny positive temperature (ties stay random)" },
        { 0.0f, 40, 1, 0, 1.1f, 0, 0, false, "repeat penalty" },
        { 0.0f, 40, 1, 0, 1, 0.5f, 0, false, "presence penalty" },
        { -1.0f, 1, 1, 0, 1, 0, -0.2f, false, "frequency penalty" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const greedy_case *g = &cases[k];
        th_sampler_params p = { .seed = 5, .temperature = g->temp, .top_k = g->top_k, .top_p = g->top_p,
                                .min_p = g->min_p, .repeat_penalty = g->repeat, .presence_penalty = g->presence,
                                .frequency_penalty = g->frequency, .penalty_last_n = 64 };
        th_sampler *s = NULL;
        CHECK(th_sampler_new(&p, 50, &s) == TH_OK, "case %zu: %s", k, th_last_error());
        if (!s) continue;
        CHECK(th_sampler_is_greedy(s) == g->want, "case %zu (%s): got %d", k, g->why, th_sampler_is_greedy(s));
        th_sampler_free(s);
    }
    CHECK(!th_sampler_is_greedy(NULL));
    /* logit bias: any non-zero entry makes it non-greedy; zero entries do not */
    th_sampler *s = sampler(0.0f, 0, 50);
    if (!s) return;
    CHECK(th_sampler_set_logit_bias(s, 7, 0.0f) == TH_OK && th_sampler_is_greedy(s), "a zero bias changes nothing");
    CHECK(th_sampler_set_logit_bias(s, 7, 2.5f) == TH_OK && !th_sampler_is_greedy(s), "bias +2.5");
    float row[50] = { 0 };
    row[3] = 1.0f;
    CHECK(th_sampler_sample(s, row) == 7, "the bias moves the pick away from the argmax (3)");
    CHECK(th_sampler_set_logit_bias(s, 7, 0.0f) == TH_OK && th_sampler_is_greedy(s), "bias set back to 0");
    CHECK(th_sampler_set_logit_bias(s, 9, -INFINITY) == TH_OK && !th_sampler_is_greedy(s), "a banned token");
    th_sampler_free(s);
    /* a greedy sampler with history still returns the argmax (no penalties to apply) */
    s = sampler(0.0f, 0, 50);
    if (!s) return;
    for (int i = 0; i < 20; i++) th_sampler_accept(s, 3);
    CHECK(th_sampler_is_greedy(s) && th_sampler_sample(s, row) == 3);
    th_sampler_free(s);
}

/* ------------------------------------------------------------------ contexts */

/* Every batch index: its argmax equals the naive scan of its logits, or -1 with an
 * error when it asked for none. Returns false on the first mismatch. */
static bool check_batch_argmax(th_context *c, int n, const int8_t *want, int nv) {
    for (int i = 0; i < n; i++) {
        th_token a = th_get_argmax(c, i);
        if (!want[i]) {
            CHECK(a == -1 && strstr(th_last_error(), "no logits"), "index %d has no logits: got %d (%s)", i, a, th_last_error());
            continue;
        }
        const float *lg = th_get_logits(c, i);
        CHECK(lg != NULL, "%s", th_last_error());
        if (!lg) return false;
        CHECK(a == naive_argmax(lg, nv), "index %d: th_get_argmax %d, scan %d", i, a, naive_argmax(lg, nv));
        if (a != naive_argmax(lg, nv)) return false;
    }
    return true;
}

/* A ragged batch of three sequences (some rows without logits), then a greedy
 * decode: th_get_argmax matches a scan of th_get_logits everywhere. */
static void test_get_argmax_scan(void) {
    th_model *m = load(fixture("tiny/tiny-Q8_0.gguf"));
    if (!m) SKIP("tiny fixture missing");
    int nv = th_model_n_vocab(m);
    th_context *c = context(m, false, 3);
    if (!c) { th_model_free(m); return; }
    int32_t tok[24], pos[24], seq[24], n = 0, at[3] = { 0 };
    int8_t want[24];
    for (int i = 0; i < 24; i++) {
        int q = i % 3;
        tok[n] = prompt[(i * 5) % 17]; seq[n] = q; pos[n] = at[q]++; want[n] = (int8_t)(i % 4 != 1 || i >= 21); n++;
    }
    th_batch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .logits = want };
    CHECK(th_decode(c, &b) == TH_OK, "%s", th_last_error());
    check_batch_argmax(c, n, want, nv);
    CHECK(th_get_argmax(c, n) == -1 && th_get_argmax(c, -1) == -1, "indices outside the batch");
    CHECK(th_get_argmax(NULL, 0) == -1);
    int32_t t = th_get_argmax(c, n - 1);
    int8_t one = 1;
    for (int step = 0; step < 12 && t >= 0; step++) {
        int32_t s0 = 0;
        th_batch d = { .n_tokens = 1, .token = &t, .seq_id = &s0, .logits = &one };
        CHECK(th_decode(c, &d) == TH_OK, "%s", th_last_error());
        if (!check_batch_argmax(c, 1, &one, nv)) break;
        t = th_get_argmax(c, 0);
    }
    th_context_free(c);
    th_model_free(m);
}

/* logits_argmax_only on the CPU: th_get_logits refuses with the documented error,
 * th_get_argmax gives what a context with logits gives, over a ragged batch and a
 * 16-step greedy decode. */
static void test_argmax_only_cpu(void) {
    th_model *m = load(fixture("tiny/tiny-Q8_0.gguf"));
    if (!m) SKIP("tiny fixture missing");
    th_context *full = context(m, false, 2), *only = context(m, true, 2);
    if (!full || !only) { th_context_free(full); th_context_free(only); th_model_free(m); return; }
    int32_t tok[17], seq[17];
    int8_t want[17];
    for (int i = 0; i < 17; i++) { tok[i] = prompt[i]; seq[i] = i < 9 ? 0 : 1; want[i] = (int8_t)(i == 8 || i >= 14); }
    th_batch b = { .n_tokens = 17, .token = tok, .seq_id = seq, .logits = want };
    CHECK(th_decode(full, &b) == TH_OK && th_decode(only, &b) == TH_OK, "%s", th_last_error());
    CHECK(th_get_logits(only, 8) == NULL && strstr(th_last_error(), "logits not kept: context created with logits_argmax_only"),
          "th_get_logits on a logits_argmax_only context: %s", th_last_error());
    for (int i = 0; i < 17; i++)
        CHECK(th_get_argmax(only, i) == th_get_argmax(full, i), "index %d: %d vs %d", i, th_get_argmax(only, i),
              th_get_argmax(full, i));
    int32_t t = th_get_argmax(full, 16), s1 = 1;
    for (int step = 0; step < 16 && t >= 0; step++) {
        th_batch d = { .n_tokens = 1, .token = &t, .seq_id = &s1 };
        CHECK(th_decode(full, &d) == TH_OK && th_decode(only, &d) == TH_OK, "%s", th_last_error());
        int32_t a = th_get_argmax(full, 0), o = th_get_argmax(only, 0);
        CHECK(a == o && a >= 0, "step %d: %d vs %d", step, a, o);
        if (a != o) break;
        t = a;
    }
    CHECK(th_get_logits(only, 0) == NULL);
    th_context_free(full);
    th_context_free(only);
    th_model_free(m);
}

/* A model whose output rows come in identical pairs, so every position's logits
 * tie in pairs: the argmax must be the even id of the top pair. */
static void test_argmax_ties(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/theseus-pairs-%d.gguf", (int)getpid());
    if (!write_pair_tied_model(fixture("tiny/tiny-F32.gguf"), path)) SKIP("tiny F32 fixture missing");
    th_model *m = load(path);
    CHECK(m != NULL);
    th_context *c = m ? context(m, false, 1) : NULL, *only = m ? context(m, true, 1) : NULL;
    int nv = m ? th_model_n_vocab(m) : 0;
    int8_t want[17];
    memset(want, 1, sizeof want);
    th_batch b = { .n_tokens = 17, .token = prompt, .logits = want };
    if (c && only && th_decode(c, &b) == TH_OK && th_decode(only, &b) == TH_OK) {
        for (int i = 0; i < 17; i++) {
            const float *lg = th_get_logits(c, i);
            th_token a = th_get_argmax(c, i);
            CHECK(a >= 0 && a % 2 == 0 && a + 1 < nv, "position %d: argmax %d is not the even id of a pair", i, a);
            if (a < 0 || a + 1 >= nv) continue;
            CHECK(lg[a] == lg[a + 1] && lg[a] == lg[naive_argmax(lg, nv)], "position %d: %g %g", i, lg[a], lg[a + 1]);
            CHECK(th_get_argmax(only, i) == a, "position %d: logits_argmax_only gives %d, not %d", i, th_get_argmax(only, i), a);
        }
    } else CHECK(0, "decode: %s", th_last_error());
    th_context_free(c);
    th_context_free(only);
    th_model_free(m);
    unlink(path);
}

int main(void) {
    RUN(test_greedy_rule);
    RUN(test_greedy_rule_vs_sampler);
    RUN(test_sampler_is_greedy);
    RUN(test_get_argmax_scan);
    RUN(test_argmax_only_cpu);
    RUN(test_argmax_ties);
    return CHECK_DONE();
}
