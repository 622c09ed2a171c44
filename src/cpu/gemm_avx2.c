/* gemm_avx2.c — AVX2 gemm (weight rows x a batch of activation rows) for the
 * 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4. The work is cut in
 * tiles of 4 weight rows x 4 activation rows: each weight block is decoded once per
 * tile and each activation block loaded once per tile, giving 16 block dot products.
 * The 4 per-activation integer sums of a weight row are folded into one 128-bit
 * vector (unpack + add), so one f32 multiply-add per weight row and block scales them.
 * Activation rows are walked in chunks of 32 so that they stay in L2 while the
 * weight rows of [r0, r1) pass. Edge tiles repeat the last row/column pointer and
 * store only the valid outputs. (Q4_0/Q4_1/Q5_0/Q5_1 are then overridden by the
 * 8-row kernels of gemm_x8_avx2.c; these tiles stay for Q8_0, IQ4_NL, MXFP4.)
 * A batch of one activation row goes to the table's vec_dot (matrix-vector). */
#include "cpu/gemm_walk.h"
#include "cpu/avx2_util.h"

static const int8_t iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113 };

/* Weight decoders: 32 bytes in element order. "Unsigned" kinds return value + offset
 * (0..31) for vpmaddubsw; "signed" kinds return the int8 value. */
static inline __m256i dec_q4_0(const void *b) { return avx2_nibbles32(((const th_block_q4_0 *)b)->qs); }
static inline __m256i dec_q4_1(const void *b) { return avx2_nibbles32(((const th_block_q4_1 *)b)->qs); }
static inline __m256i dec_q5_0(const void *b) {
    const th_block_q5_0 *x = b;
    return _mm256_or_si256(avx2_nibbles32(x->qs), _mm256_and_si256(avx2_bits32(x->qh), _mm256_set1_epi8(0x10)));
}
static inline __m256i dec_q5_1(const void *b) {
    const th_block_q5_1 *x = b;
    return _mm256_or_si256(avx2_nibbles32(x->qs), _mm256_and_si256(avx2_bits32(x->qh), _mm256_set1_epi8(0x10)));
}
static inline __m256i dec_q8_0(const void *b) { return _mm256_loadu_si256((const __m256i *)((const th_block_q8_0 *)b)->qs); }
static inline __m256i dec_iq4_nl(const void *b) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    return _mm256_shuffle_epi8(table, avx2_nibbles32(((const th_block_iq4_nl *)b)->qs));
}

static const int8_t mxfp4_values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
static inline __m256i dec_mxfp4(const void *b) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mxfp4_values));
    return _mm256_shuffle_epi8(table, avx2_nibbles32(((const th_block_mxfp4 *)b)->qs));
}

enum { KIND_OFFSET, KIND_SIGNED, KIND_MIN };

/* Scale (d) and min (m) of a weight block: d is the first u16 of every block here,
 * m the second for Q4_1/Q5_1. Activation blocks: d first, s (Q8_1) second. */
static inline float blk_d(const void *b) { uint16_t h; memcpy(&h, b, 2); return avx2_f16(h); }
static inline float blk_e8m0(const void *b) { return avx2_e8m0_half(*(const uint8_t *)b); }
static inline float blk_m(const void *b) { uint16_t h; memcpy(&h, (const char *)b + 2, 2); return avx2_f16(h); }

