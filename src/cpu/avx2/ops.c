/* ops.c (avx2) — AVX2/FMA forms of small vector ops of the forward pass that are in the
 * kernel table: SwiGLU (avx2_exp_ps, ~2e-7 relative error against expf). Any n (scalar
 * tail). */
#include "cpu/avx2/util.h"
#include "cpu/ops.h"

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
