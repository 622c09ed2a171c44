/* test_kernels.c — every SIMD kernel of every CPU kernel level this machine has (not
 * only the one th_cpu_kernels() picks) against the reference kernels of src/quant
 * (th_ref_*), on random inputs of awkward sizes.
 *
 * - Activation quantizers (Q8_0, Q8_1, Q8_K, F16, BF16) must produce the reference's
 *   bytes exactly, including ties and all-zero blocks.
 * - vec_dot: the integer part of every block dot product is exact in both, so the only
 *   difference is the order of the float additions (and where the block scale is
 *   applied). We allow |simd - ref| <= 1e-5 * S, where S = sum|w_i a_i| + max|w| * sum|a_i|
 *   (a bound on the magnitude of every partial sum, mins included). A float sum of k
 *   terms errs by at most ~k * 6e-8 * S; k <= 160 here, and any decoding bug moves the
 *   result by a sizeable fraction of S.
 * - gemm: every output against the reference dot product (same tolerance), for odd row
 *   counts, odd batch sizes, a row sub-range, and no writes outside it; a batch of one
 *   row must equal the level's own vec_dot bit for bit. The process-wide table is forced
 *   to the generic level (TH_CPU=generic), so a level whose gemm reached the
 *   process-wide table instead of its own kernels would fail that.
 * - attention: the chunk kernel (online softmax over chunks of keys) against a softmax
 *   in double, with windows, softcap and a sink, head dims 40..192 and dv != d.
 * Each check runs once per SIMD level of this build's architecture (x86-64: avx2,
 * avx512; aarch64: neon, which tests/test_kernels_neon.c also checks under qemu), as
 * test_<name>_<level>; a level the CPU lacks is skipped. */
#include "check.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include <stddef.h>

#define KERNEL_TEST_SEED 0x9e3779b97f4a7c15ULL
#include "kernel_inputs.h"

#if defined(__x86_64__)
static const int simd_levels[] = { TH_LEVEL_AVX2, TH_LEVEL_AVX512 };
#elif defined(__aarch64__)
static const int simd_levels[] = { TH_LEVEL_NEON };
#else
static const int simd_levels[] = { TH_LEVEL_GENERIC }; /* no SIMD level: the reference against itself */
#endif
enum { N_SIMD = sizeof simd_levels / sizeof simd_levels[0] };

/* Every level's table, filled by th_kernels_fill as th_cpu_kernels() would fill it. */
static th_kernels level_k[TH_LEVEL_COUNT];
static bool level_ok[TH_LEVEL_COUNT];
static const th_kernels *K;

static void init_levels(void) {
    for (int l = 0; l < TH_LEVEL_COUNT; l++) level_ok[l] = th_kernels_fill(&level_k[l], l);
}

#define NEED_LEVEL(l) do { if (!level_ok[l]) SKIP("CPU lacks the %s level", th_level_name(l)); K = &level_k[l]; } while (0)

/* RUN(fn) for fn(level) at every SIMD level: "ok test_<name>_<level>" lines. */
static void run_level(const char *name, void (*fn)(int), int lvl) {
    char full[96];
    snprintf(full, sizeof full, "%s_%s", name, th_level_name(lvl));
    if (!check_selected(full)) return;
    check_cur_failed = 0;
    check_cur_skipped = 0;
    fn(lvl);
    if (check_cur_skipped) printf("SKIP %s\n", full);
    else if (check_cur_failed) { printf("FAIL %s\n", full); check_total_failed++; }
    else printf("ok %s\n", full);
    fflush(stdout);
}
#define RUN_LEVELS(fn) for (int i_ = 0; i_ < N_SIMD; i_++) run_level(#fn, fn, simd_levels[i_])

/* ---------------------------------------------------------------- quantizers */

