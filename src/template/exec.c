/* exec.c — statement execution: output, if, for (loop variable, filter,
 * else, break/continue, fresh scope per iteration, the global iteration
 * limit), set (name, tuple unpacking, namespace attribute, block set),
 * macros and call blocks (captured output, defaults, caller()), filter
 * blocks. */
#include "template/chat_template.h"

tval tt_apply_filters(tctx *c, tframe *f, tnode *n, tval v);
tval tt_eval_call_with(tctx *c, tframe *f, tnode *call, tval *extra_kw, const char *extra_name);

static void exec_list(tctx *c, tframe *f, tnodes *l);

static void assign(tctx *c, tframe *f, tnode *target, tval v) {
    if (target->kind == N_NAME) { tt_frame_set(c, f, target->name, v); return; }
    if (target->kind == N_ATTR) {
        tval ns = tt_frame_get(c, f, target->a->name);
        if (ns.k != V_DICT || !ns.u.d->is_namespace)
            tt_fail(c, "cannot assign attribute on non-namespace object");
        td_set(c, ns.u.d, tv_cstr(target->name), v);
        return;
    }
    /* tuple unpacking */
    if (v.k != V_LIST && v.k != V_STR && v.k != V_DICT)
        tt_fail(c, "cannot unpack non-iterable %s object", tv_type_name(v));
    tlist *items = tv_iterate(c, v);
    size_t want = (size_t)target->l1.n;
    if (items->n != want)
        tt_fail(c, items->n > want ? "too many values to unpack (expected %zu)"
                                   : "not enough values to unpack (expected %zu, got %zu)", want, items->n);
    for (size_t i = 0; i < want; i++) tt_frame_set(c, f, target->l1.v[i]->name, items->v[i]);
}

/* Run body with output captured into a fresh buffer; returns the text. */
static tval capture(tctx *c, tframe *f, tnode *body) {
    tbuf b = { 0 };
    tbuf *saved = c->out;
    c->out = &b;
    tt_exec(c, f, body);
    c->out = saved;
    return b.p ? tb_str(&b) : tv_str("", 0);
}

static void count_iteration(tctx *c) {
    if (++c->loop_iters > TT_MAX_LOOP_ITERS)
        tt_fail(c, "template loop limit exceeded (more than %d iterations in total)", TT_MAX_LOOP_ITERS);
}

/* {% for %}: a fresh scope per iteration; a filter ("if") runs first so loop.length
 * counts the kept items (an enclosing loop's "loop" is visible in it). As in Jinja's generated
 * code, the else block runs unless some iteration reached the end of the body
 * (an iteration left by break or continue does not count). */
static void exec_for(tctx *c, tframe *f, tnode *n) {
    tval seq = tt_eval(c, f, n->b);
    tlist *items = tv_iterate(c, seq);
    tframe *it = tt_frame_new(c, f);
    if (n->c) {
        tlist *kept = tv_list(c, 0).u.l;
        for (size_t i = 0; i < items->n; i++) {
            count_iteration(c);
            it->n = 0;
            assign(c, it, n->a, items->v[i]);
            if (tv_truthy(tt_eval(c, it, n->c))) tl_push(c, kept, items->v[i]);
        }
        items = kept;
    }
    bool completed = false;
    if (items->n) {
        tloop *L = tt_alloc(c, sizeof(tloop));
        L->items = items;
        L->depth = 1;
        tval loopv = { .k = V_LOOP };
        loopv.u.loop = L;
        for (size_t i = 0; i < items->n; i++) {
            count_iteration(c);
            it->n = 0;
            L->index0 = i;
            tt_frame_set(c, it, "loop", loopv);
            assign(c, it, n->a, items->v[i]);
            tt_exec(c, it, n->d);
            int ctl = c->loop_ctl;
            c->loop_ctl = 0;
            if (ctl == 1) break;
            if (ctl == 0) completed = true;
        }
    }
    if (!completed && n->l2.n) exec_list(c, tt_frame_new(c, f), &n->l2);
}

