/* dot_legacy.c (avx512) — AVX-512 VNNI vec_dot for the 32-element block types against
 * Q8_0/Q8_1 activations.
 *
 * Q4_0, Q4_1, Q8_0: one block at a time in 256-bit registers, one vpdpbusd per block
 * (instead of AVX2's vpmaddubsw + vpmaddwd); signed operands as |a| and b with a's sign.
 *
 * Q5_0, Q5_1, IQ4_NL, MXFP4: two blocks are decoded into one register as unsigned bytes
 * u = value + offset (Q5_0: 16, IQ4_NL: 127, MXFP4: 12; Q5_1 is unsigned already) and
 * multiplied with one vpdpbusd (exact in 32 bits, no 16-bit step); the offset comes off
 * as offset * (sum of the activations), a second vpdpbusd. Each half of the 16 i32
 * lanes is one block. 8 blocks at a time: their 8 scales d_w * d_a are converted and
 * multiplied in one vector, and each pair's are spread over its halves by one vpermps
 * for the f32 multiply-add. Remaining blocks one at a time. */
#include "cpu/avx512/util.h"
#include <stddef.h>

/* ---- Q4_0, Q4_1, Q8_0: a block per vpdpbusd ---- */

/* sum over groups of 4 of u[i] * s[i] (u unsigned, s signed) -> 8 x i32, no saturation */
static inline __m256i dot_u8s8_vnni(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
static inline __m256i dot_s8s8_vnni(__m256i a, __m256i b) {
    return dot_u8s8_vnni(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

void th_avx512_dot_q4_0(int64_t n, float *s, const void *vw, const void *va) {
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

void th_avx512_dot_q4_1(int64_t n, float *s, const void *vw, const void *va) {
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

void th_avx512_dot_q8_0(int64_t n, float *s, const void *vw, const void *va) {
    const th_block_q8_0 *w = vw;
    const th_block_q8_0 *a = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TH_QK; i++) {
        __m256i p = dot_s8s8_vnni(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(avx2_f16(w[i].d) * avx2_f16(a[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = avx2_hsum_ps(acc);
}

/* ---- Q5_0, Q5_1, IQ4_NL, MXFP4: two blocks per vpdpbusd ---- */

typedef __m512i (*pair_dec_fn)(const void *b0, const void *b1);

/* Q5: nibbles plus the fifth bits, bit j of qh (little-endian u32) for element j. */
AVX512_INLINE __m512i q5_pair(const uint8_t *qs0, const uint8_t *qh0, const uint8_t *qs1, const uint8_t *qh1) {
    const __m512i q = avx512_nibbles_2x16(qs0, qs1);
    const __mmask64 hi = (__mmask64)((uint64_t)avx2_u32(qh1) << 32 | avx2_u32(qh0));
    return _mm512_mask_add_epi8(q, hi, q, _mm512_set1_epi8(0x10));
}
AVX512_INLINE __m512i dec_q5_0(const void *b0, const void *b1) {
    const th_block_q5_0 *x0 = b0, *x1 = b1;
    return q5_pair(x0->qs, x0->qh, x1->qs, x1->qh);
}
AVX512_INLINE __m512i dec_q5_1(const void *b0, const void *b1) {
    const th_block_q5_1 *x0 = b0, *x1 = b1;
    return q5_pair(x0->qs, x0->qh, x1->qs, x1->qh);
}
AVX512_INLINE __m512i dec_iq4_nl(const void *b0, const void *b1) {
    const th_block_iq4_nl *x0 = b0, *x1 = b1;
    const __m512i table = _mm512_add_epi8(avx512_iq4nl_table(), _mm512_set1_epi8(127));
    return _mm512_shuffle_epi8(table, avx512_nibbles_2x16(x0->qs, x1->qs));
}
AVX512_INLINE __m512i dec_mxfp4(const void *b0, const void *b1) {
    const th_block_mxfp4 *x0 = b0, *x1 = b1;
    const __m512i table = _mm512_add_epi8(avx512_mxfp4_table(), _mm512_set1_epi8(12));
    return _mm512_shuffle_epi8(table, avx512_nibbles_2x16(x0->qs, x1->qs));
}

/* A type: weight block bytes, decoder, offset, scale (f16 d, or MXFP4's E8M0 byte);
 * activation block bytes and where its qs start; has_min: Q5_1 (w.m * a.s per block). */
typedef struct {
    size_t wbytes, abytes, aqs;
    pair_dec_fn dec;
    int offset;
    bool e8m0, has_min;
} lg_type;

/* The integer sums of blocks (w0, a0) in lanes 0..7 and (w1, a1) in lanes 8..15. */
AVX512_INLINE __m512i pair_int(const lg_type t, const char *w0, const char *w1, const char *a0, const char *a1) {
    const __m512i av = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a0 + t.aqs))),
                                          _mm256_loadu_si256((const __m256i *)(a1 + t.aqs)), 1);
    __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), t.dec(w0, w1), av);
    if (t.offset)
        p = _mm512_sub_epi32(p, _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)t.offset), av));
    return p;
}

