/* threadpool.c — fork/join worker pool: a generation counter wakes the workers,
 * a countdown tells the caller when all finished. Workers spin briefly before
 * sleeping on a condition variable, since one op is microseconds of work. */
#include "core/threadpool.h"
#include "core/core.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct th_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    atomic_uint generation;
    atomic_int pending;
    atomic_bool stop;
    th_task_fn fn;
    void *arg;
};

typedef struct { th_pool *p; int ith; } worker_arg;

enum { SPIN_ITERS = 20000 };

static void *worker_main(void *v) {
    worker_arg *wa = v;
    th_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop) && spins < SPIN_ITERS)
            spins++;
        if (g == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
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
    if (!p->threads) { free(p); th_set_error(TH_ERR_NOMEM, "thread pool: out of memory"); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa || pthread_create(&p->threads[i], NULL, worker_main, (wa->p = p, wa->ith = i, wa)) != 0) {
            free(wa);
            p->n = i;
            th_pool_free(p);
            th_set_error(TH_ERR_NOMEM, "thread pool: cannot start thread %d", i);
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
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
        ;
}
