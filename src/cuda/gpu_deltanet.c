/* gpu_deltanet.c — the CUDA backend's hybrid-model ops (backend.h: recurrent,
 * att_gate, shexp_gated, rs_restore, rs_copy) and their device state: one copy
 * of the context's th_rstate (rstate.h: per sequence and recurrent layer the conv
 * window then the Nv × Dk × Dk delta-rule state; n_snap snapshots a sequence) in
 * device memory, the per-token snapshot slots and the batch's distinct sequences
 * staged with the batch metadata (so a CUDA graph replays them), and scratch.
 * The host th_rstate keeps the snapshot tags (th_rs_commit / th_rs_truncate
 * decide what is kept); truncate and copy then move the device data here.
 *
 * A recurrent layer: projections through th_cu_mm (qwen35: [ssm_qkv | ssm_gate]
 * and [ssm_beta | ssm_alpha], each pair one joint matrix when the types match;
 * qwen3next: ssm_in and ssm_ba as stored), then deltanet.cu's conv, delta rule
 * and gated output norm into ATT (the block then adds ATT·ssm_out to X). The delta
 * rule's form (deltanet.h): recurrent for decode and short runs, chunked (dn_chunk.cu)
 * once a sequence has TH_CU_DN_CHUNK_MIN tokens in a batch that is not a graph
 * (deltanet.h). */
#include "cuda/gpu_internal.h"
#include "cuda/deltanet.h"
#include <stdlib.h>

struct th_cu_hyb {
    int32_t *slot;              /* host, n_layer: the layer's recurrent slot, or -1 */
    int32_t *kv_slot;           /* host, n_layer: the layer's KV-cache layer, or -1 */
    int32_t *last;              /* host, n_seq: staging (a sequence's last token so far, -1) */
    float *cur, *snap;          /* device state, th_rstate's layout */
    float *in, *ba, *u;         /* scratch rows: projections (in_w), gates (2·Nv), conv outputs (Cd) */
    float *prep;                /* the delta rule's pre-pass: Nk + 3·Nv a token */
    float *wide, *gate;         /* gated attention: projections (wide_w), gates (q_w) */
    float *shx;                 /* gated shared experts: the expert's output (E) */
    int64_t in_w, wide_w;
    size_t meta_off;            /* ints into the batch metadata: per token its snapshot slot (or -1), then
                                 * th_cu_dn_batch's list, first, nxt, ord, off, ch_start, ch_len, ch_off;
                                 * n_batch each */
    int max_run, n_chunk;       /* the staged batch's most tokens of one sequence, its chunks */
    float *wy;                  /* the chunked delta rule's scratch (TH_CU_DN_WY_FLOATS a token), or NULL */
};

static const float *dvec(const th_weight *w) { return w->data && w->dev ? th_cu_w(w)->vec : NULL; }

