/* context.c — what a context does whatever the backend: th_decode (batch checks,
 * positions, the output plan, KV reservation, then th_block_forward), the logits
 * and argmax API, context creation (parameters, the KV cache's block tables,
 * choosing the backend and letting it set up) and the KV API. */
#include "context.h"
#include "core/threadpool.h"
#include "sample/greedy.h"
#include "arch/arch.h"
#include "place.h"
#include <stdlib.h>

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

/* The backend keeps the logits on its device and returns only each row's argmax. */
static bool argmax_on_device(const th_context *c) { return c->be->device_argmax && c->p.logits_argmax_only; }

/* A step whose logits rows stay on the device (the argmax ids come back, the rows
 * only when th_get_logits asks): a device backend with fetch_logits, few rows. A
 * greedy caller then never pays the copy of n_out × n_vocab floats. */
static bool lazy_logits(const th_context *c, int32_t n_out) {
    return c->be->fetch_logits && c->be->device_argmax && !c->p.logits_argmax_only && n_out > 0 &&
           n_out <= TH_LAZY_LOGITS_MAX;
}

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

th_status th_decode(th_context *c, const th_batch *b) {
    if (!c) return th_set_error(TH_ERR_ARG, "th_decode: no context");
    const int8_t *want = NULL;
    th_status s = check_batch(c, b, &want);
    if (s) return s;
    int32_t n = b->n_tokens, n_out = 0;
    if ((s = plan_outputs(c, want, n, &n_out))) return s;
    if ((s = th_kv_reserve(&c->kv, c->new_len))) return s;
    c->n_last = 0;
    c->argmax_valid = c->logits_pending = false;
    bool lazy = lazy_logits(c, n_out), dev_argmax = argmax_on_device(c) || lazy;
    th_step st = { .n = n, .tok = b->token, .pos = c->pos_buf, .seq = c->seq_buf, .out_row = c->out_row,
                   .n_out = n_out, .logits = dev_argmax ? NULL : c->logits, .argmax = dev_argmax ? c->argmax : NULL };
    if ((s = th_block_forward(c, &st))) return s;
    c->argmax_valid = dev_argmax;
    c->logits_pending = lazy;
    c->n_out_last = n_out;
    for (uint32_t q = 0; q < c->p.n_seq_max; q++) {
        if (c->new_len[q] != c->kv.seqs[q].len) th_rs_commit(&c->rs, (int32_t)q, c->kv.seqs[q].len, c->new_len[q]);
        c->kv.seqs[q].len = c->new_len[q];
    }
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
    if (c->logits_pending) {   /* a lazy step: every row comes over now, once */
        if (c->be->fetch_logits(c, c->n_out_last, c->logits)) return NULL;
        c->logits_pending = false;
    }
    return c->logits + (size_t)c->out_row[i] * (size_t)c->model->hp.n_vocab;
}

th_token th_get_argmax(th_context *c, int32_t i) {
    if (!has_output(c, i)) {
        th_set_error(TH_ERR_ARG, "th_get_argmax: batch index %d has no logits", i);
        return -1;
    }
    if (c->argmax_valid) return c->argmax[c->out_row[i]];
    int64_t nv = c->model->hp.n_vocab;
    return th_greedy_argmax(c->logits + (size_t)c->out_row[i] * (size_t)nv, nv);
}

/* ------------------------------------------------------------------ context */

th_context_params th_context_default_params(void) {
    return (th_context_params){ .n_ctx = 0, .n_batch = 512, .n_seq_max = 1, .kv_block = 16,
                                .n_threads = 0, .kv_type = TH_KV_F16, .gpu = false, .logits_argmax_only = false };
}

static void kv_copy_block(void *ud, int32_t dst, int32_t src) {
    th_context *c = ud;
    c->be->copy_block(c, dst, src);
}

static th_status check_params(const th_model *m, const th_context_params *params, th_context_params *out) {
    th_context_params p = params ? *params : th_context_default_params();
    if (p.n_ctx == 0) p.n_ctx = (uint32_t)TH_MIN(m->hp.n_ctx_train, 4096);
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.n_seq_max == 0) p.n_seq_max = 1;
    if (p.kv_block == 0) p.kv_block = 16;
    if (p.n_threads <= 0) p.n_threads = th_n_cores();
    if (p.n_ctx > (1u << 24) || p.n_batch > (1u << 16) || p.n_seq_max > 4096 || p.kv_block > 4096 ||
        p.n_threads > 1024 || (p.kv_type != TH_KV_F16 && p.kv_type != TH_KV_F32) || p.rs_snapshots > 4096)
        return th_set_error(TH_ERR_ARG, "th_context_new: parameters out of range (n_ctx %u, n_batch %u, n_seq_max %u, kv_block %u, threads %d, kv_type %d)",
                            p.n_ctx, p.n_batch, p.n_seq_max, p.kv_block, p.n_threads, p.kv_type);
    *out = p;
    return TH_OK;
}

