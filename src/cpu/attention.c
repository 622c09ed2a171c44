/* attention.c — the CPU attention of the forward pass: the batch's K/V rows into the
 * paged cache (th_attn_store), then softmax(q·Kᵀ·scale [softcap, window, sink]) · V for
 * every (token, head) of a ragged batch (th_attn_run), flash-attention style.
 *
 * The work is cut into units: one KV head (a GQA group, or part of it), a block of
 * consecutive tokens of one sequence and their heads of that group, at most ATT_M query
 * rows. A unit walks its keys in chunks of TH_ATTN_TK positions: each chunk's K rows are
 * converted to f32 once (transposed) and its V rows once, then the kernel table's
 * attn_chunk runs all the unit's rows over it with an online softmax; th_attn_finish_row
 * divides at the end. Threads take units from a shared counter, latest tokens (the most
 * keys) first. With an F16 cache, q is rounded to f16 first (as ggml's F16 K·q). */
#include "cpu/forward.h"
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { ATT_M = 64 };   /* query rows per unit */

struct th_attn_unit { int32_t t0, nt, kvh, h0, nh; };  /* tokens [t0, t0+nt) of attn_tok; heads h0.. of the group */

/* Per-thread scratch, floats then ints. */
typedef struct {
    float *q, *kt, *v, *acc, *mx, *sum, *tmp;
    int32_t *j0, *j1;
} attn_scratch;

static int64_t dv_stride(const th_hparams *hp) { return ((int64_t)hp->head_dim_v + 31) & ~(int64_t)31; }
static int64_t tmp_floats(const th_hparams *hp) { return TH_MAX((int64_t)hp->head_dim, dv_stride(hp)); }

static int64_t scratch_floats(const th_hparams *hp) {
    int64_t d = hp->head_dim, dvs = dv_stride(hp);
    return ATT_M * d + d * TH_ATTN_TK + TH_ATTN_TK * dvs + ATT_M * dvs + 2 * ATT_M + tmp_floats(hp) + 2 * ATT_M;
}

static attn_scratch scratch_of(const th_cpu *c, int ith) {
    const th_hparams *hp = &c->model->hp;
    int64_t d = hp->head_dim, dvs = dv_stride(hp);
    attn_scratch s;
    s.q = c->attn_buf + (size_t)ith * (size_t)scratch_floats(hp);
    s.kt = s.q + ATT_M * d;
    s.v = s.kt + d * TH_ATTN_TK;
    s.acc = s.v + TH_ATTN_TK * dvs;
    s.mx = s.acc + ATT_M * dvs;
    s.sum = s.mx + ATT_M;
    s.tmp = s.sum + ATT_M;
    s.j0 = (int32_t *)(s.tmp + tmp_floats(hp));
    s.j1 = s.j0 + ATT_M;
    return s;
}

th_status th_attn_alloc(th_cpu *c) {
    const th_hparams *hp = &c->model->hp;
    size_t nt = (size_t)th_pool_size(c->pool), B = c->p.n_batch;
    c->attn_buf = calloc(nt * (size_t)scratch_floats(hp), sizeof(float));   /* zero: the pad lanes of v */
    c->attn_units = malloc(B * (size_t)hp->n_head * sizeof *c->attn_units);
    c->attn_tok = malloc(B * sizeof(int32_t));
    c->attn_seq0 = malloc(((size_t)c->p.n_seq_max + 1) * sizeof(int32_t));
    if (!c->attn_buf || !c->attn_units || !c->attn_tok || !c->attn_seq0)
        return th_set_error(TH_ERR_NOMEM, "out of memory for the attention scratch");
    return TH_OK;
}

void th_attn_free(th_cpu *c) {
    free(c->attn_buf);
    free(c->attn_units);
    free(c->attn_tok);
    free(c->attn_seq0);
}

