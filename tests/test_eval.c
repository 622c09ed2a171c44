/* test_eval.c — the evaluation library (src/eval/): the per-position arithmetic
 * against independent double-precision reasoning, the .kld base file parser on
 * hand-built good and bad files, llama.cpp's statistics rules on known values, and
 * whole runs on the tiny fixture against llama-perplexity's printed values (the
 * commands are next to each constant; tests/peer/make_ppl_goldens.sh reproduces
 * them): perplexity, the base file llama.cpp wrote read by our candidate run, our own
 * base file, KLD of a model against itself, batching invariance, bad input. */
#include "check.h"
#include "theseus.h"
#include "eval/eval.h"
#include <stdint.h>
#include <unistd.h>

#define GPL3 "/usr/share/common-licenses/GPL-3"
#define C32_BASE "tests/peer/tiny-F16-c32.kld"

/* ---------------------------------------------------------------- helpers */

/* log-softmax in double, the independent reference */
static void log_softmax_d(const float *x, int n, double *out) {
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    for (int i = 0; i < n; i++) out[i] = (double)x[i] - mx - log(s);
}

static uint32_t rng_state = 12345;
static float frand(void) {   /* uniform in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

/* Decode an encoded row the way the file format defines it. */
static void decode_row(const uint16_t *row, int n, float *out) {
    float scale, mn;
    th_row_header(row, &scale, &mn);
    for (int i = 0; i < n; i++) out[i] = scale * row[4 + i] + mn;
}

/* The whole GPL-3 text tokenized as `theseus perplexity -f` does (one trailing
 * newline dropped, BOS as the metadata says). */
static th_token *gpl3_tokens(th_model *m, size_t *n) {
    FILE *f = fopen(GPL3, "rb");
    if (!f) return NULL;
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    if (len && text[len - 1] == '\n') len--;
    th_token *t = malloc((len + 16) * sizeof *t);
    if (t && th_tokenize(m, text, len, true, false, t, len + 16, n) != TH_OK) { free(t); return NULL; }
    return t;
}

typedef struct run_opts { int32_t n_ctx, n_batch, n_chunks; const char *base_out; const th_kld_base *base; } run_opts;

static th_status eval_model(th_model *m, const th_token *tok, size_t n, run_opts o, th_eval_result *r) {
    th_eval_params ep = th_eval_default_params();
    if (o.n_ctx >= 0) ep.n_ctx = o.n_ctx;
    if (o.n_batch) ep.n_batch = o.n_batch;
    ep.n_chunks = o.n_chunks;
    ep.n_threads = 2;
    ep.kld_base_out = o.base_out;
    ep.kld_base = o.base;
    th_context_params cp = th_context_default_params();
    th_eval_context_params(&ep, &cp);
    cp.n_threads = 2;
    th_context *ctx;
    th_status s = th_context_new(m, &cp, &ctx);
    if (s) return s;
    s = th_eval_run(m, ctx, tok, n, &ep, r);
    th_context_free(ctx);
    return s;
}

static th_model *load_tiny(const char *type) {
    char p[64];
    snprintf(p, sizeof p, "tiny/tiny-%s.gguf", type);
    th_model *m = NULL;
    if (th_model_load(fixture(p), NULL, &m) != TH_OK) return NULL;
    return m;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(data, 1, n, f); fclose(f); }
}

/* ---------------------------------------------------------------- rows */

static void test_row_nll(void) {
    enum { N = 1001 };
    static float x[N];
    static double ref[N];
    for (int i = 0; i < N; i++) x[i] = 8 * frand();
    log_softmax_d(x, N, ref);
    for (int t = 0; t < N; t += 97) {
        CHECK_NEAR(th_row_nll(x, N, t), -ref[t], 1e-5);
        uint16_t row[2 * ((N + 1) / 2) + 4];
        CHECK_NEAR(th_row_encode(x, N, t, row), -ref[t], 1e-5);
    }
}

