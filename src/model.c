/* model.c — the forward pass. One call, th_decode(), takes a ragged batch (tokens of
 * any sequences, each with its position) through the generic decoder block:
 *
 *   x = embed(tokens) · embd_scale
 *   per layer:  h = norm(x);  q,k,v = h·Wq,k,v (+bias) [fused qkv | MLA: mla.c];
 *               q/k-norm (per head or whole width);  rope(q,k) [YaRN]
 *               K,V → paged cache;  a = softmax(q·Kᵀ·scale [softcap, window, sink]) · V
 *               x += [post_norm](a·Wo + bo)
 *               h = norm(x);  x += [post_norm](FFN(h))
 *                 FFN = down(act(h·Wgate) ⊙ h·Wup)  or a mixture of experts (moe.c)
 *   logits = norm(x)·Wout [final softcap], only for the tokens that asked
 *
 * Matmuls quantize their activation rows once, then split weight rows across
 * the thread pool; attention (attention.c) splits blocks of (token, head) rows. All scratch memory is
 * allocated when the context is created. The context struct lives in forward.h. */
#include "forward.h"
#include "arch/arch.h"
#include "cpu/repack.h"
#include "sample/greedy.h"
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#ifdef TH_PROFILE /* build with EXTRA_CFLAGS=-DTH_PROFILE: CPU time per phase of the calling thread */
#include <stdio.h>
#include <time.h>
enum { P_NORM, P_QKV, P_ROPE, P_STORE, P_ATTN, P_WO, P_FFN_MM, P_ACT, P_DOWN, P_RESID, P_OUT, P_N };
static const char *prof_names[P_N] = { "norm", "qkv", "rope", "store", "attn", "wo", "gate/up", "act", "down", "resid", "output" };
static double prof_acc[P_N];
static double prof_now(void) { struct timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
#define PROF(id, stmt) do { double t0_ = prof_now(); stmt; prof_acc[id] += prof_now() - t0_; } while (0)
static void prof_dump(void) { double tot = 0; for (int i = 0; i < P_N; i++) tot += prof_acc[i];
    for (int i = 0; i < P_N; i++) fprintf(stderr, "prof %-8s %8.3f s %5.1f %%\n", prof_names[i], prof_acc[i], 100 * prof_acc[i] / tot); }
#else
#define PROF(id, stmt) do { stmt; } while (0)
#endif

/* ------------------------------------------------------------------ matmul */

/* Up to MM_MAX weight matrices with the same input width and activation type, applied
 * to the same input rows in one pass: the rows are quantized once, and the weight
 * rows of all the matrices are split over the threads in one fork/join (q, k, v
 * projections; gate and up). */
enum { MM_MAX = 3 };

typedef struct {
    const th_kernels *k;
    uint32_t act_type;
    int64_t n, nb;
    int n_mats;
    struct {
        th_gemm_fn gemm;
        int64_t rows, chunk0;                 /* chunk0: first 8-row chunk in the joint numbering */
        const uint8_t *w;
        size_t w_stride;
        float *y;
        int64_t y_stride;
    } m[MM_MAX];
    int64_t chunks;                           /* total 8-row chunks (units for an FFN pair) */
    int64_t nth;                              /* threads of the pool */
    _Atomic int64_t next;                     /* first chunk not yet taken */
    const float *x;
    int64_t x_stride;
    uint8_t *xq;
    size_t xq_stride;
    bool prequantized;                        /* xq already holds the input rows */
    /* FFN pair (ffn_pair_run): m[0] = gate, m[1] = up, scheduled in units of `unit` rows
     * of both, each finished by the activation g = act(g, u) and, when q_out, by its
     * quantization to q_type (the down projection's input) */
    const th_context *c;
    int64_t unit;                             /* 0: not a pair */
    uint32_t q_type;
    uint8_t *q_out;
    size_t q_stride;
} mm_task;

static void mm_quantize_worker(void *arg, int ith, int nth) {
    mm_task *t = arg;
    for (int64_t b = ith; b < t->nb; b += nth)
        t->k->quantize[t->act_type](t->x + b * t->x_stride, t->xq + (size_t)b * t->xq_stride, t->n);
}

/* Units [u0, u1) of an FFN pair: gate and up rows, then act and quantize them. */
static void ffn_pair_units(mm_task *t, int64_t u0, int64_t u1) {
    int64_t rows = t->m[0].rows, r0 = u0 * t->unit, r1 = TH_MIN(u1 * t->unit, rows);
    for (int i = 0; i < 2; i++)
        t->m[i].gemm(t->n, r0, r1, t->m[i].w, t->m[i].w_stride, t->nb, t->xq, t->xq_stride, t->m[i].y, t->m[i].y_stride);
    const th_type_info *qi = t->q_out ? th_type_info_get(t->q_type) : NULL;
    for (int64_t b = 0; b < t->nb; b++) {
        float *g = t->m[0].y + b * t->m[0].y_stride + r0;
        th_fwd_act(t->c, g, t->m[1].y + b * t->m[1].y_stride + r0, r1 - r0);
        if (qi) t->k->quantize[t->q_type](g, t->q_out + (size_t)b * t->q_stride + (size_t)(r0 / qi->block) * qi->bytes, r1 - r0);
    }
}

/* Threads take runs of chunks from a shared counter (not a fixed share each), so a thread
 * that the OS preempts (cores shared with other processes) delays the join by at most
 * its current run; 8-row chunks keep threads on whole cache lines of y. Runs shrink with
 * what is left (guided: a 4·nth-th of it, at least one chunk): the first ones are long
 * (few restarts of the prefetchers), the last ones short, so the threads finish together
 * (fixed runs of 1/16 left one thread waiting up to a whole run, ~100 us for the 1.1B
 * FFN pair in decode). Returns false when nothing is left. */
static bool mm_take(mm_task *t, int64_t *c0, int64_t *c1) {
    int64_t a = atomic_load_explicit(&t->next, memory_order_relaxed), g;
    do {
        if (a >= t->chunks) return false;
        g = t->nth == 1 ? t->chunks : TH_MAX(1, (t->chunks - a) / (4 * t->nth));
    } while (!atomic_compare_exchange_weak_explicit(&t->next, &a, a + g, memory_order_relaxed, memory_order_relaxed));
    *c0 = a;
    *c1 = TH_MIN(a + g, t->chunks);
    return true;
}

static void mm_worker(void *arg, int ith, int nth) {
    mm_task *t = arg;
    int64_t c0, c1;
    while (mm_take(t, &c0, &c1)) {
        if (t->unit) {
            ffn_pair_units(t, c0, c1);
            continue;
        }
        for (int i = 0; i < t->n_mats; i++) {
            int64_t m0 = t->m[i].chunk0, m1 = m0 + (t->m[i].rows + 7) / 8;
            int64_t a = TH_MAX(c0, m0), b = TH_MIN(c1, m1);
            if (a >= b) continue;
            int64_t r0 = (a - m0) * 8, r1 = TH_MIN((b - m0) * 8, t->m[i].rows);
            t->m[i].gemm(t->n, r0, r1, t->m[i].w, t->m[i].w_stride, t->nb, t->xq, t->xq_stride,
                         t->m[i].y, t->m[i].y_stride);
        }
    }
    (void)ith;
    (void)nth;
}

static void mm_add(mm_task *t, const th_weight *w, int64_t mat, float *y, int64_t y_stride) {
    int i = t->n_mats++;
    t->m[i].gemm = w->packed ? t->k->gemm_packed[w->type] : t->k->gemm[w->type];
    t->m[i].rows = w->ne1;
    t->m[i].chunk0 = t->chunks;
    size_t rb = w->packed ? th_repack_row_bytes(w->type, w->row_bytes) : w->row_bytes;
    t->m[i].w = (const uint8_t *)(w->packed ? w->packed : w->data) + (size_t)mat * (size_t)w->ne1 * rb;
    t->m[i].w_stride = rb;
    t->m[i].y = y;
    t->m[i].y_stride = y_stride;
    t->chunks += (w->ne1 + 7) / 8;
}

static void mm_run(th_context *c, mm_task *t) {
    uint64_t qs;
    th_row_bytes(t->act_type, (uint64_t)t->n, &qs);
    t->xq_stride = (size_t)qs;
    if (!t->prequantized) {
        if (t->nb >= 4) th_pool_run(c->pool, mm_quantize_worker, t);
        else mm_quantize_worker(t, 0, 1);
    }
    t->nth = th_pool_size(c->pool);
    atomic_store_explicit(&t->next, 0, memory_order_relaxed);
    th_pool_run(c->pool, mm_worker, t);
}

static mm_task mm_begin(th_context *c, const th_weight *w, const float *x, int64_t x_stride, int64_t nb) {
    return (mm_task){ .k = c->k, .act_type = th_type_info_get(w->type)->act_type, .n = w->ne0, .nb = nb,
                      .x = x, .x_stride = x_stride, .xq = c->actq };
}

void th_fwd_matmul(th_context *c, const th_weight *w, int64_t mat, const float *x, int64_t x_stride,
                   int64_t nb, float *y, int64_t y_stride) {
    mm_task t = mm_begin(c, w, x, x_stride, nb);
    mm_add(&t, w, mat, y, y_stride);
    mm_run(c, &t);
}

/* y_i = W_i · x for up to three weights (NULL entries skipped); one pass when they
 * share the input width and activation type, else one matmul each. */
static void matmul_multi(th_context *c, const th_weight *const ws[], float *const ys[], const int64_t y_strides[],
                         int count, const float *x, int64_t x_stride, int64_t nb) {
    mm_task t = mm_begin(c, ws[0], x, x_stride, nb);
    for (int i = 0; i < count; i++) {
        bool joinable = ws[i]->ne0 == t.n && th_type_info_get(ws[i]->type)->act_type == t.act_type;
        if (joinable) mm_add(&t, ws[i], 0, ys[i], y_strides[i]);
        else th_fwd_matmul(c, ws[i], 0, x, x_stride, nb, ys[i], y_strides[i]);
    }
    if (t.n_mats) mm_run(c, &t);
}

void th_fwd_add_bias(const float *bias, int64_t width, float *y, int64_t stride, int64_t nb) {
    if (!bias) return;
    for (int64_t i = 0; i < nb; i++) th_op_add(y + i * stride, bias, width);
}

static void add_bias(const th_weight *b, float *y, int64_t stride, int64_t nb) {
    th_fwd_add_bias(b->data, b->ne0, y, stride, nb);
}

/* ------------------------------------------------------------------ layers */

void th_fwd_norm_rows(const th_context *c, float *y, const float *x, const th_weight *w, int64_t n, int64_t width) {
    for (int64_t t = 0; t < n; t++)
        th_op_rmsnorm(y + t * width, x + t * width, w ? w->data : NULL, width, c->model->hp.norm_eps);
}

void th_fwd_act(const th_context *c, float *g, const float *u, int64_t n) {
    switch (c->model->hp.act_fn) {
    case TH_ACT_GELU: th_op_geglu(g, g, u, n); break;
    case TH_ACT_SWIGLU_OAI: th_op_swiglu_oai(g, g, u, n, 1.702f, 7.0f); break;
    default: c->k->swiglu(g, g, u, n); break;
    }
}

/* RMSNorm of each head (w one head wide) or of the whole row (w as wide as the row). */
static void qk_norm(const th_context *c, float *x, const th_weight *w, int64_t row_w, int32_t n_heads, int32_t hd) {
    float eps = c->model->hp.norm_eps;
    if (w->ne0 == row_w) th_op_rmsnorm(x, x, w->data, row_w, eps);
    else
        for (int32_t h = 0; h < n_heads; h++) th_op_rmsnorm(x + (int64_t)h * hd, x + (int64_t)h * hd, w->data, hd, eps);
}

typedef struct { th_context *c; int32_t il, n; const int32_t *pos; } qk_task;

static void qk_worker(void *arg, int ith, int nth) {
    qk_task *k = arg;
    th_context *c = k->c;
    const th_hparams *hp = &c->model->hp;
    const th_layer *L = &c->model->layers[k->il];
    const th_rope_params *rp = &c->rope[k->il];
    const int32_t *pos = k->pos;
    for (int32_t t = k->n * ith / nth; t < k->n * (ith + 1) / nth; t++) {
        float *q = c->q + (int64_t)t * c->q_w, *kr = c->kc + (int64_t)t * c->k_w;
        if (L->q_norm.data) qk_norm(c, q, &L->q_norm, c->q_w, hp->n_head, hp->head_dim);
        if (L->k_norm.data) qk_norm(c, kr, &L->k_norm, c->k_w, hp->n_head_kv, hp->head_dim);
        float cs[2 * TH_ROPE_TABLE_MAX];   /* the angles once per token, for all heads */
        if (th_op_rope_table(cs, pos[t], rp)) {
            for (int32_t h = 0; h < hp->n_head; h++) th_op_rope_apply(q + (int64_t)h * hp->head_dim, cs, rp);
            for (int32_t h = 0; h < hp->n_head_kv; h++) th_op_rope_apply(kr + (int64_t)h * hp->head_dim, cs, rp);
            continue;
        }
        for (int32_t h = 0; h < hp->n_head; h++) th_op_rope_ext(q + (int64_t)h * hp->head_dim, pos[t], rp);
        for (int32_t h = 0; h < hp->n_head_kv; h++) th_op_rope_ext(kr + (int64_t)h * hp->head_dim, pos[t], rp);
    }
}

/* q/k norms and rope of the batch's rows, split over the threads by token for batches. */
static void qk_prepare(th_context *c, int32_t il, int32_t n, const int32_t *pos) {
    qk_task t = { c, il, n, pos };
    if (n >= 4) th_pool_run(c->pool, qk_worker, &t);
    else qk_worker(&t, 0, 1);
}

/* q, k, v of the batch from c->h: separate projections or one fused [q; k; v]. */
static void project_qkv(th_context *c, const th_layer *L, int32_t n) {
    int64_t E = c->model->hp.n_embd;
    if (L->wqkv.data) {
        int64_t w = c->q_w + c->k_w + c->v_w;
        th_fwd_matmul(c, &L->wqkv, 0, c->h, E, n, c->wide, w);
        add_bias(&L->bqkv, c->wide, w, n);
        for (int32_t t = 0; t < n; t++) {
            const float *row = c->wide + (int64_t)t * w;
            memcpy(c->q + (int64_t)t * c->q_w, row, (size_t)c->q_w * sizeof(float));
            memcpy(c->kc + (int64_t)t * c->k_w, row + c->q_w, (size_t)c->k_w * sizeof(float));
            memcpy(c->vc + (int64_t)t * c->v_w, row + c->q_w + c->k_w, (size_t)c->v_w * sizeof(float));
        }
        return;
    }
    const th_weight *ws[3] = { &L->wq, &L->wk, &L->wv };
    float *const ys[3] = { c->q, c->kc, c->vc };
    const int64_t strides[3] = { c->q_w, c->k_w, c->v_w };
    matmul_multi(c, ws, ys, strides, 3, c->h, E, n);
    add_bias(&L->bq, c->q, c->q_w, n);
    add_bias(&L->bk, c->kc, c->k_w, n);
    add_bias(&L->bv, c->vc, c->v_w, n);
}

static void residual_add_to(float *x, const float *y, int32_t n, int64_t E) {
    for (int32_t t = 0; t < n; t++) th_op_add(x + (int64_t)t * E, y + (int64_t)t * E, E);
}

typedef struct { th_context *c; const float *y; const th_weight *w; int32_t n; } add_norm_task;

static void add_norm_worker(void *arg, int ith, int nth) {
    add_norm_task *a = arg;
    const th_hparams *hp = &a->c->model->hp;
    for (int32_t t = a->n * ith / nth; t < a->n * (ith + 1) / nth; t++) {
        float *x = a->c->x + (int64_t)t * hp->n_embd;
        if (a->y) th_op_add(x, a->y + (int64_t)t * hp->n_embd, hp->n_embd);
        if (a->w) th_op_rmsnorm(a->c->h + (int64_t)t * hp->n_embd, x, a->w->data, hp->n_embd, hp->norm_eps);
    }
}

/* x += y (y not NULL: the residual), then h = norm(x) by w (w not NULL), row by row;
 * split over the threads by token for batches (not serial on the calling thread). */
static void add_norm(th_context *c, const float *y, const th_weight *w, int32_t n) {
    add_norm_task t = { c, y, w, n };
    if (n >= 4) th_pool_run(c->pool, add_norm_worker, &t);
    else add_norm_worker(&t, 0, 1);
}

static void attention_block(th_context *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq) {
    const th_layer *L = &c->model->layers[il];
    int64_t E = c->model->hp.n_embd;
    PROF(P_NORM, add_norm(c, NULL, &L->attn_norm, n));
    if (L->wkv_a_mqa.data) {
        th_mla_project(c, il, n, pos);
    } else {
        PROF(P_QKV, project_qkv(c, L, n));
        PROF(P_ROPE, qk_prepare(c, il, n, pos));
    }
    PROF(P_STORE, th_attn_store(c, il, n, pos, seq));
    PROF(P_ATTN, th_attn_run(c, il, n, pos, seq));
    PROF(P_WO, th_fwd_matmul(c, &L->wo, 0, c->att, c->att_w, n, c->tmp, E));
    add_bias(&L->bo, c->tmp, E, n);
    if (L->post_attn_norm.data) th_fwd_norm_rows(c, c->tmp, c->tmp, &L->post_attn_norm, n, E);
    PROF(P_RESID, add_norm(c, c->tmp, &L->ffn_norm, n));   /* and h = ffn_norm(x) for ffn_block */
}

typedef struct { th_context *c; float *g; const float *u; int64_t stride, width; int32_t n; } act_task;

static void act_worker(void *arg, int ith, int nth) {
    act_task *a = arg;
    for (int32_t t = a->n * ith / nth; t < a->n * (ith + 1) / nth; t++)
        th_fwd_act(a->c, a->g + t * a->stride, a->u + t * a->stride, a->width);
}

/* Whether gate and up can run as one FFN pair (ffn_pair_run) in front of down. */
static bool ffn_pairable(const th_weight *gate, const th_weight *up, const th_weight *down) {
    return gate && gate->ne0 == up->ne0 && gate->ne1 == up->ne1 && gate->ne1 == down->ne0 &&
           th_type_info_get(gate->type)->act_type == th_type_info_get(up->type)->act_type;
}

/* c->ff_g = act(in·gate, in·up) in one pool run: the threads take units of rows of both
 * matrices and finish each with the activation and, where the scratch has room, its
 * quantization for down (no serial activation or quantization between the two
 * matmuls). Returns the quantized down input, or NULL when down must quantize. */
static uint8_t *ffn_pair_run(th_context *c, const th_weight *gate, const th_weight *up, const th_weight *down,
                             const float *in, int32_t n) {
    mm_task t = mm_begin(c, gate, in, c->model->hp.n_embd, n);
    mm_add(&t, gate, 0, c->ff_g, c->ff_w);
    mm_add(&t, up, 0, c->ff_u, c->ff_w);
    uint64_t in_bytes = 0, q_bytes = 0;
    th_row_bytes(t.act_type, (uint64_t)t.n, &in_bytes);
    t.q_type = th_type_info_get(down->type)->act_type;
    th_row_bytes(t.q_type, (uint64_t)down->ne0, &q_bytes);
    size_t off = ((size_t)in_bytes * (size_t)n + 63) & ~(size_t)63;
    if (off + (size_t)q_bytes * (size_t)n <= c->actq_cap) {
        t.q_out = c->actq + off;
        t.q_stride = (size_t)q_bytes;
    }
    t.c = c;
    t.unit = TH_MAX(8, (int64_t)th_type_info_get(t.q_type)->block); /* blocks are 1, 32 or 256 wide */
    t.chunks = (gate->ne1 + t.unit - 1) / t.unit;
    mm_run(c, &t);
    return t.q_out;
}

void th_fwd_ffn(th_context *c, const th_weight *gate, const th_weight *up, const th_weight *down,
                const float *in, int32_t n, float *out, bool accumulate) {
    int64_t E = c->model->hp.n_embd, F = down->ne0;
    float *g = c->ff_g, *u = c->ff_u;
    int64_t stride = c->ff_w;
    float *dst = accumulate ? c->tmp2 : out;
    if (ffn_pairable(gate, up, down)) {
        uint8_t *dq;
        PROF(P_FFN_MM, dq = ffn_pair_run(c, gate, up, down, in, n));
        mm_task t = mm_begin(c, down, g, stride, n);
        if (dq) {
            t.xq = dq;
            t.prequantized = true;
        }
        mm_add(&t, down, 0, dst, E);
        PROF(P_DOWN, mm_run(c, &t));
        if (accumulate) residual_add_to(out, dst, n, E);
        return;
    }
    if (gate) {
        const th_weight *ws[2] = { gate, up };
        float *const ys[2] = { c->ff_g, c->ff_u };
        const int64_t strides[2] = { c->ff_w, c->ff_w };
        PROF(P_FFN_MM, matmul_multi(c, ws, ys, strides, 2, in, E, n));
    } else { /* fused [gate; up]: one matmul into the wide scratch, rows of 2F */
        stride = 2 * F;
        th_fwd_matmul(c, up, 0, in, E, n, c->wide, stride);
        g = c->wide;
        u = c->wide + F;
    }
    act_task at = { c, g, u, stride, F, n };
    if (n >= 4) PROF(P_ACT, th_pool_run(c->pool, act_worker, &at));
    else PROF(P_ACT, act_worker(&at, 0, 1));
    PROF(P_DOWN, th_fwd_matmul(c, down, 0, g, stride, n, dst, E));
    if (accumulate) residual_add_to(out, dst, n, E);
}

static void ffn_block(th_context *c, int32_t il, int32_t n) {
    const th_layer *L = &c->model->layers[il];
    int64_t E = c->model->hp.n_embd;
    /* h = ffn_norm(x): made by attention_block's add_norm */
    if (L->router.data) th_moe_ffn(c, L, c->h, n, c->tmp);
    else th_fwd_ffn(c, L->w_gate.data ? &L->w_gate : NULL, &L->w_up, &L->w_down, c->h, n, c->tmp, false);
    if (L->post_ffn_norm.data) th_fwd_norm_rows(c, c->tmp, c->tmp, &L->post_ffn_norm, n, E);
    PROF(P_RESID, add_norm(c, c->tmp, NULL, n));
}

static void embed(th_context *c, const th_token *tok, int32_t n) {
    const th_model *m = c->model;
    int64_t E = m->hp.n_embd;
    for (int32_t t = 0; t < n; t++) {
        const uint8_t *row = (const uint8_t *)m->tok_embd.data + (size_t)tok[t] * m->tok_embd.row_bytes;
        c->k->dequant[m->tok_embd.type](row, c->x + (int64_t)t * E, E);
        if (m->hp.embd_scale != 1.0f) th_op_scale(c->x + (int64_t)t * E, m->hp.embd_scale, E);
    }
}

/* The GPU keeps the logits on the device and returns only each row's argmax. */
static bool argmax_on_device(const th_context *c) { return c->gpu && c->p.logits_argmax_only; }

/* Number the tokens that want logits (out_row) and make room for their rows. */
static th_status plan_outputs(th_context *c, const int8_t *want, int32_t n, int32_t *n_out) {
    int32_t rows = 0;
    for (int32_t t = 0; t < n; t++) c->out_row[t] = want[t] ? rows++ : -1;
    if ((size_t)rows > c->logits_rows && !argmax_on_device(c)) {
        float *nl = realloc(c->logits, (size_t)rows * (size_t)c->model->hp.n_vocab * sizeof(float));
        if (!nl) return th_set_error(TH_ERR_NOMEM, "out of memory for %d rows of logits", rows);
        c->logits = nl;
        c->logits_rows = (size_t)rows;
    }
    *n_out = rows;
    return TH_OK;
}

/* Final norm + output head for the tokens that asked for logits. */
static void output_logits(th_context *c, int32_t n, int32_t rows) {
    const th_model *m = c->model;
    int64_t E = m->hp.n_embd, V = m->hp.n_vocab;
    for (int32_t t = 0; t < n; t++)
        if (c->out_row[t] >= 0)
            th_op_rmsnorm(c->h + (int64_t)c->out_row[t] * E, c->x + (int64_t)t * E, m->output_norm.data, E, m->hp.norm_eps);
    if (rows == 0) return;
    th_fwd_matmul(c, &m->output, 0, c->h, E, rows, c->logits, V);
    if (m->hp.final_softcap > 0) th_op_softcap(c->logits, m->hp.final_softcap, (int64_t)rows * V);
}

/* ------------------------------------------------------------------ batch checks */

static th_status check_batch(th_context *c, const th_batch *b, const int8_t **want) {
    const th_model *m = c->model;
    if (!b || b->n_tokens < 1 || !b->token)
        return th_set_error(TH_ERR_ARG, "th_decode: empty batch");
    if ((uint32_t)b->n_tokens > c->p.n_batch)
        return th_set_error(TH_ERR_ARG, "th_decode: batch of %d tokens exceeds n_batch %u", b->n_tokens, c->p.n_batch);
    for (uint32_t s = 0; s < c->p.n_seq_max; s++) c->new_len[s] = c->kv.seqs[s].len;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        th_token t = b->token[i];
        int32_t s = b->seq_id ? b->seq_id[i] : 0;
        if (t < 0 || t >= m->hp.n_vocab)
            return th_set_error(TH_ERR_ARG, "th_decode: token %d at batch index %d is outside the vocabulary [0, %d)", t, i, m->hp.n_vocab);
        if (s < 0 || (uint32_t)s >= c->p.n_seq_max)
            return th_set_error(TH_ERR_ARG, "th_decode: sequence id %d at batch index %d is outside [0, %u)", s, i, c->p.n_seq_max);
        int32_t expect = c->new_len[s];
        if (b->pos && b->pos[i] != expect)
            return th_set_error(TH_ERR_ARG, "th_decode: token %d of sequence %d has position %d, expected %d (positions must continue the cached sequence)",
                                i, s, b->pos[i], expect);
        if ((uint32_t)expect >= c->p.n_ctx)
            return th_set_error(TH_ERR_CAPACITY, "th_decode: sequence %d would exceed the context of %u tokens", s, c->p.n_ctx);
        c->pos_buf[i] = expect;
        c->seq_buf[i] = s;
        c->new_len[s] = expect + 1;
    }
    if (b->logits) {
        *want = b->logits;
    } else { /* default: logits for the last token only */
        memset(c->want_buf, 0, (size_t)b->n_tokens);
        c->want_buf[b->n_tokens - 1] = 1;
        *want = c->want_buf;
    }
    return TH_OK;
}

