/* grammar_print.c — th_grammar_to_gbnf: a parsed grammar written back as GBNF that parses
 * to the same language: one line per rule in id order, literals and classes escaped,
 * an empty alternative as "", and the rules made for groups and repetitions (named
 * "base_N" inside, which is not a GBNF name) printed as "base-N" (with "-g" added until
 * the name is free). */
#include "core/core.h"
#include "core/bytes.h"
#include "sample/grammar_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void put_utf8(th_bytes *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) { u[0] = (char)c; n = 1; }
    else if (c < 0x800) { u[0] = (char)(0xC0 | c >> 6); u[1] = (char)(0x80 | (c & 63)); n = 2; }
    else if (c < 0x10000) { u[0] = (char)(0xE0 | c >> 12); u[1] = (char)(0x80 | (c >> 6 & 63)); u[2] = (char)(0x80 | (c & 63)); n = 3; }
    else { u[0] = (char)(0xF0 | c >> 18); u[1] = (char)(0x80 | (c >> 12 & 63)); u[2] = (char)(0x80 | (c >> 6 & 63)); u[3] = (char)(0x80 | (c & 63)); n = 4; }
    th_bytes_put(b, u, n);
}

/* One character inside "..." (in_class: inside [...]). */
static void put_char(th_bytes *b, uint32_t c, bool in_class) {
    if (c == '\\') th_bytes_str(b, "\\\\");
    else if (c == '"') th_bytes_str(b, "\\\"");
    else if (c == '\n') th_bytes_str(b, "\\n");
    else if (c == '\r') th_bytes_str(b, "\\r");
    else if (c == '\t') th_bytes_str(b, "\\t");
    else if (in_class && (c == ']' || c == '[')) th_bytes_printf(b, "\\%c", (char)c);
    else if (in_class && (c == '-' || c == '^')) th_bytes_printf(b, "\\x%02X", c);
    else if (c < 0x20 || c == 0x7F) th_bytes_printf(b, "\\x%02X", c);
    else if ((c >= 0x80 && c < 0xA0) || (c >= 0xD800 && c < 0xE000)) th_bytes_printf(b, "\\u%04X", c);
    else if (c > 0x10FFFF) th_bytes_printf(b, "\\U%08X", c);
    else put_utf8(b, c);
}

typedef struct nameset { char **v; uint32_t cap; } nameset;

static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static bool ns_has(const nameset *ns, const char *s) {
    for (uint32_t h = name_hash(s) & (ns->cap - 1); ns->v[h]; h = (h + 1) & (ns->cap - 1))
        if (!strcmp(ns->v[h], s)) return true;
    return false;
}

static void ns_add(nameset *ns, char *s) {
    uint32_t h = name_hash(s) & (ns->cap - 1);
    while (ns->v[h]) h = (h + 1) & (ns->cap - 1);
    ns->v[h] = s;
}

/* Printable names for every rule (user names unchanged). NULL on failure. */
static char **print_names(const th_grammar *g) {
    char **out = calloc(g->n_rules, sizeof *out);
    nameset ns = { NULL, 16 };
    while (ns.cap < g->n_rules * 4u) ns.cap *= 2;
    ns.v = calloc(ns.cap, sizeof *ns.v);
    bool ok = out && ns.v;
    for (uint32_t r = 0; ok && r < g->n_rules; r++)
        if (!g->generated[r]) {
            ok = (out[r] = strdup(g->names[r])) != NULL;
            if (ok) ns_add(&ns, out[r]);
        }
    for (uint32_t r = 0; ok && r < g->n_rules; r++) {
        if (!g->generated[r]) continue;
        size_t n = strlen(g->names[r]);
        char *nm = malloc(n + 2 * 16 + 1);
        if (!(ok = nm != NULL)) break;
        memcpy(nm, g->names[r], n + 1);
        for (char *q = nm; *q; q++)
            if (*q == '_') *q = '-';
        for (int k = 0; k < 16 && ns_has(&ns, nm); k++) strcat(nm, "-g");
        if (ns_has(&ns, nm)) sprintf(nm, "rule-%u", r);   /* ids are unique among generated names */
        out[r] = nm;
        ns_add(&ns, nm);
    }
    free(ns.v);
    if (!ok && out) {
        for (uint32_t r = 0; r < g->n_rules; r++) free(out[r]);
        free(out);
        return NULL;
    }
    return out;
}

static const th_gelem *put_class(th_bytes *b, const th_gelem *e) {
    th_bytes_str(b, e->type == GE_CHAR_NOT ? "[^" : "[");
    do {
        put_char(b, e->value, true);
        if (e[1].type == GE_CHAR_RNG_UPPER) {
            th_bytes_str(b, "-");
            put_char(b, e[1].value, true);
            e += 2;
        } else e += 1;
    } while (e->type == GE_CHAR_ALT);
    th_bytes_str(b, "]");
    return e;
}

th_status th_grammar_to_gbnf(const th_grammar *g, char **out) {
    if (!g || !out || !g->names) return th_set_error(TH_ERR_ARG, "th_grammar_to_gbnf: invalid arguments");
    *out = NULL;
    char **names = print_names(g);
    if (!names) return th_set_error(TH_ERR_NOMEM, "grammar: out of memory");
    th_bytes b = { 0 };
    for (uint32_t r = 0; r < g->n_rules; r++) {
        th_bytes_str(&b, names[r]);
        th_bytes_str(&b, " ::=");
        const th_gelem *e = g->elems + g->rule_off[r];
        bool empty_alt = true;
        for (;;) {
            if (th_gelem_is_end(e)) {
                if (empty_alt) th_bytes_str(&b, " \"\"");
                if (e->type == GE_END) break;
                th_bytes_str(&b, " |");
                empty_alt = true;
                e++;
                continue;
            }
            empty_alt = false;
            th_bytes_str(&b, " ");
            if (e->type == GE_CHAR && e[1].type != GE_CHAR_ALT && e[1].type != GE_CHAR_RNG_UPPER) {
                th_bytes_str(&b, "\"");
                while (e->type == GE_CHAR && e[1].type != GE_CHAR_ALT && e[1].type != GE_CHAR_RNG_UPPER) {
                    put_char(&b, e->value, false);
                    e++;
                }
                th_bytes_str(&b, "\"");
            } else if (e->type == GE_CHAR || e->type == GE_CHAR_NOT) {
                e = put_class(&b, e);
            } else if (e->type == GE_CHAR_ANY) {
                th_bytes_str(&b, ".");
                e++;
            } else if (e->type == GE_RULE_REF) {
                th_bytes_str(&b, e->value < g->n_rules ? names[e->value] : "?");
                e++;
            } else {
                e++;   /* stray CHAR_ALT / RNG_UPPER cannot come out of the parser */
            }
        }
        th_bytes_str(&b, "\n");
    }
    for (uint32_t r = 0; r < g->n_rules; r++) free(names[r]);
    free(names);
    if (!(*out = th_bytes_take(&b))) return th_set_error(TH_ERR_NOMEM, "grammar: out of memory");
    return TH_OK;
}
