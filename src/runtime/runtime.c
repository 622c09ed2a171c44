/* runtime.c — the runtime and request handles of theseus.h's "runtime"
 * section: parameters and the context the runtime owns, the bounded queue
 * (submit checks and copies a request; admission is step.c's), cancellation,
 * the end of a request (status, END event, waking waiters), results, stats,
 * and the optional driver thread. The threading model is in theseus.h. */
#include "runtime/runtime.h"
#include "runtime/spec.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double rt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- parameters */

th_runtime_params th_runtime_default_params(void) {
    return (th_runtime_params){ .context = th_context_default_params(), .n_slots = 1, .slot_ctx = 0,
                                .n_batch = 512, .max_queue = 64, .batch_invariant = false, .keep_prefix = false };
}

th_request_params th_request_default_params(void) {
    th_request_params p = { .sampling = th_sampler_default_params(), .n_choices = 1, .max_tokens = -1 };
    p.sampling.temperature = 0.0f;
    return p;
}

static th_status check_runtime_params(const th_model *m, th_runtime_params *p) {
    if (p->n_slots == 0) p->n_slots = 1;
    if (p->slot_ctx == 0) p->slot_ctx = TH_MIN(th_model_n_ctx_train(m), 4096);
    if (p->n_batch == 0) p->n_batch = 512;
    if (p->max_queue == 0) p->max_queue = 64;
    if (p->context.kv_block == 0) p->context.kv_block = 16;
    if (p->n_slots < 1 || p->n_slots > 4000)
        return th_set_error(TH_ERR_ARG, "runtime: n_slots %d is outside [1, 4000]", p->n_slots);
    if (p->slot_ctx < 2 || p->slot_ctx > (1 << 24))
        return th_set_error(TH_ERR_ARG, "runtime: slot_ctx %d is outside [2, %d]", p->slot_ctx, 1 << 24);
    if (p->n_batch < p->n_slots + 1 || p->n_batch > (1 << 16))
        return th_set_error(TH_ERR_ARG, "runtime: n_batch %d must be in [n_slots + 1 = %d, %d] (every slot's token and a prompt chunk)",
                            p->n_batch, p->n_slots + 1, 1 << 16);
    if (p->max_queue < 1 || p->max_queue > (1 << 20))
        return th_set_error(TH_ERR_ARG, "runtime: max_queue %d is outside [1, %d]", p->max_queue, 1 << 20);
    if (p->context.kv_block > 4096) return th_set_error(TH_ERR_ARG, "runtime: kv_block %u is above 4096", p->context.kv_block);
    return TH_OK;
}

