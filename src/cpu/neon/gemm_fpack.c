/* gemm_fpack.c (neon) — the packed gemm of F16 and BF16 weights (activations of the
 * same type) on the layout of quant/repack.c th_repack8_16bit (per group of 8 rows,
 * element k of the 8 rows side by side: two float32x4 after the widening conversion).
 * Same scheme as avx2/gemm_fpack.c with 4-lane vectors and 32 registers: per call, the
 * activation rows (blocks of up to XC, k blocks of KC) converted to f32 column-major,
 * the weights once per panel of 16 rows (2 groups) and k block into pan[k * 16 + row];
 * the microkernel holds 16 rows x up to 6 activation rows in 24 accumulators (per k: 4
 * loads, 6 broadcast loads, 24 f32 FMLAs); f16 x f16 and bf16 x bf16 products are exact
 * in f32, accumulated in f32, k blocks after the first added to y. (FMLAL, the fp16
 * multiply with f32 accumulation of FEAT_FHM, and BFMMLA of FEAT_BF16 are not used: the
 * level's flags are armv8.2-a+dotprod+fp16, which every neon-level CPU runs.) Decode
 * (nb == 1): each group's stream against the activation in f32. */
#include "cpu/neon/util.h"
#include <stdlib.h>

enum { KC = 256, NR = 6, XC = 512, XC_STACK = 48, MR = 16, KD = 2048 };

#define NEON_INLINE static inline __attribute__((always_inline))

/* 8 values at p (rows 0..7 of one k) as f32: lo = rows 0..3, hi = rows 4..7 */
NEON_INLINE void cvt8(const int bf, const uint16_t *p, float32x4_t *lo, float32x4_t *hi) {
    const uint16x8_t h = vld1q_u16(p);
    if (bf) {
        *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
    } else {
        const float16x8_t f = vreinterpretq_f16_u16(h);
        *lo = vcvt_f32_f16(vget_low_f16(f));
        *hi = vcvt_high_f32_f16(f);
    }
}
NEON_INLINE float cvt1(const int bf, uint16_t h) { return bf ? th_bf16_to_f32(h) : neon_f16(h); }

/* dst[k] = src[k] as f32, k < kc */
NEON_INLINE void convert_row(const int bf, const uint16_t *src, int64_t kc, float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        float32x4_t lo, hi;
        cvt8(bf, src + k, &lo, &hi);
        vst1q_f32(dst + k, lo);
        vst1q_f32(dst + k + 4, hi);
    }
    for (; k < kc; k++) dst[k] = cvt1(bf, src[k]);
}

/* pan[k * MR + 8q + i] = row 8q + i of the panel at element k0 + k, q < ng */
NEON_INLINE void convert_panel(const int bf, const uint16_t *w, int64_t n, int ng, int64_t k0, int64_t kc, float *pan) {
    for (int q = 0; q < ng; q++) {
        const uint16_t *g = w + (size_t)q * 8 * (size_t)n + 8 * k0;
        for (int64_t k = 0; k < kc; k++) {
            float32x4_t lo, hi;
            cvt8(bf, g + 8 * k, &lo, &hi);
            vst1q_f32(pan + k * MR + 8 * q, lo);
            vst1q_f32(pan + k * MR + 8 * q + 4, hi);
        }
    }
}

/* y[j * ys + i] (+)= sum over k < kc of pan[k][i] * xb[j * KC + k], i < 8 MV, j < NC */
NEON_INLINE void micro(const int MV, const int NC, int64_t kc, const float *pan, const float *xb, float *y, int64_t ys,
                       bool add) {
    float32x4_t c[NR][4];
    _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) c[j][0] = c[j][1] = c[j][2] = c[j][3] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < kc; k++) {
        const float *p = pan + k * MR;
        const float32x4_t w0 = vld1q_f32(p), w1 = vld1q_f32(p + 4);
        const float32x4_t w2 = MV == 2 ? vld1q_f32(p + 8) : w0, w3 = MV == 2 ? vld1q_f32(p + 12) : w1;
        _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++) {
            const float32x4_t b = vld1q_dup_f32(xb + j * KC + k);
            c[j][0] = vfmaq_f32(c[j][0], w0, b);
            c[j][1] = vfmaq_f32(c[j][1], w1, b);
            if (MV == 2) {
                c[j][2] = vfmaq_f32(c[j][2], w2, b);
                c[j][3] = vfmaq_f32(c[j][3], w3, b);
            }
        }
    }
    _Pragma("GCC unroll 6") for (int j = 0; j < NC; j++)
        for (int v = 0; v < 2 * MV; v++) {
            float *yp = y + j * ys + 4 * v;
            vst1q_f32(yp, add ? vaddq_f32(c[j][v], vld1q_f32(yp)) : c[j][v]);
        }
}

