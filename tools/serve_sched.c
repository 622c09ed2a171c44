/* serve_sched.c — the scheduler of `theseus serve`: one thread owns the
 * th_context and does every th_decode. Each step it admits queued jobs into
 * free sequence slots, builds one ragged batch (one token per generating
 * sequence, then prompt chunks up to the batch budget so a long prompt never
 * stalls running streams), decodes, samples, and retires finished or cancelled
 * sequences (their KV blocks are freed at once). A job with n > 1 choices
 * prefills its prompt once in a leader slot, then shares those KV blocks with
 * the other choices' slots (copy-on-write) before the first sample. */
#include "serve.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SLOT_FREE, SLOT_PREFILL, SLOT_FORK, SLOT_GEN };

typedef struct slot {
    srv_job *job;
    int choice, phase;
    int32_t n_fed;               /* prompt tokens decoded (leader) */
    int32_t batch_idx;           /* this step: batch index of its logits, or -1 */
    th_sampler *smp;
    th_token next;               /* sampled, to be decoded next step */
    double t_last;
    th_utf8_stream u8;           /* holds a character split across tokens */
} slot;

struct srv_sched {
    th_model *m;
    th_context *ctx;
    const srv_config *cfg;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job **queue;             /* ring */
    int q_head, q_n, q_cap;
    bool stop, started;
    slot *slots;
    int n_slots;
    int32_t slot_ctx, n_batch, n_vocab;
    /* A batch of one token is padded with a throw-away token of this extra
     * sequence: the CPU matmul takes a different kernel (vec_dot, another
     * summation order) for one activation row than for several, so without the
     * pad a request's greedy text would depend on whether others ran with it. */
    int32_t pad_seq;
    th_token *b_tok;
    int32_t *b_seq;
    int8_t *b_logits;
};

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
    for (int i = 0; i < j->p.n_stop; i++) free(j->p.stop[i]);
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

/* ---------------------------------------------------------------- text of a choice */

static bool choice_append(srv_choice *c, const char *s, size_t n) {
    if (c->n + n + 1 > c->cap) {
        size_t nc = (c->n + n + 1) * 2;
        char *nb = realloc(c->text, nc);
        if (!nb) return false;
        c->text = nb;
        c->cap = nc;
    }
    memcpy(c->text + c->n, s, n);
    c->n += n;
    c->text[c->n] = 0;
    return true;
}

/* After appending: cut at the first stop string (returns true), else move
 * `ready` up to what can be sent: nothing that may begin a stop string. (The
 * text is whole UTF-8 characters: pieces pass through a th_utf8_stream.) */
static bool choice_check_stop(srv_choice *c, const srv_params *p, size_t appended) {
    size_t from = c->n - appended;
    size_t cut = (size_t)-1;
    for (int i = 0; i < p->n_stop; i++) {
        size_t sl = strlen(p->stop[i]);
        size_t start = from >= sl ? from - sl + 1 : 0;
        char *hit = memmem(c->text + start, c->n - start, p->stop[i], sl);
        if (hit && (size_t)(hit - c->text) < cut) cut = (size_t)(hit - c->text);
    }
    if (cut != (size_t)-1) {
        c->n = cut;
        c->text[cut] = 0;
        c->ready = cut;
        return true;
    }
    size_t hold = 0;
    for (int i = 0; i < p->n_stop; i++) {
        size_t sl = strlen(p->stop[i]);
        for (size_t k = sl - 1; k > hold; k--)
            if (k <= c->n && !memcmp(c->text + c->n - k, p->stop[i], k)) { hold = k; break; }
    }
    if (c->n - hold > c->ready) c->ready = c->n - hold;
    return false;
}

/* ---------------------------------------------------------------- slots */

static void slot_free(srv_sched *S, int i) {
    slot *sl = &S->slots[i];
    th_kv_seq_clear(S->ctx, i);
    th_sampler_free(sl->smp);
    memset(sl, 0, sizeof *sl);
    sl->batch_idx = -1;
    atomic_fetch_sub(&g_metrics.active_seqs, 1);
    atomic_store(&g_metrics.kv_used, th_kv_blocks_used(S->ctx));
}

