/* test_hybrid.c — the hybrid recurrent models (qwen35, qwen3next: Gated DeltaNet
 * layers between gated full-attention layers) on the CPU: the tiny fixtures of
 * tests/fixtures/hybrid (and qwen35moe) against ik_llama.cpp's logits (README.md there), decode
 * token by token equal to one batch, a ragged batch of three sequences equal to
 * each alone, truncate (from a snapshot, refused without one, to 0) and sequence
 * copy of the recurrent state, and a GPU context (made with a GPU, else refused). */
#include "check.h"
#include "logits.h"
#include "theseus.h"
#include "hyb_spec.h"
#include "context.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "cpu/dn_chunk.h"
#include <stdint.h>
#include <unistd.h>

#define DIR "tests/fixtures/hybrid/"
#define MAXT 160

static th_model *load(const char *arch) {
    char p[256];
    snprintf(p, sizeof p, DIR "%s-F32.gguf", arch);
    th_model *m = NULL;
    if (th_model_load(p, NULL, &m)) fprintf(stderr, "load %s: %s\n", p, th_last_error());
    return m;
}

static th_context *new_ctx(th_model *m, uint32_t n_batch, uint32_t n_seq, uint32_t snaps) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = n_batch;
    cp.n_seq_max = n_seq;
    cp.kv_type = TH_KV_F32;
    cp.n_threads = 2;
    cp.rs_snapshots = snaps;
    th_context *c = NULL;
    if (th_context_new(m, &cp, &c)) fprintf(stderr, "context: %s\n", th_last_error());
    return c;
}

/* Decode tok[0..n) of sequence seq continuing at its current length, in chunks of
 * `chunk`, appending every position's logits to out (may be NULL). */
static bool feed(th_context *c, int32_t seq, const int32_t *tok, int n, int chunk, float *out, int nv) {
    int8_t want[MAXT];
    int32_t sq[MAXT];
    memset(want, 1, sizeof want);
    for (int i = 0; i < MAXT; i++) sq[i] = seq;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk;
        th_batch b = { .n_tokens = nb, .token = tok + i0, .seq_id = sq, .logits = want };
        if (th_decode(c, &b)) { fprintf(stderr, "decode: %s\n", th_last_error()); return false; }
        for (int j = 0; out && j < nb; j++) memcpy(out + (size_t)(i0 + j) * nv, th_get_logits(c, j), (size_t)nv * 4);
    }
    return true;
}

static int read_prompt(int32_t *tok) {
    char *txt = check_read_file(DIR "prompt.txt", NULL);
    int n = 0;
    for (char *p = txt; p && *p && n < MAXT;) {
        tok[n++] = (int32_t)strtol(p, &p, 10);
        if (*p == ',') p++;
        else break;
    }
    free(txt);
    return n;
}

/* Tokens after the prompt: a fixed scramble inside the 512-token vocabulary. */
static void more_tokens(int32_t *tok, int from, int to) {
    for (int i = from; i < to; i++) tok[i] = 3 + (int32_t)(((uint32_t)i * 2654435761u >> 7) % 509u);
}

static void check_golden(const char *arch, double tol) {
    char gp[256];
    snprintf(gp, sizeof gp, DIR "%s.logits", arch);
    thlg g = { 0 };
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    CHECK(thlg_load(gp, &g), "golden %s", gp);
    int32_t tok[MAXT];
    int n = read_prompt(tok);
    CHECK(n == 64 && (uint32_t)n == g.n && (int)g.nv == th_model_n_vocab(m), "prompt %d, golden %u x %u", n, g.n, g.nv);
    CHECK(!memcmp(tok, g.tok, (size_t)n * 4), "golden tokens are prompt.txt");
    th_context *c = new_ctx(m, 64, 1, 0);
    float *out = malloc((size_t)n * g.nv * 4);
    if (c && out && n == (int)g.n && feed(c, 0, tok, n, n, out, (int)g.nv)) {
        double worst, top1;
        int wp;
        compare_logits(out, g.logits, n, (int)g.nv, &worst, &wp, &top1);
        printf("  %s vs ik_llama.cpp: worst rel L2 %.3g (position %d), top-1 %.3f\n", arch, worst, wp, top1);
        CHECK(worst <= tol && top1 >= 0.98, "%s: rel %.3g > %.3g or top1 %.3f", arch, worst, tol, top1);
    } else {
        CHECK(0, "forward pass");
    }
    free(out);
    th_context_free(c);
    thlg_free(&g);
    th_model_free(m);
}

