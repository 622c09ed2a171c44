/* grammar_parse.c — the GBNF parser: llama.cpp's grammar syntax (rules `name ::= ...`,
 * alternation `|`, grouping, literals with \x \u \U \t \r \n \\ \" \[ \] escapes,
 * character classes with ranges and `^` negation, `.`, repetition `* + ? {m} {m,} {m,n}`,
 * `#` comments, `root`) into the element layout of grammar_internal.h, with the same
 * rule ids and generated names ("base_N") llama.cpp gives, so its parser tests apply.
 *
 * Where llama.cpp accepts something degenerate we give an error instead: an empty
 * class `[]`, a reversed range, `{m,n}` with n < m, a rule defined twice, a NUL byte,
 * invalid UTF-8. Every error names line and column (1-based, columns in characters).
 * After parsing: every referenced rule must be defined, `root` must exist, and no rule
 * may reach itself without consuming input (left recursion; nullable rules are taken
 * into account, so hidden left recursion is caught too). Sizes, nesting and repetition
 * counts are bounded (grammar_internal.h). */
#include "core/core.h"
#include "core/bytes.h"
#include "sample/grammar_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct evec { th_gelem *v; uint32_t n, cap; } evec;

typedef struct parser {
    const char *s;
    size_t len, pos;
    evec *rules;          /* [n_rules] */
    char **names;
    uint8_t *generated, *defined;
    size_t *def_pos, *ref_pos;   /* where a rule is defined / first referenced */
    uint32_t n_rules, cap_rules;
    uint32_t *ht;         /* user rule names -> id + 1 (0 = empty slot) */
    uint32_t ht_cap;
    uint64_t n_elems;     /* all elements of all rules so far */
    int depth;
    bool failed;
} parser;

/* ---------------------------------------------------------------- errors */

static void where(const parser *p, size_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && i < p->len; i++) {
        unsigned char ch = (unsigned char)p->s[i];
        if (ch == '\n') { l++; c = 1; }
        else if ((ch & 0xC0) != 0x80) c++;
    }
    *line = l;
    *col = c;
}

__attribute__((format(printf, 3, 4)))
static bool fail_at(parser *p, size_t pos, const char *fmt, ...) {
    if (p->failed) return false;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(p, pos, &line, &col);
    th_set_error(TH_ERR_FORMAT, "grammar: line %d, column %d: %s", line, col, msg);
    p->failed = true;
    return false;
}

static bool fail_nomem(parser *p) {
    if (!p->failed) th_set_error(TH_ERR_NOMEM, "grammar: out of memory");
    p->failed = true;
    return false;
}

/* ---------------------------------------------------------------- rules and symbols */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static bool ht_grow(parser *p) {
    uint32_t cap = p->ht_cap ? p->ht_cap * 2 : 256;
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht) return fail_nomem(p);
    for (uint32_t i = 0; i < p->ht_cap; i++) {
        uint32_t id = p->ht[i];
        if (!id) continue;
        const char *nm = p->names[id - 1];
        uint32_t h = (uint32_t)hash_bytes(nm, strlen(nm)) & (cap - 1);
        while (ht[h]) h = (h + 1) & (cap - 1);
        ht[h] = id;
    }
    free(p->ht);
    p->ht = ht;
    p->ht_cap = cap;
    return true;
}

/* A new rule id with the given name (copied); UINT32_MAX on failure. */
static uint32_t new_rule(parser *p, const char *name, size_t name_len, bool generated) {
    if (p->n_rules >= TH_GBNF_MAX_RULES) {
        fail_at(p, p->pos, "more than %u rules", TH_GBNF_MAX_RULES);
        return UINT32_MAX;
    }
    if (p->n_rules == p->cap_rules) {
        uint32_t cap = p->cap_rules ? p->cap_rules * 2 : 64;
        evec *r = realloc(p->rules, cap * sizeof *r);
        if (r) p->rules = r;
        char **nm = realloc(p->names, cap * sizeof *nm);
        if (nm) p->names = nm;
        uint8_t *gen = realloc(p->generated, cap);
        if (gen) p->generated = gen;
        uint8_t *def = realloc(p->defined, cap);
        if (def) p->defined = def;
        size_t *dp = realloc(p->def_pos, cap * sizeof *dp);
        if (dp) p->def_pos = dp;
        size_t *rp = realloc(p->ref_pos, cap * sizeof *rp);
        if (rp) p->ref_pos = rp;
        if (!r || !nm || !gen || !def || !dp || !rp) { fail_nomem(p); return UINT32_MAX; }
        p->cap_rules = cap;
    }
    char *copy = malloc(name_len + 1);
    if (!copy) { fail_nomem(p); return UINT32_MAX; }
    memcpy(copy, name, name_len);
    copy[name_len] = 0;
    uint32_t id = p->n_rules++;
    p->rules[id] = (evec){ 0 };
    p->names[id] = copy;
    p->generated[id] = generated;
    p->defined[id] = 0;
    p->def_pos[id] = p->ref_pos[id] = p->pos;
    return id;
}