static void test_row_encode(void) {
    enum { N = 333 };   /* odd: the row has one uint16 of padding */
    static float x[N], dec[N];
    static double ref[N];
    uint16_t row[2 * ((N + 1) / 2) + 4];
    CHECK(th_kld_row_len(N) == 2 * ((N + 1) / 2) + 4 && th_kld_row_len(N) == N + 1 + 4);
    for (int i = 0; i < N; i++) x[i] = 30 * frand();   /* a range wider than 16: some clamp */
    memset(row, 0xff, sizeof row);
    th_row_encode(x, N, 0, row);
    CHECK(row[4 + N] == 0, "padding is %u", row[4 + N]);
    log_softmax_d(x, N, ref);
    decode_row(row, N, dec);
    float scale, mn;
    th_row_header(row, &scale, &mn);
    double mx = ref[0];
    for (int i = 1; i < N; i++) mx = ref[i] > mx ? ref[i] : mx;
    CHECK_NEAR(scale, 16.0 / 65535, 1e-7);            /* range clamped to 16 */
    CHECK_NEAR(mn, mx - 16, 1e-5);
    int clamped = 0;
    for (int i = 0; i < N; i++) {
        if (ref[i] <= mx - 16) { clamped++; CHECK(row[4 + i] == 0 && dec[i] == mn); }
        else CHECK(fabs(dec[i] - ref[i]) <= 0.5 * scale + 1e-5, "token %d: %g vs %g", i, dec[i], ref[i]);
    }
    CHECK(clamped > 10, "only %d tokens below max-16", clamped);
    /* a flat row: scale 0, all values 0, log p = -log N */
    for (int i = 0; i < N; i++) x[i] = 1.5f;
    th_row_encode(x, N, 3, row);
    th_row_header(row, &scale, &mn);
    CHECK(scale == 0 && fabsf(mn + logf(N)) < 1e-5, "scale %g min %g", scale, mn);
}

static void test_row_kld(void) {
    enum { N = 512 };
    static float a[N], b[N], lp[N];
    static double pa[N], pb[N];
    uint16_t row[N + 4];
    for (int i = 0; i < N; i++) { a[i] = 3 * frand(); b[i] = a[i] + 0.5f * frand(); }
    log_softmax_d(a, N, pa);
    log_softmax_d(b, N, pb);
    double kl = 0;   /* KL(base a || candidate b), every base token is above e^-16 here */
    for (int i = 0; i < N; i++) kl += exp(pa[i]) * (pa[i] - pb[i]);
    th_row_encode(a, N, 7, row);
    decode_row(row, N, lp);
    th_kld_pos p;
    th_row_kld(b, lp, N, 7, &p);
    CHECK(fabs(p.kld - kl) < 2e-4 && kl > 0.02, "kld %g, reference %g", p.kld, kl);
    CHECK_NEAR(p.nll, -pb[7], 1e-4);
    CHECK_NEAR(p.nll_base, -pa[7], 2e-4);
    CHECK_NEAR(p.p_diff, exp(pb[7]) - exp(pa[7]), 1e-6);
    int ia = 0, ib = 0;
    for (int i = 1; i < N; i++) { if (a[i] > a[ia]) ia = i; if (b[i] > b[ib]) ib = i; }
    CHECK(p.same_top == (ia == ib));
    /* against itself: zero up to the uint16 rounding, same top */
    th_row_kld(a, lp, N, 7, &p);
    CHECK(fabs(p.kld) < 2.5e-4 && p.same_top, "self kld %g", p.kld);
}

/* ---------------------------------------------------------------- base file */

/* A valid file: n_ctx 4 (1 scored position a chunk), n_vocab 3, 2 chunks. */
static size_t make_base(uint8_t *buf) {
    size_t o = 0;
    memcpy(buf, "_logits_", 8); o = 8;
    int32_t h[3] = { 4, 3, 2 };
    memcpy(buf + o, h, 12); o += 12;
    int32_t tok[8] = { 0, 1, 2, 1, 2, 2, 0, 1 };
    memcpy(buf + o, tok, 32); o += 32;
    for (int c = 0; c < 2; c++) {
        float scale = 1.0f / 65535, mn = -2.0f - c;
        uint16_t row[8] = { 0 };
        memcpy(row, &scale, 4);
        memcpy(row + 2, &mn, 4);
        row[4] = 65535; row[5] = 0; row[6] = 32768;
        memcpy(buf + o, row, 16); o += 16;
    }
    return o;
}

static th_status parse(const uint8_t *d, size_t n, th_kld_base **b) { return th_kld_base_parse(d, n, "x.kld", b); }

