/* test_cuda_hybrid.c — the hybrid recurrent models (qwen35, qwen3next, qwen35moe:
 * Gated DeltaNet layers between gated attention layers) on the CUDA backend,
 * with the fixtures of tests/fixtures/hybrid (TH_HYBRID_DIR overrides where they
 * are). Without a GPU (or CUDA) every test prints "skipped". With one:
 *   - each fixture's 64-token prompt against ik_llama.cpp's golden (the CPU test's
 *     1e-3, test_hybrid.c) and against the CPU backend's logits, in three modes:
 *     one batch on the GEMM path, one batch on the GEMV path (a CUDA graph),
 *     token by token (graphs replayed), and the GEMM path with the chunked delta rule;
 *   - the prompt then 64 single-token steps equal to 128 tokens in one batch;
 *   - a ragged batch of three interleaved sequences (then one more token each)
 *     equal to each sequence alone;
 *   - truncate from a snapshot (back 2), refused without one (back 10, length and
 *     state unchanged), to 0; sequence copy (state and snapshots) — each against
 *     fresh runs of the same tokens;
 *   - speculative decoding through the runtime (n-gram, draft model, layer skip)
 *     gives plain greedy decoding's tokens (rollback from the device snapshots);
 *   - the delta rule's forms (recurrent, after the pre-pass, chunked) agree at the
 *     model level, and each equals a double-precision token recurrence at the
 *     kernel level (1..512 tokens, snapshots, a ragged batch). */
#include "cuda_test.h"
#include "hyb_spec.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef TH_CUDA
#include <cuda_runtime_api.h>
#include "cuda/kernels.h"
#include "cuda/deltanet.h"
#endif

#define MAXT 160

/* Batches of gemm_min tokens or more take the GEMM path (cuda/kernels.h). */
static void tune(int gemm_min) {
#ifdef TH_CUDA
    th_cu_tuning t = th_cu_tuning_default();
    t.gemm_min = gemm_min;
    th_cu_tuning_set(&t);
#else
    (void)gemm_min;
#endif
}

static const char *fx_path(const char *name, char *buf, size_t cap) {
    const char *d = getenv("TH_HYBRID_DIR");
    snprintf(buf, cap, "%s/%s", d && *d ? d : "tests/fixtures/hybrid", name);
    return buf;
}

static th_model *load(const char *arch) {
    char n[64], p[512];
    snprintf(n, sizeof n, "%s-F32.gguf", arch);
    th_model *m = NULL;
    if (th_model_load(fx_path(n, p, sizeof p), NULL, &m)) fprintf(stderr, "load %s: %s\n", p, th_last_error());
    return m;
}

static th_context *new_ctx(th_model *m, bool gpu, uint32_t n_batch, uint32_t n_seq, uint32_t snaps) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = n_batch;
    cp.n_seq_max = n_seq;
    cp.kv_type = TH_KV_F32;
    cp.n_threads = 2;
    cp.rs_snapshots = snaps;
    cp.gpu = gpu;
    th_context *c = NULL;
    if (th_context_new(m, &cp, &c)) fprintf(stderr, "context: %s\n", th_last_error());
    return c;
}

/* Decode tok[0..n) of sequence seq in chunks of `chunk`, every position's logits into out (or NULL). */
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

/* Tokens after the prompt: test_hybrid.c's scramble inside the 512-token vocabulary. */
static void more_tokens(int32_t *tok, int from, int to) {
    for (int i = from; i < to; i++) tok[i] = 3 + (int32_t)(((uint32_t)i * 2654435761u >> 7) % 509u);
}

static double worst_rel(const float *a, const float *b, int n, int nv) {
    double w, t;
    int p;
    compare_logits(a, b, n, nv, &w, &p, &t);
    return w;
}

