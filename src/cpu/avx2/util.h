/* util.h (avx2) — small inline AVX2 helpers shared by the kernel files of the avx2
 * level (horizontal sums, nibble/bit unpacking, 8-bit integer dot products), and the
 * declarations of the AVX2 kernels that avx2/kernels.c puts in the table (and that the
 * avx512 level reuses). Include only from files compiled with the AVX2 flags (those
 * under src/cpu/avx2/ and src/cpu/avx512/). */
#ifndef TH_CPU_AVX2_UTIL_H
#define TH_CPU_AVX2_UTIL_H

#include "cpu/kernels.h"
#include <immintrin.h>
#include <string.h>

/* The IQ4_NL / IQ4_XS non-linear 4-bit code book (GGML's kvalues_iq4nl) and the MXFP4
 * e2m1 code book doubled to integers, each in both 16-byte lanes (for vpshufb). */
static inline __m256i avx2_iq4nl_table(void) {
    return _mm256_broadcastsi128_si256(_mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}
static inline __m256i avx2_mxfp4_table(void) {
    return _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
}

static inline float avx2_hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int avx2_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* [sum(p0), sum(p1), sum(p2), sum(p3)] by transpose-and-add (single-uop unpacks). */
static inline __m128i avx2_reduce4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    __m256i t01 = _mm256_add_epi32(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
    __m256i t23 = _mm256_add_epi32(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
    __m256i h = _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* e^x in f32 (x clamped to [-87.3, 88.3]: below, ~0; relative error ~2e-7 elsewhere):
 * x = n ln2 + r with |r| <= ln2/2, e^r by the Cephes expf polynomial, times 2^n through
 * the exponent bits. */
static inline __m256 avx2_exp_ps(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float avx2_f16(uint16_t h) { return _cvtsh_ss(h); }

/* MXFP4 block scale: 2^(e-128), i.e. half the OCP E8M0 scale 2^(e-127), because the
 * code book holds doubled e2m1 values; e < 2 gives the subnormals 2^-128, 2^-127. */
static inline float avx2_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t)(e - 1) << 23);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* 16 packed bytes -> 32 bytes: the low nibbles in bytes 0..15, the high nibbles in 16..31
 * (the legacy-quant element order). */
static inline __m256i avx2_nibbles32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0f));
}

/* 32 bits (little-endian at p) -> 32 bytes, byte j = 0xff if bit j is set, else 0. */
static inline __m256i avx2_bits32(const uint8_t *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    __m256i v = _mm256_set1_epi32((int)x);
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                             0x0101010101010101LL, 0x0000000000000000LL);
    v = _mm256_shuffle_epi8(v, spread);                    /* byte j <- source byte j/8 */
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* Sum of u[i]*s[i] over each group of 4 bytes -> 8 x i32. u is unsigned (0..255),
 * s signed; exact while 2*u*s fits in int16 (true for every use here: u <= 128, |s| <= 127
 * or u <= 63). */
static inline __m256i avx2_dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Same for two signed operands (|a| <= 128, |b| <= 127): |a| * (b with a's sign). */
static inline __m256i avx2_dot_s8s8(__m256i a, __m256i b) {
    return avx2_dot_u8s8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

/* The K-quant scale fields are unpacked with 32-bit integer ops into registers (not
 * byte stores then a vector load, which would stall on store forwarding). */
static inline uint32_t avx2_u32(const uint8_t *p) { uint32_t x; memcpy(&x, p, 4); return x; }

/* Q4_K/Q5_K 12-byte scale field -> 16 x i16 scales per 16-element group (each 6-bit
 * sub-block scale twice) and 8 x i16 mins (one per 32-element sub-block). */
static inline void avx2_k4_scales(const uint8_t *q, __m256i *sc16, __m128i *mn8) {
    const uint32_t u0 = avx2_u32(q), u1 = avx2_u32(q + 4), u2 = avx2_u32(q + 8);
    const uint32_t sc_lo = u0 & 0x3f3f3f3fu, mn_lo = u1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
    __m128i sc = _mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo);
    *sc16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc, sc));
    *mn8 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)mn_hi, (int)mn_lo));
}

