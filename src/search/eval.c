/* eval.c — one assignment on the loaded model: the weights pointed at it (what
 * differs from the model's weights now is re-quantized from the source; a
 * tensor going back to the source's type gets its mapped bytes, no work), its
 * evaluation on the gate or the calibration slice against the cached reference,
 * and the memoized gate evaluation that every point of the frontier comes from.
 * Layer resume: the source's hidden states of the calibration pass are saved once,
 * and a sensitivity run of a unit in layer L starts there (th_context_set_layer_io):
 * the layers before L have the source's weights, so their output is the saved one. */
#include "search/search_int.h"
#include "context.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The assignment of a unit choice over the precision file's tensors. */
static th_status want_of(th_search *S, const int *choice, th_prec_assign *want) {
    const th_prec_assign *a = &S->pf.a;
    th_status s = th_prec_assign_init(want, S->pf.n);
    for (size_t i = 0; !s && i < S->pf.n; i++) {
        want->type[i] = a->type[i];
        want->n_expert[i] = a->n_expert[i];
        if (a->expert[i]) {
            if (!(want->expert[i] = malloc(a->n_expert[i] * sizeof *want->expert[i]))) s = TH_ERR_NOMEM;
            else memcpy(want->expert[i], a->expert[i], a->n_expert[i] * sizeof *want->expert[i]);
        }
    }
    for (size_t k = 0; !s && k < S->n_u; k++) {
        const th_search_unit *u = &S->u[k];
        uint32_t t = choice[k] < 0 ? u->src_type : u->c[choice[k]].type;
        if (u->expert < 0) { want->type[u->tensor] = t; continue; }
        uint32_t **x = &want->expert[u->tensor];
        if (!*x && t != want->type[u->tensor]) {
            if (!(*x = malloc(want->n_expert[u->tensor] * sizeof **x))) { s = TH_ERR_NOMEM; break; }
            for (uint32_t e = 0; e < want->n_expert[u->tensor]; e++) (*x)[e] = want->type[u->tensor];
        }
        if (*x) (*x)[u->expert] = t;
    }
    if (s) {
        th_prec_assign_free(want);
        return th_set_error(TH_ERR_NOMEM, "search: out of memory");
    }
    return TH_OK;
}

static th_status new_context(th_search *S, const th_kld_base *b, th_context **ctx) {
    th_eval_params ep = th_eval_default_params();
    ep.n_ctx = 0;
    ep.kld_base = b;
    th_context_params cp = th_context_default_params();
    th_eval_context_params(&ep, &cp);
    cp.n_threads = S->p->n_threads;
    cp.gpu = S->p->gpu;
    return th_context_new(S->m, &cp, ctx);
}

th_status th_search_apply(th_search *S, const int *choice) {
    th_prec_assign cur, want;
    th_prec_plan plan = { 0 };
    double t0 = th_search_now();
    th_status s = th_prec_model_assign(S->m, &S->pf, &cur);
    if (s) return s;
    if ((s = want_of(S, choice, &want))) { th_prec_assign_free(&cur); return s; }
    s = th_prec_make_plan(S->m, S->src, &S->pf, &cur, &want, S->p->n_threads, false, &plan);
    if (!s && plan.n > 0) {
        /* a model on the GPU: its device copies are of the old bytes; drop them and
         * let fresh contexts upload the new assignment */
        if (S->m->dev_store && S->m->dev_free) {
            th_context_free(S->gate_ctx);
            th_context_free(S->calib_ctx);
            S->gate_ctx = S->calib_ctx = NULL;
            S->m->dev_free(S->m);
        }
        s = th_prec_swap(S->m, &plan);
        if (!s && !S->gate_ctx && S->gate_base) s = new_context(S, S->gate_base, &S->gate_ctx);
        if (!s && !S->calib_ctx && S->calib_base) s = new_context(S, S->calib_base, &S->calib_ctx);
    }
    if (plan.n > 0) {
        S->t_apply += th_search_now() - t0;
        S->n_apply++;
    }
    th_prec_plan_free(&plan);
    th_prec_assign_free(&cur);
    th_prec_assign_free(&want);
    return s;
}

typedef struct pass_count { int32_t n, tokens; } pass_count;

static th_status count_pass(const th_eval_pass *p, void *ud) {
    pass_count *c = ud;
    c->n++;
    c->tokens = p->n_tokens;
    return TH_OK;
}

static th_status eval_run(th_search *S, bool calib, pass_count *pc, th_eval_result *r) {
    th_eval_params ep = th_eval_default_params();
    ep.n_ctx = 0;
    ep.n_threads = S->p->n_threads;
    ep.kld_base = calib ? S->calib_base : S->gate_base;
    ep.router_base = calib ? S->calib_router : S->gate_router;
    ep.on_pass = count_pass;
    ep.ud = pc;
    th_context *ctx = calib ? S->calib_ctx : S->gate_ctx;
    int32_t from = calib && S->x_saved ? S->x_from : 0;
    th_status s = from > 0 ? th_context_set_layer_io(ctx, from, S->x_saved[from], NULL) : TH_OK;
    if (!s) s = th_eval_run(S->m, ctx, th_kld_base_tokens(ep.kld_base), 0, &ep, r);
    if (from > 0) {
        th_context_set_layer_io(ctx, 0, NULL, NULL);
        if (!s) {
            S->layers_skipped += from;
            S->layers_run += S->m->hp.n_layer - from;
        }
    } else if (calib && !s) {
        S->layers_run += S->m->hp.n_layer;
    }
    return s;
}

