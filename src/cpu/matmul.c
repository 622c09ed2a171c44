/* matmul.c — the CPU backend's threaded matrix products: y = W·x for a batch of
 * activation rows (quantized once to the weight type's activation format, then
 * weight rows split across the thread pool), several matrices sharing an input
 * in one pass (q, k, v), and the dense gated FFN with gate, up, the activation
 * and the down projection's input quantization in one pool run. */
#include "cpu/forward.h"
#include "cpu/repack.h"
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

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
    const th_cpu *c;
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

static void mm_run(th_cpu *c, mm_task *t) {
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

static mm_task mm_begin(th_cpu *c, const th_weight *w, const float *x, int64_t x_stride, int64_t nb) {
    return (mm_task){ .k = c->k, .act_type = th_type_info_get(w->type)->act_type, .n = w->ne0, .nb = nb,
                      .x = x, .x_stride = x_stride, .xq = c->actq };
}

/* The observer (th_context_set_observer) sees the F32 input rows of every product. */
static void observe(const th_cpu *c, const th_weight *w, int64_t mat, const float *x, int64_t x_stride, int64_t nb) {
    const th_observer *o = c->obs;
    if (!o || !o->matmul_input) return;
    o->matmul_input(o->ud, w->name ? w->name : "", TH_MAX(w->ne2, 1) > 1 ? (int32_t)mat : -1, x, nb, w->ne0, x_stride);
}

void th_fwd_matmul_as(th_cpu *c, const th_weight *w, int64_t mat, int32_t expert, const float *x, int64_t x_stride,
                      int64_t nb, float *y, int64_t y_stride) {
    const th_observer *o = c->obs;
    if (o && o->matmul_input) o->matmul_input(o->ud, w->name ? w->name : "", expert, x, nb, w->ne0, x_stride);
    mm_task t = mm_begin(c, w, x, x_stride, nb);
    mm_add(&t, w, mat, y, y_stride);
    mm_run(c, &t);
}

void th_fwd_matmul(th_cpu *c, const th_weight *w, int64_t mat, const float *x, int64_t x_stride,
                   int64_t nb, float *y, int64_t y_stride) {
    observe(c, w, mat, x, x_stride, nb);
    mm_task t = mm_begin(c, w, x, x_stride, nb);
    mm_add(&t, w, mat, y, y_stride);
    mm_run(c, &t);
}

/* y_i = W_i · x for up to three weights (NULL entries skipped); one pass when they
 * share the input width and activation type, else one matmul each. */
void th_fwd_matmul_multi(th_cpu *c, const th_weight *const ws[], float *const ys[], const int64_t y_strides[],
                         int count, const float *x, int64_t x_stride, int64_t nb) {
    mm_task t = mm_begin(c, ws[0], x, x_stride, nb);
    for (int i = 0; i < count; i++) {
        bool joinable = ws[i]->ne0 == t.n && th_type_info_get(ws[i]->type)->act_type == t.act_type;
        if (joinable) {
            observe(c, ws[i], 0, x, x_stride, nb);
            mm_add(&t, ws[i], 0, ys[i], y_strides[i]);
        } else {
            th_fwd_matmul(c, ws[i], 0, x, x_stride, nb, ys[i], y_strides[i]);
        }
    }
    if (t.n_mats) mm_run(c, &t);
}

void th_fwd_add_bias(const float *bias, int64_t width, float *y, int64_t stride, int64_t nb) {
    if (!bias) return;
    for (int64_t i = 0; i < nb; i++) th_op_add(y + i * stride, bias, width);
}

/* ------------------------------------------------------------------ rows and the dense FFN */

void th_fwd_norm_rows(const th_cpu *c, float *y, const float *x, const th_weight *w, int64_t n, int64_t width) {
    for (int64_t t = 0; t < n; t++)
        th_op_rmsnorm(y + t * width, x + t * width, w ? w->data : NULL, width, c->model->hp.norm_eps);
}

void th_fwd_act(const th_cpu *c, float *g, const float *u, int64_t n) {
    switch (c->model->hp.act_fn) {
    case TH_ACT_GELU: th_op_geglu(g, g, u, n); break;
    case TH_ACT_SWIGLU_OAI: th_op_swiglu_oai(g, g, u, n, 1.702f, 7.0f); break;
    default: c->k->swiglu(g, g, u, n); break;
    }
}

static void residual_add_to(float *x, const float *y, int32_t n, int64_t E) {
    for (int32_t t = 0; t < n; t++) th_op_add(x + (int64_t)t * E, y + (int64_t)t * E, E);
}

typedef struct { th_cpu *c; float *g; const float *u; int64_t stride, width; int32_t n; } act_task;

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
static uint8_t *ffn_pair_run(th_cpu *c, const th_weight *gate, const th_weight *up, const th_weight *down,
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

void th_fwd_ffn(th_cpu *c, const th_weight *gate, const th_weight *up, const th_weight *down,
                const float *in, int32_t n, float *out, bool accumulate) {
    int64_t E = c->model->hp.n_embd, F = down->ne0;
    float *g = c->ff_g, *u = c->ff_u;
    int64_t stride = c->ff_w;
    float *dst = accumulate ? c->tmp2 : out;
    if (ffn_pairable(gate, up, down)) {
        uint8_t *dq;
        observe(c, gate, 0, in, E, n);
        observe(c, up, 0, in, E, n);
        dq = ffn_pair_run(c, gate, up, down, in, n);
        observe(c, down, 0, g, stride, n);
        mm_task t = mm_begin(c, down, g, stride, n);
        if (dq) {
            t.xq = dq;
            t.prequantized = true;
        }
        mm_add(&t, down, 0, dst, E);
        mm_run(c, &t);
        if (accumulate) residual_add_to(out, dst, n, E);
        return;
    }
    if (gate) {
        const th_weight *ws[2] = { gate, up };
        float *const ys[2] = { c->ff_g, c->ff_u };
        const int64_t strides[2] = { c->ff_w, c->ff_w };
        th_fwd_matmul_multi(c, ws, ys, strides, 2, in, E, n);
    } else { /* fused [gate; up]: one matmul into the wide scratch, rows of 2F */
        stride = 2 * F;
        th_fwd_matmul(c, up, 0, in, E, n, c->wide, stride);
        g = c->wide;
        u = c->wide + F;
    }
    act_task at = { c, g, u, stride, F, n };
    if (n >= 4) th_pool_run(c->pool, act_worker, &at);
    else act_worker(&at, 0, 1);
    th_fwd_matmul(c, down, 0, g, stride, n, dst, E);
    if (accumulate) residual_add_to(out, dst, n, E);
}

