/* forward.h — internals of the CPU forward pass shared by model.c (the generic
 * decoder block and the context), attention.c, moe.c (routed experts) and mla.c (latent
 * attention): the context struct, the threaded matmul and small row helpers.
 * Not part of the public API. */
#ifndef TH_FORWARD_H
#define TH_FORWARD_H

#include "model.h"
#include "core/threadpool.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "gpu.h"
#include "kv.h"

struct th_context {
    th_model *model;
    th_context_params p;
    const th_kernels *k;
    th_pool *pool;
    th_kv kv;
    /* scratch for n_batch tokens */
    float *x, *h, *q, *kc, *vc, *att, *tmp, *tmp2, *ff_g, *ff_u;
    int64_t q_w, k_w, v_w, att_w, ff_w;     /* row widths */
    float *wide;                            /* fused QKV output / MLA latents: n_batch × wide_w */
    int64_t wide_w;
    uint8_t *actq;                          /* quantized activation rows */
    size_t actq_cap;
    /* attention.c */
    float *attn_buf;                        /* per-thread tiles and online-softmax state */
    struct th_attn_unit *attn_units;        /* n_batch × n_head work units */
    int32_t *attn_tok;                      /* batch indices grouped by sequence */
    int32_t *attn_seq0;                     /* n_seq_max + 1 group offsets */
    th_rope_params *rope;                   /* per layer */
    /* mixture of experts */
    float *moe_logits;                      /* n_batch × n_expert */
    float *moe_score;                       /* n_expert selection scores (routing scratch) */
    int32_t *moe_sel;                       /* n_batch × k expert ids */
    float *moe_w;                           /* n_batch × k weights */
    int32_t *moe_rows;                      /* n_batch × k slot ids grouped by expert */
    int32_t *moe_start;                     /* n_expert + 1 group offsets, n_expert cursors */
    float *moe_x;                           /* n_batch × E gathered inputs */
    float *moe_y;                           /* n_batch × k × E weighted expert outputs */
    float *logits;                          /* host rows (not kept on the GPU with logits_argmax_only) */
    size_t logits_rows;
    int32_t *argmax;                        /* GPU with logits_argmax_only: the rows' argmax ids */
    int32_t *out_row;                       /* batch index → logits row or -1 */
    int32_t *new_len;                       /* per sequence, during a batch */
    int32_t n_last;                         /* tokens in the last batch */
    int32_t *pos_buf, *seq_buf;             /* filled-in positions / sequences */
    int8_t *want_buf;                       /* default logits flags */
    th_gpu *gpu;                            /* non-NULL: the GPU runs the forward pass */
    int32_t *block_tables;                  /* GPU mode: n_seq × n_blocks */
};

/* y[b][0..rows) = W(matrix `mat` of w) · x[b] for b < nb. */
void th_fwd_matmul(th_context *c, const th_weight *w, int64_t mat, const float *x, int64_t x_stride,
                   int64_t nb, float *y, int64_t y_stride);
/* y[b] += bias for nb rows (no-op when the bias is absent). */
void th_fwd_add_bias(const float *bias, int64_t width, float *y, int64_t stride, int64_t nb);
/* RMSNorm of n rows of `width` (stride = width), weight w (NULL data: none). */
void th_fwd_norm_rows(const th_context *c, float *y, const float *x, const th_weight *w, int64_t n, int64_t width);
/* a = act(g) * u over n values, by the model's act_fn. */
void th_fwd_act(const th_context *c, float *g, const float *u, int64_t n);
/* Dense gated FFN of n rows of `in` (stride E): out = down(act(gate·x) ⊙ up·x),
 * added to out when accumulate. gate == NULL: up is fused [gate; up]. */
void th_fwd_ffn(th_context *c, const th_weight *gate, const th_weight *up, const th_weight *down,
                const float *in, int32_t n, float *out, bool accumulate);

/* attention.c: scratch (at context creation), the batch's K/V into the cache, and
 * c->att = attention of c->q over the cache for n tokens of layer il. */
th_status th_attn_alloc(th_context *c);
void th_attn_free(th_context *c);
void th_attn_store(th_context *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq);
void th_attn_run(th_context *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq);

/* moe.c (out must not be c->tmp2 or an FFN scratch): out[t] = Σ_j w_tj · expert_{e_tj}(in[t]) (+ shared experts) for n rows of in. */
void th_moe_ffn(th_context *c, const th_layer *L, const float *in, int32_t n, float *out);
/* mla.c: q, k, v of n tokens (c->q, c->kc, c->vc, roped) from c->h. */
void th_mla_project(th_context *c, int32_t il, int32_t n, const int32_t *pos);

#endif
