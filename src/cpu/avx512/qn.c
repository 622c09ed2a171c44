/* qn.c (avx512) — qN kernels (n = 2..8; format in quant/qn.h, docs/qn.md) with
 * AVX-512 BW + VNNI: each 64-bit plane is a mask register as it is stored, so the 64
 * codes of a group are n masked byte adds (code += 2^p where bit p is set), in the
 * weights' own order. One vpdpbusd gives sum code * a per 4 bytes, a second with ones
 * sum a; isum = 2 sum code a - (2^n - 1) sum a is the reference's exact integer per
 * 32-element activation block (lanes 0..7: the group's first half, 8..15: the second).
 * The batch gemm decodes each group once for up to 4 activation rows.
 *
 * The packed gemm (decode and prefill on weights repacked by quant/repack.c's qN layout)
 * takes 8 rows at a time in ymm registers: per 4-element step k, the 32-bit mask of
 * plane p holds bit p of the 8 rows' 4 codes, so n masked byte adds give the 32 code
 * bytes (lane i = row i), and one vpdpbusd with the activation's 4 bytes broadcast adds
 * 4 products to each row. For n <= 7 the adds build 2 code (<= 254) and the sum starts
 * at -(2^n - 1) sum(a) (side table per activation block), which is the reference's
 * isum exactly; for n = 8, isum = 2 sum(code a) - 255 sum(a). */
#include "cpu/avx512/util.h"
#include "cpu/gemm_packed.h"
#include "cpu/repack.h"
#include "quant/qn.h"

/* The 64 codes of group g (u8). */
static inline __attribute__((always_inline)) __m512i qn_codes(const int N, const uint8_t *g) {
    __m512i c = _mm512_setzero_si512();
    _Pragma("GCC unroll 8") for (int p = 0; p < N; p++) {
        uint64_t m;
        memcpy(&m, g + 2 + 8 * p, 8);
        c = _mm512_mask_add_epi8(c, (__mmask64)m, c, _mm512_set1_epi8((char)(1 << p)));
    }
    return c;
}

/* The two Q8_0 blocks of a group's activations as 64 bytes. */
static inline __m512i qn_act(const th_block_q8_0 *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs)),
                              _mm256_loadu_si256((const __m256i *)b[1].qs), 1);
}

/* 16 int32 lanes whose sums per 8 are the two halves' isum. */
static inline __attribute__((always_inline)) __m512i qn_isum(const int N, __m512i code, __m512i a) {
    const __m512i ca = _mm512_dpbusd_epi32(_mm512_setzero_si512(), code, a);
    const __m512i sa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), a);
    /* 2 ca - (2^N - 1) sa = 2 ca + sa - (sa << N) */
    return _mm512_sub_epi32(_mm512_add_epi32(_mm512_add_epi32(ca, ca), sa), _mm512_slli_epi32(sa, N));
}

/* d_w * d_a of each half, in the halves' lanes. */
static inline __m512 qn_scales(float d, const th_block_q8_0 *b) {
    const __m512 lo = _mm512_set1_ps(d * _cvtsh_ss(b[0].d));
    return _mm512_mask_mov_ps(lo, (__mmask16)0xff00, _mm512_set1_ps(d * _cvtsh_ss(b[1].d)));
}

static inline __attribute__((always_inline)) void qn_dot(const int N, int64_t n, float *s, const void *w, const void *act) {
    const uint8_t *g = w;
    const th_block_q8_0 *a = act;
    const size_t gb = th_qn_group_bytes(N);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / TH_QN_BLOCK; i++, g += gb) {
        th_prefetch_span(g + TH_PREFETCH_AHEAD, gb);
        const float d = _cvtsh_ss((uint16_t)(g[0] | (g[1] << 8)));
        const __m512i is = qn_isum(N, qn_codes(N, g), qn_act(a + 2 * i));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), qn_scales(d, a + 2 * i), acc);
    }
    *s = 0.5f * _mm512_reduce_add_ps(acc);
}

