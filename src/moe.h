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
} th_router;

/* logits[n_expert] (overwritten with the probabilities); writes k expert ids,
 * best first (ties: lower id first), and their weights. */
void th_moe_route(const th_router *r, float *logits, int32_t *sel, float *w);

#endif
