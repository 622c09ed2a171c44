/* gemm_kquant.c (avx2) — AVX2 batch gemm for the K-quants Q2_K, Q3_K, Q5_K, Q6_K and
 * IQ4_XS against Q8_K activation rows (Q4_K: gemm_x8.c). A tile is 1 weight row x 4
 * activation rows (gemm_walk.h): each 32-element chunk of a super-block is decoded
 * once (to unsigned bytes = value + offset, and a pair of 16-bit sub-block scales) and
 * multiplied with the 4 activation rows. Offsets and mins are removed per super-block
 * through the activations' bsums:
 *   dot = d_a * (d * sum(scale * u * a) - dm * sum_k corr[k] * bsums[k])
 * with (dm, corr) = (dmin, min) for Q2_K/Q5_K and (d, offset * scale) for
 * Q3_K/Q6_K. All integer sums are exact; one f32 multiply-add per super-block. */
#include "cpu/gemm_walk.h"
#include "cpu/avx2/util.h"

static inline __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline __m256i crumb(__m256i q, int j) { return _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), _mm256_set1_epi8(3)); }
static inline __m256i bit_to(__m256i v, int bit, int val) {
    const __m256i m = _mm256_set1_epi8((char)(1 << bit));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m), _mm256_set1_epi8((char)val));
}


/* Chunk c (elements 32c..32c+31) of super-block i against 4 activation rows. */
static inline void kq_chunk(__m256i u, const avx2_kq_head *h, int c, const th_block_q8_K *const a[4], int64_t i,
                            __m256i sumi[4]) {
    const __m256i sp = avx2_pair_from16(h->sc16, c);
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        __m256i p = _mm256_maddubs_epi16(u, load256(a[j][i].qs + 32 * c));
        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, sp));
    }
}

/* Same for signed values (IQ4_XS): |u| times the activation with u's sign. */
static inline void kq_chunk_signed(__m256i v, const avx2_kq_head *h, int c, const th_block_q8_K *const a[4], int64_t i,
                                   __m256i sumi[4]) {
    const __m256i sp = avx2_pair_from16(h->sc16, c);
    const __m256i u = _mm256_sign_epi8(v, v);
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        __m256i p = _mm256_maddubs_epi16(u, _mm256_sign_epi8(load256(a[j][i].qs + 32 * c), v));
        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, sp));
    }
}

static inline void kq_finish(const avx2_kq_head *h, const th_block_q8_K *const a[4], int64_t i, __m256i sumi[4], __m256 acc[4]) {
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        __m256 c = _mm256_cvtepi32_ps(_mm256_madd_epi16(h->corr16, load256(a[j][i].bsums)));
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(a[j][i].d * h->d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_set1_ps(a[j][i].d * h->dm), c, acc[j]);
        sumi[j] = _mm256_setzero_si256();
    }
}

static void tile_q2_K(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) {
    const th_block_q2_K *x = (const th_block_q2_K *)w;
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
    avx2_kq_head h;
    for (int64_t i = 0; i < nsb; i++) {
        avx2_head_q2_K(&x[i], &h);
        for (int half = 0; half < 2; half++) {
            __m256i q = load256(x[i].qs + 32 * half);
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) kq_chunk(crumb(q, j), &h, 4 * half + j, a, i, sumi);
        }
        kq_finish(&h, a, i, sumi, acc);
    }
    for (int j = 0; j < 4; j++) out[j] = avx2_hsum_ps(acc[j]);
}

static void tile_q3_K(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) {
    const th_block_q3_K *x = (const th_block_q3_K *)w;
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
    avx2_kq_head h;
    for (int64_t i = 0; i < nsb; i++) {
        avx2_head_q3_K(&x[i], &h);
        __m256i hm = load256(x[i].hmask);
        for (int half = 0; half < 2; half++) {
            __m256i q = load256(x[i].qs + 32 * half);
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
                kq_chunk(_mm256_or_si256(crumb(q, j), bit_to(hm, 4 * half + j, 4)), &h, 4 * half + j, a, i, sumi);
        }
        kq_finish(&h, a, i, sumi, acc);
    }
    for (int j = 0; j < 4; j++) out[j] = avx2_hsum_ps(acc[j]);
}

