/* avx2_util.h — small inline AVX2 helpers shared by the *_avx2.c kernel files
 * (horizontal sums, nibble/bit unpacking, 8-bit integer dot products), and the
 * declarations of the AVX2 kernels that kernels_avx2.c puts in the table.
 * Include only from files compiled with the AVX2 flags (name ends in _avx2.c). */
#ifndef TH_CPU_AVX2_UTIL_H
#define TH_CPU_AVX2_UTIL_H

#include "cpu/kernels.h"
#include <immintrin.h>
#include <string.h>

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

static inline float avx2_f16(uint16_t h) { return _cvtsh_ss(h); }

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

/* Q4_K/Q5_K 12-byte scale field -> 8 six-bit scales and 8 six-bit mins. */
static inline void avx2_kquant_scales(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0x0f) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

/* Q3_K 12-byte scale field -> 16 signed scales (six-bit value - 32). */
static inline void avx2_q3k_scales(const uint8_t *q, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (q[j] & 0x0f) : (q[j - 8] >> 4);
        int hi = (q[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* Pairs of 16-bit scales for one 32-element chunk: lanes 0..7 = a, 8..15 = b. */
static inline __m256i avx2_scale_pair(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
}

/* ---- the kernels (defined in the *_avx2.c files) ---- */

void th_avx2_quantize_q8_0(const float *x, void *y, int64_t n);
void th_avx2_quantize_q8_1(const float *x, void *y, int64_t n);
void th_avx2_quantize_q8_K(const float *x, void *y, int64_t n);
void th_avx2_quantize_f16(const float *x, void *y, int64_t n);
void th_avx2_quantize_bf16(const float *x, void *y, int64_t n);

void th_avx2_dot_q4_0(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q4_1(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q5_0(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q5_1(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q8_0(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_iq4_nl(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_f16(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_bf16(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_f32(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q2_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q3_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q4_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q5_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_q6_K(int64_t n, float *s, const void *w, const void *a);
void th_avx2_dot_iq4_xs(int64_t n, float *s, const void *w, const void *a);

/* gemm_avx2.c: fills k->gemm[] for the types it tiles. */
void th_avx2_fill_gemm(th_kernels *k);
/* gemm_kquant_avx2.c: the K-quant and IQ4_XS gemm entries. */
void th_avx2_fill_gemm_kquant(th_kernels *k);
/* gemm_float_avx2.c: the F32/F16/BF16 gemm entries. */
void th_avx2_fill_gemm_float(th_kernels *k);

#endif
