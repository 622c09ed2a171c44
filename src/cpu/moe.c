/* moe.c — the routed experts of a mixture-of-experts FFN on the CPU. Routing (th_moe_route): router
 * logits → probabilities (softmax, sigmoid, or the raw logits for GPT-OSS),
 * top-k on the probabilities plus an optional selection bias, weights taken
 * from the unbiased probabilities (GPT-OSS: softmax over the k picked logits),
 * optionally renormalised and scaled; optionally limited to the best groups of
 * experts (DeepSeek-V3). The batch is then grouped by expert, so
 * each chosen expert's weights are read once per step for all its tokens; the
 * weighted outputs are summed per token in selection order, which makes a token's
 * result independent of what else is in the batch. Shared experts are a dense
 * FFN the decoder block (block.c) adds on top. An expert with a type of its own
 * (th_weight.experts, docs/precision.md) runs from its own copy. */
#include "cpu/moe.h"
#include "cpu/forward.h"
#include <math.h>

/* Group-limited routing: scores of experts outside the topk_group best groups
 * (a group's score: the sum of its two best) become -inf. */
static void limit_groups(const th_router *r, float *score) {
    int32_t per = r->n_expert / r->n_group;
    float gs[256];
    for (int32_t g = 0; g < r->n_group; g++) {
        float b1 = -INFINITY, b2 = -INFINITY;
        for (int32_t e = g * per; e < (g + 1) * per; e++) {
            if (score[e] > b1) { b2 = b1; b1 = score[e]; }
            else if (score[e] > b2) b2 = score[e];
        }
        gs[g] = per > 1 ? b1 + b2 : b1;
    }
    for (int32_t kept = 0; kept < r->topk_group; kept++) {   /* mark the best groups with +inf */
        int32_t best = -1;
        for (int32_t g = 0; g < r->n_group; g++)
            if (gs[g] != INFINITY && (best < 0 || gs[g] > gs[best])) best = g;
        if (best >= 0) gs[best] = INFINITY;
    }
    for (int32_t g = 0; g < r->n_group; g++)
        if (gs[g] != INFINITY)
            for (int32_t e = g * per; e < (g + 1) * per; e++) score[e] = -INFINITY;
}

void th_moe_route(const th_router *r, float *logits, float *score, int32_t *sel, float *w) {
    int32_t n = r->n_expert, k = r->k;
    if (r->gating == TH_GATING_SOFTMAX) th_op_softmax(logits, n);
    else if (r->gating == TH_GATING_SIGMOID) th_op_sigmoid(logits, n);
    for (int32_t e = 0; e < n; e++) score[e] = logits[e] + (r->sel_bias ? r->sel_bias[e] : 0.0f);
    if (r->n_group > 1) limit_groups(r, score);
    /* top-k of the selection scores, a partial selection sort (ties: lower id) */
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n; e++) {
            bool taken = false;
            for (int32_t i = 0; i < j; i++) taken |= sel[i] == e;
            if (!taken && (best < 0 || score[e] > score[best])) best = e;
        }
        sel[j] = best;
        w[j] = logits[best];
    }
    if (r->gating == TH_GATING_SOFTMAX_SELECTED) th_op_softmax(w, k);
    if (r->norm) {
        double sum = 0;
        for (int32_t j = 0; j < k; j++) sum += w[j];
        float s = (float)sum;
        for (int32_t j = 0; j < k; j++) w[j] /= s;
    }
    if (r->scale != 1.0f)
        for (int32_t j = 0; j < k; j++) w[j] *= r->scale;
}

/* Route every token and bucket the (token, slot) pairs by expert. */
static void route_batch(th_cpu *c, const th_layer *L, const float *in, int32_t n) {
    const th_hparams *hp = &c->model->hp;
    int32_t X = hp->n_expert, k = hp->n_expert_used;
    th_fwd_matmul(c, &L->router, 0, in, hp->n_embd, n, c->moe_logits, X);
    th_fwd_add_bias(L->router_b.data, X, c->moe_logits, X, n);
    th_router r = { .n_expert = X, .k = k, .gating = hp->gating, .norm = hp->expert_weights_norm,
                    .scale = hp->expert_weights_scale, .sel_bias = L->exp_probs_b.data,
                    .n_group = hp->n_expert_groups, .topk_group = hp->n_expert_groups_used };
    const th_observer *o = c->obs;
    int32_t il = (int32_t)(L - c->model->layers);
    for (int32_t t = 0; t < n; t++) {
        th_moe_route(&r, c->moe_logits + (int64_t)t * X, c->moe_score, c->moe_sel + (int64_t)t * k, c->moe_w + (int64_t)t * k);
        if (o && o->routing) o->routing(o->ud, il, t, k, c->moe_sel + (int64_t)t * k, c->moe_score, X);
    }
    /* counting sort of the n·k slots by expert */
    int32_t *start = c->moe_start;
    memset(start, 0, (size_t)(X + 1) * sizeof *start);
    for (int32_t i = 0; i < n * k; i++) start[c->moe_sel[i] + 1]++;
    for (int32_t e = 0; e < X; e++) start[e + 1] += start[e];
    int32_t *fill = c->moe_start + X + 1;     /* X more ints of cursor space */
    memcpy(fill, start, (size_t)X * sizeof *fill);
    for (int32_t i = 0; i < n * k; i++) c->moe_rows[fill[c->moe_sel[i]]++] = i;
}

