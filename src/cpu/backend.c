/* backend.c — the CPU backend's op table (backend.h): its state (th_cpu: scratch
 * for n_batch tokens, the thread pool, per-layer rope parameters, the kernel
 * table of this CPU level), and each op of the decoder block on it. The matmuls
 * are matmul.c's (activation rows quantized once, weight rows split over the
 * pool), attention is attention.c's, routed experts moe.c's, latent attention
 * mla.c's; row ops (norms, residual adds, rope) are split over the pool by token
 * for batches of 4 or more. All scratch is allocated at context creation. */
#include "context.h"
#include "cpu/forward.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static th_cpu *cpu(th_context *c) { return c->bd; }

/* A block buffer's rows and their width. */
static float *buf(th_cpu *c, th_buf b) {
    switch (b) {
    case TH_BUF_X: return c->x;
    case TH_BUF_H: return c->h;
    case TH_BUF_T: return c->tmp;
    default: return c->att;
    }
}
static int64_t buf_width(const th_cpu *c, th_buf b) { return b == TH_BUF_ATT ? c->att_w : c->model->hp.n_embd; }

static void add_bias(const th_weight *b, float *y, int64_t stride, int64_t nb) {
    th_fwd_add_bias(b->data, b->ne0, y, stride, nb);
}

/* ------------------------------------------------------------------ row ops */

typedef struct { th_cpu *c; float *y; const float *x; const float *w; int64_t width; int32_t n; bool norm; } rows_task;

static void rows_worker(void *arg, int ith, int nth) {
    rows_task *a = arg;
    float eps = a->c->model->hp.norm_eps;
    for (int32_t t = a->n * ith / nth; t < a->n * (ith + 1) / nth; t++) {
        float *y = a->y + (int64_t)t * a->width;
        const float *x = a->x + (int64_t)t * a->width;
        if (a->norm) th_op_rmsnorm(y, x, a->w, a->width, eps);
        else th_op_add(y, x, a->width);
    }
}

/* y = rmsnorm(x)·w (norm) or y += x, row by row, over the pool by token for batches. */
static void rows_run(th_cpu *c, float *y, const float *x, const th_weight *w, int64_t width, int32_t n, bool norm) {
    rows_task t = { c, y, x, w ? w->data : NULL, width, n, norm };
    if (n >= 4) th_pool_run(c->pool, rows_worker, &t);
    else rows_worker(&t, 0, 1);
}

static th_status op_norm(th_context *ctx, const th_step *s, th_buf dst, th_buf src, const th_weight *w,
                         const th_weight *next) {
    th_cpu *c = cpu(ctx);
    rows_run(c, buf(c, dst), buf(c, src), w, buf_width(c, dst), s->n, true);
    return TH_OK;
}

static th_status op_add(th_context *ctx, const th_step *s, th_buf dst, th_buf src) {
    th_cpu *c = cpu(ctx);
    rows_run(c, buf(c, dst), buf(c, src), NULL, buf_width(c, dst), s->n, false);
    return TH_OK;
}

static th_status op_embed(th_context *ctx, const th_step *s) {
    th_cpu *c = cpu(ctx);
    const th_model *m = c->model;
    int64_t E = m->hp.n_embd;
    for (int32_t t = 0; t < s->n; t++) {
        const uint8_t *row = (const uint8_t *)m->tok_embd.data + (size_t)s->tok[t] * m->tok_embd.row_bytes;
        c->k->dequant[m->tok_embd.type](row, c->x + (int64_t)t * E, E);
        if (m->hp.embd_scale != 1.0f) th_op_scale(c->x + (int64_t)t * E, m->hp.embd_scale, E);
    }
    return TH_OK;
}

/* ------------------------------------------------------------------ attention */

