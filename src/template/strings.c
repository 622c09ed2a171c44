/* strings.c — Python str semantics the templates rely on, on UTF-8 text:
 * methods (strip/lstrip/rstrip, split, startswith/endswith, replace, upper/
 * lower/title/capitalize via utf8proc, find, count, join, format, is*),
 * "%" formatting, and the dict / list / loop methods (items, keys, values,
 * get, index, count, cycle). tt_method() resolves obj.name to a bound method. */
#include "template/chat_template.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

/* ---------------------------------------------------------------- helpers */

static int32_t next_cp(const char *p, size_t n, size_t *i) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p + *i, (utf8proc_ssize_t)(n - *i), &cp);
    if (k <= 0) { cp = (unsigned char)p[*i]; k = 1; }
    *i += (size_t)k;
    return cp;
}

static void put_cp(tctx *c, tbuf *b, int32_t cp) {
    utf8proc_uint8_t u[4];
    utf8proc_ssize_t k = utf8proc_encode_char(cp, u);
    tb_put(c, b, (const char *)u, (size_t)k);
}

static bool py_space(int32_t cp) {
    return cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

static bool in_chars(int32_t cp, tval chars) {
    if (chars.k != V_STR) return py_space(cp);
    for (size_t i = 0; i < chars.u.s.n;)
        if (next_cp(chars.u.s.p, chars.u.s.n, &i) == cp) return true;
    return false;
}

/* Python str.strip family: which = 1 left, 2 right, 3 both. */
tval tt_str_strip(tctx *c, tval s, tval chars, int which) {
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, a = 0, b = n;
    if (chars.k != V_NONE && chars.k != V_UNDEF && chars.k != V_STR)
        tt_fail(c, "strip arg must be None or str");
    if (which & 1)
        while (a < b) { size_t i = a; if (!in_chars(next_cp(p, n, &i), chars)) break; a = i; }
    if (which & 2)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)p[st] & 0xc0) == 0x80) st--;
            size_t i = st;
            if (!in_chars(next_cp(p, n, &i), chars)) break;
            b = st;
        }
    return tv_str(p + a, b - a);
}

static tval map_case(tctx *c, tval s, int mode) { /* 0 lower, 1 upper, 2 capitalize, 3 title */
    tbuf b = { 0 };
    bool word_start = true;
    for (size_t i = 0; i < s.u.s.n;) {
        int32_t cp = next_cp(s.u.s.p, s.u.s.n, &i);
        int32_t o = cp;
        if (mode == 0) o = utf8proc_tolower(cp);
        else if (mode == 1) o = utf8proc_toupper(cp);
        else if (mode == 2) o = word_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
        else {
            bool sep = cp == '-' || py_space(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            o = sep ? cp : word_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            word_start = sep;
            put_cp(c, &b, o);
            continue;
        }
        word_start = false;
        put_cp(c, &b, o);
    }
    return b.p ? tb_str(&b) : tv_str("", 0);
}

tval tt_str_case(tctx *c, tval s, int mode) { return map_case(c, s, mode); }

tval tt_str_replace(tctx *c, tval s, tval old, tval new_, int64_t count) {
    if (old.k != V_STR || new_.k != V_STR) tt_fail(c, "replace() arguments must be str");
    tbuf b = { 0 };
    const char *p = s.u.s.p, *end = p + s.u.s.n;
    if (old.u.s.n == 0) {
        size_t i = 0;
        int64_t done = 0;
        while (true) {
            if (count < 0 || done < count) { tb_put(c, &b, new_.u.s.p, new_.u.s.n); done++; }
            if (i >= s.u.s.n) break;
            size_t st = i;
            next_cp(p, s.u.s.n, &i);
            tb_put(c, &b, p + st, i - st);
        }
        return b.p ? tb_str(&b) : tv_str("", 0);
    }
    int64_t done = 0;
    while (p < end) {
        const char *hit = (count < 0 || done < count) ? memmem(p, (size_t)(end - p), old.u.s.p, old.u.s.n) : NULL;
        if (!hit) { tb_put(c, &b, p, (size_t)(end - p)); break; }
        tb_put(c, &b, p, (size_t)(hit - p));
        tb_put(c, &b, new_.u.s.p, new_.u.s.n);
        p = hit + old.u.s.n;
        done++;
    }
    return b.p ? tb_str(&b) : tv_str("", 0);
}

static tval str_split(tctx *c, tval s, tval sep, int64_t maxsplit) {
    tval out = tv_list(c, 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (sep.k == V_NONE || sep.k == V_UNDEF) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            while (i < n) { size_t k = i; if (!py_space(next_cp(p, n, &k))) break; i = k; }
            if (i >= n) break;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t e = n;  /* rest, with trailing whitespace removed */
                tval rest = tt_str_strip(c, tv_str(p + i, e - i), tv_none(), 2);
                tl_push(c, out.u.l, rest);
                break;
            }
            size_t st = i;
            while (i < n) { size_t k = i; if (py_space(next_cp(p, n, &k))) break; i = k; }
            tl_push(c, out.u.l, tv_str(p + st, i - st));
            done++;
        }
        return out;
    }
    if (sep.k != V_STR) tt_fail(c, "must be str or None, not %s", tv_type_name(sep));
    if (sep.u.s.n == 0) tt_fail(c, "empty separator");
    const char *q = p, *end = p + n;
    int64_t done = 0;
    for (;;) {
        const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(q, (size_t)(end - q), sep.u.s.p, sep.u.s.n) : NULL;
        if (!hit) { tl_push(c, out.u.l, tv_str(q, (size_t)(end - q))); break; }
        tl_push(c, out.u.l, tv_str(q, (size_t)(hit - q)));
        q = hit + sep.u.s.n;
        done++;
    }
    return out;
}

