/* bpe.c — byte-level BPE (tokenizer.ggml.model = gpt2), as llama.cpp's
 * llm_tokenizer_bpe_session: the pre-tokenizer splits the text into words, each
 * word's UTF-8 bytes are mapped to GPT-2's printable code points, and adjacent
 * symbols are merged lowest merge rank first (ties: leftmost). Symbols that end
 * up not being tokens are emitted byte by byte where single bytes are tokens. */
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <string.h>

typedef struct sym { int32_t prev, next; uint32_t off, n; int32_t id; } sym;
typedef struct bigram { int32_t left, right; uint32_t rank; int32_t lid, rid, result; } bigram;

static bool bg_before(const bigram *a, const bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

/* Per-call cache of word -> ids: natural text repeats words, and a word's
 * tokens depend on the word alone. */
#define CACHE_SLOTS 65536u
#define CACHE_MAX_WORD 64u
#ifndef BPE_CACHE_MIN_TEXT
#define BPE_CACHE_MIN_TEXT 4096   /* shorter texts: not worth it */
#endif
typedef struct cache_entry { uint32_t word_off, word_len, ids_off, ids_n; } cache_entry;
typedef struct word_cache {
    uint32_t *slots;         /* entry index + 1, 0 = empty */
    cache_entry *e;
    uint32_t n;
    th_bytes words;
    th_ids ids;
} word_cache;

typedef struct bpe_ctx {
    const th_vocab *v;
    word_cache cache;
    th_ids *out;
    th_bytes enc;
    sym *syms;
    size_t syms_cap;
    bigram *heap;
    size_t heap_n, heap_cap;
    bool oom;
} bpe_ctx;

static void heap_push(bpe_ctx *c, bigram b) {
    if (c->heap_n == c->heap_cap) {
        size_t nc = c->heap_cap ? c->heap_cap * 2 : 64;
        bigram *np = realloc(c->heap, nc * sizeof *np);
        if (!np) { c->oom = true; return; }
        c->heap = np; c->heap_cap = nc;
    }
    size_t i = c->heap_n++;
    while (i && bg_before(&b, &c->heap[(i - 1) / 2])) { c->heap[i] = c->heap[(i - 1) / 2]; i = (i - 1) / 2; }
    c->heap[i] = b;
}

static bigram heap_pop(bpe_ctx *c) {
    bigram top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= n) break;
        if (k + 1 < n && bg_before(&c->heap[k + 1], &c->heap[k])) k++;
        if (!bg_before(&c->heap[k], &last)) break;
        c->heap[i] = c->heap[k];
        i = k;
    }
    if (n) c->heap[i] = last;
    return top;
}

static void add_bigram(bpe_ctx *c, int32_t l, int32_t r) {
    if (l < 0 || r < 0 || c->syms[l].id < 0 || c->syms[r].id < 0) return;
    const th_merge *m = th_vocab_merge(c->v, (uint32_t)c->syms[l].id, (uint32_t)c->syms[r].id);
    if (m) heap_push(c, (bigram){ l, r, m->rank, c->syms[l].id, c->syms[r].id, (int32_t)m->result });
}

static void emit_symbol(bpe_ctx *c, const sym *s) {
    const th_vocab *v = c->v;
    if (s->id >= 0 && s->id < v->n_tokens) { th_ids_push(c->out, s->id); return; }
    for (uint32_t j = 0; j < s->n; j++) {
        int32_t id = th_vocab_find(v, c->enc.p + s->off + j, 1);
        if (id >= 0 && id < v->n_tokens) th_ids_push(c->out, id);
    }
}