static void check_quantize(const th_kernels *k, uint32_t at, const float *x, int64_t n, const char *what) {
    size_t bytes = row_bytes(at, n);
    uint8_t *a = calloc(1, bytes + 1), *b = calloc(1, bytes + 1);
    th_ref_quantize(at, x, a, n);
    k->quantize[at](x, b, n);
    size_t diff = 0;
    while (diff < bytes && a[diff] == b[diff]) diff++;
    CHECK(diff == bytes, "%s %s n=%lld: first differing byte %zu of %zu (ref %02x, %s %02x)", k->level,
          th_type_name(at), (long long)n, diff, bytes, diff < bytes ? a[diff] : 0, k->level, diff < bytes ? b[diff] : 0);
    CHECK(b[bytes] == 0, "%s %s %s wrote past the end", k->level, th_type_name(at), what);
    free(a);
    free(b);
}

static void test_quantize(int lvl) {
    NEED_LEVEL(lvl);
    static const uint32_t acts[] = { TH_Q8_0, TH_Q8_1, TH_Q8_K, TH_F16, TH_BF16 };
    static const int64_t sizes[] = { 256, 512, 4096, 256 * 7 };
    float *x = malloc(4096 * sizeof *x);
    for (size_t t = 0; t < sizeof acts / sizeof acts[0]; t++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            random_acts(x, sizes[s]);
            check_quantize(K, acts[t], x, sizes[s], "random");
        }
        /* ties: x * 127/amax lands on k + 0.5 (amax = 127 makes the scale exactly 1) */
        for (int i = 0; i < 256; i++) x[i] = (float)((i % 254) - 127) + (i % 3 == 0 ? 0.5f : 0.0f);
        x[5] = 127.0f; x[37] = -127.0f; x[69] = 127.0f;
        for (int b = 0; b < 8; b++) x[32 * b + 1] = (b & 1) ? 127.0f : -127.0f;
        check_quantize(K, acts[t], x, 256, "ties");
        /* an all-zero block among others; largest magnitude negative and repeated */
        for (int i = 0; i < 512; i++) x[i] = i < 256 ? 0.0f : rndf();
        x[300] = -3.0f; x[301] = 3.0f; x[302] = -3.0f;
        check_quantize(K, acts[t], x, 512, "zeros");
    }
    /* F16/BF16 take any n: odd lengths exercise the scalar tails. */
    static const int64_t odd[] = { 1, 7, 9, 33, 1001 };
    for (size_t s = 0; s < sizeof odd / sizeof odd[0]; s++) {
        random_acts(x, odd[s]);
        check_quantize(K, TH_F16, x, odd[s], "odd");
        check_quantize(K, TH_BF16, x, odd[s], "odd");
    }
    /* f16 edge values: overflow to inf, subnormals, rounding ties */
    float edge[16] = { 65504.0f, 65520.0f, 1e6f, -1e6f, 6e-8f, 3e-8f, 1e-5f, -1e-7f,
                       1.0009765625f * 1.00048828125f, 2049.0f, 2051.0f, -0.0f, 0.0f, 1.5f, 3.0e38f, 1e-40f };
    check_quantize(K, TH_F16, edge, 16, "edge");
    check_quantize(K, TH_BF16, edge, 16, "edge");
    free(x);
}

/* ---------------------------------------------------------------- vec_dot */

static int vec_dot_checked;
static double worst_ratio; /* largest |simd - ref| / S seen (printed for the record) */

static void check_vec_dot(const th_kernels *k, const wtype *wt, int64_t n) {
    const uint32_t type = wt->type, at = th_type_info_get(type)->act_type;
    uint8_t *w = malloc(row_bytes(type, n)), *a = malloc(row_bytes(at, n));
    float *x = malloc((size_t)n * sizeof *x);
    random_weights(wt, w, 1, n);
    random_acts(x, n);
    th_ref_quantize(at, x, a, n);
    float ref = th_ref_vec_dot(type, n, w, a), got = NAN;
    k->vec_dot[type](n, &got, w, a);
    double tol = 1e-5 * dot_scale(type, w, a, n) + 1e-30;
    if (fabs((double)got - ref) / tol * 1e-5 > worst_ratio) worst_ratio = fabs((double)got - ref) / tol * 1e-5;
    CHECK(fabs((double)got - ref) <= tol, "%s vec_dot %s n=%lld: got %.9g ref %.9g (diff %.3g, tol %.3g)",
          k->level, th_type_name(type), (long long)n, got, ref, fabs((double)got - ref), tol);
    vec_dot_checked++;
    free(w);
    free(a);
    free(x);
}

