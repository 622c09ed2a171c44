/* json_schema_regex.c — "pattern" (ECMA-262 regular expressions) to GBNF over the JSON
 * text of a string, in the shape llama.cpp's converter writes (literals merged, a
 * quantified class becomes a named rule).
 *
 * Supported: literal characters and escapes (\t \n \r \f \v \0 \xHH \uHHHH and escaped
 * punctuation), `.`, classes `[...]` / `[^...]` with ranges and \d \D \w \W \s \S (also
 * inside classes), groups `( )` `(?: )` `(?<name> )`, alternation, `* + ? {m} {m,} {m,n}`
 * (lazy forms too: same language). Anything else (anchors in the middle, lookaround,
 * backreferences, \b, \p{..}, flags) is an error. A pattern anchored with ^...$ is matched
 * whole, as llama.cpp does, also when it has top-level alternatives (`^A|B$` as
 * ^(A|B)$: a subset of what the regex accepts); a side without its anchor may have any
 * characters there.
 *
 * Unlike llama.cpp the grammar is over the string's JSON text: a `"` or `\` of the pattern
 * must appear escaped (\" \\), control characters as their JSON escapes, and `.` and
 * negated classes never produce a raw `"`, `\` or control character (they produce the
 * short escapes instead: \" \\ \/ \b \f \n \r \t, never \uXXXX — a strict subset). */
#include "core/core.h"
#include "sample/grammar_internal.h"
#include "sample/json_schema_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_RANGES 512
#define MAX_GROUP_DEPTH 64

typedef struct rng { uint32_t lo, hi; } rng;
typedef struct cclass { rng r[MAX_RANGES]; int n; bool negated; } cclass;

typedef struct item { char *text; bool literal; } item;
typedef struct seq { item *v; int n, cap; } seq;

typedef struct rx {
    jconv *c;
    const char *p;          /* pattern (anchors stripped) */
    size_t len, i;
    const char *name, *path;
    char **sub_text, **sub_name;   /* quantified non-literals -> their rule */
    int n_sub, cap_sub;
    int depth;
    bool failed;
} rx;

static bool rx_fail(rx *x, const char *msg) {
    if (!x->failed) jconv_fail(x->c, x->path, TH_ERR_UNSUPPORTED, "pattern: %s (at character %zu)", msg, x->i + 1);
    x->failed = true;
    return false;
}

/* ---------------------------------------------------------------- character sets */

static bool cc_add(rx *x, cclass *cc, uint32_t lo, uint32_t hi) {
    if (cc->n >= MAX_RANGES) return rx_fail(x, "character class too large");
    cc->r[cc->n++] = (rng){ lo, hi };
    return true;
}

/* ECMA-262 \s: WhiteSpace and LineTerminator */
static const rng SPACE[] = { { 0x09, 0x0D }, { 0x20, 0x20 }, { 0xA0, 0xA0 }, { 0x1680, 0x1680 }, { 0x2000, 0x200A },
                             { 0x2028, 0x2029 }, { 0x202F, 0x202F }, { 0x205F, 0x205F }, { 0x3000, 0x3000 }, { 0xFEFF, 0xFEFF } };
static const rng DIGIT[] = { { '0', '9' } };
static const rng WORD[] = { { '0', '9' }, { 'A', 'Z' }, { '_', '_' }, { 'a', 'z' } };

static bool cc_add_set(rx *x, cclass *cc, const rng *set, int n, bool complement) {
    if (!complement) {
        for (int k = 0; k < n; k++)
            if (!cc_add(x, cc, set[k].lo, set[k].hi)) return false;
        return true;
    }
    uint32_t next = 0;
    for (int k = 0; k < n; k++) {
        if (set[k].lo > next && !cc_add(x, cc, next, set[k].lo - 1)) return false;
        next = set[k].hi + 1;
    }
    return next > 0x10FFFF || cc_add(x, cc, next, 0x10FFFF);
}

