/* bench_dn.c — the delta-rule lab: the gated delta rule's forms (deltanet.h:
 * recurrent, recurrent after the pre-pass, chunked) timed on the GPU.
 *   bench_dn kernel [SEQS]   th_cu_dn_rule alone on the qwen35 bench shape (gen_model
 *                            --shape qwen35: Dk 128, 16 k heads, 16 v heads) at 64 ..
 *                            4096 tokens of SEQS sequences (default 1; tokens
 *                            interleaved round-robin): µs a call (CUDA events, median
 *                            of 15 after 3 warm-ups; the pre-pass counts), each form
 *   bench_dn model FILE      prefill of 64 .. 4096 tokens (in batches of 512, one
 *                            sequence) through th_decode on a GPU context of FILE, tok/s
 *                            under each form (median of 5 after a warm-up)
 * The forms are picked through th_cu_dn_set_variant (the library reads no environment). */
#include "theseus.h"
#include "cuda/deltanet.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NF = 4 };
static const int forms[NF] = { TH_CU_DN_STEP, TH_CU_DN_STEP_PREP, TH_CU_DN_CHUNK, TH_CU_DN_CHUNK1 };
static const int lens[7] = { 64, 128, 256, 512, 1024, 2048, 4096 };

static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }

static float *dev_rand(size_t n, float lo, float hi, unsigned *rng) {
    float *h = malloc(n * 4), *d = NULL;
    for (size_t i = 0; i < n; i++) { *rng = *rng * 1664525u + 1013904223u; h[i] = lo + (hi - lo) * (float)(*rng >> 8) / 16777216.0f; }
    if (cudaMalloc((void **)&d, n * 4) || cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice)) d = NULL;
    free(h);
    return d;
}

