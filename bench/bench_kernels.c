/* bench_kernels.c — CPU kernel benchmark: for each weight type and a few matrix
 * shapes, matrix-vector throughput (GB/s of weight bytes read, vec_dot per row) and
 * the same through the packed gemm with one activation row (decode's path), and
 * gemm throughput with a batch of 128 activation rows (GOP/s, 2 ops per multiply-add),
 * for the generic (reference) level and the level th_cpu_kernels() picks (the best this
 * CPU has; TH_CPU=avx2 etc. forces one) side by side; then a
 * STREAM-like read pass over 1 GiB (1 and 2 threads) for the roofline.
 * Single thread, timed in thread CPU time, unless stated. Usage: bench_kernels [seconds per measurement] [type...] */
#include "core/threadpool.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Kernel timings use this thread's CPU time, so that other processes sharing the
 * cores (a busy build machine) do not count; the STREAM pass uses wall time. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint32_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 16); }
static float rndf(void) { return (float)((int32_t)rnd() % 1000000) / 1000000.0f; }

static double budget_s = 0.25; /* time per measurement */
static volatile float sink;

typedef struct { uint32_t type; int d_off, m_off; } wtype;
static const wtype wtypes[] = {
    { TH_F32, -1, -1 }, { TH_F16, -1, -1 }, { TH_BF16, -1, -1 }, { TH_Q8_0, 0, -1 }, { TH_Q4_0, 0, -1 },
    { TH_Q4_1, 0, 2 },  { TH_Q5_0, 0, -1 }, { TH_Q5_1, 0, 2 },   { TH_IQ4_NL, 0, -1 },
    { TH_Q2_K, 80, 82 }, { TH_Q3_K, 108, -1 }, { TH_Q4_K, 0, 2 }, { TH_Q5_K, 0, 2 }, { TH_Q6_K, 208, -1 },
    { TH_IQ4_XS, 0, -1 },
    { TH_Q2, 0, -1 }, { TH_Q3, 0, -1 }, { TH_Q4, 0, -1 }, { TH_Q5, 0, -1 }, { TH_Q6, 0, -1 }, { TH_Q8, 0, -1 },
    /* 1-bit / ternary (the BN types' row scales stay random bytes: timing only) */
    { TH_TQ1_0, 52, -1 }, { TH_TQ2_0, 64, -1 }, { TH_Q1_0_G128, 0, -1 }, { TH_IQ1_BN, -1, -1 }, { TH_IQ2_BN, -1, -1 },
};

static void fill_weights(const wtype *wt, uint8_t *dst, size_t bytes) {
    if (wt->type == TH_F32) { for (size_t i = 0; i < bytes / 4; i++) ((float *)dst)[i] = rndf(); return; }
    if (wt->type == TH_F16 || wt->type == TH_BF16) {
        for (size_t i = 0; i < bytes / 2; i++)
            ((uint16_t *)dst)[i] = wt->type == TH_F16 ? th_f32_to_f16(rndf()) : th_f32_to_bf16(rndf());
        return;
    }
    const uint32_t bb = th_type_info_get(wt->type)->bytes;
    for (size_t i = 0; i < bytes; i++) dst[i] = (uint8_t)rnd();
    for (size_t b = 0; b + bb <= bytes; b += bb) {
        uint16_t d = th_f32_to_f16(0.01f * rndf());
        if (wt->d_off < 0) break;
        memcpy(dst + b + wt->d_off, &d, 2);
        if (wt->m_off >= 0) memcpy(dst + b + wt->m_off, &d, 2);
    }
}

/* Matrix-vector: every row of the current copy dotted with one activation row. */
static double bench_matvec(th_vec_dot_fn dot, const uint8_t *w, size_t mat_bytes, int copies, int64_t rows,
                           size_t ws, int64_t n, const void *act, float *y) {
    int iters = 0, c = 0;
    double t0 = now(), t;
    do {
        const uint8_t *m = w + (size_t)c * mat_bytes;
        for (int64_t r = 0; r < rows; r++) dot(n, &y[r], m + (size_t)r * ws, act);
        c = (c + 1) % copies;
        iters++;
    } while ((t = now() - t0) < budget_s);
    sink = y[0];
    return (double)iters * (double)mat_bytes / t / 1e9;
}

/* Matrix-vector on the packed layout (one activation row through gemm_packed, as in
 * decode), cycling packed copies of the matrix; GB/s of the original's bytes. 0: the
 * type is not packed at this level. */