/* The golden's prompt on the GPU in three modes, against the golden and the CPU. */
static void check_golden(const char *arch) {
    NEED_GPU();
    char gn[64], gp[512];
    snprintf(gn, sizeof gn, "%s.logits", arch);
    thlg g = { 0 };
    th_model *m = load(arch);
    CHECK(m != NULL && thlg_load(fx_path(gn, gp, sizeof gp), &g), "model and golden of %s", arch);
    if (!m || !g.n) { th_model_free(m); thlg_free(&g); return; }
    int n = (int)g.n, nv = (int)g.nv;
    float *cpu = malloc((size_t)n * nv * 4), *gpu = malloc((size_t)n * nv * 4);
    th_context *cc = new_ctx(m, false, 64, 1, 0);
    bool ok = cpu && gpu && cc && feed(cc, 0, g.tok, n, n, cpu, nv);
    th_context_free(cc);
    CHECK(ok, "CPU run");
    const char *modes[4] = { "gemm", "gemv", "tokens", "chunked" };   /* chunked: gemm, the chunked delta rule pinned */
    const int gemm_min[4] = { 1, 65, 33, 1 }, chunk[4] = { 64, 64, 1, 64 };
    for (int k = 0; ok && k < 4; k++) {
        tune(gemm_min[k]);
#ifdef TH_CUDA
        th_cu_dn_set_variant(k == 3 ? TH_CU_DN_CHUNK : TH_CU_DN_AUTO);
#endif
        th_context *c = new_ctx(m, true, 64, 1, 0);
        bool r = c && feed(c, 0, g.tok, n, chunk[k], gpu, nv);
        th_context_free(c);
#ifdef TH_CUDA
        th_cu_dn_set_variant(TH_CU_DN_AUTO);
#endif
        CHECK(r, "%s %s: %s", arch, modes[k], th_last_error());
        if (!r) continue;
        double wg, wc, top1;
        int pg;
        compare_logits(gpu, g.logits, n, nv, &wg, &pg, &top1);
        wc = worst_rel(gpu, cpu, n, nv);
        printf("  %-9s %-6s vs ik_llama.cpp %.3g (pos %d, top-1 %.3f), vs CPU %.3g\n", arch, modes[k], wg, pg, top1, wc);
        CHECK(wg <= 1e-3 && top1 >= 0.98, "%s %s: vs golden %.3g, top-1 %.3f", arch, modes[k], wg, top1);
        CHECK(wc <= 1e-4, "%s %s: vs CPU %.3g", arch, modes[k], wc);
    }
    tune(33);
    free(cpu); free(gpu);
    thlg_free(&g);
    th_model_free(m);
}

static void test_gpu_qwen35_golden(void) { check_golden("qwen35"); }
static void test_gpu_qwen3next_golden(void) { check_golden("qwen3next"); }
static void test_gpu_qwen35moe_golden(void) { check_golden("qwen35moe"); }

/* The golden's 64-token prompt then 64 single-token steps == 128 tokens in one batch. */
static void check_decode(const char *arch) {
    NEED_GPU();
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m), n = 128, np = 64;
    int32_t tok[MAXT];
    more_tokens(tok, 0, n);
    tok[0] = 1;
    float *a = malloc((size_t)n * nv * 4), *b = malloc((size_t)n * nv * 4);
    th_context *c1 = new_ctx(m, true, 128, 1, 0), *c2 = new_ctx(m, true, 128, 1, 0);
    bool ok = a && b && c1 && c2 && feed(c1, 0, tok, np, np, a, nv) && feed(c1, 0, tok + np, n - np, 1, a + (size_t)np * nv, nv) &&
              feed(c2, 0, tok, n, n, b, nv);
    CHECK(ok, "decodes");
    if (ok) {
        double w = worst_rel(a, b, n, nv);
        printf("  %s: prompt + 64 decode steps vs one batch of 128: %.3g\n", arch, w);
        CHECK(w <= 1e-4, "%s: %.3g", arch, w);
    }
    free(a); free(b);
    th_context_free(c1); th_context_free(c2);
    th_model_free(m);
}

static void test_gpu_qwen35_decode(void) { check_decode("qwen35"); }
static void test_gpu_qwen3next_decode(void) { check_decode("qwen3next"); }
static void test_gpu_qwen35moe_decode(void) { check_decode("qwen35moe"); }

/* Three sequences of 21, 34 and 9 tokens interleaved in one ragged batch, then one
 * more token each, equal each sequence alone (all on the GPU). */