th_status th_runtime_new(th_model *model, const th_runtime_params *params, th_runtime **out) {
    if (!out) return th_set_error(TH_ERR_ARG, "th_runtime_new: out is NULL");
    *out = NULL;
    if (!model) return th_set_error(TH_ERR_ARG, "th_runtime_new: no model");
    th_runtime_params p = params ? *params : th_runtime_default_params();
    th_status s = check_runtime_params(model, &p);
    if (s) return s;
    /* speculative steps always decode two or more rows; padding the plain ones keeps
     * every step on the same (batched) kernels, so greedy text does not depend on
     * whether a step had drafts */
    if (p.spec.kind != TH_SPEC_NONE) p.batch_invariant = true;
    th_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return th_set_error(TH_ERR_NOMEM, "runtime: out of memory");
    pthread_mutex_init(&rt->mu, NULL);
    pthread_cond_init(&rt->cv, NULL);
    rt->m = model;
    rt->p = p;
    rt->n_vocab = th_model_n_vocab(model);
    /* only the CPU needs the pad row: the GPU's kernels are the same for one row as for
     * several (a batch-invariant GPU context fixes its attention plan instead) */
    rt->pad_seq = p.batch_invariant && !p.context.gpu ? p.n_slots : -1;
    /* Every slot holds at most slot_ctx tokens; with several slots (or the pad
     * sequence) one spare block each covers a copied tail and the pad. */
    uint32_t blk = p.context.kv_block;
    uint64_t n_ctx = (uint64_t)p.n_slots * (uint64_t)p.slot_ctx;
    if (p.n_slots > 1 || p.batch_invariant) n_ctx += (uint64_t)blk * (uint64_t)(p.n_slots + 1);
    if (n_ctx > (1u << 24)) {
        th_runtime_free(rt);
        return th_set_error(TH_ERR_ARG, "runtime: %d slots of %d tokens need a KV cache of %llu tokens; at most %u",
                            p.n_slots, p.slot_ctx, (unsigned long long)n_ctx, 1u << 24);
    }
    th_context_params cp = p.context;
    cp.batch_invariant = cp.batch_invariant || p.batch_invariant;
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)p.n_batch;
    cp.n_seq_max = (uint32_t)(p.n_slots + (p.batch_invariant ? 1 : 0));
    /* a hybrid (recurrent) model rolls rejected drafts back from state snapshots */
    if (p.spec.kind != TH_SPEC_NONE && cp.rs_snapshots == 0) cp.rs_snapshots = rt_spec_snapshots(&p.spec);
    s = th_context_new(model, &cp, &rt->ctx);
    if (s) { th_runtime_free(rt); return s; }
    rt->queue = calloc((size_t)p.max_queue, sizeof *rt->queue);
    rt->scratch = calloc(2 * (size_t)p.max_queue, sizeof *rt->scratch);
    rt->slots = calloc((size_t)p.n_slots, sizeof *rt->slots);
    rt->b_tok = malloc((size_t)p.n_batch * sizeof *rt->b_tok);
    rt->b_seq = malloc((size_t)p.n_batch * sizeof *rt->b_seq);
    rt->b_logits = malloc((size_t)p.n_batch);
    bool ok = rt->queue && rt->scratch && rt->slots && rt->b_tok && rt->b_seq && rt->b_logits;
    for (int32_t i = 0; ok && i < p.n_slots; i++) {
        rt->slots[i].row = -1;
        rt->slots[i].cap_hist = p.slot_ctx;
        ok = (rt->slots[i].hist = malloc((size_t)p.slot_ctx * sizeof(th_token))) != NULL;
    }
    if (!ok) { th_runtime_free(rt); return th_set_error(TH_ERR_NOMEM, "runtime: out of memory"); }
    if ((s = rt_spec_new(rt, &rt->spec))) { th_runtime_free(rt); return s; }
    rt_update_stats(rt);
    *out = rt;
    return TH_OK;
}

int32_t th_runtime_slot_ctx(const th_runtime *rt) { return rt ? rt->p.slot_ctx : 0; }
int32_t th_runtime_n_slots(const th_runtime *rt) { return rt ? rt->p.n_slots : 0; }

void rt_update_stats(th_runtime *rt) {
    int32_t active = 0;
    for (int32_t i = 0; i < rt->p.n_slots; i++) active += rt->slots[i].req != NULL;
    atomic_store(&rt->st_active, active);
    atomic_store(&rt->st_kv_used, th_kv_blocks_used(rt->ctx));
}

void th_runtime_stats_get(const th_runtime *rt, th_runtime_stats *out) {
    th_runtime *r = (th_runtime *)rt;   /* atomics only */
    *out = (th_runtime_stats){ .queued = atomic_load(&r->st_queued), .active_slots = atomic_load(&r->st_active),
                               .kv_blocks_used = atomic_load(&r->st_kv_used),
                               .kv_blocks_total = th_kv_blocks_total(r->ctx), .steps = atomic_load(&r->st_steps),
                               .spec_drafted = atomic_load(&r->st_drafted), .spec_accepted = atomic_load(&r->st_accepted),
                               .spec_rounds = atomic_load(&r->st_rounds) };
}

/* ---------------------------------------------------------------- requests */

static void request_free(th_request *r) {
    if (r->ch)
        for (int32_t c = 0; c < r->p.n_choices; c++) rt_text_free(&r->ch[c].out);
    if (r->cons)
        for (int32_t c = 0; c < r->p.n_choices; c++) th_constraint_free(r->cons[c]);
    free(r->cons);
    for (int32_t i = 0; i < r->stops.n; i++) free(r->stops.s[i]);
    free(r->stops.s);
    free(r->stops.len);
    free(r->ch);
    free(r->prompt);
    free(r->bias_tok);
    free(r->bias_val);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

void th_request_release(th_request *r) {
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) request_free(r);
}