typedef void (*micro_fn)(int64_t kc, const float *pan, const float *xb, float *y, int64_t ys, bool add);
#define MICRO(MV, NC)                                                                                       \
    static void micro_##MV##_##NC(int64_t kc, const float *pan, const float *xb, float *y, int64_t ys, bool add) { \
        micro(MV, NC, kc, pan, xb, y, ys, add);                                                             \
    }
#define MICRO_MV(MV) MICRO(MV, 1) MICRO(MV, 2) MICRO(MV, 3) MICRO(MV, 4) MICRO(MV, 5) MICRO(MV, 6)
MICRO_MV(1)
MICRO_MV(2)
static const micro_fn micros[2][NR] = {
    { micro_1_1, micro_1_2, micro_1_3, micro_1_4, micro_1_5, micro_1_6 },
    { micro_2_1, micro_2_2, micro_2_3, micro_2_4, micro_2_5, micro_2_6 },
};

/* Decode: y[r] = dot(row r, x) for the groups of [r0, r1). */
NEON_INLINE void matvec(const int bf, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, const void *x, float *y) {
    float xf[KD];
    for (int64_t k0 = 0; k0 < n; k0 += KD) {
        const int64_t kd = TH_MIN(KD, n - k0);
        convert_row(bf, (const uint16_t *)x + k0, kd, xf);
        for (int64_t r = r0; r < r1; r += 8) {
            const uint16_t *g = (const uint16_t *)(const void *)((const char *)w + (size_t)r * ws) + 8 * k0;
            float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
            int64_t k = 0;
            for (; k + 2 <= kd; k += 2) {
                float32x4_t l0, h0, l1, h1;
                cvt8(bf, g + 8 * k, &l0, &h0);
                cvt8(bf, g + 8 * k + 8, &l1, &h1);
                a0 = vfmaq_n_f32(a0, l0, xf[k]);
                a1 = vfmaq_n_f32(a1, h0, xf[k]);
                a2 = vfmaq_n_f32(a2, l1, xf[k + 1]);
                a3 = vfmaq_n_f32(a3, h1, xf[k + 1]);
            }
            for (; k < kd; k++) {
                float32x4_t l0, h0;
                cvt8(bf, g + 8 * k, &l0, &h0);
                a0 = vfmaq_n_f32(a0, l0, xf[k]);
                a1 = vfmaq_n_f32(a1, h0, xf[k]);
            }
            float32x4_t s0 = vaddq_f32(a0, a2), s1 = vaddq_f32(a1, a3);
            if (k0) { s0 = vaddq_f32(s0, vld1q_f32(y + r)); s1 = vaddq_f32(s1, vld1q_f32(y + r + 4)); }
            vst1q_f32(y + r, s0);
            vst1q_f32(y + r + 4, s1);
        }
    }
}

NEON_INLINE void fpack(const int bf, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,
                       const void *x, size_t xs, float *y, int64_t ys) {
    if (nb == 1) { matvec(bf, n, r0, r1, w, ws, x, y); return; }
    float pan[KC * MR];
    float xb_stack[XC_STACK * KC];
    int64_t xc = TH_MIN(nb, XC);
    float *xb = xc > XC_STACK ? malloc(sizeof(float) * (size_t)(xc * KC)) : NULL;
    if (!xb) { xb = xb_stack; xc = TH_MIN(xc, XC_STACK); }
    for (int64_t c0 = 0; c0 < nb; c0 += xc) {
        const int64_t ncb = TH_MIN(xc, nb - c0);
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int64_t kc = TH_MIN(KC, n - k0);
            for (int64_t j = 0; j < ncb; j++)
                convert_row(bf, (const uint16_t *)(const void *)((const char *)x + (size_t)(c0 + j) * xs) + k0, kc, xb + j * KC);
            for (int64_t r = r0; r < r1; r += MR) {
                const int mv = TH_MIN(MR, r1 - r) > 8 ? 2 : 1;
                convert_panel(bf, (const uint16_t *)(const void *)((const char *)w + (size_t)r * ws), n, mv, k0, kc, pan);
                for (int64_t j0 = 0; j0 < ncb; j0 += NR) {
                    const int nc = (int)TH_MIN(NR, ncb - j0);
                    micros[mv - 1][nc - 1](kc, pan, xb + j0 * KC, y + (c0 + j0) * ys + r, ys, k0 > 0);
                }
            }
        }
    }
    if (xb != xb_stack) free(xb);
}

void th_neon_fpack_f16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                       size_t xs, float *y, int64_t ys) {
    fpack(0, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
void th_neon_fpack_bf16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                        size_t xs, float *y, int64_t ys) {
    fpack(1, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
