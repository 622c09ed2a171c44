/* float_avx512.c — AVX-512 gemm for F32, F16 and BF16 weights (the F32/F16 vec_dot are
 * in kernels_avx512.c), and the BF16 vec_dot with AVX512-BF16 vdpbf16ps. vdpbf16ps
 * kernels are registered only where cpuid reports avx512_bf16 (the avx512 level does
 * not require it); it multiplies bf16 pairs exactly and adds them in f32 (subnormal
 * inputs read as zero), 32 products per instruction. Activations are of the weight's
 * type. The tile is 4 weight rows x 4 activation rows in 16 zmm accumulators, each
 * loaded vector used 4 times; any n (the last step loads under a mask: zeros).
 * Batches of 8 or more convert their rows to f32 first (see gemm_converted): measured
 * faster than both the converting F16 tile and the vdpbf16ps tile. */
#include "cpu/gemm_walk.h"
#include "cpu/avx512_util.h"
#include <cpuid.h>
#include <stdlib.h>

/* Loads of 16 (F32, F16) or 32 (BF16) elements from element k on, masked to the row;
 * BF16 pairs travel in an __m512 for vdpbf16ps. */
AVX512_INLINE __m512 ld_f32(const void *p, int64_t k, __mmask32 m) {
    return _mm512_maskz_loadu_ps((__mmask16)m, (const float *)p + k);
}
AVX512_INLINE __m512 ld_f16(const void *p, int64_t k, __mmask32 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)m, (const uint16_t *)p + k));
}
AVX512_INLINE __m512 ld_bf16(const void *p, int64_t k, __mmask32 m) {
    return _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(m, (const uint16_t *)p + k));
}
AVX512_INLINE __m512 mac_ps(__m512 c, __m512 a, __m512 b) { return _mm512_fmadd_ps(a, b, c); }
AVX512_INLINE __m512 mac_bf16(__m512 c, __m512 a, __m512 b) { return _mm512_dpbf16_ps(c, (__m512bh)a, (__m512bh)b); }

typedef __m512 (*ld_fn)(const void *p, int64_t k, __mmask32 m);
typedef __m512 (*mac_fn)(__m512 c, __m512 a, __m512 b);

AVX512_INLINE __mmask32 tail_mask(int64_t left) { return (__mmask32)((1ull << left) - 1); }

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
        const __mmask32 m = n - k >= step ? (__mmask32)~0u : tail_mask(n - k);
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

/* The tile and the gemm entry of type T. */
#define FLOAT_KERNELS(T, STEP, LD, MAC)                                                                 \
    static void tile_##T(int64_t n, const char *const w[4], const char *const x[4], float out[4][4]) {   \
        float_tile(LD, MAC, STEP, n, w, x, out);                                                         \
    }                                                                                                    \
    static void gemm_##T(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,        \
                         const void *x, size_t xs, float *y, int64_t ys) {                               \
        if (nb < 2) th_gemm_by_vec_dot(TH_##T, th_cpu_kernels(), n, r0, r1, w, ws, nb, x, xs, y, ys);    \
        else th_gemm_walk4x4(tile_##T, n, r0, r1, w, ws, nb, x, xs, y, ys);                              \
    }

FLOAT_KERNELS(F32, 16, ld_f32, mac_ps)
FLOAT_KERNELS(F16, 16, ld_f16, mac_ps)
FLOAT_KERNELS(BF16, 32, ld_bf16, mac_bf16)

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
            _mm512_storeu_ps(dst + k, ld(src, k, n - k >= 16 ? (__mmask32)~0u : k < n ? tail_mask(n - k) : 0));
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

static void gemm_F16_batch(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,
                           const void *x, size_t xs, float *y, int64_t ys) {
    if (nb < 8) gemm_F16(n, r0, r1, w, ws, nb, x, xs, y, ys);
    else gemm_converted(ld_f16, gemm_F16, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
/* BF16 batches below 8: the vdpbf16ps tiles where the CPU has them, else the level
 * below's gemm (set once by th_avx512_fill_float; the same value for every fill). */
static th_gemm_fn bf16_small_gemm;
static void gemm_BF16_batch(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,
                            const void *x, size_t xs, float *y, int64_t ys) {
    if (nb < 8) bf16_small_gemm(n, r0, r1, w, ws, nb, x, xs, y, ys);
    else gemm_converted(ld_bf16_f32, bf16_small_gemm, n, r0, r1, w, ws, nb, x, xs, y, ys);
}

/* BF16 vec_dot: 64 products per iteration in two accumulators. */
static void dot_BF16(int64_t n, float *s, const void *w, const void *a) {
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= n; k += 64) {
        th_prefetch_span((const char *)w + 2 * k + TH_PREFETCH_AHEAD, 128);
        c0 = mac_bf16(c0, ld_bf16(w, k, (__mmask32)~0u), ld_bf16(a, k, (__mmask32)~0u));
        c1 = mac_bf16(c1, ld_bf16(w, k + 32, (__mmask32)~0u), ld_bf16(a, k + 32, (__mmask32)~0u));
    }
    for (; k < n; k += 32) {
        const __mmask32 m = n - k >= 32 ? (__mmask32)~0u : tail_mask(n - k);
        c0 = mac_bf16(c0, ld_bf16(w, k, m), ld_bf16(a, k, m));
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
}

/* cpuid leaf 7 sub-leaf 1, EAX bit 5 (the ZMM state was checked for the level). */
static bool cpu_has_avx512_bf16(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

void th_avx512_fill_float(th_kernels *k) {
    const bool bf16 = cpu_has_avx512_bf16();
    k->gemm[TH_F32] = gemm_F32;
    k->gemm[TH_F16] = gemm_F16_batch;
    bf16_small_gemm = bf16 ? gemm_BF16 : k->gemm[TH_BF16];
    k->gemm[TH_BF16] = gemm_BF16_batch;
    if (bf16) k->vec_dot[TH_BF16] = dot_BF16;
}
