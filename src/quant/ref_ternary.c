/* ref_ternary.c — reference kernels of the 1-bit and ternary weight types: decode,
 * encode and the dot product, plain C, the oracle of the SIMD and CUDA kernels.
 *   TQ1_0, TQ2_0  llama.cpp's (ids 34, 35): 256-weight blocks, f16 scale last; values
 *                 d * (c - 1), c a trit (TQ1_0: 5 a byte, base 3) or a 2-bit code;
 *                 Q8_K activations, as llama.cpp.
 *   Q1_0_G128     Bonsai's, as ik_llama.cpp has it (id 41): 128 weights, f16 scale d
 *                 first, one bit a weight: set +d, clear -d; Q8_0 activations.
 *   IQ1_BN/IQ2_BN ik_llama.cpp's (ids 134, 135): every row starts with its scale (IQ1_BN
 *                 f16, IQ2_BN f32), then 64-weight blocks of trits (IQ1_BN, 13 bytes)
 *                 or 2-bit codes (IQ2_BN, 16 bytes); value scale * (c - 1); Q8_0
 *                 activations (ik_llama.cpp uses its own Q8_K64; the integer sums are
 *                 the same, the activation rounding differs). n is one whole row.
 * The encoders reproduce the peers' byte for byte (tests/test_ternary.c checks them
 * against bytes the peers wrote: tests/data/ternary/, scripts/ternary_goldens.sh). */
#include "quant/ref_internal.h"
#include <math.h>

/* ---------------------------------------------------------------- codes of element e */

/* TQ1_0: elements 0..159 are trit e/32 of qs[e%32], 160..239 trit (e-160)/16 of
 * qs[32 + (e-160)%16], 240..255 trit (e-240)/4 of qh[(e-240)%4]. */
static inline int tq1_code(const th_block_tq1_0 *b, int e) {
    if (e < 160) return th_tq1_trit(b->qs[e % 32], e / 32);
    if (e < 240) return th_tq1_trit(b->qs[32 + (e - 160) % 16], (e - 160) / 16);
    return th_tq1_trit(b->qh[(e - 240) % 4], (e - 240) / 4);
}
/* TQ2_0: bits 2l..2l+1 of qs[32h + m] for e = 128h + 32l + m. */
static inline int tq2_code(const th_block_tq2_0 *b, int e) {
    return (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
static inline int q1_bit(const th_block_q1_0_g128 *b, int e) { return (b->qs[e / 8] >> (e % 8)) & 1; }
/* IQ1_BN: element 16i + r (r < 15) is trit r%5 of ql[3i + r/5]; 16i + 15 trit i of extra. */
static inline int iq1bn_code(const th_block_iq1_bn *b, int e) {
    int i = e / 16, r = e % 16;
    return r < 15 ? th_iq1bn_trit(b->ql[3 * i + r / 5], r % 5) : th_iq1bn_trit(b->extra, i);
}
/* IQ2_BN: bits 2(e/16).. of qs[e%16]. */
static inline int iq2bn_code(const th_block_iq2_bn *b, int e) { return (b->qs[e % 16] >> (2 * (e / 16))) & 3; }

static float iq1bn_scale(const void *row) {
    const uint8_t *p = row;
    return th_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}
static float iq2bn_scale(const void *row) {
    float d;
    memcpy(&d, row, 4);
    return d;
}

/* ---------------------------------------------------------------- decode */

void th_ref_dq_tq1_0(const void *src, float *dst, int64_t n) {
    const th_block_tq1_0 *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++, dst += TH_QK_K) {
        float d = th_f16_to_f32(b[i].d);
        for (int e = 0; e < TH_QK_K; e++) dst[e] = (float)(tq1_code(&b[i], e) - 1) * d;
    }
}

void th_ref_dq_tq2_0(const void *src, float *dst, int64_t n) {
    const th_block_tq2_0 *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++, dst += TH_QK_K) {
        float d = th_f16_to_f32(b[i].d);
        for (int e = 0; e < TH_QK_K; e++) dst[e] = (float)(tq2_code(&b[i], e) - 1) * d;
    }
}

void th_ref_dq_q1_0_g128(const void *src, float *dst, int64_t n) {
    const th_block_q1_0_g128 *b = src;
    for (int64_t i = 0; i < n / TH_QK1; i++, dst += TH_QK1) {
        float d = th_f16_to_f32(b[i].d);
        for (int e = 0; e < TH_QK1; e++) dst[e] = q1_bit(&b[i], e) ? d : -d;
    }
}

