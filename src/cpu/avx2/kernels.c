/* kernels.c (avx2) — the avx2 level of the kernel table: th_kernels_fill_avx2 puts the
 * AVX2 kernels of this folder in the table over the generic level, and builds each
 * gemm entry from this level's own vec_dot (a batch of one activation row) and batch
 * gemm (TH_GEMM_ENTRY). Every supported weight type has an AVX2 vec_dot and gemm;
 * Q4_0, Q8_0, Q4_K, Q6_K and IQ4_XS also a packed gemm. */
#include "cpu/avx2/util.h"

TH_GEMM_ENTRY(gemm_f32, th_avx2_dot_f32, th_avx2_batch_f32)
TH_GEMM_ENTRY(gemm_f16, th_avx2_dot_f16, th_avx2_batch_f16)
TH_GEMM_ENTRY(gemm_bf16, th_avx2_dot_bf16, th_avx2_batch_bf16)
TH_GEMM_ENTRY(gemm_q4_0, th_avx2_dot_q4_0, th_avx2_batch_q4_0)
TH_GEMM_ENTRY(gemm_q4_1, th_avx2_dot_q4_1, th_avx2_batch_q4_1)
TH_GEMM_ENTRY(gemm_q5_0, th_avx2_dot_q5_0, th_avx2_batch_q5_0)
TH_GEMM_ENTRY(gemm_q5_1, th_avx2_dot_q5_1, th_avx2_batch_q5_1)
TH_GEMM_ENTRY(gemm_q8_0, th_avx2_dot_q8_0, th_avx2_batch_q8_0)
TH_GEMM_ENTRY(gemm_iq4_nl, th_avx2_dot_iq4_nl, th_avx2_batch_iq4_nl)
TH_GEMM_ENTRY(gemm_mxfp4, th_avx2_dot_mxfp4, th_avx2_batch_mxfp4)
TH_GEMM_ENTRY(gemm_q2_K, th_avx2_dot_q2_K, th_avx2_batch_q2_K)
TH_GEMM_ENTRY(gemm_q3_K, th_avx2_dot_q3_K, th_avx2_batch_q3_K)
TH_GEMM_ENTRY(gemm_q4_K, th_avx2_dot_q4_K, th_avx2_batch_q4_K)
TH_GEMM_ENTRY(gemm_q5_K, th_avx2_dot_q5_K, th_avx2_batch_q5_K)
TH_GEMM_ENTRY(gemm_q6_K, th_avx2_dot_q6_K, th_avx2_batch_q6_K)
TH_GEMM_ENTRY(gemm_iq4_xs, th_avx2_dot_iq4_xs, th_avx2_batch_iq4_xs)

void th_kernels_fill_avx2(th_kernels *k) {
    k->level = "avx2";
    k->quantize[TH_Q8_0] = th_avx2_quantize_q8_0;
    k->quantize[TH_Q8_1] = th_avx2_quantize_q8_1;
    k->quantize[TH_Q8_K] = th_avx2_quantize_q8_K;
    k->quantize[TH_F16] = th_avx2_quantize_f16;
    k->quantize[TH_BF16] = th_avx2_quantize_bf16;
    k->dequant[TH_F16] = th_avx2_dequant_f16;

#define SET(T, X) k->vec_dot[TH_##T] = th_avx2_dot_##X; k->gemm[TH_##T] = gemm_##X;
    SET(F32, f32) SET(F16, f16) SET(BF16, bf16)
    SET(Q4_0, q4_0) SET(Q4_1, q4_1) SET(Q5_0, q5_0) SET(Q5_1, q5_1) SET(Q8_0, q8_0) SET(IQ4_NL, iq4_nl)
    SET(MXFP4, mxfp4) SET(Q2_K, q2_K) SET(Q3_K, q3_K) SET(Q4_K, q4_K) SET(Q5_K, q5_K) SET(Q6_K, q6_K)
    SET(IQ4_XS, iq4_xs)
#undef SET
    th_avx2_fill_qn(k);
    th_avx2_fill_ternary(k);

    k->gemm_packed[TH_Q4_0] = th_avx2_packed_q4_0;
    k->gemm_packed[TH_Q8_0] = th_avx2_packed_q8_0;
    k->gemm_packed[TH_Q4_K] = th_avx2_packed_q4_K;
    k->gemm_packed[TH_Q6_K] = th_avx2_packed_q6_K;
    k->gemm_packed[TH_IQ4_XS] = th_avx2_packed_iq4_xs;
    k->gemm_packed[TH_F16] = th_avx2_fpack_f16;       /* gemm_fpack.c */
    k->gemm_packed[TH_BF16] = th_avx2_fpack_bf16;

    k->attn_chunk = th_avx2_attn_chunk;
    k->swiglu = th_avx2_swiglu;
    k->dn_step = th_avx2_dn_step;
    k->dn_chunk = th_avx2_dn_chunk;
    k->dn_chunk_min = 0;   /* the AVX2 step is 1.3-1.8x faster than this chunk (bench_dn_chunk) */
}