/* Frees every slot of job j and drops the scheduler's reference. */
static void job_retire(srv_sched *S, srv_job *j) {
    for (int i = 0; i < S->n_slots; i++)
        if (S->slots[i].job == j) slot_free(S, i);
    pthread_mutex_lock(&j->mu);
    if (j->state != JOB_DONE) { j->state = JOB_DONE; job_bump(j); }
    pthread_mutex_unlock(&j->mu);
    job_release(j);
}

static void job_fail_retire(srv_sched *S, srv_job *j, int http, const char *msg) {
    job_fail(j, http, "%s", msg);
    atomic_fetch_add(&g_metrics.requests_failed, 1);
    job_retire(S, j);
}

static int free_slots(const srv_sched *S) {
    int n = 0;
    for (int i = 0; i < S->n_slots; i++) n += S->slots[i].job == NULL;
    return n;
}

static th_status slot_setup(srv_sched *S, int i, srv_job *j, int choice) {
    slot *sl = &S->slots[i];
    th_sampler_params sp = j->p.sp;
    sp.seed += (uint64_t)choice;
    th_status s = th_sampler_new(&sp, S->n_vocab, &sl->smp);
    for (int k = 0; !s && k < j->p.n_bias; k++) s = th_sampler_set_logit_bias(sl->smp, j->p.bias_tok[k], j->p.bias_val[k]);
    sl->job = j;
    sl->choice = choice;
    sl->phase = choice == 0 ? SLOT_PREFILL : SLOT_FORK;
    sl->n_fed = 0;
    sl->batch_idx = -1;
    sl->u8 = (th_utf8_stream){ 0 };
    th_kv_seq_clear(S->ctx, i);
    atomic_fetch_add(&g_metrics.active_seqs, 1);
    return s;
}

/* Admits queued jobs in order while they fit (caller holds S->mu). */
static void admit(srv_sched *S) {
    while (S->q_n > 0) {
        srv_job *j = S->queue[S->q_head];
        if (!atomic_load(&j->cancelled) && free_slots(S) < j->p.n) break;
        S->q_head = (S->q_head + 1) % S->q_cap;
        S->q_n--;
        atomic_store(&g_metrics.queue_depth, S->q_n);
        if (atomic_load(&j->cancelled)) { job_fail(j, 499, "cancelled"); job_release(j); continue; }
        pthread_mutex_lock(&j->mu);
        j->state = JOB_RUNNING;
        job_bump(j);
        pthread_mutex_unlock(&j->mu);
        th_status s = TH_OK;
        for (int c = 0, i = 0; c < j->p.n && i < S->n_slots; i++)
            if (!S->slots[i].job && !s) s = slot_setup(S, i, j, c++);
        if (s) job_fail_retire(S, j, 500, th_last_error());
    }
}

/* ---------------------------------------------------------------- sampling */

/* flush: emit a character left unfinished (as U+FFFD); not after a stop string cut. */
static void slot_finish(srv_sched *S, int i, int reason, bool flush) {
    slot *sl = &S->slots[i];
    srv_job *j = sl->job;
    char tail[8];
    size_t nt = flush ? th_utf8_stream_flush(&sl->u8, tail) : 0;
    pthread_mutex_lock(&j->mu);
    srv_choice *c = &j->choices[sl->choice];
    if (nt) choice_append(c, tail, nt);
    c->finish = reason;
    c->ready = c->n;
    job_bump(j);
    pthread_mutex_unlock(&j->mu);
    slot_free(S, i);
    for (int k = 0; k < S->n_slots; k++)
        if (S->slots[k].job == j) return;
    job_retire(S, j);   /* last choice done: the scheduler lets go of the job */
}