static void test_kld_file_parse(void) {
    uint8_t buf[256], bad[256];
    size_t n = make_base(buf);
    CHECK(n == 84);
    th_kld_base *b;
    CHECK(parse(buf, n, &b) == TH_OK, "%s", th_last_error());
    if (b) {
        CHECK(th_kld_base_n_ctx(b) == 4 && th_kld_base_n_vocab(b) == 3 && th_kld_base_n_chunks(b) == 2);
        CHECK(th_kld_base_tokens(b)[6] == 0 && th_kld_base_tokens(b)[7] == 1);
        float lp[3];
        CHECK(th_kld_base_logprobs(b, 1, 0, lp) == TH_OK);
        CHECK_NEAR(lp[0], -2.0, 1e-6);
        CHECK_NEAR(lp[1], -3.0, 1e-6);
        CHECK_NEAR(lp[2], -3.0 + 32768.0 / 65535, 1e-6);
        CHECK(th_kld_base_logprobs(b, 2, 0, lp) == TH_ERR_ARG && th_kld_base_logprobs(b, 0, 1, lp) == TH_ERR_ARG);
        th_kld_base_close(b);
    }
    struct { const char *what; size_t off; int32_t v; size_t len; const char *msg; bool set; } cases[] = {
        { "magic", 0, 0x676f6c2e, 84, "not a KL-divergence base file", true },
        { "n_ctx", 8, 2, 84, "n_ctx 2 at byte offset 8", true },
        { "n_vocab", 12, -5, 84, "n_vocab -5", true },
        { "n_chunk", 16, 0, 84, "n_chunk 0", true },
        { "n_chunk huge", 16, INT32_MAX, 84, "truncated", true },
        { "token", 20 + 4 * 5, 3, 84, "token 5 (chunk 2, position 1, byte offset 40) is 3", true },
        { "truncated", 0, 0, 70, "ends inside chunk 2", false },
        { "truncated tokens", 0, 0, 30, "before the first log-probabilities", false },
        { "long", 0, 0, 90, "6 bytes after the end", false },
        { "short", 0, 0, 10, "file too short", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, buf, n);
        memset(bad + n, 0, sizeof bad - n);
        if (cases[i].set) memcpy(bad + cases[i].off, &cases[i].v, 4);
        th_clear_error();
        th_status s = parse(bad, cases[i].len, &b);
        CHECK(s == TH_ERR_FORMAT && b == NULL && strstr(th_last_error(), cases[i].msg) && strstr(th_last_error(), "x.kld"),
              "%s: %s", cases[i].what, th_last_error());
    }
    /* rows are checked when read: a NaN scale, a positive minimum */
    memcpy(bad, buf, n);
    float nan_ = NAN, pos = 0.5f;
    memcpy(bad + 52 + 16, &nan_, 4);
    memcpy(bad + 52 + 4, &pos, 4);
    CHECK(parse(bad, n, &b) == TH_OK);
    if (b) {
        float lp[3];
        CHECK(th_kld_base_logprobs(b, 1, 0, lp) == TH_ERR_FORMAT && strstr(th_last_error(), "chunk 2, position 2"),
              "%s", th_last_error());
        CHECK(th_kld_base_logprobs(b, 0, 0, lp) == TH_ERR_FORMAT && strstr(th_last_error(), "chunk 1"), "%s", th_last_error());
        th_kld_base_close(b);
    }
    /* th_kld_base_open: missing file, and a file round trip */
    CHECK(th_kld_base_open("/nonexistent/x.kld", &b) == TH_ERR_IO && strstr(th_last_error(), "/nonexistent/x.kld"));
    char path[64];
    snprintf(path, sizeof path, "/tmp/theseus-eval-%d.kld", (int)getpid());
    write_file(path, buf, n);
    CHECK(th_kld_base_open(path, &b) == TH_OK, "%s", th_last_error());
    th_kld_base_close(b);
    write_file(path, buf, 0);
    CHECK(th_kld_base_open(path, &b) == TH_ERR_FORMAT && strstr(th_last_error(), path), "%s", th_last_error());
    unlink(path);
}

/* ---------------------------------------------------------------- statistics */

