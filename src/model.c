/* model.c — the forward pass. One call, th_decode(), takes a ragged batch (tokens of
 * any sequences, each with its position) through the generic decoder block:
 *
 *   x = embed(tokens) · embd_scale
 *   per layer:  h = norm(x);  q,k,v = h·Wq,k,v (+bias);  q/k-norm;  rope(q,k)
 *               K,V → paged cache;  a = softmax(q·Kᵀ·scale [softcap, window]) · V
 *               x += [post_norm](a·Wo)
 *               h = norm(x);  x += [post_norm](down(act(h·Wgate) ⊙ h·Wup))
 *   logits = norm(x)·Wout [final softcap], only for the tokens that asked
 *
 * Matmuls quantize their activation rows once, then split weight rows across
 * the thread pool; attention splits (token, head) pairs. All scratch memory is
 * allocated when the context is created. */
#include "model.h"
#include "core/threadpool.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "gpu.h"
#include "kv.h"
#include <math.h>
#include <stdlib.h>

struct th_context {
    th_model *model;
    th_context_params p;
    const th_kernels *k;
    th_pool *pool;
    th_kv kv;
    /* scratch for n_batch tokens */
    float *x, *h, *q, *kc, *vc, *att, *tmp, *ff_g, *ff_u;
    int64_t q_w, k_w, v_w, att_w, ff_w;     /* row widths */
    uint8_t *actq;                          /* quantized activation rows */
    size_t actq_cap;
    float *scores;                          /* n_threads × n_ctx */
    float *qtmp;                            /* n_threads × head_dim */
    float *logits;
    size_t logits_rows;
    int32_t *out_row;                       /* batch index → logits row or -1 */
    int32_t *new_len;                       /* per sequence, during a batch */
    int32_t n_last;                         /* tokens in the last batch */
    int32_t *pos_buf, *seq_buf;             /* filled-in positions / sequences */
    int8_t *want_buf;                       /* default logits flags */
    th_gpu *gpu;                            /* non-NULL: the GPU runs the forward pass */
    int32_t *block_tables;                  /* GPU mode: n_seq × n_blocks */
};

/* ------------------------------------------------------------------ matmul */

typedef struct {
    const th_kernels *k;
    uint32_t type, act_type;
    int64_t n, rows, nb;
    const uint8_t *w;
    size_t w_stride;
    const float *x;
    int64_t x_stride;
    uint8_t *xq;
    size_t xq_stride;
    float *y;
    int64_t y_stride;
} mm_task;

static void mm_quantize_worker(void *arg, int ith, int nth) {
    mm_task *t = arg;
    for (int64_t b = ith; b < t->nb; b += nth)
        t->k->quantize[t->act_type](t->x + b * t->x_stride, t->xq + (size_t)b * t->xq_stride, t->n);
}

static void mm_worker(void *arg, int ith, int nth) {
    mm_task *t = arg;
    /* split rows in chunks of 8 so threads touch whole cache lines of y */
    int64_t chunks = (t->rows + 7) / 8;
    int64_t c0 = chunks * ith / nth, c1 = chunks * (ith + 1) / nth;
    int64_t r0 = c0 * 8, r1 = TH_MIN(c1 * 8, t->rows);
    if (r0 >= r1) return;
    t->k->gemm[t->type](t->n, r0, r1, t->w, t->w_stride, t->nb, t->xq, t->xq_stride, t->y, t->y_stride);
}

/* y[b][0..rows) = W(matrix `mat` of w) · x[b] for b < nb. */
static void matmul(th_context *c, const th_weight *w, int64_t mat, const float *x, int64_t x_stride,
                   int64_t nb, float *y, int64_t y_stride) {
    mm_task t = { .k = c->k, .type = w->type, .act_type = th_type_info_get(w->type)->act_type,
                  .n = w->ne0, .rows = w->ne1, .nb = nb,
                  .w = (const uint8_t *)w->data + (size_t)mat * (size_t)w->ne1 * w->row_bytes,
                  .w_stride = w->row_bytes, .x = x, .x_stride = x_stride, .xq = c->actq,
                  .y = y, .y_stride = y_stride };
    uint64_t qs;
    th_row_bytes(t.act_type, (uint64_t)t.n, &qs);
    t.xq_stride = (size_t)qs;
    if (nb >= 4) th_pool_run(c->pool, mm_quantize_worker, &t);
    else mm_quantize_worker(&t, 0, 1);
    th_pool_run(c->pool, mm_worker, &t);
}

static void add_bias(const th_weight *b, float *y, int64_t stride, int64_t nb) {
    if (!b->data) return;
    for (int64_t i = 0; i < nb; i++) th_op_add(y + i * stride, b->data, b->ne0);
}

