/* serve_sched.c — `theseus serve` as a client of the runtime (theseus.h's
 * "runtime" section): the runtime's own thread does all the scheduling
 * (continuous batching, chunked prefill, n > 1 choices sharing the prompt's
 * KV, sampling, stop strings, UTF-8 holdback, logprobs); this file maps a
 * validated HTTP job onto a runtime request and the request's events back onto
 * the job (text, logprob entries, finish reasons, errors as HTTP statuses),
 * which the HTTP side waits on, and mirrors the runtime's stats into the
 * metrics. Statuses: TH_ERR_BUSY -> 503 (queue full, shutting down),
 * TH_ERR_ARG / TH_ERR_CAPACITY at submit -> 400, a cancelled request -> 499
 * (the client is gone), TH_ERR_CAPACITY while running -> 503, others -> 500. */
#include "serve.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(SRV_MAX_TOP_LOGPROBS == TH_MAX_TOP_LOGPROBS, "logprob entries are copied as they are");

struct srv_sched {
    th_runtime *rt;
    atomic_bool stopping;
    int32_t slot_ctx, n_slots;
};

/* One submitted job, as the event callback sees it. */
typedef struct sub {
    srv_sched *S;
    srv_job *j;
    int32_t n_sampled[SRV_MAX_N];
    double t_last[SRV_MAX_N];
} sub;

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- jobs */

srv_job *job_new(void) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    atomic_init(&j->cancelled, false);
    return j;
}

void job_release(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    req_params_clear(&j->p);
    if (j->choices)
        for (int c = 0; c < j->p.n; c++) { free(j->choices[c].text); free(j->choices[c].lp); }
    free(j->choices);
    free(j->prompt);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void job_fail(srv_job *j, int http, const char *fmt, ...) {
    pthread_mutex_lock(&j->mu);
    if (j->state != JOB_DONE) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->err_msg, sizeof j->err_msg, fmt, ap);
        va_end(ap);
        j->err_http = http;
        j->state = JOB_DONE;
        j->version++;
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
}

static void job_bump(srv_job *j) { j->version++; pthread_cond_broadcast(&j->cv); }

/* ---------------------------------------------------------------- events -> job */

static bool choice_append(srv_choice *c, const char *s, size_t n) {
    if (!buf_append(&c->text, &c->n, &c->cap, s, n)) return false;
    c->ready = c->n;            /* the runtime releases only text that is final */
    return true;
}

static bool choice_add_lp(srv_choice *c, const th_token_info *e, int32_t n) {
    if (c->n_lp + (size_t)n > c->cap_lp) {
        size_t nc = (c->n_lp + (size_t)n) * 2;
        srv_logprob *nl = realloc(c->lp, nc * sizeof *nl);
        if (!nl) return false;
        c->lp = nl;
        c->cap_lp = nc;
    }
    for (int32_t i = 0; i < n; i++) {
        srv_logprob *L = &c->lp[c->n_lp++];
        L->token = e[i].token;
        L->logprob = e[i].logprob;
        L->n_top = e[i].n_top;
        memcpy(L->top, e[i].top, sizeof L->top);
        L->text_offset = e[i].text_offset;
    }
    return true;
}

static void mirror_stats(srv_sched *S) {
    th_runtime_stats st;
    th_runtime_stats_get(S->rt, &st);
    atomic_store(&g_metrics.queue_depth, st.queued);
    atomic_store(&g_metrics.active_seqs, st.active_slots);
    atomic_store(&g_metrics.kv_used, st.kv_blocks_used);
    atomic_store(&g_metrics.spec_drafted, st.spec_drafted);
    atomic_store(&g_metrics.spec_accepted, st.spec_accepted);
    atomic_store(&g_metrics.spec_rounds, st.spec_rounds);
}

/* A sample was taken for choice c: time to first token (choice 0) or between tokens. */
static void observe_sample(sub *u, int32_t c) {
    double now = srv_now();
    if (u->n_sampled[c]++ == 0) { if (c == 0) metrics_observe_ttft(now - u->j->t_arrive); }
    else metrics_observe_token(now - u->t_last[c]);
    u->t_last[c] = now;
}

/* Text and logprob entries the event released, into choice c (caller holds mu). */
static bool take_output(srv_choice *ch, const th_event *ev) {
    return choice_append(ch, ev->text, ev->n_text) && (!ev->n_tokens || choice_add_lp(ch, ev->tokens, ev->n_tokens));
}

static int end_http(const sub *u, th_status s) {
    if (atomic_load(&u->S->stopping)) return 503;
    return s == TH_ERR_CANCELLED ? 499 : s == TH_ERR_CAPACITY || s == TH_ERR_BUSY ? 503 : 500;
}

