/* imatrix.c — the importance matrix (theseus imatrix, quantize --imatrix), as
 * llama-imatrix computes it: the text in chunks of n_ctx tokens (BOS in place of
 * each chunk's first token), every position decoded with its logits (so no row is
 * dropped before the last layer), in decode calls of at most n_ubatch tokens. For
 * each call and each matrix weight named blk.* (and output.weight when asked) the
 * context's observer hands over the F32 input rows: a dense product counts only when
 * it has at least 16 rows (llama-imatrix skips smaller ones), a routed expert's rows
 * always count, into that expert's slice. Per weight: the sum of x² per input
 * column (float, as there), the rows counted per column and ncall (calls that saw
 * the weight). Stored value = sum / count * ncall, as llama-imatrix writes it.
 * The file format is imatrix_file.c. */
#include "eval/eval.h"
#include "eval/imatrix_internal.h"
#include "core/core.h"
#include "model.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_ROWS = 16 };

static bool wanted(const th_imatrix *im, const char *name) {
    return !strncmp(name, "blk.", 4) || (im->process_output && !strcmp(name, "output.weight"));
}

static void on_matmul(void *ud, const char *name, int32_t expert, const float *rows, int64_t n_rows, int64_t row_len,
                      int64_t stride) {
    th_imatrix *im = ud;
    if (im->err || !wanted(im, name)) return;
    if (expert < 0 && n_rows < MIN_ROWS) return;
    int64_t slices = expert >= 0 ? im->n_expert : 1;
    if (expert >= slices) {
        im->err = th_set_error(TH_ERR_ARG, "imatrix: %s: expert %d of %lld", name, expert, (long long)slices);
        return;
    }
    entry *e = th_imx_find(im, name);
    if (!e && !(e = th_imx_add(im, name, row_len * slices, true))) {
        im->err = th_set_error(TH_ERR_NOMEM, "imatrix: out of memory for %s", name);
        return;
    }
    if (e->n != row_len * slices) {
        im->err = th_set_error(TH_ERR_ARG, "imatrix: %s: rows of %lld values, earlier %lld", name, (long long)row_len,
                               (long long)(e->n / slices));
        return;
    }
    if (e->last_pass != im->pass) { e->ncall++; e->last_pass = im->pass; }
    float *s = e->sum + (expert >= 0 ? (int64_t)expert * row_len : 0);
    int32_t *c = e->count + (expert >= 0 ? (int64_t)expert * row_len : 0);
    for (int64_t r = 0; r < n_rows; r++) {
        const float *x = rows + r * stride;
        for (int64_t j = 0; j < row_len; j++) {
            s[j] += x[j] * x[j];
            c[j]++;
        }
    }
    for (int64_t j = 0; j < row_len; j++)
        if (!isfinite(s[j])) {
            im->err = th_set_error(TH_ERR_FORMAT, "imatrix: %s: a non-finite sum of squares (column %lld)", name,
                                   (long long)j);
            return;
        }
}

th_imatrix_params th_imatrix_default_params(void) {
    return (th_imatrix_params){ .n_ctx = 512, .n_batch = 2048, .n_ubatch = 512, .n_chunks = -1 };
}

static int32_t call_size(const th_imatrix_params *ip) {
    int32_t C = ip->n_ctx > 0 ? ip->n_ctx : 512, b = ip->n_batch > 0 ? ip->n_batch : 2048;
    int32_t u = ip->n_ubatch > 0 ? ip->n_ubatch : 512;
    return TH_MIN(TH_MIN(b, C), u);
}

void th_imatrix_context_params(const th_imatrix_params *ip, th_context_params *cp) {
    cp->n_ctx = (uint32_t)(ip->n_ctx > 0 ? ip->n_ctx : 512);
    cp->n_batch = (uint32_t)call_size(ip);
    cp->n_seq_max = 1;
}

/* One chunk: decode calls of `nb` tokens, every position with logits; its
 * positions n_ctx/2 .. n_ctx-2 scored as llama-imatrix's perplexity. */
