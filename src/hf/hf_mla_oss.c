/* hf_mla_oss.c — config.json -> llama.cpp metadata and tensors for DeepSeek-V2/V3
 * (model_type deepseek_v2 / deepseek_v3 -> deepseek2: MLA) and GPT-OSS (gpt_oss ->
 * gpt-oss: experts unquantized or as MXFP4 blocks, kept MXFP4). */
#include "hf/hf_internal.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPT-OSS: expert width, the fixed clamped SwiGLU (alpha 1.702, limit 7) and the
 * sliding pattern our gpt-oss runs (sliding on even layers) checked, not assumed. */
th_status hf_gpt_oss_keys(hf_conv *c) {
    double alpha = 1.702, limit = 7.0;
    if (hf_has(c, "swiglu_alpha")) TRY(hf_cfg_num(c, "swiglu_alpha", true, &alpha));
    if (hf_has(c, "swiglu_limit")) TRY(hf_cfg_num(c, "swiglu_limit", true, &limit));
    if (fabs(alpha - 1.702) > 1e-6 || fabs(limit - 7.0) > 1e-6)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: swiglu_alpha %g / swiglu_limit %g (only 1.702 / 7 are supported)",
                            c->dir, alpha, limit);
    const cJSON *lt = hf_cfg_item(c, "layer_types");
    int il = 0;
    for (const cJSON *e = cJSON_IsArray(lt) ? lt->child : NULL; e; e = e->next, il++)
        if (!cJSON_IsString(e) || strcmp(e->valuestring, il % 2 ? "full_attention" : "sliding_attention"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: layer_types[%d] must be '%s' (sliding on even layers)", c->dir, il,
                                il % 2 ? "full_attention" : "sliding_attention");
    hf_w_u32(c, "expert_feed_forward_length", c->n_ff);
    return TH_OK;
}

/* DeepSeek-V2/V3 (MLA): head shapes from the LoRA ranks, the MoE keys (the first
 * first_k_dense_replace layers dense), V2 softmax gating, V3 sigmoid with a selection
 * bias. Group-limited routing (n_group > 1 with topk_group < n_group) and
 * V3 with rope_interleave false are refused. */
th_status hf_deepseek_keys(hf_conv *c) {
    int64_t nope, rope, v, kv_rank, q_rank = 0, dense, used, ff, shared, groups = 1, topk_groups = 1;
    double scale = 1.0;
    bool norm, v3 = !strcmp(c->family, "deepseek_v3"), interleave;
    TRY(hf_cfg_int(c, "qk_nope_head_dim", true, &nope));
    TRY(hf_cfg_int(c, "qk_rope_head_dim", true, &rope));
    TRY(hf_cfg_int(c, "v_head_dim", true, &v));
    TRY(hf_cfg_int(c, "kv_lora_rank", true, &kv_rank));
    if (hf_has(c, "q_lora_rank")) TRY(hf_cfg_int(c, "q_lora_rank", true, &q_rank));
    TRY(hf_cfg_int(c, "first_k_dense_replace", true, &dense));
    TRY(hf_cfg_int(c, "n_routed_experts", true, &c->n_expert));
    TRY(hf_cfg_int(c, "num_experts_per_tok", true, &used));
    TRY(hf_cfg_int(c, "moe_intermediate_size", true, &ff));
    TRY(hf_cfg_int(c, "n_shared_experts", true, &shared));
    if (hf_has(c, "n_group")) TRY(hf_cfg_int(c, "n_group", true, &groups));
    if (hf_has(c, "topk_group")) TRY(hf_cfg_int(c, "topk_group", true, &topk_groups));
    if (hf_has(c, "routed_scaling_factor")) TRY(hf_cfg_num(c, "routed_scaling_factor", true, &scale));
    TRY(hf_cfg_bool(c, "norm_topk_prob", false, &norm));
    TRY(hf_cfg_bool(c, "rope_interleave", true, &interleave));
    if (nope < 1 || rope < 2 || rope % 2 || v < 1 || kv_rank < 1 || q_rank < 0 || dense < 0 || c->n_expert < 1 || used < 1 ||
        used > c->n_expert || shared < 0 || nope + rope > 1024)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: implausible MLA / MoE sizes (qk_nope_head_dim %lld, qk_rope_head_dim %lld, "
                            "v_head_dim %lld, kv_lora_rank %lld, %lld experts, %lld per token)", c->dir, (long long)nope,
                            (long long)rope, (long long)v, (long long)kv_rank, (long long)c->n_expert, (long long)used);
    if (c->n_kv != c->n_head)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: num_key_value_heads must equal num_attention_heads for MLA", c->dir);
    if (groups > 1 && topk_groups < groups)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: group-limited expert routing (n_group %lld, topk_group %lld) is "
                            "not supported", c->dir, (long long)groups, (long long)topk_groups);
    if (v3 && !interleave)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: rope_interleave = false is not supported", c->dir);
    c->n_rot = rope;
    c->q_lora = q_rank;
    c->n_dense = dense;
    c->head_dim = nope + rope;
    hf_w_u32(c, "attention.key_length", nope + rope);
    hf_w_u32(c, "attention.value_length", v);
    hf_w_u32(c, "rope.dimension_count", rope);
    hf_w_u32(c, "attention.kv_lora_rank", kv_rank);
    if (q_rank > 0) hf_w_u32(c, "attention.q_lora_rank", q_rank);
    hf_w_u32(c, "leading_dense_block_count", dense);
    hf_w_u32(c, "expert_count", c->n_expert);
    hf_w_u32(c, "expert_used_count", used);
    hf_w_u32(c, "expert_feed_forward_length", ff);
    hf_w_u32(c, "expert_shared_count", shared);
    hf_w_f32(c, "expert_weights_scale", scale);
    char k[128];
    gguf_w_bool(c->w, ARCH_KEY(k, "expert_weights_norm"), norm);
    hf_w_u32(c, "expert_gating_func", v3 ? 2 : 1);   /* llama.cpp: 1 softmax, 2 sigmoid */
    return TH_OK;
}

