/* value.c — the template interpreter's runtime basics: the per-render arena
 * (with a byte limit), error exits (longjmp to the render entry), value
 * constructors, lists and ordered dicts, Python truthiness / equality /
 * str() / repr() (incl. float repr), UTF-8 helpers, and JSON in (cJSON) and
 * out (json.dumps with ensure_ascii=False, as HF's tojson). */
#include "template/chat_template.h"
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct tchunk { tchunk *next; size_t used, cap; _Alignas(16) char data[]; };

/* ---------------------------------------------------------------- errors, arena */

void tt_fail(tctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    longjmp(c->jmp, 1);
}

void *tt_alloc(tctx *c, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    tchunk *k = c->chunks;
    if (k && k->cap - k->used >= n) {
        void *p = k->data + k->used;
        k->used += n;
        return p;
    }
    size_t cap = n > (64u << 10) ? n : (64u << 10);
    if (n > c->mem_limit || c->mem_used + cap > c->mem_limit)
        tt_fail(c, "template memory limit exceeded (%zu MiB)", c->mem_limit >> 20);
    if (c->budget && !th_mem_budget_take(c->budget, sizeof(tchunk) + cap)) {
        c->budget_out = true;
        tt_fail(c, "memory budget exhausted: the server's renders and requests in flight hold %zu of %zu MiB",
                th_mem_budget_used(c->budget) >> 20, th_mem_budget_limit(c->budget) >> 20);
    }
    tchunk *nk = malloc(sizeof *nk + cap);
    if (!nk) {
        if (c->budget) th_mem_budget_give(c->budget, sizeof(tchunk) + cap);
        tt_fail(c, "out of memory while rendering the template");
    }
    c->mem_used += cap;
    c->budget_taken += c->budget ? sizeof(tchunk) + cap : 0;
    nk->cap = cap;
    nk->used = n;
    /* a big one-off block goes behind the current chunk so its free space stays usable */
    if (k && n > (16u << 10)) { nk->next = k->next; k->next = nk; }
    else { nk->next = k; c->chunks = nk; }
    return nk->data;
}

void tt_arena_free(tctx *c) {
    for (tchunk *k = c->chunks, *nx; k; k = nx) { nx = k->next; free(k); }
    c->chunks = NULL;
    c->mem_used = 0;
    if (c->budget) th_mem_budget_give(c->budget, c->budget_taken);
    c->budget_taken = 0;
}

