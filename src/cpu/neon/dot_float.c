/* dot_float.c (neon) — NEON vec_dot for F32, F16 and BF16 weights (against activations
 * of the same type; F16/BF16 are widened to f32 and multiplied with fused
 * multiply-adds). 16 elements per iteration
 * in four f32 accumulators; any n (scalar tail). */
#include "cpu/neon/util.h"

static inline float32x4_t load_f32x4(const float *p) { return vld1q_f32(p); }
static inline float32x4_t load_f16x4(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline float32x4_t load_bf16x4(const uint16_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
static inline float id_f32(float x) { return x; }

#define FLOAT_DOT(NAME, T, LOAD, SCALAR)                                                          \
    void NAME(int64_t n, float *s, const void *vw, const void *va) {                             \
        const T *w = vw, *a = va;                                                                 \
        float32x4_t c0 = vdupq_n_f32(0.0f), c1 = c0, c2 = c0, c3 = c0;                            \
        int64_t i = 0;                                                                            \
        for (; i + 16 <= n; i += 16) {                                                            \
            c0 = vfmaq_f32(c0, LOAD(w + i), LOAD(a + i));                                         \
            c1 = vfmaq_f32(c1, LOAD(w + i + 4), LOAD(a + i + 4));                                 \
            c2 = vfmaq_f32(c2, LOAD(w + i + 8), LOAD(a + i + 8));                                 \
            c3 = vfmaq_f32(c3, LOAD(w + i + 12), LOAD(a + i + 12));                               \
        }                                                                                         \
        for (; i + 4 <= n; i += 4) c0 = vfmaq_f32(c0, LOAD(w + i), LOAD(a + i));                 \
        float sum = vaddvq_f32(vaddq_f32(vaddq_f32(c0, c1), vaddq_f32(c2, c3)));                 \
        for (; i < n; i++) sum += SCALAR(w[i]) * SCALAR(a[i]);                                    \
        *s = sum;                                                                                 \
    }

FLOAT_DOT(th_neon_dot_f32, float, load_f32x4, id_f32)
FLOAT_DOT(th_neon_dot_f16, uint16_t, load_f16x4, neon_f16)
FLOAT_DOT(th_neon_dot_bf16, uint16_t, load_bf16x4, th_bf16_to_f32)
