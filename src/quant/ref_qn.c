/* ref_qn.c — reference kernels of qN (n = 2..8; layout in qn.h, docs/qn.md): decode,
 * the encoder (error feedback inside the group, scale chosen by search) and the dot
 * product with Q8_0 activations. Plain C, the oracle of every SIMD and CUDA kernel. */
#include "quant/qn.h"
#include "quant/ref_internal.h"
#include <math.h>

/* Scale candidates of the search: d = amax * s / L for s = S0, S0 + DS, ..., where
 * L = 2^(n-1) - 1/2 is the top level in units of d (s = 1: amax lands on the top level,
 * s < 1: the largest weights clip, which pays at small n). */
#define QN_SEARCH_S0 0.40f
#define QN_SEARCH_DS 0.02f
#define QN_SEARCH_STEPS 36   /* s = 0.40 .. 1.10 */
#define QN_F16_MAX 65504.0f

static float f16_round(float d) { return th_f16_to_f32(th_f32_to_f16(d)); }

static void put_planes(int n, uint16_t d16, const uint8_t codes[TH_QN_BLOCK], uint8_t *out) {
    out[0] = (uint8_t)(d16 & 0xff);
    out[1] = (uint8_t)(d16 >> 8);
    for (int p = 0; p < n; p++) {
        uint64_t w = 0;
        for (int j = 0; j < TH_QN_BLOCK; j++) w |= (uint64_t)((codes[j] >> p) & 1u) << j;
        for (int i = 0; i < 8; i++) out[2 + 8 * p + i] = (uint8_t)(w >> (8 * i));
    }
}

/* The code (q + 2^(n-1)) of the level d * (q + 1/2) nearest to t: q = floor(t / d)
 * (as t * (1/d)), clamped to the 2^n levels. NaN goes to the lowest code (no undefined
 * float-to-int conversion). */
static int level_code(int n, float t, float id) {
    const float qmin = -(float)(1 << (n - 1)), qmax = (float)((1 << (n - 1)) - 1);
    float f = t * id;
    if (!(f >= qmin)) f = qmin;
    if (f > qmax) f = qmax;
    int q = (int)f;                 /* floor of the clamped value (without a libm call) */
    q -= (float)q > f;
    return q + (1 << (n - 1));
}

/* The group's value of code c at scale d (as th_qn_dequantize computes it). */
static inline float level_value(int n, float d, int c) { return d * (0.5f * (float)(2 * c - ((1 << n) - 1))); }

/* Codes of x at scale d with error feedback: weight j's target is x[j] plus the error
 * (target - value) left by weight j - 1; the level is the nearest one to the target
 * (levels are d apart, at odd multiples of d/2). Returns sum (x[j] - value_j)^2. */
static float feedback_codes(int n, const float *x, float d, uint8_t codes[TH_QN_BLOCK]) {
    float sse = 0.0f;
    if (!(d > 0.0f)) {
        for (int j = 0; j < TH_QN_BLOCK; j++) { codes[j] = (uint8_t)(1 << (n - 1)); sse += x[j] * x[j]; }
        return sse;
    }
    const float id = 1.0f / d;
    float e = 0.0f;
    for (int j = 0; j < TH_QN_BLOCK; j++) {
        const float t = x[j] + e;
        const int c = level_code(n, t, id);
        const float v = level_value(n, d, c);
        codes[j] = (uint8_t)c;
        e = t - v;
        sse += (x[j] - v) * (x[j] - v);
    }
    return sse;
}

static float group_amax(const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < TH_QN_BLOCK; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    return amax;
}

/* sse[k] = feedback_codes(n, x, d[k], .)'s result for every candidate k < QN_SEARCH_STEPS
 * (d[k] > 0), the same float operations in the same order, but the candidates side by
 * side so that the loop over them vectorizes (the feedback chain of one candidate is
 * sequential). */
static void search_sse(int n, const float *x, const float *d, float *sse) {
    const float qmin = -(float)(1 << (n - 1)), qmax = (float)((1 << (n - 1)) - 1);
    float e[QN_SEARCH_STEPS], id[QN_SEARCH_STEPS];
    for (int k = 0; k < QN_SEARCH_STEPS; k++) { e[k] = 0.0f; sse[k] = 0.0f; id[k] = 1.0f / d[k]; }
    for (int j = 0; j < TH_QN_BLOCK; j++)
        for (int k = 0; k < QN_SEARCH_STEPS; k++) {
            const float t = x[j] + e[k];
            float f = t * id[k];
            f = f >= qmin ? f : qmin;
            f = f > qmax ? qmax : f;
            int q = (int)f;
            q -= (float)q > f;
            const float v = d[k] * (0.5f * (float)(2 * q + 1));
            e[k] = t - v;
            sse[k] += (x[j] - v) * (x[j] - v);
        }
}

