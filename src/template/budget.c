/* budget.c — th_mem_budget: a byte budget shared by concurrent users (the
 * server's template renders, request bodies and parsed JSON), an atomic counter
 * that refuses a take which would pass its limit. */
#include "core/core.h"
#include <stdatomic.h>
#include <stdlib.h>

struct th_mem_budget {
    atomic_size_t used;
    size_t limit;
};

th_status th_mem_budget_new(size_t limit, th_mem_budget **out) {
    if (!out) return th_set_error(TH_ERR_ARG, "th_mem_budget_new: out is NULL");
    th_mem_budget *b = calloc(1, sizeof *b);
    if (!b) return th_set_error(TH_ERR_NOMEM, "out of memory");
    atomic_init(&b->used, 0);
    b->limit = limit;
    *out = b;
    return TH_OK;
}

void th_mem_budget_free(th_mem_budget *b) { free(b); }

bool th_mem_budget_take(th_mem_budget *b, size_t n) {
    if (!b) return true;
    size_t cur = atomic_load(&b->used);
    do {
        if (n > b->limit || cur > b->limit - n) return false;
    } while (!atomic_compare_exchange_weak(&b->used, &cur, cur + n));
    return true;
}

void th_mem_budget_give(th_mem_budget *b, size_t n) {
    if (b) atomic_fetch_sub(&b->used, n);
}

size_t th_mem_budget_used(const th_mem_budget *b) { return b ? atomic_load(&((th_mem_budget *)b)->used) : 0; }
size_t th_mem_budget_limit(const th_mem_budget *b) { return b ? b->limit : 0; }
