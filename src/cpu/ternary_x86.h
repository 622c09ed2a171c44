/* ternary_x86.h — the x86 dot products of the 1-bit and ternary types (TQ1_0, TQ2_0,
 * Q1_0_G128, IQ1_BN, IQ2_BN; layouts in quant/quant.h, quant/ref_ternary.c), written
 * once with 256-bit vectors and included by avx2/ternary.c and avx512/ternary.c, which
 * define TERN_DOT(acc, u, s): acc (8 x i32) += the sums of 4 products u (unsigned
 * bytes) x s (signed bytes): maddubs + madd on AVX2, one vpdpbusd (AVX-512 VNNI) on
 * the avx512 level, which also defines TERN_AVX512 for its own forms of TQ1_0 (512-bit
 * trit planes) and Q1_0_G128 (mask registers). Include only from files compiled with
 * AVX2 flags (TERN_AVX512: AVX-512 flags).
 *
 * Codes go through the unsigned operand: c in 0..2 (trits) or 0..3 (2-bit codes), and
 * the integer the reference computes, sum (c - 1) a, is sum c a - sum a (TQ*: sum a
 * from the Q8_K block's bsums). A trit is the top base-3 digit of a byte times 3^j mod
 * 256 (byte adds wrap mod 256: x3 = x + x + x); floor(3 v / 256), which is also IQ1_BN's
 * (v + v/2) >> 7, is (v >= 86) + (v >= 171): two signed compares after flipping the
 * top bit. Per block the float steps are the reference's, so only the order of float
 * additions over blocks differs (none for TQ*: one scalar sum in block order). */
#ifndef TH_CPU_TERNARY_X86_H
#define TH_CPU_TERNARY_X86_H

#include "cpu/avx2/util.h"

static inline __m256i tern_trits256(__m256i v) {
    const __m256i x = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
    const __m256i ge86 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8((char)(85 ^ 0x80)));
    const __m256i ge171 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8((char)(170 ^ 0x80)));
    return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(ge86, ge171));
}
static inline __m128i tern_trits128(__m128i v) {
    const __m128i x = _mm_xor_si128(v, _mm_set1_epi8((char)0x80));
    const __m128i ge86 = _mm_cmpgt_epi8(x, _mm_set1_epi8((char)(85 ^ 0x80)));
    const __m128i ge171 = _mm_cmpgt_epi8(x, _mm_set1_epi8((char)(170 ^ 0x80)));
    return _mm_sub_epi8(_mm_setzero_si128(), _mm_add_epi8(ge86, ge171));
}
static inline __m256i tern_x3(__m256i x) { return _mm256_add_epi8(_mm256_add_epi8(x, x), x); }
static inline __m128i tern_x3_128(__m128i x) { return _mm_add_epi8(_mm_add_epi8(x, x), x); }
static inline __m256i tern_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Sum of the 16 bsums of a Q8_K block: sum of its 256 activations. */
static inline int tern_q8k_sum(const th_block_q8_K *y) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)y->bsums);
    return avx2_hsum_epi32(_mm256_madd_epi16(b, _mm256_set1_epi16(1)));
}

/* TQ1_0: qs[0..31] hold elements m + 32t (t = 0..4: trit t), qs[32..47] 160 + m + 16t,
 * qh[0..3] 240 + m + 4t (t = 0..3). */
