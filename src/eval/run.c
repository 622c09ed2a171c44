/* run.c — th_eval_run: llama-perplexity's chunked evaluation over the public
 * decode API. Chunks of n_ctx tokens, each from an empty KV cache with BOS in place
 * of its first token (when the model adds BOS); n_batch / n_ctx chunks share a pass
 * as separate sequences, or a chunk takes several passes when n_batch < n_ctx; the
 * logits of positions n_ctx/2 .. n_ctx-2 are scored against the next token. The
 * per-position work over the vocabulary (rows.c) runs on a thread pool in blocks;
 * its results are added in position order. */
#include "eval/eval.h"
#include "core/core.h"
#include "core/threadpool.h"
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { BLOCK = 64 };          /* positions scored together (bounds the encoded rows buffer) */
enum { MODE_PPL, MODE_WRITE, MODE_KLD };

typedef struct job { const float *logits; th_token next; int32_t chunk, j; } job;

typedef struct block_work {
    const job *jobs;
    int32_t n, n_vocab, mode;
    int64_t row_len;
    const th_kld_base *base;
    double *nll;              /* MODE_PPL, MODE_WRITE */
    uint16_t *rows;           /* MODE_WRITE: n * row_len */
    th_kld_pos *pos;          /* MODE_KLD */
    float *scratch;           /* MODE_KLD: n_threads * n_vocab */
    atomic_int bad;           /* MODE_KLD: first job whose base row is invalid, or INT32_MAX */
} block_work;

