/* test_harden.c — issue 27 (nothing a client or a file can do takes the server
 * down), the library and pure-function parts:
 *   - a model file truncated while mapped: th_model_check_file names the change,
 *     th_model_fault_recover turns the SIGBUS into zeros (the process lives),
 *     use_mmap = false reads the file and is immune (same logits as mapped);
 *   - th_tokenize's size contract on a vocabulary that needs more tokens than
 *     bytes (SentencePiece without '▁': three byte tokens a space);
 *   - out-of-vocabulary special-token ids and short embedding matrices are
 *     refused naming the key / the tensor; shapes print without padding dims;
 *   - th_mem_budget and th_chat_render_budget (a shared cap across renders);
 *   - the server's request-head checks (tools/serve/serve_frame.c) on RFC 9112's
 *     framing cases, and the API key's SHA-256 (tools/serve/serve_auth.c) on known vectors.
 * `test_harden --write-spaceless OUT.gguf` writes the tiny model with its '▁'
 * pieces renamed, for tests/t_harden.sh (the CLI and the server on it). */
#include "check.h"
#include "gguf/gguf.h"
#include "../tools/serve/serve_auth.c"
#include "../tools/serve/serve_frame.c"
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- rewriting a fixture */

typedef struct edit {
    const char *drop_key;          /* a kv left out */
    const char *add_u32_key;       /* and one added */
    uint32_t add_u32;
    const char *halve_rows;        /* a tensor whose ne[1] (and bytes) are halved */
    bool spaceless;                /* tokens: '▁' (E2 96 81) renamed '▂' (E2 96 82) */
} edit;

static char *rename_spaces(gguf_str s) {
    char *o = malloc(s.len + 1);
    memcpy(o, s.ptr, s.len);
    o[s.len] = 0;
    for (uint64_t i = 0; i + 2 < s.len; i++)
        if ((uint8_t)o[i] == 0xE2 && (uint8_t)o[i + 1] == 0x96 && (uint8_t)o[i + 2] == 0x81) o[i + 2] = (char)0x82;
    return o;
}

static bool rewrite(const char *src, const char *dst, const edit *e) {
    gguf_file *f;
    if (gguf_open(src, &f) != TH_OK) return false;
    gguf_writer *w = gguf_writer_new(f->alignment);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        if (e->drop_key && gguf_str_eq(kv->key, e->drop_key)) continue;
        if (e->spaceless && gguf_str_eq(kv->key, "tokenizer.ggml.tokens")) {
            char **t = malloc(kv->arr_n * sizeof *t);
            for (uint64_t k = 0; k < kv->arr_n; k++) t[k] = rename_spaces(kv->arr_strs[k]);
            gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)t, kv->arr_n);
            for (uint64_t k = 0; k < kv->arr_n; k++) free(t[k]);
            free(t);
            continue;
        }
        gguf_w_copy_kv(w, kv);
    }
    if (e->add_u32_key) gguf_w_u32(w, e->add_u32_key, e->add_u32);
    char name[256];
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        uint64_t ne[4] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, nb = t->nbytes;
        if (e->halve_rows && !strcmp(name, e->halve_rows)) { ne[1] /= 2; nb /= 2; }
        gguf_w_tensor(w, name, t->type, t->n_dims, ne, t->data, nb);
    }
    th_status s = gguf_writer_to_file(w, dst);
    gguf_writer_free(w);
    gguf_close(f);
    return s == TH_OK;
}

static const char *tmp_path(const char *tag) {
    static char buf[4][256];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "/tmp/test_harden_%ld_%s.gguf", (long)getpid(), tag);
    return b;
}

static bool copy_file(const char *src, const char *dst) {
    size_t n;
    FILE *in = fopen(src, "rb");
    if (!in) return false;
    FILE *out = fopen(dst, "wb");
    char buf[1 << 16];
    bool ok = out != NULL;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    fclose(in);
    if (out) ok = (fclose(out) == 0) && ok;
    return ok;
}

/* Greedy token after the prompt "1 2 3" (as ids), and the first logit. */
static bool run_prompt(th_model *m, th_token *best, float *first) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    th_context *ctx;
    if (th_context_new(m, &cp, &ctx)) return false;
    th_token toks[4] = { 1, 300, 301, 302 };
    th_batch b = { .n_tokens = 4, .token = toks };
    bool ok = th_decode(ctx, &b) == TH_OK;
    if (ok) { *best = th_get_argmax(ctx, 3); *first = th_get_logits(ctx, 3)[0]; }
    th_context_free(ctx);
    return ok;
}