#ifdef TERN_AVX512
/* 64 trits at once: the 64 bytes v, trit = (v >= 86) + (v >= 171) by two mask compares */
static inline __m512i tern_trits512(__m512i v) {
    const __mmask64 k1 = _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)86));
    const __mmask64 k2 = _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)171));
    const __m512i one = _mm512_set1_epi8(1);
    return _mm512_mask_add_epi8(_mm512_maskz_mov_epi8(k1, one), k2, _mm512_maskz_mov_epi8(k1, one), one);
}
static inline __m512i tern_x3_512(__m512i x) { return _mm512_add_epi8(_mm512_add_epi8(x, x), x); }
/* [lo | hi] of two 256-bit halves */
static inline __m512i tern_cat(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
static inline int tern_tq1_block(const th_block_tq1_0 *b, const th_block_q8_K *y) {
    __m512i acc = _mm512_setzero_si512();
    const __m256i x0 = tern_load(b->qs);
    __m512i x = tern_cat(x0, tern_x3(x0));                       /* trits 0 and 1 of qs[0..31] */
    acc = _mm512_dpbusd_epi32(acc, tern_trits512(x), _mm512_loadu_si512(y->qs));
    x = tern_x3_512(tern_x3_512(x));                              /* trits 2, 3 */
    acc = _mm512_dpbusd_epi32(acc, tern_trits512(x), _mm512_loadu_si512(y->qs + 64));
    x = tern_x3_512(tern_x3_512(x));                              /* trit 4 (low half; the high half unused) */
    const __m128i q16 = _mm_loadu_si128((const __m128i *)(b->qs + 32));
    const __m128i q16b = tern_x3_128(q16), q16c = tern_x3_128(q16b), q16d = tern_x3_128(q16c), q16e = tern_x3_128(q16d);
    /* elements 128..191: trit 4 of qs[0..31] (128..159), then trits 0, 1 of qs[32..47] (160..191) */
    __m512i v = _mm512_inserti64x4(x, _mm256_set_m128i(q16b, q16), 1);
    acc = _mm512_dpbusd_epi32(acc, tern_trits512(v), _mm512_loadu_si512(y->qs + 128));
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    const __m128i h0 = _mm_set1_epi32((int)qh), h1 = tern_x3_128(h0), h2 = tern_x3_128(h1), h3 = tern_x3_128(h2);
    const __m128i hv = _mm_blend_epi32(_mm_blend_epi32(h0, h1, 0x2), _mm_blend_epi32(h2, h3, 0x8), 0xc);
    /* elements 192..255: trits 2, 3, 4 of qs[32..47], then qh */
    v = tern_cat(_mm256_set_m128i(q16d, q16c), _mm256_set_m128i(hv, q16e));
    acc = _mm512_dpbusd_epi32(acc, tern_trits512(v), _mm512_loadu_si512(y->qs + 192));
    return _mm512_reduce_add_epi32(acc) - tern_q8k_sum(y);
}
#else
static inline int tern_tq1_block(const th_block_tq1_0 *b, const th_block_q8_K *y) {
    __m256i acc = _mm256_setzero_si256();
    __m256i x = tern_load(b->qs);
    for (int t = 0; t < 5; t++) {
        TERN_DOT(acc, tern_trits256(x), tern_load(y->qs + 32 * t));
        x = tern_x3(x);
    }
    __m128i q16 = _mm_loadu_si128((const __m128i *)(b->qs + 32)), tr[5];
    for (int t = 0; t < 5; t++) { tr[t] = tern_trits128(q16); q16 = tern_x3_128(q16); }
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    const __m128i h0 = _mm_set1_epi32((int)qh), h1 = tern_x3_128(h0), h2 = tern_x3_128(h1), h3 = tern_x3_128(h2);
    const __m128i hv = _mm_blend_epi32(_mm_blend_epi32(h0, h1, 0x2), _mm_blend_epi32(h2, h3, 0x8), 0xc);
    TERN_DOT(acc, _mm256_set_m128i(tr[1], tr[0]), tern_load(y->qs + 160));
    TERN_DOT(acc, _mm256_set_m128i(tr[3], tr[2]), tern_load(y->qs + 192));
    TERN_DOT(acc, _mm256_set_m128i(tern_trits128(hv), tr[4]), tern_load(y->qs + 224));
    return avx2_hsum_epi32(acc) - tern_q8k_sum(y);
}
#endif

/* TQ2_0: bits 2l of qs[32h + m] are element 128h + 32l + m. */
static inline int tern_tq2_block(const th_block_tq2_0 *b, const th_block_q8_K *y) {
    __m256i acc = _mm256_setzero_si256();
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i q = tern_load(b->qs + 32 * h);
        TERN_DOT(acc, _mm256_and_si256(q, m3), tern_load(y->qs + 128 * h));
        TERN_DOT(acc, _mm256_and_si256(_mm256_srli_epi16(q, 2), m3), tern_load(y->qs + 128 * h + 32));
        TERN_DOT(acc, _mm256_and_si256(_mm256_srli_epi16(q, 4), m3), tern_load(y->qs + 128 * h + 64));
        TERN_DOT(acc, _mm256_and_si256(_mm256_srli_epi16(q, 6), m3), tern_load(y->qs + 128 * h + 96));
    }
    return avx2_hsum_epi32(acc) - tern_q8k_sum(y);
}

