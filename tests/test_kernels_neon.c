/* test_kernels_neon.c — every NEON (aarch64 dotprod) kernel of the CPU kernel table
 * against the reference kernels of src/quant (th_ref_*), on random inputs of awkward
 * sizes. Same rules as tests/test_kernels.c (the x86 levels):
 * - activation quantizers (Q8_0, Q8_1, Q8_K, F16, BF16) must give the reference's bytes
 *   exactly, including ties and all-zero blocks;
 * - vec_dot and gemm: |neon - ref| <= 1e-5 * S, S = sum|w_i a_i| + max|w| * sum|a_i|
 *   (the integer block sums are exact in both; only the order of the float additions
 *   differs); gemm outputs are compared with th_ref_vec_dot (and, for one activation
 *   row, must be the NEON vec_dot's bit for bit), and nothing outside the requested rows
 *   may be written;
 * - the same for weights quantized by llama.cpp (the tiny fixtures and gpt-oss MXFP4).
 * On an x86 host (make tests) the binary prints one SKIP line; tests/t_neon.sh cross-builds this
 * file (make neon-test) and runs it under qemu-aarch64 -cpu max.
 * `test_kernels_neon level` runs only the level-detection test (t_neon.sh runs it on a
 * CPU model without dotprod, with TH_EXPECT_LEVEL=generic). */
#include "check.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"
#include "gguf/gguf.h"
#include <stddef.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#endif

#define KERNEL_TEST_SEED 0x2545f4914f6cdd1dULL
#include "kernel_inputs.h"

static th_kernels neon_k, generic_k;
static bool neon_ok;
static const th_kernels *K = &neon_k;

static void init_level(void) {
    th_kernels_fill(&generic_k, TH_LEVEL_GENERIC);
    neon_ok = th_kernels_fill(&neon_k, TH_LEVEL_NEON);
}

#if defined(__aarch64__)
#define NEED_NEON() do { if (!neon_ok) SKIP("CPU lacks the neon level (no dotprod in HWCAP)"); } while (0)
#else
#define NEED_NEON() SKIP("not an aarch64 build (tests/t_neon.sh runs this under qemu-aarch64)")
#endif


/* ---------------------------------------------------------------- level and table */

static void test_level_detection(void) {
    const char *want = getenv("TH_EXPECT_LEVEL"), *force = getenv("TH_CPU");
    if (!want || !*want) want = neon_ok && !(force && !strcmp(force, "generic")) ? "neon" : "generic";
    const char *got = th_cpu_kernels()->level;
    CHECK(!strcmp(got, want), "th_cpu_kernels()->level is %s, expected %s", got, want);
#if defined(__aarch64__)
    const bool hwcap = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    CHECK(neon_ok == hwcap && th_cpu_has_level(TH_LEVEL_NEON) == hwcap, "th_kernels_fill(neon) %d, HWCAP dotprod %d", neon_ok, hwcap);
#endif
    CHECK(!th_cpu_has_level(TH_LEVEL_AVX2) && !th_cpu_has_level(TH_LEVEL_AVX512), "an x86 level on aarch64");
}

/* Every weight type of the core issue has a NEON vec_dot and a NEON gemm, every
 * activation type a NEON quantizer (not the generic entries). */
static void test_table_filled(void) {
    NEED_NEON();
    for (int t = 0; t < N_WTYPES; t++) {
        const uint32_t type = wtypes[t].type;
        CHECK(K->vec_dot[type] != generic_k.vec_dot[type], "vec_dot %s is generic", th_type_name(type));
        CHECK(K->gemm[type] != generic_k.gemm[type], "gemm %s is generic", th_type_name(type));
    }
    static const uint32_t acts[] = { TH_Q8_0, TH_Q8_1, TH_Q8_K, TH_F16, TH_BF16 };
    for (size_t t = 0; t < sizeof acts / sizeof acts[0]; t++)
        CHECK(K->quantize[acts[t]] != generic_k.quantize[acts[t]], "quantize %s is generic", th_type_name(acts[t]));
}

