/* dot_legacy.c (neon) — NEON vec_dot for the 32-element block types (Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, IQ4_NL, MXFP4) against Q8_0/Q8_1 activations. Each weight block is
 * decoded to 32 int8 (two registers) and multiplied with the activation's 32 int8 by
 * two sdot (vdotq_s32); the exact integer lanes are scaled by d_w * d_a and accumulated
 * in f32 lanes (two accumulators, blocks taken in pairs). The decoders are shared
 * with gemm_legacy.c through legacy.h. */
#include "cpu/neon/legacy.h"

/* One function per type: acc += dot(block, activation) * scale in f32 lanes; Q4_1/Q5_1
 * add m_w * s_a per block (s = d * sum of the Q8_1 codes). */
#define DOT_LEGACY(NAME, WT, AT, DECODE, WSCALE, HAS_MIN)                                       \
    void NAME(int64_t n, float *s, const void *vw, const void *va) {                           \
        const WT *w = vw;                                                                       \
        const AT *a = va;                                                                       \
        const int64_t nb = n / TH_QK;                                                           \
        float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0;                                      \
        float summ = 0.0f;                                                                      \
        int64_t i = 0;                                                                          \
        for (; i + 1 < nb; i += 2) {                                                            \
            int8x16_t x0, x1, y0, y1;                                                           \
            DECODE(&w[i], &x0, &x1);                                                            \
            DECODE(&w[i + 1], &y0, &y1);                                                        \
            const int32x4_t p0 = neon_dot32(vdupq_n_s32(0), x0, x1, a[i].qs);                   \
            const int32x4_t p1 = neon_dot32(vdupq_n_s32(0), y0, y1, a[i + 1].qs);               \
            acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(p0), WSCALE(&w[i]) * neon_f16(a[i].d));      \
            acc1 = vmlaq_n_f32(acc1, vcvtq_f32_s32(p1), WSCALE(&w[i + 1]) * neon_f16(a[i + 1].d)); \
            if (HAS_MIN) summ += legacy_m(&w[i]) * legacy_s(&a[i]) + legacy_m(&w[i + 1]) * legacy_s(&a[i + 1]); \
        }                                                                                       \
        for (; i < nb; i++) {                                                                   \
            int8x16_t x0, x1;                                                                   \
            DECODE(&w[i], &x0, &x1);                                                            \
            const int32x4_t p0 = neon_dot32(vdupq_n_s32(0), x0, x1, a[i].qs);                   \
            acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(p0), WSCALE(&w[i]) * neon_f16(a[i].d));      \
            if (HAS_MIN) summ += legacy_m(&w[i]) * legacy_s(&a[i]);                             \
        }                                                                                       \
        *s = vaddvq_f32(vaddq_f32(acc0, acc1)) + summ;                                          \
    }

DOT_LEGACY(th_neon_dot_q4_0, th_block_q4_0, th_block_q8_0, dec_q4_0, legacy_d, 0)
DOT_LEGACY(th_neon_dot_q4_1, th_block_q4_1, th_block_q8_1, dec_q4_1, legacy_d, 1)
DOT_LEGACY(th_neon_dot_q5_0, th_block_q5_0, th_block_q8_0, dec_q5_0, legacy_d, 0)
DOT_LEGACY(th_neon_dot_q5_1, th_block_q5_1, th_block_q8_1, dec_q5_1, legacy_d, 1)
DOT_LEGACY(th_neon_dot_q8_0, th_block_q8_0, th_block_q8_0, dec_q8_0, legacy_d, 0)
DOT_LEGACY(th_neon_dot_iq4_nl, th_block_iq4_nl, th_block_q8_0, dec_iq4_nl, legacy_d, 0)
DOT_LEGACY(th_neon_dot_mxfp4, th_block_mxfp4, th_block_q8_0, dec_mxfp4, legacy_e8m0, 0)
