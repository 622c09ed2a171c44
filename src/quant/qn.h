/* qn.h — qN, theseus's own n-bit weight format (n = 2..8; docs/qn.md is the full
 * description): symmetric groups of 64 weights, each 8n + 2 bytes:
 *
 *   bytes 0..1            d, the group's scale (IEEE f16, little-endian)
 *   bytes 2 + 8p..9 + 8p  plane p (p = 0..n-1), a little-endian 64-bit word whose bit j
 *                         is bit p of the code of weight j (j = 0..63)
 *
 *   code c in 0 .. 2^n - 1;  q = c - 2^(n-1);  value = d * (q + 1/2) = d * (2c - (2^n - 1)) / 2
 *
 * so the 2^n levels are the odd multiples of d/2, symmetric about zero. The encoder
 * (ref_qn.c) rounds with error feedback inside the group and searches the scale.
 * Dot products take Q8_0 activations (two 32-element activation blocks per group). */
#ifndef TH_QUANT_QN_H
#define TH_QUANT_QN_H

#include "quant/quant.h"

enum { TH_QN_MIN_BITS = 2, TH_QN_MAX_BITS = 8 };

/* Bytes of one group of n-bit qN. */
static inline uint32_t th_qn_group_bytes(int n) { return 8u * (uint32_t)n + 2u; }

/* Plane p of a group (g points at the group's first byte). */
static inline uint64_t th_qn_plane(const uint8_t *g, int p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | g[2 + 8 * p + i];
    return v;
}

/* The 64 codes (0 .. 2^n - 1) of a group. */
static inline void th_qn_codes(const uint8_t *g, int n, uint8_t codes[TH_QN_BLOCK]) {
    for (int j = 0; j < TH_QN_BLOCK; j++) codes[j] = 0;
    for (int p = 0; p < n; p++) {
        uint64_t w = th_qn_plane(g, p);
        for (int j = 0; j < TH_QN_BLOCK; j++) codes[j] |= (uint8_t)(((w >> j) & 1u) << p);
    }
}

/* Generic forms of the reference kernels (the type table names per-n wrappers of
 * them); count is a multiple of 64. */
void th_qn_dequantize(int n, const void *src, float *dst, int64_t count);
void th_qn_quantize(int n, const float *src, void *dst, int64_t count);
/* The same layout written by th_qn_encode_group_plain (no feedback, no search): the
 * encoder of `quantize --qn-rounding plain` (docs/qn.md, "What error feedback costs"). */
void th_qn_quantize_plain(int n, const float *src, void *dst, int64_t count);
/* Weight row (count elements of n-bit qN) . activation row in Q8_0 (count / 32 blocks). */
float th_qn_dot(int n, int64_t count, const void *w, const void *act);

/* One group: encode 64 values (the search and the error feedback of docs/qn.md). */
void th_qn_encode_group(int n, const float *x, uint8_t *out);
/* One group with plain round-to-nearest at the scale amax / (2^(n-1) - 1/2), without
 * feedback or search: the baseline docs/qn.md compares the encoder with. */
void th_qn_encode_group_plain(int n, const float *x, uint8_t *out);

#endif