static void check_ragged(const char *arch) {
    NEED_GPU();
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m);
    enum { NS = 3 };
    const int len[NS] = { 21, 34, 9 };
    int32_t tok[NS][MAXT];
    for (int s = 0; s < NS; s++) more_tokens(tok[s], 0, 40), tok[s][0] = 1 + s * 7, tok[s][3] = 100 + s;
    float *alone[NS] = { 0 };
    bool ok = true;
    for (int s = 0; s < NS; s++) {
        alone[s] = malloc((size_t)(len[s] + 1) * nv * 4);
        th_context *c = new_ctx(m, true, 64, 1, 0);
        ok = ok && c && alone[s] && feed(c, 0, tok[s], len[s] + 1, len[s] + 1, alone[s], nv);
        th_context_free(c);
    }
    th_context *c = new_ctx(m, true, 64, NS, 0);
    int32_t bt[MAXT], bs[MAXT], row_seq[MAXT], row_pos[MAXT];
    int8_t want[MAXT];
    int nb = 0, done[NS] = { 0 };
    while (ok && nb < len[0] + len[1] + len[2])
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
    CHECK(worst <= 1e-4, "%s: %.3g", arch, worst);
    for (int s = 0; s < NS; s++) free(alone[s]);
    th_context_free(c);
    th_model_free(m);
}

static void test_gpu_qwen35_ragged(void) { check_ragged("qwen35"); }
static void test_gpu_qwen3next_ragged(void) { check_ragged("qwen3next"); }
static void test_gpu_qwen35moe_ragged(void) { check_ragged("qwen35moe"); }

/* test_hybrid.c's truncate/copy sequence on the GPU, against fresh GPU runs. */
static void check_truncate_copy(const char *arch) {
    NEED_GPU();
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m);
    int32_t tok[MAXT], alt[MAXT];
    more_tokens(tok, 0, 60);
    memcpy(alt, tok, sizeof tok);
    for (int i = 40; i < 60; i++) alt[i] = 3 + (i * 37) % 509;
    float *ref = malloc((size_t)60 * nv * 4), *ref_alt = malloc((size_t)60 * nv * 4), *got = malloc((size_t)20 * nv * 4);
    th_context *f = new_ctx(m, true, 64, 1, 0);
    bool ok = ref && ref_alt && got && f && feed(f, 0, tok, 60, 60, ref, nv);
    th_context_free(f);
    f = new_ctx(m, true, 64, 1, 0);
    ok = ok && f && feed(f, 0, alt, 60, 60, ref_alt, nv);
    th_context_free(f);
    th_context *c = new_ctx(m, true, 64, 2, 4);
    ok = ok && c && feed(c, 0, tok, 40, 40, NULL, nv);
    ok = ok && th_kv_seq_truncate(c, 0, 38) == TH_OK && th_kv_seq_len(c, 0) == 38;   /* back 2, from a snapshot */
    ok = ok && feed(c, 0, tok + 38, 8, 3, got, nv);
    double w = 0;
    for (int i = 0; ok && i < 8; i++) w = fmax(w, rel_l2(got + (size_t)i * nv, ref + (size_t)(38 + i) * nv, nv));
    CHECK(ok && w <= 1e-4, "%s: truncate to a snapshot: %.3g (%s)", arch, w, th_last_error());
    th_status s = ok ? th_kv_seq_truncate(c, 0, 36) : TH_OK;   /* back 10: no snapshot */
    CHECK(s == TH_ERR_UNSUPPORTED && strstr(th_last_error(), "not kept"), "truncate without a snapshot: %d %s", s, th_last_error());
    CHECK(th_kv_seq_len(c, 0) == 46, "length kept after a refused truncate: %d", th_kv_seq_len(c, 0));
    ok = ok && feed(c, 0, tok + 46, 2, 2, got, nv);
    double w2 = 0;
    for (int i = 0; ok && i < 2; i++) w2 = fmax(w2, rel_l2(got + (size_t)i * nv, ref + (size_t)(46 + i) * nv, nv));
    CHECK(ok && w2 <= 1e-4, "%s: after a refused truncate: %.3g", arch, w2);
    ok = ok && th_kv_seq_truncate(c, 0, 0) == TH_OK && feed(c, 0, tok, 40, 40, NULL, nv);   /* to 0, again */
    ok = ok && th_kv_seq_copy(c, 1, 0) == TH_OK && th_kv_seq_len(c, 1) == 40;
    ok = ok && feed(c, 1, alt + 40, 10, 4, got + (size_t)10 * nv, nv) && feed(c, 0, tok + 40, 10, 10, got, nv);
    double w0 = 0, w1 = 0;
    for (int i = 0; ok && i < 10; i++) {
        w0 = fmax(w0, rel_l2(got + (size_t)i * nv, ref + (size_t)(40 + i) * nv, nv));
        w1 = fmax(w1, rel_l2(got + (size_t)(10 + i) * nv, ref_alt + (size_t)(40 + i) * nv, nv));
    }
    printf("  %s: truncate back 2 %.3g; after truncate to 0 + copy: seq 0 %.3g, seq 1 %.3g\n", arch, w, w0, w1);
    CHECK(ok && w0 <= 1e-4 && w1 <= 1e-4, "%s: copy: %.3g %.3g (%s)", arch, w0, w1, th_last_error());
    /* the copy's snapshots: seq 1 back one position equals its own history */
    ok = ok && th_kv_seq_truncate(c, 1, 49) == TH_OK && feed(c, 1, alt + 49, 1, 1, got, nv);
    CHECK(ok && rel_l2(got, ref_alt + (size_t)49 * nv, nv) <= 1e-4, "%s: seq 1 back one position", arch);
    free(ref); free(ref_alt); free(got);
    th_context_free(c);
    th_model_free(m);
}

