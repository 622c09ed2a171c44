/* report.c — what th_search_run hands back: BEST.precision's text (the precision
 * engine's config that reproduces the assignment, th_prec_describe), the frontier
 * table of every gate evaluation (Pareto points marked), and the summary of what
 * stayed precise by tensor class, by layer and by expert, the router flips that
 * kept units precise, and how far the costs added up. */
#include "search/search_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct sb { char *p; size_t n, cap; bool oom; } sb;

static void sbf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbf(sb *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = true; return; }
        if (b->p && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
        size_t nc = (b->cap + (size_t)k + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = nc;
    }
}

static th_status sb_take(sb *b, char **out) {
    if (b->oom || !b->p) { free(b->p); return th_set_error(TH_ERR_NOMEM, "search: out of memory"); }
    *out = b->p;
    return TH_OK;
}

th_status th_search_config_text(th_search *S, const int *choice, char **out) {
    th_prec_file view = S->pf;
    th_prec_assign a;
    th_status s = th_prec_assign_init(&a, S->pf.n);
    for (size_t i = 0; !s && i < S->pf.n; i++) {
        a.type[i] = S->pf.a.type[i];
        a.n_expert[i] = S->pf.a.n_expert[i];
    }
    for (size_t k = 0; !s && k < S->n_u; k++) {
        const th_search_unit *u = &S->u[k];
        uint32_t t = choice[k] < 0 ? u->src_type : u->c[choice[k]].type;
        if (u->expert < 0) { a.type[u->tensor] = t; continue; }
        if (!a.expert[u->tensor]) {
            if (!(a.expert[u->tensor] = malloc(a.n_expert[u->tensor] * sizeof(uint32_t)))) { s = TH_ERR_NOMEM; break; }
            for (uint32_t e = 0; e < a.n_expert[u->tensor]; e++) a.expert[u->tensor][e] = u->src_type;
        }
        a.expert[u->tensor][u->expert] = t;
    }
    /* a 3-D tensor whose experts all agree: the tensor's own type, no per-expert rules */
    for (size_t i = 0; !s && i < S->pf.n; i++) {
        if (!a.expert[i]) continue;
        bool same = true;
        for (uint32_t e = 1; e < a.n_expert[i]; e++) same &= a.expert[i][e] == a.expert[i][0];
        if (same) { a.type[i] = a.expert[i][0]; free(a.expert[i]); a.expert[i] = NULL; }
    }
    if (s) { th_prec_assign_free(&a); return th_set_error(TH_ERR_NOMEM, "search: out of memory"); }
    view.a = a;
    s = th_prec_describe(&view, "theseus search", out);
    th_prec_assign_free(&a);
    return s;
}

static void mark_frontier(th_search_result *r) {
    for (size_t i = 0; i < r->n_points; i++) {
        th_search_point *p = &r->points[i];
        p->frontier = true;
        for (size_t j = 0; j < r->n_points && p->frontier; j++) {
            const th_search_point *q = &r->points[j];
            if (j != i && q->bytes <= p->bytes && q->gate <= p->gate && (q->bytes < p->bytes || q->gate < p->gate))
                p->frontier = false;
        }
    }
}