th_status th_cu_hyb_init(th_gpu *g) {
    const th_model *m = g->m;
    const th_hparams *hp = &m->hp;
    const th_rstate *rs = &g->c->rs;
    bool gated = false, shexp = false;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        gated |= m->layers[il].q_gated;
        shexp |= m->layers[il].gate_inp_shexp.data != NULL;
    }
    if (hp->n_recurrent == 0 && !gated && !shexp) return TH_OK;
    th_cu_hyb *y = calloc(1, sizeof *y);
    if (!y) return th_set_error(TH_ERR_NOMEM, "out of memory");
    g->hyb = y;
    size_t B = g->n_batch;
    th_status s;
    if (gated) {
        y->wide_w = 2 * g->q_w + g->k_w + g->v_w;
        if ((s = th_cu_alloc(&g->mem, (void **)&y->wide, B * y->wide_w * 4, "gated attention scratch")) ||
            (s = th_cu_alloc(&g->mem, (void **)&y->gate, B * g->q_w * 4, "gated attention scratch")))
            return s;
    }
    if (shexp && (s = th_cu_alloc(&g->mem, (void **)&y->shx, B * g->E * 4, "shared expert scratch"))) return s;
    if (hp->n_recurrent == 0) return TH_OK;
    if (rs->n_rec != hp->n_recurrent)
        return th_set_error(TH_ERR_INTERNAL, "GPU: the recurrent state has %d layers, the model %d", rs->n_rec, hp->n_recurrent);
    if (hp->ssm_d_state > TH_CU_DN_MAX_DK)
        return th_set_error(TH_ERR_UNSUPPORTED, "DeltaNet head width %d: the CUDA kernel takes at most %d", hp->ssm_d_state,
                            TH_CU_DN_MAX_DK);
    int64_t dk = hp->ssm_d_state, kd = dk * hp->ssm_n_group, vd = dk * hp->ssm_dt_rank, nv = hp->ssm_dt_rank;
    y->in_w = 2 * kd + 2 * vd;
    if (!(y->slot = malloc((size_t)hp->n_layer * sizeof(int32_t))) || !(y->kv_slot = malloc((size_t)hp->n_layer * sizeof(int32_t))) ||
        !(y->last = malloc((size_t)g->n_seq * sizeof(int32_t))))
        return th_set_error(TH_ERR_NOMEM, "out of memory");
    for (int32_t q = 0; q < g->n_seq; q++) y->last[q] = -1;
    for (int32_t il = 0, r = 0, k = 0; il < hp->n_layer; il++) {
        y->slot[il] = m->layers[il].recurrent ? r++ : -1;
        y->kv_slot[il] = m->layers[il].recurrent ? -1 : k++;
    }
    y->meta_off = g->meta_count;
    g->meta_count += 9 * B;
    size_t cur = (size_t)rs->n_seq * (size_t)rs->per_seq, snap = cur * (size_t)rs->n_snap;
    if ((s = th_cu_alloc(&g->mem, (void **)&y->cur, cur * 4, "the recurrent state")) ||
        (snap && (s = th_cu_alloc(&g->mem, (void **)&y->snap, snap * 4, "the recurrent state's snapshots"))) ||
        (s = th_cu_alloc(&g->mem, (void **)&y->in, B * y->in_w * 4, "DeltaNet scratch")) ||
        (s = th_cu_alloc(&g->mem, (void **)&y->ba, B * 2 * nv * 4, "DeltaNet scratch")) ||
        (s = th_cu_alloc(&g->mem, (void **)&y->u, B * (2 * kd + vd) * 4, "DeltaNet scratch")) ||
        (s = th_cu_alloc(&g->mem, (void **)&y->prep, B * (hp->ssm_n_group + 3 * nv) * 4, "DeltaNet scratch")))
        return s;
    if (dk <= 128 &&   /* the chunked form takes these */
        (s = th_cu_alloc(&g->mem, (void **)&y->wy, B * (size_t)TH_CU_DN_WY_FLOATS(vd, nv) * 4, "DeltaNet chunk scratch")))
        return s;
    cudaError_t e = cudaMemsetAsync(y->cur, 0, cur * 4, g->st);
    return e ? th_cu_fail(e, "recurrent state set-up") : TH_OK;
}

void th_cu_hyb_free(th_gpu *g) {
    th_cu_hyb *y = g->hyb;
    if (!y) return;
    free(y->slot);
    free(y->kv_slot);
    free(y->last);
    free(y);
    g->hyb = NULL;
}

int th_cu_dn_order(int n, const int32_t *seq, const int32_t *snap, int32_t *last, th_cu_dn_order_out *o) {
    int ns = 0, max_run = 0, nc = 0;
    for (int t = 0; t < n; t++) {
        int32_t q = seq[t];
        o->nxt[t] = -1;
        if (last[q] < 0) { o->first[ns] = t; o->list[ns++] = q; }
        else o->nxt[last[q]] = t;
        last[q] = t;
    }
    for (int i = 0, p = 0; i < ns; i++) {
        o->off[i] = p;
        o->ch_off[i] = nc;
        int len = 0;
        for (int t = o->first[i]; t >= 0; t = o->nxt[t]) {
            if (len == 0) o->ch_start[nc] = p;
            o->ord[p++] = t;
            if (++len == TH_CU_DN_CHUNK_LEN || snap[t] >= 0) o->ch_len[nc++] = len, len = 0;
        }
        if (len) o->ch_len[nc++] = len;
        if (p - o->off[i] > max_run) max_run = p - o->off[i];
        last[o->list[i]] = -1;
    }
    for (int i = ns; i < n; i++) o->list[i] = o->first[i] = -1, o->off[i] = n, o->ch_off[i] = nc;
    for (int c = nc; c < n; c++) o->ch_start[c] = o->ch_len[c] = 0;   /* a grid of n chunks: the rest exit */
    o->n_chunk = nc;
    return max_run;
}

/* Per token the snapshot slot its state goes to (the state after each of the last
 * n_snap positions of its sequence, as the CPU's want_snap), and the batch's
 * sequences as the delta rule walks them, into the metadata staging. */
