/* gemm_float.c (avx2) — AVX2/FMA batch gemm for F32, F16 and BF16 weights (activations
 * of the same type). Tiles of 4 weight rows x 2 activation rows: every 8-element step
 * converts 6 vectors and does 8 fused multiply-adds into 8 accumulators. Any n
 * (scalar tail). Edge tiles repeat the last row/column and store only valid outputs. */
#include "cpu/avx2/util.h"

static inline __m256 ld_f32(const void *p, int64_t i) { return _mm256_loadu_ps((const float *)p + i); }
static inline __m256 ld_f16(const void *p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
static inline __m256 ld_bf16(const void *p, int64_t i) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
static inline float sc_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
static inline float sc_f16(const void *p, int64_t i) { return avx2_f16(((const uint16_t *)p)[i]); }
static inline float sc_bf16(const void *p, int64_t i) { return th_bf16_to_f32(((const uint16_t *)p)[i]); }

#define FLOAT_TILE(NAME, LD, SC)                                                                \
    static void NAME(int64_t n, const void *const w[4], const void *const x[2], float out[4][2]) { \
        __m256 c[4][2];                                                                          \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) c[i][0] = c[i][1] = _mm256_setzero_ps(); \
        int64_t k = 0;                                                                           \
        for (; k + 8 <= n; k += 8) {                                                             \
            const __m256 a0 = LD(x[0], k), a1 = LD(x[1], k);                                     \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                \
                const __m256 wv = LD(w[i], k);                                                   \
                c[i][0] = _mm256_fmadd_ps(wv, a0, c[i][0]);                                      \
                c[i][1] = _mm256_fmadd_ps(wv, a1, c[i][1]);                                      \
            }                                                                                    \
        }                                                                                        \
        for (int i = 0; i < 4; i++)                                                              \
            for (int j = 0; j < 2; j++) {                                                        \
                float s = avx2_hsum_ps(c[i][j]);                                                 \
                for (int64_t t = k; t < n; t++) s += SC(w[i], t) * SC(x[j], t);                  \
                out[i][j] = s;                                                                   \
            }                                                                                    \
    }

FLOAT_TILE(tile_f32, ld_f32, sc_f32)
FLOAT_TILE(tile_f16, ld_f16, sc_f16)
FLOAT_TILE(tile_bf16, ld_bf16, sc_bf16)

typedef void (*ftile_fn)(int64_t n, const void *const w[4], const void *const x[2], float out[4][2]);

static void gemm_float(ftile_fn tile, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,
                       int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    float out[4][2];
    for (int64_t c0 = 0; c0 < nb; c0 += 16) {         /* activation rows in L2-sized chunks */
        const int64_t c1 = TH_MIN(nb, c0 + 16);
        for (int64_t r = r0; r < r1; r += 4) {
            const int rm = (int)TH_MIN(4, r1 - r);
            const void *wp[4];
            for (int i = 0; i < 4; i++) wp[i] = (const char *)w + (size_t)(r + TH_MIN(i, rm - 1)) * ws;
            for (int64_t c = c0; c < c1; c += 2) {
                const int cn = (int)TH_MIN(2, c1 - c);
                const void *xp[2] = { (const char *)x + (size_t)c * xs, (const char *)x + (size_t)(c + cn - 1) * xs };
                tile(n, wp, xp, out);
                for (int i = 0; i < rm; i++)
                    for (int j = 0; j < cn; j++) y[(c + j) * ys + r + i] = out[i][j];
            }
        }
    }
}

#define FLOAT_BATCH(NAME, TILE)                                                                 \
    void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
              size_t xs, float *y, int64_t ys) {                                                    \
        gemm_float(TILE, n, r0, r1, w, ws, nb, x, xs, y, ys);                                       \
    }
FLOAT_BATCH(th_avx2_batch_f32, tile_f32)
FLOAT_BATCH(th_avx2_batch_f16, tile_f16)
FLOAT_BATCH(th_avx2_batch_bf16, tile_bf16)