/* The id of a user-named rule, made on first mention (llama.cpp's get_symbol_id). */
static uint32_t symbol_id(parser *p, const char *name, size_t n) {
    if (p->ht_cap == 0 || (p->n_rules + 1) * 2 > p->ht_cap)
        if (!ht_grow(p)) return UINT32_MAX;
    uint32_t h = (uint32_t)hash_bytes(name, n) & (p->ht_cap - 1);
    while (p->ht[h]) {
        const char *nm = p->names[p->ht[h] - 1];
        if (strlen(nm) == n && !memcmp(nm, name, n)) return p->ht[h] - 1;
        h = (h + 1) & (p->ht_cap - 1);
    }
    uint32_t id = new_rule(p, name, n, false);
    if (id != UINT32_MAX) p->ht[h] = id + 1;
    return id;
}

/* A rule for a group or repetition inside rule `base`: "base_N", N = its id. */
static uint32_t generated_id(parser *p, uint32_t base) {
    char nm[512];
    int n = snprintf(nm, sizeof nm, "%s_%u", p->names[base], p->n_rules);
    if (n < 0 || (size_t)n >= sizeof nm) n = snprintf(nm, sizeof nm, "rule_%u", p->n_rules);
    return new_rule(p, nm, (size_t)n, true);
}

static bool budget(parser *p, uint64_t more) {
    if (p->n_elems + more > TH_GBNF_MAX_ELEMS)
        return fail_at(p, p->pos, "grammar too large: more than %u elements after expanding repetitions",
                       TH_GBNF_MAX_ELEMS);
    return true;
}

static bool push(parser *p, evec *r, uint32_t type, uint32_t value) {
    if (!budget(p, 1)) return false;
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 16;
        th_gelem *v = realloc(r->v, cap * sizeof *v);
        if (!v) return fail_nomem(p);
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (th_gelem){ type, value };
    p->n_elems++;
    return true;
}

static bool append(parser *p, evec *r, const th_gelem *src, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (!push(p, r, src[i].type, src[i].value)) return false;
    return true;
}

static bool set_rule(parser *p, uint32_t id, evec *r, size_t def_pos) {
    if (p->defined[id]) {
        int line, col;
        where(p, p->def_pos[id], &line, &col);
        free(r->v);
        *r = (evec){ 0 };
        return fail_at(p, def_pos, "rule '%s' is defined twice (first at line %d)", p->names[id], line);
    }
    p->rules[id] = *r;
    *r = (evec){ 0 };
    p->defined[id] = 1;
    p->def_pos[id] = def_pos;
    return true;
}

/* ---------------------------------------------------------------- lexing */

static int peek(const parser *p, size_t k) { return p->pos + k < p->len ? (unsigned char)p->s[p->pos + k] : -1; }
static bool is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}
static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static void skip_space(parser *p, bool newline_ok) {
    for (;;) {
        int c = peek(p, 0);
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) p->pos++;
        else if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\r' && p->s[p->pos] != '\n') p->pos++;
        } else return;
    }
}

static bool parse_hex(parser *p, int ndig, uint32_t *out) {
    uint32_t v = 0;
    size_t start = p->pos;
    for (int i = 0; i < ndig; i++) {
        int c = peek(p, 0), d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return fail_at(p, start, "expecting %d hex digits", ndig);
        v = v << 4 | (uint32_t)d;
        p->pos++;
    }
    if (v > 0x10FFFF) return fail_at(p, start, "code point U+%X is beyond U+10FFFF", v);
    *out = v;
    return true;
}

