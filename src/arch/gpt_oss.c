/* gpt_oss.c — GPT-OSS: q/k/v/o biases, one attention-sink logit per head,
 * sliding window on even layers, NEOX rope with YaRN; the pre-FFN norm is the
 * tensor named post_attention_norm; a mixture of experts whose router has a
 * bias, picks the top-k raw logits and weights them by a softmax over those k,
 * with biased experts and the clamped SwiGLU (alpha 1.702, limit 7). The
 * experts usually ship in MXFP4. */
#include "arch/arch.h"

static th_status gpt_oss_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .qkv_bias = true, .attn_sinks = true, .moe_ok = true,
                          .ffn_norm_name = "post_attention_norm" };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    th_hparams *hp = &m->hp;
    if (hp->n_expert == 0) return th_set_error(TH_ERR_FORMAT, "gpt-oss: expert_count is missing or 0");
    hp->gating = TH_GATING_SOFTMAX_SELECTED;
    hp->expert_weights_norm = false;
    hp->act_fn = TH_ACT_SWIGLU_OAI;
    int32_t w = th_decoder_window(m);
    for (int il = 0; il < hp->n_layer; il++) m->layers[il].window = il % 2 == 0 ? w : 0;
    return TH_OK;
}

const th_arch th_arch_gpt_oss = { "gpt-oss", gpt_oss_load, th_describe_common };