static void block_task(void *arg, int ith, int nth) {
    block_work *w = arg;
    for (int32_t i = ith; i < w->n; i += nth) {
        const job *jb = &w->jobs[i];
        if (w->mode == MODE_PPL) {
            w->nll[i] = th_row_nll(jb->logits, w->n_vocab, jb->next);
        } else if (w->mode == MODE_WRITE) {
            w->nll[i] = th_row_encode(jb->logits, w->n_vocab, jb->next, w->rows + (size_t)i * (size_t)w->row_len);
        } else {
            float *lp = w->scratch + (size_t)ith * (size_t)w->n_vocab;
            if (th_kld_base_logprobs(w->base, jb->chunk, jb->j, lp) != TH_OK) {
                int cur = atomic_load(&w->bad);
                while (i < cur && !atomic_compare_exchange_weak(&w->bad, &cur, i)) {}
                continue;
            }
            th_row_kld(jb->logits, lp, w->n_vocab, jb->next, &w->pos[i]);
        }
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The state of one run. */
typedef struct run {
    th_model *model;
    th_context *ctx;
    const th_eval_params *ep;
    th_eval_result *r;
    const th_token *tokens;
    int32_t C, first, n_scored, n_vocab, mode;
    int64_t row_len;
    th_pool *pool;
    th_kld_writer *writer;
    th_kld_acc *acc;
    th_router_run *router;    /* router agreement, or NULL */
    double nll, nll2, *chunk_nll;
    int64_t count;
    int32_t chunks_done;
    int32_t w_nb;             /* tokens a pass */
    double t0;
    job jobs[BLOCK];
    int32_t n_jobs;
    block_work w;
} run;

static th_status chunk_done(run *R, int32_t chunk) {
    th_eval_result *r = R->r;
    R->chunks_done++;
    double running;
    th_kld_stats ks;
    if (R->mode == MODE_KLD) {
        ks = th_kld_acc_stats(R->acc, false);
        running = ks.ppl;
    } else {
        running = exp(R->nll / (double)R->count);
    }
    r->running_ppl[chunk] = running;
    r->chunk_ppl[chunk] = exp(R->chunk_nll[chunk] / R->n_scored);
    if (R->ep->progress) {
        double el = now_s() - R->t0;
        th_eval_progress p = { .chunk = R->chunks_done, .n_chunks = r->n_chunks, .seconds = el,
                               .eta_seconds = el / R->chunks_done * (r->n_chunks - R->chunks_done),
                               .ppl = running, .kld = R->mode == MODE_KLD ? &ks : NULL };
        R->ep->progress(&p, R->ep->ud);
    }
    return TH_OK;
}

/* Score the queued positions: in parallel over the pool, then in order. */
static th_status flush_jobs(run *R) {
    block_work *w = &R->w;
    if (!R->n_jobs) return TH_OK;
    w->jobs = R->jobs;
    w->n = R->n_jobs;
    atomic_store(&w->bad, INT32_MAX);
    th_pool_run(R->pool, block_task, w);
    th_status s;
    int bad = atomic_load(&w->bad);
    if (bad != INT32_MAX)   /* redo it here for the message (the error is thread-local) */
        return th_kld_base_logprobs(w->base, R->jobs[bad].chunk, R->jobs[bad].j, w->scratch);
    if (R->mode == MODE_WRITE && (s = th_kld_writer_rows(R->writer, w->rows, R->n_jobs))) return s;
    for (int32_t i = 0; i < R->n_jobs; i++) {
        const job *jb = &R->jobs[i];
        double v;
        if (R->mode == MODE_KLD) {
            if ((s = th_kld_acc_push(R->acc, &w->pos[i]))) return s;
            v = w->pos[i].nll;
        } else {
            v = w->nll[i];
        }
        R->nll += v;
        R->nll2 += v * v;
        R->chunk_nll[jb->chunk] += v;
        R->count++;
        if (jb->j == R->n_scored - 1 && (s = chunk_done(R, jb->chunk))) return s;
    }
    R->n_jobs = 0;
    return TH_OK;
}

static th_status queue_job(run *R, int32_t batch_row, int32_t chunk, int32_t pos) {
    const float *lg = th_get_logits(R->ctx, batch_row);
    if (!lg) return TH_ERR_ARG;   /* message set by th_get_logits */
    R->jobs[R->n_jobs++] = (job){ .logits = lg, .next = R->tokens[(size_t)chunk * R->C + (size_t)pos + 1],
                                  .chunk = chunk, .j = pos - R->first };
    return R->n_jobs == BLOCK ? flush_jobs(R) : TH_OK;
}

/* One group of n_seq chunks (from chunk c0): clear their sequences, decode every
 * pass, score each pass's positions before the next pass overwrites the logits. */
static th_status run_group(run *R, int32_t c0, int32_t ns, int32_t nb, int32_t n_passes,
                           th_token *tok, int32_t *pos, int32_t *seq, int32_t *chk, int8_t *want) {
    th_status s;
    const bool add_bos = th_model_add_bos(R->model);
    const th_token bos = th_token_bos(R->model);
    for (int32_t k = 0; k < ns; k++)
        if ((s = th_kv_seq_clear(R->ctx, k))) return s;
    for (int32_t j = 0; j < n_passes; j++) {
        const int32_t bstart = j * nb, bsize = TH_MIN(R->C - bstart, nb);
        int32_t n = 0;
        for (int32_t k = 0; k < ns; k++)
            for (int32_t i = 0; i < bsize; i++, n++) {
                const int32_t p = bstart + i;
                th_token t = R->tokens[(size_t)(c0 + k) * R->C + (size_t)p];
                tok[n] = p == 0 && add_bos ? bos : t;
                pos[n] = p;
                seq[n] = k;
                chk[n] = c0 + k;
                want[n] = p >= R->first && p <= R->C - 2;
            }
        if (R->ep->on_pass) {
            th_eval_pass ps = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .chunk = chk, .logits = want };
            if ((s = R->ep->on_pass(&ps, R->ep->ud))) return s;
        }
        th_batch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .logits = want };
        if (R->router && (s = th_router_pass_begin(R->router, n, want, chk, pos))) return s;
        if ((s = th_decode(R->ctx, &b))) return s;
        if (R->router && (s = th_router_pass_end(R->router))) return s;
        for (int32_t i = 0; i < n; i++)
            if (want[i] && (s = queue_job(R, i, chk[i], pos[i]))) return s;
        if ((s = flush_jobs(R))) return s;
    }
    return TH_OK;
}