static void test_stats_rules(void) {
    th_kld_acc *a;
    CHECK(th_kld_acc_new(&a) == TH_OK);
    if (!a) return;
    /* KLD 0..99, p_diff (i-50)/1000, same top every other position; nll = nll_base = 1 */
    for (int i = 0; i < 100; i++) {
        th_kld_pos p = { .nll = 1, .nll_base = 1, .kld = i, .p_diff = (float)(i - 50) / 1000,
                         .p = 0.5f, .p_base = 0.5f, .same_top = i % 2 == 0 };
        CHECK(th_kld_acc_push(a, &p) == TH_OK);
    }
    th_kld_stats s = th_kld_acc_stats(a, true);
    CHECK(s.count == 100 && s.has_distribution);
    CHECK_NEAR(s.kld, 49.5, 1e-12);
    CHECK_NEAR(s.kld_unc, sqrt((100.0 * 100 - 1) / 12 / 99), 1e-9);  /* population variance (n²-1)/12 */
    CHECK_NEAR(s.kld_median, 49.5, 1e-6);
    CHECK_NEAR(s.kld_max, 99, 0);
    CHECK_NEAR(s.kld_min, 0, 0);
    CHECK_NEAR(s.kld_p99, 98.01, 1e-4);     /* 0.99 * 99 = 98.01: between 98 and 99 */
    CHECK_NEAR(s.kld_p999, 98.901, 1e-4);
    CHECK_NEAR(s.kld_p90, 89.1, 1e-4);
    CHECK_NEAR(s.kld_p10, 9.9, 1e-4);
    CHECK_NEAR(s.kld_p1, 0.99, 1e-4);
    CHECK_NEAR(s.dp, -0.0005, 1e-9);
    CHECK_NEAR(s.dp_median, -0.0005, 1e-7);
    CHECK_NEAR(s.dp_max, 0.049, 1e-7);
    CHECK_NEAR(s.same_top, 0.5, 0);
    CHECK_NEAR(s.same_top_unc, sqrt(0.25 / 99), 1e-12);
    CHECK_NEAR(s.ppl, exp(1.0), 1e-6);
    CHECK_NEAR(s.ppl_ratio, 1, 1e-9);
    /* a few values: no uncertainty (llama.cpp needs more than 10) */
    th_kld_acc *b;
    CHECK(th_kld_acc_new(&b) == TH_OK);
    for (int i = 0; b && i < 5; i++) {
        th_kld_pos p = { .nll = 1.0f + i, .nll_base = 1, .kld = i, .p = 0.1f, .p_base = 0.1f };
        th_kld_acc_push(b, &p);
    }
    th_kld_stats t = th_kld_acc_stats(b, false);
    CHECK(t.count == 5 && t.kld_unc == 0 && !t.has_distribution && t.kld == 2);
    CHECK_NEAR(t.kld_median, 0, 0);   /* not computed without the distribution */
    th_kld_acc_free(b);
    /* the public one-row entry point */
    float lg[4] = { 1, 2, 3, 4 }, lp[4];
    double ls[4];
    log_softmax_d(lg, 4, ls);
    for (int i = 0; i < 4; i++) lp[i] = (float)ls[i];
    double k = 1;
    CHECK(th_kld_acc_add(a, lg, lp, 4, 2, &k) == TH_OK && fabs(k) < 1e-6, "%g", k);
    CHECK(th_kld_acc_add(a, lg, lp, 4, 4, &k) == TH_ERR_ARG);
    th_kld_acc_free(a);
}

/* ---------------------------------------------------------------- tiny fixture runs */

/* llama.cpp (ggerganov/llama.cpp c392e50, CPU, -t 2), tests/peer/make_ppl_goldens.sh:
 *   llama-perplexity -m tiny/tiny-F16.gguf -f /usr/share/common-licenses/GPL-3 -c 512 \
 *       --kl-divergence-base tiny-f16.kld          -> Final estimate: PPL = 4260.9635 +/- 17.52542
 *   llama-perplexity -m tiny/tiny-Q4_0.gguf --kl-divergence-base tiny-f16.kld --kl-divergence
 *       -> Mean PPL(Q) 4261.287827, Mean KLD 0.004254 ± 0.000012, Same top p 50.357 ± 0.668 % */
#define LLAMA_TINY_F16_PPL 4260.9635
#define LLAMA_TINY_Q4_0_PPL 4261.287827
#define LLAMA_TINY_Q4_0_KLD 0.004254

