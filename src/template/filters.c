/* filters.c — Jinja's built-in filters and tests used by chat templates,
 * with Hugging Face's tojson (json.dumps, ensure_ascii=False, no HTML
 * escaping), and the globals: range, namespace, dict, raise_exception and
 * strftime_now (SOURCE_DATE_EPOCH honoured, UTC then; local time otherwise). */
#include "template/chat_template.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <locale.h>
#include <time.h>

tval tt_str_strip(tctx *c, tval s, tval chars, int which);
tval tt_str_case(tctx *c, tval s, int mode);
tval tt_str_replace(tctx *c, tval s, tval old, tval new_, int64_t count);
bool tt_str_is(tval s, int kind);

static tval arg(tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw, size_t pos, const char *name, tval dflt) {
    if (pos < nargs) return args[pos];
    for (size_t i = 0; i < nkw; i++) if (!strcmp(kwn[i], name)) return kwv[i];
    return dflt;
}
#define ARG(pos, name, dflt) arg(args, nargs, kwn, kwv, nkw, pos, name, dflt)

static tval empty_str(void) { return tv_str("", 0); }
static tval as_str(tctx *c, tval v) { return tv_to_str(c, v); }

static int64_t to_int(tctx *c, tval v, int64_t dflt, bool *ok) {
    *ok = true;
    switch (v.k) {
    case V_INT: return v.u.i;
    case V_BOOL: return v.u.b;
    case V_FLOAT:
        if (isnan(v.u.f) || fabs(v.u.f) >= 9.2e18) break;
        return (int64_t)v.u.f;
    case V_STR: {
        char tmp[64];
        tval s = tt_str_strip(c, v, tv_none(), 3);
        if (s.u.s.n == 0 || s.u.s.n >= sizeof tmp) break;
        size_t k = 0;
        for (size_t i = 0; i < s.u.s.n; i++) if (s.u.s.p[i] != '_') tmp[k++] = s.u.s.p[i];
        tmp[k] = 0;
        char *end;
        long long r = strtoll(tmp, &end, 10);
        if (!*end) return r;
        double d = strtod(tmp, &end);
        if (!*end && !isnan(d) && fabs(d) < 9.2e18) return (int64_t)d;
        break;
    }
    default: break;
    }
    *ok = false;
    return dflt;
}

static size_t length_of(tctx *c, tval v) {
    switch (v.k) {
    case V_UNDEF: return 0;
    case V_STR: return tv_utf8_len(v.u.s.p, v.u.s.n);
    case V_LIST: if (v.u.l->is_gen) break; return v.u.l->n;
    case V_DICT: if (!v.u.d->is_namespace) return v.u.d->n; break;
    default: break;
    }
    tt_fail(c, "object of type '%s' has no len()", tv_type_name(v));
}

/* Jinja's attribute getter for filters: "a.b.0" -> item access per part. */
static tval get_path(tctx *c, tval v, tval path) {
    if (path.k == V_INT) return tt_getitem(c, v, path);
    if (path.k != V_STR) tt_fail(c, "attribute must be a string");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        tval key = tv_str(p, (size_t)(dot - p));
        bool digits = dot > p;
        for (const char *q = p; q < dot; q++) if (*q < '0' || *q > '9') digits = false;
        if (digits && dot - p < 18) key = tv_int(strtoll(tt_strdup(c, p, (size_t)(dot - p)), NULL, 10));
        v = tt_getitem(c, v, key);
        p = dot + 1;
    }
    return v;
}