void th_attn_store(th_cpu *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq) {
    th_kv *kv = c->kv;
    for (int32_t t = 0; t < n; t++) {
        const float *k = c->kc + (int64_t)t * c->k_w, *v = c->vc + (int64_t)t * c->v_w;
        void *kd = th_kv_k(kv, il, seq[t], pos[t]), *vd = th_kv_v(kv, il, seq[t], pos[t]);
        if (kv->f16) { /* the table's F16 conversion: F16C where there is one, same rounding */
            c->k->quantize[TH_F16](k, kd, c->k_w);
            c->k->quantize[TH_F16](v, vd, c->v_w);
        } else {
            memcpy(kd, k, (size_t)c->k_w * sizeof(float));
            memcpy(vd, v, (size_t)c->v_w * sizeof(float));
        }
    }
}

typedef struct {
    th_cpu *c;
    int32_t il, n_units, window;
    const int32_t *pos, *seq;
    const float *sinks;                     /* per head, or NULL */
    _Atomic int32_t next;
} attn_task;

static int32_t first_key(const attn_task *t, int32_t p) { return t->window > 0 ? TH_MAX(0, p - t->window + 1) : 0; }

/* Row r of unit u: token index (batch) and head. */
static void row_of(const th_cpu *c, const struct th_attn_unit *u, int32_t r, int32_t *tok, int32_t *h) {
    const th_hparams *hp = &c->model->hp;
    *tok = c->attn_tok[u->t0 + r / u->nh];
    *h = u->kvh * (hp->n_head / hp->n_head_kv) + u->h0 + r % u->nh;
}

/* Keys [c0, c0 + nk) of kv head kvh of sequence s: K transposed into s->kt, V rows into s->v. */
static void load_chunk(const th_cpu *c, const attn_task *t, const attn_scratch *s, int32_t sq, int32_t kvh,
                       int32_t c0, int32_t nk) {
    const th_kv *kv = c->kv;
    const th_hparams *hp = &c->model->hp;
    int64_t d = hp->head_dim, dv = hp->head_dim_v, dvs = dv_stride(hp);
    for (int32_t j = 0; j < nk; j++) {
        const uint8_t *kr = (const uint8_t *)th_kv_k(kv, t->il, sq, c0 + j) + (size_t)(kvh * d) * kv->esz;
        const uint8_t *vr = (const uint8_t *)th_kv_v(kv, t->il, sq, c0 + j) + (size_t)(kvh * dv) * kv->esz;
        const float *k32 = (const float *)kr;
        if (kv->f16) {
            c->k->dequant[TH_F16](kr, s->tmp, d);
            c->k->dequant[TH_F16](vr, s->v + j * dvs, dv);
            k32 = s->tmp;
        } else {
            memcpy(s->v + j * dvs, vr, (size_t)dv * sizeof(float));
        }
        for (int64_t e = 0; e < d; e++) s->kt[e * TH_ATTN_TK + j] = k32[e];
    }
}

static void run_unit(const attn_task *t, const struct th_attn_unit *u, const attn_scratch *s) {
    th_cpu *c = t->c;
    const th_hparams *hp = &c->model->hp;
    int32_t d = hp->head_dim, dv = hp->head_dim_v, dvs = (int32_t)dv_stride(hp), m = u->nt * u->nh;
    for (int32_t r = 0; r < m; r++) {
        int32_t tok, h;
        row_of(c, u, r, &tok, &h);
        const float *q = c->q + (int64_t)tok * c->q_w + (int64_t)h * d;
        if (c->kv->f16) { /* round q to f16 */
            c->k->quantize[TH_F16](q, (uint16_t *)s->tmp, d);
            c->k->dequant[TH_F16](s->tmp, s->q + (size_t)r * d, d);
        } else {
            memcpy(s->q + (size_t)r * d, q, (size_t)d * sizeof(float));
        }
        s->mx[r] = -INFINITY;
        s->sum[r] = 0.0f;
        memset(s->acc + (size_t)r * dvs, 0, (size_t)dvs * sizeof(float));
    }
    int32_t sq = t->seq[c->attn_tok[u->t0]];
    int32_t k_lo = first_key(t, t->pos[c->attn_tok[u->t0]]), k_hi = t->pos[c->attn_tok[u->t0 + u->nt - 1]] + 1;
    th_attn_chunk a = { .m = m, .d = d, .dv = dv, .dv_stride = dvs, .q = s->q, .kt = s->kt, .v = s->v,
                        .j0 = s->j0, .j1 = s->j1, .scale = hp->attn_scale, .softcap = hp->attn_softcap,
                        .mx = s->mx, .sum = s->sum, .acc = s->acc };
    for (int32_t c0 = k_lo; c0 < k_hi; c0 += TH_ATTN_TK) {
        int32_t nk = TH_MIN(TH_ATTN_TK, k_hi - c0);
        load_chunk(c, t, s, sq, u->kvh, c0, nk);
        for (int32_t r = 0; r < m; r++) {
            int32_t p = t->pos[c->attn_tok[u->t0 + r / u->nh]];
            s->j0[r] = TH_MAX(first_key(t, p) - c0, 0);
            s->j1[r] = TH_MIN(p + 1 - c0, nk);
        }
        c->k->attn_chunk(&a);
    }
    for (int32_t r = 0; r < m; r++) {
        int32_t tok, h;
        row_of(c, u, r, &tok, &h);
        th_attn_finish_row(c->att + (int64_t)tok * c->att_w + (int64_t)h * dv, s->acc + (size_t)r * dvs, dv,
                           s->mx[r], s->sum[r], t->sinks ? &t->sinks[h] : NULL);
    }
}