char *tt_strdup(tctx *c, const char *s, size_t n) {
    char *p = tt_alloc(c, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *tt_printf(tctx *c, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
    return tt_strdup(c, tmp, (size_t)n);
}

void tt_enter(tctx *c) {
    if (++c->depth > TT_MAX_DEPTH)
        tt_fail(c, "template nesting too deep (more than %d levels of expressions, blocks or macro calls)",
                TT_MAX_DEPTH);
}
void tt_leave(tctx *c) { c->depth--; }

/* ---------------------------------------------------------------- buffers */

void tb_put(tctx *c, tbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (n > c->max_output || b->n > c->max_output - n)
        tt_fail(c, "template output exceeds the limit of %zu bytes", c->max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = tt_alloc(c, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void tb_putc(tctx *c, tbuf *b, char ch) { tb_put(c, b, &ch, 1); }
tval tb_str(tbuf *b) { return tv_str(b->p ? b->p : "", b->n); }

/* ---------------------------------------------------------------- constructors */

tval tv_undef(tctx *c, const char *fmt, ...) {
    tval v = { .k = V_UNDEF };
    if (fmt) {
        char tmp[400];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
        va_end(ap);
        if (n < 0) n = 0;
        if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
        v.u.s.p = tt_strdup(c, tmp, (size_t)n);
    }
    return v;
}
tval tv_none(void) { return (tval){ .k = V_NONE }; }
tval tv_bool(bool b) { tval v = { .k = V_BOOL }; v.u.b = b; return v; }
tval tv_int(int64_t i) { tval v = { .k = V_INT }; v.u.i = i; return v; }
tval tv_float(double f) { tval v = { .k = V_FLOAT }; v.u.f = f; return v; }
tval tv_str(const char *p, size_t n) { tval v = { .k = V_STR }; v.u.s.p = p; v.u.s.n = n; return v; }
tval tv_cstr(const char *p) { return tv_str(p, strlen(p)); }
tval tv_strdup(tctx *c, const char *p, size_t n) { return tv_str(tt_strdup(c, p, n), n); }

tval tv_list(tctx *c, size_t cap) {
    tval v = { .k = V_LIST };
    v.u.l = tt_alloc(c, sizeof(tlist));
    v.u.l->n = 0;
    v.u.l->cap = cap;
    v.u.l->is_tuple = false;
    v.u.l->is_gen = false;
    v.u.l->v = cap ? tt_alloc(c, cap * sizeof(tval)) : NULL;
    return v;
}

tval tv_dict(tctx *c, size_t cap) {
    tval v = { .k = V_DICT };
    tdict *d = tt_alloc(c, sizeof(tdict));
    memset(d, 0, sizeof *d);
    d->cap = cap;
    if (cap) { d->key = tt_alloc(c, cap * sizeof(tval)); d->val = tt_alloc(c, cap * sizeof(tval)); }
    v.u.d = d;
    return v;
}

tval tv_func(tctx *c, const char *name, tbuiltin fn, tval self) {
    tval v = { .k = V_FUNC };
    tfunc *f = tt_alloc(c, sizeof(tfunc));
    memset(f, 0, sizeof *f);
    f->name = name;
    f->builtin = fn;
    f->self = self;
    v.u.fn = f;
    return v;
}

void tl_push(tctx *c, tlist *l, tval v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        tval *nv = tt_alloc(c, cap * sizeof(tval));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(tval));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

tval *td_get(tctx *c, tdict *d, tval key) {
    for (size_t i = 0; i < d->n; i++)
        if (tv_equal(c, d->key[i], key)) return &d->val[i];
    return NULL;
}

tval *td_gets(tdict *d, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->key[i].k == V_STR && d->key[i].u.s.n == n && !memcmp(d->key[i].u.s.p, key, n))
            return &d->val[i];
    return NULL;
}

void td_set(tctx *c, tdict *d, tval key, tval val) {
    tval *old = td_get(c, d, key);
    if (old) { *old = val; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        tval *nk = tt_alloc(c, cap * sizeof(tval)), *nv = tt_alloc(c, cap * sizeof(tval));
        if (d->n) { memcpy(nk, d->key, d->n * sizeof(tval)); memcpy(nv, d->val, d->n * sizeof(tval)); }
        d->key = nk; d->val = nv; d->cap = cap;
    }
    d->key[d->n] = key;
    d->val[d->n++] = val;
}

/* ---------------------------------------------------------------- semantics */

const char *tv_type_name(tval v) {
    switch (v.k) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return "str";
    case V_LIST: return v.u.l->is_gen ? "generator" : v.u.l->is_tuple ? "tuple" : "list";
    case V_DICT: return v.u.d->is_namespace ? "Namespace" : "dict";
    case V_FUNC: return v.u.fn->macro ? "Macro" : "builtin_function_or_method";
    case V_LOOP: return "LoopContext";
    }
    return "object";
}

bool tv_truthy(tval v) {
    switch (v.k) {
    case V_UNDEF: case V_NONE: return false;
    case V_BOOL: return v.u.b;
    case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0.0;
    case V_STR: return v.u.s.n != 0;
    case V_LIST: return v.u.l->is_gen || v.u.l->n != 0;
    case V_DICT: return v.u.d->is_namespace || v.u.d->n != 0;
    default: return true;
    }
}

static bool is_num(tval v) { return v.k == V_BOOL || v.k == V_INT || v.k == V_FLOAT; }
static double num_f(tval v) { return v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t num_i(tval v) { return v.k == V_INT ? v.u.i : (int64_t)v.u.b; }

bool tv_equal(tctx *c, tval a, tval b) {
    tt_work(c, 1);
    if (is_num(a) && is_num(b)) {
        if (a.k == V_FLOAT || b.k == V_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.k != b.k) return false;
    switch (a.k) {
    case V_UNDEF: case V_NONE: return true;
    case V_STR:
        if (a.u.s.n != b.u.s.n) return false;
        tt_work(c, a.u.s.n);
        return !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case V_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!tv_equal(c, a.u.l->v[i], b.u.l->v[i])) return false;
        return true;
    case V_DICT:
        if (a.u.d->is_namespace || b.u.d->is_namespace) return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            tval *o = td_get(c, b.u.d, a.u.d->key[i]);
            if (!o || !tv_equal(c, a.u.d->val[i], *o)) return false;
        }
        return true;
    case V_FUNC: return a.u.fn == b.u.fn;
    case V_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

bool tv_str_eq(tval v, const char *s) {
    return v.k == V_STR && v.u.s.n == strlen(s) && !memcmp(v.u.s.p, s, v.u.s.n);
}

void tv_undef_fail(tctx *c, tval v) {
    tt_fail(c, "%s", v.u.s.p ? v.u.s.p : "undefined value");
}
void tv_check_defined(tctx *c, tval v) { if (v.k == V_UNDEF) tv_undef_fail(c, v); }

/* Python's repr(float): shortest round-trip digits, exponent form outside [1e-4, 1e16). */
void tv_float_repr(double f, char *buf, size_t cap) {
    if (isnan(f)) { snprintf(buf, cap, "nan"); return; }
    if (isinf(f)) { snprintf(buf, cap, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { snprintf(buf, cap, signbit(f) ? "-0.0" : "0.0"); return; }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++) if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = buf, *end = buf + cap - 1;
#define PUT(ch) do { if (o < end) *o++ = (ch); } while (0)
    if (neg) PUT('-');
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            PUT('0'); PUT('.');
            for (int i = 0; i < -exp - 1; i++) PUT('0');
            for (int i = 0; i < nd; i++) PUT(digits[i]);
        } else {
            for (int i = 0; i <= exp; i++) PUT(i < nd ? digits[i] : '0');
            PUT('.');
            if (nd > exp + 1) for (int i = exp + 1; i < nd; i++) PUT(digits[i]);
            else PUT('0');
        }
        *o = 0;
    } else {
        PUT(digits[0]);
        if (nd > 1) { PUT('.'); for (int i = 1; i < nd; i++) PUT(digits[i]); }
        *o = 0;
        size_t len = (size_t)(o - buf);
        snprintf(buf + len, cap - len, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
#undef PUT
}

static void repr_str(tctx *c, tbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    tb_putc(c, b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '\\') tb_put(c, b, "\\\\", 2);
        else if (ch == (unsigned char)q) { tb_putc(c, b, '\\'); tb_putc(c, b, q); }
        else if (ch == '\n') tb_put(c, b, "\\n", 2);
        else if (ch == '\r') tb_put(c, b, "\\r", 2);
        else if (ch == '\t') tb_put(c, b, "\\t", 2);
        else if (ch < 0x20 || ch == 0x7f) { snprintf(esc, sizeof esc, "\\x%02x", ch); tb_put(c, b, esc, 4); }
        else if (ch == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] < 0xa0) {
            snprintf(esc, sizeof esc, "\\x%02x", (unsigned char)s[i + 1]);
            tb_put(c, b, esc, 4);
            i++;
        } else tb_putc(c, b, (char)ch);
    }
    tb_putc(c, b, q);
}

static void append_seq(tctx *c, tbuf *b, tval v) {
    if (v.k == V_LIST && v.u.l->is_gen) { tb_put(c, b, "<generator object>", 18); return; }
    if (v.k == V_LIST) {
        bool t = v.u.l->is_tuple;
        tb_putc(c, b, t ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) tb_put(c, b, ", ", 2);
            tv_repr_append(c, b, v.u.l->v[i]);
        }
        if (t && v.u.l->n == 1) tb_putc(c, b, ',');
        tb_putc(c, b, t ? ')' : ']');
        return;
    }
    if (v.u.d->is_namespace) tb_put(c, b, "<Namespace ", 11);
    tb_putc(c, b, '{');
    for (size_t i = 0; i < v.u.d->n; i++) {
        if (i) tb_put(c, b, ", ", 2);
        tv_repr_append(c, b, v.u.d->key[i]);
        tb_put(c, b, ": ", 2);
        tv_repr_append(c, b, v.u.d->val[i]);
    }
    tb_putc(c, b, '}');
    if (v.u.d->is_namespace) tb_putc(c, b, '>');
}

void tv_str_append(tctx *c, tbuf *b, tval v) {
    char tmp[64];
    switch (v.k) {
    case V_UNDEF: return;
    case V_NONE: tb_put(c, b, "None", 4); return;
    case V_BOOL: if (v.u.b) tb_put(c, b, "True", 4); else tb_put(c, b, "False", 5); return;
    case V_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); tb_put(c, b, tmp, strlen(tmp)); return;
    case V_FLOAT: tv_float_repr(v.u.f, tmp, sizeof tmp); tb_put(c, b, tmp, strlen(tmp)); return;
    case V_STR: tb_put(c, b, v.u.s.p, v.u.s.n); return;
    case V_LIST: case V_DICT: append_seq(c, b, v); return;
    case V_FUNC:
        snprintf(tmp, sizeof tmp, v.u.fn->macro ? "<Macro '%.40s'>" : "<built-in %.40s>", v.u.fn->name);
        tb_put(c, b, tmp, strlen(tmp));
        return;
    case V_LOOP: tb_put(c, b, "<LoopContext>", 13); return;
    }
}

void tv_repr_append(tctx *c, tbuf *b, tval v) {
    if (v.k == V_STR) repr_str(c, b, v.u.s.p, v.u.s.n);
    else if (v.k == V_UNDEF) tb_put(c, b, "Undefined", 9);
    else tv_str_append(c, b, v);
}

tval tv_to_str(tctx *c, tval v) {
    if (v.k == V_STR) return v;
    tbuf b = { 0 };
    tv_str_append(c, &b, v);
    return tb_str(&b);
}

/* ---------------------------------------------------------------- UTF-8 */

static size_t utf8_step(const char *p, size_t n, size_t i) {
    unsigned char ch = (unsigned char)p[i];
    size_t len = ch < 0x80 ? 1 : ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc0 ? 2 : 1;
    if (i + len > n) len = n - i;
    for (size_t k = 1; k < len; k++)
        if (((unsigned char)p[i + k] & 0xc0) != 0x80) return k;
    return len;
}

size_t tv_utf8_len(const char *p, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i += utf8_step(p, n, i)) count++;
    return count;
}

size_t tv_utf8_offset(const char *p, size_t n, size_t chars) {
    size_t i = 0;
    while (chars-- && i < n) i += utf8_step(p, n, i);
    return i;
}

tlist *tv_iterate(tctx *c, tval v) {
    switch (v.k) {
    case V_UNDEF: return tv_list(c, 0).u.l;
    case V_LIST: return v.u.l;
    case V_DICT: {
        if (v.u.d->is_namespace) break;
        tlist *l = tv_list(c, v.u.d->n).u.l;
        for (size_t i = 0; i < v.u.d->n; i++) l->v[i] = v.u.d->key[i];
        l->n = v.u.d->n;
        return l;
    }
    case V_STR: {
        tlist *l = tv_list(c, 0).u.l;
        for (size_t i = 0; i < v.u.s.n;) {
            size_t s = utf8_step(v.u.s.p, v.u.s.n, i);
            tl_push(c, l, tv_str(v.u.s.p + i, s));
            i += s;
        }
        return l;
    }
    default: break;
    }
    tt_fail(c, "'%s' object is not iterable", tv_type_name(v));
}

/* ---------------------------------------------------------------- JSON */

/* cJSON keeps every number as a double; Python's json.loads makes "1" an int and
 * "1.0" a float. So the literal is read again from the source text: numbers come in
 * document order, which is the order this walk meets them. *numcur scans forward. */
static bool next_number_literal(const char **numcur, const char **lit, size_t *len) {
    const char *p = *numcur;
    if (!p) return false;
    while (*p) {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++) if (*p == '\\' && p[1]) p++;
            if (*p) p++;
            continue;
        }
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            const char *st = p;
            while (*p && strchr("0123456789+-.eE", *p)) p++;
            *lit = st;
            *len = (size_t)(p - st);
            *numcur = p;
            return true;
        }
        p++;
    }
    *numcur = p;
    return false;
}