void th_request_cancel(th_request *r) {
    if (r) atomic_store(&r->cancel, true);
}

bool th_request_done(const th_request *r) { return r && atomic_load(&((th_request *)r)->done); }

void th_request_wait(th_request *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    while (!atomic_load(&r->done)) pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

th_status th_request_status(const th_request *r) { return r && th_request_done(r) ? r->status : TH_ERR_ARG; }
const char *th_request_message(const th_request *r) { return r && th_request_done(r) ? r->message : ""; }

const char *th_request_text(const th_request *r, int32_t choice, size_t *len) {
    if (len) *len = 0;
    if (!th_request_done(r) || choice < 0 || choice >= r->p.n_choices) return NULL;
    const rt_text *t = &r->ch[choice].out;
    if (len) *len = t->n;
    return t->text ? t->text : "";
}

th_finish th_request_finish(const th_request *r, int32_t choice) {
    if (!th_request_done(r) || choice < 0 || choice >= r->p.n_choices) return TH_FINISH_NONE;
    return r->ch[choice].finish;
}

void th_request_stats_get(const th_request *r, th_request_stats *out) {
    *out = (th_request_stats){ 0 };
    if (!r) return;
    out->n_prompt = r->n_prompt;
    out->n_prompt_cached = r->n_cached;
    out->n_drafted = r->n_drafted;
    out->n_accepted = r->n_accepted;
    for (int32_t c = 0; c < r->p.n_choices; c++) out->n_generated += r->ch[c].n_generated;
    if (r->t_admit > 0) out->t_queue = r->t_admit - r->t_submit;
    if (r->t_prompt_done > 0) out->t_prompt = r->t_prompt_done - r->t_admit;
    if (r->t_finish > 0 && r->t_prompt_done > 0) out->t_generate = r->t_finish - r->t_prompt_done;
    out->t_grammar = r->t_grammar;
    if (r->cons)
        for (int32_t c = 0; c < r->p.n_choices; c++) {
            th_constraint_stats gs;
            th_constraint_get_stats(r->cons[c], &gs);
            out->grammar_masks += gs.masks;
        }
}

void rt_emit(th_request *r, th_event *ev) {
    if (r->p.on_event) r->p.on_event(ev, r->p.user);
}

void rt_request_end(th_runtime *rt, th_request *r, th_status s, const char *msg) {
    (void)rt;
    r->status = s;
    snprintf(r->message, sizeof r->message, "%s", s ? msg : "");
    th_event ev = { .kind = TH_EVENT_END, .request = r, .token = -1, .status = s, .message = r->message };
    rt_emit(r, &ev);
    pthread_mutex_lock(&r->mu);
    atomic_store(&r->done, true);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    th_request_release(r);   /* the runtime's reference */
}

/* ---------------------------------------------------------------- submit */

static th_status copy_stops(th_request *r, const th_request_params *p) {
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop)) return th_set_error(TH_ERR_ARG, "runtime: n_stop %d without stop strings", p->n_stop);
    if (p->n_stop == 0) return TH_OK;
    r->stops.s = calloc((size_t)p->n_stop, sizeof *r->stops.s);
    r->stops.len = calloc((size_t)p->n_stop, sizeof *r->stops.len);
    if (!r->stops.s || !r->stops.len) return th_set_error(TH_ERR_NOMEM, "runtime: out of memory");
    for (int32_t i = 0; i < p->n_stop; i++) {
        if (!p->stop[i]) return th_set_error(TH_ERR_ARG, "runtime: stop string %d is NULL", i);
        if (!*p->stop[i]) continue;
        if (!(r->stops.s[r->stops.n] = strdup(p->stop[i]))) return th_set_error(TH_ERR_NOMEM, "runtime: out of memory");
        r->stops.len[r->stops.n++] = strlen(p->stop[i]);
    }
    return TH_OK;
}

