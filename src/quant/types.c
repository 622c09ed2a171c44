/* types.c — the table of GGML type ids: names, block sizes, bytes per block,
 * whether we can compute with the type, and which activation type its dot
 * product uses. Sizes are GGML's and are used to validate files. */
#include "quant/quant.h"
#include <stdio.h>

#define T(id, nm, blk, sz, sup, act) [id] = { nm, blk, sz, sup, act }

static const th_type_info type_table[TH_TYPE_COUNT] = {
    T(TH_F32, "F32", 1, 4, true, TH_F32),
    T(TH_F16, "F16", 1, 2, true, TH_F16),
    T(TH_Q4_0, "Q4_0", 32, 18, true, TH_Q8_0),
    T(TH_Q4_1, "Q4_1", 32, 20, true, TH_Q8_1),
    T(TH_Q5_0, "Q5_0", 32, 22, true, TH_Q8_0),
    T(TH_Q5_1, "Q5_1", 32, 24, true, TH_Q8_1),
    T(TH_Q8_0, "Q8_0", 32, 34, true, TH_Q8_0),
    T(TH_Q8_1, "Q8_1", 32, 36, false, TH_Q8_1),
    T(TH_Q2_K, "Q2_K", 256, 84, true, TH_Q8_K),
    T(TH_Q3_K, "Q3_K", 256, 110, true, TH_Q8_K),
    T(TH_Q4_K, "Q4_K", 256, 144, true, TH_Q8_K),
    T(TH_Q5_K, "Q5_K", 256, 176, true, TH_Q8_K),
    T(TH_Q6_K, "Q6_K", 256, 210, true, TH_Q8_K),
    T(TH_Q8_K, "Q8_K", 256, 292, false, TH_Q8_K),
    T(TH_IQ2_XXS, "IQ2_XXS", 256, 66, false, TH_Q8_K),
    T(TH_IQ2_XS, "IQ2_XS", 256, 74, false, TH_Q8_K),
    T(TH_IQ3_XXS, "IQ3_XXS", 256, 98, false, TH_Q8_K),
    T(TH_IQ1_S, "IQ1_S", 256, 50, false, TH_Q8_K),
    T(TH_IQ4_NL, "IQ4_NL", 32, 18, true, TH_Q8_0),
    T(TH_IQ3_S, "IQ3_S", 256, 110, false, TH_Q8_K),
    T(TH_IQ2_S, "IQ2_S", 256, 82, false, TH_Q8_K),
    T(TH_IQ4_XS, "IQ4_XS", 256, 136, true, TH_Q8_K),
    T(TH_I8, "I8", 1, 1, false, TH_I8),
    T(TH_I16, "I16", 1, 2, false, TH_I16),
    T(TH_I32, "I32", 1, 4, false, TH_I32),
    T(TH_I64, "I64", 1, 8, false, TH_I64),
    T(TH_F64, "F64", 1, 8, false, TH_F64),
    T(TH_IQ1_M, "IQ1_M", 256, 56, false, TH_Q8_K),
    T(TH_BF16, "BF16", 1, 2, true, TH_BF16),
    T(TH_TQ1_0, "TQ1_0", 256, 54, false, TH_Q8_K),
    T(TH_TQ2_0, "TQ2_0", 256, 66, false, TH_Q8_K),
    T(TH_MXFP4, "MXFP4", 32, 17, true, TH_Q8_0),
};

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
    if (!ti || n % ti->block != 0) return false;
    return th_mul_u64(n / ti->block, ti->bytes, out);
}
