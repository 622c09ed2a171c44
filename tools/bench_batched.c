/* bench_batched.c — `theseus bench --parallel N`: llama-batched-bench's method.
 * N independent sequences in one context: each gets a prompt of npp random
 * tokens (whole prompts packed into batches of up to n_batch tokens, logits for
 * each prompt's last token), then ntg steps that decode one token of every
 * sequence in one batch, each step taking every sequence's greedy token
 * (th_get_argmax) as a server would; the input tokens stay random. Rows:
 * S_PP = N·npp / prompt time, S_TG = N·ntg / generation time, S = all tokens /
 * all time — llama-batched-bench's columns. One untimed warm-up round with 4
 * steps, then reps rounds; medians shown. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t next(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

typedef struct round_buf { th_token *tok; int32_t *pos, *seq; int8_t *want; } round_buf;

/* One round: prompts, then steps (0: prompts only). Times in *tp, *tg. */
static th_status one_round(th_context *c, const bench_batched_opts *o, long steps, int32_t n_batch, int32_t n_vocab,
                           round_buf *b, uint64_t *rng, double *tp, double *tg) {
    th_status s;
    for (long i = 0; i < o->n_par; i++) th_kv_seq_clear(c, (int32_t)i);
    double t0 = now_s();
    for (long s0 = 0; s0 < o->n_par;) {
        int32_t n = 0;
        long i = s0;
        for (; i < o->n_par && (n == 0 || n + o->npp <= n_batch); i++)
            for (long p = 0; p < o->npp; p++, n++) {
                b->tok[n] = (th_token)(next(rng) % (uint64_t)n_vocab);
                b->pos[n] = (int32_t)p; b->seq[n] = (int32_t)i; b->want[n] = p == o->npp - 1;
            }
        th_batch bt = { .n_tokens = n, .token = b->tok, .pos = b->pos, .seq_id = b->seq, .logits = b->want };
        if ((s = th_decode(c, &bt))) return s;
        s0 = i;
    }
    double t1 = now_s();
    for (long st = 0; st < steps; st++) {
        for (long i = 0; i < o->n_par; i++) {
            b->tok[i] = (th_token)(next(rng) % (uint64_t)n_vocab);
            b->pos[i] = (int32_t)(o->npp + st); b->seq[i] = (int32_t)i; b->want[i] = 1;
        }
        th_batch bt = { .n_tokens = (int32_t)o->n_par, .token = b->tok, .pos = b->pos, .seq_id = b->seq, .logits = b->want };
        if ((s = th_decode(c, &bt))) return s;
        for (long i = 0; i < o->n_par; i++)
            if (th_get_argmax(c, (int32_t)i) < 0) return th_set_error(TH_ERR_INTERNAL, "bench --parallel: %s", th_last_error());
    }
    *tp = t1 - t0;
    *tg = now_s() - t1;
    return TH_OK;
}

th_status bench_batched(th_model *m, const bench_batched_opts *o) {
    th_context_params cp = th_context_default_params();
    const int32_t n_batch = (int32_t)(o->npp > 512 ? o->npp : 512);
    if (o->n_par < 1 || o->n_par > n_batch) return th_set_error(TH_ERR_ARG, "bench --parallel %ld: 1..%d", o->n_par, n_batch);
    cp.n_ctx = (uint32_t)(o->n_par * (o->npp + o->ntg) + 64);
    cp.n_batch = (uint32_t)n_batch;
    cp.n_seq_max = (uint32_t)o->n_par;
    cp.n_threads = (int32_t)o->threads;
    cp.gpu = o->gpu;
    cp.gpu_layers = cli_gpu_layers();
    cp.logits_argmax_only = o->argmax_only;
    th_context *c = NULL;
    th_status s = th_context_new(m, &cp, &c);
    if (s) return s;
    round_buf b = { malloc((size_t)n_batch * sizeof *b.tok), malloc((size_t)n_batch * 4), malloc((size_t)n_batch * 4),
                    malloc((size_t)n_batch) };
    double *v = malloc((size_t)o->reps * 3 * sizeof *v);
    if (!b.tok || !b.pos || !b.seq || !b.want || !v) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); goto done; }
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    const int32_t nv = th_model_n_vocab(m);
    double tp, tg;
    if ((s = one_round(c, o, o->ntg < 4 ? o->ntg : 4, n_batch, nv, &b, &rng, &tp, &tg))) goto done;  /* warm-up */
    for (long r = 0; r < o->reps; r++) {
        if ((s = one_round(c, o, o->ntg, n_batch, nv, &b, &rng, &tp, &tg))) goto done;
        v[r] = o->n_par * o->npp / tp;
        v[o->reps + r] = tg > 0 ? o->n_par * o->ntg / tg : 0;
        v[2 * o->reps + r] = o->n_par * (o->npp + o->ntg) / (tp + tg);
    }
    for (int k = 0; k < 3; k++) qsort(v + k * o->reps, (size_t)o->reps, sizeof *v, cmp_d);
    char test[64];
    snprintf(test, sizeof test, "npl %ld: pp%ld+tg%ld", o->n_par, o->npp, o->ntg);
    printf("| %-*s | %9s | %8s | %-10s | %-22s | S_PP %9.1f t/s | S_TG %9.1f t/s | S %9.1f t/s |\n", o->w_model,
           th_model_desc(m), o->size, o->params, o->backend, test, v[o->reps / 2], v[o->reps + o->reps / 2],
           v[2 * o->reps + o->reps / 2]);
    fflush(stdout);
done:
    free(b.tok); free(b.pos); free(b.seq); free(b.want); free(v);
    th_context_free(c);
    return s;
}