static int by_bytes(const void *a, const void *b) {
    const th_search_point *x = a, *y = b;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static th_status table(th_search *S) {
    th_search_result *r = S->r;
    mark_frontier(r);
    th_search_point *v = malloc((r->n_points ? r->n_points : 1) * sizeof *v);
    if (!v) return th_set_error(TH_ERR_NOMEM, "search: out of memory");
    memcpy(v, r->points, r->n_points * sizeof *v);
    qsort(v, r->n_points, sizeof *v, by_bytes);
    sb b = { 0 };
    const char *g = S->p->max_kld > 0 ? "KLD" : "PPL+";
    sbf(&b, "| assignment | MiB | bits/weight | gate (%s) | mean KLD | PPL ratio | flips | passes | frontier |\n", g);
    sbf(&b, "|---|---:|---:|---:|---:|---:|---:|:-:|:-:|\n");
    /* duplicates (a memoized assignment measured again under another label) once */
    for (size_t i = 0; i < r->n_points; i++) {
        if (i > 0 && v[i].bytes == v[i - 1].bytes && v[i].kld == v[i - 1].kld && v[i].uniform == v[i - 1].uniform) continue;
        sbf(&b, "| %s | %.2f | %.4f | %.6f | %.6f | %.6f | %" PRId64 " | %s | %s |\n", v[i].label,
            (double)v[i].bytes / (1 << 20), v[i].bpw, v[i].gate, v[i].kld, v[i].ppl_ratio, v[i].flips,
            v[i].feasible ? "yes" : "no", v[i].frontier ? "*" : "");
    }
    free(v);
    return sb_take(&b, &r->table);
}

/* "blk.3.attn_q.weight" -> "attn_q.weight" */
static const char *class_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return name;
    const char *d = strchr(name + 4, '.');
    return d ? d + 1 : name;
}

static void by_class(th_search *S, const int *best, sb *b) {
    sbf(b, "by tensor class (units kept at the source type / all; the types given to the rest):\n");
    bool *done = calloc(S->n_u, 1);
    if (!done) { b->oom = true; return; }
    for (size_t i = 0; i < S->n_u; i++) {
        if (done[i]) continue;
        const char *ci = class_of(S->pf.t[S->u[i].tensor].name);
        int n = 0, precise = 0, cnt[TH_SEARCH_MAX_TYPES] = { 0 };
        for (size_t j = i; j < S->n_u; j++) {
            if (done[j] || strcmp(class_of(S->pf.t[S->u[j].tensor].name), ci)) continue;
            done[j] = true;
            n++;
            if (best[j] < 0) { precise++; continue; }
            for (int k = 0; k < S->n_types; k++)
                if (S->types[k] == S->u[j].c[best[j]].type) cnt[k]++;
        }
        sbf(b, "  %-28s %4d / %-4d", ci, precise, n);
        for (int k = 0; k < S->n_types; k++)
            if (cnt[k]) sbf(b, "  %s x%d", th_type_name(S->types[k]), cnt[k]);
        sbf(b, "\n");
    }
    free(done);
}

static void by_layer(th_search *S, const int *best, sb *b) {
    int32_t max_layer = -1;
    for (size_t i = 0; i < S->n_u; i++) if (S->u[i].layer > max_layer) max_layer = S->u[i].layer;
    sbf(b, "by layer (bits per weight of the layer's units; units kept at the source type):\n");
    for (int32_t l = -1; l <= max_layer; l++) {
        double bits = 0, el = 0;
        int precise = 0, n = 0;
        for (size_t i = 0; i < S->n_u; i++) {
            const th_search_unit *u = &S->u[i];
            if (u->layer != l) continue;
            n++;
            precise += best[i] < 0;
            bits += 8.0 * (double)(best[i] < 0 ? u->src_bytes : u->c[best[i]].bytes);
            el += (double)u->elements;
        }
        char tag[24];
        if (l < 0) snprintf(tag, sizeof tag, "(outside)");
        else snprintf(tag, sizeof tag, "layer %d", l);
        if (n) sbf(b, "  %-9s %7.3f bpw  %d of %d precise\n", tag, el > 0 ? bits / el : 0, precise, n);
    }
}

