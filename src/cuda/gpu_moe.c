/* gpu_moe.c — the host side of the CUDA backend's mixture-of-experts FFN: its
 * scratch, and the launch sequence of one MoE layer (kernels in moe.cu):
 *   router GEMV (+ bias) → routing (sel[n][k], w[n][k] on the device) →
 *   gate|up of each token's selected experts (+ expert biases) → GLU → down
 *   (+ bias) → weighted sum in selection order.
 * Nothing is read back to the host, so the sequence runs inside CUDA graph
 * capture, for any batch size. Every expert product is a GEMV (no GEMM path):
 * correctness first. Split-layout (int8) experts read q8 activations as the
 * dense GEMV does; every other type reads fp32 activations. */
#include "cuda/gpu_internal.h"

th_status th_cu_moe_alloc(th_gpu *g) {
    const th_hparams *hp = &g->m->hp;
    int64_t X = 0, k = 0, F = 0;
    for (int i = 0; i < hp->n_layer; i++) {
        const th_cu_moe *M = &g->L[i].moe;
        X = TH_MAX(X, (int64_t)M->n_expert);
        k = TH_MAX(k, (int64_t)M->k);
        F = TH_MAX(F, M->F);
    }
    if (X == 0) return TH_OK;
    size_t B = g->n_batch, P = B * (size_t)k;
    int64_t qk = TH_MAX(g->E, F);
    struct { void **p; size_t bytes; } a[] = {
        { (void **)&g->moe_logits, B * X * 4 }, { (void **)&g->moe_score, B * X * 4 },
        { (void **)&g->moe_sel, P * 4 }, { (void **)&g->moe_w, P * 4 },
        { (void **)&g->moe_gu, P * 2 * F * 4 }, { (void **)&g->moe_act, P * F * 4 },
        { (void **)&g->moe_y, P * g->E * 4 }, { (void **)&g->moe_q8.q, P * qk },
        { (void **)&g->moe_q8.d, P * (qk / 32 + 1) * 4 }, { (void **)&g->moe_q8.s, P * (qk / 32 + 1) * 4 },
    };
    th_status s;
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if ((s = th_cu_alloc(g, a[i].p, a[i].bytes, "mixture-of-experts scratch"))) return s;
    return TH_OK;
}

/* The GLU over `rows` rows of gate|up, in slices that keep the grid's y size legal. */
static void glu_rows(th_gpu *g, int64_t F, int64_t rows, int act, bool q8) {
    const int64_t slice = 32768;
    for (int64_t r0 = 0; r0 < rows; r0 += slice) {
        int c = (int)TH_MIN(slice, rows - r0);
        th_cu_q8 q = { g->moe_q8.q + r0 * F, g->moe_q8.d + r0 * (F / 32), g->moe_q8.s + r0 * (F / 32) };
        th_cu_glu(g->moe_gu + r0 * 2 * F, 2 * F, F, c, act, g->moe_act + r0 * F, F, q8 ? &q : NULL, g->st);
    }
}

th_status th_cu_moe_ffn(th_gpu *g, const th_cu_moe *M, int n, const float *h, float *out) {
    cudaStream_t st = g->st;
    int64_t E = g->E, F = M->F;
    int32_t X = M->n_expert, k = M->k;
    int pairs = n * k;
    if (n < 1 || (uint32_t)n > g->n_batch || X < 1 || k < 1 || k > X)
        return th_set_error(TH_ERR_INTERNAL, "MoE FFN: %d tokens, %d of %d experts", n, k, X);
    bool rq = th_cu_gemv_wants_q8(&M->router);
    bool eq = th_cu_gemv_wants_q8(&M->gate) || th_cu_gemv_wants_q8(&M->up);
    bool dq = th_cu_gemv_wants_q8(&M->down);
    if (rq || eq) th_cu_quantize_q8(h, E, n, E, &g->moe_q8, st);
    /* router logits → sel, w */
    th_cu_gemv(&M->router, h, E, rq ? &g->moe_q8 : NULL, n, g->moe_logits, X, false, st);
    if (M->router_b) th_cu_add_bias(g->moe_logits, X, M->router_b, X, n, st);
    th_cu_moe_route(g->moe_logits, g->moe_score, n, &M->route, g->moe_sel, g->moe_w, st);
    /* pair p = t·k + j: gate|up of expert sel[p] on h[t], GLU, down */
    th_cu_moe_gemv(&M->gate, &M->up, M->gate_b, M->up_b, F, g->moe_sel, pairs, k, h, E, eq ? &g->moe_q8 : NULL, g->moe_gu, 2 * F, st);
    glu_rows(g, F, pairs, g->m->hp.act_fn, dq);
    th_cu_moe_gemv(&M->down, NULL, M->down_b, NULL, E, g->moe_sel, pairs, 1, g->moe_act, F, dq ? &g->moe_q8 : NULL, g->moe_y, E, st);
    /* out[t] = Σ_j w[t][j] · y[t·k + j] */
    th_cu_moe_sum(g->moe_y, E, g->moe_w, k, n, E, out, E, st);
    return TH_OK;
}
