/* test_cuda.c — the CUDA backend. Without a GPU (or in a build without CUDA)
 * every GPU test prints "skipped: no GPU" and the no-GPU behaviour is checked
 * instead (a clear error from a --gpu context; the CPU still works).
 * With a GPU:
 *   - each matrix kernel (every weight type; GEMV and MoE GEMV at 1..11 tokens,
 *     GEMM, the grouped expert GEMM of MoE prefill) against the CPU reference
 *     on random inputs of awkward sizes (rows not a multiple of the tile, K not
 *     a multiple of the vector width where the type allows); the int8 kernels
 *     also against float64 on the same q8_0 activations;
 *     the fp32 dequantization (embedding lookup) bit for bit against the reference's;
 *   - the int8 MMA kernel (mma_q8.cu) of every type it has at 2..256 tokens against
 *     float64 on the same q8_0 activations;
 *   - attention over a paged cache (blocks in reverse order) against a float64
 *     reference, with GQA, sliding window, softcap, sinks, F16/F32 KV, forced splits;
 *   - the whole forward pass against llama.cpp's tiny goldens (all 15 types
 *     present under $SHARED/fixtures/tiny) with the CPU tolerances, through the
 *     GEMV path (one batch), the GEMM path, and token by token (CUDA graphs);
 *   - a ragged multi-sequence batch with copy-on-write prefix sharing against
 *     the CPU backend;
 *   - every per-architecture fixture (arch/, incl. the MoE ones, the MLA ones
 *     (deepseek2*) and the Q8_0 copies) against its golden with test_arch.c's
 *     tolerances, in the same three modes (test_gpu_arch_N; a refusal fails);
 *     in GEMM mode the MoE experts take the grouped expert GEMM, and the MoE
 *     fixtures run a fourth mode, GEMM with the tuning's moe_gemv_only (per-pair GEMV experts);
 *   - the device argmax kernel on rows of awkward lengths and alignments (ties,
 *     NaN, ±inf) against the documented rule, and logits_argmax_only contexts
 *     against full-logits GPU contexts (prompt, greedy decode, ragged batches,
 *     a model whose logits tie in pairs);
 * MoE batches, per-expert types and live precision swaps on the GPU: test_cuda_moe.c;
 * the hybrid recurrent models: test_cuda_hybrid.c. */
#include "cuda_test.h"
#include <float.h>
#include <stdint.h>
#include <unistd.h>
#ifdef TH_CUDA
#include "cuda/kernels.h"
#include "quant/quant.h"
#endif

/* The CUDA backend's test settings (cuda/kernels.h, th_cu_tuning), read by each
 * new context: batches of gemm_min tokens or more take the GEMM path; moe_gemv:
 * MoE experts as per-pair GEMVs there too. No-ops in a build without CUDA. */
/* F16/BF16 products for the goldens (test_golden_float): 0 the defaults (cuBLAS on the
 * weights in place from 2 tokens, graphs included), 1 mma_f16.cu from 2 tokens, 2 the
 * fp32-math GEMV at every batch size below the GEMM path */
static int f16_path = 0;
static void tune(int gemm_min, bool moe_gemv) {
#ifdef TH_CUDA
    th_cu_tuning t = th_cu_tuning_default();
    t.gemm_min = gemm_min;
    t.moe_gemv_only = moe_gemv;
    if (f16_path == 1) { t.mma_f16 = true; t.mma_min = 2; t.mma_max = 128; }
    if (f16_path == 2) t.f16_cublas_min = 0;
    th_cu_tuning_set(&t);
#else
    (void)gemm_min; (void)moe_gemv;
#endif
}
static void tune_reset(void) { tune(33, false); }

/* ------------------------------------------------------------------ helpers */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
__attribute__((unused)) static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* relative L2 error of a against a float64 reference (NaN anywhere: infinite) */
__attribute__((unused)) static double rel_l2_ref(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return INFINITY;
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* ------------------------------------------------------------------ no GPU */

/* Without a GPU: asking for one fails with a message that says so; the CPU runs. */
static void test_no_gpu_message(void) {
    if (have_gpu()) SKIP("a GPU is present (%s)", gpu_desc);
    printf("  skipped: no GPU (%s)\n", th_last_error());
    th_model *m;
    if (th_model_load(fixture("tiny/tiny-Q8_0.gguf"), NULL, &m)) SKIP("fixture missing: %s", th_last_error());
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 32; cp.n_threads = 1; cp.gpu = true;
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) != TH_OK && c == NULL, "a GPU context without a GPU must fail");
    const char *e = th_last_error();
    CHECK(strstr(e, "GPU") || strstr(e, "CUDA"), "error should say why: %s", e);
    cp.gpu = false;
    CHECK(th_context_new(m, &cp, &c) == TH_OK, "the CPU must still work: %s", th_last_error());
    int32_t tok[3] = { 1, 450, 439 };
    th_batch b = { .n_tokens = 3, .token = tok };
    CHECK(c && th_decode(c, &b) == TH_OK, "%s", th_last_error());
    th_context_free(c);
    th_model_free(m);
}

#ifdef TH_CUDA
/* ------------------------------------------------------------------ kernels */

static const uint32_t all_types[] = { TH_F32, TH_F16, TH_BF16, TH_Q4_0, TH_Q4_1, TH_Q5_0, TH_Q5_1, TH_Q8_0,
                                      TH_Q2_K, TH_Q3_K, TH_Q4_K, TH_Q5_K, TH_Q6_K, TH_IQ4_NL, TH_IQ4_XS, TH_MXFP4,
                                      TH_Q2, TH_Q3, TH_Q4, TH_Q5, TH_Q6, TH_Q7, TH_Q8,     /* qN: K a multiple of 64 */
                                      TH_TQ1_0, TH_TQ2_0, TH_Q1_0_G128, TH_IQ1_BN, TH_IQ2_BN };   /* 1-bit / ternary */

/* th_cu_dequant_rows, both layouts, against the reference dequantization: to fp32
 * (the embedding lookup's decoder) bit for bit, except for the types whose weight is
 * d·q + m (the GPU may fuse that into one rounding): within 1e-6 of the row's largest;
 * to fp16 (the GEMM path's tiles) equal to the reference value rounded to fp16, the
 * fused types within one fp16 step of it (a 1-ulp fp32 difference can round the other way). */
static void check_dequant(uint32_t type, const uint8_t *wq, const float *wd, int64_t rows, int64_t K) {
    bool fused = type == TH_Q4_1 || type == TH_Q5_1 || type == TH_Q4_K || type == TH_Q5_K;
    float *out = malloc((size_t)rows * K * 4);
    uint16_t *o16 = malloc((size_t)rows * K * 2);
    for (int gg = 0; gg < (th_cu_type_splittable(type) ? 2 : 1); gg++) {
        const char *e = th_cu_test_dequant(type, wq, rows, K, gg == 1, false, out);
        CHECK(!e, "%s dequant: %s", th_type_name(type), e);
        const char *e16 = e ? e : th_cu_test_dequant(type, wq, rows, K, gg == 1, true, o16);
        CHECK(!e16, "%s dequant to fp16: %s", th_type_name(type), e16);
        if (e || e16) continue;
        int64_t bad = 0, bad16 = 0;
        for (int64_t r = 0; r < rows; r++) {
            double amax = 0;
            for (int64_t k = 0; k < K; k++) amax = fmax(amax, fabs(wd[r * K + k]));
            for (int64_t k = 0; k < K; k++) {
                const float *a = &out[r * K + k], *b = &wd[r * K + k];
                bad += fused ? !(fabs((double)*a - *b) <= 1e-6 * amax) : memcmp(a, b, 4) != 0;
                uint16_t want = th_f32_to_f16(*b), got = o16[r * K + k];
                if (fused) {
                    double step = fmax(fabs((double)th_f16_to_f32(want)) / 1024.0, 1.0 / 16777216.0);
                    bad16 += !(fabs((double)th_f16_to_f32(got) - th_f16_to_f32(want)) <= step);
                } else {
                    bad16 += got != want;
                }
            }
        }
        CHECK(bad == 0, "%s dequant %s: %lld of %lld weights differ from the reference", th_type_name(type),
              gg ? "gguf" : "split", (long long)bad, (long long)(rows * K));
        CHECK(bad16 == 0, "%s dequant to fp16 %s: %lld of %lld weights differ from the reference's rounding",
              th_type_name(type), gg ? "gguf" : "split", (long long)bad16, (long long)(rows * K));
    }
    free(out);
    free(o16);
}

