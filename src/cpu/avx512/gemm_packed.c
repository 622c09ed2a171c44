/* gemm_packed.c (avx512) — AVX-512 VNNI gemm on the 8-row interleaved weights of
 * quant/repack.c (layouts described there and in avx2/gemm_packed.c; the same here).
 *
 * 16 rows per zmm: two adjacent 8-row groups (rows r and r + 8, whose blocks lie at
 * w + r * ws and w + (r + 8) * ws) are joined by a 256-bit load and vinserti64x4, so
 * 32-bit lane i is row r + i; one vpdpbusd with the activation's 4 bytes broadcast
 * ({1to16}) adds 4 products to each of the 16 rows. The weight codes are the unsigned
 * operand:
 *   Q4_0  codes 0..15; the offset 8 comes off through the accumulator's start value
 *         -8 * sum(a) of the block (side table per activation row and block);
 *   Q8_0  codes xor 0x80 (w + 128, unsigned); -128 * sum(a) likewise;
 *   Q4_K  per 32-element sub-block the sums of its two 16-element halves (each fits in
 *         16 bits: 16 * 15 * 128 < 2^15) are merged into the two 16-bit halves of each
 *         lane, so one vpdpwssd with the row's scale in both halves adds
 *         scale * (sub-block sum) exactly; mins times the activation's 32-element sums
 *         (side table) likewise by vpdpwssd;
 *   Q6_K  6-bit codes rebuilt from ql and qh; the offset 32 comes off through the
 *         start values -32 * sum(a) of each 8-element sum (side table), which then fit
 *         in 16 bits, so two of them are scaled and added by vpdpwssd as for Q4_K;
 *   IQ4_XS  code-book values + 128 by vpshufb; the offset comes off through the start
 *         value -128 * sum(a) of each sub-block (side table), the exact sub-block sum
 *         then times the row's signed scale by vpmulld.
 * Every result is the reference's integer block (or super-block) sum scaled in f32;
 * only the order of the f32 additions differs from the vec_dot path.
 *
 * Tiles of 16 rows x NC activation rows: NC = 8 for batches (4 for a rest of 2..4
 * rows), 1 for decode, which also prefetches both weight streams ahead (kernels.h).
 * A range with an odd number of 8-row groups ends with the last group read as both
 * halves and half stored. */
#include "cpu/avx512/util.h"
#include "cpu/gemm_packed.h"
#include "cpu/repack.h"
#include <string.h>

static inline __m512i bcast32(const void *p) { int32_t v; memcpy(&v, p, 4); return _mm512_set1_epi32(v); }

/* 32 bytes at a (rows 0..7 of the first group) and at b (of the second group). */
static inline __m512i join256(const uint8_t *a, const uint8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}
/* The 8 f16 at a and the 8 at b as 16 f32. */
static inline __m512 join_f16(const uint8_t *a, const uint8_t *b) {
    __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                        _mm_loadu_si128((const __m128i *)b), 1);
    return _mm512_cvtph_ps(h);
}
/* The 8 bytes at a and the 8 at b as 16 bytes. */
static inline __m128i join64(const uint8_t *a, const uint8_t *b) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)a), _mm_loadl_epi64((const __m128i *)b));
}

/* acc + u (unsigned bytes) x the 4 signed bytes at p, broadcast: the memory operand
 * with {1to16} (GCC 12 does not fold _mm512_set1_epi32 of a load into vpdpbusd, and
 * the separate vpbroadcastd cost ~20 % in bench_kernels). */
static inline __m512i dpbusd_b(__m512i acc, __m512i u, const void *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)p));
    return acc;
}

enum { NCMAX = 8 };

/* Per activation block of Q4_0 / Q8_0: its scale and the start value of the block's
 * integer sum (-offset * sum of its codes). */
typedef struct { float d; int32_t start; } q8_0_act;

static inline int32_t q8_0_sum(const th_block_q8_0 *a) {
    __m256i v = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)a->qs));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1)));
}

/* Side tables of activation rows [c0, c1) (row c's at tab + (c - c0) * nblk entries)
 * for a weight code offset of 8 (Q4_0) or 128 (Q8_0 after the xor). */
