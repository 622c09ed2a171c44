/* ref_iq.c — reference kernels of the code-book 4-bit formats: IQ4_NL (32-element
 * blocks, fp16 scale), IQ4_XS (256-element super-blocks, 6-bit sub-block scales)
 * and MXFP4 (GPT-OSS: 32 FP4 e2m1 values sharing an E8M0 power-of-two scale).
 * Decode, simple IQ4_NL and MXFP4 encoders, and dot products with Q8_0 / Q8_K activations. */
#include "quant/ref_internal.h"
#include <math.h>

const int8_t th_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
/* e2m1 codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign. Stored doubled. */
const int8_t th_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Decode a 32-element nibble block with code book `values` and scale d. */
static void decode_nibbles(const uint8_t qs[16], const int8_t values[16], float d, float *dst) {
    for (int j = 0; j < 16; j++) {
        dst[j] = d * values[qs[j] & 0x0f];
        dst[j + 16] = d * values[qs[j] >> 4];
    }
}

/* Integer dot of a 32-element nibble block with 32 int8 activations. */
static int dot_nibbles(const uint8_t qs[16], const int8_t values[16], const int8_t *q8) {
    int lo = 0, hi = 0;
    for (int j = 0; j < 16; j++) {
        lo += q8[j] * values[qs[j] & 0x0f];
        hi += q8[j + 16] * values[qs[j] >> 4];
    }
    return lo + hi;
}

/* 6-bit scale (0..63) of sub-block ib (0..7) of an IQ4_XS block. */
static int iq4xs_scale(const th_block_iq4_xs *b, int ib) {
    int lo = (b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
    int hi = (b->scales_h >> (2 * ib)) & 3;
    return lo | (hi << 4);
}

void th_ref_dq_iq4_nl(const void *src, float *dst, int64_t n) {
    const th_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++) decode_nibbles(b[i].qs, th_iq4nl_values, th_f16_to_f32(b[i].d), dst + TH_QK * i);
}

void th_ref_dq_iq4_xs(const void *src, float *dst, int64_t n) {
    const th_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        float d = th_f16_to_f32(b[i].d);
        for (int ib = 0; ib < TH_QK_K / 32; ib++, dst += 32)
            decode_nibbles(b[i].qs + 16 * ib, th_iq4nl_values, d * (iq4xs_scale(&b[i], ib) - 32), dst);
    }
}

void th_ref_dq_mxfp4(const void *src, float *dst, int64_t n) {
    const th_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++) decode_nibbles(b[i].qs, th_mxfp4_values, th_e8m0_half_to_f32(b[i].e), dst + TH_QK * i);
}

/* Index of the code-book entry nearest to v (the lower one on ties). */
static int nearest_code(const int8_t values[16], float v) {
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabsf(v - values[k]) < fabsf(v - values[best])) best = k;
    return best;
}

/* MXFP4 as GGML encodes it: shared exponent e = floor(log2(amax)) - 2 + 127, so the
 * block's scale is 2^(e-127) and amax lands in [4, 8) of it (values above 6, the
 * largest e2m1 magnitude, are clipped to 6); each element takes the nearest code. */
void th_ref_q_mxfp4(const float *src, void *dst, int64_t n) {
    th_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, src += TH_QK) {
        float amax = 0.0f;
        for (int j = 0; j < TH_QK; j++) amax = TH_MAX(amax, fabsf(src[j]));
        int e = amax > 0.0f ? (int)floorf(log2f(amax)) - 2 + 127 : 0;
        e = TH_MIN(254, TH_MAX(0, e));
        float half_scale = th_e8m0_half_to_f32((uint8_t)e), inv = 1.0f / half_scale;
        int code[TH_QK];
        for (int j = 0; j < TH_QK; j++) code[j] = nearest_code(th_mxfp4_values, src[j] * inv);
        b[i].e = (uint8_t)e;
        for (int j = 0; j < 16; j++) b[i].qs[j] = (uint8_t)(code[j] | (code[j + 16] << 4));
    }
}

void th_ref_dot_iq4_nl(int64_t n, float *s, const void *w, const void *act) {
    const th_block_iq4_nl *x = w;
    const th_block_q8_0 *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        float d = th_f16_to_f32(y[i].d) * th_f16_to_f32(x[i].d);
        sum += d * dot_nibbles(x[i].qs, th_iq4nl_values, y[i].qs);
    }
    *s = sum;
}

void th_ref_dot_iq4_xs(int64_t n, float *s, const void *w, const void *act) {
    const th_block_iq4_xs *x = w;
    const th_block_q8_K *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        float d = th_f16_to_f32(x[i].d) * y[i].d;
        for (int ib = 0; ib < TH_QK_K / 32; ib++) {
            int isum = dot_nibbles(x[i].qs + 16 * ib, th_iq4nl_values, y[i].qs + 32 * ib);
            sum += (d * (iq4xs_scale(&x[i], ib) - 32)) * isum;
        }
    }
    *s = sum;
}

void th_ref_dot_mxfp4(int64_t n, float *s, const void *w, const void *act) {
    const th_block_mxfp4 *x = w;
    const th_block_q8_0 *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        float d = th_f16_to_f32(y[i].d) * th_e8m0_half_to_f32(x[i].e);
        sum += d * dot_nibbles(x[i].qs, th_mxfp4_values, y[i].qs);
    }
    *s = sum;
}
