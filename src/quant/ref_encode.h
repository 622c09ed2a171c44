/* ref_encode.h — the weight encoders of ref_kquant_encode.c: K-quants (Q2_K..Q6_K),
 * IQ4_XS / IQ4_NL with llama.cpp's scale search, and Q8_0 as llama.cpp's
 * quantize_row_q8_0_ref writes weights (round half away from zero). They
 * reproduce llama-quantize's bytes when no importance matrix is given.
 * The type table (types.c) names them as the types' encoders; quantize_file.c uses
 * th_quantize_weights() (ref_dispatch.c). n is a multiple of the type's block size. */
#ifndef TH_QUANT_REF_ENCODE_H
#define TH_QUANT_REF_ENCODE_H

#include "quant/quant.h"

void th_ref_q_q2_K(const float *src, void *dst, int64_t n);
void th_ref_q_q3_K(const float *src, void *dst, int64_t n);
void th_ref_q_q4_K(const float *src, void *dst, int64_t n);
void th_ref_q_q5_K(const float *src, void *dst, int64_t n);
void th_ref_q_q6_K(const float *src, void *dst, int64_t n);
void th_ref_q_iq4_xs(const float *src, void *dst, int64_t n);
void th_ref_q_iq4_nl_search(const float *src, void *dst, int64_t n);
void th_ref_q_q8_0_weights(const float *src, void *dst, int64_t n);

/* Encode n values of a weight row as llama-quantize does without an imatrix
 * (th_type_info.quantize_weights). Same as th_ref_quantize except for Q8_0 (the
 * weight rounding, not the activation one). False if `type` has no encoder. */
bool th_quantize_weights(uint32_t type, const float *src, void *dst, int64_t n);
bool th_can_quantize_weights(uint32_t type);

#endif
