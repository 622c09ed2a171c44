/* grammar_match.c — the parse-stack store behind the grammar matcher and the token mask
 * (grammar_internal.h): llama.cpp's pushdown matching (a set of stacks, each stack's top
 * at a terminal; a code point advances every stack whose terminal accepts it, then rule
 * references on top are expanded into their alternatives) with interned stacks and sets
 * and a memo of (set, code point) -> set.
 *
 * Stacks are nodes {elem, parent}: elem is the position on top, parent the rest of the
 * stack (node 0 = the empty stack). Expansion is an explicit depth-first walk, each node
 * visited at most once per step, so no C recursion and no duplicate stacks. Limits:
 * TH_GRAMMAR_MAX_STACKS stacks in a set, TH_GRAMMAR_MAX_DEPTH positions on a stack,
 * TH_GRAMMAR_MAX_VISITS expansions in a step; each gives an error naming it. */
#include "core/core.h"
#include "sample/grammar_internal.h"

#include <stdlib.h>

typedef struct gnode { uint32_t elem, parent, depth; } gnode;
typedef struct gtrans { uint32_t set, cp, result; } gtrans;

enum { SET_COMPLETE = 1, SET_CONTINUE = 2 };

struct th_gstore {
    const th_grammar *g;
    gnode *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *node_ht, node_ht_cap;     /* node ids, 0 = empty slot */
    uint32_t *stamp, stamp_cap, cur_stamp; /* visited marks of the current step, per node */

    uint32_t *items;                    /* members of all sets back to back */
    size_t n_items, cap_items;
    uint32_t *set_off, *set_len;
    uint8_t *set_flags;
    uint32_t n_sets, cap_sets;
    uint32_t *set_ht, set_ht_cap;       /* set ids, 0 = empty slot */

    gtrans *tr;                         /* set == 0: empty slot */
    uint32_t n_tr, tr_cap;

    uint32_t *work, work_cap;           /* expansion stack */
    uint32_t *out, n_out, out_cap;      /* stacks reached in this step */
    uint32_t visits;
    uint32_t initial;                   /* 0 until computed */
    uint64_t generation;
};