/* Random weights of a type: wf (rows × K, scratch) quantized by the reference,
 * or random blocks with small fp16 scales for a type it cannot quantize; wq the
 * rows (rb bytes each), wd their reference dequantization. */
static void random_weights(uint32_t type, int64_t rows, int64_t K, uint64_t rb, float *wf, uint8_t *wq, float *wd) {
    for (int64_t i = 0; i < rows * K; i++) wf[i] = frand() * (1.0f + (float)(i % 7));
    if (th_ref_can_quantize(type)) {
        for (int64_t r = 0; r < rows; r++) th_ref_quantize(type, wf + r * K, wq + r * rb, K);
    } else { /* no reference quantizer: random blocks with small fp16 scales */
        for (size_t i = 0; i < (size_t)rows * rb; i++) wq[i] = (uint8_t)(frand() * 128.0f + 128.0f);
        const th_type_info *ti = th_type_info_get(type);
        size_t d_at = type == TH_Q2_K ? 80 : type == TH_Q3_K ? 108 : type == TH_Q6_K ? 208 : 0;
        bool has_min = type == TH_Q2_K || type == TH_Q4_K || type == TH_Q5_K;
        for (size_t b = 0; b < (size_t)rows * rb; b += ti->bytes) {
            uint16_t d = th_f32_to_f16(0.01f + 0.01f * frand());
            memcpy(wq + b + d_at, &d, 2);
            if (has_min) memcpy(wq + b + d_at + 2, &d, 2);
        }
    }
    for (int64_t r = 0; r < rows; r++) th_ref_dequantize(type, wq + r * rb, wd + r * K, K);   /* by row: IQ*_BN's row scale */
}

/* One type: random weights quantized by the reference, GPU product vs the
 * float64 product of the reference-dequantized weights. */
static void check_matmul_type(uint32_t type, int64_t rows, int64_t K) {
    uint64_t rb;
    if (!th_row_bytes(type, (uint64_t)K, &rb)) { CHECK(0, "%s: K %lld", th_type_name(type), (long long)K); return; }
    const int max_n = 40;
    float *wf = malloc((size_t)rows * K * 4), *wd = malloc((size_t)rows * K * 4);
    uint8_t *wq = malloc((size_t)rows * rb);
    float *x = malloc((size_t)max_n * K * 4), *y = malloc((size_t)max_n * rows * 4);
    double *ref = malloc((size_t)max_n * rows * 8);
    random_weights(type, rows, K, rb, wf, wq, wd);
    check_dequant(type, wq, wd, rows, K);
    for (int64_t i = 0; i < max_n * K; i++) x[i] = frand();
    for (int t = 0; t < max_n; t++)
        for (int64_t r = 0; r < rows; r++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (double)wd[r * K + k] * x[t * K + k];
            ref[t * rows + r] = s;
        }
    bool q8 = th_cu_type_splittable(type); /* split layout + int8 kernels on q8 activations */
    /* the 1-bit / ternary types: file layout, and their dense GEMV (path 0) reads q8 activations too */
    const bool tern = type == TH_TQ1_0 || type == TH_TQ2_0 || type == TH_Q1_0_G128 || type == TH_IQ1_BN || type == TH_IQ2_BN;
    /* fp32 math: ~1e-6; q8 activations: ~1/127 per block; 16-bit GEMM inputs: ~1e-3 */
    double tol_gemv_f = 1e-5, tol_q8 = 2e-2, tol_gemm = type == TH_F32 ? 1e-5 : type == TH_BF16 ? 1e-2 : 4e-3;
    const int ns[] = { 1, 3, 8, 11 };
    double worst = 0;
    for (int path = 0; path <= 2; path += 2)  /* the GEMV, the MoE GEMV */
        for (int gg = 0; gg < (q8 ? 2 : 1); gg++)
            for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
                const char *pn = path ? "moe gemv" : "gemv", *e = th_cu_test_matmul(type, wq, rows, K, x, ns[i], y, path, gg == 1);
                CHECK(!e, "%s %s: %s", th_type_name(type), pn, e);
                if (e) continue;
                double r = rel_l2_ref(y, ref, (size_t)ns[i] * rows);
                double tol = (q8 && gg == 0) || (tern && path == 0) ? tol_q8 : tol_gemv_f;
                if (r > worst) worst = r;
                CHECK(r <= tol, "%s %s n=%d %s: rel-L2 %.3e > %.1e", th_type_name(type), pn, ns[i], gg ? "gguf" : "split", r, tol);
            }
    const char *e = th_cu_test_matmul(type, wq, rows, K, x, max_n, y, 1, false);
    CHECK(!e, "%s gemm: %s", th_type_name(type), e);
    double rg = e ? INFINITY : rel_l2_ref(y, ref, (size_t)max_n * rows);
    CHECK(rg <= tol_gemm, "%s gemm: rel-L2 %.3e > %.1e", th_type_name(type), rg, tol_gemm);
    /* the grouped expert GEMM (MoE prefill): one expert in tiles of 5 rows (path 3),
     * every row its own expert, 16 a tile (path 4); both layouts */
    double rx = 0;
    for (int path = 3; path <= 4; path++)
        for (int gg = 0; gg < (q8 ? 2 : 1); gg++)
            for (int i = 0; i < 2; i++) {
                int nn = i ? max_n : 3;
                const char *ex = th_cu_test_matmul(type, wq, rows, K, x, nn, y, path, gg == 1);
                CHECK(!ex, "%s expert gemm (path %d): %s", th_type_name(type), path, ex);
                double r = ex ? INFINITY : rel_l2_ref(y, ref, (size_t)nn * rows);
                if (r > rx) rx = r;
                CHECK(r <= tol_gemm, "%s expert gemm (path %d) n=%d %s: rel-L2 %.3e > %.1e", th_type_name(type), path, nn,
                      gg ? "gguf" : "split", r, tol_gemm);
            }
    if (q8 || tern) { /* the int8 kernels compute the product with q8_0-rounded activations: that in float64 */
        uint8_t *xq = malloc((size_t)(K / 32) * 34);
        float *xr = malloc((size_t)K * 4);
        th_ref_quantize(TH_Q8_0, x, xq, K);
        th_ref_dequantize(TH_Q8_0, xq, xr, K);
        for (int path = 0; path <= (tern ? 0 : 2); path += 2) {   /* ternary experts: fp32 (checked above) */
            const char *e2 = th_cu_test_matmul(type, wq, rows, K, x, 1, y, path, false);
            double num = 0, den = 0;
            for (int64_t r = 0; r < rows && !e2; r++) {
                double d = 0;
                for (int64_t k = 0; k < K; k++) d += (double)wd[r * K + k] * xr[k];
                num += (y[r] - d) * (y[r] - d);
                den += d * d;
            }
            CHECK(!e2 && sqrt(num / den) < 2e-5, "%s %s vs float64 on q8_0 activations: rel-L2 %.3e", th_type_name(type),
                  path ? "moe gemv" : "gemv", sqrt(num / den));
        }
        free(xq);
        free(xr);
    }
    printf("  %-7s %lldx%lld gemv worst %.2e  gemm %.2e  expert gemm %.2e\n", th_type_name(type), (long long)rows,
           (long long)K, worst, rg, rx);
    free(wf); free(wd); free(wq); free(x); free(y); free(ref);
}