/* q, k, v of the batch from H: separate projections (one pass) or one fused [q; k; v]. */
static th_status op_qkv(th_context *ctx, const th_step *s, int32_t il) {
    th_cpu *c = cpu(ctx);
    const th_layer *L = &c->model->layers[il];
    int64_t E = c->model->hp.n_embd;
    int32_t n = s->n;
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
        return TH_OK;
    }
    if (L->q_gated) { /* per head [q; gate]: through the wide scratch, split */
        int64_t hd = c->model->hp.head_dim, w = 2 * c->q_w;
        th_fwd_matmul(c, &L->wq, 0, c->h, E, n, c->wide, w);
        for (int32_t t = 0; t < n; t++)
            for (int64_t h = 0; h < c->model->hp.n_head; h++) {
                const float *row = c->wide + (int64_t)t * w + 2 * h * hd;
                memcpy(c->q + (int64_t)t * c->q_w + h * hd, row, (size_t)hd * sizeof(float));
                memcpy(c->qgate + (int64_t)t * c->q_w + h * hd, row + hd, (size_t)hd * sizeof(float));
            }
        const th_weight *kv[2] = { &L->wk, &L->wv };
        float *const ky[2] = { c->kc, c->vc };
        const int64_t kst[2] = { c->k_w, c->v_w };
        th_fwd_matmul_multi(c, kv, ky, kst, 2, c->h, E, n);
        return TH_OK;
    }
    const th_weight *ws[3] = { &L->wq, &L->wk, &L->wv };
    float *const ys[3] = { c->q, c->kc, c->vc };
    const int64_t strides[3] = { c->q_w, c->k_w, c->v_w };
    th_fwd_matmul_multi(c, ws, ys, strides, 3, c->h, E, n);
    add_bias(&L->bq, c->q, c->q_w, n);
    add_bias(&L->bk, c->kc, c->k_w, n);
    add_bias(&L->bv, c->vc, c->v_w, n);
    return TH_OK;
}

static th_status op_mla_qkv(th_context *ctx, const th_step *s, int32_t il) {
    th_mla_project(cpu(ctx), il, s->n);
    return TH_OK;
}

/* RMSNorm of each head (w one head wide) or of the whole row (w as wide as the row). */
static void qk_norm(const th_cpu *c, float *x, const th_weight *w, int64_t row_w, int32_t n_heads, int32_t hd) {
    float eps = c->model->hp.norm_eps;
    if (w->ne0 == row_w) th_op_rmsnorm(x, x, w->data, row_w, eps);
    else
        for (int32_t h = 0; h < n_heads; h++) th_op_rmsnorm(x + (int64_t)h * hd, x + (int64_t)h * hd, w->data, hd, eps);
}

typedef struct { th_cpu *c; int32_t il, n; const int32_t *pos; } qk_task;

/* Latent attention ropes the last n_rot dims of every q and k head (after the
 * n_embd_head_nope dims that are not roped). */
static void rope_mla_token(th_cpu *c, const th_rope_params *rp, int32_t t, int32_t pos) {
    const th_hparams *hp = &c->model->hp;
    int64_t hd = hp->head_dim, nope = hp->n_embd_head_nope;
    for (int32_t h = 0; h < hp->n_head; h++) th_op_rope_ext(c->q + (int64_t)t * c->q_w + h * hd + nope, pos, rp);
    for (int32_t h = 0; h < hp->n_head_kv; h++) th_op_rope_ext(c->kc + (int64_t)t * c->k_w + h * hd + nope, pos, rp);
}

