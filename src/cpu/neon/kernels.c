/* kernels.c (neon) — the neon level (aarch64 with dotprod) of the kernel table:
 * th_kernels_fill_neon puts the NEON kernels of this folder in the table over the
 * generic level (cpu/kernels.c calls it only when HWCAP says ASIMDDP), and builds each
 * gemm entry from this level's own vec_dot (a batch of one activation row) and batch
 * gemm (TH_GEMM_ENTRY); the float types have no batch kernel, their gemm is the NEON
 * vec_dot per row (TH_GEMM_BY_DOT), except F16 and BF16 weights, which are repacked at
 * load (th_repack8_16bit) for gemm_fpack.c's packed gemm, and qN's packed gemm (qn.c). */
#include "cpu/neon/util.h"

TH_GEMM_BY_DOT(gemm_f32, th_neon_dot_f32)
TH_GEMM_BY_DOT(gemm_f16, th_neon_dot_f16)
TH_GEMM_BY_DOT(gemm_bf16, th_neon_dot_bf16)
TH_GEMM_ENTRY(gemm_q4_0, th_neon_dot_q4_0, th_neon_batch_q4_0)
TH_GEMM_ENTRY(gemm_q4_1, th_neon_dot_q4_1, th_neon_batch_q4_1)
TH_GEMM_ENTRY(gemm_q5_0, th_neon_dot_q5_0, th_neon_batch_q5_0)
TH_GEMM_ENTRY(gemm_q5_1, th_neon_dot_q5_1, th_neon_batch_q5_1)
TH_GEMM_ENTRY(gemm_q8_0, th_neon_dot_q8_0, th_neon_batch_q8_0)
TH_GEMM_ENTRY(gemm_iq4_nl, th_neon_dot_iq4_nl, th_neon_batch_iq4_nl)
TH_GEMM_ENTRY(gemm_mxfp4, th_neon_dot_mxfp4, th_neon_batch_mxfp4)
TH_GEMM_ENTRY(gemm_q2_K, th_neon_dot_q2_K, th_neon_batch_q2_K)
TH_GEMM_ENTRY(gemm_q3_K, th_neon_dot_q3_K, th_neon_batch_q3_K)
TH_GEMM_ENTRY(gemm_q4_K, th_neon_dot_q4_K, th_neon_batch_q4_K)
TH_GEMM_ENTRY(gemm_q5_K, th_neon_dot_q5_K, th_neon_batch_q5_K)
TH_GEMM_ENTRY(gemm_q6_K, th_neon_dot_q6_K, th_neon_batch_q6_K)
TH_GEMM_ENTRY(gemm_iq4_xs, th_neon_dot_iq4_xs, th_neon_batch_iq4_xs)

void th_kernels_fill_neon(th_kernels *k) {
    k->level = "neon";
    k->quantize[TH_Q8_0] = th_neon_quantize_q8_0;
    k->quantize[TH_Q8_1] = th_neon_quantize_q8_1;
    k->quantize[TH_Q8_K] = th_neon_quantize_q8_K;
    k->quantize[TH_F16] = th_neon_quantize_f16;
    k->quantize[TH_BF16] = th_neon_quantize_bf16;

#define SET(T, X) k->vec_dot[TH_##T] = th_neon_dot_##X; k->gemm[TH_##T] = gemm_##X;
    SET(F32, f32) SET(F16, f16) SET(BF16, bf16)
    SET(Q4_0, q4_0) SET(Q4_1, q4_1) SET(Q5_0, q5_0) SET(Q5_1, q5_1) SET(Q8_0, q8_0) SET(IQ4_NL, iq4_nl)
    SET(MXFP4, mxfp4) SET(Q2_K, q2_K) SET(Q3_K, q3_K) SET(Q4_K, q4_K) SET(Q5_K, q5_K) SET(Q6_K, q6_K)
    SET(IQ4_XS, iq4_xs)
#undef SET
    k->gemm_packed[TH_F16] = th_neon_fpack_f16;   /* gemm_fpack.c */
    k->gemm_packed[TH_BF16] = th_neon_fpack_bf16;
    th_neon_fill_qn(k);
    th_neon_fill_ternary(k);
}
