/* mla.c — multi-head latent attention (DeepSeek-V2/V3) on the CPU: produces the
 * per-head q, k, v of a batch so the generic rope, cache and attention
 * (backend.c, attention.c) run over them unchanged.
 *
 *   q      = Wq·h, or Wq_b·norm(Wq_a·h) with a q LoRA     per head [q_nope; q_pe]
 *   [c; p] = Wkv_a·h;  c = norm(c)                        latent c, one shared rope head p
 *   [k_nope; v] = Wkv_b·c                                 per head
 *   q = [q_nope; q_pe],  k = [k_nope; p]           per head, not yet roped
 *
 * The rope op (backend.c) then ropes the last n_rot dims of every q and k head:
 * each head's copy of p gets the same rope, so this is rope(p) once, shared.
 * The cache holds the expanded k and v (as llama.cpp's non-absorbed path does). */
#include "cpu/forward.h"

void th_mla_project(th_cpu *c, int32_t il, int32_t n) {
    const th_model *m = c->model;
    const th_hparams *hp = &m->hp;
    const th_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, H = hp->n_head, hd = hp->head_dim, hdv = hp->head_dim_v;
    int64_t nope = hp->n_embd_head_nope, rot = hp->n_rot, R = hp->kv_lora_rank;
    int64_t kvb_w = H * (nope + hdv), a_w = R + rot, qa = hp->q_lora_rank;
    /* wide scratch: [kv_a (R + rot) | latent (R) | kv_b (H·(nope+hdv)) | q_a (qa)] per token */
    float *kva = c->wide, *lat = kva + n * a_w, *kvb = lat + n * R, *qab = kvb + n * kvb_w;
    if (L->wq_a.data) {
        th_fwd_matmul(c, &L->wq_a, 0, c->h, E, n, qab, qa);
        th_fwd_norm_rows(c, qab, qab, &L->q_a_norm, n, qa);
        th_fwd_matmul(c, &L->wq_b, 0, qab, qa, n, c->q, c->q_w);
    } else {
        th_fwd_matmul(c, &L->wq, 0, c->h, E, n, c->q, c->q_w);
    }
    th_fwd_matmul(c, &L->wkv_a_mqa, 0, c->h, E, n, kva, a_w);
    for (int32_t t = 0; t < n; t++)
        th_op_rmsnorm(lat + t * R, kva + t * a_w, L->kv_a_norm.data, R, hp->norm_eps);
    th_fwd_matmul(c, &L->wkv_b, 0, lat, R, n, kvb, kvb_w);
    for (int32_t t = 0; t < n; t++) {
        const float *pe = kva + t * a_w + R;
        for (int64_t h = 0; h < H; h++) {
            float *k = c->kc + t * c->k_w + h * hd, *v = c->vc + t * c->v_w + h * hdv;
            const float *src = kvb + t * kvb_w + h * (nope + hdv);
            memcpy(k, src, (size_t)nope * sizeof(float));
            memcpy(k + nope, pe, (size_t)rot * sizeof(float));
            memcpy(v, src + nope, (size_t)hdv * sizeof(float));
        }
    }
}