static bool affix(tctx *c, tval s, tval fix, bool start) {
    if (fix.k == V_LIST) {
        for (size_t i = 0; i < fix.u.l->n; i++) if (affix(c, s, fix.u.l->v[i], start)) return true;
        return false;
    }
    if (fix.k != V_STR)
        tt_fail(c, "%s first arg must be str or a tuple of str, not %s", start ? "startswith" : "endswith",
                tv_type_name(fix));
    if (fix.u.s.n > s.u.s.n) return false;
    return !memcmp(s.u.s.p + (start ? 0 : s.u.s.n - fix.u.s.n), fix.u.s.p, fix.u.s.n);
}

/* ---------------------------------------------------------------- "%" and format() */

/* One %-conversion with its flags/width/precision spec (e.g. "-5.2"), like Python's. */
static void format_one(tctx *c, tbuf *b, const char *spec, size_t spec_n, char conv, tval v) {
    char fmt[40], tmp[1200];
    if (conv == 's' || conv == 'r') {
        tbuf s = { 0 };
        if (conv == 's') tv_str_append(c, &s, v); else tv_repr_append(c, &s, v);
        if (!spec_n) { if (s.n) tb_put(c, b, s.p, s.n); return; }
        snprintf(fmt, sizeof fmt, "%%%.*ss", (int)spec_n, spec);
        int n = snprintf(tmp, sizeof tmp, fmt, s.p ? s.p : "");
        if (n < 0 || (size_t)n >= sizeof tmp) tt_fail(c, "%%-format result too long");
        tb_put(c, b, tmp, (size_t)n);
        return;
    }
    if (v.k != V_INT && v.k != V_FLOAT && v.k != V_BOOL)
        tt_fail(c, "%%%c format: a real number is required, not %s", conv, tv_type_name(v));
    double f = v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : v.u.b;
    int n;
    if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
        long long i = v.k == V_FLOAT ? (long long)(f < 0 ? ceil(f) : floor(f)) : v.k == V_INT ? v.u.i : v.u.b;
        if (v.k == V_FLOAT && (conv != 'd' && conv != 'i')) tt_fail(c, "%%%c format: an integer is required, not float", conv);
        snprintf(fmt, sizeof fmt, "%%%.*sll%c", (int)spec_n, spec, conv == 'i' ? 'd' : conv);
        n = snprintf(tmp, sizeof tmp, fmt, i);
    } else {
        snprintf(fmt, sizeof fmt, "%%%.*s%c", (int)spec_n, spec, conv);
        n = snprintf(tmp, sizeof tmp, fmt, f);
    }
    if (n < 0 || (size_t)n >= sizeof tmp) tt_fail(c, "%%-format result too long");
    tb_put(c, b, tmp, (size_t)n);
}