/* ik_llama.cpp's V cache is F16 (its CPU backend refuses F32 without flash
 * attention); the DeltaNet layers never touch it. Measured 1.1e-4 / 7.4e-5. */
static void test_qwen35_golden(void) { check_golden("qwen35", 1e-3); }
static void test_qwen3next_golden(void) { check_golden("qwen3next", 1e-3); }
static void test_qwen35moe_golden(void) { check_golden("qwen35moe", 1e-3); }

/* The 64-token prompt in one batch then 64 decode steps == 128 tokens in one
 * batch == all 128 one token at a time (batch 1 runs the recurrent form alone). */
static void check_decode(const char *arch) {
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m), n = 128;
    int32_t tok[MAXT];
    int np = read_prompt(tok);
    more_tokens(tok, np, n);
    float *a = malloc((size_t)n * nv * 4), *b = malloc((size_t)n * nv * 4), *s = malloc((size_t)n * nv * 4);
    th_context *c1 = new_ctx(m, 128, 1, 0), *c2 = new_ctx(m, 128, 1, 0), *c3 = new_ctx(m, 1, 1, 0);
    bool ok = c1 && c2 && c3 && a && b && s && feed(c1, 0, tok, np, np, a, nv) &&
              feed(c1, 0, tok + np, n - np, 1, a + (size_t)np * nv, nv) && feed(c2, 0, tok, n, n, b, nv) &&
              feed(c3, 0, tok, n, 1, s, nv);
    CHECK(ok, "decodes");
    if (ok) {
        double w1, w2, t1, t2;
        int p1, p2;
        compare_logits(a, b, n, nv, &w1, &p1, &t1);
        compare_logits(s, b, n, nv, &w2, &p2, &t2);
        printf("  %s: prompt+decode vs one batch %.3g (pos %d); batch 1 vs one batch %.3g (pos %d)\n", arch, w1, p1, w2, p2);
        CHECK(w1 <= 1e-4 && w2 <= 1e-4, "%s: %.3g / %.3g", arch, w1, w2);
    }
    free(a); free(b); free(s);
    th_context_free(c1); th_context_free(c2); th_context_free(c3);
    th_model_free(m);
}

static void test_qwen35_decode(void) { check_decode("qwen35"); }
static void test_qwen3next_decode(void) { check_decode("qwen3next"); }
static void test_qwen35moe_decode(void) { check_decode("qwen35moe"); }

/* Three sequences of 21, 34 and 9 tokens interleaved in one ragged batch, then one
 * more token each in a second batch, equal each sequence decoded alone. */
static void check_ragged(const char *arch) {
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m);
    enum { NS = 3 };
    const int len[NS] = { 21, 34, 9 };
    int32_t tok[NS][MAXT];
    for (int s = 0; s < NS; s++) more_tokens(tok[s], 0, 40), tok[s][0] = 1 + s * 7, tok[s][3] = 100 + s;
    float *alone[NS], *mixed = malloc((size_t)(len[0] + len[1] + len[2] + NS) * nv * 4);
    bool ok = mixed != NULL;
    for (int s = 0; s < NS; s++) {
        alone[s] = malloc((size_t)(len[s] + 1) * nv * 4);
        th_context *c = new_ctx(m, 64, 1, 0);
        ok = ok && c && alone[s] && feed(c, 0, tok[s], len[s] + 1, len[s] + 1, alone[s], nv);
        th_context_free(c);
    }
    th_context *c = new_ctx(m, 64, NS, 0);
    int32_t bt[MAXT], bs[MAXT], row_seq[MAXT], row_pos[MAXT];
    int8_t want[MAXT];
    int nb = 0, done[NS] = { 0 };
    while (ok && nb < len[0] + len[1] + len[2])     /* round robin, so sequences interleave */
        for (int s = 0; s < NS; s++)
            if (done[s] < len[s]) { bt[nb] = tok[s][done[s]]; bs[nb] = s; row_seq[nb] = s; row_pos[nb] = done[s]++; want[nb++] = 1; }
    th_batch b = { .n_tokens = nb, .token = bt, .seq_id = bs, .logits = want };
    ok = ok && c && th_decode(c, &b) == TH_OK;
    double worst = 0;
    for (int i = 0; ok && i < nb; i++) {
        double r = rel_l2(th_get_logits(c, i), alone[row_seq[i]] + (size_t)row_pos[i] * nv, nv);
        if (!(r <= worst)) worst = r;
    }
    for (int s = 0; s < NS; s++) { bt[s] = tok[s][len[s]]; bs[s] = s; }
    th_batch b2 = { .n_tokens = NS, .token = bt, .seq_id = bs, .logits = want };
    ok = ok && th_decode(c, &b2) == TH_OK;
    for (int s = 0; ok && s < NS; s++) {
        double r = rel_l2(th_get_logits(c, s), alone[s] + (size_t)len[s] * nv, nv);
        if (!(r <= worst)) worst = r;
    }
    CHECK(ok, "decodes: %s", th_last_error());
    printf("  %s: ragged batch of 3 vs each alone: worst rel L2 %.3g\n", arch, worst);
    CHECK(worst <= 1e-5, "%s: %.3g", arch, worst);
    for (int s = 0; s < NS; s++) free(alone[s]);
    free(mixed);
    th_context_free(c);
    th_model_free(m);
}

