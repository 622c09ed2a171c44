/* gpu_internal.h — the CUDA backend's host-side state: the device copies of a
 * model's weights (one th_cu_weight per th_weight, hung off th_weight.dev, owned
 * by the model: th_cu_store), and a context's state (struct th_gpu, hung off
 * th_context.bd: stream, cuBLAS, the KV pool, scratch, CUDA graphs). Shared by
 * gpu.c (the op table, set-up, graphs), gpu_upload.c (weights), gpu_moe.c
 * (mixture of experts) and gpu_mla.c (latent attention). */
#ifndef TH_CUDA_GPU_INTERNAL_H
#define TH_CUDA_GPU_INTERNAL_H

#include "context.h"
#include "cuda/kernels.h"
#include "cuda/mla.h"

/* Device allocations freed together. */
typedef struct th_cu_allocs {
    void **p;
    size_t n, cap;
    size_t bytes;
} th_cu_allocs;

/* A weight's device copy. Matrices: `mat` in the layout the kernels read (the
 * experts of a 3-D weight stacked by rows). Vectors (norms, biases, sinks, rope
 * factors): `vec`, fp32. Projections that read the same input (q|k|v, gate|up)
 * are uploaded as one matrix when their types match: the first weight's `mat`
 * then holds all `joint` weights' rows (its rows = their sum) and the others
 * have joint = 0 (their rows live in the first one's matrix). */
/* A 3-D expert weight whose experts do not all have one type (per-expert types,
 * docs/precision.md; th_weight.experts): n parts, each a matrix of some of the
 * experts stacked by rows, one type a part. Part 0 is the 3-D tensor as uploaded
 * (its own copy of every expert, used for the experts without a type of their
 * own); part i > 0 holds the experts of one other type (or the same type but their
 * own bytes), in increasing expert order. slot (device) / hslot (host), n_expert
 * ids each: the block of expert e in this part's matrix, or −1 when another part
 * holds it. Every expert is in exactly one part. */
#define TH_CU_MAX_PARTS 16
typedef struct th_cu_part {
    th_cu_mat mat;
    const int32_t *slot;
    int32_t *hslot;
} th_cu_part;
typedef struct th_cu_parts {
    int32_t n;
    th_cu_part p[TH_CU_MAX_PARTS];
} th_cu_parts;

typedef struct th_cu_weight {
    th_cu_mat mat;
    th_cu_parts *parts;         /* per-expert types: the parts (host memory, the store's), or NULL */
    const float *vec;
    int32_t joint;              /* 1: alone; n > 1: mat holds this and the next n−1 group members; 0: in the leader's */
    bool group_q8;              /* a GEMV of this weight's group reads q8 activations (set on the group's first weight) */
} th_cu_weight;

/* The model's device weights (th_model.dev_store): the records th_weight.dev points at. */
typedef struct th_cu_store {
    th_cu_weight *recs;
    size_t n_recs;
    th_cu_allocs mem;
    th_cu_parts **parts;        /* the per-expert parts records (host), freed with the store */
    uint64_t gen;               /* this store's number (each upload a new one): contexts drop their graphs on a change */
    size_t n_parts, cap_parts;
    int device;
    /* upload progress */
    bool verbose;
    size_t total, done;
    int pct;
    bool *layer_done;           /* [n_layer] the layers uploaded (a mixed placement uploads only its own) */
    bool embd_done, head_done;  /* the token embedding, the output head */
} th_cu_store;

static inline const th_cu_weight *th_cu_w(const th_weight *w) { return (const th_cu_weight *)w->dev; }

/* The router and the experts of one MoE layer as the kernels see them (built
 * from the layer's th_weight device copies for each call; gpu_moe.c). */
typedef struct th_cu_moe {
    int32_t n_expert, k;
    int64_t F;                      /* width of one expert */
    const th_cu_mat *router, *gate, *up, *down;   /* experts stacked by rows */
    const th_cu_parts *gate_p, *up_p, *down_p;    /* per-expert types: the parts, or NULL (th_cu_weight) */
    const float *router_b;          /* n_expert or NULL */
    const float *gate_b, *up_b, *down_b;  /* expert biases stacked like the rows, or NULL */
    th_cu_router route;
} th_cu_moe;