tval tt_percent_format(tctx *c, tval fmt, tval args) {
    tbuf b = { 0 };
    size_t ai = 0;
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    bool tuple = args.k == V_LIST;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { tb_putc(c, &b, p[i]); continue; }
        if (++i >= n) tt_fail(c, "incomplete format");
        if (p[i] == '%') { tb_putc(c, &b, '%'); continue; }
        size_t spec = i;  /* flags, width (<= 3 digits), .precision (<= 2 digits) */
        while (i < n && strchr("-+ #0", p[i]) && i - spec < 5) i++;
        for (int k = 0; k < 3 && i < n && p[i] >= '0' && p[i] <= '9'; k++) i++;
        if (i < n && p[i] == '.') { i++; for (int k = 0; k < 2 && i < n && p[i] >= '0' && p[i] <= '9'; k++) i++; }
        if (i >= n) tt_fail(c, "incomplete format");
        char conv = p[i];
        if (!strchr("srdifFeEgGxXo", conv)) tt_fail(c, "unsupported format character '%c'", conv);
        tval v;
        if (tuple) {
            if (ai >= args.u.l->n) tt_fail(c, "not enough arguments for format string");
            v = args.u.l->v[ai++];
        } else {
            if (ai++) tt_fail(c, "not enough arguments for format string");
            v = args;
        }
        format_one(c, &b, p + spec, i - spec, conv, v);
    }
    if ((tuple && ai < args.u.l->n) || (!tuple && ai == 0 && args.k != V_DICT))
        tt_fail(c, "not all arguments converted during string formatting");
    return b.p ? tb_str(&b) : tv_str("", 0);
}

static tval str_format(tctx *c, tval fmt, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tbuf b = { 0 };
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n, auto_i = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') { tb_putc(c, &b, '}'); i++; continue; }
        if (p[i] != '{') { tb_putc(c, &b, p[i]); continue; }
        if (i + 1 < n && p[i + 1] == '{') { tb_putc(c, &b, '{'); i++; continue; }
        size_t e = i + 1;
        while (e < n && p[e] != '}' && p[e] != ':' && p[e] != '!') e++;
        size_t close = e;
        while (close < n && p[close] != '}') close++;
        if (close >= n) tt_fail(c, "Single '{' encountered in format string");
        tval v;
        if (e == i + 1) {
            if (auto_i >= nargs) tt_fail(c, "Replacement index %zu out of range for positional args tuple", auto_i);
            v = args[auto_i++];
        } else if (p[i + 1] >= '0' && p[i + 1] <= '9') {
            size_t k = (size_t)strtoul(p + i + 1, NULL, 10);
            if (k >= nargs) tt_fail(c, "Replacement index %zu out of range for positional args tuple", k);
            v = args[k];
        } else {
            size_t kn = e - i - 1, k;
            for (k = 0; k < nkw; k++) if (strlen(kwn[k]) == kn && !memcmp(kwn[k], p + i + 1, kn)) break;
            if (k == nkw) tt_fail(c, "KeyError: '%.*s'", (int)kn, p + i + 1);
            v = kwv[k];
        }
        if (e < n && p[e] == '!' && e + 1 < n && p[e + 1] == 'r') tv_repr_append(c, &b, v);
        else tv_str_append(c, &b, v);
        i = close;
    }
    return b.p ? tb_str(&b) : tv_str("", 0);
}

/* ---------------------------------------------------------------- bound methods */

static tval arg(tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw, size_t pos, const char *name, tval dflt) {
    if (pos < nargs) return args[pos];
    for (size_t i = 0; i < nkw; i++) if (!strcmp(kwn[i], name)) return kwv[i];
    return dflt;
}
#define ARG(pos, name, dflt) arg(args, nargs, kwn, kwv, nkw, pos, name, dflt)

static int64_t int_arg(tctx *c, tval v, int64_t dflt) {
    if (v.k == V_NONE || v.k == V_UNDEF) return dflt;
    if (v.k == V_BOOL) return v.u.b;
    if (v.k != V_INT) tt_fail(c, "'%s' object cannot be interpreted as an integer", tv_type_name(v));
    return v.u.i;
}

bool tt_str_is(tval s, int kind) {
    if (s.u.s.n == 0) return false;
    bool cased = false;
    for (size_t i = 0; i < s.u.s.n;) {
        int32_t cp = next_cp(s.u.s.p, s.u.s.n, &i);
        utf8proc_category_t cat = utf8proc_category(cp);
        bool letter = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        bool digit = cat == UTF8PROC_CATEGORY_ND;
        switch (kind) {
        case 'd': if (!digit) return false; break;
        case 'a': if (!letter) return false; break;
        case 'n': if (!letter && !digit && cat != UTF8PROC_CATEGORY_NL && cat != UTF8PROC_CATEGORY_NO) return false; break;
        case 's': if (!py_space(cp)) return false; break;
        case 'u': if (utf8proc_tolower(cp) != cp) cased = true; else if (utf8proc_toupper(cp) != cp) return false; break;
        case 'l': if (utf8proc_toupper(cp) != cp) cased = true; else if (utf8proc_tolower(cp) != cp) return false; break;
        }
    }
    return (kind == 'u' || kind == 'l') ? cased : true;
}

