/* stats.c — the KL-divergence statistics of llama-perplexity: running sums of the
 * compared positions (th_kld_acc) and the figures it prints from them (means with
 * its uncertainty rule, the covariance of the two log-likelihoods, its percentile
 * rule over the sorted KLD and Δp values). Sums are added in position order, so the
 * result does not depend on the number of threads. */
#include "eval/eval.h"
#include "core/core.h"
#include <math.h>
#include <stdlib.h>

struct th_kld_acc {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    double sum_p, sum_p2, sum_pb, sum_pb2, sum_p_pb;   /* for the Pearson correlation of p */
    int64_t n_same_top, count, cap;
    float *kld_values, *p_diff_values;
};

th_status th_kld_acc_new(th_kld_acc **out) {
    if (!out) return th_set_error(TH_ERR_ARG, "th_kld_acc_new: no output");
    *out = calloc(1, sizeof **out);
    return *out ? TH_OK : th_set_error(TH_ERR_NOMEM, "th_kld_acc_new: out of memory");
}

void th_kld_acc_free(th_kld_acc *a) {
    if (!a) return;
    free(a->kld_values);
    free(a->p_diff_values);
    free(a);
}

th_status th_kld_acc_push(th_kld_acc *a, const th_kld_pos *p) {
    if (a->count == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 1024;
        float *k = realloc(a->kld_values, (size_t)cap * sizeof *k);
        if (k) a->kld_values = k;
        float *d = k ? realloc(a->p_diff_values, (size_t)cap * sizeof *d) : NULL;
        if (!k || !d) return th_set_error(TH_ERR_NOMEM, "KL divergence: out of memory for %lld positions", (long long)cap);
        a->p_diff_values = d;
        a->cap = cap;
    }
    /* float products where llama.cpp has them (nll*nll is a float there too) */
    a->sum_nll += p->nll;
    a->sum_nll2 += p->nll * p->nll;
    a->sum_nll_base += p->nll_base;
    a->sum_nll_base2 += p->nll_base * p->nll_base;
    a->sum_nll_nll_base += p->nll * p->nll_base;
    a->sum_kld += p->kld;
    a->sum_kld2 += p->kld * p->kld;
    a->sum_p_diff += p->p_diff;
    const double p_diff2 = p->p_diff * p->p_diff;
    a->sum_p_diff2 += p_diff2;
    a->sum_p_diff4 += p_diff2 * p_diff2;
    a->sum_p += p->p;
    a->sum_p2 += (double)p->p * p->p;
    a->sum_pb += p->p_base;
    a->sum_pb2 += (double)p->p_base * p->p_base;
    a->sum_p_pb += (double)p->p * p->p_base;
    a->n_same_top += p->same_top;
    a->kld_values[a->count] = (float)p->kld;
    a->p_diff_values[a->count] = p->p_diff;
    a->count++;
    return TH_OK;
}

th_status th_kld_acc_add(th_kld_acc *a, const float *logits, const float *base_logprobs,
                         int32_t n_vocab, th_token next, double *kld) {
    if (!a || !logits || !base_logprobs || n_vocab < 1)
        return th_set_error(TH_ERR_ARG, "th_kld_acc_add: missing accumulator, rows or vocabulary size");
    if (next < 0 || next >= n_vocab)
        return th_set_error(TH_ERR_ARG, "th_kld_acc_add: token %d outside the vocabulary [0, %d)", next, n_vocab);
    th_kld_pos p;
    th_row_kld(logits, base_logprobs, n_vocab, next, &p);
    if (kld) *kld = p.kld;
    return th_kld_acc_push(a, &p);
}

void th_mean_unc(double sum, double sum2, int64_t count, double *mean, double *unc) {
    if (count < 1) { *mean = 0; *unc = 0; return; }
    double f = sum / count, df = sum2 / count - f * f;
    *mean = f;
    *unc = df > 0 && count > 10 ? sqrt(df / (count - 1)) : 0.;
}