static uint32_t hash2(uint32_t a, uint32_t b) {
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

static bool grow(void **p, uint32_t *cap, size_t elem, uint32_t need) {
    if (need <= *cap) return true;
    uint32_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static uint32_t nomem(th_status *err) {
    *err = th_set_error(TH_ERR_NOMEM, "grammar: out of memory");
    return 0;
}

/* ---------------------------------------------------------------- nodes */

static bool node_ht_resize(th_gstore *s, uint32_t cap) {
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht) return false;
    for (uint32_t id = 1; id < s->n_nodes; id++) {
        uint32_t h = hash2(s->nodes[id].elem, s->nodes[id].parent) & (cap - 1);
        while (ht[h]) h = (h + 1) & (cap - 1);
        ht[h] = id;
    }
    free(s->node_ht);
    s->node_ht = ht;
    s->node_ht_cap = cap;
    return true;
}

/* The stack `elem` on top of `parent`; 0 with *err set on failure. */
static uint32_t node(th_gstore *s, uint32_t elem, uint32_t parent, th_status *err) {
    if ((s->n_nodes + 1) * 2 > s->node_ht_cap && !node_ht_resize(s, s->node_ht_cap ? s->node_ht_cap * 2 : 1024))
        return nomem(err);
    uint32_t h = hash2(elem, parent) & (s->node_ht_cap - 1);
    for (uint32_t id; (id = s->node_ht[h]); h = (h + 1) & (s->node_ht_cap - 1))
        if (s->nodes[id].elem == elem && s->nodes[id].parent == parent) return id;
    uint32_t depth = s->nodes[parent].depth + 1;
    if (depth > TH_GRAMMAR_MAX_DEPTH) {
        *err = th_set_error(TH_ERR_CAPACITY, "grammar: a parse stack is deeper than %d (nesting too deep)",
                            TH_GRAMMAR_MAX_DEPTH);
        return 0;
    }
    if (!grow((void **)&s->nodes, &s->cap_nodes, sizeof *s->nodes, s->n_nodes + 1)) return nomem(err);
    uint32_t old = s->stamp_cap;
    if (!grow((void **)&s->stamp, &s->stamp_cap, sizeof *s->stamp, s->n_nodes + 1)) return nomem(err);
    if (s->stamp_cap != old) memset(s->stamp + old, 0, (s->stamp_cap - old) * sizeof *s->stamp);
    uint32_t id = s->n_nodes++;
    s->nodes[id] = (gnode){ elem, parent, depth };
    s->stamp[id] = 0;
    s->node_ht[h] = id;
    return id;
}

/* ---------------------------------------------------------------- sets */

static uint32_t hash_items(const uint32_t *v, uint32_t n) {
    uint32_t h = 2166136261u ^ n;
    for (uint32_t i = 0; i < n; i++) h = hash2(h, v[i]);
    return h;
}

static bool set_ht_resize(th_gstore *s, uint32_t cap) {
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht) return false;
    for (uint32_t id = 1; id < s->n_sets; id++) {
        uint32_t h = hash_items(s->items + s->set_off[id], s->set_len[id]) & (cap - 1);
        while (ht[h]) h = (h + 1) & (cap - 1);
        ht[h] = id;
    }
    free(s->set_ht);
    s->set_ht = ht;
    s->set_ht_cap = cap;
    return true;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Intern the (distinct) stacks v[0..n) as a set; 0 = no stacks. */
static uint32_t make_set(th_gstore *s, uint32_t *v, uint32_t n, th_status *err) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_u32);
    if ((s->n_sets + 1) * 2 > s->set_ht_cap && !set_ht_resize(s, s->set_ht_cap ? s->set_ht_cap * 2 : 1024))
        return nomem(err);
    uint32_t h = hash_items(v, n) & (s->set_ht_cap - 1);
    for (uint32_t id; (id = s->set_ht[h]); h = (h + 1) & (s->set_ht_cap - 1))
        if (s->set_len[id] == n && !memcmp(s->items + s->set_off[id], v, n * sizeof *v)) return id;
    if (s->n_sets + 1 > s->cap_sets) {
        uint32_t cap = s->cap_sets ? s->cap_sets * 2 : 256;
        uint32_t *o = realloc(s->set_off, cap * sizeof *o);
        if (o) s->set_off = o;
        uint32_t *l = realloc(s->set_len, cap * sizeof *l);
        if (l) s->set_len = l;
        uint8_t *f = realloc(s->set_flags, cap);
        if (f) s->set_flags = f;
        if (!o || !l || !f) return nomem(err);
        s->cap_sets = cap;
    }
    if (s->n_items + n > s->cap_items) {
        size_t cap = s->cap_items ? s->cap_items * 2 : 4096;
        while (cap < s->n_items + n) cap *= 2;
        uint32_t *it = realloc(s->items, cap * sizeof *it);
        if (!it) return nomem(err);
        s->items = it;
        s->cap_items = cap;
    }
    uint32_t id = s->n_sets++;
    s->set_off[id] = (uint32_t)s->n_items;
    s->set_len[id] = n;
    memcpy(s->items + s->n_items, v, n * sizeof *v);
    s->n_items += n;
    s->set_flags[id] = (v[0] == 0 ? SET_COMPLETE : 0) | (v[n - 1] != 0 ? SET_CONTINUE : 0);
    s->set_ht[h] = id;
    return id;
}

/* ---------------------------------------------------------------- expansion */

static bool push_work(th_gstore *s, uint32_t id, uint32_t *n_work, th_status *err) {
    if (!grow((void **)&s->work, &s->work_cap, sizeof *s->work, *n_work + 1)) { nomem(err); return false; }
    s->work[(*n_work)++] = id;
    return true;
}

/* Expand stack `start` until every stack has a terminal (or nothing) on top; the results
 * go to s->out (each once per step, by the visit stamps). */