static void tile_q5_K(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) {
    const th_block_q5_K *x = (const th_block_q5_K *)w;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
    avx2_kq_head h;
    for (int64_t i = 0; i < nsb; i++) {
        avx2_head_k4(x[i].d, x[i].dmin, x[i].scales, &h);
        __m256i qh = load256(x[i].qh);
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m256i q = load256(x[i].qs + 32 * j);
            kq_chunk(_mm256_or_si256(_mm256_and_si256(q, low4), bit_to(qh, 2 * j, 16)), &h, 2 * j, a, i, sumi);
            kq_chunk(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), bit_to(qh, 2 * j + 1, 16)),
                     &h, 2 * j + 1, a, i, sumi);
        }
        kq_finish(&h, a, i, sumi, acc);
    }
    for (int j = 0; j < 4; j++) out[j] = avx2_hsum_ps(acc[j]);
}

static void tile_q6_K(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) {
    const th_block_q6_K *x = (const th_block_q6_K *)w;
    const __m256i low4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
    avx2_kq_head h;
    for (int64_t i = 0; i < nsb; i++) {
        avx2_head_q6_K(&x[i], &h);
        for (int half = 0; half < 2; half++) {
            __m256i ql0 = load256(x[i].ql + 64 * half), ql1 = load256(x[i].ql + 64 * half + 32);
            __m256i qh = load256(x[i].qh + 32 * half);
            int c = 4 * half;
            kq_chunk(_mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)), &h, c, a, i, sumi);
            kq_chunk(_mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)), &h, c + 1, a, i, sumi);
            kq_chunk(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, m30)), &h, c + 2, a, i, sumi);
            kq_chunk(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                     _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)), &h, c + 3, a, i, sumi);
        }
        kq_finish(&h, a, i, sumi, acc);
    }
    for (int j = 0; j < 4; j++) out[j] = avx2_hsum_ps(acc[j]);
}


static void tile_iq4_xs(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]) {
    const th_block_iq4_xs *x = (const th_block_iq4_xs *)w;
    const __m256i table = avx2_iq4nl_table();
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
    avx2_kq_head h;
    h.corr16 = _mm256_setzero_si256();
    h.dm = 0;
    for (int64_t i = 0; i < nsb; i++) {
        h.d = avx2_f16(x[i].d);
        h.sc16 = avx2_iq4xs_scales(&x[i]);
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++)
            kq_chunk_signed(_mm256_shuffle_epi8(table, avx2_nibbles32(x[i].qs + 16 * c)), &h, c, a, i, sumi);
        kq_finish(&h, a, i, sumi, acc);
    }
    for (int j = 0; j < 4; j++) out[j] = avx2_hsum_ps(acc[j]);
}

/* One walker for the five tiles (called through the pointer, not inlined). */
static __attribute__((noinline)) void gemm_kq(th_tile1x4_fn tile, int64_t n, int64_t r0, int64_t r1, const void *w,
                                              size_t ws, int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    th_gemm_walk1x4(tile, n / TH_QK_K, r0, r1, w, ws, nb, x, xs, y, ys);
}

#define KQ_BATCH(NAME, TILE)                                                                    \
    void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
              size_t xs, float *y, int64_t ys) {                                                    \
        gemm_kq(TILE, n, r0, r1, w, ws, nb, x, xs, y, ys);                                          \
    }
KQ_BATCH(th_avx2_batch_q2_K, tile_q2_K)
KQ_BATCH(th_avx2_batch_q3_K, tile_q3_K)
KQ_BATCH(th_avx2_batch_q5_K, tile_q5_K)
KQ_BATCH(th_avx2_batch_q6_K, tile_q6_K)
KQ_BATCH(th_avx2_batch_iq4_xs, tile_iq4_xs)