static void test_matmul_kernels(void) {
    NEED_GPU();
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
        uint32_t t = all_types[i];
        bool kq = th_type_info_get(t)->block == 256, qn = th_type_info_get(t)->block == 64, g128 = th_type_info_get(t)->block == 128;
        check_matmul_type(t, 37, kq ? 768 : qn ? 128 : g128 ? 256 : 96);      /* short rows: lanes idle, rows not a multiple of 4 */
        check_matmul_type(t, 67, kq ? 2816 : qn ? 1344 : g128 ? 1280 : 1312);  /* longer rows: several steps per lane */
    }
    /* qN: 64 groups a row (two steps per lane) and many rows */
    check_matmul_type(TH_Q4, 3205, 4096);
    check_matmul_type(TH_Q3, 64, 4160);
    /* many rows (at least 16 a SM on GPUs of up to 200 SMs): Q4_0 and Q8_0 take
     * the two-rows-a-warp GEMV there; 3205 rows leave a partial last block */
    check_matmul_type(TH_Q4_0, 3205, 320);
    check_matmul_type(TH_Q8_0, 3205, 320);
    /* rows a multiple of 4: the MoE GEMV's 4-rows-a-warp kernels, 1, 2 and 4 lane-steps in flight */
    check_matmul_type(TH_Q4_0, 64, 320);
    check_matmul_type(TH_Q8_0, 64, 1312);
    check_matmul_type(TH_Q4_K, 64, 2816);
    check_matmul_type(TH_MXFP4, 68, 4096);
    check_matmul_type(TH_F32, 29, 100);   /* K not a multiple of 8: the scalar paths */
    check_matmul_type(TH_F16, 29, 36);
    check_matmul_type(TH_BF16, 29, 52);
}

/* The MMA kernels (th_cu_test_matmul path 5: mma_q8.cu, or mma_f16.cu for F16 /
 * BF16) of one type at every batch-size class (token tiles of 8/16/32/64,
 * partial tiles, several 64-token tiles) against float64 on the activations as
 * the kernel rounds them (q8_0 blocks, or fp16 / bf16): the int8 products are
 * exact and the 16-bit ones exact in fp32 accumulation, so only fp32 rounding
 * differs. */
/* y = W·x by the int8 / 16-bit MMA kernels under each variant of vlist (NULL: every
 * variant below) against float64 on the rounded activations. */
static void check_mma_variants(uint32_t type, int64_t rows, int64_t K, const int *ns, int n_ns, const int *vlist, int n_v) {
    uint64_t rb;
    if (!th_row_bytes(type, (uint64_t)K, &rb)) { CHECK(0, "%s: K %lld", th_type_name(type), (long long)K); return; }
    int max_n = 0;
    for (int i = 0; i < n_ns; i++) max_n = ns[i] > max_n ? ns[i] : max_n;
    float *wf = malloc((size_t)rows * K * 4), *wd = malloc((size_t)rows * K * 4), *xr = malloc((size_t)max_n * K * 4);
    uint8_t *wq = malloc((size_t)rows * rb), *xq = malloc((size_t)(K / 32) * 34);
    float *x = malloc((size_t)max_n * K * 4), *y = malloc((size_t)max_n * rows * 4);
    double *ref = malloc((size_t)max_n * rows * 8);
    random_weights(type, rows, K, rb, wf, wq, wd);
    for (int t = 0; t < max_n; t++) {
        for (int64_t k = 0; k < K; k++) x[t * K + k] = frand() * (1.0f + (float)(t % 5));
        if (type == TH_F16 || type == TH_BF16) { /* the 16-bit kernel rounds x to the weights' type (nearest even) */
            for (int64_t k = 0; k < K; k++) {
                float v = x[t * K + k];
                xr[t * K + k] = type == TH_F16 ? th_f16_to_f32(th_f32_to_f16(v)) : th_bf16_to_f32(th_f32_to_bf16(v));
            }
        } else {
            th_ref_quantize(TH_Q8_0, x + t * K, xq, K);
            th_ref_dequantize(TH_Q8_0, xq, xr + t * K, K);
        }
        for (int64_t r = 0; r < rows; r++) {
            double d = 0;
            for (int64_t k = 0; k < K; k++) d += (double)wd[r * K + k] * xr[t * K + k];
            ref[t * rows + r] = d;
        }
    }
    double worst = 0;
    /* int8 variants (th_cu_mma_set_variant): 0 staged activations (shared memory), bit 0 two row tiles a
     * warp above 32 tokens, bit 3 stages of 4 sub-blocks, bit 4 two row tiles from 9 tokens; bit 2 the
     * gathered form, with bit 1 contiguous
     * K ranges */
    static const int vs[] = { 0, 1, 8, 9, 16, 4, 5, 6, 7, 32, 33, 34, 64, 128, 128 + 3 * 256 };  /* 32: mma_q8g at every n (33: 64-token tiles, 34: 128); 64: never; 128: mma_q8n where it applies (+ 3·256: a K split of 3) */
    if (!vlist) { vlist = vs; n_v = (int)(sizeof vs / sizeof vs[0]); }
    const int variants = type == TH_F16 || type == TH_BF16 ? 1 : n_v;
    for (int vi = 0; vi < variants; vi++)
        for (int i = 0; i < n_ns; i++) {
            const int v = vlist[vi];
            if ((v & 1) && !(v & 32) && ns[i] <= 32) continue;
            const bool narrow_ok = (((type == TH_Q4_0 || type == TH_Q8_0) && K % 128 == 0) || (type == TH_Q4_K && K % 256 == 0)) &&
                                   ns[i] <= TH_CU_MMA_NARROW_MAX;
            if ((v & 128) && !narrow_ok) continue;  /* the narrow kernel alone: only where it applies */
            th_cu_mma_set_variant(v);
            const char *e = th_cu_test_matmul(type, wq, rows, K, x, ns[i], y, 5, false);
            th_cu_mma_set_variant(0);
            CHECK(!e, "%s mma n=%d: %s", th_type_name(type), ns[i], e);
            if (e) break;
            double r = rel_l2_ref(y, ref, (size_t)ns[i] * rows);
            if (r > worst) worst = r;
            CHECK(r <= 2e-5, "%s mma (variant %d) %lldx%lld n=%d vs float64 on the rounded activations: rel-L2 %.3e",
                  th_type_name(type), v, (long long)rows, (long long)K, ns[i], r);
        }
    printf("  %-7s %lldx%lld mma worst %.2e\n", th_type_name(type), (long long)rows, (long long)K, worst);
    free(wf); free(wd); free(xr); free(wq); free(xq); free(x); free(y); free(ref);
}

static void check_mma_type(uint32_t type, int64_t rows, int64_t K, const int *ns, int n_ns) {
    check_mma_variants(type, rows, K, ns, n_ns, NULL, 0);
}

static void test_mma_kernels(void) {
    NEED_GPU();
    const uint32_t types[] = { TH_Q4_0, TH_Q4_1, TH_Q5_0, TH_Q5_1, TH_Q8_0, TH_Q3_K, TH_Q4_K,
                               TH_Q5_K, TH_Q6_K, TH_IQ4_NL, TH_IQ4_XS, TH_MXFP4, TH_F16, TH_BF16 };
    const int ns[] = { 2, 3, 8, 9, 16, 17, 31, 33, 64, 100, 256 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        bool kq = th_type_info_get(types[i])->block == 256;
        /* 37 rows: a partial 16-row tile; 3 or 24 sub-blocks: fewer than the 8 warps or not a multiple */
        check_mma_type(types[i], 37, kq ? 768 : 96, ns, (int)(sizeof ns / sizeof ns[0]));
        check_mma_type(types[i], 67, kq ? 2816 : 1312, ns, 6);
    }
    /* many rows (a large grid, a partial last tile of 5 rows), long rows */
    const int big[] = { 16, 64, 300 };
    check_mma_type(TH_Q8_0, 3205, 4096, big, 3);
    check_mma_type(TH_Q4_K, 3205, 4096, big, 3);
    check_mma_type(TH_Q4_0, 3205, 4096, big + 2, 1);
    check_mma_type(TH_Q6_K, 3205, 4096, big + 2, 1);
    check_mma_type(TH_F16, 3205, 4096, big, 2);
}

