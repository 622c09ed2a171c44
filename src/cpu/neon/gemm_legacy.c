/* gemm_legacy.c (neon) — NEON batch gemm (weight rows x a batch of activation rows) for
 * the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4. The work is
 * cut in tiles of 4 weight rows x 4 activation rows: each weight block is decoded once
 * per tile and each activation block loaded once per tile, giving 16 block dot
 * products by sdot. The 4 per-activation lane sums of a weight row are folded into one
 * vector with pairwise adds, so one f32 multiply-add per weight row and block scales
 * them. Activation rows are walked in chunks of 32 so that they stay in cache while the
 * weight rows of [r0, r1) pass (gemm_walk.h); edge tiles repeat the last row/column
 * pointer and store only the valid outputs. (The K-quants: gemm_kquant.c.) */
#include "cpu/gemm_walk.h"
#include "cpu/neon/legacy.h"

/* One 4x4 tile over nblk blocks. w[i] / x[j]: row pointers; out[i][j] = dot(w_i, x_j).
 * AQS: offset of the codes in an activation block (Q8_0: 2, Q8_1: 4). */
#define TILE_FN(NAME, WBYTES, ABYTES, AQS, DECODE, WSCALE, HAS_MIN)                                    \
    static void NAME(int64_t nblk, const char *const w[4], const char *const x[4], float out[4][4]) { \
        float32x4_t acc[4] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) }; \
        for (int64_t b = 0; b < nblk; b++) {                                                           \
            const char *xb[4] = { x[0] + b * ABYTES, x[1] + b * ABYTES, x[2] + b * ABYTES, x[3] + b * ABYTES }; \
            int8x16_t a0[4], a1[4];                                                                    \
            for (int j = 0; j < 4; j++) {                                                              \
                a0[j] = vld1q_s8((const int8_t *)(xb[j] + AQS));                                       \
                a1[j] = vld1q_s8((const int8_t *)(xb[j] + AQS + 16));                                  \
            }                                                                                          \
            const float dav[4] = { legacy_d(xb[0]), legacy_d(xb[1]), legacy_d(xb[2]), legacy_d(xb[3]) }; \
            const float32x4_t da = vld1q_f32(dav);                                                     \
            float32x4_t sa = vdupq_n_f32(0.0f);                                                        \
            if (HAS_MIN) {                                                                             \
                const float sav[4] = { legacy_s(xb[0]), legacy_s(xb[1]), legacy_s(xb[2]), legacy_s(xb[3]) }; \
                sa = vld1q_f32(sav);                                                                   \
            }                                                                                          \
            for (int i = 0; i < 4; i++) {                                                              \
                const char *wb = w[i] + b * WBYTES;                                                    \
                int8x16_t lo, hi;                                                                      \
                DECODE(wb, &lo, &hi);                                                                  \
                int32x4_t p[4];                                                                        \
                for (int j = 0; j < 4; j++) p[j] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, a0[j]), hi, a1[j]); \
                const int32x4_t v = neon_reduce4(p[0], p[1], p[2], p[3]);                              \
                acc[i] = vmlaq_f32(acc[i], vcvtq_f32_s32(v), vmulq_n_f32(da, WSCALE(wb)));             \
                if (HAS_MIN) acc[i] = vmlaq_n_f32(acc[i], sa, legacy_m(wb));                           \
            }                                                                                          \
        }                                                                                              \
        for (int i = 0; i < 4; i++) vst1q_f32(out[i], acc[i]);                                         \
    }

TILE_FN(tile_q4_0, 18, 34, 2, dec_q4_0, legacy_d, 0)
TILE_FN(tile_q4_1, 20, 36, 4, dec_q4_1, legacy_d, 1)
TILE_FN(tile_q5_0, 22, 34, 2, dec_q5_0, legacy_d, 0)
TILE_FN(tile_q5_1, 24, 36, 4, dec_q5_1, legacy_d, 1)
TILE_FN(tile_q8_0, 34, 34, 2, dec_q8_0, legacy_d, 0)
TILE_FN(tile_iq4_nl, 18, 34, 2, dec_iq4_nl, legacy_d, 0)
TILE_FN(tile_mxfp4, 17, 34, 2, dec_mxfp4, legacy_e8m0, 0)

/* One walker for the seven tiles (called through the pointer, not inlined). */
static __attribute__((noinline)) void gemm_tiled(th_tile4_fn tile, int64_t n, int64_t r0, int64_t r1, const void *w,
                                                 size_t ws, int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    th_gemm_walk4x4(tile, n / TH_QK, r0, r1, w, ws, nb, x, xs, y, ys);
}

#define BATCH(NAME, TILE)                                                                        \
    void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
              size_t xs, float *y, int64_t ys) {                                                    \
        gemm_tiled(TILE, n, r0, r1, w, ws, nb, x, xs, y, ys);                                       \
    }
BATCH(th_neon_batch_q4_0, tile_q4_0)
BATCH(th_neon_batch_q4_1, tile_q4_1)
BATCH(th_neon_batch_q5_0, tile_q5_0)
BATCH(th_neon_batch_q5_1, tile_q5_1)
BATCH(th_neon_batch_q8_0, tile_q8_0)
BATCH(th_neon_batch_iq4_nl, tile_iq4_nl)
BATCH(th_neon_batch_mxfp4, tile_mxfp4)