/* The recurrent state of a hybrid model (rstate.h), on a backend that runs its layers. */
static th_status rs_init(th_context *c) {
    const th_hparams *hp = &c->model->hp;
    if (!c->be->recurrent || !c->be->att_gate || !c->be->shexp_gated)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: the %s backend does not run recurrent (DeltaNet) layers yet; use a CPU context",
                            c->model->arch->name, c->be->name);
    int64_t dk = hp->ssm_d_state, cd = 2 * dk * hp->ssm_n_group + dk * hp->ssm_dt_rank;
    return th_rs_init(&c->rs, hp->n_recurrent, (int64_t)(hp->ssm_d_conv - 1) * cd, (int64_t)hp->ssm_dt_rank * dk * dk,
                      (int32_t)c->p.n_seq_max, (int32_t)c->p.rs_snapshots, c->be->rs_restore == NULL);
}

#define ALLOC(ptr, count) do { if (!((ptr) = malloc((size_t)(count) * sizeof *(ptr) + 1))) ok = false; } while (0)

/* Does layer il keep its K/V in the host cache? (attention layers on a host-KV backend) */
static bool kv_host_layer(const th_context *c, int32_t il) {
    if (c->model->layers[il].recurrent) return false;
    return !c->layer_dev || c->place_be[c->layer_dev[il]]->kv_on_host;
}

/* A context on backend be; dev/devs: a mixed placement (be is th_backend_place). */
static th_status context_create(th_model *m, const th_context_params *p, const th_backend *be, const int8_t *dev,
                                const th_backend *const devs[2], th_context **out) {
    th_context *c = calloc(1, sizeof *c);
    if (!c) return th_set_error(TH_ERR_NOMEM, "out of memory");
    c->model = m;
    c->p = *p;
    c->be = be;
    const th_hparams *hp = &m->hp;
    size_t B = p->n_batch;
    bool ok = true;
    ALLOC(c->out_row, B); ALLOC(c->pos_buf, B); ALLOC(c->seq_buf, B); ALLOC(c->argmax, B);
    ALLOC(c->new_len, p->n_seq_max); ALLOC(c->want_buf, B);
    if (dev) {
        ALLOC(c->layer_dev, hp->n_layer);
        if (c->layer_dev) memcpy(c->layer_dev, dev, (size_t)hp->n_layer);
        c->place_be[0] = devs[0];
        c->place_be[1] = devs[1];
    }
    th_status s = ok ? TH_OK : th_set_error(TH_ERR_NOMEM, "out of memory for the context's batch buffers (batch %zu)", B);
    /* a hybrid model (or a mixed placement) on a host-KV backend keeps host K/V only for
     * its attention layers (on a host backend) */
    bool kv_slots = be->kv_on_host && (hp->n_recurrent > 0 || dev);
    int32_t n_kv_layer = hp->n_layer;
    if (!s && kv_slots) {
        n_kv_layer = 0;
        for (int32_t il = 0; il < hp->n_layer; il++) n_kv_layer += kv_host_layer(c, il);
        n_kv_layer = TH_MAX(n_kv_layer, 1);
    }
    if (!s) s = th_kv_init(&c->kv, n_kv_layer, (int64_t)hp->n_head_kv * hp->head_dim,
                           (int64_t)hp->n_head_kv * hp->head_dim_v, p->n_ctx, (int32_t)p->kv_block,
                           (int32_t)p->n_seq_max, p->kv_type == TH_KV_F16, be->kv_on_host);
    if (!s && kv_slots) {
        if (!(c->kv.layer_slot = malloc((size_t)hp->n_layer * sizeof(int32_t))))
            s = th_set_error(TH_ERR_NOMEM, "out of memory");
        else
            for (int32_t il = 0, k = 0; il < hp->n_layer; il++) c->kv.layer_slot[il] = kv_host_layer(c, il) ? k++ : -1;
    }
    if (!s && hp->n_recurrent > 0) s = rs_init(c);
    if (!s && m->layers[0].ffn_sub_norm.data && !be->ffn_sub)
        s = th_set_error(TH_ERR_UNSUPPORTED, "%s: the %s backend does not run its sub-norm layers yet; use a CPU context",
                         m->arch->name, be->name);
    if (!s && be->copy_block) {
        c->kv.copy_block = kv_copy_block;
        c->kv.copy_ud = c;
    }
    if (!s && p->layers && *p->layers) {
        if (!(c->run_layer = calloc((size_t)hp->n_layer, sizeof *c->run_layer)))
            s = th_set_error(TH_ERR_NOMEM, "out of memory");
        else s = th_parse_layer_list(p->layers, hp->n_layer, c->run_layer);
    }
    c->p.layers = NULL;       /* the caller's strings are not kept */
    c->p.gpu_layers = NULL;
    if (!s) s = be->init(c);
    if (s) { th_context_free(c); return s; }
    *out = c;
    return TH_OK;
}

