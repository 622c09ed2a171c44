/* kernels.h — the C interface between the CUDA backend's host side (gpu.c: the
 * op table, scratch, CUDA graphs; gpu_upload.c, gpu_moe.c, gpu_mla.c) and its
 * kernels (one op family per .cu file). Everything here is plain C; device pointers are plain pointers.
 * Also the small test/benchmark entry points tests/test_cuda.c and
 * bench/gpu/ use to check each kernel against the CPU reference. */
#ifndef TH_CUDA_KERNELS_H
#define TH_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "cuda/split.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A weight matrix on the device: `rows` rows of K elements of GGML type `type`.
 * layout GGUF: rows exactly as in the file, row_bytes apart.
 * layout SPLIT (Q4_0/1, Q5_0/1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4;
 * split.c has the layouts): the quants of every row packed contiguously in `data`
 * (16-byte aligned, one 32-weight sub-block per 16-byte load for the 4-bit types,
 * per 8-byte load for the 2-bit codes of Q2_K/Q3_K), the scales in `scales`, so
 * that a warp reads its weights with coalesced loads. */
enum { TH_CU_GGUF = 0, TH_CU_SPLIT = 1 };
typedef struct th_cu_mat {
    uint32_t type;
    int32_t layout;
    int64_t rows, K;
    const void *data;
    const void *scales;
    size_t row_bytes;
} th_cu_mat;

/* An activation matrix quantized to 8 bits in blocks of 32: row r has int8
 * q[r*K .. ], scale d[r*K/32 ..] and the integer sum of each block s[..]. */
typedef struct th_cu_q8 {
    int8_t *q;
    float *d;
    int32_t *s;
} th_cu_q8;

/* ---- layouts (split.h, split.c: repacking, sizes, th_cu_type_splittable) ---- */
bool th_cu_type_supported(uint32_t type);

/* ---- matrix-vector products (gemv.cu): y[t][r] (+)= W[r] · x[t], t < n ----
 * Decodes weights in registers; x as fp32 or, for the int8 kernels, q8. */
bool th_cu_gemv_wants_q8(const th_cu_mat *w);
void th_cu_gemv(const th_cu_mat *w, const float *x, int64_t x_stride, const th_cu_q8 *xq, int n,
                float *y, int64_t y_stride, bool accumulate, cudaStream_t st);
/* qn.cu: the same for a qN matrix in the file layout (fp32 x); false (nothing
 * launched) for any other matrix or without x. th_cu_gemv calls it. */
bool th_cu_gemv_qn(const th_cu_mat *w, const float *x, int64_t x_stride, int n, float *y, int64_t y_stride,
                   bool accumulate, cudaStream_t st);

/* ---- batched products on int8 tensor cores (mma_q8.cu): the same product as
 * th_cu_gemv's int8 kernels for any n, SPLIT weights decoded to int8 in
 * registers, one weight read per 64 tokens. supports: the layout and type have a
 * kernel and the device is sm_80+; th_cu_mma_q8 returns false (nothing launched)
 * otherwise. */
bool th_cu_mma_q8_supports(const th_cu_mat *w);
bool th_cu_mma_q8(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t y_stride, bool accumulate,
                  cudaStream_t st);
/* The prompt-sized form (mma_q8g.cu: 128-row × 64/128-token blocks, both operands
 * staged in shared memory), which th_cu_mma_q8 takes from TH_CU_MMA_PROMPT_MIN tokens
 * (variant bit 5 at every size). H200 lab, 8B Q4_0 matrices, us: at 128 tokens it
 * beats the staged form everywhere (gate+up 191 vs 507, qkv 65 vs 120, down 221 vs
 * 248); at 64 the staged form wins on the narrow ones (down 131 vs 332). */
#define TH_CU_MMA_PROMPT_MIN 128
void th_cu_mma_q8g(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t y_stride, bool accumulate,
                   int tile, cudaStream_t st);  /* tile: 64 or 128 tokens a block, 0 chosen by size */
/* The narrow-batch form (mma_q8n.cu: weights as the B operand, 128-row blocks, a
 * cp.async ring, K split over a cluster; Q4_0 and Q8_0 with K a multiple of 128, Q4_K of
 * 256, sm_90) for 1..TH_CU_MMA_NARROW_MAX tokens (above 32, tiles of 32 tokens that share
 * the weights through L2); false (nothing launched) where it does not apply. */
