/* bench_pool.c — fork/join latency of th_pool_run: the wall time of one run of an
 * empty task, back to back (workers spinning) and after a 1 ms pause (workers
 * asleep, woken through the condition variable), for a few pool sizes.
 * Usage: bench_pool [max threads] */
#include "core/threadpool.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nop(void *arg, int ith, int nth) { (void)arg; (void)ith; (void)nth; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int max_t = argc > 1 ? atoi(argv[1]) : th_n_cores();
    if (max_t < 1) max_t = 1;
    printf("cores online: %d\n", th_n_cores());
    printf("%7s | %14s | %22s\n", "threads", "hot us/run", "after 1 ms idle: median / p90 us");
    for (int nt = 1; nt <= max_t; nt = nt < 2 ? 2 : nt * 2) {
        th_pool *p = th_pool_new(nt);
        if (!p) { printf("cannot start %d threads\n", nt); return 1; }
        for (int i = 0; i < 1000; i++) th_pool_run(p, nop, NULL); /* warm up */
        int runs = 0;
        double t0 = wall(), t;
        do { for (int i = 0; i < 1000; i++) th_pool_run(p, nop, NULL); runs += 1000; } while ((t = wall() - t0) < 0.5);
        double cold[100];
        for (int i = 0; i < 100; i++) {
            usleep(1000);
            double s = wall();
            th_pool_run(p, nop, NULL);
            cold[i] = (wall() - s) * 1e6;
        }
        qsort(cold, 100, sizeof cold[0], cmp_double);
        printf("%7d | %14.2f | %10.1f / %.1f\n", nt, t / runs * 1e6, cold[50], cold[90]);
        th_pool_free(p);
        if (nt == max_t) break;
        if (nt * 2 > max_t && nt != max_t) nt = max_t / 2; /* end exactly on max_t */
    }
    return 0;
}