/* ---------------------------------------------------------------- mapped files */

static void test_no_mmap_same_logits(void) {
    const char *src = fixture("tiny/tiny-F32.gguf");
    if (access(src, R_OK)) SKIP("no %s", src);
    th_model *a, *b;
    th_model_params mp = th_model_default_params();
    CHECK(th_model_load(src, &mp, &a) == TH_OK, "%s", th_last_error());
    mp.use_mmap = false;
    CHECK(th_model_load(src, &mp, &b) == TH_OK, "%s", th_last_error());
    if (!a || !b) { th_model_free(a); th_model_free(b); return; }
    CHECK(th_model_is_mapped(a) && !th_model_is_mapped(b));
    th_token ta = -1, tb = -2;
    float fa = 0, fb = 1;
    CHECK(run_prompt(a, &ta, &fa) && run_prompt(b, &tb, &fb), "%s", th_last_error());
    CHECK(ta == tb && fa == fb, "mapped %d %g vs read %d %g", ta, fa, tb, fb);
    th_model_free(a);
    th_model_free(b);
}

static void test_no_mmap_survives_truncation(void) {
    const char *p = tmp_path("copy_read");
    if (!copy_file(fixture("tiny/tiny-F32.gguf"), p)) SKIP("cannot copy the tiny model");
    th_model_params mp = th_model_default_params();
    mp.use_mmap = false;
    th_model *m;
    CHECK(th_model_load(p, &mp, &m) == TH_OK, "%s", th_last_error());
    th_token t0 = -1, t1 = -2;
    float f0, f1;
    CHECK(m && run_prompt(m, &t0, &f0));
    CHECK(truncate(p, 4096) == 0);
    CHECK(th_model_check_file(m) == TH_OK, "a model read into memory does not care: %s", th_last_error());
    CHECK(m && run_prompt(m, &t1, &f1));
    CHECK(t0 == t1 && f0 == f1, "after the truncation: %d %g vs %d %g", t1, f1, t0, f0);
    th_model_free(m);
    unlink(p);
}

static void test_check_file_names_the_change(void) {
    const char *p = tmp_path("copy_check");
    if (!copy_file(fixture("tiny/tiny-Q8_0.gguf"), p)) SKIP("cannot copy the tiny model");
    th_model *m;
    CHECK(th_model_load(p, NULL, &m) == TH_OK, "%s", th_last_error());
    if (!m) return;
    CHECK(th_model_check_file(m) == TH_OK, "%s", th_last_error());
    struct stat st;
    stat(p, &st);
    CHECK(truncate(p, st.st_size / 2) == 0);
    CHECK(th_model_check_file(m) == TH_ERR_IO);
    CHECK(strstr(th_last_error(), p) && strstr(th_last_error(), "size"), "%s", th_last_error());
    th_model_free(m);
    /* replaced by another file (a new inode) */
    CHECK(copy_file(fixture("tiny/tiny-Q8_0.gguf"), p));
    CHECK(th_model_load(p, NULL, &m) == TH_OK, "%s", th_last_error());
    const char *p2 = tmp_path("copy_check2");
    CHECK(copy_file(fixture("tiny/tiny-Q8_0.gguf"), p2) && rename(p2, p) == 0);
    CHECK(m && th_model_check_file(m) == TH_ERR_IO && strstr(th_last_error(), "replaced"), "%s", th_last_error());
    th_model_free(m);
    unlink(p);
}

static th_model *g_fault_model;
static volatile int g_faults, g_strays;

static void on_bus(int sig, siginfo_t *si, void *u) {
    (void)sig; (void)u;
    if (th_model_fault_recover(g_fault_model, si->si_addr)) { g_faults++; return; }
    g_strays++;
    _exit(99);
}