static tval find_sub(tval s, tval sub, bool reverse) {
    if (sub.u.s.n > s.u.s.n) return tv_int(-1);
    const char *hit = NULL;
    if (!reverse) hit = memmem(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n);
    else
        for (size_t i = s.u.s.n - sub.u.s.n + 1; i-- > 0;)
            if (!memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n)) { hit = s.u.s.p + i; break; }
    if (!hit) return tv_int(-1);
    return tv_int((int64_t)tv_utf8_len(s.u.s.p, (size_t)(hit - s.u.s.p)));
}

static tval m_str(tctx *c, tval self, const char *name, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tval none = tv_none();
    if (!strcmp(name, "strip")) return tt_str_strip(c, self, ARG(0, "chars", none), 3);
    if (!strcmp(name, "lstrip")) return tt_str_strip(c, self, ARG(0, "chars", none), 1);
    if (!strcmp(name, "rstrip")) return tt_str_strip(c, self, ARG(0, "chars", none), 2);
    if (!strcmp(name, "split")) return str_split(c, self, ARG(0, "sep", none), int_arg(c, ARG(1, "maxsplit", none), -1));
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        if (nargs < 1) tt_fail(c, "%s() takes at least 1 argument (0 given)", name);
        return tv_bool(affix(c, self, args[0], name[0] == 's'));
    }
    if (!strcmp(name, "upper")) return map_case(c, self, 1);
    if (!strcmp(name, "lower")) return map_case(c, self, 0);
    if (!strcmp(name, "capitalize")) return map_case(c, self, 2);
    if (!strcmp(name, "title")) return map_case(c, self, 3);
    if (!strcmp(name, "replace")) {
        if (nargs < 2) tt_fail(c, "replace expected at least 2 arguments, got %zu", nargs);
        return tt_str_replace(c, self, args[0], args[1], int_arg(c, ARG(2, "count", none), -1));
    }
    if (!strcmp(name, "format")) return str_format(c, self, args, nargs, kwn, kwv, nkw);
    if (!strcmp(name, "join")) {
        if (nargs != 1) tt_fail(c, "join() takes exactly one argument (%zu given)", nargs);
        tlist *l = tv_iterate(c, args[0]);
        tbuf b = { 0 };
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].k != V_STR) tt_fail(c, "sequence item %zu: expected str instance, %s found", i, tv_type_name(l->v[i]));
            if (i) tb_put(c, &b, self.u.s.p, self.u.s.n);
            tb_put(c, &b, l->v[i].u.s.p, l->v[i].u.s.n);
        }
        return b.p ? tb_str(&b) : tv_str("", 0);
    }
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
        if (nargs < 1 || args[0].k != V_STR) tt_fail(c, "%s() needs a str argument", name);
        if (!strcmp(name, "count")) {
            if (args[0].u.s.n == 0) return tv_int((int64_t)tv_utf8_len(self.u.s.p, self.u.s.n) + 1);
            int64_t k = 0;
            const char *p = self.u.s.p, *end = p + self.u.s.n;
            while ((p = memmem(p, (size_t)(end - p), args[0].u.s.p, args[0].u.s.n))) { k++; p += args[0].u.s.n; }
            return tv_int(k);
        }
        tval r = find_sub(self, args[0], name[0] == 'r');
        if (name[0] == 'i' && r.u.i < 0) tt_fail(c, "substring not found");
        return r;
    }
    if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
        if (nargs != 1 || args[0].k != V_STR) tt_fail(c, "%s() needs a str argument", name);
        bool pre = name[6] == 'p';
        if (!affix(c, self, args[0], pre)) return self;
        return tv_str(self.u.s.p + (pre ? args[0].u.s.n : 0), self.u.s.n - args[0].u.s.n);
    }
    if (!strcmp(name, "splitlines")) {
        tval out = tv_list(c, 0);
        const char *p = self.u.s.p;
        size_t n = self.u.s.n, st = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] != '\n' && p[i] != '\r') continue;
            tl_push(c, out.u.l, tv_str(p + st, i - st));
            if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n') i++;
            st = i + 1;
        }
        if (st < n) tl_push(c, out.u.l, tv_str(p + st, n - st));
        return out;
    }
    static const struct { const char *n; int k; } is[] = {
        { "isdigit", 'd' }, { "isalpha", 'a' }, { "isalnum", 'n' }, { "isspace", 's' },
        { "isupper", 'u' }, { "islower", 'l' }, { "isnumeric", 'd' }, { "isdecimal", 'd' } };
    for (size_t i = 0; i < sizeof is / sizeof is[0]; i++)
        if (!strcmp(name, is[i].n)) return tv_bool(tt_str_is(self, is[i].k));
    tt_fail(c, "internal: str method %s", name);
}