static inline void q8_0_prep(int32_t offset, int64_t nblk, const char *x, size_t xs, int64_t c0, int64_t c1, void *tabv) {
    q8_0_act *tab = tabv;
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_0 *a = (const th_block_q8_0 *)(x + (size_t)c * xs);
        q8_0_act *t = tab + (c - c0) * nblk;
        for (int64_t b = 0; b < nblk; b++) {
            t[b].d = _cvtsh_ss(a[b].d);
            t[b].start = -offset * q8_0_sum(&a[b]);
        }
    }
}
static void q4_0_prep(int64_t nblk, const char *x, size_t xs, int64_t c0, int64_t c1, void *tab) {
    q8_0_prep(8, nblk, x, xs, c0, c1, tab);
}
static void q8_0_prep128(int64_t nblk, const char *x, size_t xs, int64_t c0, int64_t c1, void *tab) {
    q8_0_prep(128, nblk, x, xs, c0, c1, tab);
}

enum { Q40X8_BLOCK = 144, Q80X8_BLOCK = 272 };

/* The 8 code registers of a 32-element block of 16 rows: g[k] = elements 4k..4k+3
 * (unsigned). Q4_0: low and high nibbles of 4 registers; Q8_0: 8 registers xor 0x80. */
static inline void q4_0x16_codes(const uint8_t *pa, const uint8_t *pb, __m512i g[8]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        __m512i r = join256(pa + 16 + 32 * k, pb + 16 + 32 * k);
        g[k] = _mm512_and_si512(r, m4);
        g[k + 4] = _mm512_and_si512(_mm512_srli_epi16(r, 4), m4);
    }
}
static inline void q8_0x16_codes(const uint8_t *pa, const uint8_t *pb, __m512i g[8]) {
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
        g[k] = _mm512_xor_si512(join256(pa + 16 + 32 * k, pb + 16 + 32 * k), _mm512_set1_epi8((char)0x80));
}

/* 16 rows x NC activation rows of Q4_0 (Q8 = 0) or Q8_0 (Q8 = 1). */
static inline __attribute__((always_inline)) void legacy_x16_tile(const int Q8, const int NC, int64_t nblk,
                                                               const uint8_t *wa, const uint8_t *wb,
                                                               const char *const x[NCMAX],
                                                               const void *const aux[NCMAX], __m512 out[NCMAX]) {
    const int64_t bs = Q8 ? Q80X8_BLOCK : Q40X8_BLOCK;
    __m512 acc[NCMAX];
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nblk; b++) {
        const uint8_t *pa = wa + b * bs, *pb = wb + b * bs;
        if (NC == 1) {
            th_prefetch_span(pa + TH_PREFETCH_AHEAD, (size_t)bs);
            th_prefetch_span(pb + TH_PREFETCH_AHEAD, (size_t)bs);
        }
        __m512i g[8];
        if (Q8) q8_0x16_codes(pa, pb, g);
        else q4_0x16_codes(pa, pb, g);
        const __m512 dw = join_f16(pa, pb);
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
            const int8_t *aq = ((const th_block_q8_0 *)x[j])[b].qs;
            const q8_0_act *t = (const q8_0_act *)aux[j] + b;
            __m512i s = _mm512_set1_epi32(t->start);
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) s = dpbusd_b(s, g[k], aq + 4 * k);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(t->d)), acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) out[j] = acc[j];
}
static inline __attribute__((always_inline)) void q4_0x16_tile(const int NC, int64_t nblk, const uint8_t *wa,
                                                               const uint8_t *wb, const char *const x[NCMAX],
                                                               const void *const aux[NCMAX], __m512 out[NCMAX]) {
    legacy_x16_tile(0, NC, nblk, wa, wb, x, aux, out);
}
static inline __attribute__((always_inline)) void q8_0x16_tile(const int NC, int64_t nblk, const uint8_t *wa,
                                                               const uint8_t *wb, const char *const x[NCMAX],
                                                               const void *const aux[NCMAX], __m512 out[NCMAX]) {
    legacy_x16_tile(1, NC, nblk, wa, wb, x, aux, out);
}

/* ---- Q4_K ---- */

enum { Q4KX8_SB = 8 * TH_Q4_K_PACKED_BYTES };

/* Per activation super-block: its scale and the 32-element sums of sub-blocks 2p, 2p+1
 * as a 16-bit pair (p < 4), for the mins. */
typedef struct { float d; int32_t pair[4]; } q4_K_act;

