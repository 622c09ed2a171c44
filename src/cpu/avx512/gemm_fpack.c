/* gemm_fpack.c (avx512) — the packed gemm of F16 and BF16 weights (activations of the
 * same type), on the layout of quant/repack.c th_repack8_16bit: per group of 8 rows,
 * element k of the 8 rows side by side (16 bytes per k), made once at load.
 *
 * Batches (nb >= 2), cache-blocked: activation rows in blocks of up to XC, the width in
 * blocks of KC; per (row block, k block) the activations are converted to f32 once (xb,
 * column-major: xb[j * KC + k], vector conversions only, in L2) and, per panel of 32
 * weight rows (4 groups), the weights once (pan[k * 32 + row], 32 KiB, in L1).
 * The microkernel holds 32 rows x up to 12 activation rows in 24 zmm accumulators (16
 * rows per zmm lane-wise, so no horizontal sums): per k, 2 loads of the panel, 12
 * broadcasts of xb, 24 FMAs. Every product of two f16 (or bf16) values is exact in f32,
 * and it is accumulated in f32 (FMA), k blocks after the first added to y. The f16 /
 * bf16 to f32 conversions (vcvtph2ps, a 16-bit shift) are done once per panel and block,
 * not in the inner loop (on this level's Intel cores vcvtph2ps shares ports with FMA;
 * the 2 FMA ports, 32 multiply-adds per cycle, are the roof: bench/bench_float_gemm.c).
 * Panels of 8..24 rows (the last of a range) run with zero-padded groups and masked
 * stores (16-row kernels up to 16 rows).
 *
 * vdpbf16ps (AVX512-BF16: bf16 pairs multiplied exactly, added in f32) is a second BF16
 * kernel, th_avx512_fpack_bf16_dp: panels of bf16 pairs (pan[p][row][2], p = k / 2) and
 * the activations' bf16 pairs broadcast as 32-bit words, 32 multiply-adds per
 * instruction. avx512/kernels.c uses it on AMD cores (by the published instruction
 * tables one vdpbf16ps zmm per FMA zmm on Zen 4; not measured here); on the Intel Xeon of
 * the development VM vdpbf16ps ran at ~0.4 per cycle against 2 FMAs, so FMA wins there.
 *
 * Decode (nb == 1): each 8-row group's stream in k blocks of KD against the activation
 * converted to f32, 4 ymm accumulators, the weights prefetched TH_PREFETCH_AHEAD ahead. */
#include "cpu/avx512/util.h"
#include <stdlib.h>
#include <string.h>

enum { KC = 256, NR = 12, XC = 512, XC_STACK = 48, MR = 32, KD = 2048 };

