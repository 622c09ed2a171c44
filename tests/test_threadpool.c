/* test_threadpool.c — th_pool_run: every thread runs the task exactly once per run
 * with the right (ith, nth), the caller sees the workers' writes after the run,
 * runs separated by pauses long enough for the workers to fall asleep still
 * complete (no lost wake-ups), pools larger than the core count work, and a pool
 * can be freed while its workers spin or sleep. An alarm turns a hang into a failure. */
#include "check.h"
#include "core/threadpool.h"
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

enum { MAX_T = 16 };

typedef struct {
    atomic_int calls[MAX_T];   /* how many times each ith ran */
    int last_run[MAX_T];       /* plain writes, read by the caller after th_pool_run */
    int run;                   /* the run number, written by the caller before th_pool_run */
    atomic_int bad_nth;
    int expect_nth;
} job;

static void task(void *arg, int ith, int nth) {
    job *j = arg;
    if (nth != j->expect_nth || ith < 0 || ith >= nth || ith >= MAX_T) { atomic_fetch_add(&j->bad_nth, 1); return; }
    atomic_fetch_add_explicit(&j->calls[ith], 1, memory_order_relaxed);
    j->last_run[ith] = j->run;
}

static void run_many(int nthreads, int runs, int sleep_us_every) {
    th_pool *p = th_pool_new(nthreads);
    CHECK(p != NULL, "th_pool_new(%d) failed", nthreads);
    if (!p) return;
    CHECK(th_pool_size(p) == nthreads);
    job *j = calloc(1, sizeof *j);
    j->expect_nth = nthreads;
    int stale = 0;
    for (int r = 1; r <= runs; r++) {
        j->run = r;
        th_pool_run(p, task, j);
        for (int t = 0; t < nthreads; t++) stale += j->last_run[t] != r;
        if (sleep_us_every && r % 4 == 0) usleep((useconds_t)sleep_us_every);
    }
    CHECK(atomic_load(&j->bad_nth) == 0, "task saw a wrong (ith, nth) %d times", atomic_load(&j->bad_nth));
    CHECK(stale == 0, "%d times the caller did not see a worker's write of this run", stale);
    for (int t = 0; t < nthreads; t++)
        CHECK(atomic_load(&j->calls[t]) == runs, "%d threads: thread %d ran %d times in %d runs", nthreads, t,
              atomic_load(&j->calls[t]), runs);
    th_pool_free(p);
    free(j);
}

static void test_every_thread_once_per_run(void) {
    run_many(1, 1000, 0);
    run_many(2, 30000, 0);
    run_many(3, 5000, 0);
}

static void test_oversubscribed(void) {
    int n = 2 * th_n_cores() + 1;
    run_many(n < MAX_T ? n : MAX_T, 1000, 0);
}

/* Pauses of 1 ms (longer than the workers' spin) put them to sleep between runs,
 * and pauses around the spin limit race the sleep/wake hand-over. */
static void test_no_lost_wakeups(void) {
    run_many(2, 200, 1000);
    run_many(4, 200, 1000);
    run_many(2, 400, 190);
    run_many(3, 400, 210);
}

static void test_free_idle_pool(void) {
    for (int i = 0; i < 20; i++) {
        th_pool *p = th_pool_new(3);
        CHECK(p != NULL);
        if (!p) return;
        if (i & 1) usleep(1000); /* workers asleep, or still spinning */
        th_pool_free(p);
    }
    th_pool *p = th_pool_new(0); /* fewer than one thread means one */
    CHECK(p && th_pool_size(p) == 1);
    th_pool_free(p);
    CHECK(th_n_cores() >= 1);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_threadpool (timed out: a run never finished)\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(1);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(120);
    RUN(test_every_thread_once_per_run);
    RUN(test_oversubscribed);
    RUN(test_no_lost_wakeups);
    RUN(test_free_idle_pool);
    return CHECK_DONE();
}