static void q4_K_prep(int64_t nsb, const char *x, size_t xs, int64_t c0, int64_t c1, void *tabv) {
    q4_K_act *tab = tabv;
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_K *a = (const th_block_q8_K *)(x + (size_t)c * xs);
        q4_K_act *t = tab + (c - c0) * nsb;
        for (int64_t b = 0; b < nsb; b++) {
            t[b].d = a[b].d;
            const __m128i s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[b].bsums),
                                             _mm_loadu_si128((const __m128i *)(a[b].bsums + 8)));
            _mm_storeu_si128((__m128i *)t[b].pair, s);
        }
    }
}

/* Per 32-bit lane: the low 16 bits of lo, then those of hi (one vpshufb merging hi's
 * bytes 0, 1 into bytes 2, 3 of lo). */
static inline __m512i join16(__m512i lo, __m512i hi) {
    const __m512i up = _mm512_set4_epi32(0x0d0c0000, 0x09080000, 0x05040000, 0x01000000);
    return _mm512_mask_shuffle_epi8(lo, (__mmask64)0xccccccccccccccccULL, hi, up);
}

/* The 16 rows' scales of sub-block c, each in both 16-bit halves of its lane. */
static inline __m512i q4_Kx16_scales(const uint8_t *pa, const uint8_t *pb, int c) {
    const __m512i s = _mm512_cvtepu8_epi32(join64(pa + 32 + 8 * c, pb + 32 + 8 * c));
    return _mm512_or_si512(s, _mm512_slli_epi32(s, 16));
}

static inline __attribute__((always_inline)) void q4_Kx16_tile(const int NC, int64_t nsb, const uint8_t *wa,
                                                               const uint8_t *wb, const char *const x[NCMAX],
                                                               const void *const aux[NCMAX], __m512 out[NCMAX]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[NCMAX];
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *pa = wa + sb * Q4KX8_SB, *pb = wb + sb * Q4KX8_SB;
        if (NC == 1) {
            th_prefetch_span(pa + TH_PREFETCH_AHEAD, Q4KX8_SB);
            th_prefetch_span(pb + TH_PREFETCH_AHEAD, Q4KX8_SB);
        }
        __m512i sumi[NCMAX], mins[NCMAX];
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) sumi[j] = mins[j] = _mm512_setzero_si512();
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            __m512i g[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                const int o = 160 + 256 * (c / 2) + 32 * k;
                __m512i r = join256(pa + o, pb + o);
                g[k] = _mm512_and_si512(c & 1 ? _mm512_srli_epi16(r, 4) : r, m4);
            }
            const __m512i sc = q4_Kx16_scales(pa, pb, c);
            _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
                const int8_t *aq = ((const th_block_q8_K *)x[j])[sb].qs + 32 * c;
                __m512i lo = dpbusd_b(_mm512_setzero_si512(), g[0], aq);
                __m512i hi = dpbusd_b(_mm512_setzero_si512(), g[4], aq + 16);
                _Pragma("GCC unroll 4") for (int k = 1; k < 4; k++) {
                    lo = dpbusd_b(lo, g[k], aq + 4 * k);
                    hi = dpbusd_b(hi, g[k + 4], aq + 16 + 4 * k);
                }
                sumi[j] = _mm512_dpwssd_epi32(sumi[j], join16(lo, hi), sc);
            }
        }
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
            const __m512i mn = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(pa + 96 + 16 * p))),
                _mm_loadu_si128((const __m128i *)(pb + 96 + 16 * p)), 1));
            _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++)
                mins[j] = _mm512_dpwssd_epi32(mins[j], mn, bcast32(&((const q4_K_act *)aux[j])[sb].pair[p]));
        }
        const __m512 d = join_f16(pa, pb), dmin = join_f16(pa + 16, pb + 16);
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
            const __m512 da = _mm512_set1_ps(((const q4_K_act *)aux[j])[sb].d);
            acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(sumi[j]), acc[j]);
            acc[j] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(mins[j]), acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) out[j] = acc[j];
}

/* ---- IQ4_XS ---- */

enum { IQ4XSX8_SB = 8 * TH_IQ4_XS_PACKED_BYTES };

/* Per activation super-block: its scale and, per sub-block c, the start value
 * -128 * (sum of its 32 codes) that takes the +128 of the weights back off. */
typedef struct { float d; int32_t start[8]; } iq4_xs_act;

