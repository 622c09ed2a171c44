/* util.h (neon) — small inline NEON helpers shared by the kernel files of the neon
 * level (nibble/bit unpacking, 16-element dot sums with sdot, the K-quant scale fields)
 * and the declarations of the NEON kernels that neon/kernels.c puts in the table.
 * Include only from files compiled with the NEON flags (those under src/cpu/neon/:
 * -march=armv8.2-a+dotprod+fp16). */
#ifndef TH_CPU_NEON_UTIL_H
#define TH_CPU_NEON_UTIL_H

#include "cpu/kernels.h"
#include <arm_neon.h>
#include <string.h>

/* f16 bits -> f32 with the hardware conversion (exact for every f16 value). */
static inline float neon_f16(uint16_t h) { __fp16 v; memcpy(&v, &h, 2); return (float)v; }

/* MXFP4 block scale: 2^(e-128), half the OCP E8M0 scale (the code book holds doubled
 * e2m1 values); e < 2 gives the subnormals 2^-128, 2^-127. */
static inline float neon_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t)(e - 1) << 23);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint32_t neon_u32(const uint8_t *p) { uint32_t x; memcpy(&x, p, 4); return x; }

/* 16 packed bytes -> low nibbles (elements 0..15) and high nibbles (16..31). */
static inline void neon_nibbles(const uint8_t *p, uint8x16_t *lo, uint8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(p);
    *lo = vandq_u8(q, vdupq_n_u8(0x0f));
    *hi = vshrq_n_u8(q, 4);
}

/* Bits 0..15 / 16..31 of the little-endian 32-bit word at p as bytes 0xff (set) or 0. */
static inline void neon_bits32(const uint8_t *p, uint8x16_t *b0, uint8x16_t *b1) {
    static const uint8_t bit[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
    const uint8x16_t m = vld1q_u8(bit);
    *b0 = vtstq_u8(vcombine_u8(vdup_n_u8(p[0]), vdup_n_u8(p[1])), m);
    *b1 = vtstq_u8(vcombine_u8(vdup_n_u8(p[2]), vdup_n_u8(p[3])), m);
}

/* sdot of 32 int8 pairs (two registers each) into the 4 lanes of acc. */
static inline int32x4_t neon_dot32(int32x4_t acc, int8x16_t w0, int8x16_t w1, const int8_t *a) {
    return vdotq_s32(vdotq_s32(acc, w0, vld1q_s8(a)), w1, vld1q_s8(a + 16));
}

/* [sum(p0), sum(p1), sum(p2), sum(p3)] by pairwise adds. */
static inline int32x4_t neon_reduce4(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
    return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

/* 16 int8 -> four int32x4 (lanes 0-3, 4-7, 8-11, 12-15). */
static inline void neon_widen_s8(int8x16_t v, int32x4_t out[4]) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_s8(vget_high_s8(v));
    out[0] = vmovl_s16(vget_low_s16(lo));
    out[1] = vmovl_s16(vget_high_s16(lo));
    out[2] = vmovl_s16(vget_low_s16(hi));
    out[3] = vmovl_s16(vget_high_s16(hi));
}

/* Q4_K/Q5_K 12-byte scale field -> the 8 six-bit sub-block scales (bytes 0..7 of *sc)
 * and mins (bytes 0..7 of *mn), unpacked with 32-bit integer ops. */
static inline void neon_k4_scales(const uint8_t *q, uint8x8_t *sc, uint8x8_t *mn) {
    const uint32_t u0 = neon_u32(q), u1 = neon_u32(q + 4), u2 = neon_u32(q + 8);
    const uint32_t sc_lo = u0 & 0x3f3f3f3fu, mn_lo = u1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
    *sc = vreinterpret_u8_u32(vset_lane_u32(sc_hi, vdup_n_u32(sc_lo), 1));
    *mn = vreinterpret_u8_u32(vset_lane_u32(mn_hi, vdup_n_u32(mn_lo), 1));
}

/* Q3_K 12-byte scale field -> 16 signed scales (six-bit value - 32). */
static inline int8x16_t neon_q3k_scales(const uint8_t *q) {
    const uint32_t a0 = neon_u32(q), a1 = neon_u32(q + 4), a2 = neon_u32(q + 8);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t s[4] = { (a0 & m4) | ((a2 & m2) << 4), (a1 & m4) | (((a2 >> 2) & m2) << 4),
                            ((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4), ((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4) };
    return vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(s)), vdupq_n_s8(32));
}

/* Sum of min[j] * (bsums[2j] + bsums[2j+1]) over the 8 sub-blocks of 32. */
static inline int32_t neon_min_sum(uint8x8_t mn, const int16_t *bsums) {
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8)); /* |x| <= 4064 */
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(mn));
    int32x4_t p = vmull_s16(vget_low_s16(m), vget_low_s16(pairs));
    p = vmlal_s16(p, vget_high_s16(m), vget_high_s16(pairs));
    return vaddvq_s32(p);
}

