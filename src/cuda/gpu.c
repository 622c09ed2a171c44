/* gpu.c — the CUDA backend's op table (backend.h): device set-up, the KV block
 * pool and scratch of a context, and each op of the decoder block as kernel
 * launches on one stream. Small batches (decode, batched decode) run the
 * matrix-vector kernels and are captured once per (tokens, outputs) shape into
 * a CUDA graph that begin() replays for every later step, skipping the ops;
 * large batches (prefill) run the GEMM path eagerly (where a MoE layer reads its
 * expert choice back to group the experts' GEMMs, gpu_moe.c). Matrices whose
 * GEMV reads 8-bit activations get them from the op that made the input when
 * the block names the reader (norm's `next`, attention's wo), else from one
 * quantize kernel in front of the product. Every CUDA call is checked; an
 * out-of-memory error names the buffer and the sizes. */
#include "cuda/gpu_internal.h"
#include "cpu/ops.h"
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ basics */

th_status th_cu_fail(cudaError_t e, const char *what) {
    cudaGetLastError(); /* clear a non-sticky error */
    if (e == cudaErrorMemoryAllocation)
        return th_set_error(TH_ERR_NOMEM, "CUDA out of memory during %s", what);
    return th_set_error(TH_ERR_INTERNAL, "CUDA error during %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

th_status th_cu_alloc(th_cu_allocs *a, void **p, size_t bytes, const char *what) {
    *p = NULL;
    if (a->n == a->cap) {
        size_t nc = a->cap ? 2 * a->cap : 256;
        void **na = realloc(a->p, nc * sizeof *na);
        if (!na) return th_set_error(TH_ERR_NOMEM, "out of memory");
        a->p = na;
        a->cap = nc;
    }
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        *p = NULL;
        return th_set_error(TH_ERR_NOMEM, "CUDA out of memory allocating %.1f MiB for %s (%.1f MiB already allocated here; the GPU has %.1f MiB free of %.1f MiB)",
                            (double)bytes / (1 << 20), what, (double)a->bytes / (1 << 20),
                            (double)fr / (1 << 20), (double)tot / (1 << 20));
    }
    a->p[a->n++] = *p;
    a->bytes += bytes;
    return TH_OK;
}

void th_cu_allocs_free(th_cu_allocs *a) {
    for (size_t i = 0; i < a->n; i++) cudaFree(a->p[i]);
    free(a->p);
    memset(a, 0, sizeof *a);
}

/* The MMA kernels' batch range (mma_q8.cu, mma_f16.cu): GEMV-path batches from
 * TH_CU_MMA_MIN tokens, GEMM-path batches up to TH_CU_MMA_MAX. From the H200 lab
 * (bench_gpu lab q8_0, 8B matrices, 2026-12-02): the MMA kernel ties the GEMV at
 * 8 tokens and beats it from 16 (gate+up 114 vs 182 us), beats cuBLAS's
 * dequantize+GEMM up to 64 (310 vs 572 us) and ties it at 128. The staged form
 * (2026-12-03, the default since) beats cuBLAS up to 128 tokens on every 8B matrix
 * (gate+up 408 vs 576 us, down 209 vs 305) and loses at 256 (769 vs 605): MMA_MAX 128.
 * The prompt-sized form (mma_q8g.cu, from TH_CU_MMA_PROMPT_MIN tokens), 2026-12-03,
 * us at 256 tokens vs cuBLAS: Q4_0 gate+up 442 vs 601, down 219 vs 318, qkv 96 vs
 * 139; Q4_K 557 vs 594, 276 vs 315, 124 vs 138; at 512 it loses on some (Q4_K
 * gate+up 841 vs 660; Q4_0 qkv 189 vs 157, a 1.5-wave grid): MMA_MAX 256 then. Since
 * the GEMM path's dequantization runs per type (dequant.cu; 2026-12-04, bench_gpu
 * lab q4_0), cuBLAS beats mma_q8g from 128 tokens on every 8B matrix but gate+up
 * (us at 128: attn-out 40.7 vs 64.9, qkv 53.9 vs 65.1, down 127.6 vs 219.5, gate+up
 * 227.2 vs 191.2; a layer 449 vs 541; at 256 all four) and loses to mma_q8n at 64
 * (gate+up 222.1 vs 102.8, down 121.3 vs 86.9): MMA_MAX 64, mma_q8g no longer taken
 * by default. The F16/BF16 kernel only with tuning.mma_f16. */
#define TH_CU_MMA_MIN 12   /* at 12 tokens the MMA kernel beat the GEMV on every 8B matrix (Q4_0, Q8_0) */
#define TH_CU_MMA_MAX 64
/* The narrow form (mma_q8n.cu: Q4_0 / Q8_0 / Q4_K, up to TH_CU_MMA_NARROW_MAX tokens) from 8 tokens: H200 lab
 * 2026-12-04, 8B Q4_0 gate+up at 8 tokens 42.1 us against the GEMV's 84.6 (at 4: the GEMV, 36.3 vs 50.7) */
#define TH_CU_MMA_NARROW_MIN 8
/* F16/BF16 GEMV-path batches from 2 tokens on cuBLAS with the weights in place (lab, 8B F16
 * gate+up: 16 tokens 62.3 us against the GEMV's 555.5 and mma_f16's 99.1; 2 tokens 57.6 vs 78.5) */
#define TH_CU_F16_CUBLAS_MIN 2
#define TUNING_DEFAULT                                                                                      \
    { .gemm_min = 33, .graphs = true, .pdl = true, .attn_chunk = 0, .moe_gemv_only = false,                  \
      .moe_order_min = 0, .moe_group_min = 0, .mma_min = TH_CU_MMA_MIN, .mma_max = TH_CU_MMA_MAX,            \
      .narrow_min = TH_CU_MMA_NARROW_MIN, .f16_cublas_min = TH_CU_F16_CUBLAS_MIN, .attn_simt = false,        \
      .attn_tile_min = TH_CU_ATTN_TILE_MIN, .attn_group_blocks = TH_CU_ATTN_GROUP_BLOCKS }
static th_cu_tuning tuning = TUNING_DEFAULT;
th_cu_tuning th_cu_tuning_default(void) {
    return (th_cu_tuning)TUNING_DEFAULT;
}
th_cu_tuning th_cu_tuning_get(void) { return tuning; }
void th_cu_tuning_set(const th_cu_tuning *t) { tuning = t ? *t : th_cu_tuning_default(); }

/* The device: TH_GPU_DEVICE (documented in the README), default 0. */
static int device_index(void) {
    const char *dv = getenv("TH_GPU_DEVICE");
    return dv && *dv ? atoi(dv) : 0;
}

static th_status gpu_probe(char *desc, size_t cap) {
    if (desc && cap) desc[0] = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e || n == 0) {
        cudaGetLastError();
        return th_set_error(TH_ERR_UNSUPPORTED, "no CUDA GPU available (%s)", e ? cudaGetErrorString(e) : "no devices");
    }
    int dev = device_index();
    if (dev < 0 || dev >= n) return th_set_error(TH_ERR_ARG, "TH_GPU_DEVICE=%d but there are %d CUDA devices", dev, n);
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, dev))) return th_cu_fail(e, "cudaGetDeviceProperties");
    if (p.major < 7)
        return th_set_error(TH_ERR_UNSUPPORTED, "CUDA device %d (%s) has compute capability %d.%d; theseus needs 7.0 or newer",
                            dev, p.name, p.major, p.minor);
    if (desc && cap)
        snprintf(desc, cap, "%s (compute %d.%d, %d SMs, %.0f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
                 (double)p.totalGlobalMem / (1u << 30));
    return TH_OK;
}

