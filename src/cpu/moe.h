/* moe.h — expert routing (moe.c): from one token's router logits to the chosen
 * experts and their weights. Separate from the forward pass so tests can check
 * the arithmetic on hand-computed cases. */
#ifndef TH_MOE_H
#define TH_MOE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct th_router {
    int32_t n_expert, k;
    int32_t gating;                /* enum th_gating (model.h) */
    bool norm;                     /* renormalise the k weights to sum 1 */
    float scale;                   /* then multiply them */
    const float *sel_bias;         /* added to the probabilities for selection only, or NULL */
    int32_t n_group, topk_group;   /* group-limited routing (DeepSeek-V3): experts are split in
                                    * n_group equal groups, a group scores the sum of its 2 best
                                    * selection scores, only the topk_group best groups compete;
                                    * n_group <= 1: off */
} th_router;

/* logits[n_expert] (overwritten with the probabilities); writes k expert ids,
 * best first (ties: lower id first), and their weights. scratch: n_expert floats. */
void th_moe_route(const th_router *r, float *logits, float *scratch, int32_t *sel, float *w);

#endif
