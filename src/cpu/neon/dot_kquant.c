/* dot_kquant.c (neon) — NEON vec_dot for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and
 * IQ4_XS against Q8_K activations. Weights are decoded 16 or 32 at a time to signed
 * int8 (Q3_K, Q6_K, IQ4_XS: the value itself; Q2_K, Q4_K, Q5_K: the unsigned code,
 * their mins removed exactly through the activation's 16-element sums, bsums) and
 * multiplied with sdot. The per-chunk lane sums are folded four chunks at a time with
 * pairwise adds and weighted by the sub-block scales with one integer multiply-add,
 * so a super-block ends in one exact integer and one f32 multiply-add. */
#include "cpu/neon/legacy.h"

static inline int32x4_t dot16(int8x16_t w, const int8_t *a) { return vdotq_s32(vdupq_n_s32(0), w, vld1q_s8(a)); }
static inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* sum_k s4[k] . scales[4k..4k+3] for 16 chunk sums and 16 signed scales. */
static inline int32_t scaled_sum16(const int32x4_t s4[4], int8x16_t scales) {
    int32x4_t sc[4];
    neon_widen_s8(scales, sc);
    int32x4_t t = vmulq_s32(s4[0], sc[0]);
    t = vmlaq_s32(t, s4[1], sc[1]);
    t = vmlaq_s32(t, s4[2], sc[2]);
    t = vmlaq_s32(t, s4[3], sc[3]);
    return vaddvq_s32(t);
}

/* sum_k s4[k] . scales[4k..4k+3] for 8 sub-block sums and 8 unsigned scales. */
static inline int32_t scaled_sum8(const int32x4_t s4[2], uint8x8_t scales) {
    const uint16x8_t w = vmovl_u8(scales);
    int32x4_t t = vmulq_s32(s4[0], vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w))));
    t = vmlaq_s32(t, s4[1], vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(w))));
    return vaddvq_s32(t);
}

void th_neon_dot_q2_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q2_K *w = vw;
    const th_block_q8_K *a = va;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        const uint8x16_t raw = vld1q_u8(w[i].scales);
        const int8x16_t sc = s8(vandq_u8(raw, vdupq_n_u8(0x0f)));
        const int16x8_t mn0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(raw, 4))));
        const int16x8_t mn1 = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(vshrq_n_u8(raw, 4))));
        const int16x8_t b0 = vld1q_s16(a[i].bsums), b1 = vld1q_s16(a[i].bsums + 8);
        int32x4_t ms = vmull_s16(vget_low_s16(mn0), vget_low_s16(b0));
        ms = vmlal_s16(ms, vget_high_s16(mn0), vget_high_s16(b0));
        ms = vmlal_s16(ms, vget_low_s16(mn1), vget_low_s16(b1));
        ms = vmlal_s16(ms, vget_high_s16(mn1), vget_high_s16(b1));
        const int8_t *q8 = a[i].qs;
        int32x4_t s4[4];
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            int32x4_t p[8];
            for (int j = 0; j < 4; j++) { /* 2-bit plane j: elements 128h + 32j .. +31 */
                p[2 * j] = dot16(s8(vandq_u8(q0, m3)), q8 + 128 * h + 32 * j);
                p[2 * j + 1] = dot16(s8(vandq_u8(q1, m3)), q8 + 128 * h + 32 * j + 16);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
            }
            s4[2 * h] = neon_reduce4(p[0], p[1], p[2], p[3]);
            s4[2 * h + 1] = neon_reduce4(p[4], p[5], p[6], p[7]);
        }
        const float dall = a[i].d * neon_f16(w[i].d), dmin = a[i].d * neon_f16(w[i].dmin);
        sum += dall * (float)scaled_sum16(s4, sc) - dmin * (float)vaddvq_s32(ms);
    }
    *s = sum;
}

void th_neon_dot_q3_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q3_K *w = vw;
    const th_block_q8_K *a = va;
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        const int8x16_t sc = neon_q3k_scales(w[i].scales);
        const uint8x16_t hm0 = vld1q_u8(w[i].hmask), hm1 = vld1q_u8(w[i].hmask + 16);
        const int8_t *q8 = a[i].qs;
        int32x4_t s4[4];
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            int32x4_t p[8];
            for (int j = 0; j < 4; j++) { /* value = low 2 bits - (high bit ? 0 : 4) */
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + j)));
                const int8x16_t v0 = vsubq_s8(s8(vandq_u8(q0, m3)), s8(vbicq_u8(four, vtstq_u8(hm0, bit))));
                const int8x16_t v1 = vsubq_s8(s8(vandq_u8(q1, m3)), s8(vbicq_u8(four, vtstq_u8(hm1, bit))));
                p[2 * j] = dot16(v0, q8 + 128 * h + 32 * j);
                p[2 * j + 1] = dot16(v1, q8 + 128 * h + 32 * j + 16);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
            }
            s4[2 * h] = neon_reduce4(p[0], p[1], p[2], p[3]);
            s4[2 * h + 1] = neon_reduce4(p[4], p[5], p[6], p[7]);
        }
        sum += neon_f16(w[i].d) * a[i].d * (float)scaled_sum16(s4, sc);
    }
    *s = sum;
}

/* Q4_K / Q5_K: sub-block j (32 elements) is the low (j even) or high (j odd) nibbles
 * of qs[32 * (j / 2) ..]; Q5_K adds bit j of qh[0..31] as bit 4. */
