/* eval.c — expression evaluation: names and frames, attribute / item /
 * slice access (Jinja's getattr-then-getitem rules and its Undefined hints),
 * calls, Python arithmetic and comparison semantics (int overflow is an
 * error, not a wrap), and/or/not, conditional expressions, literals. */
#include "template/chat_template.h"
#include <math.h>
#include <stdio.h>

/* ---------------------------------------------------------------- frames */

tframe *tt_frame_new(tctx *c, tframe *parent) {
    tframe *f = tt_alloc(c, sizeof(tframe));
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

void tt_frame_set(tctx *c, tframe *f, const char *name, tval v) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) { f->vals[i] = v; return; }
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 8;
        const char **nn = tt_alloc(c, (size_t)cap * sizeof(char *));
        tval *nv = tt_alloc(c, (size_t)cap * sizeof(tval));
        if (f->n) { memcpy(nn, f->names, (size_t)f->n * sizeof(char *)); memcpy(nv, f->vals, (size_t)f->n * sizeof(tval)); }
        f->names = nn; f->vals = nv; f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
}

tval tt_frame_get(tctx *c, tframe *f, const char *name) {
    for (; f; f = f->parent)
        for (int i = f->n - 1; i >= 0; i--)
            if (!strcmp(f->names[i], name)) return f->vals[i];
    return tv_undef(c, "'%s' is undefined", name);
}

/* ---------------------------------------------------------------- access */

static const char *obj_repr(tval v) {
    switch (v.k) {
    case V_NONE: return "None";
    case V_STR: return "str object";
    case V_LIST: return "list object";
    case V_DICT: return v.u.d->is_namespace ? "jinja2.utils.Namespace object" : "dict object";
    case V_INT: return "int object";
    case V_FLOAT: return "float object";
    case V_BOOL: return "bool object";
    case V_LOOP: return "jinja2.runtime.LoopContext object";
    default: return "object";
    }
}

static tval no_attr(tctx *c, tval obj, const char *name) {
    return tv_undef(c, "'%s' has no attribute '%s'", obj_repr(obj), name);
}

static tval loop_attr(tctx *c, tval obj, const char *name) {
    tloop *L = obj.u.loop;
    size_t i = L->index0, n = L->items->n;
    if (!strcmp(name, "index")) return tv_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return tv_int((int64_t)i);
    if (!strcmp(name, "revindex")) return tv_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return tv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return tv_bool(i == 0);
    if (!strcmp(name, "last")) return tv_bool(i + 1 == n);
    if (!strcmp(name, "length")) return tv_int((int64_t)n);
    if (!strcmp(name, "depth")) return tv_int(L->depth);
    if (!strcmp(name, "depth0")) return tv_int(L->depth - 1);
    if (!strcmp(name, "previtem"))
        return i > 0 ? L->items->v[i - 1] : tv_undef(c, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? L->items->v[i + 1] : tv_undef(c, "there is no next item");
    bool found;
    tval m = tt_method(c, obj, name, &found);
    return found ? m : no_attr(c, obj, name);
}

tval tt_getattr(tctx *c, tval obj, const char *name) {
    bool found = false;
    switch (obj.k) {
    case V_UNDEF: tv_undef_fail(c, obj);
    case V_LOOP: return loop_attr(c, obj, name);
    case V_DICT: {
        if (obj.u.d->is_namespace) {
            tval *v = td_gets(obj.u.d, name);
            return v ? *v : no_attr(c, obj, name);
        }
        tval m = tt_method(c, obj, name, &found);
        if (found) return m;
        tval *v = td_gets(obj.u.d, name);
        return v ? *v : no_attr(c, obj, name);
    }
    default: {
        tval m = tt_method(c, obj, name, &found);
        return found ? m : no_attr(c, obj, name);
    }
    }
}

/* Python's index normalisation for a sequence of length n; false if out of range. */
static bool norm_index(int64_t i, size_t n, size_t *out) {
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return false;
    *out = (size_t)i;
    return true;
}

static bool is_ascii(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) if ((unsigned char)p[i] >= 0x80) return false;
    return true;
}