static th_status gpu_decode(th_context *c, const th_batch *b, int32_t n_out) {
    int32_t nb = (int32_t)c->kv.n_blocks;
    for (uint32_t q = 0; q < c->p.n_seq_max; q++)
        memcpy(c->block_tables + (size_t)q * (size_t)nb, c->kv.seqs[q].table, (size_t)c->kv.seqs[q].n_table * sizeof(int32_t));
    th_gpu_batch gb = { .n_tokens = b->n_tokens, .token = b->token, .pos = c->pos_buf, .seq = c->seq_buf,
                        .block_table = c->block_tables, .max_blocks = nb, .block = c->kv.block,
                        .out_row = c->out_row, .n_out = n_out };
    if (argmax_on_device(c)) gb.argmax = c->argmax;
    else gb.logits = c->logits;
    return th_gpu_forward(c->gpu, &gb);
}

static void gpu_copy_block(void *ud, int32_t dst, int32_t src) { th_gpu_copy_block(ud, dst, src); }

th_status th_decode(th_context *c, const th_batch *b) {
    if (!c) return th_set_error(TH_ERR_ARG, "th_decode: no context");
    const int8_t *want = NULL;
    th_status s = check_batch(c, b, &want);
    if (s) return s;
    int32_t n = b->n_tokens, n_out = 0;
    if ((s = plan_outputs(c, want, n, &n_out))) return s;
    if ((s = th_kv_reserve(&c->kv, c->new_len))) return s;
    c->n_last = 0;
    if (c->gpu) {
        if ((s = gpu_decode(c, b, n_out))) return s;
    } else {
        embed(c, b->token, n);
        for (int32_t il = 0; il < c->model->hp.n_layer; il++) {
            attention_block(c, il, n, c->pos_buf, c->seq_buf);
            ffn_block(c, il, n);
        }
        PROF(P_OUT, output_logits(c, n, n_out));
    }
    for (uint32_t q = 0; q < c->p.n_seq_max; q++) c->kv.seqs[q].len = c->new_len[q];
    c->n_last = n;
    return TH_OK;
}

