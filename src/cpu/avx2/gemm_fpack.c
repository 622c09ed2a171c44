/* gemm_fpack.c (avx2) — the packed gemm of F16 and BF16 weights (activations of the
 * same type) with AVX2/FMA/F16C, on the layout of quant/repack.c th_repack8_16bit (per
 * group of 8 rows, element k of the 8 rows side by side: one ymm of f32 after vcvtph2ps).
 * Same scheme as avx512/gemm_fpack.c with 8-lane vectors and 16 registers: per call,
 * activation rows in blocks of up to XC converted to f32 (column-major, k blocks of KC),
 * weights converted once per panel of 16 rows (2 groups) and k block into pan[k * 16 +
 * row] (16 KiB, in L1); the microkernel holds 16 rows x up to 6 activation rows in 12 ymm
 * accumulators (per k: 2 loads, 6 broadcasts, 12 FMAs), f32 accumulation, k blocks after
 * the first added to y. Decode (nb == 1): each group's stream against the activation in
 * f32, 4 accumulators, prefetching TH_PREFETCH_AHEAD ahead. Row ranges are whole groups
 * (the packed layout exists only for rows % 8 == 0). */
#include "cpu/avx2/util.h"
#include <stdlib.h>

enum { KC = 256, NR = 6, XC = 512, XC_STACK = 48, MR = 16, KD = 2048 };

static inline __attribute__((always_inline)) __m256 cvt8(const int bf, const uint16_t *p) {
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (bf) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}
static inline __attribute__((always_inline)) float cvt1(const int bf, uint16_t h) {
    return bf ? th_bf16_to_f32(h) : avx2_f16(h);
}

/* dst[k] = element k0 + k of src as f32, k < kc (zeros up to a multiple of 8). */
static inline __attribute__((always_inline)) void convert_row(const int bf, const uint16_t *src, int64_t kc, float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) _mm256_storeu_ps(dst + k, cvt8(bf, src + k));
    for (; k < kc; k++) dst[k] = cvt1(bf, src[k]);
    for (; k & 7; k++) dst[k] = 0.0f;
}

/* pan[k * MR + 8q + i] = row 8q + i of the panel at element k0 + k, q < ng; the next
 * panel's runs (pf_ng groups) prefetched meanwhile (see avx512/gemm_fpack.c). */
static inline __attribute__((always_inline)) void convert_panel(const int bf, const uint16_t *w, int64_t n, int ng, int pf_ng,
                                                                int64_t k0, int64_t kc, float *pan) {
    for (int q = 0; q < ng; q++) {
        const uint16_t *g = w + (size_t)q * 8 * (size_t)n + 8 * k0;
        const uint16_t *pf = q < pf_ng ? g + (size_t)MR * (size_t)n : NULL;
        for (int64_t k = 0; k < kc; k++) {
            if (pf && !(k & 3)) __builtin_prefetch(pf + 8 * k, 0, 2);
            _mm256_storeu_ps(pan + k * MR + 8 * q, cvt8(bf, g + 8 * k));
        }
    }
}

/* y[j * ys + i] (+)= sum over k < kc of pan[k][i] * xb[j * KC + k], i < 8 MV, j < NC. */
static inline __attribute__((always_inline)) void micro(const int MV, const int NC, int64_t kc, const float *pan,
                                                        const float *xb, float *y, int64_t ys, bool add) {
    __m256 c0[NR], c1[NR];
    _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) c0[j] = c1[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_loadu_ps(pan + k * MR);
        const __m256 w1 = MV == 2 ? _mm256_loadu_ps(pan + k * MR + 8) : w0;
        _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) {
            const __m256 b = _mm256_broadcast_ss(xb + j * KC + k);
            c0[j] = _mm256_fmadd_ps(w0, b, c0[j]);
            if (MV == 2) c1[j] = _mm256_fmadd_ps(w1, b, c1[j]);
        }
    }
    _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) {
        float *yp = y + j * ys;
        if (add) c0[j] = _mm256_add_ps(c0[j], _mm256_loadu_ps(yp));
        _mm256_storeu_ps(yp, c0[j]);
        if (MV == 2) {
            if (add) c1[j] = _mm256_add_ps(c1[j], _mm256_loadu_ps(yp + 8));
            _mm256_storeu_ps(yp + 8, c1[j]);
        }
    }
}