static void on_end(sub *u, const th_event *ev) {
    srv_job *j = u->j;
    mirror_stats(u->S);
    if (ev->status) {
        bool stopping = atomic_load(&u->S->stopping);
        if (ev->status != TH_ERR_CANCELLED && !stopping) atomic_fetch_add(&g_metrics.requests_failed, 1);
        job_fail(j, end_http(u, ev->status), "%s", stopping ? "the server is shutting down" : ev->message);
    }
    pthread_mutex_lock(&j->mu);
    if (j->state != JOB_DONE) { j->state = JOB_DONE; job_bump(j); }
    pthread_mutex_unlock(&j->mu);
    job_release(j);
    free(u);
}

static void on_event(const th_event *ev, void *user) {
    sub *u = user;
    srv_job *j = u->j;
    bool ok = true;
    switch (ev->kind) {
    case TH_EVENT_START:
        mirror_stats(u->S);
        pthread_mutex_lock(&j->mu);
        j->state = JOB_RUNNING;
        job_bump(j);
        pthread_mutex_unlock(&j->mu);
        return;
    case TH_EVENT_TOKEN:
        observe_sample(u, ev->choice);
        atomic_fetch_add(&g_metrics.gen_tokens, 1);
        mirror_stats(u->S);
        pthread_mutex_lock(&j->mu);
        ok = take_output(&j->choices[ev->choice], ev);
        j->choices[ev->choice].n_tokens++;
        job_bump(j);
        pthread_mutex_unlock(&j->mu);
        break;
    case TH_EVENT_FINISH:
        if (ev->finish == TH_FINISH_EOG) observe_sample(u, ev->choice);
        pthread_mutex_lock(&j->mu);
        ok = take_output(&j->choices[ev->choice], ev);
        j->choices[ev->choice].finish = ev->finish == TH_FINISH_EOG || ev->finish == TH_FINISH_STOP ? FINISH_STOP : FINISH_LENGTH;
        job_bump(j);
        pthread_mutex_unlock(&j->mu);
        break;
    case TH_EVENT_END:
        on_end(u, ev);
        return;
    }
    if (!ok) {   /* out of memory for the job's copy: fail the HTTP side, stop the request */
        atomic_fetch_add(&g_metrics.requests_failed, 1);
        job_fail(j, 500, "out of memory");
        th_request_cancel(ev->request);
    }
}

static bool job_cancelled(void *user) { return atomic_load(&((sub *)user)->j->cancelled); }

/* ---------------------------------------------------------------- warm-up */

/* GPU only: before the server reports ready, a few throw-away requests run
 * the paths a first client would otherwise pay for once (cuBLAS's and the
 * kernels' first loads on the prompt path, the decode graphs for one and for
 * every slot): `parallel` prompts of 40 tokens together, then one alone; 2 tokens
 * each. Without it the first request's first token waited for all of that. */
static void warm_up(th_runtime *rt, const th_model *m, int32_t parallel, int32_t slot_ctx) {
    enum { NP = 40 };
    if (slot_ctx < NP + 4) return;
    th_token prompt[NP];
    int32_t nv = th_model_n_vocab(m);
    double t0 = srv_now();
    for (int round = 0; round < 2; round++) {
        int32_t n = round == 0 ? parallel : 1;
        th_request **rs = calloc((size_t)n, sizeof *rs);
        if (!rs) return;
        for (int32_t k = 0; k < n; k++) {
            for (int i = 0; i < NP; i++) prompt[i] = (th_token)((100 + 7 * i + 131 * k) % nv);
            th_request_params rp = th_request_default_params();
            rp.sampling.temperature = 0.0f;
            rp.max_tokens = 2;
            if (th_runtime_submit(rt, &rp, prompt, NP, &rs[k])) rs[k] = NULL;
        }
        for (int32_t k = 0; k < n; k++)
            if (rs[k]) { th_request_wait(rs[k]); th_request_release(rs[k]); }
        free(rs);
    }
    fprintf(stderr, "theseus serve: GPU warm-up %.0f ms\n", 1000.0 * (srv_now() - t0));
}

/* ---------------------------------------------------------------- public */