static bool has_output(const th_context *c, int32_t i) {
    return c && i >= 0 && i < c->n_last && c->out_row[i] >= 0;
}

const float *th_get_logits(th_context *c, int32_t i) {
    if (c && c->p.logits_argmax_only) {
        th_set_error(TH_ERR_ARG, "th_get_logits: logits not kept: context created with logits_argmax_only (use th_get_argmax)");
        return NULL;
    }
    if (!has_output(c, i)) {
        th_set_error(TH_ERR_ARG, "th_get_logits: batch index %d has no logits", i);
        return NULL;
    }
    return c->logits + (size_t)c->out_row[i] * (size_t)c->model->hp.n_vocab;
}

th_token th_get_argmax(th_context *c, int32_t i) {
    if (!has_output(c, i)) {
        th_set_error(TH_ERR_ARG, "th_get_argmax: batch index %d has no logits", i);
        return -1;
    }
    if (argmax_on_device(c)) return c->argmax[c->out_row[i]];
    int64_t nv = c->model->hp.n_vocab;
    return th_greedy_argmax(c->logits + (size_t)c->out_row[i] * (size_t)nv, nv);
}

/* ------------------------------------------------------------------ context */

th_context_params th_context_default_params(void) {
    return (th_context_params){ .n_ctx = 0, .n_batch = 512, .n_seq_max = 1, .kv_block = 16,
                                .n_threads = 0, .kv_type = TH_KV_F16, .gpu = false, .logits_argmax_only = false };
}

