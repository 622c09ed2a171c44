/* decoder.c — loads the standard decoder: hyper-parameters from "<arch>.*"
 * metadata (including rope scaling and expert counts) and the per-layer tensors
 * (attention q/k/v/o or fused qkv, optional biases, q/k norms, post norms, sinks;
 * a dense FFN or a mixture of experts), checking every shape against the
 * hyper-parameters. Families call it and then add or change what is theirs. */
#include "arch/arch.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void read_rope_scaling(th_model *m) {
    th_hparams *hp = &m->hp;
    char key[128];
    gguf_str st = { 0 };
    float factor = 0, attn_factor = 1;
    uint32_t v;
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    bool has_type = gguf_get_str(m->file, key, &st);
    hp->rope_freq_scale = 1.0f;
    hp->rope_ext_factor = 0.0f;
    hp->rope_attn_factor = 1.0f;
    hp->rope_beta_fast = 32.0f;
    hp->rope_beta_slow = 1.0f;
    hp->rope_n_ctx_orig = hp->n_ctx_train;
    if (th_meta_u32(m, "rope.scaling.original_context_length", &v, false) == TH_OK && v > 0 && v < (1u << 30))
        hp->rope_n_ctx_orig = (int32_t)v;
    if (th_meta_f32(m, "rope.scaling.attn_factor", &attn_factor, false) == TH_OK && attn_factor > 0)
        hp->rope_attn_factor = attn_factor;
    if (!has_type || th_meta_f32(m, "rope.scaling.factor", &factor, false) != TH_OK || !(factor > 0)) return;
    if (gguf_str_eq(st, "linear")) hp->rope_freq_scale = 1.0f / factor;
    if (gguf_str_eq(st, "yarn")) {
        hp->rope_freq_scale = 1.0f / factor;
        hp->rope_ext_factor = 1.0f;
    }
}

static th_status read_experts(th_model *m, const th_decoder_opts *o) {
    th_hparams *hp = &m->hp;
    uint32_t v;
    hp->n_expert = hp->n_expert_used = hp->n_expert_shared = hp->n_layer_dense_lead = 0;
    if (th_meta_u32(m, "expert_count", &v, false) == TH_OK) hp->n_expert = (int32_t)TH_MIN(v, 1u << 20);
    if (th_meta_u32(m, "expert_used_count", &v, false) == TH_OK) hp->n_expert_used = (int32_t)TH_MIN(v, 1u << 20);
    hp->expert_weights_scale = 1.0f;
    hp->gating = TH_GATING_SOFTMAX;
    if (hp->n_expert == 0) return TH_OK;
    if (!o->moe_ok)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: mixture-of-experts variants (%d experts) are not supported for this architecture",
                            m->arch->name, hp->n_expert);
    if (hp->n_expert > 4096 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert)
        return th_set_error(TH_ERR_FORMAT, "%s: implausible expert counts (%d experts, %d used)", m->arch->name,
                            hp->n_expert, hp->n_expert_used);
    hp->n_ff_exp = hp->n_ff;
    if (th_meta_u32(m, "expert_feed_forward_length", &v, false) == TH_OK) hp->n_ff_exp = (int32_t)TH_MIN(v, 1u << 24);
    if (th_meta_u32(m, "expert_shared_count", &v, false) == TH_OK) hp->n_expert_shared = (int32_t)TH_MIN(v, 1024u);
    if (th_meta_u32(m, "leading_dense_block_count", &v, false) == TH_OK) hp->n_layer_dense_lead = (int32_t)TH_MIN(v, (uint32_t)hp->n_layer);
    th_meta_f32(m, "expert_weights_scale", &hp->expert_weights_scale, false);
    hp->n_expert_groups = hp->n_expert_groups_used = 0;
    uint32_t ng = 0, nu = 0;
    if (th_meta_u32(m, "expert_group_count", &ng, false) == TH_OK && ng > 1) {
        if (th_meta_u32(m, "expert_group_used_count", &nu, false) != TH_OK) nu = ng;
        if (ng > 256 || hp->n_expert % (int32_t)ng || nu < 1 || nu > ng ||
            (int64_t)nu * (hp->n_expert / (int32_t)ng) < hp->n_expert_used)
            return th_set_error(TH_ERR_FORMAT, "%s: expert groups %u (%u used) do not fit %d experts (%d used)",
                                m->arch->name, ng, nu, hp->n_expert, hp->n_expert_used);
        hp->n_expert_groups = (int32_t)ng;
        hp->n_expert_groups_used = (int32_t)nu;
    }
    if (hp->n_ff_exp < 1)
        return th_set_error(TH_ERR_FORMAT, "%s: expert width %d is implausible", m->arch->name, hp->n_ff_exp);
    return TH_OK;
}

