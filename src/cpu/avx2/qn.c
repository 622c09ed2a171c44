/* qn.c (avx2) — qN kernels (n = 2..8; format in quant/qn.h, docs/qn.md): the dot
 * product with Q8_0 activations, a batch gemm that decodes each weight group once
 * for up to 4 activation rows, and the packed gemm (decode and prefill on the 8-row
 * layout, below). th_avx2_fill_qn puts them in the table.
 *
 * Decoding without a shuffle per plane: the 4 bytes of plane p that hold 32 weights are
 * broadcast to every 32-bit lane; lane c keeps bit c of each of its 4 bytes (and +
 * cmpeq: 0 or -1), so byte k of the vector is bit p of weight e(k) = 8 (k % 4) + k / 4.
 * The activations are put in the same order once per block (act_perm: a 4 x 8 byte
 * transpose), so the sum over k is the sum over the weights. The planes are combined
 * by Horner's rule (code = 2 code + bit), then v = 2 code - (2^n - 1), the doubled
 * level, which fits in int8 for n <= 7: isum = sum v a by the sign trick, exactly the
 * reference's integer. For n = 8, q = code - 128 and isum = 2 sum q a + sum a. */
#include "cpu/avx2/util.h"
#include "cpu/gemm_packed.h"
#include "cpu/repack.h"
#include "quant/qn.h"

/* The 32 activation bytes in the weight order e(k) above. */
static inline __m256i act_perm(const int8_t *qs) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i t = _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    const __m256i tr = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm256_shuffle_epi8(t, tr);
}

/* The doubled levels v = 2 code - (2^n - 1) (n <= 7) or q = code - 128 (n = 8) of the 32
 * weights of half h of group g, in the order e(k). */
static inline __attribute__((always_inline)) __m256i qn_half(const int N, const uint8_t *g, int h) {
    const __m256i sel = _mm256_setr_epi32(0x01010101, 0x02020202, 0x04040404, 0x08080808, 0x10101010, 0x20202020,
                                          0x40404040, (int)0x80808080);
    __m256i c = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int p = N - 1; p >= 0; p--) {
        const __m256i b = _mm256_set1_epi32((int)avx2_u32(g + 2 + 8 * p + 4 * h));
        const __m256i m = _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
        c = _mm256_sub_epi8(_mm256_add_epi8(c, c), m);
    }
    if (N == 8) return _mm256_xor_si256(c, _mm256_set1_epi8((char)0x80));
    return _mm256_sub_epi8(_mm256_add_epi8(c, c), _mm256_set1_epi8((char)((1 << N) - 1)));
}

/* The reference's integer isum of one 32-element half (8 int32 lanes to be summed). */
static inline __attribute__((always_inline)) __m256i qn_isum(const int N, __m256i v, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(a, v));
    if (N < 8) return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    const __m256i s = _mm256_maddubs_epi16(_mm256_set1_epi8(1), a);
    return _mm256_add_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(2)), _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
}

static inline __attribute__((always_inline)) void qn_dot(const int N, int64_t n, float *s, const void *w, const void *act) {
    const uint8_t *g = w;
    const th_block_q8_0 *a = act;
    const size_t gb = th_qn_group_bytes(N);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TH_QN_BLOCK; i++, g += gb) {
        const float d = avx2_f16((uint16_t)(g[0] | (g[1] << 8)));
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            const th_block_q8_0 *b = &a[2 * i + h];
            const __m256i is = qn_isum(N, qn_half(N, g, h), act_perm(b->qs));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * avx2_f16(b->d)), acc);
        }
    }
    *s = 0.5f * avx2_hsum_ps(acc);
}