static void test_gpu_qwen35_truncate_copy(void) { check_truncate_copy("qwen35"); }
static void test_gpu_qwen3next_truncate_copy(void) { check_truncate_copy("qwen3next"); }

/* The delta-rule forms (deltanet.h: recurrent, recurrent after the pre-pass,
 * chunked in two kernels and in one) at the model level: the same logits, prefill (80 tokens: one chunk of
 * 64 and a partial one of 16) and decode. */
static void check_variants(const char *arch) {
    NEED_GPU();
#ifdef TH_CUDA
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m), n = 80;
    int32_t tok[MAXT];
    more_tokens(tok, 0, n);
    enum { NF = 4 };
    const int var[NF] = { TH_CU_DN_STEP, TH_CU_DN_STEP_PREP, TH_CU_DN_CHUNK, TH_CU_DN_CHUNK1 };
    float *lg[NF][2];
    bool ok = true;
    for (int v = 0; v < NF; v++) {
        th_cu_dn_set_variant(var[v]);
        for (int k = 0; k < 2; k++) {   /* one batch (GEMM path), token by token (graphs) */
            lg[v][k] = malloc((size_t)n * nv * 4);
            th_context *c = new_ctx(m, true, 128, 1, 0);
            ok = ok && lg[v][k] && c && feed(c, 0, tok, n, k ? 1 : n, lg[v][k], nv);
            th_context_free(c);
        }
    }
    th_cu_dn_set_variant(TH_CU_DN_AUTO);
    CHECK(ok, "decodes: %s", th_last_error());
    for (int v = 1; ok && v < NF; v++) {
        double wb = worst_rel(lg[v][0], lg[0][0], n, nv), wt = worst_rel(lg[v][1], lg[0][1], n, nv);
        printf("  %s: delta-rule form %d vs the recurrent one: batch %.3g, tokens %.3g\n", arch, var[v], wb, wt);
        CHECK(wb <= 1e-5 && wt <= 1e-5, "%s form %d: %.3g %.3g", arch, var[v], wb, wt);
    }
    for (int v = 0; v < NF; v++) free(lg[v][0]), free(lg[v][1]);
    th_model_free(m);
#else
    (void)arch;
#endif
}

static void test_gpu_qwen35_variants(void) { check_variants("qwen35"); }
static void test_gpu_qwen3next_variants(void) { check_variants("qwen3next"); }

