/* ternary.c (neon) — the 1-bit and ternary types' dot products with the dot-product
 * instructions (TQ1_0, TQ2_0 with Q8_K activations; Q1_0_G128, IQ1_BN, IQ2_BN with
 * Q8_0; layouts in quant/quant.h, quant/ref_ternary.c). The weights become the signed
 * bytes c - 1 (or +-1), so one sdot per 16 elements gives the reference's integer.
 * A trit is the top base-3 digit of a byte times 3^j mod 256 (vmul / vadd wrap mod 256):
 * floor(3 v / 256) = (v >= 86) + (v >= 171), which is IQ1_BN's (v + v/2) >> 7 too. The
 * float steps per block are the reference's, in its order. The gemm is the dot per output.
 * th_neon_fill_ternary puts them in the table. */
#include "cpu/neon/util.h"

/* trit - 1 (-1, 0, 1) of each byte */
static inline int8x16_t trit_m1(uint8x16_t v) {
    const uint8x16_t m = vaddq_u8(vcgeq_u8(v, vdupq_n_u8(86)), vcgeq_u8(v, vdupq_n_u8(171)));
    return vreinterpretq_s8_u8(vsubq_u8(vdupq_n_u8(0xff), m));   /* -1 - (-t) = t - 1 */
}
static inline uint8x16_t x3(uint8x16_t x) { return vaddq_u8(vaddq_u8(x, x), x); }

static int tq1_block(const th_block_tq1_0 *b, const th_block_q8_K *y) {
    int32x4_t acc = vdupq_n_s32(0);
    uint8x16_t lo = vld1q_u8(b->qs), hi = vld1q_u8(b->qs + 16), mid = vld1q_u8(b->qs + 32);
    for (int t = 0; t < 5; t++) {   /* qs[m] trit t: element m + 32t; qs[32 + m]: 160 + m + 16t */
        acc = vdotq_s32(acc, trit_m1(lo), vld1q_s8(y->qs + 32 * t));
        acc = vdotq_s32(acc, trit_m1(hi), vld1q_s8(y->qs + 32 * t + 16));
        acc = vdotq_s32(acc, trit_m1(mid), vld1q_s8(y->qs + 160 + 16 * t));
        lo = x3(lo); hi = x3(hi); mid = x3(mid);
    }
    static const uint8_t p3[16] = { 1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27 };
    const uint8x16_t h = vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(neon_u32(b->qh))), vld1q_u8(p3));
    acc = vdotq_s32(acc, trit_m1(h), vld1q_s8(y->qs + 240));   /* qh[m] trit t: 240 + m + 4t */
    return vaddvq_s32(acc);
}

static int tq2_block(const th_block_tq2_0 *b, const th_block_q8_K *y) {
    int32x4_t acc = vdupq_n_s32(0);
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    for (int h = 0; h < 2; h++)
        for (int half = 0; half < 2; half++) {
            const uint8x16_t q = vld1q_u8(b->qs + 32 * h + 16 * half);
            const int8_t *a = y->qs + 128 * h + 16 * half;
            acc = vdotq_s32(acc, vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, m3), one)), vld1q_s8(a));
            acc = vdotq_s32(acc, vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(q, 2), m3), one)), vld1q_s8(a + 32));
            acc = vdotq_s32(acc, vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(q, 4), m3), one)), vld1q_s8(a + 64));
            acc = vdotq_s32(acc, vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 6), one)), vld1q_s8(a + 96));
        }
    return vaddvq_s32(acc);
}

static void dot_tq1_0(int64_t n, float *s, const void *w, const void *act) {
    const th_block_tq1_0 *x = w;
    const th_block_q8_K *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) sum += (float)tq1_block(&x[i], &y[i]) * (neon_f16(x[i].d) * y[i].d);
    *s = sum;
}

static void dot_tq2_0(int64_t n, float *s, const void *w, const void *act) {
    const th_block_tq2_0 *x = w;
    const th_block_q8_K *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) sum += (float)tq2_block(&x[i], &y[i]) * (neon_f16(x[i].d) * y[i].d);
    *s = sum;
}