th_eval_params th_eval_default_params(void) {
    return (th_eval_params){ .n_ctx = 512, .n_batch = 2048, .n_chunks = -1, .n_threads = 0 };
}

/* Chunk size, chunks a pass, tokens a pass and passes a chunk of a run. */
static void plan(const th_eval_params *ep, int32_t *C, int32_t *n_seq, int32_t *nb, int32_t *n_passes) {
    int32_t c = ep->kld_base ? th_kld_base_n_ctx(ep->kld_base) : (ep->n_ctx > 0 ? ep->n_ctx : 512);
    int32_t b = ep->n_batch > 0 ? ep->n_batch : 2048;
    if (c < 1) c = 1;
    *C = c;
    *n_seq = TH_MAX(1, b / c);
    *nb = TH_MIN(b, *n_seq * c);
    *n_passes = (c + *nb - 1) / *nb;
}

void th_eval_context_params(const th_eval_params *ep, th_context_params *cp) {
    int32_t C, n_seq, nb, n_passes;
    plan(ep, &C, &n_seq, &nb, &n_passes);
    cp->n_ctx = (uint32_t)C * (uint32_t)n_seq;
    cp->n_batch = (uint32_t)nb;
    cp->n_seq_max = (uint32_t)n_seq;
}

/* llama-perplexity refuses models whose tokenizer appends EOS. */
static th_status check_no_eos(th_model *m) {
    th_token a[8], b[8];
    size_t na = 0, nb = 0;
    if (th_tokenize(m, "a", 1, true, false, a, 8, &na) || th_tokenize(m, "a", 1, false, false, b, 8, &nb)) return TH_OK;
    if (na > nb && na > 0 && a[na - 1] == th_token_eos(m) && (nb == 0 || b[nb - 1] != a[na - 1]))
        return th_set_error(TH_ERR_UNSUPPORTED, "model %s: its tokenizer appends EOS to the text, which "
                            "llama-perplexity's method does not allow", th_model_desc(m));
    return TH_OK;
}

static th_status check_inputs(run *R, size_t n_tokens, int32_t n_seq) {
    const th_eval_params *ep = R->ep;
    th_eval_result *r = R->r;
    if (ep->kld_base && ep->kld_base_out)
        return th_set_error(TH_ERR_ARG, "th_eval_run: a base file is either written or compared with, not both");
    if (R->C < 3 || R->C > (1 << 24))
        return th_set_error(TH_ERR_ARG, "th_eval_run: a chunk of %d tokens is outside [3, 16777216]", R->C);
    if (ep->kld_base) {
        const th_kld_base *b = ep->kld_base;
        if (ep->n_ctx > 0 && ep->n_ctx != th_kld_base_n_ctx(b))
            return th_set_error(TH_ERR_ARG, "%s: the base file was made with chunks of %d tokens, not %d (leave -c out "
                                "or give -c %d)", th_kld_base_name(b), th_kld_base_n_ctx(b), ep->n_ctx, th_kld_base_n_ctx(b));
        if (th_kld_base_n_vocab(b) != R->n_vocab)
            return th_set_error(TH_ERR_FORMAT, "%s: the base file is for a vocabulary of %d tokens, the model (%s) has %d",
                                th_kld_base_name(b), th_kld_base_n_vocab(b), th_model_desc(R->model), R->n_vocab);
        r->n_tokens = (int64_t)th_kld_base_n_chunks(b) * R->C;
        r->n_chunks = th_kld_base_n_chunks(b);
    } else {
        if (!R->tokens) return th_set_error(TH_ERR_ARG, "th_eval_run: no tokens");
        if (n_tokens < 2 * (size_t)R->C)
            return th_set_error(TH_ERR_ARG, "the text tokenizes to only %zu tokens; perplexity with a context of %d "
                                "needs at least %d (two chunks)", n_tokens, R->C, 2 * R->C);
        for (size_t i = 0; i < n_tokens; i++)
            if (R->tokens[i] < 0 || R->tokens[i] >= R->n_vocab)
                return th_set_error(TH_ERR_ARG, "th_eval_run: token %d at index %zu is outside the vocabulary [0, %d)",
                                    R->tokens[i], i, R->n_vocab);
        r->n_tokens = (int64_t)n_tokens;
        r->n_chunks = (int32_t)TH_MIN(n_tokens / (size_t)R->C, (size_t)INT32_MAX);
    }
    if (ep->n_chunks > 0 && ep->n_chunks < r->n_chunks) r->n_chunks = ep->n_chunks;
    if (th_model_add_bos(R->model) && th_token_bos(R->model) < 0)
        return th_set_error(TH_ERR_FORMAT, "model %s adds BOS but has no BOS token", th_model_desc(R->model));
    if (th_context_n_ctx(R->ctx) < (uint32_t)(R->C * n_seq))
        return th_set_error(TH_ERR_ARG, "th_eval_run: the context holds %u tokens, %d chunks of %d a pass need %d "
                            "(size it with th_eval_context_params)", th_context_n_ctx(R->ctx), n_seq, R->C, R->C * n_seq);
    return check_no_eos(R->model);
}

