/* qn.c (avx2) — qN kernels (n = 2..8; format in quant/qn.h, docs/qn.md): the dot
 * product with Q8_0 activations and a batch gemm that decodes each weight group once
 * for up to 4 activation rows. th_avx2_fill_qn puts them in the table.
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

void th_avx2_fill_qn(th_kernels *k) {
#define SET(N) k->vec_dot[TH_Q##N] = dot_q##N; k->gemm[TH_Q##N] = gemm_q##N;
    SET(2) SET(3) SET(4) SET(5) SET(6) SET(7) SET(8)
#undef SET
}