static void test_qwen35_ragged(void) { check_ragged("qwen35"); }
static void test_qwen3next_ragged(void) { check_ragged("qwen3next"); }
static void test_qwen35moe_ragged(void) { check_ragged("qwen35moe"); }

/* Truncate: back 2 positions from a snapshot (4 kept) then on, equal to a fresh run;
 * back 10 refused with the length unchanged and decoding still right; to 0 then
 * again, equal to fresh. Copy: seq 1 := seq 0 at 40 tokens, both go on with
 * different tokens, each equal to a fresh run of its own tokens. */
static void test_qwen35_truncate_copy(void) {
    th_model *m = load("qwen35");
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m);
    int32_t tok[MAXT], alt[MAXT];
    more_tokens(tok, 0, 60);
    memcpy(alt, tok, sizeof tok);
    for (int i = 40; i < 60; i++) alt[i] = 3 + (i * 37) % 509;
    float *ref = malloc((size_t)60 * nv * 4), *ref_alt = malloc((size_t)60 * nv * 4), *got = malloc((size_t)20 * nv * 4);
    th_context *f = new_ctx(m, 64, 1, 0);
    bool ok = ref && ref_alt && got && f && feed(f, 0, tok, 60, 60, ref, nv);
    th_context_free(f);
    f = new_ctx(m, 64, 1, 0);
    ok = ok && f && feed(f, 0, alt, 60, 60, ref_alt, nv);
    th_context_free(f);
    th_context *c = new_ctx(m, 64, 2, 4);
    /* K/V only for the one attention layer of four; state 3 layers x (3·512 + 4·64·64) floats */
    CHECK(c && c->kv.n_layer == 1 && c->kv.layer_slot && c->kv.layer_slot[3] == 0 && c->kv.layer_slot[0] == -1,
          "KV layers %d", c ? c->kv.n_layer : -1);
    CHECK(c && th_rs_bytes_per_seq(&c->rs) == (size_t)3 * (3 * 512 + 4 * 64 * 64) * 4, "state bytes %zu",
          c ? th_rs_bytes_per_seq(&c->rs) : 0);
    ok = ok && c && feed(c, 0, tok, 40, 40, NULL, nv);
    /* back 2, from the snapshot at 38 */
    ok = ok && th_kv_seq_truncate(c, 0, 38) == TH_OK && th_kv_seq_len(c, 0) == 38;
    ok = ok && feed(c, 0, tok + 38, 8, 3, got, nv);
    double w = 0;
    for (int i = 0; ok && i < 8; i++) w = fmax(w, rel_l2(got + (size_t)i * nv, ref + (size_t)(38 + i) * nv, nv));
    CHECK(ok && w <= 1e-5, "truncate to a snapshot: %.3g (%s)", w, th_last_error());
    /* back 10: no snapshot */
    th_status s = ok ? th_kv_seq_truncate(c, 0, 36) : TH_OK;
    CHECK(s == TH_ERR_UNSUPPORTED && strstr(th_last_error(), "not kept"), "truncate without a snapshot: %d %s", s, th_last_error());
    CHECK(th_kv_seq_len(c, 0) == 46, "length kept after a refused truncate: %d", th_kv_seq_len(c, 0));
    ok = ok && feed(c, 0, tok + 46, 2, 2, got, nv);
    w = 0;
    for (int i = 0; ok && i < 2; i++) w = fmax(w, rel_l2(got + (size_t)i * nv, ref + (size_t)(46 + i) * nv, nv));
    CHECK(ok && w <= 1e-5, "after a refused truncate: %.3g", w);
    /* to 0 */
    ok = ok && th_kv_seq_truncate(c, 0, 0) == TH_OK && feed(c, 0, tok, 40, 40, NULL, nv);
    /* copy at 40; then seq 0 continues with tok, seq 1 with alt */
    ok = ok && th_kv_seq_copy(c, 1, 0) == TH_OK && th_kv_seq_len(c, 1) == 40;
    ok = ok && feed(c, 1, alt + 40, 10, 4, got + (size_t)10 * nv, nv) && feed(c, 0, tok + 40, 10, 10, got, nv);
    double w0 = 0, w1 = 0;
    for (int i = 0; ok && i < 10; i++) {
        w0 = fmax(w0, rel_l2(got + (size_t)i * nv, ref + (size_t)(40 + i) * nv, nv));
        w1 = fmax(w1, rel_l2(got + (size_t)(10 + i) * nv, ref_alt + (size_t)(40 + i) * nv, nv));
    }
    printf("  qwen35: after truncate to 0 + copy: seq 0 %.3g, seq 1 %.3g\n", w0, w1);
    CHECK(ok && w0 <= 1e-5 && w1 <= 1e-5, "copy: %.3g %.3g (%s)", w0, w1, th_last_error());
    /* the copy's snapshots: seq 1 back 1 position equals its own history */
    ok = ok && th_kv_seq_truncate(c, 1, 49) == TH_OK && feed(c, 1, alt + 49, 1, 1, got, nv);
    CHECK(ok && rel_l2(got, ref_alt + (size_t)49 * nv, nv) <= 1e-5, "seq 1 back one position");
    free(ref); free(ref_alt); free(got);
    th_context_free(c);
    th_model_free(m);
}