/* yarn: the attention-scale multiplier llama.cpp's convert writes (0.1 * mscale_all_dim). */
th_status hf_deepseek_yarn(hf_conv *c) {
    const cJSON *rs = hf_rope_obj(c), *ty = cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "rope_type") : NULL;
    if (!cJSON_IsString(ty)) ty = cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "type") : NULL;
    bool yarn = cJSON_IsString(ty) && !strcmp(ty->valuestring, "yarn");
    const cJSON *m = yarn ? cJSON_GetObjectItemCaseSensitive(rs, "mscale_all_dim") : NULL;
    /* written without yarn too (0: no effect): llama.cpp of Feb 2025 requires the key for deepseek2 */
    hf_w_f32(c, "rope.scaling.yarn_log_multiplier", cJSON_IsNumber(m) ? 0.1 * m->valuedouble : 0.0);
    return TH_OK;
}

/* GPT-OSS experts: gate_up_proj [E, in, 2*ff] (x @ W, gate and up interleaved in the
 * last dim) -> ffn_gate_exps / ffn_up_exps [in, ff, E]; down_proj [E, ff, out] ->
 * ffn_down_exps [ff, out, E]; biases de-interleaved likewise. */
/* One MXFP4 block from HF's layout (16 bytes: element 2k low nibble, 2k+1 high) to
 * ggml's (e, then qs[j]: element j low nibble, j+16 high); the E2M1 codes and the
 * E8M0 exponent are the same numbers in both. */
static void mxfp4_block(uint8_t *dst, const uint8_t *codes, uint8_t e) {
    uint8_t v[32];
    for (int k = 0; k < 16; k++) { v[2 * k] = codes[k] & 15; v[2 * k + 1] = codes[k] >> 4; }
    dst[0] = e;
    for (int j = 0; j < 16; j++) dst[1 + j] = (uint8_t)(v[j] | (v[j + 16] << 4));
}

/* <name>_blocks U8 [E, rows, nb, 16] + <name>_scales U8 [E, rows, nb] as ggml MXFP4
 * rows; rows r0, r0 + step, ... (step 2 takes gate or up out of gate_up). */
