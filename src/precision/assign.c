/* assign.c — a GGUF file's precision assignment: its base tensors (the 2-D
 * per-expert tensors "NAME.E" folded into their 3-D tensor's expert table), the
 * plan that quantize --config resolves, and the config text that reproduces a
 * file's assignment with bits per weight per tensor class (inspect --precision). */
#include "precision/precision.h"
#include "gguf/gguf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

th_status th_prec_plan_types(const char *path, const th_qtensor *t, size_t n, uint32_t *types, uint32_t ***expert_types) {
    *expert_types = NULL;
    th_prec_config *c = NULL;
    th_status s = th_prec_load(path, &c);
    if (s) return s;
    th_prec_assign base, out;
    if ((s = th_prec_assign_init(&base, n))) { th_prec_config_free(c); return s; }
    for (size_t i = 0; i < n; i++) base.type[i] = types[i];
    s = th_prec_resolve(c, t, n, &base, &out);
    th_prec_assign_free(&base);
    th_prec_config_free(c);
    if (s) return s;
    memcpy(types, out.type, n * sizeof *types);
    *expert_types = out.expert;   /* handed over */
    out.expert = NULL;
    th_prec_assign_free(&out);
    return TH_OK;
}

/* ---------------------------------------------------------------- a file's assignment */

/* "NAME.E" with NAME a 3-D tensor of more than E experts and this one its [ne0, ne1]
 * slice: that tensor's index and E. */
bool th_prec_expert_tensor(const gguf_file *f, const gguf_tensor *x, uint64_t *base, uint32_t *expert) {
    const char *p = x->name.ptr, *dot = NULL;
    for (uint64_t k = x->name.len; k > 0; k--)
        if (p[k - 1] == '.') { dot = p + k - 1; break; }
    if (!dot || dot == p) return false;
    size_t digits = (size_t)(p + x->name.len - dot - 1);
    if (digits == 0 || digits > 7) return false;
    uint32_t e = 0;
    for (size_t k = 0; k < digits; k++) {
        char ch = dot[1 + k];
        if (ch < '0' || ch > '9') return false;
        e = e * 10 + (uint32_t)(ch - '0');
    }
    size_t blen = (size_t)(dot - p);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->name.len != blen || memcmp(t->name.ptr, p, blen) || t->n_dims < 3 || t->ne[2] <= e) continue;
        if (x->n_dims > 3 || x->ne[0] != t->ne[0] || x->ne[1] != t->ne[1] || (x->n_dims == 3 && x->ne[2] != 1)) return false;
        *base = i;
        *expert = e;
        return true;
    }
    return false;
}

void th_prec_file_free(th_prec_file *pf) {
    for (size_t i = 0; pf->t && i < pf->n; i++) free((void *)pf->t[i].name);
    free(pf->t);
    free(pf->index);
    th_prec_assign_free(&pf->a);
    memset(pf, 0, sizeof *pf);
}

th_status th_prec_file_read(const gguf_file *f, th_prec_file *pf) {
    memset(pf, 0, sizeof *pf);
    uint64_t n = f->n_tensors;
    pf->t = calloc(n ? n : 1, sizeof *pf->t);
    pf->index = calloc(n ? n : 1, sizeof *pf->index);
    uint64_t *where = calloc(n ? n : 1, sizeof *where);   /* file index -> base position, or UINT64_MAX */
    th_status s = pf->t && pf->index && where ? TH_OK : th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    uint64_t b;
    uint32_t e;
    for (uint64_t i = 0; !s && i < n; i++) {
        const gguf_tensor *gt = &f->tensors[i];
        where[i] = UINT64_MAX;
        if (th_prec_expert_tensor(f, gt, &b, &e)) continue;
        char *name = malloc(gt->name.len + 1);
        if (!name) { s = th_set_error(TH_ERR_NOMEM, "precision: out of memory"); break; }
        memcpy(name, gt->name.ptr, gt->name.len);
        name[gt->name.len] = 0;
        where[i] = pf->n;
        pf->index[pf->n] = i;
        pf->t[pf->n++] = (th_qtensor){ name, gt->type, gt->n_dims, { gt->ne[0], gt->ne[1], gt->ne[2], gt->ne[3] } };
    }
    if (!s) s = th_prec_assign_init(&pf->a, pf->n);
    for (size_t i = 0; !s && i < pf->n; i++) {
        pf->a.type[i] = pf->t[i].type;
        pf->a.n_expert[i] = pf->t[i].n_dims >= 3 && pf->t[i].ne[2] > 1 ? (uint32_t)pf->t[i].ne[2] : 1;
    }
    for (uint64_t i = 0; !s && i < n; i++) {
        if (where[i] != UINT64_MAX || !th_prec_expert_tensor(f, &f->tensors[i], &b, &e)) continue;
        size_t k = (size_t)where[b];
        if (!pf->a.expert[k]) {
            if (!(pf->a.expert[k] = malloc(pf->a.n_expert[k] * sizeof *pf->a.expert[k]))) {
                s = th_set_error(TH_ERR_NOMEM, "precision: out of memory");
                break;
            }
            for (uint32_t x = 0; x < pf->a.n_expert[k]; x++) pf->a.expert[k][x] = pf->a.type[k];
        }
        pf->a.expert[k][e] = f->tensors[i].type;
    }
    free(where);
    if (s) th_prec_file_free(pf);
    return s;
}

