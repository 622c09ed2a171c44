/* bench_float_gemm.c — lab microbenchmark of the F16/BF16 batch gemm against the core's
 * arithmetic roof, in one run: first the peak of the instruction the gemm is built on,
 * per core (one thread): 512-bit FMA (vfmadd231ps zmm, 16 multiply-adds), 512-bit
 * vdpbf16ps (32 multiply-adds) where cpuid has AVX512-BF16, 256-bit FMA (8) for the avx2
 * level; each a loop of 24 (ymm: 12) independent accumulator chains, more than latency x
 * ports on current cores. Then the gemm of every level this CPU has, through the level's table
 * entry (the path th_fwd_matmul takes for batches: the packed gemm on the repacked
 * layout where the level has one, as after model load), at the 1.1B llama shapes
 * (rows x width 2048x2048, 5632x2048, 2048x5632) for batches N = 8, 32, 128, 512,
 * printing GFLOP/s (2 flops per multiply-add) and the share of the roof of the level's
 * instruction (FMA; BF16 at avx512: the faster of FMA and vdpbf16ps). Thread CPU
 * time (other processes on shared cores do not count). Not library code.
 * Usage: bench_float_gemm [seconds per measurement, default 0.3] [level: avx2|avx512]
 * BENCH_UNPACKED=1: the level's gemm entry on the original row-major layout instead (the
 * path of weights that are not repacked; F16/BF16 before the packed gemm), for A/B. */
#include "cpu/kernels.h"
#include "cpu/repack.h"
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double budget_s = 0.3;
static volatile float sink;

/* NC independent chains of one instruction in an asm loop (the compiler neither spills
 * nor removes them): zmm 24 chains (registers 8..31), ymm 12 (4..15). The multiplicands
 * are real data (as bf16 pairs: 1.0 x ~1e-3 for vdpbf16ps; f32 1.0 x 1e-9 for FMA), so
 * no denormals, overflows or zero shortcuts. */
static const float roof_a = 1.0f, roof_b = 1e-9f;
#define ROOF_ASM(INIT, BODY, ...)                                                                  \
    __asm__ volatile(INIT "1:\n\t" BODY "dec %0\n\tjnz 1b\n\t" : "+r"(iters) : "m"(roof_a), "m"(roof_b) : __VA_ARGS__, "cc")