/* Hostile metadata: a copy of the qwen35 fixture with one ssm.* value changed (the
 * u32 after the key) is refused with an error naming the shape; the intact copy loads. */
static bool patched_load(const char *key, uint32_t val, th_model **m) {
    size_t n = 0;
    char *buf = check_read_file(DIR "qwen35-F32.gguf", &n);
    char *at = buf ? memmem(buf, n, key, strlen(key)) : NULL;
    bool ok = at && (size_t)(at - buf) + strlen(key) + 8 <= n;
    if (ok && val != UINT32_MAX) memcpy(at + strlen(key) + 4, &val, 4);   /* after the u32 type id */
    char path[] = "/tmp/th_hybrid_XXXXXX";
    int fd = ok ? mkstemp(path) : -1;
    ok = fd >= 0 && write(fd, buf, n) == (ssize_t)n;
    if (fd >= 0) close(fd);
    free(buf);
    *m = NULL;
    th_status s = ok ? th_model_load(path, NULL, m) : TH_ERR_IO;
    if (fd >= 0) unlink(path);
    return ok && s == TH_OK;
}

static void test_qwen35_bad_metadata(void) {
    th_model *m;
    CHECK(patched_load("qwen35.ssm.inner_size", UINT32_MAX, &m), "intact copy: %s", th_last_error());
    th_model_free(m);
    CHECK(!patched_load("qwen35.ssm.inner_size", 255, &m) && strstr(th_last_error(), "DeltaNet shape"), "%s", th_last_error());
    th_model_free(m);
    CHECK(!patched_load("qwen35.ssm.group_count", 3, &m) && strstr(th_last_error(), "DeltaNet shape"), "%s", th_last_error());
    th_model_free(m);
    CHECK(!patched_load("qwen35.ssm.conv_kernel", 5, &m) && strstr(th_last_error(), "ssm_conv1d"), "%s", th_last_error());
    th_model_free(m);
    CHECK(!patched_load("qwen35.ssm.state_size", 0, &m) && strstr(th_last_error(), "DeltaNet shape"), "%s", th_last_error());
    th_model_free(m);
}