/* ------------------------------------------------------------------ attention */

typedef struct {
    th_context *c;
    int32_t il, n_tokens;
    const int32_t *pos, *seq;
    int32_t window;
} attn_task;

static void attn_head(th_context *c, const attn_task *t, int32_t ti, int32_t h, float *sc, float *qtmp) {
    const th_hparams *hp = &c->model->hp;
    const th_kv *kv = &c->kv;
    int32_t hd = hp->head_dim, hdv = hp->head_dim_v, kvh = h / (hp->n_head / hp->n_head_kv);
    int32_t p = t->pos[ti], s = t->seq[ti];
    int32_t lo = t->window > 0 ? TH_MAX(0, p - t->window + 1) : 0;
    const float *qv = c->q + (int64_t)ti * c->q_w + (int64_t)h * hd;
    if (kv->f16) { /* ggml rounds q to fp16 for the F16·F32 product */
        for (int32_t i = 0; i < hd; i++) qtmp[i] = th_f16_to_f32(th_f32_to_f16(qv[i]));
        qv = qtmp;
    }
    int32_t n = p - lo + 1;
    for (int32_t j = 0; j < n; j++) {
        float dot = 0.0f;
        if (kv->f16) {
            const uint16_t *kj = (const uint16_t *)th_kv_k(kv, t->il, s, lo + j) + (int64_t)kvh * hd;
            double acc = 0.0;
            for (int32_t i = 0; i < hd; i++) acc += (double)qv[i] * th_f16_to_f32(kj[i]);
            dot = (float)acc;
        } else {
            const float *kj = (const float *)th_kv_k(kv, t->il, s, lo + j) + (int64_t)kvh * hd;
            for (int32_t i = 0; i < hd; i++) dot += qv[i] * kj[i];
        }
        sc[j] = dot * hp->attn_scale;
    }
    if (hp->attn_softcap > 0) th_op_softcap(sc, hp->attn_softcap, n);
    th_op_softmax(sc, n);
    float *out = c->att + (int64_t)ti * c->att_w + (int64_t)h * hdv;
    memset(out, 0, (size_t)hdv * sizeof(float));
    for (int32_t j = 0; j < n; j++) {
        if (kv->f16) {
            float pj = th_f16_to_f32(th_f32_to_f16(sc[j]));
            const uint16_t *vj = (const uint16_t *)th_kv_v(kv, t->il, s, lo + j) + (int64_t)kvh * hdv;
            for (int32_t i = 0; i < hdv; i++) out[i] += pj * th_f16_to_f32(vj[i]);
        } else {
            const float *vj = (const float *)th_kv_v(kv, t->il, s, lo + j) + (int64_t)kvh * hdv;
            for (int32_t i = 0; i < hdv; i++) out[i] += sc[j] * vj[i];
        }
    }
}

static void attn_worker(void *arg, int ith, int nth) {
    attn_task *t = arg;
    th_context *c = t->c;
    int32_t n_head = c->model->hp.n_head;
    int64_t total = (int64_t)t->n_tokens * n_head;
    float *sc = c->scores + (size_t)ith * c->p.n_ctx;
    float *qtmp = c->qtmp + (size_t)ith * (size_t)c->model->hp.head_dim;
    for (int64_t i = total * ith / nth; i < total * (ith + 1) / nth; i++)
        attn_head(c, t, (int32_t)(i / n_head), (int32_t)(i % n_head), sc, qtmp);
}

static void store_kv(th_context *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq) {
    th_kv *kv = &c->kv;
    for (int32_t t = 0; t < n; t++) {
        const float *k = c->kc + (int64_t)t * c->k_w, *v = c->vc + (int64_t)t * c->v_w;
        void *kd = th_kv_k(kv, il, seq[t], pos[t]), *vd = th_kv_v(kv, il, seq[t], pos[t]);
        if (kv->f16) {
            for (int64_t i = 0; i < c->k_w; i++) ((uint16_t *)kd)[i] = th_f32_to_f16(k[i]);
            for (int64_t i = 0; i < c->v_w; i++) ((uint16_t *)vd)[i] = th_f32_to_f16(v[i]);
        } else {
            memcpy(kd, k, (size_t)c->k_w * sizeof(float));
            memcpy(vd, v, (size_t)c->v_w * sizeof(float));
        }
    }
}

/* ------------------------------------------------------------------ layers */

static void norm_rows(const th_context *c, float *y, const float *x, const th_weight *w, int64_t n, int64_t width) {
    for (int64_t t = 0; t < n; t++)
        th_op_rmsnorm(y + t * width, x + t * width, w ? w->data : NULL, width, c->model->hp.norm_eps);
}

