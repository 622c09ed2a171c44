/* block.c — the decoder block, written once. Every architecture we run is this
 * sequence of ops (backend.h) with the options its descriptor set on th_layer
 * and th_hparams; a backend implements the ops, never the order:
 *
 *   X = embed(tokens) · embd_scale
 *   per layer (a recurrent layer of a hybrid model replaces the attention lines:
 *              H = norm(X); ATT = DeltaNet(H, the sequence's state); X += ATT·Wout):
 *     H = norm(X)                                   attn_norm
 *     Q, K, V = H·Wq, H·Wk, H·Wv (+ biases)         or fused Wqkv, or latent attention (MLA)
 *     q/k norms, rope(Q, K), K and V into the cache
 *     ATT = softmax(Q·Kᵀ·scale [softcap, window, sinks]) · V  [· sigmoid(gate)] [sub-norm]
 *     X += [post_attn_norm](ATT·Wo + bo)
 *     H = norm(X)                                   ffn_norm
 *     X += [post_ffn_norm](FFN(H))                  FFN = down([sub-norm] act(H·Wgate) ⊙ H·Wup),
 *                                                   or routed experts (+ shared experts
 *                                                   [· sigmoid(H·w)])
 *   logits = norm(X)·Wout [final softcap], only for the tokens that asked
 *
 * A new norm placement or sub-layer is a few lines here plus, if it needs a new
 * op, one entry per backend. */
#include "context.h"

#define OP(name, ...)                                          \
    do {                                                       \
        th_status s_ = c->be->name(c, st, __VA_ARGS__);        \
        if (s_) return s_;                                     \
    } while (0)

/* The matrix that reads the attention input first (a hint for norm). */
static const th_weight *qkv_reader(const th_layer *L) {
    if (L->wkv_a_mqa.data) return NULL;             /* latent attention makes its own inputs */
    return L->wqkv.data ? &L->wqkv : &L->wq;
}

/* H = attn_norm(X); Q, K, V; rope and cache; attention; X += [post_norm](ATT·Wo + bo). */
static th_status attention(th_context *c, const th_step *st, int32_t il) {
    const th_layer *L = &c->model->layers[il];
    OP(norm, TH_BUF_H, TH_BUF_X, &L->attn_norm, qkv_reader(L));
    if (L->wkv_a_mqa.data) OP(mla_qkv, il);
    else OP(qkv, il);
    OP(rope_kv, il);
    OP(attention, il, L->q_gated || L->attn_sub_norm.data ? NULL : &L->wo);
    if (L->q_gated) OP(att_gate, il);
    if (L->attn_sub_norm.data) OP(norm, TH_BUF_ATT, TH_BUF_ATT, &L->attn_sub_norm, &L->wo);   /* bitnet */
    if (!L->post_attn_norm.data) {
        OP(matmul, TH_BUF_X, &L->wo, &L->bo, TH_BUF_ATT, true);
        return TH_OK;
    }
    OP(matmul, TH_BUF_T, &L->wo, &L->bo, TH_BUF_ATT, false);
    OP(norm, TH_BUF_T, TH_BUF_T, &L->post_attn_norm, NULL);
    OP(add, TH_BUF_X, TH_BUF_T);
    return TH_OK;
}

/* H = attn_norm(X); ATT = the gated DeltaNet mixer over H with each sequence's
 * recurrent state (conv window, delta-rule state); X += ATT·Wout. */
static th_status recurrent(th_context *c, const th_step *st, int32_t il) {
    const th_layer *L = &c->model->layers[il];
    OP(norm, TH_BUF_H, TH_BUF_X, &L->attn_norm, L->ssm_in.data ? &L->ssm_in : &L->ssm_qkv);
    OP(recurrent, il);
    OP(matmul, TH_BUF_X, &L->ssm_out, &L->bo, TH_BUF_ATT, true);
    return TH_OK;
}

/* H = ffn_norm(X); X += [post_norm](FFN(H)): a dense gated FFN, or routed experts
 * plus (when the layer has them) shared experts. */
static th_status feed_forward(th_context *c, const th_step *st, int32_t il) {
    const th_layer *L = &c->model->layers[il];
    bool moe = L->router.data != NULL, shared = moe && L->gate_shexp.data;
    const th_weight *gate = moe ? &L->gate_shexp : L->w_gate.data ? &L->w_gate : NULL;
    const th_weight *up = moe ? &L->up_shexp : &L->w_up, *down = moe ? &L->down_shexp : &L->w_down;
    OP(norm, TH_BUF_H, TH_BUF_X, &L->ffn_norm, moe ? (shared ? gate : NULL) : gate ? gate : up);
    if (L->ffn_sub_norm.data) {   /* bitnet: a norm between the GLU and down */
        OP(ffn_sub, il, TH_BUF_X, true);
        return TH_OK;
    }
    if (!moe && !L->post_ffn_norm.data) {
        OP(ffn, gate, up, down, TH_BUF_X, true);
        return TH_OK;
    }
    if (moe) {
        OP(moe, il);
        if (shared && L->gate_inp_shexp.data) OP(shexp_gated, il);
        else if (shared) OP(ffn, gate, up, down, TH_BUF_T, true);
    } else {
        OP(ffn, gate, up, down, TH_BUF_T, false);
    }
    if (L->post_ffn_norm.data) OP(norm, TH_BUF_T, TH_BUF_T, &L->post_ffn_norm, NULL);
    OP(add, TH_BUF_X, TH_BUF_T);
    return TH_OK;
}

static th_status run_ops(th_context *c, const th_step *st) {
    /* layer resume (th_context_set_layer_io): X given at layer x_from, or saved */
    int32_t l0 = c->x_from > 0 ? c->x_from : 0;
    th_status s = l0 > 0 ? c->be->put_x(c, st, c->x_in) : c->be->embed(c, st);
    if (s) return s;
    for (int32_t il = l0; il < c->model->hp.n_layer; il++) {
        if (c->x_out && c->x_out[il] && (s = c->be->get_x(c, st, c->x_out[il]))) return s;
        if (c->run_layer && !c->run_layer[il]) continue;   /* a layer-skip draft (context.c) */
        if (c->be->layer && (s = c->be->layer(c, st, il))) return s;   /* mixed placement (place.c) */
        s = c->model->layers[il].recurrent ? recurrent(c, st, il) : attention(c, st, il);
        if (!s) s = feed_forward(c, st, il);
        if (s) return s;
    }
    if (c->be->layer && (s = c->be->layer(c, st, c->model->hp.n_layer))) return s;
    if (c->x_out && c->x_out[c->model->hp.n_layer] && (s = c->be->get_x(c, st, c->x_out[c->model->hp.n_layer])))
        return s;
    return c->be->logits(c, st);
}

th_status th_block_forward(th_context *c, const th_step *st) {
    bool replay = false;
    th_status s = c->be->begin(c, st, &replay);
    if (s) return s;
    if (!replay) s = run_ops(c, st);
    return c->be->end(c, st, s);
}
