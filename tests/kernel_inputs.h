/* kernel_inputs.h — random inputs for the SIMD-vs-reference kernel tests
 * (test_kernels.c for x86, test_kernels_neon.c for aarch64): a seeded xorshift
 * generator (define KERNEL_TEST_SEED before including), the weight types with their
 * f16 scale offsets, random weights/activations, and the magnitude S used by the
 * tolerance |simd - ref| <= 1e-5 * S. */
#ifndef TH_TEST_KERNEL_INPUTS_H
#define TH_TEST_KERNEL_INPUTS_H

#include "cpu/kernels.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = KERNEL_TEST_SEED;
static uint32_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rndf(void) { return (float)((int32_t)rnd() % 1000000) / 1000000.0f; } /* (-1, 1) */

/* Weight types with SIMD kernels, and where their f16 scale fields sit in a block. */
typedef struct { uint32_t type; int d_off, m_off; } wtype;
static const wtype wtypes[] = {
    { TH_F32, -1, -1 },  { TH_F16, -1, -1 },  { TH_BF16, -1, -1 },
    { TH_Q4_0, 0, -1 },  { TH_Q4_1, 0, 2 },   { TH_Q5_0, 0, -1 },  { TH_Q5_1, 0, 2 },
    { TH_Q8_0, 0, -1 },  { TH_IQ4_NL, 0, -1 },
    { TH_Q2_K, offsetof(th_block_q2_K, d), offsetof(th_block_q2_K, dmin) },
    { TH_Q3_K, offsetof(th_block_q3_K, d), -1 },
    { TH_Q4_K, 0, 2 },   { TH_Q5_K, 0, 2 },
    { TH_Q6_K, offsetof(th_block_q6_K, d), -1 },
    { TH_IQ4_XS, 0, -1 },
    { TH_MXFP4, -1, -1 }, /* scale: the E8M0 byte at offset 0, set by random_weights */
    /* qN (random bytes are random codes in every bit-plane) */
    { TH_Q2, 0, -1 }, { TH_Q3, 0, -1 }, { TH_Q4, 0, -1 }, { TH_Q5, 0, -1 }, { TH_Q6, 0, -1 },
    { TH_Q7, 0, -1 }, { TH_Q8, 0, -1 },
    /* 1-bit and ternary (the BN types' row scale in front: random_weights sets it) */
    { TH_TQ1_0, offsetof(th_block_tq1_0, d), -1 }, { TH_TQ2_0, offsetof(th_block_tq2_0, d), -1 },
    { TH_Q1_0_G128, 0, -1 }, { TH_IQ1_BN, -1, -1 }, { TH_IQ2_BN, -1, -1 },
};
enum { N_WTYPES = sizeof wtypes / sizeof wtypes[0] };

static size_t row_bytes(uint32_t type, int64_t n) {
    uint64_t b = 0;
    th_row_bytes(type, (uint64_t)n, &b);
    return (size_t)b;
}

static void put_f16(uint8_t *p, float f) { uint16_t h = th_f32_to_f16(f); memcpy(p, &h, 2); }

/* Random weights: floats for F32/F16/BF16; for block types random bytes (every bit
 * pattern of codes, scales, high bits) with sane f16 d (either sign) and dmin/m. */
static bool extreme; /* weights: every code byte 0xff (largest codes, all high bits); activations +-1 */

static void random_weights(const wtype *wt, uint8_t *dst, int64_t rows, int64_t n) {
    const th_type_info *ti = th_type_info_get(wt->type);
    int64_t count = rows * n;
    if (wt->type == TH_F32) { for (int64_t i = 0; i < count; i++) ((float *)dst)[i] = rndf(); return; }
    if (wt->type == TH_F16) { for (int64_t i = 0; i < count; i++) ((uint16_t *)dst)[i] = th_f32_to_f16(rndf()); return; }
    if (wt->type == TH_BF16) { for (int64_t i = 0; i < count; i++) ((uint16_t *)dst)[i] = th_f32_to_bf16(rndf()); return; }
    if (ti->row_meta) { /* IQ1_BN / IQ2_BN: a row scale, then blocks of any bits */
        const size_t rb = row_bytes(wt->type, n);
        for (size_t i = 0; i < rb * (size_t)rows; i++) dst[i] = extreme ? 0xff : (uint8_t)rnd();
        for (int64_t r = 0; r < rows; r++) {
            const float sc = extreme ? 0.02f : rndf() * 0.02f;
            if (ti->row_meta == 2) put_f16(dst + r * rb, sc);
            else memcpy(dst + r * rb, &sc, 4);
        }
        return;
    }
    int64_t nblocks = count / ti->block;
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *blk = dst + b * ti->bytes;
        for (uint32_t i = 0; i < ti->bytes; i++) blk[i] = extreme ? 0xff : (uint8_t)rnd();
        if (wt->type == TH_MXFP4) { blk[0] = (uint8_t)(110 + rnd() % 30); continue; } /* 2^-18 .. 2^11 */
        put_f16(blk + wt->d_off, rndf() * 0.02f);
        if (wt->m_off >= 0) put_f16(blk + wt->m_off, rndf() * 0.02f);
    }
}

/* Random activations with a different magnitude per 32 elements. */
static void random_acts(float *x, int64_t n) {
    if (extreme) { for (int64_t i = 0; i < n; i++) x[i] = (i / 64) % 2 ? -1.0f : 1.0f; return; }
    float scale = 1;
    for (int64_t i = 0; i < n; i++) {
        if (i % 32 == 0) scale = 0.1f + 4.0f * (rnd() % 1000) / 1000.0f;
        x[i] = rndf() * scale;
    }
}

/* The magnitude S of the tolerance (see the top of the file). */
static double dot_scale(uint32_t type, const void *w, const void *act, int64_t n) {
    float *fw = malloc((size_t)n * sizeof *fw), *fa = malloc((size_t)n * sizeof *fa);
    th_ref_dequantize(type, w, fw, n);
    th_ref_dequantize(th_type_info_get(type)->act_type, act, fa, n);
    double s = 0, sa = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        s += fabs((double)fw[i] * fa[i]);
        sa += fabs(fa[i]);
        if (fabs(fw[i]) > m) m = fabs(fw[i]);
    }
    free(fw);
    free(fa);
    return s + m * sa;
}

#endif