/* 16 f16 or bf16 values from p as f32 (mask: which to load; the rest are 0). */
AVX512_INLINE __m512 cvt16(const int bf, const uint16_t *p, __mmask16 m) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if (bf) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}
AVX512_INLINE __m256 cvt8(const int bf, const uint16_t *p) {
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (bf) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}
AVX512_INLINE __mmask16 mask16(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

/* xb[j * KC + k] = x row (c + j), element k0 + k, for j < ncb, k < kc (rounded up to 16,
 * zeros past kc). */
AVX512_INLINE void convert_x(const int bf, const void *x, size_t xs, int64_t ncb, int64_t k0, int64_t kc, float *xb) {
    for (int64_t j = 0; j < ncb; j++) {
        const uint16_t *src = (const uint16_t *)(const void *)((const char *)x + (size_t)j * xs) + k0;
        for (int64_t k = 0; k < kc; k += 16) _mm512_store_ps(xb + j * KC + k, cvt16(bf, src + k, mask16(kc - k)));
    }
}

/* pan[k * MR + 8q + i] = row 8q + i of the panel at element k0 + k, for its ng groups
 * (w: the panel's first group); the half of the last zmm that an odd ng leaves is 0.
 * Each group's k block is a 4 KiB run (KC = 256), which the hardware prefetchers enter
 * cold (they stop at page ends): without help, 85 % of the time here was the wait for
 * these loads. So the same runs of the next panel (pf_ng groups, MR rows further) are
 * prefetched while this one is converted; they are read after this panel's
 * microkernels. */
AVX512_INLINE void convert_panel(const int bf, const uint16_t *w, int64_t n, int ng, int pf_ng, int64_t k0, int64_t kc,
                                 float *pan) {
    for (int q = 0; q < ng; q++) {
        const uint16_t *g = w + (size_t)q * 8 * (size_t)n + 8 * k0;
        const uint16_t *pf = q < pf_ng ? g + (size_t)MR * (size_t)n : NULL;
        int64_t k = 0;
        for (; k + 2 <= kc; k += 2) {
            if (pf && !(k & 3)) __builtin_prefetch(pf + 8 * k, 0, 2);
            const __m512 v = cvt16(bf, g + 8 * k, 0xffff);     /* k: rows 0..7, k + 1: rows 0..7 */
            _mm256_store_ps(pan + k * MR + 8 * q, _mm512_castps512_ps256(v));
            _mm256_store_ps(pan + (k + 1) * MR + 8 * q, _mm512_extractf32x8_ps(v, 1));
        }
        if (k < kc) _mm256_store_ps(pan + k * MR + 8 * q, cvt8(bf, g + 8 * k));
    }
    if (ng & 1)
        for (int64_t k = 0; k < kc; k++) _mm256_store_ps(pan + k * MR + 8 * ng, _mm256_setzero_ps());
}

/* y[j * ys + i] (+)= sum over k < kc of pan[k][i] * xb[j * KC + k], i < 16 MV (masks m0,
 * m1 for the two zmm of rows), j < NC. */
AVX512_INLINE void micro(const int MV, const int NC, int64_t kc, const float *pan, const float *xb, float *y,
                         int64_t ys, __mmask16 m0, __mmask16 m1, bool add) {
    __m512 c0[NR], c1[NR];
    _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) c0[j] = c1[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_load_ps(pan + k * MR);
        const __m512 w1 = MV == 2 ? _mm512_load_ps(pan + k * MR + 16) : w0;
        _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) {
            const __m512 b = _mm512_set1_ps(xb[j * KC + k]);
            c0[j] = _mm512_fmadd_ps(w0, b, c0[j]);
            if (MV == 2) c1[j] = _mm512_fmadd_ps(w1, b, c1[j]);
        }
    }
    _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) {
        float *yp = y + j * ys;
        if (add) c0[j] = _mm512_add_ps(c0[j], _mm512_maskz_loadu_ps(m0, yp));
        _mm512_mask_storeu_ps(yp, m0, c0[j]);
        if (MV == 2) {
            if (add) c1[j] = _mm512_add_ps(c1[j], _mm512_maskz_loadu_ps(m1, yp + 16));
            _mm512_mask_storeu_ps(yp + 16, m1, c1[j]);
        }
    }
}

/* Small batches (nb <= NR: one microkernel per panel) would spend more time converting
 * the panel than using it, so this form converts in the loop instead: per k, the 16 rows of
 * two groups (2 x 16 bytes, one insert) through one vcvtph2ps (BF16: a widening shift).
 * g[q]: group q's run at element k0 (the last valid group repeated for missing ones,
 * their rows masked off at the store). */
AVX512_INLINE __m512 cvt_pair(const int bf, const uint16_t *a, const uint16_t *b) {
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                              _mm_loadu_si128((const __m128i *)b), 1);
    if (bf) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}
