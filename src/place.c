/* place.c — mixed CPU/GPU placement (place.h): the gpu_layers spec parser and the
 * placement backend, which owns the two real backends' states and forwards every op
 * to the backend of the current layer. block.c tells it where a layer starts (the
 * `layer` op, il = n_layer for the output head); when the layer's device differs
 * from the one holding X, X (n tokens × n_embd floats) goes device → host → device
 * through get_x / put_x. The step begins and ends on both backends (a GPU sub-context
 * records no CUDA graphs: its ops are interleaved with the CPU's). */
#include "place.h"
#include "context.h"
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ the spec */

static bool parse_num(const char **p, int32_t *out) {
    int32_t v = 0, nd = 0;
    while (**p >= '0' && **p <= '9') {
        if (++nd > 9) return false;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    *out = v;
    return nd > 0;
}

th_status th_parse_gpu_layers(const char *spec, int32_t n_layer, int8_t *dev) {
    if (!spec || !dev || n_layer < 1) return th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers): nothing to parse");
    memset(dev, TH_DEV_CPU, (size_t)n_layer);
    const char *p = spec;
    int32_t n;
    if (parse_num(&p, &n) && *p == 0) {   /* a count: the last n layers */
        for (int32_t i = 0; i < n_layer; i++) dev[i] = i >= n_layer - n ? TH_DEV_GPU : TH_DEV_CPU;
        return TH_OK;
    }
    bool *named = calloc((size_t)n_layer, 1);
    if (!named) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_status s = TH_OK;
    for (p = spec; !s;) {
        const char *item = p;
        int32_t a, b;
        if (!parse_num(&p, &a)) {
            s = th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers) '%.64s': expected a layer count or a layer index at offset %d (syntax: N, or A-B:cpu,C-D:gpu)",
                             spec, (int)(item - spec));
            break;
        }
        b = a;
        if (*p == '-') {
            p++;
            if (!parse_num(&p, &b)) {
                s = th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers) '%.64s': expected the end of the range at offset %d", spec, (int)(p - spec));
                break;
            }
        }
        int8_t d;
        if (!strncmp(p, ":cpu", 4)) d = TH_DEV_CPU;
        else if (!strncmp(p, ":gpu", 4)) d = TH_DEV_GPU;
        else {
            s = th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers) '%.64s': expected ':cpu' or ':gpu' at offset %d", spec, (int)(p - spec));
            break;
        }
        p += 4;
        if (a > b) s = th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers) '%.64s': range %d-%d is reversed", spec, a, b);
        else if (b >= n_layer)
            s = th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers) '%.64s': layer %d is outside the model's %d layers [0, %d)", spec, b, n_layer, n_layer);
        for (int32_t i = a; !s && i <= b; i++) {
            if (named[i]) s = th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers) '%.64s': layer %d is placed twice", spec, i);
            named[i] = true;
            dev[i] = d;
        }
        if (s || *p == 0) break;
        if (*p != ',') s = th_set_error(TH_ERR_ARG, "gpu_layers (--gpu-layers) '%.64s': unexpected character at offset %d", spec, (int)(p - spec));
        p++;
    }
    free(named);
    return s;
}

/* ------------------------------------------------------------------ the backend */

typedef struct th_place {
    const th_backend *be[2];
    void *bd[2];            /* each backend's own state */
    bool *on[2];            /* [n_layer]: the layers of each */
    bool began[2];
    int32_t cur;            /* the device that holds X now */
    float *xh;              /* n_batch × n_embd: X on its way between the two */
} th_place;

/* Run `call` on device d's backend: its state in c->bd for the call. */
#define ON(d, call)                                                     \
    do {                                                                \
        th_place *P_ = c->bd;                                           \
        int32_t d_ = (d);                                               \
        c->bd = P_->bd[d_];                                             \
        c->be = P_->be[d_];                                             \
        th_status r_ = P_->be[d_]->call;                                \
        c->bd = P_;                                                     \
        c->be = &th_backend_place;                                      \
        return r_;                                                      \
    } while (0)
#define CUR(call) ON(((th_place *)c->bd)->cur, call)

static th_status get_x(th_context *c, const th_step *s, int32_t d, float *x) { ON(d, get_x(c, s, x)); }
static th_status put_x(th_context *c, const th_step *s, int32_t d, const float *x) { ON(d, put_x(c, s, x)); }