/* Q3_K 12-byte scale field -> 16 signed scales (six-bit value - 32) as int8. */
static inline __m128i avx2_q3k_scales(const uint8_t *q) {
    const uint32_t a0 = avx2_u32(q), a1 = avx2_u32(q + 4), a2 = avx2_u32(q + 8);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    uint32_t s0 = (a0 & m4) | ((a2 & m2) << 4);
    uint32_t s1 = (a1 & m4) | (((a2 >> 2) & m2) << 4);
    uint32_t s2 = ((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4);
    uint32_t s3 = ((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4);
    return _mm_sub_epi8(_mm_set_epi32((int)s3, (int)s2, (int)s1, (int)s0), _mm_set1_epi8(32));
}

/* IQ4_XS: the 8 six-bit sub-block scales minus 32, each twice, as 16 x i16 (the
 * layout avx2_pair_from16 reads: chunk ib gets its scale in all 16 lanes). */
static inline __m256i avx2_iq4xs_scales(const th_block_iq4_xs *b) {
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)avx2_u32(b->scales_l)),
                                                          _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                        _mm256_set1_epi32(0x0f));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h),
                                                          _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    return _mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(ls, 16));
}

/* From 16 x i16 group scales: chunk c's pair, lanes 0..7 = s[2c], lanes 8..15 = s[2c+1]
 * (the scales of elements 32c..32c+15 and 32c+16..32c+31). */
static inline __m256i avx2_pair_from16(__m256i s16, int c) {
    const __m256i dup = _mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(c));
    const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                          2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    return _mm256_shuffle_epi8(dup, pick);
}

/* K-quant super-block header (Q2_K..Q6_K), shared by the AVX2 and AVX-512 K-quant kernels:
 *   dot = d_a * (d * sum(scale * u * a) - dm * sum_k corr[k] * bsums[k])
 * with u the unsigned code (value + offset) and (dm, corr) = (dmin, min) for Q2_K/Q4_K/Q5_K
 * and (d, offset * scale) for Q3_K/Q6_K. */
typedef struct {
    float d, dm;
    __m256i sc16;   /* 16 x i16: scale of each 16-element group */
    __m256i corr16; /* 16 x i16: correction weight of each 16-element group  */
} avx2_kq_head;
static inline void avx2_head_q2_K(const th_block_q2_K *b, avx2_kq_head *h) {
    const __m128i raw = _mm_loadu_si128((const __m128i *)b->scales), m4 = _mm_set1_epi8(0x0f);
    h->d = avx2_f16(b->d);
    h->dm = avx2_f16(b->dmin);
    h->sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
    h->corr16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
}
static inline void avx2_head_q3_K(const th_block_q3_K *b, avx2_kq_head *h) {
    h->d = h->dm = avx2_f16(b->d);
    h->sc16 = _mm256_cvtepi8_epi16(avx2_q3k_scales(b->scales));
    h->corr16 = _mm256_slli_epi16(h->sc16, 2);
}
static inline void avx2_head_k4(uint16_t d, uint16_t dmin, const uint8_t *scales, avx2_kq_head *h) {
    __m128i mn8;
    avx2_k4_scales(scales, &h->sc16, &mn8);
    h->d = avx2_f16(d);
    h->dm = avx2_f16(dmin);
    h->corr16 = _mm256_set_m128i(_mm_unpackhi_epi16(mn8, mn8), _mm_unpacklo_epi16(mn8, mn8));
}
static inline void avx2_head_q6_K(const th_block_q6_K *b, avx2_kq_head *h) {
    h->d = h->dm = avx2_f16(b->d);
    h->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    h->corr16 = _mm256_slli_epi16(h->sc16, 5);
}


/* Pairs of 16-bit scales for one 32-element chunk: lanes 0..7 = a, 8..15 = b. */
static inline __m256i avx2_scale_pair(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
}

/* ---- the kernels (defined in the files of src/cpu/avx2/) ---- */