/* One character of a literal or class: an escape or a UTF-8 sequence. */
static bool parse_char(parser *p, uint32_t *out) {
    size_t start = p->pos;
    int c = peek(p, 0);
    if (c < 0) return fail_at(p, start, "unexpected end of grammar");
    if (c == '\\') {
        int e = peek(p, 1);
        p->pos += 2;
        switch (e) {
        case 'x': return parse_hex(p, 2, out);
        case 'u': return parse_hex(p, 4, out);
        case 'U': return parse_hex(p, 8, out);
        case 't': *out = '\t'; return true;
        case 'r': *out = '\r'; return true;
        case 'n': *out = '\n'; return true;
        case '\\': case '"': case '[': case ']': *out = (uint32_t)e; return true;
        case -1: return fail_at(p, start, "unexpected end of grammar after '\\'");
        default:
            if (e >= 0x20 && e < 0x7F) return fail_at(p, start, "unknown escape '\\%c'", e);
            return fail_at(p, start, "unknown escape");
        }
    }
    if (c == 0) return fail_at(p, start, "NUL byte in grammar");
    th_utf8_partial st = { 0 };
    for (;;) {
        int b = peek(p, 0);
        uint32_t cp;
        int r = b < 0 ? -1 : th_utf8_feed(&st, (uint8_t)b, &cp);
        if (r < 0) return fail_at(p, start, "invalid UTF-8");
        p->pos++;
        if (r == 1) { *out = cp; return true; }
    }
}

static bool parse_int(parser *p, uint32_t *out) {
    size_t start = p->pos;
    if (!is_digit(peek(p, 0))) return fail_at(p, start, "expecting an integer");
    uint64_t v = 0;
    while (is_digit(peek(p, 0))) {
        v = v * 10 + (uint64_t)(peek(p, 0) - '0');
        if (v > TH_GBNF_MAX_ELEMS) return fail_at(p, start, "repetition count too large (limit %u)", TH_GBNF_MAX_ELEMS);
        p->pos++;
    }
    *out = (uint32_t)v;
    return true;
}

/* ---------------------------------------------------------------- grammar */

static bool parse_alternates(parser *p, uint32_t base, uint32_t rule_id, bool nested);

/* S{m,n} as llama.cpp rewrites it: S repeated m times, then n-m nested optional rules
 * (S' ::= S S'' |), or one recursive rule (S' ::= S S' |) when n is unbounded. */
static bool repeat(parser *p, uint32_t base, evec *rule, uint32_t last_start, uint32_t min, int64_t max,
                   size_t at) {
    if (last_start == rule->n) return fail_at(p, at, "expecting an item before the repetition operator");
    if (max >= 0 && max < min) return fail_at(p, at, "repetition {%u,%lld}: the maximum is smaller than the minimum",
                                              min, (long long)max);
    uint32_t plen = rule->n - last_start;
    uint64_t n_opt = max < 0 ? 1 : (uint64_t)max - min;
    uint64_t need = (min > 1 ? (uint64_t)(min - 1) * plen : 0) + n_opt * (plen + 3) + 1;
    if (!budget(p, need)) return false;
    th_gelem *prev = malloc((plen ? plen : 1) * sizeof *prev);
    if (!prev) return fail_nomem(p);
    memcpy(prev, rule->v + last_start, plen * sizeof *prev);
    bool ok = true;
    if (min == 0) {
        p->n_elems -= plen;
        rule->n = last_start;
    } else {
        for (uint32_t i = 1; ok && i < min; i++) ok = append(p, rule, prev, plen);
    }
    uint32_t last_rec = 0;
    for (uint64_t i = 0; ok && i < n_opt; i++) {
        uint32_t rec = generated_id(p, base);
        if (rec == UINT32_MAX) { ok = false; break; }
        evec r = { 0 };
        ok = append(p, &r, prev, plen);
        if (ok && (i > 0 || max < 0)) ok = push(p, &r, GE_RULE_REF, max < 0 ? rec : last_rec);
        if (ok) ok = push(p, &r, GE_ALT, 0);
        if (ok) ok = push(p, &r, GE_END, 0);
        if (ok) ok = set_rule(p, rec, &r, at);
        else free(r.v);
        last_rec = rec;
    }
    if (ok && n_opt > 0) ok = push(p, rule, GE_RULE_REF, last_rec);
    free(prev);
    return ok;
}