/* Small batches (nb <= 2 NR): the weights converted in the loop (one vcvtph2ps per group
 * and k) instead of a panel pass, which would cost more than it saves. g0, g1: the two
 * groups' runs at element k0 (g1 = g0 for a one-group panel, MV 1). */
static inline __attribute__((always_inline)) void micro_direct(const int bf, const int MV, const int NC, int64_t kc,
                                                               const uint16_t *g0, const uint16_t *g1, const float *xb,
                                                               float *y, int64_t ys, bool add) {
    __m256 c0[NR], c1[NR];
    _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) c0[j] = c1[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = cvt8(bf, g0 + 8 * k);
        const __m256 w1 = MV == 2 ? cvt8(bf, g1 + 8 * k) : w0;
        _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) {
            const __m256 b = _mm256_broadcast_ss(xb + j * KC + k);
            c0[j] = _mm256_fmadd_ps(w0, b, c0[j]);
            if (MV == 2) c1[j] = _mm256_fmadd_ps(w1, b, c1[j]);
        }
    }
    _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) {
        float *yp = y + j * ys;
        if (add) c0[j] = _mm256_add_ps(c0[j], _mm256_loadu_ps(yp));
        _mm256_storeu_ps(yp, c0[j]);
        if (MV == 2) {
            if (add) c1[j] = _mm256_add_ps(c1[j], _mm256_loadu_ps(yp + 8));
            _mm256_storeu_ps(yp + 8, c1[j]);
        }
    }
}
typedef void (*direct_fn)(int64_t kc, const uint16_t *g0, const uint16_t *g1, const float *xb, float *y, int64_t ys,
                          bool add);
#define DIRECT(BF, MV, NC)                                                                                  \
    static void direct_##BF##_##MV##_##NC(int64_t kc, const uint16_t *g0, const uint16_t *g1, const float *xb, \
                                          float *y, int64_t ys, bool add) {                                 \
        micro_direct(BF, MV, NC, kc, g0, g1, xb, y, ys, add);                                               \
    }
#define DIRECT_MV(BF, MV) DIRECT(BF, MV, 1) DIRECT(BF, MV, 2) DIRECT(BF, MV, 3) DIRECT(BF, MV, 4) DIRECT(BF, MV, 5) \
    DIRECT(BF, MV, 6)
#define DIRECT_ROW(BF, MV) { direct_##BF##_##MV##_1, direct_##BF##_##MV##_2, direct_##BF##_##MV##_3, \
    direct_##BF##_##MV##_4, direct_##BF##_##MV##_5, direct_##BF##_##MV##_6 }
DIRECT_MV(0, 1)
DIRECT_MV(0, 2)
DIRECT_MV(1, 1)
DIRECT_MV(1, 2)
static const direct_fn directs[2][2][NR] = { { DIRECT_ROW(0, 1), DIRECT_ROW(0, 2) }, { DIRECT_ROW(1, 1), DIRECT_ROW(1, 2) } };

typedef void (*micro_fn)(int64_t kc, const float *pan, const float *xb, float *y, int64_t ys, bool add);
#define MICRO(MV, NC)                                                                                       \
    static void micro_##MV##_##NC(int64_t kc, const float *pan, const float *xb, float *y, int64_t ys, bool add) { \
        micro(MV, NC, kc, pan, xb, y, ys, add);                                                             \
    }
#define MICRO_MV(MV) MICRO(MV, 1) MICRO(MV, 2) MICRO(MV, 3) MICRO(MV, 4) MICRO(MV, 5) MICRO(MV, 6)
MICRO_MV(1)
MICRO_MV(2)
static const micro_fn micros[2][NR] = {
    { micro_1_1, micro_1_2, micro_1_3, micro_1_4, micro_1_5, micro_1_6 },
    { micro_2_1, micro_2_2, micro_2_3, micro_2_4, micro_2_5, micro_2_6 },
};

