/* grammar_constraint.c — constrained sampling (th_grammar_vocab_*, th_constraint_* in
 * theseus.h): which tokens of a model's vocabulary the grammar can accept next, and
 * advancing the grammar by the tokens that were chosen.
 *
 * The vocabulary is a byte trie of the token pieces, built once per model and shared
 * (read-only) by every constraint. The mask of a grammar state is one depth-first walk of
 * that trie carrying the parser state: a byte that completes a code point steps the stack
 * set (memoized per (set, code point) in the store, so a walk over a state seen before is
 * table look-ups), a byte inside a multi-byte character keeps the set and is pruned by
 * llama.cpp's partial-character test, an invalid byte prunes its subtree. Tokens ending
 * at a node the walk reaches are allowed. End-of-generation tokens are allowed exactly
 * when the grammar is complete. Masks are cached per state (stack set + pending partial
 * character), so a state that recurs (inside a JSON string, between list items) costs
 * one look-up. th_constraint_sample checks the token the unconstrained sampler picks
 * first and masks the whole vocabulary only when that token is not allowed (llama.cpp's
 * trick); for plain temperature sampling the result has exactly the masked distribution. */
#include "core/core.h"
#include "sample/grammar_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct th_grammar_vocab {
    int32_t n_vocab;
    uint32_t n_nodes;
    uint32_t *child_lo;      /* [n_nodes + 1] children of node i: ids child_lo[i] .. child_lo[i+1]-1 */
    uint8_t *byte;           /* [n_nodes] the byte leading to node i */
    uint32_t *tok_lo, *tok_n;/* tokens ending at node i: sorted[tok_lo[i] .. + tok_n[i]) */
    int32_t *sorted;         /* token ids in piece order (only tokens with a non-empty piece) */
    uint32_t *piece_off;     /* [n_vocab + 1] */
    char *pieces;
    uint8_t *eog;            /* [n_vocab] end-of-generation tokens */
    uint32_t max_len;        /* longest piece */
};

#define MASK_CACHE 64

typedef struct mask_entry {
    uint32_t set;
    th_utf8_partial partial;
    uint64_t generation, used;
    int32_t n_allowed;
    uint64_t *bits;          /* NULL: free slot */
} mask_entry;

typedef struct walk_frame { uint32_t node, set, next; th_utf8_partial partial; } walk_frame;

struct th_constraint {
    th_grammar g;            /* a private copy of the rules (names not needed) */
    const th_grammar_vocab *v;
    th_gstore *store;
    uint32_t set;
    th_utf8_partial partial;
    bool ended;              /* an end-of-generation token was accepted */
    mask_entry cache[MASK_CACHE];
    uint64_t clock;
    th_constraint_stats stats;
    walk_frame *frames;
    float *scratch;
};

/* ---------------------------------------------------------------- vocabulary */

