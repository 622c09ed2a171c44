/* dot_float.c (avx512) — AVX-512 vec_dot for F32 and F16 weights (16 lanes, two
 * accumulators, scalar tail) and for BF16 with AVX512-BF16 vdpbf16ps (64 products per
 * iteration in two accumulators; avx512/kernels.c uses it only where cpuid reports
 * avx512_bf16). Activations are of the weight's type; the weight stream is prefetched
 * TH_PREFETCH_AHEAD bytes ahead (kernels.h). */
#include "cpu/avx512/util.h"

void th_avx512_dot_f32(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        th_prefetch_span((const char *)(w + i) + TH_PREFETCH_AHEAD, 128);
        c0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), c0);
        c1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(a + i + 16), c1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
    for (; i < n; i++) sum += w[i] * a[i];
    *s = sum;
}

void th_avx512_dot_f16(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        th_prefetch_span((const char *)(w + i) + TH_PREFETCH_AHEAD, 64);
        c0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), c0);
        c1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))), c1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
    for (; i < n; i++) sum += avx2_f16(w[i]) * avx2_f16(a[i]);
    *s = sum;
}

void th_avx512_dot_bf16(int64_t n, float *s, const void *w, const void *a) {
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= n; k += 64) {
        th_prefetch_span((const char *)w + 2 * k + TH_PREFETCH_AHEAD, 128);
        c0 = avx512_mac_bf16(c0, avx512_ld_bf16(w, k, (__mmask32)~0u), avx512_ld_bf16(a, k, (__mmask32)~0u));
        c1 = avx512_mac_bf16(c1, avx512_ld_bf16(w, k + 32, (__mmask32)~0u), avx512_ld_bf16(a, k + 32, (__mmask32)~0u));
    }
    for (; k < n; k += 32) {
        const __mmask32 m = n - k >= 32 ? (__mmask32)~0u : avx512_tail_mask(n - k);
        c0 = avx512_mac_bf16(c0, avx512_ld_bf16(w, k, m), avx512_ld_bf16(a, k, m));
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
}