#define TH_CU_MMA_NARROW_MAX 64
bool th_cu_mma_q8n_supports(const th_cu_mat *w);
bool th_cu_mma_q8n(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t y_stride, bool accumulate,
                   int split, cudaStream_t st);  /* split: blocks along K (1..8), 0 chosen by shape */
/* Measurement variants of th_cu_mma_q8 (bench/gpu lab and tests): 0 the default;
 * bit 0 two row tiles a warp above 32 tokens, bit 1 contiguous K ranges a warp;
 * bit 5 the prompt-sized form at every n, bit 7 the narrow form only (false where
 * it does not apply; bits 8-11 its K split, 0 chosen by shape), any other bit: never. */
void th_cu_mma_set_variant(int v);
/* F16/BF16 weights (GGUF layout, in place) on the 16-bit tensor cores (mma_f16.cu),
 * fp32 activations rounded to the weight type in the kernel; K a multiple of 32,
 * x 16-byte aligned with a stride a multiple of 4; false (nothing launched) otherwise. */
bool th_cu_mma_f16_supports(const th_cu_mat *w, int64_t x_stride);
bool th_cu_mma_f16(const th_cu_mat *w, const float *x, int64_t x_stride, int n, float *y, int64_t y_stride,
                   bool accumulate, cudaStream_t st);

/* The 1-bit / ternary types (TQ1_0, TQ2_0, Q1_0_G128, IQ1_BN, IQ2_BN; gemv_tern.cu): whether t is one,
 * and their decode GEMV on q8 activations (false, nothing launched, for another type or no xq). */
bool th_cu_tern_type(uint32_t t);
bool th_cu_gemv_tern(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, cudaStream_t st);

/* ---- matrix-matrix products (gemm.cu): the same product for large n through
 * cuBLAS on tensor cores (weights dequantized to fp16 in row chunks that fit
 * `wbuf`; activations converted into `xbuf`). Returns false on a cuBLAS error. */
bool th_cu_gemm(void *cublas, const th_cu_mat *w, const float *x, int64_t x_stride, int n, float *y,
                int64_t y_stride, bool accumulate, void *wbuf, size_t wbuf_bytes, void *xbuf,
                cudaStream_t st);

/* ---- grouped expert products (gemm.cu): the MoE FFN for large batches ----
 * w stacks experts of rpe rows (expert e: rows e·rpe .. e·rpe + rpe − 1). For each
 * of the n_hit experts ex[i] (host arrays; ids increasing and distinct):
 *   y[off[i] + j][o] = W row (ex[i]·rpe + o) · x[off[i] + j]   for j < cnt[i], o < rpe
 * (x rows of xs, y rows of ys: the rows of all experts one after the other,
 * segment order). x rows 0 .. n_rows − 1 are converted once into xh (n_rows × w.K
 * 16-bit values; F32 weights read x as it is); weights other than F32/F16/BF16
 * are dequantized to fp16 into wbuf, consecutive experts sharing one tile, then
 * one cuBLAS GEMM per expert. Returns false on a cuBLAS error. */
bool th_cu_gemm_experts(void *cublas, const th_cu_mat *w, int64_t rpe, int n_hit, const int32_t *ex,
                        const int32_t *off, const int32_t *cnt, int n_rows, const float *x, int64_t xs, float *y,
                        int64_t ys, void *wbuf, size_t wbuf_bytes, void *xh, cudaStream_t st);

/* ---- dequantization (dequant.cu) ---- */
/* Rows row[i] (or row0 + i when row == NULL) of w to fp32 (out_f16 false) or fp16,
 * out_stride elements apart, times `scale`. */
void th_cu_dequant_rows(const th_cu_mat *w, const int32_t *row, int64_t row0, int64_t n, void *out,
                        int64_t out_stride, bool out_f16, float scale, cudaStream_t st);

/* ---- row ops (norm.cu, glu.cu, quantize.cu, misc.cu) ---- */
/* y[r] = rmsnorm(x[src(r)]) · w  (src(r) = rows ? rows[r] : r); optional q8 copy. */
void th_cu_rmsnorm(const float *x, int64_t x_stride, const int32_t *rows, const float *w, float eps,
                   int n, int64_t K, float *y, int64_t y_stride, const th_cu_q8 *yq, cudaStream_t st);
/* out[t][i] = act(gu[t][i]) · gu[t][F + i]  (act: enum th_act_fn — 0 SiLU, 1 GELU-tanh,
 * 2 GPT-OSS's clamped SwiGLU as th_op_swiglu_oai); optional q8 copy. */