AVX512_INLINE void micro_direct(const int bf, const int MV, const int NC, int64_t kc, const uint16_t *const g[4],
                                const float *xb, float *y, int64_t ys, __mmask16 m0, __mmask16 m1, bool add) {
    __m512 c0[NR], c1[NR];
    _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) c0[j] = c1[j] = _mm512_setzero_ps();
    const uint16_t *g0 = g[0], *g1 = g[1], *g2 = g[2], *g3 = g[3];
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = cvt_pair(bf, g0 + 8 * k, g1 + 8 * k);
        const __m512 w1 = MV == 2 ? cvt_pair(bf, g2 + 8 * k, g3 + 8 * k) : w0;
        _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) {
            const __m512 b = _mm512_set1_ps(xb[j * KC + k]);
            c0[j] = _mm512_fmadd_ps(w0, b, c0[j]);
            if (MV == 2) c1[j] = _mm512_fmadd_ps(w1, b, c1[j]);
        }
    }
    _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) {
        float *yp = y + j * ys;
        if (add) c0[j] = _mm512_add_ps(c0[j], _mm512_maskz_loadu_ps(m0, yp));
        _mm512_mask_storeu_ps(yp, m0, c0[j]);
        if (MV == 2) {
            if (add) c1[j] = _mm512_add_ps(c1[j], _mm512_maskz_loadu_ps(m1, yp + 16));
            _mm512_mask_storeu_ps(yp + 16, m1, c1[j]);
        }
    }
}
typedef void (*direct_fn)(int64_t kc, const uint16_t *const g[4], const float *xb, float *y, int64_t ys, __mmask16 m0,
                          __mmask16 m1, bool add);
#define DIRECT(BF, MV, NC)                                                                                     \
    static void direct_##BF##_##MV##_##NC(int64_t kc, const uint16_t *const g[4], const float *xb, float *y,   \
                                          int64_t ys, __mmask16 m0, __mmask16 m1, bool add) {                  \
        micro_direct(BF, MV, NC, kc, g, xb, y, ys, m0, m1, add);                                               \
    }
#define DIRECT_MV(BF, MV) DIRECT(BF, MV, 1) DIRECT(BF, MV, 2) DIRECT(BF, MV, 3) DIRECT(BF, MV, 4) DIRECT(BF, MV, 5) \
    DIRECT(BF, MV, 6) DIRECT(BF, MV, 7) DIRECT(BF, MV, 8) DIRECT(BF, MV, 9) DIRECT(BF, MV, 10) DIRECT(BF, MV, 11) \
    DIRECT(BF, MV, 12)
#define DIRECT_ROW(BF, MV) { direct_##BF##_##MV##_1, direct_##BF##_##MV##_2, direct_##BF##_##MV##_3, \
    direct_##BF##_##MV##_4, direct_##BF##_##MV##_5, direct_##BF##_##MV##_6, direct_##BF##_##MV##_7, \
    direct_##BF##_##MV##_8, direct_##BF##_##MV##_9, direct_##BF##_##MV##_10, direct_##BF##_##MV##_11, \
    direct_##BF##_##MV##_12 }
DIRECT_MV(0, 1)
DIRECT_MV(0, 2)
DIRECT_MV(1, 1)
DIRECT_MV(1, 2)
static const direct_fn directs[2][2][NR] = { { DIRECT_ROW(0, 1), DIRECT_ROW(0, 2) }, { DIRECT_ROW(1, 1), DIRECT_ROW(1, 2) } };

typedef void (*micro_fn)(int64_t kc, const float *pan, const float *xb, float *y, int64_t ys, __mmask16 m0,
                         __mmask16 m1, bool add);
#define MICRO(MV, NC)                                                                                   \
    static void micro_##MV##_##NC(int64_t kc, const float *pan, const float *xb, float *y, int64_t ys,  \
                                  __mmask16 m0, __mmask16 m1, bool add) {                               \
        micro(MV, NC, kc, pan, xb, y, ys, m0, m1, add);                                                 \
    }
#define MICRO_MV(MV) MICRO(MV, 1) MICRO(MV, 2) MICRO(MV, 3) MICRO(MV, 4) MICRO(MV, 5) MICRO(MV, 6) \
    MICRO(MV, 7) MICRO(MV, 8) MICRO(MV, 9) MICRO(MV, 10) MICRO(MV, 11) MICRO(MV, 12)