static void test_fault_recover(void) {
    const char *p = tmp_path("copy_fault");
    if (!copy_file(fixture("tiny/tiny-F32.gguf"), p)) SKIP("cannot copy the tiny model");
    th_model *m;
    CHECK(th_model_load(p, NULL, &m) == TH_OK, "%s", th_last_error());
    if (!m) return;
    int x = 0;
    CHECK(!th_model_fault_recover(m, &x), "an address outside the mapping is not the model's");
    th_token t;
    float f;
    CHECK(run_prompt(m, &t, &f));
    struct sigaction sa = { 0 }, old;
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, &old);
    g_fault_model = m;
    CHECK(truncate(p, 65536) == 0);   /* the header stays, the weights go */
    bool ran = run_prompt(m, &t, &f);   /* reads pages past the end: SIGBUS, recovered */
    sigaction(SIGBUS, &old, NULL);
    CHECK(ran, "decode after the fault: %s", th_last_error());
    CHECK(g_faults >= 1 && g_strays == 0, "faults %d strays %d", g_faults, g_strays);
    CHECK(!th_model_is_mapped(m));
    CHECK(th_model_check_file(m) == TH_ERR_IO, "a faulted mapping is a changed file");
    th_model_free(m);   /* unmaps the zero pages */
    unlink(p);
}

/* ---------------------------------------------------------------- tokenization size */

static void test_tokenize_more_tokens_than_bytes(void) {
    const char *p = tmp_path("spaceless");
    edit e = { .spaceless = true };
    if (!rewrite(fixture("tiny/tiny-Q8_0.gguf"), p, &e)) SKIP("cannot write the spaceless tiny model");
    th_model_params mp = th_model_default_params();
    mp.vocab_only = true;
    th_model *m;
    CHECK(th_model_load(p, &mp, &m) == TH_OK, "%s", th_last_error());
    if (!m) return;
    char text[101];
    memset(text, ' ', 100);
    text[100] = 0;
    size_t len = 100, need = 0, got = 0;
    th_token *t = malloc((len + 8) * sizeof *t);
    th_status s = th_tokenize(m, text, len, true, false, t, len + 8, &need);
    CHECK(s == TH_ERR_CAPACITY && need > len + 8, "status %d, %zu tokens for %zu spaces", s, need, len);
    CHECK(strstr(th_last_error(), "do not fit"), "%s", th_last_error());
    s = th_tokenize(m, text, len, true, false, NULL, 0, &got);   /* a size query */
    CHECK(s == TH_ERR_CAPACITY && got == need, "query: %d %zu", s, got);
    t = realloc(t, need * sizeof *t);
    s = th_tokenize(m, text, len, true, false, t, need, &got);
    CHECK(s == TH_OK && got == need, "second call: %s", th_last_error());
    /* BOS, then three byte tokens <0xE2> <0x96> <0x81> (ids 3 + byte) per space, '▁' having no piece */
    CHECK(need == 1 + 3 * 101 || need == 1 + 3 * 100, "%zu", need);
    CHECK(t[0] == th_token_bos(m) && t[1] == 3 + 0xE2 && t[2] == 3 + 0x96 && t[3] == 3 + 0x81,
          "%d %d %d %d", t[0], t[1], t[2], t[3]);
    free(t);
    th_model_free(m);
    unlink(p);
}

/* ---------------------------------------------------------------- load-time checks */

static void test_special_id_out_of_vocab(void) {
    const char *p = tmp_path("badbos");
    edit e = { .drop_key = "tokenizer.ggml.bos_token_id", .add_u32_key = "tokenizer.ggml.bos_token_id", .add_u32 = 5000 };
    if (!rewrite(fixture("tiny/tiny-Q8_0.gguf"), p, &e)) SKIP("cannot write");
    th_model *m = NULL;
    th_status s = th_model_load(p, NULL, &m);
    CHECK(s == TH_ERR_FORMAT && !m, "status %d", s);
    CHECK(strstr(th_last_error(), "tokenizer.ggml.bos_token_id") && strstr(th_last_error(), "5000"), "%s", th_last_error());
    th_model_free(m);
    unlink(p);
    /* an id just inside is fine */
    e.add_u32 = 4095;
    CHECK(rewrite(fixture("tiny/tiny-Q8_0.gguf"), p, &e));
    CHECK(th_model_load(p, NULL, &m) == TH_OK && th_token_bos(m) == 4095, "%s", th_last_error());
    th_model_free(m);
    unlink(p);
}

