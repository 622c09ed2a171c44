/* qn.c (neon) — qN kernels (n = 2..8; format in quant/qn.h, docs/qn.md) with the
 * dot-product instructions: the 2 bytes of plane p that hold 16 weights are duplicated
 * into every 16-bit lane; lane c tests bit c of both its bytes (vtst: 0 or -1), so byte
 * k is bit p of weight e(k) = 8 (k % 2) + k / 2, and the activations are put in that
 * order by one zip of their two 8-byte halves. Horner's rule combines the planes
 * (code = 2 code + bit); v = 2 code - (2^n - 1) fits in int8 for n <= 7 and one sdot
 * gives the reference's exact integer; for n = 8, q = code - 128 and
 * isum = 2 sum q a + sum a. The gemm is the dot product per output. */
#include "cpu/neon/util.h"
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

void th_neon_fill_qn(th_kernels *k) {
#define SET(N) k->vec_dot[TH_Q##N] = dot_q##N; k->gemm[TH_Q##N] = gemm_q##N;
    SET(2) SET(3) SET(4) SET(5) SET(6) SET(7) SET(8)
#undef SET
}