#ifdef TH_CUDA
/* The delta rule alone: random inputs (q, k, v uniform in ±1, raw beta/alpha in ±2,
 * dt in ±0.5, A = −exp(±1), a random start state in ±0.3) for a batch of n tokens
 * of n_seq sequences (seq), snapshot slots snapv (or -1), through th_cu_dn_rule
 * under form `var`; outputs, end states and snapshots back to the host. The
 * reference is the token recurrence (th_op_dn_step's arithmetic, docs/hybrid.md)
 * in double, written here. */
typedef struct { int dk, nk, nv, n, n_seq, n_snap; bool repeat; const int32_t *seq, *snapv; } dn_case;

static uint32_t dn_rng = 12345u;
static float dn_uni(float lo, float hi) {
    dn_rng = dn_rng * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(dn_rng >> 8) / 16777216.0f;
}

typedef struct { float *u, *ba, *dt, *A, *s0; } dn_inputs;

static void dn_make(const dn_case *k, dn_inputs *x) {
    int64_t kd = (int64_t)k->dk * k->nk, vd = (int64_t)k->dk * k->nv, cd = 2 * kd + vd, per = vd * k->dk;
    x->u = malloc((size_t)(k->n * cd) * 4);
    x->ba = malloc((size_t)(k->n * 2 * k->nv) * 4);
    x->dt = malloc((size_t)k->nv * 4);
    x->A = malloc((size_t)k->nv * 4);
    x->s0 = malloc((size_t)(k->n_seq * per) * 4);
    for (int64_t i = 0; i < k->n * cd; i++) x->u[i] = dn_uni(-1, 1);
    for (int64_t i = 0; i < k->n * 2 * k->nv; i++) x->ba[i] = dn_uni(-2, 2);
    for (int h = 0; h < k->nv; h++) x->dt[h] = dn_uni(-0.5f, 0.5f), x->A[h] = -expf(dn_uni(-1, 1));
    for (int64_t i = 0; i < k->n_seq * per; i++) x->s0[i] = dn_uni(-0.3f, 0.3f);
}

static void dn_free_in(dn_inputs *x) { free(x->u); free(x->ba); free(x->dt); free(x->A); free(x->s0); }

/* The double recurrence: out (n × Vd), states (n_seq × per), snapshots (n_snap × per). */
static void dn_reference(const dn_case *k, const dn_inputs *x, double *out, double *S, double *snaps) {
    int dk = k->dk, nv = k->nv;
    int64_t kd = (int64_t)dk * k->nk, vd = (int64_t)dk * nv, cd = 2 * kd + vd, per = vd * dk;
    for (int64_t i = 0; i < k->n_seq * per; i++) S[i] = x->s0[i];
    double q[256], kk[256], vp[256];
    for (int t = 0; t < k->n; t++)
        for (int h = 0; h < nv; h++) {
            int kh = k->repeat ? h % k->nk : h / (nv / k->nk);
            const float *row = x->u + t * cd;
            double sq = 0, sk = 0;
            for (int i = 0; i < dk; i++) {
                q[i] = row[kh * dk + i];
                kk[i] = row[kd + kh * dk + i];
                sq += q[i] * q[i];
                sk += kk[i] * kk[i];
            }
            double rq = 1 / fmax(sqrt(sq), 1e-6), rk = 1 / fmax(sqrt(sk), 1e-6);
            for (int i = 0; i < dk; i++) q[i] *= rq, kk[i] *= rk;
            double b = x->ba[t * 2 * nv + h], a = x->ba[t * 2 * nv + nv + h] + x->dt[h];
            double beta = 1 / (1 + exp(-b)), sp = a > 20 ? a : log1p(exp(a)), decay = exp(fmin(sp * x->A[h], 50.0));
            double *Sh = S + k->seq[t] * per + (int64_t)h * dk * dk;
            for (int j = 0; j < dk; j++) {
                vp[j] = 0;
                for (int i = 0; i < dk; i++) vp[j] += Sh[i * dk + j] * kk[i];
            }
            for (int j = 0; j < dk; j++) {
                double nw = beta * (row[2 * kd + h * dk + j] - decay * vp[j]), o = 0;
                for (int i = 0; i < dk; i++) {
                    Sh[i * dk + j] = decay * Sh[i * dk + j] + kk[i] * nw;
                    o += Sh[i * dk + j] * q[i];
                }
                out[t * vd + h * dk + j] = o / sqrt((double)dk);
            }
            if (k->snapv[t] >= 0)
                memcpy(snaps + k->snapv[t] * per + (int64_t)h * dk * dk, Sh, (size_t)dk * dk * sizeof(double));
        }
}

