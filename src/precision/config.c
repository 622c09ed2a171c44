/* config.c — precision configs: parsing the text (one `<pattern>[experts] <type>`
 * rule a line, '#' comments), the name matcher ('*' wildcards, N-M numeric
 * ranges) and resolving a config against a tensor list into an assignment
 * (later rules win; errors name the rule's line). See precision.h. */
#include "precision/precision.h"
#include "quant/ref_encode.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define MAX_TYPE_ID 65536      /* type ids looked up by name: GGML's and any of our own below this */
#define MAX_RULE_LEN 1024
#define MAX_RULES (1u << 20)

/* ---------------------------------------------------------------- names and types */

/* The ids the type table names, found once. */
static uint32_t known_ids[512];
static size_t n_known;
static pthread_once_t known_once = PTHREAD_ONCE_INIT;

static void find_known_ids(void) {
    for (uint32_t id = 0; id < MAX_TYPE_ID && n_known < sizeof known_ids / sizeof known_ids[0]; id++) {
        const th_type_info *ti = th_type_info_get(id);
        if (ti && ti->name) known_ids[n_known++] = id;
    }
}

bool th_prec_type_from_name(const char *name, uint32_t *out) {
    pthread_once(&known_once, find_known_ids);
    for (size_t k = 0; k < n_known; k++)
        if (!strcasecmp(th_type_info_get(known_ids[k])->name, name)) { *out = known_ids[k]; return true; }
    return false;
}

/* A run of decimal digits as a value (saturating at INT64_MAX); *len its length. */
static int64_t read_number(const char *s, size_t *len) {
    int64_t v = 0;
    size_t k = 0;
    for (; isdigit((unsigned char)s[k]); k++) v = v > (INT64_MAX - 9) / 10 ? INT64_MAX : v * 10 + (s[k] - '0');
    *len = k;
    return v;
}

/* A range token "N-M" at p: its bounds and length, or false. */
static bool range_at(const char *p, int64_t *lo, int64_t *hi, size_t *len) {
    size_t a, b;
    if (!isdigit((unsigned char)p[0])) return false;
    *lo = read_number(p, &a);
    if (p[a] != '-' || !isdigit((unsigned char)p[a + 1])) return false;
    *hi = read_number(p + a + 1, &b);
    *len = a + 1 + b;
    return true;
}

/* One non-star token of the pattern at p against the name at n (ni: its index in
 * the whole name, to see the character before): how far each advances, or false.
 * A range matches a whole number: not preceded by a digit, all the digits that follow. */
static bool token_at(const char *p, const char *name, size_t ni, size_t *dp, size_t *dn) {
    int64_t lo, hi;
    size_t plen;
    if (range_at(p, &lo, &hi, &plen)) {
        if (ni > 0 && isdigit((unsigned char)name[ni - 1])) return false;
        size_t nlen;
        int64_t v = read_number(name + ni, &nlen);
        if (nlen == 0 || v < lo || v > hi) return false;
        *dp = plen;
        *dn = nlen;
        return true;
    }
    if (name[ni] == 0 || name[ni] != *p) return false;
    *dp = *dn = 1;
    return true;
}

/* Glob matching with one backtracking point (the last '*'): each other token
 * matches in at most one way at a given place, so this is the usual linear-ish
 * wildcard walk. */
bool th_prec_match(const char *pattern, const char *name) {
    size_t p = 0, n = 0, star_p = 0, star_n = 0;
    bool star = false;
    for (;;) {
        if (pattern[p] == '*') {
            while (pattern[p] == '*') p++;
            star = true;
            star_p = p;
            star_n = n;
            continue;
        }
        if (pattern[p] == 0 && name[n] == 0) return true;
        size_t dp, dn;
        if (pattern[p] != 0 && token_at(pattern + p, name, n, &dp, &dn)) {
            p += dp;
            n += dn;
            continue;
        }
        if (!star || name[star_n] == 0) return false;
        star_n++;
        p = star_p;
        n = star_n;
    }
}

/* ---------------------------------------------------------------- parsing */

static th_status line_error(const char *origin, int line, const char *fmt, const char *arg) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    return th_set_error(TH_ERR_FORMAT, "precision config %s:%d: %s", origin, line, msg);
}