/* ---------------------------------------------------------------- quantizers */

static void check_quantize(uint32_t at, const float *x, int64_t n, const char *what) {
    size_t bytes = row_bytes(at, n);
    uint8_t *a = calloc(1, bytes + 1), *b = calloc(1, bytes + 1);
    th_ref_quantize(at, x, a, n);
    K->quantize[at](x, b, n);
    size_t diff = 0;
    while (diff < bytes && a[diff] == b[diff]) diff++;
    CHECK(diff == bytes, "neon %s %s n=%lld: first differing byte %zu of %zu (ref %02x, neon %02x)", th_type_name(at),
          what, (long long)n, diff, bytes, diff < bytes ? a[diff] : 0, diff < bytes ? b[diff] : 0);
    CHECK(b[bytes] == 0, "neon %s %s wrote past the end", th_type_name(at), what);
    free(a);
    free(b);
}

static void test_quantize_neon(void) {
    NEED_NEON();
    static const uint32_t acts[] = { TH_Q8_0, TH_Q8_1, TH_Q8_K, TH_F16, TH_BF16 };
    static const int64_t sizes[] = { 256, 512, 256 * 7 };
    float *x = malloc(2048 * sizeof *x);
    for (size_t t = 0; t < sizeof acts / sizeof acts[0]; t++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            random_acts(x, sizes[s]);
            check_quantize(acts[t], x, sizes[s], "random");
        }
        /* ties: x * 127/amax lands on k + 0.5 (amax = 127 makes the scale exactly 1) */
        for (int i = 0; i < 256; i++) x[i] = (float)((i % 254) - 127) + (i % 3 == 0 ? 0.5f : 0.0f);
        x[5] = 127.0f; x[37] = -127.0f; x[69] = 127.0f;
        for (int b = 0; b < 8; b++) x[32 * b + 1] = (b & 1) ? 127.0f : -127.0f;
        check_quantize(acts[t], x, 256, "ties");
        /* an all-zero block among others; largest magnitude negative and repeated */
        for (int i = 0; i < 512; i++) x[i] = i < 256 ? 0.0f : rndf();
        x[300] = -3.0f; x[301] = 3.0f; x[302] = -3.0f;
        check_quantize(acts[t], x, 512, "zeros");
    }
    static const int64_t odd[] = { 1, 3, 5, 33, 1001 }; /* F16/BF16 take any n: scalar tails */
    for (size_t s = 0; s < sizeof odd / sizeof odd[0]; s++) {
        random_acts(x, odd[s]);
        check_quantize(TH_F16, x, odd[s], "odd");
        check_quantize(TH_BF16, x, odd[s], "odd");
    }
    float edge[16] = { 65504.0f, 65520.0f, 1e6f, -1e6f, 6e-8f, 3e-8f, 1e-5f, -1e-7f,
                       1.0009765625f * 1.00048828125f, 2049.0f, 2051.0f, -0.0f, 0.0f, 1.5f, 3.0e38f, 1e-40f };
    check_quantize(TH_F16, edge, 16, "edge");
    check_quantize(TH_BF16, edge, 16, "edge");
    /* bf16 rounding ties (low 16 bits 0x8000: even mantissa stays, odd rounds up), a
     * carry into the exponent, and NaNs (quieted, never rounded to infinity) */
    static const uint32_t bits[8] = { 0x3f808000u, 0x3f818000u, 0xbf808000u, 0xbf818000u,
                                      0x3fff8000u, 0x7f7f8000u, 0x7f800001u, 0xffc12345u };
    float ties[8];
    memcpy(ties, bits, sizeof ties);
    check_quantize(TH_BF16, ties, 8, "ties");
    free(x);
}

/* ---------------------------------------------------------------- vec_dot */

static int vec_dot_checked;
static double worst_ratio;