/* HF's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
static tval do_tojson(tctx *c, tval v, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tval ind = ARG(1, "indent", tv_none());
    tval seps = ARG(2, "separators", tv_none());
    tjson_opts o = { .indent = -1, .ensure_ascii = tv_truthy(ARG(0, "ensure_ascii", tv_bool(false))),
                     .sort_keys = tv_truthy(ARG(3, "sort_keys", tv_bool(false))) };
    if (ind.k == V_INT || ind.k == V_BOOL) {
        o.indent = ind.k == V_INT ? (int)TH_MIN(TH_MAX(ind.u.i, 0), 64) : ind.u.b;
    } else if (ind.k != V_NONE && ind.k != V_UNDEF) tt_fail(c, "tojson: indent must be an integer");
    o.item_sep = o.indent >= 0 ? "," : ", ";
    o.key_sep = ": ";
    if (seps.k == V_LIST && seps.u.l->n == 2 && seps.u.l->v[0].k == V_STR && seps.u.l->v[1].k == V_STR) {
        o.item_sep = tt_strdup(c, seps.u.l->v[0].u.s.p, seps.u.l->v[0].u.s.n);
        o.key_sep = tt_strdup(c, seps.u.l->v[1].u.s.p, seps.u.l->v[1].u.s.n);
    } else if (seps.k != V_NONE && seps.k != V_UNDEF) tt_fail(c, "tojson: separators must be two strings");
    tbuf b = { 0 };
    tv_to_json(c, &b, v, &o, 0);
    return tb_str(&b);
}

static tval do_indent(tctx *c, tval s, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tval w = ARG(0, "width", tv_int(4));
    bool first = tv_truthy(ARG(1, "first", tv_bool(false))), blank = tv_truthy(ARG(2, "blank", tv_bool(false)));
    tval ind;
    if (w.k == V_STR) ind = w;
    else {
        int64_t n = w.k == V_INT ? w.u.i : 4;
        if (n < 0) n = 0;
        if ((uint64_t)n > c->max_output) tt_fail(c, "indent width too large");
        char *p = tt_alloc(c, (size_t)n + 1);
        memset(p, ' ', (size_t)n);
        ind = tv_str(p, (size_t)n);
    }
    /* lines of s + "\n", as str.splitlines() on \n, \r\n, \r */
    tbuf b = { 0 };
    if (first) tb_put(c, &b, ind.u.s.p, ind.u.s.n);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, st = 0;
    bool first_line = true;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '\n' && p[i] != '\r') continue;
        size_t len = i - st;
        if (i == n && len == 0) break;   /* the "\n" appended to s ends the last line */
        if (!first_line) {
            tb_putc(c, &b, '\n');
            if (blank || len) tb_put(c, &b, ind.u.s.p, ind.u.s.n);
        }
        tb_put(c, &b, p + st, len);
        first_line = false;
        if (i < n && p[i] == '\r' && i + 1 < n && p[i + 1] == '\n') i++;
        st = i + 1;
    }
    return b.p ? tb_str(&b) : empty_str();
}

static tval do_escape(tctx *c, tval s) {
    tbuf b = { 0 };
    for (size_t i = 0; i < s.u.s.n; i++) {
        switch (s.u.s.p[i]) {
        case '&': tb_put(c, &b, "&amp;", 5); break;
        case '<': tb_put(c, &b, "&lt;", 4); break;
        case '>': tb_put(c, &b, "&gt;", 4); break;
        case '"': tb_put(c, &b, "&#34;", 5); break;
        case '\'': tb_put(c, &b, "&#39;", 5); break;
        default: tb_putc(c, &b, s.u.s.p[i]);
        }
    }
    return b.p ? tb_str(&b) : empty_str();
}

/* select/reject/selectattr/rejectattr: args after the attribute are the test and its arguments. */
static tval do_select(tctx *c, tframe *f, tval seq, tval *args, size_t nargs, bool by_attr, bool keep) {
    tlist *items = tv_iterate(c, seq);
    size_t base = by_attr ? 1 : 0;
    if (by_attr && nargs < 1) tt_fail(c, "selectattr/rejectattr need an attribute name");
    tval out = tv_list(c, 0);
    for (size_t i = 0; i < items->n; i++) {
        tval v = by_attr ? get_path(c, items->v[i], args[0]) : items->v[i];
        bool r;
        if (nargs > base) {
            if (args[base].k != V_STR) tt_fail(c, "test name must be a string");
            r = tt_test(c, f, tt_strdup(c, args[base].u.s.p, args[base].u.s.n), v, args + base + 1, nargs - base - 1);
        } else r = tv_truthy(v);
        if (r == keep) tl_push(c, out.u.l, items->v[i]);
    }
    out.u.l->is_gen = true;
    return out;
}

static int cmp_vals(tctx *c, tval a, tval b, bool ci) {
    if (ci && a.k == V_STR && b.k == V_STR) { a = tt_str_case(c, a, 0); b = tt_str_case(c, b, 0); }
    if (tt_compare(c, '<', a, b)) return -1;
    if (tt_compare(c, '>', a, b)) return 1;
    return 0;
}

