/* gpu.c — the CUDA backend behind the GPU seam (src/gpu.h): device set-up,
 * the KV block pool and scratch, and the forward pass of one ragged batch as a
 * sequence of kernel launches on one stream. Small batches (decode, batched
 * decode) run the matrix-vector kernels and are captured once per (tokens,
 * outputs) shape into a CUDA graph that is replayed for every later step;
 * large batches (prefill) run the GEMM path eagerly (where a MoE layer reads its
 * expert choice back to group the experts' GEMMs, gpu_moe.c). Every CUDA call
 * is checked; an out-of-memory error names the buffer and the sizes. */
#include "cuda/gpu_internal.h"
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

th_status th_cu_fail(cudaError_t e, const char *what) {
    cudaGetLastError(); /* clear a non-sticky error */
    if (e == cudaErrorMemoryAllocation)
        return th_set_error(TH_ERR_NOMEM, "CUDA out of memory during %s", what);
    return th_set_error(TH_ERR_INTERNAL, "CUDA error during %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

th_status th_cu_alloc(th_gpu *g, void **p, size_t bytes, const char *what) {
    *p = NULL;
    if (g->n_allocs == g->cap_allocs) {
        size_t nc = g->cap_allocs ? 2 * g->cap_allocs : 256;
        void **na = realloc(g->allocs, nc * sizeof *na);
        if (!na) return th_set_error(TH_ERR_NOMEM, "out of memory");
        g->allocs = na;
        g->cap_allocs = nc;
    }
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        *p = NULL;
        return th_set_error(TH_ERR_NOMEM, "CUDA out of memory allocating %.1f MiB for %s (%.1f MiB already allocated by theseus; the GPU has %.1f MiB free of %.1f MiB)",
                            (double)bytes / (1 << 20), what, (double)g->weight_bytes / (1 << 20),
                            (double)fr / (1 << 20), (double)tot / (1 << 20));
    }
    g->allocs[g->n_allocs++] = *p;
    g->weight_bytes += bytes;
    return TH_OK;
}

th_status th_gpu_probe(char *desc, size_t cap) {
    if (desc && cap) desc[0] = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e || n == 0) {
        cudaGetLastError();
        return th_set_error(TH_ERR_UNSUPPORTED, "no CUDA GPU available (%s)", e ? cudaGetErrorString(e) : "no devices");
    }
    const char *dv = getenv("TH_GPU_DEVICE");
    int dev = dv ? atoi(dv) : 0;
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

/* ------------------------------------------------------------------ set-up */

static int64_t mat_elems(const th_cu_mat *w) { return w->rows * w->K; }

static th_status alloc_scratch(th_gpu *g) {
    size_t B = g->n_batch;
    th_status s;
    int64_t big = TH_MAX(mat_elems(&g->out), mat_elems(&g->embd));
    for (int i = 0; i < g->m->hp.n_layer; i++) {
        th_cu_layer *D = &g->L[i];
        for (int k = 0; k < D->qkv.n; k++) big = TH_MAX(big, mat_elems(&D->qkv.part[k]));
        for (int k = 0; k < D->gu.n; k++) big = TH_MAX(big, mat_elems(&D->gu.part[k]));
        big = TH_MAX(big, TH_MAX(mat_elems(&D->wo), mat_elems(&D->down)));
        big = TH_MAX(big, TH_MAX(mat_elems(&D->moe.gate), TH_MAX(mat_elems(&D->moe.up), mat_elems(&D->moe.down))));
    }
    g->wbuf_bytes = TH_MIN((size_t)big * 2, (size_t)256 << 20);
    g->wbuf_bytes = TH_MAX(g->wbuf_bytes, (size_t)g->max_k * 2);
    const th_hparams *hp = &g->m->hp;
    int64_t cap_len = (int64_t)g->n_blocks * g->block;
    size_t need = (size_t)TH_MAX(g->graph_max, 1) * (size_t)hp->n_head * (size_t)((cap_len + 63) / 64) * (size_t)(hp->head_dim_v + 2);
    g->partial_cap = TH_MAX(TH_MIN(need, (size_t)32 << 20), (size_t)1 << 20);
    size_t out_rows = TH_MIN(B, (size_t)64);
    struct { void **p; size_t bytes; const char *what; } a[] = {
        { (void **)&g->x, B * g->E * 4, "activations" }, { (void **)&g->h, B * g->E * 4, "activations" },
        { (void **)&g->tmp, B * g->E * 4, "activations" }, { (void **)&g->qkv, B * g->qkv_w * 4, "Q/K/V scratch" },
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
        if ((s = th_cu_alloc(g, a[i].p, a[i].bytes, a[i].what))) return s;
    if ((s = th_cu_moe_alloc(g)) || (s = th_cu_mla_alloc(g))) return s;
    cudaError_t e = cudaMallocHost((void **)&g->h_meta, g->meta_count * 4);
    if (!e) e = cudaMallocHost((void **)&g->h_argmax, B * 4);
    if (e) return th_cu_fail(e, "pinned host buffers");
    return TH_OK;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

th_status th_gpu_init(const th_model *m, uint32_t n_batch, uint32_t n_blocks, int32_t block, bool kv_f16,
                      int32_t n_seq, const th_weight *rope_factors, bool verbose, th_gpu **out) {
    *out = NULL;
    th_status s = th_gpu_probe(NULL, 0);
    if (s) return s;
    const th_hparams *hp = &m->hp;
    if (hp->head_dim > 256 || hp->head_dim_v > 256 || hp->n_head % hp->n_head_kv)
        return th_set_error(TH_ERR_UNSUPPORTED, "CUDA backend: head shape %d/%d (heads %d/%d) is not supported (head width at most 256)",
                            hp->head_dim, hp->head_dim_v, hp->n_head, hp->n_head_kv);
    th_gpu *g = calloc(1, sizeof *g);
    if (!g) return th_set_error(TH_ERR_NOMEM, "out of memory");
    g->m = m;
    g->device = env_int("TH_GPU_DEVICE", 0);
    g->verbose = verbose || isatty(2);
    cudaError_t e = cudaSetDevice(g->device);
    if (!e) e = cudaDeviceGetAttribute(&g->sm_count, cudaDevAttrMultiProcessorCount, g->device);
    if (!e) e = cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking);
    if (e) { th_gpu_free(g); return th_cu_fail(e, "device set-up"); }
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { th_gpu_free(g); return th_set_error(TH_ERR_INTERNAL, "cuBLAS could not be initialised"); }
    g->cublas = h;
    if ((s = th_cu_upload_weights(g, rope_factors))) { th_gpu_free(g); return s; }
    g->E = hp->n_embd;
    g->q_w = (int64_t)hp->n_head * hp->head_dim;
    g->k_w = (int64_t)hp->n_head_kv * hp->head_dim;
    g->v_w = (int64_t)hp->n_head_kv * hp->head_dim_v;
    g->qkv_w = g->q_w + g->k_w + g->v_w;
    g->att_w = (int64_t)hp->n_head * hp->head_dim_v;
    g->V = hp->n_vocab;
    for (int i = 0; i < hp->n_layer; i++) {
        if (!g->L[i].mla.on && g->L[i].qkv.width != g->qkv_w) {
            th_gpu_free(g);
            return th_set_error(TH_ERR_FORMAT, "layer %d: Q/K/V weights give %lld outputs, expected %lld", i,
                                (long long)g->L[i].qkv.width, (long long)g->qkv_w);
        }
        g->F = TH_MAX(g->F, g->L[i].gu.width / 2);
    }
    g->gu_w = 2 * g->F;
    g->max_k = TH_MAX(TH_MAX(g->E, g->F), TH_MAX(g->att_w, TH_MAX(hp->q_lora_rank, hp->kv_lora_rank)));
    g->n_batch = n_batch;
    g->gemm_min = TH_MAX(1, env_int("TH_GPU_GEMM_MIN", 33));
    g->use_graphs = env_int("TH_GPU_NO_GRAPH", 0) == 0;
    g->attn_chunk = (int32_t)(env_int("TH_GPU_ATTN_CHUNK", 0) / 32 * 32);
    th_cu_set_pdl(env_int("TH_GPU_NO_PDL", 0) == 0);
    g->graph_max = TH_MIN(TH_MIN(g->gemm_min - 1, (int)n_batch), 64);
    if (g->graph_max < 1) g->use_graphs = false;
    g->block = block;
    g->n_blocks = (int32_t)n_blocks;
    g->n_seq = n_seq;
    g->kv_f16 = kv_f16;
    g->block_bytes = (size_t)hp->n_layer * (size_t)block * (size_t)(g->k_w + g->v_w) * (kv_f16 ? 2 : 4);
    g->meta_count = 4 * (size_t)n_batch + (size_t)n_seq * n_blocks;
    if ((s = th_cu_alloc(g, &g->kv_pool, g->block_bytes * n_blocks, "the KV cache")) || (s = alloc_scratch(g))) {
        th_gpu_free(g);
        return s;
    }
    if ((e = cudaMemset(g->counter, 0, (size_t)n_batch * hp->n_head * 4))) { th_gpu_free(g); return th_cu_fail(e, "scratch set-up"); }
    if ((s = th_cu_fused_init(g))) { th_gpu_free(g); return s; }
    *out = g;
    return TH_OK;
}

void th_gpu_free(th_gpu *g) {
    if (!g) return;
    if (g->st) cudaStreamSynchronize(g->st);
    th_cu_fused_prof_print(g);
    for (int i = 0; i < g->n_graphs; i++) cudaGraphExecDestroy(g->graphs[i].exec);
    for (size_t i = 0; i < g->n_allocs; i++) cudaFree(g->allocs[i]);
    if (g->h_meta) cudaFreeHost(g->h_meta);
    if (g->h_logits) cudaFreeHost(g->h_logits);
    if (g->h_argmax) cudaFreeHost(g->h_argmax);
    if (g->h_moe) cudaFreeHost(g->h_moe);
    free(g->fused_args);
    if (g->cublas) cublasDestroy((cublasHandle_t)g->cublas);
    if (g->st) cudaStreamDestroy(g->st);
    cudaGetLastError();
    free(g->allocs);
    free(g->L);
    free(g);
}

void th_gpu_copy_block(th_gpu *g, int32_t dst, int32_t src) {
    if (!g || dst < 0 || src < 0 || dst >= g->n_blocks || src >= g->n_blocks) return;
    cudaMemcpyAsync((char *)g->kv_pool + (size_t)dst * g->block_bytes, (char *)g->kv_pool + (size_t)src * g->block_bytes,
                    g->block_bytes, cudaMemcpyDeviceToDevice, g->st);
}

/* ------------------------------------------------------------------ forward */

th_cu_kv th_cu_kv_view(const th_gpu *g) {
    return (th_cu_kv){ .pool = g->kv_pool, .f16 = g->kv_f16, .block_bytes = g->block_bytes, .block = g->block,
                       .k_dim = g->k_w, .v_dim = g->v_w, .table = g->d_meta + 4 * g->n_batch, .max_blocks = g->n_blocks };
}

th_cu_attn th_cu_attn_view(const th_gpu *g) {
    const th_hparams *hp = &g->m->hp;
    return (th_cu_attn){ .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                         .head_dim_v = hp->head_dim_v, .scale = hp->attn_scale, .softcap = hp->attn_softcap,
                         .partial = g->partial, .counter = g->counter };
}

typedef struct {
    int n, n_out;
    bool gemm, fused;
    const int32_t *tok, *pos, *seq, *gather;
    float *host_logits;         /* where the logits rows go (pinned or the caller's), or NULL: stay on the device */
    int32_t *host_argmax;       /* pinned: the rows' argmax ids, or NULL: none */
    th_cu_kv kv;
    th_cu_attn at;
} fwd;

static bool mat_q8(const th_cu_mat *w) { return th_cu_gemv_wants_q8(w); }
static bool proj_q8(const th_cu_proj *p) {
    for (int i = 0; i < p->n; i++) if (mat_q8(&p->part[i])) return true;
    return false;
}

th_status th_cu_mm(th_gpu *g, bool gemm, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y,
                   int64_t ys, bool acc) {
    if (gemm) {
        if (!th_cu_gemm(g->cublas, w, x, xs, n, y, ys, acc, g->wbuf, g->wbuf_bytes, g->xbuf, g->st))
            return th_set_error(TH_ERR_INTERNAL, "cuBLAS GEMM failed (%s, %lld×%lld, %d tokens)", th_type_name(w->type),
                                (long long)w->rows, (long long)w->K, n);
        return TH_OK;
    }
    th_cu_gemv(w, x, xs, mat_q8(w) ? &g->q8 : NULL, n, y, ys, acc, g->st);
    return TH_OK;
}

static th_status mm(th_gpu *g, const fwd *f, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y,
                    int64_t ys, bool acc) {
    return th_cu_mm(g, f->gemm, w, x, xs, n, y, ys, acc);
}

static th_status proj(th_gpu *g, const fwd *f, const th_cu_proj *p, const float *x, int64_t xs, float *y, int64_t ys) {
    th_status s;
    for (int i = 0; i < p->n; i++)
        if ((s = mm(g, f, &p->part[i], x, xs, f->n, y + p->off[i], ys, false))) return s;
    return TH_OK;
}

/* The dense FFN on g->h (its q8 copy already made when the GEMV wants it):
 * down's output written to (acc false) or added into (acc true) `out`, rows of E.
 * Also a MoE layer's shared experts, added into the routed experts' sum. */
static th_status dense_ffn(th_gpu *g, const fwd *f, const th_cu_layer *D, int n, float *out, bool acc) {
    int64_t E = g->E, F = D->gu.width / 2;
    th_status s;
    if ((s = proj(g, f, &D->gu, g->h, E, g->gu, g->gu_w))) return s;
    bool q8 = !f->gemm && mat_q8(&D->down);
    th_cu_glu(g->gu, g->gu_w, F, n, g->m->hp.act_fn, g->ff, F, q8 ? &g->q8 : NULL, g->st);
    return mm(g, f, &D->down, g->ff, F, n, out, E, acc);
}

/* The FFN output in g->tmp: the post-FFN norm (if any), then x += tmp. */
static void ffn_finish(th_gpu *g, const th_cu_layer *D, int n) {
    int64_t E = g->E;
    if (D->post_ffn_norm) th_cu_rmsnorm(g->tmp, E, NULL, D->post_ffn_norm, g->m->hp.norm_eps, n, E, g->tmp, E, NULL, g->st);
    th_cu_add_rows(g->x, g->tmp, E, E, n, g->st);
}

/* A MoE FFN (gpu_moe.c): routed experts into g->tmp, the shared experts (if
 * any) added to it, then ffn_finish — the order of the CPU's th_moe_ffn. */
static th_status moe_ffn(th_gpu *g, const fwd *f, const th_cu_layer *D, int n) {
    int64_t E = g->E;
    th_status s;
    bool q8 = D->gu.n && !f->gemm && proj_q8(&D->gu);
    th_cu_rmsnorm(g->x, E, NULL, D->ffn_norm, g->m->hp.norm_eps, n, E, g->h, E, q8 ? &g->q8 : NULL, g->st);
    if ((s = th_cu_moe_ffn(g, &D->moe, n, g->h, g->tmp, f->gemm))) return s;
    if (D->gu.n && (s = dense_ffn(g, f, D, n, g->tmp, true))) return s;
    ffn_finish(g, D, n);
    return TH_OK;
}

th_cu_rope th_cu_layer_rope(const th_gpu *g, const th_cu_layer *D) {
    const th_hparams *hp = &g->m->hp;
    th_cu_rope r = { .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                     .head_dim_v = hp->head_dim_v, .n_rot = hp->n_rot, .rope_type = hp->rope_type,
                     .theta_scale = D->theta_scale, .freq_scale = D->freq_scale, .norm_eps = hp->norm_eps,
                     .ext_factor = hp->rope_ext_factor, .corr_lo = D->corr_lo, .corr_hi = D->corr_hi,
                     .mscale = hp->rope_attn_factor, .freq_factors = g->rope_freqs, .q_norm = D->q_norm,
                     .k_norm = D->k_norm, .rope_off = hp->n_embd_head_nope };
    if (r.ext_factor != 0.0f) r.mscale *= 1.0f + 0.1f * logf(1.0f / r.freq_scale);  /* as th_op_rope_ext */
    return r;
}

static th_status layer(th_gpu *g, fwd *f, int il) {
    const th_hparams *hp = &g->m->hp;
    const th_cu_layer *D = &g->L[il];
    cudaStream_t st = g->st;
    int n = f->n;
    int64_t E = g->E;
    th_status s;
    /* attention */
    bool q8 = !f->gemm && proj_q8(&D->qkv);
    th_cu_rmsnorm(g->x, E, NULL, D->attn_norm, hp->norm_eps, n, E, g->h, E, q8 ? &g->q8 : NULL, st);
    if ((s = proj(g, f, &D->qkv, g->h, E, g->qkv, g->qkv_w))) return s;
    if (D->bq) th_cu_add_bias(g->qkv, g->qkv_w, D->bq, g->q_w, n, st);
    if (D->bk) th_cu_add_bias(g->qkv + g->q_w, g->qkv_w, D->bk, g->k_w, n, st);
    if (D->bv) th_cu_add_bias(g->qkv + g->q_w + g->k_w, g->qkv_w, D->bv, g->v_w, n, st);
    if (D->mla.on && (s = th_cu_mla_qkv(g, &D->mla, f->gemm, n))) return s;
    th_cu_rope r = th_cu_layer_rope(g, D);
    if (D->qk_norm_full) {  /* olmoe: one norm over the whole Q and the whole K projection, not per head */
        th_cu_rmsnorm(g->qkv, g->qkv_w, NULL, D->q_norm, hp->norm_eps, n, g->q_w, g->qkv, g->qkv_w, NULL, st);
        th_cu_rmsnorm(g->qkv + g->q_w, g->qkv_w, NULL, D->k_norm, hp->norm_eps, n, g->k_w, g->qkv + g->q_w, g->qkv_w, NULL, st);
        r.q_norm = r.k_norm = NULL;
    }
    th_cu_rope_store(g->qkv, g->qkv_w, n, f->pos, f->seq, &r, &f->kv, il, st);
    f->at.window = D->window;
    f->at.sinks = D->sinks;
    q8 = !f->gemm && mat_q8(&D->wo);
    th_cu_attention(g->qkv, g->qkv_w, n, f->pos, f->seq, &f->at, &f->kv, il, g->att, g->att_w, q8 ? &g->q8 : NULL, st);
    if (q8 && hp->head_dim_v % 32) th_cu_quantize_q8(g->att, g->att_w, n, g->att_w, &g->q8, st);
    bool direct = !D->bo && !D->post_attn_norm;
    if ((s = mm(g, f, &D->wo, g->att, g->att_w, n, direct ? g->x : g->tmp, E, direct))) return s;
    if (!direct) {
        if (D->bo) th_cu_add_bias(g->tmp, E, D->bo, E, n, st);
        if (D->post_attn_norm) th_cu_rmsnorm(g->tmp, E, NULL, D->post_attn_norm, hp->norm_eps, n, E, g->tmp, E, NULL, st);
        th_cu_add_rows(g->x, g->tmp, E, E, n, st);
    }
    /* feed-forward */
    if (D->moe.n_expert) return moe_ffn(g, f, D, n);
    q8 = !f->gemm && proj_q8(&D->gu);
    th_cu_rmsnorm(g->x, E, NULL, D->ffn_norm, hp->norm_eps, n, E, g->h, E, q8 ? &g->q8 : NULL, st);
    direct = !D->post_ffn_norm;
    if ((s = dense_ffn(g, f, D, n, direct ? g->x : g->tmp, direct))) return s;
    if (!direct) ffn_finish(g, D, n);
    return TH_OK;
}

/* The logits rows r0..r0+c-1 (now in g->logits): their argmax ids (taken on
 * the device) and/or their download, as the batch asks. */
static th_status outputs(th_gpu *g, const fwd *f, int r0, int c) {
    if (f->host_argmax) th_cu_argmax_rows(g->logits, g->V, g->V, c, g->d_argmax + r0, g->st);
    cudaError_t e;
    if (f->host_logits &&
        (e = cudaMemcpyAsync(f->host_logits + (size_t)r0 * g->V, g->logits, (size_t)c * g->V * 4, cudaMemcpyDeviceToHost, g->st)))
        return th_cu_fail(e, "logits download");
    return TH_OK;
}

/* The op-by-op forward pass: embedding, layers, output head, outputs. */
static th_status layers_and_head(th_gpu *g, fwd *f) {
    const th_hparams *hp = &g->m->hp;
    cudaStream_t st = g->st;
    th_status s;
    th_cu_dequant_rows(&g->embd, f->tok, 0, f->n, g->x, g->E, false, hp->embd_scale, st);
    for (int il = 0; il < hp->n_layer; il++)
        if ((s = layer(g, f, il))) return s;
    int chunk = (int)TH_MIN(g->n_batch, 64u);
    for (int r0 = 0; r0 < f->n_out; r0 += chunk) {
        int c = TH_MIN(chunk, f->n_out - r0);
        fwd fo = *f;
        fo.gemm = c >= g->gemm_min;
        bool q8 = !fo.gemm && mat_q8(&g->out);
        th_cu_rmsnorm(g->x, g->E, f->gather + r0, g->out_norm, hp->norm_eps, c, g->E, g->hout, g->E, q8 ? &g->q8 : NULL, st);
        if ((s = mm(g, &fo, &g->out, g->hout, g->E, c, g->logits, g->V, false))) return s;
        if (hp->final_softcap > 0) th_cu_softcap(g->logits, (int64_t)c * g->V, hp->final_softcap, st);
        if ((s = outputs(g, f, r0, c))) return s;
    }
    return TH_OK;
}

/* Queue the whole forward pass on the stream; logits rows go to f->host_logits
 * and/or their argmax ids (taken on the device) to f->host_argmax. */
static th_status enqueue(th_gpu *g, fwd *f) {
    cudaStream_t st = g->st;
    th_status s;
    cudaError_t e = cudaMemcpyAsync(g->d_meta, g->h_meta, g->meta_count * 4, cudaMemcpyHostToDevice, st);
    if (e) return th_cu_fail(e, "batch upload");
    if (f->fused) {  /* one kernel for the whole step (gpu_fused.c) */
        th_cu_fused_run(g, f->n_out);
        if (f->n_out && (s = outputs(g, f, 0, f->n_out))) return s;
    } else if ((s = layers_and_head(g, f))) {
        return s;
    }
    if (f->host_argmax && f->n_out > 0 &&
        (e = cudaMemcpyAsync(f->host_argmax, g->d_argmax, (size_t)f->n_out * 4, cudaMemcpyDeviceToHost, st)))
        return th_cu_fail(e, "argmax download");
    if ((e = cudaGetLastError())) return th_cu_fail(e, "a kernel launch");
    return TH_OK;
}

static th_status run_graph(th_gpu *g, fwd *f) {
    int k = -1;
    for (int i = 0; i < g->n_graphs; i++)
        if (g->graphs[i].n == f->n && g->graphs[i].n_out == f->n_out) k = i;
    if (k < 0) {
        cudaGraph_t graph;
        cudaError_t e = cudaStreamBeginCapture(g->st, cudaStreamCaptureModeThreadLocal);
        if (e) return th_cu_fail(e, "graph capture");
        th_status s = enqueue(g, f);
        e = cudaStreamEndCapture(g->st, &graph);
        if (s) { if (!e) cudaGraphDestroy(graph); return s; }
        if (e) return th_cu_fail(e, "graph capture");
        cudaGraphExec_t exec;
        e = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        if (e) return th_cu_fail(e, "graph instantiation");
        if (g->n_graphs < TH_CU_MAX_GRAPHS) k = g->n_graphs++;
        else { k = g->next_graph; g->next_graph = (k + 1) % TH_CU_MAX_GRAPHS; cudaGraphExecDestroy(g->graphs[k].exec); }
        g->graphs[k].n = f->n;
        g->graphs[k].n_out = f->n_out;
        g->graphs[k].exec = exec;
    }
    cudaError_t e = cudaGraphLaunch(g->graphs[k].exec, g->st);
    if (e) return th_cu_fail(e, "graph launch");
    return TH_OK;
}

/* The cached graphs copy back what they were captured with (logits, argmax ids):
 * a batch that wants something else drops them all. */
static void graphs_for_mode(th_gpu *g, int mode) {
    if (mode == g->graph_mode) return;
    for (int i = 0; i < g->n_graphs; i++) cudaGraphExecDestroy(g->graphs[i].exec);
    g->n_graphs = g->next_graph = 0;
    g->graph_mode = mode;
}

th_status th_gpu_forward(th_gpu *g, const th_gpu_batch *b) {
    const th_hparams *hp = &g->m->hp;
    int n = b->n_tokens;
    if (n < 1 || (uint32_t)n > g->n_batch || b->n_out < 0 || b->n_out > n || b->block != g->block ||
        b->max_blocks > g->n_blocks)
        return th_set_error(TH_ERR_ARG, "th_gpu_forward: batch of %d tokens (%d outputs, block %d) does not fit the GPU context",
                            n, b->n_out, b->block);
    int32_t *tok = g->h_meta, *pos = tok + g->n_batch, *seq = pos + g->n_batch, *gather = seq + g->n_batch;
    int32_t *table = gather + g->n_batch;
    int64_t max_len = 1;
    for (int t = 0; t < n; t++) {
        tok[t] = b->token[t];
        pos[t] = b->pos[t];
        seq[t] = b->seq[t];
        if (b->seq[t] < 0 || b->seq[t] >= g->n_seq)
            return th_set_error(TH_ERR_ARG, "th_gpu_forward: sequence %d outside [0, %d)", b->seq[t], g->n_seq);
        if (b->out_row[t] >= 0 && b->out_row[t] < b->n_out) gather[b->out_row[t]] = t;
        max_len = TH_MAX(max_len, (int64_t)b->pos[t] + 1);
    }
    for (int q = 0; q < g->n_seq; q++)
        memcpy(table + (size_t)q * g->n_blocks, b->block_table + (size_t)q * b->max_blocks, (size_t)b->max_blocks * 4);
    bool graph = g->use_graphs && n < g->gemm_min && b->n_out <= g->graph_max;
    int32_t *d = g->d_meta;
    bool fused = g->fused && n == 1 && b->n_out <= 1;
    if (g->fused_mode == 2 && n == 1 && !fused)
        return th_set_error(TH_ERR_UNSUPPORTED, "TH_GPU_FUSED=2: a single-token step (%d outputs) cannot take the fused kernel", b->n_out);
    /* the graphs' pinned logits buffer is made when a graph first copies logits
     * back (a logits_argmax_only context never does: graph_max × n_vocab floats,
     * 16 MiB at 32 rows of a 128,256-token vocabulary) */
    cudaError_t e;
    if (graph && b->logits && !g->h_logits &&
        (e = cudaMallocHost((void **)&g->h_logits, (size_t)g->graph_max * g->V * 4)))
        return th_cu_fail(e, "the pinned logits buffer");
    fwd f = { .n = n, .n_out = b->n_out, .gemm = n >= g->gemm_min, .fused = fused,
              .tok = d, .pos = d + g->n_batch, .seq = d + 2 * g->n_batch, .gather = d + 3 * g->n_batch,
              .host_logits = b->logits && graph ? g->h_logits : b->logits, .host_argmax = b->argmax ? g->h_argmax : NULL };
    if (graph) graphs_for_mode(g, (b->logits ? 1 : 0) | (b->argmax ? 2 : 0));
    f.kv = th_cu_kv_view(g);
    f.at = th_cu_attn_view(g);
    /* a graph is replayed at every length, so it plans for the longest sequence */
    int64_t plan_len = graph ? (int64_t)g->n_blocks * g->block : max_len;
    th_cu_attn_plan(n, hp->n_head, hp->head_dim_v, plan_len, g->partial_cap, g->sm_count,
                    graph ? (g->attn_chunk ? g->attn_chunk : th_cu_attn_step(hp->head_dim, hp->head_dim_v)) : 0,
                    &f.at.n_split, &f.at.chunk);
    th_status s = graph ? run_graph(g, &f) : enqueue(g, &f);
    e = cudaStreamSynchronize(g->st);
    if (s) return s;
    if (e) return th_cu_fail(e, "the forward pass");
    if (graph && b->logits) memcpy(b->logits, g->h_logits, (size_t)b->n_out * g->V * sizeof(float));
    if (b->argmax) memcpy(b->argmax, g->h_argmax, (size_t)b->n_out * sizeof(int32_t));
    if (f.fused) th_cu_fused_prof_add(g);
    return TH_OK;
}