static th_status setup(run *R) {
    const th_eval_params *ep = R->ep;
    th_eval_result *r = R->r;
    int nt = ep->n_threads > 0 ? ep->n_threads : th_n_cores();
    r->running_ppl = calloc((size_t)r->n_chunks, sizeof *r->running_ppl);
    r->chunk_ppl = calloc((size_t)r->n_chunks, sizeof *r->chunk_ppl);
    R->chunk_nll = calloc((size_t)r->n_chunks, sizeof *R->chunk_nll);
    R->w.nll = malloc(BLOCK * sizeof *R->w.nll);
    if (!r->running_ppl || !r->chunk_ppl || !R->chunk_nll || !R->w.nll)
        return th_set_error(TH_ERR_NOMEM, "th_eval_run: out of memory");
    R->w.n_vocab = R->n_vocab;
    R->w.mode = R->mode;
    R->w.row_len = R->row_len;
    R->w.base = ep->kld_base;
    if (R->mode == MODE_WRITE) {
        if (!(R->w.rows = malloc((size_t)BLOCK * (size_t)R->row_len * sizeof *R->w.rows)))
            return th_set_error(TH_ERR_NOMEM, "th_eval_run: out of memory for %d encoded rows", BLOCK);
        th_status s = th_kld_writer_open(ep->kld_base_out, R->C, R->n_vocab, r->n_chunks, R->tokens, &R->writer);
        if (s) return s;
    }
    if (R->mode == MODE_KLD) {
        R->w.pos = malloc(BLOCK * sizeof *R->w.pos);
        R->w.scratch = malloc((size_t)nt * (size_t)R->n_vocab * sizeof *R->w.scratch);
        if (!R->w.pos || !R->w.scratch) return th_set_error(TH_ERR_NOMEM, "th_eval_run: out of memory");
        th_status s = th_kld_acc_new(&R->acc);
        if (s) return s;
    }
    if (!(R->pool = th_pool_new(nt))) return TH_ERR_NOMEM;
    if (ep->router_base_out || ep->router_base) {
        if (ep->router_base && !ep->kld_base)
            return th_set_error(TH_ERR_ARG, "th_eval_run: comparing with a router file needs the base file of the same "
                                "reference run (kld_base), whose tokens it was made on");
        return th_router_run_new(R->model, R->ctx, ep->router_base_out, ep->router_base, R->C, r->n_chunks, R->w_nb,
                                 &R->router);
    }
    return TH_OK;
}

