/* unigram.c — Unigram tokenization of one text fragment (tokenizer.ggml.model = t5,
 * from a Hugging Face Unigram tokenizer.json): spaces become U+2581, then the
 * Viterbi path of highest total score (the pieces' log probabilities) over the
 * UTF-8 characters; a character no piece starts with exactly is the unknown
 * token at (lowest piece score - 10), consecutive unknowns fused into one, as
 * the tokenizers library does. No normalizer (T5's precompiled charsmap is not
 * implemented). */
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <math.h>
#include <string.h>

th_status th_ugm_tokenize(const th_vocab *v, const char *in, size_t len, th_ids *out) {
    th_bytes text = {0};
    for (size_t i = 0; i < len; i++) {
        if (in[i] == ' ') th_bytes_put(&text, "\xE2\x96\x81", 3);
        else th_bytes_put(&text, in + i, 1);
    }
    size_t n = text.n;
    double *best = text.failed ? NULL : malloc((n + 1) * sizeof *best);
    int32_t *tok = best ? malloc((n + 1) * sizeof *tok) : NULL;
    uint32_t *from = tok ? malloc((n + 1) * sizeof *from) : NULL;
    if (!from) { free(text.p); free(best); free(tok); return th_set_error(TH_ERR_NOMEM, "tokenize: out of memory"); }
    float lo = 0.0f;
    for (int32_t i = 0; i < v->n_tokens; i++) if (v->score[i] < lo) lo = v->score[i];
    double unk_score = (double)lo - 10.0;
    for (size_t i = 0; i <= n; i++) best[i] = -INFINITY;
    best[0] = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (best[i] == -INFINITY) continue;
        size_t cl = TH_MIN(th_utf8_len((uint8_t)text.p[i]), n - i);
        bool single = false;
        for (size_t j = i + 1; j <= n && j - i <= v->max_token_len; j++) {
            int32_t id = th_vocab_find(v, text.p + i, j - i);
            if (id < 0 || id >= v->n_tokens) continue;
            if (j - i == cl) single = true;
            double sc = best[i] + v->score[id];
            if (sc > best[j]) { best[j] = sc; tok[j] = id; from[j] = (uint32_t)i; }
        }
        if (!single && v->unk >= 0 && best[i] + unk_score > best[i + cl]) {
            best[i + cl] = best[i] + unk_score;
            tok[i + cl] = v->unk;
            from[i + cl] = (uint32_t)i;
        }
    }
    if (best[n] == -INFINITY) {
        free(text.p); free(best); free(tok); free(from);
        return th_set_error(TH_ERR_FORMAT, "tokenize: the text cannot be tokenized (Unigram vocabulary without an unknown token)");
    }
    size_t start = out->n, k = 0;
    for (size_t j = n; j > 0; j = from[j]) k++;   /* path length, then the ids in order */
    for (size_t m = 0; m < k; m++) th_ids_push(out, 0);
    size_t w = out->n;
    for (size_t j = n; j > 0 && !out->oom; j = from[j]) out->p[--w] = tok[j];
    if (!out->oom) {   /* fuse runs of the unknown token */
        size_t d = start;
        for (size_t r = start; r < out->n; r++)
            if (!(out->p[r] == v->unk && d > start && out->p[d - 1] == v->unk)) out->p[d++] = out->p[r];
        out->n = d;
    }
    free(text.p); free(best); free(tok); free(from);
    return out->oom ? th_set_error(TH_ERR_NOMEM, "tokenize: out of memory") : TH_OK;
}