#define TH_CU_MAX_GRAPHS 16

typedef struct th_gpu th_gpu;
typedef struct th_cu_hyb th_cu_hyb;   /* the hybrid models' state and scratch (gpu_deltanet.c) */

struct th_gpu {
    th_context *c;
    const th_model *m;
    th_cu_tuning tune;          /* the settings this context was made with */
    bool invariant;             /* th_context_params.batch_invariant */
    int device, sm_count;
    cudaStream_t st;
    void *cublas;
    th_cu_allocs mem;           /* this context's device memory (KV pool, scratch) */
    const float *rope_freqs;    /* the context's rope factors (device), or NULL */
    /* shapes */
    int64_t E, q_w, k_w, v_w, qkv_w, att_w, F, gu_w, V, max_k;
    uint32_t n_batch;
    /* KV cache */
    void *kv_pool;
    size_t block_bytes;
    int32_t *kv_slot;           /* mixed placement: [n_layer] model layer → its KV layer in the pool, -1
                                 * for another backend's layer (host, owned); NULL: every layer, in order */
    int32_t block, n_blocks, n_seq;
    bool kv_f16;
    /* scratch (device) */
    float *x, *h, *qkv, *att, *tmp, *tmp2, *gu, *ff, *hout, *logits, *partial;
    int32_t *counter;
    size_t partial_cap;
    int32_t bi_split, bi_chunk;   /* batch-invariant attention plan (bi_split 0: the plan follows each step) */
    th_cu_q8 q8;
    int q8_of;                  /* the th_buf whose q8 form g->q8 holds, or -1 */
    void *wbuf, *xbuf;
    size_t wbuf_bytes;
    /* mixture-of-experts scratch (gpu_moe.c), sized for n_batch tokens × the widest MoE layer */
    float *moe_logits, *moe_w, *moe_gu, *moe_act, *moe_y;
    int32_t *moe_sel, *moe_order, *moe_seg;  /* the pairs grouped by expert and its segments (th_cu_moe_walk) */
    th_cu_q8 moe_q8;
    /* the grouped (GEMM) MoE path: the pairs' segment order on the device (list |
     * row, n_batch·k each), the 16-bit copy of the GEMM inputs, and pinned host
     * staging (sel | list | row, then four n_expert arrays: the counting sort) */
    int32_t *moe_idx, *h_moe;
    void *moe_xh;
    /* latent attention scratch (gpu_mla.c), n_batch tokens: Wkv_a rows, latents, Wkv_b rows, q LoRA rows */
    float *mla_kva, *mla_lat, *mla_kvb, *mla_qa;
    th_cu_hyb *hyb;             /* hybrid models (gpu_deltanet.c): recurrent state, gated attention scratch; or NULL */
    /* per-batch metadata: pinned host staging and its device copy, one block:
     * tokens | pos | seq | gather | block table (n_seq × n_blocks) */
    int32_t *h_meta, *d_meta;
    size_t meta_count;
    float *h_logits;            /* pinned: graph_max × V, made on first use */
    int32_t *d_argmax, *h_argmax; /* the output rows' argmax ids: device and pinned, n_batch */
    int graph_mode;             /* what the cached graphs copy back: bit 0 logits, bit 1 argmax ids */
    int graph_max;              /* most outputs a graph-mode step may have */
    uint64_t weights_gen;       /* the store (th_cu_store.gen) the graphs and rope_freqs were made from */
    struct { int n, n_out; cudaGraphExec_t exec; } graphs[TH_CU_MAX_GRAPHS];
    int n_graphs, next_graph;
    /* the step in flight (begin → end) */
    struct {
        int n, n_out;
        bool gemm;              /* the batch takes the GEMM path (large batches, never captured) */
        bool graph;             /* the step runs as a CUDA graph */
        bool capturing;         /* ... which is being captured now */
        int graph_slot;         /* cached graph to launch, or -1 */
        const int32_t *tok, *pos, *seq, *gather;   /* device copies */
        float *host_logits;     /* where logits rows go (pinned or the caller's), or NULL */
        int32_t *host_argmax;   /* pinned argmax ids, or NULL */
        th_cu_kv kv;
        th_cu_attn at;
    } f;
};

