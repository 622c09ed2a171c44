/* gemm_walk.h — the 4x4 tile walker shared by the per-ISA gemm files (each
 * compiles its own copy with its own flags): rows [r0, r1) of W times activation
 * rows [0, nb) in tiles of 4 weight rows x 4 activation rows, 32 activation rows
 * at a time so they stay in L2. Edge tiles repeat the last valid row/column and
 * store only the valid outputs. Also the 1 x 4 walker of the K-quant gemms. */
#ifndef TH_CPU_GEMM_WALK_H
#define TH_CPU_GEMM_WALK_H

#include "cpu/kernels.h"

/* out[i][j] = dot(weight row w[i], activation row x[j]) over nblk blocks */
typedef void (*th_tile4_fn)(int64_t nblk, const char *const w[4], const char *const x[4], float out[4][4]);

static inline void th_gemm_walk4x4(th_tile4_fn tile, int64_t nblk, int64_t r0, int64_t r1, const void *w,
                                   size_t w_stride, int64_t nb, const void *x, size_t x_stride, float *y,
                                   int64_t y_stride) {
    float out[4][4];
    for (int64_t c0 = 0; c0 < nb; c0 += 32) {
        const int64_t c1 = TH_MIN(nb, c0 + 32);
        for (int64_t r = r0; r < r1; r += 4) {
            const int rm = (int)TH_MIN(4, r1 - r);
            const char *wp[4];
            for (int i = 0; i < 4; i++) wp[i] = (const char *)w + (size_t)(r + TH_MIN(i, rm - 1)) * w_stride;
            for (int64_t c = c0; c < c1; c += 4) {
                const int cn = (int)TH_MIN(4, c1 - c);
                const char *xp[4];
                for (int j = 0; j < 4; j++) xp[j] = (const char *)x + (size_t)(c + TH_MIN(j, cn - 1)) * x_stride;
                tile(nblk, wp, xp, out);
                for (int i = 0; i < rm; i++)
                    for (int j = 0; j < cn; j++) y[(c + j) * y_stride + r + i] = out[i][j];
            }
        }
    }
}

/* out[j] = dot(one K-quant weight row w, Q8_K activation row a[j]) over nsb super-blocks */
typedef void (*th_tile1x4_fn)(int64_t nsb, const uint8_t *w, const th_block_q8_K *const a[4], float out[4]);

/* Activation rows in chunks of 32 (their Q8_K rows stay in L2 while every weight row
 * of [r0, r1) passes), then weight rows one at a time, then activation rows 4 at a
 * time (the last tile repeats its last row). */
static inline void th_gemm_walk1x4(th_tile1x4_fn tile, int64_t nsb, int64_t r0, int64_t r1, const void *w,
                                   size_t w_stride, int64_t nb, const void *x, size_t x_stride, float *y,
                                   int64_t y_stride) {
    float out[4];
    for (int64_t c0 = 0; c0 < nb; c0 += 32) {
        const int64_t c1 = TH_MIN(nb, c0 + 32);
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * w_stride;
            for (int64_t c = c0; c < c1; c += 4) {
                const int cn = (int)TH_MIN(4, c1 - c);
                const th_block_q8_K *xp[4];
                for (int j = 0; j < 4; j++)
                    xp[j] = (const th_block_q8_K *)((const char *)x + (size_t)(c + TH_MIN(j, cn - 1)) * x_stride);
                tile(nsb, wr, xp, out);
                for (int j = 0; j < cn; j++) y[(c + j) * y_stride + r] = out[j];
            }
        }
    }
}

#endif