/* The widest FFN row any layer needs (dense, fused, routed or shared experts). */
static int64_t ffn_width(const th_model *m) {
    int64_t ff = TH_MAX(m->hp.n_ff, 1);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const th_layer *L = &m->layers[il];
        ff = TH_MAX(ff, TH_MAX(L->w_gate.ne1, L->w_down.ne0));
        ff = TH_MAX(ff, TH_MAX(L->gate_exps.ne1, L->gate_shexp.ne1));
    }
    return ff;
}

/* Per-token floats of c->wide: fused QKV, fused gate-up, or the MLA latents. */
static int64_t wide_width(const th_context *c) {
    const th_hparams *hp = &c->model->hp;
    const th_layer *L0 = &c->model->layers[0];
    int64_t w = 1;
    if (L0->wqkv.data) w = TH_MAX(w, c->q_w + c->k_w + c->v_w);
    w = TH_MAX(w, 2 * c->ff_w);
    if (hp->kv_lora_rank > 0)
        w = TH_MAX(w, 2 * (int64_t)hp->kv_lora_rank + hp->n_rot + hp->q_lora_rank +
                          (int64_t)hp->n_head * (hp->n_embd_head_nope + hp->head_dim_v));
    return w;
}

#define ALLOC(ptr, count) do { if (!((ptr) = malloc((size_t)(count) * sizeof *(ptr) + 1))) ok = false; } while (0)

