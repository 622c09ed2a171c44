/* bench_dn_chunk.c — the delta rule of one layer's prefill on the CPU, token by token
 * (the kernel table's dn_step) against the chunked form (dn_chunk, chunks of 64), for
 * each kernel level: NV heads of width DK over N tokens, one thread, best of REPS.
 * Usage: bench_dn_chunk [DK [NV [N [REPS [CHUNK]]]]] (default 128 16 512 5 64). */
#include "cpu/kernels.h"
#include "cpu/dn_chunk.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int dk = argc > 1 ? atoi(argv[1]) : 128, nv = argc > 2 ? atoi(argv[2]) : 16;
    int n = argc > 3 ? atoi(argv[3]) : 512, reps = argc > 4 ? atoi(argv[4]) : 5, cl = argc > 5 ? atoi(argv[5]) : TH_DN_CHUNK;
    if (dk < 1 || dk > 1024 || nv < 1 || n < 1 || reps < 1 || cl < 1 || cl > TH_DN_CHUNK) return 2;
    size_t ns = (size_t)dk * dk;
    float *S = calloc(ns * nv, 4), *x = malloc((size_t)n * 3 * dk * 4), *bg = malloc((size_t)n * 2 * 4);
    float *o = malloc((size_t)n * dk * 4), *work = malloc((size_t)th_dn_chunk_work(dk, TH_DN_CHUNK) * 4);
    srand(1);
    for (size_t i = 0; i < (size_t)n * 3 * dk; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int t = 0; t < n; t++) { bg[2 * t] = 0.5f; bg[2 * t + 1] = -0.1f; }
    float sc = 1.0f / sqrtf((float)dk);
    printf("dk %d, %d heads, %d tokens, chunks of %d, 1 thread\n", dk, nv, n, cl);
    for (int lv = 0; lv < TH_LEVEL_COUNT; lv++) {
        th_kernels k;
        if (!th_cpu_has_level(lv) || !th_kernels_fill(&k, lv)) continue;
        double best[2] = { 1e30, 1e30 };
        for (int r = 0; r < reps; r++)
            for (int form = 0; form < 2; form++) {
                double t0 = now();
                for (int h = 0; h < nv; h++) {
                    float *Sh = S + (size_t)h * ns;
                    if (form == 0)
                        for (int t = 0; t < n; t++) {
                            const float *q = x + (size_t)t * 3 * dk;
                            k.dn_step(dk, Sh, q, q + dk, q + 2 * dk, bg[2 * t], expf(bg[2 * t + 1]), sc, o + (size_t)t * dk);
                        }
                    else
                        for (int t = 0; t < n; t += cl) {
                            int L = n - t < cl ? n - t : cl;
                            const float *q = x + (size_t)t * 3 * dk;
                            k.dn_chunk(dk, L, Sh, q, q + dk, q + 2 * dk, 3 * dk, bg + 2 * t, bg + 2 * t + 1, 2, sc,
                                       o + (size_t)t * dk, dk, work);
                        }
                }
                double dt = now() - t0;
                if (dt < best[form]) best[form] = dt;
            }
        printf("%-8s step %8.2f ms (%7.0f tok/s)   chunk %8.2f ms (%7.0f tok/s)   x%.2f\n", th_level_name(lv),
               best[0] * 1e3, n / best[0], best[1] * 1e3, n / best[1], best[0] / best[1]);
    }
    free(S); free(x); free(bg); free(o); free(work);
    return 0;
}
