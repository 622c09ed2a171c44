/* ternary.c (avx2) — the 1-bit and ternary types' kernels at the avx2 level: the dot
 * products of cpu/ternary_x86.h with maddubs + madd for the byte products, and gemm
 * entries that run the dot per output (no tiled batch kernel for these types yet).
 * th_avx2_fill_ternary puts them in the table. */
#include "cpu/avx2/util.h"

#define TERN_DOT(acc, u, s) ((acc) = _mm256_add_epi32((acc), avx2_dot_u8s8((u), (s))))
#include "cpu/ternary_x86.h"

TERN_TQ_DOT(dot_tq1_0, th_block_tq1_0, tern_tq1_block)
TERN_TQ_DOT(dot_tq2_0, th_block_tq2_0, tern_tq2_block)
static void dot_q1_0_g128(int64_t n, float *s, const void *w, const void *a) { tern_q1_dot(n, s, w, a); }
static void dot_iq1_bn(int64_t n, float *s, const void *w, const void *a) { tern_iq1bn_dot(n, s, w, a); }
static void dot_iq2_bn(int64_t n, float *s, const void *w, const void *a) { tern_iq2bn_dot(n, s, w, a); }

TH_GEMM_BY_DOT(gemm_tq1_0, dot_tq1_0)
TH_GEMM_BY_DOT(gemm_tq2_0, dot_tq2_0)
TH_GEMM_BY_DOT(gemm_q1_0_g128, dot_q1_0_g128)
TH_GEMM_BY_DOT(gemm_iq1_bn, dot_iq1_bn)
TH_GEMM_BY_DOT(gemm_iq2_bn, dot_iq2_bn)

void th_avx2_fill_ternary(th_kernels *k) {
#define SET(T, X) k->vec_dot[TH_##T] = dot_##X; k->gemm[TH_##T] = gemm_##X;
    SET(TQ1_0, tq1_0) SET(TQ2_0, tq2_0) SET(Q1_0_G128, q1_0_g128) SET(IQ1_BN, iq1_bn) SET(IQ2_BN, iq2_bn)
#undef SET
}
