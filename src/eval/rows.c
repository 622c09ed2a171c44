/* rows.c — the arithmetic of one scored position, written to give the numbers
 * llama-perplexity gives: the same float/double mix, the same order of operations,
 * the same tie rules (first maximum wins) and the same uint16 rounding of the base
 * file's log-probabilities. Nothing here allocates or fails. */
#include "eval/eval.h"
#include <math.h>
#include <string.h>

/* Round to nearest (ties to even) by the 1.5 * 2^23 trick, as llama.cpp does;
 * valid for |v| < 2^22, and the callers stay within [0, 65535.x]. */
static inline int nearest_int(float v) {
    float x = v + 12582912.f;
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

double th_row_nll(const float *logits, int32_t n_vocab, th_token next) {
    float max_logit = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) max_logit = fmaxf(max_logit, logits[i]);
    double sum_exp = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    return -((double)(logits[next] - max_logit) - log(sum_exp));
}

double th_row_encode(const float *logits, int32_t n_vocab, th_token next, uint16_t *row) {
    float max_logit = logits[0], min_logit = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        max_logit = fmaxf(max_logit, logits[i]);
        min_logit = fminf(min_logit, logits[i]);
    }
    min_logit = fmaxf(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    memcpy(row, &scale, sizeof scale);
    memcpy(row + 2, &min_log_prob, sizeof min_log_prob);
    uint16_t *v = row + 4;
    int64_t padded = th_kld_row_len(n_vocab) - 4;
    if (scale != 0) {
        const float inv_scale = 1 / scale;
        for (int32_t i = 0; i < n_vocab; i++)
            v[i] = logits[i] > min_logit ? (uint16_t)nearest_int(inv_scale * (logits[i] - min_logit)) : 0;
    } else {
        memset(v, 0, (size_t)n_vocab * sizeof *v);
    }
    if (padded > n_vocab) v[n_vocab] = 0;
    return max_logit + log_sum_exp - logits[next];
}

void th_row_header(const uint16_t *row, float *scale, float *min_log_prob) {
    memcpy(scale, row, sizeof *scale);
    memcpy(min_log_prob, row + 2, sizeof *min_log_prob);
}

void th_row_kld(const float *logits, const float *base_lp, int32_t n_vocab, th_token next, th_kld_pos *out) {
    float max_logit = logits[0];
    int32_t imax = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max_logit) { max_logit = logits[i]; imax = i; }
    double sum_exp = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    const float nll = max_logit + log_sum_exp - logits[next];
    const float nll_base = -base_lp[next];
    max_logit += log_sum_exp;
    double sum = 0;
    int32_t imax_base = -1;
    float lp_base_max = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        const float lp_base = base_lp[i];
        if (i == 0 || lp_base > lp_base_max) { lp_base_max = lp_base; imax_base = i; }
        if (lp_base > -16.f) {
            const float p_base = expf(lp_base);
            sum += p_base * (lp_base - logits[i] + max_logit);
        }
    }
    out->nll = nll;
    out->nll_base = nll_base;
    out->kld = sum;
    out->same_top = imax == imax_base;
    out->p_base = expf(-nll_base);
    out->p = expf(-nll);
    out->p_diff = out->p - out->p_base;
}
