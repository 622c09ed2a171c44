/* model.h — the in-memory model: hyper-parameters and typed weight views into the
 * file map, plus the per-layer options an architecture descriptor sets. The
 * loader (model_load.c) fills it from GGUF through an arch descriptor
 * (src/arch/); the forward pass (block.c and the backends) only reads it. */
#ifndef TH_MODEL_H
#define TH_MODEL_H

#include "core/core.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

/* One routed expert's own copy: an expert of a 3-D expert tensor given a type of its
 * own by a precision config, stored in the file as the 2-D tensor "NAME.E"
 * (docs/precision.md) or re-quantized at load. data NULL: the 3-D tensor's slice. */
typedef struct th_expert_slot {
    const void *data;      /* [ne0, ne1] rows of `type` */
    uint32_t type;
    size_t row_bytes;
    const void *packed;    /* CPU: its 8-row interleaved copy in the model's packed_buf, or NULL */
    void *dev;             /* CUDA: its device copy (struct th_cu_weight), or NULL */
} th_expert_slot;

/* A weight: a 1-D vector or a stack of rows (ne0 = row length, ne1 = rows,
 * ne2 = number of matrices, e.g. experts). data == NULL: absent. */
typedef struct th_weight {
    const void *data;
    uint32_t type;
    int64_t ne0, ne1, ne2;
    size_t row_bytes;
    const char *name;      /* points into the model's name storage */
    /* backends' copies, made on first use and owned by the model */
    const void *packed;    /* CPU: 8-row interleaved copy (cpu/repack.h) in the model's packed_buf, or NULL */
    void *dev;             /* CUDA: the device copy (struct th_cu_weight, src/cuda/gpu_upload.c), or NULL */
    th_expert_slot *experts; /* 3-D expert tensors: ne2 slots, the experts with a type of their own; or NULL */
} th_weight;

/* Expert e's own copy, or NULL when it is the 3-D tensor's slice e. */
static inline const th_expert_slot *th_weight_expert(const th_weight *w, int64_t e) {
    return w->experts && w->experts[e].data ? &w->experts[e] : NULL;
}

enum th_rope_type { TH_ROPE_NORM = 0, TH_ROPE_NEOX = 1 };
/* FFN activations: SILU/GELU gate an up projection (a = act(gate) * up);
 * SWIGLU_OAI is GPT-OSS's clamped form (see th_op_swiglu_oai). */
enum th_act_fn { TH_ACT_SILU = 0, TH_ACT_GELU = 1, TH_ACT_SWIGLU_OAI = 2 };
/* How router logits become expert probabilities. SOFTMAX_SELECTED: top-k on the
 * raw logits, weights = softmax over the k selected logits (GPT-OSS). */
enum th_gating { TH_GATING_SOFTMAX = 0, TH_GATING_SIGMOID = 1, TH_GATING_SOFTMAX_SELECTED = 2 };

/* One decoder layer's weights and options. Shapes are GGUF's [ne0, ne1, ne2]: ne0
 * is the input width (a row), ne1 the output rows, ne2 the experts. Letters:
 * E n_embd, H n_head, Hk n_head_kv, D head_dim, Dv head_dim_v, F n_ff (or the
 * shared experts' width), X n_expert, Fx n_ff_exp; MLA: R kv_lora_rank, Rq
 * q_lora_rank, Dn n_embd_head_nope, Dr n_rot (D = Dn + Dr). Absent: data NULL. */
