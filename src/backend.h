/* backend.h — the op table a backend fills, and what its ops see. The decoder
 * block (block.c) is written once, as a sequence of these ops over the model's
 * th_layer weights and the architecture's per-layer options; context.c checks a
 * batch, plans its outputs and calls th_block_forward; a backend (src/cpu/,
 * src/cuda/) implements each op on its own memory and keeps its own copies of
 * the weights hung off th_weight (CPU: w->packed, CUDA: w->dev).
 *
 * Ops name activation rows by th_buf (each backend keeps n_batch rows of each):
 *   X    the residual stream, n_embd wide
 *   H    a normalised copy of X, n_embd wide (the input of a sub-layer)
 *   T    a sub-layer's output before it joins X, n_embd wide
 *   ATT  the attention output, n_head · head_dim_v wide
 * and Q, K, V rows that only qkv/mla_qkv (write), rope_kv and attention (read)
 * touch, so they are the backend's business.
 *
 * Fusion. Some ops are whole spans of the block by definition, so a backend may
 * fuse inside them: qkv (three projections and their biases), rope_kv (q/k
 * norms, rope, the K/V store), ffn (gate, up, activation, down), moe (router,
 * routing, experts, weighted sum), logits (final norm, output head, softcap,
 * argmax). Across ops a backend fuses only through what the block tells it:
 * matmul's `acc` (write into the residual directly) and the `next` of norm and
 * attention (the matrix that reads the result, so the op can also make that
 * matrix's activation format; a hint only: a backend must stay correct when it
 * is NULL or wrong). A backend may record the op sequence of a batch shape
 * once and replay it (CUDA graphs): begin() then says so and the block skips
 * the ops. */
#ifndef TH_BACKEND_H
#define TH_BACKEND_H

#include "model.h"

typedef enum th_buf { TH_BUF_X = 0, TH_BUF_H, TH_BUF_T, TH_BUF_ATT } th_buf;

/* One forward pass as the ops see it: a checked ragged batch and its outputs. */
typedef struct th_step {
    int32_t n;                  /* tokens */
    const th_token *tok;        /* n token ids, inside the vocabulary */
    const int32_t *pos, *seq;   /* n positions and sequence ids (KV already reserved) */
    const int32_t *out_row;     /* n: the token's logits row, or -1 */
    int32_t n_out;              /* rows that want logits */
    float *logits;              /* host: n_out × n_vocab rows to fill, or NULL */
    int32_t *argmax;            /* host: n_out argmax ids to fill (th_greedy_argmax's rule), or NULL */
} th_step;

