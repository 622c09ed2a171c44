/* greedy.h — the greedy pick shared by the sampler and th_get_argmax (model.c):
 * one rule, so that th_get_argmax returns what a greedy th_sampler_sample would. */
#ifndef TH_SAMPLE_GREEDY_H
#define TH_SAMPLE_GREEDY_H

#include <stdint.h>

/* Argmax of x[0..n): NaN counts as -inf and +inf as FLT_MAX (the sampler's
 * sanitize step), the lowest index among the largest values wins, 0 when every
 * value is NaN or -inf. The CUDA kernel (src/cuda/argmax.cu) follows the same rule. */
int32_t th_greedy_argmax(const float *x, int64_t n);

#endif
