/* kernels.c (avx512) — the avx512 level (AVX-512 F/BW/VL/DQ + VNNI) of the kernel table.
 * th_kernels_fill_avx512 starts from the avx2 level (every AVX-512 CPU runs it: the
 * activation quantizers, attention, SwiGLU, the F16 row decoder stay AVX2's) and
 * replaces every vec_dot (dot_float.c, dot_legacy.c, dot_kquant.c; BF16 only where
 * cpuid reports AVX512-BF16, which the level does not require), the gemm of the float
 * types and the K-quants (gemm_float.c, gemm_kquant.c) and every packed gemm
 * (gemm_packed.c). The 32-element block types keep AVX2's batch gemm (avx2/gemm_x8.c,
 * gemm_legacy.c), but their entries here send a batch of one row to this level's own
 * vec_dot, as every entry does (TH_GEMM_ENTRY). tests/test_kernels.c and
 * tests/test_repack.c check this level against the reference on any CPU that has it. */
#include "cpu/avx512/util.h"
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>

TH_GEMM_ENTRY(gemm_f32, th_avx512_dot_f32, th_avx512_batch_f32)
TH_GEMM_ENTRY(gemm_f16, th_avx512_dot_f16, th_avx512_batch_f16)
TH_GEMM_ENTRY(gemm_bf16, th_avx512_dot_bf16, th_avx512_batch_bf16)
TH_GEMM_ENTRY(gemm_bf16_fma, th_avx2_dot_bf16, th_avx512_batch_bf16_fma)   /* without AVX512-BF16 */
TH_GEMM_ENTRY(gemm_q4_0, th_avx512_dot_q4_0, th_avx2_batch_q4_0)
TH_GEMM_ENTRY(gemm_q4_1, th_avx512_dot_q4_1, th_avx2_batch_q4_1)
TH_GEMM_ENTRY(gemm_q5_0, th_avx512_dot_q5_0, th_avx2_batch_q5_0)
TH_GEMM_ENTRY(gemm_q5_1, th_avx512_dot_q5_1, th_avx2_batch_q5_1)
TH_GEMM_ENTRY(gemm_q8_0, th_avx512_dot_q8_0, th_avx2_batch_q8_0)
TH_GEMM_ENTRY(gemm_iq4_nl, th_avx512_dot_iq4_nl, th_avx2_batch_iq4_nl)
TH_GEMM_ENTRY(gemm_mxfp4, th_avx512_dot_mxfp4, th_avx2_batch_mxfp4)
TH_GEMM_ENTRY(gemm_q2_K, th_avx512_dot_q2_K, th_avx512_batch_q2_K)
TH_GEMM_ENTRY(gemm_q3_K, th_avx512_dot_q3_K, th_avx512_batch_q3_K)
TH_GEMM_ENTRY(gemm_q4_K, th_avx512_dot_q4_K, th_avx512_batch_q4_K)
TH_GEMM_ENTRY(gemm_q5_K, th_avx512_dot_q5_K, th_avx512_batch_q5_K)
TH_GEMM_ENTRY(gemm_q6_K, th_avx512_dot_q6_K, th_avx512_batch_q6_K)
TH_GEMM_ENTRY(gemm_iq4_xs, th_avx512_dot_iq4_xs, th_avx512_batch_iq4_xs)

/* cpuid leaf 7 sub-leaf 1, EAX bit 5 (the ZMM state was checked for the level). */
static bool cpu_has_avx512_bf16(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

/* The packed BF16 gemm: vdpbf16ps (32 multiply-adds per instruction) or conversion to
 * f32 and FMA (16)? It depends on the core: on the development VM's Intel Xeon (and the
 * GPU machine's) vdpbf16ps ran at ~0.5 per cycle against 2 FMAs per cycle
 * (bench/bench_float_gemm), so FMA does twice the work; on AMD's Zen 4 the published
 * instruction tables give vdpbf16ps zmm the FMA's issue rate, i.e. twice the work (not
 * measured here; Zen 5 neither: bench_float_gemm prints both roofs). So vdpbf16ps on AMD
 * CPUs with AVX512-BF16, FMA elsewhere; th_kernels_set_bf16_dot (a measurement switch for
 * tests and bench/, not a user option) forces one (the tests check both). */
static int bf16_dot_mode;   /* 0: the vendor rule, 1: vdpbf16ps, 2: FMA */

void th_kernels_set_bf16_dot(int mode) { bf16_dot_mode = mode; }

static bool bf16_dot_wins(void) {
    if (!cpu_has_avx512_bf16()) return false;
    if (bf16_dot_mode == 1) return true;
    if (bf16_dot_mode == 2) return false;
    unsigned a, b, c, d;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
}

void th_kernels_fill_avx512(th_kernels *k) {
    th_kernels_fill_avx2(k);
    k->level = "avx512";
#define SET(T, X) k->vec_dot[TH_##T] = th_avx512_dot_##X; k->gemm[TH_##T] = gemm_##X;
    SET(F32, f32) SET(F16, f16)
    SET(Q4_0, q4_0) SET(Q4_1, q4_1) SET(Q5_0, q5_0) SET(Q5_1, q5_1) SET(Q8_0, q8_0) SET(IQ4_NL, iq4_nl)
    SET(MXFP4, mxfp4) SET(Q2_K, q2_K) SET(Q3_K, q3_K) SET(Q4_K, q4_K) SET(Q5_K, q5_K) SET(Q6_K, q6_K)
    SET(IQ4_XS, iq4_xs)
#undef SET
    th_avx512_fill_qn(k);
    k->dn_step = th_avx512_dn_step;   /* deltanet.c */
    th_avx512_fill_ternary(k);
    if (cpu_has_avx512_bf16()) {
        k->vec_dot[TH_BF16] = th_avx512_dot_bf16;
        k->gemm[TH_BF16] = gemm_bf16;
    } else {
        k->gemm[TH_BF16] = gemm_bf16_fma;   /* with AVX2's vec_dot, as set above */
    }

    k->gemm_packed[TH_Q4_0] = th_avx512_packed_q4_0;
    k->gemm_packed[TH_Q8_0] = th_avx512_packed_q8_0;
    k->gemm_packed[TH_Q4_K] = th_avx512_packed_q4_K;
    k->gemm_packed[TH_Q6_K] = th_avx512_packed_q6_K;
    k->gemm_packed[TH_IQ4_XS] = th_avx512_packed_iq4_xs;
    k->gemm_packed[TH_F16] = th_avx512_fpack_f16;     /* gemm_fpack.c */
    k->gemm_packed[TH_BF16] = bf16_dot_wins() ? th_avx512_fpack_bf16_dp : th_avx512_fpack_bf16;
    if (th_avx512_amx_bf16_usable()) k->gemm_packed[TH_BF16] = th_avx512_amx_bf16;   /* gemm_amx.c where usable */
}

void th_kernels_drop_amx_avx512(th_kernels *k) {
    if (k->gemm_packed[TH_BF16] == th_avx512_amx_bf16)
        k->gemm_packed[TH_BF16] = bf16_dot_wins() ? th_avx512_fpack_bf16_dp : th_avx512_fpack_bf16;
}