/* Stable merge sort of keys (with parallel payload) — no qsort callbacks needing globals. */
static void merge_sort(tctx *c, tval *keys, tval *vals, size_t n, bool ci, bool reverse) {
    if (n < 2) return;
    tval *tk = tt_alloc(c, n * sizeof(tval)), *tvv = tt_alloc(c, n * sizeof(tval));
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = TH_MIN(lo + width, n), hi = TH_MIN(lo + 2 * width, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int r = cmp_vals(c, keys[j], keys[i], ci);
                if (reverse) r = -r;
                if (r < 0) { tk[k] = keys[j]; tvv[k++] = vals[j++]; }
                else { tk[k] = keys[i]; tvv[k++] = vals[i++]; }
            }
            while (i < mid) { tk[k] = keys[i]; tvv[k++] = vals[i++]; }
            while (j < hi) { tk[k] = keys[j]; tvv[k++] = vals[j++]; }
        }
        memcpy(keys, tk, n * sizeof(tval));
        memcpy(vals, tvv, n * sizeof(tval));
    }
}

static tval do_sort(tctx *c, tval seq, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    bool reverse = tv_truthy(ARG(0, "reverse", tv_bool(false)));
    bool cs = tv_truthy(ARG(1, "case_sensitive", tv_bool(false)));
    tval attr = ARG(2, "attribute", tv_none());
    tlist *items = tv_iterate(c, seq);
    size_t n = items->n;
    tval out = tv_list(c, n);
    tval *keys = tt_alloc(c, (n ? n : 1) * sizeof(tval));
    for (size_t i = 0; i < n; i++) {
        out.u.l->v[i] = items->v[i];
        keys[i] = attr.k == V_NONE ? items->v[i] : get_path(c, items->v[i], attr);
    }
    out.u.l->n = n;
    merge_sort(c, keys, out.u.l->v, n, !cs, reverse);
    return out;
}

static tval minmax(tctx *c, tval seq, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw, bool want_max) {
    bool cs = tv_truthy(ARG(0, "case_sensitive", tv_bool(false)));
    tval attr = ARG(1, "attribute", tv_none());
    tlist *items = tv_iterate(c, seq);
    if (!items->n) return tv_undef(c, "No aggregated item, sequence was empty.");
    tval best = items->v[0], bk = attr.k == V_NONE ? best : get_path(c, best, attr);
    for (size_t i = 1; i < items->n; i++) {
        tval k = attr.k == V_NONE ? items->v[i] : get_path(c, items->v[i], attr);
        int r = cmp_vals(c, k, bk, !cs);
        if (want_max ? r > 0 : r < 0) { best = items->v[i]; bk = k; }
    }
    return best;
}

