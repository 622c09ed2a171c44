/* gemm_legacy.c (avx2) — AVX2 batch gemm (weight rows x a batch of activation rows)
 * for the signed 32-element block types Q8_0, IQ4_NL, MXFP4 (Q4_0, Q4_1, Q5_0, Q5_1:
 * gemm_x8.c). The work is cut in tiles of 4 weight rows x 4 activation
 * rows: each weight block is decoded once per tile and each activation block loaded once
 * per tile, giving 16 block dot products. The 4 per-activation integer sums of a weight
 * row are folded into one 128-bit vector (unpack + add), so one f32 multiply-add per
 * weight row and block scales them. Activation rows are walked in chunks of 32 so that
 * they stay in L2 while the weight rows of [r0, r1) pass (gemm_walk.h). Edge tiles
 * repeat the last row/column pointer and store only the valid outputs. */
#include "cpu/gemm_walk.h"
#include "cpu/avx2/util.h"


/* Weight decoders: a block's 32 signed int8 values in element order. */
static inline __m256i dec_q8_0(const void *b) { return _mm256_loadu_si256((const __m256i *)((const th_block_q8_0 *)b)->qs); }
static inline __m256i dec_iq4_nl(const void *b) {
    const __m256i table = avx2_iq4nl_table();
    return _mm256_shuffle_epi8(table, avx2_nibbles32(((const th_block_iq4_nl *)b)->qs));
}
static inline __m256i dec_mxfp4(const void *b) {
    const __m256i table = avx2_mxfp4_table();
    return _mm256_shuffle_epi8(table, avx2_nibbles32(((const th_block_mxfp4 *)b)->qs));
}

/* Block scales: the f16 d first in the weight blocks here and in the Q8_0 activation
 * blocks; MXFP4's E8M0 exponent byte. */
static inline float blk_d(const void *b) { uint16_t h; memcpy(&h, b, 2); return avx2_f16(h); }
static inline float blk_e8m0(const void *b) { return avx2_e8m0_half(*(const uint8_t *)b); }

/* One 4x4 tile over nblk blocks. w[i] / x[j]: row pointers; out[i][j] = dot(w_i, x_j).
 * Signed values: |q| times the activation carrying q's sign (vpmaddubsw). */
#define TILE_FN(NAME, WBYTES, DECODE, WSCALE)                                                   \
    static void NAME(int64_t nblk, const char *const w[4], const char *const x[4], float out[4][4]) { \
        enum { ABYTES = sizeof(th_block_q8_0), AQS = 2 };                                      \
        __m128 acc[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() }; \
        for (int64_t b = 0; b < nblk; b++) {                                                   \
            const char *xb[4] = { x[0] + b * ABYTES, x[1] + b * ABYTES, x[2] + b * ABYTES, x[3] + b * ABYTES }; \
            __m256i av[4];                                                                     \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) av[j] = _mm256_loadu_si256((const __m256i *)(xb[j] + AQS)); \
            const __m128 da = _mm_setr_ps(blk_d(xb[0]), blk_d(xb[1]), blk_d(xb[2]), blk_d(xb[3])); \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                              \
                const char *wb = w[i] + b * WBYTES;                                            \
                const __m256i q = DECODE(wb), qa = _mm256_sign_epi8(q, q);                     \
                const __m128i v = avx2_reduce4(avx2_dot_u8s8(qa, _mm256_sign_epi8(av[0], q)),  \
                                               avx2_dot_u8s8(qa, _mm256_sign_epi8(av[1], q)),  \
                                               avx2_dot_u8s8(qa, _mm256_sign_epi8(av[2], q)),  \
                                               avx2_dot_u8s8(qa, _mm256_sign_epi8(av[3], q))); \
                acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(v), _mm_mul_ps(_mm_set1_ps(WSCALE(wb)), da), acc[i]); \
            }                                                                                  \
        }                                                                                      \
        for (int i = 0; i < 4; i++) _mm_storeu_ps(out[i], acc[i]);                             \
    }

TILE_FN(tile_q8_0, 34, dec_q8_0, blk_d)
TILE_FN(tile_iq4_nl, 18, dec_iq4_nl, blk_d)
TILE_FN(tile_mxfp4, 17, dec_mxfp4, blk_e8m0)

/* One walker for the three tiles (called through the pointer, not inlined). */
static __attribute__((noinline)) void gemm_tiled(th_tile4_fn tile, int64_t n, int64_t r0, int64_t r1, const void *w,
                                                 size_t ws, int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    th_gemm_walk4x4(tile, n / TH_QK, r0, r1, w, ws, nb, x, xs, y, ys);
}

#define BATCH(NAME, TILE)                                                                        \
    void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
              size_t xs, float *y, int64_t ys) {                                                    \
        gemm_tiled(TILE, n, r0, r1, w, ws, nb, x, xs, y, ys);                                       \
    }
BATCH(th_avx2_batch_q8_0, tile_q8_0)
BATCH(th_avx2_batch_iq4_nl, tile_iq4_nl)
BATCH(th_avx2_batch_mxfp4, tile_mxfp4)