/* The u16 at byte off of 8 blocks stride bytes apart. */
AVX512_INLINE __m128i u16x8(const char *p, size_t stride, size_t off) {
    __m128i h = _mm_setzero_si128();
#define LANE(k) h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(p + (k) * stride + off), k)
    LANE(0); LANE(1); LANE(2); LANE(3); LANE(4); LANE(5); LANE(6); LANE(7);
#undef LANE
    return h;
}
AVX512_INLINE __m256 f16x8(const char *p, size_t stride, size_t off) { return _mm256_cvtph_ps(u16x8(p, stride, off)); }
/* MXFP4 scales of 8 blocks (the E8M0 byte first in each): avx2_e8m0_half in 8 lanes. */
AVX512_INLINE __m256 e8m0x8(const char *p, size_t stride) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_packus_epi16(_mm_and_si128(u16x8(p, stride, 0), _mm_set1_epi16(0xff)),
                                                            _mm_setzero_si128()));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e); /* e < 2 */
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

/* 8 blocks: their scales d_w * d_a computed in one vector, then 4 pairs. */
AVX512_INLINE __m512 step8(const lg_type t, const char *w, const char *a, __m512 acc, __m256 *summ) {
    const __m256 dw = t.e8m0 ? e8m0x8(w, t.wbytes) : f16x8(w, t.wbytes, 0);
    const __m512 d = _mm512_castps256_ps512(_mm256_mul_ps(dw, f16x8(a, t.abytes, 0)));
    if (t.has_min) *summ = _mm256_fmadd_ps(f16x8(w, t.wbytes, 2), f16x8(a, t.abytes, 2), *summ);
    _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
        const char *w0 = w + 2 * q * t.wbytes, *a0 = a + 2 * q * t.abytes;
        const __m512i p = pair_int(t, w0, w0 + t.wbytes, a0, a0 + t.abytes);
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * q), _mm256_set1_epi32(2 * q + 1), 1);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx, d), acc);
    }
    return acc;
}

/* One block (the tail), its integer sum in lanes 0..7. */
AVX512_INLINE float step1(const lg_type t, const char *w, const char *a) {
    const float dw = t.e8m0 ? avx2_e8m0_half(*(const uint8_t *)w) : avx2_f16(*(const uint16_t *)(const void *)w);
    const __m256i p = _mm512_castsi512_si256(pair_int(t, w, w, a, a));
    float sum = (float)avx2_hsum_epi32(p) * dw * avx2_f16(*(const uint16_t *)(const void *)a);
    if (t.has_min) sum += avx2_f16(*(const uint16_t *)(const void *)(w + 2)) * avx2_f16(*(const uint16_t *)(const void *)(a + 2));
    return sum;
}

AVX512_INLINE float lg_dot(const lg_type t, int64_t n, const void *vw, const void *va) {
    const char *w = vw, *a = va;
    const int64_t nb = n / TH_QK;
    __m512 acc = _mm512_setzero_ps();
    __m256 summ = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        th_prefetch_span(w + i * t.wbytes + TH_PREFETCH_AHEAD, 8 * t.wbytes);
        acc = step8(t, w + i * t.wbytes, a + i * t.abytes, acc, &summ);
    }
    float sum = _mm512_reduce_add_ps(acc) + avx2_hsum_ps(summ);
    for (; i < nb; i++) sum += step1(t, w + i * t.wbytes, a + i * t.abytes);
    return sum;
}

#define LG_TYPE(NAME, ACT, OFFSET, E8M0, MIN)                                                               \
    static const lg_type lg_##NAME = { sizeof(th_block_##NAME), sizeof(th_block_##ACT),                     \
                                       offsetof(th_block_##ACT, qs), dec_##NAME, OFFSET, E8M0, MIN };        \
    void th_avx512_dot_##NAME(int64_t n, float *s, const void *w, const void *a) { *s = lg_dot(lg_##NAME, n, w, a); }

LG_TYPE(q5_0, q8_0, 16, false, false)
LG_TYPE(q5_1, q8_1, 0, false, true)
LG_TYPE(iq4_nl, q8_0, 127, false, false)
LG_TYPE(mxfp4, q8_0, 12, true, false)