/* The narrow-batch kernel (mma_q8n.cu; Q4_0 / Q8_0 with K a multiple of 128, Q4_K of 256) as
 * the default picks it (variant 0), alone with its own K split (128) and with a split of 3
 * (128 + 3·256): splits over 5, 56 and 2 stages, a partial 128-row block, one and two 16-token
 * tiles, two 32-token tiles. Its own test, so that compute-sanitizer's racecheck can take it
 * alone (TH_TEST=test_mma_narrow). */
static void test_mma_narrow(void) {
    NEED_GPU();
    const int narrow[] = { 2, 3, 8, 9, 16, 17, 31, 32, 33, 64 }, vs[] = { 0, 128, 128 + 3 * 256 };
    const int nn = (int)(sizeof narrow / sizeof narrow[0]), nv = (int)(sizeof vs / sizeof vs[0]);
    check_mma_variants(TH_Q4_0, 37, 640, narrow, nn, vs, nv);
    check_mma_variants(TH_Q8_0, 37, 640, narrow, nn, vs, nv);
    check_mma_variants(TH_Q4_0, 333, 7168, narrow, nn, vs, nv);
    check_mma_variants(TH_Q8_0, 333, 7168, narrow, nn, vs, nv);
    check_mma_variants(TH_Q4_0, 37, 256, narrow, nn, vs, nv);
    check_mma_variants(TH_Q8_0, 300, 256, narrow, nn, vs, nv);
    check_mma_variants(TH_Q4_K, 37, 768, narrow, nn, vs, nv);
    check_mma_variants(TH_Q4_K, 333, 7168, narrow, nn, vs, nv);
    check_mma_variants(TH_Q4_K, 300, 256, narrow, nn, vs, nv);
}

/* Seq 0's position whose K/V the test cache (th_cu_test_attention) holds at position j
 * of sequence s: s's logical block b is physical block (nblk-1-b+s) mod nblk, which
 * seq 0 wrote as its block nblk-1-phys; -1 past the written positions (zeros). */
static int attn_src(int j, int s, int block, int len) {
    int nblk = (len + block - 1) / block, phys = (nblk - 1 - j / block + s) % nblk;
    int j0 = (nblk - 1 - phys) * block + j % block;
    return j0 < len ? j0 : -1;
}

/* float64 reference of causal attention: token t at position tpos[t] of sequence
 * tseq[t] over the test cache's K/V (f16: rounded as the cache stores them), with
 * window, softcap and sinks (n_head logits in the softmax denominator, or NULL) */
static void attn_ref(int n_head, int n_kv, int hd, int hdv, const float *q, const float *k, const float *v, int n,
                     const int32_t *tpos, const int32_t *tseq, int block, int len, int window, float softcap,
                     const float *sinks, bool f16, double *out) {
    int grp = n_head / n_kv;
    double *sc = malloc(sizeof(double) * (size_t)len);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < n_head; h++) {
            int p = tpos[t], lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0, kh = h / grp;
            double mx = -INFINITY;
            for (int j = lo; j <= p; j++) {
                int src = attn_src(j, tseq[t], block, len);
                double s = 0;
                for (int i = 0; i < hd && src >= 0; i++) {
                    float kk = k[(size_t)src * n_kv * hd + kh * hd + i];
                    if (f16) kk = th_f16_to_f32(th_f32_to_f16(kk));
                    s += (double)q[((size_t)t * n_head + h) * hd + i] * kk;
                }
                s /= sqrt((double)hd);
                if (softcap > 0) s = softcap * tanh(s / softcap);
                sc[j] = s;
                if (s > mx) mx = s;
            }
            if (sinks && sinks[h] > mx) mx = sinks[h];
            double sum = sinks ? exp(sinks[h] - mx) : 0;
            for (int j = lo; j <= p; j++) { sc[j] = exp(sc[j] - mx); sum += sc[j]; }
            for (int i = 0; i < hdv; i++) {
                double a = 0;
                for (int j = lo; j <= p; j++) {
                    int src = attn_src(j, tseq[t], block, len);
                    float vv = src >= 0 ? v[(size_t)src * n_kv * hdv + kh * hdv + i] : 0.0f;
                    if (f16) vv = th_f16_to_f32(th_f32_to_f16(vv));
                    a += sc[j] * vv;
                }
                out[((size_t)t * n_head + h) * hdv + i] = a / sum;
            }
        }
    free(sc);
}

/* One attention case against attn_ref: tokens at tpos/tseq (n_seq sequences);
 * prompt lets prompt runs take the tensor-core kernel, whose Q and P are rounded
 * to fp16 (2^-11 relative each), hence its looser bound. */
static void run_attention(int n_head, int n_kv, int hd, int hdv, int len, int n, const int32_t *tpos, const int32_t *tseq,
                          int n_seq, int window, float softcap, bool sink, bool f16, int block, int force_split,
                          bool prompt) {
    float *q = malloc(sizeof(float) * (size_t)n * n_head * hd), *k = malloc(sizeof(float) * (size_t)len * n_kv * hd);
    float *v = malloc(sizeof(float) * (size_t)len * n_kv * hdv), *out = malloc(sizeof(float) * (size_t)n * n_head * hdv);
    double *ref = malloc(sizeof(double) * (size_t)n * n_head * hdv);
    for (size_t i = 0; i < (size_t)n * n_head * hd; i++) q[i] = 2.0f * frand();
    for (size_t i = 0; i < (size_t)len * n_kv * hd; i++) k[i] = frand();
    for (size_t i = 0; i < (size_t)len * n_kv * hdv; i++) v[i] = frand();
    float sinks[64];  /* n_head <= 64; uniform(-1, 5): some above every score, as gpt-oss's can be */
    for (int h = 0; h < n_head && h < 64; h++) sinks[h] = 2.0f + 3.0f * frand();
    const float *sk = sink ? sinks : NULL;
    const char *e = th_cu_test_attention(n_head, n_kv, hd, hdv, len, q, k, v, n, 0, window, softcap, sk, f16, block,
                                         force_split, tpos, tseq, n_seq, prompt, out);
    CHECK(!e, "attention: %s", e);
    if (!e) {
        attn_ref(n_head, n_kv, hd, hdv, q, k, v, n, tpos, tseq, block, len, window, softcap, sk, f16, ref);
        double r = rel_l2_ref(out, ref, (size_t)n * n_head * hdv);
        double limit = prompt && f16 ? 2e-3 : 1e-5;
        printf("  attention heads %d/%d hd %d/%d len %d tokens %d (%d seq) window %d softcap %.0f%s %s block %d%s%s: "
               "rel-L2 %.2e\n", n_head, n_kv, hd, hdv, len, n, n_seq, window, softcap, sink ? " sinks" : "",
               f16 ? "f16" : "f32", block, force_split == 2 ? " graph plan" : force_split ? " split" : "",
               prompt ? " prompt" : "", r);
        CHECK(r < limit, "rel-L2 %.3e (limit %.0e)", r, limit);
    }
    free(q); free(k); free(v); free(out); free(ref);
}

/* n tokens of one sequence at positions len-n..len-1. */
static void check_attention(int n_head, int n_kv, int hd, int hdv, int len, int n, int window, float softcap,
                            bool sink, bool f16, int block, int force_split) {
    int32_t *tp = malloc((size_t)n * 4), *ts = calloc((size_t)n, 4);
    for (int i = 0; i < n; i++) tp[i] = len - n + i;
    run_attention(n_head, n_kv, hd, hdv, len, n, tp, ts, 1, window, softcap, sink, f16, block, force_split, false);
    free(tp); free(ts);
}

