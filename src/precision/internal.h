/* internal.h — precision's parts that reach into the model (weights.c, apply.c,
 * live.c): the model-owned state and the helpers model_load.c calls. */
#ifndef TH_PRECISION_INTERNAL_H
#define TH_PRECISION_INTERNAL_H

#include "model.h"
#include "precision/precision.h"

struct th_prec_live;

/* th_model.prec: what precision owns in a model. */
typedef struct th_prec_state {
    void **bufs;                 /* malloc'd memory freed with the model: slot arrays, re-quantized weights */
    size_t n_bufs, cap_bufs;
    struct th_prec_live *live;   /* the live assignment (live.c), or NULL */
} th_prec_state;

/* One change of a model's weights: a whole tensor or one expert's slot gets new bytes. */
typedef struct th_prec_change {
    char *name;                  /* the (base) tensor's name */
    int32_t expert;              /* -1: the whole tensor */
    uint32_t type;
    bool clear;                  /* expert: drop its own copy (it reads the tensor's slice again) */
    const void *restore;         /* back to the model file's own type (a whole tensor, or an expert:
                                  * its "NAME.E" tensor or its slice): the file's mapped bytes (not
                                  * re-quantized: the file's encoder may differ from ours) */
    void *data;                  /* the new bytes (malloc'd; the model takes them at the swap) */
    size_t row_bytes;
    uint64_t bytes;
} th_prec_change;

typedef struct th_prec_plan {
    th_prec_change *ch;
    size_t n, cap;
    uint64_t bytes;              /* re-quantized bytes in all */
} th_prec_plan;

/* The model's current assignment over pf's tensors (its weights' types and slots). */
th_status th_prec_model_assign(th_model *m, const th_prec_file *pf, th_prec_assign *cur);
/* Everything that differs from cur to want, re-quantized from src (rows on n_threads
 * threads; progress: a line a tensor on stderr). Does not touch the model. */
th_status th_prec_make_plan(th_model *m, const struct gguf_file *src, const th_prec_file *pf, const th_prec_assign *cur,
                            const th_prec_assign *want, int n_threads, bool progress, th_prec_plan *p);
/* Point the model's weights at the plan's bytes (which the model then owns); bytes
 * they replace that precision owned are freed. Never under a running forward pass. */
th_status th_prec_swap(th_model *m, th_prec_plan *p);
void th_prec_plan_free(th_prec_plan *p);

/* Every weight with data, in a fixed order; returns the count (out may be NULL). */
size_t th_model_weights(th_model *m, th_weight **out, size_t cap);
th_status th_prec_state_get(th_model *m, th_prec_state **out);
/* Hand p (malloc'd) to the model; on failure p is freed. */
th_status th_prec_own(th_model *m, void *p);
/* w's expert slots (made, all empty, on first use). */
th_status th_prec_slots(th_model *m, th_weight *w, th_expert_slot **out);
/* At load: every "NAME.E" tensor of the file becomes expert E's slot of NAME's weights. */
th_status th_prec_bind_experts(th_model *m);
/* At load: params' precision config re-quantizes from the source what differs (apply.c). */
th_status th_prec_apply_load(th_model *m, const th_model_params *params);
/* Stop the live assignment's worker (live.c); called by th_prec_model_free. */
void th_prec_live_stop(th_model *m);
void th_prec_model_free(th_model *m);

#endif