static void check_vec_dot(const wtype *wt, int64_t n) {
    const uint32_t type = wt->type, at = th_type_info_get(type)->act_type;
    uint8_t *w = malloc(row_bytes(type, n)), *a = malloc(row_bytes(at, n));
    float *x = malloc((size_t)n * sizeof *x);
    random_weights(wt, w, 1, n);
    random_acts(x, n);
    th_ref_quantize(at, x, a, n);
    float ref = th_ref_vec_dot(type, n, w, a), got = NAN;
    K->vec_dot[type](n, &got, w, a);
    double tol = 1e-5 * dot_scale(type, w, a, n) + 1e-30;
    if (fabs((double)got - ref) / tol * 1e-5 > worst_ratio) worst_ratio = fabs((double)got - ref) / tol * 1e-5;
    CHECK(fabs((double)got - ref) <= tol, "neon vec_dot %s n=%lld: got %.9g ref %.9g (diff %.3g, tol %.3g)",
          th_type_name(type), (long long)n, got, ref, fabs((double)got - ref), tol);
    vec_dot_checked++;
    free(w);
    free(a);
    free(x);
}

static void test_vec_dot_neon(void) {
    NEED_NEON();
    static const int64_t nblocks[] = { 1, 2, 3, 5, 8, 17, 64 };
    for (int t = 0; t < N_WTYPES; t++) {
        int64_t blk = th_type_info_get(wtypes[t].type)->block;
        for (size_t s = 0; s < sizeof nblocks / sizeof nblocks[0]; s++)
            for (int rep = 0; rep < 3; rep++) check_vec_dot(&wtypes[t], nblocks[s] * (blk == 1 ? 32 : blk));
        if (blk == 1) {
            static const int64_t odd[] = { 1, 3, 4, 5, 15, 17, 33, 1001 };
            for (size_t s = 0; s < sizeof odd / sizeof odd[0]; s++) check_vec_dot(&wtypes[t], odd[s]);
        }
    }
    CHECK(vec_dot_checked > 320, "only %d vec_dot cases ran", vec_dot_checked);
    printf("  neon: %d cases, worst |neon - ref| / S = %.2g (tolerance 1e-5)\n", vec_dot_checked, worst_ratio);
}

/* MXFP4 block exponents at the edges of the E8M0 decode (subnormal 2^-128, 2^-127). */
static void test_mxfp4_exponent_edges_neon(void) {
    NEED_NEON();
    static const uint8_t es[] = { 0, 1, 2, 3, 126, 127, 128, 129, 140 };
    th_block_mxfp4 w[9];
    uint8_t *a = malloc(row_bytes(TH_Q8_0, 9 * 32));
    float x[9 * 32];
    for (int b = 0; b < 9; b++) {
        w[b].e = es[b];
        for (int j = 0; j < 16; j++) w[b].qs[j] = (uint8_t)rnd();
    }
    random_acts(x, 9 * 32);
    th_ref_quantize(TH_Q8_0, x, a, 9 * 32);
    for (int one = 0; one < 9; one++) { /* one block: the same integer sum times the same scale */
        const void *ab = a + one * sizeof(th_block_q8_0);
        float ref = th_ref_vec_dot(TH_MXFP4, 32, &w[one], ab), got;
        K->vec_dot[TH_MXFP4](32, &got, &w[one], ab);
        CHECK(got == ref, "e=%d: got %.9g ref %.9g", es[one], got, ref);
    }
    free(a);
}

/* The tolerance is tight enough that one wrong element in a row of 8 blocks fails. */
static void test_tolerance_catches_one_bad_element(void) {
    NEED_NEON();
    const int64_t n = 8 * 32;
    uint8_t *w = malloc(row_bytes(TH_Q4_0, n)), *a = malloc(row_bytes(TH_Q8_0, n));
    float *x = malloc((size_t)n * sizeof *x);
    random_weights(&wtypes[3], w, 1, n);
    random_acts(x, n);
    th_ref_quantize(TH_Q8_0, x, a, n);
    float good;
    K->vec_dot[TH_Q4_0](n, &good, w, a);
    ((th_block_q4_0 *)w)[5].qs[3] ^= 0x08; /* element 3 of block 5 moves by 8 codes */
    th_block_q8_0 *ab = (th_block_q8_0 *)a;
    if (ab[5].qs[3] == 0) ab[5].qs[3] = 1;
    float ref = th_ref_vec_dot(TH_Q4_0, n, w, a);
    double tol = 1e-5 * dot_scale(TH_Q4_0, w, a, n);
    CHECK(fabs((double)good - ref) > tol, "one corrupted element changed the dot by %.3g, tol %.3g",
          fabs((double)good - ref), tol);
    free(w);
    free(a);
    free(x);
}