static th_gpu *gpu(th_context *c) { return c->bd; }
static const th_cu_mat *mat(const th_weight *w) { return &th_cu_w(w)->mat; }
static const float *vec(const th_weight *w) { return w && w->data && w->dev ? th_cu_w(w)->vec : NULL; }
static bool wants_q8(const th_gpu *g, const th_cu_mat *m) { return !g->f.gemm && th_cu_gemv_wants_q8(m); }

/* Whether a batch of n rows takes the GEMM path (cuBLAS / tile attention / grouped
 * experts); never in a batch-invariant context (see mm_invariant). */
static bool gemm_mode(const th_gpu *g, int n) { return !g->invariant && n >= g->tune.gemm_min; }

/* ------------------------------------------------------------------ set-up */

static int64_t mat_elems(const th_cu_mat *w) { return w->rows * w->K; }

/* A batch-invariant context splits every (token, head)'s positions into chunks of
 * one fixed length, whatever the step's size, so each row's attention adds up in
 * the same order: bi_split chunks of bi_chunk cover the whole cache, and the
 * partials of graph_max tokens fit the buffer. */
static void plan_invariant(th_gpu *g, int64_t cap_len) {
    const th_hparams *hp = &g->m->hp;
    size_t per_split = (size_t)TH_MAX(g->graph_max, 1) * (size_t)hp->n_head * (size_t)(hp->head_dim_v + 2);
    int64_t max_split = TH_MAX((int64_t)(g->partial_cap / per_split), 1);
    int64_t chunk = TH_MAX((int64_t)256, (cap_len + max_split - 1) / max_split);
    chunk = (chunk + 31) / 32 * 32;
    g->bi_chunk = (int32_t)chunk;
    g->bi_split = (int32_t)((cap_len + chunk - 1) / chunk);
}

