/* ref_kquants.c — reference kernels of the 256-element K-quant super-blocks
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the activation format Q8_K: decode,
 * Q8_K encode (as quantize_row_q8_K_ref) and dot products with Q8_K
 * activations in the order of GGML's scalar code (integer sums per sub-block,
 * eight float lane accumulators for Q3_K..Q6_K). */
#include "quant/ref_internal.h"
#include <math.h>

/* ---------------------------------------------------------------- decode */

void th_ref_dq_q2_K(const void *src, float *dst, int64_t n) {
    const th_block_q2_K *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        float d = th_f16_to_f32(b[i].d), dmin = th_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {          /* 128 elements per 32 bytes of qs */
            for (int shift = 0; shift < 8; shift += 2) {         /* four 2-bit planes */
                for (int part = 0; part < 2; part++, is++) {     /* two 16-element sub-blocks */
                    uint8_t sc = b[i].scales[is];
                    float dl = d * (sc & 0x0f), ml = dmin * (sc >> 4);
                    for (int l = 0; l < 16; l++) *dst++ = dl * ((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void th_ref_dq_q3_K(const void *src, float *dst, int64_t n) {
    const th_block_q3_K *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        float d = th_f16_to_f32(b[i].d);
        int8_t sc[16];
        th_q3k_scales(b[i].scales, sc);
        const uint8_t *q = b[i].qs;
        int is = 0, hbit = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, hbit++) {
                for (int part = 0; part < 2; part++, is++) {
                    float dl = d * sc[is];
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        int lo = (q[l] >> shift) & 3;
                        int sub = (b[i].hmask[l] >> hbit) & 1 ? 0 : 4;
                        *dst++ = dl * (lo - sub);
                    }
                }
            }
        }
    }
}

void th_ref_dq_q4_K(const void *src, float *dst, int64_t n) {
    const th_block_q4_K *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        float d = th_f16_to_f32(b[i].d), dmin = th_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < 4; j++, q += 32) {                   /* 64 elements per 32 bytes */
            uint8_t s1, m1, s2, m2;
            th_k4_scale_min(2 * j, b[i].scales, &s1, &m1);
            th_k4_scale_min(2 * j + 1, b[i].scales, &s2, &m2);
            float d1 = d * s1, mm1 = dmin * m1, d2 = d * s2, mm2 = dmin * m2;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (q[l] & 0x0f) - mm1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (q[l] >> 4) - mm2;
        }
    }
}

void th_ref_dq_q5_K(const void *src, float *dst, int64_t n) {
    const th_block_q5_K *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        float d = th_f16_to_f32(b[i].d), dmin = th_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs, *qh = b[i].qh;
        for (int j = 0; j < 4; j++, q += 32) {
            uint8_t s1, m1, s2, m2;
            th_k4_scale_min(2 * j, b[i].scales, &s1, &m1);
            th_k4_scale_min(2 * j + 1, b[i].scales, &s2, &m2);
            float d1 = d * s1, mm1 = dmin * m1, d2 = d * s2, mm2 = dmin * m2;
            for (int l = 0; l < 32; l++) *dst++ = d1 * ((q[l] & 0x0f) + (((qh[l] >> (2 * j)) & 1) << 4)) - mm1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * ((q[l] >> 4) + (((qh[l] >> (2 * j + 1)) & 1) << 4)) - mm2;
        }
    }
}

void th_ref_dq_q6_K(const void *src, float *dst, int64_t n) {
    const th_block_q6_K *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        float d = th_f16_to_f32(b[i].d);
        for (int e = 0; e < TH_QK_K; e++) *dst++ = d * b[i].scales[e / 16] * (th_q6k_code(&b[i], e) - 32);
    }
}

void th_ref_dq_q8_K(const void *src, float *dst, int64_t n) {
    const th_block_q8_K *b = src;
    for (int64_t i = 0; i < n / TH_QK_K; i++)
        for (int j = 0; j < TH_QK_K; j++) *dst++ = b[i].d * b[i].qs[j];
}

/* ---------------------------------------------------------------- Q8_K encode */