tval tt_filter(tctx *c, tframe *f, const char *name, tval v, tval *args, size_t nargs,
               const char **kwn, tval *kwv, size_t nkw) {
    tval none = tv_none();
    tt_work(c, v.k == V_STR ? v.u.s.n : v.k == V_LIST ? v.u.l->n : 1);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        bool boolean = tv_truthy(ARG(1, "boolean", tv_bool(false)));
        if (v.k == V_UNDEF || (boolean && !tv_truthy(v))) return ARG(0, "default_value", empty_str());
        return v;
    }
    if (!strcmp(name, "tojson")) return do_tojson(c, v, args, nargs, kwn, kwv, nkw);
    if (!strcmp(name, "safe") || !strcmp(name, "list") || !strcmp(name, "string") || !strcmp(name, "items")) {
        if (name[0] == 's' && name[1] == 'a') return as_str(c, v);  /* Markup(value) is a str */
        if (name[0] == 's') return as_str(c, v);
        if (name[0] == 'l') {
            tlist *l = tv_iterate(c, v);
            tval out = tv_list(c, l->n);
            if (l->n) memcpy(out.u.l->v, l->v, l->n * sizeof(tval));
            out.u.l->n = l->n;
            return out;
        }
        if (v.k == V_UNDEF) return tv_list(c, 0);
        if (v.k != V_DICT || v.u.d->is_namespace) tt_fail(c, "Can only get item pairs from a mapping.");
        bool found;
        tval r = tt_call(c, f, tt_method(c, v, "items", &found), NULL, 0, NULL, NULL, 0);
        r.u.l->is_gen = true;
        return r;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return tv_int((int64_t)length_of(c, v));
    if (!strcmp(name, "trim")) return tt_str_strip(c, as_str(c, v), ARG(0, "chars", none), 3);
    if (!strcmp(name, "upper")) return tt_str_case(c, as_str(c, v), 1);
    if (!strcmp(name, "lower")) return tt_str_case(c, as_str(c, v), 0);
    if (!strcmp(name, "capitalize")) return tt_str_case(c, as_str(c, v), 2);
    if (!strcmp(name, "title")) return tt_str_case(c, as_str(c, v), 3);
    if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) return do_escape(c, as_str(c, v));
    if (!strcmp(name, "indent")) {
        tv_check_defined(c, v);
        if (v.k != V_STR) tt_fail(c, "unsupported operand type(s) for +=: '%s' and 'str'", tv_type_name(v));
        return do_indent(c, v, args, nargs, kwn, kwv, nkw);
    }
    if (!strcmp(name, "replace")) {
        if (nargs < 2) tt_fail(c, "replace filter needs old and new strings");
        tval cnt = ARG(2, "count", none);
        return tt_str_replace(c, as_str(c, v), as_str(c, args[0]), as_str(c, args[1]),
                              cnt.k == V_INT ? cnt.u.i : -1);
    }
    if (!strcmp(name, "join")) {
        tval sep = ARG(0, "d", empty_str()), attr = ARG(1, "attribute", none);
        tlist *l = tv_iterate(c, v);
        tbuf b = { 0 };
        for (size_t i = 0; i < l->n; i++) {
            if (i) tv_str_append(c, &b, sep);
            tv_str_append(c, &b, attr.k == V_NONE ? l->v[i] : get_path(c, l->v[i], attr));
        }
        return b.p ? tb_str(&b) : empty_str();
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        if (name[0] == 'l' && v.k == V_LIST && v.u.l->is_gen) tt_fail(c, "'generator' object is not reversible");
        tlist *l = tv_iterate(c, v);
        if (!l->n) return tv_undef(c, "No %s item, sequence was empty.", name);
        return name[0] == 'f' ? l->v[0] : l->v[l->n - 1];
    }
    if (!strcmp(name, "int")) {
        bool ok;
        tval d = ARG(0, "default", tv_int(0));
        int64_t r = to_int(c, v, 0, &ok);
        return ok ? tv_int(r) : d;
    }
    if (!strcmp(name, "float")) {
        if (v.k == V_FLOAT) return v;
        if (v.k == V_INT || v.k == V_BOOL) return tv_float(v.k == V_INT ? (double)v.u.i : v.u.b);
        if (v.k == V_STR) {
            char *s = tt_strdup(c, v.u.s.p, v.u.s.n), *end;
            double d = strtod(s, &end);
            while (*end == ' ' || *end == '\t' || *end == '\n') end++;
            if (end != s && !*end) return tv_float(d);
        }
        return ARG(0, "default", tv_float(0.0));
    }
    if (!strcmp(name, "abs")) {
        if (v.k == V_INT) { if (v.u.i == INT64_MIN) tt_fail(c, "integer overflow in abs"); return tv_int(v.u.i < 0 ? -v.u.i : v.u.i); }
        if (v.k == V_FLOAT) return tv_float(fabs(v.u.f));
        if (v.k == V_BOOL) return tv_int(v.u.b);
        tt_fail(c, "bad operand type for abs(): '%s'", tv_type_name(v));
    }
    if (!strcmp(name, "round")) {
        tval pr = ARG(0, "precision", tv_int(0)), method = ARG(1, "method", tv_cstr("common"));
        if (v.k == V_INT || v.k == V_BOOL) {  /* round(int, n) stays an int */
            int64_t p = pr.k == V_INT ? pr.u.i : 0, i = v.k == V_INT ? v.u.i : v.u.b;
            if (p >= 0 || !tv_str_eq(method, "common")) return tv_int(i);
        }
        double x = v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : v.k == V_BOOL ? v.u.b : NAN;
        if (isnan(x) && v.k != V_FLOAT) tt_fail(c, "round: a number is required, not %s", tv_type_name(v));
        int64_t prec = pr.k == V_INT ? TH_MIN(TH_MAX(pr.u.i, -300), 300) : 0;
        if (tv_str_eq(method, "common")) {
            if (prec >= 0) { /* Python round(): correctly rounded, ties to even */
                char tmp[400];
                snprintf(tmp, sizeof tmp, "%.*f", (int)TH_MIN(prec, 60), x);
                return tv_float(strtod(tmp, NULL));
            }
            double m = pow(10, (double)-prec);
            return tv_float(nearbyint(x / m) * m);
        }
        double m = pow(10, (double)prec), y = x * m;
        if (tv_str_eq(method, "ceil")) y = ceil(y);
        else if (tv_str_eq(method, "floor")) y = floor(y);
        else tt_fail(c, "method must be common, ceil or floor");
        return tv_float(y / m);
    }
    if (!strcmp(name, "center")) {
        tval s = as_str(c, v), w = ARG(0, "width", tv_int(80));
        size_t len = tv_utf8_len(s.u.s.p, s.u.s.n);
        int64_t width = w.k == V_INT ? w.u.i : 80;
        if (width <= (int64_t)len) return s;
        if ((uint64_t)width > c->max_output) tt_fail(c, "center width too large");
        size_t pad = (size_t)width - len, left = pad / 2 + (pad & (size_t)width & 1);
        tbuf b = { 0 };
        for (size_t i = 0; i < left; i++) tb_putc(c, &b, ' ');
        tb_put(c, &b, s.u.s.p, s.u.s.n);
        for (size_t i = left; i < pad; i++) tb_putc(c, &b, ' ');
        return tb_str(&b);
    }
    if (!strcmp(name, "select") || !strcmp(name, "reject")) return do_select(c, f, v, args, nargs, false, name[0] == 's');
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) return do_select(c, f, v, args, nargs, true, name[0] == 's');
    if (!strcmp(name, "map")) {
        tlist *l = tv_iterate(c, v);
        tval out = tv_list(c, l->n);
        tval attr = ARG(99, "attribute", none), dflt = ARG(99, "default", tv_undef(c, NULL));
        if (attr.k == V_NONE && (nargs < 1 || args[0].k != V_STR)) tt_fail(c, "map: needs a filter name or attribute=");
        for (size_t i = 0; i < l->n; i++) {
            tval r;
            if (attr.k != V_NONE) {
                r = get_path(c, l->v[i], attr);
                if (r.k == V_UNDEF && dflt.k != V_UNDEF) r = dflt;
            } else r = tt_filter(c, f, tt_strdup(c, args[0].u.s.p, args[0].u.s.n), l->v[i], args + 1, nargs - 1, NULL, NULL, 0);
            out.u.l->v[i] = r;
        }
        out.u.l->n = l->n;
        out.u.l->is_gen = true;
        return out;
    }
    if (!strcmp(name, "unique")) {
        tlist *l = tv_iterate(c, v);
        tval out = tv_list(c, 0);
        for (size_t i = 0; i < l->n; i++) {
            bool seen = false;
            for (size_t j = 0; j < out.u.l->n && !seen; j++) seen = tv_equal(c, out.u.l->v[j], l->v[i]);
            if (!seen) tl_push(c, out.u.l, l->v[i]);
        }
        out.u.l->is_gen = true;
        return out;
    }
    if (!strcmp(name, "reverse")) {
        if (v.k == V_STR) {
            tlist *l = tv_iterate(c, v);
            tbuf b = { 0 };
            for (size_t i = l->n; i-- > 0;) tb_put(c, &b, l->v[i].u.s.p, l->v[i].u.s.n);
            return b.p ? tb_str(&b) : empty_str();
        }
        tlist *l = tv_iterate(c, v);
        tval out = tv_list(c, l->n);
        for (size_t i = 0; i < l->n; i++) out.u.l->v[i] = l->v[l->n - 1 - i];
        out.u.l->n = l->n;
        return out;
    }
    if (!strcmp(name, "sort")) return do_sort(c, v, args, nargs, kwn, kwv, nkw);
    if (!strcmp(name, "dictsort")) {
        if (v.k != V_DICT) tt_fail(c, "dictsort: a mapping is required");
        bool found;
        tval items = tt_call(c, f, tt_method(c, v, "items", &found), NULL, 0, NULL, NULL, 0);
        bool cs = tv_truthy(ARG(0, "case_sensitive", tv_bool(false)));
        bool by_value = tv_str_eq(ARG(1, "by", tv_cstr("key")), "value");
        bool reverse = tv_truthy(ARG(2, "reverse", tv_bool(false)));
        size_t n = items.u.l->n;
        tval *keys = tt_alloc(c, (n ? n : 1) * sizeof(tval));
        for (size_t i = 0; i < n; i++) keys[i] = items.u.l->v[i].u.l->v[by_value ? 1 : 0];
        merge_sort(c, keys, items.u.l->v, n, !cs, reverse);
        return items;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) return minmax(c, v, args, nargs, kwn, kwv, nkw, name[1] == 'a');
    if (!strcmp(name, "sum")) {
        tval attr = ARG(0, "attribute", none), acc = ARG(1, "start", tv_int(0));
        tlist *l = tv_iterate(c, v);
        for (size_t i = 0; i < l->n; i++)
            acc = tt_binop(c, '+', acc, attr.k == V_NONE ? l->v[i] : get_path(c, l->v[i], attr));
        return acc;
    }
    if (!strcmp(name, "wordcount")) {
        tval words = tv_list(c, 0);
        tval s = as_str(c, v);
        int64_t k = 0;
        bool in = false;
        for (size_t i = 0; i < s.u.s.n; i++) {
            unsigned char ch = (unsigned char)s.u.s.p[i];
            bool w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
            if (w && !in) k++;
            in = w;
        }
        (void)words;
        return tv_int(k);
    }
    if (!strcmp(name, "format")) {
        if (nkw) tt_fail(c, "format filter: keyword arguments are not supported");
        tval tuple = tv_list(c, nargs);
        for (size_t i = 0; i < nargs; i++) tuple.u.l->v[i] = args[i];
        tuple.u.l->n = nargs;
        return tt_binop(c, '%', as_str(c, v), tuple);
    }
    if (!strcmp(name, "attr")) {
        if (nargs < 1 || args[0].k != V_STR) tt_fail(c, "attr filter needs an attribute name");
        return tt_getattr(c, v, tt_strdup(c, args[0].u.s.p, args[0].u.s.n));
    }
    tt_fail(c, "No filter named '%s'.", name);
}