/* ---------------------------------------------------------------- gemm */

static void check_gemm(const wtype *wt, int64_t n, int64_t rows, int64_t r0, int64_t r1, int64_t nb) {
    const uint32_t type = wt->type, at = th_type_info_get(type)->act_type;
    const size_t ws = row_bytes(type, n), xs = row_bytes(at, n);
    const int64_t ys = rows + 3;
    uint8_t *w = malloc(ws * (size_t)rows), *a = malloc(xs * (size_t)nb);
    float *x = malloc((size_t)n * sizeof *x), *y = malloc(sizeof *y * (size_t)(ys * nb));
    random_weights(wt, w, rows, n);
    for (int64_t b = 0; b < nb; b++) { random_acts(x, n); K->quantize[at](x, a + (size_t)b * xs, n); }
    for (int64_t i = 0; i < ys * nb; i++) y[i] = -12345.0f;
    K->gemm[type](n, r0, r1, w, ws, nb, a, xs, y, ys);
    int bad = 0;
    for (int64_t b = 0; b < nb && bad < 3; b++)
        for (int64_t r = 0; r < ys && bad < 3; r++) {
            float got = y[b * ys + r], want = -12345.0f, dot = want;
            double tol = 0;
            if (r >= r0 && r < r1) {
                const void *wr = w + (size_t)r * ws, *ar = a + (size_t)b * xs;
                want = th_ref_vec_dot(type, n, wr, ar);
                K->vec_dot[type](n, &dot, wr, ar);
                tol = 1e-5 * dot_scale(type, wr, ar, n) + 1e-30;
            }
            /* one activation row: the NEON vec_dot itself, bit for bit */
            if (!(fabs((double)got - want) <= tol) || (nb == 1 && got != dot)) {
                bad++;
                CHECK(0, "neon gemm %s n=%lld rows [%lld,%lld) nb=%lld: y[b=%lld][r=%lld] = %.9g, ref %.9g, vec_dot %.9g",
                      th_type_name(type), (long long)n, (long long)r0, (long long)r1, (long long)nb,
                      (long long)b, (long long)r, got, want, dot);
            }
        }
    free(w); free(a); free(x); free(y);
}

static const int64_t gemm_shapes[][4] = { /* rows, r0, r1, nb */
    { 1, 0, 1, 1 }, { 4, 0, 4, 4 }, { 5, 0, 5, 3 }, { 13, 2, 11, 7 }, { 9, 1, 9, 2 }, { 7, 3, 4, 5 }, { 6, 0, 6, 37 },
};

static void test_gemm_neon(void) {
    NEED_NEON();
    for (int t = 0; t < N_WTYPES; t++) {
        int64_t blk = th_type_info_get(wtypes[t].type)->block;
        for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
            for (int64_t nblk = 1; nblk <= 5; nblk += 4)
                check_gemm(&wtypes[t], nblk * (blk == 1 ? 32 : blk), gemm_shapes[s][0], gemm_shapes[s][1],
                           gemm_shapes[s][2], gemm_shapes[s][3]);
        if (blk == 1)
            check_gemm(&wtypes[t], 45, 5, 1, 5, 3);
    }
}

/* F16 / BF16 packed gemm (neon/gemm_fpack.c, on the th_repack8_16bit layout) against
 * the generic gemm (exact products summed in double) on the original layout: widths
 * around the k blocks (1, 17, 257, 2100), row ranges of 16 and 32 rows from row 8 and a
 * single group, batches of 1 (decode) and 2..33 (every microkernel width); f32
 * accumulation within 1e-5 x (|y| + n / 100). */