static tval number_value(const cJSON *j, const char **numcur) {
    const char *lit;
    size_t len;
    double d = j->valuedouble;
    if (next_number_literal(numcur, &lit, &len) && len < 40) {
        bool is_float = memchr(lit, '.', len) || memchr(lit, 'e', len) || memchr(lit, 'E', len);
        if (is_float) return tv_float(d);
        char tmp[48];
        memcpy(tmp, lit, len);
        tmp[len] = 0;
        char *end;
        errno = 0;
        long long v = strtoll(tmp, &end, 10);
        if (!errno && *end == 0) return tv_int(v);
        return tv_float(d);   /* beyond int64: Python would keep the exact int */
    }
    if (d == floor(d) && fabs(d) < 9.2e18) return tv_int((int64_t)d);
    return tv_float(d);
}

tval tv_from_json(tctx *c, const void *jp, const char **numcur) {
    const cJSON *j = jp;
    tt_enter(c);
    tval r = tv_none();
    if (cJSON_IsBool(j)) r = tv_bool(cJSON_IsTrue(j));
    else if (cJSON_IsNumber(j)) r = number_value(j, numcur);
    else if (cJSON_IsString(j)) r = tv_strdup(c, j->valuestring, strlen(j->valuestring));
    else if (cJSON_IsArray(j)) {
        r = tv_list(c, 0);
        for (const cJSON *e = j->child; e; e = e->next) tl_push(c, r.u.l, tv_from_json(c, e, numcur));
    } else if (cJSON_IsObject(j)) {
        r = tv_dict(c, 0);
        for (const cJSON *e = j->child; e; e = e->next)
            td_set(c, r.u.d, tv_strdup(c, e->string, strlen(e->string)), tv_from_json(c, e, numcur));
    }
    tt_leave(c);
    return r;
}