/* Rows [r0, r1) x nb activation rows, up to 4 activation rows per decoded weight group. */
static inline __attribute__((always_inline)) void qn_batch(const int N, int64_t n, int64_t r0, int64_t r1,
                                                           const void *w, size_t ws, int64_t nb, const void *x,
                                                           size_t xs, float *y, int64_t ys) {
    const size_t gb = th_qn_group_bytes(N);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * ws;
        for (int64_t c = 0; c < nb; c += 4) {
            const int cn = (int)TH_MIN(4, nb - c);
            const th_block_q8_0 *a[4];
            __m256 acc[4];
            for (int j = 0; j < 4; j++) {
                a[j] = (const th_block_q8_0 *)((const char *)x + (size_t)(c + TH_MIN(j, cn - 1)) * xs);
                acc[j] = _mm256_setzero_ps();
            }
            const uint8_t *g = row;
            for (int64_t i = 0; i < n / TH_QN_BLOCK; i++, g += gb) {
                const float d = avx2_f16((uint16_t)(g[0] | (g[1] << 8)));
                _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                    const __m256i v = qn_half(N, g, h);
                    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                        const th_block_q8_0 *b = &a[j][2 * i + h];
                        const __m256i is = qn_isum(N, v, act_perm(b->qs));
                        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * avx2_f16(b->d)), acc[j]);
                    }
                }
            }
            for (int j = 0; j < cn; j++) y[(c + j) * ys + r] = 0.5f * avx2_hsum_ps(acc[j]);
        }
    }
}

#define QN_LEVEL(N)                                                                                              \
    static void dot_q##N(int64_t n, float *s, const void *w, const void *a) { qn_dot(N, n, s, w, a); }           \
    static void batch_q##N(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
                           size_t xs, float *y, int64_t ys) {                                                    \
        qn_batch(N, n, r0, r1, w, ws, nb, x, xs, y, ys);                                                        \
    }                                                                                                            \
    TH_GEMM_ENTRY(gemm_q##N, dot_q##N, batch_q##N)
QN_LEVEL(2)
QN_LEVEL(3)
QN_LEVEL(4)
QN_LEVEL(5)
QN_LEVEL(6)
QN_LEVEL(7)
QN_LEVEL(8)

/* ---------------------------------------------------------------- packed gemm
 *
 * On the 8-row layout of quant/repack.c (the AVX-512 one): per packed group, the 8 rows'
 * scales, then per step pair kk and plane p a 64-bit mask whose bit 32h + 4i + e is bit p
 * of row i's code of element 8kk + 4h + e. Its 32-bit half h expands to 32 bytes
 * (broadcast, byte k takes mask byte k / 8, tests bit k % 8), so byte 4i + e is row i's
 * bit; Horner's rule over the planes gives the codes, and maddubs + madd with the 4
 * activation bytes of elements 8kk + 4h .. + 3 broadcast add 4 products to each row's
 * 32-bit lane. isum = 2 S + start per activation block, where S = sum code a and start =
 * -(2^n - 1) sum a for n <= 7 (codes <= 127 are maddubs's unsigned operand), and for
 * n = 8 S = sum (code - 128) a (by the sign trick) and start = sum a: the reference's
 * exact integer. Each group is decoded once for up to 4 activation rows (qp_tile), or,
 * with more rows in the chunk, once for all of them (qp_rows). */
enum { QP_NC = 4 };
typedef struct { float d; int32_t start; } qp_atab;

static inline __m256i qp_expand(uint32_t m) {
    const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                         3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), idx);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

/* Codes (n <= 7) or code - 128 (n = 8) of the 8 rows x 4 elements of step pair kk, half h. */
static inline __attribute__((always_inline)) __m256i qp_codes(const int N, const uint8_t *pg, int kk, int h) {
    __m256i c = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int p = N - 1; p >= 0; p--)
        c = _mm256_sub_epi8(_mm256_add_epi8(c, c), qp_expand(avx2_u32(pg + 16 + 8 * (N * kk + p) + 4 * h)));
    return N == 8 ? _mm256_xor_si256(c, _mm256_set1_epi8((char)0x80)) : c;
}

static inline __attribute__((always_inline)) void qp_prep(const int N, int64_t nblk, const char *x, size_t xs,
                                                          int64_t c0, int64_t c1, qp_atab *tab) {
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_0 *a = (const th_block_q8_0 *)(x + (size_t)c * xs);
        qp_atab *t = tab + (c - c0) * nblk;
        for (int64_t b = 0; b < nblk; b++) {
            int32_t sum = 0;
            for (int j = 0; j < TH_QK; j++) sum += a[b].qs[j];
            t[b].d = avx2_f16(a[b].d);
            t[b].start = N == 8 ? sum : -((1 << N) - 1) * sum;
        }
    }
}