void th_cu_hyb_stage(th_gpu *g, const th_context *c, const th_step *s) {
    th_cu_hyb *y = g->hyb;
    if (!y || !y->slot) return;
    int32_t B = (int32_t)g->n_batch, n_snap = c->rs.n_snap;
    int32_t *snap = g->h_meta + y->meta_off, *m = snap + B;
    for (int t = 0; t < s->n; t++) {
        int32_t q = s->seq[t], p = s->pos[t];
        snap[t] = n_snap > 0 && p + 1 > c->new_len[q] - n_snap ? q * n_snap + (p + 1) % n_snap : -1;
    }
    th_cu_dn_order_out o = { m, m + B, m + 2 * B, m + 3 * B, m + 4 * B, m + 5 * B, m + 6 * B, m + 7 * B, 0 };
    y->max_run = th_cu_dn_order(s->n, s->seq, snap, y->last, &o);
    y->n_chunk = o.n_chunk;
}

int32_t th_cu_kv_layer(const th_gpu *g, int32_t il) {
    return g->kv_slot ? g->kv_slot[il] : il;   /* gpu.c: this backend's attention layers only */
}

static th_cu_dn layer_dn(const th_gpu *g, const th_layer *L, int32_t r) {
    const th_hparams *hp = &g->m->hp;
    const th_rstate *rs = &g->c->rs;
    th_cu_dn d = { .dk = hp->ssm_d_state, .nk = hp->ssm_n_group, .nv = hp->ssm_dt_rank, .C = hp->ssm_d_conv,
                   .fused = L->ssm_in.data != NULL, .repeat = hp->ssm_repeat != 0, .eps = hp->norm_eps,
                   .conv_w = dvec(&L->ssm_conv1d), .dt = dvec(&L->ssm_dt), .A = dvec(&L->ssm_a), .norm = dvec(&L->ssm_norm),
                   .cur = g->hyb->cur, .snap = g->hyb->snap, .per_seq = rs->per_seq, .scratch = g->hyb->prep, .wy = g->hyb->wy,
                   .layer_off = (int64_t)r * (rs->conv_n + rs->ssm_n), .conv_n = rs->conv_n };
    d.ratio = d.nv / (d.nk > 0 ? d.nk : 1);
    d.kd = (int64_t)d.dk * d.nk;
    d.vd = (int64_t)d.dk * d.nv;
    d.cd = 2 * d.kd + d.vd;
    return d;
}

static void att_written(th_gpu *g, th_buf b) { if (g->q8_of == (int)b) g->q8_of = -1; }

th_status th_cu_op_recurrent(th_context *c, const th_step *s, int32_t il) {
    th_gpu *g = c->bd;
    th_cu_hyb *y = g->hyb;
    const th_layer *L = &g->m->layers[il];
    if (!y || !y->slot || y->slot[il] < 0)
        return th_set_error(TH_ERR_INTERNAL, "GPU: layer %d is not a recurrent layer of this context", il);
    th_cu_dn d = layer_dn(g, L, y->slot[il]);
    int n = g->f.n;
    int64_t bas = 2 * (int64_t)d.nv;
    th_status st;
    if (d.fused) {
        const th_weight *a = &L->ssm_in, *b = &L->ssm_ba;
        if ((st = th_cu_group_mm(g, &a, 1, TH_BUF_H, y->in, y->in_w)) || (st = th_cu_group_mm(g, &b, 1, TH_BUF_H, y->ba, bas)))
            return st;
    } else {
        const th_weight *qz[2] = { &L->ssm_qkv, &L->ssm_gate }, *ba[2] = { &L->ssm_beta, &L->ssm_alpha };
        if ((st = th_cu_group_mm(g, qz, 2, TH_BUF_H, y->in, y->in_w)) || (st = th_cu_group_mm(g, ba, 2, TH_BUF_H, y->ba, bas)))
            return st;
    }
    const int32_t *m = g->d_meta + y->meta_off;
    size_t B = g->n_batch;
    /* a graph replays this step for any sequence mix: the recurrent form there */
    th_cu_dn_batch b = { .seq = g->f.seq, .snap = m, .list = m + B, .first = m + 2 * B, .nxt = m + 3 * B, .ord = m + 4 * B,
                         .off = m + 5 * B, .ch_start = m + 6 * B, .ch_len = m + 7 * B, .ch_off = m + 8 * B,
                         .n_chunk = g->f.graph ? n : y->n_chunk, .n = n, .n_seq = g->n_seq,
                         .max_run = g->f.graph ? 0 : y->max_run };
    th_cu_dn_conv(&d, y->in, y->in_w, n, g->f.seq, m, y->u, g->st);
    th_cu_dn_rule(&d, y->u, y->ba, bas, &b, g->att, g->att_w, g->st);
    th_cu_dn_output(&d, g->att, g->att_w, y->in, y->in_w, n, g->st);
    att_written(g, TH_BUF_ATT);
    return TH_OK;
}