static void test_short_embedding_named(void) {
    const char *p = tmp_path("shortembd");
    edit e = { .halve_rows = "token_embd.weight" };
    if (!rewrite(fixture("tiny/tiny-Q8_0.gguf"), p, &e)) SKIP("cannot write");
    th_model *m = NULL;
    CHECK(th_model_load(p, NULL, &m) == TH_ERR_FORMAT);
    const char *msg = th_last_error();
    CHECK(strstr(msg, "'token_embd.weight'") && !strstr(msg, "output.weight") && strstr(msg, "2048 rows") &&
          strstr(msg, "4096 tokens"), "%s", msg);
    unlink(p);
    /* a wrong shape elsewhere: printed without padding dimensions */
    e.halve_rows = "blk.0.attn_q.weight";
    CHECK(rewrite(fixture("tiny/tiny-Q8_0.gguf"), p, &e));
    CHECK(th_model_load(p, NULL, &m) == TH_ERR_FORMAT);
    msg = th_last_error();
    CHECK(strstr(msg, "'blk.0.attn_q.weight': shape [256,128] but the hyper-parameters need [256,256]"), "%s", msg);
    unlink(p);
    th_model_free(m);
}

/* ---------------------------------------------------------------- memory budget */

static void test_mem_budget(void) {
    th_mem_budget *b;
    CHECK(th_mem_budget_new(1000, &b) == TH_OK);
    CHECK(th_mem_budget_take(b, 600) && !th_mem_budget_take(b, 401) && th_mem_budget_take(b, 400));
    CHECK(th_mem_budget_used(b) == 1000 && !th_mem_budget_take(b, 1) && !th_mem_budget_take(b, SIZE_MAX));
    th_mem_budget_give(b, 1000);
    CHECK(th_mem_budget_used(b) == 0 && th_mem_budget_limit(b) == 1000);
    th_mem_budget_free(b);
}

static void test_render_budget(void) {
    /* a list that doubles every step: the per-render limit (256 MiB) stops it alone;
     * a 32 MiB budget shared with others stops it earlier, as TH_ERR_CAPACITY */
    const char *tmpl = "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"
                       "{{ ns.l | length }}";
    const char *ctx = "{\"messages\": []}";
    th_mem_budget *b;
    th_mem_budget_new(32u << 20, &b);
    CHECK(th_mem_budget_take(b, 1u << 20), "someone else holds 1 MiB");
    char *out = NULL;
    th_status s = th_chat_render_budget(tmpl, ctx, NULL, b, &out);
    CHECK(s == TH_ERR_CAPACITY && !out, "status %d", s);
    CHECK(strstr(th_last_error(), "memory budget"), "%s", th_last_error());
    CHECK(th_mem_budget_used(b) == 1u << 20, "the render gave back what it took: %zu", th_mem_budget_used(b));
    s = th_chat_render(tmpl, ctx, NULL, &out);
    CHECK(s == TH_ERR_FORMAT && strstr(th_last_error(), "memory limit"), "without a budget: %d %s", s, th_last_error());
    s = th_chat_render_budget("{{ 1 + 1 }}", ctx, NULL, b, &out);
    CHECK(s == TH_OK && out && !strcmp(out, "2"));
    free(out);
    CHECK(th_mem_budget_used(b) == 1u << 20);
    th_mem_budget_free(b);
}

/* ---------------------------------------------------------------- request heads (RFC 9112) */

typedef struct head_case { const char *name, *head; int verdict, status; bool chunked; uint64_t cl; } head_case;