static bool parse_class(parser *p, evec *rule) {
    size_t start = p->pos;
    p->pos++;                               /* [ */
    uint32_t type = GE_CHAR;
    if (peek(p, 0) == '^') { p->pos++; type = GE_CHAR_NOT; }
    uint32_t first = rule->n;
    while (peek(p, 0) != ']') {
        if (peek(p, 0) < 0) return fail_at(p, start, "unterminated character class");
        uint32_t c, hi;
        if (!parse_char(p, &c)) return false;
        if (!push(p, rule, rule->n > first ? GE_CHAR_ALT : type, c)) return false;
        if (peek(p, 0) == '-' && peek(p, 1) != ']') {
            size_t at = p->pos;
            p->pos++;
            if (peek(p, 0) < 0) return fail_at(p, start, "unterminated character class");
            if (!parse_char(p, &hi)) return false;
            if (hi < c) return fail_at(p, at, "reversed range U+%04X-U+%04X in a character class", c, hi);
            if (!push(p, rule, GE_CHAR_RNG_UPPER, hi)) return false;
        }
    }
    if (rule->n == first) return fail_at(p, start, "empty character class");
    p->pos++;                               /* ] */
    return true;
}

static bool parse_sequence(parser *p, uint32_t base, evec *rule, bool nested) {
    uint32_t last_start = rule->n;
    for (;;) {
        int c = peek(p, 0);
        size_t at = p->pos;
        if (c == '"') {
            p->pos++;
            last_start = rule->n;
            while (peek(p, 0) != '"') {
                if (peek(p, 0) < 0) return fail_at(p, at, "unterminated string literal");
                uint32_t ch;
                if (!parse_char(p, &ch) || !push(p, rule, GE_CHAR, ch)) return false;
            }
            p->pos++;
            skip_space(p, nested);
        } else if (c == '[') {
            last_start = rule->n;
            if (!parse_class(p, rule)) return false;
            skip_space(p, nested);
        } else if (is_word(c)) {
            size_t n = 0;
            while (is_word(peek(p, (size_t)n))) n++;
            uint32_t id = symbol_id(p, p->s + p->pos, n);
            if (id == UINT32_MAX) return false;
            if (!p->defined[id] && p->ref_pos[id] >= at) p->ref_pos[id] = at;
            p->pos += n;
            skip_space(p, nested);
            last_start = rule->n;
            if (!push(p, rule, GE_RULE_REF, id)) return false;
        } else if (c == '(') {
            if (p->depth >= TH_GBNF_MAX_NESTING)
                return fail_at(p, at, "parentheses nested deeper than %d", TH_GBNF_MAX_NESTING);
            p->pos++;
            skip_space(p, true);
            uint32_t sub = generated_id(p, base);
            if (sub == UINT32_MAX) return false;
            p->depth++;
            bool ok = parse_alternates(p, base, sub, true);
            p->depth--;
            if (!ok) return false;
            last_start = rule->n;
            if (!push(p, rule, GE_RULE_REF, sub)) return false;
            if (peek(p, 0) != ')') {
                int line, col;
                where(p, at, &line, &col);
                return fail_at(p, p->pos, "expecting ')' to close the group opened at line %d, column %d", line, col);
            }
            p->pos++;
            skip_space(p, nested);
        } else if (c == '.') {
            last_start = rule->n;
            if (!push(p, rule, GE_CHAR_ANY, 0)) return false;
            p->pos++;
            skip_space(p, nested);
        } else if (c == '*' || c == '+' || c == '?') {
            p->pos++;
            skip_space(p, nested);
            uint32_t min = c == '+' ? 1 : 0;
            int64_t max = c == '?' ? 1 : -1;
            if (!repeat(p, base, rule, last_start, min, max, at)) return false;
        } else if (c == '{') {
            p->pos++;
            skip_space(p, nested);
            uint32_t min, maxv;
            int64_t max = -1;
            if (!parse_int(p, &min)) return false;
            skip_space(p, nested);
            if (peek(p, 0) == '}') {
                max = min;
            } else if (peek(p, 0) == ',') {
                p->pos++;
                skip_space(p, nested);
                if (is_digit(peek(p, 0))) {
                    if (!parse_int(p, &maxv)) return false;
                    max = maxv;
                    skip_space(p, nested);
                }
                if (peek(p, 0) != '}') return fail_at(p, p->pos, "expecting '}'");
            } else return fail_at(p, p->pos, "expecting ',' or '}'");
            p->pos++;
            skip_space(p, nested);
            if (!repeat(p, base, rule, last_start, min, max, at)) return false;
        } else {
            return true;
        }
    }
}

