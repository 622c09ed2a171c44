/* gpu_mla.c — multi-head latent attention (DeepSeek-V2/V3, non-absorbed
 * tensors) on the CUDA backend, the device twin of src/cpu/mla.c: its scratch and
 * the projections that fill a layer's Q/K/V rows (g->qkv: q | k | v, the layout
 * a dense layer's fused projection gives), so that the backend's rope + KV
 * store and its attention then run unchanged:
 *   q           = Wq·h, or Wq_b·norm(Wq_a·h) with a q LoRA   per head [q_nope; q_pe]
 *   [c; p]      = Wkv_a·h;  c = norm(c)                      latent c, shared rope head p
 *   [k_nope; v] = Wkv_b·c                                    per head
 *   k           = [k_nope; p] per head (th_cu_mla_kv)
 * th_cu_rope_store then ropes the last n_rot dims of every q and k head
 * (rope_off = nope): each head's copy of p gets the rope the CPU applies once
 * (same arithmetic, same values). The KV cache holds the expanded K and V, as
 * the CPU's path caches them (th_kv's widths H·(nope+rot) and H·hdv).
 * Through the GEMV, each input is quantized to q8 right before the products
 * that read it (h, then the q LoRA row, then the latent). */
#include "cuda/gpu_internal.h"

th_status th_cu_mla_alloc(th_gpu *g) {
    const th_hparams *hp = &g->m->hp;
    if (hp->kv_lora_rank < 1) return TH_OK;
    size_t B = g->n_batch, R = (size_t)hp->kv_lora_rank, rot = (size_t)hp->n_rot;
    size_t kvb_w = (size_t)hp->n_head * (size_t)(hp->n_embd_head_nope + hp->head_dim_v);
    struct { float **p; size_t count; } a[] = {
        { &g->mla_kva, B * (R + rot) }, { &g->mla_lat, B * R }, { &g->mla_kvb, B * kvb_w },
        { &g->mla_qa, B * (size_t)TH_MAX(hp->q_lora_rank, 1) },
    };
    th_status s;
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if ((s = th_cu_alloc(&g->mem, (void **)a[i].p, a[i].count * sizeof(float), "latent attention scratch"))) return s;
    return TH_OK;
}

static const th_cu_mat *mat_of(const th_weight *w) { return w->data ? &th_cu_w(w)->mat : NULL; }
static bool wants_q8(bool gemm, const th_cu_mat *w) { return !gemm && w && th_cu_gemv_wants_q8(w); }

/* q of n tokens into g->qkv's q columns, straight from h or through the q LoRA. */
static th_status mla_q(th_gpu *g, const th_layer *L, bool gemm, int n) {
    const th_hparams *hp = &g->m->hp;
    int64_t E = g->E, qa = hp->q_lora_rank;
    th_status s;
    if (!L->wq_a.data) return th_cu_mm(g, gemm, mat_of(&L->wq), g->h, E, n, g->qkv, g->qkv_w, false);
    if ((s = th_cu_mm(g, gemm, mat_of(&L->wq_a), g->h, E, n, g->mla_qa, qa, false))) return s;
    th_cu_rmsnorm(g->mla_qa, qa, NULL, th_cu_w(&L->q_a_norm)->vec, hp->norm_eps, n, qa, g->mla_qa, qa,
                  wants_q8(gemm, mat_of(&L->wq_b)) ? &g->q8 : NULL, g->st);
    return th_cu_mm(g, gemm, mat_of(&L->wq_b), g->mla_qa, qa, n, g->qkv, g->qkv_w, false);
}

th_status th_cu_mla_qkv(th_gpu *g, const th_layer *L, bool gemm, int n) {
    const th_hparams *hp = &g->m->hp;
    int64_t E = g->E, R = hp->kv_lora_rank, a_w = R + hp->n_rot;
    int64_t kvb_w = (int64_t)hp->n_head * (hp->n_embd_head_nope + hp->head_dim_v);
    const th_cu_mat *wkv_a = mat_of(&L->wkv_a_mqa), *wkv_b = mat_of(&L->wkv_b);
    th_status s;
    if (wants_q8(gemm, wkv_a) || wants_q8(gemm, mat_of(&L->wq)) || wants_q8(gemm, mat_of(&L->wq_a)))
        th_cu_quantize_q8(g->h, E, n, E, &g->q8, g->st);
    if ((s = th_cu_mm(g, gemm, wkv_a, g->h, E, n, g->mla_kva, a_w, false))) return s;
    if ((s = mla_q(g, L, gemm, n))) return s;
    th_cu_rmsnorm(g->mla_kva, a_w, NULL, th_cu_w(&L->kv_a_norm)->vec, hp->norm_eps, n, R, g->mla_lat, R,
                  wants_q8(gemm, wkv_b) ? &g->q8 : NULL, g->st);
    if ((s = th_cu_mm(g, gemm, wkv_b, g->mla_lat, R, n, g->mla_kvb, kvb_w, false))) return s;
    th_cu_mla_kv(g->mla_kvb, g->mla_kva + R, a_w, n, hp->n_head, hp->n_embd_head_nope, hp->n_rot, hp->head_dim_v,
                 g->qkv + g->q_w, g->qkv + g->q_w + g->k_w, g->qkv_w, g->st);
    return TH_OK;
}