void th_qn_encode_group(int n, const float *x, uint8_t *out) {
    const float top = (float)(1 << (n - 1)) - 0.5f;
    const float amax = group_amax(x);
    uint8_t best_codes[TH_QN_BLOCK], codes[TH_QN_BLOCK];
    float best_d = 0.0f, best = feedback_codes(n, x, 0.0f, best_codes);
    /* candidates that round to a zero f16 scale are the d = 0 case above; they are
     * searched with d = 1 (to keep the loop uniform) and their result ignored */
    float d[QN_SEARCH_STEPS], sse[QN_SEARCH_STEPS];
    bool valid[QN_SEARCH_STEPS], any = false;
    for (int k = 0; k < QN_SEARCH_STEPS; k++) {
        d[k] = amax > 0.0f ? f16_round(TH_MIN(amax * (QN_SEARCH_S0 + QN_SEARCH_DS * (float)k) / top, QN_F16_MAX)) : 0.0f;
        valid[k] = d[k] > 0.0f;
        any |= valid[k];
        if (!valid[k]) d[k] = 1.0f;
    }
    if (any) {
        search_sse(n, x, d, sse);
        for (int k = 0; k < QN_SEARCH_STEPS; k++)
            if (valid[k] && sse[k] < best) { best = sse[k]; best_d = d[k]; }
        if (best_d > 0.0f) best = feedback_codes(n, x, best_d, best_codes);
    }
    /* one more candidate: the least-squares scale of the best codes, re-rounded */
    double num = 0.0, den = 0.0;
    for (int j = 0; j < TH_QN_BLOCK; j++) {
        const double l = 0.5 * (2 * best_codes[j] - ((1 << n) - 1));
        num += (double)x[j] * l;
        den += l * l;
    }
    if (den > 0.0 && num > 0.0) {
        const float dl = f16_round((float)TH_MIN(num / den, (double)QN_F16_MAX));
        const float s = feedback_codes(n, x, dl, codes);
        if (s < best) { best = s; best_d = dl; memcpy(best_codes, codes, sizeof codes); }
    }
    put_planes(n, th_f32_to_f16(best_d), best_codes, out);
}

void th_qn_encode_group_plain(int n, const float *x, uint8_t *out) {
    const float top = (float)(1 << (n - 1)) - 0.5f;
    const float d = f16_round(TH_MIN(group_amax(x) / top, QN_F16_MAX));
    uint8_t codes[TH_QN_BLOCK];
    for (int j = 0; j < TH_QN_BLOCK; j++)
        codes[j] = d > 0.0f ? (uint8_t)level_code(n, x[j], 1.0f / d) : (uint8_t)(1 << (n - 1));
    put_planes(n, th_f32_to_f16(d), codes, out);
}

void th_qn_quantize(int n, const float *src, void *dst, int64_t count) {
    uint8_t *out = dst;
    for (int64_t g = 0; g < count / TH_QN_BLOCK; g++) th_qn_encode_group(n, src + g * TH_QN_BLOCK, out + g * th_qn_group_bytes(n));
}

void th_qn_quantize_plain(int n, const float *src, void *dst, int64_t count) {
    uint8_t *out = dst;
    for (int64_t g = 0; g < count / TH_QN_BLOCK; g++)
        th_qn_encode_group_plain(n, src + g * TH_QN_BLOCK, out + g * th_qn_group_bytes(n));
}

void th_qn_dequantize(int n, const void *src, float *dst, int64_t count) {
    const uint8_t *g = src;
    uint8_t codes[TH_QN_BLOCK];
    for (int64_t i = 0; i < count / TH_QN_BLOCK; i++, g += th_qn_group_bytes(n), dst += TH_QN_BLOCK) {
        const float d = th_f16_to_f32((uint16_t)(g[0] | (g[1] << 8)));
        th_qn_codes(g, n, codes);
        for (int j = 0; j < TH_QN_BLOCK; j++) dst[j] = level_value(n, d, codes[j]);
    }
}

/* Per 32-element activation block b (two per group): the exact integer
 * isum = sum (2c - (2^n - 1)) * a, then sumf += d_w * d_a * isum; the result is sumf / 2. */
float th_qn_dot(int n, int64_t count, const void *w, const void *act) {
    const uint8_t *g = w;
    const th_block_q8_0 *a = act;
    const int off = (1 << n) - 1;
    uint8_t codes[TH_QN_BLOCK];
    float sumf = 0.0f;
    for (int64_t i = 0; i < count / TH_QN_BLOCK; i++, g += th_qn_group_bytes(n)) {
        const float d = th_f16_to_f32((uint16_t)(g[0] | (g[1] << 8)));
        th_qn_codes(g, n, codes);
        for (int h = 0; h < 2; h++) {
            const th_block_q8_0 *b = &a[2 * i + h];
            int32_t isum = 0;
            for (int j = 0; j < TH_QK; j++) isum += (2 * codes[TH_QK * h + j] - off) * b->qs[j];
            sumf += d * th_f16_to_f32(b->d) * (float)isum;
        }
    }
    return 0.5f * sumf;
}

/* The per-n entry points of the type table (types.c). */
#define QN_REF(N)                                                                                          \
    void th_ref_dq_q##N(const void *src, float *dst, int64_t n) { th_qn_dequantize(N, src, dst, n); }       \
    void th_ref_q_q##N(const float *src, void *dst, int64_t n) { th_qn_quantize(N, src, dst, n); }          \
    void th_ref_dot_q##N(int64_t n, float *s, const void *w, const void *a) { *s = th_qn_dot(N, n, w, a); }
QN_REF(2)
QN_REF(3)
QN_REF(4)
QN_REF(5)
QN_REF(6)
QN_REF(7)
QN_REF(8)