static void dot_q1_0_g128(int64_t n, float *s, const void *w, const void *act) {
    const th_block_q1_0_g128 *x = w;
    const th_block_q8_0 *y = act;
    const uint8x16_t two = vdupq_n_u8(2), one = vdupq_n_u8(1);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK1; i++) {
        const float dw = neon_f16(x[i].d);
        for (int h = 0; h < 4; h++) {
            uint8x16_t b0, b1;
            neon_bits32(x[i].qs + 4 * h, &b0, &b1);
            const int8x16_t v0 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(b0, two), one));   /* set +1, clear -1 */
            const int8x16_t v1 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(b1, two), one));
            const th_block_q8_0 *a = &y[4 * i + h];
            sum += (dw * neon_f16(a->d)) * (float)vaddvq_s32(neon_dot32(vdupq_n_s32(0), v0, v1, a->qs));
        }
    }
    *s = sum;
}

static void dot_iq2_bn(int64_t n, float *s, const void *w, const void *act) {
    float scale;
    memcpy(&scale, w, 4);
    const th_block_iq2_bn *x = (const th_block_iq2_bn *)((const uint8_t *)w + 4);
    const th_block_q8_0 *y = act;
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QKBN; i++) {
        const uint8x16_t q = vld1q_u8(x[i].qs);   /* bits 2s of qs[m]: element 16 s + m */
        const int8x16_t c0 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, m3), one));
        const int8x16_t c1 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(q, 2), m3), one));
        const int8x16_t c2 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(q, 4), m3), one));
        const int8x16_t c3 = vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 6), one));
        const th_block_q8_0 *a0 = &y[2 * i], *a1 = &y[2 * i + 1];
        sum += neon_f16(a0->d) * (float)vaddvq_s32(neon_dot32(vdupq_n_s32(0), c0, c1, a0->qs));
        sum += neon_f16(a1->d) * (float)vaddvq_s32(neon_dot32(vdupq_n_s32(0), c2, c3, a1->qs));
    }
    *s = scale * sum;
}

/* IQ1_BN: element 16g + k is trit k % 5 of byte 3g + k / 5 (k < 15) or trit g of byte 12;
 * a table lookup gathers each element's byte, a multiply by 3^(4-j) brings its trit up. */
static void dot_iq1_bn(int64_t n, float *s, const void *w, const void *act) {
    static const uint8_t mult[5] = { 81, 27, 9, 3, 1 };
    uint8_t ixb[4][16], mlb[4][16];
    for (int g = 0; g < 4; g++)
        for (int k = 0; k < 16; k++) {
            ixb[g][k] = (uint8_t)(k < 15 ? 3 * g + k / 5 : 12);
            mlb[g][k] = k < 15 ? mult[k % 5] : mult[g];
        }
    uint8x16_t ix[4], ml[4];
    for (int g = 0; g < 4; g++) { ix[g] = vld1q_u8(ixb[g]); ml[g] = vld1q_u8(mlb[g]); }
    uint16_t d16;
    memcpy(&d16, w, 2);
    const th_block_iq1_bn *x = (const th_block_iq1_bn *)((const uint8_t *)w + 2);
    const th_block_q8_0 *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QKBN; i++) {
        uint8_t tmp[16] = { 0 };
        memcpy(tmp, &x[i], sizeof x[i]);   /* 13 bytes: no read past the row */
        const uint8x16_t raw = vld1q_u8(tmp);
        for (int h = 0; h < 2; h++) {
            const int8x16_t c0 = trit_m1(vmulq_u8(vqtbl1q_u8(raw, ix[2 * h]), ml[2 * h]));
            const int8x16_t c1 = trit_m1(vmulq_u8(vqtbl1q_u8(raw, ix[2 * h + 1]), ml[2 * h + 1]));
            const th_block_q8_0 *a = &y[2 * i + h];
            sum += neon_f16(a->d) * (float)vaddvq_s32(neon_dot32(vdupq_n_s32(0), c0, c1, a->qs));
        }
    }
    *s = neon_f16(d16) * sum;
}

TH_GEMM_BY_DOT(gemm_tq1_0, dot_tq1_0)
TH_GEMM_BY_DOT(gemm_tq2_0, dot_tq2_0)
TH_GEMM_BY_DOT(gemm_q1_0_g128, dot_q1_0_g128)
TH_GEMM_BY_DOT(gemm_iq1_bn, dot_iq1_bn)
TH_GEMM_BY_DOT(gemm_iq2_bn, dot_iq2_bn)

void th_neon_fill_ternary(th_kernels *k) {
#define SET(T, X) k->vec_dot[TH_##T] = dot_##X; k->gemm[TH_##T] = gemm_##X;
    SET(TQ1_0, tq1_0) SET(TQ2_0, tq2_0) SET(Q1_0_G128, q1_0_g128) SET(IQ1_BN, iq1_bn) SET(IQ2_BN, iq2_bn)
#undef SET
}
