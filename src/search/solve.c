/* solve.c — from measured costs to a verified assignment.
 * Knapsack: each unit picks the candidate (or the source type) minimizing
 * bytes + lambda * calibration KLD; lambda is bisected so the predicted (summed)
 * KLD meets a predicted budget B. The start's budget B is then moved by the full
 * gate's verdict (up to KNAP_STEPS gate runs: feasible -> larger B, infeasible ->
 * smaller), and each start's calibration KLD is also measured to check that the
 * costs add up (additivity). Descent: from the smallest feasible start, the
 * cheapest predicted steps (a unit one candidate down, ranked by predicted KLD
 * per byte saved) are taken in groups; a group is kept only when the full gate
 * passes, a failed group is halved, a failed single step is dropped. */
#include "search/search_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KNAP_STEPS 6

static double cost_of(const th_search *S, size_t i, int c) {
    if (c < 0) return 0;
    double k = S->u[i].c[c].kld;
    return k > 0 ? k : 0;
}

static double predicted(const th_search *S, const int *choice) {
    double sum = 0;
    for (size_t i = 0; i < S->n_u; i++) sum += cost_of(S, i, choice[i]);
    return sum;
}

static void pick(const th_search *S, double lambda, int *choice) {
    for (size_t i = 0; i < S->n_u; i++) {
        const th_search_unit *u = &S->u[i];
        double best = (double)u->src_bytes;
        choice[i] = -1;
        for (int c = 0; c < u->n_c; c++) {
            if (!u->c[c].allowed || !u->c[c].measured) continue;
            double v = (double)u->c[c].bytes + lambda * cost_of(S, i, c);
            if (v < best) { best = v; choice[i] = c; }
        }
    }
}

/* The smallest-bytes choice whose predicted KLD is at most B. */
static void knapsack(const th_search *S, double B, int *choice) {
    double lo = -30, hi = 60;   /* log lambda */
    pick(S, exp(hi), choice);
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi);
        pick(S, exp(mid), choice);
        if (predicted(S, choice) <= B) hi = mid;
        else lo = mid;
    }
    pick(S, exp(hi), choice);
}

static th_status calib_check(th_search *S, const int *choice, double *measured) {
    uint64_t h = th_search_hash(S, choice);
    const th_slog_rec *m = th_search_memo_hash(&S->memo, TH_SLOG_CALIB, h);
    if (m) { *measured = m->kld; return TH_OK; }
    double pr, gap;
    int64_t fl;
    th_status s = th_search_apply(S, choice);
    if (!s) s = th_search_eval(S, true, measured, &pr, &fl, &gap);
    if (s) return s;
    th_slog_rec rec = { .kind = TH_SLOG_CALIB, .expert = -1, .hash = h, .bytes = th_search_bytes(S, choice),
                        .kld = *measured, .ppl_ratio = pr, .flips = fl, .gap_min = gap };
    snprintf(rec.tensor, sizeof rec.tensor, "predicted %.9g", predicted(S, choice));
    th_slog_write(S->log, &rec);
    fflush(S->log);
    return th_search_memo_add(&S->memo, &rec);
}

typedef struct step { size_t unit; int to; double score; } step;

static int by_score(const void *a, const void *b) {
    double x = ((const step *)a)->score, y = ((const step *)b)->score;
    return x < y ? -1 : x > y;
}

/* The next cheaper allowed candidate of each unit, ranked. */
static size_t list_steps(const th_search *S, const int *choice, const unsigned char *banned, step *out) {
    size_t n = 0;
    for (size_t i = 0; i < S->n_u; i++) {
        const th_search_unit *u = &S->u[i];
        uint64_t now = choice[i] < 0 ? u->src_bytes : u->c[choice[i]].bytes;
        int to = -1;
        for (int c = u->n_c - 1; c >= 0; c--)   /* dearest first: the largest cheaper one */
            if (u->c[c].allowed && u->c[c].measured && u->c[c].bytes < now && !banned[i * TH_SEARCH_MAX_TYPES + c]) {
                to = c;
                break;
            }
        if (to < 0) continue;
        double dk = cost_of(S, i, to) - cost_of(S, i, choice[i]);
        out[n++] = (step){ i, to, dk / (double)(now - u->c[to].bytes) };
    }
    qsort(out, n, sizeof *out, by_score);
    return n;
}

