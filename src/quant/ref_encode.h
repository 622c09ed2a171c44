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

/* With an importance matrix (ref_imat_encode.c, and the _w forms here): qw holds
 * the importance of each of the n values of ONE weight row (llama-quantize's
 * per-row entry points; some types normalise over the whole row). NULL qw = the
 * encoders above. */
void th_ref_q_q6_K_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_iq4_xs_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_iq4_nl_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q2_K_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q3_K_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q4_K_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q5_K_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q4_0_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q4_1_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q5_0_w(const float *src, void *dst, int64_t n, const float *qw);
void th_ref_q_q5_1_w(const float *src, void *dst, int64_t n, const float *qw);

/* Whether llama-quantize uses an importance matrix for `type` (the K-quants, IQ4_NL,
 * IQ4_XS, Q4_0/Q4_1/Q5_0/Q5_1; not Q8_0 or the float types). */
bool th_type_uses_imatrix(uint32_t type);
/* One weight row of n values with importance qw (NULL: th_quantize_weights). Types
 * that do not use an importance matrix ignore qw. False if `type` has no encoder. */
bool th_quantize_weights_imat(uint32_t type, const float *src, void *dst, int64_t n, const float *qw);

/* Pieces of ref_kquant_encode.c the weighted encoders share (GGML names in brackets). */
float th_kq_fit_symmetric(int n, int nmax, const float *x, const float *qw, int8_t *L);   /* make_qx_quants */
float th_kq_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                          uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad); /* make_qkx2/3_quants */
void th_kq_pack_2bit_planes(const int8_t *L, uint8_t *qs);
void th_kq_q3k_put_scale(uint8_t *sc, int j, int l);
void th_kq_q3k_finish(th_block_q3_K *y, const float *x, int8_t L[TH_QK_K]);
void th_kq_k4_put_scale_min(uint8_t sc12[12], int j, uint8_t ls, uint8_t lm);
void th_kq_k4_reround(const float *x, int nmax, uint16_t d16, uint16_t dmin16, const uint8_t sc12[12], uint8_t L[TH_QK_K]);
void th_kq_q4k_pack(const uint8_t L[TH_QK_K], uint8_t qs[TH_QK_K / 2]);
void th_kq_q5k_pack(const uint8_t L[TH_QK_K], th_block_q5_K *y);

/* Encode n values of a weight row as llama-quantize does without an imatrix
 * (th_type_info.quantize_weights). Same as th_ref_quantize except for Q8_0 (the
 * weight rounding, not the activation one). False if `type` has no encoder. */
bool th_quantize_weights(uint32_t type, const float *src, void *dst, int64_t n);
bool th_can_quantize_weights(uint32_t type);

#endif