static void qk_prepare(th_context *c, const th_layer *L, int32_t n, const int32_t *pos) {
    const th_hparams *hp = &c->model->hp;
    const float *ff = c->model->rope_freqs.data;
    for (int32_t t = 0; t < n; t++) {
        float *q = c->q + (int64_t)t * c->q_w, *k = c->kc + (int64_t)t * c->k_w;
        for (int32_t h = 0; h < hp->n_head; h++) {
            float *qh = q + (int64_t)h * hp->head_dim;
            if (L->q_norm.data) th_op_rmsnorm(qh, qh, L->q_norm.data, hp->head_dim, hp->norm_eps);
            th_op_rope(qh, hp->n_rot, pos[t], L->rope_base, hp->rope_freq_scale, ff, hp->rope_type);
        }
        for (int32_t h = 0; h < hp->n_head_kv; h++) {
            float *kh = k + (int64_t)h * hp->head_dim;
            if (L->k_norm.data) th_op_rmsnorm(kh, kh, L->k_norm.data, hp->head_dim, hp->norm_eps);
            th_op_rope(kh, hp->n_rot, pos[t], L->rope_base, hp->rope_freq_scale, ff, hp->rope_type);
        }
    }
}

static void attention_block(th_context *c, int32_t il, int32_t n, const int32_t *pos, const int32_t *seq) {
    const th_hparams *hp = &c->model->hp;
    const th_layer *L = &c->model->layers[il];
    int64_t E = hp->n_embd;
    norm_rows(c, c->h, c->x, &L->attn_norm, n, E);
    matmul(c, &L->wq, 0, c->h, E, n, c->q, c->q_w);
    matmul(c, &L->wk, 0, c->h, E, n, c->kc, c->k_w);
    matmul(c, &L->wv, 0, c->h, E, n, c->vc, c->v_w);
    add_bias(&L->bq, c->q, c->q_w, n);
    add_bias(&L->bk, c->kc, c->k_w, n);
    add_bias(&L->bv, c->vc, c->v_w, n);
    qk_prepare(c, L, n, pos);
    store_kv(c, il, n, pos, seq);
    attn_task at = { .c = c, .il = il, .n_tokens = n, .pos = pos, .seq = seq, .window = L->window };
    th_pool_run(c->pool, attn_worker, &at);
    matmul(c, &L->wo, 0, c->att, c->att_w, n, c->tmp, E);
    add_bias(&L->bo, c->tmp, E, n);
    if (L->post_attn_norm.data) norm_rows(c, c->tmp, c->tmp, &L->post_attn_norm, n, E);
    for (int32_t t = 0; t < n; t++) th_op_add(c->x + (int64_t)t * E, c->tmp + (int64_t)t * E, E);
}

static void ffn_block(th_context *c, int32_t il, int32_t n) {
    const th_hparams *hp = &c->model->hp;
    const th_layer *L = &c->model->layers[il];
    int64_t E = hp->n_embd, F = L->w_gate.ne1;
    norm_rows(c, c->h, c->x, &L->ffn_norm, n, E);
    matmul(c, &L->w_gate, 0, c->h, E, n, c->ff_g, c->ff_w);
    matmul(c, &L->w_up, 0, c->h, E, n, c->ff_u, c->ff_w);
    for (int32_t t = 0; t < n; t++) {
        float *g = c->ff_g + (int64_t)t * c->ff_w, *u = c->ff_u + (int64_t)t * c->ff_w;
        if (hp->act_fn == TH_ACT_GELU) th_op_geglu(g, g, u, F);
        else th_op_swiglu(g, g, u, F);
    }
    matmul(c, &L->w_down, 0, c->ff_g, c->ff_w, n, c->tmp, E);
    if (L->post_ffn_norm.data) norm_rows(c, c->tmp, c->tmp, &L->post_ffn_norm, n, E);
    for (int32_t t = 0; t < n; t++) th_op_add(c->x + (int64_t)t * E, c->tmp + (int64_t)t * E, E);
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

/* Number the tokens that want logits (out_row) and make room for their rows. */
static th_status plan_outputs(th_context *c, const int8_t *want, int32_t n, int32_t *n_out) {
    int32_t rows = 0;
    for (int32_t t = 0; t < n; t++) c->out_row[t] = want[t] ? rows++ : -1;
    if ((size_t)rows > c->logits_rows) {
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
    matmul(c, &m->output, 0, c->h, E, rows, c->logits, V);
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
                        .out_row = c->out_row, .n_out = n_out, .logits = c->logits };
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
        output_logits(c, n, n_out);
    }
    for (uint32_t q = 0; q < c->p.n_seq_max; q++) c->kv.seqs[q].len = c->new_len[q];
    c->n_last = n;
    return TH_OK;
}

