/* qn.c (neon) — qN kernels (n = 2..8; format in quant/qn.h, docs/qn.md) with the
 * dot-product instructions: the 2 bytes of plane p that hold 16 weights are duplicated
 * into every 16-bit lane; lane c tests bit c of both its bytes (vtst: 0 or -1), so byte
 * k is bit p of weight e(k) = 8 (k % 2) + k / 2, and the activations are put in that
 * order by one zip of their two 8-byte halves. Horner's rule combines the planes
 * (code = 2 code + bit); v = 2 code - (2^n - 1) fits in int8 for n <= 7 and one sdot
 * gives the reference's exact integer; for n = 8, q = code - 128 and
 * isum = 2 sum q a + sum a. The gemm is the dot product per output; the packed gemm
 * (decode and prefill on the 8-row layout of quant/repack.c) is below. */
#include "cpu/neon/util.h"
#include "cpu/gemm_packed.h"
#include "quant/qn.h"

/* 16 doubled levels (n <= 7) or code - 128 (n = 8) of weights 16 s .. 16 s + 15 of group g, in the order e(k). */
static inline __attribute__((always_inline)) int8x16_t qn_16(const int N, const uint8_t *g, int s) {
    static const uint8_t selb[16] = { 1, 1, 2, 2, 4, 4, 8, 8, 16, 16, 32, 32, 64, 64, 128, 128 };
    const uint8x16_t sel = vld1q_u8(selb);
    uint8x16_t c = vdupq_n_u8(0);
    _Pragma("GCC unroll 8") for (int p = N - 1; p >= 0; p--) {
        uint16_t two;
        memcpy(&two, g + 2 + 8 * p + 2 * s, 2);
        const uint8x16_t m = vtstq_u8(vreinterpretq_u8_u16(vdupq_n_u16(two)), sel);
        c = vsubq_u8(vaddq_u8(c, c), m);
    }
    if (N == 8) return vreinterpretq_s8_u8(veorq_u8(c, vdupq_n_u8(0x80)));
    return vreinterpretq_s8_u8(vsubq_u8(vaddq_u8(c, c), vdupq_n_u8((uint8_t)((1 << N) - 1))));
}

/* The 16 activations at qs in the order e(k). */
static inline int8x16_t qn_act16(const int8_t *qs) { return vzip1q_s8(vld1q_s8(qs), vcombine_s8(vld1_s8(qs + 8), vld1_s8(qs + 8))); }

static inline __attribute__((always_inline)) void qn_dot(const int N, int64_t n, float *s, const void *w, const void *act) {
    const uint8_t *g = w;
    const th_block_q8_0 *a = act;
    const size_t gb = th_qn_group_bytes(N);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / TH_QN_BLOCK; i++, g += gb) {
        const float d = neon_f16((uint16_t)(g[0] | (g[1] << 8)));
        for (int h = 0; h < 2; h++) {
            const th_block_q8_0 *b = &a[2 * i + h];
            const int8x16_t a0 = qn_act16(b->qs), a1 = qn_act16(b->qs + 16);
            int32x4_t is = vdotq_s32(vdotq_s32(vdupq_n_s32(0), qn_16(N, g, 2 * h), a0), qn_16(N, g, 2 * h + 1), a1);
            if (N == 8) {
                const int8x16_t one = vdupq_n_s8(1);
                is = vaddq_s32(vaddq_s32(is, is), vdotq_s32(vdotq_s32(vdupq_n_s32(0), one, a0), one, a1));
            }
            acc = vmlaq_n_f32(acc, vcvtq_f32_s32(is), d * neon_f16(b->d));
        }
    }
    *s = 0.5f * vaddvq_f32(acc);
}

