/* forward.h — the CPU backend's state (struct th_cpu, hung off th_context.bd)
 * and the internals its files share: backend.c (the op table), matmul.c (the
 * threaded matmul and the dense FFN), attention.c, moe.c (routed experts) and
 * mla.c (latent attention). Not part of the public API. */
#ifndef TH_CPU_FORWARD_H
#define TH_CPU_FORWARD_H

#include "model.h"
#include "backend.h"
#include "kv.h"
#include "core/threadpool.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"

typedef struct th_cpu {
    const th_model *model;
    th_context_params p;
    const th_kernels *k;
    th_pool *pool;
    th_kv *kv;                              /* the context's cache (data on the host) */
    const th_observer *obs;                 /* th_context_set_observer's, or NULL */
    /* scratch for n_batch tokens: the block's buffers X, H, T, ATT are x, h, tmp, att */
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
    /* hybrid models (deltanet.c) */
    float *qgate;                           /* n_batch × q_w: the gate half of a [q; gate] projection */
    float *dn_shx;                          /* n_batch × E: gated shared experts' output, or NULL */
    int32_t *dn_slot;                       /* [n_layer] recurrent-state slot of each layer, -1 none */
    float *dn_in, *dn_u, *dn_z, *dn_ba;     /* fused projections, conv input/output, z, beta|decay */
    int64_t dn_in_w;
    float *dn_work;                         /* the chunked delta rule's scratch: pool threads × dn_work_n */
    size_t dn_work_n;
} th_cpu;

/* ---- matmul.c ---- */
/* y[b][0..rows) = W(matrix `mat` of w) · x[b] for b < nb. */
void th_fwd_matmul(th_cpu *c, const th_weight *w, int64_t mat, const float *x, int64_t x_stride,
                   int64_t nb, float *y, int64_t y_stride);
/* The same, the observer told `expert` (a routed expert's id, even when w is a one-matrix
 * view of its own copy; -1: none). */
void th_fwd_matmul_as(th_cpu *c, const th_weight *w, int64_t mat, int32_t expert, const float *x, int64_t x_stride,
                      int64_t nb, float *y, int64_t y_stride);
/* y_i = W_i · x for up to three weights; one pass over the threads when they
 * share the input width and activation type, else one matmul each. */
void th_fwd_matmul_multi(th_cpu *c, const th_weight *const ws[], float *const ys[], const int64_t y_strides[],
                         int count, const float *x, int64_t x_stride, int64_t nb);
/* y[b] += bias for nb rows (no-op when the bias is absent). */
void th_fwd_add_bias(const float *bias, int64_t width, float *y, int64_t stride, int64_t nb);
/* RMSNorm of n rows of `width` (stride = width), weight w (NULL data: none). */
void th_fwd_norm_rows(const th_cpu *c, float *y, const float *x, const th_weight *w, int64_t n, int64_t width);
/* a = act(g) * u over n values, by the model's act_fn. */
void th_fwd_act(const th_cpu *c, float *g, const float *u, int64_t n);
/* Dense gated FFN of n rows of `in` (stride E): out = down(act(gate·x) ⊙ up·x),
 * added to out when accumulate. gate == NULL: up is fused [gate; up]. */
void th_fwd_ffn(th_cpu *c, const th_weight *gate, const th_weight *up, const th_weight *down,
                const float *in, int32_t n, float *out, bool accumulate);

/* ---- attention.c: scratch (at context creation), the batch's K/V into the cache,
 * and c->att = attention of c->q over the cache for n tokens of layer il ---- */
th_status th_attn_alloc(th_cpu *c);
void th_attn_free(th_cpu *c);
void th_attn_store(th_cpu *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq);
void th_attn_run(th_cpu *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq);

/* ---- moe.c (out must not be c->tmp2 or an FFN scratch): out[t] = Σ_j w_tj ·
 * expert_{e_tj}(in[t]) for n rows of in (routed experts only) ---- */
void th_moe_ffn(th_cpu *c, const th_layer *L, const float *in, int32_t n, float *out);

/* ---- deltanet.c: scratch and the hybrid ops (backend.h's recurrent, att_gate, shexp_gated) ---- */
th_status th_dn_alloc(th_cpu *c);
void th_dn_free(th_cpu *c);
th_status th_dn_recurrent(th_context *ctx, const th_step *st, int32_t il);
th_status th_dn_att_gate(th_context *ctx, const th_step *st, int32_t il);
th_status th_dn_shexp_gated(th_context *ctx, const th_step *st, int32_t il);

/* ---- mla.c: q, k, v of n tokens (c->q, c->kc, c->vc; not roped) from c->h ---- */
void th_mla_project(th_cpu *c, int32_t il, int32_t n);

/* ---- repack.c's model-wide step (backend.c): the packed copies of the matmul weights ---- */
th_status th_cpu_repack_model(th_model *m, const th_kernels *k);
/* One matrix stack's packed copy (aligned_alloc'd, free with free()), or NULL when it
 * has no packed layout at k's level: for weights swapped in after the model was
 * repacked (src/precision/apply.c, which skips it for a model loaded with no_repack). */
void *th_cpu_repack_copy(const th_kernels *k, uint32_t type, const void *data, int64_t ne0, int64_t ne1, int64_t n_mat,
                         size_t row_bytes);

#endif
