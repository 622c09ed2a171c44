/* logits.h — test helpers for logits: reading THLG files (the golden format of
 * shared/fixtures) and comparing two sets of logits the way the fixtures'
 * tolerances are stated (worst per-position relative L2 error, top-1 agreement). */
#ifndef TH_TEST_LOGITS_H
#define TH_TEST_LOGITS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "theseus.h"

typedef struct { uint32_t n, nv; int32_t *tok; float *logits; } thlg;

static inline bool thlg_load(const char *path, thlg *g) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    uint32_t h[4];
    bool ok = fread(h, 4, 4, f) == 4 && h[0] == 0x474C4854u && h[1] == 1;
    if (ok) {
        g->n = h[2]; g->nv = h[3];
        g->tok = malloc(g->n * 4);
        g->logits = malloc((size_t)g->n * g->nv * 4);
        ok = g->tok && g->logits && fread(g->tok, 4, g->n, f) == g->n &&
             fread(g->logits, 4, (size_t)g->n * g->nv, f) == (size_t)g->n * g->nv;
    }
    fclose(f);
    return ok;
}

static inline void thlg_free(thlg *g) { free(g->tok); free(g->logits); }

static inline int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static inline double rel_l2(const float *a, const float *b, int nv) {
    double num = 0, den = 0;
    for (int i = 0; i < nv; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* Worst relative L2 error over n positions (and where, if worst_pos), top-1 agreement. */
static inline void compare_logits(const float *a, const float *b, int n, int nv, double *worst, int *worst_pos,
                                  double *top1) {
    int agree = 0, wp = 0;
    *worst = 0;
    for (int p = 0; p < n; p++) {
        double r = rel_l2(a + (size_t)p * nv, b + (size_t)p * nv, nv);
        if (!(r <= *worst)) { *worst = r; wp = p; }   /* NaN counts as the worst */
        agree += argmax(a + (size_t)p * nv, nv) == argmax(b + (size_t)p * nv, nv);
    }
    if (worst_pos) *worst_pos = wp;
    *top1 = (double)agree / n;
}

/* Logits of every token of tok[0..n) (n <= 64), decoded in batches of cp.n_batch
 * tokens in a fresh context made with cp; malloc'd n x n_vocab, NULL on failure. */
static inline float *decode_all_logits(th_model *m, const int32_t *tok, int n, const th_context_params *cp) {
    th_context *c;
    if (n > 64 || th_context_new(m, cp, &c)) return NULL;
    int nv = th_model_n_vocab(m), chunk = (int)cp->n_batch;
    float *out = malloc((size_t)n * nv * sizeof(float));
    int8_t want[64];
    memset(want, 1, sizeof want);
    for (int i0 = 0; out && i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk;
        th_batch b = { .n_tokens = nb, .token = tok + i0, .logits = want };
        if (th_decode(c, &b)) { free(out); out = NULL; break; }
        for (int j = 0; j < nb; j++) memcpy(out + (size_t)(i0 + j) * nv, th_get_logits(c, j), (size_t)nv * 4);
    }
    th_context_free(c);
    return out;
}

/* The ragged-batch checks' schedule: three sequences' tokens interleaved round-robin,
 * step 0 taking positions [0, split[q]) and step 1 [split[q], len[q]); fills tok, seq,
 * idx (each token's position in its sequence) and want; returns the batch size. */
static inline int interleave3(int step, const int32_t toks[3][20], const int len[3], const int split[3],
                              int32_t *tok, int32_t *seq, int32_t *idx, int8_t *want) {
    int n = 0, at[3];
    for (int q = 0; q < 3; q++) at[q] = step ? split[q] : 0;
    for (bool more = true; more;) {
        more = false;
        for (int q = 0; q < 3; q++) {
            int end = step ? len[q] : split[q];
            if (at[q] < end) { tok[n] = toks[q][at[q]]; seq[n] = q; idx[n] = at[q]; want[n] = 1; n++; at[q]++; more = true; }
        }
    }
    return n;
}

#endif
