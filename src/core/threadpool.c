/* threadpool.c — fork/join worker pool. th_pool_run bumps a generation counter that
 * the workers watch; each worker runs the task once per generation and counts down
 * `pending`; the caller runs its own share, then waits for pending to reach zero.
 * One op is microseconds of work, so workers spin (with a CPU pause) for a while
 * after each task before sleeping on a condition variable; the caller only takes the
 * mutex to wake sleepers when some worker is actually asleep. The caller's wait spins
 * and then yields the CPU (cores may be shared with other processes).
 * Not re-entrant: one th_pool_run at a time per pool. */
#include "core/threadpool.h"
#include "core/core.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax(void) { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax(void) { __asm__ volatile("yield"); }
#else
static inline void cpu_relax(void) {}
#endif

struct th_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    _Alignas(64) atomic_uint generation;   /* bumped once per run */
    atomic_int n_sleeping;                  /* workers inside (or entering) cond_wait */
    atomic_bool stop;
    th_task_fn fn;
    void *arg;
    _Alignas(64) atomic_int pending;        /* workers that have not finished this run */
};

typedef struct { th_pool *p; int ith; } worker_arg;

/* After a task a worker spins with a CPU pause for PAUSE_NS, then keeps polling but
 * yields the CPU between polls (another thread of ours may need this core) until
 * SPIN_NS, then sleeps. The caller pauses CALLER_SPINS polls, then yields between polls. */
enum { PAUSE_NS = 30 * 1000, SPIN_NS = 200 * 1000, CALLER_SPINS = 1024 };

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait until the generation differs from `seen` (or stop); return the new generation. */
static unsigned wait_for_work(th_pool *p, unsigned seen) {
    unsigned g;
    uint64_t start = 0;
    bool yielding = false;
    for (unsigned spins = 0;; spins++) {
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed)) return g;
        if (yielding) sched_yield();
        else cpu_relax();
        if ((spins & 63) == 63 || yielding) {
            uint64_t t = now_ns();
            if (!start) start = t;
            else if (t - start > SPIN_NS) break;
            else if (t - start > PAUSE_NS) yielding = true;
        }
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);           /* seq_cst: pairs with the caller's bump + load */
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->cv_work, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *v) {
    worker_arg *wa = v;
    th_pool *p = wa->p;
    const int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g = wait_for_work(p, seen);
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->fn(p->arg, ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

int th_n_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

th_pool *th_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    th_pool *p = calloc(1, sizeof *p);
    if (!p) { th_set_error(TH_ERR_NOMEM, "thread pool: out of memory"); return NULL; }
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv_work);
        free(p);
        th_set_error(TH_ERR_NOMEM, "thread pool: out of memory");
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) { wa->p = p; wa->ith = i; }
        if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            p->n = i; /* th_pool_free joins the i-1 workers started so far */
            th_pool_free(p);
            th_set_error(TH_ERR_NOMEM, "thread pool: cannot start thread %d of %d", i, n_threads);
            return NULL;
        }
    }
    return p;
}

void th_pool_free(th_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    free(p->threads);
    free(p);
}

int th_pool_size(const th_pool *p) { return p->n; }

void th_pool_run(th_pool *p, th_task_fn fn, void *arg) {
    if (p->n == 1) { fn(arg, 0, 1); return; }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1);           /* seq_cst: publishes fn/arg/pending */
    if (atomic_load(&p->n_sleeping) > 0) {          /* a worker is (going) asleep: wake it */
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n);
    for (unsigned spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins < CALLER_SPINS) cpu_relax();
        else sched_yield();
    }
}