void th_cu_glu(const float *gu, int64_t gu_stride, int64_t F, int n, int act, float *out,
               int64_t out_stride, const th_cu_q8 *oq, cudaStream_t st);
void th_cu_quantize_q8(const float *x, int64_t x_stride, int n, int64_t K, const th_cu_q8 *out,
                       cudaStream_t st);
void th_cu_add_bias(float *y, int64_t stride, const float *b, int64_t width, int n, cudaStream_t st);
void th_cu_add_rows(float *y, const float *x, int64_t stride, int64_t width, int n, cudaStream_t st);
void th_cu_softcap(float *x, int64_t count, float cap, cudaStream_t st);
/* out[r] = argmax of row r of x (n values, rows `stride` apart) for r < rows, by
 * th_greedy_argmax's rule (NaN as -inf, +inf as FLT_MAX, lowest index on ties;
 * 0 for a row of NaN/-inf only). argmax.cu: one block per row. */
void th_cu_argmax_rows(const float *x, int64_t stride, int64_t n, int rows, int32_t *out, cudaStream_t st);
/* Launch kernels with programmatic dependent launch (default on). */
void th_cu_set_pdl(bool on);

/* ---- mixture of experts (moe.cu; host side gpu_moe.c) ---- */
/* The router's arithmetic (th_router in src/cpu/moe.h, device pointers). gating: enum th_gating. */
typedef struct th_cu_router {
    int32_t n_expert, k, gating;
    bool norm;
    float scale;
    const float *sel_bias;          /* n_expert, or NULL */
    int32_t n_group, topk_group;    /* n_group <= 1: no group limit; n_group <= 256 */
} th_cu_router;
/* Per token t < n: logits[t] (n_expert ≤ TH_CU_MAX_EXPERTS) → sel[t][k] expert ids
 * best first and w[t][k] weights, as th_moe_route (one warp a token, the token's
 * probabilities and scores in shared memory). */
#define TH_CU_MAX_EXPERTS 4096
void th_cu_moe_route(const float *logits, int n, const th_cu_router *r, int32_t *sel, float *w,
                     cudaStream_t st);
/* How the expert GEMVs walk the pairs (NULL: p = 0 .. n_pairs−1 in turn): order
 * (n_pairs ids) the pairs grouped by expert, ids increasing; seg, when not NULL,
 * the hit experts as segments of order — seg[0] their number n_hit, then n_slots
 * expert ids, n_slots first places in order, n_slots counts (1 + 3·n_slots ints,
 * n_slots ≥ min(n_pairs, n_expert)). th_cu_moe_order writes both from sel (seg
 * only when given; one block, call it with n_pairs > 0). With order alone each
 * pair still runs on its own, in that order (the blocks of an expert's pairs run
 * together: its rows come from L2 after the first); with seg the int8 kernel runs
 * per hit expert, one weight load for 4 of its pairs (fp32 experts take the order
 * only). What each pair gets does not depend on the walk: y is the same bit for bit. */
typedef struct th_cu_moe_walk {
    int32_t *order, *seg;
    int n_slots;
} th_cu_moe_walk;
void th_cu_moe_order(const int32_t *sel, int n_pairs, int n_expert, const th_cu_moe_walk *walk, cudaStream_t st);
/* For each pair p < n_pairs with expert e = sel[p] and input row x[p / x_div]:
 * y[p][o] = w0 row (e·rpe + o) · x (+ b0[e·rpe + o])  for o < rpe, and with w1
 * (optional) y[p][rpe + o] = w1 row (e·rpe + o) · x (+ b1[e·rpe + o]). w0/w1 are
 * experts stacked by rows; b0/b1 (expert biases, stacked the same way) may be NULL.
 * With xq (rows of K = w.K) and every given matrix of a split layout, the int8
 * products on the q8 activations (as the int8 GEMV); otherwise fp32 x. */
void th_cu_moe_gemv(const th_cu_mat *w0, const th_cu_mat *w1, const float *b0, const float *b1, int64_t rpe,
                    const int32_t *sel, int n_pairs, const th_cu_moe_walk *walk, int x_div, const float *x, int64_t xs,
                    const th_cu_q8 *xq, float *y, int64_t ys, cudaStream_t st);
/* The same for one matrix w holding some of the experts (per-expert types,
 * docs/precision.md): expert e's rpe rows are block slot[e] of w (slot: device,
 * n_expert ids); pairs whose expert has slot −1 are not written. The bias b is
 * indexed by the expert id, as th_cu_moe_gemv's. */