static double rel_d(const float *a, const double *b, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
    return sqrt(e / (r > 0 ? r : 1));
}

/* One form on the device; false on a CUDA error. */
static bool dn_device(const dn_case *k, const dn_inputs *x, int var, float *out, float *S, float *snaps) {
    int dk = k->dk, nv = k->nv, n = k->n;
    int64_t kd = (int64_t)dk * k->nk, vd = (int64_t)dk * nv, cd = 2 * kd + vd, per = vd * dk;
    float *du = NULL, *dba = NULL, *ddt = NULL, *dA = NULL, *dcur = NULL, *dsnap = NULL, *dscr = NULL, *dout = NULL, *dwy = NULL;
    int32_t *dm = NULL, *hm = malloc((size_t)10 * n * 4), *last = malloc((size_t)k->n_seq * 4);
    bool ok = hm && last;
    ok = ok && !cudaMalloc((void **)&du, (size_t)(n * cd) * 4) && !cudaMalloc((void **)&dba, (size_t)(n * 2 * nv) * 4) &&
         !cudaMalloc((void **)&ddt, (size_t)nv * 4) && !cudaMalloc((void **)&dA, (size_t)nv * 4) &&
         !cudaMalloc((void **)&dcur, (size_t)(k->n_seq * per) * 4) &&
         !cudaMalloc((void **)&dsnap, (size_t)((k->n_snap ? k->n_snap : 1) * per) * 4) &&
         !cudaMalloc((void **)&dscr, (size_t)(n * (k->nk + 3 * nv)) * 4) && !cudaMalloc((void **)&dout, (size_t)(n * vd) * 4) &&
         !cudaMalloc((void **)&dwy, (size_t)(n * TH_CU_DN_WY_FLOATS(vd, nv)) * 4) && !cudaMalloc((void **)&dm, (size_t)10 * n * 4);
    int max_run = 0;
    th_cu_dn_order_out oo = { 0 };
    if (ok) {
        for (int q = 0; q < k->n_seq; q++) last[q] = -1;
        memcpy(hm, k->seq, (size_t)n * 4);
        memcpy(hm + n, k->snapv, (size_t)n * 4);
        oo = (th_cu_dn_order_out){ hm + 2 * n, hm + 3 * n, hm + 4 * n, hm + 5 * n, hm + 6 * n, hm + 7 * n, hm + 8 * n, hm + 9 * n, 0 };
        max_run = th_cu_dn_order(n, k->seq, k->snapv, last, &oo);
        ok = !cudaMemcpy(du, x->u, (size_t)(n * cd) * 4, cudaMemcpyHostToDevice) &&
             !cudaMemcpy(dba, x->ba, (size_t)(n * 2 * nv) * 4, cudaMemcpyHostToDevice) &&
             !cudaMemcpy(ddt, x->dt, (size_t)nv * 4, cudaMemcpyHostToDevice) &&
             !cudaMemcpy(dA, x->A, (size_t)nv * 4, cudaMemcpyHostToDevice) &&
             !cudaMemcpy(dcur, x->s0, (size_t)(k->n_seq * per) * 4, cudaMemcpyHostToDevice) &&
             !cudaMemcpy(dm, hm, (size_t)10 * n * 4, cudaMemcpyHostToDevice);
    }
    if (ok) {
        th_cu_dn d = { .dk = dk, .nk = k->nk, .nv = nv, .C = 4, .ratio = nv / k->nk, .kd = kd, .vd = vd, .cd = cd,
                       .repeat = k->repeat, .eps = 1e-6f, .dt = ddt, .A = dA, .cur = dcur, .snap = dsnap, .per_seq = per,
                       .scratch = dscr, .wy = dwy };
        th_cu_dn_batch b = { .seq = dm, .snap = dm + n, .list = dm + 2 * n, .first = dm + 3 * n, .nxt = dm + 4 * n,
                             .ord = dm + 5 * n, .off = dm + 6 * n, .ch_start = dm + 7 * n, .ch_len = dm + 8 * n,
                             .ch_off = dm + 9 * n, .n_chunk = oo.n_chunk, .n = n, .n_seq = k->n_seq, .max_run = max_run };
        cudaStream_t st = NULL;
        ok = !cudaStreamCreate(&st);
        th_cu_dn_set_variant(var);
        if (ok) th_cu_dn_rule(&d, du, dba, 2 * nv, &b, dout, vd, st);
        th_cu_dn_set_variant(TH_CU_DN_AUTO);
        cudaError_t e = ok ? cudaStreamSynchronize(st) : cudaErrorUnknown;
        if (st) cudaStreamDestroy(st);
        if (e) fprintf(stderr, "delta rule: %s\n", cudaGetErrorString(e));
        ok = !e && !cudaMemcpy(out, dout, (size_t)(n * vd) * 4, cudaMemcpyDeviceToHost) &&
             !cudaMemcpy(S, dcur, (size_t)(k->n_seq * per) * 4, cudaMemcpyDeviceToHost) &&
             (!k->n_snap || !cudaMemcpy(snaps, dsnap, (size_t)(k->n_snap * per) * 4, cudaMemcpyDeviceToHost));
    }
    cudaFree(du); cudaFree(dba); cudaFree(ddt); cudaFree(dA); cudaFree(dcur); cudaFree(dsnap); cudaFree(dscr);
    cudaFree(dout); cudaFree(dwy); cudaFree(dm);
    free(hm); free(last);
    return ok;
}