static void json_u16(tctx *c, tbuf *b, unsigned u) {
    char tmp[16];
    snprintf(tmp, sizeof tmp, "\\u%04x", u);
    tb_put(c, b, tmp, 6);
}

static void json_str(tctx *c, tbuf *b, const char *s, size_t n, bool ascii) {
    tb_putc(c, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", ch); esc = tmp; }
            else if (ascii && ch >= 0x80) {
                size_t k = i, len = tv_utf8_offset(s + i, n - i, 1);
                uint32_t cp = len == 2 ? ch & 0x1f : len == 3 ? ch & 0x0f : len == 4 ? ch & 0x07 : 0xfffd;
                for (size_t j = 1; j < len; j++) cp = cp << 6 | ((unsigned char)s[k + j] & 0x3f);
                if (len < 2) cp = 0xfffd;
                tb_put(c, b, s + run, i - run);
                if (cp >= 0x10000) { cp -= 0x10000; json_u16(c, b, 0xd800 + (cp >> 10)); json_u16(c, b, 0xdc00 + (cp & 0x3ff)); }
                else json_u16(c, b, cp);
                i += (len ? len : 1) - 1;
                run = i + 1;
                continue;
            }
        }
        if (esc) {
            tb_put(c, b, s + run, i - run);
            tb_put(c, b, esc, strlen(esc));
            run = i + 1;
        }
    }
    tb_put(c, b, s + run, n - run);
    tb_putc(c, b, '"');
}

