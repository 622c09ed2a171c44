/* ref_dispatch.c — the public reference entry points (th_ref_dequantize,
 * th_ref_quantize, th_ref_can_quantize, th_ref_vec_dot): a switch on the type
 * that calls the per-format kernels of ref_float.c, ref_legacy.c,
 * ref_kquants.c, ref_iq.c and (weight encoders) ref_kquant_encode.c. A type without a kernel does not crash: decode
 * writes NaNs, encode writes nothing, the dot product returns NaN (callers
 * check th_type_info_get(type)->supported first). */
#include "quant/ref_internal.h"
#include "quant/ref_encode.h"
#include <assert.h>
#include <math.h>

typedef void (*dq_fn)(const void *, float *, int64_t);
typedef void (*q_fn)(const float *, void *, int64_t);
typedef float (*dot_fn)(int64_t, const void *, const void *);

static dq_fn dequantizer(uint32_t type) {
    switch (type) {
    case TH_F32: return th_ref_dq_f32;
    case TH_F16: return th_ref_dq_f16;
    case TH_BF16: return th_ref_dq_bf16;
    case TH_Q4_0: return th_ref_dq_q4_0;
    case TH_Q4_1: return th_ref_dq_q4_1;
    case TH_Q5_0: return th_ref_dq_q5_0;
    case TH_Q5_1: return th_ref_dq_q5_1;
    case TH_Q8_0: return th_ref_dq_q8_0;
    case TH_Q8_1: return th_ref_dq_q8_1;
    case TH_Q2_K: return th_ref_dq_q2_K;
    case TH_Q3_K: return th_ref_dq_q3_K;
    case TH_Q4_K: return th_ref_dq_q4_K;
    case TH_Q5_K: return th_ref_dq_q5_K;
    case TH_Q6_K: return th_ref_dq_q6_K;
    case TH_Q8_K: return th_ref_dq_q8_K;
    case TH_IQ4_NL: return th_ref_dq_iq4_nl;
    case TH_IQ4_XS: return th_ref_dq_iq4_xs;
    case TH_MXFP4: return th_ref_dq_mxfp4;
    default: return NULL;
    }
}

static q_fn quantizer(uint32_t type) {
    switch (type) {
    case TH_F32: return th_ref_q_f32;
    case TH_F16: return th_ref_q_f16;
    case TH_BF16: return th_ref_q_bf16;
    case TH_Q4_0: return th_ref_q_q4_0;
    case TH_Q4_1: return th_ref_q_q4_1;
    case TH_Q5_0: return th_ref_q_q5_0;
    case TH_Q5_1: return th_ref_q_q5_1;
    case TH_Q8_0: return th_ref_q_q8_0;
    case TH_Q8_1: return th_ref_q_q8_1;
    case TH_Q8_K: return th_ref_q_q8_K;
    case TH_Q2_K: return th_ref_q_q2_K;
    case TH_Q3_K: return th_ref_q_q3_K;
    case TH_Q4_K: return th_ref_q_q4_K;
    case TH_Q5_K: return th_ref_q_q5_K;
    case TH_Q6_K: return th_ref_q_q6_K;
    case TH_IQ4_NL: return th_ref_q_iq4_nl_search;   /* llama.cpp's search (ref_kquant_encode.c) */
    case TH_IQ4_XS: return th_ref_q_iq4_xs;
    case TH_MXFP4: return th_ref_q_mxfp4;
    default: return NULL;
    }
}

static dot_fn dotter(uint32_t type) {
    switch (type) {
    case TH_F32: return th_ref_dot_f32;
    case TH_F16: return th_ref_dot_f16;
    case TH_BF16: return th_ref_dot_bf16;
    case TH_Q4_0: return th_ref_dot_q4_0;
    case TH_Q4_1: return th_ref_dot_q4_1;
    case TH_Q5_0: return th_ref_dot_q5_0;
    case TH_Q5_1: return th_ref_dot_q5_1;
    case TH_Q8_0: return th_ref_dot_q8_0;
    case TH_Q2_K: return th_ref_dot_q2_K;
    case TH_Q3_K: return th_ref_dot_q3_K;
    case TH_Q4_K: return th_ref_dot_q4_K;
    case TH_Q5_K: return th_ref_dot_q5_K;
    case TH_Q6_K: return th_ref_dot_q6_K;
    case TH_IQ4_NL: return th_ref_dot_iq4_nl;
    case TH_IQ4_XS: return th_ref_dot_iq4_xs;
    case TH_MXFP4: return th_ref_dot_mxfp4;
    default: return NULL;
    }
}

/* n must be a non-negative multiple of the type's block (callers validate shapes). */
static bool whole_blocks(uint32_t type, int64_t n) {
    const th_type_info *ti = th_type_info_get(type);
    return ti && n >= 0 && n % ti->block == 0;
}

void th_ref_dequantize(uint32_t type, const void *src, float *dst, int64_t n) {
    dq_fn f = dequantizer(type);
    assert(!f || whole_blocks(type, n));
    if (f && whole_blocks(type, n)) { f(src, dst, n); return; }
    for (int64_t i = 0; i < n; i++) dst[i] = NAN;
}

void th_ref_quantize(uint32_t type, const float *src, void *dst, int64_t n) {
    q_fn f = quantizer(type);
    assert(!f || whole_blocks(type, n));
    if (f && whole_blocks(type, n)) f(src, dst, n);
}

bool th_ref_can_quantize(uint32_t type) { return quantizer(type) != NULL; }

float th_ref_vec_dot(uint32_t type, int64_t n, const void *w, const void *act) {
    dot_fn f = dotter(type);
    assert(!f || whole_blocks(type, n));
    if (f && whole_blocks(type, n)) return f(n, w, act);
    return NAN;
}
