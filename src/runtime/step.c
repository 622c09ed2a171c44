/* step.c — one scheduling step of the runtime (th_runtime_step, or an
 * iteration of the runtime's thread), on the driver only:
 *
 *   1. admission: cancelled queued requests end; the queue's head requests
 *      take free slots while they fit (choice 0, the leader, takes the slot
 *      sharing the longest prefix of its prompt when keep_prefix is on);
 *   2. cancellation: running requests whose client cancelled end, their slots
 *      and KV blocks freed at once;
 *   3. the batch: one token for every generating slot first (slot_feed), then
 *      prompt chunks up to n_batch, so a long prompt never stalls running
 *      streams; one th_decode;
 *   4. sampling: each slot that asked for logits verifies its row
 *      (slot_verify); a leader whose prompt is complete first shares its KV
 *      with its request's other choices (th_kv_seq_copy, copy-on-write), then
 *      every choice samples from the same row;
 *   5. finishing: end of generation, a stop string, max_tokens or a full
 *      context ends a choice (so does a grammar that can take nothing more);
 *      a request ends when its last slot is free.
 *
 * A request with a grammar has one th_constraint per choice (r->cons): pick
 * samples under it (pick_constrained), slot_verify advances it.
 *
 * Speculative decoding (spec.c proposes before the batch): slot_feed puts a
 * slot's drafts after its next token, each with logits, in the same ragged
 * batch as everything else; slot_verify walks the slot's rows: row j decides
 * draft j (the argmax for a greedy slot, else th_sampler_sample_spec's rejection
 * rule, with the penalty history holding everything accepted before it), every
 * accepted draft is recorded as a generated token, the first rejected one is
 * replaced by the token the rule gives, and when all are accepted the last row
 * gives one more; the KV (and the history) are truncated to what was kept. */
#include "runtime/runtime.h"
#include "runtime/spec.h"
#include "sample/greedy.h"
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- slots */

static bool has_slots(const th_runtime *rt, const th_request *r) {
    for (int32_t i = 0; i < rt->p.n_slots; i++)
        if (rt->slots[i].req == r) return true;
    return false;
}

/* Frees slot i; its KV (and the history of what it holds) stays when keep. */
static void slot_release(th_runtime *rt, int32_t i, bool keep) {
    rt_slot *sl = &rt->slots[i];
    if (sl->req && sl->choice >= 0 && sl->choice < sl->req->p.n_choices) sl->req->ch[sl->choice].slot = -1;
    rt_spec_slot_release(rt, i);
    th_sampler_free(sl->smp);
    sl->smp = NULL;
    if (!keep) {
        th_kv_seq_clear(rt->ctx, i);
        sl->n_hist = 0;
    }
    sl->req = NULL;
    sl->phase = SLOT_FREE;
    sl->row = -1;
}

/* Ends r with s when it has no slots left. */
static void end_if_idle(th_runtime *rt, th_request *r) {
    if (has_slots(rt, r)) return;
    rt_update_stats(rt);
    rt_request_end(rt, r, TH_OK, "");
}

/* Frees every slot of r (and its KV) and ends it with s. */
static void fail_request(th_runtime *rt, th_request *r, th_status s, const char *msg) {
    for (int32_t i = 0; i < rt->p.n_slots; i++)
        if (rt->slots[i].req == r) slot_release(rt, i, false);
    rt_update_stats(rt);
    rt_request_end(rt, r, s, msg);
}

void rt_end_all_running(th_runtime *rt, th_status s, const char *msg) {
    for (int32_t i = 0; i < rt->p.n_slots; i++)
        if (rt->slots[i].req) fail_request(rt, rt->slots[i].req, s, msg);
}

static bool hist_push(rt_slot *sl, th_token t) {
    if (sl->n_hist >= sl->cap_hist) return false;
    sl->hist[sl->n_hist++] = t;
    return true;
}

/* ---------------------------------------------------------------- admission */

static int32_t common_prefix(const rt_slot *sl, const th_token *p, int32_t n) {
    int32_t k = 0;
    while (k < sl->n_hist && k < n && sl->hist[k] == p[k]) k++;
    return k;
}

