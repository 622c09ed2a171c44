/* ops.h — the element-wise and row ops of the forward pass on the CPU (plain C;
 * the heavy ops, matmul and attention, are threaded in model.c on top of the
 * kernel table). Each follows ggml's arithmetic where that affects results
 * (e.g. sums in double for RMSNorm and softmax). */
#ifndef TH_CPU_OPS_H
#define TH_CPU_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* y = x / rms(x) * w  (w may be NULL: no weight) */
void th_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* Rotary embedding of one head, with YaRN when ext_factor != 0. */
typedef struct th_rope_params {
    int32_t n_rot, type;                     /* TH_ROPE_NORM / TH_ROPE_NEOX (model.h) */
    float base, freq_scale;
    float ext_factor, attn_factor;           /* YaRN mix (0 = off), cos/sin magnitude */
    float corr_lo, corr_hi;                  /* YaRN ramp dims (th_rope_corr_dims) */
    const float *freq_factors;               /* n_rot/2 divisors of theta, or NULL */
} th_rope_params;
/* YaRN correction dims [lo, hi] for n_rot dims, as ggml_rope_yarn_corr_dims. */
void th_rope_corr_dims(int32_t n_rot, int32_t n_ctx_orig, float base, float beta_fast, float beta_slow,
                       float *lo, float *hi);
/* Rotate one head in place. NORM: pairs (x[2i], x[2i+1]); NEOX: (x[i], x[i+n_rot/2]).
 * theta_i = pos * base^(-2i/n_rot) / freq_factors[i], interpolated by freq_scale
 * (YaRN ramps between the two by dimension). */
void th_op_rope_ext(float *x, int32_t pos, const th_rope_params *r);
/* The same in two steps, for many heads at one position: the table of the angles'
 * cosines and sines (cs: 2 * TH_ROPE_TABLE_MAX floats; false, nothing written, when
 * n_rot / 2 is larger), then its application to one head (results identical to
 * th_op_rope_ext). */
enum { TH_ROPE_TABLE_MAX = 256 };
bool th_op_rope_table(float *cs, int32_t pos, const th_rope_params *r);
void th_op_rope_apply(float *x, const float *cs, const th_rope_params *r);
/* The plain form (no YaRN, magnitude 1). */
void th_op_rope(float *x, int32_t n_rot, int32_t pos, float base, float freq_scale,
                const float *freq_factors, int rope_type);
/* In-place softmax over n values. */
void th_op_softmax(float *x, int64_t n);
/* Softmax whose denominator also holds exp(sink) (an attention sink; not a value). */
void th_op_softmax_sink(float *x, int64_t n, float sink);
/* One gated delta-rule step of one head (hybrid models, cpu/deltanet.c), dk ≤ 1024:
 * S is dk × dk, S[i*dk + j] (key i, value j); q, k L2-normalised. v' = Sᵀk, o = Sᵀq,
 * n = beta·v − beta·decay·v', out = decay·scale·o + scale·(k·q)·n,
 * S = clamp(decay·S + k ⊗ n, ±1e6) — ik_llama.cpp's fused delta-net order. */
void th_op_dn_step(int32_t dk, float *S, const float *q, const float *k, const float *v, float beta, float decay,
                   float scale, float *out);
/* The same rule over a chunk of tokens (cpu/dn_chunk.h; the kernel table's dn_chunk). */
void th_op_dn_chunk(int32_t dk, int32_t L, float *S, const float *q, const float *k, const float *v, int64_t xs,
                    const float *beta, const float *lg, int64_t gs, float scale, float *out, int64_t os, float *work);
/* a = act(gate) * up */
void th_op_swiglu(float *a, const float *gate, const float *up, int64_t n);
void th_op_geglu(float *a, const float *gate, const float *up, int64_t n);
/* GPT-OSS: g = min(gate, limit), u = clamp(up, -limit, limit), a = g·σ(alpha·g)·(u + 1) */
void th_op_swiglu_oai(float *a, const float *gate, const float *up, int64_t n, float alpha, float limit);
void th_op_add(float *y, const float *x, int64_t n);
void th_op_scale(float *y, float s, int64_t n);
/* x = cap * tanh(x / cap) */
void th_op_softcap(float *x, float cap, int64_t n);
/* x = 1 / (1 + exp(-x)) */
void th_op_sigmoid(float *x, int64_t n);

#endif