/* A GPU context of a hybrid model: made where a GPU is present (the CUDA backend
 * runs the recurrent layers; tests/test_cuda_hybrid.c checks its logits), else
 * refused with a message naming the missing GPU. */
static void test_gpu_context(void) {
    th_model *m = load("qwen35");
    CHECK(m != NULL, "model");
    if (!m) return;
    char desc[256];
    bool gpu = th_gpu_available(desc, sizeof desc) == TH_OK;
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64;
    cp.gpu = true;
    th_context *c = NULL;
    th_status s = th_context_new(m, &cp, &c);
    if (gpu) CHECK(s == TH_OK, "GPU context of a hybrid model: %s", th_last_error());
    else CHECK(s != TH_OK && strstr(th_last_error(), "GPU"), "%d %s", s, th_last_error());
    th_context_free(c);
    th_model_free(m);
}

/* Speculative decoding (n-gram, same-file draft, layer skip) equals plain greedy
 * generation token for token (hyb_spec.h; rollback from the recurrent snapshots). */
static void test_qwen35_speculative(void) {
    hyb_check_speculative(load("qwen35"), load("qwen35"), false);
}

/* Every SIMD level's delta-rule step against the reference (th_op_dn_step) at awkward
 * head widths, over a few steps, with state entries that hit the ±1e6 clamp. */
static void test_dn_step_levels(void) {
    const int32_t dks[] = { 1, 7, 8, 13, 16, 40, 48, 64, 96, 128 };
    uint32_t r = 12345;
#define RND() ((r = r * 1664525u + 1013904223u), ((float)(r >> 8) / 16777216.0f) * 2.0f - 1.0f)
    int tested = 0;
    for (int lv = 0; lv < TH_LEVEL_COUNT; lv++) {
        if (lv == TH_LEVEL_GENERIC || !th_cpu_has_level(lv)) continue;
        th_kernels k;
        if (!th_kernels_fill(&k, lv)) continue;
        tested++;
        for (size_t di = 0; di < sizeof dks / sizeof dks[0]; di++) {
            int32_t dk = dks[di];
            size_t n = (size_t)dk * dk;
            float *S0 = malloc(n * 4), *S1 = malloc(n * 4), q[128], kk[128], v[128], o0[128], o1[128];
            for (size_t i = 0; i < n; i++) S0[i] = S1[i] = RND() * (i % 17 == 0 ? 2e6f : 3.0f);
            double worst = 0;
            for (int step = 0; step < 4; step++) {
                for (int32_t i = 0; i < dk; i++) { q[i] = RND(); kk[i] = RND(); v[i] = RND(); }
                float beta = 0.5f + 0.4f * RND(), decay = 0.6f + 0.3f * RND(), sc = 1.0f / sqrtf((float)dk);
                th_op_dn_step(dk, S0, q, kk, v, beta, decay, sc, o0);
                k.dn_step(dk, S1, q, kk, v, beta, decay, sc, o1);
                /* errors relative to the largest magnitude (FMA vs mul+add rounding of sums) */
                double mo = 1, ms = 1, eo = 0, es = 0;
                for (int32_t j = 0; j < dk; j++) { mo = fmax(mo, fabs(o0[j])); eo = fmax(eo, fabs(o0[j] - o1[j])); }
                for (size_t i = 0; i < n; i++) { ms = fmax(ms, fabs(S0[i])); es = fmax(es, fabs(S0[i] - S1[i])); }
                worst = fmax(worst, fmax(eo / mo, es / ms));
            }
            CHECK(worst <= 1e-5, "%s dk %d: %.3g", th_level_name(lv), dk, worst);
            free(S0); free(S1);
        }
    }
#undef RND
    if (!tested) SKIP("no SIMD level on this CPU");
}

/* The chunked delta rule (dn_chunk, chunks of TH_DN_CHUNK) of every level against
 * the token-by-token reference (th_op_dn_step) from the same start state, at awkward
 * lengths (1, 63, 64, 65, 200 tokens) and head widths, inputs as the model makes them
 * (q, k L2-normalised, beta in (0, 1), log decays in [-3, 0] and some at -40). */
