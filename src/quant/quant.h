/* quant.h — weight/activation types (GGML type ids), their block layouts, and the
 * plain-C reference kernels that every fast kernel is tested against.
 *
 * Dot products follow llama.cpp: a weight row of type T is multiplied with an
 * activation row that was first converted to th_type_info(T)->act_type
 * (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants
 * and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32).
 */
#ifndef TH_QUANT_H
#define TH_QUANT_H

#include "core/core.h"

enum th_type {
    TH_F32 = 0, TH_F16 = 1, TH_Q4_0 = 2, TH_Q4_1 = 3, TH_Q5_0 = 6, TH_Q5_1 = 7,
    TH_Q8_0 = 8, TH_Q8_1 = 9, TH_Q2_K = 10, TH_Q3_K = 11, TH_Q4_K = 12, TH_Q5_K = 13,
    TH_Q6_K = 14, TH_Q8_K = 15, TH_IQ2_XXS = 16, TH_IQ2_XS = 17, TH_IQ3_XXS = 18,
    TH_IQ1_S = 19, TH_IQ4_NL = 20, TH_IQ3_S = 21, TH_IQ2_S = 22, TH_IQ4_XS = 23,
    TH_I8 = 24, TH_I16 = 25, TH_I32 = 26, TH_I64 = 27, TH_F64 = 28, TH_IQ1_M = 29,
    TH_BF16 = 30, TH_TQ1_0 = 34, TH_TQ2_0 = 35, TH_MXFP4 = 39,
    TH_GGML_TYPE_COUNT = 40,
    /* ik_llama.cpp's 1-bit and ternary types, at its ids (docs/ternary.md): Bonsai's
     * Q1_0_G128, and IQ1_BN / IQ2_BN, whose rows start with a scale (row_meta below) */
    TH_Q1_0_G128 = 41, TH_IQ1_BN = 134, TH_IQ2_BN = 135,
    /* qN, theseus's own n-bit format (docs/qn.md), n = 2..8: ids 1000 + n, well outside
     * ggml's range, so no other engine mistakes such a tensor for one of its types. */
    TH_QN_BASE = 1000, TH_Q2 = 1002, TH_Q3 = 1003, TH_Q4 = 1004, TH_Q5 = 1005, TH_Q6 = 1006,
    TH_Q7 = 1007, TH_Q8 = 1008,
    TH_TYPE_COUNT = 1009   /* bound of every array indexed by type id (most entries empty) */
};

#define TH_QK 32     /* block size of the legacy quants */
#define TH_QK_K 256  /* super-block size of the K-quants */
#define TH_QN_BLOCK 64  /* group size of qN: 8n + 2 bytes, an f16 scale then n bit-planes */
#define TH_QK1 128      /* block of Q1_0_G128: an f16 scale, 128 sign bits */
#define TH_QKBN 64      /* block of IQ1_BN / IQ2_BN */

/* qN: true for the ids TH_Q2..TH_Q8; th_qn_bits the n of one. */
static inline bool th_is_qn(uint32_t type) { return type >= TH_Q2 && type <= TH_Q8; }
static inline int th_qn_bits(uint32_t type) { return (int)(type - TH_QN_BASE); }

/* The kernel signatures (the CPU kernel table, cpu/kernels.h, uses the same ones). */
/* *s = dot(weight row w of n elements, activation row act in the weight type's act_type) */
typedef void (*th_vec_dot_fn)(int64_t n, float *s, const void *w, const void *act);
/* Encode n f32 values as a type (n a multiple of its block). */
typedef void (*th_quantize_fn)(const float *x, void *y, int64_t n);
/* Decode n elements of a type (n a multiple of its block) to f32. */
typedef void (*th_dequant_fn)(const void *src, float *dst, int64_t n);
/* Interleave 8 rows of nblk blocks each into one group of the packed layout (quant/repack.c). */
typedef void (*th_repack8_fn)(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst);

/* The facts of one type: the single table of them is types.c's (designated
 * initializers by type id, like ggml's type_traits); everything else reads it
 * through th_type_info_get. A NULL kernel means the type has none. */