th_status th_context_new_placed(th_model *m, const th_context_params *params, const int8_t *dev,
                                const th_backend *const devs[2], th_context **out) {
    *out = NULL;
    if (!m) return th_set_error(TH_ERR_ARG, "th_context_new: no model");
    if (!m->layers) return th_set_error(TH_ERR_ARG, "th_context_new: the model was loaded vocabulary-only");
    th_context_params p;
    th_status s = check_params(m, params, &p);
    if (s) return s;
    const th_backend *def[2] = { &th_backend_cpu, th_backend_cuda() };
    if (!devs) devs = def;
    int32_t n_dev[2] = { 0, 0 };
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        if (dev[il] != TH_DEV_CPU && dev[il] != TH_DEV_GPU)
            return th_set_error(TH_ERR_ARG, "th_context_new: layer %d placed on device %d", il, dev[il]);
        n_dev[dev[il]]++;
    }
    if (n_dev[TH_DEV_GPU] > 0 && !devs[TH_DEV_GPU])
        return th_set_error(TH_ERR_UNSUPPORTED, "gpu_layers (--gpu-layers): %d of %d layers placed on the GPU, but this build has no GPU backend (build with `make CUDA=1`)",
                            n_dev[TH_DEV_GPU], m->hp.n_layer);
    if (n_dev[TH_DEV_GPU] == 0) return context_create(m, &p, devs[TH_DEV_CPU], NULL, NULL, out);
    if (n_dev[TH_DEV_CPU] == 0) return context_create(m, &p, devs[TH_DEV_GPU], NULL, NULL, out);
    return context_create(m, &p, &th_backend_place, dev, devs, out);
}

th_status th_context_new(th_model *m, const th_context_params *params, th_context **out) {
    *out = NULL;
    if (!m) return th_set_error(TH_ERR_ARG, "th_context_new: no model");
    if (!m->layers) return th_set_error(TH_ERR_ARG, "th_context_new: the model was loaded vocabulary-only");
    th_context_params p;
    th_status s = check_params(m, params, &p);
    if (s) return s;
    if (p.gpu_layers && *p.gpu_layers) {
        int8_t *dev = malloc((size_t)m->hp.n_layer);
        if (!dev) return th_set_error(TH_ERR_NOMEM, "out of memory");
        s = th_parse_gpu_layers(p.gpu_layers, m->hp.n_layer, dev);
        if (!s) s = th_context_new_placed(m, &p, dev, NULL, out);
        free(dev);
        return s;
    }
    const th_backend *be = p.gpu ? th_backend_cuda() : &th_backend_cpu;
    if (!be) return th_set_error(TH_ERR_UNSUPPORTED, "this build has no GPU backend (build with `make CUDA=1`)");
    return context_create(m, &p, be, NULL, NULL, out);
}
#undef ALLOC

void th_context_free(th_context *c) {
    if (!c) return;
    c->be->free(c);
    th_kv_free(&c->kv);
    th_rs_free(&c->rs);
    free(c->logits);
    free(c->run_layer);
    free(c->layer_dev);
    free(c->out_row); free(c->pos_buf); free(c->seq_buf); free(c->new_len); free(c->want_buf); free(c->argmax);
    free(c);
}

uint32_t th_context_n_ctx(const th_context *c) { return c->p.n_ctx; }

th_status th_context_set_layer_io(th_context *c, int32_t from, const float *x_in, float **x_out) {
    if (!c) return th_set_error(TH_ERR_ARG, "th_context_set_layer_io: no context");
    const th_hparams *hp = &c->model->hp;
    if (from < 0 || from > hp->n_layer || (from > 0 && !x_in))
        return th_set_error(TH_ERR_ARG, "th_context_set_layer_io: layer %d (the model has %d) or no hidden states", from,
                            hp->n_layer);
    /* the X hand-over of a backend whose step runs on the host: the CUDA backend's
     * synchronises its stream, which its decode graphs cannot hold */
    bool can = c->be->get_x && c->be->put_x && c->be->kv_on_host;
    if ((from > 0 || x_out) && (!can || hp->n_recurrent > 0))
        return th_set_error(TH_ERR_UNSUPPORTED, "th_context_set_layer_io: not on the %s backend%s", c->be->name,
                            hp->n_recurrent > 0 ? " or with recurrent layers" : "");
    c->x_from = from;
    c->x_in = from > 0 ? x_in : NULL;
    c->x_out = x_out;
    return TH_OK;
}