tval tt_getitem(tctx *c, tval obj, tval key) {
    if (obj.k == V_UNDEF) tv_undef_fail(c, obj);
    if (key.k == V_BOOL) key = tv_int(key.u.b);
    if (obj.k == V_DICT && !obj.u.d->is_namespace) {
        tval *v = td_get(c, obj.u.d, key);
        if (v) return *v;
    } else if (((obj.k == V_LIST && !obj.u.l->is_gen) || obj.k == V_STR) && key.k == V_INT) {
        size_t idx;
        if (obj.k == V_LIST) {
            if (norm_index(key.u.i, obj.u.l->n, &idx)) return obj.u.l->v[idx];
        } else {
            const char *p = obj.u.s.p;
            size_t n = obj.u.s.n;
            tt_work(c, n);
            bool ascii = is_ascii(p, n);
            size_t len = ascii ? n : tv_utf8_len(p, n);
            if (norm_index(key.u.i, len, &idx)) {
                if (ascii) return tv_str(p + idx, 1);
                size_t a = tv_utf8_offset(p, n, idx), b = tv_utf8_offset(p, n, idx + 1);
                return tv_str(p + a, b - a);
            }
        }
    }
    if (key.k == V_STR) {
        if (obj.k != V_DICT || obj.u.d->is_namespace) {
            const char *name = tt_strdup(c, key.u.s.p, key.u.s.n);
            return tt_getattr(c, obj, name);
        }
        bool found;
        const char *name = tt_strdup(c, key.u.s.p, key.u.s.n);
        tval m = tt_method(c, obj, name, &found);
        if (found) return m;
        return no_attr(c, obj, name);
    }
    tbuf b = { 0 };
    tv_repr_append(c, &b, key);
    return tv_undef(c, "%s has no element %s", obj_repr(obj), b.p ? b.p : "");
}

static int64_t slice_arg(tctx *c, tval v, int64_t dflt) {
    if (v.k == V_NONE || v.k == V_UNDEF) return dflt;
    if (v.k == V_BOOL) return v.u.b;
    if (v.k != V_INT) tt_fail(c, "slice indices must be integers or None");
    return v.u.i;
}

/* Python slice semantics on a sequence of length n: fills start/step/count. */
static void slice_indices(tctx *c, tval a, tval b, tval s, size_t n, int64_t *start, int64_t *step, size_t *count) {
    int64_t st = slice_arg(c, s, 1), len = (int64_t)n;
    if (st == 0) tt_fail(c, "slice step cannot be zero");
    if (st == INT64_MIN) st = -INT64_MAX;
    int64_t lo, hi;
    if (st > 0) {
        lo = slice_arg(c, a, 0); hi = slice_arg(c, b, len);
        if (lo < 0) { lo += len; if (lo < 0) lo = 0; } else if (lo > len) lo = len;
        if (hi < 0) { hi += len; if (hi < 0) hi = 0; } else if (hi > len) hi = len;
        *count = hi > lo ? (size_t)((hi - lo - 1) / st + 1) : 0;
    } else {
        lo = slice_arg(c, a, len - 1); hi = slice_arg(c, b, -len - 1);
        if (a.k == V_NONE || a.k == V_UNDEF) lo = len - 1;
        if (lo < 0) { lo += len; if (lo < 0) lo = -1; } else if (lo >= len) lo = len - 1;
        if (b.k == V_NONE || b.k == V_UNDEF) hi = -1;
        else if (hi < 0) { hi += len; if (hi < 0) hi = -1; } else if (hi >= len) hi = len - 1;
        *count = lo > hi ? (size_t)((lo - hi - 1) / -st + 1) : 0;
    }
    *start = lo;
    *step = st;
}