static int kernel_lab(int nseq) {
    const int dk = 128, nk = 16, nv = 16, N = 4096;
    int64_t kd = (int64_t)dk * nk, vd = (int64_t)dk * nv, cd = 2 * kd + vd, per = vd * dk;
    unsigned rng = 7;
    float *u = dev_rand((size_t)N * cd, -1, 1, &rng), *ba = dev_rand((size_t)N * 2 * nv, -2, 2, &rng);
    float *dt = dev_rand(nv, -0.5f, 0.5f, &rng), *A = dev_rand(nv, -1.5f, -0.3f, &rng);
    float *cur = dev_rand((size_t)nseq * per, -0.1f, 0.1f, &rng), *scr = NULL, *out = NULL, *wy = NULL;
    int32_t *dm = NULL, *hm = malloc((size_t)10 * N * 4), last[64];
    if (!u || !ba || !dt || !A || !cur || cudaMalloc((void **)&scr, (size_t)N * (nk + 3 * nv) * 4) ||
        cudaMalloc((void **)&out, (size_t)N * vd * 4) || cudaMalloc((void **)&dm, (size_t)10 * N * 4) ||
        cudaMalloc((void **)&wy, (size_t)N * TH_CU_DN_WY_FLOATS(vd, nv) * 4)) {
        fprintf(stderr, "bench_dn: device memory\n");
        return 1;
    }
    cudaStream_t st;
    cudaEvent_t e0, e1;
    cudaStreamCreate(&st);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    th_cu_dn d = { .dk = dk, .nk = nk, .nv = nv, .C = 4, .ratio = 1, .kd = kd, .vd = vd, .cd = cd, .repeat = true,
                   .eps = 1e-6f, .dt = dt, .A = A, .cur = cur, .per_seq = per, .scratch = scr, .wy = wy };
    printf("delta rule alone, Dk %d, %d k / %d v heads, %d sequence(s): µs a call (median of 15)\n", dk, nk, nv, nseq);
    printf("| tokens | step | step+prep | chunk (WY, 2 kernels) | chunk1 (1 kernel) | best chunked vs best recurrent |\n"
           "|---|---|---|---|---|---|\n");
    for (int li = 0; li < 7; li++) {
        int n = lens[li];
        for (int q = 0; q < nseq; q++) last[q] = -1;
        for (int t = 0; t < n; t++) hm[t] = t % nseq, hm[n + t] = -1;
        th_cu_dn_order_out o = { hm + 2 * n, hm + 3 * n, hm + 4 * n, hm + 5 * n, hm + 6 * n, hm + 7 * n, hm + 8 * n, hm + 9 * n, 0 };
        int max_run = th_cu_dn_order(n, hm, hm + n, last, &o);
        cudaMemcpy(dm, hm, (size_t)10 * n * 4, cudaMemcpyHostToDevice);
        th_cu_dn_batch b = { .seq = dm, .snap = dm + n, .list = dm + 2 * n, .first = dm + 3 * n, .nxt = dm + 4 * n,
                             .ord = dm + 5 * n, .off = dm + 6 * n, .ch_start = dm + 7 * n, .ch_len = dm + 8 * n,
                             .ch_off = dm + 9 * n, .n_chunk = o.n_chunk, .n = n, .n_seq = nseq, .max_run = max_run };
        float med[NF];
        for (int f = 0; f < NF; f++) {
            float ms[15];
            th_cu_dn_set_variant(forms[f]);
            for (int r = 0; r < 18; r++) {
                cudaEventRecord(e0, st);
                th_cu_dn_rule(&d, u, ba, 2 * nv, &b, out, vd, st);
                cudaEventRecord(e1, st);
                cudaEventSynchronize(e1);
                if (r >= 3) cudaEventElapsedTime(&ms[r - 3], e0, e1);
            }
            qsort(ms, 15, sizeof ms[0], cmpf);
            med[f] = ms[7] * 1000.0f;
        }
        cudaError_t e = cudaGetLastError();
        if (e) { fprintf(stderr, "bench_dn: %s\n", cudaGetErrorString(e)); return 1; }
        float best = med[0] < med[1] ? med[0] : med[1], bc = med[2] < med[3] ? med[2] : med[3];
        printf("| %d | %.1f | %.1f | %.1f | %.1f | %.2fx |\n", n, med[0], med[1], med[2], med[3], best / bc);
    }
    th_cu_dn_set_variant(TH_CU_DN_AUTO);
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int model_lab(const char *path) {
    th_model *m = NULL;
    if (th_model_load(path, NULL, &m)) { fprintf(stderr, "bench_dn: %s\n", th_last_error()); return 1; }
    int nvocab = th_model_n_vocab(m);
    static int32_t tok[4096], sq[512];
    static int8_t want[512];
    for (int i = 0; i < 4096; i++) tok[i] = 3 + (int32_t)(((uint32_t)i * 2654435761u >> 7) % (uint32_t)(nvocab - 3));
    printf("prefill through th_decode (batches of 512, logits of the last token only): tok/s (median of 5)\n");
    printf("| tokens | step | step+prep | chunk | chunk1 | auto |\n|---|---|---|---|---|---|\n");
    for (int li = 0; li < 7; li++) {
        int n = lens[li];
        double tps[NF + 1];
        for (int f = 0; f <= NF; f++) {
            th_cu_dn_set_variant(f < NF ? forms[f] : TH_CU_DN_AUTO);
            th_context_params cp = th_context_default_params();
            cp.n_ctx = 4096 + 64;
            cp.n_batch = 512;
            cp.gpu = true;
            th_context *c = NULL;
            if (th_context_new(m, &cp, &c)) { fprintf(stderr, "bench_dn: %s\n", th_last_error()); return 1; }
            double t[5];
            for (int r = 0; r < 6; r++) {
                th_kv_seq_truncate(c, 0, 0);
                double t0 = now();
                for (int i0 = 0; i0 < n; i0 += 512) {
                    int nb = n - i0 < 512 ? n - i0 : 512;
                    memset(want, 0, (size_t)nb);
                    want[nb - 1] = 1;
                    th_batch b = { .n_tokens = nb, .token = tok + i0, .seq_id = sq, .logits = want };
                    if (th_decode(c, &b)) { fprintf(stderr, "bench_dn: %s\n", th_last_error()); return 1; }
                }
                (void)th_get_logits(c, 0);
                if (r) t[r - 1] = now() - t0;
            }
            for (int i = 0; i < 5; i++)
                for (int j = i + 1; j < 5; j++)
                    if (t[j] < t[i]) { double x = t[i]; t[i] = t[j]; t[j] = x; }
            tps[f] = n / t[2];
            th_context_free(c);
        }
        printf("| %d | %.0f | %.0f | %.0f | %.0f | %.0f |\n", n, tps[0], tps[1], tps[2], tps[3], tps[4]);
    }
    th_cu_dn_set_variant(TH_CU_DN_AUTO);
    th_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "kernel")) return kernel_lab(argc >= 3 ? atoi(argv[2]) : 1);
    if (argc >= 3 && !strcmp(argv[1], "model")) return model_lab(argv[2]);
    fprintf(stderr, "usage: bench_dn kernel [SEQS <= 64] | bench_dn model FILE.gguf\n");
    return 2;
}