static th_status alloc_scratch(th_gpu *g) {
    size_t B = g->n_batch;
    th_status s;
    const th_cu_store *S = g->m->dev_store;
    int64_t big = 0;
    for (size_t i = 0; i < S->n_recs; i++)
        if (S->recs[i].mat.data) big = TH_MAX(big, mat_elems(&S->recs[i].mat));
    g->wbuf_bytes = TH_MIN((size_t)big * 2, (size_t)256 << 20);
    g->wbuf_bytes = TH_MAX(g->wbuf_bytes, (size_t)g->max_k * 2);
    const th_hparams *hp = &g->m->hp;
    int64_t cap_len = (int64_t)g->n_blocks * g->block;
    size_t need = (size_t)TH_MAX(g->graph_max, 1) * (size_t)hp->n_head * (size_t)((cap_len + 63) / 64) * (size_t)(hp->head_dim_v + 2);
    g->partial_cap = TH_MAX(TH_MIN(need, (size_t)32 << 20), (size_t)1 << 20);
    if (g->invariant) plan_invariant(g, cap_len);
    size_t out_rows = TH_MIN(B, (size_t)64);
    struct { void **p; size_t bytes; const char *what; } a[] = {
        { (void **)&g->x, B * g->E * 4, "activations" }, { (void **)&g->h, B * g->E * 4, "activations" },
        { (void **)&g->tmp, B * g->E * 4, "activations" }, { (void **)&g->tmp2, B * g->E * 4, "activations" },
        { (void **)&g->qkv, B * g->qkv_w * 4, "Q/K/V scratch" },
        { (void **)&g->att, B * g->att_w * 4, "attention scratch" }, { (void **)&g->gu, B * g->gu_w * 4, "FFN scratch" },
        { (void **)&g->ff, B * g->F * 4, "FFN scratch" }, { (void **)&g->hout, out_rows * g->E * 4, "output scratch" },
        { (void **)&g->logits, out_rows * g->V * 4, "logits" }, { (void **)&g->partial, g->partial_cap * 4, "attention partials" },
        { (void **)&g->counter, B * (size_t)hp->n_head * 4, "attention counters" },
        { (void **)&g->q8.q, B * g->max_k, "quantized activations" }, { (void **)&g->q8.d, B * (g->max_k / 32 + 1) * 4, "quantized activations" },
        { (void **)&g->q8.s, B * (g->max_k / 32 + 1) * 4, "quantized activations" }, { &g->wbuf, g->wbuf_bytes, "GEMM weight tiles" },
        { &g->xbuf, B * g->max_k * 2, "GEMM activations" }, { (void **)&g->d_meta, g->meta_count * 4, "batch metadata" },
        { (void **)&g->d_argmax, B * 4, "argmax ids" },
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if ((s = th_cu_alloc(&g->mem, a[i].p, a[i].bytes, a[i].what))) return s;
    if ((s = th_cu_moe_alloc(g)) || (s = th_cu_mla_alloc(g))) return s;
    cudaError_t e = cudaMallocHost((void **)&g->h_meta, g->meta_count * 4);
    if (!e) e = cudaMallocHost((void **)&g->h_argmax, B * 4);
    if (e) return th_cu_fail(e, "pinned host buffers");
    return TH_OK;
}

/* Widths every layer must agree on, and the widest FFN. */
static th_status shapes(th_gpu *g) {
    const th_model *m = g->m;
    const th_hparams *hp = &m->hp;
    g->E = hp->n_embd;
    g->q_w = (int64_t)hp->n_head * hp->head_dim;
    g->k_w = (int64_t)hp->n_head_kv * hp->head_dim;
    g->v_w = (int64_t)hp->n_head_kv * hp->head_dim_v;
    g->qkv_w = g->q_w + g->k_w + g->v_w;
    g->att_w = (int64_t)hp->n_head * hp->head_dim_v;
    g->V = hp->n_vocab;
    for (int i = 0; i < hp->n_layer; i++) {
        const th_layer *L = &m->layers[i];
        if (g->c->layer_on && !g->c->layer_on[i]) continue;   /* another backend's layer (place.c) */
        int64_t qkv = L->wqkv.data ? L->wqkv.ne1 : L->wq.ne1 + L->wk.ne1 + L->wv.ne1;
        if (L->q_gated) qkv -= g->q_w;   /* wq: [q; gate] per head */
        if (!L->wkv_a_mqa.data && !L->recurrent && qkv != g->qkv_w)
            return th_set_error(TH_ERR_FORMAT, "layer %d: Q/K/V weights give %lld outputs, expected %lld", i,
                                (long long)qkv, (long long)g->qkv_w);
        if (L->router.data) g->F = TH_MAX(g->F, L->gate_shexp.ne1);
        else g->F = TH_MAX(g->F, L->w_gate.data ? L->w_gate.ne1 : L->w_up.ne1 / 2);
    }
    g->gu_w = 2 * g->F;
    g->att_w = TH_MAX(g->att_w, (int64_t)hp->ssm_dt_rank * hp->ssm_d_state);   /* a DeltaNet output (gpu_deltanet.c) */
    g->max_k = TH_MAX(TH_MAX(g->E, g->F), TH_MAX(g->att_w, TH_MAX(hp->q_lora_rank, hp->kv_lora_rank)));
    return TH_OK;
}

static th_status gpu_init(th_context *c) {
    th_status s = gpu_probe(NULL, 0);
    if (s) return s;
    const th_model *m = c->model;
    const th_hparams *hp = &m->hp;
    if (hp->head_dim > 256 || hp->head_dim_v > 256 || hp->n_head % hp->n_head_kv)
        return th_set_error(TH_ERR_UNSUPPORTED, "CUDA backend: head shape %d/%d (heads %d/%d) is not supported (head width at most 256)",
                            hp->head_dim, hp->head_dim_v, hp->n_head, hp->n_head_kv);
    th_gpu *g = calloc(1, sizeof *g);
    if (!g) return th_set_error(TH_ERR_NOMEM, "out of memory");
    c->bd = g;
    g->c = c;
    g->m = m;
    g->tune = tuning;
    g->device = device_index();
    cudaError_t e = cudaSetDevice(g->device);
    if (!e) e = cudaDeviceGetAttribute(&g->sm_count, cudaDevAttrMultiProcessorCount, g->device);
    if (!e) e = cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking);
    if (e) return th_cu_fail(e, "device set-up");
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return th_set_error(TH_ERR_INTERNAL, "cuBLAS could not be initialised");
    g->cublas = h;
    if ((s = th_cu_weights_upload_layers(c->model, false, c->layer_on)) || (s = shapes(g))) return s;
    g->rope_freqs = vec(th_model_rope_factors(c->model, c->p.n_ctx));
    g->n_batch = c->p.n_batch;
    g->tune.gemm_min = TH_MAX(1, g->tune.gemm_min);
    g->tune.attn_chunk = g->tune.attn_chunk / 32 * 32;
    th_cu_set_pdl(g->tune.pdl);
    g->graph_max = TH_MIN(TH_MIN(g->tune.gemm_min - 1, (int)g->n_batch), 64);
    if (g->graph_max < 1) g->tune.graphs = false;
    if (c->layer_on) g->tune.graphs = false;   /* a mixed placement interleaves the CPU's ops */
    g->block = c->kv.block;
    g->n_blocks = (int32_t)c->kv.n_blocks;
    g->n_seq = (int32_t)c->p.n_seq_max;
    g->invariant = c->p.batch_invariant;
    g->kv_f16 = c->kv.f16;
    /* K/V room only for this backend's attention layers: a mixed placement's other
     * device holds the rest (place.c), and a hybrid model's recurrent layers keep none */
    int32_t n_kv = hp->n_layer;
    if (c->layer_on || hp->n_recurrent > 0) {
        if (!(g->kv_slot = malloc((size_t)hp->n_layer * sizeof(int32_t)))) return th_set_error(TH_ERR_NOMEM, "out of memory");
        n_kv = 0;
        for (int32_t il = 0; il < hp->n_layer; il++)
            g->kv_slot[il] = (!c->layer_on || c->layer_on[il]) && !g->m->layers[il].recurrent ? n_kv++ : -1;
        n_kv = TH_MAX(n_kv, 1);
    }
    g->block_bytes = (size_t)n_kv * (size_t)g->block * (size_t)(g->k_w + g->v_w) * (g->kv_f16 ? 2 : 4);
    g->meta_count = 4 * (size_t)g->n_batch + (size_t)g->n_seq * g->n_blocks;
    g->q8_of = -1;
    if ((s = th_cu_hyb_init(g))) return s;   /* hybrid models: adds to meta_count */
    if ((s = th_cu_alloc(&g->mem, &g->kv_pool, g->block_bytes * g->n_blocks, "the KV cache")) || (s = alloc_scratch(g)))
        return s;
    if ((e = cudaMemset(g->counter, 0, (size_t)g->n_batch * hp->n_head * 4))) return th_cu_fail(e, "scratch set-up");
    if (g->tune.f16_cublas_min > 0) {  /* cuBLAS inside graph capture: a workspace of its own, allocated now */
        void *ws = NULL;
        const size_t wsb = (size_t)32 << 20;
        if ((s = th_cu_alloc(&g->mem, &ws, wsb, "the cuBLAS workspace"))) return s;
        if (cublasSetWorkspace(h, ws, wsb) != CUBLAS_STATUS_SUCCESS)
            return th_set_error(TH_ERR_INTERNAL, "cuBLAS: cannot set a workspace");
    }
    return TH_OK;
}