/* The free slot for choice 0: the longest shared prefix (keep_prefix), else the first. */
static int32_t pick_leader(const th_runtime *rt, const th_request *r) {
    int32_t best = -1, best_k = -1;
    for (int32_t i = 0; i < rt->p.n_slots; i++) {
        if (rt->slots[i].req) continue;
        int32_t k = rt->p.keep_prefix ? common_prefix(&rt->slots[i], r->prompt, r->n_prompt) : 0;
        if (k > best_k) { best = i; best_k = k; }
    }
    return best;
}

static th_status slot_setup(th_runtime *rt, int32_t i, th_request *r, int32_t choice) {
    rt_slot *sl = &rt->slots[i];
    th_sampler_params sp = r->p.sampling;
    sp.seed += (uint64_t)choice;
    th_status s = th_sampler_new(&sp, rt->n_vocab, &sl->smp);
    for (int32_t k = 0; !s && k < r->p.n_bias; k++) s = th_sampler_set_logit_bias(sl->smp, r->bias_tok[k], r->bias_val[k]);
    if (!s && (r->proc.apply || r->cons) && !sl->work && !(sl->work = malloc((size_t)rt->n_vocab * sizeof *sl->work)))
        s = th_set_error(TH_ERR_NOMEM, "out of memory for a logits row");
    sl->req = r;
    sl->choice = choice;
    sl->row = -1;
    r->ch[choice].slot = i;
    if (s) return s;
    sl->greedy = th_sampler_is_greedy(sl->smp);
    sl->greedy_below = th_sampler_greedy_below(sl->smp);
    if ((s = rt_spec_slot_setup(rt, i))) return s;
    if (r->p.penalize_prompt)
        for (int32_t k = 0; k < r->n_prompt; k++) th_sampler_accept(sl->smp, r->prompt[k]);
    if (choice == 0) {
        int32_t keep = rt->p.keep_prefix ? common_prefix(sl, r->prompt, r->n_prompt) : 0;
        if (keep == r->n_prompt) keep--;      /* decode the last prompt token again: its logits */
        /* a hybrid model keeps no recurrent state that far back: start from 0 */
        if (th_kv_seq_truncate(rt->ctx, i, keep)) { th_kv_seq_clear(rt->ctx, i); keep = 0; }
        sl->n_hist = keep;
        sl->n_fed = keep;
        sl->phase = SLOT_PREFILL;
        r->n_cached = keep;
    } else {
        th_kv_seq_clear(rt->ctx, i);
        sl->n_hist = 0;
        sl->phase = SLOT_FORK;
    }
    return TH_OK;
}

/* Gives r its slots (the caller checked that enough are free). */
static th_status admit_request(th_runtime *rt, th_request *r) {
    int32_t leader = pick_leader(rt, r);
    if (leader < 0) return th_set_error(TH_ERR_INTERNAL, "runtime: no free slot for an admitted request");
    th_status s = slot_setup(rt, leader, r, 0);
    for (int32_t c = 1, i = 0; !s && c < r->p.n_choices && i < rt->p.n_slots; i++)
        if (!rt->slots[i].req) s = slot_setup(rt, i, r, c++);
    return s;
}

static int32_t free_slots(const th_runtime *rt) {
    int32_t n = 0;
    for (int32_t i = 0; i < rt->p.n_slots; i++) n += rt->slots[i].req == NULL;
    return n;
}

/* Polls the queued requests' cancel callbacks (outside the lock: they are the
 * client's code), then under the lock takes out the cancelled ones and the head
 * requests that fit; outside it again ends or admits them. */
