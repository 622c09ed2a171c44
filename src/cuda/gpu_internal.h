/* gpu_internal.h — the CUDA backend's host-side state (struct th_gpu), shared by
 * gpu.c (context, scratch, forward pass, graphs), gpu_upload.c (weights),
 * gpu_moe.c (mixture of experts) and gpu_mla.c (latent attention). */
#ifndef TH_CUDA_GPU_INTERNAL_H
#define TH_CUDA_GPU_INTERNAL_H

#include "cuda/backend.h"
#include "cuda/mla.h"
#include "gpu.h"

/* A projection whose output rows are the concatenation of up to three weights
 * (q|k|v, gate|up): fused into one matrix when the types match, else run one
 * after the other into column offsets of the same output rows. */
typedef struct th_cu_proj {
    th_cu_mat part[3];
    int64_t off[3];
    int n;
    int64_t width;           /* total output columns */
} th_cu_proj;

/* A mixture-of-experts FFN: the router and the experts stacked by rows (expert
 * e of gate/up = rows [e·F, (e+1)·F), of down = rows [e·E, (e+1)·E)).
 * n_expert == 0: a dense layer. Shared experts live in th_cu_layer.gu/down. */
typedef struct th_cu_moe {
    int32_t n_expert, k;
    int64_t F;                      /* width of one expert */
    th_cu_mat router, gate, up, down;
    const float *router_b;          /* n_expert or NULL */
    const float *gate_b, *up_b, *down_b;  /* expert biases stacked like the rows (n_expert × F or × E), or NULL */
    th_cu_router route;
} th_cu_moe;

typedef struct th_cu_layer {
    th_cu_proj qkv, gu;             /* gu (and down): the dense FFN, or a MoE layer's shared experts (n = 0: none) */
    th_cu_moe moe;
    th_cu_mla mla;                  /* mla.on: latent attention fills the Q/K/V rows (qkv.n = 0) */
    bool qk_norm_full;              /* q_norm/k_norm span the whole Q/K projection, not one head */
    th_cu_mat wo, down;
    const float *attn_norm, *ffn_norm, *post_attn_norm, *post_ffn_norm;
    const float *bq, *bk, *bv, *bo, *q_norm, *k_norm;
    const float *sinks;             /* n_head attention-sink logits, or NULL */
    int32_t window;
    float theta_scale, freq_scale;  /* this layer's rope base (as base^(-2/n_rot)) and scaling */
    float corr_lo, corr_hi;         /* YaRN ramp dims (when the model uses YaRN) */
} th_cu_layer;

#define TH_CU_MAX_GRAPHS 16