void th_ref_dq_iq1_bn(const void *src, float *dst, int64_t n) {
    float d = iq1bn_scale(src);
    const th_block_iq1_bn *b = (const th_block_iq1_bn *)((const uint8_t *)src + 2);
    for (int64_t i = 0; i < n / TH_QKBN; i++, dst += TH_QKBN)
        for (int e = 0; e < TH_QKBN; e++) dst[e] = d * (float)(iq1bn_code(&b[i], e) - 1);
}

void th_ref_dq_iq2_bn(const void *src, float *dst, int64_t n) {
    float d = iq2bn_scale(src);
    const th_block_iq2_bn *b = (const th_block_iq2_bn *)((const uint8_t *)src + 4);
    for (int64_t i = 0; i < n / TH_QKBN; i++, dst += TH_QKBN)
        for (int e = 0; e < TH_QKBN; e++) dst[e] = d * (float)(iq2bn_code(&b[i], e) - 1);
}

/* ---------------------------------------------------------------- encode */

/* llama.cpp's TQ*_0 rounding: c = lroundf(x / amax) + 1, amax over the block, 1/amax in f32. */
static float block_amax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    return amax;
}
static inline int tq_trit(float x, float id) { return (int)lroundf(x * id) + 1; }
/* ceil(q * 256 / 243): the 5-trit number q (0..242) as a byte whose top trit comes out
 * first when multiplied by powers of 3 (th_tq1_trit, th_iq1bn_trit). */
static inline uint8_t trits_to_byte(int q) { return (uint8_t)((q * 256 + 242) / 243); }

void th_ref_q_tq1_0(const float *x, void *dst, int64_t n) {
    th_block_tq1_0 *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        const float d = block_amax(x, TH_QK_K), id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = th_f32_to_f16(d);
        for (int m = 0; m < 32; m++) {            /* elements 0..159: 5 trits of qs[m], stride 32 */
            int q = 0;
            for (int t = 0; t < 5; t++) q = 3 * q + tq_trit(x[m + 32 * t], id);
            y[i].qs[m] = trits_to_byte(q);
        }
        for (int m = 0; m < 16; m++) {            /* 160..239: qs[32 + m], stride 16 */
            int q = 0;
            for (int t = 0; t < 5; t++) q = 3 * q + tq_trit(x[160 + m + 16 * t], id);
            y[i].qs[32 + m] = trits_to_byte(q);
        }
        for (int m = 0; m < 4; m++) {             /* 240..255: 4 trits of qh[m], stride 4, then a 0 */
            int q = 0;
            for (int t = 0; t < 4; t++) q = 3 * q + tq_trit(x[240 + m + 4 * t], id);
            y[i].qh[m] = trits_to_byte(3 * q);
        }
    }
}

void th_ref_q_tq2_0(const float *x, void *dst, int64_t n) {
    th_block_tq2_0 *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        const float d = block_amax(x, TH_QK_K), id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = th_f32_to_f16(d);
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 32; m++) {
                int q = 0;
                for (int l = 0; l < 4; l++) q |= (tq_trit(x[128 * h + 32 * l + m], id) & 3) << (2 * l);
                y[i].qs[32 * h + m] = (uint8_t)q;
            }
    }
}

/* ik_llama.cpp's Q1_0_G128: d = mean |x| (summed in order, f32), bit = x >= 0. */
void th_ref_q_q1_0_g128(const float *x, void *dst, int64_t n) {
    th_block_q1_0_g128 *y = dst;
    for (int64_t i = 0; i < n / TH_QK1; i++, x += TH_QK1) {
        float sum = 0.0f;
        for (int j = 0; j < TH_QK1; j++) sum += fabsf(x[j]);
        y[i].d = th_f32_to_f16(sum / TH_QK1);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int j = 0; j < TH_QK1; j++)
            if (x[j] >= 0.0f) y[i].qs[j / 8] |= (uint8_t)(1u << (j % 8));
    }
}

/* ik_llama.cpp's BN rounding: the row's scale is max |x|; |x| < max/2 is 0, else its sign. */
static inline int bn_trit(float v, float thresh) { return fabsf(v) < thresh ? 1 : v < 0.0f ? 0 : 2; }