/* gpu.c */
th_status th_cu_fail(cudaError_t e, const char *what);
th_status th_cu_alloc(th_cu_allocs *a, void **p, size_t bytes, const char *what);
void th_cu_allocs_free(th_cu_allocs *a);
/* y (rows of ys) (+)= W·x for n tokens: the GEMM path (gemm) or the GEMV, which
 * reads g->q8 (the q8 form of x, already made) when the matrix wants it. */
th_status th_cu_mm(th_gpu *g, bool gemm, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y,
                   int64_t ys, bool acc);
/* gpu_upload.c: the model's device weights, uploaded by the first GPU context
 * (under the model's lock) and freed with the model. */
th_status th_cu_weights_upload(th_model *m, bool verbose);
/* The same for the layers with layers[il] set (NULL: all), the embedding when layer 0
 * is one of them, the head when the last is (place.c's GPU half); a later call uploads
 * what an earlier one left out. */
th_status th_cu_weights_upload_layers(th_model *m, bool verbose, const bool *layers);
/* gpu_moe.c: scratch for the MoE layers (nothing when there are none); the
 * routed-expert part of layer il's MoE FFN: out[t] (n rows of E, stride E) = the
 * weighted sum of the selected experts applied to h[t] (stride E). gemm: the
 * batch is on the GEMM path (eager, never captured): the experts go through the
 * grouped GEMM unless tuning says moe_gemv_only; otherwise the per-pair GEMV. */
th_status th_cu_moe_alloc(th_gpu *g);
th_status th_cu_moe_ffn(th_gpu *g, const th_layer *L, int n, const float *h, float *out, bool gemm);
/* gpu_mla.c: scratch for the latent-attention layers (nothing without MLA); the
 * Q/K/V rows (g->qkv, unroped) of n tokens from g->h for layer L. */
th_status th_cu_mla_alloc(th_gpu *g);
th_status th_cu_mla_qkv(th_gpu *g, const th_layer *L, bool gemm, int n);
/* gpu.c: y = H-like buffer src times a group of weights reading it (q|k|v,
 * gate|up: the leader's joint matrix, else each into its column offset), the q8
 * form of src made first when a GEMV wants it. */
th_status th_cu_group_mm(th_gpu *g, const th_weight *const *ws, int n, th_buf src, float *y, int64_t ys);
/* gpu_deltanet.c: the hybrid models (docs/hybrid.md). init (after the shapes and
 * the metadata size are known): the device recurrent state, scratch, and the
 * metadata this adds (g->meta_count grows); free: its host memory; stage: the
 * per-token snapshot slots and the batch's sequence list into g->h_meta; the ops
 * and the state's truncate/copy hooks of backend.h; the [q; gate] projection of a
 * gated attention layer (op_qkv). */
th_status th_cu_hyb_init(th_gpu *g);
void th_cu_hyb_free(th_gpu *g);
void th_cu_hyb_stage(th_gpu *g, const th_context *c, const th_step *s);
th_status th_cu_op_recurrent(th_context *c, const th_step *s, int32_t il);
th_status th_cu_op_att_gate(th_context *c, const th_step *s, int32_t il);
th_status th_cu_op_shexp_gated(th_context *c, const th_step *s, int32_t il);
th_status th_cu_rs_restore(th_context *c, int32_t seq, int32_t slot);
th_status th_cu_rs_copy(th_context *c, int32_t dst, int32_t src);
th_status th_cu_hyb_qkv_gated(th_gpu *g, const th_layer *L);
/* The KV-cache layer of model layer il: il, or in a hybrid model its index among
 * the attention layers (the recurrent layers keep no K/V). */
int32_t th_cu_kv_layer(const th_gpu *g, int32_t il);

#endif
