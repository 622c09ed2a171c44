/* gemm_packed.c (avx2) — AVX2 gemm on weights repacked at load time (quant/repack.c) into
 * groups of 8 interleaved rows, so the kernel needs no transpose and no gathers:
 *
 *   Q4_0 x8, per 32-element block (144 bytes, as 8 original blocks):
 *     16 bytes: the 8 rows' d (f16), then 4 x 32 bytes R_k (k < 4): the 8 rows'
 *     qs[4k..4k+3], row i at bytes 4i..4i+3. R_k & 15 holds elements 4k..4k+3 of every
 *     row, R_k >> 4 elements 16+4k..16+4k+3: 32-bit lane i is row i, so one vpmaddubsw
 *     per 4 activation values (broadcast) and one vpmaddwd give 8 rows' sums at once.
 *
 *   Q8_0 x8, per 32-element block (272 bytes, as 8 original blocks):
 *     16 bytes: the 8 rows' d (f16), then 8 x 32 bytes R_k (k < 8): the 8 rows'
 *     qs[4k..4k+3], row i at bytes 4i..4i+3 (signed: |w| and the sign moved onto the
 *     activation for vpmaddubsw, each product pair widened at once by vpmaddwd).
 *
 *   Q4_K x8, per 256-element super-block (8 x 148 bytes; see quant/repack.c): d and dmin of
 *     the 8 rows, their sub-block scales and mins as bytes, then the codes as for Q4_0
 *     (per 32-byte half of qs, 8 registers of 4-byte groups). vpmaddwd with each row's
 *     scale (expanded to 16-bit pairs by one vpshufb) weighs the sub-block sums; mins
 *     times the activation's 32-element sums come from its 16-element bsums.
 *
 *   Q6_K x8, per 256-element super-block (8 x 210 bytes; see quant/repack.c): d of the 8 rows,
 *     their 16 sub-block scales as bytes, ql and qh in 4-byte groups of the 8 rows; the
 *     6-bit codes are rebuilt per register (low nibble | two high bits), pairs of products
 *     summed in 16 bits and weighed by the sub-block scale; the offset 32 comes off
 *     through the activation's bsums.
 *
 *   IQ4_XS x8, per 256-element super-block (8 x 138 bytes; see quant/repack.c): d of the
 *     8 rows, their 8 sub-block scales as signed bytes, the codes as for Q4_0 per
 *     16-byte sub-block of qs; values from the code book by vpshufb, signed products by
 *     the sign trick (|w| x sign-moved activation), weighed per register by vpmaddwd.
 *
 * Tiles of 8 rows x 4 activation rows for batches, 8 rows x 1 for single rows (decode;
 * these also prefetch the weight stream ahead, see kernels.h).
 * The Q4_0 offset 8 is removed with the activation block sums, as in gemm_x8.c.
 * Results are the reference's integer block sums scaled in f32 (only the order of
 * the f32 additions differs from the vec_dot path). */
#include "cpu/avx2/util.h"
#include "cpu/gemm_packed.h"
#include "cpu/repack.h"

static inline __m256i bcast32(const int8_t *p) { int32_t v; memcpy(&v, p, 4); return _mm256_set1_epi32(v); }

enum { Q40X8_BLOCK = 144 };

/* The 8 code registers of one packed Q4_0 block: g[k] = elements 4k..4k+3 of the 8 rows. */
static inline void q4_0x8_codes(const uint8_t *wb, __m256i g[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(wb + 16 + 32 * k));
        g[k] = _mm256_and_si256(r, m4);
        g[k + 4] = _mm256_and_si256(_mm256_srli_epi16(r, 4), m4);
    }
}

/* sum over the 8 groups of the 8 rows' code·activation products (8 x i32) */
static inline __m256i q4_0x8_dot(const __m256i g[8], const int8_t *aq) {
    __m256i p16 = _mm256_maddubs_epi16(g[0], bcast32(aq));
    _Pragma("GCC unroll 8") for (int k = 1; k < 8; k++) p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(g[k], bcast32(aq + 4 * k)));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Per activation block: its scale and 8 x scale x (sum of its codes), the second
 * taking off the Q4_0 offset 8 in f32 (made once per call by q4_0_act_sums). */