static th_status mxfp4_rows(hf_conv *c, const char *pre, int il, const char *name, int64_t step, int64_t r0, uint8_t **out,
                            uint64_t *rows, uint64_t *cols) {
    char h[256], hs[256];
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.%s_blocks", pre, il, name);
    snprintf(hs, sizeof hs, "%slayers.%d.mlp.experts.%s_scales", pre, il, name);
    const st_tensor *b = st_set_find(c->st, h, NULL), *sc = st_set_find(c->st, hs, NULL);
    if (!b || !sc) return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is missing (MXFP4 experts)", c->dir, b ? hs : h);
    if (b->dtype != ST_U8 || sc->dtype != ST_U8 || b->n_dims != 4 || sc->n_dims != 3 || b->shape[3] != 16 ||
        b->shape[0] != (uint64_t)c->n_expert || sc->shape[0] != b->shape[0] || sc->shape[1] != b->shape[1] ||
        sc->shape[2] != b->shape[2] || b->shape[1] % (uint64_t)step)
        return th_set_error(TH_ERR_FORMAT, "%s: '%s' / '%s' must be U8 [%lld, rows, blocks, 16] / [%lld, rows, blocks]", c->dir, h, hs,
                            (long long)c->n_expert, (long long)c->n_expert);
    uint64_t E = b->shape[0], R = b->shape[1] / (uint64_t)step, nb = b->shape[2];
    uint8_t *d = hf_keep(c, E * R * nb * 17);
    if (!d) return th_set_error(TH_ERR_NOMEM, "out of memory converting '%s'", h);
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t r = 0; r < R; r++) {
            uint64_t src_row = e * b->shape[1] + r * (uint64_t)step + (uint64_t)r0;
            for (uint64_t k = 0; k < nb; k++)
                mxfp4_block(d + ((e * R + r) * nb + k) * 17, b->data + (src_row * nb + k) * 16, sc->data[src_row * nb + k]);
        }
    *out = d;
    *rows = R;
    *cols = nb * 32;
    return TH_OK;
}