static bool cc_has(const cclass *cc, uint32_t c) {
    bool in = false;
    for (int k = 0; k < cc->n; k++)
        if (cc->r[k].lo <= c && c <= cc->r[k].hi) in = true;
    return in != cc->negated;
}

static void put_class_char(th_bytes *b, uint32_t c) {
    if (c == '\\' || c == ']' || c == '[') th_bytes_printf(b, "\\%c", (char)c);
    else if (c == '-' || c == '^' || c < 0x20 || c == 0x7F) th_bytes_printf(b, "\\x%02X", c);
    else if ((c >= 0x80 && c < 0xA0) || (c >= 0xD800 && c < 0xE000)) th_bytes_printf(b, "\\u%04X", c);
    else {
        char u[4];
        int n;
        if (c < 0x80) { u[0] = (char)c; n = 1; }
        else if (c < 0x800) { u[0] = (char)(0xC0 | c >> 6); u[1] = (char)(0x80 | (c & 63)); n = 2; }
        else if (c < 0x10000) { u[0] = (char)(0xE0 | c >> 12); u[1] = (char)(0x80 | (c >> 6 & 63)); u[2] = (char)(0x80 | (c & 63)); n = 3; }
        else { u[0] = (char)(0xF0 | c >> 18); u[1] = (char)(0x80 | (c >> 12 & 63)); u[2] = (char)(0x80 | (c >> 6 & 63)); u[3] = (char)(0x80 | (c & 63)); n = 4; }
        th_bytes_put(b, u, (size_t)n);
    }
}

/* '-' goes last so that "[a-z_-]" prints as written. */
static void put_range(th_bytes *b, rng r, bool *dash) {
    if (r.lo == '-' && r.hi == '-') { *dash = true; return; }
    put_class_char(b, r.lo);
    if (r.hi != r.lo) {
        th_bytes_str(b, "-");
        put_class_char(b, r.hi);
    }
}

/* The JSON text of a string character in class cc: raw where JSON allows the character
 * raw, its short escape otherwise (see the top of the file). */
static char *class_text(rx *x, const cclass *cc) {
    static const struct { uint32_t c; char e; } ESC[] = { { '"', '"' }, { '\\', '\\' }, { 8, 'b' }, { 12, 'f' },
                                                           { 10, 'n' }, { 13, 'r' }, { 9, 't' } };
    th_bytes raw = JSB_INIT, esc = JSB_INIT;
    bool dash = false, any_raw = false;
    if (cc->negated) {
        th_bytes_str(&raw, "[^");
        for (int k = 0; k < cc->n; k++) put_range(&raw, cc->r[k], &dash);
        th_bytes_str(&raw, "\"\\\\\\x00-\\x1F");
        if (dash) th_bytes_str(&raw, "-");
        th_bytes_str(&raw, "]");
        any_raw = true;
    } else {
        th_bytes_str(&raw, "[");
        for (int k = 0; k < cc->n; k++) {
            uint32_t lo = cc->r[k].lo, hi = cc->r[k].hi;
            /* drop the characters JSON escapes: 0x00-0x1F, '"', '\\' */
            uint32_t cuts[][2] = { { 0, 0x1F }, { '"', '"' }, { '\\', '\\' } };
            uint32_t a = lo;
            while (a <= hi) {
                uint32_t b = hi;
                bool skip = false;
                for (int q = 0; q < 3; q++) {
                    if (a >= cuts[q][0] && a <= cuts[q][1]) { a = cuts[q][1] + 1; skip = true; break; }
                    if (cuts[q][0] > a && cuts[q][0] <= b) b = cuts[q][0] - 1;
                }
                if (skip) continue;
                put_range(&raw, (rng){ a, b }, &dash);
                any_raw = true;
                if (b == UINT32_MAX) break;
                a = b + 1;
            }
        }
        if (dash) { th_bytes_str(&raw, "-"); any_raw = true; }
        th_bytes_str(&raw, "]");
    }
    int n_esc = 0;
    for (size_t k = 0; k < sizeof ESC / sizeof ESC[0]; k++)
        if (cc_has(cc, ESC[k].c)) {
            if (n_esc++ == 0) th_bytes_str(&esc, "\"\\\\\" [");
            if (ESC[k].e == '"' || ESC[k].e == '\\') th_bytes_printf(&esc, "%s", ESC[k].e == '"' ? "\"" : "\\\\");
            else th_bytes_printf(&esc, "%c", ESC[k].e);
        }
    if (n_esc) th_bytes_str(&esc, "]");
    char *r = th_bytes_take(&raw), *e = th_bytes_take(&esc);
    char *out = NULL;
    if (!r || !e) rx_fail(x, "out of memory");
    else if (!any_raw && !n_esc) rx_fail(x, "character class matches only characters JSON would write as \\u escapes");
    else {
        th_bytes o = JSB_INIT;
        if (any_raw && n_esc) th_bytes_printf(&o, "(%s | %s)", r, e);
        else th_bytes_str(&o, any_raw ? r : e);
        out = th_bytes_take(&o);
        if (!out) rx_fail(x, "out of memory");
    }
    free(r);
    free(e);
    return out;
}