th_status sched_start(th_model *m, const srv_config *cfg, srv_sched **out) {
    *out = NULL;
    const int32_t blk = 16;
    int32_t slot_ctx = cfg->ctx / cfg->parallel / blk * blk;
    if (slot_ctx < 2 * blk)
        return th_set_error(TH_ERR_ARG, "--ctx %d over --parallel %d leaves %d tokens a sequence; need at least %d",
                            cfg->ctx, cfg->parallel, slot_ctx, 2 * blk);
    srv_sched *S = calloc(1, sizeof *S);
    if (!S) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_runtime_params rp = th_runtime_default_params();
    rp.context.kv_block = blk;
    rp.context.n_threads = cfg->threads;
    rp.context.gpu = cfg->gpu;
    rp.context.gpu_layers = cli_gpu_layers();
    rp.n_slots = cfg->parallel;
    rp.slot_ctx = slot_ctx;
    rp.n_batch = cfg->batch > cfg->parallel + 1 ? cfg->batch : cfg->parallel + 2;
    rp.max_queue = cfg->queue;
    /* On the CPU a request's greedy text never depends on what else runs with it (a
     * padded one-row step costs little). On the GPU that needs GEMV-only kernels
     * (th_context_params.batch_invariant), so it is on only with speculative decoding,
     * which turns it on itself; plain GPU batches take the MMA / cuBLAS kernels and a
     * request's greedy text can differ by float rounding with the load, as in llama.cpp. */
    rp.batch_invariant = !cfg->gpu;
    if (cfg->spec) rp.spec = cfg->spec->p;
    serve_precision_hook(&rp);   /* live precision swaps between two steps */
    th_status s = th_runtime_new(m, &rp, &S->rt);
    if (!s) s = th_runtime_start(S->rt);
    if (s) { th_runtime_free(S->rt); free(S); return s; }
    if (cfg->gpu) warm_up(S->rt, m, cfg->parallel, slot_ctx);
    S->slot_ctx = slot_ctx;
    S->n_slots = cfg->parallel;
    atomic_init(&S->stopping, false);
    th_runtime_stats st;
    th_runtime_stats_get(S->rt, &st);
    atomic_store(&g_metrics.kv_total, st.kv_blocks_total);
    *out = S;
    return TH_OK;
}

int sched_submit(srv_sched *S, srv_job *j, char *msg, size_t cap) {
    if (atomic_load(&S->stopping)) { snprintf(msg, cap, "the server is shutting down"); return 503; }
    if (j->p.n > S->n_slots) {
        snprintf(msg, cap, "n is %d but the server runs %d sequences at once (--parallel)", j->p.n, S->n_slots);
        return 400;
    }
    sub *u = calloc(1, sizeof *u);
    if (!u) { snprintf(msg, cap, "out of memory"); return 500; }
    u->S = S;
    u->j = j;
    th_request_params rp = th_request_default_params();
    rp.sampling = j->p.sp;
    rp.bias_token = j->p.bias_tok;
    rp.bias_value = j->p.bias_val;
    rp.n_bias = j->p.n_bias;
    rp.n_choices = j->p.n;
    rp.max_tokens = j->p.max_tokens;
    rp.stop = (const char *const *)j->p.stop;
    rp.n_stop = j->p.n_stop;
    rp.logprobs = j->p.logprobs;
    rp.top_logprobs = j->p.top_logprobs;
    rp.grammar = j->p.grammar;  /* the runtime copies it into one constraint per choice */
    rp.draft_max = j->p.draft_max;
    rp.on_event = on_event;
    rp.cancelled = job_cancelled;
    rp.user = u;
    pthread_mutex_lock(&j->mu);
    j->refs++;                  /* the request's, dropped at its END event */
    j->state = JOB_QUEUED;
    pthread_mutex_unlock(&j->mu);
    th_request *r = NULL;
    th_status s = th_runtime_submit(S->rt, &rp, j->prompt, j->n_prompt, &r);
    if (s) {
        int http = s == TH_ERR_BUSY ? 503 : s == TH_ERR_ARG || s == TH_ERR_CAPACITY ? 400 : 500;
        if (atomic_load(&S->stopping)) snprintf(msg, cap, "the server is shutting down");
        else snprintf(msg, cap, "%s%s", s == TH_ERR_BUSY ? "the server is " : "", th_last_error());
        job_release(j);
        free(u);
        return http;
    }
    th_request_release(r);      /* the runtime keeps the request until its END event */
    mirror_stats(S);
    return 0;
}

void sched_stop(srv_sched *S) {
    if (!S) return;
    atomic_store(&S->stopping, true);
    th_runtime_stop(S->rt);     /* outstanding jobs end: their clients get 503 (and [DONE]) */
}

void sched_free(srv_sched *S) {
    if (!S) return;
    th_runtime_free(S->rt);
    free(S);
}

int32_t sched_slot_ctx(const srv_sched *S) { return S->slot_ctx; }
int32_t sched_parallel(const srv_sched *S) { return S->n_slots; }
