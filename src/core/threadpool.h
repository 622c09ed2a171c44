/* threadpool.h — a fixed pool of worker threads for the forward pass.
 * th_pool_run() runs fn(arg, ith, nth) on every thread (the caller is thread 0)
 * and returns when all are done: one fork/join per op. */
#ifndef TH_THREADPOOL_H
#define TH_THREADPOOL_H

typedef struct th_pool th_pool;
typedef void (*th_task_fn)(void *arg, int ith, int nth);

th_pool *th_pool_new(int n_threads);   /* NULL on failure (error set) */
void th_pool_free(th_pool *p);
int th_pool_size(const th_pool *p);
void th_pool_run(th_pool *p, th_task_fn fn, void *arg);
/* Number of online CPUs. */
int th_n_cores(void);

#endif
