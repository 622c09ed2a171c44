/* kquant_avx512.c — AVX-512 (BW + VNNI) vec_dot and gemm for the K-quants (Q2_K..Q6_K)
 * and IQ4_XS against Q8_K activations. A super-block is 4 chunks of 64 elements; each
 * chunk is decoded to 64 unsigned bytes (value + offset) in one register, multiplied
 * with vpmaddubsw and weighted by its 16-bit group scales with VNNI vpdpwssd (which
 * also accumulates): 2 instructions per 64 products where AVX2 needs 6. Offsets and
 * mins are removed per super-block through the activation's bsums, as at the AVX2
 * level (avx2_kq_head; all integer sums exact, one f32 multiply-add per super-block).
 * IQ4_XS values are signed: |v| times the activation carrying v's sign.
 * The gemm is 1 weight row x 4 activation rows (gemm_walk.h): a chunk is decoded once
 * for the 4 rows. */
#include "cpu/gemm_walk.h"
#include "cpu/avx512_util.h"

/* ---- chunk decoders: chunk c (elements 64c..64c+63) of the super-block at b ---- */

typedef __m512i (*kq_dec_fn)(const void *b, int c);

/* bytes 0..31 from 2-bit field j of the 32 bytes at q, bytes 32..63 from field j + 1 */
AVX512_INLINE __m512i crumbs(const uint8_t *q, int j) {
    return _mm512_and_si512(avx512_halves_srli(avx512_bcast32(q), 2 * j, 2 * j + 2), _mm512_set1_epi8(3));
}
/* u | val where bit 2c (bytes 0..31) / 2c + 1 (bytes 32..63) of the 32 bytes at bits is set */
AVX512_INLINE __m512i with_high_bit(__m512i u, const uint8_t *bits, int c, int val) {
    __mmask64 k = _mm512_test_epi8_mask(avx512_bcast32(bits), avx512_halves_epi8(1 << (2 * c), 1 << (2 * c + 1)));
    return _mm512_mask_add_epi8(u, k, u, _mm512_set1_epi8((char)val)); /* (the bit is clear in u) */
}
/* low nibbles of the 32 bytes at q in bytes 0..31, high nibbles in 32..63 */
AVX512_INLINE __m512i nibbles64(const uint8_t *q) {
    return _mm512_and_si512(avx512_halves_srli(avx512_bcast32(q), 0, 4), _mm512_set1_epi8(0x0f));
}

AVX512_INLINE __m512i dec_q2_K(const void *b, int c) {
    return crumbs(((const th_block_q2_K *)b)->qs + 32 * (c / 2), 2 * (c % 2));
}
AVX512_INLINE __m512i dec_q3_K(const void *b, int c) {
    const th_block_q3_K *x = b;
    return with_high_bit(crumbs(x->qs + 32 * (c / 2), 2 * (c % 2)), x->hmask, c, 4);
}
AVX512_INLINE __m512i dec_q4_K(const void *b, int c) { return nibbles64(((const th_block_q4_K *)b)->qs + 32 * c); }
AVX512_INLINE __m512i dec_q5_K(const void *b, int c) {
    const th_block_q5_K *x = b;
    return with_high_bit(nibbles64(x->qs + 32 * c), x->qh, c, 16);
}
/* Q6_K: 4 low bits from ql (low nibbles for even c, high for odd), 2 high bits from qh
 * (bits 0-1 / 2-3 for even c, 4-5 / 6-7 for odd, moved to bits 4-5). */
AVX512_INLINE __m512i dec_q6_K(const void *b, int c) {
    const th_block_q6_K *x = b;
    const __m512i l = avx512_load(x->ql + 64 * (c / 2)), h = avx512_bcast32(x->qh + 32 * (c / 2));
    const __m512i lo = c % 2 ? _mm512_srli_epi16(l, 4) : l;
    const __m512i hi = c % 2 ? avx512_halves_srli(h, 0, 2)
                             : _mm512_mask_slli_epi16(_mm512_slli_epi16(h, 4), (__mmask32)0xffff0000u, h, 2);
    return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi8(0x0f)), _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
}

/* IQ4_XS (signed values): sub-blocks 2c, 2c+1 = 16 bytes each, low nibbles first. */
AVX512_INLINE __m512i dec_iq4_xs(const void *b, int c) {
    const uint8_t *q = ((const th_block_iq4_xs *)b)->qs + 32 * c;
    return _mm512_shuffle_epi8(avx512_iq4nl_table(), avx512_nibbles_2x16(q, q + 16));
}

/* ---- super-block headers (scales, corrections, factors: avx2_util.h) ---- */

