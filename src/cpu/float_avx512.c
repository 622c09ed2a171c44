/* float_avx512.c — AVX-512 gemm for F32 and F16 weights (their vec_dot are in
 * kernels_avx512.c), and vec_dot + gemm for BF16
 * weights with AVX512-BF16 vdpbf16ps (registered only where cpuid reports
 * avx512_bf16: the avx512 level itself does not require it). Activations are of the
 * weight's type. The gemm tile is 4 weight rows x 4 activation rows in 16 zmm
 * accumulators: each weight and activation vector is loaded (F16: converted by
 * vcvtph2ps) once per tile step and used 4 times. vdpbf16ps multiplies bf16 pairs
 * exactly and adds them in f32 (inputs' subnormals read as zero), 32 products per
 * instruction and no conversions. Any n: the last step loads under a mask (zeros). */
#include "cpu/gemm_walk.h"
#include "cpu/avx512_util.h"
#include <cpuid.h>

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

/* BF16 vec_dot: 64 products per iteration in two accumulators. */
static void dot_BF16(int64_t n, float *s, const void *w, const void *a) {
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= n; k += 64) {
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
    k->gemm[TH_F32] = gemm_F32;
    k->gemm[TH_F16] = gemm_F16;
    if (cpu_has_avx512_bf16()) {
        k->vec_dot[TH_BF16] = dot_BF16;
        k->gemm[TH_BF16] = gemm_BF16;
    }
}