static void gpu_free(th_context *c) {
    th_gpu *g = c->bd;
    if (!g) return;
    if (g->st) cudaStreamSynchronize(g->st);
    for (int i = 0; i < g->n_graphs; i++) cudaGraphExecDestroy(g->graphs[i].exec);
    th_cu_allocs_free(&g->mem);
    if (g->h_meta) cudaFreeHost(g->h_meta);
    if (g->h_logits) cudaFreeHost(g->h_logits);
    if (g->h_argmax) cudaFreeHost(g->h_argmax);
    if (g->h_moe) cudaFreeHost(g->h_moe);
    if (g->cublas) cublasDestroy((cublasHandle_t)g->cublas);
    free(g->kv_slot);
    th_cu_hyb_free(g);
    if (g->st) cudaStreamDestroy(g->st);
    cudaGetLastError();
    free(g);
    c->bd = NULL;
}

static void gpu_copy_block(th_context *c, int32_t dst, int32_t src) {
    th_gpu *g = c->bd;
    if (!g || dst < 0 || src < 0 || dst >= g->n_blocks || src >= g->n_blocks) return;
    cudaMemcpyAsync((char *)g->kv_pool + (size_t)dst * g->block_bytes, (char *)g->kv_pool + (size_t)src * g->block_bytes,
                    g->block_bytes, cudaMemcpyDeviceToDevice, g->st);
}

/* ------------------------------------------------------------------ products */

/* A batch-invariant context (g->invariant) runs every batch size through one kernel
 * family, the GEMV (8 tokens a launch; each row's sums in the same order for every
 * width), so a row's result never depends on how many rows share its step. Such
 * contexts never take the GEMM path (gemm_mode), so the q8 activations were made by
 * the op that wrote x. (The int8 MMA kernel is row-invariant too, but at one row it
 * ran at half the GEMV's speed on the H200 — 8B Q8_0 gate+up 65.6 vs 34.6 us — and
 * single-stream speculative decoding lives on one-row and few-row steps.) */
static th_status mm_invariant(th_gpu *g, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y, int64_t ys,
                              bool acc) {
    th_cu_gemv(w, x, xs, th_cu_gemv_wants_q8(w) ? &g->q8 : NULL, n, y, ys, acc, g->st);
    return TH_OK;
}

static bool is_16bit(const th_cu_mat *w) { return w->layout == TH_CU_GGUF && (w->type == TH_F16 || w->type == TH_BF16); }

static th_status cublas_mm(th_gpu *g, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y, int64_t ys,
                           bool acc) {
    if (!th_cu_gemm(g->cublas, w, x, xs, n, y, ys, acc, g->wbuf, g->wbuf_bytes, g->xbuf, g->st))
        return th_set_error(TH_ERR_INTERNAL, "cuBLAS GEMM failed (%s, %lld×%lld, %d tokens)", th_type_name(w->type),
                            (long long)w->rows, (long long)w->K, n);
    return TH_OK;
}

/* y (+)= W·x for n tokens. gemm: the forward pass is on the GEMM path (eager, no
 * q8 activations made ahead). The choice per weight type and batch size is
 * th_cu_tuning's (measured: bench/gpu/NOTES.md). */
th_status th_cu_mm(th_gpu *g, bool gemm, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y,
                   int64_t ys, bool acc) {
    if (g->invariant) return mm_invariant(g, w, x, xs, n, y, ys, acc);
    if (is_16bit(w)) {
        if (g->tune.mma_f16 && n > 1 && (gemm ? n <= g->tune.mma_max : n >= g->tune.mma_min) &&
            th_cu_mma_f16(w, x, xs, n, y, ys, acc, g->st))
            return TH_OK;  /* F16/BF16 weights in place on the 16-bit tensor cores */
        /* cuBLAS on the weights in place: the GEMM path, or a GEMV-path batch (graphs too) from f16_cublas_min */
        if (gemm || (g->tune.f16_cublas_min > 0 && n >= g->tune.f16_cublas_min)) return cublas_mm(g, w, x, xs, n, y, ys, acc);
    }
    const bool mma = th_cu_mma_q8_supports(w);
    if (gemm && mma && n <= g->tune.mma_max) {  /* int8 tensor cores on q8 activations, no fp16 copy */
        th_cu_quantize_q8(x, xs, n, w->K, &g->q8, g->st);
        g->q8_of = -1;  /* g->q8 no longer holds any buffer's q8 form */
        th_cu_mma_q8(w, &g->q8, n, y, ys, acc, g->st);
        return TH_OK;
    }
    if (!gemm && mma && n > 1 && (n >= g->tune.mma_min || (n >= g->tune.narrow_min && th_cu_mma_q8n_supports(w)))) {
        /* the q8 activations are already there */
        th_cu_mma_q8(w, &g->q8, n, y, ys, acc, g->st);
        return TH_OK;
    }
    if (gemm) return cublas_mm(g, w, x, xs, n, y, ys, acc);
    th_cu_gemv(w, x, xs, th_cu_gemv_wants_q8(w) ? &g->q8 : NULL, n, y, ys, acc, g->st);
    return TH_OK;
}

static float *buf(th_gpu *g, th_buf b) {
    switch (b) {
    case TH_BUF_X: return g->x;
    case TH_BUF_H: return g->h;
    case TH_BUF_T: return g->tmp;
    default: return g->att;
    }
}
static int64_t buf_width(const th_gpu *g, th_buf b) { return b == TH_BUF_ATT ? g->att_w : g->E; }

/* g->q8 holds the q8 form of buffer b (made now unless the op that wrote b made
 * it): K values a row, the width of the matrix that reads it (less than the
 * buffer's for ATT when a hybrid model's DeltaNet output is wider than its attention). */
static void need_q8(th_gpu *g, th_buf b, int64_t K) {
    if (g->q8_of == (int)b) return;
    th_cu_quantize_q8(buf(g, b), buf_width(g, b), g->f.n, K, &g->q8, g->st);
    g->q8_of = (int)b;
}
/* b is being written: a q8 form of it is stale. */
static void wrote(th_gpu *g, th_buf b) { if (g->q8_of == (int)b) g->q8_of = -1; }

