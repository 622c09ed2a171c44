/* gemm_kquant.c (neon) — NEON batch gemm for the 256-element super-block types (Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, IQ4_XS). Their bit unpacking costs more than the multiplies, so
 * each weight super-block is decoded once into a small buffer — 256 int8 values or
 * codes in element order, 16 scales and 16 mins (one per 16 elements) and the f32
 * scales — and reused for up to 32 activation rows (walked in chunks that stay in
 * cache while one weight row passes). Each product is 16 sdot, pairwise folds and one
 * integer multiply-add by the scales; mins are removed exactly through the
 * activation's bsums. */
#include "cpu/neon/legacy.h"

typedef struct {
    int8_t q[TH_QK_K];  /* value (Q3_K, Q6_K, IQ4_XS) or unsigned code (Q2_K, Q4_K, Q5_K) */
    int8_t sc[16];      /* integer scale per 16 elements */
    int16_t mn[16];     /* integer min per 16 elements (0 for the types without mins) */
    float d, dmin;      /* f32 super-block scales */
    bool has_min;
} kdec;

typedef void (*kdecode_fn)(const void *blk, kdec *o);

static inline uint8x16_t u8(int8x16_t v) { return vreinterpretq_u8_s8(v); }

static void kdec_q2_K(const void *vb, kdec *o) {
    const th_block_q2_K *b = vb;
    const uint8x16_t raw = vld1q_u8(b->scales), m3 = vdupq_n_u8(3);
    vst1q_s8(o->sc, vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f))));
    const uint8x16_t mn = vshrq_n_u8(raw, 4);
    vst1q_s16(o->mn, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn))));
    vst1q_s16(o->mn + 8, vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(mn))));
    for (int h = 0; h < 2; h++) {
        uint8x16_t q0 = vld1q_u8(b->qs + 32 * h), q1 = vld1q_u8(b->qs + 32 * h + 16);
        for (int j = 0; j < 4; j++) {
            vst1q_u8((uint8_t *)o->q + 128 * h + 32 * j, vandq_u8(q0, m3));
            vst1q_u8((uint8_t *)o->q + 128 * h + 32 * j + 16, vandq_u8(q1, m3));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
        }
    }
    o->d = neon_f16(b->d);
    o->dmin = neon_f16(b->dmin);
    o->has_min = true;
}

static void kdec_q3_K(const void *vb, kdec *o) {
    const th_block_q3_K *b = vb;
    vst1q_s8(o->sc, neon_q3k_scales(b->scales));
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    const uint8x16_t hm0 = vld1q_u8(b->hmask), hm1 = vld1q_u8(b->hmask + 16);
    for (int h = 0; h < 2; h++) {
        uint8x16_t q0 = vld1q_u8(b->qs + 32 * h), q1 = vld1q_u8(b->qs + 32 * h + 16);
        for (int j = 0; j < 4; j++) {
            const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + j)));
            vst1q_u8((uint8_t *)o->q + 128 * h + 32 * j, vsubq_u8(vandq_u8(q0, m3), vbicq_u8(four, vtstq_u8(hm0, bit))));
            vst1q_u8((uint8_t *)o->q + 128 * h + 32 * j + 16, vsubq_u8(vandq_u8(q1, m3), vbicq_u8(four, vtstq_u8(hm1, bit))));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
        }
    }
    o->d = neon_f16(b->d);
    o->dmin = 0.0f;
    o->has_min = false;
}

/* Q4_K/Q5_K: sub-block scales and mins (one per 32) stored twice, one per 16. */
static void k4_scales16(const uint8_t *scales, kdec *o) {
    uint8x8_t sc, mn;
    neon_k4_scales(scales, &sc, &mn);
    vst1q_s8(o->sc, vreinterpretq_s8_u8(vzip1q_u8(vcombine_u8(sc, sc), vcombine_u8(sc, sc))));
    const uint16x8_t m = vmovl_u8(mn);
    vst1q_s16(o->mn, vreinterpretq_s16_u16(vzip1q_u16(m, m)));
    vst1q_s16(o->mn + 8, vreinterpretq_s16_u16(vzip2q_u16(m, m)));
}

