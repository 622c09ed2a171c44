/* weights.c — a loaded model's weights as precision sees them: the list of every
 * th_weight (by name), the expert slots bound at load from a file's "NAME.E"
 * tensors (so the MoE kernels index experts, never look names up), and the
 * model-owned memory of precision (th_prec_state: slot arrays, re-quantized
 * weights), freed with the model. */
#include "precision/internal.h"

#include <stdio.h>
#include <stdlib.h>

size_t th_model_weights(th_model *m, th_weight **out, size_t cap) {
    size_t n = 0;
#define PUT(w) do { if ((w)->data) { if (n < cap) out[n] = (w); n++; } } while (0)
    PUT(&m->tok_embd);
    PUT(&m->output_norm);
    PUT(&m->output);
    PUT(&m->rope_freqs);
    PUT(&m->rope_long);
    PUT(&m->rope_short);
    for (int32_t il = 0; m->layers && il < m->hp.n_layer; il++) {
        th_layer *L = &m->layers[il];
        th_weight *all[] = {
            &L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk, &L->bv, &L->bo, &L->wqkv, &L->bqkv,
            &L->q_norm, &L->k_norm, &L->post_attn_norm, &L->attn_sinks, &L->wq_a, &L->q_a_norm, &L->wq_b,
            &L->wkv_a_mqa, &L->kv_a_norm, &L->wkv_b, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down,
            &L->post_ffn_norm, &L->router, &L->router_b, &L->exp_probs_b, &L->gate_exps, &L->up_exps, &L->down_exps,
            &L->gate_exps_b, &L->up_exps_b, &L->down_exps_b, &L->gate_shexp, &L->up_shexp, &L->down_shexp,
        };
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) PUT(all[k]);
    }
#undef PUT
    return n;
}

th_status th_prec_state_get(th_model *m, th_prec_state **out) {
    if (!m->prec && !(m->prec = calloc(1, sizeof *m->prec))) return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    *out = m->prec;
    return TH_OK;
}

th_status th_prec_own(th_model *m, void *p) {
    th_prec_state *ps;
    th_status s = th_prec_state_get(m, &ps);
    if (s) { free(p); return s; }
    if (ps->n_bufs == ps->cap_bufs) {
        size_t nc = ps->cap_bufs ? ps->cap_bufs * 2 : 16;
        void **nb = realloc(ps->bufs, nc * sizeof *nb);
        if (!nb) { free(p); return th_set_error(TH_ERR_NOMEM, "precision: out of memory"); }
        ps->bufs = nb;
        ps->cap_bufs = nc;
    }
    ps->bufs[ps->n_bufs++] = p;
    return TH_OK;
}

void th_prec_model_free(th_model *m) {
    th_prec_state *ps = m->prec;
    if (!ps) return;
    th_prec_live_stop(m);
    for (size_t i = 0; i < ps->n_bufs; i++) free(ps->bufs[i]);
    free(ps->bufs);
    free(ps);
    m->prec = NULL;
}

th_status th_prec_slots(th_model *m, th_weight *w, th_expert_slot **out) {
    if (!w->experts) {
        th_expert_slot *sl = calloc((size_t)TH_MAX(w->ne2, 1), sizeof *sl);
        if (!sl) return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
        th_status s = th_prec_own(m, sl);
        if (s) return s;
        w->experts = sl;
    }
    *out = w->experts;
    return TH_OK;
}

/* The model's weights named `name` (a name can back more than one view). */
static size_t weights_named(th_model *m, const char *name, th_weight **out, size_t cap) {
    th_weight *all[4096];
    th_weight **list = all;
    size_t n = th_model_weights(m, NULL, 0), k = 0;
    if (n > sizeof all / sizeof all[0] && !(list = malloc(n * sizeof *list))) return 0;
    th_model_weights(m, list, n);
    for (size_t i = 0; i < n; i++)
        if (list[i]->name && !strcmp(list[i]->name, name) && k < cap) out[k++] = list[i];
    if (list != all) free(list);
    return k;
}

th_status th_prec_bind_experts(th_model *m) {
    const gguf_file *f = m->file;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *x = &f->tensors[i];
        uint64_t b;
        uint32_t e;
        if (!th_prec_expert_tensor(f, x, &b, &e)) continue;
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)f->tensors[b].name.len, f->tensors[b].name.ptr);
        th_weight *ws[4];
        size_t nw = weights_named(m, name, ws, 4);
        const th_type_info *ti = th_type_info_get(x->type);
        if (nw == 0)
            return th_set_error(TH_ERR_FORMAT, "tensor '%s.%u': an expert's own copy of '%s', which the model does not use",
                                name, e, name);
        if (!ti || !ti->supported)
            return th_set_error(TH_ERR_UNSUPPORTED, "tensor '%s.%u': weight type %s is not supported", name, e,
                                th_type_name(x->type));
        for (size_t k = 0; k < nw; k++) {
            th_expert_slot *sl;
            th_status s = th_prec_slots(m, ws[k], &sl);
            if (s) return s;
            uint64_t rb;
            th_row_bytes(x->type, x->ne[0], &rb);   /* validated by the reader */
            sl[e] = (th_expert_slot){ .data = x->data, .type = x->type, .row_bytes = (size_t)rb };
        }
    }
    return TH_OK;
}