/* The tensor-core prompt kernel: runs of (sequence, first position, tokens) in batch order. */
static void check_attention_prompt(int n_head, int n_kv, int hd, int len, int window, float softcap, bool sink,
                                   bool f16, int n_runs, const int (*runs)[3]) {
    int n = 0, n_seq = 1;
    for (int r = 0; r < n_runs; r++) { n += runs[r][2]; n_seq = runs[r][0] + 1 > n_seq ? runs[r][0] + 1 : n_seq; }
    int32_t *tp = malloc((size_t)n * 4), *ts = malloc((size_t)n * 4);
    for (int r = 0, t = 0; r < n_runs; r++)
        for (int i = 0; i < runs[r][2]; i++, t++) { ts[t] = runs[r][0]; tp[t] = runs[r][1] + i; }
    run_attention(n_head, n_kv, hd, hd, len, n, tp, ts, n_seq, window, softcap, sink, f16, 16, 0, true);
    free(tp); free(ts);
}

static void test_attention_kernel(void) {
    NEED_GPU();
    check_attention(8, 2, 64, 64, 300, 1, 0, 0, false, false, 16, 1);
    check_attention(8, 2, 64, 64, 300, 1, 0, 0, false, false, 16, 0);
    check_attention(4, 4, 128, 128, 517, 5, 0, 0, false, true, 7, 1);
    check_attention(6, 3, 36, 20, 200, 9, 50, 30.0f, false, false, 5, 0);   /* awkward widths, window, softcap */
    check_attention(2, 2, 48, 32, 70, 1, 0, 0, false, true, 16, 1);         /* MLA fixture widths: hd 48 ≠ hdv 32 */
    check_attention(2, 2, 48, 32, 70, 1, 0, 0, false, false, 16, 0);
    check_attention(2, 1, 256, 256, 1100, 2, 0, 0, false, true, 16, 1);     /* widest heads, many splits */
    check_attention(9, 3, 64, 64, 33, 33, 0, 0, false, false, 4, 0);        /* prefill-like: every token causal */
    check_attention(16, 2, 64, 64, 300, 12, 0, 0, false, true, 16, 0);     /* 8 query heads a KV head: 8 a tile block */
    check_attention(16, 2, 64, 64, 300, 3, 0, 0, true, true, 16, 1);       /* ... 4 a split block, with sinks */
    /* attention sinks (gpt-oss): decode kernel split and not, tile kernel split and not, window */
    check_attention(4, 2, 64, 64, 300, 1, 0, 0, true, false, 16, 1);
    check_attention(4, 2, 64, 64, 300, 3, 8, 0, true, false, 16, 0);
    check_attention(4, 2, 64, 64, 200, 12, 0, 0, true, true, 16, 1);
    check_attention(9, 3, 64, 64, 33, 33, 8, 0, true, false, 4, 0);
    /* the graph plan: few splits, each stretched over several steps; K/V loaded before the wait */
    check_attention(8, 2, 64, 64, 300, 1, 0, 0, false, false, 16, 2);
    check_attention(4, 4, 128, 128, 517, 1, 0, 0, false, true, 7, 2);
    check_attention(4, 2, 64, 64, 300, 3, 8, 0, true, false, 16, 2);
    check_attention(4, 2, 64, 64, 200, 12, 0, 0, true, true, 16, 2);
    /* prompts on the tensor cores (attn_mma.cu): a whole prompt (the 8B shape's heads,
     * 300 tokens: a partial last tile), a prompt after a cached prefix with window,
     * softcap and sinks, two prompts in one launch (a tile holding both) with decode
     * tokens of a third sequence between runs (the CUDA-core kernels), and the f32
     * cache (not supported there: the CUDA-core kernels, exact) */
    static const int whole[][3] = { { 0, 0, 300 } };
    check_attention_prompt(32, 8, 128, 300, 0, 0, false, true, 1, whole);
    static const int after[][3] = { { 0, 57, 100 } };
    check_attention_prompt(9, 3, 64, 157, 40, 30.0f, true, true, 1, after);
    check_attention_prompt(8, 2, 128, 157, 0, 0, true, true, 1, after);
    static const int mixed[][3] = { { 0, 60, 40 }, { 2, 0, 70 }, { 1, 90, 1 }, { 1, 120, 1 }, { 1, 17, 3 }, { 0, 100, 33 } };
    check_attention_prompt(8, 2, 64, 160, 0, 0, false, true, 6, mixed);
    check_attention_prompt(8, 2, 128, 160, 50, 0, true, true, 6, mixed);
    check_attention_prompt(8, 2, 64, 160, 0, 0, false, false, 6, mixed);
    check_attention_prompt(8, 4, 32, 160, 0, 0, false, true, 6, mixed);   /* the fixtures' head width */
}

/* A prompt through the model with an F16 cache (runs of prompt tokens on the tensor-core
 * attention): GPU against CPU, the whole prompt in one batch and in batches of 64 (the
 * second after a cached prefix), and against the GPU with the CUDA-core attention
 * (attn_simt): the two GPU paths differ by the fp16 rounding of Q and P only. */
static void test_prompt_attention_model(void) {
    NEED_GPU();
    th_model *m;
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), NULL, &m) && th_model_load(fixture("tiny/tiny-F16.gguf"), NULL, &m))
        SKIP("fixture missing: %s", th_last_error());
    enum { N = 100 };
    int32_t tok[N];
    int nv = th_model_n_vocab(m);
    for (int i = 0; i < N; i++) tok[i] = (17 * i + 3) % nv;
    const int chunks[2] = { N, 64 };
    for (int c = 0; c < 2; c++) {
        float *cpu = run_logits_ctx(m, tok, N, chunks[c], false, TH_KV_F16, 128);
        float *gpu = run_logits_ctx(m, tok, N, chunks[c], true, TH_KV_F16, 128);
        th_cu_tuning t = th_cu_tuning_default();
        t.attn_simt = true;
        th_cu_tuning_set(&t);
        float *simt = run_logits_ctx(m, tok, N, chunks[c], true, TH_KV_F16, 128);
        tune_reset();
        CHECK(cpu && gpu && simt, "%s", th_last_error());
        if (cpu && gpu && simt) {
            double worst, top1, w_simt, top1_simt, w_paths, top1_paths;
            compare_logits(gpu, cpu, N, nv, &worst, NULL, &top1);
            compare_logits(simt, cpu, N, nv, &w_simt, NULL, &top1_simt);
            compare_logits(gpu, simt, N, nv, &w_paths, NULL, &top1_paths);
            printf("  prompt of %d in batches of %d, F16 cache: GPU vs CPU worst rel-L2 %.2e (top-1 %.3f), GPU with the "
                   "CUDA-core attention vs CPU %.2e, the two GPU paths %.2e (top-1 %.3f)\n", N, chunks[c], worst, top1,
                   w_simt, w_paths, top1_paths);
            CHECK(worst < 3e-3, "GPU vs CPU %.3e", worst);
        }
        free(cpu); free(gpu); free(simt);
    }
    th_model_free(m);
}
#endif

/* ------------------------------------------------------------------ model */

