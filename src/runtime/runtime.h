/* runtime.h — internal structures of the runtime (the public API is the
 * "runtime" section of theseus.h):
 *
 *   runtime.c   the runtime and request handles: parameters, the bounded
 *               queue, submit / cancel / wait / results, the driver thread
 *   step.c      one scheduling step: admission into slots, cancellation,
 *               the ragged batch, th_decode, sampling, finishing
 *   text.c      one choice's output: UTF-8 holdback, stop strings, logprob
 *               entries released with the text they cover
 *   chatml.c    th_chat_render_chatml (the ChatML fallback)
 *   toolcall.c  tool calls: formats, parsing, the grammar of a call (no runtime state)
 *   spec.c      speculative decoding: the drafters (n-gram lookup, a draft
 *               model, the target's own first layers) and the adaptive length
 *
 * Ownership: the queue, the stop flag and the stats are under rt->mu (stats
 * are also atomics, for lock-free snapshots); slots, the context and every
 * request's output are the driver's alone; a request's done flag, status and
 * results are published under its own mutex when it ends. */
#ifndef TH_RUNTIME_INTERNAL_H
#define TH_RUNTIME_INTERNAL_H

#include "core/core.h"
#include <pthread.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------- text (text.c) */

typedef struct rt_text {
    char *text;                  /* whole UTF-8 characters; cut at a stop string */
    size_t n, cap;
    size_t ready;                /* bytes that can no longer change (no stop-string prefix) */
    size_t released;             /* bytes handed out in events */
    th_utf8_stream u8;           /* a character split across tokens waits here */
    th_token_info *ent;          /* logprob entries, one a generated token */
    int32_t n_ent, cap_ent, ent_released;
    bool cut;                    /* a stop string was found */
} rt_text;

typedef struct rt_stops {        /* a request's stop strings */
    char **s;
    size_t *len;
    int32_t n;
} rt_stops;

void rt_text_free(rt_text *t);
/* Appends one token's piece (and its logprob entry when e != NULL, whose
 * text_offset is set here). Returns false when out of memory. Sets t->cut when
 * a stop string appears (the text is cut before it, later entries dropped). */
bool rt_text_push(rt_text *t, const rt_stops *st, const char *piece, size_t n, const th_token_info *e);
/* End of the choice: an unfinished character becomes U+FFFD (unless cut; a
 * stop string it completes still cuts) and everything left is ready. */
bool rt_text_finish(rt_text *t, const rt_stops *st);
/* What became ready since the last call: text [*from, *from + *n) and entries
 * [*e_from, *e_from + *n_e). Marks them released. */
void rt_text_release(rt_text *t, bool final, const char **text, size_t *n, const th_token_info **ents, int32_t *n_e);

/* ---------------------------------------------------------------- requests */

typedef struct rt_choice {
    rt_text out;
    int32_t n_generated;         /* sampled tokens, EOG excluded */
    th_finish finish;
    int32_t slot;                /* slot running it, -1 when not (yet / any more) */
} rt_choice;

struct th_request {
    th_runtime *rt;
    atomic_int refs;             /* client handle + the runtime until END */
    atomic_bool cancel;
    /* immutable after submit */
    th_request_params p;         /* pointers below replace the caller's */
    th_logits_processor proc;
    th_token *bias_tok;
    float *bias_val;
    rt_stops stops;
    th_token *prompt;
    int32_t n_prompt;
    th_constraint **cons;        /* [n_choices] the grammar's state per choice, or NULL (unconstrained) */
    /* the driver's */
    rt_choice *ch;
    int32_t n_cached;            /* prompt tokens reused from the leader slot's KV */
    int32_t n_drafted, n_accepted; /* speculative decoding, all choices */
    double t_submit, t_admit, t_prompt_done, t_finish;
    double t_grammar;            /* seconds in th_constraint_* calls (step.c) */
    /* published at END under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool done;
    th_status status;
    char message[256];
};

/* ---------------------------------------------------------------- slots */

enum { SLOT_FREE, SLOT_PREFILL, SLOT_FORK, SLOT_GEN, SLOT_TAIL };

typedef struct rt_slot {
    th_request *req;             /* NULL when free */
    int32_t choice, phase;
    int32_t n_fed;               /* leader: prompt tokens in the KV */
    int32_t row;                 /* this step: batch index of its logits, or -1 */
    th_token next;               /* sampled, decoded next step */
    bool greedy;                 /* the sampler always takes the argmax */
    bool greedy_below;           /* ... of logits with some tokens' bias lowered (th_sampler_greedy_below) */
    bool tail_fed;               /* this step decodes a finished choice's last token (SLOT_TAIL) */
    th_sampler *smp;
    float *work;                 /* [n_vocab] a logits row for the processor */
    th_token *hist;              /* what the KV of this sequence holds */
    int32_t n_hist, cap_hist;
    /* speculative decoding (spec.c proposes, step.c verifies) */
    int32_t draft_max;           /* this request's cap on drafts a step (0: it does not speculate) */
    int32_t n_draft;             /* drafts after `next` in this step's batch */
    th_token *draft;             /* [spec draft_max] the proposal */
    float *q;                    /* [spec draft_max][n_vocab] the draft model's distributions
                                  * (sampled requests of a model drafter; else NULL: point masses) */
    bool use_q;                  /* this step's drafts come with q rows */
    th_sampler *dsmp;            /* the draft model's sampler for this slot (sampled requests) */
    float alpha;                 /* running acceptance rate of a drafted token */
} rt_slot;

/* ---------------------------------------------------------------- the runtime */

struct th_runtime {
    th_model *m;
    th_context *ctx;
    th_runtime_params p;
    int32_t n_vocab, pad_seq;    /* pad_seq: the throw-away sequence of batch_invariant (-1: none) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    th_request **queue;          /* ring of max_queue */
    int32_t q_head, q_n;
    bool stopping, started, thread_on;
    pthread_t th;
    atomic_bool stepping;
    th_grammar_vocab *gv;        /* the model's token trie, made (under mu) by the first
                                  * constrained submit; read-only afterwards */
    rt_slot *slots;
    th_request **scratch;        /* 2 x max_queue: the driver's admission lists */
    th_token *b_tok;
    int32_t *b_seq;
    int8_t *b_logits;
    atomic_int st_queued, st_active;
    atomic_uint st_kv_used;
    atomic_ullong st_steps;
    struct rt_spec *spec;        /* the drafter (NULL: no speculative decoding) */
    atomic_ullong st_drafted, st_accepted, st_rounds;
};

double rt_now(void);
/* Runs the request's event callback (if any). */
void rt_emit(th_request *r, th_event *ev);
/* Ends r: publishes status/message, emits END, wakes waiters, drops the
 * runtime's reference. Its slots must be free already. */
void rt_request_end(th_runtime *rt, th_request *r, th_status s, const char *msg);
void rt_update_stats(th_runtime *rt);
/* Queue (caller holds rt->mu). */
th_request *rt_queue_pop(th_runtime *rt);
/* step.c: ends every running request with s/msg (th_runtime_stop). */
void rt_end_all_running(th_runtime *rt, th_status s, const char *msg);
th_status rt_step(th_runtime *rt, bool *did_work);

#endif
