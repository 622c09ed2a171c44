/* dot_kquant.c (avx512) — AVX-512 (BW + VNNI) vec_dot for the K-quants (Q2_K..Q6_K)
 * and IQ4_XS against Q8_K activations: a super-block is 4 chunks of 64 elements, each
 * decoded once and multiplied as kquant.h describes (all integer sums exact, one f32
 * multiply-add per super-block); the weight stream is prefetched TH_PREFETCH_AHEAD
 * bytes ahead. */
#include "cpu/avx512/kquant.h"

AVX512_INLINE float kq_dot(const kq_type t, int64_t n, const void *vw, const th_block_q8_K *a) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TH_QK_K; i++) {
        const uint8_t *b = (const uint8_t *)vw + (size_t)i * t.bytes;
        th_prefetch_span(b + TH_PREFETCH_AHEAD, t.bytes);
        avx2_kq_head h;
        t.head(b, &h);
        __m512i s = _mm512_setzero_si512();
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = t.dec(b, c);
            s = kq_acc(t, s, v, _mm512_movepi8_mask(v), a[i].qs + 64 * c, avx512_chunk_scales(h.sc16, c));
        }
        acc = kq_finish(t, acc, &h, s, &a[i]);
    }
    return avx2_hsum_ps(acc);
}

#define KQ_DOT(NAME) \
    void th_avx512_dot_##NAME(int64_t n, float *s, const void *w, const void *a) { *s = kq_dot(kq_##NAME, n, w, a); }
KQ_DOT(q2_K)
KQ_DOT(q3_K)
KQ_DOT(q4_K)
KQ_DOT(q5_K)
KQ_DOT(q6_K)
KQ_DOT(iq4_xs)