typedef struct { float d, s8; } q4_0_act;

/* 8 rows x NC activation rows (NC = 1 or 4, constant after inlining); aux[j] holds the
 * q4_0_act of activation row j's blocks. */
static inline __attribute__((always_inline)) void q4_0x8_tile(const int NC, int64_t nblk, const uint8_t *w,
                                                              const char *const x[4], const void *const aux[4],
                                                              __m256 out[4]) {
    const q4_0_act *as[4];
    _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) as[j] = aux[j];
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t b = 0; b < nblk; b++) {
        const uint8_t *wb = w + b * Q40X8_BLOCK;
        if (NC == 1) th_prefetch_span(wb + TH_PREFETCH_AHEAD, Q40X8_BLOCK);
        __m256i g[8];
        q4_0x8_codes(wb, g);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb));
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
            const th_block_q8_0 *a = (const th_block_q8_0 *)x[j] + b;
            const __m256 sum = _mm256_cvtepi32_ps(q4_0x8_dot(g, a->qs));
            acc[j] = _mm256_fmadd_ps(sum, _mm256_mul_ps(dw, _mm256_set1_ps(as[j][b].d)), acc[j]);
            acc[j] = _mm256_fnmadd_ps(dw, _mm256_set1_ps(as[j][b].s8), acc[j]);
        }
    }
    for (int j = 0; j < NC; j++) out[j] = acc[j];
}

/* The scale and code sum of activation rows [c0, c1) into tab (row c at (c - c0) * nblk). */
static void q4_0_act_sums(int64_t nblk, const char *x, size_t xs, int64_t c0, int64_t c1, void *tabv) {
    q4_0_act *tab = tabv;
    const __m256i ones8 = _mm256_set1_epi8(1);
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_0 *a = (const th_block_q8_0 *)(x + (size_t)c * xs);
        q4_0_act *t = tab + (c - c0) * nblk;
        for (int64_t b = 0; b < nblk; b++) {
            __m256i s = avx2_dot_u8s8(ones8, _mm256_loadu_si256((const __m256i *)a[b].qs));
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
            t[b].d = avx2_f16(a[b].d);
            t[b].s8 = 8.0f * t[b].d * (float)_mm_cvtsi128_si32(h);
        }
    }
}

enum { Q80X8_BLOCK = 272 };

/* The 4-column and 1-column entry points (tile4_fn, tile1_fn below) of an always-inline
 * tile written for NC activation rows; aux[j] is activation row j's side table (see
 * gemm_packed), unused by most tiles. Not inlined into the walk: inlined, the
 * register-heavy tiles (Q6_K, Q8_0) spilled and ran 5-15 % slower in bench_kernels. */
#define TILE_ENTRIES(tile)                                                                           \
    static __attribute__((noinline)) void tile##4(int64_t nblk, const uint8_t *w, const char *const x[4], \
                                                  const void *const aux[4], __m256 out[4]) {           \
        tile(4, nblk, w, x, aux, out);                                                               \
    }                                                                                                \
    static __attribute__((noinline)) __m256 tile##1(int64_t nblk, const uint8_t *w, const char *x,     \
                                                    const void *aux) {                                 \
        const char *xp[4] = { x, x, x, x };                                                          \
        const void *ap[4] = { aux, aux, aux, aux };                                                  \
        __m256 out[4];                                                                               \
        tile(1, nblk, w, xp, ap, out);                                                               \
        return out[0];                                                                               \
    }

/* 8 rows x NC activation rows (NC = 1 or 4, constant after inlining). */
static inline __attribute__((always_inline)) void q8_0x8_tile(const int NC, int64_t nblk, const uint8_t *w,
                                                              const char *const x[4], const void *const aux[4],
                                                              __m256 out[4]) {
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    const __m256i ones16 = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nblk; b++) {
        const uint8_t *wb = w + b * Q80X8_BLOCK;
        if (NC == 1) th_prefetch_span(wb + TH_PREFETCH_AHEAD, Q80X8_BLOCK);
        const th_block_q8_0 *a[4];
        __m256i sum[4];
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
            a[j] = (const th_block_q8_0 *)x[j] + b;
            sum[j] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            const __m256i wk = _mm256_loadu_si256((const __m256i *)(wb + 16 + 32 * k));
            const __m256i aw = _mm256_sign_epi8(wk, wk);
            _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast32(a[j]->qs + 4 * k), wk));
                sum[j] = _mm256_add_epi32(sum[j], _mm256_madd_epi16(p, ones16));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb));
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(avx2_f16(a[j]->d))), acc[j]);
    }
    for (int j = 0; j < NC; j++) out[j] = acc[j];
}