static void kdec_k4(const uint8_t *qs, const uint8_t *qh, kdec *o) {
    const uint8x16_t low4 = vdupq_n_u8(0x0f), x10 = vdupq_n_u8(0x10);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
    if (qh) { h0 = vld1q_u8(qh); h1 = vld1q_u8(qh + 16); }
    for (int c = 0; c < 4; c++) {
        const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
        uint8x16_t l0 = vandq_u8(q0, low4), l1 = vandq_u8(q1, low4), u0 = vshrq_n_u8(q0, 4), u1 = vshrq_n_u8(q1, 4);
        if (qh) {
            l0 = vorrq_u8(l0, vandq_u8(vshlq_n_u8(h0, 4), x10));
            l1 = vorrq_u8(l1, vandq_u8(vshlq_n_u8(h1, 4), x10));
            u0 = vorrq_u8(u0, vandq_u8(vshlq_n_u8(h0, 3), x10));
            u1 = vorrq_u8(u1, vandq_u8(vshlq_n_u8(h1, 3), x10));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
        uint8_t *q = (uint8_t *)o->q + 64 * c;
        vst1q_u8(q, l0);
        vst1q_u8(q + 16, l1);
        vst1q_u8(q + 32, u0);
        vst1q_u8(q + 48, u1);
    }
}

static void kdec_q4_K(const void *vb, kdec *o) {
    const th_block_q4_K *b = vb;
    k4_scales16(b->scales, o);
    kdec_k4(b->qs, NULL, o);
    o->d = neon_f16(b->d);
    o->dmin = neon_f16(b->dmin);
    o->has_min = true;
}

static void kdec_q5_K(const void *vb, kdec *o) {
    const th_block_q5_K *b = vb;
    k4_scales16(b->scales, o);
    kdec_k4(b->qs, b->qh, o);
    o->d = neon_f16(b->d);
    o->dmin = neon_f16(b->dmin);
    o->has_min = true;
}

static void kdec_q6_K(const void *vb, kdec *o) {
    const th_block_q6_K *b = vb;
    const uint8x16_t low4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30), off = vdupq_n_u8(32);
    vst1q_s8(o->sc, vld1q_s8(b->scales));
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        uint8_t *q = (uint8_t *)o->q + 128 * h;
        for (int r = 0; r < 2; r++) {
            const uint8x16_t l0 = vld1q_u8(ql + 16 * r), l1 = vld1q_u8(ql + 32 + 16 * r), hb = vld1q_u8(qh + 16 * r);
            vst1q_u8(q + 16 * r, vsubq_u8(vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(hb, 4), m30)), off));
            vst1q_u8(q + 32 + 16 * r, vsubq_u8(vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(hb, 2), m30)), off));
            vst1q_u8(q + 64 + 16 * r, vsubq_u8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, m30)), off));
            vst1q_u8(q + 96 + 16 * r, vsubq_u8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), m30)), off));
        }
    }
    o->d = neon_f16(b->d);
    o->dmin = 0.0f;
    o->has_min = false;
}

static void kdec_iq4_xs(const void *vb, kdec *o) {
    const th_block_iq4_xs *b = vb;
    for (int ib = 0; ib < 8; ib++) {
        const int ls = (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((b->scales_h >> (2 * ib)) & 3) << 4)) - 32;
        o->sc[2 * ib] = o->sc[2 * ib + 1] = (int8_t)ls;
        int8x16_t lo, hi;
        dec_codebook(b->qs + 16 * ib, neon_iq4nl_values, &lo, &hi);
        vst1q_s8(o->q + 32 * ib, lo);
        vst1q_s8(o->q + 32 * ib + 16, hi);
    }
    o->d = neon_f16(b->d);
    o->dmin = 0.0f;
    o->has_min = false;
}