/* A temporary base file of tiny-F16 over GPL-3 with chunks of 512, made once. */
static char tiny_base_path[64];
static int tiny_base_made = -1;
static const char *tiny_f16_base(void) {
    char *path = tiny_base_path;
    int made = tiny_base_made;
    if (made >= 0) return made ? path : NULL;
    made = tiny_base_made = 0;
    snprintf(path, sizeof tiny_base_path, "/tmp/theseus-eval-f16-%d.kld", (int)getpid());
    th_model *m = load_tiny("F16");
    size_t n = 0;
    th_token *tok = m ? gpl3_tokens(m, &n) : NULL;
    th_eval_result r;
    if (tok && eval_model(m, tok, n, (run_opts){ .n_ctx = 512, .n_chunks = -1, .base_out = path }, &r) == TH_OK) {
        printf("  tiny F16 base: PPL %.4f +/- %.5f over %d chunks (llama.cpp %.4f)\n", r.ppl, r.ppl_unc, r.n_chunks,
               LLAMA_TINY_F16_PPL);
        made = fabs(r.ppl / LLAMA_TINY_F16_PPL - 1) < 1e-3 && r.n_chunks == 22;
        th_eval_result_free(&r);
    }
    free(tok);
    th_model_free(m);
    tiny_base_made = made;
    return made ? path : NULL;
}

static void test_tiny_ppl_vs_llama(void) {
    if (access(GPL3, R_OK)) SKIP("no %s", GPL3);
    th_model *m = load_tiny("Q4_0");
    if (!m) SKIP("no tiny fixture");
    size_t n = 0;
    th_token *tok = gpl3_tokens(m, &n);
    th_eval_result r;
    CHECK(tok && eval_model(m, tok, n, (run_opts){ .n_ctx = 512, .n_chunks = -1 }, &r) == TH_OK, "%s", th_last_error());
    if (tok) {
        printf("  tiny Q4_0: PPL %.4f +/- %.5f (llama.cpp %.4f), %d chunks, %lld positions\n", r.ppl, r.ppl_unc,
               LLAMA_TINY_Q4_0_PPL, r.n_chunks, (long long)r.count);
        CHECK(fabs(r.ppl / LLAMA_TINY_Q4_0_PPL - 1) < 3e-3);
        CHECK(r.n_chunks == 22 && r.count == 22 * 255 && r.n_seq == 4);
        CHECK_NEAR(r.running_ppl[21], r.ppl, 1e-9);
        th_eval_result_free(&r);
    }
    CHECK(tiny_f16_base() != NULL, "the F16 base run failed or its PPL is off: %s", th_last_error());
    free(tok);
    th_model_free(m);
}

static void test_tiny_kld_self_zero(void) {
    const char *bp = tiny_f16_base();
    if (!bp) SKIP("no base file (needs %s and the tiny fixture)", GPL3);
    th_kld_base *b;
    th_model *m = load_tiny("F16");
    CHECK(th_kld_base_open(bp, &b) == TH_OK, "%s", th_last_error());
    th_eval_result r;
    CHECK(m && b && eval_model(m, NULL, 0, (run_opts){ .n_ctx = 0, .n_chunks = -1, .base = b }, &r) == TH_OK,
          "%s", th_last_error());
    if (m && b) {
        printf("  F16 vs its own base: mean KLD %.3g, max %.3g, same top %.4f, PPL ratio %.7f\n", r.kld.kld,
               r.kld.kld_max, r.kld.same_top, r.kld.ppl_ratio);
        CHECK(r.has_kld && r.kld.count == 22 * 255);
        CHECK(fabs(r.kld.kld) < 1e-5 && r.kld.kld_max < 1e-4, "mean KLD %g max %g", r.kld.kld, r.kld.kld_max);
        CHECK(r.kld.same_top == 1.0, "same top %g", r.kld.same_top);
        CHECK(fabs(r.kld.ppl_ratio - 1) < 1e-4 && fabs(r.kld.dp_rms) < 1e-5 && r.kld.cor_ln_ppl > 0.9999);
        th_eval_result_free(&r);
    }
    th_kld_base_close(b);
    th_model_free(m);
}

