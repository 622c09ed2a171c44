/* spec.h — speculative decoding inside the runtime (internal; the public knobs are
 * th_spec_params and th_request_params.draft_max in theseus.h).
 *
 * A drafter proposes, for a generating slot, up to k tokens that continue its
 * text (the slot's history, then its next token); step.c feeds them after the
 * next token in the step's one ragged batch, each with logits, and verifies row
 * by row (th_sampler_sample_spec's rejection rule, or the argmax for greedy
 * slots), truncating the KV of what it rejects. Three drafters sit behind one
 * table of operations:
 *   ngram   the most recent earlier occurrence of the text's last n tokens
 *           (n = the configured size down to 2) proposes what followed it;
 *           deterministic, so q is a point mass.
 *   draft   a second model with its own context and KV (one sequence a slot),
 *           fed the slot's text and asked for k tokens one at a time, all the
 *           slots of a step in the same draft batches; q is its distribution
 *           under the request's sampler settings (penalties left out).
 *   layers  the draft path over the target model itself, in a context that runs
 *           only the listed layers (th_context_params.layers) and the head.
 * The length asked for adapts to each slot's running acceptance rate (spec.c). */
#ifndef TH_RUNTIME_SPEC_H
#define TH_RUNTIME_SPEC_H

#include "runtime/runtime.h"

typedef struct rt_spec rt_spec;

/* The drafter of rt (rt->p.spec, already checked); *out NULL when kind is none. */
th_status rt_spec_new(th_runtime *rt, rt_spec **out);
/* The most tokens one step can roll back under spec params p (its draft_max, or the
 * default when 0), plus one: the recurrent-state snapshots a hybrid model's
 * context needs (th_context_params.rs_snapshots). */
uint32_t rt_spec_snapshots(const th_spec_params *p);
void rt_spec_free(rt_spec *sp);
int32_t rt_spec_draft_max(const rt_spec *sp);

/* Slot i starts a choice of its request (its sampler exists): this slot's draft
 * cap and, for a sampled request of a model drafter, its draft sampler and q rows. */
th_status rt_spec_slot_setup(th_runtime *rt, int32_t i);
/* Slot i is freed: its draft sampler goes (the drafter's KV may stay for a later prefix). */
void rt_spec_slot_release(th_runtime *rt, int32_t i);

/* Before the batch: proposals (sl->draft, sl->n_draft) for the generating slots,
 * at most budget draft tokens in all. A drafter that fails proposes nothing. */
void rt_spec_propose(th_runtime *rt, int32_t budget);
/* After slot i's verification: n drafts were verified, n_acc of them accepted
 * (its running acceptance rate and the runtime's counters; the request's own
 * counters are step.c's). */
void rt_spec_observe(th_runtime *rt, int32_t i, int32_t n, int32_t n_acc);

/* Test-only (tests/test_spec.c): when set, every draft is accepted without the
 * rejection rule — a broken sampler the distribution test must catch. */
extern bool rt_spec_test_accept_all;

#endif