/* ---------------------------------------------------------------- parsing */

static int peekc(const rx *x, size_t k) { return x->i + k < x->len ? (unsigned char)x->p[x->i + k] : -1; }

static bool hexval(int ch, uint32_t *v) {
    if (ch >= '0' && ch <= '9') *v = (uint32_t)(ch - '0');
    else if (ch >= 'a' && ch <= 'f') *v = (uint32_t)(ch - 'a' + 10);
    else if (ch >= 'A' && ch <= 'F') *v = (uint32_t)(ch - 'A' + 10);
    else return false;
    return true;
}

/* One UTF-8 character of the pattern. */
static bool next_cp(rx *x, uint32_t *cp) {
    th_utf8_partial st = { 0 };
    for (;;) {
        int b = peekc(x, 0);
        int r = b < 0 ? -1 : th_utf8_feed(&st, (uint8_t)b, cp);
        if (r < 0) return rx_fail(x, "invalid UTF-8");
        x->i++;
        if (r == 1) return true;
    }
}

/* After a backslash: a class escape (*cc filled, returns 2), a literal character (*cp,
 * returns 1), or an error (0). in_class: \b is backspace there. */
static int escape(rx *x, uint32_t *cp, cclass *cc, bool in_class) {
    int e = peekc(x, 0);
    if (e < 0) { rx_fail(x, "pattern ends with '\\'"); return 0; }
    x->i++;
    switch (e) {
    case 'd': case 'D': cc->n = 0; cc->negated = false; return cc_add_set(x, cc, DIGIT, 1, e == 'D') ? 2 : 0;
    case 'w': case 'W': cc->n = 0; cc->negated = false; return cc_add_set(x, cc, WORD, 4, e == 'W') ? 2 : 0;
    case 's': case 'S': cc->n = 0; cc->negated = false; return cc_add_set(x, cc, SPACE, 10, e == 'S') ? 2 : 0;
    case 't': *cp = 9; return 1;
    case 'n': *cp = 10; return 1;
    case 'v': *cp = 11; return 1;
    case 'f': *cp = 12; return 1;
    case 'r': *cp = 13; return 1;
    case '0':
        if (peekc(x, 0) >= '0' && peekc(x, 0) <= '9') { rx_fail(x, "octal escapes are not supported"); return 0; }
        *cp = 0;
        return 1;
    case 'b':
        if (in_class) { *cp = 8; return 1; }
        rx_fail(x, "\\b (word boundary) is not supported");
        return 0;
    case 'x': case 'u': {
        int nd = e == 'x' ? 2 : 4;
        uint32_t v = 0, d;
        for (int k = 0; k < nd; k++) {
            if (!hexval(peekc(x, 0), &d)) { rx_fail(x, "bad \\x or \\u escape"); return 0; }
            v = v << 4 | d;
            x->i++;
        }
        *cp = v;
        return 1;
    }
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9')) {
            char m[64];
            snprintf(m, sizeof m, "the escape \\%c is not supported", e);
            rx_fail(x, m);
            return 0;
        }
        if (e >= 0x80) { x->i--; return next_cp(x, cp) ? 1 : 0; }
        *cp = (uint32_t)e;
        return 1;
    }
}