/* ---------------------------------------------------------------- the config text */

typedef struct sbuf { char *p; size_t len, cap; bool oom; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    for (int tries = 0; tries < 2 && !b->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = true; return; }
        if (b->p && b->len + (size_t)k < b->cap) { b->len += (size_t)k; return; }
        size_t ncap = TH_MAX(b->cap * 2, b->len + (size_t)k + 256);
        char *np = realloc(b->p, ncap);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = ncap;
    }
}

/* The class of a tensor: its name with "blk.N." made "blk.*."; *layer = N or -1. */
static void class_of(const char *name, char *cls, size_t cap, int *layer) {
    int n = -1, used = 0;
    if (sscanf(name, "blk.%d.%n", &n, &used) == 1 && used > 0 && n >= 0) {
        *layer = n;
        snprintf(cls, cap, "blk.*.%s", name + used);
    } else {
        *layer = -1;
        snprintf(cls, cap, "%s", name);
    }
}

static uint64_t elements(const th_qtensor *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims && d < 4; d++) n *= t->ne[d];
    return n;
}

static uint64_t bytes_of(uint32_t type, uint64_t ne0, uint64_t rows) {
    uint64_t rb = 0;
    th_row_bytes(type, ne0, &rb);
    return rb * rows;
}

/* Bytes of tensor i under the assignment (each expert at its own type). */
static uint64_t assigned_bytes(const th_prec_file *pf, size_t i) {
    const th_qtensor *t = &pf->t[i];
    uint64_t rows = elements(t) / (t->ne[0] ? t->ne[0] : 1);
    if (!pf->a.expert[i]) return bytes_of(pf->a.type[i], t->ne[0], rows);
    uint64_t sum = 0, per = rows / pf->a.n_expert[i];
    for (uint32_t e = 0; e < pf->a.n_expert[i]; e++) sum += bytes_of(pf->a.expert[i][e], t->ne[0], per);
    return sum;
}

typedef struct lt { int layer; uint32_t type; } lt;

static int by_layer(const void *x, const void *y) {
    const lt *a = x, *b = y;
    return (a->layer > b->layer) - (a->layer < b->layer);
}

/* One class: its most common type as a blk.* rule, then the layers that differ,
 * consecutive layers of one type joined into a range. */
static void emit_class(sbuf *b, const th_prec_file *pf, const bool *q, const char *cls, bool *done) {
    lt *m = malloc((pf->n ? pf->n : 1) * sizeof *m);
    if (!m) { b->oom = true; return; }
    size_t nm = 0;
    char c2[512];
    for (size_t i = 0; i < pf->n; i++) {
        int layer;
        if (!q[i]) continue;
        class_of(pf->t[i].name, c2, sizeof c2, &layer);
        if (strcmp(c2, cls)) continue;
        done[i] = true;
        m[nm++] = (lt){ layer, pf->a.type[i] };
    }
    uint32_t best = m[0].type;
    size_t best_n = 0;
    for (size_t k = 0; k < nm; k++) {
        size_t c = 0;
        for (size_t j = 0; j < nm; j++) c += m[j].type == m[k].type;
        if (c > best_n) { best_n = c; best = m[k].type; }
    }
    sb_printf(b, "%s %s\n", cls, th_type_name(best));
    qsort(m, nm, sizeof *m, by_layer);
    const char *rest = cls + 6;   /* after "blk.*." */
    for (size_t k = 0; k < nm;) {
        if (m[k].type == best) { k++; continue; }
        size_t j = k;
        while (j + 1 < nm && m[j + 1].type == m[k].type && m[j + 1].layer == m[j].layer + 1) j++;
        if (j == k) sb_printf(b, "blk.%d.%s %s\n", m[k].layer, rest, th_type_name(m[k].type));
        else sb_printf(b, "blk.%d-%d.%s %s\n", m[k].layer, m[j].layer, rest, th_type_name(m[k].type));
        k = j + 1;
    }
    free(m);
}

static void emit_experts(sbuf *b, const th_prec_file *pf, size_t i) {
    const uint32_t *x = pf->a.expert[i];
    for (uint32_t e = 0; x && e < pf->a.n_expert[i];) {
        if (x[e] == pf->a.type[i]) { e++; continue; }
        uint32_t f = e;
        while (f + 1 < pf->a.n_expert[i] && x[f + 1] == x[e]) f++;
        if (f == e) sb_printf(b, "%s[%u] %s\n", pf->t[i].name, e, th_type_name(x[e]));
        else sb_printf(b, "%s[%u-%u] %s\n", pf->t[i].name, e, f, th_type_name(x[e]));
        e = f + 1;
    }
}