/* y = W·x of a group of weights reading x (q|k|v, gate|up): the leader's joint
 * matrix, else each into its column offset; q8 of src first when a GEMV wants it. */
static th_status group_mm(th_gpu *g, const th_weight *const *ws, int n, th_buf src, float *y, int64_t ys) {
    const th_cu_weight *lead = th_cu_w(ws[0]);
    if (!g->f.gemm && lead->group_q8) need_q8(g, src, lead->mat.K);
    const float *x = buf(g, src);
    int64_t xs = buf_width(g, src);
    if (lead->joint == n) return th_cu_mm(g, g->f.gemm, &lead->mat, x, xs, g->f.n, y, ys, false);
    th_status s;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        if ((s = th_cu_mm(g, g->f.gemm, mat(ws[i]), x, xs, g->f.n, y + off, ys, false))) return s;
        off += ws[i]->ne1;
    }
    return TH_OK;
}

th_status th_cu_group_mm(th_gpu *g, const th_weight *const *ws, int n, th_buf src, float *y, int64_t ys) {
    return group_mm(g, ws, n, src, y, ys);
}

/* ------------------------------------------------------------------ ops */

static th_status op_embed(th_context *c, const th_step *s) {
    th_gpu *g = gpu(c);
    th_cu_dequant_rows(mat(&g->m->tok_embd), g->f.tok, 0, g->f.n, g->x, g->E, false, g->m->hp.embd_scale, g->st);
    wrote(g, TH_BUF_X);
    return TH_OK;
}

static th_status op_norm(th_context *c, const th_step *s, th_buf dst, th_buf src, const th_weight *w,
                         const th_weight *next) {
    th_gpu *g = gpu(c);
    int64_t E = buf_width(g, dst);
    bool q8 = !g->f.gemm && next && next->dev && th_cu_w(next)->group_q8;
    wrote(g, dst);
    th_cu_rmsnorm(buf(g, src), E, NULL, vec(w), g->m->hp.norm_eps, g->f.n, E, buf(g, dst), E, q8 ? &g->q8 : NULL, g->st);
    if (q8) g->q8_of = (int)dst;
    return TH_OK;
}

static th_status op_add(th_context *c, const th_step *s, th_buf dst, th_buf src) {
    th_gpu *g = gpu(c);
    wrote(g, dst);
    th_cu_add_rows(buf(g, dst), buf(g, src), buf_width(g, dst), buf_width(g, dst), g->f.n, g->st);
    return TH_OK;
}

static th_status op_qkv(th_context *c, const th_step *s, int32_t il) {
    th_gpu *g = gpu(c);
    const th_layer *L = &g->m->layers[il];
    int n = g->f.n;
    th_status st;
    if (L->wqkv.data) {
        const th_weight *w = &L->wqkv;
        if ((st = group_mm(g, &w, 1, TH_BUF_H, g->qkv, g->qkv_w))) return st;
        const float *b = vec(&L->bqkv);
        if (b) {
            th_cu_add_bias(g->qkv, g->qkv_w, b, g->q_w, n, g->st);
            th_cu_add_bias(g->qkv + g->q_w, g->qkv_w, b + g->q_w, g->k_w, n, g->st);
            th_cu_add_bias(g->qkv + g->q_w + g->k_w, g->qkv_w, b + g->q_w + g->k_w, g->v_w, n, g->st);
        }
        return TH_OK;
    }
    if (L->q_gated) return th_cu_hyb_qkv_gated(g, L);   /* [q; gate] per head (gpu_deltanet.c) */
    const th_weight *ws[3] = { &L->wq, &L->wk, &L->wv };
    if ((st = group_mm(g, ws, 3, TH_BUF_H, g->qkv, g->qkv_w))) return st;
    if (vec(&L->bq)) th_cu_add_bias(g->qkv, g->qkv_w, vec(&L->bq), g->q_w, n, g->st);
    if (vec(&L->bk)) th_cu_add_bias(g->qkv + g->q_w, g->qkv_w, vec(&L->bk), g->k_w, n, g->st);
    if (vec(&L->bv)) th_cu_add_bias(g->qkv + g->q_w + g->k_w, g->qkv_w, vec(&L->bv), g->v_w, n, g->st);
    return TH_OK;
}

static th_status op_mla_qkv(th_context *c, const th_step *s, int32_t il) {
    th_gpu *g = gpu(c);
    th_status st = th_cu_mla_qkv(g, &g->m->layers[il], g->f.gemm, g->f.n);
    g->q8_of = -1;   /* it quantized its own inputs into g->q8 */
    return st;
}

/* The layer's rope as the kernels take it (the CPU's th_rope_params, cpu/backend.c). */
static th_cu_rope layer_rope(const th_gpu *g, const th_layer *L) {
    const th_hparams *hp = &g->m->hp;
    th_cu_rope r = { .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                     .head_dim_v = hp->head_dim_v, .n_rot = hp->n_rot, .rope_type = hp->rope_type,
                     .theta_scale = powf(L->rope_base, -2.0f / (float)hp->n_rot), .freq_scale = L->rope_freq_scale,
                     .norm_eps = hp->norm_eps, .ext_factor = hp->rope_ext_factor, .mscale = hp->rope_attn_factor,
                     .freq_factors = g->rope_freqs, .q_norm = vec(&L->q_norm), .k_norm = vec(&L->k_norm),
                     .rope_off = hp->n_embd_head_nope };
    if (r.ext_factor != 0.0f) {
        th_rope_corr_dims(hp->n_rot, hp->rope_n_ctx_orig, L->rope_base, hp->rope_beta_fast, hp->rope_beta_slow,
                          &r.corr_lo, &r.corr_hi);
        r.mscale *= 1.0f + 0.1f * logf(1.0f / r.freq_scale);  /* as th_op_rope_ext */
    }
    return r;
}

static th_status op_rope_kv(th_context *c, const th_step *s, int32_t il) {
    th_gpu *g = gpu(c);
    const th_hparams *hp = &g->m->hp;
    const th_layer *L = &g->m->layers[il];
    int n = g->f.n;
    th_cu_rope r = layer_rope(g, L);
    if (L->q_norm.data && L->q_norm.ne0 != hp->head_dim) {  /* olmoe: one norm over the whole Q and the whole K */
        th_cu_rmsnorm(g->qkv, g->qkv_w, NULL, r.q_norm, hp->norm_eps, n, g->q_w, g->qkv, g->qkv_w, NULL, g->st);
        th_cu_rmsnorm(g->qkv + g->q_w, g->qkv_w, NULL, r.k_norm, hp->norm_eps, n, g->k_w, g->qkv + g->q_w, g->qkv_w, NULL, g->st);
        r.q_norm = r.k_norm = NULL;
    }
    th_cu_rope_store(g->qkv, g->qkv_w, n, g->f.pos, g->f.seq, &r, &g->f.kv, th_cu_kv_layer(g, il), g->st);
    return TH_OK;
}