static void iq4_xs_prep(int64_t nsb, const char *x, size_t xs, int64_t c0, int64_t c1, void *tabv) {
    iq4_xs_act *tab = tabv;
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_K *a = (const th_block_q8_K *)(x + (size_t)c * xs);
        iq4_xs_act *t = tab + (c - c0) * nsb;
        for (int64_t b = 0; b < nsb; b++) {
            t[b].d = a[b].d;
            for (int s = 0; s < 8; s++) t[b].start[s] = -128 * ((int32_t)a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
        }
    }
}

/* 16 rows: per sub-block, the 8 code registers (values + 128 by vpshufb) times the
 * activation by vpdpbusd from the start value, i.e. the exact signed sub-block sum, then
 * times the row's scale (vpmulld) into the super-block's sum. */
static inline __attribute__((always_inline)) void iq4_xsx16_tile(const int NC, int64_t nsb, const uint8_t *wa,
                                                                 const uint8_t *wb, const char *const x[NCMAX],
                                                                 const void *const aux[NCMAX], __m512 out[NCMAX]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    /* the code book + 128 (flipping the sign bit): unsigned bytes for vpdpbusd */
    const __m512i table = _mm512_xor_si512(avx512_iq4nl_table(), _mm512_set1_epi8((char)0x80));
    __m512 acc[NCMAX];
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *pa = wa + sb * IQ4XSX8_SB, *pb = wb + sb * IQ4XSX8_SB;
        if (NC == 1) {
            th_prefetch_span(pa + TH_PREFETCH_AHEAD, IQ4XSX8_SB);
            th_prefetch_span(pb + TH_PREFETCH_AHEAD, IQ4XSX8_SB);
        }
        __m512i sumi[NCMAX];
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) sumi[j] = _mm512_setzero_si512();
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            __m512i g[8];
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                const int o = 80 + 128 * c + 32 * k;
                const __m512i r = join256(pa + o, pb + o);
                g[k] = _mm512_shuffle_epi8(table, _mm512_and_si512(r, m4));
                g[k + 4] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(r, 4), m4));
            }
            const __m512i sc = _mm512_cvtepi8_epi32(join64(pa + 16 + 8 * c, pb + 16 + 8 * c));
            _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
                const int8_t *aq = ((const th_block_q8_K *)x[j])[sb].qs + 32 * c;
                __m512i s = _mm512_set1_epi32(((const iq4_xs_act *)aux[j])[sb].start[c]);
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                    s = dpbusd_b(s, g[k], aq + 4 * k);
                    s = dpbusd_b(s, g[k + 4], aq + 16 + 4 * k);
                }
                sumi[j] = _mm512_add_epi32(sumi[j], _mm512_mullo_epi32(s, sc));
            }
        }
        const __m512 d = join_f16(pa, pb);
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
            const __m512 da = _mm512_set1_ps(((const iq4_xs_act *)aux[j])[sb].d);
            acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(sumi[j]), acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) out[j] = acc[j];
}

/* ---- Q6_K ---- */

enum { Q6KX8_SB = 8 * sizeof(th_block_q6_K) };

/* 6-bit codes (0..63) of 16 rows, chunk c = 4h + i (elements 32c..32c+31), elements
 * 4k..4k+3: a low nibble from ql (half i & 1, high nibbles for i >= 2), two high bits
 * from qh (bits 2i, 2i+1). */
static inline __m512i q6_Kx16_codes(const uint8_t *pa, const uint8_t *pb, int h, int i, int k) {
    const int ol = 144 + 512 * h + 256 * (i & 1) + 32 * k, oh = 1168 + 256 * h + 32 * k;
    __m512i l = join256(pa + ol, pb + ol), q = join256(pa + oh, pb + oh);
    l = i >= 2 ? _mm512_srli_epi16(l, 4) : l;
    q = i == 0 ? _mm512_slli_epi16(q, 4) : i == 1 ? _mm512_slli_epi16(q, 2) : i == 2 ? q : _mm512_srli_epi16(q, 2);
    /* (l & 0x0f) | (q & 0x30): bit select by the constant 0x0f (imm 0xca: a ? b : c) */
    return _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x0f), l, _mm512_and_si512(q, _mm512_set1_epi8(0x30)), 0xca);
}

/* The 16 rows' int8 scales of sub-block s, each in both 16-bit halves of its lane
 * (bytes 0, 1 of the sign-extended lane twice). */
