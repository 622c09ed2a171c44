/* ref_legacy.c — reference kernels of the 32-element "legacy" block formats
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the activation format Q8_1: decode,
 * round-to-nearest encode (as GGML's *_ref quantizers; Q8_0/Q8_1 as its x86
 * activation path) and dot products with Q8_0/Q8_1 activations computed as
 * GGML's scalar code does (integer sum per block, then one float scale). */
#include "quant/ref_internal.h"
#include <float.h>
#include <math.h>

/* High bit of element j (0..31) of a Q5 block: bit j of the little-endian qh word. */
static inline int q5_high(const uint8_t qh[4], int j) { return (qh[j >> 3] >> (j & 7)) & 1; }

/* ---------------------------------------------------------------- decode */

void th_ref_dq_q4_0(const void *src, float *dst, int64_t n) {
    const th_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++, dst += TH_QK) {
        float d = th_f16_to_f32(b[i].d);
        for (int j = 0; j < TH_QK / 2; j++) {
            dst[j] = ((b[i].qs[j] & 0x0f) - 8) * d;
            dst[j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void th_ref_dq_q4_1(const void *src, float *dst, int64_t n) {
    const th_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++, dst += TH_QK) {
        float d = th_f16_to_f32(b[i].d), m = th_f16_to_f32(b[i].m);
        for (int j = 0; j < TH_QK / 2; j++) {
            dst[j] = (b[i].qs[j] & 0x0f) * d + m;
            dst[j + 16] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

void th_ref_dq_q5_0(const void *src, float *dst, int64_t n) {
    const th_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++, dst += TH_QK) {
        float d = th_f16_to_f32(b[i].d);
        for (int j = 0; j < TH_QK / 2; j++) {
            int lo = (b[i].qs[j] & 0x0f) | (q5_high(b[i].qh, j) << 4);
            int hi = (b[i].qs[j] >> 4) | (q5_high(b[i].qh, j + 16) << 4);
            dst[j] = (lo - 16) * d;
            dst[j + 16] = (hi - 16) * d;
        }
    }
}

void th_ref_dq_q5_1(const void *src, float *dst, int64_t n) {
    const th_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++, dst += TH_QK) {
        float d = th_f16_to_f32(b[i].d), m = th_f16_to_f32(b[i].m);
        for (int j = 0; j < TH_QK / 2; j++) {
            int lo = (b[i].qs[j] & 0x0f) | (q5_high(b[i].qh, j) << 4);
            int hi = (b[i].qs[j] >> 4) | (q5_high(b[i].qh, j + 16) << 4);
            dst[j] = lo * d + m;
            dst[j + 16] = hi * d + m;
        }
    }
}

void th_ref_dq_q8_0(const void *src, float *dst, int64_t n) {
    const th_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++, dst += TH_QK) {
        float d = th_f16_to_f32(b[i].d);
        for (int j = 0; j < TH_QK; j++) dst[j] = b[i].qs[j] * d;
    }
}

void th_ref_dq_q8_1(const void *src, float *dst, int64_t n) {
    const th_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / TH_QK; i++, dst += TH_QK) {
        float d = th_f16_to_f32(b[i].d);
        for (int j = 0; j < TH_QK; j++) dst[j] = b[i].qs[j] * d;
    }
}

/* ---------------------------------------------------------------- encode */

/* The element of largest magnitude, with its sign (the first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    *mn = FLT_MAX;
    *mx = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

void th_ref_q_q4_0(const float *src, void *dst, int64_t n) {
    th_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, src += TH_QK) {
        float d = signed_absmax(src, TH_QK) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = th_f32_to_f16(d);
        for (int j = 0; j < TH_QK / 2; j++) {
            int lo = TH_MIN(15, (int8_t)(src[j] * id + 8.5f));
            int hi = TH_MIN(15, (int8_t)(src[j + 16] * id + 8.5f));
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void th_ref_q_q4_1(const float *src, void *dst, int64_t n) {
    th_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, src += TH_QK) {
        float mn, mx;
        min_max(src, TH_QK, &mn, &mx);
        float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = th_f32_to_f16(d);
        b[i].m = th_f32_to_f16(mn);
        for (int j = 0; j < TH_QK / 2; j++) {
            int lo = TH_MIN(15, (int8_t)((src[j] - mn) * id + 0.5f));
            int hi = TH_MIN(15, (int8_t)((src[j + 16] - mn) * id + 0.5f));
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* Pack 32 five-bit codes into qs (low nibbles) and qh (bit j = bit 4 of code j). */
static void pack_q5(const int code[TH_QK], uint8_t qs[16], uint8_t qh[4]) {
    memset(qh, 0, 4);
    for (int j = 0; j < TH_QK / 2; j++) qs[j] = (uint8_t)((code[j] & 0x0f) | ((code[j + 16] & 0x0f) << 4));
    for (int j = 0; j < TH_QK; j++) qh[j >> 3] |= (uint8_t)(((code[j] >> 4) & 1) << (j & 7));
}

void th_ref_q_q5_0(const float *src, void *dst, int64_t n) {
    th_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, src += TH_QK) {
        float d = signed_absmax(src, TH_QK) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int code[TH_QK];
        for (int j = 0; j < TH_QK; j++) code[j] = TH_MIN(31, (int8_t)(src[j] * id + 16.5f));
        b[i].d = th_f32_to_f16(d);
        pack_q5(code, b[i].qs, b[i].qh);
    }
}