static th_status op_attention(th_context *c, const th_step *s, int32_t il, const th_weight *next) {
    th_gpu *g = gpu(c);
    const th_layer *L = &g->m->layers[il];
    int n = g->f.n;
    g->f.at.window = L->window;
    g->f.at.sinks = vec(&L->attn_sinks);
    bool q8 = next && next->dev && wants_q8(g, mat(next));
    int64_t aw = (int64_t)g->m->hp.n_head * g->m->hp.head_dim_v;   /* < att_w in a hybrid model with wider DeltaNet heads */
    bool fuse = q8 && aw == g->att_w;
    wrote(g, TH_BUF_ATT);
    th_cu_attention(g->qkv, g->qkv_w, n, g->f.pos, g->f.seq, &g->f.at, &g->f.kv, th_cu_kv_layer(g, il), g->att, g->att_w,
                    fuse ? &g->q8 : NULL, g->st);
    if (q8 && (!fuse || g->m->hp.head_dim_v % 32)) th_cu_quantize_q8(g->att, g->att_w, n, aw, &g->q8, g->st);
    if (q8) g->q8_of = TH_BUF_ATT;
    return TH_OK;
}

/* dst (+)= src·Wᵀ (+ b): accumulating without a bias writes into dst directly;
 * with one, W·x + b is made in tmp2 first (the order the CPU adds in). */
static th_status op_matmul(th_context *c, const th_step *s, th_buf dst, const th_weight *w, const th_weight *b,
                           th_buf src, bool acc) {
    th_gpu *g = gpu(c);
    const th_cu_mat *M = mat(w);
    int64_t dw = buf_width(g, dst);
    const float *bias = vec(b);
    if (wants_q8(g, M)) need_q8(g, src, M->K);
    wrote(g, dst);
    bool direct = !acc || !bias;
    float *y = direct ? buf(g, dst) : g->tmp2;
    th_status st = th_cu_mm(g, g->f.gemm, M, buf(g, src), buf_width(g, src), g->f.n, y, dw, acc && direct);
    if (st) return st;
    if (bias) th_cu_add_bias(y, dw, bias, dw, g->f.n, g->st);
    if (!direct) th_cu_add_rows(buf(g, dst), y, dw, dw, g->f.n, g->st);
    return TH_OK;
}

/* dst (+)= down([sub_norm] act(H·gate) ⊙ H·up): gate|up into g->gu, the GLU, the
 * optional RMSNorm (bitnet's ffn_sub_norm), down; the last of them writes the q8 copy
 * for down's GEMV. */
static th_status ffn_glu_down(th_gpu *g, const th_weight *gate, const th_weight *up, const th_weight *down, int act,
                              const float *sub_norm, th_buf dst, bool acc) {
    int64_t F = down->ne0;
    th_status st;
    if (gate) {
        const th_weight *ws[2] = { gate, up };
        st = group_mm(g, ws, 2, TH_BUF_H, g->gu, g->gu_w);
    } else {
        st = group_mm(g, &up, 1, TH_BUF_H, g->gu, g->gu_w);   /* fused [gate; up] rows */
    }
    if (st) return st;
    const th_cu_q8 *q8 = wants_q8(g, mat(down)) ? &g->q8 : NULL;
    th_cu_glu(g->gu, g->gu_w, F, g->f.n, act, g->ff, F, sub_norm ? NULL : q8, g->st);
    if (sub_norm) th_cu_rmsnorm(g->ff, F, NULL, sub_norm, g->m->hp.norm_eps, g->f.n, F, g->ff, F, q8, g->st);
    g->q8_of = -1;   /* g->q8 now holds down's input */
    wrote(g, dst);
    return th_cu_mm(g, g->f.gemm, mat(down), g->ff, F, g->f.n, buf(g, dst), g->E, acc);
}

static th_status op_ffn(th_context *c, const th_step *s, const th_weight *gate, const th_weight *up,
                        const th_weight *down, th_buf dst, bool acc) {
    th_gpu *g = gpu(c);
    return ffn_glu_down(g, gate, up, down, g->m->hp.act_fn, NULL, dst, acc);
}

/* bitnet's FFN (the CPU's op_ffn_sub): SiLU GLU, then the ffn_sub_norm RMSNorm, then down. */
static th_status op_ffn_sub(th_context *c, const th_step *s, int32_t il, th_buf dst, bool acc) {
    th_gpu *g = gpu(c);
    const th_layer *L = &g->m->layers[il];
    return ffn_glu_down(g, &L->w_gate, &L->w_up, &L->w_down, TH_ACT_SILU, vec(&L->ffn_sub_norm), dst, acc);
}

static th_status op_moe(th_context *c, const th_step *s, int32_t il) {
    th_gpu *g = gpu(c);
    wrote(g, TH_BUF_T);
    return th_cu_moe_ffn(g, &g->m->layers[il], g->f.n, g->h, g->tmp, g->f.gemm);
}

/* The logits rows r0..r0+c-1 (now in g->logits): their argmax ids (taken on
 * the device) and/or their download, as the step asks. */
static th_status outputs(th_gpu *g, int r0, int c) {
    if (g->f.host_argmax) th_cu_argmax_rows(g->logits, g->V, g->V, c, g->d_argmax + r0, g->st);
    cudaError_t e;
    if (g->f.host_logits &&
        (e = cudaMemcpyAsync(g->f.host_logits + (size_t)r0 * g->V, g->logits, (size_t)c * g->V * 4, cudaMemcpyDeviceToHost, g->st)))
        return th_cu_fail(e, "logits download");
    return TH_OK;
}

