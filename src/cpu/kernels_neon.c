/* kernels_neon.c — the NEON (aarch64, dotprod) level of the kernel table: the 8-bit
 * activation quantizers (Q8_0, Q8_1, Q8_K) and th_kernels_fill_neon, which puts every
 * NEON kernel (dot_*_neon.c, gemm_neon.c) in the table. Compiled with
 * -march=armv8.2-a+dotprod+fp16; kernels.c calls it only when HWCAP says ASIMDDP.
 * The quantizers follow the reference rounding exactly (x * (127/amax) for Q8_0/Q8_1,
 * x * (-127/max) for Q8_K, both rounded half to even by fcvtns), so the bytes equal
 * the reference's. */
#include "cpu/neon_util.h"

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

void th_kernels_fill_neon(th_kernels *k) {
    k->quantize[TH_Q8_0] = th_neon_quantize_q8_0;
    k->quantize[TH_Q8_1] = th_neon_quantize_q8_1;
    k->quantize[TH_Q8_K] = th_neon_quantize_q8_K;
    k->quantize[TH_F16] = th_neon_quantize_f16;
    k->quantize[TH_BF16] = th_neon_quantize_bf16;

    k->vec_dot[TH_F32] = th_neon_dot_f32;
    k->vec_dot[TH_F16] = th_neon_dot_f16;
    k->vec_dot[TH_BF16] = th_neon_dot_bf16;
    k->vec_dot[TH_Q4_0] = th_neon_dot_q4_0;
    k->vec_dot[TH_Q4_1] = th_neon_dot_q4_1;
    k->vec_dot[TH_Q5_0] = th_neon_dot_q5_0;
    k->vec_dot[TH_Q5_1] = th_neon_dot_q5_1;
    k->vec_dot[TH_Q8_0] = th_neon_dot_q8_0;
    k->vec_dot[TH_IQ4_NL] = th_neon_dot_iq4_nl;
    k->vec_dot[TH_MXFP4] = th_neon_dot_mxfp4;
    k->vec_dot[TH_Q2_K] = th_neon_dot_q2_K;
    k->vec_dot[TH_Q3_K] = th_neon_dot_q3_K;
    k->vec_dot[TH_Q4_K] = th_neon_dot_q4_K;
    k->vec_dot[TH_Q5_K] = th_neon_dot_q5_K;
    k->vec_dot[TH_Q6_K] = th_neon_dot_q6_K;
    k->vec_dot[TH_IQ4_XS] = th_neon_dot_iq4_xs;

    th_neon_fill_gemm(k);
}