static bool parse_alternates(parser *p, uint32_t base, uint32_t rule_id, bool nested) {
    evec r = { 0 };
    size_t at = p->pos;
    bool ok = parse_sequence(p, base, &r, nested);
    while (ok && peek(p, 0) == '|') {
        ok = push(p, &r, GE_ALT, 0);
        p->pos++;
        skip_space(p, true);
        if (ok) ok = parse_sequence(p, base, &r, nested);
    }
    if (ok) ok = push(p, &r, GE_END, 0);
    if (ok) return set_rule(p, rule_id, &r, at);
    free(r.v);
    return false;
}

static bool parse_rule(parser *p) {
    size_t at = p->pos;
    size_t n = 0;
    while (is_word(peek(p, n))) n++;
    if (n == 0) {
        int c = peek(p, 0);
        if (c >= 0x21 && c < 0x7F) return fail_at(p, at, "expecting a rule name, found '%c'", c);
        return fail_at(p, at, "expecting a rule name");
    }
    uint32_t id = symbol_id(p, p->s + p->pos, n);
    if (id == UINT32_MAX) return false;
    p->pos += n;
    skip_space(p, false);
    if (!(peek(p, 0) == ':' && peek(p, 1) == ':' && peek(p, 2) == '='))
        return fail_at(p, p->pos, "expecting '::=' after the rule name '%s'", p->names[id]);
    p->pos += 3;
    skip_space(p, true);
    if (!parse_alternates(p, id, id, false)) return false;
    p->def_pos[id] = at;
    int c = peek(p, 0);
    if (c == '\r') p->pos += peek(p, 1) == '\n' ? 2 : 1;
    else if (c == '\n') p->pos++;
    else if (c >= 0) {
        if (c == ')') return fail_at(p, p->pos, "unbalanced ')'");
        return fail_at(p, p->pos, "expecting the end of the line");
    }
    skip_space(p, true);
    return true;
}

/* ---------------------------------------------------------------- checks */

bool th_gelem_is_end(const th_gelem *e) { return e->type == GE_END || e->type == GE_ALT; }

/* nullable[r]: rule r can match the empty string. Linear worklist: an alternative with a
 * terminal never is; otherwise it waits for its rule references, each of which lowers its
 * pending count when its rule turns out nullable. */
static bool compute_nullable(parser *p, uint8_t *nullable) {
    uint32_t n = p->n_rules, n_alt = 0, n_ref = 0;
    memset(nullable, 0, n);
    for (uint32_t r = 0; r < n; r++)
        for (const th_gelem *e = p->rules[r].v;; e++) {
            if (e->type == GE_RULE_REF) n_ref++;
            if (th_gelem_is_end(e)) n_alt++;
            if (e->type == GE_END) break;
        }
    uint32_t *alt_rule = malloc(n_alt * sizeof *alt_rule), *pending = malloc(n_alt * sizeof *pending);
    uint32_t *occ_off = calloc((size_t)n + 1, sizeof *occ_off), *occ = malloc((n_ref ? n_ref : 1) * sizeof *occ);
    uint32_t *queue = malloc(n * sizeof *queue);
    bool ok = alt_rule && pending && occ_off && occ && queue;
    uint32_t qh = 0, qt = 0;
    if (ok) {
        /* pass 1: pending counts, occurrences per target; pass 2: fill occurrences */
        for (int pass = 0; pass < 2; pass++) {
            uint32_t a = 0;
            for (uint32_t r = 0; r < n; r++) {
                uint32_t cnt = 0;
                bool dead = false;
                const th_gelem *alt0 = p->rules[r].v;
                for (const th_gelem *e = p->rules[r].v;; e++) {
                    if (e->type == GE_RULE_REF) cnt++;
                    else if (!th_gelem_is_end(e)) dead = true;
                    if (!th_gelem_is_end(e)) continue;
                    if (!dead)
                        for (const th_gelem *q = alt0; q < e; q++)
                            if (q->type == GE_RULE_REF) {
                                if (pass == 0) occ_off[q->value + 1]++;
                                else occ[occ_off[q->value]++] = a;
                            }
                    if (pass == 0) {
                        alt_rule[a] = r;
                        pending[a] = dead ? UINT32_MAX : cnt;
                        if (!dead && cnt == 0 && !nullable[r]) { nullable[r] = 1; queue[qt++] = r; }
                    }
                    a++;
                    cnt = 0;
                    dead = false;
                    alt0 = e + 1;
                    if (e->type == GE_END) break;
                }
            }
            if (pass == 0) for (uint32_t r = 0; r < n; r++) occ_off[r + 1] += occ_off[r];
            else for (uint32_t r = n; r > 0; r--) occ_off[r] = occ_off[r - 1];
            if (pass == 1) occ_off[0] = 0;
        }
        while (qh < qt) {
            uint32_t s = queue[qh++];
            for (uint32_t k = occ_off[s]; k < occ_off[s + 1]; k++) {
                uint32_t a = occ[k];
                if (pending[a] == UINT32_MAX || pending[a] == 0) continue;
                if (--pending[a] == 0 && !nullable[alt_rule[a]]) {
                    nullable[alt_rule[a]] = 1;
                    queue[qt++] = alt_rule[a];
                }
            }
        }
    }
    free(alt_rule); free(pending); free(occ_off); free(occ); free(queue);
    return ok;
}

