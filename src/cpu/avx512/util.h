/* util.h (avx512) — small inline AVX-512 (F/BW/VL/DQ/VNNI) helpers shared by the kernel
 * files of the avx512 level (64-byte loads, half-register shifts and masks, the u8 x s8
 * products summed with 16-bit scales), and the declarations of the AVX-512 kernels that
 * avx512/kernels.c puts in the table. Include only from files compiled with the AVX-512
 * flags (those under src/cpu/avx512/). Builds on avx2/util.h (the scale unpacking of the
 * K-quants is the same at both levels, and the level reuses AVX2 kernels). */
#ifndef TH_CPU_AVX512_UTIL_H
#define TH_CPU_AVX512_UTIL_H

#include "cpu/avx2/util.h"

/* The IQ4_NL / IQ4_XS non-linear 4-bit code book (GGML's kvalues_iq4nl) and the MXFP4
 * e2m1 code book doubled to integers, each in all four 16-byte lanes (for vpshufb). */
static inline __m512i avx512_iq4nl_table(void) {
    return _mm512_broadcast_i32x4(_mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}
static inline __m512i avx512_mxfp4_table(void) {
    return _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
}

/* The type-generic drivers take their decoders as constant function pointers: forced
 * inlining turns them into straight-line code per type. */
#define AVX512_INLINE static inline __attribute__((always_inline))

static inline __m512i avx512_load(const void *p) { return _mm512_loadu_si512(p); }

/* The 32 bytes at p in both 256-bit halves. */
static inline __m512i avx512_bcast32(const void *p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* 64 bytes, bytes 0..31 = lo, bytes 32..63 = hi. */
static inline __m512i avx512_halves_epi8(int lo, int hi) {
    return _mm512_inserti64x4(_mm512_set1_epi8((char)lo), _mm256_set1_epi8((char)hi), 1);
}

/* 16-bit logical right shift by s_lo in the low 256 bits and by s_hi in the high. */
static inline __m512i avx512_halves_srli(__m512i x, unsigned s_lo, unsigned s_hi) {
    return _mm512_mask_srli_epi16(_mm512_srli_epi16(x, s_lo), (__mmask32)0xffff0000u, x, s_hi);
}

/* Two 16-byte runs of packed nibbles (p0, p1) -> 64 bytes: low nibbles of p0, high
 * nibbles of p0, low of p1, high of p1 (the element order of two 32-element blocks). */
static inline __m512i avx512_nibbles_2x16(const uint8_t *p0, const uint8_t *p1) {
    const __m512i z = _mm512_castsi256_si512(
        _mm256_set_m128i(_mm_loadu_si128((const __m128i *)p1), _mm_loadu_si128((const __m128i *)p0)));
    const __m512i q = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0)); /* 16-byte lanes p0, p0, p1, p1 */
    return _mm512_and_si512(_mm512_mask_srli_epi16(q, (__mmask32)0xff00ff00u, q, 4), _mm512_set1_epi8(0x0f));
}

/* Sum of the 16 i32 lanes' two halves -> 8 x i32. */
static inline __m256i avx512_fold_epi32(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* The 16 group scales (16 x i16, one per 16 elements) laid out for the 64-element
 * chunk c: words 8g..8g+7 = scale of group 4c + g (the word pairs vpmaddubsw makes). */
static inline __m512i avx512_chunk_scales(__m256i sc16, int c) {
    const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16((short)(4 * c)),
                                         _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21,
                                                                            20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10,
                                                                            9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 3));
    return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(sc16));
}

/* acc += sum over groups of 4 bytes of u * a weighted by the 16-bit scale of each
 * pair (u unsigned, 2 * u * |a| <= 32767; exact in 32 bits). */
static inline __m512i avx512_dot_scaled(__m512i acc, __m512i u, __m512i a, __m512i scales) {
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, a), scales);
}

/* For a signed weight v (|v| <= 127): |v| and the activation with v's sign. */
static inline __m512i avx512_sign_to_act(__m512i v, __m512i a) {
    return _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(v), _mm512_setzero_si512(), a);
}