void th_cu_moe_gemv_part(const th_cu_mat *w, const int32_t *slot, const float *b, int64_t rpe, const int32_t *sel,
                         int n_pairs, const th_cu_moe_walk *walk, int x_div, const float *x, int64_t xs,
                         const th_cu_q8 *xq, float *y, int64_t ys, cudaStream_t st);
/* out[t][i] = Σ_{j<k} w[t·k+j] · y[r(t·k+j)][i] for t < n, i < E, in order j = 0..k−1,
 * where pair p's row r(p) = row[p] (row NULL: r(p) = p). */
void th_cu_moe_sum(const float *y, int64_t ys, const float *w, int k, int n, int64_t E, const int32_t *row,
                   float *out, int64_t os, cudaStream_t st);
/* The grouped path's pair rows (segment order: list[i] is the pair p = t·k + j of
 * row i). gather: x[i] = h[list[i] / k] (E floats) for i < rows. bias: y[i][c] +=
 * b[sel[list[i]]·rpe + c] for c < rpe, the expert bias where the GEMV adds it. */
void th_cu_moe_gather(const float *h, int64_t hs, const int32_t *list, int k, int rows, int64_t E, float *x,
                      int64_t xs, cudaStream_t st);
void th_cu_moe_bias(float *y, int64_t ys, const float *b, int64_t rpe, const int32_t *list, const int32_t *sel,
                    int rows, cudaStream_t st);

/* ---- rope + KV store (rope.cu) ---- */
typedef struct th_cu_kv {
    void *pool;                /* n_blocks × block_bytes */
    bool f16;
    size_t block_bytes;
    int32_t block;             /* tokens per block */
    int64_t k_dim, v_dim;      /* elements per token per layer */
    const int32_t *table;      /* n_seq × max_blocks */
    int32_t max_blocks;
} th_cu_kv;

typedef struct th_cu_rope {
    int32_t n_head, n_head_kv, head_dim, head_dim_v, n_rot, rope_type;
    float theta_scale, freq_scale, norm_eps;
    float ext_factor, corr_lo, corr_hi;  /* YaRN ramp (ext_factor 0: off), as th_rope_params */
    float mscale;                        /* cos/sin magnitude: attn_factor (× YaRN's 1 + 0.1 ln(1/freq_scale)) */
    const float *freq_factors;           /* n_rot/2 or NULL */
    const float *q_norm, *k_norm;        /* per-head RMSNorm weights or NULL */
    int32_t rope_off;                    /* first roped dim of a head (MLA: after the nope dims), else 0 */
} th_cu_rope;

/* For each token: q/k-norm and rope q (in place) and k, then K and V into the
 * cache of `layer`. qkv row t: q at 0, k at q_w, v at q_w + k_w. */
void th_cu_rope_store(float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq,
                      const th_cu_rope *r, const th_cu_kv *kv, int32_t layer, cudaStream_t st);

/* ---- attention over the paged cache (attention.cu) ---- */
typedef struct th_cu_attn {
    int32_t n_head, n_head_kv, head_dim, head_dim_v;
    float scale, softcap;
    int32_t window;            /* 0 = full causal */
    const float *sinks;        /* n_head sink logits (in the softmax denominator only), or NULL */
    int32_t n_split, chunk;    /* positions split into n_split chunks of `chunk` (a multiple of 32) */
    float *partial;            /* n × n_head × n_split × (head_dim_v + 2) floats when n_split > 1 */
    size_t partial_cap;        /* floats at partial: a larger split batch runs in token groups that fit */
    int32_t *counter;          /* n × n_head, zero between launches (the kernel resets what it uses) */
    bool split_only;           /* attn_split at every batch size (batch-invariant contexts) */
    int32_t tile_min;          /* batches (of the CUDA-core kernels) of at least this many tokens take attn_tile,
                                  smaller ones attn_split (0: TH_CU_ATTN_TILE_MIN) */
    int32_t group_blocks;      /* a block takes several query heads of a KV head while the launch keeps this many
                                  blocks (0: TH_CU_ATTN_GROUP_BLOCKS) */
    const int32_t *host_seq;   /* the batch's sequence ids in host memory (runs of prompt tokens take the
                                  tensor-core kernel, attn_mma.cu), or NULL: the CUDA-core kernels only */
} th_cu_attn;

