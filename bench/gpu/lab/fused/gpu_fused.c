/* gpu_fused.c — host side of the fused single-token decode (fused.cu): which
 * models it takes (and why not, in the verbose set-up line), the per-layer
 * descriptors it reads on the device, its attention split, and the launch. */
#include "cuda/gpu_internal.h"
#include <stdio.h>
#include <stdlib.h>

static bool same_kind(const th_cu_mat *a, const th_cu_mat *b) { return a->type == b->type && a->layout == b->layout; }

/* Every layer matrix of the kind of layer 0's first Q/K/V part, which the fused kernel takes. */
static bool layer_types_ok(const th_gpu *g) {
    const th_cu_mat *t = &g->L[0].qkv.part[0];
    if (!th_cu_fused_layer_ok(t)) return false;
    for (int i = 0; i < g->m->hp.n_layer; i++) {
        const th_cu_layer *D = &g->L[i];
        for (int k = 0; k < D->qkv.n; k++) if (!same_kind(t, &D->qkv.part[k]) || !th_cu_fused_layer_ok(&D->qkv.part[k])) return false;
        for (int k = 0; k < D->gu.n; k++) if (!same_kind(t, &D->gu.part[k]) || !th_cu_fused_layer_ok(&D->gu.part[k])) return false;
        if (!same_kind(t, &D->wo) || !same_kind(t, &D->down) || !th_cu_fused_layer_ok(&D->wo) || !th_cu_fused_layer_ok(&D->down))
            return false;
    }
    return true;
}

/* NULL when the fused kernel computes this model exactly as the op-by-op path. */
static const char *refusal(const th_gpu *g) {
    const th_hparams *hp = &g->m->hp;
    if (hp->attn_softcap > 0 || hp->final_softcap > 0) return "logit softcapping";
    if (hp->act_fn != TH_ACT_SILU && hp->act_fn != TH_ACT_GELU) return "its FFN activation";
    if (hp->head_dim % 32 || hp->head_dim_v % 32 || hp->head_dim > 256 || hp->head_dim_v > 256)
        return "its head width (a multiple of 32 up to 256 is needed)";
    if (g->E % 32 || g->att_w % 32) return "its width (a multiple of 32 is needed)";
    if (!th_cu_fused_head_ok(&g->out)) return "the output matrix's type";
    for (int i = 0; i < hp->n_layer; i++) {
        const th_cu_layer *D = &g->L[i];
        if (D->moe.n_expert) return "mixture-of-experts layers";
        if (D->mla.on) return "latent attention";
        if (D->qk_norm_full || D->post_attn_norm || D->post_ffn_norm) return "its extra norms";
        if (D->sinks || D->window) return "attention sinks or a sliding window";
        if (D->qkv.n < 1 || D->gu.n < 1 || D->gu.n > 2 || (D->gu.width / 2) % 32) return "its projection layout";
    }
    if (hp->n_layer > TH_CU_FUSED_MAX_LAYERS) return "more than 60 layers (its arguments would not fit a launch)";
    if (!layer_types_ok(g)) return "its layer weight types (one of Q4_0, Q8_0, Q4_K, F16, F32 throughout is needed)";
    return NULL;
}

/* Q/K/V biases (any of them) as one row of qkv_w floats, zeros where absent. */
static th_status qkv_bias(th_gpu *g, const th_cu_layer *D, const float **out) {
    *out = NULL;
    if (!D->bq && !D->bk && !D->bv) return TH_OK;
    float *b;
    th_status s = th_cu_alloc(g, (void **)&b, (size_t)g->qkv_w * 4, "fused decode biases");
    if (s) return s;
    const float *src[3] = { D->bq, D->bk, D->bv };
    int64_t off[3] = { 0, g->q_w, g->q_w + g->k_w }, len[3] = { g->q_w, g->k_w, g->v_w };
    cudaError_t e = cudaMemset(b, 0, (size_t)g->qkv_w * 4);
    for (int i = 0; i < 3 && !e; i++)
        if (src[i]) e = cudaMemcpy(b + off[i], src[i], (size_t)len[i] * 4, cudaMemcpyDeviceToDevice);
    if (e) return th_cu_fail(e, "fused decode biases");
    *out = b;
    return TH_OK;
}

static th_status build_layers(th_gpu *g, th_cu_fused_layer *h) {
    const int nl = g->m->hp.n_layer;
    th_status s = TH_OK;
    for (int il = 0; il < nl && !s; il++) {
        const th_cu_layer *D = &g->L[il];
        th_cu_fused_layer *F = &h[il];
        F->n_qkv = D->qkv.n;
        for (int k = 0; k < D->qkv.n; k++) { F->qkv[k] = D->qkv.part[k]; F->qkv_off[k] = D->qkv.off[k]; }
        F->F = D->gu.width / 2;
        F->gate = D->gu.part[0];
        F->up = D->gu.n == 1 ? D->gu.part[0] : D->gu.part[1];
        F->up_row0 = D->gu.n == 1 ? F->F : 0;
        F->wo = D->wo;
        F->down = D->down;
        F->attn_norm = D->attn_norm;
        F->ffn_norm = D->ffn_norm;
        F->bo = D->bo;
        F->rope = th_cu_layer_rope(g, D);
        s = qkv_bias(g, D, &F->qkv_bias);
    }
    return s;
}