static th_status copy_bias(th_request *r, const th_request_params *p, int32_t n_vocab) {
    if (p->n_bias < 0 || (p->n_bias > 0 && (!p->bias_token || !p->bias_value)))
        return th_set_error(TH_ERR_ARG, "runtime: n_bias %d without the token and value arrays", p->n_bias);
    if (p->n_bias == 0) return TH_OK;
    r->bias_tok = malloc((size_t)p->n_bias * sizeof *r->bias_tok);
    r->bias_val = malloc((size_t)p->n_bias * sizeof *r->bias_val);
    if (!r->bias_tok || !r->bias_val) return th_set_error(TH_ERR_NOMEM, "runtime: out of memory");
    for (int32_t i = 0; i < p->n_bias; i++) {
        th_token t = p->bias_token[i];
        float v = p->bias_value[i];
        if (t < 0 || t >= n_vocab) return th_set_error(TH_ERR_ARG, "runtime: logit bias token %d is outside [0, %d)", t, n_vocab);
        if (isnan(v) || v == INFINITY) return th_set_error(TH_ERR_ARG, "runtime: logit bias %g for token %d must be finite or -inf", (double)v, t);
        r->bias_tok[i] = t;
        r->bias_val[i] = v;
    }
    return TH_OK;
}

/* The request's sampler settings are valid (th_sampler_new accepts them); *greedy
 * says whether its choices always take the argmax. */
static th_status check_sampling(const th_runtime *rt, const th_request *r, bool *greedy) {
    th_sampler *s = NULL;
    th_status st = th_sampler_new(&r->p.sampling, rt->n_vocab, &s);
    for (int32_t i = 0; !st && i < r->p.n_bias; i++) st = th_sampler_set_logit_bias(s, r->bias_tok[i], r->bias_val[i]);
    *greedy = !st && th_sampler_is_greedy(s);
    th_sampler_free(s);
    return st;
}

static th_status check_request(const th_runtime *rt, const th_request_params *p, const th_token *prompt, int32_t n) {
    int32_t nc = p->n_choices ? p->n_choices : 1;
    if (nc < 1 || nc > rt->p.n_slots)
        return th_set_error(TH_ERR_ARG, "runtime: n_choices %d is outside [1, %d] (the runtime's slots)", nc, rt->p.n_slots);
    if (n < 1 || !prompt) return th_set_error(TH_ERR_ARG, "runtime: the prompt is empty");
    if (n >= rt->p.slot_ctx)
        return th_set_error(TH_ERR_CAPACITY, "the prompt has %d tokens; a sequence holds %d (prompt and completion together)",
                            n, rt->p.slot_ctx);
    for (int32_t i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= rt->n_vocab)
            return th_set_error(TH_ERR_ARG, "runtime: prompt token %d at index %d is outside the vocabulary [0, %d)",
                                prompt[i], i, rt->n_vocab);
    if (p->top_logprobs < 0 || p->top_logprobs > TH_MAX_TOP_LOGPROBS)
        return th_set_error(TH_ERR_ARG, "runtime: top_logprobs %d is outside [0, %d]", p->top_logprobs, TH_MAX_TOP_LOGPROBS);
    if (p->draft_max < -1)
        return th_set_error(TH_ERR_ARG, "runtime: draft_max %d (-1: no speculative decoding, 0: the runtime's, > 0: a cap)", p->draft_max);
    if (p->processor && !p->processor->apply)
        return th_set_error(TH_ERR_ARG, "runtime: the logits processor has no apply function");
    return TH_OK;
}

/* One constraint per choice over p->grammar; the runtime's token trie is made
 * by the first constrained request (SmolLM2: ~50 ms, once). */
static th_status make_constraints(th_runtime *rt, th_request *r, const th_grammar *g) {
    pthread_mutex_lock(&rt->mu);
    th_status s = rt->gv ? TH_OK : th_grammar_vocab_new(rt->m, &rt->gv);
    pthread_mutex_unlock(&rt->mu);
    if (s) return s;
    if (!(r->cons = calloc((size_t)r->p.n_choices, sizeof *r->cons))) return th_set_error(TH_ERR_NOMEM, "runtime: out of memory");
    for (int32_t c = 0; c < r->p.n_choices; c++)
        if ((s = th_constraint_new(g, rt->gv, &r->cons[c]))) return s;
    return TH_OK;
}