static double bench_matvec_packed(const th_kernels *k, uint32_t type, const uint8_t *w, size_t mat_bytes, int copies,
                                  int64_t rows, size_t ws, int64_t n, const void *act, size_t xs, float *y) {
    if (!th_repack_supported(k, type, rows, n)) return 0;
    const size_t pws = th_repack_row_bytes(type, ws), pmat = pws * (size_t)rows;
    uint8_t *pw = malloc(pmat * (size_t)copies);
    if (!pw) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int c = 0; c < copies; c++) th_repack_rows(type, w + (size_t)c * mat_bytes, pw + (size_t)c * pmat, rows, ws);
    int iters = 0, c = 0;
    double t0 = now(), t;
    do {
        k->gemm_packed[type](n, 0, rows, pw + (size_t)c * pmat, pws, 1, act, xs, y, rows);
        c = (c + 1) % copies;
        iters++;
    } while ((t = now() - t0) < budget_s);
    sink = y[0];
    free(pw);
    return (double)iters * (double)mat_bytes / t / 1e9;
}

typedef void (*gemm_call)(uint32_t type, const th_kernels *k, int64_t n, int64_t rows, const void *w,
                          size_t ws, int64_t nb, const void *x, size_t xs, float *y);
static void call_gemm(uint32_t type, const th_kernels *k, int64_t n, int64_t rows, const void *w, size_t ws,
                      int64_t nb, const void *x, size_t xs, float *y) {
    k->gemm[type](n, 0, rows, w, ws, nb, x, xs, y, rows);
}
static void call_gemm_packed(uint32_t type, const th_kernels *k, int64_t n, int64_t rows, const void *w, size_t ws,
                             int64_t nb, const void *x, size_t xs, float *y) {
    k->gemm_packed[type](n, 0, rows, w, ws, nb, x, xs, y, rows);
}
static void call_dot_loop(uint32_t type, const th_kernels *k, int64_t n, int64_t rows, const void *w, size_t ws,
                          int64_t nb, const void *x, size_t xs, float *y) {
    th_gemm_by_vec_dot(type, k, n, 0, rows, w, ws, nb, x, xs, y, rows);
}

static double bench_gemm(gemm_call call, uint32_t type, const th_kernels *k, int64_t n, int64_t rows,
                         const void *w, size_t ws, int64_t nb, const void *x, size_t xs, float *y) {
    int iters = 0;
    double t0 = now(), t;
    do { call(type, k, n, rows, w, ws, nb, x, xs, y); iters++; } while ((t = now() - t0) < budget_s);
    sink = y[0];
    return 2.0 * (double)iters * (double)rows * (double)n * (double)nb / t / 1e9;
}

static void bench_type(const wtype *wt, const th_kernels *gen, const th_kernels *fast, int64_t rows, int64_t n) {
    const uint32_t type = wt->type, at = th_type_info_get(type)->act_type;
    uint64_t ws64, xs64;
    if (!th_row_bytes(type, (uint64_t)n, &ws64) || !th_row_bytes(at, (uint64_t)n, &xs64)) return;
    const size_t ws = (size_t)ws64, xs = (size_t)xs64, mat = ws * (size_t)rows;
    /* enough copies of the matrix that one pass over them does not fit in the caches */
    const int copies = (int)((mat >= (96u << 20)) ? 1 : ((96u << 20) / mat + 1));
    const int64_t nb = 128;
    uint8_t *w = malloc(mat * (size_t)copies);
    uint8_t *x = malloc(xs * (size_t)nb);
    float *xf = malloc(sizeof *xf * (size_t)n), *y = malloc(sizeof *y * (size_t)(rows * nb));
    if (!w || !x || !xf || !y) { fprintf(stderr, "out of memory\n"); exit(1); }
    fill_weights(wt, w, mat);
    for (int c = 1; c < copies; c++) memcpy(w + (size_t)c * mat, w, mat);
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t i = 0; i < n; i++) xf[i] = rndf();
        th_ref_quantize(at, xf, x + (size_t)b * xs, n);
    }
    const int64_t grows_gen = TH_MIN(rows, 64), grows = TH_MIN(rows, 512);
    double g_gen = bench_gemm(call_dot_loop, type, gen, n, grows_gen, w, ws, nb, x, xs, y);
    double g_loop = fast ? bench_gemm(call_dot_loop, type, fast, n, grows, w, ws, nb, x, xs, y) : 0;
    double g_fast = fast ? bench_gemm(call_gemm, type, fast, n, grows, w, ws, nb, x, xs, y) : 0;
    double g_packed = 0;
    if (fast && th_repack_supported(fast, type, grows, n)) {
        const size_t pws = th_repack_row_bytes(type, ws);
        uint8_t *pw = malloc(pws * (size_t)grows);
        if (!pw) { fprintf(stderr, "out of memory\n"); exit(1); }
        th_repack_rows(type, w, pw, grows, ws);
        g_packed = bench_gemm(call_gemm_packed, type, fast, n, grows, pw, pws, nb, x, xs, y);
        free(pw);
    }
    double mv_gen = bench_matvec(gen->vec_dot[type], w, mat, copies, rows, ws, n, x, y);
    double mv_fast = fast ? bench_matvec(fast->vec_dot[type], w, mat, copies, rows, ws, n, x, y) : 0;
    double mv_packed = fast ? bench_matvec_packed(fast, type, w, mat, copies, rows, ws, n, x, xs, y) : 0;
    printf("%-7s %5lldx%-5lld %8.1f | %7.2f %7.2f %5.1fx %7.2f | %7.2f %7.2f %7.2f %5.1fx %7.2f\n", th_type_name(type),
           (long long)rows, (long long)n, (double)mat / 1048576.0, mv_gen, mv_fast, mv_fast / mv_gen, mv_packed, g_gen,
           g_loop, g_fast, g_fast / g_loop, g_packed);
    fflush(stdout);
    free(w); free(x); free(xf); free(y);
}

