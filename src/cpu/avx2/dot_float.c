/* dot_float.c (avx2) — AVX2/FMA/F16C vec_dot for F32, F16 and BF16 weights (against
 * activations of the same type).
 * 32 elements per iteration in four f32 accumulators; any n (scalar tail). The weight
 * stream is prefetched TH_PREFETCH_AHEAD bytes ahead (decode: 1.1B F16 tg went from ~72 %
 * to ~105 % of the bench's read-bandwidth figure on an AVX-512 Xeon VM). */
#include "cpu/avx2/util.h"

static inline __m256 load_f16x8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 load_bf16x8(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

#define FLOAT_DOT(NAME, T, LOAD, SCALAR)                                                       \
    void NAME(int64_t n, float *s, const void *vw, const void *va) {                          \
        const T *w = vw, *a = va;                                                              \
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;                            \
        int64_t i = 0;                                                                         \
        for (; i + 32 <= n; i += 32) {                                                         \
            th_prefetch_span((const char *)(w + i) + TH_PREFETCH_AHEAD, 32 * sizeof(T));       \
            c0 = _mm256_fmadd_ps(LOAD(w + i), LOAD(a + i), c0);                                \
            c1 = _mm256_fmadd_ps(LOAD(w + i + 8), LOAD(a + i + 8), c1);                        \
            c2 = _mm256_fmadd_ps(LOAD(w + i + 16), LOAD(a + i + 16), c2);                      \
            c3 = _mm256_fmadd_ps(LOAD(w + i + 24), LOAD(a + i + 24), c3);                      \
        }                                                                                      \
        for (; i + 8 <= n; i += 8) c0 = _mm256_fmadd_ps(LOAD(w + i), LOAD(a + i), c0);        \
        float sum = avx2_hsum_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3))); \
        for (; i < n; i++) sum += SCALAR(w[i]) * SCALAR(a[i]);                                 \
        *s = sum;                                                                              \
    }

#define ID(x) (x)
FLOAT_DOT(th_avx2_dot_f32, float, _mm256_loadu_ps, ID)
FLOAT_DOT(th_avx2_dot_f16, uint16_t, load_f16x8, avx2_f16)
FLOAT_DOT(th_avx2_dot_bf16, uint16_t, load_bf16x8, th_bf16_to_f32)