/* Builds the request (copies of everything the caller passed). */
static th_status request_new(th_runtime *rt, const th_request_params *p, const th_token *prompt, int32_t n,
                             th_request **out) {
    th_request *r = calloc(1, sizeof *r);
    if (!r) return th_set_error(TH_ERR_NOMEM, "runtime: out of memory");
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    atomic_init(&r->refs, 2);
    r->rt = rt;
    r->p = *p;
    if (!r->p.n_choices) r->p.n_choices = 1;
    r->p.stop = NULL;
    r->p.n_stop = 0;
    r->p.bias_token = NULL;
    r->p.bias_value = NULL;
    if (p->processor) r->proc = *p->processor;
    r->p.processor = NULL;
    r->n_prompt = n;
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    r->ch = calloc((size_t)r->p.n_choices, sizeof *r->ch);
    th_status s = !r->prompt || !r->ch ? th_set_error(TH_ERR_NOMEM, "runtime: out of memory") : TH_OK;
    if (!s) s = copy_stops(r, p);
    if (!s) s = copy_bias(r, p, rt->n_vocab);
    r->p.grammar = NULL;
    if (!s && p->grammar) s = make_constraints(rt, r, p->grammar);
    if (s) { request_free(r); return s; }
    memcpy(r->prompt, prompt, (size_t)n * sizeof *prompt);
    for (int32_t c = 0; c < r->p.n_choices; c++) r->ch[c].slot = -1;
    *out = r;
    return TH_OK;
}

th_status th_runtime_submit(th_runtime *rt, const th_request_params *params, const th_token *prompt, int32_t n_prompt,
                            th_request **out) {
    if (!out) return th_set_error(TH_ERR_ARG, "th_runtime_submit: out is NULL");
    *out = NULL;
    if (!rt) return th_set_error(TH_ERR_ARG, "th_runtime_submit: no runtime");
    th_request_params dflt = th_request_default_params();
    const th_request_params *p = params ? params : &dflt;
    th_status s = check_request(rt, p, prompt, n_prompt);
    if (s) return s;
    th_request *r = NULL;
    if ((s = request_new(rt, p, prompt, n_prompt, &r))) return s;
    bool greedy;
    if ((s = check_sampling(rt, r, &greedy))) { request_free(r); return s; }
    if (rt->p.context.logits_argmax_only && (!greedy || r->p.logprobs || r->proc.apply || r->cons)) {
        request_free(r);
        return th_set_error(TH_ERR_ARG, "runtime: the request needs logits (sampling, logprobs, a processor or a grammar) "
                                        "but the context keeps only argmaxes (logits_argmax_only)");
    }
    r->t_submit = rt_now();
    pthread_mutex_lock(&rt->mu);
    if (rt->stopping) s = th_set_error(TH_ERR_BUSY, "the runtime is stopping");
    else if (rt->q_n >= rt->p.max_queue)
        s = th_set_error(TH_ERR_BUSY, "busy: %d requests are waiting for a slot (the queue holds %d); try again later",
                         rt->q_n, rt->p.max_queue);
    else {
        rt->queue[(rt->q_head + rt->q_n) % rt->p.max_queue] = r;
        rt->q_n++;
        atomic_store(&rt->st_queued, rt->q_n);
        pthread_cond_signal(&rt->cv);
    }
    pthread_mutex_unlock(&rt->mu);
    if (s) { request_free(r); return s; }
    *out = r;
    return TH_OK;
}

/* ---------------------------------------------------------------- driving */

th_status th_runtime_step(th_runtime *rt, bool *did_work) {
    if (did_work) *did_work = false;
    if (!rt) return th_set_error(TH_ERR_ARG, "th_runtime_step: no runtime");
    if (rt->thread_on) return th_set_error(TH_ERR_ARG, "th_runtime_step: the runtime runs its own thread (th_runtime_start)");
    if (atomic_exchange(&rt->stepping, true)) return th_set_error(TH_ERR_ARG, "th_runtime_step: another thread is stepping");
    th_status s = rt_step(rt, did_work);
    atomic_store(&rt->stepping, false);
    return s;
}