/* One 4x4 tile over nblk blocks. w[i] / x[j]: row pointers; out[i][j] = dot(w_i, x_j). */
#define TILE_FN(NAME, WBYTES, ABYTES, AQS, DECODE, KIND, OFF, WSCALE)                                  \
    static void NAME(int64_t nblk, const char *const w[4], const char *const x[4], float out[4][4]) { \
        __m128 acc[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() }; \
        const __m256i ones = _mm256_set1_epi8(1);                                              \
        for (int64_t b = 0; b < nblk; b++) {                                                   \
            const char *xb[4] = { x[0] + b * ABYTES, x[1] + b * ABYTES, x[2] + b * ABYTES, x[3] + b * ABYTES }; \
            __m256i av[4];                                                                     \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) av[j] = _mm256_loadu_si256((const __m256i *)(xb[j] + AQS)); \
            const __m128 da = _mm_setr_ps(blk_d(xb[0]), blk_d(xb[1]), blk_d(xb[2]), blk_d(xb[3])); \
            __m128i corr = _mm_setzero_si128();                                                \
            __m128 sa = _mm_setzero_ps();                                                      \
            if (KIND == KIND_OFFSET)                                                           \
                corr = _mm_mullo_epi32(_mm_set1_epi32(OFF),                                    \
                    avx2_reduce4(avx2_dot_u8s8(ones, av[0]), avx2_dot_u8s8(ones, av[1]),            \
                            avx2_dot_u8s8(ones, av[2]), avx2_dot_u8s8(ones, av[3])));          \
            if (KIND == KIND_MIN)                                                              \
                sa = _mm_setr_ps(blk_m(xb[0]), blk_m(xb[1]), blk_m(xb[2]), blk_m(xb[3]));      \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                              \
                const char *wb = w[i] + b * WBYTES;                                            \
                __m256i q = DECODE(wb);                                                        \
                __m128i v;                                                                     \
                if (KIND == KIND_SIGNED) {                                                     \
                    __m256i qa = _mm256_sign_epi8(q, q);                                       \
                    v = avx2_reduce4(avx2_dot_u8s8(qa, _mm256_sign_epi8(av[0], q)),                 \
                                avx2_dot_u8s8(qa, _mm256_sign_epi8(av[1], q)),                 \
                                avx2_dot_u8s8(qa, _mm256_sign_epi8(av[2], q)),                 \
                                avx2_dot_u8s8(qa, _mm256_sign_epi8(av[3], q)));                \
                } else {                                                                       \
                    v = avx2_reduce4(avx2_dot_u8s8(q, av[0]), avx2_dot_u8s8(q, av[1]),              \
                                avx2_dot_u8s8(q, av[2]), avx2_dot_u8s8(q, av[3]));             \
                    v = _mm_sub_epi32(v, corr);                                                \
                }                                                                              \
                acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(v), _mm_mul_ps(_mm_set1_ps(WSCALE(wb)), da), acc[i]); \
                if (KIND == KIND_MIN) acc[i] = _mm_fmadd_ps(_mm_set1_ps(blk_m(wb)), sa, acc[i]); \
            }                                                                                  \
        }                                                                                      \
        for (int i = 0; i < 4; i++) _mm_storeu_ps(out[i], acc[i]);                             \
    }

TILE_FN(tile_q4_0, 18, 34, 2, dec_q4_0, KIND_OFFSET, 8, blk_d)
TILE_FN(tile_q5_0, 22, 34, 2, dec_q5_0, KIND_OFFSET, 16, blk_d)
TILE_FN(tile_q8_0, 34, 34, 2, dec_q8_0, KIND_SIGNED, 0, blk_d)
TILE_FN(tile_iq4_nl, 18, 34, 2, dec_iq4_nl, KIND_SIGNED, 0, blk_d)
TILE_FN(tile_mxfp4, 17, 34, 2, dec_mxfp4, KIND_SIGNED, 0, blk_e8m0)
TILE_FN(tile_q4_1, 20, 36, 4, dec_q4_1, KIND_MIN, 0, blk_d)
TILE_FN(tile_q5_1, 24, 36, 4, dec_q5_1, KIND_MIN, 0, blk_d)

typedef th_tile4_fn tile_fn;

/* A batch of one goes through vec_dot; larger ones through the 4x4 tiles. */
static void gemm_tiled(tile_fn tile, uint32_t type, int64_t n, int64_t r0, int64_t r1, const void *w,
                       size_t w_stride, int64_t nb, const void *x, size_t x_stride, float *y, int64_t y_stride) {
    if (nb < 2) {
        th_gemm_by_vec_dot(type, th_cpu_kernels(), n, r0, r1, w, w_stride, nb, x, x_stride, y, y_stride);
        return;
    }
    th_gemm_walk4x4(tile, n / TH_QK, r0, r1, w, w_stride, nb, x, x_stride, y, y_stride);
}

#define GEMM_ENTRY(NAME, TILE, TYPE)                                                           \
    static void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,  \
                     const void *x, size_t xs, float *y, int64_t ys) {                          \
        gemm_tiled(TILE, TYPE, n, r0, r1, w, ws, nb, x, xs, y, ys);                            \
    }

GEMM_ENTRY(gemm_q4_0, tile_q4_0, TH_Q4_0)
GEMM_ENTRY(gemm_q4_1, tile_q4_1, TH_Q4_1)
GEMM_ENTRY(gemm_q5_0, tile_q5_0, TH_Q5_0)
GEMM_ENTRY(gemm_q5_1, tile_q5_1, TH_Q5_1)
GEMM_ENTRY(gemm_q8_0, tile_q8_0, TH_Q8_0)
GEMM_ENTRY(gemm_iq4_nl, tile_iq4_nl, TH_IQ4_NL)
GEMM_ENTRY(gemm_mxfp4, tile_mxfp4, TH_MXFP4)

void th_avx2_fill_gemm(th_kernels *k) {
    k->gemm[TH_Q4_0] = gemm_q4_0;
    k->gemm[TH_Q4_1] = gemm_q4_1;
    k->gemm[TH_Q5_0] = gemm_q5_0;
    k->gemm[TH_Q5_1] = gemm_q5_1;
    k->gemm[TH_Q8_0] = gemm_q8_0;
    k->gemm[TH_IQ4_NL] = gemm_iq4_nl;
    k->gemm[TH_MXFP4] = gemm_mxfp4;
    th_avx2_fill_gemm_kquant(k);
    th_avx2_fill_gemm_float(k);
    th_avx2_fill_gemm_x8(k);
}
