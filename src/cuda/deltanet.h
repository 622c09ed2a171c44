/* deltanet.h — the C interface of the CUDA kernels of the hybrid models' layers
 * (deltanet.cu; host side gpu_deltanet.c): the gated DeltaNet mixer's causal conv,
 * delta rule and gated output norm, the [q; gate] split and sigmoid gate of a
 * gated attention layer, and the sigmoid-gated shared experts' sum. The
 * arithmetic is the CPU's (src/cpu/deltanet.c, docs/hybrid.md); the state layout
 * is th_rstate's (src/rstate.h), one copy of it in device memory. */
#ifndef TH_CUDA_DELTANET_H
#define TH_CUDA_DELTANET_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest DeltaNet head width the delta-rule kernel takes (the state column
 * of a thread lives in registers). */
#define TH_CU_DN_MAX_DK 256

/* One recurrent layer as the kernels see it (Dk head width, Nk k heads, Nv v heads,
 * C conv taps; Kd = Nk·Dk, Vd = Nv·Dk, Cd = 2·Kd + Vd). */
typedef struct th_cu_dn {
    int32_t dk, nk, nv, C, ratio;       /* ratio = Nv / Nk */
    int64_t kd, vd, cd;
    bool fused;                         /* qwen3next: ssm_in rows per k head [q k v z], ssm_ba [b a] */
    bool repeat;                        /* v head h reads k head h % Nk (qwen35), else h / ratio */
    float eps;                          /* RMS norm epsilon (also the L2 norms' floor) */
    const float *conv_w;                /* [Cd][C] taps, oldest first */
    const float *dt, *A;                /* [Nv] */
    const float *norm;                  /* [Dk] */
    float *cur, *snap;                  /* device state: [seq][per_seq], snapshots [seq·n_snap + slot][per_seq] */
    int64_t per_seq, layer_off, conv_n; /* floats: per sequence, this layer's offset in it, its conv window */
    float *scratch;                     /* n_batch × (Nk + 2·Nv) floats for variant 3's pre-pass */
} th_cu_dn;

/* in rows (stride is): the projections, [q k v | z] (or qwen3next's grouped
 * ssm_in row); u rows of Cd: silu(conv(window ++ qkv)); each channel walks the
 * batch in order, reading and shifting its sequence's window; snap[t] >= 0: the
 * window after token t is also written to snapshot slot snap[t]. */
void th_cu_dn_conv(const th_cu_dn *d, const float *in, int64_t is, int n, const int32_t *seq, const int32_t *snap,
                   float *u, cudaStream_t st);
/* The delta rule over the batch: per v head, per sequence of seq_list (n entries,
 * the batch's distinct sequences then -1s; first: each one's first token, nxt: per
 * token the next token of its sequence or -1), that sequence's tokens in batch order:
 * L2 norms of q and k, beta = sigmoid(b), decay = exp(min(softplus(a + dt)·A, 50)),
 * the state update and out[t][h·Dk ..] (stride os) before the output norm. ba rows
 * (stride bas): [b | a] (qwen35) or grouped per k head (qwen3next). */
void th_cu_dn_rule(const th_cu_dn *d, float *u, const float *ba, int64_t bas, int n, const int32_t *seq,
                   const int32_t *seq_list, const int32_t *first, const int32_t *nxt, const int32_t *snap, float *out,
                   int64_t os, cudaStream_t st);
/* Which delta-rule kernel runs (measurement and tests): -1 (default) 2 for batches
 * under 16 tokens, else 3; 1 G = 4 lanes a state column, each over a quarter of the
 * keys; 0 one lane a column; 2 as 1, the
 * next token's inputs loaded while this one is computed (walking first / nxt);
 * 3 as 2 after a parallel pre-pass over the batch (q/k norms in u, in place, k·q,
 * beta, decay), so the sequential part is the state's arithmetic alone. Every
 * variant but 0 also runs the conv with each window in registers (C <= 8). */
void th_cu_dn_set_variant(int v);
/* out[t][h] = rmsnorm(out[t][h])·norm ⊙ silu(z[t][h]), z from the projection rows in. */
void th_cu_dn_output(const th_cu_dn *d, float *out, int64_t os, const float *in, int64_t is, int n, cudaStream_t st);
/* A gated attention layer's projection rows wide (stride ws: per head [q; gate] of
 * hd, then kv_w K and V values): q and K/V into qkv rows (stride qs), the gates
 * into gate rows (n_head·hd wide). */
void th_cu_split_qgate(const float *wide, int64_t ws, int n, int32_t n_head, int32_t hd, int64_t kv_w, float *qkv,
                       int64_t qs, float *gate, cudaStream_t st);
/* att[t][i] *= sigmoid(gate[t][i]) for i < w. */
void th_cu_sigmoid_mul(float *att, int64_t as, const float *gate, int64_t w, int n, cudaStream_t st);
/* out[t] += sigmoid(h[t]·w) · y[t] (E wide rows, stride E). */
void th_cu_shexp_gate(float *out, const float *h, const float *y, const float *w, int64_t E, int n, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