MICRO_MV(1)
MICRO_MV(2)
static const micro_fn micros[2][NR] = {
    { micro_1_1, micro_1_2, micro_1_3, micro_1_4, micro_1_5, micro_1_6, micro_1_7, micro_1_8, micro_1_9,
      micro_1_10, micro_1_11, micro_1_12 },
    { micro_2_1, micro_2_2, micro_2_3, micro_2_4, micro_2_5, micro_2_6, micro_2_7, micro_2_8, micro_2_9,
      micro_2_10, micro_2_11, micro_2_12 },
};

/* Decode: y[r] = dot(row r, x) for the groups of [r0, r1). */
AVX512_INLINE void matvec(const int bf, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,
                          const void *x, float *y) {
    float xf[KD] __attribute__((aligned(64)));
    for (int64_t k0 = 0; k0 < n; k0 += KD) {
        const int64_t kd = TH_MIN(KD, n - k0);
        for (int64_t k = 0; k < kd; k += 16) _mm512_store_ps(xf + k, cvt16(bf, (const uint16_t *)x + k0 + k, mask16(kd - k)));
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

/* Activation rows in blocks of xc (XC, from the heap: up to 512 KiB, in L2; without
 * memory for it XC_STACK on the stack), so that each weight is converted once per call
 * for batches up to XC. */
AVX512_INLINE void fpack(const int bf, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,
                         const void *x, size_t xs, float *y, int64_t ys) {
    if (nb == 1) { matvec(bf, n, r0, r1, w, ws, x, y); return; }
    float pan[KC * MR] __attribute__((aligned(64)));
    float xb_stack[XC_STACK * KC] __attribute__((aligned(64)));
    int64_t xc = TH_MIN(nb, XC);
    float *xb = xc > XC_STACK ? aligned_alloc(64, sizeof(float) * (size_t)(xc * KC)) : NULL;
    if (!xb) { xb = xb_stack; xc = TH_MIN(xc, XC_STACK); }
    for (int64_t c0 = 0; c0 < nb; c0 += xc) {
        const int64_t ncb = TH_MIN(xc, nb - c0);
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int64_t kc = TH_MIN(KC, n - k0);
            convert_x(bf, (const char *)x + (size_t)c0 * xs, xs, ncb, k0, kc, xb);
            for (int64_t r = r0; r < r1; r += MR) {
                const int pr = (int)TH_MIN(MR, r1 - r);
                const int mv = pr > 16 ? 2 : 1;
                const __mmask16 m0 = mask16(pr), m1 = mask16(pr - 16 > 0 ? pr - 16 : 0);
                const int pf_ng = (int)((TH_MIN(MR, TH_MAX(0, r1 - r - MR)) + 7) / 8);   /* groups of the next panel */
                const uint16_t *wr = (const uint16_t *)(const void *)((const char *)w + (size_t)r * ws);
                if (ncb <= NR) {                       /* one microkernel per panel: convert in its loop */
                    const int ng = (pr + 7) / 8;
                    const uint16_t *g[4];
                    for (int q = 0; q < 4; q++) g[q] = wr + (size_t)TH_MIN(q, ng - 1) * 8 * (size_t)n + 8 * k0;
                    directs[bf][mv - 1][ncb - 1](kc, g, xb, y + c0 * ys + r, ys, m0, m1, k0 > 0);
                    continue;
                }
                convert_panel(bf, wr, n, (pr + 7) / 8, pf_ng, k0, kc, pan);
                for (int64_t j0 = 0; j0 < ncb; j0 += NR) {
                    const int nc = (int)TH_MIN(NR, ncb - j0);
                    micros[mv - 1][nc - 1](kc, pan, xb + j0 * KC, y + (c0 + j0) * ys + r, ys, m0, m1, k0 > 0);
                }
            }
        }
    }
    if (xb != xb_stack) free(xb);
}

/* ---- BF16 with vdpbf16ps (th_avx512_fpack_bf16_dp) ---- */

/* pan[p * 2 MR + 2 (8q + i) + e] = row 8q + i of the panel at element k0 + 2p + e (bf16
 * pairs; a missing last element of an odd kc is 0), q < ng, zero rows for an odd ng. */
AVX512_INLINE void pair_panel(const uint16_t *w, int64_t n, int ng, int pf_ng, int64_t k0, int64_t kc, uint16_t *pan) {
    const int64_t np = (kc + 1) / 2;
    for (int q = 0; q < ng; q++) {
        const uint16_t *g = w + (size_t)q * 8 * (size_t)n + 8 * k0;
        const uint16_t *pf = q < pf_ng ? g + (size_t)MR * (size_t)n : NULL;
        for (int64_t p = 0; p < np; p++) {
            if (pf && !(p & 1)) __builtin_prefetch(pf + 16 * p, 0, 2);
            const __m128i a = _mm_loadu_si128((const __m128i *)(g + 16 * p));     /* k = 2p, rows 0..7 */
            const __m128i b = 2 * p + 1 < kc ? _mm_loadu_si128((const __m128i *)(g + 16 * p + 8)) : _mm_setzero_si128();
            _mm_store_si128((__m128i *)(pan + p * 2 * MR + 16 * q), _mm_unpacklo_epi16(a, b));
            _mm_store_si128((__m128i *)(pan + p * 2 * MR + 16 * q + 8), _mm_unpackhi_epi16(a, b));
        }
    }
    if (ng & 1)
        for (int64_t p = 0; p < np; p++) _mm256_store_si256((__m256i *)(pan + p * 2 * MR + 16 * ng), _mm256_setzero_si256());
}

/* As micro, on bf16 pairs: xb[j * KC + 2p + e] the activations' bf16 (a zero after an odd
 * kc), one vdpbf16ps per pair of k, 16 rows and activation row. */
AVX512_INLINE void micro_dp(const int MV, const int NC, int64_t kc, const uint16_t *pan, const uint16_t *xb, float *y,
                            int64_t ys, __mmask16 m0, __mmask16 m1, bool add) {
    __m512 c0[NR], c1[NR];
    _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) c0[j] = c1[j] = _mm512_setzero_ps();
    const int64_t np = (kc + 1) / 2;
    for (int64_t p = 0; p < np; p++) {
        const __m512bh w0 = (__m512bh)_mm512_load_si512(pan + p * 2 * MR);
        const __m512bh w1 = MV == 2 ? (__m512bh)_mm512_load_si512(pan + p * 2 * MR + 32) : w0;
        _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) {
            uint32_t pair;
            memcpy(&pair, xb + j * KC + 2 * p, 4);
            const __m512bh b = (__m512bh)_mm512_set1_epi32((int)pair);
            c0[j] = _mm512_dpbf16_ps(c0[j], w0, b);
            if (MV == 2) c1[j] = _mm512_dpbf16_ps(c1[j], w1, b);
        }
    }
    _Pragma("GCC unroll 12") for (int j = 0; j < NC; j++) {
        float *yp = y + j * ys;
        if (add) c0[j] = _mm512_add_ps(c0[j], _mm512_maskz_loadu_ps(m0, yp));
        _mm512_mask_storeu_ps(yp, m0, c0[j]);
        if (MV == 2) {
            if (add) c1[j] = _mm512_add_ps(c1[j], _mm512_maskz_loadu_ps(m1, yp + 16));
            _mm512_mask_storeu_ps(yp + 16, m1, c1[j]);
        }
    }
}