TILE_ENTRIES(q4_0x8_tile)
TILE_ENTRIES(q8_0x8_tile)

enum { Q4KX8_SB = 8 * TH_Q4_K_PACKED_BYTES };

static inline __attribute__((always_inline)) void q4_Kx8_tile(const int NC, int64_t nsb, const uint8_t *w,
                                                              const char *const x[4], const void *const aux[4],
                                                              __m256 out[4]) {
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i dup = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,
                                         4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *wb = w + sb * Q4KX8_SB;
        if (NC == 1) th_prefetch_span(wb + TH_PREFETCH_AHEAD, Q4KX8_SB);
        const th_block_q8_K *a[4];
        __m256i sumi[4];
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
            a[j] = (const th_block_q8_K *)x[j] + sb;
            sumi[j] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            const uint8_t *cq = wb + 160 + 256 * (c / 2);
            __m256i p16[4];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                __m256i r = _mm256_loadu_si256((const __m256i *)(cq + 32 * k));
                __m256i g = _mm256_and_si256(c & 1 ? _mm256_srli_epi16(r, 4) : r, m4);
                _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                    __m256i t = _mm256_maddubs_epi16(g, bcast32(a[j]->qs + 32 * c + 4 * k));
                    p16[j] = k ? _mm256_add_epi16(p16[j], t) : t;
                }
            }
            int64_t sc8;
            memcpy(&sc8, wb + 32 + 8 * c, 8);
            const __m256i sc = _mm256_shuffle_epi8(_mm256_set1_epi64x(sc8), dup);
            _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p16[j], sc));
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 16)));
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
            const int16_t *bs = a[j]->bsums;
            const __m256i pairs = _mm256_castsi128_si256(_mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                                                        _mm_loadu_si128((const __m128i *)(bs + 8))));
            __m256i ms = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
                const __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(wb + 96 + 16 * q)));
                ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mn, _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(q))));
            }
            const __m256 da = _mm256_set1_ps(a[j]->d);
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(ms), acc[j]);
        }
    }
    for (int j = 0; j < NC; j++) out[j] = acc[j];
}

TILE_ENTRIES(q4_Kx8_tile)

enum { Q6KX8_SB = 8 * sizeof(th_block_q6_K) };

/* 6-bit codes (0..63) of chunk c = 4h + i (elements 32c..32c+31), elements 4k..4k+3 of
 * the 8 rows: a low nibble from ql (half g = i & 1, the high nibbles for i >= 2), two
 * high bits from qh (bits 2i, 2i+1). */
static inline __m256i q6_Kx8_codes(const uint8_t *wb, int h, int i, int k) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256i l = _mm256_loadu_si256((const __m256i *)(wb + 144 + 512 * h + 256 * (i & 1) + 32 * k));
    __m256i q = _mm256_loadu_si256((const __m256i *)(wb + 1168 + 256 * h + 32 * k));
    l = _mm256_and_si256(i >= 2 ? _mm256_srli_epi16(l, 4) : l, m4);
    q = i == 0 ? _mm256_slli_epi16(q, 4) : i == 1 ? _mm256_slli_epi16(q, 2) : i == 2 ? q : _mm256_srli_epi16(q, 2);
    return _mm256_or_si256(l, _mm256_and_si256(q, m30));
}

/* The 8 rows' scales of sub-blocks s and t as 16-bit lanes (row i: s, t). */
static inline __m256i q6_Kx8_scales(const uint8_t *wb, int s, int t) {
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(wb + 16 + 8 * s)),
                                                  _mm_loadl_epi64((const __m128i *)(wb + 16 + 8 * t))));
}