/* Decode attention's defaults, measured on the H200 (bench/gpu/NOTES.md, 8B Q4_0 S_TG):
 * attn_tile from 8 tokens (attn_split alone made pp512 9,017 tok/s against 12,184
 * before prompts had their tensor-core kernel; decode batches with attn_split instead,
 * 2026-12-04: 16 streams 2,873 vs 3,578, 64 streams 3,887 vs 5,238); several query
 * heads a block while 512 blocks remain (64 streams 5,516 at 2 heads against 5,407 at
 * 4; small launches want blocks: one stream 404 at 4 heads against 472 at one). */
#define TH_CU_ATTN_TILE_MIN 8
#define TH_CU_ATTN_GROUP_BLOCKS 512

/* out[t][h*hdv ..] = softmax(q·K^T·scale) · V for each token and head (with
 * a.sinks, exp(sink[h]) joins each softmax denominator); q at
 * qkv + t*stride + h*hd. With oq (and hdv a multiple of 32) also the q8 form of
 * out (rows of out_stride elements). */
void th_cu_attention(const float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq,
                     const th_cu_attn *a, const th_cu_kv *kv, int32_t layer, float *out,
                     int64_t out_stride, const th_cu_q8 *oq, cudaStream_t st);
/* Prompt attention on the tensor cores (attn_mma.cu; th_cu_attention sends runs
 * of at least TH_CU_ATTN_MMA_RUN tokens of one sequence there): fp16 KV cache,
 * head_dim == head_dim_v in {32, 64, 128}; Q and P rounded to fp16, fp32 sums. */
#define TH_CU_ATTN_MMA_RUN 32
bool th_cu_attn_prompt_supports(const th_cu_attn *a, const th_cu_kv *kv);
void th_cu_attn_prompt(const float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq,
                       const th_cu_attn *a, const th_cu_kv *kv, int32_t layer, float *out, int64_t os,
                       cudaStream_t st);
/* Positions one block of the attention kernel covers in one step of all its warps
 * (the graph-mode shortest chunk). */
int32_t th_cu_attn_step(int32_t head_dim, int32_t head_dim_v);
/* Split count and chunk for n tokens attending over at most max_len positions,
 * with `partial_cap` floats of partial storage. min_chunk 0: chunk × n_split
 * covers max_len. min_chunk > 0 (graph mode, one plan for every length): about
 * four blocks an SM's worth of splits, chunk = min_chunk, and each (token, head)
 * stretches its chunk until n_split chunks cover its length. */
void th_cu_attn_plan(int n, int32_t n_head, int32_t hdv, int64_t max_len, size_t partial_cap, int sm_count,
                     int32_t min_chunk, int32_t *n_split, int32_t *chunk);

/* ---- settings of the CUDA backend for tests and measurements (gpu.c) ----
 * Not user-facing: tests/test_cuda.c and bench/gpu/ set them to reach every path;
 * a context reads them once, when it is created. */
typedef struct th_cu_tuning {
    int gemm_min;              /* batches of at least this many tokens take the GEMM path (default 33) */
    bool graphs;               /* capture small batches into CUDA graphs (default true) */
    bool pdl;                  /* programmatic dependent launch (default true) */
    int attn_chunk;            /* shortest attention split in graph mode, a multiple of 32 (0: one kernel step) */
    bool moe_gemv_only;        /* MoE experts as per-pair GEMVs on the GEMM path too (default false) */
    int moe_order_min;         /* GEMV-path MoE batches of at least this many tokens walk their pairs grouped by
                                * expert (th_cu_moe_walk's order; 0: never, the default until timed) */
    int moe_group_min;         /* ... and from this many the int8 experts run per hit expert (the walk's
                                * segments; 0: never, the default until timed) */
    int mma_min;               /* GEMV-path batches of at least this many tokens take the int8 MMA kernel (mma_q8.cu) */
    int mma_max;               /* GEMM-path batches of at most this many tokens take it instead of cuBLAS (0: none) */
    int narrow_min;            /* GEMV-path batches of at least this many tokens go to the narrow form (mma_q8n.cu) where it applies */
    bool mma_f16;              /* F16/BF16 weights take mma_f16.cu in the same range (default false: not yet timed) */
    int f16_cublas_min;        /* GEMV-path batches of at least this many tokens multiply F16/BF16 weights with
                                * cuBLAS in place (captured into the graphs like the kernels; 0: never) */
    bool attn_simt;            /* prompts too on the CUDA-core attention kernels, not attn_mma.cu (default false) */
    int attn_tile_min;         /* th_cu_attn.tile_min (default TH_CU_ATTN_TILE_MIN) */
    int attn_group_blocks;     /* th_cu_attn.group_blocks (default TH_CU_ATTN_GROUP_BLOCKS) */
} th_cu_tuning;
th_cu_tuning th_cu_tuning_default(void);
th_cu_tuning th_cu_tuning_get(void);
void th_cu_tuning_set(const th_cu_tuning *t);