typedef void (*micro_dp_fn)(int64_t kc, const uint16_t *pan, const uint16_t *xb, float *y, int64_t ys, __mmask16 m0,
                            __mmask16 m1, bool add);
#define MICRO_DP(MV, NC)                                                                                   \
    static void micro_dp_##MV##_##NC(int64_t kc, const uint16_t *pan, const uint16_t *xb, float *y, int64_t ys, \
                                     __mmask16 m0, __mmask16 m1, bool add) {                               \
        micro_dp(MV, NC, kc, pan, xb, y, ys, m0, m1, add);                                                 \
    }
#define MICRO_DP_MV(MV) MICRO_DP(MV, 1) MICRO_DP(MV, 2) MICRO_DP(MV, 3) MICRO_DP(MV, 4) MICRO_DP(MV, 5) \
    MICRO_DP(MV, 6) MICRO_DP(MV, 7) MICRO_DP(MV, 8) MICRO_DP(MV, 9) MICRO_DP(MV, 10) MICRO_DP(MV, 11) MICRO_DP(MV, 12)
MICRO_DP_MV(1)
MICRO_DP_MV(2)
static const micro_dp_fn micros_dp[2][NR] = {
    { micro_dp_1_1, micro_dp_1_2, micro_dp_1_3, micro_dp_1_4, micro_dp_1_5, micro_dp_1_6, micro_dp_1_7, micro_dp_1_8,
      micro_dp_1_9, micro_dp_1_10, micro_dp_1_11, micro_dp_1_12 },
    { micro_dp_2_1, micro_dp_2_2, micro_dp_2_3, micro_dp_2_4, micro_dp_2_5, micro_dp_2_6, micro_dp_2_7, micro_dp_2_8,
      micro_dp_2_9, micro_dp_2_10, micro_dp_2_11, micro_dp_2_12 },
};