static tval m_dict(tctx *c, tval self, const char *name, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tdict *d = self.u.d;
    if (!strcmp(name, "get")) {
        if (nargs < 1) tt_fail(c, "get expected at least 1 argument, got 0");
        tval *v = td_get(c, d, args[0]);
        return v ? *v : ARG(1, "default", tv_none());
    }
    tval out = tv_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (name[0] == 'k') out.u.l->v[i] = d->key[i];
        else if (name[0] == 'v') out.u.l->v[i] = d->val[i];
        else {
            tval pair = tv_list(c, 2);
            pair.u.l->v[0] = d->key[i];
            pair.u.l->v[1] = d->val[i];
            pair.u.l->n = 2;
            pair.u.l->is_tuple = true;
            out.u.l->v[i] = pair;
        }
    }
    out.u.l->n = d->n;
    return out;
}

static tval m_list(tctx *c, tval self, const char *name, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    if (nargs != 1) tt_fail(c, "%s() takes exactly one argument (%zu given)", name, nargs);
    int64_t k = 0;
    for (size_t i = 0; i < self.u.l->n; i++)
        if (tv_equal(c, self.u.l->v[i], args[0])) {
            if (name[0] == 'i') return tv_int((int64_t)i);
            k++;
        }
    if (name[0] == 'i') tt_fail(c, "value is not in list");
    return tv_int(k);
}

/* A bound method: self is a 2-element list [object, method name]. */
static tval call_method(tctx *c, tval bound, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tval self = bound.u.l->v[0];
    const char *name = bound.u.l->v[1].u.s.p;
    tt_work(c, self.k == V_STR ? self.u.s.n : self.k == V_LIST ? self.u.l->n : 1);
    switch (self.k) {
    case V_STR: return m_str(c, self, name, args, nargs, kwn, kwv, nkw);
    case V_DICT: return m_dict(c, self, name, args, nargs, kwn, kwv, nkw);
    case V_LIST: return m_list(c, self, name, args, nargs, kwn, kwv, nkw);
    case V_LOOP: {
        if (nargs == 0) tt_fail(c, "no items for cycling given");
        return args[self.u.loop->index0 % nargs];
    }
    default: tt_fail(c, "internal: method %s", name);
    }
}

static bool name_in(const char *name, const char *const *list) {
    for (; *list; list++) if (!strcmp(name, *list)) return true;
    return false;
}

tval tt_method(tctx *c, tval obj, const char *name, bool *found) {
    static const char *const str_m[] = { "strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper",
        "lower", "capitalize", "title", "replace", "format", "join", "find", "rfind", "index", "count",
        "removeprefix", "removesuffix", "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "isupper",
        "islower", "isnumeric", "isdecimal", NULL };
    static const char *const dict_m[] = { "items", "keys", "values", "get", NULL };
    static const char *const list_m[] = { "index", "count", NULL };
    static const char *const loop_m[] = { "cycle", NULL };
    static const char *const unsafe_list[] = { "append", "extend", "insert", "pop", "remove", "clear", "sort",
        "reverse", NULL };
    static const char *const unsafe_dict[] = { "update", "pop", "popitem", "setdefault", "clear", NULL };
    *found = false;
    const char *const *table = obj.k == V_STR ? str_m : obj.k == V_DICT ? dict_m : obj.k == V_LIST ? list_m
                             : obj.k == V_LOOP ? loop_m : NULL;
    if (!table) return tv_none();
    if ((obj.k == V_LIST && name_in(name, unsafe_list)) || (obj.k == V_DICT && name_in(name, unsafe_dict))) {
        *found = true;
        return tv_undef(c, "access to attribute '%s' of '%s' object is unsafe.", name, tv_type_name(obj));
    }
    if (!name_in(name, table)) return tv_none();
    *found = true;
    tval bound = tv_list(c, 2);
    bound.u.l->v[0] = obj;
    bound.u.l->v[1] = tv_cstr(name);
    bound.u.l->n = 2;
    return tv_func(c, name, call_method, bound);
}