/* "[52]" or "[0-7]" ending the pattern: the bounds, and the pattern cut before '['. */
static th_status parse_selector(char *pat, const char *origin, int line, int32_t *lo, int32_t *hi) {
    *lo = *hi = -1;
    size_t len = strlen(pat);
    if (len == 0 || pat[len - 1] != ']') {
        if (strchr(pat, '[') || strchr(pat, ']')) return line_error(origin, line, "'%s': '[' ']' only as a final expert selector", pat);
        return TH_OK;
    }
    char *open = strrchr(pat, '[');
    if (!open || open == pat) return line_error(origin, line, "'%s': an expert selector needs a tensor name before it", pat);
    char *sel = open + 1;
    size_t a, b = 0;
    int64_t x = read_number(sel, &a), y = x;
    if (a > 0 && sel[a] == '-') y = read_number(sel + a + 1, &b);
    size_t used = a + (b ? 1 + b : 0);
    if (a == 0 || (sel[a] == '-' && b == 0) || sel[used] != ']' || sel + used + 1 != pat + len)
        return line_error(origin, line, "'%s': the expert selector must be [N] or [N-M]", pat);
    if (x > y || y >= (1 << 24)) return line_error(origin, line, "'%s': expert selector out of order or too large", pat);
    *open = 0;
    if (strchr(pat, '[') || strchr(pat, ']')) return line_error(origin, line, "'%s': '[' ']' only as a final expert selector", pat);
    *lo = (int32_t)x;
    *hi = (int32_t)y;
    return TH_OK;
}

static th_status parse_type(const char *word, const char *origin, int line, uint32_t *type) {
    if (!th_prec_type_from_name(word, type)) return line_error(origin, line, "unknown type '%s'", word);
    const th_type_info *ti = th_type_info_get(*type);
    if (!ti->supported || !th_can_quantize_weights(*type))
        return line_error(origin, line, "type '%s' cannot be written as weights (no encoder or no kernels)", word);
    return TH_OK;
}

/* One line (NUL-terminated, comment already cut): empty, or "pattern type". */
static th_status parse_line(th_prec_config *c, char *s, int line, size_t *cap) {
    char *words[3];
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, " \t\r\v\f", &save); tok; tok = strtok_r(NULL, " \t\r\v\f", &save)) {
        if (n == 2) return line_error(c->origin, line, "'%s': a rule is '<pattern> <type>', nothing after the type", tok);
        words[n++] = tok;
    }
    if (n == 0) return TH_OK;
    if (n == 1) return line_error(c->origin, line, "'%s': a rule is '<pattern> <type>' (the type is missing)", words[0]);
    th_prec_rule r = { .line = line };
    th_status st = parse_selector(words[0], c->origin, line, &r.x_lo, &r.x_hi);
    if (!st) st = parse_type(words[1], c->origin, line, &r.type);
    if (st) return st;
    if (c->n_rules == *cap) {
        if (*cap >= MAX_RULES) return line_error(c->origin, line, "more than %s rules", "2^20");
        size_t ncap = *cap ? *cap * 2 : 16;
        th_prec_rule *nr = realloc(c->rules, ncap * sizeof *nr);
        if (!nr) return th_set_error(TH_ERR_NOMEM, "precision config %s: out of memory", c->origin);
        c->rules = nr;
        *cap = ncap;
    }
    if (!(r.pattern = strdup(words[0]))) return th_set_error(TH_ERR_NOMEM, "precision config %s: out of memory", c->origin);
    c->rules[c->n_rules++] = r;
    return TH_OK;
}

th_status th_prec_parse(const char *text, size_t len, const char *origin, th_prec_config **out) {
    *out = NULL;
    th_prec_config *c = calloc(1, sizeof *c);
    if (!c || !(c->origin = strdup(origin ? origin : "<text>"))) {
        free(c);
        return th_set_error(TH_ERR_NOMEM, "precision config: out of memory");
    }
    size_t cap = 0, pos = 0;
    int line = 0;
    char buf[MAX_RULE_LEN + 1];
    th_status st = TH_OK;
    while (!st && pos < len) {
        line++;
        const char *end = memchr(text + pos, '\n', len - pos);
        size_t n = end ? (size_t)(end - (text + pos)) : len - pos;
        const char *hash = memchr(text + pos, '#', n);
        size_t keep = hash ? (size_t)(hash - (text + pos)) : n;
        if (memchr(text + pos, 0, keep)) st = line_error(c->origin, line, "%s", "a NUL byte in a rule");
        else if (keep > MAX_RULE_LEN) st = line_error(c->origin, line, "%s", "line longer than 1024 bytes");
        else {
            memcpy(buf, text + pos, keep);
            buf[keep] = 0;
            st = parse_line(c, buf, line, &cap);
        }
        pos += n + (end ? 1 : 0);
    }
    if (st) { th_prec_config_free(c); return st; }
    *out = c;
    return TH_OK;
}

th_status th_prec_load(const char *path, th_prec_config **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return th_set_error(TH_ERR_IO, "precision config '%s': %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    th_status st = buf ? TH_OK : th_set_error(TH_ERR_NOMEM, "precision config '%s': out of memory", path);
    while (!st) {
        if (len == cap) {
            char *nb = cap < ((size_t)1 << 28) ? realloc(buf, cap * 2) : NULL;
            if (!nb) { st = th_set_error(TH_ERR_NOMEM, "precision config '%s': too large", path); break; }
            buf = nb;
            cap *= 2;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) {
            if (ferror(f)) st = th_set_error(TH_ERR_IO, "precision config '%s': read error", path);
            break;
        }
    }
    fclose(f);
    if (!st) st = th_prec_parse(buf, len, path, out);
    free(buf);
    return st;
}

void th_prec_config_free(th_prec_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_rules; i++) free(c->rules[i].pattern);
    free(c->rules);
    free(c->origin);
    free(c);
}

