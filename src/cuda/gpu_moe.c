/* gpu_moe.c — the host side of the CUDA backend's mixture-of-experts FFN: its
 * scratch, and the launch sequence of one MoE layer (kernels in moe.cu, the
 * grouped GEMMs in gemm.cu). Both paths start with the router GEMV (+ bias) and
 * the routing on the device (sel[n][k], w[n][k]) and end with the weighted sum of
 * the pairs' outputs in selection order (th_cu_moe_sum), so both add the same
 * products in the same order:
 *   per-pair GEMV (batches below gemm_min: decode, small batches): gate|up of each
 *     pair p = t·k + j with expert sel[p] (+ expert biases) → GLU → down (+ bias).
 *     Nothing is read back to the host, so this runs inside CUDA graph capture.
 *     From tuning.moe_order_min tokens the GEMVs walk the pairs grouped by expert
 *     (th_cu_moe_order on the device): the same products, a shared expert's rows
 *     read from L2 by all but its first pair; from moe_group_min the int8 experts
 *     run per hit expert, one weight load serving several of its pairs.
 *     Split-layout (int8) experts read q8 activations as the dense GEMV does;
 *     every other type reads fp32 activations.
 *   grouped GEMM (batches on the GEMM path, i.e. prefill: eager, never captured):
 *     sel comes back to the host, the pairs are sorted by expert (counting sort;
 *     an expert's pairs in increasing order form its segment), their inputs are
 *     gathered in segment order, and each hit expert's gate, up and down run as
 *     one cuBLAS GEMM over its segment (th_cu_gemm_experts: 16-bit inputs, or fp32
 *     for F32 weights, as the dense GEMM path), expert biases added after each
 *     product as the GEMV does, one GLU over all rows; the sum reads each pair's
 *     output at its segment row (no scatter pass). An expert's weights are read
 *     once a layer instead of once a pair. The tuning's moe_gemv_only keeps every
 *     batch on the GEMV path (for A/B timing).
 * The layer's router and experts reach the kernels as a th_cu_moe view made
 * from their th_weight device copies (moe_view).
 * Per-expert types (docs/precision.md): a matrix whose experts are in several
 * parts (th_cu_parts, one type each) runs each part's kernel over the pairs of its
 * experts (the GEMV: every pair, the slot map skipping the others; the grouped
 * path: the part's hit experts only), so an expert's products are those of a
 * uniform matrix of its type, bit for bit; gate and up then run as two GEMVs. */
#include "cuda/gpu_internal.h"
#include <stdlib.h>
#include <string.h>

/* The grouped path's buffers: device pair order and 16-bit inputs, pinned staging. */
static th_status alloc_grouped(th_gpu *g, size_t P, int64_t X, int64_t qk) {
    th_status s;
    if ((s = th_cu_alloc(&g->mem, (void **)&g->moe_idx, 2 * P * 4, "mixture-of-experts pair order")) ||
        (s = th_cu_alloc(&g->mem, &g->moe_xh, P * (size_t)qk * 2, "mixture-of-experts GEMM inputs")))
        return s;
    cudaError_t e = cudaMallocHost((void **)&g->h_moe, (3 * P + 4 * (size_t)X) * 4);
    if (e) { g->h_moe = NULL; return th_cu_fail(e, "pinned mixture-of-experts staging"); }
    return TH_OK;
}