#define QN_LEVEL(N)                                                                                    \
    static void dot_q##N(int64_t n, float *s, const void *w, const void *a) { qn_dot(N, n, s, w, a); } \
    TH_GEMM_BY_DOT(gemm_q##N, dot_q##N)
QN_LEVEL(2)
QN_LEVEL(3)
QN_LEVEL(4)
QN_LEVEL(5)
QN_LEVEL(6)
QN_LEVEL(7)
QN_LEVEL(8)

/* ---------------------------------------------------------------- packed gemm
 *
 * The 8-row layout (quant/repack.c, the AVX-512 one): per packed group, the 8 rows'
 * f16 scales, then per step pair kk and plane p a 64-bit mask whose bit 32h + 4i + e is
 * bit p of row i's code of element 8kk + 4h + e. Mask bytes 4h + 2u, 4h + 2u + 1 hold rows
 * 4u .. 4u + 3; each byte is spread over 8 lanes and tested (vtst), so byte 4i' + e of
 * the vector is that row's bit and one sdot with the 4 activation bytes of elements
 * 8kk + 4h .. + 3 (in every lane) adds 4 products to each row's 32-bit lane. isum = 2 S
 * + start per activation block: S = sum code a and start = -(2^n - 1) sum a for n <= 7
 * (codes <= 127 as signed bytes), S = sum (code - 128) a and start = sum a for n = 8 —
 * the reference's exact integer. Each group is decoded once for up to 4 activation rows
 * (qp_tile), or, with more rows in the chunk, once for all of them (qp_rows). */
enum { QP_NC = 4 };
typedef struct { float d; int32_t start; } qp_atab;

/* Codes (n <= 7) or code - 128 (n = 8) of rows 4u .. 4u + 3 x 4 elements of step pair kk, half h. */
static inline __attribute__((always_inline)) int8x16_t qp_codes(const int N, const uint8_t *pg, int kk, int h, int u) {
    static const uint8_t selb[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
    const uint8x16_t sel = vld1q_u8(selb);
    uint8x16_t c = vdupq_n_u8(0);
    _Pragma("GCC unroll 8") for (int p = N - 1; p >= 0; p--) {
        const uint8_t *m = pg + 16 + 8 * (N * kk + p) + 4 * h + 2 * u;
        const uint8x16_t b = vcombine_u8(vdup_n_u8(m[0]), vdup_n_u8(m[1]));
        c = vsubq_u8(vaddq_u8(c, c), vtstq_u8(b, sel));
    }
    return vreinterpretq_s8_u8(N == 8 ? veorq_u8(c, vdupq_n_u8(0x80)) : c);
}

static inline __attribute__((always_inline)) void qp_prep(const int N, int64_t nblk, const char *x, size_t xs,
                                                          int64_t c0, int64_t c1, qp_atab *tab) {
    const int8x16_t one = vdupq_n_s8(1);
    for (int64_t c = c0; c < c1; c++) {
        const th_block_q8_0 *a = (const th_block_q8_0 *)(x + (size_t)c * xs);
        qp_atab *t = tab + (c - c0) * nblk;
        for (int64_t b = 0; b < nblk; b++) {
            const int32_t sum = vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), one, vld1q_s8(a[b].qs)), one,
                                                     vld1q_s8(a[b].qs + 16)));
            t[b].d = neon_f16(a[b].d);
            t[b].start = N == 8 ? sum : -((1 << N) - 1) * sum;
        }
    }
}

static inline __attribute__((always_inline)) void qp_tile(const int N, const int NC, int64_t ngr, const uint8_t *wg,
                                                          const char *const x[QP_NC], const qp_atab *const t[QP_NC],
                                                          float32x4_t out[QP_NC][2]) {
    const int64_t gb8 = 8 * (8 * N + 2);
    float32x4_t acc[QP_NC][2];
    _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < ngr; b++) {
        const uint8_t *pg = wg + b * gb8;
        float32x4_t dw[2];
        for (int u = 0; u < 2; u++) {
            float f[4];
            for (int i = 0; i < 4; i++) f[i] = neon_f16((uint16_t)(pg[8 * u + 2 * i] | (pg[8 * u + 2 * i + 1] << 8)));
            dw[u] = vld1q_f32(f);
        }
        _Pragma("GCC unroll 2") for (int hb = 0; hb < 2; hb++) {
            int32x4_t S[QP_NC][2];
            _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) S[j][0] = S[j][1] = vdupq_n_s32(0);
            for (int q = 0; q < 4; q++)
                _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                    const int8x16_t c0 = qp_codes(N, pg, 4 * hb + q, h, 0), c1 = qp_codes(N, pg, 4 * hb + q, h, 1);
                    _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                        const th_block_q8_0 *a = (const th_block_q8_0 *)x[j] + 2 * b + hb;
                        int32_t w4;
                        memcpy(&w4, a->qs + 8 * q + 4 * h, 4);
                        const int8x16_t av = vreinterpretq_s8_s32(vdupq_n_s32(w4));
                        S[j][0] = vdotq_s32(S[j][0], c0, av);
                        S[j][1] = vdotq_s32(S[j][1], c1, av);
                    }
                }
            _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++) {
                const qp_atab *ta = t[j] + 2 * b + hb;
                const int32x4_t st = vdupq_n_s32(ta->start);
                for (int u = 0; u < 2; u++) {
                    const int32x4_t is = vaddq_s32(vaddq_s32(S[j][u], S[j][u]), st);
                    acc[j][u] = vmlaq_f32(acc[j][u], vcvtq_f32_s32(is), vmulq_n_f32(dw[u], ta->d));
                }
            }
        }
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < NC; j++)
        for (int u = 0; u < 2; u++) out[j][u] = vmulq_n_f32(acc[j][u], 0.5f);
}

typedef void (*qp_tile_fn)(int64_t ngr, const uint8_t *wg, const char *const x[QP_NC], const qp_atab *const t[QP_NC],
                           float32x4_t out[QP_NC][2]);

