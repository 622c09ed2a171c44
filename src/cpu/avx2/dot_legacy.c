/* dot_legacy.c (avx2) — AVX2 vec_dot for the 32-element block types (Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) against Q8_0/Q8_1 activations, and for IQ4_XS
 * (against Q8_K), which shares IQ4_NL's code book. Each block is decoded to 32 int8 in
 * one register and multiplied with vpmaddubsw/vpmaddwd; the exact integer block sum is
 * scaled by d_w * d_a and accumulated in f32 lanes. */
#include "cpu/avx2/util.h"

void th_avx2_dot_q4_0(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q4_0 *w = vw;
    const th_block_q8_0 *a = va;
    const int64_t nb = n / TH_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256i off = _mm256_set1_epi8(8);
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i q0 = _mm256_sub_epi8(avx2_nibbles32(w[i].qs), off);
        __m256i q1 = _mm256_sub_epi8(avx2_nibbles32(w[i + 1].qs), off);
        __m256i p0 = avx2_dot_s8s8(q0, _mm256_loadu_si256((const __m256i *)a[i].qs));
        __m256i p1 = avx2_dot_s8s8(q1, _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i + 1].d) * avx2_f16(a[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m256i q0 = _mm256_sub_epi8(avx2_nibbles32(w[i].qs), off);
        __m256i p0 = avx2_dot_s8s8(q0, _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
    }
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1));
}

void th_avx2_dot_q4_1(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q4_1 *w = vw;
    const th_block_q8_1 *a = va;
    const int64_t nb = n / TH_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float summ = 0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i p0 = avx2_dot_u8s8(avx2_nibbles32(w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        __m256i p1 = avx2_dot_u8s8(avx2_nibbles32(w[i + 1].qs), _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i + 1].d) * avx2_f16(a[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
        summ += avx2_f16(w[i].m) * avx2_f16(a[i].s) + avx2_f16(w[i + 1].m) * avx2_f16(a[i + 1].s);
    }
    for (; i < nb; i++) {
        __m256i p0 = avx2_dot_u8s8(avx2_nibbles32(w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        summ += avx2_f16(w[i].m) * avx2_f16(a[i].s);
    }
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1)) + summ;
}

/* Q5_0 element = (nibble | high bit << 4) - 16; as int8 that is nibble | 0xf0 when
 * the high bit is clear. */
static inline __m256i q5_0_decode(const th_block_q5_0 *b) {
    __m256i q = avx2_nibbles32(b->qs);
    __m256i h = avx2_bits32(b->qh);
    return _mm256_or_si256(q, _mm256_andnot_si256(h, _mm256_set1_epi8((char)0xf0)));
}

void th_avx2_dot_q5_0(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q5_0 *w = vw;
    const th_block_q8_0 *a = va;
    const int64_t nb = n / TH_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i p0 = avx2_dot_s8s8(q5_0_decode(&w[i]), _mm256_loadu_si256((const __m256i *)a[i].qs));
        __m256i p1 = avx2_dot_s8s8(q5_0_decode(&w[i + 1]), _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i + 1].d) * avx2_f16(a[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m256i p0 = avx2_dot_s8s8(q5_0_decode(&w[i]), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
    }
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* Q5_1 element = nibble | high bit << 4, unsigned 0..31. */
static inline __m256i q5_1_decode(const th_block_q5_1 *b) {
    __m256i q = avx2_nibbles32(b->qs);
    __m256i h = avx2_bits32(b->qh);
    return _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
}

void th_avx2_dot_q5_1(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q5_1 *w = vw;
    const th_block_q8_1 *a = va;
    const int64_t nb = n / TH_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float summ = 0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i p0 = avx2_dot_u8s8(q5_1_decode(&w[i]), _mm256_loadu_si256((const __m256i *)a[i].qs));
        __m256i p1 = avx2_dot_u8s8(q5_1_decode(&w[i + 1]), _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i + 1].d) * avx2_f16(a[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
        summ += avx2_f16(w[i].m) * avx2_f16(a[i].s) + avx2_f16(w[i + 1].m) * avx2_f16(a[i + 1].s);
    }
    for (; i < nb; i++) {
        __m256i p0 = avx2_dot_u8s8(q5_1_decode(&w[i]), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        summ += avx2_f16(w[i].m) * avx2_f16(a[i].s);
    }
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1)) + summ;
}

void th_avx2_dot_q8_0(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q8_0 *w = vw;
    const th_block_q8_0 *a = va;
    const int64_t nb = n / TH_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i p0 = avx2_dot_s8s8(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        __m256i p1 = avx2_dot_s8s8(_mm256_loadu_si256((const __m256i *)w[i + 1].qs), _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i + 1].d) * avx2_f16(a[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m256i p0 = avx2_dot_s8s8(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
    }
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1));
}

static inline __m256i iq4nl_decode(const uint8_t *qs) {
    const __m256i table = avx2_iq4nl_table();
    return _mm256_shuffle_epi8(table, avx2_nibbles32(qs));
}

void th_avx2_dot_iq4_nl(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_iq4_nl *w = vw;
    const th_block_q8_0 *a = va;
    const int64_t nb = n / TH_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i p0 = avx2_dot_s8s8(iq4nl_decode(w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        __m256i p1 = avx2_dot_s8s8(iq4nl_decode(w[i + 1].qs), _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i + 1].d) * avx2_f16(a[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m256i p0 = avx2_dot_s8s8(iq4nl_decode(w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
    }
    *s = avx2_hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* MXFP4: e2m1 codes (doubled so they are integers) with an E8M0 block exponent. */
void th_avx2_dot_mxfp4(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_mxfp4 *w = vw;
    const th_block_q8_0 *a = va;
    const int64_t nb = n / TH_QK;
    const __m256i table = avx2_mxfp4_table();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m256i q = _mm256_shuffle_epi8(table, avx2_nibbles32(w[i].qs));
        __m256i p = avx2_dot_s8s8(q, _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(avx2_e8m0_half(w[i].e) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = avx2_hsum_ps(acc);
}

/* IQ4_XS: 256-element super-blocks of 8 sub-blocks of 32, each with a 6-bit scale. */
void th_avx2_dot_iq4_xs(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_iq4_xs *w = vw;
    const th_block_q8_K *a = va;
    const int64_t nb = n / TH_QK_K;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *qs = w[i].qs;
        const int8_t *q8 = a[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        const __m256i sc16 = avx2_iq4xs_scales(&w[i]);
        _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {
            __m256i q = iq4nl_decode(qs + 16 * ib);
            __m256i a8 = _mm256_loadu_si256((const __m256i *)(q8 + 32 * ib));
            __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a8, q));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, avx2_pair_from16(sc16, ib)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = avx2_hsum_ps(acc);
}