void th_ref_q_q8_K(const float *src, void *dst, int64_t n) {
    th_block_q8_K *b = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, src += TH_QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < TH_QK_K; j++)
            if (fabsf(src[j]) > amax) { amax = fabsf(src[j]); max = src[j]; }
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < TH_QK_K; j++) b[i].qs[j] = (int8_t)TH_MIN(127, th_nearest_int(iscale * src[j]));
        for (int g = 0; g < TH_QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += b[i].qs[16 * g + l];
            b[i].bsums[g] = (int16_t)sum;
        }
        b[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------- dot products */

/* Integer part of a K-quant dot: lanes[l] += scale[k/16] * q8[k] * a[k] over the
 * elements k with k % 8 == l (GGML's scalar code keeps these eight lanes). */
static void dot_lanes(const int8_t a[TH_QK_K], const int8_t *q8, const int scale[16], int32_t lanes[8]) {
    memset(lanes, 0, 8 * sizeof lanes[0]);
    for (int k = 0; k < TH_QK_K; k++) lanes[k & 7] += scale[k / 16] * (q8[k] * a[k]);
}

static void add_lanes(float sums[8], float d, const int32_t lanes[8]) {
    for (int l = 0; l < 8; l++) sums[l] += d * lanes[l];
}

static float sum_lanes(float start, const float sums[8]) {
    for (int l = 0; l < 8; l++) start += sums[l];
    return start;
}

void th_ref_dot_q2_K(int64_t n, float *s, const void *w, const void *act) {
    const th_block_q2_K *x = w;
    const th_block_q8_K *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int mins = 0;
        for (int j = 0; j < 16; j++) mins += y[i].bsums[j] * (x[i].scales[j] >> 4);
        int isum = 0;
        for (int k = 0; k < TH_QK_K; k++) {
            int half = k / 128, plane = (k % 128) / 32, l = k % 32;
            int q = (x[i].qs[32 * half + l] >> (2 * plane)) & 3;
            isum += (x[i].scales[k / 16] & 0x0f) * (q * y[i].qs[k]);
        }
        float dall = y[i].d * th_f16_to_f32(x[i].d), dmin = y[i].d * th_f16_to_f32(x[i].dmin);
        sum += dall * isum - dmin * mins;
    }
    *s = sum;
}

void th_ref_dot_q3_K(int64_t n, float *s, const void *w, const void *act) {
    const th_block_q3_K *x = w;
    const th_block_q8_K *y = act;
    float sums[8] = {0};
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int8_t a[TH_QK_K], sc8[16];
        int scale[16];
        for (int k = 0; k < TH_QK_K; k++) {
            int half = k / 128, plane = (k % 128) / 32, l = k % 32;
            int lo = (x[i].qs[32 * half + l] >> (2 * plane)) & 3;
            a[k] = (int8_t)(lo - ((x[i].hmask[l] >> (4 * half + plane)) & 1 ? 0 : 4));
        }
        th_q3k_scales(x[i].scales, sc8);
        for (int j = 0; j < 16; j++) scale[j] = sc8[j];
        int32_t lanes[8];
        dot_lanes(a, y[i].qs, scale, lanes);
        add_lanes(sums, th_f16_to_f32(x[i].d) * y[i].d, lanes);
    }
    *s = sum_lanes(0.0f, sums);
}

/* Shared by Q4_K and Q5_K: a[] holds the unsigned codes of the block. */
static float k4_block(const uint16_t d, const uint16_t dmin, const uint8_t scales[12], const int8_t a[TH_QK_K],
                      const th_block_q8_K *y, float sums[8]) {
    int scale[16], mins = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        th_k4_scale_min(j, scales, &sc, &m);
        scale[2 * j] = scale[2 * j + 1] = sc;
        mins += (y->bsums[2 * j] + y->bsums[2 * j + 1]) * m;
    }
    int32_t lanes[8];
    dot_lanes(a, y->qs, scale, lanes);
    add_lanes(sums, th_f16_to_f32(d) * y->d, lanes);
    return th_f16_to_f32(dmin) * y->d * mins;   /* the caller subtracts this */
}

void th_ref_dot_q4_K(int64_t n, float *s, const void *w, const void *act) {
    const th_block_q4_K *x = w;
    const th_block_q8_K *y = act;
    float sums[8] = {0}, sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int8_t a[TH_QK_K];
        for (int k = 0; k < TH_QK_K; k++) {
            uint8_t q = x[i].qs[32 * (k / 64) + k % 32];
            a[k] = (int8_t)((k % 64) < 32 ? (q & 0x0f) : (q >> 4));
        }
        sum -= k4_block(x[i].d, x[i].dmin, x[i].scales, a, &y[i], sums);
    }
    *s = sum_lanes(sum, sums);
}

void th_ref_dot_q5_K(int64_t n, float *s, const void *w, const void *act) {
    const th_block_q5_K *x = w;
    const th_block_q8_K *y = act;
    float sums[8] = {0}, sum = 0.0f;
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int8_t a[TH_QK_K];
        for (int k = 0; k < TH_QK_K; k++) {
            uint8_t q = x[i].qs[32 * (k / 64) + k % 32];
            int lo = (k % 64) < 32 ? (q & 0x0f) : (q >> 4);
            int hi = (x[i].qh[k % 32] >> (k / 32)) & 1;
            a[k] = (int8_t)(lo | (hi << 4));
        }
        sum -= k4_block(x[i].d, x[i].dmin, x[i].scales, a, &y[i], sums);
    }
    *s = sum_lanes(sum, sums);
}

void th_ref_dot_q6_K(int64_t n, float *s, const void *w, const void *act) {
    const th_block_q6_K *x = w;
    const th_block_q8_K *y = act;
    float sums[8] = {0};
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        int8_t a[TH_QK_K];
        int scale[16];
        for (int k = 0; k < TH_QK_K; k++) a[k] = (int8_t)(th_q6k_code(&x[i], k) - 32);
        for (int j = 0; j < 16; j++) scale[j] = x[i].scales[j];
        int32_t lanes[8];
        dot_lanes(a, y[i].qs, scale, lanes);
        add_lanes(sums, th_f16_to_f32(x[i].d) * y[i].d, lanes);
    }
    *s = sum_lanes(0.0f, sums);
}