static void test_packed_float_neon(void) {
    NEED_NEON();
    static const int64_t ns[] = { 1, 17, 257, 2100 }, rowss[] = { 8, 24, 40 }, nbs[] = { 1, 2, 7, 13, 33 };
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (uint32_t type = TH_F16; type <= TH_BF16; type += TH_BF16 - TH_F16) {
        CHECK(K->gemm_packed[type] != NULL, "neon has no packed %s gemm", th_type_name(type));
        if (!K->gemm_packed[type]) continue;
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t ri = 0; ri < sizeof rowss / sizeof *rowss; ri++) {
                const int64_t n = ns[ni], rows = rowss[ri];
                const size_t rb = (size_t)n * 2;
                uint16_t *w = malloc(rb * (size_t)rows), *wp = malloc(rb * (size_t)rows), *x = malloc(rb * 33);
                float *y0 = calloc((size_t)(33 * rows), 4), *y1 = calloc((size_t)(33 * rows), 4);
                for (int64_t i = 0; i < n * (rows + 33); i++) {
                    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
                    const float f = (float)(int32_t)(seed >> 32) / 2147483648.0f;
                    const uint16_t h = type == TH_F16 ? th_f32_to_f16(f) : th_f32_to_bf16(f);
                    if (i < n * rows) w[i] = h; else x[i - n * rows] = h;
                }
                th_repack_rows(type, w, wp, rows, rb);
                for (size_t bi = 0; bi < sizeof nbs / sizeof *nbs; bi++) {
                    const int64_t nb = nbs[bi], r0 = rows > 8 ? 8 : 0;
                    memset(y1, 0, (size_t)(33 * rows) * 4);
                    generic_k.gemm[type](n, r0, rows, w, rb, nb, x, rb, y0, rows);
                    K->gemm_packed[type](n, r0, rows, wp, rb, nb, x, rb, y1, rows);
                    int bad = 0;
                    for (int64_t b = 0; b < nb; b++)
                        for (int64_t r = 0; r < rows; r++) {
                            const float a = y0[b * rows + r], c = y1[b * rows + r];
                            if (r < r0 ? c != 0.0f : !(fabsf(a - c) <= 1e-5f * (fabsf(a) + (float)n * 0.01f))) bad++;
                        }
                    CHECK(bad == 0, "neon packed %s n %lld rows %lld nb %lld: %d outputs differ", th_type_name(type),
                          (long long)n, (long long)rows, (long long)nb, bad);
                }
                free(w); free(wp); free(x); free(y0); free(y1);
            }
    }
}

/* Largest codes times +-127 activations everywhere: any 16-bit saturation shows. */
static void test_extremes_neon(void) {
    NEED_NEON();
    extreme = true;
    for (int t = 0; t < N_WTYPES; t++) {
        int64_t blk = th_type_info_get(wtypes[t].type)->block;
        if (blk == 1) continue;
        check_vec_dot(&wtypes[t], 8 * blk);
        check_gemm(&wtypes[t], 4 * blk, 9, 0, 9, 6);
    }
    extreme = false;
}

/* ---------------------------------------------------------------- packed gemm */

/* The packed gemm of each type the level packs (qN) on th_repack_rows' layout against the
 * reference dot product of the original rows: rows [r0, r1) in multiples of 8, widths of
 * 1, 3 and 5 groups, every tile width (1, 2, 4 activation rows) full and partial and
 * more than a chunk of 32; extreme codes (all bits set) times +-1 too. */