static th_status alloc_scratch(th_context *c) {
    const th_hparams *hp = &c->model->hp;
    size_t B = c->p.n_batch;
    int64_t E = hp->n_embd, X = hp->n_expert, K = hp->n_expert_used;
    bool ok = true;
    c->q_w = (int64_t)hp->n_head * hp->head_dim;
    c->k_w = (int64_t)hp->n_head_kv * hp->head_dim;
    c->v_w = (int64_t)hp->n_head_kv * hp->head_dim_v;
    c->att_w = (int64_t)hp->n_head * hp->head_dim_v;
    c->ff_w = ffn_width(c->model);
    c->wide_w = wide_width(c);
    int64_t widest = TH_MAX(TH_MAX(E, c->ff_w), TH_MAX(TH_MAX(c->q_w, c->att_w), c->wide_w));
    /* the largest activation row in any act type: Q8_K is 292 bytes / 256 = 1.15 B/elem, F32 4 */
    c->actq_cap = B * (size_t)widest * 4 + 1024;
    ALLOC(c->x, B * E); ALLOC(c->h, B * E); ALLOC(c->tmp, B * E); ALLOC(c->tmp2, B * E);
    ALLOC(c->q, B * c->q_w); ALLOC(c->kc, B * c->k_w); ALLOC(c->vc, B * c->v_w); ALLOC(c->att, B * c->att_w);
    ALLOC(c->ff_g, B * c->ff_w); ALLOC(c->ff_u, B * c->ff_w); ALLOC(c->wide, B * c->wide_w);
    ALLOC(c->actq, c->actq_cap);
    ALLOC(c->rope, hp->n_layer);
    if (X > 0) {
        ALLOC(c->moe_logits, B * X); ALLOC(c->moe_score, X); ALLOC(c->moe_sel, B * K); ALLOC(c->moe_w, B * K);
        ALLOC(c->moe_rows, B * K); ALLOC(c->moe_start, 2 * X + 1);
        ALLOC(c->moe_x, B * E); ALLOC(c->moe_y, B * K * E);
    }
    ALLOC(c->out_row, B); ALLOC(c->pos_buf, B); ALLOC(c->seq_buf, B); ALLOC(c->argmax, B);
    ALLOC(c->new_len, c->p.n_seq_max); ALLOC(c->want_buf, B);
    if (!ok) return th_set_error(TH_ERR_NOMEM, "out of memory for the context's scratch buffers (batch %zu)", B);
    return th_attn_alloc(c);
}
#undef ALLOC