/* ---------------------------------------------------------------- tests */

bool tt_test(tctx *c, tframe *f, const char *name, tval v, tval *args, size_t nargs) {
    tval a0 = nargs ? args[0] : tv_undef(c, "test '%s' needs an argument", name);
    if (!strcmp(name, "defined")) return v.k != V_UNDEF;
    if (!strcmp(name, "undefined")) return v.k == V_UNDEF;
    if (!strcmp(name, "none")) return v.k == V_NONE;
    if (!strcmp(name, "boolean")) return v.k == V_BOOL;
    if (!strcmp(name, "false")) return v.k == V_BOOL && !v.u.b;
    if (!strcmp(name, "true")) return v.k == V_BOOL && v.u.b;
    if (!strcmp(name, "integer")) return v.k == V_INT;
    if (!strcmp(name, "float")) return v.k == V_FLOAT;
    if (!strcmp(name, "number")) return v.k == V_INT || v.k == V_FLOAT || v.k == V_BOOL;
    if (!strcmp(name, "string")) return v.k == V_STR;
    if (!strcmp(name, "mapping")) return v.k == V_DICT && !v.u.d->is_namespace;
    if (!strcmp(name, "iterable")) return v.k == V_UNDEF || v.k == V_STR || v.k == V_LIST || (v.k == V_DICT && !v.u.d->is_namespace);
    if (!strcmp(name, "sequence")) return v.k == V_STR || (v.k == V_LIST && !v.u.l->is_gen) || (v.k == V_DICT && !v.u.d->is_namespace);
    if (!strcmp(name, "callable")) return v.k == V_FUNC || v.k == V_UNDEF; /* Undefined has __call__ */
    if (!strcmp(name, "sameas")) {
        if (v.k != a0.k) return false;
        if (v.k == V_NONE || v.k == V_BOOL) return tv_equal(c, v, a0);
        if (v.k == V_LIST) return v.u.l == a0.u.l;
        if (v.k == V_DICT) return v.u.d == a0.u.d;
        return tv_equal(c, v, a0);
    }
    static const struct { const char *n; int op; } cmp[] = {
        { "equalto", OP2('=', '=') }, { "eq", OP2('=', '=') }, { "==", OP2('=', '=') },
        { "ne", OP2('!', '=') }, { "!=", OP2('!', '=') },
        { "lt", '<' }, { "lessthan", '<' }, { "<", '<' }, { "le", OP2('<', '=') }, { "<=", OP2('<', '=') },
        { "gt", '>' }, { "greaterthan", '>' }, { ">", '>' }, { "ge", OP2('>', '=') }, { ">=", OP2('>', '=') },
        { "in", 'i' } };
    for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++)
        if (!strcmp(name, cmp[i].n)) return tt_compare(c, cmp[i].op, v, a0);
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        /* value % 2 == 1, value % 2 == 0, value % num == 0, with Python's % */
        tval m = tt_binop(c, '%', v, name[0] == 'd' ? a0 : tv_int(2));
        return tv_equal(c, m, tv_int(name[0] == 'o' ? 1 : 0));
    }    if (!strcmp(name, "lower") || !strcmp(name, "upper")) /* str(value).islower() / .isupper() */
        return tt_str_is(as_str(c, v), name[0] == 'l' ? 'l' : 'u');
    if (!strcmp(name, "escaped")) return false;
    tt_fail(c, "No test named '%s'.", name);
}