static void qk_worker(void *arg, int ith, int nth) {
    qk_task *k = arg;
    th_cpu *c = k->c;
    const th_hparams *hp = &c->model->hp;
    const th_layer *L = &c->model->layers[k->il];
    const th_rope_params *rp = &c->rope[k->il];
    const int32_t *pos = k->pos;
    bool mla = L->wkv_a_mqa.data != NULL;
    for (int32_t t = k->n * ith / nth; t < k->n * (ith + 1) / nth; t++) {
        if (mla) {
            rope_mla_token(c, rp, t, pos[t]);
            continue;
        }
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

/* q/k norms and rope (split over the threads by token for batches), then K/V into the cache. */
static th_status op_rope_kv(th_context *ctx, const th_step *s, int32_t il) {
    th_cpu *c = cpu(ctx);
    qk_task t = { c, il, s->n, s->pos };
    if (s->n >= 4) th_pool_run(c->pool, qk_worker, &t);
    else qk_worker(&t, 0, 1);
    th_attn_store(c, il, s->n, s->pos, s->seq);
    return TH_OK;
}

static th_status op_attention(th_context *ctx, const th_step *s, int32_t il, const th_weight *next) {
    th_attn_run(cpu(ctx), il, s->n, s->pos, s->seq);
    return TH_OK;
}

/* ------------------------------------------------------------------ matrices */

/* dst (+)= src·Wᵀ + b; the accumulating form goes through tmp2 and one add. */
static th_status op_matmul(th_context *ctx, const th_step *s, th_buf dst, const th_weight *w, const th_weight *b,
                           th_buf src, bool acc) {
    th_cpu *c = cpu(ctx);
    int64_t dw = buf_width(c, dst);
    float *y = acc ? c->tmp2 : buf(c, dst);
    th_fwd_matmul(c, w, 0, buf(c, src), buf_width(c, src), s->n, y, dw);
    add_bias(b, y, dw, s->n);
    if (acc) rows_run(c, buf(c, dst), y, NULL, dw, s->n, false);
    return TH_OK;
}

static th_status op_ffn(th_context *ctx, const th_step *s, const th_weight *gate, const th_weight *up,
                        const th_weight *down, th_buf dst, bool acc) {
    th_cpu *c = cpu(ctx);
    th_fwd_ffn(c, gate, up, down, c->h, s->n, buf(c, dst), acc);
    return TH_OK;
}

/* dst (+)= down(rmsnorm(silu(H·gate) ⊙ H·up)·ffn_sub_norm): bitnet's FFN, the sub-norm
 * between the GLU and the down projection. */
static th_status op_ffn_sub(th_context *ctx, const th_step *s, int32_t il, th_buf dst, bool acc) {
    th_cpu *c = cpu(ctx);
    const th_layer *L = &c->model->layers[il];
    int64_t E = c->model->hp.n_embd, F = L->w_down.ne0;
    const th_weight *ws[2] = { &L->w_gate, &L->w_up };
    float *const ys[2] = { c->ff_g, c->ff_u };
    const int64_t st[2] = { c->ff_w, c->ff_w };
    th_fwd_matmul_multi(c, ws, ys, st, 2, c->h, E, s->n);
    for (int32_t t = 0; t < s->n; t++) {
        float *g = c->ff_g + (int64_t)t * c->ff_w;
        c->k->swiglu(g, g, c->ff_u + (int64_t)t * c->ff_w, F);
        th_op_rmsnorm(g, g, L->ffn_sub_norm.data, F, c->model->hp.norm_eps);
    }
    float *y = acc ? c->tmp2 : buf(c, dst);
    th_fwd_matmul(c, &L->w_down, 0, c->ff_g, c->ff_w, s->n, y, E);
    if (acc) rows_run(c, buf(c, dst), y, NULL, E, s->n, false);
    return TH_OK;
}

static th_status op_moe(th_context *ctx, const th_step *s, int32_t il) {
    th_cpu *c = cpu(ctx);
    th_moe_ffn(c, &c->model->layers[il], c->h, s->n, c->tmp);
    return TH_OK;
}

/* Final norm + output head for the tokens that asked for logits. */
static th_status op_logits(th_context *ctx, const th_step *s) {
    th_cpu *c = cpu(ctx);
    const th_model *m = c->model;
    int64_t E = m->hp.n_embd, V = m->hp.n_vocab;
    for (int32_t t = 0; t < s->n; t++)
        if (s->out_row[t] >= 0)
            th_op_rmsnorm(c->h + (int64_t)s->out_row[t] * E, c->x + (int64_t)t * E, m->output_norm.data, E, m->hp.norm_eps);
    if (s->n_out == 0) return TH_OK;
    th_fwd_matmul(c, &m->output, 0, c->h, E, s->n_out, s->logits, V);
    if (m->hp.final_softcap > 0) th_op_softcap(s->logits, m->hp.final_softcap, (int64_t)s->n_out * V);
    return TH_OK;
}

static th_status cpu_set_observer(th_context *ctx, const th_observer *obs) {
    cpu(ctx)->obs = obs;
    return TH_OK;
}

static th_status op_begin(th_context *ctx, const th_step *s, bool *replay) {
    *replay = false;
    return TH_OK;
}

static th_status op_end(th_context *ctx, const th_step *s, th_status status) { return status; }

/* The residual rows to / from the host (a mixed placement's hand-over, place.c;
 * layer resume, th_context_set_layer_io). */
static th_status op_get_x(th_context *ctx, const th_step *s, float *host) {
    memcpy(host, cpu(ctx)->x, (size_t)s->n * (size_t)ctx->model->hp.n_embd * sizeof(float));
    return TH_OK;
}

static th_status op_put_x(th_context *ctx, const th_step *s, const float *host) {
    memcpy(cpu(ctx)->x, host, (size_t)s->n * (size_t)ctx->model->hp.n_embd * sizeof(float));
    return TH_OK;
}

/* ------------------------------------------------------------------ set-up */

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
static int64_t wide_width(const th_cpu *c) {
    const th_hparams *hp = &c->model->hp;
    const th_layer *L0 = &c->model->layers[0];
    int64_t w = 1;
    if (L0->wqkv.data) w = TH_MAX(w, c->q_w + c->k_w + c->v_w);
    w = TH_MAX(w, 2 * c->q_w);   /* a [q; gate] projection (hybrid models) */
    w = TH_MAX(w, 2 * c->ff_w);
    if (hp->kv_lora_rank > 0)
        w = TH_MAX(w, 2 * (int64_t)hp->kv_lora_rank + hp->n_rot + hp->q_lora_rank +
                          (int64_t)hp->n_head * (hp->n_embd_head_nope + hp->head_dim_v));
    return w;
}

#define ALLOC(ptr, count) do { if (!((ptr) = malloc((size_t)(count) * sizeof *(ptr) + 1))) ok = false; } while (0)

static th_status alloc_scratch(th_cpu *c) {
    const th_hparams *hp = &c->model->hp;
    size_t B = c->p.n_batch;
    int64_t E = hp->n_embd, X = hp->n_expert, K = hp->n_expert_used;
    bool ok = true;
    c->q_w = (int64_t)hp->n_head * hp->head_dim;
    c->k_w = (int64_t)hp->n_head_kv * hp->head_dim;
    c->v_w = (int64_t)hp->n_head_kv * hp->head_dim_v;
    c->att_w = (int64_t)hp->n_head * hp->head_dim_v;
    c->att_w = TH_MAX(c->att_w, (int64_t)hp->ssm_dt_rank * hp->ssm_d_state);   /* a DeltaNet output */
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
    if (!ok) return th_set_error(TH_ERR_NOMEM, "out of memory for the context's scratch buffers (batch %zu)", B);
    th_status s = th_dn_alloc(c);
    return s ? s : th_attn_alloc(c);
}
#undef ALLOC

/* Rope parameters per layer. */
static void setup_rope(th_cpu *c, const th_weight *factors) {
    const th_model *m = c->model;
    const th_hparams *hp = &m->hp;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const th_layer *L = &m->layers[il];
        th_rope_params *r = &c->rope[il];
        *r = (th_rope_params){ .n_rot = hp->n_rot, .type = hp->rope_type, .base = L->rope_base,
                               .freq_scale = L->rope_freq_scale, .ext_factor = hp->rope_ext_factor,
                               .attn_factor = hp->rope_attn_factor, .freq_factors = factors->data };
        if (r->ext_factor != 0.0f)
            th_rope_corr_dims(hp->n_rot, hp->rope_n_ctx_orig, L->rope_base, hp->rope_beta_fast, hp->rope_beta_slow,
                              &r->corr_lo, &r->corr_hi);
    }
}

static th_status cpu_init(th_context *ctx) {
    th_cpu *c = calloc(1, sizeof *c);
    if (!c) return th_set_error(TH_ERR_NOMEM, "out of memory");
    ctx->bd = c;
    c->model = ctx->model;
    c->p = ctx->p;
    c->k = ctx->model->no_amx ? th_cpu_kernels_no_amx() : th_cpu_kernels();
    c->kv = &ctx->kv;
    if (!(c->pool = th_pool_new(ctx->p.n_threads))) return th_set_error(TH_ERR_NOMEM, "out of memory for the thread pool");
    th_status s = alloc_scratch(c);
    if (s) return s;
    setup_rope(c, th_model_rope_factors(ctx->model, ctx->p.n_ctx));
    return th_cpu_repack_model(ctx->model, c->k);
}

static void cpu_free(th_context *ctx) {
    th_cpu *c = ctx->bd;
    if (!c) return;
    th_pool_free(c->pool);
    free(c->x); free(c->h); free(c->q); free(c->kc); free(c->vc); free(c->att); free(c->tmp); free(c->tmp2);
    free(c->ff_g); free(c->ff_u); free(c->wide); free(c->actq);
    th_attn_free(c);
    th_dn_free(c);
    free(c->rope); free(c->moe_logits); free(c->moe_score); free(c->moe_sel); free(c->moe_w); free(c->moe_rows);
    free(c->moe_start); free(c->moe_x); free(c->moe_y);
    free(c);
    ctx->bd = NULL;
}

static th_status cpu_probe(char *desc, size_t cap) {
    if (desc && cap) snprintf(desc, cap, "CPU (%s kernels)", th_cpu_kernels()->level);
    return TH_OK;
}

const th_backend th_backend_cpu = {
    .name = "cpu", .kv_on_host = true, .device_argmax = false,
    .probe = cpu_probe, .init = cpu_init, .free = cpu_free, .begin = op_begin, .end = op_end,
    .embed = op_embed, .norm = op_norm, .qkv = op_qkv, .mla_qkv = op_mla_qkv, .rope_kv = op_rope_kv,
    .attention = op_attention, .matmul = op_matmul, .add = op_add, .ffn = op_ffn, .moe = op_moe,
    .logits = op_logits, .set_observer = cpu_set_observer, .copy_block = NULL,
    .recurrent = th_dn_recurrent, .att_gate = th_dn_att_gate, .shexp_gated = th_dn_shexp_gated,
    .get_x = op_get_x, .put_x = op_put_x, .ffn_sub = op_ffn_sub,
};
