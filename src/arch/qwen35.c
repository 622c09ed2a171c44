/* qwen35.c — the hybrid Qwen families: Gated DeltaNet (recurrent) layers
 * interleaved with gated full-attention layers, as ik_llama.cpp names them.
 * Every layer whose (il + 1) is not a multiple of the full-attention interval
 * ("<arch>.full_attention_interval", 4 when absent; qwen3next always 4) is
 * recurrent. Full-attention layers: attn_q is [q; gate] per head, per-head q/k
 * RMSNorm, partial rope, ATT ·= sigmoid(gate). The FFN input norm is
 * post_attention_norm.
 *   qwen35     split attn_qkv / attn_gate / ssm_beta / ssm_alpha, value head h
 *              reads k head h % Nk; rope is interleaved M-RoPE, which for text
 *              (all sections at the same position) is NEOX over the sections.
 *   qwen35moe  qwen35 with routed + gated shared experts.
 *   qwen3next  fused ssm_in / ssm_ba (grouped per k head), value head h reads k
 *              head h / (Nv/Nk); NEOX rope; routed + gated shared experts.
 * NextN / MTP layers ("nextn_predict_layers", the last blocks) are not loaded. */
#include "arch/arch.h"
#include <stdio.h>
#include <string.h>

static uint32_t interval_of(const th_model *m) {
    uint32_t v = 4;
    if (th_meta_u32((th_model *)m, "full_attention_interval", &v, false) != TH_OK || v < 1) v = 4;
    return v;
}

static bool is_recurrent(const th_model *m, int il) {
    uint32_t every = strcmp(m->arch->name, "qwen3next") ? interval_of(m) : 4;
    return ((uint32_t)il + 1) % every != 0;
}

#define W(w, req, a, b, c, name) if ((s = th_weight_get(m, &L->w, req, a, b, c, "blk.%d." name, il))) return s;

static th_status load_recurrent(th_model *m, int il) {
    const th_hparams *hp = &m->hp;
    th_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, dk = hp->ssm_d_state, nk = hp->ssm_n_group, nv = hp->ssm_dt_rank;
    int64_t kd = dk * nk, vd = dk * nv, cd = 2 * kd + vd;
    th_status s;
    if (hp->ssm_repeat == 0) {
        W(ssm_in, true, E, 2 * kd + 2 * vd, 1, "ssm_in.weight");
        W(ssm_ba, true, E, 2 * nv, 1, "ssm_ba.weight");
    } else {
        W(ssm_qkv, true, E, cd, 1, "attn_qkv.weight");
        W(ssm_gate, true, E, vd, 1, "attn_gate.weight");
        W(ssm_beta, true, E, nv, 1, "ssm_beta.weight");
        W(ssm_alpha, true, E, nv, 1, "ssm_alpha.weight");
    }
    W(ssm_conv1d, true, hp->ssm_d_conv, cd, 1, "ssm_conv1d.weight");
    W(ssm_dt, true, nv, 1, 1, "ssm_dt.bias");
    W(ssm_a, true, nv, 1, 1, "ssm_a");
    W(ssm_norm, true, dk, 1, 1, "ssm_norm.weight");
    W(ssm_out, true, vd, E, 1, "ssm_out.weight");
    const th_weight *f32[] = { &L->ssm_conv1d, &L->ssm_dt, &L->ssm_a, &L->ssm_norm };
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++)
        if (f32[i]->type != TH_F32)
            return th_set_error(TH_ERR_UNSUPPORTED, "%s: the DeltaNet conv, dt, A and norm tensors must be F32", f32[i]->name);
    return TH_OK;
}

/* The ssm.* keys: head width, k and v heads, conv kernel; checked for the shapes
 * the kernels handle (Nv a multiple of Nk, value heads as wide as key heads). */
static th_status read_ssm(th_model *m, int32_t repeat) {
    th_hparams *hp = &m->hp;
    uint32_t conv, state, group, rank, inner;
    th_status s;
    if ((s = th_meta_u32(m, "ssm.conv_kernel", &conv, true)) || (s = th_meta_u32(m, "ssm.state_size", &state, true)) ||
        (s = th_meta_u32(m, "ssm.group_count", &group, true)) || (s = th_meta_u32(m, "ssm.time_step_rank", &rank, true)) ||
        (s = th_meta_u32(m, "ssm.inner_size", &inner, true)))
        return s;
    if (conv < 1 || conv > 16 || state < 1 || state > 1024 || group < 1 || group > 4096 || rank < 1 || rank > 4096 ||
        rank % group || (uint64_t)inner != (uint64_t)state * rank)
        return th_set_error(TH_ERR_FORMAT, "%s: implausible DeltaNet shape (conv %u, state %u, groups %u, time_step_rank %u, inner %u; "
                            "inner must be state x time_step_rank and the rank a multiple of the groups)",
                            m->arch->name, conv, state, group, rank, inner);
    hp->ssm_d_conv = (int32_t)conv;
    hp->ssm_d_state = (int32_t)state;
    hp->ssm_n_group = (int32_t)group;
    hp->ssm_dt_rank = (int32_t)rank;
    hp->ssm_repeat = repeat;
    hp->n_recurrent = 0;
    return TH_OK;
}

