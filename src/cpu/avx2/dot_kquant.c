/* dot_kquant.c (avx2) — AVX2 vec_dot for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)
 * against Q8_K activations (IQ4_XS: dot_legacy.c, with IQ4_NL's code book). Weights are decoded 32 at a time to unsigned bytes
 * (value + offset), multiplied with vpmaddubsw, weighted by their sub-block scale
 * with vpmaddwd; offsets and mins are removed exactly through the activation's
 * 16-element sums (bsums). One f32 multiply-add per super-block. */
#include "cpu/avx2/util.h"

static inline __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

static inline __m256i crumb(__m256i q, int j) { /* 2-bit field j of each byte */
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), _mm256_set1_epi8(3));
}

void th_avx2_dot_q2_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q2_K *w = vw;
    const th_block_q8_K *a = va;
    const int64_t nb = n / TH_QK_K;
    __m256 acc = _mm256_setzero_ps();
    float acc_min = 0;
    for (int64_t i = 0; i < nb; i++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)w[i].scales), m4 = _mm_set1_epi8(0x0f);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        const int8_t *q8 = a[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i q = load256(w[i].qs + 32 * h);
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                __m256i p = _mm256_maddubs_epi16(crumb(q, j), load256(q8 + 128 * h + 32 * j));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, avx2_pair_from16(sc16, 4 * h + j)));
            }
        }
        int summ = avx2_hsum_epi32(_mm256_madd_epi16(mn16, load256(a[i].bsums)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * avx2_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
        acc_min += a[i].d * avx2_f16(w[i].dmin) * (float)summ;
    }
    *s = avx2_hsum_ps(acc) - acc_min;
}

void th_avx2_dot_q3_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q3_K *w = vw;
    const th_block_q8_K *a = va;
    const int64_t nb = n / TH_QK_K;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(avx2_q3k_scales(w[i].scales));
        const int8_t *q8 = a[i].qs;
        __m256i hm = load256(w[i].hmask);
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i q = load256(w[i].qs + 32 * h);
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                /* value + 4 = low 2 bits + 4 * high bit (0..7); the high bit of chunk 4h+j is
                 * bit 0 of hm shifted down once per chunk (16-bit shifts pull bits in from above) */
                __m256i u = _mm256_or_si256(crumb(q, j), _mm256_and_si256(_mm256_slli_epi16(hm, 2), _mm256_set1_epi8(4)));
                hm = _mm256_srli_epi16(hm, 1);
                __m256i p = _mm256_maddubs_epi16(u, load256(q8 + 128 * h + 32 * j));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, avx2_pair_from16(sc16, 4 * h + j)));
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a[i].bsums)), 2));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * avx2_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = avx2_hsum_ps(acc);
}

/* Sum over the 8 sub-blocks of min[j] * (sum of the 32 activations of sub-block j). */
static inline int kquant_min_sum(__m128i mn8, const int16_t *bsums) {
    __m128i b0 = _mm_loadu_si128((const __m128i *)bsums), b1 = _mm_loadu_si128((const __m128i *)(bsums + 8));
    __m128i pairs = _mm_hadd_epi16(b0, b1);                 /* 8 sums of 32 (|x| <= 4064) */
    __m128i p = _mm_madd_epi16(mn8, pairs);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4e));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xb1));
    return _mm_cvtsi128_si32(p);
}

void th_avx2_dot_q4_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q4_K *w = vw;
    const th_block_q8_K *a = va;
    const int64_t nb = n / TH_QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    float acc_min = 0;
    for (int64_t i = 0; i < nb; i++) {
        __m256i sc16;
        __m128i mn8;
        avx2_k4_scales(w[i].scales, &sc16, &mn8);
        const int8_t *q8 = a[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m256i q = load256(w[i].qs + 32 * j);
            __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(q8 + 64 * j)), avx2_pair_from16(sc16, 2 * j));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(q8 + 64 * j + 32)), avx2_pair_from16(sc16, 2 * j + 1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * avx2_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
        acc_min += a[i].d * avx2_f16(w[i].dmin) * (float)kquant_min_sum(mn8, a[i].bsums);
    }
    *s = avx2_hsum_ps(acc) - acc_min;
}

void th_avx2_dot_q5_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q5_K *w = vw;
    const th_block_q8_K *a = va;
    const int64_t nb = n / TH_QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    float acc_min = 0;
    for (int64_t i = 0; i < nb; i++) {
        __m256i sc16;
        __m128i mn8;
        avx2_k4_scales(w[i].scales, &sc16, &mn8);
        const int8_t *q8 = a[i].qs;
        __m256i qh = load256(w[i].qh); /* bit 2j / 2j+1 of each byte: high bit of chunk 2j / 2j+1 */
        const __m256i b4 = _mm256_set1_epi8(0x10);
        __m256i sumi = _mm256_setzero_si256();
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m256i q = load256(w[i].qs + 32 * j);
            /* bits 0/1 of qh (shifted down 2 per j; what the 16-bit shifts pull in stays above) */
            __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), b4));
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), _mm256_and_si256(_mm256_slli_epi16(qh, 3), b4));
            qh = _mm256_srli_epi16(qh, 2);
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(q8 + 64 * j)), avx2_pair_from16(sc16, 2 * j));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(q8 + 64 * j + 32)), avx2_pair_from16(sc16, 2 * j + 1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * avx2_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
        acc_min += a[i].d * avx2_f16(w[i].dmin) * (float)kquant_min_sum(mn8, a[i].bsums);
    }
    *s = avx2_hsum_ps(acc) - acc_min;
}

void th_avx2_dot_q6_K(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q6_K *w = vw;
    const th_block_q8_K *a = va;
    const int64_t nb = n / TH_QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const int8_t *q8 = a[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = load256(w[i].ql + 64 * h), ql1 = load256(w[i].ql + 64 * h + 32);
            __m256i qh = load256(w[i].qh + 32 * h);
            /* 6-bit values 0..63 (= weight + 32) for elements 0-31, 32-63, 64-95, 96-127 */
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, m30));
            __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            const int8_t *a8 = q8 + 128 * h;
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q1, load256(a8)), avx2_pair_from16(sc16, 4 * h + 0));
            __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(q2, load256(a8 + 32)), avx2_pair_from16(sc16, 4 * h + 1));
            __m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(q3, load256(a8 + 64)), avx2_pair_from16(sc16, 4 * h + 2));
            __m256i p4 = _mm256_madd_epi16(_mm256_maddubs_epi16(q4, load256(a8 + 96)), avx2_pair_from16(sc16, 4 * h + 3));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p1, p2), _mm256_add_epi32(p3, p4)));
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a[i].bsums)), 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * avx2_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = avx2_hsum_ps(acc);
}