/* Q6_K x8: per chunk, pairs of code registers (u8 x s8 products of two fit in 16 bits:
 * 2 * 2 * 63 * 128 < 2^15) weighed by their sub-block scale with vpmaddwd; the code
 * offset 32 comes off through the activation's bsums (32 * sum_s scale_s * bsum_s). */
static inline __attribute__((always_inline)) void q6_Kx8_tile(const int NC, int64_t nsb, const uint8_t *w,
                                                              const char *const x[4], const void *const aux[4],
                                                              __m256 out[4]) {
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *wb = w + sb * Q6KX8_SB;
        if (NC == 1) th_prefetch_span(wb + TH_PREFETCH_AHEAD, Q6KX8_SB);
        const th_block_q8_K *a[4];
        __m256i sumi[4], corr[4];
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
            a[j] = (const th_block_q8_K *)x[j] + sb;
            sumi[j] = corr[j] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            const __m256i s0 = q6_Kx8_scales(wb, 2 * c, 2 * c), s1 = q6_Kx8_scales(wb, 2 * c + 1, 2 * c + 1);
            _Pragma("GCC unroll 4") for (int k = 0; k < 8; k += 2) {
                const __m256i v0 = q6_Kx8_codes(wb, c / 4, c % 4, k), v1 = q6_Kx8_codes(wb, c / 4, c % 4, k + 1);
                _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                    __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(v0, bcast32(a[j]->qs + 32 * c + 4 * k)),
                                                 _mm256_maddubs_epi16(v1, bcast32(a[j]->qs + 32 * c + 4 * k + 4)));
                    sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, k < 4 ? s0 : s1));
                }
            }
        }
        _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) {
            const __m256i sp = q6_Kx8_scales(wb, 2 * m, 2 * m + 1);
            _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                int32_t bp;
                memcpy(&bp, a[j]->bsums + 2 * m, 4);
                corr[j] = _mm256_add_epi32(corr[j], _mm256_madd_epi16(sp, _mm256_set1_epi32(bp)));
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb));
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
            const __m256i s = _mm256_sub_epi32(sumi[j], _mm256_slli_epi32(corr[j], 5));
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a[j]->d)), _mm256_cvtepi32_ps(s), acc[j]);
        }
    }
    for (int j = 0; j < NC; j++) out[j] = acc[j];
}

TILE_ENTRIES(q6_Kx8_tile)

enum { IQ4XSX8_SB = 8 * TH_IQ4_XS_PACKED_BYTES };

/* IQ4_XS x8: the signed values looked up per register; |w| times the activation with
 * w's sign (vpmaddubsw: a pair is at most 2 * 127 * 128 < 2^15), each register's 16-bit
 * pairs weighed by the row's sub-block scale (16-bit, both halves of the lane) with
 * vpmaddwd, so the super-block's integer sum is exact in 32 bits. */
static inline __attribute__((always_inline)) void iq4_xsx8_tile(const int NC, int64_t nsb, const uint8_t *w,
                                                                const char *const x[4], const void *const aux[4],
                                                                __m256 out[4]) {
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i table = avx2_iq4nl_table();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *wb = w + sb * IQ4XSX8_SB;
        if (NC == 1) th_prefetch_span(wb + TH_PREFETCH_AHEAD, IQ4XSX8_SB);
        const th_block_q8_K *a[4];
        __m256i sumi[4];
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
            a[j] = (const th_block_q8_K *)x[j] + sb;
            sumi[j] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            const __m256i sc = q6_Kx8_scales(wb, c, c);   /* same place and form: byte 16 + 8c + i */
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                const __m256i r = _mm256_loadu_si256((const __m256i *)(wb + 80 + 128 * c + 32 * (k & 3)));
                const __m256i v = _mm256_shuffle_epi8(table, _mm256_and_si256(k < 4 ? r : _mm256_srli_epi16(r, 4), m4));
                const __m256i av = _mm256_sign_epi8(v, v);
                const int e = 32 * c + (k < 4 ? 0 : 16) + 4 * (k & 3);
                _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                    const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(bcast32(a[j]->qs + e), v));
                    sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, sc));
                }
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb));
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++)
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a[j]->d)), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
    }
    for (int j = 0; j < NC; j++) out[j] = acc[j];
}

