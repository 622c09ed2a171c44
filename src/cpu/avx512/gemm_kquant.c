/* gemm_kquant.c (avx512) — AVX-512 (BW + VNNI) batch gemm for the K-quants (Q2_K..Q6_K)
 * and IQ4_XS against Q8_K activation rows: tiles of 1 weight row x 4 activation rows
 * (gemm_walk.h), each 64-element chunk decoded once for the 4 rows and multiplied as
 * kquant.h describes. */
#include "cpu/gemm_walk.h"
#include "cpu/avx512/kquant.h"

AVX512_INLINE void kq_tile(const kq_type t, int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) {
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *b = w + (size_t)i * t.bytes;
        avx2_kq_head h;
        t.head(b, &h);
        __m512i s[4] = { _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512() };
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = t.dec(b, c), sc = avx512_chunk_scales(h.sc16, c);
            const __mmask64 neg = _mm512_movepi8_mask(v);
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) s[j] = kq_acc(t, s[j], v, neg, a[j][i].qs + 64 * c, sc);
        }
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) acc[j] = kq_finish(t, acc[j], &h, s[j], &a[j][i]);
    }
    for (int j = 0; j < 4; j++) out[j] = avx2_hsum_ps(acc[j]);
}

#define KQ_BATCH(NAME)                                                                                   \
    static void tile_##NAME(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) {  \
        kq_tile(kq_##NAME, nsb, w, a, out);                                                                \
    }                                                                                                      \
    void th_avx512_batch_##NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,  \
                                const void *x, size_t xs, float *y, int64_t ys) {                         \
        th_gemm_walk1x4(tile_##NAME, n / TH_QK_K, r0, r1, w, ws, nb, x, xs, y, ys);                       \
    }
KQ_BATCH(q2_K)
KQ_BATCH(q3_K)
KQ_BATCH(q4_K)
KQ_BATCH(q5_K)
KQ_BATCH(q6_K)
KQ_BATCH(iq4_xs)