static bool admit(th_runtime *rt) {
    int32_t n = 0, n_take = 0;
    th_request **list = rt->scratch, **take = rt->scratch + rt->p.max_queue;
    pthread_mutex_lock(&rt->mu);
    for (int32_t k = 0; k < rt->q_n; k++) list[n++] = rt->queue[(rt->q_head + k) % rt->p.max_queue];
    pthread_mutex_unlock(&rt->mu);
    for (int32_t k = 0; k < n; k++)
        if (list[k]->p.cancelled && list[k]->p.cancelled(list[k]->p.user)) atomic_store(&list[k]->cancel, true);
    pthread_mutex_lock(&rt->mu);
    int32_t avail = free_slots(rt), kept = 0;
    bool blocked = false;
    for (int32_t k = 0; k < rt->q_n; k++) {   /* compacts the ring in place */
        th_request *r = rt->queue[(rt->q_head + k) % rt->p.max_queue];
        bool cancelled = atomic_load(&r->cancel);   /* read once: it decides the slot count */
        if (cancelled || (!blocked && r->p.n_choices <= avail)) {
            take[n_take++] = r;
            if (!cancelled) avail -= r->p.n_choices;
        } else {
            blocked = true;    /* first come, first served: nothing overtakes the head */
            rt->queue[(rt->q_head + kept++) % rt->p.max_queue] = r;
        }
    }
    rt->q_n = kept;
    atomic_store(&rt->st_queued, kept);
    pthread_mutex_unlock(&rt->mu);
    for (int32_t k = 0; k < n_take; k++) {
        th_request *r = take[k];
        if (atomic_load(&r->cancel)) { rt_request_end(rt, r, TH_ERR_CANCELLED, "cancelled while queued"); continue; }
        r->t_admit = rt_now();
        th_status s = admit_request(rt, r);
        if (s) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", th_last_error());
            fail_request(rt, r, s, msg);
            continue;
        }
        rt_update_stats(rt);
        th_event ev = { .kind = TH_EVENT_START, .request = r, .token = -1 };
        rt_emit(r, &ev);
    }
    return n_take > 0;
}

static bool reap_cancelled(th_runtime *rt) {
    bool any = false;
    for (int32_t i = 0; i < rt->p.n_slots; i++) {
        th_request *r = rt->slots[i].req;
        if (!r) continue;
        if (!atomic_load(&r->cancel) && r->p.cancelled && r->p.cancelled(r->p.user)) atomic_store(&r->cancel, true);
        if (atomic_load(&r->cancel)) { fail_request(rt, r, TH_ERR_CANCELLED, "cancelled"); any = true; }
    }
    return any;
}

/* ---------------------------------------------------------------- the batch */

static void batch_put(th_runtime *rt, int32_t *n, th_token t, int32_t seq, bool logits) {
    rt->b_tok[*n] = t;
    rt->b_seq[*n] = seq;
    rt->b_logits[*n] = logits;
    (*n)++;
}

/* A generating slot's tokens for this step: its last sampled token, then the
 * drafter's proposals (rt_spec_propose), each with logits. */
static void slot_feed(th_runtime *rt, int32_t i, int32_t *n) {
    rt_slot *sl = &rt->slots[i];
    sl->row = *n;
    hist_push(sl, sl->next);
    batch_put(rt, n, sl->next, i, true);
    for (int32_t k = 0; k < sl->n_draft; k++) {
        hist_push(sl, sl->draft[k]);
        batch_put(rt, n, sl->draft[k], i, true);
    }
}

/* Batch room for drafts: n_batch less one token for every generating slot. */
static int32_t draft_budget(const th_runtime *rt) {
    int32_t n = rt->p.n_batch;
    for (int32_t i = 0; i < rt->p.n_slots; i++)
        n -= rt->slots[i].req && (rt->slots[i].phase == SLOT_GEN || rt->slots[i].phase == SLOT_TAIL);
    return n;
}

static int32_t build_batch(th_runtime *rt) {
    int32_t n = 0, nb = rt->p.n_batch;
    for (int32_t i = 0; i < rt->p.n_slots; i++) {
        rt_slot *sl = &rt->slots[i];
        sl->row = -1;
        sl->tail_fed = false;
        if (!sl->req) continue;
        if (sl->phase == SLOT_GEN) slot_feed(rt, i, &n);
        else if (sl->phase == SLOT_TAIL) {
            hist_push(sl, sl->next);
            batch_put(rt, &n, sl->next, i, false);
            sl->tail_fed = true;
        }
    }
    for (int32_t i = 0; i < rt->p.n_slots && n < nb; i++) {
        rt_slot *sl = &rt->slots[i];
        if (!sl->req || sl->phase != SLOT_PREFILL) continue;
        th_request *r = sl->req;
        int32_t take = TH_MIN(r->n_prompt - sl->n_fed, nb - n);
        for (int32_t k = 0; k < take; k++) {
            hist_push(sl, r->prompt[sl->n_fed + k]);
            batch_put(rt, &n, r->prompt[sl->n_fed + k], i, false);
        }
        sl->n_fed += take;
        if (sl->n_fed == r->n_prompt) { rt->b_logits[n - 1] = 1; sl->row = n - 1; }
    }
    if (n == 1 && rt->pad_seq >= 0) batch_put(rt, &n, rt->b_tok[0], rt->pad_seq, false);
    return n;
}

