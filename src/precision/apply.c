/* apply.c — changing a loaded model's weights to a precision config's types:
 * the model's current assignment (its weights' types and expert slots), the plan
 * of what differs from the config (each changed tensor or expert re-quantized
 * from a higher-precision source file, rows split across a thread pool, one
 * progress line a tensor), and the swap that points the weights at the new bytes
 * (freeing the bytes they replace when precision owned them). Load-time overrides
 * (th_model_params.precision_path) run all three at load; live promotion (live.c)
 * makes the plan in the background and swaps between two forward passes. */
#include "precision/internal.h"
#include "core/threadpool.h"
#include "cpu/forward.h"
#include "gguf/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* The first weight named `name`, or NULL. */
static th_weight *weight_named(th_weight *const *all, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (all[i]->name && !strcmp(all[i]->name, name)) return all[i];
    return NULL;
}

static th_status weight_list(th_model *m, th_weight ***out, size_t *n) {
    *n = th_model_weights(m, NULL, 0);
    if (!(*out = malloc((*n ? *n : 1) * sizeof **out))) return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    th_model_weights(m, *out, *n);
    return TH_OK;
}

th_status th_prec_model_assign(th_model *m, const th_prec_file *pf, th_prec_assign *cur) {
    th_weight **all;
    size_t nw;
    th_status s = weight_list(m, &all, &nw);
    if (s) return s;
    if ((s = th_prec_assign_init(cur, pf->n))) { free(all); return s; }
    for (size_t i = 0; i < pf->n && !s; i++) {
        cur->n_expert[i] = pf->a.n_expert[i];
        cur->type[i] = pf->a.type[i];
        const th_weight *w = weight_named(all, nw, pf->t[i].name);
        if (!w) {   /* not a weight of the model: as in the file */
            if (pf->a.expert[i] && !(cur->expert[i] = malloc(cur->n_expert[i] * sizeof *cur->expert[i])))
                s = th_set_error(TH_ERR_NOMEM, "precision: out of memory");
            else if (pf->a.expert[i]) memcpy(cur->expert[i], pf->a.expert[i], cur->n_expert[i] * sizeof *cur->expert[i]);
            continue;
        }
        cur->type[i] = w->type;
        if (!w->experts) continue;
        if (!(cur->expert[i] = malloc(cur->n_expert[i] * sizeof *cur->expert[i]))) {
            s = th_set_error(TH_ERR_NOMEM, "precision: out of memory");
            break;
        }
        for (uint32_t e = 0; e < cur->n_expert[i]; e++) {
            const th_expert_slot *x = th_weight_expert(w, e);
            cur->expert[i][e] = x ? x->type : w->type;
        }
    }
    free(all);
    if (s) th_prec_assign_free(cur);
    return s;
}

void th_prec_plan_free(th_prec_plan *p) {
    for (size_t i = 0; p->ch && i < p->n; i++) {
        free(p->ch[i].name);
        free(p->ch[i].data);
    }
    free(p->ch);
    memset(p, 0, sizeof *p);
}

static th_status add_change(th_prec_plan *p, const char *name, int32_t expert, uint32_t type) {
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 16;
        th_prec_change *n = realloc(p->ch, nc * sizeof *n);
        if (!n) return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
        p->ch = n;
        p->cap = nc;
    }
    th_prec_change *c = &p->ch[p->n];
    memset(c, 0, sizeof *c);
    if (!(c->name = strdup(name))) return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    c->expert = expert;
    c->type = type;
    p->n++;
    return TH_OK;
}

/* What differs between cur and want, as changes (no bytes yet). An expert that
 * wants the tensor's type reads the tensor's slice (its slot is cleared); one
 * that wants a type of its own gets a slot unless it has one of that type. */
static th_status list_changes(const th_prec_file *pf, const th_prec_assign *cur, const th_prec_assign *want,
                              th_prec_plan *p) {
    th_status s = TH_OK;
    for (size_t i = 0; i < pf->n && !s; i++) {
        if (want->type[i] != cur->type[i]) s = add_change(p, pf->t[i].name, -1, want->type[i]);
        if (!want->expert[i] && !cur->expert[i]) continue;
        for (uint32_t e = 0; !s && e < want->n_expert[i]; e++) {
            uint32_t w = th_prec_type_of(want, i, e), c = th_prec_type_of(cur, i, e);
            bool slot_now = cur->expert[i] && cur->expert[i][e] != cur->type[i];
            if (w == want->type[i]) {
                if (slot_now && !(s = add_change(p, pf->t[i].name, (int32_t)e, w))) p->ch[p->n - 1].clear = true;
            } else if (!(slot_now && c == w)) {
                s = add_change(p, pf->t[i].name, (int32_t)e, w);
            }
        }
    }
    return s;
}

