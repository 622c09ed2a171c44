/* ops_avx2.c — AVX2/FMA/F16C forms of small vector ops of the forward pass that are
 * in the kernel table: axpy (y += a·x) over F32 and F16 rows, used for attention's
 * weighted sum of V rows. Any n (scalar tail); same products as the generic form,
 * one FMA rounding each instead of two. */
#include "cpu/avx2_util.h"

void th_avx2_axpy_f32(int64_t n, float a, const void *vx, float *y) {
    const float *x = vx;
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

void th_avx2_axpy_f16(int64_t n, float a, const void *vx, float *y) {
    const uint16_t *x = vx;
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, xv, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; i++) y[i] += a * avx2_f16(x[i]);
}