typedef struct th_backend {
    const char *name;
    bool kv_on_host;            /* the KV blocks' data lives in th_kv (else only the bookkeeping) */
    bool device_argmax;         /* with logits_argmax_only it fills th_step.argmax itself */
    /* whether it can run here (a device present); desc: a one-line description */
    th_status (*probe)(char *desc, size_t cap);
    /* set-up and tear-down of the backend's state in c->bd (scratch, weight copies);
     * free also takes a context whose init failed half-way, or never ran (c->bd NULL) */
    th_status (*init)(th_context *c);
    void (*free)(th_context *c);
    /* a step: begin (*replay: a recorded op sequence ran instead, skip the ops),
     * the ops, then end (status: the ops' result; outputs reach the host) */
    th_status (*begin)(th_context *c, const th_step *s, bool *replay);
    th_status (*end)(th_context *c, const th_step *s, th_status status);
    /* X = embed(tokens) · embd_scale */
    th_status (*embed)(th_context *c, const th_step *s);
    /* dst = rmsnorm(src) · w; next: the first matrix that reads dst (a hint), or NULL */
    th_status (*norm)(th_context *c, const th_step *s, th_buf dst, th_buf src, const th_weight *w,
                      const th_weight *next);
    /* Q, K, V of layer il from H: Wq, Wk, Wv (+ biases), or one fused Wqkv (+ bias) */
    th_status (*qkv)(th_context *c, const th_step *s, int32_t il);
    /* Q, K, V of layer il from H by latent attention (mla.c's formulas), not yet roped */
    th_status (*mla_qkv)(th_context *c, const th_step *s, int32_t il);
    /* q/k norms (per head or whole width), rope of q and k, K and V into the cache */
    th_status (*rope_kv)(th_context *c, const th_step *s, int32_t il);
    /* ATT = softmax(q·Kᵀ·scale [softcap, window, sinks]) · V over the cache; next: the
     * matrix that reads ATT (a hint, as for norm) */
    th_status (*attention)(th_context *c, const th_step *s, int32_t il, const th_weight *next);
    /* dst = src·Wᵀ (+ b); acc: dst += that instead */
    th_status (*matmul)(th_context *c, const th_step *s, th_buf dst, const th_weight *w, const th_weight *b,
                        th_buf src, bool acc);
    /* dst += src */
    th_status (*add)(th_context *c, const th_step *s, th_buf dst, th_buf src);
    /* dst (+)= down(rmsnorm(silu(H·gate) ⊙ H·up)·ffn_sub_norm) of layer il (bitnet: its
     * attention's sub-norm is a norm op on ATT); NULL: such models are refused */
    th_status (*ffn_sub)(th_context *c, const th_step *s, int32_t il, th_buf dst, bool acc);
    /* dst (+)= down(act(H·gate) ⊙ H·up); gate NULL: up is fused [gate; up] */
    th_status (*ffn)(th_context *c, const th_step *s, const th_weight *gate, const th_weight *up,
                     const th_weight *down, th_buf dst, bool acc);
    /* ATT = the gated DeltaNet mixer of recurrent layer il over H (qwen35 / qwen3next):
     * projections, causal conv with the sequences' rolling windows, the gated delta
     * rule with each sequence's state (context's th_rstate), per-head RMSNorm · silu(z);
     * snapshots of the state for the last rs_snapshots positions of each sequence.
     * NULL: the backend cannot run hybrid models (context creation refuses them) */
    th_status (*recurrent)(th_context *c, const th_step *s, int32_t il);
    /* ATT ·= sigmoid(G), G the gate half of layer il's [q; gate] projection (th_layer.q_gated) */
    th_status (*att_gate)(th_context *c, const th_step *s, int32_t il);
    /* T = Σ_j w_j · expert_{e_j}(H) over the router's top k (routed experts only) */
    th_status (*moe)(th_context *c, const th_step *s, int32_t il);
    /* T += sigmoid(H·w) ⊙ shared_ffn(H): layer il's shared experts behind their gate
     * vector w (gate_inp_shexp, qwen3next); NULL: such models are refused */
    th_status (*shexp_gated)(th_context *c, const th_step *s, int32_t il);
    /* for each token with an output row: rmsnorm(X) · Wout [final softcap] → s->logits / s->argmax */
    th_status (*logits)(th_context *c, const th_step *s);
    /* the observer of the context's forward passes (th_context_set_observer), or NULL;
     * NULL entry: the backend cannot report what an observer wants */
    th_status (*set_observer)(th_context *c, const th_observer *obs);
    /* copy-on-write of one KV block's data (backends whose KV is not on the host) */
    void (*copy_block)(th_context *c, int32_t dst, int32_t src);
    /* the residual stream X of the step's n tokens to / from host rows (n × n_embd
     * floats): a mixed placement's hand-over (place.h) and a context's layer resume
     * (th_context_set_layer_io); NULL: the backend cannot share a step with another */
    th_status (*get_x)(th_context *c, const th_step *s, float *host);
    th_status (*put_x)(th_context *c, const th_step *s, const float *host);
    /* layer il begins (il = n_layer: the output head); NULL: nothing to do. The
     * placement backend switches to the layer's backend there, handing X over */
    th_status (*layer)(th_context *c, const th_step *s, int32_t il);
    /* backends that keep the recurrent state (th_rstate) in their own memory: after
     * the host bookkeeping of a truncate, restore sequence seq from snapshot slot
     * `slot` (its index in the sequence's ring) or zero it (slot < 0); after a
     * sequence copy, copy dst := src (state and snapshots). NULL: the host arrays
     * are the state (the CPU) */
    th_status (*rs_restore)(th_context *c, int32_t seq, int32_t slot);
    th_status (*rs_copy)(th_context *c, int32_t dst, int32_t src);
    /* lazy logits (device_argmax backends; NULL: none): a step with th_step.logits NULL,
     * argmax set and at most TH_LAZY_LOGITS_MAX rows keeps its n_out logits rows on the
     * device until the next step; this copies them to the host rows dst */
    th_status (*fetch_logits)(th_context *c, int32_t n_out, float *dst);
} th_backend;

/* The most output rows a step may leave on the device for fetch_logits. */
#define TH_LAZY_LOGITS_MAX 64

extern const th_backend th_backend_cpu;
/* The CUDA backend (src/cuda/), or NULL in a build without it. */
const th_backend *th_backend_cuda(void);

/* block.c: the forward pass of one step through the ops of c's backend. */
th_status th_block_forward(th_context *c, const th_step *s);

#endif