static th_status run_chunk(th_imatrix *im, th_model *m, th_context *ctx, const th_token *t, int32_t C, int32_t nb,
                           th_token *tok, int32_t *pos, int8_t *want, double *nll, double *nll2, int64_t *count) {
    th_status s;
    if ((s = th_kv_seq_clear(ctx, 0))) return s;
    int32_t nv = th_model_n_vocab(m), first = C / 2;
    for (int32_t b0 = 0; b0 < C; b0 += nb) {
        int32_t n = TH_MIN(nb, C - b0);
        for (int32_t i = 0; i < n; i++) {
            tok[i] = b0 + i == 0 && th_model_add_bos(m) ? th_token_bos(m) : t[b0 + i];
            pos[i] = b0 + i;
            want[i] = 1;
        }
        th_batch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = NULL, .logits = want };
        im->pass++;
        if ((s = th_decode(ctx, &b))) return s;
        if (im->err) return im->err;
        for (int32_t i = 0; i < n; i++) {
            int32_t p = b0 + i;
            if (p < first || p > C - 2) continue;
            const float *lg = th_get_logits(ctx, i);
            if (!lg) return TH_ERR_ARG;
            double v = th_row_nll(lg, nv, t[p + 1]);
            *nll += v;
            *nll2 += v * v;
            (*count)++;
        }
    }
    return TH_OK;
}

th_status th_imatrix_compute(th_model *m, th_context *ctx, const th_token *tokens, size_t n_tokens,
                             const th_imatrix_params *ip, th_imatrix **out, double *ppl, double *ppl_unc) {
    *out = NULL;
    int32_t C = ip->n_ctx > 0 ? ip->n_ctx : 512, nb = call_size(ip);
    if (C < 3) return th_set_error(TH_ERR_ARG, "imatrix: a chunk of %d tokens is too short", C);
    if (n_tokens < 2 * (size_t)C)
        return th_set_error(TH_ERR_ARG, "the text tokenizes to only %zu tokens; an importance matrix with a context "
                            "of %d needs at least %d (two chunks)", n_tokens, C, 2 * C);
    if (th_context_n_ctx(ctx) < (uint32_t)C)
        return th_set_error(TH_ERR_ARG, "imatrix: the context holds %u tokens, a chunk needs %d (size it with "
                            "th_imatrix_context_params)", th_context_n_ctx(ctx), C);
    int32_t n_chunks = (int32_t)TH_MIN(n_tokens / (size_t)C, (size_t)INT32_MAX);
    if (ip->n_chunks > 0 && ip->n_chunks < n_chunks) n_chunks = ip->n_chunks;
    th_imatrix *im = calloc(1, sizeof *im);
    th_token *tok = malloc((size_t)nb * sizeof *tok);
    int32_t *pos = malloc((size_t)nb * sizeof *pos);
    int8_t *want = malloc((size_t)nb);
    th_status s = TH_OK;
    if (!im || !tok || !pos || !want) s = th_set_error(TH_ERR_NOMEM, "imatrix: out of memory");
    if (!s) {
        im->n_expert = TH_MAX(m->hp.n_expert, 1);
        im->process_output = ip->process_output;
        th_observer o = { .ud = im, .matmul_input = on_matmul };
        if (th_context_set_observer(ctx, &o))
            s = th_set_error(TH_ERR_UNSUPPORTED, "imatrix needs the matrix inputs from the context (a CPU context; "
                             "not --gpu): %s", th_last_error());
    }
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    for (int32_t c = 0; !s && c < n_chunks; c++) {
        s = run_chunk(im, m, ctx, tokens + (size_t)c * (size_t)C, C, nb, tok, pos, want, &nll, &nll2, &count);
        if (!s && ip->progress) ip->progress(c + 1, n_chunks, exp(nll / (double)count), ip->ud);
    }
    th_context_set_observer(ctx, NULL);
    free(tok); free(pos); free(want);
    if (s) { th_imatrix_free(im); return s; }
    im->last_call = n_chunks;
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    if (ppl) *ppl = exp(mean);
    if (ppl_unc) *ppl_unc = var > 0 ? sqrt(var / (double)(count - 1)) * exp(mean) : 0;
    /* finish: stored value = sum / count * ncall */
    for (int32_t i = 0; i < im->n; i++) {
        entry *e = &im->e[i];
        for (int64_t j = 0; j < e->n; j++)
            if (e->count[j]) e->sum[j] = e->sum[j] / (float)e->count[j] * (float)e->ncall;
    }
    *out = im;
    return TH_OK;
}