void th_ref_q_iq1_bn(const float *x, void *dst, int64_t n) {
    static const int p3[5] = { 1, 3, 9, 27, 81 };
    const float max = block_amax(x, (int)n), thresh = 0.5f * max;
    uint16_t d = th_f32_to_f16(max);
    uint8_t *row = dst;
    row[0] = (uint8_t)(d & 0xff);
    row[1] = (uint8_t)(d >> 8);
    th_block_iq1_bn *y = (th_block_iq1_bn *)(row + 2);
    for (int64_t ib = 0; ib < n / TH_QKBN; ib++) {
        const float *xb = x + ib * TH_QKBN;
        int v13 = 0;
        for (int i = 0; i < 4; i++) {
            for (int k = 0; k < 3; k++) {
                int idx = 0;
                for (int j = 0; j < 5; j++) idx += p3[j] * bn_trit(xb[16 * i + 5 * k + j], thresh);
                y[ib].ql[3 * i + k] = trits_to_byte(idx);
            }
            v13 += p3[i] * bn_trit(xb[16 * i + 15], thresh);
        }
        y[ib].extra = trits_to_byte(v13);
    }
}

void th_ref_q_iq2_bn(const float *x, void *dst, int64_t n) {
    const float max = block_amax(x, (int)n), thresh = 0.5f * max;
    memcpy(dst, &max, 4);
    th_block_iq2_bn *y = (th_block_iq2_bn *)((uint8_t *)dst + 4);
    for (int64_t ib = 0; ib < n / TH_QKBN; ib++) {
        const float *xb = x + ib * TH_QKBN;
        for (int j = 0; j < 16; j++)
            y[ib].qs[j] = (uint8_t)(bn_trit(xb[j], thresh) | (bn_trit(xb[j + 16], thresh) << 2) |
                                    (bn_trit(xb[j + 32], thresh) << 4) | (bn_trit(xb[j + 48], thresh) << 6));
    }
}

/* ---------------------------------------------------------------- dot products */

/* TQ*_0 . Q8_K: per block the exact integer sum (c - 1) a, then (d_w d_a) times it (llama.cpp's order). */
void th_ref_dot_tq1_0(int64_t n, float *s, const void *w, const void *act) {
    const th_block_tq1_0 *x = w;
    const th_block_q8_K *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int isum = 0;
        for (int e = 0; e < TH_QK_K; e++) isum += (tq1_code(&x[i], e) - 1) * y[i].qs[e];
        sum += (float)isum * (th_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sum;
}

void th_ref_dot_tq2_0(int64_t n, float *s, const void *w, const void *act) {
    const th_block_tq2_0 *x = w;
    const th_block_q8_K *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int isum = 0;
        for (int e = 0; e < TH_QK_K; e++) isum += (tq2_code(&x[i], e) - 1) * y[i].qs[e];
        sum += (float)isum * (th_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sum;
}

/* Q1_0_G128 . Q8_0: per 32-element activation block, (d_w d_a) times sum(+-1 a). */
void th_ref_dot_q1_0_g128(int64_t n, float *s, const void *w, const void *act) {
    const th_block_q1_0_g128 *x = w;
    const th_block_q8_0 *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK1; i++) {
        const float dw = th_f16_to_f32(x[i].d);
        for (int h = 0; h < 4; h++) {
            const th_block_q8_0 *a = &y[4 * i + h];
            int isum = 0;
            for (int j = 0; j < TH_QK; j++) isum += q1_bit(&x[i], 32 * h + j) ? a->qs[j] : -a->qs[j];
            sum += (dw * th_f16_to_f32(a->d)) * (float)isum;
        }
    }
    *s = sum;
}

/* *_BN . Q8_0: sum over activation blocks of d_a * sum((c - 1) a), times the row scale. */
void th_ref_dot_iq1_bn(int64_t n, float *s, const void *w, const void *act) {
    const th_block_iq1_bn *x = (const th_block_iq1_bn *)((const uint8_t *)w + 2);
    const th_block_q8_0 *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QKBN; i++)
        for (int h = 0; h < 2; h++) {
            const th_block_q8_0 *a = &y[2 * i + h];
            int isum = 0;
            for (int j = 0; j < TH_QK; j++) isum += (iq1bn_code(&x[i], 32 * h + j) - 1) * a->qs[j];
            sum += th_f16_to_f32(a->d) * (float)isum;
        }
    *s = iq1bn_scale(w) * sum;
}

void th_ref_dot_iq2_bn(int64_t n, float *s, const void *w, const void *act) {
    const th_block_iq2_bn *x = (const th_block_iq2_bn *)((const uint8_t *)w + 4);
    const th_block_q8_0 *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QKBN; i++)
        for (int h = 0; h < 2; h++) {
            const th_block_q8_0 *a = &y[2 * i + h];
            int isum = 0;
            for (int j = 0; j < TH_QK; j++) isum += (iq2bn_code(&x[i], 32 * h + j) - 1) * a->qs[j];
            sum += th_f16_to_f32(a->d) * (float)isum;
        }
    *s = iq2bn_scale(w) * sum;
}