static void check_golden(const char *type, double max_rel, double min_top1) {
    char mp[256], gp[256];
    snprintf(mp, sizeof mp, "tiny/tiny-%s.gguf", type);
    snprintf(gp, sizeof gp, "tiny/golden/tiny-%s.logits", type);
    thlg g;
    th_model *m;
    FILE *probe = fopen(fixture(mp), "rb");
    if (!probe) { printf("  %-7s fixture not present, not checked\n", type); return; }
    fclose(probe);
    if (!thlg_load(fixture(gp), &g)) { CHECK(0, "cannot read %s", fixture(gp)); return; }
    th_status s = th_model_load(fixture(mp), NULL, &m);
    CHECK(s == TH_OK, "load %s: %s", mp, th_last_error());
    if (s) { free(g.tok); free(g.logits); return; }
    /* one batch (GEMV path), GEMM path for the batch, token by token (graphs) */
    const char *modes[3] = { "batch", "gemm", "tokens" };
    for (int mode = 0; mode < 3; mode++) {
        tune(mode == 1 ? 1 : 33, false);
        float *lg = run_logits(m, g.tok, (int)g.n, mode == 2 ? 1 : (int)g.n, true, TH_KV_F32);
        CHECK(lg != NULL, "%s %s: %s", type, modes[mode], th_last_error());
        if (!lg) continue;
        double worst, top1;
        compare_logits(lg, g.logits, (int)g.n, (int)g.nv, &worst, NULL, &top1);
        printf("  %-7s %-6s rel_l2_max=%.2e top1=%.3f (limits %.0e, %.2f)\n", type, modes[mode], worst, top1, max_rel, min_top1);
        CHECK(worst <= max_rel, "%s %s: rel-L2 %.3e > %.1e", type, modes[mode], worst, max_rel);
        CHECK(top1 >= min_top1, "%s %s: top-1 %.3f < %.2f", type, modes[mode], top1, min_top1);
        free(lg);
    }
    tune_reset();
    th_model_free(m);
    free(g.tok); free(g.logits);
}

/* ------------------------------------------------------------------ argmax */

/* The greedy rule (th_get_argmax), written plainly: NaN as -inf, +inf as FLT_MAX,
 * the first of the largest; 0 when nothing is above -inf. */
static float greedy_key(float x) { return x != x ? -INFINITY : x == INFINITY ? FLT_MAX : x; }
static int naive_argmax(const float *x, int64_t n) {
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (greedy_key(x[i]) > greedy_key(x[best])) best = (int)i;
    return best;
}

#ifdef TH_CUDA
/* Five rows of n values (rows n apart, so most start off a 16-byte boundary):
 * small integers (ties everywhere), a unique maximum at the end, nothing above
 * -inf, FLT_MAX tying with +inf, NaNs around a maximum at the start. */
static void check_argmax_rows(int64_t n) {
    enum { R = 5 };
    float *x = malloc((size_t)(R * n) * 4);
    int32_t got[R];
    int planted[R] = { -1, (int)(n - 1), 0, -1, 0 };
    for (int64_t i = 0; i < R * n; i++) x[i] = (float)((int)((frand() + 1.0f) * 3.5f) - 3);   /* -3..3 */
    float *r1 = x + n, *r2 = x + 2 * n, *r3 = x + 3 * n, *r4 = x + 4 * n;
    r1[n - 1] = 100.0f;
    for (int64_t i = 0; i < n; i++) r2[i] = i % 3 ? NAN : -INFINITY;
    int64_t p3[3] = { n / 3, 2 * n / 3, n - 1 };
    r3[p3[2]] = INFINITY; r3[p3[1]] = INFINITY; r3[p3[0]] = FLT_MAX;
    planted[3] = (int)p3[0];
    for (int64_t i = 1; i < n; i += 7) r4[i] = NAN;
    r4[0] = 50.0f;
    const char *err = th_cu_test_argmax(x, n, R, got);
    CHECK(err == NULL, "n=%lld: %s", (long long)n, err);
    for (int r = 0; r < R && !err; r++) {
        int want = naive_argmax(x + r * n, n);
        CHECK(planted[r] < 0 || want == planted[r], "n=%lld row %d: the test's scan gives %d, planted %d", (long long)n, r, want, planted[r]);
        CHECK(got[r] == want, "n=%lld row %d: device argmax %d, expected %d", (long long)n, r, got[r], want);
    }
    free(x);
}

static void test_argmax_kernel(void) {
    NEED_GPU();
    const int64_t sizes[] = { 1, 2, 3, 5, 31, 33, 1000, 4095, 4096, 4097, 4099, 49152, 49153, 128256, 128259, 262147 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check_argmax_rows(sizes[i]);
}
#endif

static th_context *argmax_ctx(th_model *m, bool argmax_only) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 256; cp.n_batch = 128; cp.n_seq_max = 3; cp.kv_block = 16; cp.kv_type = TH_KV_F32; cp.n_threads = 2;
    cp.gpu = true;
    cp.logits_argmax_only = argmax_only;
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) == TH_OK, "%s", th_last_error());
    return c;
}

/* The same batch through both contexts: each output row's argmax from the
 * logits_argmax_only context equals the scan of the other's logits row (and its
 * th_get_argmax); on a pair-tied model it is the even id of a pair. Returns the
 * number of rows that differ. */
static int argmax_step(th_context *full, th_context *only, const th_batch *b, int nv, bool pairs, const char *what) {
    th_status s1 = th_decode(full, b), s2 = th_decode(only, b);
    CHECK(s1 == TH_OK && s2 == TH_OK, "%s: %s", what, th_last_error());
    if (s1 || s2) return 1;
    int bad = 0;
    for (int i = 0; i < b->n_tokens; i++) {
        if (b->logits && !b->logits[i]) continue;
        if (!b->logits && i != b->n_tokens - 1) continue;
        /* the full context's argmax first: on a step of <= 64 rows its logits are still
         * on the device (lazy) and come over at the first th_get_logits */
        th_token h = th_get_argmax(full, i);
        const float *lg = th_get_logits(full, i);
        int want = lg ? naive_argmax(lg, nv) : -2;
        th_token a = th_get_argmax(only, i);
        CHECK(th_get_argmax(full, i) == h, "%s, index %d: th_get_argmax changed after th_get_logits", what, i);
        bool ok = a == want && h == want && (!pairs || (a % 2 == 0 && lg[a] == lg[a + 1]));
        if (!ok && bad++ < 4)
            CHECK(0, "%s, index %d: device argmax %d, host th_get_argmax %d, scan %d", what, i, a, h, want);
    }
    return bad;
}

/* A 70-token prompt with every row's logits (the eager GEMM path, two output
 * chunks), 20 greedy decode steps (graphs), ragged 3-sequence batches with some
 * output rows (graphs, replayed): logits_argmax_only gives the full context's
 * argmax everywhere, and its th_get_logits returns NULL with the error. */
static void check_argmax_only(const char *path, bool pairs) {
    th_model *m = NULL;
    if (th_model_load(path, NULL, &m)) { CHECK(0, "%s: %s", path, th_last_error()); return; }
    int nv = th_model_n_vocab(m), bad = 0;
    th_context *full = argmax_ctx(m, false), *only = argmax_ctx(m, true);
    if (full && only) {
        int32_t tok[70];
        int8_t want[70];
        for (int i = 0; i < 70; i++) { tok[i] = i ? (int32_t)((i * 7919 + 13) % nv) : 1; want[i] = 1; }
        th_batch p = { .n_tokens = 70, .token = tok, .logits = want };
        bad += argmax_step(full, only, &p, nv, pairs, "70-token prompt");
        CHECK(th_get_logits(only, 0) == NULL && strstr(th_last_error(), "logits not kept: context created with logits_argmax_only"),
              "th_get_logits: %s", th_last_error());
        int32_t t = th_get_argmax(only, 69);
        for (int step = 0; step < 20 && t >= 0; step++) {
            th_batch d = { .n_tokens = 1, .token = &t };
            bad += argmax_step(full, only, &d, nv, pairs, "greedy decode step");
            t = th_get_argmax(only, 0);
        }
        for (int round = 0; round < 3; round++) {
            int32_t rt[9], rs[9];
            int8_t rw[9];
            for (int i = 0; i < 9; i++) { rt[i] = (int32_t)((round * 131 + i * 977 + 5) % nv); rs[i] = i % 3; rw[i] = (int8_t)(i % 2 == 0 || i == 7); }
            th_batch r = { .n_tokens = 9, .token = rt, .seq_id = rs, .logits = rw };
            bad += argmax_step(full, only, &r, nv, pairs, "ragged batch");
        }
        printf("  %s: %d rows differ\n", pairs ? "pair-tied F32" : "Q8_0", bad);
    }
    CHECK(bad == 0, "%d rows differ", bad);
    th_context_free(full);
    th_context_free(only);
    th_model_free(m);
}