/* dot(decoded super-block, one Q8_K block) in f32. */
static inline float kdec_dot(const kdec *o, const th_block_q8_K *a) {
    int32x4_t s4[4];
    for (int g = 0; g < 4; g++) {
        int32x4_t p[4];
        for (int c = 0; c < 4; c++)
            p[c] = vdotq_s32(vdupq_n_s32(0), vld1q_s8(o->q + 64 * g + 16 * c), vld1q_s8(a->qs + 64 * g + 16 * c));
        s4[g] = neon_reduce4(p[0], p[1], p[2], p[3]);
    }
    int32x4_t sc[4];
    neon_widen_s8(vld1q_s8(o->sc), sc);
    int32x4_t t = vmulq_s32(s4[0], sc[0]);
    t = vmlaq_s32(t, s4[1], sc[1]);
    t = vmlaq_s32(t, s4[2], sc[2]);
    t = vmlaq_s32(t, s4[3], sc[3]);
    float r = a->d * o->d * (float)vaddvq_s32(t);
    if (o->has_min) {
        const int16x8_t m0 = vld1q_s16(o->mn), m1 = vld1q_s16(o->mn + 8);
        const int16x8_t b0 = vld1q_s16(a->bsums), b1 = vld1q_s16(a->bsums + 8);
        int32x4_t ms = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
        ms = vmlal_s16(ms, vget_high_s16(m0), vget_high_s16(b0));
        ms = vmlal_s16(ms, vget_low_s16(m1), vget_low_s16(b1));
        ms = vmlal_s16(ms, vget_high_s16(m1), vget_high_s16(b1));
        r -= a->d * o->dmin * (float)vaddvq_s32(ms);
    }
    return r;
}

enum { CHUNK = 32 };

static void gemm_kquant(kdecode_fn decode, size_t wbytes, int64_t n, int64_t r0, int64_t r1, const void *w,
                        size_t w_stride, int64_t nb, const void *x, size_t x_stride, float *y, int64_t y_stride) {
    const int64_t nblk = n / TH_QK_K;
    kdec o;
    float acc[CHUNK];
    for (int64_t c0 = 0; c0 < nb; c0 += CHUNK) {
        const int cn = (int)TH_MIN(CHUNK, nb - c0);
        for (int64_t r = r0; r < r1; r++) {
            const char *wr = (const char *)w + (size_t)r * w_stride;
            for (int j = 0; j < cn; j++) acc[j] = 0.0f;
            for (int64_t i = 0; i < nblk; i++) {
                decode(wr + (size_t)i * wbytes, &o);
                for (int j = 0; j < cn; j++) {
                    const th_block_q8_K *a = (const th_block_q8_K *)((const char *)x + (size_t)(c0 + j) * x_stride) + i;
                    acc[j] += kdec_dot(&o, a);
                }
            }
            for (int j = 0; j < cn; j++) y[(c0 + j) * y_stride + r] = acc[j];
        }
    }
}

#define KGEMM(NAME, DECODE, BLOCK)                                                               \
    void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
              size_t xs, float *y, int64_t ys) {                                                    \
        gemm_kquant(DECODE, sizeof(BLOCK), n, r0, r1, w, ws, nb, x, xs, y, ys);                     \
    }

KGEMM(th_neon_batch_q2_K, kdec_q2_K, th_block_q2_K)
KGEMM(th_neon_batch_q3_K, kdec_q3_K, th_block_q3_K)
KGEMM(th_neon_batch_q4_K, kdec_q4_K, th_block_q4_K)
KGEMM(th_neon_batch_q5_K, kdec_q5_K, th_block_q5_K)
KGEMM(th_neon_batch_q6_K, kdec_q6_K, th_block_q6_K)
KGEMM(th_neon_batch_iq4_xs, kdec_iq4_xs, th_block_iq4_xs)