static bool expand(th_gstore *s, uint32_t start, th_status *err) {
    const th_gelem *el = s->g->elems;
    uint32_t n_work = 0;
    if (!push_work(s, start, &n_work, err)) return false;
    while (n_work) {
        uint32_t id = s->work[--n_work];
        if (s->stamp[id] == s->cur_stamp) continue;
        s->stamp[id] = s->cur_stamp;
        if (++s->visits > TH_GRAMMAR_MAX_VISITS) {
            *err = th_set_error(TH_ERR_CAPACITY, "grammar: more than %u stack expansions in one step (grammar too ambiguous)",
                                TH_GRAMMAR_MAX_VISITS);
            return false;
        }
        uint32_t type = id ? el[s->nodes[id].elem].type : GE_END;
        if (id == 0 || type == GE_CHAR || type == GE_CHAR_NOT || type == GE_CHAR_ANY) {
            if (s->n_out >= TH_GRAMMAR_MAX_STACKS) {
                *err = th_set_error(TH_ERR_CAPACITY, "grammar: more than %d parse stacks at once (grammar too ambiguous)",
                                    TH_GRAMMAR_MAX_STACKS);
                return false;
            }
            if (!grow((void **)&s->out, &s->out_cap, sizeof *s->out, s->n_out + 1)) { nomem(err); return false; }
            s->out[s->n_out++] = id;
            continue;
        }
        if (type != GE_RULE_REF) {
            *err = th_set_error(TH_ERR_INTERNAL, "grammar: parse stack on element type %u", type);
            return false;
        }
        uint32_t pos = s->nodes[id].elem, parent = s->nodes[id].parent;
        uint32_t base = parent;
        if (!th_gelem_is_end(&el[pos + 1]) && !(base = node(s, pos + 1, parent, err))) return false;
        uint32_t a = s->g->rule_off[el[pos].value];
        for (;;) {
            uint32_t child = base;
            if (!th_gelem_is_end(&el[a]) && !(child = node(s, a, base, err))) return false;
            if (!push_work(s, child, &n_work, err)) return false;
            while (!th_gelem_is_end(&el[a])) a++;
            if (el[a].type == GE_END) break;
            a++;
        }
    }
    return true;
}

static void begin_step(th_gstore *s) {
    s->n_out = 0;
    s->visits = 0;
    if (++s->cur_stamp == 0) {
        memset(s->stamp, 0, s->stamp_cap * sizeof *s->stamp);
        s->cur_stamp = 1;
    }
}

/* Does the terminal at elems[pos] accept cp? *after = the element past the terminal. */
static bool match_char(const th_gelem *el, uint32_t pos, uint32_t cp, uint32_t *after) {
    const th_gelem *e = el + pos;
    bool positive = e->type == GE_CHAR || e->type == GE_CHAR_ANY, found = false;
    do {
        if (e[1].type == GE_CHAR_RNG_UPPER) {
            found = found || (e->value <= cp && cp <= e[1].value);
            e += 2;
        } else if (e->type == GE_CHAR_ANY) {
            found = true;
            e += 1;
        } else {
            found = found || e->value == cp;
            e += 1;
        }
    } while (e->type == GE_CHAR_ALT);
    *after = (uint32_t)(e - el);
    return found == positive;
}

/* ---------------------------------------------------------------- transitions */

static gtrans *tr_slot(th_gstore *s, uint32_t set, uint32_t cp) {
    uint32_t h = hash2(set, cp) & (s->tr_cap - 1);
    while (s->tr[h].set && !(s->tr[h].set == set && s->tr[h].cp == cp)) h = (h + 1) & (s->tr_cap - 1);
    return &s->tr[h];
}

static bool tr_resize(th_gstore *s, uint32_t cap) {
    gtrans *old = s->tr;
    uint32_t old_cap = s->tr_cap;
    s->tr = calloc(cap, sizeof *s->tr);
    if (!s->tr) { s->tr = old; return false; }
    s->tr_cap = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].set) *tr_slot(s, old[i].set, old[i].cp) = old[i];
    free(old);
    return true;
}