static void test_tiny_q4_0_kld_vs_llama(void) {
    const char *bp = tiny_f16_base();
    if (!bp) SKIP("no base file (needs %s and the tiny fixture)", GPL3);
    th_kld_base *b;
    th_model *m = load_tiny("Q4_0");
    CHECK(th_kld_base_open(bp, &b) == TH_OK, "%s", th_last_error());
    th_eval_result r;
    CHECK(m && b && eval_model(m, NULL, 0, (run_opts){ .n_ctx = 512, .n_chunks = -1, .base = b }, &r) == TH_OK,
          "%s", th_last_error());
    if (m && b) {
        printf("  Q4_0 vs F16: mean KLD %.6f +/- %.6f (llama.cpp %.6f), same top %.3f %%, PPL(Q) %.4f\n", r.kld.kld,
               r.kld.kld_unc, LLAMA_TINY_Q4_0_KLD, 100 * r.kld.same_top, r.kld.ppl);
        CHECK(fabs(r.kld.kld / LLAMA_TINY_Q4_0_KLD - 1) < 0.02);
        CHECK(fabs(r.kld.ppl / LLAMA_TINY_Q4_0_PPL - 1) < 3e-3);
        CHECK(r.kld.kld_min <= r.kld.kld_median && r.kld.kld_median <= r.kld.kld_p99 && r.kld.kld_p99 <= r.kld.kld_max);
        th_eval_result_free(&r);
    }
    th_kld_base_close(b);
    th_model_free(m);
}

/* llama.cpp, tests/peer/make_ppl_goldens.sh:
 *   llama-perplexity -m tiny/tiny-F16.gguf -f /usr/share/common-licenses/GPL-3 -c 32 --chunks 3 \
 *       --kl-divergence-base tests/peer/tiny-F16-c32.kld      -> [3]4165.0962, PPL 4165.0962 +/- 208.02309
 *   llama-perplexity -m tiny/tiny-Q4_0.gguf --kl-divergence-base tests/peer/tiny-F16-c32.kld --kl-divergence
 *       -> chunk 3: PPL 4192.8980 ± 227.5682, ln(PPL(Q)/PPL(base)) 0.00665 ± 0.01196,
 *          KL Divergence 0.00269 ± 0.00003, Δp RMS 0.002 %, Same top p 37.778 ± 7.309 % */
#define LLAMA_C32_PPL_BASE 4165.0962
#define LLAMA_C32_Q4_0_PPL 4192.8980
#define LLAMA_C32_Q4_0_LNRATIO 0.00665
#define LLAMA_C32_Q4_0_KLD 0.00269
#define LLAMA_C32_Q4_0_SAME_TOP 0.37778

