/* bench_gpu.c — GPU benchmarks on synthetic Llama shapes, built in memory (no
 * file): random weights of a chosen type (valid blocks: random quants, small
 * positive scales) shared by every layer on the host (each layer still gets its
 * own copy on the device, so the bytes a decode step reads are the real ones).
 * Shapes: 8b (Llama 3 8B), 135m (SmolLM2 135M), moe (Qwen3-30B-A3B's layer, 16
 * of its 48 layers: dim 2048, 32 heads of 128, 4 KV heads, 128 experts of 768,
 * 8 used, F32 router, vocab 151936; tok/s, GB/s and TFLOP/s count the weights a
 * token uses).
 * Measurement variants (this program reads them and sets the backend's
 * th_cu_tuning; the library reads no such variables): TH_GPU_GEMM_MIN=N
 * (batches of N+ tokens take the GEMM path; default 33), TH_GPU_NO_GRAPH=1,
 * TH_GPU_NO_PDL=1, TH_GPU_ATTN_CHUNK=N (shortest attention split in graph
 * mode), TH_GPU_MOE_GEMV=1 (the MoE experts on the per-pair GEMV at every batch
 * size instead of the grouped GEMM of prefill), TH_GPU_MOE_ORDER=N (GEMV-path MoE batches of
 * N+ tokens walk their pairs grouped by expert; default 0, never), TH_GPU_MOE_GROUP=N (from N
 * tokens the int8 experts run per hit expert, one weight load for 4 of its pairs; default 0),
 * TH_GPU_MMA_MIN=N / TH_GPU_MMA_MAX=N
 * (the int8 MMA kernel for GEMV-path batches of N+ tokens / GEMM-path batches
 * of at most N tokens), TH_GPU_NARROW_MIN=N (Q4_0 / Q8_0 / Q4_K GEMV-path batches of N+ tokens
 * on the narrow-batch kernel, mma_q8n.cu; default 8), TH_GPU_MMA_PIN=V (every int8 MMA product through
 * variant V of th_cu_mma_set_variant, e.g. 32 the prompt-sized kernel),
 * TH_GPU_PP=N (pp's prompt length, default 512), TH_GPU_ATTN_SIMT=1 (prompts on
 * the CUDA-core attention kernels instead of the tensor-core one, attn_mma.cu),
 * TH_GPU_ATTN_TILE_MIN=N (the CUDA-core attention's batches of N+ tokens on attn_tile),
 * TH_GPU_ATTN_BLOCKS=N (a decode attention block takes several query heads of a KV head
 * while the launch keeps N blocks).
 * Runs the real path (th_context_new with gpu = true, th_decode) and prints
 *   copy   device-to-device copy bandwidth (bytes read + written), the ceiling
 *   gemm   an fp16 cuBLAS GEMM 8192³ (TFLOP/s), the tensor-core ceiling
 *   tg128  single-stream decode from an empty cache: tok/s and weight GB/s
 *          (the logits row is copied back, no token is picked); then greedy
 *          decodes that feed each step's th_get_argmax back as the next token,
 *          once with the full logits row copied to the host and scanned there,
 *          once with a logits_argmax_only context (argmax on the device, 4 bytes
 *          back): the saving of the device argmax
 *   pp512  one 512-token prompt: tok/s and matmul TFLOP/s
 *   b16    batched decode, 16 sequences a step: total tok/s; also greedy with
 *          host and with device argmax as for tg
 *   bbN    llama-batched-bench's method: N streams (N <= 64), each a 128-token
 *          prompt (prompts packed into 512-token batches), then 128 steps of N
 *          tokens, each step's N greedy tokens read (th_get_argmax: on a GPU
 *          context of <= 64 rows the device argmax, the logits rows stay there); prints the prompt phase, the generation phase (the S_TG of
 *          llama-batched-bench) and the total, in tok/s; a warm-up round first
 *   bbsweep bbN at 16 and 64 streams under each GEMV / MMA / cuBLAS choice (bb_sweep)
 *   ppsweep pp128..pp2048 with the prompt attention on tensor cores and on CUDA cores (pp_sweep)
 *   lab    (bench_gpu lab TYPE) the kernel lab: each matrix kernel alone on the
 *          8B shape's matrices at 1..512 tokens: µs, weight GB/s, TFLOP/s for
 *          the GEMV, today's cuBLAS path, the MMA kernel and the int8 one's
 *          variant TH_GPU_MMA_VARIANT (default 1; th_cu_mma_set_variant)
 * usage: bench_gpu SHAPE TYPE [tg|pp|b16|bbN|all] | bench_gpu lab TYPE   SHAPE: 8b | 135m | moe   TYPE: q4_0 | q8_0 | f16 | ...
 *        bench_gpu ceilings */