static tval do_slice(tctx *c, tval obj, tval a, tval b, tval s) {
    int64_t start, step;
    size_t count;
    if (obj.k == V_UNDEF) tv_undef_fail(c, obj);
    if (obj.k == V_LIST && obj.u.l->is_gen) tt_fail(c, "'generator' object is not subscriptable");
    if (obj.k == V_LIST) {
        slice_indices(c, a, b, s, obj.u.l->n, &start, &step, &count);
        tval r = tv_list(c, count);
        for (size_t i = 0; i < count; i++) r.u.l->v[i] = obj.u.l->v[start + (int64_t)i * step];
        r.u.l->n = count;
        return r;
    }
    if (obj.k == V_STR) {
        const char *p = obj.u.s.p;
        size_t n = obj.u.s.n;
        tt_work(c, n);
        bool ascii = is_ascii(p, n);
        size_t len = ascii ? n : tv_utf8_len(p, n);
        slice_indices(c, a, b, s, len, &start, &step, &count);
        if (ascii && step == 1) return tv_str(p + start, count);
        size_t *off = NULL;
        if (!ascii) {
            off = tt_alloc(c, (len + 1) * sizeof(size_t));
            off[len] = n;
            size_t pos = 0;
            for (size_t ch = 0; ch < len; ch++) { off[ch] = pos; pos += tv_utf8_offset(p + pos, n - pos, 1); }
        }
        tbuf out = { 0 };
        for (size_t i = 0; i < count; i++) {
            size_t ch = (size_t)(start + (int64_t)i * step);
            if (ascii) tb_putc(c, &out, p[ch]);
            else tb_put(c, &out, p + off[ch], off[ch + 1] - off[ch]);
        }
        return tb_str(&out);
    }
    tt_fail(c, "'%s' object is not subscriptable", tv_type_name(obj));
}

/* ---------------------------------------------------------------- operators */

static bool num(tval v) { return v.k == V_INT || v.k == V_FLOAT || v.k == V_BOOL; }
static double as_f(tval v) { return v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t as_i(tval v) { return v.k == V_INT ? v.u.i : (int64_t)v.u.b; }

static const char *op_name(int op) {
    switch (op) {
    case '+': return "+"; case '-': return "-"; case '*': return "*"; case '/': return "/";
    case '%': return "%"; case OP2('/', '/'): return "//"; case OP2('*', '*'): return "** or pow()";
    default: return "?";
    }
}

static _Noreturn void type_error(tctx *c, int op, tval a, tval b) {
    if (op == '+' && (a.k == V_STR || (a.k == V_LIST && !a.u.l->is_gen)))
        tt_fail(c, "can only concatenate %s (not \"%s\") to %s", tv_type_name(a), tv_type_name(b), tv_type_name(a));
    tt_fail(c, "unsupported operand type(s) for %s: '%s' and '%s'", op_name(op), tv_type_name(a), tv_type_name(b));
}

static tval repeat(tctx *c, tval seq, int64_t times) {
    if (times < 0) times = 0;
    size_t unit = seq.k == V_STR ? seq.u.s.n : seq.u.l->n * sizeof(tval);
    uint64_t total;
    if (!th_mul_u64(unit, (uint64_t)times, &total) || total > c->mem_limit)
        tt_fail(c, "template memory limit exceeded (%zu MiB)", c->mem_limit >> 20);
    if (seq.k == V_STR) {
        char *p = tt_alloc(c, (size_t)total + 1);
        for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * seq.u.s.n, seq.u.s.p, seq.u.s.n);
        p[total] = 0;
        return tv_str(p, (size_t)total);
    }
    size_t n = seq.u.l->n * (size_t)times;
    tval r = tv_list(c, n);
    for (size_t i = 0; i < n; i++) r.u.l->v[i] = seq.u.l->v[i % seq.u.l->n];
    r.u.l->n = n;
    return r;
}

tval tt_percent_format(tctx *c, tval fmt, tval args);