typedef void (*kq_head_fn)(const void *b, avx2_kq_head *h);

AVX512_INLINE void head_q2_K(const void *b, avx2_kq_head *h) { avx2_head_q2_K(b, h); }
AVX512_INLINE void head_q3_K(const void *b, avx2_kq_head *h) { avx2_head_q3_K(b, h); }
AVX512_INLINE void head_q4_K(const void *b, avx2_kq_head *h) {
    const th_block_q4_K *x = b;
    avx2_head_k4(x->d, x->dmin, x->scales, h);
}
AVX512_INLINE void head_q5_K(const void *b, avx2_kq_head *h) {
    const th_block_q5_K *x = b;
    avx2_head_k4(x->d, x->dmin, x->scales, h);
}
AVX512_INLINE void head_q6_K(const void *b, avx2_kq_head *h) { avx2_head_q6_K(b, h); }
AVX512_INLINE void head_iq4_xs(const void *b, avx2_kq_head *h) {
    h->d = avx2_f16(((const th_block_iq4_xs *)b)->d);
    h->dm = 0;
    h->sc16 = avx2_iq4xs_scales(b);
    h->corr16 = _mm256_setzero_si256();
}

/* What a type is: its block size, header, decoder, signed values (IQ4_XS) or not,
 * and whether it has offsets/mins to remove. */
typedef struct {
    size_t bytes;
    kq_head_fn head;
    kq_dec_fn dec;
    bool is_signed, corr;
} kq_type;

/* s += chunk products of decoded chunk v with the 64 activations at a */
AVX512_INLINE __m512i kq_acc(const kq_type t, __m512i s, __m512i v, __mmask64 neg, const int8_t *a, __m512i sc) {
    __m512i av = avx512_load(a);
    if (t.is_signed) {
        av = _mm512_mask_sub_epi8(av, neg, _mm512_setzero_si512(), av);
        v = _mm512_abs_epi8(v);
    }
    return avx512_dot_scaled(s, v, av, sc);
}

AVX512_INLINE __m256 kq_finish(const kq_type t, __m256 acc, const avx2_kq_head *h, __m512i s, const th_block_q8_K *a) {
    acc = _mm256_fmadd_ps(_mm256_set1_ps(a->d * h->d), _mm256_cvtepi32_ps(avx512_fold_epi32(s)), acc);
    if (t.corr) {
        __m256i c = _mm256_madd_epi16(h->corr16, _mm256_loadu_si256((const __m256i *)a->bsums));
        acc = _mm256_fnmadd_ps(_mm256_set1_ps(a->d * h->dm), _mm256_cvtepi32_ps(c), acc);
    }
    return acc;
}

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

#define KQ_TYPE(NAME, TYPE, SIGNED, CORR)                                                           \
    static const kq_type kq_##NAME = { sizeof(th_block_##NAME), head_##NAME, dec_##NAME, SIGNED, CORR }; \
    static void dot_##NAME(int64_t n, float *s, const void *w, const void *a) { *s = kq_dot(kq_##NAME, n, w, a); } \
    static void tile_##NAME(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) { \
        kq_tile(kq_##NAME, nsb, w, a, out);                                                          \
    }                                                                                                \
    static void gemm_##NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,  \
                            const void *x, size_t xs, float *y, int64_t ys) {                         \
        if (nb < 2) th_gemm_by_vec_dot(TYPE, th_cpu_kernels(), n, r0, r1, w, ws, nb, x, xs, y, ys);   \
        else th_gemm_walk1x4(tile_##NAME, n / TH_QK_K, r0, r1, w, ws, nb, x, xs, y, ys);              \
    }

KQ_TYPE(q2_K, TH_Q2_K, false, true)
KQ_TYPE(q3_K, TH_Q3_K, false, true)
KQ_TYPE(q4_K, TH_Q4_K, false, true)
KQ_TYPE(q5_K, TH_Q5_K, false, true)
KQ_TYPE(q6_K, TH_Q6_K, false, true)
KQ_TYPE(iq4_xs, TH_IQ4_XS, true, false)

void th_avx512_fill_kquant(th_kernels *k) {
#define SET(NAME, TYPE) k->vec_dot[TYPE] = dot_##NAME; k->gemm[TYPE] = gemm_##NAME;
    SET(q2_K, TH_Q2_K) SET(q3_K, TH_Q3_K) SET(q4_K, TH_Q4_K) SET(q5_K, TH_Q5_K) SET(q6_K, TH_Q6_K)
    SET(iq4_xs, TH_IQ4_XS)
#undef SET
}