static th_status read_hparams(th_model *m, const th_decoder_opts *o) {
    th_hparams *hp = &m->hp;
    uint32_t v;
    th_status s;
#define REQ(key, field) if ((s = th_meta_u32(m, key, &v, true))) return s; hp->field = (int32_t)TH_MIN(v, 1u << 30);
#define OPT(key, field, def) hp->field = (def); if (th_meta_u32(m, key, &v, false) == TH_OK) hp->field = (int32_t)TH_MIN(v, 1u << 30);
    REQ("block_count", n_layer);
    REQ("embedding_length", n_embd);
    OPT("feed_forward_length", n_ff, 0);
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
#undef REQ
#undef OPT
    if (hp->head_dim < 1 || hp->head_dim > 1024 || hp->head_dim_v < 1 || hp->head_dim_v > 1024 ||
        hp->n_rot < 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 || hp->n_ctx_train < 1)
        return th_set_error(TH_ERR_FORMAT, "%s: implausible head shape (key %d, value %d, rope dims %d, context %d)",
                            m->arch->name, hp->head_dim, hp->head_dim_v, hp->n_rot, hp->n_ctx_train);
    if ((s = read_experts(m, o))) return s;
    hp->norm_eps = 1e-5f;
    th_meta_f32(m, "attention.layer_norm_rms_epsilon", &hp->norm_eps, false);
    hp->rope_base = 10000.0f;
    th_meta_f32(m, "rope.freq_base", &hp->rope_base, false);
    if (!(hp->rope_base > 0))
        return th_set_error(TH_ERR_FORMAT, "%s: rope.freq_base %g is not positive", m->arch->name, hp->rope_base);
    read_rope_scaling(m);
    hp->embd_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    float scale;
    if (th_meta_f32(m, "attention.scale", &scale, false) == TH_OK && scale > 0) hp->attn_scale = scale;
    hp->act_fn = TH_ACT_SILU;
    return TH_OK;
}

#define W(w, req, a, b, c, name) if ((s = th_weight_get(m, &L->w, req, a, b, c, "blk.%d." name, il))) return s;

static th_status load_attn(th_model *m, int il, const th_decoder_opts *o) {
    th_hparams *hp = &m->hp;
    th_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim, hd = hp->head_dim;
    int64_t k = (int64_t)hp->n_head_kv * hp->head_dim, v = (int64_t)hp->n_head_kv * hp->head_dim_v;
    th_status s;
    if (o->fused_qkv) {
        W(wqkv, true, E, q + k + v, 1, "attn_qkv.weight");
        W(bqkv, false, q + k + v, 1, 1, "attn_qkv.bias");
    } else {
        W(wq, true, E, o->q_gated ? 2 * q : q, 1, "attn_q.weight");
        L->q_gated = o->q_gated;
        W(wk, true, E, k, 1, "attn_k.weight");
        W(wv, true, E, v, 1, "attn_v.weight");
        W(bq, o->qkv_bias, q, 1, 1, "attn_q.bias");
        W(bk, o->qkv_bias, k, 1, 1, "attn_k.bias");
        W(bv, o->qkv_bias, v, 1, 1, "attn_v.bias");
    }
    W(q_norm, o->qk_norm, 0, 1, 1, "attn_q_norm.weight");
    W(k_norm, o->qk_norm, 0, 1, 1, "attn_k_norm.weight");
    if ((L->q_norm.data && L->q_norm.ne0 != hd && L->q_norm.ne0 != q) ||
        (L->k_norm.data && L->k_norm.ne0 != hd && L->k_norm.ne0 != k) || (!L->q_norm.data != !L->k_norm.data))
        return th_set_error(TH_ERR_FORMAT, "blk.%d: attn_q_norm/attn_k_norm must both be present, each one head (%lld) or the whole projection (%lld/%lld) wide",
                            il, (long long)hd, (long long)q, (long long)k);
    W(attn_sinks, o->attn_sinks, hp->n_head, 1, 1, "attn_sinks.weight");
    return TH_OK;
}