static void exec_stmt(tctx *c, tframe *f, tnode *n) {
    switch (n->kind) {
    case S_TEXT: tb_put(c, c->out, n->name, n->len); return;
    case S_OUT: tv_str_append(c, c->out, tt_eval(c, f, n->a)); return;
    case S_BODY: tt_exec(c, f, n); return;
    case S_IF:
        if (tv_truthy(tt_eval(c, f, n->a))) tt_exec(c, f, n->b);
        else exec_list(c, f, &n->l2);
        return;
    case S_FOR: exec_for(c, f, n); return;
    case S_SET: assign(c, f, n->a, tt_eval(c, f, n->b)); return;
    /* set and filter blocks run their body in an inner scope, as Jinja does */
    case S_SETBLOCK:
        assign(c, f, n->a, tt_apply_filters(c, f, n->c, capture(c, tt_frame_new(c, f), n->b)));
        return;
    case S_FILTERBLOCK:
        tv_str_append(c, c->out, tt_apply_filters(c, f, n->c, capture(c, tt_frame_new(c, f), n->b)));
        return;
    case S_MACRO: {
        tval m = tv_func(c, n->name, NULL, tv_none());
        m.u.fn->macro = n;
        m.u.fn->closure = f;
        tt_frame_set(c, f, n->name, m);
        return;
    }
    case S_CALLBLOCK: {
        tval caller = tv_func(c, "caller", NULL, tv_none());
        caller.u.fn->macro = n;
        caller.u.fn->closure = f;
        tv_str_append(c, c->out, tt_eval_call_with(c, f, n->a, &caller, "caller"));
        return;
    }
    case S_WITH: {
        tframe *w = tt_frame_new(c, f);
        for (int i = 0; i < n->l1.n; i++) assign(c, w, n->l1.v[i]->a, tt_eval(c, f, n->l1.v[i]->b));
        tt_exec(c, w, n->b);
        return;
    }
    case S_BREAK: c->loop_ctl = 1; return;
    case S_CONTINUE: c->loop_ctl = 2; return;
    }
    tt_fail(c, "line %d: internal: cannot execute node kind %d", n->line, n->kind);
}

static void exec_list(tctx *c, tframe *f, tnodes *l) {
    for (int i = 0; i < l->n && !c->loop_ctl; i++) {
        c->line = l->v[i]->line;
        exec_stmt(c, f, l->v[i]);
    }
}

void tt_exec(tctx *c, tframe *f, tnode *body) {
    tt_enter(c);
    exec_list(c, f, &body->l1);
    tt_leave(c);
}

tval tt_call_macro(tctx *c, tfunc *fn, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw) {
    tnode *m = fn->macro;
    tt_enter(c);
    tframe *f = tt_frame_new(c, fn->closure);
    size_t np = (size_t)m->l1.n;
    if (nargs > np)
        tt_fail(c, "macro '%s' takes not more than %zu argument(s)", fn->name, np);
    bool *set = np ? tt_alloc(c, np) : NULL;
    for (size_t i = 0; i < np; i++) set[i] = false;
    for (size_t i = 0; i < nargs; i++) { tt_frame_set(c, f, m->l1.v[i]->name, args[i]); set[i] = true; }
    for (size_t k = 0; k < nkw; k++) {
        size_t i;
        for (i = 0; i < np; i++) if (!strcmp(m->l1.v[i]->name, kwn[k])) break;
        if (i == np) {
            if (!strcmp(kwn[k], "caller")) { tt_frame_set(c, f, "caller", kwv[k]); continue; }
            tt_fail(c, "macro '%s' takes no keyword argument '%s'", fn->name, kwn[k]);
        }
        if (set[i]) tt_fail(c, "macro '%s' got multiple values for argument '%s'", fn->name, kwn[k]);
        tt_frame_set(c, f, m->l1.v[i]->name, kwv[k]);
        set[i] = true;
    }
    for (size_t i = 0; i < np; i++) {
        if (set[i]) continue;
        tnode *p = m->l1.v[i];
        tt_frame_set(c, f, p->name, p->a ? tt_eval(c, f, p->a)
                                         : tv_undef(c, "parameter '%s' was not provided", p->name));
    }
    int saved_ctl = c->loop_ctl;
    c->loop_ctl = 0;
    tval r = capture(c, f, m->b);
    c->loop_ctl = saved_ctl;
    tt_leave(c);
    return r;
}