#include "model.h"
#include "cuda/kernels.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { uint8_t *p; size_t n; uint32_t type; uint64_t seed; } fill_job;

static uint64_t xs(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

/* Random bytes, then every block's scale set to a small positive fp16/f32. */
static void *fill_worker(void *arg) {
    fill_job *j = arg;
    uint64_t s = j->seed | 1;
    uint64_t *q = (uint64_t *)j->p;
    for (size_t i = 0; i < j->n / 8; i++) q[i] = xs(&s);
    const th_type_info *ti = th_type_info_get(j->type);
    if (j->type == TH_F16) { /* |x| in [2^-9, 2^-3): exponent field 6..11 */
        uint16_t *h = (uint16_t *)j->p;
        for (size_t i = 0; i < j->n / 2; i++) h[i] = (uint16_t)((h[i] & 0x83ff) | ((6 + (h[i] >> 10) % 6) << 10));
    } else if (j->type == TH_BF16) {
        uint16_t *h = (uint16_t *)j->p;
        for (size_t i = 0; i < j->n / 2; i++) h[i] = (uint16_t)((h[i] & 0x807f) | ((118 + (h[i] >> 7) % 6) << 7));
    } else if (j->type == TH_F32) {
        float *f = (float *)j->p;
        for (size_t i = 0; i < j->n / 4; i++) f[i] = (float)((int32_t)xs(&s) % 1000) * 1e-4f;
    } else if (j->type == TH_Q4_0 || j->type == TH_Q8_0 || j->type == TH_Q4_1 || j->type == TH_Q5_0 ||
               j->type == TH_Q5_1 || j->type == TH_IQ4_NL) {
        for (size_t b = 0; b + ti->bytes <= j->n; b += ti->bytes) {
            uint16_t d = th_f32_to_f16(0.001f + (float)(xs(&s) % 1000) * 2e-6f);
            memcpy(j->p + b, &d, 2);
            if (j->type == TH_Q4_1 || j->type == TH_Q5_1) memcpy(j->p + b + 2, &d, 2);
        }
    } else { /* K-quants: d (and dmin) fields */
        for (size_t b = 0; b + ti->bytes <= j->n; b += ti->bytes) {
            uint16_t d = th_f32_to_f16(0.0005f);
            size_t off = j->type == TH_Q6_K ? 208 : j->type == TH_Q3_K ? 108 : j->type == TH_Q2_K ? 80 : 0;
            memcpy(j->p + b + off, &d, 2);
            if (j->type == TH_Q2_K || j->type == TH_Q4_K || j->type == TH_Q5_K) memcpy(j->p + b + off + 2, &d, 2);
        }
    }
    return NULL;
}

static void *random_weights(uint32_t type, int64_t K, int64_t rows, size_t *row_bytes) {
    uint64_t rb;
    if (!th_row_bytes(type, (uint64_t)K, &rb)) return NULL;
    size_t total = (size_t)rb * (size_t)rows;
    uint8_t *p = malloc(total + 64);
    if (!p) return NULL;
    enum { NT = 16 };
    pthread_t th[NT];
    fill_job jobs[NT];
    size_t per = (size_t)rows / NT + 1;
    for (int i = 0; i < NT; i++) {
        size_t r0 = TH_MIN((size_t)rows, per * i), r1 = TH_MIN((size_t)rows, per * (i + 1));
        jobs[i] = (fill_job){ p + r0 * rb, (r1 - r0) * rb, type, 0x1234567ull * (i + 1) };
        pthread_create(&th[i], NULL, fill_worker, &jobs[i]);
    }
    for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
    *row_bytes = (size_t)rb;
    return p;
}

static th_weight mk(const void *data, uint32_t type, int64_t ne0, int64_t ne1, size_t rb, const char *name) {
    return (th_weight){ .data = data, .type = type, .ne0 = ne0, .ne1 = ne1, .ne2 = 1, .row_bytes = rb, .name = name };
}

/* hd 0: dim / heads. experts > 0: every FFN is a MoE of `experts` experts of
 * width ffn, `used` a token (softmax router in F32, top-k weights renormalised). */
typedef struct { int dim, layers, heads, kv, ffn, vocab; const char *name; int hd, experts, used; } shape;

static th_weight mk3(const void *data, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, size_t rb, const char *name) {
    th_weight w = mk(data, type, ne0, ne1, rb, name);
    w.ne2 = ne2;
    return w;
}

/* The routed experts of every layer (one host copy): router, stacked gate/up/down. */
static void synth_moe(th_model *m, const shape *sh, uint32_t type) {
    int64_t E = sh->dim, F = sh->ffn, X = sh->experts;
    size_t rbE, rbF, rbR;
    void *rt = random_weights(TH_F32, E, X, &rbR), *g = random_weights(type, E, F * X, &rbE);
    void *u = random_weights(type, E, F * X, &rbE), *d = random_weights(type, F, E * X, &rbF);
    if (!rt || !g || !u || !d) { fprintf(stderr, "out of host memory\n"); exit(1); }
    m->hp.n_expert = sh->experts;
    m->hp.n_expert_used = sh->used;
    m->hp.n_ff_exp = sh->ffn;
    m->hp.gating = TH_GATING_SOFTMAX;
    m->hp.expert_weights_norm = true;
    m->hp.expert_weights_scale = 1.0f;
    for (int il = 0; il < sh->layers; il++) {
        th_layer *L = &m->layers[il];
        L->w_gate = L->w_up = L->w_down = (th_weight){ 0 };
        L->router = mk(rt, TH_F32, E, X, rbR, "ffn_gate_inp.weight");
        L->gate_exps = mk3(g, type, E, F, X, rbE, "ffn_gate_exps.weight");
        L->up_exps = mk3(u, type, E, F, X, rbE, "ffn_up_exps.weight");
        L->down_exps = mk3(d, type, F, E, X, rbF, "ffn_down_exps.weight");
    }
}

/* weight_bytes: what one decode token reads; matmul_params: the weights one
 * token multiplies (a MoE layer: the router and `used` experts, not all of them). */
static th_model *synth(const shape *sh, uint32_t type, double *weight_bytes, double *matmul_params) {
    th_model *m = calloc(1, sizeof *m);
    th_hparams *hp = &m->hp;
    int hd0 = sh->hd ? sh->hd : sh->dim / sh->heads;
    *hp = (th_hparams){ .n_vocab = sh->vocab, .n_embd = sh->dim, .n_layer = sh->layers, .n_head = sh->heads,
                        .n_head_kv = sh->kv, .head_dim = hd0, .head_dim_v = hd0,
                        .n_ff = sh->ffn, .n_ctx_train = 8192, .n_rot = hd0, .rope_type = TH_ROPE_NORM,
                        .rope_base = 500000.0f, .rope_freq_scale = 1.0f, .rope_attn_factor = 1.0f, .norm_eps = 1e-5f, .embd_scale = 1.0f,
                        .attn_scale = 1.0f / sqrtf((float)hd0), .act_fn = TH_ACT_SILU };
    int64_t E = sh->dim, hd = hd0, q = (int64_t)sh->heads * hd, kvw = (int64_t)sh->kv * hd, F = sh->ffn;
    bool moe = sh->experts > 0;
    size_t rbE, rbF, rbQ;
    void *wq = random_weights(type, E, q, &rbE), *wk = random_weights(type, E, kvw, &rbE);
    void *wo = random_weights(type, q, E, &rbQ), *wg = NULL, *wu = NULL, *wd = NULL;
    if (!moe) { wg = random_weights(type, E, F, &rbE); wu = random_weights(type, E, F, &rbE); wd = random_weights(type, F, E, &rbF); }
    uint64_t rb64 = 0;
    if (moe && th_row_bytes(type, (uint64_t)F, &rb64)) rbF = (size_t)rb64;  /* the experts' down rows */
    void *emb = random_weights(type, E, sh->vocab, &rbE);
    float *ones = malloc((size_t)E * 4);
    for (int64_t i = 0; i < E; i++) ones[i] = 1.0f;
    if (!wq || !wk || !wo || (!moe && (!wg || !wu || !wd)) || !emb) { fprintf(stderr, "out of host memory\n"); exit(1); }
    m->tok_embd = mk(emb, type, E, sh->vocab, rbE, "token_embd.weight");
    m->output = m->tok_embd; /* tied: the head reads the same bytes as an untied one would */
    m->output_norm = mk(ones, TH_F32, E, 1, (size_t)E * 4, "output_norm.weight");
    m->layers = calloc((size_t)sh->layers, sizeof *m->layers);
    for (int il = 0; il < sh->layers; il++) {
        th_layer *L = &m->layers[il];
        L->attn_norm = mk(ones, TH_F32, E, 1, (size_t)E * 4, "attn_norm.weight");
        L->ffn_norm = mk(ones, TH_F32, E, 1, (size_t)E * 4, "ffn_norm.weight");
        L->wq = mk(wq, type, E, q, rbE, "attn_q.weight");
        L->wk = mk(wk, type, E, kvw, rbE, "attn_k.weight");
        L->wv = mk(wk, type, E, kvw, rbE, "attn_v.weight");
        L->wo = mk(wo, type, q, E, rbQ, "attn_output.weight");
        L->w_gate = mk(wg, type, E, F, rbE, "ffn_gate.weight");
        L->w_up = mk(wu, type, E, F, rbE, "ffn_up.weight");
        L->w_down = mk(wd, type, F, E, rbF, "ffn_down.weight");
        L->rope_base = hp->rope_base;
        L->rope_freq_scale = hp->rope_freq_scale;
    }
    /* per layer: rows of E inputs (Q, K, V, gate, up), of q inputs (O), of F inputs (down), a token's experts' */
    double ffn_sets = moe ? sh->used : 1, rows_E = (double)(q + 2 * kvw) + ffn_sets * 2 * F, rows_F = ffn_sets * E;
    double rows_q = (double)E, router = moe ? (double)sh->experts * E : 0;
    *weight_bytes = sh->layers * (rows_E * rbE + rows_q * rbQ + rows_F * rbF + router * 4) + (double)sh->vocab * rbE;
    *matmul_params = sh->layers * (rows_E * E + rows_q * q + rows_F * F + router) + (double)sh->vocab * E;
    if (moe) synth_moe(m, sh, type);
    return m;
}

enum { N_BATCH = 512 };  /* every bench context's n_batch: pp submits prompts in batches of it */

static th_context *ctx_new(th_model *m, int n_seq, uint32_t n_ctx, uint32_t n_batch, bool argmax_only) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = n_ctx; cp.n_batch = n_batch; cp.n_seq_max = (uint32_t)n_seq; cp.gpu = true; cp.kv_type = TH_KV_F16;
    cp.logits_argmax_only = argmax_only;
    cp.n_threads = 1;
    th_context *c;
    double t0 = now();
    if (th_context_new(m, &cp, &c)) { fprintf(stderr, "context: %s\n", th_last_error()); exit(1); }
    fprintf(stderr, "  context ready in %.1f s\n", now() - t0);
    return c;
}

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

