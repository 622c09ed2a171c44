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

/* Logits of every token of tok[0..n), decoded in batches of cp.n_batch
 * tokens in a fresh context made with cp; malloc'd n x n_vocab, NULL on failure. */
static inline float *decode_all_logits(th_model *m, const int32_t *tok, int n, const th_context_params *cp) {
    th_context *c;
    if (n < 1 || th_context_new(m, cp, &c)) return NULL;
    int nv = th_model_n_vocab(m), chunk = (int)cp->n_batch;
    float *out = malloc((size_t)n * nv * sizeof(float));
    int8_t *want = malloc((size_t)chunk);
    if (!want) { free(out); out = NULL; }
    else memset(want, 1, (size_t)chunk);
    for (int i0 = 0; out && i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk;
        th_batch b = { .n_tokens = nb, .token = tok + i0, .logits = want };
        if (th_decode(c, &b)) { free(out); out = NULL; break; }
        for (int j = 0; j < nb; j++) memcpy(out + (size_t)(i0 + j) * nv, th_get_logits(c, j), (size_t)nv * 4);
    }
    free(want);
    th_context_free(c);
    return out;
}

/* A copy of the GGUF at src written to dst whose F32 output.weight has its rows in
 * identical pairs (row 2j+1 := row 2j), so that every position's logits come in
 * exactly equal pairs: the largest value is held by an even id and the id after
 * it, and the lowest-index tie rule must pick the even one. false on failure. */
static inline bool write_pair_tied_model(const char *src, const char *dst) {
    th_file *tf;
    if (th_file_open(src, &tf)) return false;
    th_tensor_info ti = { 0 };
    bool found = false;
    for (int64_t i = 0; i < th_file_n_tensors(tf) && !found; i++)
        found = th_file_tensor(tf, i, &ti) == TH_OK && !strcmp(ti.name, "output.weight") && !strcmp(ti.type, "F32");
    uint64_t off = ti.offset, row = ti.ne[0] * 4, rows = ti.ne[1];
    th_file_close(tf);
    FILE *in = found ? fopen(src, "rb") : NULL, *out = NULL;
    if (!in) return false;
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = size > 0 ? malloc((size_t)size) : NULL;
    bool ok = buf && fread(buf, 1, (size_t)size, in) == (size_t)size && off + row * rows <= (uint64_t)size;
    fclose(in);
    for (uint64_t r = 0; ok && r + 1 < rows; r += 2) memcpy(buf + off + (r + 1) * row, buf + off + r * row, row);
    if (ok) ok = (out = fopen(dst, "wb")) && fwrite(buf, 1, (size_t)size, out) == (size_t)size;
    if (out && fclose(out)) ok = false;
    free(buf);
    return ok;
}

/* The ragged-batch checks (test_arch's MoE batches on the CPU, test_cuda_moe's on the
 * GPU): three sequences of 12, 6 and 18 tokens interleaved round-robin in one batch,
 * positions [0, split) in a first step and the rest in a second. ragged3_seq: sequence
 * q's tokens (its length in *len), for decoding it alone. */
static inline const int32_t *ragged3_seq(int q, int *len) {
    static const int32_t toks[3][20] = {
        { 1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567, 975 },
        { 1, 903, 2501, 263, 931, 727 },
        { 1, 278, 425, 1537, 437, 106, 49, 1551, 346, 2501, 263, 931, 47, 727, 471, 450, 439, 860 } };
    static const int n[3] = { 12, 6, 18 };
    *len = n[q];
    return toks[q];
}

/* The two ragged steps decoded in c (n_seq_max >= 3, n_batch >= 36), every token's
 * logits against alone[q] (sequence q alone, its length × nv): *worst the largest
 * rel-L2, *top1_bad the tokens whose top-1 differs (*bad_seq / *bad_pos: the first
 * of them). False when a decode fails (th_last_error says why). */
static inline bool ragged3_compare(th_context *c, float *const alone[3], int nv, double *worst, int *top1_bad,
                                   int *bad_seq, int *bad_pos) {
    static const int split[3] = { 7, 4, 11 };
    const int32_t *toks[3];
    int len[3];
    for (int q = 0; q < 3; q++) toks[q] = ragged3_seq(q, &len[q]);
    *worst = 0;
    *top1_bad = 0;
    for (int step = 0; step < 2; step++) {
        int32_t tok[64], seq[64], idx[64];
        int8_t want[64];
        int n = 0, at[3];
        for (int q = 0; q < 3; q++) at[q] = step ? split[q] : 0;
        for (bool more = true; more;) {   /* round-robin over the sequences */
            more = false;
            for (int q = 0; q < 3; q++) {
                int end = step ? len[q] : split[q];
                if (at[q] < end) { tok[n] = toks[q][at[q]]; seq[n] = q; idx[n] = at[q]; want[n] = 1; n++; at[q]++; more = true; }
            }
        }
        th_batch b = { .n_tokens = n, .token = tok, .seq_id = seq, .logits = want };
        if (th_decode(c, &b)) return false;
        for (int i = 0; i < n; i++) {
            const float *l = th_get_logits(c, i), *r = alone[seq[i]] + (size_t)idx[i] * nv;
            double e = rel_l2(l, r, nv);
            if (e > *worst) *worst = e;
            if (argmax(l, nv) != argmax(r, nv) && (*top1_bad)++ == 0) { *bad_seq = seq[i]; *bad_pos = idx[i]; }
        }
    }
    return true;
}

#endif