/* ---------------------------------------------------------------- assignments */

th_status th_prec_assign_init(th_prec_assign *a, size_t n) {
    memset(a, 0, sizeof *a);
    a->n = n;
    a->type = calloc(n ? n : 1, sizeof *a->type);
    a->expert = calloc(n ? n : 1, sizeof *a->expert);
    a->n_expert = calloc(n ? n : 1, sizeof *a->n_expert);
    if (!a->type || !a->expert || !a->n_expert) {
        th_prec_assign_free(a);
        return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    }
    return TH_OK;
}

void th_prec_assign_free(th_prec_assign *a) {
    if (a->expert)
        for (size_t i = 0; i < a->n; i++) free(a->expert[i]);
    free(a->type);
    free(a->expert);
    free(a->n_expert);
    memset(a, 0, sizeof *a);
}

/* Experts of a tensor that have no type of their own any more: drop the table. */
static void compact_experts(th_prec_assign *a, size_t i) {
    if (!a->expert[i]) return;
    for (uint32_t e = 0; e < a->n_expert[i]; e++)
        if (a->expert[i][e] != a->type[i]) return;
    free(a->expert[i]);
    a->expert[i] = NULL;
}

static th_status shape_error(const th_prec_config *c, const th_prec_rule *r, const th_qtensor *t) {
    const th_type_info *ti = th_type_info_get(r->type);
    return th_set_error(TH_ERR_FORMAT,
                        "precision config %s:%d: tensor %s: rows of %" PRIu64 " values cannot be %s (blocks of %u)",
                        c->origin, r->line, t->name, t->ne[0], ti->name, ti->block);
}

/* One rule over every tensor; *hits counts the tensors (or experts) it set. */
static th_status apply_rule(const th_prec_config *c, const th_prec_rule *r, const th_qtensor *t, th_prec_assign *a,
                            size_t *hits, uint32_t *most_experts) {
    const th_type_info *ti = th_type_info_get(r->type);
    for (size_t i = 0; i < a->n; i++) {
        if (!th_qtensor_quantizable(&t[i]) || !th_prec_match(r->pattern, t[i].name)) continue;
        if (t[i].ne[0] % ti->block) return shape_error(c, r, &t[i]);
        if (r->x_lo < 0) {
            a->type[i] = r->type;
            free(a->expert[i]);
            a->expert[i] = NULL;
            (*hits)++;
            continue;
        }
        uint32_t nx = a->n_expert[i];
        if (nx < 2) continue;   /* not an expert tensor */
        *most_experts = TH_MAX(*most_experts, nx);
        if ((uint32_t)r->x_hi >= nx) continue;
        if (!a->expert[i]) {
            if (!(a->expert[i] = malloc(nx * sizeof *a->expert[i])))
                return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
            for (uint32_t e = 0; e < nx; e++) a->expert[i][e] = a->type[i];
        }
        for (int32_t e = r->x_lo; e <= r->x_hi; e++) a->expert[i][e] = r->type;
        compact_experts(a, i);
        (*hits)++;
    }
    return TH_OK;
}

th_status th_prec_resolve(const th_prec_config *c, const th_qtensor *t, size_t n, const th_prec_assign *base,
                          th_prec_assign *out) {
    th_status st = th_prec_assign_init(out, n);
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        out->n_expert[i] = t[i].n_dims >= 3 && t[i].ne[2] > 1 ? (uint32_t)TH_MIN(t[i].ne[2], UINT32_MAX) : 1;
        out->type[i] = base ? base->type[i] : t[i].type;
        if (base && base->expert[i]) {
            if (!(out->expert[i] = malloc(out->n_expert[i] * sizeof *out->expert[i]))) {
                th_prec_assign_free(out);
                return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
            }
            memcpy(out->expert[i], base->expert[i], out->n_expert[i] * sizeof *out->expert[i]);
        }
    }
    for (size_t k = 0; k < c->n_rules; k++) {
        const th_prec_rule *r = &c->rules[k];
        size_t hits = 0;
        uint32_t most = 0;
        if ((st = apply_rule(c, r, t, out, &hits, &most))) break;
        if (hits) continue;
        if (r->x_lo >= 0 && most > 0)
            st = th_set_error(TH_ERR_FORMAT, "precision config %s:%d: expert %d is out of range (the matched tensors have %u experts)",
                              c->origin, r->line, r->x_hi, most);
        else
            st = th_set_error(TH_ERR_FORMAT, "precision config %s:%d: '%s%s' matches no %s", c->origin, r->line, r->pattern,
                              r->x_lo >= 0 ? "[...]" : "", r->x_lo >= 0 ? "expert tensor" : "quantizable tensor");
        break;
    }
    if (st) th_prec_assign_free(out);
    return st;
}