/* The rope frequency factors of this context (NULL data: none). LongRoPE: the
 * long factors once the context exceeds the original training context, else
 * the short ones. */
static const th_weight *rope_factors(const th_context *c) {
    const th_model *m = c->model;
    if (m->rope_long.data && m->rope_short.data)
        return c->p.n_ctx > (uint32_t)m->hp.rope_n_ctx_orig ? &m->rope_long : &m->rope_short;
    return &m->rope_freqs;
}

/* Rope parameters per layer. */
static void setup_rope(th_context *c) {
    const th_model *m = c->model;
    const th_hparams *hp = &m->hp;
    const float *factors = rope_factors(c)->data;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const th_layer *L = &m->layers[il];
        th_rope_params *r = &c->rope[il];
        *r = (th_rope_params){ .n_rot = hp->n_rot, .type = hp->rope_type, .base = L->rope_base,
                               .freq_scale = L->rope_freq_scale, .ext_factor = hp->rope_ext_factor,
                               .attn_factor = hp->rope_attn_factor, .freq_factors = factors };
        if (r->ext_factor != 0.0f)
            th_rope_corr_dims(hp->n_rot, hp->rope_n_ctx_orig, L->rope_base, hp->rope_beta_fast, hp->rope_beta_slow,
                              &r->corr_lo, &r->corr_hi);
    }
}