TILE_ENTRIES(iq4_xsx8_tile)

typedef void (*tile4_fn)(int64_t nblk, const uint8_t *w, const char *const x[4], const void *const aux[4],
                         __m256 out[4]);
typedef __m256 (*tile1_fn)(int64_t nblk, const uint8_t *w, const char *x, const void *aux);
/* Fills the side table of activation rows [c0, c1): row c's at tab + (c - c0) * stride bytes. */
typedef void (*prep_fn)(int64_t nblk, const char *x, size_t xs, int64_t c0, int64_t c1, void *tab);

typedef struct {
    tile4_fn tile4;
    tile1_fn tile1;
    int64_t block;      /* elements per weight block */
    prep_fn prep;       /* NULL: no side table */
    size_t prep_bytes;  /* side-table bytes per activation block */
} packed_kind;

/* Rows [r0, r1) (r0 a multiple of 8; r1 a multiple of 8 or the last row) of a packed
 * matrix whose row r starts at w + r * ws (ws = the packed row size). Inlined into each
 * type's entry point, so that the tile calls are direct (and may inline). */
static inline __attribute__((always_inline)) void gemm_packed(const packed_kind *kd, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,
                        int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    const int64_t nblk = n / kd->block;
    const size_t stride = kd->prep_bytes * (size_t)nblk;
    const int64_t chunk = th_packed_chunk_rows(stride);
    _Alignas(64) char tab[TH_PACKED_TAB_BYTES];
    float tmp[8];
    for (int64_t c0 = 0; c0 < nb; c0 += chunk) {
        const int64_t c1 = TH_MIN(nb, c0 + chunk);
        if (kd->prep) kd->prep(nblk, x, xs, c0, c1, tab);
        for (int64_t r = r0; r < r1; r += 8) {
            const uint8_t *wg = (const uint8_t *)w + (size_t)r * ws;
            const int rm = (int)TH_MIN(8, r1 - r);
            for (int64_t c = c0; c < c1;) {
                __m256 out[4];
                int cn = (int)TH_MIN(4, c1 - c);
                const char *xp[4];
                const void *ap[4];
                for (int j = 0; j < 4; j++) {
                    const int64_t cj = c + TH_MIN(j, cn - 1);
                    xp[j] = (const char *)x + (size_t)cj * xs;
                    ap[j] = tab + (size_t)(cj - c0) * stride;
                }
                if (cn >= 2) kd->tile4(nblk, wg, xp, ap, out);
                else out[0] = kd->tile1(nblk, wg, xp[0], ap[0]);
                for (int j = 0; j < cn; j++) {
                    float *dst = y + (c + j) * ys + r;
                    if (rm == 8) { _mm256_storeu_ps(dst, out[j]); continue; }
                    _mm256_storeu_ps(tmp, out[j]);
                    for (int i = 0; i < rm; i++) dst[i] = tmp[i];
                }
                c += cn;
            }
        }
    }
}

#define PACKED_GEMM(name, tile, blk, prep, prep_bytes)                                                        \
    void name(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,        \
              size_t xs, float *y, int64_t ys) {                                                              \
        static const packed_kind kd = { tile##4, tile##1, blk, prep, prep_bytes };                            \
        gemm_packed(&kd, n, r0, r1, w, ws, nb, x, xs, y, ys);                                                 \
    }

PACKED_GEMM(th_avx2_packed_q4_0, q4_0x8_tile, TH_QK, q4_0_act_sums, sizeof(q4_0_act))
PACKED_GEMM(th_avx2_packed_q8_0, q8_0x8_tile, TH_QK, NULL, 0)
PACKED_GEMM(th_avx2_packed_q4_K, q4_Kx8_tile, TH_QK_K, NULL, 0)
PACKED_GEMM(th_avx2_packed_q6_K, q6_Kx8_tile, TH_QK_K, NULL, 0)
PACKED_GEMM(th_avx2_packed_iq4_xs, iq4_xsx8_tile, TH_QK_K, NULL, 0)