static void test_frame_heads(void) {
    static const head_case cases[] = {
        { "plain GET", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 1, 0, false, 0 },
        { "POST with a length", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n", 1, 0, false, 30 },
        { "chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n", 1, 0, true, 0 },
        { "bare LF lines", "GET / HTTP/1.1\nHost: x\n\n", 1, 0, false, 0 },
        { "HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", 1, 0, false, 0 },
        { "an empty line first", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, 0, false, 0 },
        { "identical lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 1, 0, false, 5 },
        { "incomplete", "POST / HTTP/1.1\r\nHost: x\r\nContent-Len", 0, 0, false, 0 },
        /* framing that a proxy and we could read differently: 400 */
        { "CL and TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", -1, 400, false, 0 },
        { "TE and CL", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n", -1, 400, false, 0 },
        { "two lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", -1, 400, false, 0 },
        { "negative length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", -1, 400, false, 0 },
        { "overlong length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", -1, 400, false, 0 },
        { "length list", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n", -1, 400, false, 0 },
        { "length + space", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5 \r\n\r\n", -1, 400, false, 0 },
        { "xchunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n", -1, 400, false, 0 },
        { "gzip, chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -1, 400, false, 0 },
        { "chunked twice", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", -1, 400, false, 0 },
        { "chunked + space", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked \r\n\r\n", -1, 400, false, 0 },
        { "TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -1, 400, false, 0 },
        { "space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", -1, 400, false, 0 },
        { "obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", -1, 400, false, 0 },
        { "bare CR", "GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n", -1, 400, false, 0 },
        { "NUL in a value", "GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n", -1, 400, false, 0 },
        { "no Host", "GET / HTTP/1.1\r\n\r\n", -1, 400, false, 0 },
        { "two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", -1, 400, false, 0 },
        { "HTTP/2.0", "GET / HTTP/2.0\r\n\r\n", -1, 505, false, 0 },
        { "garbage", "\x01\x02 GARBAGE\r\n\r\n", -1, 400, false, 0 },
        { "too large", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", -1, 413, false, 0 },
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const head_case *c = &cases[i];
        size_t n = strlen(c->head);
        if (!strcmp(c->name, "NUL in a value")) n = 38;
        frame_result r;
        int v = frame_parse_head(c->head, n, 1u << 20, &r);
        bool ok = v == c->verdict && (v != -1 || r.status == c->status) && (v != 1 || (r.chunked == c->chunked && r.content_length == c->cl));
        if (!ok) { bad++; fprintf(stderr, "  %s: verdict %d status %d (%s)\n", c->name, v, r.status, r.msg); }
    }
    CHECK(bad == 0, "%d of the cases", bad);
    /* the chunk sizes already at hand */
    frame_result r;
    CHECK(frame_scan_chunks("1e\r\n012345678901234567890123456789\r\n0\r\n\r\n", 40, 1u << 20, &r) == 0);
    CHECK(frame_scan_chunks("FFFFFFFFFFFFFFFF\r\nabc", 21, 1u << 20, &r) == -1 && r.status == 413);
    CHECK(frame_scan_chunks("1FFFFFFFFFFFFFFFF\r\n", 19, 1u << 20, &r) == -1 && r.status == 400);
    CHECK(frame_scan_chunks("zz\r\n", 4, 1u << 20, &r) == -1 && r.status == 400);
    CHECK(frame_scan_chunks("80000\r\n", 7, 1u << 20, &r) == 0, "512 KiB, under the limit");
    CHECK(frame_scan_chunks("80000\r\n", 7, 1u << 18, &r) == -1 && r.status == 413);
}

/* ---------------------------------------------------------------- the API key's digest */

static void test_sha256(void) {
    /* expected values: Python's hashlib (python3 -c 'import hashlib; print(hashlib.sha256(b"abc").hexdigest())') */
    static const struct { const char *in; const char *hex; } v[] = {
        { "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
        { "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
        { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
        { "k-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
          "878ac91f5f9b32175cedf976860c22d0d7f18144a22363d3de42b2bc7476e41c" },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t d[32];
        char hex[65];
        auth_sha256(v[i].in, strlen(v[i].in), d);
        for (int k = 0; k < 32; k++) snprintf(hex + 2 * k, 3, "%02x", d[k]);
        CHECK(!strcmp(hex, v[i].hex), "sha256(%s) = %s", v[i].in, hex);
    }
    CHECK(auth_key_equal("secret", 6, "secret") && !auth_key_equal("secreT", 6, "secret") &&
          !auth_key_equal("secret", 5, "secret") && !auth_key_equal("secret-and-more", 15, "secret"));
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-spaceless")) {
        edit e = { .spaceless = true };
        return rewrite(fixture("tiny/tiny-Q8_0.gguf"), argv[2], &e) ? 0 : 1;
    }
    RUN(test_no_mmap_same_logits);
    RUN(test_no_mmap_survives_truncation);
    RUN(test_check_file_names_the_change);
    RUN(test_fault_recover);
    RUN(test_tokenize_more_tokens_than_bytes);
    RUN(test_special_id_out_of_vocab);
    RUN(test_short_embedding_named);
    RUN(test_mem_budget);
    RUN(test_render_budget);
    RUN(test_frame_heads);
    RUN(test_sha256);
    return CHECK_DONE();
}