/* The source's tensor for a change: same name and shape. */
static th_status source_tensor(const gguf_file *src, const th_qtensor *t, const gguf_tensor **out) {
    const gguf_tensor *st = gguf_find_tensor(src, t->name);
    if (!st) return th_set_error(TH_ERR_FORMAT, "precision source %s: no tensor %s", src->path ? src->path : "", t->name);
    for (int d = 0; d < 4; d++) {
        uint64_t a = d < (int)st->n_dims ? st->ne[d] : 1, b = d < (int)t->n_dims ? t->ne[d] : 1;
        if (a != b)
            return th_set_error(TH_ERR_FORMAT, "precision source %s: tensor %s has another shape than in the model file",
                                src->path ? src->path : "", t->name);
    }
    *out = st;
    return TH_OK;
}

static size_t find_base(const th_prec_file *pf, const char *name) {
    for (size_t i = 0; i < pf->n; i++)
        if (!strcmp(pf->t[i].name, name)) return i;
    return pf->n;
}

/* The model file's own bytes of expert e of tensor bi when the file stores it as
 * `type` (its own "NAME.E" tensor, or its slice of the 3-D tensor), else NULL. */
static const void *file_expert_bytes(const th_model *m, const th_prec_file *pf, size_t bi, uint32_t e, uint32_t type,
                                     size_t *row_bytes) {
    if (!m->file || th_prec_type_of(&pf->a, bi, e) != type) return NULL;
    const gguf_tensor *ft = &m->file->tensors[pf->index[bi]];
    uint64_t rb;
    if (!th_row_bytes(type, ft->ne[0], &rb)) return NULL;
    *row_bytes = (size_t)rb;
    if (pf->a.expert[bi] && pf->a.expert[bi][e] != pf->a.type[bi]) {
        char name[320];
        snprintf(name, sizeof name, "%s.%u", pf->t[bi].name, e);
        const gguf_tensor *xt = gguf_find_tensor(m->file, name);
        return xt && xt->type == type ? xt->data : NULL;
    }
    return ft->type == type ? (const uint8_t *)ft->data + (uint64_t)e * ft->ne[1] * rb : NULL;
}

th_status th_prec_make_plan(th_model *m, const gguf_file *src, const th_prec_file *pf, const th_prec_assign *cur,
                            const th_prec_assign *want, int n_threads, bool progress, th_prec_plan *p) {
    memset(p, 0, sizeof *p);
    th_status s = list_changes(pf, cur, want, p);
    if (s || p->n == 0) { if (s) th_prec_plan_free(p); return s; }
    th_pool *pool = th_pool_new(n_threads > 0 ? n_threads : th_n_cores());
    if (!pool) { th_prec_plan_free(p); return TH_ERR_NOMEM; }
    for (size_t k = 0; k < p->n && !s; k++) {
        th_prec_change *c = &p->ch[k];
        if (c->clear) continue;
        size_t bi = find_base(pf, c->name);
        const th_qtensor *t = &pf->t[bi];
        if (c->expert < 0 && c->type == pf->a.type[bi] && m->file) {
            const gguf_tensor *ft = &m->file->tensors[pf->index[bi]];
            uint64_t frb;
            th_row_bytes(ft->type, ft->ne[0], &frb);
            c->restore = ft->data;
            c->row_bytes = (size_t)frb;
            if (progress) fprintf(stderr, "theseus: precision [%zu/%zu] %s back to the file's %s\n", k + 1, p->n, c->name,
                                  th_type_name(c->type));
            continue;
        }
        if (c->expert >= 0 && (c->restore = file_expert_bytes(m, pf, bi, (uint32_t)c->expert, c->type, &c->row_bytes))) {
            if (progress) fprintf(stderr, "theseus: precision [%zu/%zu] %s[%d] back to the file's %s\n", k + 1, p->n, c->name,
                                  c->expert, th_type_name(c->type));
            continue;
        }
        const gguf_tensor *st = NULL;
        if ((s = source_tensor(src, t, &st))) break;
        uint64_t src_rb, rb, rows = c->expert < 0 ? t->ne[1] * TH_MAX(t->ne[2], 1) : t->ne[1];
        th_row_bytes(st->type, st->ne[0], &src_rb);   /* validated by the reader */
        if (!th_row_bytes(c->type, t->ne[0], &rb) || !th_mul_u64(rb, rows, &c->bytes) || c->bytes > SIZE_MAX) {
            s = th_set_error(TH_ERR_FORMAT, "tensor %s: cannot be %s", c->name, th_type_name(c->type));
            break;
        }
        c->row_bytes = (size_t)rb;
        if (!(c->data = malloc((size_t)TH_MAX(c->bytes, 1)))) {
            s = th_set_error(TH_ERR_NOMEM, "tensor %s: out of memory for %" PRIu64 " bytes", c->name, c->bytes);
            break;
        }
        if (progress) {
            char what[32] = "";
            if (c->expert >= 0) snprintf(what, sizeof what, "[%d]", c->expert);
            fprintf(stderr, "theseus: precision [%zu/%zu] %s%s %s -> %s (from %s)\n", k + 1, p->n, c->name, what,
                    th_type_name(th_prec_type_of(cur, find_base(pf, c->name), c->expert < 0 ? UINT32_MAX : (uint32_t)c->expert)),
                    th_type_name(c->type), th_type_name(st->type));
        }
        const uint8_t *from = (const uint8_t *)st->data + (c->expert < 0 ? 0 : (uint64_t)c->expert * t->ne[1] * src_rb);
        s = th_quantize_rows(pool, from, st->type, c->type, (int64_t)t->ne[0], (int64_t)rows, c->data, c->name);
        p->bytes += c->bytes;
    }
    th_pool_free(pool);
    if (s) th_prec_plan_free(p);
    return s;
}