static void test_llama_base_read(void) {
    th_kld_base *lb = NULL, *ob = NULL;
    if (th_kld_base_open(C32_BASE, &lb) != TH_OK) SKIP("%s: %s", C32_BASE, th_last_error());
    th_model *q = load_tiny("Q4_0"), *f = load_tiny("F16");
    if (!q || !f) { th_kld_base_close(lb); th_model_free(q); th_model_free(f); SKIP("no tiny fixture"); }
    CHECK(th_kld_base_n_ctx(lb) == 32 && th_kld_base_n_chunks(lb) == 3 && th_kld_base_n_vocab(lb) == 4096);
    /* llama.cpp's tokens are ours */
    size_t n = 0;
    th_token *tok = access(GPL3, R_OK) ? NULL : gpl3_tokens(f, &n);
    if (tok) CHECK(n >= 96 && !memcmp(tok, th_kld_base_tokens(lb), 96 * sizeof *tok), "GPL-3 tokens differ from llama.cpp's");
    th_eval_result r, ro, rb;
    CHECK(eval_model(q, NULL, 0, (run_opts){ .n_ctx = 0, .n_chunks = -1, .base = lb }, &r) == TH_OK, "%s", th_last_error());
    printf("  Q4_0 vs llama.cpp's base: PPL %.4f (llama.cpp %.4f), ln ratio %.5f (%.5f), KLD %.5f (%.5f), same top %.3f (%.3f)\n",
           r.kld.ppl, LLAMA_C32_Q4_0_PPL, r.kld.ln_ppl_ratio, LLAMA_C32_Q4_0_LNRATIO, r.kld.kld, LLAMA_C32_Q4_0_KLD,
           r.kld.same_top, LLAMA_C32_Q4_0_SAME_TOP);
    CHECK(r.kld.count == 45);
    CHECK(fabs(r.kld.ppl / LLAMA_C32_Q4_0_PPL - 1) < 3e-3);
    CHECK(fabs(r.kld.ppl_base / LLAMA_C32_PPL_BASE - 1) < 1e-4, "PPL(base) %.4f", r.kld.ppl_base);
    CHECK(fabs(r.kld.kld / LLAMA_C32_Q4_0_KLD - 1) < 0.02);
    CHECK(fabs(r.kld.ln_ppl_ratio - LLAMA_C32_Q4_0_LNRATIO) < 1e-3);
    CHECK(fabs(r.kld.same_top - LLAMA_C32_Q4_0_SAME_TOP) <= 2.0 / 45 + 1e-9);   /* within two positions */
    /* our own base of the same run, read by the same candidate: the same figures up to
     * the engines' F16 logits and the uint16 rounding */
    char path[64];
    snprintf(path, sizeof path, "/tmp/theseus-eval-c32-%d.kld", (int)getpid());
    if (tok) {
        CHECK(eval_model(f, tok, n, (run_opts){ .n_ctx = 32, .n_chunks = 3, .base_out = path }, &rb) == TH_OK,
              "%s", th_last_error());
        CHECK(fabs(rb.ppl / LLAMA_C32_PPL_BASE - 1) < 1e-4, "base PPL %.4f", rb.ppl);
        th_eval_result_free(&rb);
        CHECK(th_kld_base_open(path, &ob) == TH_OK, "%s", th_last_error());
        CHECK(ob && !memcmp(th_kld_base_tokens(ob), th_kld_base_tokens(lb), 96 * sizeof(th_token)));
    }
    if (ob && eval_model(q, NULL, 0, (run_opts){ .n_ctx = 32, .n_chunks = -1, .base = ob }, &ro) == TH_OK) {
        printf("  Q4_0 vs our base: KLD %.6f vs %.6f, PPL(base) %.4f vs %.4f, same top %.4f vs %.4f\n", ro.kld.kld,
               r.kld.kld, ro.kld.ppl_base, r.kld.ppl_base, ro.kld.same_top, r.kld.same_top);
        CHECK(fabs(ro.kld.kld / r.kld.kld - 1) < 5e-3);
        CHECK(fabs(ro.kld.ppl_base / r.kld.ppl_base - 1) < 1e-4);
        CHECK(fabs(ro.kld.ln_ppl_ratio - r.kld.ln_ppl_ratio) < 1e-4);
        CHECK(fabs(ro.kld.same_top - r.kld.same_top) <= 1.0 / 45 + 1e-9);
        CHECK_NEAR(ro.kld.ppl, r.kld.ppl, 1e-9 * r.kld.ppl);   /* the candidate side is the same run */
        th_eval_result_free(&ro);
    } else CHECK(0, "our base: %s", th_last_error());
    if (r.running_ppl) th_eval_result_free(&r);
    unlink(path);
    th_kld_base_close(lb);
    th_kld_base_close(ob);
    free(tok);
    th_model_free(q);
    th_model_free(f);
}

/* The same chunks, whether 4 chunks share a pass, one chunk takes one pass, or a
 * chunk takes three. */
static void test_batching_invariance(void) {
    if (access(GPL3, R_OK)) SKIP("no %s", GPL3);
    th_model *m = load_tiny("Q8_0");
    if (!m) SKIP("no tiny fixture");
    size_t n = 0;
    th_token *tok = gpl3_tokens(m, &n);
    int32_t batches[] = { 2048, 512, 200, 1000 };
    th_eval_result r0, r;
    CHECK(tok && eval_model(m, tok, n, (run_opts){ .n_ctx = 512, .n_batch = 2048, .n_chunks = 6 }, &r0) == TH_OK);
    for (size_t i = 1; tok && i < sizeof batches / sizeof batches[0]; i++) {
        CHECK(eval_model(m, tok, n, (run_opts){ .n_ctx = 512, .n_batch = batches[i], .n_chunks = 6 }, &r) == TH_OK,
              "%s", th_last_error());
        if (!r.running_ppl) continue;
        printf("  -b %d: %d chunks a pass, %d tokens a pass: PPL %.6f (-b 2048: %.6f)\n", batches[i], r.n_seq,
               r.n_batch, r.ppl, r0.ppl);
        CHECK(r.n_chunks == 6 && fabs(r.ppl / r0.ppl - 1) < 1e-5);
        for (int c = 0; c < 6; c++) CHECK(fabs(r.chunk_ppl[c] / r0.chunk_ppl[c] - 1) < 1e-5, "chunk %d", c + 1);
        th_eval_result_free(&r);
    }
    if (tok) {
        CHECK(r0.n_seq == 4 && r0.n_batch == 2048);
        th_eval_result_free(&r0);
    }
    free(tok);
    th_model_free(m);
}