/* Samples slot i's next token from logits and records it; may finish the slot. */
static void slot_sample(srv_sched *S, int i, const float *logits) {
    slot *sl = &S->slots[i];
    srv_job *j = sl->job;
    th_token t = th_sampler_sample(sl->smp, logits);
    double now = srv_now();
    srv_choice *c = &j->choices[sl->choice];
    if (c->n_tokens == 0) { if (sl->choice == 0) metrics_observe_ttft(now - j->t_arrive); }
    else metrics_observe_token(now - sl->t_last);
    sl->t_last = now;
    if (t < 0 || th_token_is_eog(S->m, t)) { slot_finish(S, i, FINISH_STOP, true); return; }
    th_sampler_accept(sl->smp, t);
    char piece[256], clean[3 * (sizeof piece + 4)];
    int32_t k = th_token_to_piece(S->m, t, piece, sizeof piece, false);
    size_t nc = th_utf8_stream_push(&sl->u8, piece, k > 0 ? (size_t)k : 0, clean);
    bool ok = true, stopped;
    pthread_mutex_lock(&j->mu);
    if (j->p.logprobs) {
        if (c->n_lp == c->cap_lp) {
            size_t nc = c->cap_lp ? c->cap_lp * 2 : 16;
            srv_logprob *nl = realloc(c->lp, nc * sizeof *nl);
            if (nl) { c->lp = nl; c->cap_lp = nc; } else ok = false;
        }
        if (ok) {
            srv_logprob *L = &c->lp[c->n_lp++];
            L->token = t;
            L->text_offset = (uint32_t)c->n;
            L->n_top = th_sampler_last_logprobs(sl->smp, L->top, j->p.top_logprobs, &L->logprob);
            if (L->n_top < 0) L->n_top = 0;
        }
    }
    ok = ok && choice_append(c, clean, nc);
    c->n_tokens++;
    stopped = ok && choice_check_stop(c, &j->p, nc);
    job_bump(j);
    pthread_mutex_unlock(&j->mu);
    atomic_fetch_add(&g_metrics.gen_tokens, 1);
    if (!ok) { job_fail_retire(S, j, 500, "out of memory"); return; }
    if (stopped) { slot_finish(S, i, FINISH_STOP, false); return; }
    if (c->n_tokens >= j->p.max_tokens || th_kv_seq_len(S->ctx, i) + 1 >= S->slot_ctx) {
        slot_finish(S, i, FINISH_LENGTH, true);
        return;
    }
    sl->next = t;
    sl->phase = SLOT_GEN;
}

/* A leader whose prompt is decoded: share its KV with the other choices' slots,
 * then every choice samples its first token from the same logits. */
static void fork_and_sample(srv_sched *S, int leader, const float *logits) {
    srv_job *j = S->slots[leader].job;
    int idx[SRV_MAX_N], n = 0;
    for (int i = 0; i < S->n_slots && n < SRV_MAX_N; i++)
        if (S->slots[i].job == j) {
            if (i != leader && th_kv_seq_copy(S->ctx, i, leader)) { job_fail_retire(S, j, 500, th_last_error()); return; }
            idx[n++] = i;
        }
    for (int k = 0; k < n; k++)
        if (S->slots[idx[k]].job == j) slot_sample(S, idx[k], logits);   /* a failure retires them all */
}

/* ---------------------------------------------------------------- one step */

static void reap_cancelled(srv_sched *S) {
    for (int i = 0; i < S->n_slots; i++) {
        srv_job *j = S->slots[i].job;
        if (j && atomic_load(&j->cancelled)) {
            job_fail(j, 499, "cancelled: the client went away");
            job_retire(S, j);
        }
    }
}