static th_status load_moe(th_model *m, int il) {
    th_hparams *hp = &m->hp;
    th_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp, S = (int64_t)hp->n_ff_exp * hp->n_expert_shared;
    th_status s;
    W(router, true, E, X, 1, "ffn_gate_inp.weight");
    W(router_b, false, X, 1, 1, "ffn_gate_inp.bias");
    W(exp_probs_b, false, X, 1, 1, "exp_probs_b.bias");
    W(gate_exps, true, E, F, X, "ffn_gate_exps.weight");
    W(up_exps, true, E, F, X, "ffn_up_exps.weight");
    W(down_exps, true, F, E, X, "ffn_down_exps.weight");
    W(gate_exps_b, false, F, X, 1, "ffn_gate_exps.bias");
    W(up_exps_b, false, F, X, 1, "ffn_up_exps.bias");
    W(down_exps_b, false, E, X, 1, "ffn_down_exps.bias");
    if (L->router.type != TH_F32 || (L->gate_exps_b.data && L->gate_exps_b.type != TH_F32) ||
        (L->up_exps_b.data && L->up_exps_b.type != TH_F32) || (L->down_exps_b.data && L->down_exps_b.type != TH_F32))
        return th_set_error(TH_ERR_UNSUPPORTED, "blk.%d: the router and expert biases must be F32", il);
    if (hp->n_expert_shared > 0) {
        W(gate_shexp, true, E, S, 1, "ffn_gate_shexp.weight");
        W(up_shexp, true, E, S, 1, "ffn_up_shexp.weight");
        W(down_shexp, true, S, E, 1, "ffn_down_shexp.weight");
    }
    return TH_OK;
}

static th_status load_layer(th_model *m, int il, const th_decoder_opts *o) {
    th_hparams *hp = &m->hp;
    th_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, o_in = (int64_t)hp->n_head * hp->head_dim_v, F = hp->n_ff;
    th_status s;
    W(attn_norm, true, E, 1, 1, "attn_norm.weight");
    if (o->is_recurrent && o->is_recurrent(m, il)) {
        L->recurrent = true;
        hp->n_recurrent++;
        if ((s = o->load_recurrent(m, il))) return s;
    } else {
        if ((s = o->load_attn ? o->load_attn(m, il) : load_attn(m, il, o))) return s;
        W(wo, true, o_in, E, 1, "attn_output.weight");
        W(bo, false, E, 1, 1, "attn_output.bias");
    }
    if (o->post_norms) W(post_attn_norm, true, E, 1, 1, "post_attention_norm.weight");
    if ((s = th_weight_get(m, &L->ffn_norm, true, E, 1, 1, "blk.%d.%s.weight", il,
                           o->ffn_norm_name ? o->ffn_norm_name : "ffn_norm"))) return s;
    if (hp->n_expert > 0 && il >= hp->n_layer_dense_lead) {
        if ((s = load_moe(m, il))) return s;
    } else if (o->fused_gate_up) {
        W(w_up, true, E, 2 * F, 1, "ffn_up.weight");
        W(w_down, true, F, E, 1, "ffn_down.weight");
    } else {
        if (F < 1) return th_set_error(TH_ERR_FORMAT, "%s: feed_forward_length is missing or 0", m->arch->name);
        W(w_gate, true, E, F, 1, "ffn_gate.weight");
        W(w_up, true, E, F, 1, "ffn_up.weight");
        W(w_down, true, F, E, 1, "ffn_down.weight");
    }
    if (o->post_norms) W(post_ffn_norm, true, E, 1, 1, "post_ffw_norm.weight");
    L->window = 0;
    L->rope_base = hp->rope_base;
    L->rope_freq_scale = hp->rope_freq_scale;
    return TH_OK;
}
#undef W

th_status th_decoder_load(th_model *m, const th_decoder_opts *o) {
    th_status s = read_hparams(m, o);
    if (s) return s;
    th_hparams *hp = &m->hp;
    if (o->n_tail_skip < 0 || o->n_tail_skip >= hp->n_layer)
        return th_set_error(TH_ERR_FORMAT, "%s: %d prediction layers of %d blocks leave none to run", m->arch->name,
                            o->n_tail_skip, hp->n_layer);
    hp->n_layer -= o->n_tail_skip;
    hp->rope_type = o->rope_type;
    if ((s = th_weight_get(m, &m->tok_embd, true, hp->n_embd, 0, 1, "token_embd.weight"))) return s;
    hp->n_vocab = (int32_t)m->tok_embd.ne1;
    if ((s = th_weight_get(m, &m->output_norm, true, hp->n_embd, 1, 1, "output_norm.weight"))) return s;
    if ((s = th_weight_get(m, &m->output, !o->tied_output_ok, hp->n_embd, hp->n_vocab, 1, "output.weight"))) return s;
    if (!m->output.data) m->output = m->tok_embd;
    int64_t nf = hp->n_rot / 2;
    if ((s = th_weight_get(m, &m->rope_freqs, false, nf, 1, 1, "rope_freqs.weight"))) return s;
    if ((s = th_weight_get(m, &m->rope_long, false, nf, 1, 1, "rope_factors_long.weight"))) return s;
    if ((s = th_weight_get(m, &m->rope_short, false, nf, 1, 1, "rope_factors_short.weight"))) return s;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return th_set_error(TH_ERR_NOMEM, "out of memory for %d layers", hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++)
        if ((s = load_layer(m, il, o))) return s;
    return TH_OK;
}