/* Free `old` if precision owns it (it was an earlier swap's bytes). */
static void release(th_model *m, const void *old) {
    th_prec_state *ps = m->prec;
    if (!ps || !old) return;
    for (size_t i = 0; i < ps->n_bufs; i++)
        if (ps->bufs[i] == old) {
            free(ps->bufs[i]);
            ps->bufs[i] = ps->bufs[--ps->n_bufs];
            return;
        }
}

/* After the model was repacked (a context exists), new bytes get their packed copy
 * here, as a fresh load would repack them (the same kernels, the same results). */
static th_status repack_new(th_model *m, uint32_t type, const void *data, int64_t ne0, int64_t ne1, int64_t n_mat,
                            size_t row_bytes, const void **packed) {
    *packed = NULL;
    if (!m->repacked || m->no_repack || !data) return TH_OK;
    void *p = th_cpu_repack_copy(th_cpu_kernels(), type, data, ne0, ne1, n_mat, row_bytes);
    if (!p) return TH_OK;
    th_status s = th_prec_own(m, p);
    if (!s) *packed = p;
    return s;
}

th_status th_prec_swap(th_model *m, th_prec_plan *p) {
    th_weight **all;
    size_t nw;
    th_status s = weight_list(m, &all, &nw);
    if (s) return s;
    for (size_t k = 0; k < p->n && !s; k++) {
        th_prec_change *c = &p->ch[k];
        const void *old = NULL, *old_packed = NULL;
        bool used = false;
        for (size_t i = 0; i < nw && !s; i++) {
            th_weight *w = all[i];
            if (!w->name || strcmp(w->name, c->name)) continue;
            if (c->expert < 0) {
                old = w->data;
                old_packed = w->packed;
                w->data = c->restore ? c->restore : c->data;
                w->type = c->type;
                w->row_bytes = c->row_bytes;
                w->packed = NULL;   /* the CPU's repacked copy was of the old bytes */
                if ((s = repack_new(m, c->type, w->data, w->ne0, w->ne1, TH_MAX(w->ne2, 1), c->row_bytes, &w->packed))) break;
            } else {
                th_expert_slot *sl;
                if ((s = th_prec_slots(m, w, &sl))) break;
                old = sl[c->expert].data;
                old_packed = sl[c->expert].packed;
                const void *bytes = c->restore ? c->restore : c->data;
                sl[c->expert] = c->clear ? (th_expert_slot){ 0 }
                                         : (th_expert_slot){ .data = bytes, .type = c->type, .row_bytes = c->row_bytes };
                if (!c->clear &&
                    (s = repack_new(m, c->type, bytes, w->ne0, w->ne1, 1, c->row_bytes, &sl[c->expert].packed)))
                    break;
            }
            used = true;
        }
        if (s) break;
        if (used && c->data) {
            if ((s = th_prec_own(m, c->data))) { c->data = NULL; break; }
            c->data = NULL;
        }
        if (used) {
            release(m, old);
            release(m, old_packed);
        }
    }
    free(all);
    return s;
}

/* ---------------------------------------------------------------- at load */

th_status th_prec_apply_load(th_model *m, const th_model_params *params) {
    if (!params || !params->precision_path) return TH_OK;
    if (!params->source_path)
        return th_set_error(TH_ERR_ARG, "precision %s: re-quantizing needs a source file (--source SOURCE.gguf)",
                            params->precision_path);
    th_prec_config *c = NULL;
    th_prec_file pf;
    th_prec_assign cur = { 0 }, want = { 0 };
    th_prec_plan plan = { 0 };
    gguf_file *src = NULL;
    th_status s = th_prec_load(params->precision_path, &c);
    if (!s) s = th_prec_file_read(m->file, &pf);
    if (s) { th_prec_config_free(c); return s; }
    if (!(s = th_prec_model_assign(m, &pf, &cur)) && !(s = th_prec_resolve(c, pf.t, pf.n, &cur, &want))) {
        th_prec_plan probe = { 0 };
        s = list_changes(&pf, &cur, &want, &probe);
        size_t n_changes = probe.n;
        th_prec_plan_free(&probe);
        if (!s && n_changes > 0 && !(s = gguf_open(params->source_path, &src)))
            s = th_prec_make_plan(m, src, &pf, &cur, &want, params->n_threads, true, &plan);
        if (!s) s = th_prec_swap(m, &plan);
        if (!s)
            fprintf(stderr, "theseus: precision %s: %zu tensors or experts re-quantized from %s (%.2f MiB), the others stay mapped\n",
                    params->precision_path, n_changes, params->source_path, (double)plan.bytes / (1 << 20));
    }
    th_prec_plan_free(&plan);
    gguf_close(src);
    th_prec_assign_free(&cur);
    th_prec_assign_free(&want);
    th_prec_file_free(&pf);
    th_prec_config_free(c);
    return s;
}