static void test_gpu_argmax_only(void) {
    NEED_GPU();
    check_argmax_only(fixture("tiny/tiny-Q8_0.gguf"), false);
    char path[64];
    snprintf(path, sizeof path, "/tmp/theseus-cuda-pairs-%d.gguf", (int)getpid());
    FILE *probe = fopen(fixture("tiny/tiny-F32.gguf"), "rb");
    if (!probe) { printf("  tiny-F32 fixture not present: the pair-tied model not checked\n"); return; }
    fclose(probe);
    if (!write_pair_tied_model(fixture("tiny/tiny-F32.gguf"), path)) { CHECK(0, "cannot write %s", path); return; }
    check_argmax_only(path, true);
    unlink(path);
}

static void test_golden_float(void) {
    NEED_GPU();
    printf("  GPU: %s\n", gpu_desc);
    check_golden("F32", 1e-4, 0.9);
    check_golden("F16", 3e-3, 0.9);
    check_golden("BF16", 1e-2, 0.9);
    for (f16_path = 1; f16_path <= 2; f16_path++) {
        printf("  16-bit weights on %s:\n", f16_path == 1 ? "mma_f16 from 2 tokens" : "the GEMV below the GEMM path");
        check_golden("F16", 3e-3, 0.9);
        check_golden("BF16", 1e-2, 0.9);
    }
    f16_path = 0;
}

static void test_golden_quantized(void) {
    NEED_GPU();
    const char *types[] = { "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M",
                            "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_golden(types[i], 5e-2, 0.9);
}

/* ------------------------------------------------------------------ arch fixtures */

/* Every per-architecture fixture (shared/fixtures/arch, see its README) on the
 * GPU with the CPU's tolerances (tests/test_arch.c: F32 KV cache, limits per
 * golden, top-1 >= 0.9), in the three modes of check_golden. An architecture
 * the CUDA backend refuses prints "<arch>: not supported on the GPU: <error>"
 * and fails. */
typedef struct {
    const char *name, *model, *golden;
    double max_rel, min_top1;
    bool moe;     /* routed experts: also GEMM mode with the per-pair GEMV experts */
} arch_fixture;

static const arch_fixture arch_fixtures[] = {
    { "llama", "model-F32.gguf", "golden.logits", 1e-4, 0.9, true },      /* mainline goldens */
    { "qwen2", "model-F32.gguf", "golden.logits", 1e-4, 0.9, false },
    { "gemma2", "model-F32.gguf", "golden.logits", 2e-3, 0.9, false },
    { "phi3", "model-F32.gguf", "golden.logits", 1e-4, 0.9, false },
    { "olmoe", "model-F32.gguf", "golden.logits", 1e-4, 0.9, true },
    { "deepseek2", "model-F32.gguf", "golden.logits", 1e-4, 0.9, true },
    { "deepseek2-qlora", "model-F32.gguf", "golden.logits", 1e-4, 0.9, true },
    { "qwen3", "model-F32.gguf", "golden.logits", 2e-3, 0.9, false },      /* ik_llama.cpp goldens */
    { "qwen3moe", "model-F32.gguf", "golden.logits", 2e-3, 0.9, true },
    { "gemma3", "model-F32.gguf", "golden.logits", 2e-3, 0.9, false },
    { "gpt-oss", "model-F32.gguf", "golden.logits", 2e-3, 0.9, true },
    { "qwen2", "model-Q8_0.gguf", "golden-Q8_0.logits", 6e-2, 0.9, false }, /* Q8_0 copies */
    { "phi3", "model-Q8_0.gguf", "golden-Q8_0.logits", 6e-2, 0.9, false },
    { "olmoe", "model-Q8_0.gguf", "golden-Q8_0.logits", 6e-2, 0.9, true },
    /* the CPU checks this one loosely (routing flips; test_arch.c): top-1 only */
    { "gpt-oss", "model-Q8_0-MXFP4.gguf", "golden-Q8_0-MXFP4.logits", INFINITY, 0.8, true },
};

/* The context check_golden's modes will use; TH_OK, or the refusal. */
static th_status gpu_context_probe(th_model *m, uint32_t n_batch) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64; cp.n_batch = n_batch; cp.kv_block = 16; cp.kv_type = TH_KV_F32; cp.n_threads = 2; cp.gpu = true;
    th_context *c = NULL;
    th_status s = th_context_new(m, &cp, &c);
    th_context_free(c);
    return s;
}

static void check_arch(const arch_fixture *fx) {
    NEED_GPU();
    char mp[256], gp[256], label[96];
    snprintf(mp, sizeof mp, "arch/%s/%s", fx->name, fx->model);
    snprintf(gp, sizeof gp, "arch/%s/%s", fx->name, fx->golden);
    snprintf(label, sizeof label, "%s/%s", fx->name, fx->model);
    thlg g;
    th_model *m;
    if (!thlg_load(fixture(gp), &g)) { CHECK(0, "cannot read %s", fixture(gp)); return; }
    th_status s = th_model_load(fixture(mp), NULL, &m);
    CHECK(s == TH_OK, "load %s: %s", mp, th_last_error());
    if (s) { thlg_free(&g); return; }
    s = gpu_context_probe(m, g.n);
    if (s == TH_ERR_UNSUPPORTED) printf("  %s: not supported on the GPU: %s\n", label, th_last_error());
    CHECK(s == TH_OK, "%s: GPU context: %s", label, th_last_error());
    const char *modes[4] = { "batch", "gemm", "tokens", "gemm+moe-gemv" };
    for (int mode = 0; s == TH_OK && mode < (fx->moe ? 4 : 3); mode++) {
        tune(mode == 1 || mode == 3 ? 1 : 33, mode == 3);
        float *lg = run_logits(m, g.tok, (int)g.n, mode == 2 ? 1 : (int)g.n, true, TH_KV_F32);
        CHECK(lg != NULL, "%s %s: %s", label, modes[mode], th_last_error());
        if (!lg) continue;
        double worst, top1;
        int wp;
        compare_logits(lg, g.logits, (int)g.n, (int)g.nv, &worst, &wp, &top1);
        printf("  %-34s %-6s rel_l2_max=%.2e (pos %2d) top1=%.3f (limits %.0e, %.2f)\n", label, modes[mode], worst, wp,
               top1, fx->max_rel, fx->min_top1);
        CHECK(worst <= fx->max_rel, "%s %s: rel-L2 %.3e > %.1e (pos %d)", label, modes[mode], worst, fx->max_rel, wp);
        CHECK(top1 >= fx->min_top1, "%s %s: top-1 %.3f < %.2f", label, modes[mode], top1, fx->min_top1);
        free(lg);
    }
    tune_reset();
    th_model_free(m);
    thlg_free(&g);
}

#define ARCH_TEST(i) static void test_gpu_arch_##i(void) { check_arch(&arch_fixtures[i]); }
ARCH_TEST(0) ARCH_TEST(1) ARCH_TEST(2) ARCH_TEST(3) ARCH_TEST(4) ARCH_TEST(5) ARCH_TEST(6) ARCH_TEST(7)
ARCH_TEST(8) ARCH_TEST(9) ARCH_TEST(10) ARCH_TEST(11) ARCH_TEST(12) ARCH_TEST(13) ARCH_TEST(14)
_Static_assert(sizeof arch_fixtures / sizeof arch_fixtures[0] == 15, "one ARCH_TEST per fixture");

/* Two sequences share a prefix (copy-on-write on the device), then decode
 * interleaved in one ragged batch with F16 KV: the same logits as the CPU. */