int32_t th_decoder_window(th_model *m) {
    uint32_t v = 0;
    if (th_meta_u32(m, "attention.sliding_window", &v, false) != TH_OK) return 0;
    return (int32_t)TH_MIN(v, 1u << 30);
}

void th_describe_common(const th_model *m, char *buf, size_t cap) {
    const th_hparams *hp = &m->hp;
    size_t n = strlen(buf);
#define ADD(...) do { if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__); } while (0)
    ADD("%srope=%s", n ? " " : "", hp->rope_type == TH_ROPE_NEOX ? "neox" : "norm");
    if (hp->rope_ext_factor != 0) ADD(" yarn(factor %g, orig %d)", 1.0 / hp->rope_freq_scale, hp->rope_n_ctx_orig);
    else if (hp->rope_freq_scale != 1.0f) ADD(" rope_linear(factor %g)", 1.0 / hp->rope_freq_scale);
    if (m->rope_freqs.data) ADD(" rope_freqs");
    if (m->rope_long.data) ADD(" longrope");
    if (hp->n_head_kv != hp->n_head) ADD(" gqa=%d/%d", hp->n_head, hp->n_head_kv);
    if (hp->head_dim * hp->n_head != hp->n_embd) ADD(" head_dim=%d", hp->head_dim);
    const th_layer *L0 = &m->layers[0];
    if (L0->bq.data || L0->bqkv.data) ADD(" qkv_bias");
    if (L0->wqkv.data) ADD(" fused_qkv");
    if (L0->q_norm.data) ADD(" qk_norm=%s", L0->q_norm.ne0 == hp->head_dim ? "per_head" : "full");
    if (L0->post_attn_norm.data) ADD(" post_norms");
    if (L0->attn_sinks.data) ADD(" attn_sinks");
    if (hp->n_recurrent) ADD(" deltanet=%d/%d layers(conv %d, heads %d/%d x %d)", hp->n_recurrent, hp->n_layer,
                             hp->ssm_d_conv, hp->ssm_n_group, hp->ssm_dt_rank, hp->ssm_d_state);
    for (int i = 0; i < hp->n_layer; i++)
        if (m->layers[i].q_gated) { ADD(" gated_attention"); break; }
    for (int i = 0; i < hp->n_layer; i++)
        if (m->layers[i].gate_inp_shexp.data) { ADD(" gated_shared_expert"); break; }
    int32_t n_win = 0, win = 0;
    for (int i = 0; i < hp->n_layer; i++) if (m->layers[i].window) { n_win++; win = m->layers[i].window; }
    if (n_win) ADD(" sliding_window=%d(%d/%d layers)", win, n_win, hp->n_layer);
    for (int i = 0; i < hp->n_layer; i++)
        if (m->layers[i].rope_base != hp->rope_base) { ADD(" rope_base=%g local=%g", hp->rope_base, m->layers[i].rope_base); break; }
    if (hp->attn_softcap > 0) ADD(" attn_softcap=%g", hp->attn_softcap);
    if (hp->final_softcap > 0) ADD(" final_softcap=%g", hp->final_softcap);
    if (hp->embd_scale != 1.0f) ADD(" embd_scale=%g", hp->embd_scale);
    if (hp->act_fn == TH_ACT_GELU) ADD(" act=gelu");
    if (hp->act_fn == TH_ACT_SWIGLU_OAI) ADD(" act=swiglu_clamped");
    if (L0->w_up.data && !L0->w_gate.data && !L0->router.data) ADD(" fused_gate_up");
    if (hp->n_expert > 0) {
        static const char *const gating[] = { "softmax", "sigmoid", "softmax_selected" };
        ADD(" moe=%d/%d(%s%s", hp->n_expert_used, hp->n_expert, gating[hp->gating], hp->expert_weights_norm ? ", norm" : "");
        if (hp->expert_weights_scale != 1.0f) ADD(", scale %g", hp->expert_weights_scale);
        if (hp->n_layer - 1 >= 0 && m->layers[hp->n_layer - 1].exp_probs_b.data) ADD(", selection_bias");
        if (hp->n_expert_groups > 1) ADD(", groups %d/%d", hp->n_expert_groups_used, hp->n_expert_groups);
        ADD(")");
        if (hp->n_expert_shared) ADD(" shared_experts=%d", hp->n_expert_shared);
        if (hp->n_layer_dense_lead) ADD(" dense_lead=%d", hp->n_layer_dense_lead);
    }
    if (hp->kv_lora_rank > 0) ADD(" mla(kv_lora %d, q_lora %d)", hp->kv_lora_rank, hp->q_lora_rank);
    if (m->output.data == m->tok_embd.data) ADD(" tied_output");
#undef ADD
}
