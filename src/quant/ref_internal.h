/* ref_internal.h — private helpers shared by the reference kernels in
 * src/quant/ref_*.c: per-format entry points (named by the type table, types.c),
 * lookup tables and the small bit-unpacking helpers several formats share.
 * Not a seam: src/quant/ref_*.c and the CUDA repacker (src/cuda/split.c) include it. */
#ifndef TH_QUANT_REF_INTERNAL_H
#define TH_QUANT_REF_INTERNAL_H

#include "quant/quant.h"

/* Non-linear 4-bit code book of IQ4_NL / IQ4_XS (GGML's kvalues_iq4nl). */
extern const int8_t th_iq4nl_values[16];
/* FP4 e2m1 code book, doubled so it is integral: value(code) = th_mxfp4_values[code] / 2. */
extern const int8_t th_mxfp4_values[16];

/* Round to nearest, ties to even, the way GGML's nearest_int does it (valid for |x| < 2^22). */
static inline int th_nearest_int(float x) {
    float v = x + 12582912.0f; /* 1.5 * 2^23: the integer lands in the low mantissa bits */
    int32_t bits;
    memcpy(&bits, &v, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

/* E8M0 scale byte of MXFP4 as 2^(e-128): half of the OCP scale 2^(e-127), because
 * th_mxfp4_values holds doubled e2m1 values. Exact for every e (e < 2 gives subnormals). */
static inline float th_e8m0_half_to_f32(uint8_t e) {
    uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t)(e - 1) << 23);
    return th_bits_f32(bits);
}

/* The 6-bit code (0..63) of element e (0..255) of a Q6_K block. */
static inline int th_q6k_code(const th_block_q6_K *b, int e) {
    int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    uint8_t ql = b->ql[64 * half + 32 * (quarter & 1) + l];
    int lo = quarter < 2 ? (ql & 0x0f) : (ql >> 4);
    int hi = (b->qh[32 * half + l] >> (2 * quarter)) & 3;
    return lo | (hi << 4);
}

/* The 6-bit scale j (0..7) and min of a Q4_K/Q5_K 12-byte scales array. */
static inline void th_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The 16 signed scales (-32..31) of a Q3_K 12-byte scales array. */
static inline void th_q3k_scales(const uint8_t *q, int8_t out[16]) {
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? (q[i] & 0x0f) : (q[i - 8] >> 4);
        int hi = (q[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        out[i] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* ---- per-format kernels (the th_dequant_fn / th_quantize_fn / th_vec_dot_fn of
 * quant.h); n is a multiple of the block size ---- */
void th_ref_dq_f32(const void *src, float *dst, int64_t n);
void th_ref_dq_f16(const void *src, float *dst, int64_t n);
void th_ref_dq_bf16(const void *src, float *dst, int64_t n);
void th_ref_q_f32(const float *src, void *dst, int64_t n);
void th_ref_q_f16(const float *src, void *dst, int64_t n);
void th_ref_q_bf16(const float *src, void *dst, int64_t n);
void th_ref_dot_f32(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_f16(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_bf16(int64_t n, float *s, const void *w, const void *a);

void th_ref_dq_q4_0(const void *src, float *dst, int64_t n);
void th_ref_dq_q4_1(const void *src, float *dst, int64_t n);
void th_ref_dq_q5_0(const void *src, float *dst, int64_t n);
void th_ref_dq_q5_1(const void *src, float *dst, int64_t n);
void th_ref_dq_q8_0(const void *src, float *dst, int64_t n);
void th_ref_dq_q8_1(const void *src, float *dst, int64_t n);
void th_ref_q_q4_0(const float *src, void *dst, int64_t n);
void th_ref_q_q4_1(const float *src, void *dst, int64_t n);
void th_ref_q_q5_0(const float *src, void *dst, int64_t n);
void th_ref_q_q5_1(const float *src, void *dst, int64_t n);
void th_ref_q_q8_0(const float *src, void *dst, int64_t n);
void th_ref_q_q8_1(const float *src, void *dst, int64_t n);
void th_ref_dot_q4_0(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q4_1(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q5_0(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q5_1(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q8_0(int64_t n, float *s, const void *w, const void *a);

void th_ref_dq_q2_K(const void *src, float *dst, int64_t n);
void th_ref_dq_q3_K(const void *src, float *dst, int64_t n);
void th_ref_dq_q4_K(const void *src, float *dst, int64_t n);
void th_ref_dq_q5_K(const void *src, float *dst, int64_t n);
void th_ref_dq_q6_K(const void *src, float *dst, int64_t n);
void th_ref_dq_q8_K(const void *src, float *dst, int64_t n);
void th_ref_q_q8_K(const float *src, void *dst, int64_t n);
void th_ref_dot_q2_K(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q3_K(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q4_K(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q5_K(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_q6_K(int64_t n, float *s, const void *w, const void *a);

void th_ref_dq_iq4_nl(const void *src, float *dst, int64_t n);
void th_ref_dq_iq4_xs(const void *src, float *dst, int64_t n);
void th_ref_dq_mxfp4(const void *src, float *dst, int64_t n);
void th_ref_q_mxfp4(const float *src, void *dst, int64_t n);
void th_ref_dot_iq4_nl(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_iq4_xs(int64_t n, float *s, const void *w, const void *a);
void th_ref_dot_mxfp4(int64_t n, float *s, const void *w, const void *a);

/* ternary and 1-bit (ref_ternary.c); *_bn: n is one row, its scale in front */
#define TH_TERN_DECL(X)                                           \
    void th_ref_dq_##X(const void *src, float *dst, int64_t n);    \
    void th_ref_q_##X(const float *src, void *dst, int64_t n);     \
    void th_ref_dot_##X(int64_t n, float *s, const void *w, const void *a);
TH_TERN_DECL(tq1_0) TH_TERN_DECL(tq2_0) TH_TERN_DECL(q1_0_g128) TH_TERN_DECL(iq1_bn) TH_TERN_DECL(iq2_bn)
#undef TH_TERN_DECL
/* The trit (0, 1, 2) of byte q at position j (0 the first) in the base-3 packing of
 * TQ1_0 (llama.cpp: (q * 3^j mod 256) * 3 >> 8) and of IQ1_BN (ik_llama.cpp:
 * v = q * 3^(4-j) mod 256, (v + v/2) >> 7). */
static inline int th_tq1_trit(uint8_t q, int j) {
    static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
    return ((uint8_t)(q * pow3[j]) * 3) >> 8;
}
static inline int th_iq1bn_trit(uint8_t q, int j) {
    static const uint8_t mult[5] = { 81, 27, 9, 3, 1 };
    uint8_t v = (uint8_t)(q * mult[j]);
    return (v + (v >> 1)) >> 7;
}

/* qN (ref_qn.c; the generic forms are quant/qn.h's) */
#define TH_QN_DECL(N)                                             \
    void th_ref_dq_q##N(const void *src, float *dst, int64_t n);   \
    void th_ref_q_q##N(const float *src, void *dst, int64_t n);    \
    void th_ref_dot_q##N(int64_t n, float *s, const void *w, const void *a);
TH_QN_DECL(2) TH_QN_DECL(3) TH_QN_DECL(4) TH_QN_DECL(5) TH_QN_DECL(6) TH_QN_DECL(7) TH_QN_DECL(8)
#undef TH_QN_DECL

#endif