/* How often an idle driver calls the between-steps hook (so that, e.g., a live precision
 * file is seen without a request), in ms. */
#define IDLE_HOOK_MS 250

/* Waits for work; false when the wait timed out with a hook to call (and no work). */
static bool wait_for_work(th_runtime *rt) {
    while (!rt->stopping && rt->q_n == 0 && atomic_load(&rt->st_active) == 0) {
        if (!rt->p.between_steps) { pthread_cond_wait(&rt->cv, &rt->mu); continue; }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += IDLE_HOOK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        if (pthread_cond_timedwait(&rt->cv, &rt->mu, &ts) == ETIMEDOUT && !rt->stopping && rt->q_n == 0 &&
            atomic_load(&rt->st_active) == 0)
            return false;
    }
    return true;
}

static void *driver_main(void *arg) {
    th_runtime *rt = arg;
    for (;;) {
        pthread_mutex_lock(&rt->mu);
        bool work = wait_for_work(rt);
        bool stop = rt->stopping;
        pthread_mutex_unlock(&rt->mu);
        if (stop) break;
        /* idle: the hook alone (no forward pass runs, this is the only thread that steps) */
        if (!work) rt->p.between_steps(rt->p.between_user);
        else rt_step(rt, NULL);
    }
    return NULL;
}

th_status th_runtime_start(th_runtime *rt) {
    if (!rt) return th_set_error(TH_ERR_ARG, "th_runtime_start: no runtime");
    pthread_mutex_lock(&rt->mu);
    th_status s = TH_OK;
    if (rt->thread_on || rt->stopping) s = th_set_error(TH_ERR_ARG, "th_runtime_start: already started or stopped");
    else if (pthread_create(&rt->th, NULL, driver_main, rt)) s = th_set_error(TH_ERR_INTERNAL, "runtime: cannot start the driver thread");
    else rt->thread_on = true;
    pthread_mutex_unlock(&rt->mu);
    return s;
}

void th_runtime_stop(th_runtime *rt) {
    if (!rt) return;
    pthread_mutex_lock(&rt->mu);
    rt->stopping = true;
    pthread_cond_broadcast(&rt->cv);
    bool joined = rt->thread_on;
    pthread_mutex_unlock(&rt->mu);
    if (joined) pthread_join(rt->th, NULL);
    rt->thread_on = false;
    for (;;) {
        pthread_mutex_lock(&rt->mu);
        th_request *r = rt->q_n ? rt->queue[rt->q_head] : NULL;
        if (r) { rt->q_head = (rt->q_head + 1) % rt->p.max_queue; rt->q_n--; }
        atomic_store(&rt->st_queued, rt->q_n);
        pthread_mutex_unlock(&rt->mu);
        if (!r) break;
        rt_request_end(rt, r, TH_ERR_CANCELLED, "the runtime stopped");
    }
    if (rt->slots && rt->ctx) rt_end_all_running(rt, TH_ERR_CANCELLED, "the runtime stopped");
}

void th_runtime_free(th_runtime *rt) {
    if (!rt) return;
    th_runtime_stop(rt);
    if (rt->slots)
        for (int32_t i = 0; i < rt->p.n_slots; i++) {
            th_sampler_free(rt->slots[i].smp);
            th_sampler_free(rt->slots[i].dsmp);
            free(rt->slots[i].work);
            free(rt->slots[i].hist);
            free(rt->slots[i].draft);
            free(rt->slots[i].q);
        }
    rt_spec_free(rt->spec);
    th_context_free(rt->ctx);
    th_grammar_vocab_free(rt->gv);
    free(rt->slots);
    free(rt->queue);
    free(rt->scratch);
    free(rt->b_tok);
    free(rt->b_seq);
    free(rt->b_logits);
    pthread_mutex_destroy(&rt->mu);
    pthread_cond_destroy(&rt->cv);
    free(rt);
}