typedef struct th_layer {
    /* attention */
    th_weight attn_norm;                     /* [E] */
    th_weight wq;                            /* [E, H·D]  (MLA without q LoRA: [E, H·(Dn+Dr)]) */
    th_weight wk;                            /* [E, Hk·D] */
    th_weight wv;                            /* [E, Hk·Dv] */
    th_weight wo;                            /* [H·Dv, E] */
    th_weight bq, bk, bv, bo;                /* [H·D], [Hk·D], [Hk·Dv], [E] (qwen2) */
    th_weight wqkv, bqkv;                    /* [E, H·D + Hk·(D+Dv)] and its bias: q|k|v fused (phi3) */
    th_weight q_norm, k_norm;                /* [D] per head, or [H·D] / [Hk·D] whole width (olmoe) */
    th_weight post_attn_norm;                /* [E] norm of the attention output (gemma2/3) */
    th_weight attn_sinks;                    /* [H] one sink logit per head (gpt-oss) */
    /* multi-head latent attention (deepseek2) */
    th_weight wq_a;                          /* [E, Rq] q LoRA down */
    th_weight q_a_norm;                      /* [Rq] */
    th_weight wq_b;                          /* [Rq, H·(Dn+Dr)] q LoRA up */
    th_weight wkv_a_mqa;                     /* [E, R + Dr] the latent and the shared rope head */
    th_weight kv_a_norm;                     /* [R] */
    th_weight wkv_b;                         /* [R, H·(Dn+Dv)] per head [k_nope; v] */
    /* dense feed-forward */
    th_weight ffn_norm;                      /* [E] */
    th_weight w_gate, w_up;                  /* [E, F] each; w_gate absent: w_up is [E, 2F] = [gate; up] (phi3) */
    th_weight w_down;                        /* [F, E] */
    th_weight post_ffn_norm;                 /* [E] (gemma2/3) */
    /* mixture of experts */
    th_weight router;                        /* [E, X] */
    th_weight router_b;                      /* [X] (gpt-oss) */
    th_weight exp_probs_b;                   /* [X] selection-only bias (DeepSeek-V3) */
    th_weight gate_exps, up_exps;            /* [E, Fx, X] */
    th_weight down_exps;                     /* [Fx, E, X] */
    th_weight gate_exps_b, up_exps_b;        /* [Fx, X] (gpt-oss) */
    th_weight down_exps_b;                   /* [E, X] (gpt-oss) */
    th_weight gate_shexp, up_shexp;          /* [E, F] shared experts: a dense FFN added to the routed sum */
    th_weight down_shexp;                    /* [F, E] */
    /* gated DeltaNet (qwen35 / qwen3next recurrent layers; docs/hybrid.md). Letters:
     * Dk ssm head width (state_size; value heads as wide), Nk k heads (group_count),
     * Nv v heads (time_step_rank), Kd = Nk·Dk, Vd = Nv·Dk, Cd = 2·Kd + Vd, C conv kernel */
    th_weight ssm_in;                        /* [E, 2·Kd + 2·Vd] per k head [q; k; v·Nv/Nk; z·Nv/Nk] (qwen3next) */
    th_weight ssm_qkv;                       /* [E, Cd] [q; k; v] (qwen35: attn_qkv) */
    th_weight ssm_gate;                      /* [E, Vd] z, the output gate (qwen35: attn_gate) */
    th_weight ssm_ba;                        /* [E, 2·Nv] per k head [beta·Nv/Nk; alpha·Nv/Nk] (qwen3next) */
    th_weight ssm_beta, ssm_alpha;           /* [E, Nv] each (qwen35) */
    th_weight ssm_conv1d;                    /* [C, Cd] causal conv taps, oldest first */
    th_weight ssm_dt;                        /* [Nv] bias of alpha before the softplus */
    th_weight ssm_a;                         /* [Nv] A = -exp(A_log): gate g = softplus(alpha + dt)·A */
    th_weight ssm_norm;                      /* [Dk] RMSNorm of each value head's output */
    th_weight ssm_out;                       /* [Vd, E] */
    th_weight gate_inp_shexp;                /* [E] sigmoid gate of the shared experts (qwen3next) */
    /* bitnet (BitNet b1.58, llama.cpp / ik_llama.cpp "bitnet"): RMSNorms inside the sub-layers */
    th_weight attn_sub_norm;                 /* [H·Dv] of the attention output before wo */
    th_weight ffn_sub_norm;                  /* [F] of silu(gate) ⊙ up before down */
    bool recurrent;                          /* a DeltaNet layer (no attention, no KV) */
    bool q_gated;                            /* wq is [E, H·2D], per head [q; gate]: ATT ·= sigmoid(gate) */
    /* per-layer options */
    int32_t window;                          /* sliding window (0 = full causal) */
    float rope_base;
    float rope_freq_scale;                   /* per layer (gemma3: local layers are unscaled) */
} th_layer;