static const char *describe_rule(const parser *p, uint32_t r, char *buf, size_t cap) {
    if (!p->generated[r]) { snprintf(buf, cap, "rule '%s'", p->names[r]); return buf; }
    const char *nm = p->names[r];
    const char *us = strrchr(nm, '_');
    int n = us ? (int)(us - nm) : (int)strlen(nm);
    snprintf(buf, cap, "a group or repetition in rule '%.*s'", n, nm);
    return buf;
}

/* Left recursion: an edge r -> s when s can be the first thing r matches (every element
 * before it in its alternative nullable); a cycle means a stack could grow without
 * consuming input. Edges in CSR form, then an iterative depth-first search. */
static bool check_left_recursion(parser *p) {
    uint32_t n = p->n_rules;
    uint8_t *nullable = malloc(n), *color = calloc(n, 1);
    uint32_t *off = calloc((size_t)n + 1, sizeof *off), *st = malloc(n * sizeof *st), *it = malloc(n * sizeof *it);
    uint32_t *edge = NULL;
    bool ok = nullable && color && off && st && it;
    if (ok) ok = compute_nullable(p, nullable);
    if (ok) {
        for (int pass = 0; ok && pass < 2; pass++) {
            uint32_t m = 0;
            for (uint32_t r = 0; r < n; r++) {
                if (pass == 0) off[r] = m;
                bool at_left = true;
                for (const th_gelem *e = p->rules[r].v; e->type != GE_END; e++) {
                    if (e->type == GE_ALT) at_left = true;
                    else if (e->type == GE_RULE_REF) {
                        if (at_left) { if (pass == 1) edge[m] = e->value; m++; }
                        if (!nullable[e->value]) at_left = false;
                    } else at_left = false;
                }
            }
            if (pass == 0) {
                off[n] = m;
                edge = malloc((m ? m : 1) * sizeof *edge);
                ok = edge != NULL;
            }
        }
    }
    if (!ok) {
        free(nullable); free(color); free(off); free(st); free(it); free(edge);
        return fail_nomem(p);
    }
    for (uint32_t start = 0; ok && start < n; start++) {
        if (color[start]) continue;
        uint32_t sp = 0;
        st[sp] = start; it[sp] = off[start]; sp++;
        color[start] = 1;
        while (ok && sp) {
            uint32_t r = st[sp - 1];
            if (it[sp - 1] == off[r + 1]) { color[r] = 2; sp--; continue; }
            uint32_t s = edge[it[sp - 1]++];
            if (color[s] == 1) {
                char buf[600];
                int line, col;
                where(p, p->def_pos[s], &line, &col);
                th_set_error(TH_ERR_FORMAT, "grammar: line %d: left recursion: %s can reach itself without consuming input",
                             line, describe_rule(p, s, buf, sizeof buf));
                p->failed = true;
                ok = false;
            } else if (color[s] == 0) {
                color[s] = 1;
                st[sp] = s; it[sp] = off[s]; sp++;
            }
        }
    }
    free(nullable); free(color); free(off); free(st); free(it); free(edge);
    return ok;
}