/* Fills the batch; returns its size. */
static int32_t build_batch(srv_sched *S) {
    int32_t n = 0;
    for (int i = 0; i < S->n_slots; i++) {
        slot *sl = &S->slots[i];
        sl->batch_idx = -1;
        if (sl->job && sl->phase == SLOT_GEN) {
            S->b_tok[n] = sl->next; S->b_seq[n] = i; S->b_logits[n] = 1;
            sl->batch_idx = n++;
        }
    }
    for (int i = 0; i < S->n_slots && n < S->n_batch; i++) {
        slot *sl = &S->slots[i];
        if (!sl->job || sl->phase != SLOT_PREFILL) continue;
        srv_job *j = sl->job;
        int32_t left = j->n_prompt - sl->n_fed, take = left < S->n_batch - n ? left : S->n_batch - n;
        for (int32_t k = 0; k < take; k++) {
            S->b_tok[n] = j->prompt[sl->n_fed + k]; S->b_seq[n] = i; S->b_logits[n] = 0;
            n++;
        }
        sl->n_fed += take;
        if (sl->n_fed == j->n_prompt) { S->b_logits[n - 1] = 1; sl->batch_idx = n - 1; }
    }
    if (n == 1) {   /* see pad_seq */
        S->b_tok[1] = S->b_tok[0]; S->b_seq[1] = S->pad_seq; S->b_logits[1] = 0;
        n = 2;
    }
    return n;
}

static void fail_batch(srv_sched *S, th_status s) {
    char msg[256];
    snprintf(msg, sizeof msg, "decode failed: %s", th_last_error());
    for (int i = 0; i < S->n_slots; i++) {
        srv_job *j = S->slots[i].job;
        if (j) job_fail_retire(S, j, s == TH_ERR_CAPACITY ? 503 : 500, msg);
    }
}

static void step(srv_sched *S) {
    reap_cancelled(S);
    int32_t n = build_batch(S);
    if (n == 0) return;
    th_batch b = { .n_tokens = n, .token = S->b_tok, .seq_id = S->b_seq, .logits = S->b_logits };
    th_status s = th_decode(S->ctx, &b);
    th_kv_seq_clear(S->ctx, S->pad_seq);
    if (s) { fail_batch(S, s); return; }
    for (int i = 0; i < S->n_slots; i++) {
        slot *sl = &S->slots[i];
        if (!sl->job || sl->batch_idx < 0) continue;
        const float *lg = th_get_logits(S->ctx, sl->batch_idx);
        if (!lg) { job_fail_retire(S, sl->job, 500, th_last_error()); continue; }
        if (sl->phase == SLOT_PREFILL) fork_and_sample(S, i, lg);
        else slot_sample(S, i, lg);
    }
    atomic_store(&g_metrics.kv_used, th_kv_blocks_used(S->ctx));
}

static void *sched_main(void *arg) {
    srv_sched *S = arg;
    for (;;) {
        pthread_mutex_lock(&S->mu);
        while (!S->stop && S->q_n == 0 && free_slots(S) == S->n_slots) pthread_cond_wait(&S->cv, &S->mu);
        if (S->stop) { pthread_mutex_unlock(&S->mu); break; }
        admit(S);
        pthread_mutex_unlock(&S->mu);
        step(S);
    }
    return NULL;
}

/* ---------------------------------------------------------------- public */