static void test_vec_dot(int lvl) {
    NEED_LEVEL(lvl);
    vec_dot_checked = 0;
    worst_ratio = 0;
    static const int64_t nblocks[] = { 1, 2, 3, 5, 8, 17, 64, 16 };
    for (int t = 0; t < N_WTYPES; t++) {
        int64_t blk = th_type_info_get(wtypes[t].type)->block;
        for (size_t s = 0; s < sizeof nblocks / sizeof nblocks[0]; s++)
            for (int rep = 0; rep < 4; rep++) check_vec_dot(K, &wtypes[t], nblocks[s] * (blk == 1 ? 32 : blk));
        if (blk == 1) { /* float types: any n, scalar tails */
            static const int64_t odd[] = { 1, 7, 8, 9, 31, 33, 1001, 4095 };
            for (size_t s = 0; s < sizeof odd / sizeof odd[0]; s++) check_vec_dot(K, &wtypes[t], odd[s]);
        }
    }
    CHECK(vec_dot_checked > 400, "only %d vec_dot cases ran", vec_dot_checked);
    printf("  %s: %d cases, worst |simd - ref| / S = %.2g (tolerance 1e-5)\n", K->level, vec_dot_checked, worst_ratio);
}

/* MXFP4 block exponents at the edges of the E8M0 decode (subnormal 2^-128, 2^-127). */
static void test_mxfp4_exponent_edges(int lvl) {
    NEED_LEVEL(lvl);
    static const uint8_t es[] = { 0, 1, 2, 3, 126, 127, 128, 129, 140 };
    const int64_t n = 9 * 32;
    th_block_mxfp4 w[9];
    uint8_t *a = malloc(row_bytes(TH_Q8_0, n));
    float x[9 * 32];
    for (int b = 0; b < 9; b++) {
        w[b].e = es[b];
        for (int j = 0; j < 16; j++) w[b].qs[j] = (uint8_t)rnd();
    }
    random_acts(x, n);
    th_ref_quantize(TH_Q8_0, x, a, n);
    for (int one = 0; one < 9; one++) { /* each block alone, then all together */
        float ref = th_ref_vec_dot(TH_MXFP4, 32, &w[one], a + one * sizeof(th_block_q8_0)), got;
        K->vec_dot[TH_MXFP4](32, &got, &w[one], a + one * sizeof(th_block_q8_0));
        CHECK(got == ref, "e=%d: got %.9g ref %.9g (one block: the same integer sum times the same scale)", es[one], got, ref);
    }
    /* all 9 together: the avx512 kernel decodes the scales of 8 blocks in one vector */
    float ref = th_ref_vec_dot(TH_MXFP4, n, w, a), got;
    K->vec_dot[TH_MXFP4](n, &got, w, a);
    double tol = 1e-5 * dot_scale(TH_MXFP4, w, a, n);
    CHECK(fabs((double)got - ref) <= tol, "9 blocks: got %.9g ref %.9g (tol %.3g)", got, ref, tol);
    for (int b = 0; b < 8; b++) w[b].e = (uint8_t)(b % 2); /* 8 subnormal scales in one vector */
    ref = th_ref_vec_dot(TH_MXFP4, 8 * 32, w, a);
    K->vec_dot[TH_MXFP4](8 * 32, &got, w, a);
    tol = 1e-5 * dot_scale(TH_MXFP4, w, a, 8 * 32);
    CHECK(fabs((double)got - ref) <= tol && ref != 0, "8 subnormal-scale blocks: got %.9g ref %.9g (tol %.3g)", got, ref, tol);
    free(a);
}

/* The tolerance is tight enough that one wrong element in a row of 8 blocks fails:
 * moving one Q4_0 code by 8 must change the dot by more than the tolerance. */