/* quantize.c: f32 to the activation types, the reference's bytes exactly. */
void th_avx2_quantize_q8_0(const float *x, void *y, int64_t n);
void th_avx2_quantize_q8_1(const float *x, void *y, int64_t n);
void th_avx2_quantize_q8_K(const float *x, void *y, int64_t n);
void th_avx2_quantize_f16(const float *x, void *y, int64_t n);
void th_avx2_quantize_bf16(const float *x, void *y, int64_t n);

/* dot_float.c, dot_legacy.c, dot_kquant.c: the vec_dot of every supported weight type. */
void th_avx2_dot_f32(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_f16(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_bf16(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q4_0(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q4_1(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q5_0(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q5_1(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q8_0(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_iq4_nl(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_mxfp4(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q2_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q3_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q4_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q5_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q6_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_iq4_xs(int64_t n, float *s, const void *w, const void *a);

/* The batch gemms (th_gemm_fn, any nb; avx2/kernels.c sends batches of one row to the
 * vec_dot instead, TH_GEMM_ENTRY):
 *   gemm_float.c  tiles of 4 weight rows x 2 activation rows
 *   gemm_legacy.c tiles of 4 x 4 (Q8_0, IQ4_NL, MXFP4)
 *   gemm_x8.c     tiles of 8 x 4, the rows interleaved on the fly (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K)
 *   gemm_kquant.c tiles of 1 x 4 (Q2_K, Q3_K, Q5_K, Q6_K, IQ4_XS) */
th_gemm_kernel th_avx2_batch_f32;
th_gemm_kernel th_avx2_batch_f16;
th_gemm_kernel th_avx2_batch_bf16;
th_gemm_kernel th_avx2_batch_q8_0;
th_gemm_kernel th_avx2_batch_iq4_nl;
th_gemm_kernel th_avx2_batch_mxfp4;
th_gemm_kernel th_avx2_batch_q4_0;
th_gemm_kernel th_avx2_batch_q4_1;
th_gemm_kernel th_avx2_batch_q5_0;
th_gemm_kernel th_avx2_batch_q5_1;
th_gemm_kernel th_avx2_batch_q4_K;
th_gemm_kernel th_avx2_batch_q2_K;
th_gemm_kernel th_avx2_batch_q3_K;
th_gemm_kernel th_avx2_batch_q5_K;
th_gemm_kernel th_avx2_batch_q6_K;
th_gemm_kernel th_avx2_batch_iq4_xs;

/* gemm_packed.c: gemm on 8-row interleaved weights (cpu/repack.h) of Q4_0, Q8_0, Q4_K, Q6_K,
 * IQ4_XS. */
th_gemm_kernel th_avx2_packed_q4_0;
th_gemm_kernel th_avx2_packed_q8_0;
th_gemm_kernel th_avx2_packed_q4_K;
th_gemm_kernel th_avx2_packed_q6_K;
th_gemm_kernel th_avx2_packed_iq4_xs;
/* gemm_fpack.c: F16 / BF16 gemm on the 8-row packed layout (th_repack8_16bit), f32 FMA */
th_gemm_kernel th_avx2_fpack_f16;
th_gemm_kernel th_avx2_fpack_bf16;

/* ops.c */
void th_avx2_swiglu(float *a, const float *gate, const float *up, int64_t n);
void th_avx2_dn_step(int32_t dk, float *S, const float *q, const float *k, const float *v, float beta, float decay,
                     float scale, float *out);
void th_avx2_dn_chunk(int32_t dk, int32_t L, float *S, const float *q, const float *k, const float *v, int64_t xs,
                      const float *beta, const float *lg, int64_t gs, float scale, float *out, int64_t os, float *work);

/* attn.c: attention's chunk kernel; F16 rows to f32 (F16C). */
void th_avx2_attn_chunk(const th_attn_chunk *a);
void th_avx2_dequant_f16(const void *src, float *dst, int64_t n);

/* qn.c: the qN vec_dot and gemm entries of this level (TH_Q2..TH_Q8) */
void th_avx2_fill_qn(th_kernels *k);
/* ternary.c: the TQ1_0, TQ2_0, Q1_0_G128, IQ1_BN, IQ2_BN vec_dot and gemm entries (cpu/ternary_x86.h) */
void th_avx2_fill_ternary(th_kernels *k);

#endif