static th_status descend(th_search *S, int *best) {
    const th_search_params *p = S->p;
    step *st = malloc(S->n_u * sizeof *st);
    unsigned char *banned = calloc(S->n_u * TH_SEARCH_MAX_TYPES, 1);
    int *trial = malloc(S->n_u * sizeof *trial);
    th_status s = st && banned && trial ? TH_OK : th_set_error(TH_ERR_NOMEM, "search: out of memory");
    size_t group = S->n_u / 8 ? S->n_u / 8 : 1;
    int evals = 0;
    double t0 = th_search_now();
    while (!s && evals < p->max_gate_evals) {
        if (p->budget_bpw > 0 && S->r->best.bytes && S->r->best.bpw <= p->budget_bpw) break;
        size_t n = list_steps(S, best, banned, st);
        if (n == 0) break;
        size_t g = group < n ? group : n;
        memcpy(trial, best, S->n_u * sizeof *trial);
        for (size_t k = 0; k < g; k++) trial[st[k].unit] = st[k].to;
        char label[48];
        snprintf(label, sizeof label, "descent %d (%zu steps)", evals + 1, g);
        th_search_point pt;
        if ((s = th_search_gate(S, trial, label, false, &pt))) break;
        evals++;
        if (pt.feasible) {
            memcpy(best, trial, S->n_u * sizeof *best);
        } else if (g > 1) {
            group = g / 2;
        } else {
            banned[st[0].unit * TH_SEARCH_MAX_TYPES + st[0].to] = 1;
        }
        th_search_report_progress(S, "descent", evals, p->max_gate_evals, t0, label);
    }
    free(st);
    free(banned);
    free(trial);
    return s;
}

th_status th_search_solve(th_search *S) {
    int *choice = malloc(S->n_u * sizeof *choice), *best = malloc(S->n_u * sizeof *best);
    if (!choice || !best) { free(choice); free(best); return th_set_error(TH_ERR_NOMEM, "search: out of memory"); }
    th_status s = TH_OK;
    double scale = 1, lo = 0, hi = 0, G = S->gate_max;
    bool have_best = false;
    uint64_t best_bytes = 0, last_hash = 0;
    bool last_feasible = false;
    double t0 = th_search_now();
    int gates = 0;
    for (int it = 0; it < 4 * KNAP_STEPS && gates < KNAP_STEPS && !s; it++) {
        knapsack(S, scale * G, choice);
        uint64_t h = th_search_hash(S, choice);
        double ratio;
        th_search_point pt = { 0 };
        if (gates > 0 && h == last_hash) {
            /* the budget moved too little to change the choice: move it on, same way */
            ratio = last_feasible ? 1.5 : 0.67;
            pt.feasible = last_feasible;
        } else {
            last_hash = h;
            char label[48];
            snprintf(label, sizeof label, "knapsack %d (B %.3g)", gates + 1, scale * G);
            if ((s = th_search_gate(S, choice, label, false, &pt))) break;
            gates++;
            double meas = 0, pred = predicted(S, choice);
            if ((s = calib_check(S, choice, &meas))) break;
            if (S->n_add++ == 0) { S->add_pred = pred; S->add_meas = meas; }
            if (pred > 0) {
                double dev = fabs(meas / pred - 1);
                if (dev > S->r->additivity_worst) S->r->additivity_worst = dev;
            }
            fprintf(S->log, "{\"kind\":\"additivity\",\"start\":%d,\"predicted\":%.9g,\"measured\":%.9g}\n", gates,
                    pred, meas);
            if (pt.feasible && (!have_best || pt.bytes < best_bytes)) {
                memcpy(best, choice, S->n_u * sizeof *best);
                best_bytes = pt.bytes;
                have_best = true;
            }
            last_feasible = pt.feasible;
            ratio = pt.gate > 0 ? G / pt.gate : 4;
            th_search_report_progress(S, "knapsack", gates, KNAP_STEPS, t0, label);
        }
        if (pt.feasible) lo = scale;
        else hi = scale;
        if (hi == 0) scale *= ratio > 4 ? 4 : ratio < 1.2 ? 1.2 : ratio;
        else if (lo == 0) scale *= ratio < 0.25 ? 0.25 : ratio > 0.9 ? 0.9 : ratio;
        else if (hi / lo < 1.02) break;
        else scale = sqrt(lo * hi);
    }
    /* a feasible uniform point smaller than every start: descend from it instead */
    if (!s && S->uniform_best && (!have_best || th_search_bytes(S, S->uniform_best) < best_bytes)) {
        memcpy(best, S->uniform_best, S->n_u * sizeof *best);
        best_bytes = th_search_bytes(S, best);
        have_best = true;
        th_search_point pt;
        s = th_search_gate(S, best, "start: smallest uniform", false, &pt);   /* memoized: no new run */
    }
    if (!s && !have_best) {   /* nothing predicted passed: start from the source itself */
        for (size_t i = 0; i < S->n_u; i++) best[i] = -1;
        th_search_point pt;
        s = th_search_gate(S, best, "source", false, &pt);
        have_best = true;
    }
    if (!s) s = descend(S, best);
    if (!s) s = th_search_reports(S, best);
    if (!s) s = th_search_apply(S, best);   /* the model holds the result */
    free(choice);
    free(best);
    return s;
}