static void test_tolerance_catches_one_bad_element(void) {
    NEED_LEVEL(simd_levels[0]);
    const int64_t n = 8 * 32;
    uint8_t *w = malloc(row_bytes(TH_Q4_0, n)), *a = malloc(row_bytes(TH_Q8_0, n));
    float *x = malloc((size_t)n * sizeof *x);
    random_weights(&wtypes[3], w, 1, n);
    random_acts(x, n);
    th_ref_quantize(TH_Q8_0, x, a, n);
    th_block_q4_0 *blk = (th_block_q4_0 *)w;
    th_block_q8_0 *ab = (th_block_q8_0 *)a;
    /* (a tiny block scale or activation would hide it, whatever the random state) */
    blk[5].d = th_f32_to_f16(0.015f);
    ab[5].qs[3] = 100;
    float good;
    K->vec_dot[TH_Q4_0](n, &good, w, a);
    blk[5].qs[3] ^= 0x08; /* element 3 of block 5 moves by 8 codes */
    float ref = th_ref_vec_dot(TH_Q4_0, n, w, a);
    double tol = 1e-5 * dot_scale(TH_Q4_0, w, a, n);
    CHECK(fabs((double)good - ref) > tol, "one corrupted element changed the dot by %.3g, tol %.3g",
          fabs((double)good - ref), tol);
    free(w);
    free(a);
    free(x);
}

/* ---------------------------------------------------------------- gemm */

static void check_gemm(const th_kernels *k, const wtype *wt, int64_t n, int64_t rows, int64_t r0, int64_t r1, int64_t nb) {
    const uint32_t type = wt->type, at = th_type_info_get(type)->act_type;
    const size_t ws = row_bytes(type, n), xs = row_bytes(at, n);
    const int64_t ys = rows + 3;
    uint8_t *w = malloc(ws * (size_t)rows), *a = malloc(xs * (size_t)nb);
    float *x = malloc((size_t)n * sizeof *x), *y = malloc(sizeof *y * (size_t)(ys * nb));
    random_weights(wt, w, rows, n);
    for (int64_t b = 0; b < nb; b++) { random_acts(x, n); k->quantize[at](x, a + (size_t)b * xs, n); }
    for (int64_t i = 0; i < ys * nb; i++) y[i] = -12345.0f;
    k->gemm[type](n, r0, r1, w, ws, nb, a, xs, y, ys);
    int bad = 0;
    for (int64_t b = 0; b < nb && bad < 3; b++)
        for (int64_t r = 0; r < ys && bad < 3; r++) {
            const float got = y[b * ys + r];
            float want = -12345.0f, dot = want;   /* outside [r0, r1): untouched */
            double tol = 0;
            if (r >= r0 && r < r1) {
                const uint8_t *wr = w + (size_t)r * ws, *ar = a + (size_t)b * xs;
                want = th_ref_vec_dot(type, n, wr, ar);
                k->vec_dot[type](n, &dot, wr, ar);
                tol = 1e-5 * dot_scale(type, wr, ar, n) + 1e-30;
            }
            /* one activation row: the level's own vec_dot, bit for bit */
            const bool ok = fabs((double)got - want) <= tol && (nb > 1 || r < r0 || r >= r1 || got == dot);
            if (!ok) {
                bad++;
                CHECK(0, "%s gemm %s n=%lld rows [%lld,%lld) nb=%lld: y[b=%lld][r=%lld] = %.9g, ref %.9g, vec_dot %.9g",
                      k->level, th_type_name(type), (long long)n, (long long)r0, (long long)r1, (long long)nb,
                      (long long)b, (long long)r, got, want, dot);
            }
        }
    free(w); free(a); free(x); free(y);
}