/* ---------------------------------------------------------------- globals */

static tval g_range(tctx *c, tval self, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    int64_t a[3];
    if (nargs < 1 || nargs > 3) tt_fail(c, "range expected 1 to 3 arguments, got %zu", nargs);
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].k != V_INT && args[i].k != V_BOOL)
            tt_fail(c, "'%s' object cannot be interpreted as an integer", tv_type_name(args[i]));
        a[i] = args[i].k == V_INT ? args[i].u.i : args[i].u.b;
    }
    int64_t start = nargs == 1 ? 0 : a[0], stop = nargs == 1 ? a[0] : a[1], step = nargs == 3 ? a[2] : 1;
    if (step == 0) tt_fail(c, "range() arg 3 must not be zero");
    double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                            : ceil(((double)start - (double)stop) / -(double)step);
    if (count < 0) count = 0;
    if (count > TT_MAX_LOOP_ITERS)
        tt_fail(c, "range() of %.0f items exceeds the template loop limit of %d", count, TT_MAX_LOOP_ITERS);
    tval out = tv_list(c, (size_t)count);
    int64_t x = start;
    for (size_t i = 0; i < (size_t)count; i++, x += step) out.u.l->v[i] = tv_int(x);
    out.u.l->n = (size_t)count;
    return out;
}