static inline __m512i q6_Kx16_scales(const uint8_t *pa, const uint8_t *pb, int s) {
    const __m512i twice = _mm512_set4_epi32(0x0d0c0d0c, 0x09080908, 0x05040504, 0x01000100);
    return _mm512_shuffle_epi8(_mm512_cvtepi8_epi32(join64(pa + 16 + 8 * s, pb + 16 + 8 * s)), twice);
}

/* Per activation super-block: -32 x the sum of each 8 consecutive codes (int16: at
 * most 32 * 8 * 128), the start values of the 8-element sums below. */
typedef struct { int16_t start[32]; } q6_K_act;

static void q6_K_prep(int64_t nsb, const char *x, size_t xs, int64_t c0, int64_t c1, void *tabv) {
    q6_K_act *tab = tabv;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_K *a = (const th_block_q8_K *)(x + (size_t)c * xs);
        q6_K_act *t = tab + (c - c0) * nsb;
        for (int64_t b = 0; b < nsb; b++)
            for (int q = 0; q < 4; q++) {
                /* sums of 8 bytes a + 128 (vpsadbw), minus 8 * 128, times -32 */
                __m512i s = _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(a[b].qs + 64 * q), flip), _mm512_setzero_si512());
                s = _mm512_sub_epi64(_mm512_set1_epi64(32 * 8 * 128), _mm512_slli_epi64(s, 5));
                _mm_storeu_si128((__m128i *)(t[b].start + 8 * q), _mm512_cvtepi64_epi16(s));
            }
    }
}

/* Q6_K x16: per 8 elements the sum of (code - 32) x a fits in 16 bits (|sum| <= 8 * 32 *
 * 127 < 2^15: the Q8_K quantizers map the largest magnitude to -127, so no a is -128), so
 * each 16-element sub-block's two 8-element sums go into the halves of a lane (started
 * at -32 x sum(a) from the side table: only their low 16 bits are kept, so the 32-bit
 * start value may hold the next entry above) and one vpdpwssd with the row's scale in
 * both halves adds scale x (sub-block sum) exactly. */
static inline __attribute__((always_inline)) void q6_Kx16_tile(const int NC, int64_t nsb, const uint8_t *wa,
                                                               const uint8_t *wb, const char *const x[NCMAX],
                                                               const void *const aux[NCMAX], __m512 out[NCMAX]) {
    __m512 acc[NCMAX];
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *pa = wa + sb * Q6KX8_SB, *pb = wb + sb * Q6KX8_SB;
        if (NC == 1) {
            th_prefetch_span(pa + TH_PREFETCH_AHEAD, Q6KX8_SB);
            th_prefetch_span(pb + TH_PREFETCH_AHEAD, Q6KX8_SB);
        }
        const th_block_q8_K *a[NCMAX];
        const int16_t *st[NCMAX];
        __m512i sumi[NCMAX];
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
            a[j] = (const th_block_q8_K *)x[j] + sb;
            st[j] = ((const q6_K_act *)aux[j])[sb].start;
            sumi[j] = _mm512_setzero_si512();
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++)
            _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
                __m512i g[4];
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) g[k] = q6_Kx16_codes(pa, pb, c / 4, c % 4, 4 * e + k);
                const __m512i sc = q6_Kx16_scales(pa, pb, 2 * c + e);
                const int s8 = 4 * c + 2 * e; /* first 8-element group of the sub-block */
                _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
                    const int8_t *aq = a[j]->qs + 8 * s8;
                    __m512i lo = dpbusd_b(bcast32(st[j] + s8), g[0], aq);
                    __m512i hi = dpbusd_b(bcast32(st[j] + s8 + 1), g[2], aq + 8);
                    lo = dpbusd_b(lo, g[1], aq + 4);
                    hi = dpbusd_b(hi, g[3], aq + 12);
                    sumi[j] = _mm512_dpwssd_epi32(sumi[j], join16(lo, hi), sc);
                }
            }
        const __m512 d = join_f16(pa, pb);
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++)
            acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[j]->d)), _mm512_cvtepi32_ps(sumi[j]), acc[j]);
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) out[j] = acc[j];
}

/* ---- the walk ---- */

typedef void (*tile_fn)(int64_t nblk, const uint8_t *wa, const uint8_t *wb, const char *const x[NCMAX],
                        const void *const aux[NCMAX], __m512 out[NCMAX]);