typedef struct th_type_info {
    const char *name;     /* "Q4_K" */
    uint32_t block;       /* elements per block (1 for F32/F16/BF16) */
    uint32_t bytes;       /* bytes per block (GGML's; files are validated against it) */
    bool supported;       /* weights of it can be run: dequantize, vec_dot and act_type's quantize exist */
    uint32_t act_type;    /* activation type for dot products */
    /* the reference kernels (src/quant/ref_*.c): the oracle of every fast kernel */
    th_dequant_fn dequantize;       /* to f32 */
    th_quantize_fn quantize;        /* from f32, as activations are rounded (every activation type has one) */
    th_quantize_fn quantize_weights; /* from f32 as llama-quantize writes weights without an imatrix
                                      * (differs from quantize for Q8_0 only); NULL for Q8_1, Q8_K */
    th_vec_dot_fn vec_dot;          /* weight row . activation row already in act_type */
    /* the CPU's 8-row interleaved layout (quant/repack.c, read by the packed gemms of
     * src/cpu/avx2/, src/cpu/avx512/): bytes per block and row in it, 0 for none */
    uint32_t packed_bytes;
    th_repack8_fn repack8;
    /* bytes at the start of every row before its first block (ik_llama.cpp's
     * row_meta_size: IQ1_BN an f16 scale, IQ2_BN an f32 one; 0 for every other type).
     * For such a type the kernels' n is one whole row (dequantize, quantize, vec_dot). */
    uint32_t row_meta;
} th_type_info;

/* NULL for an id ggml does not define (the reader rejects those). */
const th_type_info *th_type_info_get(uint32_t type);
const char *th_type_name(uint32_t type);          /* "type 99" style for unknown */
/* Bytes of a row of n elements (with the type's row_meta); false if n is not a multiple
 * of the block or overflows. */
bool th_row_bytes(uint32_t type, uint64_t n, uint64_t *out);

/* ---- block layouts (little-endian, packed as in GGML) ---- */

typedef struct { uint16_t d; uint8_t qs[TH_QK / 2]; } th_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[TH_QK / 2]; } th_block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[TH_QK / 2]; } th_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[TH_QK / 2]; } th_block_q5_1;
typedef struct { uint16_t d; int8_t qs[TH_QK]; } th_block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[TH_QK]; } th_block_q8_1;   /* s = d * sum(qs) */
typedef struct { uint8_t scales[TH_QK_K / 16]; uint8_t qs[TH_QK_K / 4]; uint16_t d, dmin; } th_block_q2_K;
typedef struct { uint8_t hmask[TH_QK_K / 8]; uint8_t qs[TH_QK_K / 4]; uint8_t scales[12]; uint16_t d; } th_block_q3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[TH_QK_K / 2]; } th_block_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[TH_QK_K / 8]; uint8_t qs[TH_QK_K / 2]; } th_block_q5_K;
typedef struct { uint8_t ql[TH_QK_K / 2]; uint8_t qh[TH_QK_K / 4]; int8_t scales[TH_QK_K / 16]; uint16_t d; } th_block_q6_K;
typedef struct { float d; int8_t qs[TH_QK_K]; int16_t bsums[TH_QK_K / 16]; } th_block_q8_K;
typedef struct { uint16_t d; uint8_t qs[TH_QK / 2]; } th_block_iq4_nl;
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[TH_QK_K / 64]; uint8_t qs[TH_QK_K / 2]; } th_block_iq4_xs;
typedef struct { uint8_t e; uint8_t qs[TH_QK / 2]; } th_block_mxfp4;
/* ternary / 1-bit (ref_ternary.c has the element order of each) */
typedef struct { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; } th_block_tq1_0;   /* 5 trits a byte in qs, 4 in qh */
typedef struct { uint8_t qs[TH_QK_K / 4]; uint16_t d; } th_block_tq2_0;         /* 2 bits a weight, code - 1 */
typedef struct { uint16_t d; uint8_t qs[TH_QK1 / 8]; } th_block_q1_0_g128;      /* bit set: +d, clear: -d */
typedef struct { uint8_t ql[12]; uint8_t extra; } th_block_iq1_bn;             /* 64 trits (row scale in front) */
typedef struct { uint8_t qs[TH_QKBN / 4]; } th_block_iq2_bn;                   /* 64 2-bit codes (row scale in front) */

/* ---- reference kernels (src/quant/ref_*.c): the oracle, never optimised ----
 * Type-generic entry points (ref_dispatch.c) over the table's kernels. */

/* Decode n elements (n a multiple of the block size) of a supported type to f32. */
void th_ref_dequantize(uint32_t type, const void *src, float *dst, int64_t n);
/* Encode n f32 values as `type`. Available for every activation type
 * (F32, F16, BF16, Q8_0, Q8_1, Q8_K) and every supported weight type. */
void th_ref_quantize(uint32_t type, const float *src, void *dst, int64_t n);
bool th_ref_can_quantize(uint32_t type);
/* Dot product of a weight row of `type` with an activation row already in
 * th_type_info_get(type)->act_type, n elements. */
float th_ref_vec_dot(uint32_t type, int64_t n, const void *w, const void *act);

#endif