th_status th_cu_moe_alloc(th_gpu *g) {
    const th_hparams *hp = &g->m->hp;
    int64_t X = 0, k = 0, F = 0;
    for (int i = 0; i < hp->n_layer; i++) {
        const th_layer *L = &g->m->layers[i];
        if (!L->router.data) continue;
        X = TH_MAX(X, (int64_t)hp->n_expert);
        k = TH_MAX(k, (int64_t)hp->n_expert_used);
        F = TH_MAX(F, L->gate_exps.ne1);
    }
    if (X == 0) return TH_OK;
    size_t B = g->n_batch, P = B * (size_t)k;
    int64_t qk = TH_MAX(g->E, F);
    struct { void **p; size_t bytes; } a[] = {
        { (void **)&g->moe_logits, B * X * 4 },
        { (void **)&g->moe_sel, P * 4 }, { (void **)&g->moe_order, P * 4 }, { (void **)&g->moe_w, P * 4 },
        { (void **)&g->moe_seg, (1 + 3 * (size_t)TH_MIN((int64_t)P, X)) * 4 },
        { (void **)&g->moe_gu, P * 2 * F * 4 }, { (void **)&g->moe_act, P * F * 4 },
        { (void **)&g->moe_y, P * g->E * 4 }, { (void **)&g->moe_q8.q, P * qk },
        { (void **)&g->moe_q8.d, P * (qk / 32 + 1) * 4 }, { (void **)&g->moe_q8.s, P * (qk / 32 + 1) * 4 },
    };
    th_status s;
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if ((s = th_cu_alloc(&g->mem, a[i].p, a[i].bytes, "mixture-of-experts scratch"))) return s;
    if (g->tune.moe_gemv_only || (uint32_t)g->tune.gemm_min > g->n_batch) return TH_OK;  /* no batch takes the grouped path */
    return alloc_grouped(g, P, X, qk);
}

