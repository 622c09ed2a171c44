/* qn.c (avx512) — qN kernels (n = 2..8; format in quant/qn.h, docs/qn.md) with
 * AVX-512 BW + VNNI: each 64-bit plane is a mask register as it is stored, so the 64
 * codes of a group are n masked byte adds (code += 2^p where bit p is set), in the
 * weights' own order. One vpdpbusd gives sum code * a per 4 bytes, a second with ones
 * sum a; isum = 2 sum code a - (2^n - 1) sum a is the reference's exact integer per
 * 32-element activation block (lanes 0..7: the group's first half, 8..15: the second).
 * The batch gemm decodes each group once for up to 4 activation rows. */
#include "cpu/avx512/util.h"
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
#define SET(N) k->vec_dot[TH_Q##N] = dot_q##N; k->gemm[TH_Q##N] = gemm_q##N;
    SET(2) SET(3) SET(4) SET(5) SET(6) SET(7) SET(8)
#undef SET
}