static void json_newline(tctx *c, tbuf *b, int indent, int level) {
    tb_putc(c, b, '\n');
    for (int i = 0; i < indent * level; i++) tb_putc(c, b, ' ');
}

static int key_cmp(tval a, tval b) {
    if (a.k != V_STR || b.k != V_STR) return a.k < b.k ? -1 : a.k > b.k;
    size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    int r = memcmp(a.u.s.p, b.u.s.p, n);
    return r ? r : a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
}

/* Order in which to write a dict's entries: as stored, or sorted by key (stable). */
static size_t *json_order(tctx *c, tdict *d, bool sort) {
    size_t *ix = tt_alloc(c, (d->n ? d->n : 1) * sizeof(size_t));
    for (size_t i = 0; i < d->n; i++) ix[i] = i;
    if (sort) {
        tt_work(c, d->n * d->n);
        for (size_t i = 1; i < d->n; i++)
            for (size_t j = i; j > 0 && key_cmp(d->key[ix[j - 1]], d->key[ix[j]]) > 0; j--) {
                size_t t = ix[j]; ix[j] = ix[j - 1]; ix[j - 1] = t;
            }
    }
    return ix;
}

static void json_key(tctx *c, tbuf *b, tval k, const tjson_opts *o) {
    if (k.k == V_STR) json_str(c, b, k.u.s.p, k.u.s.n, o->ensure_ascii);
    else if (k.k == V_NONE) tb_put(c, b, "\"null\"", 6);
    else if (k.k == V_BOOL || k.k == V_INT || k.k == V_FLOAT) {
        tbuf kb = { 0 };
        tv_to_json(c, &kb, k, o, 0);
        json_str(c, b, kb.p, kb.n, false);
    } else tt_fail(c, "keys must be str, int, float, bool or None, not %s", tv_type_name(k));
}