/* BF16 pairs in an __m512 for vdpbf16ps: 32 elements from element k on, masked to the
 * row; the product-sum with AVX512-BF16 (bf16 pairs multiplied exactly, added in f32,
 * subnormal inputs read as zero). Only where cpuid reports avx512_bf16. */
AVX512_INLINE __mmask32 avx512_tail_mask(int64_t left) { return (__mmask32)((1ull << left) - 1); }
AVX512_INLINE __m512 avx512_ld_bf16(const void *p, int64_t k, __mmask32 m) {
    return _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(m, (const uint16_t *)p + k));
}
AVX512_INLINE __m512 avx512_mac_bf16(__m512 c, __m512 a, __m512 b) { return _mm512_dpbf16_ps(c, (__m512bh)a, (__m512bh)b); }

/* ---- the kernels (defined in the files of src/cpu/avx512/) ---- */

/* dot_float.c, dot_legacy.c, dot_kquant.c: vec_dot. BF16's needs AVX512-BF16 (without
 * it the level keeps th_avx2_dot_bf16). */
void th_avx512_dot_f32(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_f16(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_bf16(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q4_0(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q4_1(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q5_0(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q5_1(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q8_0(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_iq4_nl(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_mxfp4(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q2_K(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q3_K(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q4_K(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q5_K(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_q6_K(int64_t n, float *s, const void *w, const void *a);
void th_avx512_dot_iq4_xs(int64_t n, float *s, const void *w, const void *a);

/* The batch gemms (any nb; avx512/kernels.c sends batches of one row to the vec_dot):
 *   gemm_float.c  tiles of 4 x 4 in zmm; F16/BF16 batches of 8 or more converted to f32
 *                 first. th_avx512_batch_bf16 needs AVX512-BF16; th_avx512_batch_bf16_fma
 *                 is the same without it (the AVX2 tiles below 8 rows).
 *   gemm_kquant.c tiles of 1 x 4 (Q2_K..Q6_K, IQ4_XS) */
th_gemm_kernel th_avx512_batch_f32;
th_gemm_kernel th_avx512_batch_f16;
th_gemm_kernel th_avx512_batch_bf16;
th_gemm_kernel th_avx512_batch_bf16_fma;
th_gemm_kernel th_avx512_batch_q2_K;
th_gemm_kernel th_avx512_batch_q3_K;
th_gemm_kernel th_avx512_batch_q4_K;
th_gemm_kernel th_avx512_batch_q5_K;
th_gemm_kernel th_avx512_batch_q6_K;
th_gemm_kernel th_avx512_batch_iq4_xs;

/* gemm_packed.c: gemm on 8-row interleaved weights (cpu/repack.h), 16 rows per zmm. */
th_gemm_kernel th_avx512_packed_q4_0;
th_gemm_kernel th_avx512_packed_q8_0;
th_gemm_kernel th_avx512_packed_q4_K;
th_gemm_kernel th_avx512_packed_q6_K;
th_gemm_kernel th_avx512_packed_iq4_xs;
/* gemm_fpack.c: F16 / BF16 gemm on the 8-row packed layout (th_repack8_16bit), f32 FMA */
th_gemm_kernel th_avx512_fpack_f16;
th_gemm_kernel th_avx512_fpack_bf16;
th_gemm_kernel th_avx512_fpack_bf16_dp;   /* vdpbf16ps (AVX512-BF16 only) */
/* gemm_amx.c: BF16 with AMX tdpbf16ps; usable = cpuid + XCR0 + the arch_prctl permission */
bool th_avx512_amx_bf16_usable(void);
th_gemm_kernel th_avx512_amx_bf16;
/* deltanet.c: the delta-rule step (th_dn_step_fn), head widths 16·n up to 128 in registers */
void th_avx512_dn_step(int32_t dk, float *S, const float *q, const float *k, const float *v, float beta, float decay,
                       float scale, float *out);

/* qn.c: the qN vec_dot and gemm entries of this level (TH_Q2..TH_Q8) */
void th_avx512_fill_qn(th_kernels *k);
/* ternary.c: the 1-bit / ternary types' entries (cpu/ternary_x86.h with vpdpbusd) */
void th_avx512_fill_ternary(th_kernels *k);

#endif