/* ---- the kernels (defined in the files of src/cpu/neon/) ---- */

/* quantize.c: f32 to the activation types, the reference's bytes exactly. */

void th_neon_quantize_q8_0(const float *x, void *y, int64_t n);
void th_neon_quantize_q8_1(const float *x, void *y, int64_t n);
void th_neon_quantize_q8_K(const float *x, void *y, int64_t n);
void th_neon_quantize_f16(const float *x, void *y, int64_t n);
void th_neon_quantize_bf16(const float *x, void *y, int64_t n);

/* dot_float.c, dot_legacy.c, dot_kquant.c: the vec_dot of every supported weight type. */
void th_neon_dot_f32(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_f16(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_bf16(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q4_0(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q4_1(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q5_0(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q5_1(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q8_0(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_iq4_nl(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_mxfp4(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q2_K(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q3_K(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q4_K(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q5_K(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_q6_K(int64_t n, float *s, const void *w, const void *a);
void th_neon_dot_iq4_xs(int64_t n, float *s, const void *w, const void *a);

/* The batch gemms (any nb; neon/kernels.c sends batches of one row to the vec_dot):
 *   gemm_legacy.c tiles of 4 weight rows x 4 activation rows (the 32-element block types)
 *   gemm_kquant.c a super-block decoded once for up to 32 activation rows (Q2_K..Q6_K, IQ4_XS)
 * The float types have none (their gemm is the vec_dot per row). */
th_gemm_kernel th_neon_batch_q4_0;
th_gemm_kernel th_neon_batch_q4_1;
th_gemm_kernel th_neon_batch_q5_0;
th_gemm_kernel th_neon_batch_q5_1;
th_gemm_kernel th_neon_batch_q8_0;
th_gemm_kernel th_neon_batch_iq4_nl;
th_gemm_kernel th_neon_batch_mxfp4;
th_gemm_kernel th_neon_batch_q2_K;
th_gemm_kernel th_neon_batch_q3_K;
th_gemm_kernel th_neon_batch_q4_K;
th_gemm_kernel th_neon_batch_q5_K;
th_gemm_kernel th_neon_batch_q6_K;
th_gemm_kernel th_neon_batch_iq4_xs;

/* qn.c: the qN vec_dot and gemm entries of this level (TH_Q2..TH_Q8) */
void th_neon_fill_qn(th_kernels *k);
/* ternary.c: the TQ1_0, TQ2_0, Q1_0_G128, IQ1_BN, IQ2_BN vec_dot and gemm entries */
void th_neon_fill_ternary(th_kernels *k);

/* gemm_fpack.c: F16 / BF16 gemm on the 8-row packed layout (th_repack8_16bit), f32 FMLA */
th_gemm_kernel th_neon_fpack_f16;
th_gemm_kernel th_neon_fpack_bf16;

#endif