void tv_to_json(tctx *c, tbuf *b, tval v, const tjson_opts *o, int level) {
    char tmp[64];
    tt_enter(c);
    switch (v.k) {
    case V_NONE: tb_put(c, b, "null", 4); break;
    case V_BOOL: if (v.u.b) tb_put(c, b, "true", 4); else tb_put(c, b, "false", 5); break;
    case V_STR: json_str(c, b, v.u.s.p, v.u.s.n, o->ensure_ascii); break;
    case V_INT: case V_FLOAT:
        if (v.k == V_FLOAT && (isnan(v.u.f) || isinf(v.u.f)))
            snprintf(tmp, sizeof tmp, "%s", isnan(v.u.f) ? "NaN" : v.u.f < 0 ? "-Infinity" : "Infinity");
        else if (v.k == V_FLOAT) tv_float_repr(v.u.f, tmp, sizeof tmp);
        else snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        tb_put(c, b, tmp, strlen(tmp));
        break;
    case V_LIST: case V_DICT: {
        bool is_list = v.k == V_LIST;
        if (is_list && v.u.l->is_gen) tt_fail(c, "Object of type generator is not JSON serializable");
        if (!is_list && v.u.d->is_namespace) tt_fail(c, "Object of type Namespace is not JSON serializable");
        size_t n = is_list ? v.u.l->n : v.u.d->n;
        tb_putc(c, b, is_list ? '[' : '{');
        if (n == 0) { tb_putc(c, b, is_list ? ']' : '}'); break; }
        size_t *order = is_list ? NULL : json_order(c, v.u.d, o->sort_keys);
        for (size_t i = 0; i < n; i++) {
            if (i) tb_put(c, b, o->item_sep, strlen(o->item_sep));
            if (o->indent >= 0) json_newline(c, b, o->indent, level + 1);
            if (is_list) tv_to_json(c, b, v.u.l->v[i], o, level + 1);
            else {
                json_key(c, b, v.u.d->key[order[i]], o);
                tb_put(c, b, o->key_sep, strlen(o->key_sep));
                tv_to_json(c, b, v.u.d->val[order[i]], o, level + 1);
            }
        }
        if (o->indent >= 0) json_newline(c, b, o->indent, level);
        tb_putc(c, b, is_list ? ']' : '}');
        break;
    }
    default:
        tt_fail(c, "Object of type %s is not JSON serializable", tv_type_name(v));
    }
    tt_leave(c);
}