__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) static void roof_fma512(long iters) {
    ROOF_ASM("vbroadcastss %1, %%zmm0\n\tvbroadcastss %2, %%zmm1\n\t",
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm8\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm9\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm10\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm11\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm12\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm13\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm14\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm15\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm16\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm17\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm18\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm19\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm20\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm21\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm22\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm23\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm24\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm25\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm26\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm27\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm28\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm29\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm30\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm31\n\t",
        "xmm0", "xmm1", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void roof_bf16(long iters) {
    ROOF_ASM("vbroadcastss %1, %%zmm0\n\tvbroadcastss %2, %%zmm1\n\t",
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm8\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm9\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm10\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm11\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm12\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm13\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm14\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm15\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm16\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm17\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm18\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm19\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm20\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm21\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm22\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm23\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm24\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm25\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm26\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm27\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm28\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm29\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm30\n\t"
        "vdpbf16ps %%zmm0, %%zmm1, %%zmm31\n\t",
        "xmm0", "xmm1", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}
__attribute__((target("avx2,fma"))) static void roof_fma256(long iters) {
    ROOF_ASM("vbroadcastss %1, %%ymm0\n\tvbroadcastss %2, %%ymm1\n\t",
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm4\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm5\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm6\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm7\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm8\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm9\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm10\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm11\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm12\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm13\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm14\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm15\n\t",
        "xmm0", "xmm1", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

/* G multiply-adds per second of one instruction kind (mac_per_inst lanes x products). */
static double roof(void (*fn)(long), double mac_per_inst, int chains) {
    long iters = 1 << 16;
    double t;
    for (;;) {
        double t0 = now();
        fn(iters);
        t = now() - t0;
        if (t > budget_s) break;
        iters *= 2;
    }
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        fn(iters);
        t = now() - t0;
        double g = (double)iters * chains * mac_per_inst / t / 1e9;
        if (g > best) best = g;
    }
    return best;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float rndf(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((int32_t)(rng >> 32) % 1000000) / 1000000.0f;
}

/* GFLOP/s of k->gemm[type] on rows x n weights and nb activation rows (best of 3). */
static double bench_gemm(const th_kernels *k, uint32_t type, int64_t rows, int64_t n, int64_t nb) {
    const size_t ws = (size_t)n * 2;
    uint16_t *w = malloc(ws * (size_t)rows), *x = malloc(ws * (size_t)nb);
    float *y = malloc(sizeof(float) * (size_t)(rows * nb));
    if (!w || !x || !y) { free(w); free(x); free(y); return 0; }
    for (int64_t i = 0; i < rows * n; i++) w[i] = type == TH_F16 ? th_f32_to_f16(rndf()) : th_f32_to_bf16(rndf());
    for (int64_t i = 0; i < nb * n; i++) x[i] = type == TH_F16 ? th_f32_to_f16(rndf()) : th_f32_to_bf16(rndf());
    /* the packed layout where the level has a packed gemm (as the model load does) */
    const char *up = getenv("BENCH_UNPACKED");
    const bool packed = k->gemm_packed[type] && !(up && !strcmp(up, "1"));
    th_gemm_fn gemm = packed ? k->gemm_packed[type] : k->gemm[type];
    if (packed) {
        uint16_t *wp = malloc(ws * (size_t)rows);
        if (!wp) { free(w); free(x); free(y); return 0; }
        th_repack_rows(type, w, wp, rows, ws);
        free(w);
        w = wp;
    }
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        int iters = 0;
        double t0 = now(), t;
        do {
            gemm(n, 0, rows, w, ws, nb, x, ws, y, rows);
            iters++;
        } while ((t = now() - t0) < budget_s / 3);
        double g = 2.0 * (double)iters * (double)rows * (double)n * (double)nb / t / 1e9;
        if (g > best) best = g;
    }
    sink = y[0];
    free(w); free(x); free(y);
    return best;
}

int main(int argc, char **argv) {
    if (argc > 1) budget_s = atof(argv[1]);
    const bool has512 = th_cpu_has_level(TH_LEVEL_AVX512), has2 = th_cpu_has_level(TH_LEVEL_AVX2);
    bool has_bf16 = false;
#if defined(__x86_64__)
    if (has512) {
        __builtin_cpu_init();
        has_bf16 = __builtin_cpu_supports("avx512bf16");
    }
#endif
    double r512 = 0, rbf = 0, r256 = 0;
    printf("roof, one core (G multiply-adds/s; GFLOP/s = 2x):\n");
    if (has512) printf("  vfmadd231ps zmm: %7.1f G MAC/s\n", r512 = roof(roof_fma512, 16, 24));
    if (has_bf16) printf("  vdpbf16ps zmm:   %7.1f G MAC/s\n", rbf = roof(roof_bf16, 32, 24));
    if (has2) printf("  vfmadd231ps ymm: %7.1f G MAC/s\n", r256 = roof(roof_fma256, 8, 12));
    static const int64_t shapes[3][2] = { { 2048, 2048 }, { 5632, 2048 }, { 2048, 5632 } };
    static const int64_t batches[4] = { 8, 32, 128, 512 };
    printf("\n%-8s %-5s %-11s %5s %9s %7s\n", "level", "type", "rows x n", "N", "GFLOP/s", "% roof");
    for (int level = TH_LEVEL_AVX2; level <= TH_LEVEL_AVX512; level++) {
        th_kernels k;
        if (!th_kernels_fill(&k, level) || (argc > 2 && strcmp(argv[2], k.level))) continue;
        for (int ti = 0; ti < 2; ti++) {
            const uint32_t type = ti ? TH_BF16 : TH_F16;
            /* the roof of the instruction the level's kernel is built on; BF16 at avx512:
             * the faster of FMA and vdpbf16ps (the level picks one of the two kernels) */
            double rf = level == TH_LEVEL_AVX512 ? (type == TH_BF16 && rbf > r512 ? rbf : r512) : r256;
            for (int s = 0; s < 3; s++)
                for (int b = 0; b < 4; b++) {
                    double g = bench_gemm(&k, type, shapes[s][0], shapes[s][1], batches[b]);
                    printf("%-8s %-5s %5lldx%-5lld %5lld %9.1f %6.1f%%\n", k.level, ti ? "BF16" : "F16",
                           (long long)shapes[s][0], (long long)shapes[s][1], (long long)batches[b], g,
                           rf > 0 ? 100.0 * g / (2.0 * rf) : 0.0);
                    fflush(stdout);
                }
        }
    }
    return 0;
}