th_status th_search_layer_resume_init(th_search *S) {
    const th_hparams *hp = &S->m->hp;
    if (S->p->no_layer_resume || S->p->gpu || S->moe || hp->n_recurrent > 0) return TH_OK;
    size_t n_tok = (size_t)th_kld_base_n_chunks(S->calib_base) * (size_t)th_kld_base_n_ctx(S->calib_base);
    size_t per = n_tok * (size_t)hp->n_embd, L = (size_t)hp->n_layer + 1;
    S->x_saved = calloc(L, sizeof *S->x_saved);
    S->x_mem = malloc(L * per * sizeof(float));
    if (!S->x_saved || !S->x_mem) {
        free(S->x_saved); free(S->x_mem); S->x_saved = NULL; S->x_mem = NULL;
        return TH_OK;   /* not enough memory for it: every run is a full one */
    }
    for (size_t l = 0; l < L; l++) S->x_saved[l] = S->x_mem + l * per;
    th_status s = th_context_set_layer_io(S->calib_ctx, 0, NULL, S->x_saved);
    pass_count pc = { 0 };
    th_eval_result r;
    float **keep = S->x_saved;
    S->x_saved = NULL;   /* this run is a full one */
    if (!s && !(s = eval_run(S, true, &pc, &r))) th_eval_result_free(&r);
    th_context_set_layer_io(S->calib_ctx, 0, NULL, NULL);
    S->x_saved = keep;
    if (s == TH_ERR_UNSUPPORTED || (!s && (pc.n != 1 || (size_t)pc.tokens != n_tok))) {
        /* the backend cannot, or the slice takes several passes: full runs */
        th_clear_error();
        s = TH_OK;
        free(S->x_saved); free(S->x_mem); S->x_saved = NULL; S->x_mem = NULL;
    }
    fprintf(S->log, "{\"kind\":\"layer_resume\",\"on\":%s}\n", S->x_saved ? "true" : "false");
    return s;
}

int32_t th_search_unit_start(const th_search *S, size_t unit) {
    if (!S->x_saved) return 0;
    const th_search_unit *u = &S->u[unit];
    if (u->layer >= 0 && u->layer < S->m->hp.n_layer) return u->layer;
    if (!strcmp(S->pf.t[u->tensor].name, "output.weight")) return S->m->hp.n_layer;   /* the head alone */
    return 0;   /* the embedding (tied or not) and anything else outside the layers */
}

th_status th_search_eval(th_search *S, bool calib, double *kld, double *ppl_ratio, int64_t *flips, double *gap_min) {
    th_eval_result r;
    pass_count pc = { 0 };
    double t0 = th_search_now();
    th_status s = eval_run(S, calib, &pc, &r);
    if (s) return s;
    if (calib) { S->t_calib += th_search_now() - t0; S->n_calib++; }
    else { S->t_gate += th_search_now() - t0; S->n_gate_runs++; }
    *kld = r.kld.kld;
    *ppl_ratio = r.kld.ppl_ratio;
    *flips = 0;
    *gap_min = 0;
    bool first = true;
    for (int32_t i = 0; i < r.n_router_layers; i++) {
        const th_router_layer *L = &r.router[i];
        *flips += L->n_flips;
        if (L->n_flips && (first || L->gap_min < *gap_min)) { *gap_min = L->gap_min; first = false; }
    }
    th_eval_result_free(&r);
    return TH_OK;
}

static th_status add_point(th_search_result *r, const th_search_point *pt) {
    th_search_point *n = realloc(r->points, (r->n_points + 1) * sizeof *n);
    if (!n) return th_set_error(TH_ERR_NOMEM, "search: out of memory");
    r->points = n;
    r->points[r->n_points++] = *pt;
    return TH_OK;
}

th_status th_search_gate(th_search *S, const int *choice, const char *label, bool uniform, th_search_point *out) {
    uint64_t h = th_search_hash(S, choice);
    th_search_point pt = { .uniform = uniform, .bytes = th_search_bytes(S, choice) };
    snprintf(pt.label, sizeof pt.label, "%s", label);
    pt.bpw = th_search_bpw(S, pt.bytes);
    const th_slog_rec *m = th_search_memo_hash(&S->memo, TH_SLOG_GATE, h);
    double gap = 0;
    if (m) {
        pt.kld = m->kld; pt.ppl_ratio = m->ppl_ratio; pt.flips = m->flips;
        S->r->n_gate_reused++;
    } else {
        th_status s = th_search_apply(S, choice);
        if (!s) s = th_search_eval(S, false, &pt.kld, &pt.ppl_ratio, &pt.flips, &gap);
        if (s) return s;
        th_slog_rec rec = { .kind = TH_SLOG_GATE, .expert = -1, .hash = h, .bytes = pt.bytes, .kld = pt.kld,
                            .ppl_ratio = pt.ppl_ratio, .flips = pt.flips, .gap_min = gap };
        snprintf(rec.tensor, sizeof rec.tensor, "%s", label);
        th_slog_write(S->log, &rec);
        fflush(S->log);
        th_search_memo_add(&S->memo, &rec);
    }
    S->r->n_gate++;
    pt.gate = th_search_gate_value(S, pt.kld, pt.ppl_ratio);
    pt.feasible = pt.gate <= S->gate_max && (S->p->max_flips < 0 || pt.flips <= S->p->max_flips);
    if (pt.feasible && !uniform && (!S->r->best.bytes || pt.bytes < S->r->best.bytes)) S->r->best = pt;
    *out = pt;
    return add_point(S->r, &pt);
}