static void check_packed(uint32_t type, int64_t n, int64_t rows, int64_t r0, int64_t nb) {
    const uint32_t at = th_type_info_get(type)->act_type;
    const size_t ws = row_bytes(type, n), xs = row_bytes(at, n), ps = th_repack_row_bytes(type, ws);
    const int64_t ys = rows + 3;
    const wtype wt = { type, 0, -1 };
    uint8_t *w = malloc(ws * (size_t)rows), *wp = malloc(ps * (size_t)rows), *a = malloc(xs * (size_t)nb);
    float *x = malloc((size_t)n * sizeof *x), *y = malloc(sizeof *y * (size_t)(ys * nb));
    random_weights(&wt, w, rows, n);
    th_repack_rows(type, w, wp, rows, ws);
    for (int64_t b = 0; b < nb; b++) { random_acts(x, n); K->quantize[at](x, a + (size_t)b * xs, n); }
    for (int64_t i = 0; i < ys * nb; i++) y[i] = -12345.0f;
    K->gemm_packed[type](n, r0, rows, wp, ps, nb, a, xs, y, ys);
    int bad = 0;
    for (int64_t b = 0; b < nb && bad < 3; b++)
        for (int64_t r = 0; r < ys && bad < 3; r++) {
            float got = y[b * ys + r], want = -12345.0f;
            double tol = 0;
            if (r >= r0 && r < rows) {
                const void *wr = w + (size_t)r * ws, *ar = a + (size_t)b * xs;
                want = th_ref_vec_dot(type, n, wr, ar);
                tol = 1e-5 * dot_scale(type, wr, ar, n) + 1e-30;
            }
            if (!(fabs((double)got - want) <= tol)) {
                bad++;
                CHECK(0, "neon packed %s%s n=%lld rows [%lld,%lld) nb=%lld: y[b=%lld][r=%lld] = %.9g, ref %.9g", th_type_name(type),
                      extreme ? " (extreme)" : "", (long long)n, (long long)r0, (long long)rows, (long long)nb, (long long)b,
                      (long long)r, got, want);
            }
        }
    free(w); free(wp); free(a); free(x); free(y);
}

static void test_packed_neon(void) {
    NEED_NEON();
    static const int64_t shapes[][3] = { { 8, 0, 1 }, { 8, 0, 2 }, { 16, 8, 3 }, { 24, 8, 4 }, { 24, 0, 5 }, { 8, 0, 7 },
                                         { 16, 0, 9 }, { 8, 0, 33 }, { 40, 8, 6 } };
    int types = 0;
    for (uint32_t type = 0; type < TH_TYPE_COUNT; type++) {
        if (!K->gemm_packed[type] || type == TH_F16 || type == TH_BF16) continue;  /* the float ones: test_packed_float_neon */
        types++;
        const int64_t blk = th_type_info_get(type)->block;
        for (int e = 0; e < 2; e++) {
            extreme = e == 1;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int64_t g = 1; g <= 5; g += 2) check_packed(type, g * blk, shapes[s][0], shapes[s][1], shapes[s][2]);
        }
        extreme = false;
    }
    CHECK(types == 7, "the neon level packs %d types (q2..q8 expected)", types);
    printf("  neon: packed gemm of %d types checked\n", types);
}

/* ---------------------------------------------------------------- real weights */

/* Weights quantized by llama.cpp (the tiny fixtures, one file per type, and the
 * gpt-oss MXFP4 fixture): the first rows of every block-typed matrix times random
 * activations, through the NEON gemm (5 activation rows) and vec_dot, against the
 * reference (3-D expert tensors: the first rows of expert 0). Realistic scales and
 * mins, and the K_M files' mix of types. */