struct th_gpu {
    const th_model *m;
    int device, sm_count;
    cudaStream_t st;
    void *cublas;
    bool verbose;
    /* weights */
    th_cu_layer *L;
    th_cu_mat embd, out;
    const float *out_norm, *rope_freqs;
    void **allocs;
    size_t n_allocs, cap_allocs;
    size_t weight_bytes, upload_total, upload_done;
    int upload_pct;
    /* shapes */
    int64_t E, q_w, k_w, v_w, qkv_w, att_w, F, gu_w, V, max_k;
    uint32_t n_batch;
    int gemm_min;               /* batches of at least this many tokens use the GEMM path */
    bool use_graphs;
    int32_t attn_chunk;         /* shortest attention chunk in graph mode (TH_GPU_ATTN_CHUNK; 0: one kernel step) */
    /* KV cache */
    void *kv_pool;
    size_t block_bytes;
    int32_t block, n_blocks, n_seq;
    bool kv_f16;
    /* scratch (device) */
    float *x, *h, *qkv, *att, *tmp, *gu, *ff, *hout, *logits, *partial;
    int32_t *counter;
    size_t partial_cap;
    th_cu_q8 q8;
    void *wbuf, *xbuf;
    size_t wbuf_bytes;
    /* mixture-of-experts scratch (gpu_moe.c), sized for n_batch tokens × the widest MoE layer */
    float *moe_logits, *moe_w, *moe_gu, *moe_act, *moe_y;
    int32_t *moe_sel;
    th_cu_q8 moe_q8;
    /* the grouped (GEMM) MoE path: the pairs' segment order on the device (list |
     * row, n_batch·k each), the 16-bit copy of the GEMM inputs, and pinned host
     * staging (sel | list | row, then four n_expert arrays: the counting sort) */
    bool moe_gemv_only;         /* TH_GPU_MOE_GEMV=1: every batch through the per-pair GEMV */
    int32_t *moe_idx, *h_moe;
    void *moe_xh;
    /* latent attention scratch (gpu_mla.c), n_batch tokens: Wkv_a rows, latents, Wkv_b rows, q LoRA rows */
    float *mla_kva, *mla_lat, *mla_kvb, *mla_qa;
    /* per-batch metadata: pinned host staging and its device copy, one block:
     * tokens | pos | seq | gather | block table (n_seq × n_blocks) */
    int32_t *h_meta, *d_meta;
    size_t meta_count;
    float *h_logits;            /* pinned: graph_max × V, made on first use (th_gpu_forward) */
    int32_t *d_argmax, *h_argmax; /* the output rows' argmax ids (th_gpu_batch.argmax): device and pinned, n_batch */
    int graph_mode;             /* what the cached graphs copy back: bit 0 logits, bit 1 argmax ids */
    int graph_max;
    struct { int n, n_out; cudaGraphExec_t exec; } graphs[TH_CU_MAX_GRAPHS];
    /* the fused single-token decode (gpu_fused.c, fused.cu), experimental: TH_GPU_FUSED
     * 0 off (default), 1 on where the model fits it, 2 required (a step it cannot take fails) */
    int fused_mode;
    bool fused;
    int fused_blocks;
    size_t fused_smem;
    th_cu_fused *fused_args;         /* host copy of the kernel's arguments (~31 KB, passed by value) */
    unsigned long long *fused_prof;  /* TH_GPU_FUSED_PROF=1: phase times of the last step (device) */
    double prof_ns[6];               /* summed per phase kind (A-E, output head) over prof_steps steps */
    double prof_work_ns[5];          /* the part until block 0 finished its own work of the phase */
    long prof_steps;
    unsigned *barrier;
    int n_graphs, next_graph;
};

/* gpu.c */
th_status th_cu_fail(cudaError_t e, const char *what);
th_status th_cu_alloc(th_gpu *g, void **p, size_t bytes, const char *what);
/* y (rows of ys) (+)= W·x for n tokens: the GEMM path (gemm) or the GEMV, which
 * reads g->q8 (the q8 form of x, already made) when the matrix wants it. */
th_status th_cu_mm(th_gpu *g, bool gemm, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y,
                   int64_t ys, bool acc);
/* This layer's rope parameters; the KV pool and the attention as the kernels
 * see them (the attention split left to the caller) (gpu.c). */
th_cu_rope th_cu_layer_rope(const th_gpu *g, const th_cu_layer *D);
th_cu_kv th_cu_kv_view(const th_gpu *g);
th_cu_attn th_cu_attn_view(const th_gpu *g);
/* gpu_fused.c: decide whether the fused kernel takes this model's single-token
 * steps (and set it up), and queue one such step on the stream. */
th_status th_cu_fused_init(th_gpu *g);
void th_cu_fused_run(th_gpu *g, int n_out);
/* TH_GPU_FUSED_PROF: add the last step's phase times (after the stream synchronized); print them (at free). */
void th_cu_fused_prof_add(th_gpu *g);
void th_cu_fused_prof_print(const th_gpu *g);
/* gpu_upload.c */
th_status th_cu_upload_weights(th_gpu *g, const th_weight *rope_factors);
/* gpu_moe.c: scratch for the MoE layers (nothing when there are none); the
 * routed-expert part of a MoE FFN: out[t] (n rows of E, stride E) = the weighted
 * sum of the selected experts applied to h[t] (stride E). Shared experts, the
 * post-FFN norm and the residual add are the caller's. */
th_status th_cu_moe_alloc(th_gpu *g);
/* gemm: the batch is on the GEMM path (eager, never captured): the experts go
 * through the grouped GEMM unless TH_GPU_MOE_GEMV=1; otherwise the per-pair GEMV. */
th_status th_cu_moe_ffn(th_gpu *g, const th_cu_moe *M, int n, const float *h, float *out, bool gemm);
/* gpu_mla.c: scratch for the latent-attention layers (nothing without MLA); the
 * Q/K/V rows (g->qkv, unroped) of n tokens from g->h for a layer with M->on. */
th_status th_cu_mla_alloc(th_gpu *g);
th_status th_cu_mla_qkv(th_gpu *g, const th_cu_mla *M, bool gemm, int n);

#endif