static double covariance(double suma, double sumb, double sumab, int64_t count) {
    if (count < 10) return 0.0;
    double var = sumab / count - (suma / count) * (sumb / count);
    return var / (count - 1);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* llama.cpp's percentile over sorted values (float arithmetic, as there). */
static float percentile(const float *v, int64_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    int64_t ip = (int64_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[TH_MIN(ip + 1, n - 1)];
}

static float median(const float *v, int64_t n) {
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

static void distribution(const th_kld_acc *a, th_kld_stats *s) {
    int64_t n = a->count;
    float *k = malloc((size_t)n * sizeof *k), *d = malloc((size_t)n * sizeof *d);
    if (!k || !d) { free(k); free(d); return; }   /* has_distribution stays false */
    memcpy(k, a->kld_values, (size_t)n * sizeof *k);
    memcpy(d, a->p_diff_values, (size_t)n * sizeof *d);
    qsort(k, (size_t)n, sizeof *k, cmp_float);
    qsort(d, (size_t)n, sizeof *d, cmp_float);
    s->kld_max = k[n - 1];
    s->kld_p999 = percentile(k, n, 0.999f);
    s->kld_p99 = percentile(k, n, 0.990f);
    s->kld_p95 = percentile(k, n, 0.950f);
    s->kld_p90 = percentile(k, n, 0.900f);
    s->kld_median = median(k, n);
    s->kld_p10 = percentile(k, n, 0.100f);
    s->kld_p5 = percentile(k, n, 0.050f);
    s->kld_p1 = percentile(k, n, 0.010f);
    s->kld_p01 = percentile(k, n, 0.001f);
    s->kld_min = k[0];
    s->dp_max = d[n - 1];
    s->dp_p999 = percentile(d, n, 0.999f);
    s->dp_p99 = percentile(d, n, 0.990f);
    s->dp_p95 = percentile(d, n, 0.950f);
    s->dp_p90 = percentile(d, n, 0.900f);
    s->dp_p75 = percentile(d, n, 0.750f);
    s->dp_median = median(d, n);
    s->dp_p25 = percentile(d, n, 0.250f);
    s->dp_p10 = percentile(d, n, 0.100f);
    s->dp_p5 = percentile(d, n, 0.050f);
    s->dp_p1 = percentile(d, n, 0.010f);
    s->dp_p01 = percentile(d, n, 0.001f);
    s->dp_min = d[0];
    s->has_distribution = true;
    free(k);
    free(d);
}

th_kld_stats th_kld_acc_stats(const th_kld_acc *a, bool with_distribution) {
    th_kld_stats s = { 0 };
    if (!a || a->count < 1) return s;
    const int64_t n = a->count;
    s.count = n;
    double lp, lp_unc, lb, lb_unc;
    th_mean_unc(a->sum_nll, a->sum_nll2, n, &lp, &lp_unc);
    th_mean_unc(a->sum_nll_base, a->sum_nll_base2, n, &lb, &lb_unc);
    s.ppl = exp(lp);
    s.ppl_unc = s.ppl * lp_unc;
    s.ppl_base = exp(lb);
    s.ppl_base_unc = s.ppl_base * lb_unc;
    const double cov = covariance(a->sum_nll, a->sum_nll_base, a->sum_nll_nll_base, n);
    s.cor_ln_ppl = lp_unc * lb_unc != 0 ? cov / (lp_unc * lb_unc) : 0;
    s.ln_ppl_ratio = lp - lb;
    s.ln_ppl_ratio_unc = sqrt(fmax(0, lp_unc * lp_unc + lb_unc * lb_unc - 2.0 * cov));
    s.ppl_ratio = exp(s.ln_ppl_ratio);
    s.ppl_ratio_unc = s.ppl_ratio * s.ln_ppl_ratio_unc;
    const double ppl_cov = s.ppl * s.ppl_base * cov;
    s.ppl_diff = s.ppl - s.ppl_base;
    s.ppl_diff_unc = sqrt(fmax(0, s.ppl_unc * s.ppl_unc + s.ppl_base_unc * s.ppl_base_unc - 2.0 * ppl_cov));
    th_mean_unc(a->sum_kld, a->sum_kld2, n, &s.kld, &s.kld_unc);
    th_mean_unc(a->sum_p_diff, a->sum_p_diff2, n, &s.dp, &s.dp_unc);
    double mse, mse_unc;
    th_mean_unc(a->sum_p_diff2, a->sum_p_diff4, n, &mse, &mse_unc);
    s.dp_rms = sqrt(mse);
    s.dp_rms_unc = s.dp_rms > 0 ? 0.5 / s.dp_rms * mse_unc : 0;
    s.same_top = (double)a->n_same_top / n;
    s.same_top_unc = n > 1 ? sqrt(s.same_top * (1 - s.same_top) / (n - 1)) : 0;
    const double vp = a->sum_p2 / n - (a->sum_p / n) * (a->sum_p / n);
    const double vb = a->sum_pb2 / n - (a->sum_pb / n) * (a->sum_pb / n);
    const double cpb = a->sum_p_pb / n - (a->sum_p / n) * (a->sum_pb / n);
    s.cor_p = vp > 0 && vb > 0 ? cpb / sqrt(vp * vb) : (vp == 0 && vb == 0 ? 1 : 0);
    if (with_distribution) distribution(a, &s);
    return s;
}