static tval g_namespace(tctx *c, tval self, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tval d = tv_dict(c, nkw);
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].k != V_DICT) tt_fail(c, "namespace() positional argument must be a dict");
        for (size_t k = 0; k < args[i].u.d->n; k++) td_set(c, d.u.d, args[i].u.d->key[k], args[i].u.d->val[k]);
    }
    for (size_t i = 0; i < nkw; i++) td_set(c, d.u.d, tv_cstr(kwn[i]), kwv[i]);
    d.u.d->is_namespace = self.k == V_BOOL;
    return d;
}

static tval g_raise(tctx *c, tval self, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tbuf b = { 0 };
    if (nargs) tv_str_append(c, &b, args[0]);
    c->raised = true;
    tt_fail(c, "%s", b.p ? b.p : "");
}

static tval g_strftime(tctx *c, tval self, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    if (nargs != 1 || args[0].k != V_STR) tt_fail(c, "strftime_now() takes one format string");
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    time_t t;
    struct tm tm;
    if (epoch && *epoch) {
        char *end;
        long long e = strtoll(epoch, &end, 10);
        if (*end) tt_fail(c, "SOURCE_DATE_EPOCH is not an integer: '%s'", epoch);
        t = (time_t)e;
        gmtime_r(&t, &tm);
    } else {
        t = time(NULL);
        localtime_r(&t, &tm);
    }
    const char *fmt = tt_strdup(c, args[0].u.s.p, args[0].u.s.n);
    char buf[512];
    /* month and day names in English whatever locale the host program set */
    locale_t cl = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    size_t n = cl ? strftime_l(buf, sizeof buf, fmt, &tm, cl) : strftime(buf, sizeof buf, fmt, &tm);
    if (cl) freelocale(cl);
    if (n == 0 && args[0].u.s.n) tt_fail(c, "strftime_now(): format too long or empty result");
    return tv_strdup(c, buf, n);
}

void tt_install_globals(tctx *c, tframe *g) {
    tt_frame_set(c, g, "range", tv_func(c, "range", g_range, tv_none()));
    tt_frame_set(c, g, "namespace", tv_func(c, "namespace", g_namespace, tv_bool(true)));
    tt_frame_set(c, g, "dict", tv_func(c, "dict", g_namespace, tv_none()));
    tt_frame_set(c, g, "raise_exception", tv_func(c, "raise_exception", g_raise, tv_none()));
    tt_frame_set(c, g, "strftime_now", tv_func(c, "strftime_now", g_strftime, tv_none()));
}