/* Tensors in a stable order: those outside the layers first, then by class, then layer. */
static int by_class(const void *x, const void *y, void *arg) {
    const th_prec_file *pf = arg;
    char a[512], b[512];
    int la, lb;
    class_of(pf->t[*(const size_t *)x].name, a, sizeof a, &la);
    class_of(pf->t[*(const size_t *)y].name, b, sizeof b, &lb);
    if ((la < 0) != (lb < 0)) return la < 0 ? -1 : 1;
    int c = strcmp(a, b);
    return c ? c : (la > lb) - (la < lb);
}

/* Bits per weight per class, then the totals, as comments. */
static void emit_bpw(sbuf *b, const th_prec_file *pf, const bool *q, const size_t *order) {
    sb_printf(b, "#\n# bits per weight by tensor class (weights, bytes):\n");
    bool *seen = calloc(pf->n ? pf->n : 1, 1);
    if (!seen) { b->oom = true; return; }
    uint64_t qe = 0, qb = 0, ae = 0, ab = 0;
    char cls[512], c2[512];
    int layer;
    for (size_t k = 0; k < pf->n; k++) {
        size_t i = order[k];
        uint64_t ne = elements(&pf->t[i]), nb = assigned_bytes(pf, i);
        ae += ne;
        ab += nb;
        if (!q[i]) continue;
        qe += ne;
        qb += nb;
        if (seen[i]) continue;
        class_of(pf->t[i].name, cls, sizeof cls, &layer);
        uint64_t ce = 0, cb = 0;
        for (size_t j = 0; j < pf->n; j++) {
            if (!q[j] || seen[j]) continue;
            class_of(pf->t[j].name, c2, sizeof c2, &layer);
            if (strcmp(c2, cls)) continue;
            seen[j] = true;
            ce += elements(&pf->t[j]);
            cb += assigned_bytes(pf, j);
        }
        sb_printf(b, "#   %-40s %7.3f bpw  %12" PRIu64 " %12" PRIu64 "\n", cls, ce ? 8.0 * (double)cb / (double)ce : 0.0, ce, cb);
    }
    sb_printf(b, "# quantizable tensors: %.3f bpw (%" PRIu64 " weights, %" PRIu64 " bytes)\n",
              qe ? 8.0 * (double)qb / (double)qe : 0.0, qe, qb);
    sb_printf(b, "# all tensors:         %.3f bpw (%" PRIu64 " weights, %" PRIu64 " bytes)\n",
              ae ? 8.0 * (double)ab / (double)ae : 0.0, ae, ab);
    free(seen);
}

th_status th_prec_describe(const th_prec_file *pf, const char *origin, char **out) {
    *out = NULL;
    sbuf b = { 0 };
    bool *q = calloc(pf->n ? pf->n : 1, 1), *done = calloc(pf->n ? pf->n : 1, 1);
    size_t *order = malloc((pf->n ? pf->n : 1) * sizeof *order);
    if (!q || !done || !order) {
        free(q); free(done); free(order);
        return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    }
    for (size_t i = 0; i < pf->n; i++) q[i] = th_qtensor_quantizable(&pf->t[i]);
    for (size_t i = 0; i < pf->n; i++) order[i] = i;
    qsort_r(order, pf->n, sizeof *order, by_class, (void *)pf);
    sb_printf(&b, "# precision assignment of %s (theseus inspect --precision)\n", origin);
    char cls[512];
    int layer;
    for (size_t k = 0; k < pf->n; k++) {
        size_t i = order[k];
        if (!q[i] || done[i]) continue;
        class_of(pf->t[i].name, cls, sizeof cls, &layer);
        if (layer < 0) {
            sb_printf(&b, "%s %s\n", pf->t[i].name, th_type_name(pf->a.type[i]));
            done[i] = true;
        } else {
            emit_class(&b, pf, q, cls, done);
        }
    }
    for (size_t k = 0; k < pf->n; k++)
        if (q[order[k]]) emit_experts(&b, pf, order[k]);
    emit_bpw(&b, pf, q, order);
    free(order);
    free(q);
    free(done);
    if (b.oom) { free(b.p); return th_set_error(TH_ERR_NOMEM, "precision: out of memory"); }
    *out = b.p;
    return TH_OK;
}

th_status th_precision_describe(const char *path, char **out) {
    *out = NULL;
    if (!path) return th_set_error(TH_ERR_ARG, "th_precision_describe: no path");
    gguf_file *f = NULL;
    th_status s = gguf_open(path, &f);
    if (s) return s;
    th_prec_file pf;
    if (!(s = th_prec_file_read(f, &pf))) {
        s = th_prec_describe(&pf, path, out);
        th_prec_file_free(&pf);
    }
    gguf_close(f);
    return s;
}