th_status sched_start(th_model *m, const srv_config *cfg, srv_sched **out) {
    srv_sched *S = calloc(1, sizeof *S);
    if (!S) return th_set_error(TH_ERR_NOMEM, "out of memory");
    *out = S;
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    S->m = m;
    S->cfg = cfg;
    S->n_slots = cfg->parallel;
    S->n_vocab = th_model_n_vocab(m);
    const int32_t blk = 16;
    S->slot_ctx = cfg->ctx / cfg->parallel / blk * blk;
    if (S->slot_ctx < 2 * blk)
        return th_set_error(TH_ERR_ARG, "--ctx %d over --parallel %d leaves %d tokens a sequence; need at least %d",
                            cfg->ctx, cfg->parallel, S->slot_ctx, 2 * blk);
    S->n_batch = cfg->batch > cfg->parallel + 1 ? cfg->batch : cfg->parallel + 2;
    th_context_params cp = th_context_default_params();
    /* each slot holds at most slot_ctx tokens; one spare block per slot covers a copied tail */
    cp.n_ctx = (uint32_t)(S->slot_ctx * cfg->parallel + blk * (cfg->parallel + 1));
    cp.n_batch = (uint32_t)S->n_batch;
    cp.n_seq_max = (uint32_t)cfg->parallel + 1;
    S->pad_seq = cfg->parallel;
    cp.kv_block = blk;
    cp.n_threads = cfg->threads;
    cp.gpu = cfg->gpu;
    th_status s = th_context_new(m, &cp, &S->ctx);
    if (s) return s;
    S->q_cap = cfg->queue;
    S->queue = calloc((size_t)S->q_cap, sizeof *S->queue);
    S->slots = calloc((size_t)S->n_slots, sizeof *S->slots);
    S->b_tok = malloc((size_t)S->n_batch * sizeof *S->b_tok);
    S->b_seq = malloc((size_t)S->n_batch * sizeof *S->b_seq);
    S->b_logits = malloc((size_t)S->n_batch);
    if (!S->queue || !S->slots || !S->b_tok || !S->b_seq || !S->b_logits) return th_set_error(TH_ERR_NOMEM, "out of memory");
    for (int i = 0; i < S->n_slots; i++) S->slots[i].batch_idx = -1;
    atomic_store(&g_metrics.kv_total, th_kv_blocks_total(S->ctx));
    if (pthread_create(&S->th, NULL, sched_main, S)) return th_set_error(TH_ERR_INTERNAL, "cannot start the scheduler thread");
    S->started = true;
    return TH_OK;
}

int sched_submit(srv_sched *S, srv_job *j, char *msg, size_t cap) {
    pthread_mutex_lock(&S->mu);
    int rc = 0;
    if (S->stop) { rc = 503; snprintf(msg, cap, "the server is shutting down"); }
    else if (j->p.n > S->n_slots) { rc = 400; snprintf(msg, cap, "n is %d but the server runs %d sequences at once (--parallel)", j->p.n, S->n_slots); }
    else if (S->q_n >= S->q_cap) { rc = 503; snprintf(msg, cap, "the server is busy: %d requests are waiting; try again later", S->q_n); }
    else {
        pthread_mutex_lock(&j->mu);
        j->refs++;
        j->state = JOB_QUEUED;
        pthread_mutex_unlock(&j->mu);
        S->queue[(S->q_head + S->q_n) % S->q_cap] = j;
        S->q_n++;
        atomic_store(&g_metrics.queue_depth, S->q_n);
        pthread_cond_signal(&S->cv);
    }
    pthread_mutex_unlock(&S->mu);
    return rc;
}

void sched_stop(srv_sched *S) {
    if (!S) return;
    if (S->started) {
        pthread_mutex_lock(&S->mu);
        S->stop = true;
        pthread_cond_signal(&S->cv);
        pthread_mutex_unlock(&S->mu);
        pthread_join(S->th, NULL);
        pthread_mutex_lock(&S->mu);
        for (; S->q_n > 0; S->q_n--, S->q_head = (S->q_head + 1) % S->q_cap) {
            srv_job *j = S->queue[S->q_head];
            job_fail(j, 503, "the server is shutting down");
            job_release(j);
        }
        for (int i = 0; i < S->n_slots; i++) {
            srv_job *j = S->slots[i].job;
            if (j) { job_fail(j, 503, "the server is shutting down"); job_retire(S, j); }
        }
        pthread_mutex_unlock(&S->mu);
        S->started = false;
    }
}

void sched_free(srv_sched *S) {
    if (!S) return;
    th_context_free(S->ctx);
    free(S->queue); free(S->slots); free(S->b_tok); free(S->b_seq); free(S->b_logits);
    free(S);
}

int32_t sched_slot_ctx(const srv_sched *S) { return S->slot_ctx; }
int32_t sched_parallel(const srv_sched *S) { return S->n_slots; }