static char *parse_class(rx *x) {
    cclass *cc = calloc(1, sizeof *cc), *sub = calloc(1, sizeof *sub);
    char *out = NULL;
    if (!cc || !sub) { rx_fail(x, "out of memory"); goto done; }
    x->i++;                                   /* [ */
    if (peekc(x, 0) == '^') { cc->negated = true; x->i++; }
    if (peekc(x, 0) == ']') {
        if (!cc->negated) { rx_fail(x, "empty character class []"); goto done; }
        x->i++;                               /* [^] : any character */
        cc->negated = false;
        if (!cc_add(x, cc, 0, 0x10FFFF)) goto done;
        out = class_text(x, cc);
        goto done;
    }
    while (peekc(x, 0) != ']') {
        if (peekc(x, 0) < 0) { rx_fail(x, "unterminated character class"); goto done; }
        uint32_t lo, hi;
        int k = 1;
        if (peekc(x, 0) == '\\') {
            x->i++;
            k = escape(x, &lo, sub, true);
            if (k == 0) goto done;
            if (k == 2) {
                for (int q = 0; q < sub->n; q++)
                    if (!cc_add(x, cc, sub->r[q].lo, sub->r[q].hi)) goto done;
                continue;
            }
        } else if (!next_cp(x, &lo)) goto done;
        hi = lo;
        if (peekc(x, 0) == '-' && peekc(x, 1) != ']' && peekc(x, 1) >= 0) {
            x->i++;
            if (peekc(x, 0) == '\\') {
                x->i++;
                if (escape(x, &hi, sub, true) != 1) { if (!x->failed) rx_fail(x, "a class escape cannot end a range"); goto done; }
            } else if (!next_cp(x, &hi)) goto done;
            if (hi < lo) { rx_fail(x, "reversed range in a character class"); goto done; }
        }
        if (!cc_add(x, cc, lo, hi)) goto done;
    }
    x->i++;                                   /* ] */
    out = class_text(x, cc);
done:
    free(cc);
    free(sub);
    return out;
}

static bool seq_push(rx *x, seq *s, char *text, bool literal) {
    if (!text) return rx_fail(x, "out of memory");
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        item *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) { free(text); return rx_fail(x, "out of memory"); }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (item){ text, literal };
    return true;
}

static void seq_free(seq *s) {
    for (int k = 0; k < s->n; k++) free(s->v[k].text);
    free(s->v);
}

static char *to_rule(const item *it) {
    th_bytes b = JSB_INIT;
    if (it->literal) th_bytes_printf(&b, "\"%s\"", it->text);
    else th_bytes_str(&b, it->text);
    return th_bytes_take(&b);
}

/* The sequence as GBNF: consecutive literals merged, items separated by spaces. */
static char *join_seq(rx *x, seq *s) {
    th_bytes b = JSB_INIT, lit = JSB_INIT;
    bool first = true;
    for (int k = 0; k <= s->n; k++) {
        if (k < s->n && s->v[k].literal) { th_bytes_str(&lit, s->v[k].text); continue; }
        if (lit.n) {
            if (!first) th_bytes_str(&b, " ");
            th_bytes_printf(&b, "\"%s\"", lit.p);
            lit.n = 0;
            first = false;
        }
        if (k == s->n) break;
        if (!first) th_bytes_str(&b, " ");
        th_bytes_str(&b, s->v[k].text);
        first = false;
    }
    free(lit.p);
    char *out = th_bytes_take(&b);
    if (!out) rx_fail(x, "out of memory");
    return out;
}