/* Output rows in chunks of up to 64: final norm of the gathered rows, the head, softcap, outputs. */
static th_status op_logits(th_context *c, const th_step *s) {
    th_gpu *g = gpu(c);
    const th_hparams *hp = &g->m->hp;
    const th_cu_mat *out = mat(&g->m->output);
    int chunk = (int)TH_MIN(g->n_batch, 64u);
    bool gemm = g->f.gemm;
    th_status st = TH_OK;
    for (int r0 = 0; !st && r0 < g->f.n_out; r0 += chunk) {
        int n = TH_MIN(chunk, g->f.n_out - r0);
        g->f.gemm = gemm_mode(g, n);
        bool q8 = wants_q8(g, out);
        th_cu_rmsnorm(g->x, g->E, g->f.gather + r0, vec(&g->m->output_norm), hp->norm_eps, n, g->E, g->hout, g->E,
                      q8 ? &g->q8 : NULL, g->st);
        g->q8_of = -1;
        st = th_cu_mm(g, g->f.gemm, out, g->hout, g->E, n, g->logits, g->V, false);
        if (!st && hp->final_softcap > 0) th_cu_softcap(g->logits, (int64_t)n * g->V, hp->final_softcap, g->st);
        if (!st) st = outputs(g, r0, n);
    }
    g->f.gemm = gemm;
    return st;
}

/* ------------------------------------------------------------------ steps and graphs */

/* The cached graphs copy back what they were captured with (logits, argmax ids):
 * a step that wants something else drops them all. */
static void graphs_for_mode(th_gpu *g, int mode) {
    if (mode == g->graph_mode) return;
    for (int i = 0; i < g->n_graphs; i++) cudaGraphExecDestroy(g->graphs[i].exec);
    g->n_graphs = g->next_graph = 0;
    g->graph_mode = mode;
}

/* The batch's tokens, positions, sequences, output gather and block tables into the pinned staging. */
static th_status stage_batch(th_gpu *g, const th_context *c, const th_step *s, int64_t *max_len) {
    int32_t *tok = g->h_meta, *pos = tok + g->n_batch, *seq = pos + g->n_batch, *gather = seq + g->n_batch;
    int32_t *table = gather + g->n_batch;
    *max_len = 1;
    for (int t = 0; t < s->n; t++) {
        tok[t] = s->tok[t];
        pos[t] = s->pos[t];
        seq[t] = s->seq[t];
        if (s->seq[t] < 0 || s->seq[t] >= g->n_seq)
            return th_set_error(TH_ERR_ARG, "GPU step: sequence %d outside [0, %d)", s->seq[t], g->n_seq);
        if (s->out_row[t] >= 0 && s->out_row[t] < s->n_out) gather[s->out_row[t]] = t;
        *max_len = TH_MAX(*max_len, (int64_t)s->pos[t] + 1);
    }
    for (int q = 0; q < g->n_seq; q++)
        memcpy(table + (size_t)q * g->n_blocks, c->kv.seqs[q].table, (size_t)c->kv.seqs[q].n_table * 4);
    th_cu_hyb_stage(g, c, s);
    return TH_OK;
}

static th_status gpu_begin(th_context *c, const th_step *s, bool *replay) {
    th_gpu *g = gpu(c);
    const th_hparams *hp = &g->m->hp;
    *replay = false;
    const th_cu_store *S = g->m->dev_store;
    if (S->gen != g->weights_gen) {   /* a live swap re-made the device weights (gpu_upload.c): graphs hold the old ones */
        for (int i = 0; i < g->n_graphs; i++) cudaGraphExecDestroy(g->graphs[i].exec);
        g->n_graphs = g->next_graph = 0;
        g->rope_freqs = vec(th_model_rope_factors(c->model, c->p.n_ctx));
        g->weights_gen = S->gen;
    }
    int n = s->n;
    if (n < 1 || (uint32_t)n > g->n_batch || s->n_out < 0 || s->n_out > n)
        return th_set_error(TH_ERR_ARG, "GPU step: batch of %d tokens (%d outputs) does not fit the context", n, s->n_out);
    int64_t max_len;
    th_status st = stage_batch(g, c, s, &max_len);
    if (st) return st;
    bool graph = g->tune.graphs && n < g->tune.gemm_min && s->n_out <= g->graph_max;
    /* the graphs' pinned logits buffer is made when a graph first copies logits
     * back (a logits_argmax_only context never does: graph_max × n_vocab floats,
     * 16 MiB at 32 rows of a 128,256-token vocabulary) */
    cudaError_t e;
    if (graph && s->logits && !g->h_logits &&
        (e = cudaMallocHost((void **)&g->h_logits, (size_t)g->graph_max * g->V * 4)))
        return th_cu_fail(e, "the pinned logits buffer");
    int32_t *d = g->d_meta;
    g->f.n = n;
    g->f.n_out = s->n_out;
    g->f.gemm = gemm_mode(g, n);
    g->f.graph = graph;
    g->f.capturing = false;
    g->f.graph_slot = -1;
    g->f.tok = d; g->f.pos = d + g->n_batch; g->f.seq = d + 2 * g->n_batch; g->f.gather = d + 3 * g->n_batch;
    g->f.host_logits = s->logits && graph ? g->h_logits : s->logits;
    g->f.host_argmax = s->argmax ? g->h_argmax : NULL;
    g->f.kv = (th_cu_kv){ .pool = g->kv_pool, .f16 = g->kv_f16, .block_bytes = g->block_bytes, .block = g->block,
                          .k_dim = g->k_w, .v_dim = g->v_w, .table = d + 4 * g->n_batch, .max_blocks = g->n_blocks };
    g->f.at = (th_cu_attn){ .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                            .head_dim_v = hp->head_dim_v, .scale = hp->attn_scale, .softcap = hp->attn_softcap,
                            .partial = g->partial, .partial_cap = g->partial_cap, .counter = g->counter,
                            /* a captured graph replays at every batch: the CUDA-core kernels only */
                            .host_seq = graph || g->tune.attn_simt ? NULL : g->h_meta + 2 * g->n_batch,
                            .tile_min = g->tune.attn_tile_min, .group_blocks = g->tune.attn_group_blocks };
    g->q8_of = -1;
    /* a graph is replayed at every length, so it plans for the longest sequence */
    int64_t plan_len = graph ? (int64_t)g->n_blocks * g->block : max_len;
    th_cu_attn_plan(n, hp->n_head, hp->head_dim_v, plan_len, g->partial_cap, g->sm_count,
                    graph ? (g->tune.attn_chunk ? g->tune.attn_chunk : th_cu_attn_step(hp->head_dim, hp->head_dim_v)) : 0,
                    &g->f.at.n_split, &g->f.at.chunk);
    if (g->bi_split > 0) {   /* batch-invariant: one plan and one kernel for every step size */
        g->f.at.n_split = g->bi_split;
        g->f.at.chunk = g->bi_chunk;
        g->f.at.split_only = true;
    }
    if (graph) {
        graphs_for_mode(g, (s->logits ? 1 : 0) | (s->argmax ? 2 : 0));
        for (int i = 0; i < g->n_graphs; i++)
            if (g->graphs[i].n == n && g->graphs[i].n_out == s->n_out) g->f.graph_slot = i;
        if (g->f.graph_slot >= 0) {
            if ((e = cudaGraphLaunch(g->graphs[g->f.graph_slot].exec, g->st))) return th_cu_fail(e, "graph launch");
            *replay = true;
            return TH_OK;
        }
        if ((e = cudaStreamBeginCapture(g->st, cudaStreamCaptureModeThreadLocal))) return th_cu_fail(e, "graph capture");
        g->f.capturing = true;
    }
    if ((e = cudaMemcpyAsync(g->d_meta, g->h_meta, g->meta_count * 4, cudaMemcpyHostToDevice, g->st)))
        st = th_cu_fail(e, "batch upload");
    return st;
}