/* Decode: y[r] = dot(row r, x) for the groups of [r0, r1). */
static inline __attribute__((always_inline)) void matvec(const int bf, int64_t n, int64_t r0, int64_t r1, const void *w,
                                                         size_t ws, const void *x, float *y) {
    float xf[KD + 8];
    for (int64_t k0 = 0; k0 < n; k0 += KD) {
        const int64_t kd = TH_MIN(KD, n - k0);
        convert_row(bf, (const uint16_t *)x + k0, kd, xf);
        for (int64_t r = r0; r < r1; r += 8) {
            const uint16_t *g = (const uint16_t *)(const void *)((const char *)w + (size_t)r * ws) + 8 * k0;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            int64_t k = 0;
            for (; k + 4 <= kd; k += 4) {
                th_prefetch_span(g + 8 * k + TH_PREFETCH_AHEAD / 2, 64);
                a0 = _mm256_fmadd_ps(cvt8(bf, g + 8 * k), _mm256_broadcast_ss(xf + k), a0);
                a1 = _mm256_fmadd_ps(cvt8(bf, g + 8 * k + 8), _mm256_broadcast_ss(xf + k + 1), a1);
                a2 = _mm256_fmadd_ps(cvt8(bf, g + 8 * k + 16), _mm256_broadcast_ss(xf + k + 2), a2);
                a3 = _mm256_fmadd_ps(cvt8(bf, g + 8 * k + 24), _mm256_broadcast_ss(xf + k + 3), a3);
            }
            for (; k < kd; k++) a0 = _mm256_fmadd_ps(cvt8(bf, g + 8 * k), _mm256_broadcast_ss(xf + k), a0);
            __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
            if (k0) s = _mm256_add_ps(s, _mm256_loadu_ps(y + r));
            _mm256_storeu_ps(y + r, s);
        }
    }
}

static inline __attribute__((always_inline)) void fpack(const int bf, int64_t n, int64_t r0, int64_t r1, const void *w,
                                                        size_t ws, int64_t nb, const void *x, size_t xs, float *y,
                                                        int64_t ys) {
    if (nb == 1) { matvec(bf, n, r0, r1, w, ws, x, y); return; }
    float pan[KC * MR] __attribute__((aligned(32)));
    float xb_stack[XC_STACK * KC] __attribute__((aligned(32)));
    int64_t xc = TH_MIN(nb, XC);
    float *xb = xc > XC_STACK ? aligned_alloc(64, sizeof(float) * (size_t)(xc * KC)) : NULL;
    if (!xb) { xb = xb_stack; xc = TH_MIN(xc, XC_STACK); }
    for (int64_t c0 = 0; c0 < nb; c0 += xc) {
        const int64_t ncb = TH_MIN(xc, nb - c0);
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int64_t kc = TH_MIN(KC, n - k0);
            for (int64_t j = 0; j < ncb; j++)
                convert_row(bf, (const uint16_t *)(const void *)((const char *)x + (size_t)(c0 + j) * xs) + k0, kc, xb + j * KC);
            for (int64_t r = r0; r < r1; r += MR) {
                const int pr = (int)TH_MIN(MR, r1 - r), mv = pr > 8 ? 2 : 1;
                const int pf_ng = (int)((TH_MIN(MR, TH_MAX(0, r1 - r - MR)) + 7) / 8);
                const uint16_t *wr = (const uint16_t *)(const void *)((const char *)w + (size_t)r * ws);
                if (ncb <= 2 * NR) {                   /* see micro_direct */
                    const uint16_t *g0 = wr + 8 * k0, *g1 = mv == 2 ? g0 + 8 * (size_t)n : g0;
                    for (int64_t j0 = 0; j0 < ncb; j0 += NR)
                        directs[bf][mv - 1][TH_MIN(NR, ncb - j0) - 1](kc, g0, g1, xb + j0 * KC, y + (c0 + j0) * ys + r, ys,
                                                                     k0 > 0);
                    continue;
                }
                convert_panel(bf, wr, n, mv, pf_ng, k0, kc, pan);
                for (int64_t j0 = 0; j0 < ncb; j0 += NR) {
                    const int nc = (int)TH_MIN(NR, ncb - j0);
                    micros[mv - 1][nc - 1](kc, pan, xb + j0 * KC, y + (c0 + j0) * ys + r, ys, k0 > 0);
                }
            }
        }
    }
    if (xb != xb_stack) free(xb);
}

void th_avx2_fpack_f16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                       size_t xs, float *y, int64_t ys) {
    fpack(0, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
void th_avx2_fpack_bf16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                        size_t xs, float *y, int64_t ys) {
    fpack(1, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
