/* legacy.h (neon) — block decoders of the 32-element weight types for the NEON
 * kernels (dot_legacy.c, gemm_legacy.c; the code books also serve dot_kquant.c and
 * gemm_kquant.c's IQ4_XS): each turns one block into 32 signed int8 (elements 0..15 in
 * *lo, 16..31 in *hi) ready for sdot, plus the block's scale (d, or the E8M0 exponent
 * of MXFP4) and min. Include only from files under src/cpu/neon/. */
#ifndef TH_CPU_NEON_LEGACY_H
#define TH_CPU_NEON_LEGACY_H

#include "cpu/neon/util.h"

/* The IQ4_NL / IQ4_XS non-linear 4-bit code book (GGML's kvalues_iq4nl). */
static const int8_t neon_iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                              1,    13,   25,  38,  53,  69,  89,  113 };
/* MXFP4: e2m1 codes doubled so they are integers (0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 = sign). */
static const int8_t neon_mxfp4_values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* Q4_0: nibble - 8. */
static inline void dec_q4_0(const void *b, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t l, h;
    neon_nibbles(((const th_block_q4_0 *)b)->qs, &l, &h);
    *lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(8));
    *hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(8));
}

/* Q4_1: the unsigned nibble (0..15); the min is added separately. */
static inline void dec_q4_1(const void *b, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t l, h;
    neon_nibbles(((const th_block_q4_1 *)b)->qs, &l, &h);
    *lo = vreinterpretq_s8_u8(l);
    *hi = vreinterpretq_s8_u8(h);
}

/* Q5_0: (nibble | high bit << 4) - 16, i.e. nibble | 0xf0 when the high bit is clear. */
static inline void dec_q5_0(const void *b, int8x16_t *lo, int8x16_t *hi) {
    const th_block_q5_0 *x = b;
    uint8x16_t l, h, b0, b1;
    neon_nibbles(x->qs, &l, &h);
    neon_bits32(x->qh, &b0, &b1);
    const uint8x16_t f0 = vdupq_n_u8(0xf0);
    *lo = vreinterpretq_s8_u8(vorrq_u8(l, vbicq_u8(f0, b0)));
    *hi = vreinterpretq_s8_u8(vorrq_u8(h, vbicq_u8(f0, b1)));
}

/* Q5_1: nibble | high bit << 4 (0..31). */
static inline void dec_q5_1(const void *b, int8x16_t *lo, int8x16_t *hi) {
    const th_block_q5_1 *x = b;
    uint8x16_t l, h, b0, b1;
    neon_nibbles(x->qs, &l, &h);
    neon_bits32(x->qh, &b0, &b1);
    const uint8x16_t x10 = vdupq_n_u8(0x10);
    *lo = vreinterpretq_s8_u8(vorrq_u8(l, vandq_u8(b0, x10)));
    *hi = vreinterpretq_s8_u8(vorrq_u8(h, vandq_u8(b1, x10)));
}

static inline void dec_q8_0(const void *b, int8x16_t *lo, int8x16_t *hi) {
    const th_block_q8_0 *x = b;
    *lo = vld1q_s8(x->qs);
    *hi = vld1q_s8(x->qs + 16);
}

static inline void dec_codebook(const uint8_t *qs, const int8_t values[16], int8x16_t *lo, int8x16_t *hi) {
    const int8x16_t table = vld1q_s8(values);
    uint8x16_t l, h;
    neon_nibbles(qs, &l, &h);
    *lo = vqtbl1q_s8(table, l);
    *hi = vqtbl1q_s8(table, h);
}
static inline void dec_iq4_nl(const void *b, int8x16_t *lo, int8x16_t *hi) {
    dec_codebook(((const th_block_iq4_nl *)b)->qs, neon_iq4nl_values, lo, hi);
}
static inline void dec_mxfp4(const void *b, int8x16_t *lo, int8x16_t *hi) {
    dec_codebook(((const th_block_mxfp4 *)b)->qs, neon_mxfp4_values, lo, hi);
}

/* Block scales: d is the first u16 of every f16-scaled weight block and of the Q8
 * activation blocks; m (Q4_1/Q5_1) and s (Q8_1) the second. */
static inline float legacy_d(const void *b) { uint16_t h; memcpy(&h, b, 2); return neon_f16(h); }
static inline float legacy_m(const void *b) { uint16_t h; memcpy(&h, (const char *)b + 2, 2); return neon_f16(h); }
static inline float legacy_s(const void *b) { return legacy_m(b); }
static inline float legacy_e8m0(const void *b) { return neon_e8m0_half(*(const uint8_t *)b); }

#endif