/* Q, K, V of a gated attention layer: [q; gate] per head, K, V as one product, split. */
th_status th_cu_hyb_qkv_gated(th_gpu *g, const th_layer *L) {
    th_cu_hyb *y = g->hyb;
    if (!y || !y->wide) return th_set_error(TH_ERR_INTERNAL, "GPU: no gated attention scratch");
    const th_weight *ws[3] = { &L->wq, &L->wk, &L->wv };
    th_status st = th_cu_group_mm(g, ws, 3, TH_BUF_H, y->wide, y->wide_w);
    if (st) return st;
    const th_hparams *hp = &g->m->hp;
    th_cu_split_qgate(y->wide, y->wide_w, g->f.n, hp->n_head, hp->head_dim, g->k_w + g->v_w, g->qkv, g->qkv_w, y->gate, g->st);
    return TH_OK;
}

th_status th_cu_op_att_gate(th_context *c, const th_step *s, int32_t il) {
    th_gpu *g = c->bd;
    if (!g->hyb || !g->hyb->gate) return th_set_error(TH_ERR_INTERNAL, "GPU: layer %d: no attention gates", il);
    th_cu_sigmoid_mul(g->att, g->att_w, g->hyb->gate, g->q_w, g->f.n, g->st);
    att_written(g, TH_BUF_ATT);
    return TH_OK;
}

/* T += sigmoid(H·w) ⊙ down(silu(H·gate) ⊙ H·up) of layer il's shared expert. */
th_status th_cu_op_shexp_gated(th_context *c, const th_step *s, int32_t il) {
    th_gpu *g = c->bd;
    const th_layer *L = &g->m->layers[il];
    th_cu_hyb *y = g->hyb;
    const float *w = dvec(&L->gate_inp_shexp);
    if (!y || !y->shx || !w) return th_set_error(TH_ERR_INTERNAL, "GPU: layer %d: no gated shared expert", il);
    const th_weight *gu[2] = { &L->gate_shexp, &L->up_shexp };
    th_status st = th_cu_group_mm(g, gu, 2, TH_BUF_H, g->gu, g->gu_w);
    if (st) return st;
    int64_t F = L->down_shexp.ne0;
    const th_cu_mat *down = &th_cu_w(&L->down_shexp)->mat;
    bool q8 = !g->f.gemm && th_cu_gemv_wants_q8(down);
    th_cu_glu(g->gu, g->gu_w, F, g->f.n, g->m->hp.act_fn, g->ff, F, q8 ? &g->q8 : NULL, g->st);
    g->q8_of = -1;   /* g->q8 holds the GLU's output */
    if ((st = th_cu_mm(g, g->f.gemm, down, g->ff, F, g->f.n, y->shx, g->E, false))) return st;
    th_cu_shexp_gate(g->tmp, g->h, y->shx, w, g->E, g->f.n, g->st);
    att_written(g, TH_BUF_T);
    return TH_OK;
}

/* Truncate's device half: the state of seq from snapshot slot `slot` (or zero, slot < 0). */
th_status th_cu_rs_restore(th_context *c, int32_t seq, int32_t slot) {
    th_gpu *g = c->bd;
    const th_rstate *rs = &c->rs;
    if (!g || !g->hyb || !g->hyb->cur) return TH_OK;
    size_t per = (size_t)rs->per_seq;
    float *dst = g->hyb->cur + (size_t)seq * per;
    cudaError_t e = slot < 0 ? cudaMemsetAsync(dst, 0, per * 4, g->st)
                             : cudaMemcpyAsync(dst, g->hyb->snap + ((size_t)seq * rs->n_snap + (size_t)slot) * per, per * 4,
                                               cudaMemcpyDeviceToDevice, g->st);
    return e ? th_cu_fail(e, "recurrent state truncate") : TH_OK;
}

/* Sequence copy's device half: state and snapshots of src into dst. */
th_status th_cu_rs_copy(th_context *c, int32_t dst, int32_t src) {
    th_gpu *g = c->bd;
    const th_rstate *rs = &c->rs;
    if (!g || !g->hyb || !g->hyb->cur || dst == src) return TH_OK;
    size_t per = (size_t)rs->per_seq, ns = (size_t)rs->n_snap;
    cudaError_t e = cudaMemcpyAsync(g->hyb->cur + (size_t)dst * per, g->hyb->cur + (size_t)src * per, per * 4,
                                    cudaMemcpyDeviceToDevice, g->st);
    if (!e && ns)
        e = cudaMemcpyAsync(g->hyb->snap + (size_t)dst * ns * per, g->hyb->snap + (size_t)src * ns * per, ns * per * 4,
                            cudaMemcpyDeviceToDevice, g->st);
    return e ? th_cu_fail(e, "recurrent state copy") : TH_OK;
}