/* ---------------------------------------------------------------- sampling */

/* Under a grammar: the sampled token checked first (th_constraint_sample);
 * with logprobs the row is masked first, so they describe what was sampled from. */
static th_status pick_constrained(th_request *r, rt_slot *sl, th_constraint *gc, const float *lg, int32_t nv, th_token *t) {
    double t0 = rt_now();
    if (r->p.logprobs) {
        int32_t n_allowed = 0;
        if (lg != sl->work) memcpy(sl->work, lg, (size_t)nv * sizeof *lg);
        th_status s = th_constraint_apply(gc, sl->work, &n_allowed);
        if (!s && n_allowed == 0) s = th_set_error(TH_ERR_CAPACITY, "grammar: no token of the vocabulary can continue the grammar here");
        *t = s ? -1 : th_sampler_sample(sl->smp, sl->work);
    } else *t = th_constraint_sample(gc, sl->smp, lg);
    r->t_grammar += rt_now() - t0;
    if (*t >= 0) return TH_OK;
    return th_last_error()[0] ? TH_ERR_CAPACITY : TH_ERR_INTERNAL;
}

/* Slot i's token from batch row `row`: the argmax when nothing needs the
 * logits (a greedy sampler, no logprobs, no processor: the same token, and
 * all a logits_argmax_only context keeps), else the sampler over the row
 * (after the processor). With a draft token (draft >= 0, drawn from q; NULL:
 * a point mass) the row decides it: *acc says whether it is the token. */
static th_status pick(th_runtime *rt, rt_slot *sl, int32_t row, th_token draft, const float *q, th_token *t, bool *acc) {
    th_request *r = sl->req;
    th_constraint *gc = r->cons ? r->cons[sl->choice] : NULL;   /* a constrained choice never drafts */
    *acc = false;
    if (sl->greedy && !r->p.logprobs && !r->proc.apply && !gc) {
        *t = th_get_argmax(rt->ctx, row);
        *acc = draft >= 0 && (*t == draft || rt_spec_test_accept_all);
        if (*acc) *t = draft;
        return *t < 0 ? TH_ERR_INTERNAL : TH_OK;
    }
    if (sl->greedy_below && draft < 0 && !r->p.logprobs && !r->proc.apply && !gc) {
        th_token a = th_get_argmax(rt->ctx, row);   /* the raw argmax is the answer unless it is lowered */
        if (a >= 0 && th_sampler_bias_of(sl->smp, a) == 0.0f) { *t = a; return TH_OK; }
    }
    const float *lg = th_get_logits(rt->ctx, row);
    if (!lg) return TH_ERR_INTERNAL;
    if (r->proc.apply) {
        memcpy(sl->work, lg, (size_t)rt->n_vocab * sizeof *lg);
        th_clear_error();
        th_status s = r->proc.apply(r->proc.user, sl->choice, sl->work, rt->n_vocab);
        if (s) {
            if (!th_last_error()[0]) th_set_error(s, "the logits processor failed (%s)", th_status_name(s));
            return s;
        }
        lg = sl->work;
    }
    if (gc) return pick_constrained(r, sl, gc, lg, rt->n_vocab, t);
    if (draft < 0) *t = th_sampler_sample(sl->smp, lg);
    else *t = th_sampler_sample_spec(sl->smp, lg, draft, q, NULL, acc);
    if (draft >= 0 && rt_spec_test_accept_all) { *t = draft; *acc = true; }
    return *t < 0 ? TH_ERR_INTERNAL : TH_OK;
}

/* Slot i's KV and history keep their first n tokens. */
static void slot_trim(th_runtime *rt, int32_t i, int32_t n) {
    rt_slot *sl = &rt->slots[i];
    th_kv_seq_truncate(rt->ctx, i, n);
    if (sl->n_hist > n) sl->n_hist = n;
}