/* X to device d (the device of layer il, or of the head for il = n_layer). */
static th_status pl_layer(th_context *c, const th_step *s, int32_t il) {
    th_place *P = c->bd;
    int32_t n_layer = c->model->hp.n_layer;
    int32_t d = c->layer_dev[il < n_layer ? il : n_layer - 1];
    if (d == P->cur) return TH_OK;
    th_status st = get_x(c, s, P->cur, P->xh);
    if (!st) st = put_x(c, s, d, P->xh);
    if (!st) P->cur = d;
    return st;
}

static th_status begin_one(th_context *c, const th_step *s, int32_t d, bool *replay) { ON(d, begin(c, s, replay)); }
static th_status end_one(th_context *c, const th_step *s, int32_t d, th_status status) { ON(d, end(c, s, status)); }

static th_status pl_end(th_context *c, const th_step *s, th_status status) {
    th_place *P = c->bd;
    for (int32_t d = 0; d < 2; d++)
        if (P->began[d]) {
            P->began[d] = false;
            th_status e = end_one(c, s, d, status);
            if (!status) status = e;
        }
    return status;
}

static th_status pl_begin(th_context *c, const th_step *s, bool *replay) {
    th_place *P = c->bd;
    *replay = false;
    th_status st = TH_OK;
    for (int32_t d = 0; d < 2 && !st; d++) {
        bool rep = false;
        st = begin_one(c, s, d, &rep);
        P->began[d] = !st;
        if (!st && rep) st = th_set_error(TH_ERR_INTERNAL, "mixed placement: the %s backend replayed a recorded step", P->be[d]->name);
    }
    P->cur = c->layer_dev[0];
    return st ? pl_end(c, s, st) : TH_OK;
}

static th_status pl_embed(th_context *c, const th_step *s) { CUR(embed(c, s)); }
static th_status pl_norm(th_context *c, const th_step *s, th_buf dst, th_buf src, const th_weight *w, const th_weight *next) {
    CUR(norm(c, s, dst, src, w, next));
}
static th_status pl_qkv(th_context *c, const th_step *s, int32_t il) { CUR(qkv(c, s, il)); }
static th_status pl_mla_qkv(th_context *c, const th_step *s, int32_t il) { CUR(mla_qkv(c, s, il)); }
static th_status pl_rope_kv(th_context *c, const th_step *s, int32_t il) { CUR(rope_kv(c, s, il)); }
static th_status pl_attention(th_context *c, const th_step *s, int32_t il, const th_weight *next) {
    CUR(attention(c, s, il, next));
}
static th_status pl_matmul(th_context *c, const th_step *s, th_buf dst, const th_weight *w, const th_weight *b, th_buf src,
                           bool acc) {
    CUR(matmul(c, s, dst, w, b, src, acc));
}
static th_status pl_add(th_context *c, const th_step *s, th_buf dst, th_buf src) { CUR(add(c, s, dst, src)); }
static th_status pl_ffn(th_context *c, const th_step *s, const th_weight *gate, const th_weight *up, const th_weight *down,
                        th_buf dst, bool acc) {
    CUR(ffn(c, s, gate, up, down, dst, acc));
}
static th_status pl_recurrent(th_context *c, const th_step *s, int32_t il) { CUR(recurrent(c, s, il)); }
static th_status pl_att_gate(th_context *c, const th_step *s, int32_t il) { CUR(att_gate(c, s, il)); }
static th_status pl_ffn_sub(th_context *c, const th_step *s, int32_t il, th_buf dst, bool acc) {
    CUR(ffn_sub(c, s, il, dst, acc));
}
static th_status pl_moe(th_context *c, const th_step *s, int32_t il) { CUR(moe(c, s, il)); }
static th_status pl_shexp_gated(th_context *c, const th_step *s, int32_t il) { CUR(shexp_gated(c, s, il)); }
static th_status pl_logits(th_context *c, const th_step *s) { CUR(logits(c, s)); }

static void copy_one(th_context *c, int32_t d, int32_t dst, int32_t src) {
    th_place *P = c->bd;
    c->bd = P->bd[d];
    c->be = P->be[d];
    P->be[d]->copy_block(c, dst, src);
    c->bd = P;
    c->be = &th_backend_place;
}