/* The greedy token of batch index i (th_get_argmax: device or host argmax). */
static int32_t greedy(th_context *c, int i) {
    int32_t t = th_get_argmax(c, i);
    if (t < 0) { fprintf(stderr, "argmax: %s\n", th_last_error()); exit(1); }
    return t;
}

/* Single-stream decode; greedy_feed: each step's argmax is the next input token. */
static double tg(th_context *c, int n, int reps, bool greedy_feed) {
    double best[8];
    for (int r = 0; r < reps; r++) {
        th_kv_seq_clear(c, 0);
        int32_t tok = 1;
        th_batch b = { .n_tokens = 1, .token = &tok };
        double t0 = now();
        for (int i = 0; i < n; i++) {
            if (!greedy_feed || i == 0) tok = 1 + (i * 7919) % 1000;
            if (th_decode(c, &b)) { fprintf(stderr, "decode: %s\n", th_last_error()); exit(1); }
            if (greedy_feed) tok = greedy(c, 0);
        }
        best[r] = n / (now() - t0);
    }
    qsort(best, (size_t)reps, sizeof best[0], cmp_d);
    return best[reps / 2];
}

static double pp(th_context *c, int n, int reps) {
    int32_t *tok = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++) tok[i] = 1 + (i * 7919) % 1000;
    double v[8];
    for (int r = 0; r < reps; r++) {
        th_kv_seq_clear(c, 0);
        double t0 = now();
        for (int i = 0; i < n; i += N_BATCH) {
            th_batch b = { .n_tokens = n - i < N_BATCH ? n - i : N_BATCH, .token = tok + i };
            if (th_decode(c, &b)) { fprintf(stderr, "prefill: %s\n", th_last_error()); exit(1); }
        }
        v[r] = n / (now() - t0);
    }
    free(tok);
    qsort(v, (size_t)reps, sizeof v[0], cmp_d);
    return v[reps / 2];
}