/* Each form against the double recurrence, and the chunked one against the
 * recurrent GPU kernel: outputs, end states, snapshots within 1e-5 relative (L2
 * over the whole array). Why 1e-5: the fp32 recurrence itself drifts from the
 * double one by ~1e-6 over 512 tokens; the chunked form reassociates the same sums
 * (products of up to 64 decays from a double log sum, a 64-row triangular solve),
 * a few ulps more per chunk, far from the 1e-3 the model goldens need. */
static void check_dn_case(const char *name, const dn_case *k) {
    int64_t vd = (int64_t)k->dk * k->nv, per = vd * k->dk;
    dn_inputs x;
    dn_make(k, &x);
    double *ro = malloc((size_t)(k->n * vd) * 8), *rs = malloc((size_t)(k->n_seq * per) * 8),
           *rn = malloc((size_t)((k->n_snap ? k->n_snap : 1) * per) * 8);
    dn_reference(k, &x, ro, rs, rn);
    enum { NF = 4 };
    float *o[NF], *S[NF], *sn[NF];
    const int var[NF] = { TH_CU_DN_STEP, TH_CU_DN_STEP_PREP, TH_CU_DN_CHUNK, TH_CU_DN_CHUNK1 };
    for (int v = 0; v < NF; v++) {
        o[v] = malloc((size_t)(k->n * vd) * 4);
        S[v] = malloc((size_t)(k->n_seq * per) * 4);
        sn[v] = malloc((size_t)((k->n_snap ? k->n_snap : 1) * per) * 4);
        bool ok = o[v] && S[v] && sn[v] && dn_device(k, &x, var[v], o[v], S[v], sn[v]);
        CHECK(ok, "%s form %d ran", name, var[v]);
        if (!ok) continue;
        double eo = rel_d(o[v], ro, k->n * vd), es = rel_d(S[v], rs, k->n_seq * per),
               en = k->n_snap ? rel_d(sn[v], rn, k->n_snap * per) : 0;
        printf("  %-26s form %d vs double: out %.2g state %.2g snapshots %.2g\n", name, var[v], eo, es, en);
        CHECK(eo <= 1e-5 && es <= 1e-5 && en <= 1e-5, "%s form %d: %.3g %.3g %.3g", name, var[v], eo, es, en);
    }
    for (int v = 2; v < NF; v++) {
        double co = 0, cs = 0;
        for (int64_t i = 0; i < k->n * vd; i++) co = fmax(co, fabs(o[v][i] - o[0][i]) / (fabs(ro[i]) + 1e-3));
        for (int64_t i = 0; i < k->n_seq * per; i++) cs = fmax(cs, fabs(S[v][i] - S[0][i]) / (fabs(rs[i]) + 1e-3));
        printf("  %-26s form %d vs recurrent GPU: worst element out %.2g state %.2g (relative, +1e-3 floor)\n", name, var[v], co, cs);
        CHECK(co <= 1e-3 && cs <= 1e-3, "%s: form %d vs recurrent %.3g %.3g", name, var[v], co, cs);
    }
    for (int v = 0; v < NF; v++) free(o[v]), free(S[v]), free(sn[v]);
    free(ro); free(rs); free(rn);
    dn_free_in(&x);
}
#endif

