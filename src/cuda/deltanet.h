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
    float *scratch;                     /* n_batch × (Nk + 3·Nv) floats for the pre-pass */
    float *wy;                          /* n_batch × TH_CU_DN_WY_FLOATS(Vd, Nv) floats for the chunked form, or NULL */
} th_cu_dn;

/* in rows (stride is): the projections, [q k v | z] (or qwen3next's grouped
 * ssm_in row); u rows of Cd: silu(conv(window ++ qkv)); each channel walks the
 * batch in order, reading and shifting its sequence's window; snap[t] >= 0: the
 * window after token t is also written to snapshot slot snap[t]. */
void th_cu_dn_conv(const th_cu_dn *d, const float *in, int64_t is, int n, const int32_t *seq, const int32_t *snap,
                   float *u, cudaStream_t st);
/* The batch as the delta rule walks it (device arrays of n ints each, staged with
 * the batch metadata; th_cu_dn_order fills list .. off on the host). */
typedef struct th_cu_dn_batch {
    const int32_t *seq;                 /* per token its sequence */
    const int32_t *snap;                /* per token the snapshot slot its state goes to, or -1 */
    const int32_t *list;                /* the batch's distinct sequences, then -1s */
    const int32_t *first;               /* each listed sequence's first token */
    const int32_t *nxt;                 /* per token the next token of its sequence, or -1 */
    const int32_t *ord;                 /* the tokens grouped by listed sequence, batch order within one */
    const int32_t *off;                 /* where each list entry's tokens start in ord (n past the last) */
    const int32_t *ch_start, *ch_len;   /* the chunked form's chunks: first position in ord, tokens (<= 64) */
    const int32_t *ch_off;              /* each list entry's first chunk (n_chunk past the last) */
    int n_chunk;                        /* chunks (n when unknown) */
    int n;                              /* tokens */
    int n_seq;                          /* the most distinct sequences a batch can have (the chunked grid) */
    int max_run;                        /* the most tokens of one sequence, 0 when unknown (a CUDA graph
                                         * replays the step for any sequence mix: the recurrent form) */
} th_cu_dn_batch;

/* Host arrays of n each for a batch of n tokens with sequences seq (< n_seq) and
 * snapshot slots snap: list, first, nxt, ord, off, and the chunks (a sequence's
 * tokens in runs of up to TH_CU_DN_CHUNK_LEN, a run ending after each snapshotted
 * token) ch_start, ch_len, ch_off, their count in *n_chunk; last: n_seq ints, all
 * -1 (left so). Returns the most tokens of one sequence. */
typedef struct th_cu_dn_order_out {
    int32_t *list, *first, *nxt, *ord, *off, *ch_start, *ch_len, *ch_off;
    int n_chunk;
} th_cu_dn_order_out;
int th_cu_dn_order(int n, const int32_t *seq, const int32_t *snap, int32_t *last, th_cu_dn_order_out *o);

/* The delta rule over the batch: per v head, per sequence of b->list, that
 * sequence's tokens in batch order: L2 norms of q and k, beta = sigmoid(b),
 * decay = exp(min(softplus(a + dt)·A, 50)), the state update and out[t][h·Dk ..]
 * (stride os) before the output norm. ba rows (stride bas): [b | a] (qwen35) or
 * grouped per k head (qwen3next). Recurrent form (token by token) for short runs,
 * the chunked form (dn_chunk.cu) from TH_CU_DN_CHUNK_MIN tokens of one sequence;
 * either may normalise q and k of u in place. */
void th_cu_dn_rule(const th_cu_dn *d, float *u, const float *ba, int64_t bas, const th_cu_dn_batch *b, float *out,
                   int64_t os, cudaStream_t st);

/* Which delta-rule form runs (lab and tests only; the library never sets it):
 * TH_CU_DN_AUTO the default choice above; TH_CU_DN_STEP the recurrent form, a
 * warp's 4-lane groups owning a state column each, the next token's inputs loaded
 * while this one is computed; TH_CU_DN_STEP_PREP the same after a parallel
 * pre-pass over the batch (q/k norms in u, k·q, beta, decay); TH_CU_DN_CHUNK the
 * chunked form after that pre-pass, W and U of every chunk at once, then the
 * sequential state pass; TH_CU_DN_CHUNK1 the chunked form in one kernel
 * (dn_chunk.cu; Dk <= 128, wider heads take the recurrent form). */
enum { TH_CU_DN_AUTO = -1, TH_CU_DN_STEP = 0, TH_CU_DN_STEP_PREP = 1, TH_CU_DN_CHUNK = 2, TH_CU_DN_CHUNK1 = 3 };
void th_cu_dn_set_variant(int v);

/* TH_CU_DN_AUTO takes the chunked form (in one kernel, TH_CU_DN_CHUNK1) once a
 * sequence has this many tokens in the batch. H200, bench_dn kernel (Dk 128, 16
 * heads, µs a call, recurrent after the pre-pass vs chunk1): one sequence of 64
 * tokens 72.9 vs 57.2, of 512 484 vs 367; 4 sequences of 16 each 50.8 vs 63.6
 * (the recurrent form wins), of 32 each 85.6 vs 75.3 (the chunked one wins). */
#define TH_CU_DN_CHUNK_MIN 32
/* The chunked form (dn_chunk.cu): the most tokens of a chunk. */
#define TH_CU_DN_CHUNK_LEN 64
/* The chunked form's scratch a token: W and U rows (Vd each), a row of P and γ, r per head. */
#define TH_CU_DN_WY_FLOATS(vd, nv) (2 * (int64_t)(vd) + (int64_t)(nv) * (TH_CU_DN_CHUNK_LEN + 2))
/* Internal: the chunked delta rule on the pre-pass's outputs (bd rows of [beta |
 * decay | log decay], 3·Nv); wy: the two-kernel form (needs d->wy). False if it does
 * not take this Dk (or has no scratch). */
bool th_cu_dn_chunk(const th_cu_dn *d, const float *u, const float *bd, const th_cu_dn_batch *b, float *out,
                    int64_t os, bool wy, cudaStream_t st);

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