typedef struct piece_ref { const uint8_t *p; uint32_t len; int32_t id; } piece_ref;
static int cmp_piece(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void th_grammar_vocab_free(th_grammar_vocab *v) {
    if (!v) return;
    free(v->child_lo); free(v->byte); free(v->tok_lo); free(v->tok_n); free(v->sorted);
    free(v->piece_off); free(v->pieces); free(v->eog);
    free(v);
}

/* Pieces of every token (control tokens and other empty pieces are never allowed). */
static th_status read_pieces(th_grammar_vocab *v, const th_model *model, int32_t *n_sorted) {
    int32_t n = v->n_vocab;
    size_t cap = (size_t)n * 8 + 64, used = 0;
    v->pieces = malloc(cap);
    v->piece_off = malloc(((size_t)n + 1) * sizeof *v->piece_off);
    v->eog = calloc((size_t)n, 1);
    v->sorted = malloc((size_t)(n ? n : 1) * sizeof *v->sorted);
    if (!v->pieces || !v->piece_off || !v->eog || !v->sorted) return th_set_error(TH_ERR_NOMEM, "grammar vocabulary: out of memory");
    *n_sorted = 0;
    for (int32_t t = 0; t < n; t++) {
        v->piece_off[t] = (uint32_t)used;
        v->eog[t] = th_token_is_eog(model, t);
        if (v->eog[t]) continue;
        int32_t k = th_token_to_piece(model, t, v->pieces + used, (int32_t)TH_MIN(cap - used, (size_t)INT32_MAX), false);
        if (k < 0 && k != INT32_MIN) {
            size_t need = used + (size_t)-k;
            while (cap < need) cap *= 2;
            if (cap > UINT32_MAX) return th_set_error(TH_ERR_CAPACITY, "grammar vocabulary: token pieces over 4 GiB");
            char *np = realloc(v->pieces, cap);
            if (!np) return th_set_error(TH_ERR_NOMEM, "grammar vocabulary: out of memory");
            v->pieces = np;
            k = th_token_to_piece(model, t, v->pieces + used, (int32_t)TH_MIN(cap - used, (size_t)INT32_MAX), false);
        }
        if (k <= 0) continue;                 /* invalid id or empty piece */
        if (used + (size_t)k > UINT32_MAX) return th_set_error(TH_ERR_CAPACITY, "grammar vocabulary: token pieces over 4 GiB");
        if ((unsigned char)v->pieces[used] == 0) continue;   /* llama.cpp: a piece starting with NUL is never allowed */
        used += (size_t)k;
        if ((uint32_t)k > v->max_len) v->max_len = (uint32_t)k;
        v->sorted[(*n_sorted)++] = t;
        if (cap - used < 64) {
            cap *= 2;
            char *np = realloc(v->pieces, cap);
            if (!np) return th_set_error(TH_ERR_NOMEM, "grammar vocabulary: out of memory");
            v->pieces = np;
        }
    }
    v->piece_off[n] = (uint32_t)used;
    return TH_OK;
}

/* The trie, breadth first: a node covers a run of sorted tokens sharing its prefix; the
 * tokens whose piece ends there come first in the run, the rest split by their next byte. */
static th_status build_trie(th_grammar_vocab *v, int32_t n_sorted) {
    typedef struct { uint32_t lo, hi, depth; } span;
    size_t cap = 1024;
    span *q = malloc(cap * sizeof *q);
    v->child_lo = malloc((cap + 1) * sizeof *v->child_lo);
    v->byte = malloc(cap);
    v->tok_lo = malloc(cap * sizeof *v->tok_lo);
    v->tok_n = malloc(cap * sizeof *v->tok_n);
    if (!q || !v->child_lo || !v->byte || !v->tok_lo || !v->tok_n) { free(q); return th_set_error(TH_ERR_NOMEM, "grammar vocabulary: out of memory"); }
    uint32_t n_nodes = 1;
    q[0] = (span){ 0, (uint32_t)n_sorted, 0 };
    v->byte[0] = 0;
#define PLEN(t) (v->piece_off[(t) + 1] - v->piece_off[t])
#define PBYTE(t, d) ((uint8_t)v->pieces[v->piece_off[t] + (d)])
    for (uint32_t i = 0; i < n_nodes; i++) {
        span sp = q[i];
        uint32_t k = sp.lo;
        while (k < sp.hi && PLEN(v->sorted[k]) == sp.depth) k++;
        v->tok_lo[i] = sp.lo;
        v->tok_n[i] = k - sp.lo;
        v->child_lo[i] = n_nodes;
        while (k < sp.hi) {
            uint8_t b = PBYTE(v->sorted[k], sp.depth);
            uint32_t e = k + 1;
            while (e < sp.hi && PBYTE(v->sorted[e], sp.depth) == b) e++;
            if (n_nodes + 1 >= cap) {
                cap *= 2;
                span *nq = realloc(q, cap * sizeof *q);
                if (nq) q = nq;
                uint32_t *c = realloc(v->child_lo, (cap + 1) * sizeof *c);
                if (c) v->child_lo = c;
                uint8_t *by = realloc(v->byte, cap);
                if (by) v->byte = by;
                uint32_t *tl = realloc(v->tok_lo, cap * sizeof *tl);
                if (tl) v->tok_lo = tl;
                uint32_t *tn = realloc(v->tok_n, cap * sizeof *tn);
                if (tn) v->tok_n = tn;
                if (!nq || !c || !by || !tl || !tn) { free(q); return th_set_error(TH_ERR_NOMEM, "grammar vocabulary: out of memory"); }
            }
            q[n_nodes] = (span){ k, e, sp.depth + 1 };
            v->byte[n_nodes] = b;
            n_nodes++;
            k = e;
        }
    }
#undef PLEN
#undef PBYTE
    v->child_lo[n_nodes] = n_nodes;
    v->n_nodes = n_nodes;
    free(q);
    return TH_OK;
}

th_status th_grammar_vocab_new(const th_model *model, th_grammar_vocab **out) {
    if (!model || !out) return th_set_error(TH_ERR_ARG, "th_grammar_vocab_new: invalid arguments");
    *out = NULL;
    th_grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return th_set_error(TH_ERR_NOMEM, "grammar vocabulary: out of memory");
    v->n_vocab = th_model_n_vocab(model);
    int32_t n_sorted = 0;
    th_status s = read_pieces(v, model, &n_sorted);
    if (s == TH_OK) {
        piece_ref *refs = malloc((size_t)(n_sorted ? n_sorted : 1) * sizeof *refs);
        if (!refs) s = th_set_error(TH_ERR_NOMEM, "grammar vocabulary: out of memory");
        else {
            for (int32_t i = 0; i < n_sorted; i++) {
                int32_t t = v->sorted[i];
                refs[i] = (piece_ref){ (const uint8_t *)v->pieces + v->piece_off[t], v->piece_off[t + 1] - v->piece_off[t], t };
            }
            qsort(refs, (size_t)n_sorted, sizeof *refs, cmp_piece);
            for (int32_t i = 0; i < n_sorted; i++) v->sorted[i] = refs[i].id;
            free(refs);
            s = build_trie(v, n_sorted);
        }
    }
    if (s != TH_OK) { th_grammar_vocab_free(v); return s; }
    *out = v;
    return TH_OK;
}

int32_t th_grammar_vocab_n_vocab(const th_grammar_vocab *v) { return v ? v->n_vocab : 0; }

/* ---------------------------------------------------------------- constraint */

static void copy_rules(th_grammar *dst, const th_grammar *src, bool *ok) {
    dst->n_elems = src->n_elems;
    dst->n_rules = src->n_rules;
    dst->root = src->root;
    dst->elems = malloc((src->n_elems ? src->n_elems : 1) * sizeof *dst->elems);
    dst->rule_off = malloc((src->n_rules ? src->n_rules : 1) * sizeof *dst->rule_off);
    *ok = dst->elems && dst->rule_off;
    if (*ok) {
        memcpy(dst->elems, src->elems, src->n_elems * sizeof *dst->elems);
        memcpy(dst->rule_off, src->rule_off, src->n_rules * sizeof *dst->rule_off);
    }
}

void th_constraint_free(th_constraint *c) {
    if (!c) return;
    th_gstore_free(c->store);
    for (int i = 0; i < MASK_CACHE; i++) free(c->cache[i].bits);
    free(c->g.elems);
    free(c->g.rule_off);
    free(c->frames);
    free(c->scratch);
    free(c);
}

th_status th_constraint_new(const th_grammar *g, const th_grammar_vocab *v, th_constraint **out) {
    if (!g || !out) return th_set_error(TH_ERR_ARG, "th_constraint_new: invalid arguments");
    *out = NULL;
    th_constraint *c = calloc(1, sizeof *c);
    if (!c) return th_set_error(TH_ERR_NOMEM, "grammar: out of memory");
    bool ok;
    copy_rules(&c->g, g, &ok);
    c->v = v;
    if (ok) c->store = th_gstore_new(&c->g);
    if (ok && v) {
        c->frames = malloc(((size_t)v->max_len + 2) * sizeof *c->frames);
        c->scratch = malloc((size_t)(v->n_vocab ? v->n_vocab : 1) * sizeof *c->scratch);
    }
    if (!ok || !c->store || (v && (!c->frames || !c->scratch))) {
        th_constraint_free(c);
        return th_set_error(TH_ERR_NOMEM, "grammar: out of memory");
    }
    c->set = th_gstore_initial(c->store);
    if (!c->set) {
        th_status s = th_last_error()[0] ? TH_ERR_CAPACITY : TH_ERR_INTERNAL;
        th_constraint_free(c);
        return s;
    }
    *out = c;
    return TH_OK;
}

void th_constraint_reset(th_constraint *c) {
    if (!c) return;
    c->set = th_gstore_initial(c->store);
    c->partial = (th_utf8_partial){ 0 };
    c->ended = false;
}

bool th_constraint_is_complete(const th_constraint *c) {
    return c && c->partial.n_remain == 0 && th_gstore_set_complete(c->store, c->set);
}

bool th_constraint_can_continue(const th_constraint *c) {
    return c && !c->ended && (c->partial.n_remain != 0 || th_gstore_set_can_continue(c->store, c->set));
}

/* Feed bytes to (set, partial) without committing; false at the first byte that cannot
 * be taken (*fail_at = offset of the character it belongs to) or on an error (*err). */
static bool feed(th_constraint *c, uint32_t *set, th_utf8_partial *p, const char *bytes, size_t n, size_t *fail_at,
                 th_status *err) {
    size_t char_start = 0;
    *err = TH_OK;
    for (size_t i = 0; i < n; i++) {
        if (p->n_remain == 0) char_start = i;
        uint32_t cp;
        int r = th_utf8_feed(p, (uint8_t)bytes[i], &cp);
        if (r < 0) { *fail_at = p->n_remain ? char_start : i; return false; }
        if (r == 0) continue;
        uint32_t next = th_gstore_step(c->store, *set, cp, err);
        if (!next) { *fail_at = char_start; return false; }
        *set = next;
    }
    return true;
}

/* Keep the store bounded: when it is full, keep only the current state. */
static th_status maybe_rebuild(th_constraint *c) {
    if (!th_gstore_full(c->store)) return TH_OK;
    th_status err;
    uint32_t s = th_gstore_rebuild(c->store, c->set, &err);
    if (!s) return err != TH_OK ? err : th_set_error(TH_ERR_INTERNAL, "grammar: rebuilding the parse stacks failed");
    c->set = s;
    return TH_OK;
}

th_status th_constraint_accept_text(th_constraint *c, const char *text, size_t len, size_t *n_matched) {
    if (!c || (!text && len)) return th_set_error(TH_ERR_ARG, "th_constraint_accept_text: invalid arguments");
    uint32_t set = c->set;
    th_utf8_partial p = c->partial;
    size_t fail_at = len;
    th_status err;
    bool ok = c->ended ? (fail_at = 0, len == 0) : feed(c, &set, &p, text, len, &fail_at, &err);
    if (n_matched) *n_matched = ok ? len : fail_at;
    if (!ok) {
        if (!c->ended && err != TH_OK) return err;
        return th_set_error(TH_ERR_FORMAT, "grammar: no match at byte %zu", fail_at);
    }
    c->set = set;
    c->partial = p;
    return maybe_rebuild(c);
}

static th_status need_vocab(const th_constraint *c, th_token t, const char *fn) {
    if (!c) return th_set_error(TH_ERR_ARG, "%s: no constraint", fn);
    if (!c->v) return th_set_error(TH_ERR_ARG, "%s: the constraint has no vocabulary", fn);
    if (t < 0 || t >= c->v->n_vocab) return th_set_error(TH_ERR_ARG, "%s: token %d outside the vocabulary", fn, t);
    return TH_OK;
}

bool th_constraint_allows(th_constraint *c, th_token t) {
    if (need_vocab(c, 0, "th_constraint_allows") != TH_OK || t < 0 || t >= c->v->n_vocab || c->ended) return false;
    if (c->v->eog[t]) return th_constraint_is_complete(c);
    uint32_t off = c->v->piece_off[t], n = c->v->piece_off[t + 1] - off;
    if (n == 0 || c->v->pieces[off] == 0) return false;
    uint32_t set = c->set;
    th_utf8_partial p = c->partial;
    size_t at;
    th_status err;
    if (!feed(c, &set, &p, c->v->pieces + off, n, &at, &err)) return false;
    return p.n_remain == 0 || th_gstore_partial_ok(c->store, set, &p);
}

th_status th_constraint_accept(th_constraint *c, th_token t) {
    th_status s = need_vocab(c, t, "th_constraint_accept");
    if (s != TH_OK) return s;
    if (c->ended) return th_set_error(TH_ERR_ARG, "grammar: token %d after the end of generation", t);
    if (c->v->eog[t]) {
        if (!th_constraint_is_complete(c))
            return th_set_error(TH_ERR_ARG, "grammar: end-of-generation token %d before the grammar is complete", t);
        c->ended = true;
        return TH_OK;
    }
    uint32_t off = c->v->piece_off[t], n = c->v->piece_off[t + 1] - off;
    if (n == 0 || c->v->pieces[off] == 0) return th_set_error(TH_ERR_ARG, "grammar: token %d has no text the grammar could match", t);
    uint32_t set = c->set;
    th_utf8_partial p = c->partial;
    size_t at;
    if (!feed(c, &set, &p, c->v->pieces + off, n, &at, &s) || (p.n_remain && !th_gstore_partial_ok(c->store, set, &p))) {
        if (s != TH_OK) return s;
        return th_set_error(TH_ERR_ARG, "grammar: token %d does not match the grammar (at byte %zu of its text)", t, at);
    }
    c->set = set;
    c->partial = p;
    return maybe_rebuild(c);
}

/* ---------------------------------------------------------------- masks */

static void allow_tokens(const th_grammar_vocab *v, uint32_t node, uint64_t *bits, int32_t *n) {
    for (uint32_t k = 0; k < v->tok_n[node]; k++) {
        int32_t t = v->sorted[v->tok_lo[node] + k];
        bits[t >> 6] |= 1ull << (t & 63);
    }
    *n += (int32_t)v->tok_n[node];
}

/* One walk of the trie from the current state (see the top of the file). */
static th_status compute_mask(th_constraint *c, uint64_t *bits, int32_t *n_allowed) {
    const th_grammar_vocab *v = c->v;
    memset(bits, 0, ((size_t)(v->n_vocab + 63) / 64) * sizeof *bits);
    *n_allowed = 0;
    if (c->ended) return TH_OK;
    if (th_constraint_is_complete(c))
        for (int32_t t = 0; t < v->n_vocab; t++)
            if (v->eog[t]) { bits[t >> 6] |= 1ull << (t & 63); (*n_allowed)++; }
    walk_frame *f = c->frames;
    int sp = 0;
    f[0] = (walk_frame){ 0, c->set, v->child_lo[0], c->partial };
    sp = 1;
    th_status err = TH_OK;
    while (sp > 0) {
        walk_frame *top = &f[sp - 1];
        if (top->next == v->child_lo[top->node + 1]) { sp--; continue; }
        uint32_t child = top->next++;
        th_utf8_partial p = top->partial;
        uint32_t cp, set = top->set;
        int r = th_utf8_feed(&p, v->byte[child], &cp);
        if (r < 0) continue;
        if (r == 1) {
            set = th_gstore_step(c->store, set, cp, &err);
            if (err != TH_OK) return err;
            if (!set) continue;
        } else if (!th_gstore_partial_ok(c->store, set, &p)) continue;
        allow_tokens(v, child, bits, n_allowed);
        if (v->child_lo[child] != v->child_lo[child + 1])
            f[sp++] = (walk_frame){ child, set, v->child_lo[child], p };
    }
    return TH_OK;
}

static bool same_partial(const th_utf8_partial *a, const th_utf8_partial *b) {
    return a->value == b->value && a->n_remain == b->n_remain && a->lo == b->lo && a->hi == b->hi;
}

/* The mask of the current state, from the cache or computed into the least recently used slot. */
static mask_entry *current_mask(th_constraint *c, th_status *err) {
    if ((*err = maybe_rebuild(c)) != TH_OK) return NULL;
    c->stats.masks++;
    uint64_t gen = th_gstore_generation(c->store);
    mask_entry *victim = &c->cache[0];
    for (int i = 0; i < MASK_CACHE; i++) {
        mask_entry *e = &c->cache[i];
        if (e->bits && e->set == c->set && e->generation == gen && same_partial(&e->partial, &c->partial) &&
            !c->ended) {
            e->used = ++c->clock;
            return e;
        }
        if (!e->bits || e->used < victim->used) victim = e;
    }
    if (!victim->bits) {
        victim->bits = malloc(((size_t)(c->v->n_vocab + 63) / 64) * sizeof *victim->bits);
        if (!victim->bits) { *err = th_set_error(TH_ERR_NOMEM, "grammar: out of memory"); return NULL; }
    }
    c->stats.masks_computed++;
    victim->used = 0;   /* not valid until computed */
    victim->set = 0;
    *err = compute_mask(c, victim->bits, &victim->n_allowed);
    if (*err != TH_OK) return NULL;
    victim->set = c->ended ? 0 : c->set;
    victim->partial = c->partial;
    victim->generation = gen;
    victim->used = ++c->clock;
    return victim;
}

th_status th_constraint_apply(th_constraint *c, float *logits, int32_t *n_allowed) {
    th_status s = need_vocab(c, 0, "th_constraint_apply");
    if (s != TH_OK) return s;
    if (!logits) return th_set_error(TH_ERR_ARG, "th_constraint_apply: no logits");
    mask_entry *m = current_mask(c, &s);
    if (!m) return s;
    for (int32_t w = 0; w < (c->v->n_vocab + 63) / 64; w++) {
        uint64_t bits = m->bits[w];
        if (bits == ~0ull) continue;
        int32_t end = TH_MIN(c->v->n_vocab, (w + 1) * 64);
        for (int32_t t = w * 64; t < end; t++)
            if (!(bits >> (t & 63) & 1)) logits[t] = -INFINITY;
    }
    if (n_allowed) *n_allowed = m->n_allowed;
    return TH_OK;
}

th_token th_constraint_sample(th_constraint *c, th_sampler *s, const float *logits) {
    if (need_vocab(c, 0, "th_constraint_sample") != TH_OK) return -1;
    if (!s || !logits) { th_set_error(TH_ERR_ARG, "th_constraint_sample: invalid arguments"); return -1; }
    c->stats.samples++;
    th_token t = th_sampler_sample(s, logits);
    if (t >= 0 && th_constraint_allows(c, t)) return t;
    c->stats.rejected_first++;
    int32_t n_allowed = 0;
    memcpy(c->scratch, logits, (size_t)c->v->n_vocab * sizeof *c->scratch);
    if (th_constraint_apply(c, c->scratch, &n_allowed) != TH_OK) return -1;
    if (n_allowed == 0) {
        th_set_error(TH_ERR_CAPACITY, "grammar: no token of the vocabulary can continue the grammar here");
        return -1;
    }
    t = th_sampler_sample(s, c->scratch);
    if (t >= 0 && t < c->v->n_vocab && c->scratch[t] != -INFINITY) return t;
    /* every allowed logit was NaN or -inf: the lowest allowed id */
    for (int32_t k = 0; k < c->v->n_vocab; k++)
        if (c->scratch[k] != -INFINITY || (th_constraint_allows(c, k))) return k;
    return -1;
}

void th_constraint_get_stats(const th_constraint *c, th_constraint_stats *out) {
    if (!out) return;
    if (c) *out = c->stats;
    else memset(out, 0, sizeof *out);
}