static void merge_word(bpe_ctx *c, const char *w, size_t wn) {
    const th_vocab *v = c->v;
    c->enc.n = 0;
    for (size_t i = 0; i < wn; i++) {             /* bytes -> GPT-2 code points */
        int l;
        const char *u = th_gpt2_byte_utf8((uint8_t)w[i], &l);
        th_bytes_put(&c->enc, u, (size_t)l);
    }
    if (c->enc.failed) { c->oom = true; return; }
    const char *e = c->enc.p;
    size_t n = c->enc.n;
    if (v->ignore_merges) {
        int32_t id = th_vocab_find(v, e, n);
        if (id >= 0 && id < v->n_tokens) { th_ids_push(c->out, id); return; }
    }
    if (n > c->syms_cap) {
        sym *ns = realloc(c->syms, n * sizeof *ns);
        if (!ns) { c->oom = true; return; }
        c->syms = ns; c->syms_cap = n;
    }
    int32_t ns = 0;
    for (size_t off = 0; off < n; ns++) {
        size_t l = TH_MIN(th_utf8_len((uint8_t)e[off]), n - off);
        c->syms[ns] = (sym){ ns - 1, off + l == n ? -1 : ns + 1, (uint32_t)off, (uint32_t)l, th_vocab_find(v, e + off, l) };
        off += l;
    }
    c->heap_n = 0;
    for (int32_t i = 1; i < ns; i++) add_bigram(c, i - 1, i);
    while (c->heap_n && !c->oom) {
        bigram b = heap_pop(c);
        sym *l = &c->syms[b.left], *r = &c->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->id != b.lid || r->id != b.rid) continue;   /* stale */
        l->n += r->n;
        l->id = b.result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) c->syms[r->next].prev = b.left;
        add_bigram(c, l->prev, b.left);
        add_bigram(c, b.left, l->next);
    }
    for (int32_t i = 0; i < ns; i++) if (c->syms[i].n) emit_symbol(c, &c->syms[i]);
}

static uint32_t word_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* The cache slot for w: its entry (*hit) or the empty slot to fill; NULL if the
 * word is not cacheable. */
static uint32_t *cache_slot(word_cache *wc, const char *w, size_t n, bool *hit) {
    *hit = false;
    if (!wc->slots || n > CACHE_MAX_WORD) return NULL;
    for (uint32_t i = word_hash(w, n) & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        uint32_t e = wc->slots[i];
        if (!e) return &wc->slots[i];
        const cache_entry *ce = &wc->e[e - 1];
        if (ce->word_len == n && !memcmp(wc->words.p + ce->word_off, w, n)) { *hit = true; return &wc->slots[i]; }
    }
}

static void on_word(void *ctx, const char *w, size_t n) {
    bpe_ctx *c = ctx;
    if (c->oom) return;
    word_cache *wc = &c->cache;
    bool hit;
    uint32_t *slot = cache_slot(wc, w, n, &hit);
    if (hit) {
        const cache_entry *ce = &wc->e[*slot - 1];
        for (uint32_t k = 0; k < ce->ids_n; k++) th_ids_push(c->out, wc->ids.p[ce->ids_off + k]);
        return;
    }
    size_t start = c->out->n;
    merge_word(c, w, n);
    if (!slot || c->oom || c->out->oom || wc->n >= CACHE_SLOTS / 2) return;
    cache_entry ce = { (uint32_t)wc->words.n, (uint32_t)n, (uint32_t)wc->ids.n, (uint32_t)(c->out->n - start) };
    th_bytes_put(&wc->words, w, n);
    for (size_t k = start; k < c->out->n; k++) th_ids_push(&wc->ids, c->out->p[k]);
    if (wc->words.failed || wc->ids.oom) return;     /* just stop caching */
    wc->e[wc->n++] = ce;
    *slot = wc->n;
}

th_status th_bpe_tokenize(const th_vocab *v, const char *text, size_t len, th_ids *out) {
    bpe_ctx c = { .v = v, .out = out };
    if (len > BPE_CACHE_MIN_TEXT) {
        c.cache.slots = calloc(CACHE_SLOTS, sizeof *c.cache.slots);
        c.cache.e = malloc(CACHE_SLOTS / 2 * sizeof *c.cache.e);
        if (!c.cache.e) { free(c.cache.slots); c.cache.slots = NULL; }
    }
    th_status st = th_pretok_split(v->pretok, text, len, on_word, &c);
    free(c.enc.p); free(c.syms); free(c.heap);
    free(c.cache.slots); free(c.cache.e); free(c.cache.words.p); free(c.cache.ids.p);
    if (st == TH_OK && (c.oom || out->oom)) st = th_set_error(TH_ERR_NOMEM, "tokenize: out of memory");
    return st;
}