static inline float k4_block(const uint8_t *qs, const uint8_t *qh, uint16_t d, uint16_t dmin,
                             const uint8_t *scales, const th_block_q8_K *a) {
    uint8x8_t sc, mn;
    neon_k4_scales(scales, &sc, &mn);
    const uint8x16_t low4 = vdupq_n_u8(0x0f), x10 = vdupq_n_u8(0x10);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
    if (qh) { h0 = vld1q_u8(qh); h1 = vld1q_u8(qh + 16); }
    int32x4_t p[8];
    for (int c = 0; c < 4; c++) {
        const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
        uint8x16_t l0 = vandq_u8(q0, low4), l1 = vandq_u8(q1, low4);
        uint8x16_t u0 = vshrq_n_u8(q0, 4), u1 = vshrq_n_u8(q1, 4);
        if (qh) {
            l0 = vorrq_u8(l0, vandq_u8(vshlq_n_u8(h0, 4), x10)); /* bit 2c */
            l1 = vorrq_u8(l1, vandq_u8(vshlq_n_u8(h1, 4), x10));
            u0 = vorrq_u8(u0, vandq_u8(vshlq_n_u8(h0, 3), x10)); /* bit 2c + 1 */
            u1 = vorrq_u8(u1, vandq_u8(vshlq_n_u8(h1, 3), x10));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
        p[2 * c] = neon_dot32(vdupq_n_s32(0), s8(l0), s8(l1), a->qs + 64 * c);
        p[2 * c + 1] = neon_dot32(vdupq_n_s32(0), s8(u0), s8(u1), a->qs + 64 * c + 32);
    }
    const int32x4_t s4[2] = { neon_reduce4(p[0], p[1], p[2], p[3]), neon_reduce4(p[4], p[5], p[6], p[7]) };
    const int32_t isum = scaled_sum8(s4, sc), msum = neon_min_sum(mn, a->bsums);
    return a->d * neon_f16(d) * (float)isum - a->d * neon_f16(dmin) * (float)msum;
}

void th_neon_dot_q4_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q4_K *w = vw;
    const th_block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) sum += k4_block(w[i].qs, NULL, w[i].d, w[i].dmin, w[i].scales, &a[i]);
    *s = sum;
}

void th_neon_dot_q5_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q5_K *w = vw;
    const th_block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) sum += k4_block(w[i].qs, w[i].qh, w[i].d, w[i].dmin, w[i].scales, &a[i]);
    *s = sum;
}

void th_neon_dot_q6_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q6_K *w = vw;
    const th_block_q8_K *a = va;
    const uint8x16_t low4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        const int8x16_t sc = vld1q_s8(w[i].scales);
        int32x4_t s4[4];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *q8 = a[i].qs + 128 * h;
            int32x4_t p[8];
            for (int r = 0; r < 2; r++) { /* 16-element halves of each 32-element quarter */
                const uint8x16_t l0 = vld1q_u8(ql + 16 * r), l1 = vld1q_u8(ql + 32 + 16 * r);
                const uint8x16_t hb = vld1q_u8(qh + 16 * r);
                const uint8x16_t c0 = vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(hb, 4), m30));
                const uint8x16_t c1 = vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(hb, 2), m30));
                const uint8x16_t c2 = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, m30));
                const uint8x16_t c3 = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), m30));
                p[0 + r] = dot16(vsubq_s8(s8(c0), off), q8 + 16 * r);
                p[2 + r] = dot16(vsubq_s8(s8(c1), off), q8 + 32 + 16 * r);
                p[4 + r] = dot16(vsubq_s8(s8(c2), off), q8 + 64 + 16 * r);
                p[6 + r] = dot16(vsubq_s8(s8(c3), off), q8 + 96 + 16 * r);
            }
            s4[2 * h] = neon_reduce4(p[0], p[1], p[2], p[3]);
            s4[2 * h + 1] = neon_reduce4(p[4], p[5], p[6], p[7]);
        }
        sum += neon_f16(w[i].d) * a[i].d * (float)scaled_sum16(s4, sc);
    }
    *s = sum;
}

/* IQ4_XS: 8 sub-blocks of 32 code-book nibbles, each with a 6-bit scale (minus 32). */
void th_neon_dot_iq4_xs(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_iq4_xs *w = vw;
    const th_block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int32_t ls[8];
        for (int ib = 0; ib < 8; ib++)
            ls[ib] = (((w[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((w[i].scales_h >> (2 * ib)) & 3) << 4)) - 32;
        int32x4_t p[8];
        for (int ib = 0; ib < 8; ib++) {
            int8x16_t lo, hi;
            dec_codebook(w[i].qs + 16 * ib, neon_iq4nl_values, &lo, &hi);
            p[ib] = neon_dot32(vdupq_n_s32(0), lo, hi, a[i].qs + 32 * ib);
        }
        int32x4_t t = vmulq_s32(neon_reduce4(p[0], p[1], p[2], p[3]), vld1q_s32(ls));
        t = vmlaq_s32(t, neon_reduce4(p[4], p[5], p[6], p[7]), vld1q_s32(ls + 4));
        sum += neon_f16(w[i].d) * a[i].d * (float)vaddvq_s32(t);
    }
    *s = sum;
}
