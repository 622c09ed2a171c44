/* kquant.h (avx512) — what the K-quant vec_dot (dot_kquant.c) and batch gemm
 * (gemm_kquant.c) of the avx512 level share: per type (Q2_K..Q6_K, IQ4_XS) the
 * decoder of a 64-element chunk to 64 unsigned bytes (value + offset; IQ4_XS signed)
 * in one register, the super-block header (scales, corrections, factors:
 * avx2/util.h's avx2_kq_head), and the product step: vpmaddubsw weighted by the chunk's
 * 16-bit group scales with VNNI vpdpwssd (which also accumulates), 2 instructions per 64
 * products where AVX2 needs 6; offsets and mins come off per super-block through the
 * activation's bsums. The drivers take a type's description by value and are forced
 * inline, so each entry is straight-line code for its type. */
#ifndef TH_CPU_AVX512_KQUANT_H
#define TH_CPU_AVX512_KQUANT_H

#include "cpu/avx512/util.h"

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

/* ---- super-block headers (scales, corrections, factors: avx2/util.h) ---- */

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

/* The six types. */
#define KQ_DESC(NAME, SIGNED, CORR) \
    static const kq_type kq_##NAME = { sizeof(th_block_##NAME), head_##NAME, dec_##NAME, SIGNED, CORR };
KQ_DESC(q2_K, false, true)
KQ_DESC(q3_K, false, true)
KQ_DESC(q4_K, false, true)
KQ_DESC(q5_K, false, true)
KQ_DESC(q6_K, false, true)
KQ_DESC(iq4_xs, true, false)
#undef KQ_DESC

#endif