static void test_ragged_and_shared(void) {
    NEED_GPU();
    th_model *m;
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), NULL, &m) && th_model_load(fixture("tiny/tiny-F16.gguf"), NULL, &m))
        SKIP("fixture missing: %s", th_last_error());
    int nv = th_model_n_vocab(m);
    const int32_t a[9] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432 };
    const int32_t b[9] = { 1, 450, 439, 860, 3347, 113, 975, 278, 425 };
    float *res[2][6];
    for (int gpu = 0; gpu < 2; gpu++) {
        th_context_params cp = th_context_default_params();
        cp.n_ctx = 24; cp.n_seq_max = 2; cp.kv_block = 4; cp.kv_type = TH_KV_F16; cp.n_threads = 2; cp.gpu = gpu;
        th_context *c;
        CHECK(th_context_new(m, &cp, &c) == TH_OK, "%s", th_last_error());
        th_batch p = { .n_tokens = 6, .token = a };
        CHECK(th_decode(c, &p) == TH_OK, "%s", th_last_error());
        CHECK(th_kv_seq_copy(c, 1, 0) == TH_OK);
        int32_t tok[6] = { a[6], b[6], a[7], b[7], a[8], b[8] }, pos[6] = { 6, 6, 7, 7, 8, 8 }, sid[6] = { 0, 1, 0, 1, 0, 1 };
        int8_t want[6] = { 1, 1, 1, 1, 1, 1 };
        th_batch d = { .n_tokens = 6, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
        CHECK(th_decode(c, &d) == TH_OK, "%s", th_last_error());
        for (int j = 0; j < 6; j++) {
            res[gpu][j] = malloc((size_t)nv * 4);
            memcpy(res[gpu][j], th_get_logits(c, j), (size_t)nv * 4);
        }
        th_context_free(c);
    }
    double worst = 0;
    for (int j = 0; j < 6; j++) {
        double num = 0, den = 0;
        for (int v = 0; v < nv; v++) {
            double d = res[1][j][v] - res[0][j][v];
            num += d * d;
            den += (double)res[0][j][v] * res[0][j][v];
        }
        if (sqrt(num / den) > worst) worst = sqrt(num / den);
        free(res[0][j]); free(res[1][j]);
    }
    printf("  ragged batch with shared prefix, GPU vs CPU: worst rel-L2 %.2e\n", worst);
    CHECK(worst < 3e-3, "GPU vs CPU %.3e", worst);
    th_model_free(m);
}

/* Sequence 0's rows in a batch-invariant context must be bit-identical whatever else
 * shares their steps (speculative decoding's greedy identity rests on it): its 8-token
 * prompt with f filler tokens of other sequences (steps of 8..128 rows), then its next
 * token with 3 more tokens of each filler sequence (1..46 rows) — across the GEMV / MMA /
 * GEMM sizes of a plain context. Compared with f = 0 by memcmp. */
static int invariant_rows(th_model *m, bool invariant, int f, float *pre, float *dec) {
    int nv = th_model_n_vocab(m), k = (f + 7) / 8, n1 = 8 + f, n2 = 1 + 3 * k;
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 1024; cp.n_seq_max = 17; cp.kv_block = 4; cp.n_batch = 256; cp.n_threads = 2; cp.gpu = true;
    cp.batch_invariant = invariant;
    th_context *c;
    if (th_context_new(m, &cp, &c)) return -1;
    int32_t tok[136], pos[136], sid[136];
    int8_t want[136] = { 0 };
    const int32_t P[8] = { 1, 450, 439, 860, 3347, 113, 1701, 123 };
    for (int i = 0; i < 8; i++) { tok[i] = P[i]; pos[i] = i; sid[i] = 0; }
    for (int i = 0; i < f; i++) { tok[8 + i] = (100 + 7 * i) % nv; pos[8 + i] = i % 8; sid[8 + i] = 1 + i / 8; }
    want[7] = 1;
    th_batch b = { .n_tokens = n1, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
    int rc = th_decode(c, &b) ? -1 : 0;
    if (!rc) memcpy(pre, th_get_logits(c, 7), (size_t)nv * 4);
    memset(want, 0, sizeof want);
    tok[0] = 500; pos[0] = 8; sid[0] = 0; want[0] = 1;
    for (int i = 0; i < 3 * k; i++) {
        int s = 1 + i / 3, have = f - 8 * (s - 1) < 8 ? f - 8 * (s - 1) : 8;  /* filler s holds `have` tokens */
        tok[1 + i] = (300 + 11 * i) % nv; pos[1 + i] = have + i % 3; sid[1 + i] = s;
    }
    b = (th_batch){ .n_tokens = n2, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
    if (!rc) rc = th_decode(c, &b) ? -1 : 0;
    if (!rc) memcpy(dec, th_get_logits(c, 0), (size_t)nv * 4);
    th_context_free(c);
    return rc;
}

static void test_gpu_batch_invariant(void) {
    NEED_GPU();
    const char *files[] = { "tiny/tiny-Q8_0.gguf", "tiny/tiny-F32.gguf" };  /* int8 MMA / GEMV families */
    const int fill[] = { 0, 1, 7, 8, 24, 25, 56, 120 };
    for (int fi = 0; fi < 2; fi++) {
        th_model *m;
        if (th_model_load(fixture(files[fi]), NULL, &m)) { printf("  skip %s: %s\n", files[fi], th_last_error()); continue; }
        size_t nv = (size_t)th_model_n_vocab(m);
        float *ref[2], *pre = malloc(nv * 4), *dec = malloc(nv * 4);
        for (int inv = 1; inv >= 0; inv--) {
            ref[0] = malloc(nv * 4); ref[1] = malloc(nv * 4);
            int differ = 0;
            for (size_t j = 0; j < sizeof fill / sizeof *fill; j++) {
                CHECK(invariant_rows(m, inv, fill[j], j ? pre : ref[0], j ? dec : ref[1]) == 0, "%s f=%d: %s",
                      files[fi], fill[j], th_last_error());
                if (!j) continue;
                bool same = !memcmp(pre, ref[0], nv * 4) && !memcmp(dec, ref[1], nv * 4);
                differ += !same;
                if (inv) CHECK(same, "%s: sequence 0's logits changed with %d filler tokens (prefill %s, decode %s)",
                               files[fi], fill[j], memcmp(pre, ref[0], nv * 4) ? "differs" : "same",
                               memcmp(dec, ref[1], nv * 4) ? "differs" : "same");
            }
            printf("  %s %s: %d of %d filler sizes changed sequence 0's logits\n", files[fi],
                   inv ? "batch-invariant" : "plain context (for comparison)", differ, (int)(sizeof fill / sizeof *fill) - 1);
            free(ref[0]); free(ref[1]);
        }
        free(pre); free(dec);
        th_model_free(m);
    }
}


int main(void) {
    if (!have_gpu()) printf("skipped: no GPU (%s)\n", th_last_error());
    RUN(test_no_gpu_message);
#ifdef TH_CUDA
    RUN(test_matmul_kernels);
    RUN(test_mma_kernels);
    RUN(test_mma_narrow);
    RUN(test_attention_kernel);
    RUN(test_prompt_attention_model);
    RUN(test_argmax_kernel);
#endif
    RUN(test_gpu_argmax_only);
    RUN(test_golden_float);
    RUN(test_golden_quantized);
    RUN(test_ragged_and_shared);
    RUN(test_gpu_batch_invariant);
    RUN(test_gpu_arch_0); RUN(test_gpu_arch_1); RUN(test_gpu_arch_2); RUN(test_gpu_arch_3); RUN(test_gpu_arch_4);
    RUN(test_gpu_arch_5); RUN(test_gpu_arch_6); RUN(test_gpu_arch_7); RUN(test_gpu_arch_8); RUN(test_gpu_arch_9);
    RUN(test_gpu_arch_10); RUN(test_gpu_arch_11); RUN(test_gpu_arch_12); RUN(test_gpu_arch_13); RUN(test_gpu_arch_14);
    return CHECK_DONE();
}