#define TERN_TQ_DOT(NAME, BLOCK_T, BLOCK_FN)                                               \
    static void NAME(int64_t n, float *s, const void *w, const void *act) {                  \
        const BLOCK_T *x = w;                                                                \
        const th_block_q8_K *y = act;                                                        \
        float sum = 0.0f;                                                                    \
        for (int64_t i = 0; i < n / TH_QK_K; i++) {                                          \
            th_prefetch_span((const char *)&x[i] + TH_PREFETCH_AHEAD, sizeof(BLOCK_T));      \
            sum += (float)BLOCK_FN(&x[i], &y[i]) * (avx2_f16(x[i].d) * y[i].d);              \
        }                                                                                    \
        *s = sum;                                                                            \
    }

/* sum over 32 signed bytes a (8 x i32 lanes) */
static inline __m256i tern_sum_a(__m256i a) {
    __m256i acc = _mm256_setzero_si256();
    TERN_DOT(acc, _mm256_set1_epi8(1), a);
    return acc;
}

/* Q1_0_G128 . Q8_0: per 32-block, sum(+-a) = sum(a with the sign of the bit: set +);
 * with AVX-512 (TERN_AVX512) the 32 bits are a mask register: 2 sum_set(a) - sum(a). */
static inline void tern_q1_dot(int64_t n, float *s, const void *w, const void *act) {
#ifdef TERN_AVX512
    const th_block_q1_0_g128 *xx = w;
    const th_block_q8_0 *yy = act;
    /* per 128-block: the 4 sub-block sums side by side (one reduction), their 4 activation
     * scales in one conversion */
    __m128 acc4 = _mm_setzero_ps();
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / TH_QK1; i++) {
        th_prefetch_span((const char *)&xx[i] + TH_PREFETCH_AHEAD, sizeof xx[i]);
        const th_block_q8_0 *a = &yy[4 * i];
        __m256i is[4];
        for (int h = 0; h < 4; h++) {
            uint32_t bits;
            memcpy(&bits, xx[i].qs + 4 * h, 4);
            const __m256i av = tern_load(a[h].qs);
            const __m256i sv = _mm256_mask_blend_epi8((__mmask32)bits, _mm256_sub_epi8(_mm256_setzero_si256(), av), av);
            is[h] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, sv);
        }
        const __m128 da = _mm_cvtph_ps(_mm_setr_epi16((short)a[0].d, (short)a[1].d, (short)a[2].d, (short)a[3].d, 0, 0, 0, 0));
        const __m128 sc = _mm_mul_ps(da, _mm_set1_ps(avx2_f16(xx[i].d)));
        acc4 = _mm_fmadd_ps(_mm_cvtepi32_ps(avx2_reduce4(is[0], is[1], is[2], is[3])), sc, acc4);
    }
    __m128 t = _mm_add_ps(acc4, _mm_movehl_ps(acc4, acc4));
    *s = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
    return;
#endif
    const th_block_q1_0_g128 *x = w;
    const th_block_q8_0 *y = act;
    __m256 acc = _mm256_setzero_ps();
    const __m256i one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / TH_QK1; i++) {
        th_prefetch_span((const char *)&x[i] + TH_PREFETCH_AHEAD, sizeof x[i]);
        const float dw = avx2_f16(x[i].d);
        for (int h = 0; h < 4; h++) {
            const th_block_q8_0 *a = &y[4 * i + h];
            const __m256i sgn = _mm256_or_si256(_mm256_xor_si256(avx2_bits32(x[i].qs + 4 * h), _mm256_set1_epi8(-1)), one);
            __m256i is = _mm256_setzero_si256();
            TERN_DOT(is, one, _mm256_sign_epi8(tern_load(a->qs), sgn));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw * avx2_f16(a->d)), acc);
        }
    }
    *s = avx2_hsum_ps(acc);
}