/* GPT-OSS experts as the released checkpoints ship them (MXFP4), kept MXFP4. */
static th_status add_oss_mxfp4(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
    th_status s;
    uint8_t *gate, *up, *down;
    uint64_t ff, in, ff2, in2, out, ffd;
    TRY(mxfp4_rows(c, pre, il, "gate_up_proj", 2, 0, &gate, &ff, &in));
    TRY(mxfp4_rows(c, pre, il, "gate_up_proj", 2, 1, &up, &ff2, &in2));
    TRY(mxfp4_rows(c, pre, il, "down_proj", 1, 0, &down, &out, &ffd));
    const st_tensor *bg, *bd;
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.gate_up_proj_bias", pre, il);
    if (!(bg = hf_get(c, h, true, &s))) return s;
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.down_proj_bias", pre, il);
    if (!(bd = hf_get(c, h, true, &s))) return s;
    uint64_t E = (uint64_t)c->n_expert;
    if (ffd != ff || bg->n_elem != E * 2 * ff || bd->n_elem != E * out)
        return th_set_error(TH_ERR_FORMAT, "%s: layer %d: MXFP4 expert shapes do not agree", c->dir, il);
    float *gb = hf_keep(c, E * ff * 4), *ub = hf_keep(c, E * ff * 4), *db = hf_keep(c, E * out * 4);
    if (!gb || !ub || !db) return th_set_error(TH_ERR_NOMEM, "out of memory");
    for (uint64_t k = 0; k < E * ff; k++) { gb[k] = hf_elem_f32(bg, 2 * k); ub[k] = hf_elem_f32(bg, 2 * k + 1); }
    for (uint64_t k = 0; k < E * out; k++) db[k] = hf_elem_f32(bd, k);
    uint64_t ng[3] = { in, ff, E }, nd[3] = { ff, out, E }, nbg[2] = { ff, E }, nbd[2] = { out, E };
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    gguf_w_tensor(c->w, GG("ffn_gate_exps.weight"), TH_MXFP4, 3, ng, gate, E * ff * in / 32 * 17);
    gguf_w_tensor(c->w, GG("ffn_gate_exps.bias"), TH_F32, 2, nbg, gb, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_up_exps.weight"), TH_MXFP4, 3, ng, up, E * ff * in / 32 * 17);
    gguf_w_tensor(c->w, GG("ffn_up_exps.bias"), TH_F32, 2, nbg, ub, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_down_exps.weight"), TH_MXFP4, 3, nd, down, E * out * ff / 32 * 17);
    gguf_w_tensor(c->w, GG("ffn_down_exps.bias"), TH_F32, 2, nbd, db, E * out * 4);
#undef GG
    return TH_OK;
}

static th_status add_oss_experts(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
    th_status s;
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.gate_up_proj_blocks", pre, il);
    if (st_set_find(c->st, h, NULL)) return add_oss_mxfp4(c, pre, il);
    const st_tensor *t[4];
    static const char *const nm[4] = { "gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias" };
    for (int i = 0; i < 4; i++) {
        snprintf(h, sizeof h, "%slayers.%d.mlp.experts.%s", pre, il, nm[i]);
        if (!(t[i] = hf_get(c, h, true, &s))) return s;
        if (t[i]->dtype == ST_F64 || t[i]->n_dims != (i % 2 ? 2 : 3) || t[i]->shape[0] != (uint64_t)c->n_expert)
            return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' must be %s with %lld experts first (not F64)", c->dir, h,
                                i % 2 ? "2-D" : "3-D", (long long)c->n_expert);
    }
    uint64_t E = t[0]->shape[0], in = t[0]->shape[1], ff2 = t[0]->shape[2], ff = ff2 / 2, out = t[2]->shape[2];
    if (ff2 % 2 || t[2]->shape[1] != ff || t[1]->shape[1] != ff2 || t[3]->shape[1] != out)
        return th_set_error(TH_ERR_FORMAT, "%s: layer %d: gate_up_proj / down_proj shapes do not agree", c->dir, il);
    size_t es = st_dtype_size(t[0]->dtype), ed = st_dtype_size(t[2]->dtype);
    uint8_t *gate = hf_keep(c, E * ff * in * es), *up = hf_keep(c, E * ff * in * es), *down = hf_keep(c, E * out * ff * ed);
    float *gb = hf_keep(c, E * ff * 4), *ub = hf_keep(c, E * ff * 4), *db = hf_keep(c, E * out * 4);
    if (!gate || !up || !down || !gb || !ub || !db) return th_set_error(TH_ERR_NOMEM, "out of memory converting layer %d experts", il);
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t i = 0; i < in; i++)
            for (uint64_t o = 0; o < ff; o++) {
                const uint8_t *src = t[0]->data + ((e * in + i) * ff2 + 2 * o) * es;
                memcpy(gate + ((e * ff + o) * in + i) * es, src, es);
                memcpy(up + ((e * ff + o) * in + i) * es, src + es, es);
            }
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t i = 0; i < ff; i++)
            for (uint64_t o = 0; o < out; o++)
                memcpy(down + ((e * out + o) * ff + i) * ed, t[2]->data + ((e * ff + i) * out + o) * ed, ed);
    for (uint64_t k = 0; k < E * ff; k++) {
        gb[k] = hf_elem_f32(t[1], 2 * k);
        ub[k] = hf_elem_f32(t[1], 2 * k + 1);
    }
    for (uint64_t k = 0; k < E * out; k++) db[k] = hf_elem_f32(t[3], k);
    uint64_t ng[3] = { in, ff, E }, nd[3] = { ff, out, E }, nbg[2] = { ff, E }, nbd[2] = { out, E };
    uint32_t tg = hf_gguf_type_of(t[0]->dtype), td = hf_gguf_type_of(t[2]->dtype);
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    gguf_w_tensor(c->w, GG("ffn_gate_exps.weight"), tg, 3, ng, gate, E * ff * in * es);
    gguf_w_tensor(c->w, GG("ffn_gate_exps.bias"), TH_F32, 2, nbg, gb, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_up_exps.weight"), tg, 3, ng, up, E * ff * in * es);
    gguf_w_tensor(c->w, GG("ffn_up_exps.bias"), TH_F32, 2, nbg, ub, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_down_exps.weight"), td, 3, nd, down, E * out * ff * ed);
    gguf_w_tensor(c->w, GG("ffn_down_exps.bias"), TH_F32, 2, nbd, db, E * out * 4);
#undef GG
    return TH_OK;
}

th_status hf_add_oss_layer(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
#define HF(f) (snprintf(h, sizeof h, "%slayers.%d." f, pre, il), h)
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    TRY(hf_add(c, HF("input_layernorm.weight"), GG("attn_norm.weight"), true, X_NONE));
    static const char *const p[4][2] = { { "q_proj", "attn_q" }, { "k_proj", "attn_k" }, { "v_proj", "attn_v" }, { "o_proj", "attn_output" } };
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 2; b++) {
            snprintf(h, sizeof h, "%slayers.%d.self_attn.%s.%s", pre, il, p[i][0], b ? "bias" : "weight");
            snprintf(g, sizeof g, "blk.%d.%s.%s", il, p[i][1], b ? "bias" : "weight");
            TRY(hf_add(c, h, g, true, X_NONE));
        }
    TRY(hf_add(c, HF("self_attn.sinks"), GG("attn_sinks.weight"), true, X_NONE));
    TRY(hf_add(c, HF("post_attention_layernorm.weight"), GG("post_attention_norm.weight"), true, X_NONE));
    TRY(hf_add(c, HF("mlp.router.weight"), GG("ffn_gate_inp.weight"), true, X_NONE));
    TRY(hf_add(c, HF("mlp.router.bias"), GG("ffn_gate_inp.bias"), true, X_NONE));
#undef HF
#undef GG
    return add_oss_experts(c, pre, il);
}