/* The chunked delta rule at 1, 63, 64, 65, 200 and 512 tokens (partial, whole and
 * several chunks), head widths 64 (the fixtures') and 128 (Qwen3.5's), both k-head
 * mappings; snapshots inside a prompt (chunks end there); a ragged batch of three
 * interleaved sequences of 150, 37 and 90 tokens with their own states. */
static void test_gpu_dn_chunk_kernel(void) {
    NEED_GPU();
#ifdef TH_CUDA
    static int32_t seq[512], snapv[512];
    const int lens[6] = { 1, 63, 64, 65, 200, 512 };
    for (int w = 0; w < 2; w++) {
        int dk = w ? 128 : 64;
        for (int c = 0; c < 6; c++) {
            int n = lens[c], ns = 0;
            for (int t = 0; t < n; t++) seq[t] = 0, snapv[t] = -1;
            if (n == 200) snapv[70] = ns++, snapv[198] = ns++, snapv[199] = ns++;
            dn_case k = { .dk = dk, .nk = 2, .nv = 4, .n = n, .n_seq = 1, .n_snap = ns, .repeat = w == 1, .seq = seq, .snapv = snapv };
            char name[64];
            snprintf(name, sizeof name, "dk %d, %d tokens%s", dk, n, ns ? " + snaps" : "");
            check_dn_case(name, &k);
        }
        int len[3] = { 150, 37, 90 }, done[3] = { 0 }, n = 0;
        for (int r = 0; n < 277; r++)
            for (int s = 0; s < 3; s++)
                for (int j = 0; j < 1 + (r + s) % 5 && done[s] < len[s]; j++) seq[n] = s, snapv[n++] = -1, done[s]++;
        dn_case k = { .dk = dk, .nk = 2, .nv = 4, .n = n, .n_seq = 3, .n_snap = 0, .repeat = w == 1, .seq = seq, .snapv = snapv };
        char name[64];
        snprintf(name, sizeof name, "dk %d, ragged 150+37+90", dk);
        check_dn_case(name, &k);
    }
#endif
}

/* test_hybrid.c's speculative check on the GPU: greedy generation through the
 * runtime with n-gram, same-file draft and layer-skip drafts equals plain greedy
 * generation (rejected drafts roll the device state back from its snapshots). */
static void test_gpu_qwen35_speculative(void) {
    NEED_GPU();
    hyb_check_speculative(load("qwen35"), load("qwen35"), true);
}

int main(void) {
    RUN(test_gpu_qwen35_golden);
    RUN(test_gpu_qwen3next_golden);
    RUN(test_gpu_qwen35moe_golden);
    RUN(test_gpu_qwen35_decode);
    RUN(test_gpu_qwen3next_decode);
    RUN(test_gpu_qwen35moe_decode);
    RUN(test_gpu_qwen35_ragged);
    RUN(test_gpu_qwen3next_ragged);
    RUN(test_gpu_qwen35moe_ragged);
    RUN(test_gpu_qwen35_truncate_copy);
    RUN(test_gpu_qwen3next_truncate_copy);
    RUN(test_gpu_qwen35_speculative);
    RUN(test_gpu_qwen35_variants);
    RUN(test_gpu_qwen3next_variants);
    RUN(test_gpu_dn_chunk_kernel);
    return CHECK_DONE();
}
