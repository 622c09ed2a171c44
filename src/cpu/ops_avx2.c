/* ops_avx2.c — AVX2/FMA/F16C forms of small vector ops of the forward pass that are
 * in the kernel table: axpy (y += a·x) over F32 and F16 rows and the F16 dot with a
 * double sum (the reference attention's products), and SwiGLU. Any n (scalar tail).
 * axpy and the dot equal the generic forms': products and sums are rounded as there
 * (axpy: a product rounded, then the sum; no FMA), up to the order of the double
 * additions. SwiGLU uses avx2_exp_ps (~2e-7 relative error against expf). */
#include "cpu/avx2_util.h"
#include "cpu/ops.h"

void th_avx2_axpy_f32(int64_t n, float a, const void *vx, float *y) {
    const float *x = vx;
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_mul_ps(va, _mm256_loadu_ps(x + i)), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

void th_avx2_axpy_f16(int64_t n, float a, const void *vx, float *y) {
    const uint16_t *x = vx;
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_mul_ps(va, xv), _mm256_loadu_ps(y + i)));
    }
    for (; i < n; i++) y[i] += a * avx2_f16(x[i]);
}

/* f16 x f16 products are exact in f32 (11-bit significands); summed in double. */
void th_avx2_dot_f16_f64(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m256d c0 = _mm256_setzero_pd(), c1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 p = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))),
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))));
        c0 = _mm256_add_pd(c0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        c1 = _mm256_add_pd(c1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    __m256d c = _mm256_add_pd(c0, c1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(c), _mm256_extractf128_pd(c, 1));
    double acc = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; i++) acc += (double)(avx2_f16(w[i]) * avx2_f16(a[i]));
    *s = (float)acc;
}

void th_avx2_swiglu(float *a, const float *gate, const float *up, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = avx2_exp_ps(_mm256_sub_ps(zero, g));
        _mm256_storeu_ps(a + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    th_op_swiglu(a + i, gate + i, up + i, n - i);
}