static void finish(run *R) {
    th_eval_result *r = R->r;
    r->count = R->count;
    if (R->mode == MODE_KLD) {
        r->has_kld = true;
        r->kld = th_kld_acc_stats(R->acc, true);
        r->ppl = r->kld.ppl;
        r->ppl_unc = r->kld.ppl_unc;
        return;
    }
    double mean = R->nll / R->count, var = R->nll2 / R->count - mean * mean;
    r->ppl = exp(mean);
    r->ppl_unc = var > 0 ? sqrt(var / (R->count - 1)) * r->ppl : 0;
}

static th_status evaluate(run *R, int32_t n_seq, int32_t nb, int32_t n_passes) {
    size_t cap = (size_t)nb;
    th_token *tok = malloc(cap * sizeof *tok);
    int32_t *pos = malloc(cap * sizeof *pos), *seq = malloc(cap * sizeof *seq), *chk = malloc(cap * sizeof *chk);
    int8_t *want = malloc(cap);
    th_status s = TH_OK;
    if (!tok || !pos || !seq || !chk || !want) s = th_set_error(TH_ERR_NOMEM, "th_eval_run: out of memory");
    R->t0 = now_s();
    for (int32_t c0 = 0; !s && c0 < R->r->n_chunks; c0 += n_seq)
        s = run_group(R, c0, TH_MIN(n_seq, R->r->n_chunks - c0), nb, n_passes, tok, pos, seq, chk, want);
    if (!s) s = flush_jobs(R);
    R->r->seconds = now_s() - R->t0;
    free(tok); free(pos); free(seq); free(chk); free(want);
    return s;
}

th_status th_eval_run(th_model *model, th_context *ctx, const th_token *tokens, size_t n_tokens,
                      const th_eval_params *ep, th_eval_result *r) {
    if (!r) return th_set_error(TH_ERR_ARG, "th_eval_run: no result");
    memset(r, 0, sizeof *r);
    if (!model || !ctx || !ep) return th_set_error(TH_ERR_ARG, "th_eval_run: missing model, context or parameters");
    run R = { .model = model, .ctx = ctx, .ep = ep, .r = r,
              .tokens = ep->kld_base ? th_kld_base_tokens(ep->kld_base) : tokens,
              .n_vocab = th_model_n_vocab(model),
              .mode = ep->kld_base ? MODE_KLD : ep->kld_base_out ? MODE_WRITE : MODE_PPL };
    int32_t n_seq, nb, n_passes;
    plan(ep, &R.C, &n_seq, &nb, &n_passes);
    R.w_nb = nb;
    R.first = R.C / 2;
    R.n_scored = R.C - 1 - R.first;
    R.row_len = th_kld_row_len(R.n_vocab);
    r->n_ctx = R.C;
    r->n_batch = nb;
    r->n_seq = n_seq;
    r->n_vocab = R.n_vocab;
    r->n_params = th_model_n_params(model);
    r->model_bytes = th_model_size_bytes(model);
    snprintf(r->model_desc, sizeof r->model_desc, "%s", th_model_desc(model));
    th_status s = check_inputs(&R, n_tokens, n_seq);
    if (!s) s = setup(&R);
    if (!s) s = evaluate(&R, n_seq, nb, n_passes);
    if (!s) finish(&R);
    if (!s && R.router) s = th_router_run_finish(R.router, r);
    th_router_run_free(R.router, s == TH_OK);
    if (R.writer) {
        th_status sw = th_kld_writer_close(R.writer, s == TH_OK);
        if (!s) s = sw;
    }
    th_pool_free(R.pool);
    th_kld_acc_free(R.acc);
    free(R.chunk_nll);
    free(R.w.nll);
    free(R.w.rows);
    free(R.w.pos);
    free(R.w.scratch);
    if (s) th_eval_result_free(r);
    return s;
}

void th_eval_result_free(th_eval_result *r) {
    if (!r) return;
    free(r->running_ppl);
    free(r->chunk_ppl);
    r->running_ppl = r->chunk_ppl = NULL;
    th_router_layers_free(r->router, r->n_router_layers);
    r->router = NULL;
    r->n_router_layers = 0;
}