/* A captured step becomes a cached graph (the oldest replaced when all slots are taken) and runs. */
static th_status finish_capture(th_gpu *g, th_status status) {
    cudaGraph_t graph;
    g->f.capturing = false;
    cudaError_t e = cudaStreamEndCapture(g->st, &graph);
    if (status) { if (!e) cudaGraphDestroy(graph); return status; }
    if (e) return th_cu_fail(e, "graph capture");
    cudaGraphExec_t exec;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e) return th_cu_fail(e, "graph instantiation");
    int k;
    if (g->n_graphs < TH_CU_MAX_GRAPHS) k = g->n_graphs++;
    else { k = g->next_graph; g->next_graph = (k + 1) % TH_CU_MAX_GRAPHS; cudaGraphExecDestroy(g->graphs[k].exec); }
    g->graphs[k].n = g->f.n;
    g->graphs[k].n_out = g->f.n_out;
    g->graphs[k].exec = exec;
    if ((e = cudaGraphLaunch(exec, g->st))) return th_cu_fail(e, "graph launch");
    return TH_OK;
}

static th_status gpu_end(th_context *c, const th_step *s, th_status status) {
    th_gpu *g = gpu(c);
    cudaError_t e;
    bool replayed = g->f.graph_slot >= 0;
    if (!replayed && !status && g->f.host_argmax && g->f.n_out > 0 &&
        (e = cudaMemcpyAsync(g->f.host_argmax, g->d_argmax, (size_t)g->f.n_out * 4, cudaMemcpyDeviceToHost, g->st)))
        status = th_cu_fail(e, "argmax download");
    if (!replayed && !status && (e = cudaGetLastError())) status = th_cu_fail(e, "a kernel launch");
    if (g->f.capturing) status = finish_capture(g, status);
    e = cudaStreamSynchronize(g->st);
    if (status) return status;
    if (e) return th_cu_fail(e, "the forward pass");
    if (g->f.graph && s->logits) memcpy(s->logits, g->h_logits, (size_t)s->n_out * g->V * sizeof(float));
    if (s->argmax) memcpy(s->argmax, g->h_argmax, (size_t)s->n_out * sizeof(int32_t));
    return TH_OK;
}

/* The residual rows to / from the host (a mixed placement's hand-over, place.c). */
static th_status op_get_x(th_context *c, const th_step *s, float *host) {
    th_gpu *g = gpu(c);
    cudaError_t e = cudaMemcpyAsync(host, g->x, (size_t)s->n * g->E * 4, cudaMemcpyDeviceToHost, g->st);
    if (!e) e = cudaStreamSynchronize(g->st);
    return e ? th_cu_fail(e, "hidden state download") : TH_OK;
}

static th_status op_put_x(th_context *c, const th_step *s, const float *host) {
    th_gpu *g = gpu(c);
    wrote(g, TH_BUF_X);
    cudaError_t e = cudaMemcpyAsync(g->x, host, (size_t)s->n * g->E * 4, cudaMemcpyHostToDevice, g->st);
    return e ? th_cu_fail(e, "hidden state upload") : TH_OK;
}

/* The last step's logits rows (a lazy step left them in g->logits: at most
 * TH_LAZY_LOGITS_MAX rows, one output chunk) to the host. */
static th_status gpu_fetch_logits(th_context *c, int32_t n_out, float *dst) {
    th_gpu *g = gpu(c);
    if (n_out <= 0) return TH_OK;
    if (n_out > (int32_t)TH_MIN(g->n_batch, 64u))
        return th_set_error(TH_ERR_INTERNAL, "GPU logits: %d rows are not all on the device", n_out);
    cudaError_t e = cudaMemcpyAsync(dst, g->logits, (size_t)n_out * g->V * 4, cudaMemcpyDeviceToHost, g->st);
    if (!e) e = cudaStreamSynchronize(g->st);
    return e ? th_cu_fail(e, "logits download") : TH_OK;
}

static const th_backend cuda_backend = {
    .name = "cuda", .kv_on_host = false, .device_argmax = true,
    .probe = gpu_probe, .init = gpu_init, .free = gpu_free, .begin = gpu_begin, .end = gpu_end,
    .embed = op_embed, .norm = op_norm, .qkv = op_qkv, .mla_qkv = op_mla_qkv, .rope_kv = op_rope_kv,
    .attention = op_attention, .matmul = op_matmul, .add = op_add, .ffn = op_ffn, .moe = op_moe,
    .logits = op_logits, .copy_block = gpu_copy_block, .fetch_logits = gpu_fetch_logits,
    .get_x = op_get_x, .put_x = op_put_x, .ffn_sub = op_ffn_sub,
    .recurrent = th_cu_op_recurrent, .att_gate = th_cu_op_att_gate, .shexp_gated = th_cu_op_shexp_gated,
    .rs_restore = th_cu_rs_restore, .rs_copy = th_cu_rs_copy,
};

const th_backend *th_backend_cuda(void) { return &cuda_backend; }
