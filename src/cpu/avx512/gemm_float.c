/* gemm_float.c (avx512) — AVX-512 batch gemm for F32, F16 and BF16 weights (activations
 * of the same type; the vec_dot are dot_float.c's). BF16 uses AVX512-BF16 vdpbf16ps,
 * which multiplies bf16 pairs exactly and adds them in f32 (subnormal inputs read as
 * zero), 32 products per instruction; avx512/kernels.c puts th_avx512_batch_bf16 in the
 * table only where cpuid reports avx512_bf16 (the level does not require it), else
 * th_avx512_batch_bf16_fma. The tile is 4 weight rows x 4 activation rows in 16 zmm
 * accumulators, each loaded vector used 4 times; any n (the last step loads under a
 * mask: zeros). Batches of 8 or more convert their rows to f32 first (see
 * gemm_converted): measured faster than both the converting F16 tile and the vdpbf16ps
 * tile. */
#include "cpu/gemm_walk.h"
#include "cpu/avx512/util.h"
#include <stdlib.h>

/* Loads of 16 (F32, F16) elements from element k on, masked to the row (BF16:
 * avx512_ld_bf16, 32 elements as pairs for vdpbf16ps). */
AVX512_INLINE __m512 ld_f32(const void *p, int64_t k, __mmask32 m) {
    return _mm512_maskz_loadu_ps((__mmask16)m, (const float *)p + k);
}
AVX512_INLINE __m512 ld_f16(const void *p, int64_t k, __mmask32 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)m, (const uint16_t *)p + k));
}
AVX512_INLINE __m512 mac_ps(__m512 c, __m512 a, __m512 b) { return _mm512_fmadd_ps(a, b, c); }

typedef __m512 (*ld_fn)(const void *p, int64_t k, __mmask32 m);
typedef __m512 (*mac_fn)(__m512 c, __m512 a, __m512 b);

/* One weight row's step against the 4 activation vectors (named accumulators, so
 * that they stay in registers). */
#define ROW4(I, C0, C1, C2, C3)                                      \
    do {                                                             \
        const __m512 wv = ld(w##I, k, m);                            \
        C0 = mac(C0, wv, a0); C1 = mac(C1, wv, a1);                  \
        C2 = mac(C2, wv, a2); C3 = mac(C3, wv, a3);                  \
    } while (0)

/* out[i][j] = dot(w[i], x[j]) over n elements, step elements per vector. */
AVX512_INLINE void float_tile(ld_fn ld, mac_fn mac, int64_t step, int64_t n, const char *const w[4],
                              const char *const x[4], float out[4][4]) {
    const char *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3], *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    const __m512 z = _mm512_setzero_ps();
    __m512 c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z;
    __m512 c20 = z, c21 = z, c22 = z, c23 = z, c30 = z, c31 = z, c32 = z, c33 = z;
    for (int64_t k = 0; k < n; k += step) {
        const __mmask32 m = n - k >= step ? (__mmask32)~0u : avx512_tail_mask(n - k);
        const __m512 a0 = ld(x0, k, m), a1 = ld(x1, k, m), a2 = ld(x2, k, m), a3 = ld(x3, k, m);
        ROW4(0, c00, c01, c02, c03);
        ROW4(1, c10, c11, c12, c13);
        ROW4(2, c20, c21, c22, c23);
        ROW4(3, c30, c31, c32, c33);
    }
    const __m512 c[4][4] = { { c00, c01, c02, c03 }, { c10, c11, c12, c13 }, { c20, c21, c22, c23 }, { c30, c31, c32, c33 } };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) out[i][j] = _mm512_reduce_add_ps(c[i][j]);
}

/* The tile of type T. */
#define FLOAT_TILE(T, STEP, LD, MAC)                                                                    \
    static void tile_##T(int64_t n, const char *const w[4], const char *const x[4], float out[4][4]) {   \
        float_tile(LD, MAC, STEP, n, w, x, out);                                                         \
    }

FLOAT_TILE(F32, 16, ld_f32, mac_ps)
FLOAT_TILE(F16, 16, ld_f16, mac_ps)
FLOAT_TILE(BF16, 32, avx512_ld_bf16, avx512_mac_bf16)