static inline __attribute__((always_inline)) void qp_tile(const int N, const int NC, int64_t ngr, const uint8_t *wg,
                                                          const char *const x[QP_NC], const qp_atab *const t[QP_NC],
                                                          __m256 out[QP_NC]) {
    const int64_t gb8 = 8 * (8 * N + 2);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[QP_NC];
    _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < ngr; b++) {
        const uint8_t *pg = wg + b * gb8;
        if (NC == 1) th_prefetch_span(pg + TH_PREFETCH_AHEAD, (size_t)gb8);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pg));
        _Pragma("GCC unroll 2") for (int hb = 0; hb < 2; hb++) {
            __m256i S[QP_NC];
            _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) S[j] = _mm256_setzero_si256();
            for (int q = 0; q < 4; q++)
                _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                    const __m256i c = qp_codes(N, pg, 4 * hb + q, h);
                    const __m256i u = N == 8 ? _mm256_sign_epi8(c, c) : c;
                    _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                        const th_block_q8_0 *a = (const th_block_q8_0 *)x[j] + 2 * b + hb;
                        __m256i av = _mm256_set1_epi32((int)avx2_u32((const uint8_t *)a->qs + 8 * q + 4 * h));
                        if (N == 8) av = _mm256_sign_epi8(av, c);
                        S[j] = _mm256_add_epi32(S[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, av), ones));
                    }
                }
            _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                const qp_atab *ta = t[j] + 2 * b + hb;
                const __m256i is = _mm256_add_epi32(_mm256_add_epi32(S[j], S[j]), _mm256_set1_epi32(ta->start));
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, _mm256_set1_ps(ta->d)), acc[j]);
            }
        }
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) out[j] = _mm256_mul_ps(acc[j], _mm256_set1_ps(0.5f));
}

typedef void (*qp_tile_fn)(int64_t ngr, const uint8_t *wg, const char *const x[QP_NC], const qp_atab *const t[QP_NC],
                           __m256 out[QP_NC]);

/* 8 rows x activation rows [c0, c1) of one chunk (prefill): each group is decoded once
 * into cb for all of them, and the rows' sums wait in acc between groups. The float
 * operations per output are qp_tile's, in the same order (the same results). */
static inline __attribute__((always_inline)) void qp_rows(const int N, int64_t ngr, const uint8_t *wg, const char *x,
                                                          size_t xs, int64_t c0, int64_t c1, const qp_atab *tab,
                                                          int64_t nblk, float *y, int64_t ys, int64_t r) {
    const int64_t gb8 = 8 * (8 * N + 2);
    const __m256i ones = _mm256_set1_epi16(1);
    _Alignas(32) float acc[TH_PACKED_CHUNK_ROWS + QP_NC][8];
    _Alignas(32) __m256i cb[16];
    for (int64_t c = c0; c < c1 + QP_NC; c++) _mm256_store_ps(acc[c - c0], _mm256_setzero_ps());
    for (int64_t b = 0; b < ngr; b++) {
        const uint8_t *pg = wg + b * gb8;
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pg));
        for (int kk = 0; kk < 8; kk++)
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) cb[2 * kk + h] = qp_codes(N, pg, kk, h);
        for (int64_t c = c0; c < c1; c += QP_NC) {
            const th_block_q8_0 *a[QP_NC];
            const qp_atab *t[QP_NC];
            _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) {
                const int64_t cj = TH_MIN(c + j, c1 - 1);
                a[j] = (const th_block_q8_0 *)(x + (size_t)cj * xs) + 2 * b;
                t[j] = tab + (cj - c0) * nblk + 2 * b;
            }
            _Pragma("GCC unroll 2") for (int hb = 0; hb < 2; hb++) {
                __m256i S[QP_NC];
                _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) S[j] = _mm256_setzero_si256();
                for (int q = 0; q < 4; q++)
                    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                        const __m256i cv = cb[2 * (4 * hb + q) + h];
                        const __m256i u = N == 8 ? _mm256_sign_epi8(cv, cv) : cv;
                        _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) {
                            __m256i av = _mm256_set1_epi32((int)avx2_u32((const uint8_t *)a[j][hb].qs + 8 * q + 4 * h));
                            if (N == 8) av = _mm256_sign_epi8(av, cv);
                            S[j] = _mm256_add_epi32(S[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, av), ones));
                        }
                    }
                _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) {
                    float *o = acc[c - c0 + j];
                    const __m256i is = _mm256_add_epi32(_mm256_add_epi32(S[j], S[j]), _mm256_set1_epi32(t[j][hb].start));
                    _mm256_store_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, _mm256_set1_ps(t[j][hb].d)),
                                                       _mm256_load_ps(o)));
                }
            }
        }
    }
    for (int64_t c = c0; c < c1; c++)
        _mm256_storeu_ps(y + c * ys + r, _mm256_mul_ps(_mm256_load_ps(acc[c - c0]), _mm256_set1_ps(0.5f)));
}

