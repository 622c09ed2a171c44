/* arch.h — architecture descriptors. One file per family (src/arch/<family>.c)
 * exports a th_arch; registry.c lists them (registering is one line). A
 * descriptor reads its hyper-parameters and weights into the model, using the
 * shared decoder loader (decoder.c) for everything a standard block has, and
 * then sets its per-layer options (windows, rope bases, scales). */
#ifndef TH_ARCH_H
#define TH_ARCH_H

#include "model.h"

typedef struct th_arch {
    const char *name;                 /* general.architecture value */
    th_status (*load)(th_model *m);   /* fill m->hp and weights (m->file is set) */
    /* Appends "key=value" notes on distinctive options to buf (inspect). */
    void (*describe)(const th_model *m, char *buf, size_t cap);
} th_arch;

const th_arch *th_arch_find(const char *name);
/* "llama, qwen2, ..." */
const char *th_arch_names(void);

/* Options of the standard decoder block that a family turns on. */
typedef struct th_decoder_opts {
    int32_t rope_type;                /* TH_ROPE_NORM / TH_ROPE_NEOX */
    bool qkv_bias;                    /* require attn_{q,k,v}.bias */
    bool tied_output_ok;              /* output.weight may be absent (use token_embd) */
    bool fused_qkv;                   /* attn_qkv [q; k; v] instead of attn_q/k/v (phi3) */
    bool fused_gate_up;               /* ffn_up is [gate; up], no ffn_gate (phi3) */
    bool qk_norm;                     /* require attn_q_norm / attn_k_norm */
    bool post_norms;                  /* require post_attention_norm / post_ffw_norm (gemma) */
    bool moe_ok;                      /* expert_count > 0 allowed: MoE FFN (router + experts) */
    bool attn_sinks;                  /* require attn_sinks (gpt-oss) */
    const char *ffn_norm_name;        /* default "ffn_norm" (gpt-oss: "post_attention_norm") */
    /* Non-NULL: loads layer il's attention weights instead of the standard q/k/v/o (MLA). */
    th_status (*load_attn)(th_model *m, int il);
    bool q_gated;                     /* attn_q is [E, H·2D], per head [q; gate] (qwen35, qwen3next) */
    /* Non-NULL: layer il is recurrent when is_recurrent says so, and load_recurrent
     * loads its mixer instead of the attention (hybrid models, arch/qwen35.c) */
    bool (*is_recurrent)(const th_model *m, int il);
    th_status (*load_recurrent)(th_model *m, int il);
    int32_t n_tail_skip;              /* the last block_count layers not loaded or run (MTP / NextN heads) */
} th_decoder_opts;

/* Read the standard keys ("<arch>.block_count", ...) and tensors of a
 * llama-style decoder into m. */
th_status th_decoder_load(th_model *m, const th_decoder_opts *o);
/* Sliding window from "<arch>.attention.sliding_window" (0 when absent); every
 * layer for which is_local(il) gets it. */
int32_t th_decoder_window(th_model *m);
/* Appends " key" or " key=value" notes shared by families to buf. */
void th_describe_common(const th_model *m, char *buf, size_t cap);

extern const th_arch th_arch_llama, th_arch_qwen2, th_arch_qwen3, th_arch_qwen3moe, th_arch_gemma2,
    th_arch_gemma3, th_arch_phi3, th_arch_olmoe, th_arch_deepseek2, th_arch_gpt_oss;
extern const th_arch th_arch_qwen35, th_arch_qwen35moe, th_arch_qwen3next;
extern const th_arch th_arch_bitnet;

#endif