static bool is_quant(int c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

/* The JSON text of one literal character, escaped for a GBNF literal. */
static void literal_char(th_bytes *b, uint32_t cp) {
    char json[16];
    size_t n;
    if (cp == '"') n = (size_t)snprintf(json, sizeof json, "\\\"");
    else if (cp == '\\') n = (size_t)snprintf(json, sizeof json, "\\\\");
    else if (cp == 8) n = (size_t)snprintf(json, sizeof json, "\\b");
    else if (cp == 12) n = (size_t)snprintf(json, sizeof json, "\\f");
    else if (cp == 10) n = (size_t)snprintf(json, sizeof json, "\\n");
    else if (cp == 13) n = (size_t)snprintf(json, sizeof json, "\\r");
    else if (cp == 9) n = (size_t)snprintf(json, sizeof json, "\\t");
    else if (cp < 0x20) n = (size_t)snprintf(json, sizeof json, "\\u%04x", cp);
    else {
        uint8_t *u = (uint8_t *)json;
        if (cp < 0x80) { u[0] = (uint8_t)cp; n = 1; }
        else if (cp < 0x800) { u[0] = (uint8_t)(0xC0 | cp >> 6); u[1] = (uint8_t)(0x80 | (cp & 63)); n = 2; }
        else if (cp < 0x10000) { u[0] = (uint8_t)(0xE0 | cp >> 12); u[1] = (uint8_t)(0x80 | (cp >> 6 & 63)); u[2] = (uint8_t)(0x80 | (cp & 63)); n = 3; }
        else { u[0] = (uint8_t)(0xF0 | cp >> 18); u[1] = (uint8_t)(0x80 | (cp >> 12 & 63)); u[2] = (uint8_t)(0x80 | (cp >> 6 & 63)); u[3] = (uint8_t)(0x80 | (cp & 63)); n = 4; }
    }
    jsb_gbnf_escape(b, json, n);
}

/* A quantifier on the last item (llama.cpp's build_repetition without separator). */
static bool quantify(rx *x, seq *s) {
    if (s->n == 0 || (!s->v[s->n - 1].literal && !strcmp(s->v[s->n - 1].text, "|")))
        return rx_fail(x, "a quantifier without anything before it");
    item *last = &s->v[s->n - 1];
    int q = peekc(x, 0);
    long min = 0, max = -1;
    x->i++;
    if (q == '+') min = 1;
    else if (q == '?') max = 1;
    else if (q == '{') {
        size_t start = x->i;
        long v = 0;
        bool have = false;
        while (peekc(x, 0) >= '0' && peekc(x, 0) <= '9') { v = v * 10 + (peekc(x, 0) - '0'); have = true; x->i++; if (v > TH_JSON_SCHEMA_MAX_COUNT) return rx_fail(x, "repetition count too large"); }
        if (!have) { x->i = start; return rx_fail(x, "'{' must start a repetition {m}, {m,} or {m,n}"); }
        min = max = v;
        if (peekc(x, 0) == ',') {
            x->i++;
            max = -1;
            if (peekc(x, 0) >= '0' && peekc(x, 0) <= '9') {
                v = 0;
                while (peekc(x, 0) >= '0' && peekc(x, 0) <= '9') { v = v * 10 + (peekc(x, 0) - '0'); x->i++; if (v > TH_JSON_SCHEMA_MAX_COUNT) return rx_fail(x, "repetition count too large"); }
                max = v;
            }
        }
        if (peekc(x, 0) != '}') return rx_fail(x, "unterminated repetition {m,n}");
        x->i++;
        if (max >= 0 && max < min) return rx_fail(x, "repetition {m,n} with n < m");
    }
    if (peekc(x, 0) == '?') x->i++;           /* lazy: same language */
    if (is_quant(peekc(x, 0)) && peekc(x, 0) != '{') return rx_fail(x, "nested quantifiers are not supported");
    char *sub = to_rule(last);
    if (!sub) return rx_fail(x, "out of memory");
    th_bytes b = JSB_INIT;
    if (q != '{') {
        th_bytes_printf(&b, "%s%c", sub, q);
    } else {
        if (!last->literal) {
            /* a repeated non-literal gets its own rule (name-1, name-2, ...) */
            const char *id = NULL;
            for (int k = 0; k < x->n_sub; k++)
                if (!strcmp(x->sub_text[k], sub)) id = x->sub_name[k];
            if (!id) {
                char nm[600];
                snprintf(nm, sizeof nm, "%s-%d", x->name, x->n_sub + 1);
                id = jconv_add_rule(x->c, nm, sub);
                if (!id) { free(sub); return false; }
                if (x->n_sub == x->cap_sub) {
                    int cap = x->cap_sub ? x->cap_sub * 2 : 8;
                    char **t = realloc(x->sub_text, (size_t)cap * sizeof *t), **n = t ? realloc(x->sub_name, (size_t)cap * sizeof *n) : NULL;
                    if (t) x->sub_text = t;
                    if (!t || !n) { free(sub); return rx_fail(x, "out of memory"); }
                    x->sub_name = n;
                    x->cap_sub = cap;
                }
                x->sub_text[x->n_sub] = strdup(sub);
                x->sub_name[x->n_sub] = (char *)id;
                if (!x->sub_text[x->n_sub]) { free(sub); return rx_fail(x, "out of memory"); }
                x->n_sub++;
            }
            free(sub);
            sub = strdup(id);
            if (!sub) return rx_fail(x, "out of memory");
        }
        if (min == 0 && max == 1) th_bytes_printf(&b, "%s?", sub);
        else if (min == 1 && max < 0) th_bytes_printf(&b, "%s+", sub);
        else if (min == 0 && max < 0) th_bytes_printf(&b, "%s*", sub);
        else if (max < 0) th_bytes_printf(&b, "%s{%ld,}", sub, min);
        else th_bytes_printf(&b, "%s{%ld,%ld}", sub, min, max);
    }
    free(sub);
    char *t = th_bytes_take(&b);
    if (!t) return rx_fail(x, "out of memory");
    free(last->text);
    last->text = t;
    last->literal = false;
    return true;
}

/* A sequence up to ')' (nested) or the end; returns its GBNF (malloc'd) or NULL. */
static char *transform(rx *x, bool nested) {
    seq s = { 0 };
    th_bytes lit = JSB_INIT;
    char *out = NULL;
    for (;;) {
        int ch = peekc(x, 0);
        bool lit_char = false;
        uint32_t cp = 0;
        if (ch < 0 || ch == ')' || ch == '|' || ch == '(' || ch == '[' || ch == '.' || is_quant(ch) || ch == '^' || ch == '$') {
            /* structure */
        } else if (ch == '\\') {
            x->i++;
            cclass *cc = calloc(1, sizeof *cc);
            if (!cc) { rx_fail(x, "out of memory"); goto done; }
            int k = escape(x, &cp, cc, false);
            if (k == 2) {
                char *t = class_text(x, cc);
                free(cc);
                if (lit.n && !seq_push(x, &s, th_bytes_take(&lit), true)) { free(t); goto done; }
                if (!t || !seq_push(x, &s, t, false)) goto done;
                continue;
            }
            free(cc);
            if (k == 0) goto done;
            lit_char = true;
        } else {
            if (!next_cp(x, &cp)) goto done;
            lit_char = true;
        }
        if (lit_char) {
            /* a character followed by a quantifier stands alone, so the quantifier takes only it */
            if (is_quant(peekc(x, 0))) {
                if (lit.n && !seq_push(x, &s, th_bytes_take(&lit), true)) goto done;
                literal_char(&lit, cp);
                if (!seq_push(x, &s, th_bytes_take(&lit), true)) goto done;
            } else literal_char(&lit, cp);
            continue;
        }
        if (lit.n && !seq_push(x, &s, th_bytes_take(&lit), true)) goto done;
        if (ch < 0) {
            if (nested) { rx_fail(x, "unbalanced '('"); goto done; }
            break;
        }
        if (ch == ')') {
            if (!nested) { rx_fail(x, "unbalanced ')'"); goto done; }
            x->i++;
            break;
        }
        if (ch == '^' || ch == '$') { rx_fail(x, "anchors ^ and $ are only supported at the ends of the pattern"); goto done; }
        if (ch == '|') { x->i++; if (!seq_push(x, &s, strdup("|"), false)) goto done; continue; }
        if (ch == '.') {
            x->i++;
            const char *dot = jconv_add_primitive(x->c, "dot");
            if (!dot || !seq_push(x, &s, strdup(dot), false)) goto done;
            continue;
        }
        if (ch == '[') {
            char *t = parse_class(x);
            if (!t || !seq_push(x, &s, t, false)) goto done;
            continue;
        }
        if (is_quant(ch)) { if (!quantify(x, &s)) goto done; continue; }
        if (ch == '(') {
            x->i++;
            if (peekc(x, 0) == '?') {
                if (peekc(x, 1) == ':') x->i += 2;
                else if (peekc(x, 1) == '<' && peekc(x, 2) != '=' && peekc(x, 2) != '!') {
                    while (peekc(x, 0) >= 0 && peekc(x, 0) != '>') x->i++;
                    if (peekc(x, 0) != '>') { rx_fail(x, "unterminated group name"); goto done; }
                    x->i++;
                } else { rx_fail(x, "lookaround and inline flags are not supported"); goto done; }
            }
            if (++x->depth > MAX_GROUP_DEPTH) { rx_fail(x, "groups nested too deep"); goto done; }
            char *inner = transform(x, true);
            x->depth--;
            if (!inner) goto done;
            th_bytes g = JSB_INIT;
            th_bytes_printf(&g, "(%s)", inner);
            free(inner);
            if (!seq_push(x, &s, th_bytes_take(&g), false)) goto done;
            continue;
        }
    }
    out = join_seq(x, &s);
done:
    free(lit.p);
    seq_free(&s);
    if (x->failed) { free(out); out = NULL; }
    return out;
}

const char *json_pattern_rule(jconv *c, const char *pattern, size_t len, const char *rule_name, const char *path) {
    bool start = len > 0 && pattern[0] == '^', end = false;
    if (len > (size_t)(start ? 1 : 0) && pattern[len - 1] == '$') {
        size_t bs = 0;
        while (bs + 2 <= len && pattern[len - 2 - bs] == '\\') bs++;
        end = bs % 2 == 0;
    }
    rx x = { .c = c, .p = pattern + start, .len = len - start - end, .name = rule_name, .path = path };
    char *body = transform(&x, false);
    const char *name = NULL;
    if (body) {
        const char *any = (!start || !end) ? jconv_add_primitive(c, "char") : "";
        th_bytes b = JSB_INIT;
        th_bytes_str(&b, "\"\\\"\" (");
        if (!start) th_bytes_printf(&b, "%s* ", any ? any : "char");
        th_bytes_str(&b, body);
        if (!end) th_bytes_printf(&b, " %s*", any ? any : "char");
        th_bytes_str(&b, ") \"\\\"\" space");
        char *t = th_bytes_take(&b);
        if (!t) jconv_fail(c, path, TH_ERR_NOMEM, "out of memory");
        else name = jconv_add_rule(c, rule_name, t);
        free(t);
        free(body);
    }
    for (int k = 0; k < x.n_sub; k++) free(x.sub_text[k]);
    free(x.sub_text);
    free(x.sub_name);
    return jconv_failed(c) ? NULL : name;
}