const float *th_get_logits(th_context *c, int32_t i) {
    if (!c || i < 0 || i >= c->n_last || c->out_row[i] < 0) {
        th_set_error(TH_ERR_ARG, "th_get_logits: batch index %d has no logits", i);
        return NULL;
    }
    return c->logits + (size_t)c->out_row[i] * (size_t)c->model->hp.n_vocab;
}

/* ------------------------------------------------------------------ context */

th_context_params th_context_default_params(void) {
    return (th_context_params){ .n_ctx = 0, .n_batch = 512, .n_seq_max = 1, .kv_block = 16,
                                .n_threads = 0, .kv_type = TH_KV_F16 };
}

static th_status alloc_scratch(th_context *c) {
    const th_hparams *hp = &c->model->hp;
    size_t B = c->p.n_batch, nt = (size_t)th_pool_size(c->pool);
    int64_t ff = hp->n_ff;
    for (int32_t il = 0; il < hp->n_layer; il++) ff = TH_MAX(ff, c->model->layers[il].w_gate.ne1);
    c->q_w = (int64_t)hp->n_head * hp->head_dim;
    c->k_w = (int64_t)hp->n_head_kv * hp->head_dim;
    c->v_w = (int64_t)hp->n_head_kv * hp->head_dim_v;
    c->att_w = (int64_t)hp->n_head * hp->head_dim_v;
    c->ff_w = ff;
    int64_t widest = TH_MAX(TH_MAX((int64_t)hp->n_embd, ff), TH_MAX(c->q_w, c->att_w));
    /* the largest activation row in any act type: Q8_K is 292 bytes / 256 = 1.15 B/elem, F32 4 */
    c->actq_cap = B * (size_t)widest * 4 + 1024;
    c->x = malloc(B * (size_t)hp->n_embd * sizeof(float));
    c->h = malloc(B * (size_t)TH_MAX(hp->n_embd, 1) * sizeof(float));
    c->q = malloc(B * (size_t)c->q_w * sizeof(float));
    c->kc = malloc(B * (size_t)c->k_w * sizeof(float));
    c->vc = malloc(B * (size_t)c->v_w * sizeof(float));
    c->att = malloc(B * (size_t)c->att_w * sizeof(float));
    c->tmp = malloc(B * (size_t)hp->n_embd * sizeof(float));
    c->ff_g = malloc(B * (size_t)ff * sizeof(float));
    c->ff_u = malloc(B * (size_t)ff * sizeof(float));
    c->actq = malloc(c->actq_cap);
    c->scores = malloc(nt * c->p.n_ctx * sizeof(float));
    c->qtmp = malloc(nt * (size_t)hp->head_dim * sizeof(float));
    c->out_row = malloc(B * sizeof(int32_t));
    c->pos_buf = malloc(B * sizeof(int32_t));
    c->seq_buf = malloc(B * sizeof(int32_t));
    c->new_len = malloc(c->p.n_seq_max * sizeof(int32_t));
    c->want_buf = malloc(B);
    if (!c->want_buf || !c->x || !c->h || !c->q || !c->kc || !c->vc || !c->att || !c->tmp || !c->ff_g || !c->ff_u ||
        !c->actq || !c->scores || !c->qtmp || !c->out_row || !c->pos_buf || !c->seq_buf || !c->new_len)
        return th_set_error(TH_ERR_NOMEM, "out of memory for the context's scratch buffers (batch %zu)", B);
    return TH_OK;
}

static th_status gpu_setup(th_context *c) {
    c->block_tables = calloc((size_t)c->p.n_seq_max * c->kv.n_blocks, sizeof(int32_t));
    if (!c->block_tables) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_status s = th_gpu_init(c->model, c->p.n_batch, c->kv.n_blocks, c->kv.block, c->kv.f16,
                              (int32_t)c->p.n_seq_max, false, &c->gpu);
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
    if (!s && p.gpu) s = gpu_setup(c);
    if (s) { th_context_free(c); return s; }
    *out = c;
    return TH_OK;
}

void th_context_free(th_context *c) {
    if (!c) return;
    th_gpu_free(c->gpu);
    free(c->block_tables);
    th_pool_free(c->pool);
    th_kv_free(&c->kv);
    free(c->x); free(c->h); free(c->q); free(c->kc); free(c->vc); free(c->att); free(c->tmp);
    free(c->ff_g); free(c->ff_u); free(c->actq); free(c->scores); free(c->qtmp); free(c->logits);
    free(c->out_row); free(c->pos_buf); free(c->seq_buf); free(c->new_len); free(c->want_buf);
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