/* Layer L's router and experts as the kernels take them. */
static th_cu_moe moe_view(const th_gpu *g, const th_layer *L) {
    const th_hparams *hp = &g->m->hp;
    const th_cu_weight *sb = L->exp_probs_b.dev;
    int32_t ng = hp->n_expert_groups > 1 ? hp->n_expert_groups : 0;
    const th_cu_weight *rb = L->router_b.dev, *gb = L->gate_exps_b.dev, *ub = L->up_exps_b.dev, *db = L->down_exps_b.dev;
    return (th_cu_moe){ .n_expert = hp->n_expert, .k = hp->n_expert_used, .F = L->gate_exps.ne1,
                        .router = &th_cu_w(&L->router)->mat, .gate = &th_cu_w(&L->gate_exps)->mat,
                        .up = &th_cu_w(&L->up_exps)->mat, .down = &th_cu_w(&L->down_exps)->mat,
                        .gate_p = th_cu_w(&L->gate_exps)->parts, .up_p = th_cu_w(&L->up_exps)->parts,
                        .down_p = th_cu_w(&L->down_exps)->parts,
                        .router_b = rb ? rb->vec : NULL, .gate_b = gb ? gb->vec : NULL, .up_b = ub ? ub->vec : NULL,
                        .down_b = db ? db->vec : NULL,
                        .route = { .n_expert = hp->n_expert, .k = hp->n_expert_used, .gating = hp->gating,
                                   .norm = hp->expert_weights_norm, .scale = hp->expert_weights_scale,
                                   .sel_bias = sb ? sb->vec : NULL, .n_group = ng, .topk_group = hp->n_expert_groups_used } };
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

/* Whether a GEMV of w (or of any of its parts) reads q8 activations. */
static bool any_q8(const th_cu_mat *w, const th_cu_parts *P) {
    bool q = th_cu_gemv_wants_q8(w);
    for (int i = 0; P && i < P->n; i++) q = q || th_cu_gemv_wants_q8(&P->p[i].mat);
    return q;
}

/* The per-pair GEMV of one expert matrix split into parts: each part over the pairs of its experts. */
static void parts_gemv(th_gpu *g, const th_cu_parts *P, const float *b, int64_t rpe, int pairs,
                       const th_cu_moe_walk *walk, int x_div, const float *x, int64_t xs, bool q8, float *y, int64_t ys) {
    for (int i = 0; i < P->n; i++)
        th_cu_moe_gemv_part(&P->p[i].mat, P->p[i].slot, b, rpe, g->moe_sel, pairs, walk, x_div, x, xs,
                            q8 ? &g->moe_q8 : NULL, y, ys, g->st);
}

/* The per-pair GEMV path after the routing: gate|up, GLU, down, weighted sum. */
static void moe_gemv_path(th_gpu *g, const th_cu_moe *M, int n, const float *h, float *out, bool eq) {
    cudaStream_t st = g->st;
    int64_t E = g->E, F = M->F;
    int k = M->k, pairs = n * k;
    bool dq = any_q8(M->down, M->down_p);
    /* the GEMVs walk the pairs grouped by expert from moe_order_min tokens (a shared expert's rows from L2),
     * the int8 ones per hit expert from moe_group_min (one weight load for several of its pairs) */
    th_cu_moe_walk wk = { .order = g->moe_order, .n_slots = TH_MIN(pairs, M->n_expert) };
    const th_cu_moe_walk *walk = NULL;
    bool group = g->tune.moe_group_min > 0 && n >= g->tune.moe_group_min;
    if (group || (g->tune.moe_order_min > 0 && n >= g->tune.moe_order_min)) {
        wk.seg = group ? g->moe_seg : NULL;
        th_cu_moe_order(g->moe_sel, pairs, M->n_expert, &wk, st);
        walk = &wk;
    }
    /* pair p = t·k + j: gate|up of expert sel[p] on h[t], GLU, down */
    if (!M->gate_p && !M->up_p) {
        th_cu_moe_gemv(M->gate, M->up, M->gate_b, M->up_b, F, g->moe_sel, pairs, walk, k, h, E, eq ? &g->moe_q8 : NULL,
                       g->moe_gu, 2 * F, st);
    } else {   /* per-expert types: gate and up each by its parts */
        const th_cu_mat *w[2] = { M->gate, M->up };
        const th_cu_parts *P[2] = { M->gate_p, M->up_p };
        const float *b[2] = { M->gate_b, M->up_b };
        for (int i = 0; i < 2; i++) {
            if (P[i]) parts_gemv(g, P[i], b[i], F, pairs, walk, k, h, E, eq, g->moe_gu + i * F, 2 * F);
            else th_cu_moe_gemv(w[i], NULL, b[i], NULL, F, g->moe_sel, pairs, walk, k, h, E, eq ? &g->moe_q8 : NULL,
                                g->moe_gu + i * F, 2 * F, st);
        }
    }
    glu_rows(g, F, pairs, g->m->hp.act_fn, dq);
    if (M->down_p) parts_gemv(g, M->down_p, M->down_b, E, pairs, walk, 1, g->moe_act, F, dq, g->moe_y, E);
    else th_cu_moe_gemv(M->down, NULL, M->down_b, NULL, E, g->moe_sel, pairs, walk, 1, g->moe_act, F,
                        dq ? &g->moe_q8 : NULL, g->moe_y, E, st);
    /* out[t] = Σ_j w[t][j] · y[t·k + j] */
    th_cu_moe_sum(g->moe_y, E, g->moe_w, k, n, E, NULL, out, E, st);
}

/* The hit experts and their segments: rows off[i] .. off[i]+cnt[i]−1 belong to
 * expert ex[i] (ids increasing); `rows` in all. */
typedef struct {
    int n_hit, rows;
    const int32_t *ex, *off, *cnt;
} moe_segs;

/* Counting sort of the pairs by expert (sel: n_pairs host ids): list[i] = the
 * pair at segment row i, row[p] = the segment row of pair p, start: X scratch.
 * Returns the number of hit experts (ex/off/cnt filled), or −1 when an id is
 * outside [0, X). */
static int sort_pairs(const int32_t *sel, int n_pairs, int X, int32_t *list, int32_t *row, int32_t *start, int32_t *ex,
                      int32_t *off, int32_t *cnt) {
    memset(start, 0, (size_t)X * sizeof *start);
    for (int p = 0; p < n_pairs; p++) {
        if (sel[p] < 0 || sel[p] >= X) return -1;
        start[sel[p]]++;
    }
    int n_hit = 0, at = 0;
    for (int e = 0; e < X; e++) {
        int c = start[e];
        start[e] = at;
        if (c) { ex[n_hit] = e; off[n_hit] = at; cnt[n_hit] = c; n_hit++; }
        at += c;
    }
    for (int p = 0; p < n_pairs; p++) {
        int i = start[sel[p]]++;
        list[i] = p;
        row[p] = i;
    }
    return n_hit;
}

/* y (segment rows, ys apart) = each hit expert of stacked w (rpe rows an expert) · its rows of x. */
static th_status experts_mm1(th_gpu *g, const th_cu_mat *w, int64_t rpe, const moe_segs *sg, const float *x, int64_t xs,
                             float *y, int64_t ys) {
    if (th_cu_gemm_experts(g->cublas, w, rpe, sg->n_hit, sg->ex, sg->off, sg->cnt, sg->rows, x, xs, y, ys, g->wbuf,
                           g->wbuf_bytes, g->moe_xh, g->st))
        return TH_OK;
    return th_set_error(TH_ERR_INTERNAL, "cuBLAS grouped expert GEMM failed (%s, %d experts of %lld×%lld, %d rows)",
                        th_type_name(w->type), sg->n_hit, (long long)rpe, (long long)w->K, sg->rows);
}

/* The same for a matrix in parts (per-expert types): each part over its hit
 * experts (their blocks in the part, increasing as the ids), the same segments. */
static th_status experts_mm(th_gpu *g, const th_cu_mat *w, const th_cu_parts *P, int64_t rpe, const moe_segs *sg,
                            const float *x, int64_t xs, float *y, int64_t ys) {
    if (!P) return experts_mm1(g, w, rpe, sg, x, xs, y, ys);
    int32_t *buf = malloc((size_t)sg->n_hit * 3 * sizeof *buf);
    if (!buf) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_status s = TH_OK;
    for (int i = 0; i < P->n && !s; i++) {
        moe_segs ps = { .n_hit = 0, .rows = sg->rows, .ex = buf, .off = buf + sg->n_hit, .cnt = buf + 2 * sg->n_hit };
        for (int j = 0; j < sg->n_hit; j++) {
            int32_t b = P->p[i].hslot[sg->ex[j]];
            if (b < 0) continue;
            buf[ps.n_hit] = b;
            buf[sg->n_hit + ps.n_hit] = sg->off[j];
            buf[2 * sg->n_hit + ps.n_hit] = sg->cnt[j];
            ps.n_hit++;
        }
        if (ps.n_hit) s = experts_mm1(g, &P->p[i].mat, rpe, &ps, x, xs, y, ys);
    }
    free(buf);
    return s;
}

/* sel to the host, the pairs sorted by expert there, their order (list | row) back. */
static th_status plan_segments(th_gpu *g, int n_pairs, int X, moe_segs *sg) {
    cudaStream_t st = g->st;
    int32_t *sel = g->h_moe, *list = sel + n_pairs, *row = list + n_pairs, *start = row + n_pairs;
    int32_t *ex = start + X, *off = ex + X, *cnt = off + X;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(st, &cs);
    if (!e && cs != cudaStreamCaptureStatusNone)
        return th_set_error(TH_ERR_INTERNAL, "MoE grouped GEMM path reached inside a CUDA graph capture");
    if (!e) e = cudaMemcpyAsync(sel, g->moe_sel, (size_t)n_pairs * 4, cudaMemcpyDeviceToHost, st);
    if (!e) e = cudaStreamSynchronize(st);
    if (e) return th_cu_fail(e, "MoE expert choice download");
    int n_hit = sort_pairs(sel, n_pairs, X, list, row, start, ex, off, cnt);
    if (n_hit < 0) return th_set_error(TH_ERR_INTERNAL, "MoE routing chose an expert outside [0, %d)", X);
    /* list and row stay untouched until the next layer's synchronize: the upload has finished by then */
    if ((e = cudaMemcpyAsync(g->moe_idx, list, (size_t)n_pairs * 2 * 4, cudaMemcpyHostToDevice, st)))
        return th_cu_fail(e, "MoE pair order upload");
    *sg = (moe_segs){ .n_hit = n_hit, .rows = n_pairs, .ex = ex, .off = off, .cnt = cnt };
    return TH_OK;
}

/* The grouped path after the routing: per hit expert one GEMM for gate, up and down. */
static th_status moe_grouped_path(th_gpu *g, const th_cu_moe *M, int n, const float *h, float *out) {
    cudaStream_t st = g->st;
    int64_t E = g->E, F = M->F;
    int k = M->k, pairs = n * k;
    moe_segs sg;
    th_status s;
    if ((s = plan_segments(g, pairs, M->n_expert, &sg))) return s;
    const int32_t *list = g->moe_idx, *row = g->moe_idx + pairs;
    th_cu_moe_gather(h, E, list, k, pairs, E, g->moe_y, E, st);  /* moe_y: the inputs until down writes it */
    if ((s = experts_mm(g, M->gate, M->gate_p, F, &sg, g->moe_y, E, g->moe_gu, 2 * F)) ||
        (s = experts_mm(g, M->up, M->up_p, F, &sg, g->moe_y, E, g->moe_gu + F, 2 * F)))
        return s;
    if (M->gate_b) th_cu_moe_bias(g->moe_gu, 2 * F, M->gate_b, F, list, g->moe_sel, pairs, st);
    if (M->up_b) th_cu_moe_bias(g->moe_gu + F, 2 * F, M->up_b, F, list, g->moe_sel, pairs, st);
    glu_rows(g, F, pairs, g->m->hp.act_fn, false);
    if ((s = experts_mm(g, M->down, M->down_p, E, &sg, g->moe_act, F, g->moe_y, E))) return s;
    if (M->down_b) th_cu_moe_bias(g->moe_y, E, M->down_b, E, list, g->moe_sel, pairs, st);
    th_cu_moe_sum(g->moe_y, E, g->moe_w, k, n, E, row, out, E, st);
    return TH_OK;
}

th_status th_cu_moe_ffn(th_gpu *g, const th_layer *L, int n, const float *h, float *out, bool gemm) {
    cudaStream_t st = g->st;
    int64_t E = g->E;
    th_cu_moe view = moe_view(g, L);
    const th_cu_moe *M = &view;
    int32_t X = M->n_expert, k = M->k;
    if (n < 1 || (uint32_t)n > g->n_batch || X < 1 || k < 1 || k > X)
        return th_set_error(TH_ERR_INTERNAL, "MoE FFN: %d tokens, %d of %d experts", n, k, X);
    bool grouped = gemm && g->h_moe;
    bool rq = th_cu_gemv_wants_q8(M->router);
    bool eq = !grouped && (any_q8(M->gate, M->gate_p) || any_q8(M->up, M->up_p));
    if (rq || eq) th_cu_quantize_q8(h, E, n, E, &g->moe_q8, st);
    /* router logits → sel, w (the router stays a GEMV on both paths: the same choice) */
    th_cu_gemv(M->router, h, E, rq ? &g->moe_q8 : NULL, n, g->moe_logits, X, false, st);
    if (M->router_b) th_cu_add_bias(g->moe_logits, X, M->router_b, X, n, st);
    th_cu_moe_route(g->moe_logits, n, &M->route, g->moe_sel, g->moe_w, st);
    if (grouped) return moe_grouped_path(g, M, n, h, out);
    moe_gemv_path(g, M, n, h, out, eq);
    return TH_OK;
}