/* Expert e's matrix of w: its own copy (a type of its own, docs/precision.md) as a
 * one-matrix view in *tmp, or w's matrix e. */
static const th_weight *expert_mat(const th_weight *w, int32_t e, th_weight *tmp, int64_t *mat) {
    const th_expert_slot *x = th_weight_expert(w, e);
    *mat = e;
    if (!x) return w;
    *tmp = (th_weight){ .data = x->data, .type = x->type, .ne0 = w->ne0, .ne1 = w->ne1, .ne2 = 1,
                        .row_bytes = x->row_bytes, .name = w->name, .packed = x->packed };
    *mat = 0;
    return tmp;
}

/* Expert e over its m gathered rows in c->moe_x; weighted outputs into moe_y. */
static void run_expert(th_cpu *c, const th_layer *L, int32_t e, const int32_t *slots, int32_t m) {
    const th_hparams *hp = &c->model->hp;
    int64_t E = hp->n_embd, F = hp->n_ff_exp, mg, mu, md;
    th_weight tg, tu, td;
    const th_weight *gate = expert_mat(&L->gate_exps, e, &tg, &mg), *up = expert_mat(&L->up_exps, e, &tu, &mu);
    const th_weight *dn = expert_mat(&L->down_exps, e, &td, &md);
    /* the observer sees expert e whether it runs from its own copy (a one-matrix view) or not */
    th_fwd_matmul_as(c, gate, mg, e, c->moe_x, E, m, c->ff_g, c->ff_w);
    th_fwd_matmul_as(c, up, mu, e, c->moe_x, E, m, c->ff_u, c->ff_w);
    if (L->gate_exps_b.data) th_fwd_add_bias((const float *)L->gate_exps_b.data + e * F, F, c->ff_g, c->ff_w, m);
    if (L->up_exps_b.data) th_fwd_add_bias((const float *)L->up_exps_b.data + e * F, F, c->ff_u, c->ff_w, m);
    for (int32_t i = 0; i < m; i++) th_fwd_act(c, c->ff_g + i * c->ff_w, c->ff_u + i * c->ff_w, F);
    float *down = c->moe_x;                   /* the gathered inputs are no longer needed */
    th_fwd_matmul_as(c, dn, md, e, c->ff_g, c->ff_w, m, down, E);
    if (L->down_exps_b.data) th_fwd_add_bias((const float *)L->down_exps_b.data + e * E, E, down, E, m);
    for (int32_t i = 0; i < m; i++) {
        float *dst = c->moe_y + (int64_t)slots[i] * E, wt = c->moe_w[slots[i]];
        const float *src = down + (int64_t)i * E;
        for (int64_t j = 0; j < E; j++) dst[j] = src[j] * wt;
    }
}

void th_moe_ffn(th_cpu *c, const th_layer *L, const float *in, int32_t n, float *out) {
    const th_hparams *hp = &c->model->hp;
    int32_t X = hp->n_expert, k = hp->n_expert_used;
    int64_t E = hp->n_embd;
    route_batch(c, L, in, n);
    for (int32_t e = 0; e < X; e++) {
        int32_t a = c->moe_start[e], m = c->moe_start[e + 1] - a;
        if (m == 0) continue;
        const int32_t *slots = c->moe_rows + a;
        for (int32_t i = 0; i < m; i++)
            memcpy(c->moe_x + (int64_t)i * E, in + (int64_t)(slots[i] / k) * E, (size_t)E * sizeof(float));
        run_expert(c, L, e, slots, m);
    }
    for (int32_t t = 0; t < n; t++) {
        float *o = out + (int64_t)t * E;
        memcpy(o, c->moe_y + (int64_t)t * k * E, (size_t)E * sizeof(float));
        for (int32_t j = 1; j < k; j++) th_op_add(o, c->moe_y + ((int64_t)t * k + j) * E, E);
    }
}