/* Fills the side tables of activation rows [c0, c1): row c's at tab + (c - c0) * stride bytes. */
typedef void (*prep_fn)(int64_t nblk, const char *x, size_t xs, int64_t c0, int64_t c1, void *tab);

typedef struct {
    tile_fn tile8, tile4, tile1; /* 5..8, 2..4 and 1 activation rows */
    int64_t block;               /* elements per weight block */
    prep_fn prep;                /* NULL: no side table */
    size_t prep_bytes;           /* side-table bytes per activation block */
} packed_kind;

/* Noinline entry points of an always-inline tile for NC columns; the walk calls them
 * through the kind's pointers (the tiles are register-heavy: inlined into the walk
 * they would spill). */
#define TILE_ENTRY(tile, NC)                                                                                   \
    static __attribute__((noinline)) void tile##_##NC(int64_t nblk, const uint8_t *wa, const uint8_t *wb,     \
                                                      const char *const x[NCMAX], const void *const aux[NCMAX], \
                                                      __m512 out[NCMAX]) {                                     \
        tile(NC, nblk, wa, wb, x, aux, out);                                                                   \
    }

/* Rows [r0, r1) (multiples of 8) of a packed matrix whose row r starts at w + r * ws. */
static void gemm_walk(const packed_kind *kd, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,
                      int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    const int64_t nblk = n / kd->block;
    const size_t stride = kd->prep_bytes * (size_t)nblk;
    const int64_t chunk = th_packed_chunk_rows(stride);
    _Alignas(64) char tab[TH_PACKED_TAB_BYTES + 64]; /* + 64: the Q6_K tile reads 2 bytes past its last entry */
    for (int64_t c0 = 0; c0 < nb; c0 += chunk) {
        const int64_t c1 = TH_MIN(nb, c0 + chunk);
        if (kd->prep) kd->prep(nblk, x, xs, c0, c1, tab);
        for (int64_t r = r0; r < r1; r += 16) {
            const uint8_t *wa = (const uint8_t *)w + (size_t)r * ws;
            const int64_t rm = TH_MIN(16, r1 - r);
            const uint8_t *wb = rm > 8 ? wa + 8 * ws : wa;
            const __mmask16 keep = (__mmask16)((1u << rm) - 1);
            for (int64_t c = c0; c < c1;) {
                const int cn = (int)TH_MIN(NCMAX, c1 - c);
                const char *xp[NCMAX];
                const void *ap[NCMAX];
                for (int j = 0; j < NCMAX; j++) {
                    const int64_t cj = c + TH_MIN(j, cn - 1);
                    xp[j] = (const char *)x + (size_t)cj * xs;
                    ap[j] = tab + (size_t)(cj - c0) * stride;
                }
                __m512 out[NCMAX];
                (cn > 4 ? kd->tile8 : cn > 1 ? kd->tile4 : kd->tile1)(nblk, wa, wb, xp, ap, out);
                for (int j = 0; j < cn; j++) _mm512_mask_storeu_ps(y + (c + j) * ys + r, keep, out[j]);
                c += cn;
            }
        }
    }
}

#define PACKED_GEMM(name, tile, blk, prep, prep_bytes)                                                         \
    TILE_ENTRY(tile, 8)                                                                                        \
    TILE_ENTRY(tile, 4)                                                                                        \
    TILE_ENTRY(tile, 1)                                                                                        \
    void name(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,         \
              size_t xs, float *y, int64_t ys) {                                                               \
        static const packed_kind kd = { tile##_8, tile##_4, tile##_1, blk, prep, prep_bytes };                 \
        gemm_walk(&kd, n, r0, r1, w, ws, nb, x, xs, y, ys);                                                    \
    }

PACKED_GEMM(th_avx512_packed_q4_0, q4_0x16_tile, TH_QK, q4_0_prep, sizeof(q8_0_act))
PACKED_GEMM(th_avx512_packed_q8_0, q8_0x16_tile, TH_QK, q8_0_prep128, sizeof(q8_0_act))
PACKED_GEMM(th_avx512_packed_q4_K, q4_Kx16_tile, TH_QK_K, q4_K_prep, sizeof(q4_K_act))
PACKED_GEMM(th_avx512_packed_q6_K, q6_Kx16_tile, TH_QK_K, q6_K_prep, sizeof(q6_K_act))
PACKED_GEMM(th_avx512_packed_iq4_xs, iq4_xsx16_tile, TH_QK_K, iq4_xs_prep, sizeof(iq4_xs_act))