static tval arith(tctx *c, int op, tval a, tval b) {
    if (a.k == V_FLOAT || b.k == V_FLOAT) {
        double x = as_f(a), y = as_f(b);
        switch (op) {
        case '+': return tv_float(x + y);
        case '-': return tv_float(x - y);
        case '*': return tv_float(x * y);
        case '/': if (y == 0) tt_fail(c, "float division by zero"); return tv_float(x / y);
        case OP2('/', '/'): if (y == 0) tt_fail(c, "float floor division by zero"); return tv_float(floor(x / y));
        case '%': {
            if (y == 0) tt_fail(c, "float modulo");
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return tv_float(m);
        }
        case OP2('*', '*'): return tv_float(pow(x, y));
        }
    }
    int64_t x = as_i(a), y = as_i(b), r;
    switch (op) {
    case '+': if (__builtin_add_overflow(x, y, &r)) break; return tv_int(r);
    case '-': if (__builtin_sub_overflow(x, y, &r)) break; return tv_int(r);
    case '*': if (__builtin_mul_overflow(x, y, &r)) break; return tv_int(r);
    case '/': if (y == 0) tt_fail(c, "division by zero"); return tv_float((double)x / (double)y);
    case OP2('/', '/'): case '%': {
        if (y == 0) tt_fail(c, op == '%' ? "integer modulo by zero" : "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) break;
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
        return tv_int(op == '%' ? m : q);
    }
    case OP2('*', '*'): {
        if (y < 0) return tv_float(pow((double)x, (double)y));
        int64_t acc = 1, base = x;
        while (y) {
            if (y & 1) { if (__builtin_mul_overflow(acc, base, &acc)) tt_fail(c, "integer overflow in **"); }
            y >>= 1;
            if (y && __builtin_mul_overflow(base, base, &base)) tt_fail(c, "integer overflow in **");
        }
        return tv_int(acc);
    }
    }
    tt_fail(c, "integer overflow in %s", op_name(op));
}

tval tt_binop(tctx *c, int op, tval a, tval b) {
    if (op == '~') {
        tbuf buf = { 0 };
        tv_str_append(c, &buf, a);
        tv_str_append(c, &buf, b);
        return buf.p ? tb_str(&buf) : tv_str("", 0);
    }
    if (a.k == V_UNDEF) tv_undef_fail(c, a);
    if (b.k == V_UNDEF) tv_undef_fail(c, b);
    if (num(a) && num(b)) return arith(c, op, a, b);
    if (op == '+' && a.k == V_STR && b.k == V_STR) {
        size_t n = a.u.s.n + b.u.s.n;
        if (n > c->max_output) tt_fail(c, "string longer than the output limit of %zu bytes", c->max_output);
        char *p = tt_alloc(c, n + 1);
        memcpy(p, a.u.s.p, a.u.s.n);
        memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
        p[n] = 0;
        return tv_str(p, n);
    }
    if (op == '+' && a.k == V_LIST && b.k == V_LIST && !a.u.l->is_gen && !b.u.l->is_gen) {
        tval r = tv_list(c, a.u.l->n + b.u.l->n);
        if (a.u.l->n) memcpy(r.u.l->v, a.u.l->v, a.u.l->n * sizeof(tval));
        if (b.u.l->n) memcpy(r.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(tval));
        r.u.l->n = a.u.l->n + b.u.l->n;
        return r;
    }
    if (op == '*' && (a.k == V_STR || a.k == V_LIST) && (b.k == V_INT || b.k == V_BOOL)) return repeat(c, a, as_i(b));
    if (op == '*' && (b.k == V_STR || b.k == V_LIST) && (a.k == V_INT || a.k == V_BOOL)) return repeat(c, b, as_i(a));
    if (op == '%' && a.k == V_STR) return tt_percent_format(c, a, b);
    type_error(c, op, a, b);
}

static bool contains(tctx *c, tval container, tval item) {
    switch (container.k) {
    case V_UNDEF: return false;
    case V_STR:
        if (item.k == V_UNDEF) tv_undef_fail(c, item);
        if (item.k != V_STR)
            tt_fail(c, "'in <string>' requires string as left operand, not %s", tv_type_name(item));
        if (item.u.s.n == 0) return true;
        tt_work(c, container.u.s.n);
        return memmem(container.u.s.p, container.u.s.n, item.u.s.p, item.u.s.n) != NULL;
    case V_LIST:
        for (size_t i = 0; i < container.u.l->n; i++) if (tv_equal(c, container.u.l->v[i], item)) return true;
        return false;
    case V_DICT:
        if (container.u.d->is_namespace) break;
        if (item.k == V_LIST || item.k == V_DICT) tt_fail(c, "unhashable type: '%s'", tv_type_name(item));
        return td_get(c, container.u.d, item) != NULL;
    default: break;
    }
    tt_fail(c, "argument of type '%s' is not iterable", tv_type_name(container));
}

static int order(tctx *c, int op, tval a, tval b) {
    if (num(a) && num(b)) {
        if (a.k == V_FLOAT || b.k == V_FLOAT) { double x = as_f(a), y = as_f(b); return x < y ? -1 : x > y ? 1 : 0; }
        int64_t x = as_i(a), y = as_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.k == V_STR && b.k == V_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        tt_work(c, n);
        int r = memcmp(a.u.s.p, b.u.s.p, n);
        if (r) return r < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n ? 1 : 0;
    }
    if (a.k == V_LIST && b.k == V_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (tv_equal(c, a.u.l->v[i], b.u.l->v[i])) continue;
            return order(c, op, a.u.l->v[i], b.u.l->v[i]);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
    }
    if (a.k == V_UNDEF) tv_undef_fail(c, a);
    if (b.k == V_UNDEF) tv_undef_fail(c, b);
    const char *os = op == '<' ? "<" : op == '>' ? ">" : op == OP2('<', '=') ? "<=" : ">=";
    tt_fail(c, "'%s' not supported between instances of '%s' and '%s'", os, tv_type_name(a), tv_type_name(b));
}

bool tt_compare(tctx *c, int op, tval a, tval b) {
    switch (op) {
    case OP2('=', '='): return tv_equal(c, a, b);
    case OP2('!', '='): return !tv_equal(c, a, b);
    case 'i': return contains(c, b, a);
    case 'n': return !contains(c, b, a);
    case '<': return order(c, op, a, b) < 0;
    case '>': return order(c, op, a, b) > 0;
    case OP2('<', '='): return order(c, op, a, b) <= 0;
    case OP2('>', '='): return order(c, op, a, b) >= 0;
    }
    tt_fail(c, "internal: unknown comparison");
}

/* ---------------------------------------------------------------- calls */

tval tt_call(tctx *c, tframe *f, tval fn, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    if (fn.k == V_UNDEF) tv_undef_fail(c, fn);
    if (fn.k != V_FUNC) tt_fail(c, "'%s' object is not callable", tv_type_name(fn));
    if (fn.u.fn->builtin) return fn.u.fn->builtin(c, fn.u.fn->self, args, nargs, kwn, kwv, nkw);
    return tt_call_macro(c, fn.u.fn, args, nargs, kwn, kwv, nkw);
}

/* Evaluate a call's arguments (n->l1 positional, n->l2 keyword) and call fn. */
static __attribute__((noinline)) tval eval_call(tctx *c, tframe *f, tnode *n, tval fn, tval *extra_kw,
                                                const char *extra_name) {
    size_t na = (size_t)n->l1.n, nk = (size_t)n->l2.n + (extra_kw ? 1 : 0);
    tval *args = na ? tt_alloc(c, na * sizeof(tval)) : NULL;
    tval *kwv = nk ? tt_alloc(c, nk * sizeof(tval)) : NULL;
    const char **kwn = nk ? tt_alloc(c, nk * sizeof(char *)) : NULL;
    for (size_t i = 0; i < na; i++) args[i] = tt_eval(c, f, n->l1.v[i]);
    for (int i = 0; i < n->l2.n; i++) { kwn[i] = n->l2.v[i]->name; kwv[i] = tt_eval(c, f, n->l2.v[i]->a); }
    if (extra_kw) { kwn[nk - 1] = extra_name; kwv[nk - 1] = *extra_kw; }
    return tt_call(c, f, fn, args, na, kwn, kwv, nk);
}

tval tt_eval_call_with(tctx *c, tframe *f, tnode *call, tval *extra_kw, const char *extra_name) {
    tval fn = tt_eval(c, f, call->a);
    return eval_call(c, f, call, fn, extra_kw, extra_name);
}

static __attribute__((noinline)) tval eval_filter(tctx *c, tframe *f, tnode *n, tval v) {
    size_t na = (size_t)n->l1.n, nk = (size_t)n->l2.n;
    tval *args = na ? tt_alloc(c, na * sizeof(tval)) : NULL;
    tval *kwv = nk ? tt_alloc(c, nk * sizeof(tval)) : NULL;
    const char **kwn = nk ? tt_alloc(c, nk * sizeof(char *)) : NULL;
    for (size_t i = 0; i < na; i++) args[i] = tt_eval(c, f, n->l1.v[i]);
    for (size_t i = 0; i < nk; i++) { kwn[i] = n->l2.v[i]->name; kwv[i] = tt_eval(c, f, n->l2.v[i]->a); }
    if (n->kind == N_TEST) {
        if (nk) tt_fail(c, "keyword arguments to tests are not supported");
        bool r = tt_test(c, f, n->name, v, args, na);
        return tv_bool(n->op ? !r : r);
    }
    return tt_filter(c, f, n->name, v, args, na, kwn, kwv, nk);
}

/* Apply a filter chain whose innermost input (a == NULL) is v. */
tval tt_apply_filters(tctx *c, tframe *f, tnode *n, tval v) {
    if (!n) return v;
    tval in = n->a ? tt_apply_filters(c, f, n->a, v) : v;
    return eval_filter(c, f, n, in);
}

/* ---------------------------------------------------------------- eval */

static tval eval_node(tctx *c, tframe *f, tnode *n) {
    switch (n->kind) {
    case N_CONST: return n->cv;
    case N_NAME: return tt_frame_get(c, f, n->name);
    case N_ATTR: return tt_getattr(c, tt_eval(c, f, n->a), n->name);
    case N_ITEM: {
        tval o = tt_eval(c, f, n->a);
        return tt_getitem(c, o, tt_eval(c, f, n->b));
    }
    case N_SLICE: {
        tval o = tt_eval(c, f, n->a);
        tval a = n->b ? tt_eval(c, f, n->b) : tv_none();
        tval b = n->c ? tt_eval(c, f, n->c) : tv_none();
        tval s = n->d ? tt_eval(c, f, n->d) : tv_none();
        return do_slice(c, o, a, b, s);
    }
    case N_CALL: return eval_call(c, f, n, tt_eval(c, f, n->a), NULL, NULL);
    case N_FILTER: case N_TEST: return eval_filter(c, f, n, tt_eval(c, f, n->a));
    case N_BIN: {
        tval a = tt_eval(c, f, n->a);
        return tt_binop(c, n->op, a, tt_eval(c, f, n->b));
    }
    case N_NEG: case N_POS: {
        tval v = tt_eval(c, f, n->a);
        if (v.k == V_UNDEF) tv_undef_fail(c, v);
        if (v.k == V_BOOL) v = tv_int(v.u.b);
        if (v.k == V_INT) {
            if (n->kind == N_NEG && v.u.i == INT64_MIN) tt_fail(c, "integer overflow in unary -");
            return n->kind == N_NEG ? tv_int(-v.u.i) : v;
        }
        if (v.k == V_FLOAT) return n->kind == N_NEG ? tv_float(-v.u.f) : v;
        tt_fail(c, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', tv_type_name(v));
    }
    case N_NOT: return tv_bool(!tv_truthy(tt_eval(c, f, n->a)));
    case N_AND: {
        tval a = tt_eval(c, f, n->a);
        return tv_truthy(a) ? tt_eval(c, f, n->b) : a;
    }
    case N_OR: {
        tval a = tt_eval(c, f, n->a);
        return tv_truthy(a) ? a : tt_eval(c, f, n->b);
    }
    case N_COND:
        if (tv_truthy(tt_eval(c, f, n->b))) return tt_eval(c, f, n->a);
        return n->c ? tt_eval(c, f, n->c) : tv_undef(c, "the inline if-expression evaluated to false and no else section was defined.");
    case N_LIST: case N_TUPLE: {
        tval l = tv_list(c, (size_t)n->l1.n);
        for (int i = 0; i < n->l1.n; i++) l.u.l->v[i] = tt_eval(c, f, n->l1.v[i]);
        l.u.l->n = (size_t)n->l1.n;
        l.u.l->is_tuple = n->kind == N_TUPLE;
        return l;
    }
    case N_DICT: {
        tval d = tv_dict(c, (size_t)n->l1.n);
        for (int i = 0; i < n->l1.n; i++) {
            tval k = tt_eval(c, f, n->l1.v[i]);
            if (k.k == V_LIST || k.k == V_DICT || k.k == V_UNDEF)
                tt_fail(c, "unhashable type: '%s'", tv_type_name(k));
            td_set(c, d.u.d, k, tt_eval(c, f, n->l2.v[i]));
        }
        return d;
    }
    case N_CMP: {
        tval a = tt_eval(c, f, n->a);
        for (int i = 0; i < n->l1.n; i++) {
            tval b = tt_eval(c, f, n->l1.v[i]->a);
            if (!tt_compare(c, n->l1.v[i]->op, a, b)) return tv_bool(false);
            a = b;
        }
        return tv_bool(true);
    }
    }
    tt_fail(c, "line %d: internal: cannot evaluate node kind %d", n->line, n->kind);
}

tval tt_eval(tctx *c, tframe *f, tnode *n) {
    tt_enter(c);
    tt_work(c, 32);
    int saved = c->line;
    c->line = n->line;
    tval v = eval_node(c, f, n);
    c->line = saved;
    tt_leave(c);
    return v;
}