static void emit_text(th_runtime *rt, th_request *r, int32_t choice, th_event_kind kind, th_token t, bool final) {
    rt_choice *c = &r->ch[choice];
    th_event ev = { .kind = kind, .request = r, .choice = choice, .token = t, .finish = c->finish };
    rt_text_release(&c->out, final, &ev.text, &ev.n_text, &ev.tokens, &ev.n_tokens);
    rt_emit(r, &ev);
}

/* Choice of slot i is complete. t: the last token sampled (-1: none); fed: t
 * is already in the KV (an accepted draft). */
static void finish_choice(th_runtime *rt, int32_t i, th_finish why, th_token t, bool fed) {
    rt_slot *sl = &rt->slots[i];
    th_request *r = sl->req;
    rt_choice *c = &r->ch[sl->choice];
    if (!rt_text_finish(&c->out, &r->stops)) { fail_request(rt, r, TH_ERR_NOMEM, "out of memory"); return; }
    c->finish = why;
    r->t_finish = rt_now();
    emit_text(rt, r, sl->choice, TH_EVENT_FINISH, why == TH_FINISH_EOG ? t : -1, true);
    if (why == TH_FINISH_LENGTH && rt->p.keep_prefix && t >= 0 && !fed) {
        sl->next = t;            /* decoded next step, so the slot's KV holds all of the text */
        sl->phase = SLOT_TAIL;
        return;
    }
    slot_release(rt, i, rt->p.keep_prefix);
    end_if_idle(rt, r);
}

/* Records token t of slot i's choice: events, text, stop strings, limits.
 * keep: the KV length that holds the text up to t (t included when fed: an
 * accepted draft); a finished choice's KV is cut there first. Returns true
 * while the choice goes on. */
static bool record_token(th_runtime *rt, int32_t i, th_token t, int32_t keep, bool fed) {
    rt_slot *sl = &rt->slots[i];
    th_request *r = sl->req;
    rt_choice *c = &r->ch[sl->choice];
    if (r->proc.accept) r->proc.accept(r->proc.user, sl->choice, t);
    th_constraint *gc = r->cons ? r->cons[sl->choice] : NULL;
    if (gc) {
        double t0 = rt_now();
        th_status s = th_constraint_accept(gc, t);
        r->t_grammar += rt_now() - t0;
        if (s) {
            char msg[300];
            snprintf(msg, sizeof msg, "grammar: %s", th_last_error());
            fail_request(rt, r, TH_ERR_INTERNAL, msg);
            return false;
        }
    }
    if (th_token_is_eog(rt->m, t)) {
        slot_trim(rt, i, keep - fed);
        finish_choice(rt, i, TH_FINISH_EOG, t, false);
        return false;
    }
    th_sampler_accept(sl->smp, t);
    th_token_info e = { .token = t };
    if (r->p.logprobs) {
        e.n_top = th_sampler_last_logprobs(sl->smp, e.top, r->p.top_logprobs, &e.logprob);
        if (e.n_top < 0) e.n_top = 0;
    }
    char small[256], *piece = small;
    int32_t k = th_token_to_piece(rt->m, t, small, sizeof small, false);
    if (k < 0 && k != INT32_MIN && (piece = malloc((size_t)-k))) k = th_token_to_piece(rt->m, t, piece, -k, false);
    bool ok = piece && rt_text_push(&c->out, &r->stops, piece, k > 0 ? (size_t)k : 0, r->p.logprobs ? &e : NULL);
    if (piece != small) free(piece);
    if (!ok) { fail_request(rt, r, TH_ERR_NOMEM, "out of memory"); return false; }
    c->n_generated++;
    emit_text(rt, r, sl->choice, TH_EVENT_TOKEN, t, false);
    if (!sl->req) return false;  /* (a callback cannot end it, but stay safe) */
    th_finish why = TH_FINISH_NONE;
    if (c->out.cut) why = TH_FINISH_STOP;
    else if (gc && !th_constraint_can_continue(gc)) why = TH_FINISH_STOP;   /* only the end is left */
    else if (keep - fed + 1 >= rt->p.slot_ctx) why = TH_FINISH_CONTEXT;
    else if (r->p.max_tokens >= 0 && c->n_generated >= r->p.max_tokens) why = TH_FINISH_LENGTH;
    if (why == TH_FINISH_NONE) return true;
    slot_trim(rt, i, keep);
    finish_choice(rt, i, why, t, fed);
    return false;
}

