/* deepseek2.c — DeepSeek-V2/V3: multi-head latent attention (MLA; q through a
 * LoRA when q_lora_rank is set; k/v from a compressed latent of kv_lora_rank
 * plus one shared rope head), NORM rope on the rope dims only, YaRN with the
 * log-multiplier attention scale; the first leading_dense_block_count layers
 * have a dense FFN, the rest a mixture of experts (softmax or sigmoid gating,
 * optional selection bias, optional renormalisation, weight scale) plus shared
 * experts. The MLA forward pass is in src/mla.c. */
#include "arch/arch.h"
#include <math.h>
#include <stdio.h>

static th_status deepseek2_attn(th_model *m, int il) {
    th_hparams *hp = &m->hp;
    th_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, H = hp->n_head, hd = hp->head_dim, R = hp->kv_lora_rank;
    th_status s;
#define W(w, req, a, b, name) if ((s = th_weight_get(m, &L->w, req, a, b, 1, "blk.%d." name, il))) return s;
    if (hp->q_lora_rank > 0) {
        W(wq_a, true, E, hp->q_lora_rank, "attn_q_a.weight");
        W(q_a_norm, true, hp->q_lora_rank, 1, "attn_q_a_norm.weight");
        W(wq_b, true, hp->q_lora_rank, H * hd, "attn_q_b.weight");
    } else {
        W(wq, true, E, H * hd, "attn_q.weight");
    }
    W(wkv_a_mqa, true, E, R + hp->n_rot, "attn_kv_a_mqa.weight");
    W(kv_a_norm, true, R, 1, "attn_kv_a_norm.weight");
    W(wkv_b, true, R, H * (hp->n_embd_head_nope + hp->head_dim_v), "attn_kv_b.weight");
#undef W
    return TH_OK;
}

static th_status deepseek2_load(th_model *m) {
    th_hparams *hp = &m->hp;
    uint32_t v;
    th_status s;
    hp->q_lora_rank = 0;
    if (th_meta_u32(m, "attention.q_lora_rank", &v, false) == TH_OK) hp->q_lora_rank = (int32_t)TH_MIN(v, 1u << 20);
    if ((s = th_meta_u32(m, "attention.kv_lora_rank", &v, true))) return s;
    hp->kv_lora_rank = (int32_t)TH_MIN(v, 1u << 20);
    /* the loader reads head shapes before the attention weights: peek them here */
    th_decoder_opts o = { .rope_type = TH_ROPE_NORM, .moe_ok = true, .load_attn = deepseek2_attn };
    uint32_t kl = 0, rot = 0;
    th_meta_u32(m, "attention.key_length", &kl, false);
    th_meta_u32(m, "rope.dimension_count", &rot, false);
    if (kl <= rot || kl > 1024 || hp->kv_lora_rank < 1)
        return th_set_error(TH_ERR_FORMAT, "deepseek2: key_length %u must exceed rope.dimension_count %u, kv_lora_rank %d must be positive",
                            kl, rot, hp->kv_lora_rank);
    hp->n_embd_head_nope = (int32_t)(kl - rot);
    if ((s = th_decoder_load(m, &o))) return s;
    if (hp->n_head_kv != hp->n_head)
        return th_set_error(TH_ERR_FORMAT, "deepseek2: head_count_kv %d must equal head_count %d", hp->n_head_kv, hp->n_head);
    bool norm = false;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch->name);
    if (gguf_get_bool(m->file, key, &norm)) hp->expert_weights_norm = norm;
    hp->gating = TH_GATING_SOFTMAX;
    if (th_meta_u32(m, "expert_gating_func", &v, false) == TH_OK && v == 2) hp->gating = TH_GATING_SIGMOID;
    float log_mul = 0.0f;
    th_meta_f32(m, "rope.scaling.yarn_log_multiplier", &log_mul, false);
    float mscale = 1.0f * (1.0f + log_mul * logf(1.0f / hp->rope_freq_scale));
    hp->attn_scale = 1.0f * mscale * mscale / sqrtf((float)hp->head_dim);
    hp->rope_attn_factor = 1.0f / (1.0f + 0.1f * logf(1.0f / hp->rope_freq_scale));
    return TH_OK;
}

const th_arch th_arch_deepseek2 = { "deepseek2", deepseek2_load, th_describe_common };