/* ------------------------------------------------------------------ repacking */

/* The weights the CPU forward pass multiplies with (th_fwd_matmul). */
static int matmul_weights(th_model *m, th_weight **out, int cap) {
    int n = 0;
#define W(x) do { if ((x).data && n < cap) out[n++] = &(x); } while (0)
    W(m->output);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        th_layer *L = &m->layers[il];
        W(L->wq); W(L->wk); W(L->wv); W(L->wo); W(L->wqkv);
        W(L->wq_a); W(L->wq_b); W(L->wkv_a_mqa); W(L->wkv_b);
        W(L->w_gate); W(L->w_up); W(L->w_down);
        W(L->gate_exps); W(L->up_exps); W(L->down_exps);
        W(L->gate_shexp); W(L->up_shexp); W(L->down_shexp);
    }
#undef W
    return n;
}

static bool packable(const th_kernels *k, const th_weight *w) {
    return w->ne1 % 8 == 0 && th_repack_supported(k, w->type, w->ne1 * TH_MAX(w->ne2, 1), w->ne0);
}

/* Once per model: copy the weights whose type has a packed gemm at this CPU level into
 * one allocation in the interleaved layout; the matmuls then read only the copy (the
 * mapped originals stay untouched, so resident memory does not double). TH_REPACK=0
 * turns it off (A/B measurements). */
static th_status repack_model(th_model *m, const th_kernels *k) {
    if (m->repacked) return TH_OK;
    m->repacked = true;
    const char *env = getenv("TH_REPACK");
    if (env && !strcmp(env, "0")) return TH_OK;
    int cap = 4 + 24 * m->hp.n_layer, n;
    th_weight **ws = malloc((size_t)cap * sizeof *ws);
    if (!ws) return th_set_error(TH_ERR_NOMEM, "out of memory");
    n = matmul_weights(m, ws, cap);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!packable(k, ws[i])) continue;
        uint64_t bytes = (uint64_t)th_repack_row_bytes(ws[i]->type, ws[i]->row_bytes) * (uint64_t)ws[i]->ne1 *
                         (uint64_t)TH_MAX(ws[i]->ne2, 1);
        total += (bytes + 63) & ~(uint64_t)63;
    }
    if (total && !(m->packed_buf = aligned_alloc(64, (size_t)total))) {
        free(ws);
        return th_set_error(TH_ERR_NOMEM, "out of memory for %llu bytes of repacked weights", (unsigned long long)total);
    }
    uint8_t *p = m->packed_buf;
    for (int i = 0; i < n && total; i++) {
        th_weight *w = ws[i];
        if (!packable(k, w)) continue;
        int64_t rows = w->ne1 * TH_MAX(w->ne2, 1);
        th_repack_rows(w->type, w->data, p, rows, w->row_bytes);
        w->packed = p;
        p += ((uint64_t)th_repack_row_bytes(w->type, w->row_bytes) * (uint64_t)rows + 63) & ~(uint64_t)63;
    }
    free(ws);
    return TH_OK;
}

