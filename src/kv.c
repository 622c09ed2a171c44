/* kv.c — paged KV cache: block pool with a free list and reference counts,
 * per-sequence block tables, copy-on-write of a shared tail block. */
#include "kv.h"
#include <stdlib.h>

th_status th_kv_init(th_kv *kv, int32_t n_layer, int64_t k_dim, int64_t v_dim, uint32_t n_ctx,
                     int32_t block, int32_t n_seq, bool f16, bool on_host) {
    memset(kv, 0, sizeof *kv);
    kv->n_layer = n_layer;
    kv->k_dim = k_dim;
    kv->v_dim = v_dim;
    kv->block = block;
    kv->f16 = f16;
    kv->esz = f16 ? 2 : 4;
    kv->n_seq = n_seq;
    kv->n_blocks = (n_ctx + (uint32_t)block - 1) / (uint32_t)block;
    uint64_t bb, total;
    if (!th_mul_u64((uint64_t)n_layer * (uint64_t)block, (uint64_t)(k_dim + v_dim) * kv->esz, &bb) ||
        !th_mul_u64(bb, kv->n_blocks, &total) || total > ((uint64_t)1 << 46))
        return th_set_error(TH_ERR_ARG, "KV cache of %u tokens is too large", n_ctx);
    kv->block_bytes = (size_t)bb;
    kv->data = on_host ? malloc((size_t)total ? (size_t)total : 1) : NULL;
    kv->refcnt = calloc(kv->n_blocks, sizeof *kv->refcnt);
    kv->free_ids = malloc(kv->n_blocks * sizeof *kv->free_ids);
    kv->seqs = calloc((size_t)n_seq, sizeof *kv->seqs);
    if ((on_host && !kv->data) || !kv->refcnt || !kv->free_ids || !kv->seqs) {
        th_kv_free(kv);
        return th_set_error(TH_ERR_NOMEM, "out of memory for a KV cache of %u tokens (%.1f MiB)", n_ctx,
                            (double)total / (1 << 20));
    }
    for (int32_t s = 0; s < n_seq; s++) {
        kv->seqs[s].table = malloc(kv->n_blocks * sizeof(int32_t));
        if (!kv->seqs[s].table) { th_kv_free(kv); return th_set_error(TH_ERR_NOMEM, "out of memory"); }
    }
    for (uint32_t i = 0; i < kv->n_blocks; i++) kv->free_ids[i] = (int32_t)(kv->n_blocks - 1 - i);
    kv->n_free = kv->n_blocks;
    return TH_OK;
}

void th_kv_free(th_kv *kv) {
    if (kv->seqs)
        for (int32_t s = 0; s < kv->n_seq; s++) free(kv->seqs[s].table);
    free(kv->seqs);
    free(kv->data);
    free(kv->refcnt);
    free(kv->free_ids);
    free(kv->layer_slot);
    memset(kv, 0, sizeof *kv);
}

static int32_t take_block(th_kv *kv) {
    int32_t b = kv->free_ids[--kv->n_free];
    kv->refcnt[b] = 1;
    return b;
}

static void drop_block(th_kv *kv, int32_t b) {
    if (--kv->refcnt[b] == 0) kv->free_ids[kv->n_free++] = b;
}

/* Blocks sequence s needs to grow to new_len (including un-sharing its tail). */
static uint32_t blocks_needed(const th_kv *kv, int32_t s, int32_t new_len) {
    const th_kv_seq *q = &kv->seqs[s];
    if (new_len <= q->len) return 0;
    int32_t want = (new_len + kv->block - 1) / kv->block;
    uint32_t n = (uint32_t)(want - q->n_table);
    bool tail_partial = q->len % kv->block != 0;
    if (tail_partial && kv->refcnt[q->table[q->n_table - 1]] > 1) n++;
    return n;
}

th_status th_kv_reserve(th_kv *kv, const int32_t *need_len) {
    uint64_t total = 0;
    for (int32_t s = 0; s < kv->n_seq; s++) total += blocks_needed(kv, s, need_len[s]);
    if (total > kv->n_free)
        return th_set_error(TH_ERR_CAPACITY, "KV cache full: the batch needs %llu more blocks of %d tokens, %u are free",
                            (unsigned long long)total, kv->block, kv->n_free);
    for (int32_t s = 0; s < kv->n_seq; s++) {
        th_kv_seq *q = &kv->seqs[s];
        if (need_len[s] <= q->len) continue;
        if (q->len % kv->block != 0 && kv->refcnt[q->table[q->n_table - 1]] > 1) {
            int32_t old = q->table[q->n_table - 1], nb = take_block(kv);
            if (kv->data)
                memcpy(kv->data + (size_t)nb * kv->block_bytes, kv->data + (size_t)old * kv->block_bytes, kv->block_bytes);
            if (kv->copy_block)   /* blocks elsewhere too (a GPU; both in a mixed placement) */
                kv->copy_block(kv->copy_ud, nb, old);
            drop_block(kv, old);
            q->table[q->n_table - 1] = nb;
        }
        int32_t want = (need_len[s] + kv->block - 1) / kv->block;
        while (q->n_table < want) q->table[q->n_table++] = take_block(kv);
    }
    return TH_OK;
}

void th_kv_truncate(th_kv *kv, int32_t seq, int32_t n_keep) {
    th_kv_seq *q = &kv->seqs[seq];
    if (n_keep < 0) n_keep = 0;
    if (n_keep >= q->len) return;
    int32_t keep_blocks = (n_keep + kv->block - 1) / kv->block;
    while (q->n_table > keep_blocks) drop_block(kv, q->table[--q->n_table]);
    q->len = n_keep;
}

void th_kv_copy_seq(th_kv *kv, int32_t dst, int32_t src) {
    if (dst == src) return;
    th_kv_truncate(kv, dst, 0);
    th_kv_seq *d = &kv->seqs[dst], *s = &kv->seqs[src];
    for (int32_t i = 0; i < s->n_table; i++) {
        d->table[i] = s->table[i];
        kv->refcnt[s->table[i]]++;
    }
    d->n_table = s->n_table;
    d->len = s->len;
}

uint32_t th_kv_used(const th_kv *kv) { return kv->n_blocks - kv->n_free; }
