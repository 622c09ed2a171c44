/* decoder.c — loads the standard llama-style decoder: hyper-parameters from
 * "<arch>.*" metadata and the per-layer tensors (attn_norm, attn_q/k/v/output,
 * ffn_norm, ffn_gate/up/down), checking every shape against the hyper-parameters.
 * Families call it and then add or change what is theirs. */
#include "arch/arch.h"
#include <math.h>
#include <stdlib.h>

static th_status read_hparams(th_model *m) {
    th_hparams *hp = &m->hp;
    uint32_t v;
    th_status s;
#define REQ(key, field) if ((s = th_meta_u32(m, key, &v, true))) return s; hp->field = (int32_t)v;
#define OPT(key, field, def) hp->field = (def); if (th_meta_u32(m, key, &v, false) == TH_OK) hp->field = (int32_t)v;
    REQ("block_count", n_layer);
    REQ("embedding_length", n_embd);
    REQ("feed_forward_length", n_ff);
    REQ("attention.head_count", n_head);
    OPT("attention.head_count_kv", n_head_kv, hp->n_head);
    if (hp->n_layer < 1 || hp->n_layer > 4096 || hp->n_embd < 1 || hp->n_embd > (1 << 20) ||
        hp->n_head < 1 || hp->n_head > 4096 || hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv ||
        hp->n_ff < 0 || hp->n_ff > (1 << 24))
        return th_set_error(TH_ERR_FORMAT, "%s: implausible hyper-parameters (layers %d, embd %d, heads %d/%d, ffn %d)",
                            m->arch->name, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->n_ff);
    OPT("attention.key_length", head_dim, hp->n_embd / hp->n_head);
    OPT("attention.value_length", head_dim_v, hp->head_dim);
    OPT("context_length", n_ctx_train, 4096);
    OPT("rope.dimension_count", n_rot, hp->head_dim);
    OPT("expert_count", n_expert, 0);
    OPT("expert_used_count", n_expert_used, 0);
#undef REQ
#undef OPT
    if (hp->head_dim < 1 || hp->head_dim > 1024 || hp->head_dim_v < 1 || hp->head_dim_v > 1024 ||
        hp->n_rot < 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 || hp->n_ctx_train < 1)
        return th_set_error(TH_ERR_FORMAT, "%s: implausible head shape (key %d, value %d, rope dims %d, context %d)",
                            m->arch->name, hp->head_dim, hp->head_dim_v, hp->n_rot, hp->n_ctx_train);
    if (hp->n_expert > 0)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: mixture-of-experts models (%d experts) are not supported yet",
                            m->arch->name, hp->n_expert);
    hp->norm_eps = 1e-5f;
    th_meta_f32(m, "attention.layer_norm_rms_epsilon", &hp->norm_eps, false);
    hp->rope_base = 10000.0f;
    th_meta_f32(m, "rope.freq_base", &hp->rope_base, false);
    hp->rope_freq_scale = 1.0f;
    float factor;
    gguf_str st;
    if (gguf_get_str(m->file, "llama.rope.scaling.type", &st) && gguf_str_eq(st, "linear") &&
        th_meta_f32(m, "rope.scaling.factor", &factor, false) == TH_OK && factor > 0)
        hp->rope_freq_scale = 1.0f / factor;
    hp->embd_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->act_fn = TH_ACT_SILU;
    return TH_OK;
}

static th_status load_layer(th_model *m, int il, const th_decoder_opts *o) {
    th_hparams *hp = &m->hp;
    th_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim;
    int64_t k = (int64_t)hp->n_head_kv * hp->head_dim, v = (int64_t)hp->n_head_kv * hp->head_dim_v;
    int64_t o_in = (int64_t)hp->n_head * hp->head_dim_v, F = hp->n_ff;
    th_status s;
#define W(w, req, a, b, name) if ((s = th_weight_get(m, &L->w, req, a, b, 1, "blk.%d." name, il))) return s;
    W(attn_norm, true, E, 1, "attn_norm.weight");
    W(wq, true, E, q, "attn_q.weight");
    W(wk, true, E, k, "attn_k.weight");
    W(wv, true, E, v, "attn_v.weight");
    W(wo, true, o_in, E, "attn_output.weight");
    W(bq, o->qkv_bias, q, 1, "attn_q.bias");
    W(bk, o->qkv_bias, k, 1, "attn_k.bias");
    W(bv, o->qkv_bias, v, 1, "attn_v.bias");
    W(bo, false, E, 1, "attn_output.bias");
    W(ffn_norm, true, E, 1, "ffn_norm.weight");
    W(w_gate, true, E, F, "ffn_gate.weight");
    W(w_up, true, E, F, "ffn_up.weight");
    W(w_down, true, F, E, "ffn_down.weight");
#undef W
    L->window = 0;
    L->rope_base = hp->rope_base;
    return TH_OK;
}

th_status th_decoder_load(th_model *m, const th_decoder_opts *o) {
    th_status s = read_hparams(m);
    if (s) return s;
    th_hparams *hp = &m->hp;
    hp->rope_type = o->rope_type;
    if ((s = th_weight_get(m, &m->tok_embd, true, hp->n_embd, 0, 1, "token_embd.weight"))) return s;
    hp->n_vocab = (int32_t)m->tok_embd.ne1;
    if ((s = th_weight_get(m, &m->output_norm, true, hp->n_embd, 1, 1, "output_norm.weight"))) return s;
    if ((s = th_weight_get(m, &m->output, !o->tied_output_ok, hp->n_embd, hp->n_vocab, 1, "output.weight"))) return s;
    if (!m->output.data) m->output = m->tok_embd;
    if ((s = th_weight_get(m, &m->rope_freqs, false, hp->n_rot / 2, 1, 1, "rope_freqs.weight"))) return s;
    if (m->rope_freqs.data && m->rope_freqs.type != TH_F32)
        return th_set_error(TH_ERR_FORMAT, "rope_freqs.weight: expected F32, got %s", th_type_name(m->rope_freqs.type));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return th_set_error(TH_ERR_NOMEM, "out of memory for %d layers", hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++)
        if ((s = load_layer(m, il, o))) return s;
    return TH_OK;
}
