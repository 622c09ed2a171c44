/* greedy.h — the greedy pick shared by the sampler and th_get_argmax (model.c):
 * one rule, so that th_get_argmax returns what a greedy th_sampler_sample would. */
#ifndef TH_SAMPLE_GREEDY_H
#define TH_SAMPLE_GREEDY_H

#include <stdbool.h>
#include <stdint.h>

/* Argmax of x[0..n): NaN counts as -inf and +inf as FLT_MAX (the sampler's
 * sanitize step), the lowest index among the largest values wins, 0 when every
 * value is NaN or -inf. The CUDA kernel (src/cuda/argmax.cu) follows the same rule. */
int32_t th_greedy_argmax(const float *x, int64_t n);

/* A chain that is an argmax over logits + bias with every bias <= 0 and no
 * penalties (e.g. a greedy request that bans its end-of-generation tokens): the
 * argmax t of the raw logits is then what th_sampler_sample returns whenever
 * th_sampler_bias_of(s, t) is 0 (bias only lowers the others; the lowest id wins
 * ties in both). th_sampler_bias_of: token t's bias (0 without a bias table). */
struct th_sampler;
bool th_sampler_greedy_below(const struct th_sampler *s);
float th_sampler_bias_of(const struct th_sampler *s, int32_t t);

#endif
