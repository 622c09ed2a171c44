/* context.h — the backend-neutral part of a context (struct th_context): the
 * model, the parameters, the KV cache's block tables, the per-batch plan and the
 * host logits; the backend's own state hangs off `bd` (src/cpu/forward.h's
 * th_cpu, src/cuda/gpu_internal.h's th_gpu). context.c owns it. */
#ifndef TH_CONTEXT_H
#define TH_CONTEXT_H

#include "backend.h"
#include "kv.h"
#include "rstate.h"

struct th_context {
    th_model *model;
    th_context_params p;
    const th_backend *be;
    void *bd;                   /* backend data */
    th_kv kv;                   /* block tables; the K/V data too when be->kv_on_host */
    th_rstate rs;               /* recurrent layers' per-sequence state (hybrid models), on the host */
    float *logits;              /* host rows (none with logits_argmax_only on a device_argmax backend) */
    size_t logits_rows;
    int32_t *argmax;            /* device_argmax with logits_argmax_only: the rows' argmax ids */
    bool argmax_valid;          /* argmax holds the last batch's rows (logits_argmax_only, or a lazy step) */
    bool logits_pending;        /* the last batch's logits rows are still on the device (be->fetch_logits) */
    int32_t n_out_last;         /* rows of the last batch */
    int32_t *out_row;           /* batch index → logits row or -1 */
    int32_t *new_len;           /* per sequence, during a batch */
    int32_t n_last;             /* tokens in the last batch */
    int32_t *pos_buf, *seq_buf; /* filled-in positions / sequences */
    int8_t *want_buf;           /* default logits flags */
    th_observer obs;            /* th_context_set_observer's copy (its callbacks NULL: none) */
    bool *run_layer;            /* [n_layer] th_context_params.layers parsed; NULL: every layer */
    int8_t *layer_dev;          /* mixed placement (place.h): [n_layer] each layer's device, owned; NULL: none */
    const th_backend *place_be[2];   /* mixed placement: the backends of TH_DEV_CPU and TH_DEV_GPU */
    const bool *layer_on;       /* only while a backend of a mixed placement initialises: [n_layer] the
                                 * layers it runs (it may leave the others' weights alone); NULL: all */
    /* layer resume (th_context_set_layer_io): a step starts at layer x_from with X
     * read from x_in (no embedding, no earlier layers), and/or saves X as it enters
     * layer il (il = n_layer: before the output head) into x_out[il] when non-NULL */
    int32_t x_from;
    const float *x_in;
    float **x_out;
};

/* Layer resume for a caller that evaluates one fixed batch many times with weights
 * that differ only from some layer on (theseus search's sensitivity runs): from > 0
 * with x_in (n_tokens × n_embd of that batch, saved by an earlier step through
 * x_out[from]) starts the next steps at layer `from`; x_out ([n_layer + 1], entries
 * NULL or n_tokens × n_embd) saves X at each layer's entry. The K/V of the skipped
 * layers is not written: only for batches whose sequences start in them (and no
 * recurrent layers). from 0 and x_out NULL: off. TH_ERR_UNSUPPORTED on a backend
 * whose X hand-over (get_x / put_x) cannot run mid-step (the GPU's), on a
 * mixed placement, or on a hybrid model. The caller owns the buffers. */
th_status th_context_set_layer_io(th_context *c, int32_t from, const float *x_in, float **x_out);

/* Parses a layer list ("0-14", "0-9,12,20-29": indices and inclusive ranges, comma
 * separated, each inside [0, n_layer)) into run[n_layer]. TH_ERR_ARG naming the
 * offending part for anything else (empty items, a reversed range, junk). */
th_status th_parse_layer_list(const char *spec, int32_t n_layer, bool *run);

#endif