/* ---- test and benchmark entry points (testapi.c) ---- */
/* Build a device matrix from host GGUF rows (repacked when force_gguf is false
 * and the type splits), y = W·x on the device through the GEMV (path 0), the
 * GEMM (path 1), the MoE GEMV (path 2: one expert of all the rows, every token
 * selecting it) or the grouped expert GEMM (th_cu_gemm_experts; path 3: one
 * expert of all the rows in weight tiles of 5 rows; path 4: every row its own
 * expert, each expert's n tokens a segment of its own, tiles of 16 rows) or the
 * int8 MMA kernel (th_cu_mma_q8, path 5, any n) or, for F16/BF16, the 16-bit MMA
 * kernel (th_cu_mma_f16, path 5 too). Host arrays in and out. Returns a CUDA/cuBLAS error text or NULL. */
const char *th_cu_test_matmul(uint32_t type, const void *w, int64_t rows, int64_t K, const float *x,
                              int n, float *y, int path, bool force_gguf);
/* Attention over a paged cache: q n×(n_head*hd), K/V host arrays [len][n_kv*hd]
 * written through sequence 0's block table (blocks in reverse order; sequence s
 * sees them rotated by s), sinks n_head logits or NULL; out n×(n_head*hdv).
 * Token i at position tok_pos[i] of sequence tok_seq[i] (of n_seq), or NULL:
 * positions pos0..pos0+n-1 of sequence 0. force_split 1: splits of 32 positions;
 * 2: the graph plan (few splits, chunks stretched to the length); 0: the eager
 * plan. prompt: runs of prompt tokens may take the tensor-core kernel. */
const char *th_cu_test_attention(int n_head, int n_kv, int hd, int hdv, int len, const float *q, const float *k,
                                 const float *v, int n, int pos0, int window, float softcap, const float *sinks,
                                 bool kv_f16, int block, int force_split, const int32_t *tok_pos,
                                 const int32_t *tok_seq, int n_seq, bool prompt, float *out);
/* th_cu_moe_order of host ids sel (n_pairs, each < n_expert) into host order and seg (1 + 3·min(n_pairs,
 * n_expert) ints, its layout). Returns a CUDA error text or NULL. */
const char *th_cu_test_moe_order(const int32_t *sel, int n_pairs, int n_expert, int32_t *order, int32_t *seg);
/* A matrix as th_cu_test_matmul builds it, every row decoded by th_cu_dequant_rows
 * (rows × K): to fp32 (the embedding lookup; out floats) or with f16 to fp16 (the
 * GEMM path's tiles; out halves) in two calls, row 0 and then rows 1.. from row0 = 1. */
const char *th_cu_test_dequant(uint32_t type, const void *w, int64_t rows, int64_t K, bool force_gguf, bool f16,
                               void *out);
/* th_cu_argmax_rows on host rows x (rows × n, stride n) into out. */
const char *th_cu_test_argmax(const float *x, int64_t n, int rows, int32_t *out);
/* Device-to-device copy bandwidth in GB/s (bytes read + written) over `bytes`. */
double th_cu_copy_bandwidth(size_t bytes);
/* fp16 × fp16 → fp32 cuBLAS GEMM of n×n×n on random data, TFLOP/s (median-free: 10 after 3 warm-ups). */
double th_cu_gemm_tflops(int n);
/* The kernel lab's timer (testapi.c): µs per product of W (host GGUF rows) with
 * n tokens for each n of ns, 5 numbers per n into us: the GEMV, today's GEMM path
 * (cuBLAS), the MMA kernel (-1: none), the q8 quantization alone, the int8 MMA
 * kernel's variant lab_variant (th_cu_mma_set_variant). */
const char *th_cu_bench_matmul(uint32_t type, const void *w, int64_t rows, int64_t K, const int *ns, int n_ns,
                               int lab_variant, double *us);

#ifdef __cplusplus
}
#endif
#endif
