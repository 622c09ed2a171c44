/* quantize_imatrix.c — matching an importance matrix to the tensors th_quantize_file
 * converts (th_qimatrix_match): llama-quantize's rules — an entry is looked up by
 * the tensor's name, must hold ne0 * ne2 values (one slice of ne0 per expert), is
 * divided by its ncall, and a tensor without an entry is quantized without one —
 * plus two checks of our own that catch a matrix made for another model: an entry
 * of the wrong size is an error naming both sizes (llama-quantize errors too, but
 * skips token_embd.weight), and so is a matrix that names none of the model's
 * tensors. */
#include "quant/quantize_file.h"
#include <inttypes.h>
#include <stdlib.h>

void th_qimatrix_free(float **qw, size_t n) {
    for (size_t i = 0; qw && i < n; i++) free(qw[i]);
    free(qw);
}

/* values / ncall, as llama-quantize's load_imatrix divides them (float by float(ncall)). */
static float *normalised(const float *v, int64_t nv, int32_t ncall) {
    float *out = malloc((size_t)nv * sizeof *out);
    if (!out) return NULL;
    for (int64_t j = 0; j < nv; j++) out[j] = ncall > 0 ? v[j] / (float)ncall : v[j];
    return out;
}

th_status th_qimatrix_match(const th_imatrix *im, const char *imatrix_path, const char *model_path,
                            const th_qtensor *t, const uint32_t *out_type, size_t n, float ***qw_out) {
    *qw_out = NULL;
    float **qw = calloc(n ? n : 1, sizeof *qw);
    if (!qw) return th_set_error(TH_ERR_NOMEM, "quantize: out of memory");
    size_t named = 0;
    th_status s = TH_OK;
    for (size_t i = 0; !s && i < n; i++) {
        int64_t nv;
        int32_t ncall;
        const float *v = th_imatrix_values(im, t[i].name, &nv, &ncall);
        if (!v) continue;
        named++;
        if (out_type[i] == t[i].type) continue;   /* copied, not quantized: llama-quantize does not look */
        uint64_t want = t[i].ne[0] * (t[i].n_dims > 2 ? t[i].ne[2] : 1);
        if ((uint64_t)nv != want) {
            if (!strcmp(t[i].name, "token_embd.weight")) continue;   /* llama-quantize skips it too */
            s = th_set_error(TH_ERR_FORMAT,
                             "importance matrix %s: entry %s has %" PRId64 " values, but tensor %s of %s needs %" PRIu64
                             " (%" PRIu64 " columns x %" PRIu64 " experts): a matrix for another model?",
                             imatrix_path, t[i].name, nv, t[i].name, model_path, want, t[i].ne[0], want / t[i].ne[0]);
            break;
        }
        if (!(qw[i] = normalised(v, nv, ncall))) s = th_set_error(TH_ERR_NOMEM, "quantize: out of memory");
    }
    if (!s && named == 0)
        s = th_set_error(TH_ERR_FORMAT,
                         "importance matrix %s names none of the %zu tensors of %s (its first entry: %s): a matrix for "
                         "another model?",
                         imatrix_path, n, model_path, th_imatrix_entry_name(im, 0) ? th_imatrix_entry_name(im, 0) : "?");
    if (s) { th_qimatrix_free(qw, n); return s; }
    *qw_out = qw;
    return TH_OK;
}