uint32_t th_gstore_step(th_gstore *s, uint32_t set, uint32_t cp, th_status *err) {
    *err = TH_OK;
    if (set == 0 || set >= s->n_sets) return 0;
    if ((s->n_tr + 1) * 2 > s->tr_cap && !tr_resize(s, s->tr_cap ? s->tr_cap * 2 : 4096)) return nomem(err);
    gtrans *t = tr_slot(s, set, cp);
    if (t->set) return t->result;
    if ((uint64_t)s->n_nodes + s->n_sets + s->n_tr > 4ull * TH_GRAMMAR_STORE_MAX) {
        *err = th_set_error(TH_ERR_CAPACITY, "grammar: parser state too large (more than %u interned stacks and steps)",
                            4u * TH_GRAMMAR_STORE_MAX);
        return 0;
    }
    begin_step(s);
    const th_gelem *el = s->g->elems;
    for (uint32_t i = 0; i < s->set_len[set]; i++) {
        uint32_t id = s->items[s->set_off[set] + i], after;
        if (id == 0 || !match_char(el, s->nodes[id].elem, cp, &after)) continue;
        uint32_t parent = s->nodes[id].parent, next = parent;
        if (!th_gelem_is_end(&el[after]) && !(next = node(s, after, parent, err))) return 0;
        if (!expand(s, next, err)) return 0;
    }
    uint32_t result = make_set(s, s->out, s->n_out, err);
    if (*err != TH_OK) return 0;
    t = tr_slot(s, set, cp);        /* the tables did not move, but stay safe */
    *t = (gtrans){ set, cp, result };
    s->n_tr++;
    return result;
}

/* ---------------------------------------------------------------- store */

static uint32_t initial_set(th_gstore *s, th_status *err) {
    *err = TH_OK;
    begin_step(s);
    const th_gelem *el = s->g->elems;
    uint32_t a = s->g->rule_off[s->g->root];
    for (;;) {
        uint32_t id = 0;
        if (!th_gelem_is_end(&el[a]) && !(id = node(s, a, 0, err))) return 0;
        if (!expand(s, id, err)) return 0;
        while (!th_gelem_is_end(&el[a])) a++;
        if (el[a].type == GE_END) break;
        a++;
    }
    return make_set(s, s->out, s->n_out, err);
}

th_gstore *th_gstore_new(const th_grammar *g) {
    th_gstore *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->g = g;
    s->n_nodes = 1;                 /* node 0: the empty stack */
    s->n_sets = 1;                  /* set 0: no stacks */
    s->cur_stamp = 1;
    if (!grow((void **)&s->nodes, &s->cap_nodes, sizeof *s->nodes, 1024) ||
        !grow((void **)&s->stamp, &s->stamp_cap, sizeof *s->stamp, 1024) ||
        !(s->set_off = calloc(256, sizeof *s->set_off)) || !(s->set_len = calloc(256, sizeof *s->set_len)) ||
        !(s->set_flags = calloc(256, 1))) {
        th_gstore_free(s);
        return NULL;
    }
    s->cap_sets = 256;
    s->nodes[0] = (gnode){ UINT32_MAX, 0, 0 };
    memset(s->stamp, 0, s->stamp_cap * sizeof *s->stamp);
    return s;
}

void th_gstore_free(th_gstore *s) {
    if (!s) return;
    free(s->nodes); free(s->node_ht); free(s->stamp);
    free(s->items); free(s->set_off); free(s->set_len); free(s->set_flags); free(s->set_ht);
    free(s->tr); free(s->work); free(s->out);
    free(s);
}

uint32_t th_gstore_initial(th_gstore *s) {
    if (!s->initial) {
        th_status err;
        s->initial = initial_set(s, &err);
    }
    return s->initial;
}

bool th_gstore_set_complete(const th_gstore *s, uint32_t set) {
    return set && set < s->n_sets && (s->set_flags[set] & SET_COMPLETE);
}

bool th_gstore_set_can_continue(const th_gstore *s, uint32_t set) {
    return set && set < s->n_sets && (s->set_flags[set] & SET_CONTINUE);
}

/* llama.cpp's partial match: the code points the pending bytes can still become,
 * [low, high], against each terminal on top of a stack. */
static bool partial_match(const th_gelem *e, uint32_t low, uint32_t high) {
    bool positive = e->type == GE_CHAR || e->type == GE_CHAR_ANY;
    do {
        if (e[1].type == GE_CHAR_RNG_UPPER) {
            if (e->value <= high && low <= e[1].value) return positive;
            e += 2;
        } else if (e->type == GE_CHAR_ANY) {
            return true;
        } else {
            if (low <= e->value && e->value <= high) return positive;
            e += 1;
        }
    } while (e->type == GE_CHAR_ALT);
    return !positive;
}