static void test_dn_chunk_levels(void) {
    const int32_t dks[] = { 5, 16, 64, 128 }, lens[] = { 1, 63, 64, 65, 200 };
    uint32_t r = 777;
#define RND() ((r = r * 1664525u + 1013904223u), ((float)(r >> 8) / 16777216.0f) * 2.0f - 1.0f)
    for (int lv = 0; lv < TH_LEVEL_COUNT; lv++) {
        if (!th_cpu_has_level(lv)) continue;
        th_kernels k;
        if (!th_kernels_fill(&k, lv) || !k.dn_chunk) continue;
        for (size_t di = 0; di < sizeof dks / sizeof dks[0]; di++)
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                int32_t dk = dks[di], n = lens[li];
                size_t ns = (size_t)dk * dk;
                float *S0 = malloc(ns * 4), *S1 = malloc(ns * 4), *x = malloc((size_t)n * 3 * dk * 4);
                float *bg = malloc((size_t)n * 2 * 4), *o0 = malloc((size_t)n * dk * 4), *o1 = malloc((size_t)n * dk * 4);
                float *work = malloc((size_t)th_dn_chunk_work(dk, TH_DN_CHUNK) * 4);
                for (size_t i = 0; i < ns; i++) S0[i] = S1[i] = 0.5f * RND();
                for (int32_t t = 0; t < n; t++) {
                    for (int part = 0; part < 3; part++) {
                        float *y = x + ((size_t)t * 3 + part) * dk, ss = 0;
                        for (int32_t i = 0; i < dk; i++) { y[i] = RND(); ss += y[i] * y[i]; }
                        if (part < 2) for (int32_t i = 0; i < dk; i++) y[i] /= sqrtf(ss);
                    }
                    bg[2 * t] = 0.5f + 0.45f * RND();
                    bg[2 * t + 1] = t % 29 == 5 ? -40.0f : -1.5f + 1.5f * RND();
                }
                float sc = 1.0f / sqrtf((float)dk);
                for (int32_t t = 0; t < n; t++) {
                    const float *q = x + (size_t)t * 3 * dk;
                    th_op_dn_step(dk, S0, q, q + dk, q + 2 * dk, bg[2 * t], expf(bg[2 * t + 1]), sc, o0 + (size_t)t * dk);
                }
                for (int32_t t = 0; t < n; t += TH_DN_CHUNK) {
                    int32_t L = n - t < TH_DN_CHUNK ? n - t : TH_DN_CHUNK;
                    const float *q = x + (size_t)t * 3 * dk;
                    k.dn_chunk(dk, L, S1, q, q + dk, q + 2 * dk, 3 * dk, bg + 2 * t, bg + 2 * t + 1, 2, sc,
                               o1 + (size_t)t * dk, dk, work);
                }
                double eo = rel_l2(o1, o0, (size_t)n * dk), es = rel_l2(S1, S0, ns);
                CHECK(eo <= 2e-5 && es <= 2e-5, "%s dk %d, %d tokens: out %.3g, state %.3g", th_level_name(lv), dk, n, eo, es);
                if (dk == 128 && n == 200) printf("  %s dk 128, 200 tokens: out %.3g, state %.3g rel L2\n", th_level_name(lv), eo, es);
                free(S0); free(S1); free(x); free(bg); free(o0); free(o1); free(work);
            }
    }
#undef RND
}

int main(void) {
    RUN(test_qwen35_golden);
    RUN(test_qwen3next_golden);
    RUN(test_qwen35moe_golden);
    RUN(test_qwen35_decode);
    RUN(test_qwen3next_decode);
    RUN(test_qwen35moe_decode);
    RUN(test_qwen35_ragged);
    RUN(test_qwen3next_ragged);
    RUN(test_qwen35moe_ragged);
    RUN(test_qwen35_truncate_copy);
    RUN(test_qwen35_speculative);
    RUN(test_qwen35_bad_metadata);
    RUN(test_gpu_context);
    RUN(test_dn_step_levels);
    RUN(test_dn_chunk_levels);
    return CHECK_DONE();
}
