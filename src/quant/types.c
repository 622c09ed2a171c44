/* types.c — the type table: every fact about a GGML type id in one place (name, block
 * size, bytes per block, whether we can compute with it, the activation type of its dot
 * product, its reference kernels, its CPU packed layout), designated initializers by
 * type id as ggml's type_traits. Sizes are GGML's and are used to validate files.
 * Everything else (the reference entry points of ref_dispatch.c, the generic level of
 * the CPU kernel table, the packed layouts' entry points) reads it. Besides ggml's ids
 * (0..39) it holds theseus's own qN types at 1000 + n (quant/qn.h). */
#include "quant/quant.h"
#include "quant/ref_encode.h"
#include "quant/ref_internal.h"
#include "quant/repack.h"
#include <stdio.h>

/* The reference kernels of type X: dequantize, quantize (activation rounding), the
 * weight encoder WQ and the dot product. */
#define REF_KERNELS(X, WQ) \
    .dequantize = th_ref_dq_##X, .quantize = th_ref_q_##X, .quantize_weights = WQ, .vec_dot = th_ref_dot_##X

static const th_type_info type_table[TH_TYPE_COUNT] = {
    [TH_F32] = { .name = "F32", .block = 1, .bytes = 4, .supported = true, .act_type = TH_F32,
                 REF_KERNELS(f32, th_ref_q_f32) },
    [TH_F16] = { .name = "F16", .block = 1, .bytes = 2, .supported = true, .act_type = TH_F16,
                 REF_KERNELS(f16, th_ref_q_f16), .packed_bytes = 2, .repack8 = th_repack8_16bit },
    [TH_BF16] = { .name = "BF16", .block = 1, .bytes = 2, .supported = true, .act_type = TH_BF16,
                  REF_KERNELS(bf16, th_ref_q_bf16), .packed_bytes = 2, .repack8 = th_repack8_16bit },
    [TH_Q4_0] = { .name = "Q4_0", .block = TH_QK, .bytes = 18, .supported = true, .act_type = TH_Q8_0,
                  REF_KERNELS(q4_0, th_ref_q_q4_0), .packed_bytes = 18, .repack8 = th_repack8_q4_0 },
    [TH_Q4_1] = { .name = "Q4_1", .block = TH_QK, .bytes = 20, .supported = true, .act_type = TH_Q8_1,
                  REF_KERNELS(q4_1, th_ref_q_q4_1) },
    [TH_Q5_0] = { .name = "Q5_0", .block = TH_QK, .bytes = 22, .supported = true, .act_type = TH_Q8_0,
                  REF_KERNELS(q5_0, th_ref_q_q5_0) },
    [TH_Q5_1] = { .name = "Q5_1", .block = TH_QK, .bytes = 24, .supported = true, .act_type = TH_Q8_1,
                  REF_KERNELS(q5_1, th_ref_q_q5_1) },
    /* weights round halves away from zero (llama-quantize), activations to even */
    [TH_Q8_0] = { .name = "Q8_0", .block = TH_QK, .bytes = 34, .supported = true, .act_type = TH_Q8_0,
                  REF_KERNELS(q8_0, th_ref_q_q8_0_weights), .packed_bytes = 34, .repack8 = th_repack8_q8_0 },
    /* activation types only: no dot product, no weight encoder */
    [TH_Q8_1] = { .name = "Q8_1", .block = TH_QK, .bytes = 36, .act_type = TH_Q8_1,
                  .dequantize = th_ref_dq_q8_1, .quantize = th_ref_q_q8_1 },
    [TH_Q8_K] = { .name = "Q8_K", .block = TH_QK_K, .bytes = 292, .act_type = TH_Q8_K,
                  .dequantize = th_ref_dq_q8_K, .quantize = th_ref_q_q8_K },
    [TH_Q2_K] = { .name = "Q2_K", .block = TH_QK_K, .bytes = 84, .supported = true, .act_type = TH_Q8_K,
                  REF_KERNELS(q2_K, th_ref_q_q2_K) },
    [TH_Q3_K] = { .name = "Q3_K", .block = TH_QK_K, .bytes = 110, .supported = true, .act_type = TH_Q8_K,
                  REF_KERNELS(q3_K, th_ref_q_q3_K) },
    [TH_Q4_K] = { .name = "Q4_K", .block = TH_QK_K, .bytes = 144, .supported = true, .act_type = TH_Q8_K,
                  REF_KERNELS(q4_K, th_ref_q_q4_K), .packed_bytes = TH_Q4_K_PACKED_BYTES, .repack8 = th_repack8_q4_K },
    [TH_Q5_K] = { .name = "Q5_K", .block = TH_QK_K, .bytes = 176, .supported = true, .act_type = TH_Q8_K,
                  REF_KERNELS(q5_K, th_ref_q_q5_K) },
    [TH_Q6_K] = { .name = "Q6_K", .block = TH_QK_K, .bytes = 210, .supported = true, .act_type = TH_Q8_K,
                  REF_KERNELS(q6_K, th_ref_q_q6_K), .packed_bytes = 210, .repack8 = th_repack8_q6_K },
    /* encoded with llama.cpp's scale search (ref_kquant_encode.c), activations and weights alike */
    [TH_IQ4_NL] = { .name = "IQ4_NL", .block = TH_QK, .bytes = 18, .supported = true, .act_type = TH_Q8_0,
                    .dequantize = th_ref_dq_iq4_nl, .quantize = th_ref_q_iq4_nl_search,
                    .quantize_weights = th_ref_q_iq4_nl_search, .vec_dot = th_ref_dot_iq4_nl },
    [TH_IQ4_XS] = { .name = "IQ4_XS", .block = TH_QK_K, .bytes = 136, .supported = true, .act_type = TH_Q8_K,
                    REF_KERNELS(iq4_xs, th_ref_q_iq4_xs), .packed_bytes = TH_IQ4_XS_PACKED_BYTES, .repack8 = th_repack8_iq4_xs },
    [TH_MXFP4] = { .name = "MXFP4", .block = TH_QK, .bytes = 17, .supported = true, .act_type = TH_Q8_0,
                   REF_KERNELS(mxfp4, th_ref_q_mxfp4) },
    /* ternary and 1-bit (ref_ternary.c, docs/ternary.md): the encoders are the peers'
     * (llama.cpp's TQ*_0, ik_llama.cpp's Q1_0_G128 and *_BN), bit for bit */
    [TH_TQ1_0] = { .name = "TQ1_0", .block = TH_QK_K, .bytes = 54, .supported = true, .act_type = TH_Q8_K,
                   REF_KERNELS(tq1_0, th_ref_q_tq1_0) },
    [TH_TQ2_0] = { .name = "TQ2_0", .block = TH_QK_K, .bytes = 66, .supported = true, .act_type = TH_Q8_K,
                   REF_KERNELS(tq2_0, th_ref_q_tq2_0) },
    [TH_Q1_0_G128] = { .name = "Q1_0_G128", .block = TH_QK1, .bytes = 18, .supported = true, .act_type = TH_Q8_0,
                       REF_KERNELS(q1_0_g128, th_ref_q_q1_0_g128) },
    [TH_IQ1_BN] = { .name = "IQ1_BN", .block = TH_QKBN, .bytes = 13, .supported = true, .act_type = TH_Q8_0,
                    REF_KERNELS(iq1_bn, th_ref_q_iq1_bn), .row_meta = 2 },
    [TH_IQ2_BN] = { .name = "IQ2_BN", .block = TH_QKBN, .bytes = 16, .supported = true, .act_type = TH_Q8_0,
                    REF_KERNELS(iq2_bn, th_ref_q_iq2_bn), .row_meta = 4 },
    /* types GGML defines that we do not compute with: their sizes only */
    [TH_IQ2_XXS] = { .name = "IQ2_XXS", .block = TH_QK_K, .bytes = 66, .act_type = TH_Q8_K },
    [TH_IQ2_XS] = { .name = "IQ2_XS", .block = TH_QK_K, .bytes = 74, .act_type = TH_Q8_K },
    [TH_IQ3_XXS] = { .name = "IQ3_XXS", .block = TH_QK_K, .bytes = 98, .act_type = TH_Q8_K },
    [TH_IQ1_S] = { .name = "IQ1_S", .block = TH_QK_K, .bytes = 50, .act_type = TH_Q8_K },
    [TH_IQ3_S] = { .name = "IQ3_S", .block = TH_QK_K, .bytes = 110, .act_type = TH_Q8_K },
    [TH_IQ2_S] = { .name = "IQ2_S", .block = TH_QK_K, .bytes = 82, .act_type = TH_Q8_K },
    [TH_IQ1_M] = { .name = "IQ1_M", .block = TH_QK_K, .bytes = 56, .act_type = TH_Q8_K },
    [TH_I8] = { .name = "I8", .block = 1, .bytes = 1, .act_type = TH_I8 },
    [TH_I16] = { .name = "I16", .block = 1, .bytes = 2, .act_type = TH_I16 },
    [TH_I32] = { .name = "I32", .block = 1, .bytes = 4, .act_type = TH_I32 },
    [TH_I64] = { .name = "I64", .block = 1, .bytes = 8, .act_type = TH_I64 },
    [TH_F64] = { .name = "F64", .block = 1, .bytes = 8, .act_type = TH_F64 },
    /* qN, theseus's own (docs/qn.md): groups of 64, 8n + 2 bytes, Q8_0 activations;
     * the encoder (error feedback + scale search) serves as both quantizers */
#define QN_ENTRY(N) [TH_Q##N] = { .name = "q" #N, .block = TH_QN_BLOCK, .bytes = 8 * N + 2, .supported = true, \
                                  .act_type = TH_Q8_0, REF_KERNELS(q##N, th_ref_q_q##N), \
                                  .packed_bytes = 8 * N + 2, .repack8 = th_repack8_q##N }
    QN_ENTRY(2), QN_ENTRY(3), QN_ENTRY(4), QN_ENTRY(5), QN_ENTRY(6), QN_ENTRY(7), QN_ENTRY(8),
#undef QN_ENTRY
};

/* The block structs of quant.h have GGML's sizes. */
_Static_assert(sizeof(th_block_q4_0) == 18 && sizeof(th_block_q4_1) == 20 && sizeof(th_block_q5_0) == 22 &&
               sizeof(th_block_q5_1) == 24 && sizeof(th_block_q8_0) == 34 && sizeof(th_block_q8_1) == 36, "legacy blocks");
_Static_assert(sizeof(th_block_q2_K) == 84 && sizeof(th_block_q3_K) == 110 && sizeof(th_block_q4_K) == 144 &&
               sizeof(th_block_q5_K) == 176 && sizeof(th_block_q6_K) == 210 && sizeof(th_block_q8_K) == 292, "K blocks");
_Static_assert(sizeof(th_block_iq4_nl) == 18 && sizeof(th_block_iq4_xs) == 136 && sizeof(th_block_mxfp4) == 17, "IQ blocks");
_Static_assert(sizeof(th_block_tq1_0) == 54 && sizeof(th_block_tq2_0) == 66 && sizeof(th_block_q1_0_g128) == 18 &&
               sizeof(th_block_iq1_bn) == 13 && sizeof(th_block_iq2_bn) == 16, "ternary blocks");

const th_type_info *th_type_info_get(uint32_t type) {
    if (type >= TH_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

const char *th_type_name(uint32_t type) {
    static _Thread_local char buf[32];
    const th_type_info *ti = th_type_info_get(type);
    if (ti) return ti->name;
    snprintf(buf, sizeof buf, "type %u", type);
    return buf;
}

bool th_row_bytes(uint32_t type, uint64_t n, uint64_t *out) {
    const th_type_info *ti = th_type_info_get(type);
    uint64_t b;
    if (!ti || n % ti->block != 0 || !th_mul_u64(n / ti->block, ti->bytes, &b)) return false;
    if (b > UINT64_MAX - ti->row_meta) return false;
    *out = b + ti->row_meta;
    return true;
}