static inline __attribute__((always_inline)) void qn_batch(const int N, int64_t n, int64_t r0, int64_t r1,
                                                           const void *w, size_t ws, int64_t nb, const void *x,
                                                           size_t xs, float *y, int64_t ys) {
    const size_t gb = th_qn_group_bytes(N);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * ws;
        for (int64_t c = 0; c < nb; c += 4) {
            const int cn = (int)TH_MIN(4, nb - c);
            const th_block_q8_0 *a[4];
            __m512 acc[4];
            for (int j = 0; j < 4; j++) {
                a[j] = (const th_block_q8_0 *)((const char *)x + (size_t)(c + TH_MIN(j, cn - 1)) * xs);
                acc[j] = _mm512_setzero_ps();
            }
            const uint8_t *g = row;
            for (int64_t i = 0; i < n / TH_QN_BLOCK; i++, g += gb) {
                const float d = _cvtsh_ss((uint16_t)(g[0] | (g[1] << 8)));
                const __m512i code = qn_codes(N, g);
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                    const __m512i is = qn_isum(N, code, qn_act(a[j] + 2 * i));
                    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), qn_scales(d, a[j] + 2 * i), acc[j]);
                }
            }
            for (int j = 0; j < cn; j++) y[(c + j) * ys + r] = 0.5f * _mm512_reduce_add_ps(acc[j]);
        }
    }
}

/* ---- the packed gemm ---- */

enum { QN_NCMAX = 8 };

/* Per activation block (32 elements): its scale and the start value of the block's sum. */
typedef struct { float d; int32_t start; } qn_atab;

static inline int32_t q8_sum32(const int8_t *qs) {
    __m256i v = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)qs));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1)));
}

/* acc + u (unsigned bytes) x the 4 signed bytes at p broadcast (the memory operand with {1to8}). */
static inline __m256i dpbusd_b8(__m256i acc, __m256i u, const void *p) {
    __asm__("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)p));
    return acc;
}

static inline __attribute__((always_inline)) void qn_prep(const int N, int64_t nblk, const char *x, size_t xs, int64_t c0,
                                                          int64_t c1, qn_atab *tab) {
    const int32_t k = (1 << N) - 1;
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_0 *a = (const th_block_q8_0 *)(x + (size_t)c * xs);
        qn_atab *t = tab + (c - c0) * nblk;
        for (int64_t b = 0; b < nblk; b++) {
            t[b].d = _cvtsh_ss(a[b].d);
            t[b].start = -k * q8_sum32(a[b].qs);
        }
    }
}

/* 8 rows (one packed group of rows) x NC activation rows. Per step pair kk a zmm of
 * codes: lanes 0..7 rows 0..7 at elements 8kk..8kk+3, lanes 8..15 the same rows at
 * 8kk+4..8kk+7, against the activation's two 4-byte words spread the same way; the two
 * halves are added at the end of each activation block. */
static inline __attribute__((always_inline)) void qn_tile(const int N, const int NC, int64_t ngr, const uint8_t *wg,
                                                          const char *const x[QN_NCMAX], const qn_atab *const t[QN_NCMAX],
                                                          __m256 out[QN_NCMAX]) {
    const int64_t gb8 = 8 * (8 * N + 2);
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m256 acc[QN_NCMAX];
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < ngr; b++) {
        const uint8_t *pg = wg + b * gb8;
        if (NC == 1) th_prefetch_span(pg + TH_PREFETCH_AHEAD, (size_t)gb8);
        __m512i c[8];
        _Pragma("GCC unroll 8") for (int kk = 0; kk < 8; kk++) {
            c[kk] = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int p = 0; p < N; p++) {
                uint64_t m;
                memcpy(&m, pg + 16 + 8 * (N * kk + p), 8);
                c[kk] = _mm512_mask_add_epi8(c[kk], (__mmask64)m, c[kk], _mm512_set1_epi8((char)(N < 8 ? 2 << p : 1 << p)));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pg));
        _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) {
            const th_block_q8_0 *a = (const th_block_q8_0 *)x[j] + 2 * b;
            const qn_atab *ta = t[j] + 2 * b;
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m512i st = _mm512_maskz_set1_epi32((__mmask16)0x00ff, ta[h].start);
                __m512i s = N < 8 ? st : _mm512_setzero_si512();
                _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
                    int64_t a8;
                    memcpy(&a8, a[h].qs + 8 * q, 8);
                    s = _mm512_dpbusd_epi32(s, c[4 * h + q], _mm512_permutexvar_epi32(spread, _mm512_set1_epi64(a8)));
                }
                if (N == 8) s = _mm512_add_epi32(_mm512_add_epi32(s, s), st);
                const __m256i f = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(f), _mm256_mul_ps(dw, _mm256_set1_ps(ta[h].d)), acc[j]);
            }
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; j++) out[j] = _mm256_mul_ps(acc[j], _mm256_set1_ps(0.5f));
}