/* 8 rows x activation rows [c0, c1) of one chunk (prefill): each group is decoded once
 * into cb for all of them, and the rows' sums wait in acc between groups. The float
 * operations per output are qp_tile's, in the same order (the same results). */
static inline __attribute__((always_inline)) void qp_rows(const int N, int64_t ngr, const uint8_t *wg, const char *x,
                                                          size_t xs, int64_t c0, int64_t c1, const qp_atab *tab,
                                                          int64_t nblk, float *y, int64_t ys, int64_t r) {
    const int64_t gb8 = 8 * (8 * N + 2);
    float acc[TH_PACKED_CHUNK_ROWS + QP_NC][8];
    int8x16_t cb[32];
    memset(acc, 0, sizeof acc);
    for (int64_t b = 0; b < ngr; b++) {
        const uint8_t *pg = wg + b * gb8;
        float32x4_t dw[2];
        for (int u = 0; u < 2; u++) {
            float f[4];
            for (int i = 0; i < 4; i++) f[i] = neon_f16((uint16_t)(pg[8 * u + 2 * i] | (pg[8 * u + 2 * i + 1] << 8)));
            dw[u] = vld1q_f32(f);
        }
        for (int kk = 0; kk < 8; kk++)
            for (int h = 0; h < 2; h++)
                for (int u = 0; u < 2; u++) cb[4 * kk + 2 * h + u] = qp_codes(N, pg, kk, h, u);
        for (int64_t c = c0; c < c1; c += QP_NC) {
            const th_block_q8_0 *a[QP_NC];
            const qp_atab *t[QP_NC];
            _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) {
                const int64_t cj = TH_MIN(c + j, c1 - 1);
                a[j] = (const th_block_q8_0 *)(x + (size_t)cj * xs) + 2 * b;
                t[j] = tab + (cj - c0) * nblk + 2 * b;
            }
            _Pragma("GCC unroll 2") for (int hb = 0; hb < 2; hb++) {
                int32x4_t S[QP_NC][2];
                _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) S[j][0] = S[j][1] = vdupq_n_s32(0);
                for (int q = 0; q < 4; q++)
                    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                        const int8x16_t c0v = cb[4 * (4 * hb + q) + 2 * h], c1v = cb[4 * (4 * hb + q) + 2 * h + 1];
                        _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) {
                            int32_t w4;
                            memcpy(&w4, a[j][hb].qs + 8 * q + 4 * h, 4);
                            const int8x16_t av = vreinterpretq_s8_s32(vdupq_n_s32(w4));
                            S[j][0] = vdotq_s32(S[j][0], c0v, av);
                            S[j][1] = vdotq_s32(S[j][1], c1v, av);
                        }
                    }
                _Pragma("GCC unroll 4") for (int j = 0; j < QP_NC; j++) {
                    float *o = acc[c - c0 + j];
                    const int32x4_t st = vdupq_n_s32(t[j][hb].start);
                    for (int u = 0; u < 2; u++) {
                        const int32x4_t is = vaddq_s32(vaddq_s32(S[j][u], S[j][u]), st);
                        vst1q_f32(o + 4 * u, vmlaq_f32(vld1q_f32(o + 4 * u), vcvtq_f32_s32(is), vmulq_n_f32(dw[u], t[j][hb].d)));
                    }
                }
            }
        }
    }
    for (int64_t c = c0; c < c1; c++)
        for (int u = 0; u < 2; u++) vst1q_f32(y + c * ys + r + 4 * u, vmulq_n_f32(vld1q_f32(acc[c - c0] + 4 * u), 0.5f));
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
                float32x4_t out[QP_NC][2];
                (cn > 2 ? t4 : cn > 1 ? t2 : t1)(ngr, wg, xp, tp, out);
                for (int j = 0; j < cn; j++) {
                    vst1q_f32(y + (c + j) * ys + r, out[j][0]);
                    vst1q_f32(y + (c + j) * ys + r + 4, out[j][1]);
                }
                c += cn;
            }
        }
    }
}

#define QP_TILE(N, NC)                                                                                             \
    static __attribute__((noinline)) void qp_tile_q##N##_##NC(int64_t ngr, const uint8_t *wg, const char *const x[QP_NC], \
                                                              const qp_atab *const t[QP_NC], float32x4_t out[QP_NC][2]) { \
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

void th_neon_fill_qn(th_kernels *k) {
#define SET(N) k->vec_dot[TH_Q##N] = dot_q##N; k->gemm[TH_Q##N] = gemm_q##N; k->gemm_packed[TH_Q##N] = packed_q##N;
    SET(2) SET(3) SET(4) SET(5) SET(6) SET(7) SET(8)
#undef SET
}