void th_avx512_fpack_bf16_dp(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                             size_t xs, float *y, int64_t ys) {
    if (nb == 1) { matvec(1, n, r0, r1, w, ws, x, y); return; }
    uint16_t pan[KC * MR] __attribute__((aligned(64)));
    uint16_t xb_stack[XC_STACK * KC] __attribute__((aligned(64)));
    int64_t xc = TH_MIN(nb, XC);
    uint16_t *xb = xc > XC_STACK ? aligned_alloc(64, sizeof(uint16_t) * (size_t)(xc * KC)) : NULL;
    if (!xb) { xb = xb_stack; xc = TH_MIN(xc, XC_STACK); }
    for (int64_t c0 = 0; c0 < nb; c0 += xc) {
        const int64_t ncb = TH_MIN(xc, nb - c0);
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int64_t kc = TH_MIN(KC, n - k0);
            for (int64_t j = 0; j < ncb; j++) {
                memcpy(xb + j * KC, (const uint16_t *)(const void *)((const char *)x + (size_t)(c0 + j) * xs) + k0, 2 * (size_t)kc);
                if (kc & 1) xb[j * KC + kc] = 0;
            }
            for (int64_t r = r0; r < r1; r += MR) {
                const int pr = (int)TH_MIN(MR, r1 - r);
                const int mv = pr > 16 ? 2 : 1;
                const __mmask16 m0 = mask16(pr), m1 = mask16(pr - 16 > 0 ? pr - 16 : 0);
                const int pf_ng = (int)((TH_MIN(MR, TH_MAX(0, r1 - r - MR)) + 7) / 8);
                pair_panel((const uint16_t *)(const void *)((const char *)w + (size_t)r * ws), n, (pr + 7) / 8, pf_ng, k0, kc, pan);
                for (int64_t j0 = 0; j0 < ncb; j0 += NR) {
                    const int nc = (int)TH_MIN(NR, ncb - j0);
                    micros_dp[mv - 1][nc - 1](kc, pan, xb + j0 * KC, y + (c0 + j0) * ys + r, ys, m0, m1, k0 > 0);
                }
            }
        }
    }
    if (xb != xb_stack) free(xb);
}

void th_avx512_fpack_f16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                         size_t xs, float *y, int64_t ys) {
    fpack(0, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
void th_avx512_fpack_bf16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                          size_t xs, float *y, int64_t ys) {
    fpack(1, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