typedef void (*qn_tile_fn)(int64_t ngr, const uint8_t *wg, const char *const x[QN_NCMAX], const qn_atab *const t[QN_NCMAX],
                           __m256 out[QN_NCMAX]);

/* Rows [r0, r1) (multiples of 8) of a packed matrix whose row r starts at w + r * ws. */
static inline __attribute__((always_inline)) void qn_walk(const int N, qn_tile_fn t8, qn_tile_fn t4, qn_tile_fn t1,
                                                          int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,
                                                          int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    const int64_t ngr = n / TH_QN_BLOCK, nblk = n / TH_QK;
    const int64_t chunk = th_packed_chunk_rows((size_t)nblk * sizeof(qn_atab));
    _Alignas(64) qn_atab tab[TH_PACKED_TAB_BYTES / sizeof(qn_atab)];
    for (int64_t c0 = 0; c0 < nb; c0 += chunk) {
        const int64_t c1 = TH_MIN(nb, c0 + chunk);
        qn_prep(N, nblk, x, xs, c0, c1, tab);
        for (int64_t r = r0; r < r1; r += 8) {
            const uint8_t *wg = (const uint8_t *)w + (size_t)r * ws;
            for (int64_t c = c0; c < c1;) {
                const int cn = (int)TH_MIN(QN_NCMAX, c1 - c);
                const char *xp[QN_NCMAX];
                const qn_atab *tp[QN_NCMAX];
                for (int j = 0; j < QN_NCMAX; j++) {
                    const int64_t cj = c + TH_MIN(j, cn - 1);
                    xp[j] = (const char *)x + (size_t)cj * xs;
                    tp[j] = tab + (cj - c0) * nblk;
                }
                __m256 out[QN_NCMAX];
                (cn > 4 ? t8 : cn > 1 ? t4 : t1)(ngr, wg, xp, tp, out);
                for (int j = 0; j < cn; j++) _mm256_storeu_ps(y + (c + j) * ys + r, out[j]);
                c += cn;
            }
        }
    }
}

#define QN_TILE(N, NC)                                                                                             \
    static __attribute__((noinline)) void tile_q##N##_##NC(int64_t ngr, const uint8_t *wg, const char *const x[QN_NCMAX], \
                                                           const qn_atab *const t[QN_NCMAX], __m256 out[QN_NCMAX]) { \
        qn_tile(N, NC, ngr, wg, x, t, out);                                                                          \
    }
#define QN_PACKED(N)                                                                                               \
    QN_TILE(N, 8)                                                                                                  \
    QN_TILE(N, 4)                                                                                                  \
    QN_TILE(N, 1)                                                                                                  \
    static void packed_q##N(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,   \
                            size_t xs, float *y, int64_t ys) {                                                     \
        qn_walk(N, tile_q##N##_8, tile_q##N##_4, tile_q##N##_1, n, r0, r1, w, ws, nb, x, xs, y, ys);              \
    }
QN_PACKED(2)
QN_PACKED(3)
QN_PACKED(4)
QN_PACKED(5)
QN_PACKED(6)
QN_PACKED(7)
QN_PACKED(8)

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

void th_avx512_fill_qn(th_kernels *k) {
#define SET(N) k->vec_dot[TH_Q##N] = dot_q##N; k->gemm[TH_Q##N] = gemm_q##N; k->gemm_packed[TH_Q##N] = packed_q##N;
    SET(2) SET(3) SET(4) SET(5) SET(6) SET(7) SET(8)
#undef SET
}