/* Prefill of 128..2048 tokens (batches of 512) with the prompt attention on the
 * tensor cores (the default) and on the CUDA-core kernels (attn_simt), one
 * context each, so that the attention's share shows. */
static void pp_sweep(th_model *m, const shape *sh, uint32_t type) {
    static const int lens[] = { 128, 256, 512, 2048 };
    th_cu_tuning base = th_cu_tuning_get();
    double r[2][4];
    for (int k = 0; k < 2; k++) {
        th_cu_tuning t = base;
        t.attn_simt = k == 1;
        th_cu_tuning_set(&t);
        th_context *c = ctx_new(m, 1, 2048, N_BATCH, false);
        for (int i = 0; i < 4; i++) {
            pp(c, lens[i], 1);
            r[k][i] = pp(c, lens[i], 3);
        }
        th_context_free(c);
    }
    th_cu_tuning_set(&base);
    for (int i = 0; i < 4; i++)
        printf("%-5s %-5s pp%-4d %8.1f tok/s  (prompt attention on CUDA cores: %8.1f, %.2fx)\n", sh->name,
               th_type_name(type), lens[i], r[0][i], r[1][i], r[0][i] / r[1][i]);
}

/* Batched decode; greedy_feed: each stream's argmax is its next input token. */
static double batched(th_context *c, int streams, int steps, bool greedy_feed) {
    int32_t tok[64], pos[64], sid[64];
    int8_t want[64];
    for (int s = 0; s < streams; s++) th_kv_seq_clear(c, s);
    double t0 = 0;
    for (int step = 0; step < steps + 4; step++) {
        if (step == 4) t0 = now(); /* the first steps capture the graph */
        for (int s = 0; s < streams; s++) {
            if (!greedy_feed || step == 0) tok[s] = 1 + (s * 31 + step * 7) % 1000;
            pos[s] = step; sid[s] = s; want[s] = 1;
        }
        th_batch b = { .n_tokens = streams, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
        if (th_decode(c, &b)) { fprintf(stderr, "batched: %s\n", th_last_error()); exit(1); }
        for (int s = 0; greedy_feed && s < streams; s++) tok[s] = greedy(c, s);
    }
    return (double)streams * steps / (now() - t0);
}

/* The greedy runs again on a logits_argmax_only context (a second context: the
 * first one is freed, so the weights are on the device once at a time). */
static void device_argmax(th_model *m, const shape *sh, uint32_t type, bool do_tg, bool do_b16, double tg_host,
                          double b16_host) {
    th_context *c = ctx_new(m, 16, 2048, N_BATCH, true);
    if (do_tg) {
        tg(c, 16, 1, true); /* warm-up: graph capture */
        double r = tg(c, 128, 3, true);
        printf("%-5s %-5s tg128  %8.1f tok/s  greedy, device argmax (logits_argmax_only): %+.1f%% vs host argmax\n",
               sh->name, th_type_name(type), r, tg_host > 0 ? 100.0 * (r / tg_host - 1) : 0.0);
    }
    if (do_b16) {
        double r = batched(c, 16, 64, true);
        printf("%-5s %-5s b16    %8.1f tok/s total  greedy, device argmax (logits_argmax_only): %+.1f%% vs host argmax\n",
               sh->name, th_type_name(type), r, b16_host > 0 ? 100.0 * (r / b16_host - 1) : 0.0);
    }
    fflush(stdout);
    th_context_free(c);
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* The measurement variants above, as the backend's test settings. */
static void tuning_from_env(void) {
    th_cu_tuning t = th_cu_tuning_default();
    t.gemm_min = env_int("TH_GPU_GEMM_MIN", t.gemm_min);
    t.graphs = env_int("TH_GPU_NO_GRAPH", 0) == 0;
    t.pdl = env_int("TH_GPU_NO_PDL", 0) == 0;
    t.attn_chunk = env_int("TH_GPU_ATTN_CHUNK", 0);
    t.moe_gemv_only = env_int("TH_GPU_MOE_GEMV", 0) != 0;
    t.moe_order_min = env_int("TH_GPU_MOE_ORDER", t.moe_order_min);
    t.moe_group_min = env_int("TH_GPU_MOE_GROUP", t.moe_group_min);
    t.mma_min = env_int("TH_GPU_MMA_MIN", t.mma_min);
    t.mma_max = env_int("TH_GPU_MMA_MAX", t.mma_max);
    t.narrow_min = env_int("TH_GPU_NARROW_MIN", t.narrow_min);
    t.mma_f16 = env_int("TH_GPU_MMA_F16", 0) != 0;
    t.f16_cublas_min = env_int("TH_GPU_F16_CUBLAS_MIN", t.f16_cublas_min);
    t.attn_simt = env_int("TH_GPU_ATTN_SIMT", 0) != 0;
    t.attn_tile_min = env_int("TH_GPU_ATTN_TILE_MIN", t.attn_tile_min);
    t.attn_group_blocks = env_int("TH_GPU_ATTN_BLOCKS", t.attn_group_blocks);
    th_cu_tuning_set(&t);
    th_cu_mma_set_variant(env_int("TH_GPU_MMA_PIN", 0));  /* every int8 MMA product through this variant */
}

/* llama-batched-bench's method on a context of its own: `streams` prompts of
 * npp tokens, then ntg steps of one token per stream; tok/s of the prompt phase,
 * the generation phase and both. */
static void batched_bench(th_model *m, const shape *sh, uint32_t type, int streams, int npp, int ntg, const char *label) {
    th_context *c = ctx_new(m, streams, (uint32_t)(streams * (npp + ntg) + 256), N_BATCH, false);
    int32_t *tok = malloc(512 * 4), *pos = malloc(512 * 4), *sid = malloc(512 * 4);
    int8_t *want = malloc(512);
    double tp = 0, tt = 0;
    for (int round = 0; round < 2; round++) {  /* round 0: warm-up (graph capture), 8 steps */
        int steps = round ? ntg : 8;
        for (int s = 0; s < streams; s++) th_kv_seq_clear(c, s);
        double t0 = now();
        for (int s0 = 0; s0 < streams;) {  /* whole prompts, as many as fit a 512-token batch */
            int n = 0, s = s0;
            for (; s < streams && n + npp <= 512; s++)
                for (int i = 0; i < npp; i++, n++) {
                    tok[n] = 1 + (s * 131 + i * 7) % 1000; pos[n] = i; sid[n] = s; want[n] = i == npp - 1;
                }
            th_batch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
            if (th_decode(c, &b)) { fprintf(stderr, "batched-bench prompt: %s\n", th_last_error()); exit(1); }
            s0 = s;
        }
        double t1 = now();
        for (int step = 0; step < steps; step++) {
            for (int s = 0; s < streams; s++) {
                tok[s] = 1 + (s * 31 + step * 7) % 1000; pos[s] = npp + step; sid[s] = s; want[s] = 1;
            }
            th_batch b = { .n_tokens = streams, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
            if (th_decode(c, &b)) { fprintf(stderr, "batched-bench step: %s\n", th_last_error()); exit(1); }
            for (int s = 0; s < streams; s++)  /* each stream's greedy token, as a server takes it */
                if (th_get_argmax(c, s) < 0) { fprintf(stderr, "batched-bench argmax: %s\n", th_last_error()); exit(1); }
        }
        tp = t1 - t0;
        tt = now() - t1;
    }
    printf("%-5s %-5s bb%-4d pp %8.1f tok/s  tg %8.1f tok/s  total %8.1f tok/s  (%d prompts of %d, %d steps)%s%s\n",
           sh->name, th_type_name(type), streams, streams * npp / tp, streams * ntg / tt,
           streams * (npp + ntg) / (tp + tt), streams, npp, ntg, label ? "  " : "", label ? label : "");
    fflush(stdout);
    free(tok); free(pos); free(sid); free(want);
    th_context_free(c);
}

/* bbsweep: batched_bench at 16 and 64 streams under each product choice (one
 * model upload; each context reads the tuning when it is made):
 *   default     the library's defaults
 *   gemv        no MMA: GEMV below gemm_min, cuBLAS (dequantize + GEMM) from it
 *   mma         the int8 MMA kernel from 16 tokens, in the GEMM path (up to 128) too
 *   mma-v4      the same with the gathered MMA kernel (variant 4: the default before the staged one)
 *   mma-g65     MMA, GEMV-path batches (graphs) up to 64 tokens
 *   f16-mma     F16/BF16 on mma_f16.cu from 2 tokens (GEMM path up to 128 too)
 *   f16-cublas  F16/BF16 on cuBLAS in place from 2 tokens, graphs up to 64 */
static void bb_sweep(th_model *m, const shape *sh, uint32_t type) {
    const bool f16 = type == TH_F16 || type == TH_BF16;
    const th_cu_tuning base = th_cu_tuning_get();
    static const char *names[] = { "default", "gemv", "mma", "mma-v4", "mma-g65", "f16-mma", "f16-cublas" };
    static const int streams[] = { 16, 64 };
    for (int k = 0; k < 7; k++) {
        if (k == 2 || (k && f16 != (k >= 5))) continue;  /* "mma" is the default now; int8 rows for quantized types, 16-bit rows for F16 */
        th_cu_tuning t = base;
        int variant = 0;
        if (k == 1) { t.mma_min = t.narrow_min = 1 << 30; t.mma_max = 0; }
        if (k >= 2 && k <= 4) { t.mma_min = 16; t.mma_max = 128; variant = k == 3 ? 4 : 0; }
        if (k == 4) t.gemm_min = 65;
        if (k == 5) { t.mma_f16 = true; t.mma_min = 2; t.mma_max = 128; }
        if (k == 6) { t.f16_cublas_min = 2; t.gemm_min = 65; }
        th_cu_tuning_set(&t);
        th_cu_mma_set_variant(variant);
        for (int i = 0; i < 2; i++) batched_bench(m, sh, type, streams[i], 128, 128, names[k]);
    }
    th_cu_mma_set_variant(0);
    th_cu_tuning_set(&base);
}

/* The kernel lab: each matrix kernel alone on the 8B shape's matrices. */
static int lab(uint32_t type) {
    static const struct { int64_t rows, K; const char *name; } mats[] = {
        { 4096, 4096, "attn-out" }, { 6144, 4096, "qkv" }, { 28672, 4096, "gate+up" }, { 4096, 14336, "down" } };
    static const int ns[] = { 1, 2, 4, 8, 12, 16, 32, 64, 128, 256, 512 };
    enum { NN = sizeof ns / sizeof ns[0] };
    const int variant = env_int("TH_GPU_MMA_VARIANT", 1);  /* the fourth column: this variant of the int8 kernel */
    static const char *pn[5] = { "gemv", "cublas", "mma", "", "mma-v" };
    static const int order[4] = { 0, 1, 2, 4 };
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        size_t rb;
        void *w = random_weights(type, mats[i].K, mats[i].rows, &rb);
        double us[5 * NN];
        const char *e = w ? th_cu_bench_matmul(type, w, mats[i].rows, mats[i].K, ns, NN, variant, us) : "no weights";
        free(w);
        if (e) { fprintf(stderr, "lab %s: %s\n", mats[i].name, e); return 1; }
        double gb = (double)rb * (double)mats[i].rows / 1e9;
        for (int j = 0; j < NN; j++) {
            printf("lab %-6s %-8s %5lldx%-5lld n=%-3d", th_type_name(type), mats[i].name, (long long)mats[i].rows,
                   (long long)mats[i].K, ns[j]);
            for (int o = 0; o < 4; o++) {
                int p = order[o];
                double t = us[5 * j + p];
                if (t < 0) { printf("  %s -", pn[p]); continue; }
                printf("  %s %7.1f us %5.0f GB/s %5.1f TF", pn[p], t, gb / (t * 1e-6),
                       2.0 * (double)mats[i].rows * (double)mats[i].K * ns[j] / (t * 1e-6) / 1e12);
            }
            printf("  q8 %.1f us\n", us[5 * j + 3]);
        }
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv) {
    tuning_from_env();
    if (argc >= 2 && !strcmp(argv[1], "ceilings")) {
        double bw = th_cu_copy_bandwidth((size_t)2 << 30);
        printf("copy  %.0f GB/s (device-to-device, read + write, 2 GiB)\n", bw);
        printf("gemm  %.0f TFLOP/s (cuBLAS fp16 in, fp32 out, 8192^3, random data)\n", th_cu_gemm_tflops(8192));
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: bench_gpu 8b|135m|moe TYPE [tg|pp|b16|bbN|all] | bench_gpu ceilings | bench_gpu lab TYPE\n");
        return 2;
    }
    static const shape s8b = { 4096, 32, 32, 8, 14336, 128256, "8B", 0, 0, 0 }, s135 = { 576, 30, 9, 3, 1536, 49152, "135M", 0, 0, 0 };
    static const shape smoe = { 2048, 16, 32, 4, 768, 151936, "MoE", 128, 128, 8 };
    const shape *sh = !strcmp(argv[1], "8b") ? &s8b : !strcmp(argv[1], "moe") ? &smoe : &s135;
    uint32_t type = TH_TYPE_COUNT;
    for (uint32_t t = 0; t < TH_TYPE_COUNT; t++)
        if (th_type_info_get(t) && !strcasecmp(th_type_name(t), argv[2])) type = t;
    if (type == TH_TYPE_COUNT) { fprintf(stderr, "unknown type %s\n", argv[2]); return 2; }
    if (!strcmp(argv[1], "lab")) return lab(type);
    const char *what = argc > 3 ? argv[3] : "all";
    bool all = !strcmp(what, "all");
    double wbytes, params;
    double t0 = now();
    th_model *m = synth(sh, type, &wbytes, &params);
    fprintf(stderr, "  %s %s: %.2f GB of weights, %.2f B matmul parameters (host set-up %.1f s)\n", sh->name,
            th_type_name(type), wbytes / 1e9, params / 1e9, now() - t0);
    double bw = th_cu_copy_bandwidth((size_t)2 << 30);
    printf("%-5s %-5s copy bandwidth %.0f GB/s\n", sh->name, th_type_name(type), bw);
    if (!strncmp(what, "bb", 2)) {
        int streams = atoi(what + 2);
        if (streams < 1 || streams > 512 / 8) { fprintf(stderr, "bbN: N in 1..64\n"); return 2; }
        batched_bench(m, sh, type, streams, 128, 128, NULL);
        return 0;
    }
    if (!strcmp(what, "bbsweep")) {
        bb_sweep(m, sh, type);
        return 0;
    }
    if (!strcmp(what, "ppsweep")) {
        pp_sweep(m, sh, type);
        return 0;
    }
    th_context *c = ctx_new(m, 16, 2048, N_BATCH, false);
    bool do_tg = all || !strcmp(what, "tg"), do_b16 = all || !strcmp(what, "b16");
    double tg_host = 0, b16_host = 0;
    if (do_tg) {
        tg(c, 16, 1, false); /* warm-up: graph capture */
        double r = tg(c, 128, 3, false);
        printf("%-5s %-5s tg128  %8.1f tok/s  %6.0f GB/s  (%.0f%% of copy)\n", sh->name, th_type_name(type), r,
               r * wbytes / 1e9, 100.0 * r * wbytes / 1e9 / bw);
        tg_host = tg(c, 128, 3, true);
        printf("%-5s %-5s tg128  %8.1f tok/s  greedy, full logits copied back + host argmax\n", sh->name,
               th_type_name(type), tg_host);
    }
    if (!strcmp(what, "prof")) { /* a few decode steps for a profiler: warm-up, then 3 steps */
        tg(c, 4, 1, false);
        tg(c, 3, 1, false);
    }
    if (all || !strcmp(what, "pp")) {
        const int npp = env_int("TH_GPU_PP", 512);  /* the prompt length (lab) */
        pp(c, npp, 1);
        double r = pp(c, npp, 3);
        bool gemv = sh->experts && th_cu_tuning_get().moe_gemv_only;
        printf("%-5s %-5s pp%-4d %8.1f tok/s  %6.1f TFLOP/s (matmuls)%s\n", sh->name, th_type_name(type), npp, r,
               r * 2.0 * params / 1e12, !sh->experts ? "" : gemv ? "  experts: per-pair GEMV" : "  experts: grouped GEMM");
    }
    if (do_b16) {
        double r = batched(c, 16, 64, false);
        printf("%-5s %-5s b16    %8.1f tok/s total (16 streams)\n", sh->name, th_type_name(type), r);
        b16_host = batched(c, 16, 64, true);
        printf("%-5s %-5s b16    %8.1f tok/s total  greedy, full logits copied back + host argmax\n", sh->name,
               th_type_name(type), b16_host);
    }
    fflush(stdout);
    th_context_free(c);
    if (do_tg || do_b16) device_argmax(m, sh, type, do_tg, do_b16, tg_host, b16_host);
    return 0;
}