static void experts_and_flips(th_search *S, const int *best, sb *b) {
    bool any = false;
    for (size_t i = 0; i < S->n_u; i++) {
        const th_search_unit *u = &S->u[i];
        if (u->expert < 0 || best[i] >= 0) continue;
        if (!any) sbf(b, "experts kept at the source type:\n ");
        any = true;
        sbf(b, " %s[%d]", S->pf.t[u->tensor].name, u->expert);
    }
    if (any) sbf(b, "\n");
    int lines = 0;
    for (size_t i = 0; i < S->n_u; i++) {
        const th_search_unit *u = &S->u[i];
        for (int c = 0; c < u->n_c; c++) {
            if (!u->c[c].flips) continue;
            if (lines == 0) sbf(b, "router flips (calibration slice) — lowering these flips an expert choice:\n");
            if (++lines > 60) break;
            char nm[200];
            if (u->expert >= 0) snprintf(nm, sizeof nm, "%s[%d]", S->pf.t[u->tensor].name, u->expert);
            else snprintf(nm, sizeof nm, "%s", S->pf.t[u->tensor].name);
            sbf(b, "  %s at %s: %" PRId64 " flips, smallest reference gap %.6g%s; result: %s\n", nm,
                th_type_name(u->c[c].type), u->c[c].flips, u->c[c].gap_min, u->c[c].allowed ? "" : " (not allowed)",
                best[i] < 0 ? "kept at the source type" : th_type_name(u->c[best[i]].type));
        }
    }
    if (lines > 60) sbf(b, "  ... (%d more in the log)\n", lines - 60);
}

th_status th_search_reports(th_search *S, const int *best) {
    th_search_result *r = S->r;
    th_status s = th_search_config_text(S, best, &r->config);
    if (!s) s = table(S);
    if (s) return s;
    sb b = { 0 };
    sbf(&b, "best: %.2f MiB, %.4f bits/weight (source %.2f MiB, %.4f), gate %.6f <= %.6f, mean KLD %.6f, PPL ratio %.6f\n",
        (double)r->best.bytes / (1 << 20), r->best.bpw, (double)r->source_bytes / (1 << 20), r->source_bpw, r->best.gate,
        r->gate_max, r->best.kld, r->best.ppl_ratio);
    bool all_src = true;
    for (size_t i = 0; i < S->n_u; i++) all_src &= best[i] < 0;
    if (all_src)
        sbf(&b, "no assignment smaller than the source met the gate (%s <= %.6g): BEST.precision keeps every tensor "
                 "at the source's type\n", S->p->max_kld > 0 ? "KLD" : "PPL increase", r->gate_max);
    sbf(&b, "evaluations: %" PRId64 " sensitivity (%" PRId64 " from the resumed log), %" PRId64 " gate (%" PRId64
             " from the log); %" PRId64 " non-monotone pairs (cheaper type measured better; in the log)\n",
        r->n_sens, r->n_sens_reused, r->n_gate, r->n_gate_reused, r->n_nonmonotone);
    if (S->n_add > 0)
        sbf(&b, "additivity: the first knapsack start's calibration KLD: predicted (the sum of its units' costs) %.6g, "
                 "measured %.6g (%+.1f %%); over all %d starts measured and predicted differ by at most %.1f %%\n",
            S->add_pred, S->add_meas, S->add_pred > 0 ? 100.0 * (S->add_meas / S->add_pred - 1) : 0.0, S->n_add,
            100.0 * r->additivity_worst);
    else
        sbf(&b, "additivity: not checked (no knapsack start was evaluated)\n");
    sbf(&b, "time: %.1f s re-quantizing and swapping weights (%" PRId64 " changes), %.1f s in calibration passes (%" PRId64
             "), %.1f s in gate passes (%" PRId64 "), of %.1f s\n",
        S->t_apply, S->n_apply, S->t_calib, S->n_calib, S->t_gate, S->n_gate_runs, th_search_now() - S->t0);
    if (S->layers_run + S->layers_skipped > 0)
        sbf(&b, "layer resume: %s; calibration runs evaluated %" PRId64 " layers and started %" PRId64
                 " later from saved hidden states (%.1f %% of the layer work skipped)\n",
            S->x_saved ? "on" : "off", S->layers_run, S->layers_skipped,
            100.0 * (double)S->layers_skipped / (double)(S->layers_run + S->layers_skipped));
    by_class(S, best, &b);
    by_layer(S, best, &b);
    experts_and_flips(S, best, &b);
    return sb_take(&b, &r->summary);
}
