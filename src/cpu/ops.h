/* ops.h — the element-wise and row ops of the forward pass on the CPU (plain C;
 * the heavy ops, matmul and attention, are threaded in model.c on top of the
 * kernel table). Each follows ggml's arithmetic where that affects results
 * (e.g. sums in double for RMSNorm and softmax). */
#ifndef TH_CPU_OPS_H
#define TH_CPU_OPS_H

#include <stdint.h>

/* y = x / rms(x) * w  (w may be NULL: no weight) */
void th_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* Rotate one head in place. NORM: pairs (x[2i], x[2i+1]); NEOX: (x[i], x[i+n_rot/2]).
 * theta_i = pos * freq_scale * base^(-2i/n_rot) / (freq_factors ? freq_factors[i] : 1). */
void th_op_rope(float *x, int32_t n_rot, int32_t pos, float base, float freq_scale,
                const float *freq_factors, int rope_type);
/* In-place softmax over n values; returns nothing. */
void th_op_softmax(float *x, int64_t n);
/* a = act(gate) * up */
void th_op_swiglu(float *a, const float *gate, const float *up, int64_t n);
void th_op_geglu(float *a, const float *gate, const float *up, int64_t n);
void th_op_add(float *y, const float *x, int64_t n);
void th_op_scale(float *y, float s, int64_t n);
/* x = cap * tanh(x / cap) */
void th_op_softcap(float *x, float cap, int64_t n);

#endif