void th_ref_q_q5_1(const float *src, void *dst, int64_t n) {
    th_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, src += TH_QK) {
        float mn, mx;
        min_max(src, TH_QK, &mn, &mx);
        float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int code[TH_QK];
        for (int j = 0; j < TH_QK; j++) code[j] = TH_MIN(31, (uint8_t)((src[j] - mn) * id + 0.5f));
        b[i].d = th_f32_to_f16(d);
        b[i].m = th_f32_to_f16(mn);
        pack_q5(code, b[i].qs, b[i].qh);
    }
}

/* Q8 of one block as llama.cpp's x86 activation path: d = amax/127 (stored fp16),
 * q = round-half-even(x * 127/amax). Returns d in f32 and the sum of the codes. */
static float quantize_q8_block(const float *x, uint16_t *d_out, int8_t *qs, int *code_sum) {
    float amax = 0.0f;
    for (int j = 0; j < TH_QK; j++) amax = TH_MAX(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    *d_out = th_f32_to_f16(d);
    int sum = 0;
    for (int j = 0; j < TH_QK; j++) {
        qs[j] = (int8_t)nearbyintf(x[j] * id);
        sum += qs[j];
    }
    *code_sum = sum;
    return d;
}

void th_ref_q_q8_0(const float *src, void *dst, int64_t n) {
    th_block_q8_0 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / TH_QK; i++, src += TH_QK) quantize_q8_block(src, &b[i].d, b[i].qs, &sum);
}

void th_ref_q_q8_1(const float *src, void *dst, int64_t n) {
    th_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, src += TH_QK) {
        int sum;
        float d = quantize_q8_block(src, &b[i].d, b[i].qs, &sum);
        b[i].s = th_f32_to_f16(d * (float)sum);   /* s = d * sum(q), d in f32 as llama.cpp */
    }
}

/* ---------------------------------------------------------------- dot products */

void th_ref_dot_q4_0(int64_t n, float *s, const void *w, const void *a) {
    const th_block_q4_0 *x = w;
    const th_block_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        int isum = 0;
        for (int j = 0; j < TH_QK / 2; j++)
            isum += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        sum += isum * th_f16_to_f32(x[i].d) * th_f16_to_f32(y[i].d);
    }
    *s = sum;
}

void th_ref_dot_q4_1(int64_t n, float *s, const void *w, const void *a) {
    const th_block_q4_1 *x = w;
    const th_block_q8_1 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        int isum = 0;
        for (int j = 0; j < TH_QK / 2; j++)
            isum += (x[i].qs[j] & 0x0f) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        sum += (th_f16_to_f32(x[i].d) * th_f16_to_f32(y[i].d)) * isum
               + th_f16_to_f32(x[i].m) * th_f16_to_f32(y[i].s);
    }
    *s = sum;
}

void th_ref_dot_q5_0(int64_t n, float *s, const void *w, const void *a) {
    const th_block_q5_0 *x = w;
    const th_block_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        int isum = 0;
        for (int j = 0; j < TH_QK / 2; j++) {
            int lo = ((x[i].qs[j] & 0x0f) | (q5_high(x[i].qh, j) << 4)) - 16;
            int hi = ((x[i].qs[j] >> 4) | (q5_high(x[i].qh, j + 16) << 4)) - 16;
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        sum += (th_f16_to_f32(x[i].d) * th_f16_to_f32(y[i].d)) * isum;
    }
    *s = sum;
}

void th_ref_dot_q5_1(int64_t n, float *s, const void *w, const void *a) {
    const th_block_q5_1 *x = w;
    const th_block_q8_1 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        int isum = 0;
        for (int j = 0; j < TH_QK / 2; j++) {
            int lo = (x[i].qs[j] & 0x0f) | (q5_high(x[i].qh, j) << 4);
            int hi = (x[i].qs[j] >> 4) | (q5_high(x[i].qh, j + 16) << 4);
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        sum += (th_f16_to_f32(x[i].d) * th_f16_to_f32(y[i].d)) * isum
               + th_f16_to_f32(x[i].m) * th_f16_to_f32(y[i].s);
    }
    *s = sum;
}

void th_ref_dot_q8_0(int64_t n, float *s, const void *w, const void *a) {
    const th_block_q8_0 *x = w;
    const th_block_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        int isum = 0;
        for (int j = 0; j < TH_QK; j++) isum += x[i].qs[j] * y[i].qs[j];
        sum += isum * (th_f16_to_f32(x[i].d) * th_f16_to_f32(y[i].d));
    }
    *s = sum;
}
