/* kernels_avx512.c — the AVX-512 level (F/BW/VL/DQ + VNNI; compiled with those flags).
 * Starts from the AVX2 level; this file holds the Q4_0, Q4_1, Q8_0 (one VNNI vpdpbusd
 * instead of vpmaddubsw + vpmaddwd) and F32/F16 (16 lanes) vec_dot, and fills the rest
 * from the other *_avx512.c files: K-quants and IQ4_XS (kquant_avx512.c), F32/F16/BF16
 * gemm and the BF16 vec_dot (float_avx512.c; vdpbf16ps only where cpuid reports
 * AVX512-BF16, which the level does not require), Q5_0/Q5_1/IQ4_NL/MXFP4 vec_dot
 * (legacy_avx512.c) and the packed gemm of Q4_0, Q8_0, Q4_K, Q6_K
 * (gemm_packed_avx512.c). tests/test_kernels.c and tests/test_repack.c check this level
 * against the reference on any CPU that has it (and skip it elsewhere). */
#include "cpu/avx512_util.h"
#include "cpu/gemm_packed.h"

/* sum over groups of 4 of u[i] * s[i] (u unsigned, s signed) -> 8 x i32, no saturation */
static inline __m256i dot_u8s8_vnni(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
static inline __m256i dot_s8s8_vnni(__m256i a, __m256i b) {
    return dot_u8s8_vnni(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

static void dot_q4_0(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q4_0 *w = vw;
    const th_block_q8_0 *a = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TH_QK; i++) {
        __m256i q = _mm256_sub_epi8(avx2_nibbles32(w[i].qs), _mm256_set1_epi8(8));
        __m256i p = dot_s8s8_vnni(q, _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = avx2_hsum_ps(acc);
}

static void dot_q4_1(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q4_1 *w = vw;
    const th_block_q8_1 *a = va;
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        __m256i p = dot_u8s8_vnni(avx2_nibbles32(w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p), acc);
        summ += avx2_f16(w[i].m) * avx2_f16(a[i].s);
    }
    *s = avx2_hsum_ps(acc) + summ;
}

static void dot_q8_0(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q8_0 *w = vw;
    const th_block_q8_0 *a = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TH_QK; i++) {
        __m256i p = dot_s8s8_vnni(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = avx2_hsum_ps(acc);
}

static void dot_f32(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        th_prefetch_span((const char *)(w + i) + TH_PREFETCH_AHEAD, 128);
        c0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), c0);
        c1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(a + i + 16), c1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
    for (; i < n; i++) sum += w[i] * a[i];
    *s = sum;
}

static void dot_f16(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        th_prefetch_span((const char *)(w + i) + TH_PREFETCH_AHEAD, 64);
        c0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), c0);
        c1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))), c1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
    for (; i < n; i++) sum += avx2_f16(w[i]) * avx2_f16(a[i]);
    *s = sum;
}

void th_kernels_fill_avx512(th_kernels *k) {
    th_kernels_fill_avx2(k);
    k->vec_dot[TH_Q4_0] = dot_q4_0;
    k->vec_dot[TH_Q4_1] = dot_q4_1;
    k->vec_dot[TH_Q8_0] = dot_q8_0;
    k->vec_dot[TH_F32] = dot_f32;
    k->vec_dot[TH_F16] = dot_f16;
    th_avx512_fill_kquant(k);
    th_avx512_fill_float(k);
    th_avx512_fill_legacy(k);
    th_avx512_fill_gemm_packed(k);
}