static bool finish(parser *p, th_grammar **out) {
    for (uint32_t r = 0; r < p->n_rules; r++)
        if (!p->defined[r]) return fail_at(p, p->ref_pos[r], "undefined rule '%s'", p->names[r]);
    uint32_t root = UINT32_MAX;
    for (uint32_t r = 0; r < p->n_rules; r++)
        if (!p->generated[r] && !strcmp(p->names[r], "root")) root = r;
    if (root == UINT32_MAX) {
        th_set_error(TH_ERR_FORMAT, "grammar: no rule named 'root'");
        return false;
    }
    if (!check_left_recursion(p)) return false;
    th_grammar *g = calloc(1, sizeof *g);
    if (!g) return fail_nomem(p);
    g->n_rules = p->n_rules;
    g->n_elems = (uint32_t)p->n_elems;
    g->root = root;
    g->elems = malloc((g->n_elems ? g->n_elems : 1) * sizeof *g->elems);
    g->rule_off = malloc(g->n_rules * sizeof *g->rule_off);
    g->generated = malloc(g->n_rules);
    if (!g->elems || !g->rule_off || !g->generated) {
        free(g->elems); free(g->rule_off); free(g->generated); free(g);
        return fail_nomem(p);
    }
    uint32_t off = 0;
    for (uint32_t r = 0; r < p->n_rules; r++) {
        g->rule_off[r] = off;
        memcpy(g->elems + off, p->rules[r].v, p->rules[r].n * sizeof *g->elems);
        off += p->rules[r].n;
        g->generated[r] = p->generated[r];
    }
    g->names = p->names;      /* ownership moves */
    p->names = NULL;
    *out = g;
    return true;
}

static void parser_free(parser *p) {
    for (uint32_t r = 0; r < p->n_rules; r++) {
        free(p->rules[r].v);
        if (p->names) free(p->names[r]);
    }
    free(p->rules); free(p->names); free(p->generated); free(p->defined);
    free(p->def_pos); free(p->ref_pos); free(p->ht);
}

th_status th_gbnf_parse(const char *text, size_t len, th_grammar **out) {
    if (!out || (!text && len)) return th_set_error(TH_ERR_ARG, "th_grammar_parse: invalid arguments");
    *out = NULL;
    if (len > TH_GBNF_MAX_TEXT)
        return th_set_error(TH_ERR_FORMAT, "grammar: %zu bytes is more than the limit of %u", len, TH_GBNF_MAX_TEXT);
    parser p = { .s = text ? text : "", .len = len };
    const char *nul = len ? memchr(p.s, 0, len) : NULL;
    if (nul) {
        fail_at(&p, (size_t)(nul - p.s), "NUL byte in grammar");
        return TH_ERR_FORMAT;
    }
    skip_space(&p, true);
    while (!p.failed && p.pos < p.len) {
        if (!parse_rule(&p)) break;
    }
    bool ok = !p.failed && finish(&p, out);
    parser_free(&p);
    if (!ok) return th_last_error()[0] && strstr(th_last_error(), "out of memory") ? TH_ERR_NOMEM : TH_ERR_FORMAT;
    return TH_OK;
}

/* ---------------------------------------------------------------- public */

th_status th_grammar_parse(const char *gbnf, size_t len, th_grammar **out) { return th_gbnf_parse(gbnf, len, out); }

void th_grammar_free(th_grammar *g) {
    if (!g) return;
    for (uint32_t r = 0; r < g->n_rules; r++) free(g->names[r]);
    free(g->names);
    free(g->elems);
    free(g->rule_off);
    free(g->generated);
    free(g);
}

int32_t th_grammar_n_rules(const th_grammar *g) { return g ? (int32_t)g->n_rules : 0; }

static const char *type_name(uint32_t t) {
    static const char *names[] = { "END", "ALT", "RULE_REF", "CHAR", "CHAR_NOT", "CHAR_RNG_UPPER", "CHAR_ALT",
                                   "CHAR_ANY" };
    return t < 8 ? names[t] : "?";
}

char *th_gbnf_dump(const th_grammar *g) {
    th_bytes b = { 0 };
    for (uint32_t r = 0; r < g->n_rules; r++) {
        th_bytes_printf(&b, "%u %s: ", r, g->names[r]);
        for (uint32_t i = g->rule_off[r];; i++) {
            th_bytes_printf(&b, "%s %u%s", type_name(g->elems[i].type), g->elems[i].value,
                            g->elems[i].type == GE_END ? "\n" : ", ");
            if (g->elems[i].type == GE_END) break;
        }
    }
    return th_bytes_take(&b);
}