bool th_gstore_partial_ok(const th_gstore *s, uint32_t set, const th_utf8_partial *p) {
    if (!set || set >= s->n_sets || p->n_remain == 0) return false;
    uint32_t low = p->value << (6 * p->n_remain), high = low | ((1u << (6 * p->n_remain)) - 1);
    if (low == 0) low = p->n_remain == 2 ? 1u << 11 : p->n_remain == 3 ? 1u << 16 : 0;
    for (uint32_t i = 0; i < s->set_len[set]; i++) {
        uint32_t id = s->items[s->set_off[set] + i];
        if (id && partial_match(s->g->elems + s->nodes[id].elem, low, high)) return true;
    }
    return false;
}

bool th_gstore_full(const th_gstore *s) {
    return (uint64_t)s->n_nodes + s->n_sets + s->n_tr > TH_GRAMMAR_STORE_MAX;
}

uint64_t th_gstore_generation(const th_gstore *s) { return s->generation; }

uint32_t th_gstore_rebuild(th_gstore *s, uint32_t set, th_status *err) {
    *err = TH_OK;
    uint32_t n = set && set < s->n_sets ? s->set_len[set] : 0;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += s->nodes[s->items[s->set_off[set] + i]].depth;
    uint32_t *elems = malloc((total ? total : 1) * sizeof *elems), *len = malloc((n ? n : 1) * sizeof *len);
    if (!elems || !len) { free(elems); free(len); return nomem(err); }
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {         /* each stack top first */
        uint32_t id = s->items[s->set_off[set] + i];
        len[i] = s->nodes[id].depth;
        for (; id; id = s->nodes[id].parent) elems[k++] = s->nodes[id].elem;
    }
    s->n_nodes = 1;
    s->n_sets = 1;
    s->n_items = 0;
    s->n_tr = 0;
    s->initial = 0;
    s->generation++;
    memset(s->stamp, 0, s->stamp_cap * sizeof *s->stamp);
    s->cur_stamp = 1;
    if (s->node_ht) memset(s->node_ht, 0, s->node_ht_cap * sizeof *s->node_ht);
    if (s->set_ht) memset(s->set_ht, 0, s->set_ht_cap * sizeof *s->set_ht);
    if (s->tr) memset(s->tr, 0, s->tr_cap * sizeof *s->tr);
    s->n_out = 0;
    k = 0;
    uint32_t result = 0;
    bool ok = true;
    for (uint32_t i = 0; ok && i < n; i++) {
        uint32_t id = 0;
        for (uint32_t d = len[i]; d > 0; d--) {
            id = node(s, elems[k + d - 1], id, err);
            if (!id) { ok = false; break; }
        }
        k += len[i];
        if (ok && !grow((void **)&s->out, &s->out_cap, sizeof *s->out, s->n_out + 1)) { nomem(err); ok = false; }
        if (ok) s->out[s->n_out++] = id;
    }
    if (ok) result = make_set(s, s->out, s->n_out, err);
    free(elems);
    free(len);
    return ok ? result : 0;
}

/* ---------------------------------------------------------------- UTF-8 */

int th_utf8_feed(th_utf8_partial *p, uint8_t b, uint32_t *cp) {
    if (p->n_remain == 0) {
        if (b < 0x80) { *cp = b; return 1; }
        uint32_t v;
        uint8_t n, lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) { v = b & 0x1F; n = 1; }
        else if (b >= 0xE0 && b <= 0xEF) {
            v = b & 0x0F; n = 2;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            v = b & 0x07; n = 3;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else return -1;
        *p = (th_utf8_partial){ v, n, lo, hi };
        return 0;
    }
    if (b < p->lo || b > p->hi) return -1;
    uint32_t v = p->value << 6 | (b & 0x3F);
    if (--p->n_remain == 0) {
        *p = (th_utf8_partial){ 0 };
        *cp = v;
        return 1;
    }
    p->value = v;
    p->lo = 0x80;
    p->hi = 0xBF;
    return 0;
}