/* One DeepSeek layer: MLA attention (q direct or through q_a/q_b), dense or MoE FFN. */
th_status hf_add_deepseek_layer(hf_conv *c, const char *pre, int il) {
    char h[256], g[128], fmt[256];
#define HF(f) (snprintf(h, sizeof h, "%slayers.%d." f, pre, il), h)
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    TRY(hf_add(c, HF("input_layernorm.weight"), GG("attn_norm.weight"), true, X_NONE));
    if (c->q_lora > 0) {
        TRY(hf_add(c, HF("self_attn.q_a_proj.weight"), GG("attn_q_a.weight"), true, X_NONE));
        TRY(hf_add(c, HF("self_attn.q_a_layernorm.weight"), GG("attn_q_a_norm.weight"), true, X_NONE));
        TRY(hf_add(c, HF("self_attn.q_b_proj.weight"), GG("attn_q_b.weight"), true, X_NONE));
    } else {
        TRY(hf_add(c, HF("self_attn.q_proj.weight"), GG("attn_q.weight"), true, X_NONE));
    }
    TRY(hf_add(c, HF("self_attn.kv_a_proj_with_mqa.weight"), GG("attn_kv_a_mqa.weight"), true, X_NONE));
    TRY(hf_add(c, HF("self_attn.kv_a_layernorm.weight"), GG("attn_kv_a_norm.weight"), true, X_NONE));
    TRY(hf_add(c, HF("self_attn.kv_b_proj.weight"), GG("attn_kv_b.weight"), true, X_NONE));
    TRY(hf_add(c, HF("self_attn.o_proj.weight"), GG("attn_output.weight"), true, X_NONE));
    TRY(hf_add(c, HF("post_attention_layernorm.weight"), GG("ffn_norm.weight"), true, X_NONE));
    if (il < c->n_dense) {
        TRY(hf_add(c, HF("mlp.gate_proj.weight"), GG("ffn_gate.weight"), true, X_NONE));
        TRY(hf_add(c, HF("mlp.up_proj.weight"), GG("ffn_up.weight"), true, X_NONE));
        TRY(hf_add(c, HF("mlp.down_proj.weight"), GG("ffn_down.weight"), true, X_NONE));
        return TH_OK;
    }
    TRY(hf_add(c, HF("mlp.gate.weight"), GG("ffn_gate_inp.weight"), true, X_NONE));
    TRY(hf_add(c, HF("mlp.gate.e_score_correction_bias"), GG("exp_probs_b.bias"), !strcmp(c->family, "deepseek_v3"), X_NONE));
    static const char *const part[3][2] = { { "gate_proj", "ffn_gate" }, { "up_proj", "ffn_up" }, { "down_proj", "ffn_down" } };
    for (int p = 0; p < 3; p++) {
        snprintf(fmt, sizeof fmt, "%slayers.%%d.mlp.experts.%%d.%s.weight", pre, part[p][0]);
        snprintf(g, sizeof g, "blk.%d.%s_exps.weight", il, part[p][1]);
        TRY(hf_add_experts(c, il, fmt, g));
        snprintf(h, sizeof h, "%slayers.%d.mlp.shared_experts.%s.weight", pre, il, part[p][0]);
        snprintf(g, sizeof g, "blk.%d.%s_shexp.weight", il, part[p][1]);
        TRY(hf_add(c, h, g, true, X_NONE));
    }
#undef HF
#undef GG
    return TH_OK;
}