th_status th_context_set_observer(th_context *c, const th_observer *obs) {
    if (!c) return th_set_error(TH_ERR_ARG, "th_context_set_observer: no context");
    if (!c->be->set_observer)
        return th_set_error(TH_ERR_UNSUPPORTED, "th_context_set_observer: the %s backend cannot report matmul inputs or routing (use a CPU context)",
                            c->be->name);
    if (obs) c->obs = *obs;
    return c->be->set_observer(c, obs ? &c->obs : NULL);
}

th_status th_gpu_available(char *desc, size_t cap) {
    if (desc && cap) desc[0] = 0;
    const th_backend *g = th_backend_cuda();
    if (!g) return th_set_error(TH_ERR_UNSUPPORTED, "this build has no GPU backend (build with `make CUDA=1`)");
    return g->probe(desc, cap);
}

/* ------------------------------------------------------------------ layer lists */

/* A decimal index at *p (no sign, at most 9 digits); advances *p. */
static bool parse_index(const char **p, int32_t *out) {
    int32_t v = 0, nd = 0;
    while (**p >= '0' && **p <= '9') {
        if (++nd > 9) return false;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    *out = v;
    return nd > 0;
}

th_status th_parse_layer_list(const char *spec, int32_t n_layer, bool *run) {
    if (!spec || !run || n_layer < 1) return th_set_error(TH_ERR_ARG, "layer list: nothing to parse");
    memset(run, 0, (size_t)n_layer * sizeof *run);
    const char *p = spec;
    int32_t n_on = 0;
    for (;;) {
        const char *item = p;
        int32_t a, b;
        if (!parse_index(&p, &a))
            return th_set_error(TH_ERR_ARG, "layer list '%.64s': expected a layer index at offset %d", spec, (int)(item - spec));
        b = a;
        if (*p == '-') {
            p++;
            if (!parse_index(&p, &b))
                return th_set_error(TH_ERR_ARG, "layer list '%.64s': expected the end of the range at offset %d", spec, (int)(p - spec));
        }
        if (a > b) return th_set_error(TH_ERR_ARG, "layer list '%.64s': range %d-%d is reversed", spec, a, b);
        if (b >= n_layer)
            return th_set_error(TH_ERR_ARG, "layer list '%.64s': layer %d is outside the model's %d layers [0, %d)", spec, b,
                                n_layer, n_layer);
        for (int32_t i = a; i <= b; i++) { n_on += !run[i]; run[i] = true; }
        if (*p == 0) break;
        if (*p != ',') return th_set_error(TH_ERR_ARG, "layer list '%.64s': unexpected character at offset %d", spec, (int)(p - spec));
        p++;
    }
    return n_on > 0 ? TH_OK : th_set_error(TH_ERR_ARG, "layer list '%.64s' selects no layer", spec);
}

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
    int32_t len = c->kv.seqs[seq].len;
    if ((s = th_rs_truncate(&c->rs, seq, len, n_keep))) return s;
    if (c->rs.n_rec && n_keep < len && c->be->rs_restore &&
        (s = c->be->rs_restore(c, seq, n_keep <= 0 ? -1 : n_keep % c->rs.n_snap)))
        return s;
    th_kv_truncate(&c->kv, seq, n_keep);
    return TH_OK;
}

th_status th_kv_seq_copy(th_context *c, int32_t dst, int32_t src) {
    th_status s = check_seq(c, dst);
    if (!s) s = check_seq(c, src);
    if (s) return s;
    th_kv_copy_seq(&c->kv, dst, src);
    th_rs_copy(&c->rs, dst, src);
    if (c->rs.n_rec && dst != src && c->be->rs_copy) return c->be->rs_copy(c, dst, src);
    return TH_OK;
}

uint32_t th_kv_blocks_used(const th_context *c) { return th_kv_used(&c->kv); }
uint32_t th_kv_blocks_total(const th_context *c) { return c->kv.n_blocks; }

#ifndef TH_CUDA
const th_backend *th_backend_cuda(void) { return NULL; }
#endif