/* Features of the CPU forward pass that the GPU seam (gpu.h) does not carry yet;
 * NULL when the GPU backend can run the model. (A safety net: the backend may
 * refuse more.) */
static th_status gpu_setup(th_context *c) {
    c->block_tables = calloc((size_t)c->p.n_seq_max * c->kv.n_blocks, sizeof(int32_t));
    if (!c->block_tables) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_status s = th_gpu_init(c->model, c->p.n_batch, c->kv.n_blocks, c->kv.block, c->kv.f16,
                              (int32_t)c->p.n_seq_max, rope_factors(c), false, &c->gpu);
    c->kv.copy_block = gpu_copy_block;
    c->kv.copy_ud = c->gpu;
    return s;
}

th_status th_context_new(th_model *m, const th_context_params *params, th_context **out) {
    *out = NULL;
    if (!m) return th_set_error(TH_ERR_ARG, "th_context_new: no model");
    if (!m->layers) return th_set_error(TH_ERR_ARG, "th_context_new: the model was loaded vocabulary-only");
    th_context_params p = params ? *params : th_context_default_params();
    if (p.n_ctx == 0) p.n_ctx = (uint32_t)TH_MIN(m->hp.n_ctx_train, 4096);
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.n_seq_max == 0) p.n_seq_max = 1;
    if (p.kv_block == 0) p.kv_block = 16;
    if (p.n_threads <= 0) p.n_threads = th_n_cores();
    if (p.n_ctx > (1u << 24) || p.n_batch > (1u << 16) || p.n_seq_max > 4096 || p.kv_block > 4096 ||
        p.n_threads > 1024 || (p.kv_type != TH_KV_F16 && p.kv_type != TH_KV_F32))
        return th_set_error(TH_ERR_ARG, "th_context_new: parameters out of range (n_ctx %u, n_batch %u, n_seq_max %u, kv_block %u, threads %d, kv_type %d)",
                            p.n_ctx, p.n_batch, p.n_seq_max, p.kv_block, p.n_threads, p.kv_type);
    th_context *c = calloc(1, sizeof *c);
    if (!c) return th_set_error(TH_ERR_NOMEM, "out of memory");
    c->model = m;
    c->p = p;
    c->k = th_cpu_kernels();
    th_status s = TH_OK;
    const th_hparams *hp = &m->hp;
    if (!(c->pool = th_pool_new(p.n_threads))) s = TH_ERR_NOMEM;
    if (!s) s = th_kv_init(&c->kv, hp->n_layer, (int64_t)hp->n_head_kv * hp->head_dim,
                           (int64_t)hp->n_head_kv * hp->head_dim_v, p.n_ctx, (int32_t)p.kv_block,
                           (int32_t)p.n_seq_max, p.kv_type == TH_KV_F16, !p.gpu);
    if (!s) s = alloc_scratch(c);
    if (!s) setup_rope(c);
    if (!s && p.gpu) s = gpu_setup(c);
    else if (!s) s = repack_model(m, c->k);
    if (s) { th_context_free(c); return s; }
    *out = c;
    return TH_OK;
}

void th_context_free(th_context *c) {
    if (!c) return;
#ifdef TH_PROFILE
    prof_dump();
#endif
    th_gpu_free(c->gpu);
    free(c->block_tables);
    th_pool_free(c->pool);
    th_kv_free(&c->kv);
    free(c->x); free(c->h); free(c->q); free(c->kc); free(c->vc); free(c->att); free(c->tmp); free(c->tmp2);
    free(c->ff_g); free(c->ff_u); free(c->wide); free(c->actq); free(c->logits);
    th_attn_free(c);
    free(c->rope); free(c->moe_logits); free(c->moe_score); free(c->moe_sel); free(c->moe_w); free(c->moe_rows); free(c->moe_start);
    free(c->moe_x); free(c->moe_y);
    free(c->out_row); free(c->pos_buf); free(c->seq_buf); free(c->new_len); free(c->want_buf); free(c->argmax);
    free(c);
}

uint32_t th_context_n_ctx(const th_context *c) { return c->p.n_ctx; }

/* ------------------------------------------------------------------ KV API */

static th_status check_seq(const th_context *c, int32_t seq) {
    if (!c || seq < 0 || (uint32_t)seq >= c->p.n_seq_max)
        return th_set_error(TH_ERR_ARG, "sequence id %d is outside [0, %u)", seq, c ? c->p.n_seq_max : 0);
    return TH_OK;
}

int32_t th_kv_seq_len(const th_context *c, int32_t seq) {
    return check_seq(c, seq) ? -1 : c->kv.seqs[seq].len;
}

th_status th_kv_seq_clear(th_context *c, int32_t seq) { return th_kv_seq_truncate(c, seq, 0); }

th_status th_kv_seq_truncate(th_context *c, int32_t seq, int32_t n_keep) {
    th_status s = check_seq(c, seq);
    if (s) return s;
    th_kv_truncate(&c->kv, seq, n_keep);
    return TH_OK;
}

th_status th_kv_seq_copy(th_context *c, int32_t dst, int32_t src) {
    th_status s = check_seq(c, dst);
    if (!s) s = check_seq(c, src);
    if (s) return s;
    th_kv_copy_seq(&c->kv, dst, src);
    return TH_OK;
}

uint32_t th_kv_blocks_used(const th_context *c) { return th_kv_used(&c->kv); }
uint32_t th_kv_blocks_total(const th_context *c) { return c->kv.n_blocks; }