/* Interleaved M-RoPE with every position section at the token's position: pair i
 * (of n_rot/2) is rotated unless it falls in the extra section (position 0 for
 * text, ggml_mrope_cache_init's rule). Only the all-rotated case is supported. */
static th_status check_sections(th_model *m) {
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch->name);
    int32_t sec[4] = { 0 };
    const gguf_kv *kv = gguf_find(m->file, key);
    if (!kv) return TH_OK;
    if (kv->type != GGUF_ARRAY || (kv->arr_type != GGUF_I32 && kv->arr_type != GGUF_U32) || kv->arr_n < 3)
        return th_set_error(TH_ERR_FORMAT, "%s: expected an array of 3 or 4 integers", key);
    for (uint64_t i = 0; i < 4 && i < kv->arr_n; i++) {
        uint32_t v;
        memcpy(&v, kv->arr_data + 4 * i, 4);
        if (v > 4096) return th_set_error(TH_ERR_FORMAT, "%s: section %d is %u", key, (int)i, v);
        sec[i] = (int32_t)v;
    }
    int32_t dims = sec[0] + sec[1] + sec[2] + sec[3];
    if (dims < 1 || dims > 4096) return th_set_error(TH_ERR_FORMAT, "%s: sections sum to %d", key, dims);
    for (int32_t i = 0; i < m->hp.n_rot / 2; i++) {
        int32_t sc = i % dims;
        bool rot = (sc % 3 == 0 && sc < 3 * sec[0]) || (sc % 3 == 1 && sc < 3 * sec[1]) || (sc % 3 == 2 && sc < 3 * sec[2]);
        if (!rot)
            return th_set_error(TH_ERR_UNSUPPORTED, "%s [%d %d %d %d]: rope pair %d falls in the extra section (not rotated for text); not supported",
                                key, sec[0], sec[1], sec[2], sec[3], i);
    }
    return TH_OK;
}

/* The shared experts behind a sigmoid gate (expert_shared_feed_forward_length wide). */
static th_status load_gated_shexp(th_model *m) {
    uint32_t fs = 0;
    th_status s;
    if (th_meta_u32(m, "expert_shared_feed_forward_length", &fs, false) != TH_OK || fs < 1 || fs > (1u << 24))
        return TH_OK;
    int64_t E = m->hp.n_embd;
    for (int il = 0; il < m->hp.n_layer; il++) {
        th_layer *L = &m->layers[il];
        W(gate_inp_shexp, false, E, 1, 1, "ffn_gate_inp_shexp.weight");
        if (!L->gate_inp_shexp.data) continue;
        if (L->gate_inp_shexp.type != TH_F32)
            return th_set_error(TH_ERR_UNSUPPORTED, "%s: must be F32", L->gate_inp_shexp.name);
        W(gate_shexp, true, E, fs, 1, "ffn_gate_shexp.weight");
        W(up_shexp, true, E, fs, 1, "ffn_up_shexp.weight");
        W(down_shexp, true, fs, E, 1, "ffn_down_shexp.weight");
    }
    return TH_OK;
}
#undef W

static th_status hybrid_load(th_model *m, int32_t repeat, bool moe) {
    th_status s = read_ssm(m, repeat);
    if (s) return s;
    uint32_t nextn = 0;   /* MTP layers at the end of the stack: not run (ik_llama.cpp skips them too) */
    if (th_meta_u32(m, "nextn_predict_layers", &nextn, false) != TH_OK || nextn > 64) nextn = 0;
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .qk_norm = true, .tied_output_ok = true, .moe_ok = moe,
                          .ffn_norm_name = "post_attention_norm", .q_gated = true,
                          .is_recurrent = is_recurrent, .load_recurrent = load_recurrent, .n_tail_skip = (int32_t)nextn };
    if ((s = th_decoder_load(m, &o))) return s;
    th_hparams *hp = &m->hp;
    if (hp->head_dim != hp->head_dim_v)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: the attention gate needs key and value heads of one width (%d, %d)",
                            m->arch->name, hp->head_dim, hp->head_dim_v);
    if ((s = check_sections(m))) return s;
    if (moe) {
        if (hp->n_expert == 0) return th_set_error(TH_ERR_FORMAT, "%s: expert_count is missing or 0", m->arch->name);
        hp->gating = TH_GATING_SOFTMAX;
        hp->expert_weights_norm = true;
        if ((s = load_gated_shexp(m))) return s;
    }
    return TH_OK;
}

static th_status qwen35_load(th_model *m) { return hybrid_load(m, 1, false); }
static th_status qwen35moe_load(th_model *m) { return hybrid_load(m, 1, true); }
static th_status qwen3next_load(th_model *m) { return hybrid_load(m, 0, true); }

const th_arch th_arch_qwen35 = { "qwen35", qwen35_load, th_describe_common };
const th_arch th_arch_qwen35moe = { "qwen35moe", qwen35moe_load, th_describe_common };
const th_arch th_arch_qwen3next = { "qwen3next", qwen3next_load, th_describe_common };