/* IQ2_BN . Q8_0: half h of a block (elements 32h..32h+31) is bits 4h and 4h + 2 of qs[0..15]. */
static inline void tern_iq2bn_dot(int64_t n, float *s, const void *w, const void *act) {
    float scale;
    memcpy(&scale, w, 4);
    const th_block_iq2_bn *x = (const th_block_iq2_bn *)((const uint8_t *)w + 4);
    const th_block_q8_0 *y = act;
    __m256 acc = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / TH_QKBN; i++) {
        th_prefetch_span((const char *)&x[i] + TH_PREFETCH_AHEAD, sizeof x[i]);
        const __m128i q = _mm_loadu_si128((const __m128i *)x[i].qs);
        const __m256i qq = _mm256_set_m128i(_mm_srli_epi16(q, 2), q);
        for (int h = 0; h < 2; h++) {
            const th_block_q8_0 *a = &y[2 * i + h];
            const __m256i c = _mm256_and_si256(_mm256_srli_epi16(qq, 4 * h), m3), av = tern_load(a->qs);
            __m256i is = _mm256_setzero_si256();
            TERN_DOT(is, c, av);
            is = _mm256_sub_epi32(is, tern_sum_a(av));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(avx2_f16(a->d)), acc);
        }
    }
    *s = scale * avx2_hsum_ps(acc);
}

/* IQ1_BN . Q8_0: element 16i + r is trit r % 5 of byte 3i + r / 5 (r < 15) or trit i of
 * byte 12; per half, a shuffle gathers each element's byte, a per-byte multiply by
 * 3^(4-j) mod 256 (16-bit multiplies of the even and the odd bytes) brings its trit to
 * the top. */
static inline void tern_iq1bn_tables(int h, __m256i *idx, __m256i *mlo, __m256i *mhi) {
    static const uint8_t mult[5] = { 81, 27, 9, 3, 1 };
    uint8_t ix[32];
    uint16_t lo[16], hi[16];
    for (int k = 0; k < 32; k++) {
        const int e = 32 * h + k, i = e / 16, r = e % 16;
        ix[k] = (uint8_t)(r < 15 ? 3 * i + r / 5 : 12);
        const uint8_t m = r < 15 ? mult[r % 5] : mult[i];
        if (k % 2 == 0) lo[k / 2] = m; else hi[k / 2] = m;
    }
    *idx = _mm256_loadu_si256((const __m256i *)ix);
    *mlo = _mm256_loadu_si256((const __m256i *)lo);
    *mhi = _mm256_loadu_si256((const __m256i *)hi);
}
static inline void tern_iq1bn_dot(int64_t n, float *s, const void *w, const void *act) {
    uint16_t d16;
    memcpy(&d16, w, 2);
    const th_block_iq1_bn *x = (const th_block_iq1_bn *)((const uint8_t *)w + 2);
    const th_block_q8_0 *y = act;
    __m256i idx[2], mlo[2], mhi[2];
    tern_iq1bn_tables(0, &idx[0], &mlo[0], &mhi[0]);
    tern_iq1bn_tables(1, &idx[1], &mlo[1], &mhi[1]);
    const __m256i lo8 = _mm256_set1_epi16(0x00ff);
    __m256 acc = _mm256_setzero_ps();
    const int64_t nb = n / TH_QKBN;
    for (int64_t i = 0; i < nb; i++) {
        __m128i raw;
        if (i + 1 < nb) {
            raw = _mm_loadu_si128((const __m128i *)&x[i]);   /* 3 bytes of the next block come along, unused */
        } else {   /* the row's last block: 13 bytes only (a copy; only here, it stalls store forwarding) */
            uint8_t tmp[16] = { 0 };
            memcpy(tmp, &x[i], sizeof x[i]);
            raw = _mm_loadu_si128((const __m128i *)tmp);
        }
        const __m256i b = _mm256_set_m128i(raw, raw);
        for (int h = 0; h < 2; h++) {
            const __m256i g = _mm256_shuffle_epi8(b, idx[h]);
            const __m256i ve = _mm256_and_si256(_mm256_mullo_epi16(g, mlo[h]), lo8);
            const __m256i vo = _mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(g, 8), mhi[h]), 8);
            const __m256i c = tern_trits256(_mm256_or_si256(ve, vo));
            const th_block_q8_0 *a = &y[2 * i + h];
            const __m256i av = tern_load(a->qs);
            __m256i is = _mm256_setzero_si256();
            TERN_DOT(is, c, av);
            is = _mm256_sub_epi32(is, tern_sum_a(av));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(avx2_f16(a->d)), acc);
        }
    }
    *s = avx2_f16(d16) * avx2_hsum_ps(acc);
}

#endif