static void attn_worker(void *arg, int ith, int nth) {
    attn_task *t = arg;
    attn_scratch s = scratch_of(t->c, ith);
    for (;;) {
        int32_t i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
        if (i >= t->n_units) return;
        run_unit(t, &t->c->attn_units[i], &s);
    }
    (void)nth;
}

/* Batch indices grouped by sequence (attn_tok, positions ascending within one), then the
 * units: per sequence, blocks of tokens from the last one back, each for every KV head
 * and head slice. Heads of a group are sliced when there are too few units to share. */
static int32_t plan_units(th_cpu *c, int32_t n, const int32_t *seq) {
    const th_hparams *hp = &c->model->hp;
    int32_t n_seq = (int32_t)c->p.n_seq_max, G = hp->n_head / hp->n_head_kv, *s0 = c->attn_seq0;
    memset(s0, 0, ((size_t)n_seq + 1) * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) s0[seq[i] + 1]++;
    for (int32_t q = 0; q < n_seq; q++) s0[q + 1] += s0[q];
    for (int32_t i = 0; i < n; i++) c->attn_tok[s0[seq[i]]++] = i;   /* s0[q] now ends sequence q */
    int32_t nh = TH_MIN(G, ATT_M), blocks = 0, nth = th_pool_size(c->pool);
    for (int32_t q = 0, b = 0; q < n_seq; b = s0[q++]) blocks += (s0[q] - b + ATT_M / nh - 1) / (ATT_M / nh);
    int32_t slices = TH_MIN(G, (4 * nth + blocks * hp->n_head_kv - 1) / (blocks * hp->n_head_kv));
    nh = TH_MIN(nh, (G + slices - 1) / slices);
    int32_t tq = ATT_M / nh, n_units = 0;
    for (int32_t q = 0, b = 0; q < n_seq; b = s0[q++])
        for (int32_t t1 = s0[q]; t1 > b; t1 -= tq)
            for (int32_t g = 0; g < hp->n_head_kv; g++)
                for (int32_t h0 = 0; h0 < G; h0 += nh)
                    c->attn_units[n_units++] = (struct th_attn_unit){ .t0 = TH_MAX(b, t1 - tq), .nt = t1 - TH_MAX(b, t1 - tq),
                                                                      .kvh = g, .h0 = h0, .nh = TH_MIN(nh, G - h0) };
    return n_units;
}

void th_attn_run(th_cpu *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq) {
    const th_layer *L = &c->model->layers[il];
    attn_task t = { .c = c, .il = il, .window = L->window, .pos = pos, .seq = seq, .sinks = L->attn_sinks.data };
    t.n_units = plan_units(c, n, seq);
    atomic_store_explicit(&t.next, 0, memory_order_relaxed);
    th_pool_run(c->pool, attn_worker, &t);
}