/* The tiles over the whole batch (gemm_walk.h). */
#define FLOAT_WALK(T)                                                                                    \
    static __attribute__((noinline)) void walk_##T(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, \
                         int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {                   \
        th_gemm_walk4x4(tile_##T, n, r0, r1, w, ws, nb, x, xs, y, ys);                                   \
    }
FLOAT_WALK(F16)
FLOAT_WALK(BF16)

void th_avx512_batch_f32(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                         size_t xs, float *y, int64_t ys) {
    th_gemm_walk4x4(tile_F32, n, r0, r1, w, ws, nb, x, xs, y, ys);
}

/* 16 bf16 values as f32 (the conversion path; the tiles use vdpbf16ps directly) */
AVX512_INLINE __m512 ld_bf16_f32(const void *p, int64_t k, __mmask32 m) {
    const __m256i h = _mm256_maskz_loadu_epi16((__mmask16)m, (const uint16_t *)p + k);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* F16/BF16 rows to f32, zero-padded to n_pad (a multiple of 16). */
AVX512_INLINE void rows_to_f32(ld_fn ld, const char *src, size_t stride, int64_t rows, int64_t n, int64_t n_pad,
                               float *dst) {
    for (int64_t r = 0; r < rows; r++, src += stride, dst += n_pad)
        for (int64_t k = 0; k < n_pad; k += 16)
            _mm512_storeu_ps(dst + k, ld(src, k, n - k >= 16 ? (__mmask32)~0u : k < n ? avx512_tail_mask(n - k) : 0));
}

/* F16/BF16 batches of 8 or more: the converting F16 tile spends a third of its vector
 * instructions on vcvtph2ps (and the vdpbf16ps tile measured slower than f32 FMA), so
 * the rows are converted to f32 first and the tile is tile_F32: a chunk of activation
 * rows (up to ~256 KiB of f32, they stay in L2) once per chunk, 4 weight rows once per
 * chunk and row group. Without memory for that, the gemm `direct`. */
AVX512_INLINE void gemm_converted(ld_fn ld, th_gemm_fn direct, int64_t n, int64_t r0, int64_t r1, const void *w,
                                  size_t ws, int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    const int64_t n_pad = (n + 15) & ~(int64_t)15;
    const int64_t chunk = TH_MAX(4, TH_MIN(32, (int64_t)(256 << 10) / (n_pad * 4) / 4 * 4));
    float *xf = malloc(sizeof(float) * (size_t)(n_pad * (chunk + 4)));
    if (!xf) { direct(n, r0, r1, w, ws, nb, x, xs, y, ys); return; }
    float *wf = xf + chunk * n_pad, out[4][4];
    for (int64_t c0 = 0; c0 < nb; c0 += chunk) {
        const int64_t c1 = TH_MIN(nb, c0 + chunk);
        rows_to_f32(ld, (const char *)x + (size_t)c0 * xs, xs, c1 - c0, n, n_pad, xf);
        for (int64_t r = r0; r < r1; r += 4) {
            const int rm = (int)TH_MIN(4, r1 - r);
            rows_to_f32(ld, (const char *)w + (size_t)r * ws, ws, rm, n, n_pad, wf);
            const char *wp[4];
            for (int i = 0; i < 4; i++) wp[i] = (const char *)(wf + TH_MIN(i, rm - 1) * n_pad);
            for (int64_t c = c0; c < c1; c += 4) {
                const int cn = (int)TH_MIN(4, c1 - c);
                const char *xp[4];
                for (int j = 0; j < 4; j++) xp[j] = (const char *)(xf + (c - c0 + TH_MIN(j, cn - 1)) * n_pad);
                tile_F32(n_pad, wp, xp, out);
                for (int i = 0; i < rm; i++)
                    for (int j = 0; j < cn; j++) y[(c + j) * ys + r + i] = out[i][j];
            }
        }
    }
    free(xf);
}

/* F16: the tiles below 8 rows, the conversion from 8. */
void th_avx512_batch_f16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                         size_t xs, float *y, int64_t ys) {
    if (nb < 8) walk_F16(n, r0, r1, w, ws, nb, x, xs, y, ys);
    else gemm_converted(ld_f16, walk_F16, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
/* BF16 below 8 rows: `small`, the vdpbf16ps tiles (AVX512-BF16) or the AVX2 tiles
 * (without it); from 8, the conversion. One function for both (noipa: not cloned). */
static __attribute__((noipa)) void batch_bf16(th_gemm_fn small, int64_t n, int64_t r0, int64_t r1, const void *w,
                                              size_t ws, int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    if (nb < 8) small(n, r0, r1, w, ws, nb, x, xs, y, ys);
    else gemm_converted(ld_bf16_f32, small, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
void th_avx512_batch_bf16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                          size_t xs, float *y, int64_t ys) {
    batch_bf16(walk_BF16, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
void th_avx512_batch_bf16_fma(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,
                              const void *x, size_t xs, float *y, int64_t ys) {
    batch_bf16(th_avx2_batch_bf16, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