typedef struct th_hparams {
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv;
    int32_t head_dim;                        /* key/query head width */
    int32_t head_dim_v;                      /* value head width */
    int32_t n_ff;                            /* dense FFN width */
    int32_t n_ctx_train;
    int32_t n_rot;                           /* rotated dims per head */
    int32_t rope_type;
    float rope_base, rope_freq_scale;
    /* YaRN (ext_factor 0 = off); attn_factor multiplies cos/sin; n_ctx_orig = original context */
    float rope_ext_factor, rope_attn_factor, rope_beta_fast, rope_beta_slow;
    int32_t rope_n_ctx_orig;
    float norm_eps;
    float embd_scale;                        /* multiply embeddings (gemma: sqrt(E)); 1 = off */
    float attn_scale;                        /* kq scale */
    float attn_softcap, final_softcap;       /* 0 = off */
    int32_t act_fn;
    int32_t n_expert, n_expert_used;
    int32_t n_ff_exp;                        /* width of one routed expert */
    int32_t n_expert_shared;
    int32_t n_layer_dense_lead;              /* the first layers have a dense FFN (deepseek2) */
    int32_t gating;                          /* enum th_gating */
    int32_t n_expert_groups, n_expert_groups_used; /* group-limited routing (DeepSeek-V3); 0 = off */
    bool expert_weights_norm;                /* renormalise the top-k weights to sum 1 */
    float expert_weights_scale;              /* multiply the weights (1 = off) */
    int32_t q_lora_rank, kv_lora_rank;       /* MLA (deepseek2); 0 = no q LoRA / no MLA */
    int32_t n_embd_head_nope;                /* MLA: head_dim - n_rot */
    /* gated DeltaNet (see th_layer): 0 when the model has no recurrent layer */
    int32_t ssm_d_conv, ssm_d_state, ssm_n_group, ssm_dt_rank;
    int32_t ssm_repeat;                      /* v head h reads k head h / (Nv/Nk) (0, qwen3next) or h % Nk (1, qwen35) */
    int32_t n_recurrent;                     /* recurrent layers */
} th_hparams;

struct th_model {
    gguf_file *file;
    const struct th_arch *arch;
    th_hparams hp;
    th_weight tok_embd, output_norm, output, rope_freqs;
    th_weight rope_long, rope_short;         /* LongRoPE factors (phi3); the context picks one */
    th_layer *layers;
    th_vocab *vocab;
    char *names;                             /* storage for weight names */
    size_t names_len, names_cap;
    char desc[128];
    uint64_t n_params, n_bytes;
    char **meta_cache;                       /* NUL-terminated copies returned by th_model_meta_str */
    size_t meta_cache_n;
    void *packed_buf;                        /* one allocation: the repacked weights (cpu/repack_model.c), or NULL */
    bool repacked;                           /* repacking was done (or found nothing to do) */
    bool no_repack, thp, no_amx;             /* th_model_params' CPU layout switches, from the load */
    void *dev_store;                         /* the CUDA backend's device weights (th_cu_store), or NULL */
    void (*dev_free)(struct th_model *m);    /* frees dev_store (set by the backend that made it) */
    th_status (*dev_refresh)(struct th_model *m);  /* re-makes dev_store from the weights after a live swap (same backend), or NULL */
    struct th_prec_state *prec;              /* precision (src/precision/): expert slots, re-quantized
                                              * weights, the live assignment; NULL if none */
};

/* The rope frequency factors a context of n_ctx positions uses (data NULL: none).
 * LongRoPE (phi3): the long factors once n_ctx exceeds the original training
 * context, else the short ones. */
static inline const th_weight *th_model_rope_factors(const th_model *m, uint32_t n_ctx) {
    if (m->rope_long.data && m->rope_short.data)
        return n_ctx > (uint32_t)m->hp.rope_n_ctx_orig ? &m->rope_long : &m->rope_short;
    return &m->rope_freqs;
}

/* ---- loader helpers for arch descriptors (model_load.c) ---- */

/* "<arch>.<suffix>" metadata; the required variants set an error naming the key. */
th_status th_meta_u32(th_model *m, const char *suffix, uint32_t *out, bool required);
th_status th_meta_f32(th_model *m, const char *suffix, float *out, bool required);
/* Find tensor `name` (printf-style with layer index), check its type is supported and
 * its shape is exactly [ne0, ne1, ne2] (pass 1 for unused dims; 0 = any). Absent
 * and !required: w->data = NULL and TH_OK. */
th_status th_weight_get(th_model *m, th_weight *w, bool required, int64_t ne0, int64_t ne1,
                        int64_t ne2, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

#endif