typedef void (*qp_rows_fn)(int64_t ngr, const uint8_t *wg, const char *x, size_t xs, int64_t c0, int64_t c1,
                           const qp_atab *tab, int64_t nblk, float *y, int64_t ys, int64_t r);

/* Rows [r0, r1) (multiples of 8) of a packed matrix whose row r starts at w + r * ws. */
static inline __attribute__((always_inline)) void qp_walk(const int N, qp_tile_fn t4, qp_tile_fn t2, qp_tile_fn t1,
                                                          qp_rows_fn rows, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,
                                                          int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    const int64_t ngr = n / TH_QN_BLOCK, nblk = n / TH_QK;
    const int64_t chunk = th_packed_chunk_rows((size_t)nblk * sizeof(qp_atab));
    _Alignas(64) qp_atab tab[TH_PACKED_TAB_BYTES / sizeof(qp_atab)];
    for (int64_t c0 = 0; c0 < nb; c0 += chunk) {
        const int64_t c1 = TH_MIN(nb, c0 + chunk);
        qp_prep(N, nblk, x, xs, c0, c1, tab);
        for (int64_t r = r0; r < r1; r += 8) {
            const uint8_t *wg = (const uint8_t *)w + (size_t)r * ws;
            if (c1 - c0 > QP_NC) { rows(ngr, wg, (const char *)x, xs, c0, c1, tab, nblk, y, ys, r); continue; }
            for (int64_t c = c0; c < c1;) {
                const int cn = (int)TH_MIN(QP_NC, c1 - c);
                const char *xp[QP_NC];
                const qp_atab *tp[QP_NC];
                for (int j = 0; j < QP_NC; j++) {
                    const int64_t cj = c + TH_MIN(j, cn - 1);
                    xp[j] = (const char *)x + (size_t)cj * xs;
                    tp[j] = tab + (cj - c0) * nblk;
                }
                __m256 out[QP_NC];
                (cn > 2 ? t4 : cn > 1 ? t2 : t1)(ngr, wg, xp, tp, out);
                for (int j = 0; j < cn; j++) _mm256_storeu_ps(y + (c + j) * ys + r, out[j]);
                c += cn;
            }
        }
    }
}

#define QP_TILE(N, NC)                                                                                             \
    static __attribute__((noinline)) void qp_tile_q##N##_##NC(int64_t ngr, const uint8_t *wg, const char *const x[QP_NC], \
                                                              const qp_atab *const t[QP_NC], __m256 out[QP_NC]) { \
        qp_tile(N, NC, ngr, wg, x, t, out);                                                                        \
    }
#define QP_PACKED(N)                                                                                               \
    QP_TILE(N, 4)                                                                                                  \
    QP_TILE(N, 2)                                                                                                  \
    QP_TILE(N, 1)                                                                                                  \
    static __attribute__((noinline)) void qp_rows_q##N(int64_t ngr, const uint8_t *wg, const char *x, size_t xs,     \
                                                       int64_t c0, int64_t c1, const qp_atab *tab, int64_t nblk,      \
                                                       float *y, int64_t ys, int64_t r) {                           \
        qp_rows(N, ngr, wg, x, xs, c0, c1, tab, nblk, y, ys, r);                                                   \
    }                                                                                                              \
    static void packed_q##N(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,   \
                            size_t xs, float *y, int64_t ys) {                                                     \
        qp_walk(N, qp_tile_q##N##_4, qp_tile_q##N##_2, qp_tile_q##N##_1, qp_rows_q##N, n, r0, r1, w, ws, nb, x, xs, \
                y, ys);                                                                                            \
    }
QP_PACKED(2)
QP_PACKED(3)
QP_PACKED(4)
QP_PACKED(5)
QP_PACKED(6)
QP_PACKED(7)
QP_PACKED(8)

void th_avx2_fill_qn(th_kernels *k) {
#define SET(N) k->vec_dot[TH_Q##N] = dot_q##N; k->gemm[TH_Q##N] = gemm_q##N; k->gemm_packed[TH_Q##N] = packed_q##N;
    SET(2) SET(3) SET(4) SET(5) SET(6) SET(7) SET(8)
#undef SET
}
