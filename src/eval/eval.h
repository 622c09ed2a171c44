/* eval.h — internals of the evaluation code (src/eval/): the per-position
 * arithmetic of llama-perplexity (rows.c), the .kld base file (kld_file.c), the
 * KLD accumulator (stats.c) and the run over chunks (run.c). The public side is the
 * "evaluation" section of theseus.h. */
#ifndef TH_EVAL_H
#define TH_EVAL_H

#include "theseus.h"
#include <stdint.h>
#include <stdio.h>

/* uint16 values in one base-file row: two floats (scale, min_log_prob), then
 * n_vocab values padded to an even count. */
static inline int64_t th_kld_row_len(int32_t n_vocab) { return 2 * (((int64_t)n_vocab + 1) / 2) + 4; }

/* ---- rows.c: one scored position, exactly as llama-perplexity computes it */

/* -log p(next) from a logits row (llama.cpp's perplexity without a base file). */
double th_row_nll(const float *logits, int32_t n_vocab, th_token next);
/* Encode a row for the base file (row[th_kld_row_len]) and return -log p(next)
 * (llama.cpp's perplexity while saving logits; float arithmetic, as there). */
double th_row_encode(const float *logits, int32_t n_vocab, th_token next, uint16_t *row);
/* The row's scale and min_log_prob. */
void th_row_header(const uint16_t *row, float *scale, float *min_log_prob);

/* What one compared position contributes to the statistics. */
typedef struct th_kld_pos {
    float nll, nll_base;   /* -log p(next) under the candidate and the base */
    double kld;            /* sum over the base's tokens above e^-16 of p_base (log p_base - log q) */
    float p_diff;          /* p(next) - p_base(next) */
    float p, p_base;
    bool same_top;         /* the candidate's argmax equals the base's */
} th_kld_pos;
/* base_lp: the base row decoded to log-probabilities (th_kld_base_logprobs). */
void th_row_kld(const float *logits, const float *base_lp, int32_t n_vocab, th_token next, th_kld_pos *out);

/* ---- stats.c */
th_status th_kld_acc_push(th_kld_acc *a, const th_kld_pos *p);
/* llama.cpp's mean_and_uncertainty: mean, and sqrt(var/(n-1)) when n > 10 (else 0). */
void th_mean_unc(double sum, double sum2, int64_t count, double *mean, double *unc);

/* ---- kld_file.c */
/* Parse a base file held in memory (not copied: data must outlive *out, which does
 * not own it). name is used in error messages. */
th_status th_kld_base_parse(const uint8_t *data, size_t size, const char *name, th_kld_base **out);
/* Row j of chunk c, raw (th_kld_row_len uint16); NULL if out of range. */
const uint16_t *th_kld_base_row(const th_kld_base *b, int32_t chunk, int32_t j);
const char *th_kld_base_name(const th_kld_base *b);

/* Writer: header and tokens first, then rows in order. */
typedef struct th_kld_writer th_kld_writer;
th_status th_kld_writer_open(const char *path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                             const th_token *tokens, th_kld_writer **out);
th_status th_kld_writer_rows(th_kld_writer *w, const uint16_t *rows, int64_t n_rows);
/* Close; with ok false (or on a write error) the partial file is removed. */
th_status th_kld_writer_close(th_kld_writer *w, bool ok);

/* ---- router.c: router agreement (th_eval_params.router_base_out / router_base) */
typedef struct th_router_file th_router_file;
/* Parse a router file held in memory (not copied, not freed by close). */
th_status th_router_file_parse(const uint8_t *data, size_t size, const char *name, th_router_file **out);
th_status th_router_file_open(const char *path, th_router_file **out);
th_status th_router_file_check(const th_router_file *f);   /* every record's expert ids */
void th_router_file_close(th_router_file *f);

typedef struct th_router_run th_router_run;
/* Installs the routing observer on ctx; out_path and/or base_path may be NULL. */
th_status th_router_run_new(th_model *m, th_context *ctx, const char *out_path, const char *base_path,
                            int32_t n_ctx, int32_t n_chunks, int32_t n_batch, th_router_run **out);
/* Around each th_decode: the pass's rows (want: scored rows, chunk and position of each). */
th_status th_router_pass_begin(th_router_run *R, int32_t n, const int8_t *want, const int32_t *chunk,
                               const int32_t *pos);
th_status th_router_pass_end(th_router_run *R);
/* Close the written file; move the comparison into r. */
th_status th_router_run_finish(th_router_run *R, th_eval_result *r);
/* Remove the observer and free; ok false removes a partly written file. */
void th_router_run_free(th_router_run *R, bool ok);
void th_router_layers_free(th_router_layer *layers, int32_t n);

#endif