static void check_file_weights(const char *path, uint32_t want_type, int *types_seen) {
    gguf_file *f = NULL;
    if (gguf_open(path, &f) != TH_OK) { CHECK(0, "%s: %s", path, th_last_error()); return; }
    int matrices = 0;
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *g = &f->tensors[t];
        const th_type_info *ti = th_type_info_get(g->type);
        if (g->n_dims < 2 || g->n_dims > 3 || !ti || ti->block == 1 || !ti->supported) continue;
        const int64_t n = (int64_t)g->ne[0], rows = TH_MIN((int64_t)g->ne[1], 6);
        const uint32_t at = ti->act_type;
        const size_t ws = row_bytes(g->type, n), xs = row_bytes(at, n);
        const int64_t nb = 5;
        uint8_t *a = malloc(xs * nb);
        float *x = malloc((size_t)n * sizeof *x), y[6 * 5];
        for (int64_t b = 0; b < nb; b++) { random_acts(x, n); K->quantize[at](x, a + (size_t)b * xs, n); }
        K->gemm[g->type](n, 0, rows, g->data, ws, nb, a, xs, y, rows);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < nb; b++) {
                const void *wr = (const char *)g->data + (size_t)r * ws, *ar = a + (size_t)b * xs;
                float ref = th_ref_vec_dot(g->type, n, wr, ar), dot = NAN;
                K->vec_dot[g->type](n, &dot, wr, ar);
                double tol = 1e-5 * dot_scale(g->type, wr, ar, n) + 1e-30;
                CHECK(fabs((double)y[b * rows + r] - ref) <= tol && fabs((double)dot - ref) <= tol,
                      "%s %.*s (%s) row %lld act %lld: gemm %.9g vec_dot %.9g ref %.9g tol %.3g", path,
                      (int)g->name.len, g->name.ptr, ti->name, (long long)r, (long long)b, y[b * rows + r], dot, ref, tol);
            }
        types_seen[g->type]++;
        matrices++;
        free(a);
        free(x);
    }
    CHECK(matrices > 0 && types_seen[want_type] > 0, "%s: no %s matrix found", path, th_type_name(want_type));
    gguf_close(f);
}

static void test_fixture_weights_neon(void) {
    NEED_NEON();
    static const struct { const char *file; uint32_t type; } files[] = {
        { "tiny/tiny-Q4_0.gguf", TH_Q4_0 }, { "tiny/tiny-Q4_1.gguf", TH_Q4_1 }, { "tiny/tiny-Q5_0.gguf", TH_Q5_0 },
        { "tiny/tiny-Q5_1.gguf", TH_Q5_1 }, { "tiny/tiny-Q8_0.gguf", TH_Q8_0 }, { "tiny/tiny-Q2_K.gguf", TH_Q2_K },
        { "tiny/tiny-Q3_K_M.gguf", TH_Q3_K }, { "tiny/tiny-Q4_K_M.gguf", TH_Q4_K }, { "tiny/tiny-Q5_K_M.gguf", TH_Q5_K },
        { "tiny/tiny-Q6_K.gguf", TH_Q6_K }, { "tiny/tiny-IQ4_NL.gguf", TH_IQ4_NL }, { "tiny/tiny-IQ4_XS.gguf", TH_IQ4_XS },
        { "arch/gpt-oss/model-Q8_0-MXFP4.gguf", TH_MXFP4 },
    };
    FILE *probe = fopen(fixture(files[0].file), "rb");
    if (!probe) SKIP("fixtures not found (%s; set SHARED)", fixture(files[0].file));
    fclose(probe);
    int seen[TH_TYPE_COUNT] = { 0 };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) check_file_weights(fixture(files[i].file), files[i].type, seen);
    printf("  matrices checked per type:");
    for (int t = 0; t < TH_TYPE_COUNT; t++)
        if (seen[t]) printf(" %s %d", th_type_name(t), seen[t]);
    printf("\n");
}

int main(int argc, char **argv) {
#if !defined(__aarch64__)
    (void)argc; (void)argv;
    printf("SKIP test_kernels_neon (not an aarch64 build; tests/t_neon.sh runs it under qemu-aarch64)\n");
    return 0;
#endif
    init_level();
    RUN(test_level_detection);
    if (argc > 1 && !strcmp(argv[1], "level")) return CHECK_DONE();
    RUN(test_table_filled);
    RUN(test_quantize_neon);
    RUN(test_vec_dot_neon);
    RUN(test_mxfp4_exponent_edges_neon);
    RUN(test_tolerance_catches_one_bad_element);
    RUN(test_gemm_neon);
    RUN(test_packed_float_neon);
    RUN(test_extremes_neon);
    RUN(test_packed_neon);
    RUN(test_fixture_weights_neon);
    return CHECK_DONE();
}