/* ---- STREAM-like read bandwidth ---- */

typedef struct { const float *buf; size_t n; double sum[64]; } read_job;

__attribute__((target("avx2"))) static double read_sum_avx2(const float *p, size_t n) {
    typedef float v8 __attribute__((vector_size(32), aligned(32)));
    v8 a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
    const v8 *v = (const v8 *)p;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) { a += v[i]; b += v[i + 1]; c += v[i + 2]; d += v[i + 3]; }
    v8 s = a + b + c + d;
    double t = 0;
    for (int i = 0; i < 8; i++) t += s[i];
    return t;
}

static void read_task(void *arg, int ith, int nth) {
    read_job *j = arg;
    size_t per = j->n / (size_t)nth / 32 * 32;
    j->sum[ith] = read_sum_avx2(j->buf + per * (size_t)ith, per);
}

static void bench_stream(void) {
    const size_t bytes = (size_t)1 << 30;
    float *buf = aligned_alloc(64, bytes);
    if (!buf) { printf("stream: cannot allocate 1 GiB\n"); return; }
    memset(buf, 0, bytes);
    for (int nt = 1; nt <= TH_MIN(2, th_n_cores()); nt++) {
        th_pool *pool = th_pool_new(nt);
        read_job job = { buf, bytes / 4, { 0 } };
        double best = 0;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = wall();
            th_pool_run(pool, read_task, &job);
            double gbs = (double)bytes / (wall() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
        sink = (float)job.sum[0];
        printf("stream read 1 GiB, %d thread%s: %.1f GB/s (best of 3)\n", nt, nt > 1 ? "s" : "", best);
        th_pool_free(pool);
    }
    free(buf);
}

int main(int argc, char **argv) {
    int first_type_arg = 1;
    if (argc > 1 && atof(argv[1]) > 0) { budget_s = atof(argv[1]); first_type_arg = 2; }
    th_kernels gen, fast_k;
    th_kernels_fill_generic(&gen);
    const th_kernels *table = th_cpu_kernels();
    const th_kernels *fast = NULL;
    if (strcmp(table->level, "generic") != 0) { fast_k = *table; fast = &fast_k; }
    printf("level: %s (generic = reference kernels of src/quant); single thread, thread CPU time; %.2f s per measurement\n",
           table->level, budget_s);
    printf("matvec: GB/s of weight bytes (matrix copies cycled past the caches; pk mv = one row through the\n"
           "packed gemm, as decode; 0 = not packed); gemm: nb=128, GOP/s\n");
    printf("gemm columns: generic vec_dot loop | %s vec_dot loop | %s gemm | gemm speed-up over its loop | gemm on\n"
           "the 8-row packed layout (quant/repack.c; 0 = none for this type)\n\n",
           table->level, table->level);
    printf("%-7s %11s %8s | %7s %7s %6s %7s | %7s %7s %7s %6s %7s\n", "type", "rows x n", "MiB", "gen",
           fast ? fast->level : "-", "x", "pk mv", "gen", "loop", "gemm", "x", "packed");
    static const int64_t shapes[][2] = { { 576, 1536 }, { 8192, 2048 } };
    for (size_t s = 0; s < 2; s++)
        for (size_t t = 0; t < sizeof wtypes / sizeof wtypes[0]; t++) {
            bool want = argc <= first_type_arg;
            for (int a = first_type_arg; a < argc; a++) want |= !strcmp(argv[a], th_type_name(wtypes[t].type));
            if (want) bench_type(&wtypes[t], &gen, fast, shapes[s][0], shapes[s][1]);
        }
    printf("\n");
    bench_stream();
    return 0;
}