/* The kernel's arguments, constant for the context (host memory: every launch
 * passes them by value). */
static th_status build_args(th_gpu *g) {
    const th_hparams *hp = &g->m->hp;
    const int32_t *d = g->d_meta;  /* tokens | pos | seq | ... (gpu.c) */
    th_cu_fused *f = g->fused_args = calloc(1, sizeof *f);
    if (!f) return th_set_error(TH_ERR_NOMEM, "out of memory");
    *f = (th_cu_fused){ .n_layer = hp->n_layer, .act = hp->act_fn, .embd = g->embd,
                        .out = g->out, .out_norm = g->out_norm, .embd_scale = hp->embd_scale, .eps = hp->norm_eps,
                        .at = th_cu_attn_view(g), .kv = th_cu_kv_view(g), .tok = d, .pos = d + g->n_batch,
                        .seq = d + 2 * g->n_batch, .x = g->x, .qkv = g->qkv, .att = g->att, .ff = g->ff,
                        .logits = g->logits, .barrier = g->barrier, .E = g->E, .q_w = g->q_w, .k_w = g->k_w,
                        .att_w = g->att_w, .max_k = g->max_k };
    const char *ov = getenv("TH_GPU_FUSED_OPT");
    f->opt = ov && *ov ? (uint32_t)strtoul(ov, NULL, 0) : TH_CU_FUSED_DEFAULT;
    const char *pv = getenv("TH_GPU_FUSED_PROF");
    if (pv && *pv == '1') {
        th_status ps = th_cu_alloc(g, (void **)&g->fused_prof, (size_t)(10 * hp->n_layer + 2) * 8, "fused decode profile");
        if (ps) return ps;
        f->prof = g->fused_prof;
    }
    f->at.n_split = th_cu_fused_splits(g->fused_blocks, hp->n_head, (int64_t)g->n_blocks * g->block, g->partial_cap,
                                       hp->head_dim_v);
    return build_layers(g, f->layers);
}

th_status th_cu_fused_init(th_gpu *g) {
    const char *v = getenv("TH_GPU_FUSED");
    g->fused_mode = v && *v ? atoi(v) : 0;  /* off by default: slower than op by op so far (bench/gpu/NOTES.md) */
    g->fused = false;
    if (g->fused_mode == 0) return TH_OK;
    const char *why = refusal(g);
    if (!why && !(g->fused_blocks = th_cu_fused_blocks(&g->L[0].qkv.part[0], g->max_k, g->sm_count, &g->fused_smem)))
        why = "its activation width (the staged vector does not fit in shared memory)";
    if (why) {
        if (g->verbose) fprintf(stderr, "theseus: GPU decode runs op by op: the fused kernel does not support %s\n", why);
        if (g->fused_mode == 2)
            return th_set_error(TH_ERR_UNSUPPORTED, "TH_GPU_FUSED=2: the fused decode kernel does not support %s", why);
        return TH_OK;
    }
    th_status s = th_cu_alloc(g, (void **)&g->barrier, sizeof(unsigned), "fused decode barrier");
    if (!s) s = build_args(g);
    if (s) return s;
    g->fused = true;
    if (g->verbose)
        fprintf(stderr, "theseus: GPU single-token decode: one fused kernel (%d blocks, %zu KiB shared memory each)\n",
                g->fused_blocks, g->fused_smem >> 10);
    return TH_OK;
}

void th_cu_fused_run(th_gpu *g, int n_out) {
    th_cu_fused_decode(&g->L[0].qkv.part[0], g->fused_args, n_out, g->fused_blocks, g->fused_smem, g->st);
}

void th_cu_fused_prof_add(th_gpu *g) {
    if (!g->fused_prof) return;
    const int nl = g->m->hp.n_layer, nb = 5 * nl, nt = 2 * nb + 2;  /* barrier exits 0..nb+1, then work-done times */
    unsigned long long t[10 * 128 + 2];
    if (nt > (int)(sizeof t / sizeof t[0]) || cudaMemcpy(t, g->fused_prof, (size_t)nt * 8, cudaMemcpyDeviceToHost)) return;
    for (int k = 1; k <= nb; k++) {
        const unsigned long long done = t[nb + 1 + k];
        g->prof_ns[(k - 1) % 5] += (double)(t[k] - t[k - 1]);
        g->prof_work_ns[(k - 1) % 5] += (double)(done - t[k - 1]);
    }
    g->prof_ns[5] += (double)(t[nb + 1] - t[nb]);
    g->prof_steps++;
}

void th_cu_fused_prof_print(const th_gpu *g) {
    if (!g->fused_prof || !g->prof_steps) return;
    const double n = (double)g->prof_steps * g->m->hp.n_layer * 1000.0;  /* ns → µs a layer */
    static const char *name[5] = { "A norm+QKV", "B attention", "C out-proj", "D norm+gate/up", "E down" };
    fprintf(stderr, "theseus: fused decode over %ld steps, µs a layer (block 0's own work / until all blocks left the barrier):",
            g->prof_steps);
    for (int p = 0; p < 5; p++) fprintf(stderr, " %s %.2f/%.2f;", name[p], g->prof_work_ns[p] / n, g->prof_ns[p] / n);
    fprintf(stderr, " output head %.2f µs a step\n", g->prof_ns[5] / g->prof_steps / 1000.0);
}