static void test_gemm(int lvl) {
    NEED_LEVEL(lvl);
    static const int64_t shapes[][4] = { /* rows, r0, r1, nb */
        { 1, 0, 1, 1 }, { 4, 0, 4, 4 }, { 5, 0, 5, 3 }, { 13, 2, 11, 7 }, { 9, 1, 9, 2 }, { 8, 0, 8, 17 }, { 7, 3, 4, 5 },
    };
    for (int t = 0; t < N_WTYPES; t++) {
        int64_t blk = th_type_info_get(wtypes[t].type)->block;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int64_t nblk = 1; nblk <= 9; nblk += 4)
                check_gemm(K, &wtypes[t], nblk * (blk == 1 ? 32 : blk), shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
        if (blk == 1) /* float types take any n */
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                check_gemm(K, &wtypes[t], 7, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
                check_gemm(K, &wtypes[t], 45, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
            }
    }
}

static void test_generic_gemm_matches_reference(void) {
    NEED_LEVEL(TH_LEVEL_GENERIC);
    /* the generic table's gemm is the reference dot per output; check the walk (sub-range, strides) */
    check_gemm(K, &wtypes[3], 64, 6, 1, 5, 3);
    check_gemm(K, &wtypes[11], 256, 3, 0, 3, 2);
    check_gemm(K, &wtypes[0], 45, 5, 0, 5, 1);
}

/* Every level composes its gemm from its own kernels: with the process-wide table at
 * the generic level, each level's gemm for one activation row is its own vec_dot, bit
 * for bit, for every type (check_gemm), and the tables hold no generic kernel for a
 * type the level accelerates. */
static void test_self_contained(int lvl) {
    NEED_LEVEL(lvl);
    CHECK(!strcmp(th_cpu_kernels()->level, "generic"), "process-wide level %s, expected generic (TH_CPU)", th_cpu_kernels()->level);
    const th_kernels *g = &level_k[TH_LEVEL_GENERIC];
    for (int t = 0; t < N_WTYPES; t++) {
        const uint32_t type = wtypes[t].type;
        const int64_t blk = th_type_info_get(type)->block;
        CHECK(K->vec_dot[type] != g->vec_dot[type] && K->gemm[type] != g->gemm[type], "%s %s: generic vec_dot or gemm",
              K->level, th_type_name(type));
        check_gemm(K, &wtypes[t], 3 * (blk == 1 ? 32 : blk), 9, 1, 9, 1);
    }
}

/* Largest codes times +-127 activations everywhere: any 16-bit saturation shows. */
static void test_extremes(int lvl) {
    NEED_LEVEL(lvl);
    extreme = true;
    for (int t = 0; t < N_WTYPES; t++) {
        int64_t blk = th_type_info_get(wtypes[t].type)->block;
        if (blk == 1) continue;
        check_vec_dot(K, &wtypes[t], 8 * blk);
        check_gemm(K, &wtypes[t], 8 * blk, 16, 0, 16, 8);
    }
    extreme = false;
}

/* ---------------------------------------------------------------- attention chunks */

/* Rows of attention by the table's chunk kernel (keys fed in chunks of TH_ATTN_TK, as
 * attention.c does) against a double-precision softmax. Row r sees keys [lo_r, hi_r]
 * (causal-like ends, a window when asked). |out - ref| <= 2e-5 * max|v|. */
typedef struct { int d, dv, n, m, window; float softcap; bool sink; } attn_case;

static void attn_reference(const attn_case *t, const float *q, const float *k, const float *v, int lo, int hi,
                           float scale, const float *sink, double *out) {
    double *s = malloc((size_t)t->n * sizeof *s), mx = sink ? *sink : -INFINITY, den = 0;
    for (int j = lo; j <= hi; j++) {
        double dot = 0;
        for (int c = 0; c < t->d; c++) dot += (double)q[c] * k[j * t->d + c];
        s[j] = dot * scale;
        if (t->softcap > 0) s[j] = t->softcap * tanh(s[j] / t->softcap);
        mx = fmax(mx, s[j]);
    }
    for (int c = 0; c < t->dv; c++) out[c] = 0;
    for (int j = lo; j <= hi; j++) {
        double p = exp(s[j] - mx);
        den += p;
        for (int c = 0; c < t->dv; c++) out[c] += p * v[j * t->dv + c];
    }
    if (sink) den += exp(*sink - mx);
    for (int c = 0; c < t->dv; c++) out[c] /= den;
    free(s);
}

static void check_attn_case(const th_kernels *k, const attn_case *t) {
    int dvs = (t->dv + 31) & ~31, m = t->m;
    float *q = malloc(sizeof(float) * m * t->d), *kk = malloc(sizeof(float) * t->n * t->d);
    float *v = malloc(sizeof(float) * t->n * t->dv), *kt = calloc((size_t)t->d * TH_ATTN_TK, sizeof(float));
    float *vt = calloc((size_t)TH_ATTN_TK * dvs, sizeof(float)), *acc = calloc((size_t)m * dvs, sizeof(float));
    float *mx = malloc(sizeof(float) * m), *sum = calloc(m, sizeof(float)), *out = malloc(sizeof(float) * t->dv);
    int32_t *lo = malloc(sizeof(int32_t) * m), *hi = malloc(sizeof(int32_t) * m), *j0 = malloc(sizeof(int32_t) * m), *j1 = malloc(sizeof(int32_t) * m);
    double *ref = malloc(sizeof(double) * t->dv);
    for (int i = 0; i < m * t->d; i++) q[i] = 2 * rndf();
    for (int i = 0; i < t->n * t->d; i++) kk[i] = 2 * rndf();
    float vmax = 0, scale = 1.0f / sqrtf((float)t->d), sink = 0.5f;
    for (int i = 0; i < t->n * t->dv; i++) vmax = fmaxf(vmax, fabsf(v[i] = rndf()));
    for (int r = 0; r < m; r++) {
        hi[r] = t->n - 1 - (r * 7) % (t->n < 9 ? 1 : 9);
        lo[r] = t->window ? (hi[r] - t->window + 1 > 0 ? hi[r] - t->window + 1 : 0) : 0;
        mx[r] = -INFINITY;
    }
    th_attn_chunk a = { .m = m, .d = t->d, .dv = t->dv, .dv_stride = dvs, .q = q, .kt = kt, .v = vt, .j0 = j0, .j1 = j1,
                        .scale = scale, .softcap = t->softcap, .mx = mx, .sum = sum, .acc = acc };
    for (int c0 = 0; c0 < t->n; c0 += TH_ATTN_TK) {
        int nk = t->n - c0 < TH_ATTN_TK ? t->n - c0 : TH_ATTN_TK;
        for (int j = 0; j < nk; j++) {
            for (int c = 0; c < t->d; c++) kt[c * TH_ATTN_TK + j] = kk[(c0 + j) * t->d + c];
            memcpy(vt + j * dvs, v + (c0 + j) * t->dv, sizeof(float) * t->dv);
        }
        for (int r = 0; r < m; r++) {
            j0[r] = lo[r] - c0 > 0 ? lo[r] - c0 : 0;
            j1[r] = hi[r] + 1 - c0 < nk ? hi[r] + 1 - c0 : nk;
        }
        k->attn_chunk(&a);
    }
    double worst = 0;
    for (int r = 0; r < m; r++) {
        th_attn_finish_row(out, acc + r * dvs, t->dv, mx[r], sum[r], t->sink ? &sink : NULL);
        attn_reference(t, q + r * t->d, kk, v, lo[r], hi[r], scale, t->sink ? &sink : NULL, ref);
        for (int c = 0; c < t->dv; c++) worst = fmax(worst, fabs(out[c] - ref[c]));
    }
    CHECK(worst <= 2e-5 * vmax, "%s attention d %d dv %d keys %d rows %d window %d softcap %g sink %d: error %.3g (max|v| %.3g)",
          k->level, t->d, t->dv, t->n, m, t->window, t->softcap, t->sink, worst, vmax);
    free(q); free(kk); free(v); free(kt); free(vt); free(acc); free(mx); free(sum); free(out);
    free(lo); free(hi); free(j0); free(j1); free(ref);
}

static void check_attention(const th_kernels *k) {
    static const int dims[][2] = { { 64, 64 }, { 80, 80 }, { 128, 128 }, { 192, 128 }, { 40, 72 } };
    static const int lens[] = { 1, 7, 64, 65, 130, 300 }, rows[] = { 1, 3, 64 };
    for (size_t di = 0; di < 5; di++)
        for (size_t li = 0; li < 6; li++)
            for (size_t ri = 0; ri < 3; ri++)
                for (int f = 0; f < 8; f++) {
                    attn_case t = { dims[di][0], dims[di][1], lens[li], rows[ri], (f & 1) ? 50 : 0,
                                    (f & 2) ? 20.0f : 0.0f, (f & 4) != 0 };
                    check_attn_case(k, &t);
                }
}

/* SwiGLU against th_op_swiglu (expf): |simd - ref| <= 1e-6 (|ref| + |up|), gates up to
 * +-100 (exp's clamps), odd lengths for the scalar tail. */
static void check_swiglu(const th_kernels *k) {
    enum { N = 1000 + 7 };
    float *g = malloc(N * sizeof *g), *u = malloc(N * sizeof *u), *a = malloc(N * sizeof *a), *r = malloc(N * sizeof *r);
    for (int i = 0; i < N; i++) { g[i] = (i % 10 == 0 ? 100.0f : 8.0f) * rndf(); u[i] = rndf(); }
    th_op_swiglu(r, g, u, N);
    k->swiglu(a, g, u, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += !(fabsf(a[i] - r[i]) <= 1e-6f * (fabsf(r[i]) + fabsf(u[i])));
    CHECK(bad == 0, "%s swiglu: %d of %d values off", k->level, bad, N);
    free(g); free(u); free(a); free(r);
}

static void test_attention_generic(void) { NEED_LEVEL(TH_LEVEL_GENERIC); check_attention(K); }
static void test_attention(int lvl) { NEED_LEVEL(lvl); check_attention(K); check_swiglu(K); }

/* BF16 at the avx512 level is vdpbf16ps where the CPU has AVX512-BF16 (the level does
 * not require it): check that the table really holds that vec_dot there (so that the
 * vec_dot tests above, and the gemm tests' batches below 8, covered them), and that bf16 subnormals (read as zero by
 * vdpbf16ps), zeros and large values stay within the tolerance. */
static void test_bf16_instructions_avx512(void) {
#if !defined(__x86_64__)
    SKIP("not an x86-64 build");
#endif
    NEED_LEVEL(TH_LEVEL_AVX512);
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx512bf16")) SKIP("CPU lacks AVX512-BF16 (the level keeps the AVX2 BF16 kernels)");
#endif
    CHECK(level_k[TH_LEVEL_AVX512].vec_dot[TH_BF16] != level_k[TH_LEVEL_AVX2].vec_dot[TH_BF16], "avx512 BF16 vec_dot is the AVX2 one");
    const int64_t n = 100;
    uint16_t w[100], a[100];
    for (int i = 0; i < n; i++) {
        w[i] = th_f32_to_bf16(i % 7 == 0 ? 1e-39f : i % 11 == 0 ? 0.0f : i % 13 == 0 ? 3e30f : rndf());
        a[i] = th_f32_to_bf16(i % 5 == 0 ? -2e-39f : rndf() * 4);
    }
    float ref = th_ref_vec_dot(TH_BF16, n, w, a), got = NAN;
    K->vec_dot[TH_BF16](n, &got, w, a);
    double tol = 1e-5 * dot_scale(TH_BF16, w, a, n);
    CHECK(fabs((double)got - ref) <= tol, "BF16 edge values: got %.9g ref %.9g (tol %.3g)", got, ref, tol);
}

int main(void) {
    setenv("TH_CPU", "generic", 1);   /* the process-wide table: none of the levels under test */
    init_levels();
    RUN_LEVELS(test_quantize);
    RUN_LEVELS(test_vec_dot);
    RUN_LEVELS(test_mxfp4_exponent_edges);
    RUN_LEVELS(test_gemm);
    RUN_LEVELS(test_extremes);
    RUN_LEVELS(test_self_contained);
    RUN_LEVELS(test_attention);
    RUN(test_bf16_instructions_avx512);
    RUN(test_tolerance_catches_one_bad_element);
    RUN(test_generic_gemm_matches_reference);
    RUN(test_attention_generic);
    return CHECK_DONE();
}
