/* kv.h — the paged KV cache. Memory is a pool of fixed-size blocks, each holding
 * `block` token slots of K and V for every layer; each sequence owns a block table
 * (position p lives in table[p / block], slot p % block). Blocks are
 * reference-counted so sequences can share a prefix (th_kv_seq_copy); the shared
 * tail block is copied before it is written (copy-on-write). */
#ifndef TH_KV_H
#define TH_KV_H

#include "core/core.h"

typedef struct th_kv_seq {
    int32_t len;        /* cached positions */
    int32_t *table;     /* block ids, capacity n_blocks */
    int32_t n_table;
} th_kv_seq;

typedef struct th_kv {
    int32_t n_layer, block;
    int64_t k_dim, v_dim;         /* floats per token per layer */
    bool f16;                     /* store as fp16 (else f32) */
    size_t esz;                   /* element size */
    size_t block_bytes;
    uint32_t n_blocks;
    uint8_t *data;
    int32_t *refcnt;
    int32_t *free_ids;
    uint32_t n_free;
    int32_t n_seq;
    th_kv_seq *seqs;
    /* blocks (also) elsewhere (a GPU): copy-on-write calls this, NULL: none */
    void (*copy_block)(void *ud, int32_t dst, int32_t src);
    void *copy_ud;
    /* hybrid models: model layer → KV layer (only attention layers have one; the
     * recurrent ones -1), owned; NULL: every model layer is its own KV layer */
    int32_t *layer_slot;
} th_kv;

/* on_host false: only the bookkeeping (block tables, free list) lives here. */
th_status th_kv_init(th_kv *kv, int32_t n_layer, int64_t k_dim, int64_t v_dim, uint32_t n_ctx,
                     int32_t block, int32_t n_seq, bool f16, bool on_host);
void th_kv_free(th_kv *kv);

/* Make room for positions [len, new_len) of each sequence: need_len[s] is the
 * sequence's length after the batch (or its current length). All or nothing:
 * TH_ERR_CAPACITY if the pool cannot hold them. */
th_status th_kv_reserve(th_kv *kv, const int32_t *need_len);

/* Slot pointers (element type per kv->f16). Position must be reserved. */
static inline void *th_kv_k(const th_kv *kv, int32_t layer, int32_t seq, int32_t pos) {
    const th_kv_seq *s = &kv->seqs[seq];
    if (kv->layer_slot) layer = kv->layer_slot[layer];
    size_t b = (size_t)s->table[pos / kv->block];
    size_t slot = (size_t)(pos % kv->block);
    return kv->data + b * kv->block_bytes +
           ((size_t)layer * (size_t)kv->block * (size_t)(kv->k_dim + kv->v_dim) + slot * (size_t)kv->k_dim) * kv->esz;
}
static inline void *th_kv_v(const th_kv *kv, int32_t layer, int32_t seq, int32_t pos) {
    const th_kv_seq *s = &kv->seqs[seq];
    if (kv->layer_slot) layer = kv->layer_slot[layer];
    size_t b = (size_t)s->table[pos / kv->block];
    size_t slot = (size_t)(pos % kv->block);
    return kv->data + b * kv->block_bytes +
           ((size_t)layer * (size_t)kv->block * (size_t)(kv->k_dim + kv->v_dim) +
            (size_t)kv->block * (size_t)kv->k_dim + slot * (size_t)kv->v_dim) * kv->esz;
}

void th_kv_truncate(th_kv *kv, int32_t seq, int32_t n_keep);
void th_kv_copy_seq(th_kv *kv, int32_t dst, int32_t src);
uint32_t th_kv_used(const th_kv *kv);

#endif
