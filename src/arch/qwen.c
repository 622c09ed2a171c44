/* qwen.c — the Qwen family. qwen2: q/k/v biases, NEOX rope, usually tied
 * output. qwen3: per-head RMSNorm of q and k before the rope, no biases, and
 * head_dim × heads may differ from the embedding width (key_length).
 * qwen3moe: qwen3 attention with a softmax router whose top-k weights are
 * renormalised. */
#include "arch/arch.h"

static th_status qwen2_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .qkv_bias = true, .tied_output_ok = true };
    return th_decoder_load(m, &o);
}

static th_status qwen3_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .qk_norm = true, .tied_output_ok = true };
    return th_decoder_load(m, &o);
}

static th_status qwen3moe_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .qk_norm = true, .tied_output_ok = true, .moe_ok = true };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    if (m->hp.n_expert == 0) return th_set_error(TH_ERR_FORMAT, "qwen3moe: expert_count is missing or 0");
    m->hp.gating = TH_GATING_SOFTMAX;
    m->hp.expert_weights_norm = true;
    return TH_OK;
}

const th_arch th_arch_qwen2 = { "qwen2", qwen2_load, th_describe_common };
const th_arch th_arch_qwen3 = { "qwen3", qwen3_load, th_describe_common };
const th_arch th_arch_qwen3moe = { "qwen3moe", qwen3moe_load, th_describe_common };
