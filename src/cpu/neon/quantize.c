/* quantize.c (neon) — the activation quantizers of the neon level: f32 to Q8_0, Q8_1,
 * Q8_K, F16 and BF16. They follow the reference rounding exactly (x * (127/amax) for
 * Q8_0/Q8_1, x * (-127/max) for Q8_K, both rounded half to even by fcvtns; F16 by
 * fcvtn, BF16 to nearest even), so the bytes equal the reference's. */
#include "cpu/neon/util.h"

/* Four int32x4 (each |v| <= 127) -> 16 int8 in element order. */
static inline int8x16_t narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t ab = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
    const int16x8_t cd = vcombine_s16(vqmovn_s32(c), vqmovn_s32(d));
    return vcombine_s8(vqmovn_s16(ab), vqmovn_s16(cd));
}

/* One 32-element block to int8 with scale d = amax/127 (as f16 in *d_out); values are
 * x * (127/amax) rounded half to even. Returns d in f32; *sum = the sum of the qs. */
static inline float q8_block(const float *x, int8_t *qs, uint16_t *d_out, int *sum) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(x + 4 * k);
        m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    *d_out = th_f32_to_f16(d);
    int32x4_t q[8];
    int32x4_t s = vdupq_n_s32(0);
    for (int k = 0; k < 8; k++) {
        q[k] = vcvtnq_s32_f32(vmulq_n_f32(v[k], id));
        s = vaddq_s32(s, q[k]);
    }
    vst1q_s8(qs, narrow16(q[0], q[1], q[2], q[3]));
    vst1q_s8(qs + 16, narrow16(q[4], q[5], q[6], q[7]));
    *sum = vaddvq_s32(s);
    return d;
}

void th_neon_quantize_q8_0(const float *x, void *vy, int64_t n) {
    th_block_q8_0 *y = vy;
    int sum;
    for (int64_t i = 0; i < n / TH_QK; i++) q8_block(x + i * TH_QK, y[i].qs, &y[i].d, &sum);
}

void th_neon_quantize_q8_1(const float *x, void *vy, int64_t n) {
    th_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        int sum;
        float d = q8_block(x + i * TH_QK, y[i].qs, &y[i].d, &sum);
        y[i].s = th_f32_to_f16(d * (float)sum);
    }
}

/* Q8_K: scale -127/max where max is the first element of largest magnitude (sign kept);
 * values rounded half to even, capped at 127; bsums are the 16-element sums. */
void th_neon_quantize_q8_K(const float *x, void *vy, int64_t n) {
    th_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < TH_QK_K; k += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + k)));
        const float amax = vmaxvq_f32(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0.0f;
        for (int k = 0; k < TH_QK_K; k++)
            if (x[k] == amax || x[k] == -amax) { max = x[k]; break; }
        const float iscale = -127.0f / max;
        const int32x4_t cap = vdupq_n_s32(127);
        for (int k = 0; k < TH_QK_K; k += 16) {
            int32x4_t q[4];
            for (int j = 0; j < 4; j++)
                q[j] = vminq_s32(cap, vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k + 4 * j), iscale)));
            vst1q_s8(y[i].qs + k, narrow16(q[0], q[1], q[2], q[3]));
            y[i].bsums[k / 16] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
        }
        y[i].d = 1.0f / iscale;
    }
}

/* f32 -> f16, round to nearest even (fcvtn in the default FPCR mode): the bits of
 * th_f32_to_f16 for every non-NaN input. */
void th_neon_quantize_f16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = th_f32_to_f16(x[i]);
}

/* f32 -> bf16, round to nearest even; NaN stays a quiet NaN (as th_f32_to_bf16). */
void th_neon_quantize_bf16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    const uint32x4_t one = vdupq_n_u32(1), bias = vdupq_n_u32(0x7fff);
    const uint32x4_t absmask = vdupq_n_u32(0x7fffffff), inf = vdupq_n_u32(0x7f800000);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(x + i));
        uint32x4_t r = vshrq_n_u32(vaddq_u32(u, vaddq_u32(bias, vandq_u32(vshrq_n_u32(u, 16), one))), 16);
        const uint32x4_t nan = vcgtq_u32(vandq_u32(u, absmask), inf);
        const uint32x4_t qnan = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(64));
        r = vbslq_u32(nan, qnan, r);
        vst1_u16(y + i, vmovn_u32(r));
    }
    for (; i < n; i++) y[i] = th_f32_to_bf16(x[i]);
}