static void test_bad_input(void) {
    th_model *m = load_tiny("Q4_0");
    if (!m) SKIP("no tiny fixture");
    th_token tok[1100];
    for (int i = 0; i < 1100; i++) tok[i] = 100 + i % 300;
    th_eval_result r;
    /* shorter than two chunks */
    th_status s = eval_model(m, tok, 1023, (run_opts){ .n_ctx = 512, .n_chunks = -1 }, &r);
    CHECK(s == TH_ERR_ARG && strstr(th_last_error(), "only 1023 tokens") && strstr(th_last_error(), "at least 1024"),
          "%s", th_last_error());
    CHECK(eval_model(m, tok, 1100, (run_opts){ .n_ctx = 512, .n_chunks = -1 }, &r) == TH_OK, "%s", th_last_error());
    CHECK(r.n_chunks == 2);
    th_eval_result_free(&r);
    /* a token outside the vocabulary */
    tok[700] = 4096;
    CHECK(eval_model(m, tok, 1100, (run_opts){ .n_ctx = 512, .n_chunks = -1 }, &r) == TH_ERR_ARG &&
          strstr(th_last_error(), "index 700"), "%s", th_last_error());
    /* a base file for another vocabulary (3 tokens) */
    uint8_t buf[128];
    size_t nb = make_base(buf);
    th_kld_base *b;
    CHECK(th_kld_base_parse(buf, nb, "other-vocab.kld", &b) == TH_OK);
    s = eval_model(m, NULL, 0, (run_opts){ .n_ctx = 0, .n_chunks = -1, .base = b }, &r);
    CHECK(s == TH_ERR_FORMAT && strstr(th_last_error(), "other-vocab.kld") && strstr(th_last_error(), "vocabulary of 3") &&
          strstr(th_last_error(), "4096"), "%s", th_last_error());
    th_kld_base_close(b);
    /* another chunk size than the base file's */
    if (th_kld_base_open(C32_BASE, &b) == TH_OK) {
        s = eval_model(m, NULL, 0, (run_opts){ .n_ctx = 512, .n_chunks = -1, .base = b }, &r);
        CHECK(s == TH_ERR_ARG && strstr(th_last_error(), "chunks of 32 tokens, not 512"), "%s", th_last_error());
        th_kld_base_close(b);
        /* a truncated copy */
        FILE *f = fopen(C32_BASE, "rb");
        static uint8_t big[400000];
        size_t len = f ? fread(big, 1, sizeof big, f) : 0;
        if (f) fclose(f);
        char path[64];
        snprintf(path, sizeof path, "/tmp/theseus-eval-trunc-%d.kld", (int)getpid());
        write_file(path, big, len - 100000);
        CHECK(th_kld_base_open(path, &b) == TH_ERR_FORMAT && strstr(th_last_error(), path) &&
              strstr(th_last_error(), "truncated") && strstr(th_last_error(), "ends inside chunk 3"), "%s", th_last_error());
        unlink(path);
    }
    /* writing and comparing at once */
    CHECK(th_kld_base_parse(buf, nb, "x.kld", &b) == TH_OK);
    s = eval_model(m, tok, 1100, (run_opts){ .n_ctx = 0, .n_chunks = -1, .base = b, .base_out = "/tmp/x.kld" }, &r);
    CHECK(s == TH_ERR_ARG && strstr(th_last_error(), "not both") && access("/tmp/x.kld", F_OK) != 0, "%s", th_last_error());
    th_kld_base_close(b);
    th_model_free(m);
}

int main(void) {
    RUN(test_row_nll);
    RUN(test_row_encode);
    RUN(test_row_kld);
    RUN(test_kld_file_parse);
    RUN(test_stats_rules);
    RUN(test_tiny_ppl_vs_llama);
    RUN(test_tiny_kld_self_zero);
    RUN(test_tiny_q4_0_kld_vs_llama);
    RUN(test_llama_base_read);
    RUN(test_batching_invariance);
    RUN(test_bad_input);
    if (tiny_base_made >= 0) unlink(tiny_base_path);
    return CHECK_DONE();
}