/* Slot i's rows from batch row `row` on: its next token's row, then one per
 * draft (the KV holds the text, next and the drafts). Row j decides draft j;
 * the first one rejected is replaced and ends the walk; after all of them the
 * last row gives one more token. What was not kept leaves the KV. */
static void slot_verify(th_runtime *rt, int32_t i, int32_t row) {
    rt_slot *sl = &rt->slots[i];
    th_request *r = sl->req;
    rt_choice *c = &r->ch[sl->choice];
    if (r->p.max_tokens >= 0 && c->n_generated >= r->p.max_tokens) { finish_choice(rt, i, TH_FINISH_LENGTH, -1, false); return; }
    int32_t nd = sl->n_draft, base = th_kv_seq_len(rt->ctx, i) - nd, n_acc = 0;
    r->n_drafted += nd;
    for (int32_t j = 0; j <= nd; j++) {
        th_token d = j < nd ? sl->draft[j] : -1, t = -1;
        bool acc = false;
        const float *q = d >= 0 && sl->use_q ? sl->q + (size_t)j * (size_t)rt->n_vocab : NULL;
        th_status s = pick(rt, sl, row + j, d, q, &t, &acc);
        if (s) {
            char msg[300];
            snprintf(msg, sizeof msg, "sampling failed: %s", th_last_error());
            fail_request(rt, r, s, msg);
            return;
        }
        n_acc += acc;
        r->n_accepted += acc;
        if (!record_token(rt, i, t, base + j + acc, acc)) break;
        if (!acc) {
            slot_trim(rt, i, base + j);
            sl->next = t;
            sl->phase = SLOT_GEN;
            break;
        }
    }
    rt_spec_observe(rt, i, nd, n_acc);
}

/* Leader i's prompt is decoded: the other choices share its KV, then every
 * choice samples from the same row. */
static void fork_and_verify(th_runtime *rt, int32_t leader, int32_t row) {
    rt_slot *L = &rt->slots[leader];
    th_request *r = L->req;
    r->t_prompt_done = rt_now();
    for (int32_t i = 0; i < rt->p.n_slots; i++) {
        rt_slot *sl = &rt->slots[i];
        if (sl->req != r || i == leader) continue;
        th_status s = th_kv_seq_copy(rt->ctx, i, leader);
        if (s) { fail_request(rt, r, s, th_last_error()); return; }
        memcpy(sl->hist, L->hist, (size_t)L->n_hist * sizeof *sl->hist);
        sl->n_hist = L->n_hist;
    }
    for (int32_t i = 0; i < rt->p.n_slots; i++)
        if (rt->slots[i].req == r) slot_verify(rt, i, row);   /* a failure frees them all */
}

/* ---------------------------------------------------------------- one step */


th_status rt_step(th_runtime *rt, bool *did_work) {
    /* between two forward passes: the client's hook (e.g. live precision swaps) */
    if (rt->p.between_steps) rt->p.between_steps(rt->p.between_user);
    bool work = admit(rt);
    work |= reap_cancelled(rt);
    rt_spec_propose(rt, draft_budget(rt));
    int32_t n = build_batch(rt);
    if (n > 0) {
        work = true;
        th_batch b = { .n_tokens = n, .token = rt->b_tok, .seq_id = rt->b_seq, .logits = rt->b_logits };
        th_status s = th_decode(rt->ctx, &b);
        char msg[300];
        if (s) snprintf(msg, sizeof msg, "decode failed: %s", th_last_error());
        if (rt->pad_seq >= 0) th_kv_seq_clear(rt->ctx, rt->pad_seq);
        atomic_fetch_add(&rt->st_steps, 1);
        if (s) rt_end_all_running(rt, s, msg);
        else {
            for (int32_t i = 0; i < rt->p.n_slots; i++) {
                rt_slot *sl = &rt->slots[i];
                if (!sl->req) continue;
                if (sl->tail_fed) {
                    th_request *r = sl->req;
                    slot_release(rt, i, true);
                    end_if_idle(rt, r);
                } else if (sl->row >= 0) {
                    if (sl->phase == SLOT_PREFILL) fork_and_verify(rt, i, sl->row);
                    else slot_verify(rt, i, sl->row);
                }
            }
        }
        rt_update_stats(rt);
    }
    if (did_work) *did_work = work;
    return TH_OK;
}