static void pl_copy_block(th_context *c, int32_t dst, int32_t src) {
    th_place *P = c->bd;
    for (int32_t d = 0; d < 2; d++)
        if (P->be[d]->copy_block && P->bd[d]) copy_one(c, d, dst, src);
}

static void pl_free(th_context *c) {
    th_place *P = c->bd;
    if (!P) return;
    for (int32_t d = 0; d < 2; d++) {
        if (P->be[d] && P->bd[d]) {
            c->bd = P->bd[d];
            c->be = P->be[d];
            P->be[d]->free(c);
        }
        free(P->on[d]);
    }
    free(P->xh);
    free(P);
    c->bd = NULL;
    c->be = &th_backend_place;
}

/* Every layer's ops exist on the backend it is placed on. */
static th_status check_layers(const th_context *c, const th_place *P) {
    const th_model *m = c->model;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const th_layer *L = &m->layers[il];
        const th_backend *be = P->be[c->layer_dev[il]];
        const char *what = L->recurrent && !be->recurrent ? "a recurrent (DeltaNet) layer"
                         : L->q_gated && !be->att_gate ? "a gated attention layer"
                         : L->gate_inp_shexp.data && !be->shexp_gated ? "a layer with gated shared experts"
                         : L->wkv_a_mqa.data && !be->mla_qkv ? "a latent-attention layer"
                         : L->ffn_sub_norm.data && !be->ffn_sub ? "a layer with sub-norms (bitnet)" : NULL;
        if (what)
            return th_set_error(TH_ERR_UNSUPPORTED, "gpu_layers (--gpu-layers): layer %d is %s, which the %s backend does not run yet; place it on the %s",
                                il, what, be->name, P->be[1 - c->layer_dev[il]]->name);
    }
    for (int32_t d = 0; d < 2; d++)
        if (!P->be[d]->get_x || !P->be[d]->put_x)
            return th_set_error(TH_ERR_UNSUPPORTED, "gpu_layers (--gpu-layers): the %s backend cannot hand the hidden state over", P->be[d]->name);
    return TH_OK;
}

static th_status init_one(th_context *c, int32_t d) {
    th_place *P = c->bd;
    c->bd = NULL;
    c->be = P->be[d];
    c->layer_on = P->on[d];
    th_status s = P->be[d]->init(c);
    P->bd[d] = c->bd;
    c->bd = P;
    c->be = &th_backend_place;
    c->layer_on = NULL;
    return s;
}

static th_status pl_init(th_context *c) {
    int32_t n_layer = c->model->hp.n_layer;
    th_place *P = calloc(1, sizeof *P);
    if (!P) return th_set_error(TH_ERR_NOMEM, "out of memory");
    c->bd = P;
    for (int32_t d = 0; d < 2; d++) {
        P->be[d] = c->place_be[d];
        if (!(P->on[d] = calloc((size_t)n_layer, sizeof(bool)))) return th_set_error(TH_ERR_NOMEM, "out of memory");
    }
    for (int32_t il = 0; il < n_layer; il++) P->on[c->layer_dev[il]][il] = true;
    th_status s = check_layers(c, P);
    if (s) return s;
    if (!(P->xh = malloc((size_t)c->p.n_batch * (size_t)c->model->hp.n_embd * sizeof(float) + 1)))
        return th_set_error(TH_ERR_NOMEM, "out of memory for the hand-over rows");
    for (int32_t d = 0; d < 2 && !s; d++) s = init_one(c, d);
    return s;
}

static th_status pl_probe(char *desc, size_t cap) {
    if (desc && cap) snprintf(desc, cap, "CPU + GPU (mixed placement)");
    return TH_OK;
}

const th_backend th_backend_place = {
    .name = "cpu+gpu", .kv_on_host = true, .device_argmax = false,
    .probe = pl_probe, .init = pl_init, .free = pl_free, .begin = pl_begin, .end = pl_end,
    .embed = pl_embed, .norm = pl_norm, .qkv = pl_qkv, .mla_qkv = pl_mla_qkv, .rope_kv = pl_rope_kv,
    .attention = pl_attention, .matmul = pl_matmul, .add = pl_add, .ffn = pl_ffn, .moe = pl_moe,
    .logits = pl_logits, .set_observer = NULL, .copy_block = pl_copy_block,
    .recurrent = pl_recurrent, .att_gate = pl_att_gate, .shexp_gated = pl_shexp_gated,
    .layer = pl_layer, .ffn_sub = pl_ffn_sub,
};
