/* parser.c — tokens -> AST, following Jinja2's grammar: statements (if/elif/
 * else, for/else with a filter and loop controls, set (plain, namespace
 * attribute, block), macro, call, filter blocks, generation) and expressions
 * with Jinja's precedence: conditional < or < and < not < comparison <
 * +,- < ~ < *,/,//,% < ** < unary -,+ < filters/tests/postfix. */
#include "template/chat_template.h"
#include <stdio.h>

typedef struct {
    tctx *c;
    ttoken *t;
    size_t n, i;
    int loop_depth;          /* for-bodies around the current position (macro bodies reset it) */
} parser;

static ttoken *cur(parser *P) { return &P->t[P->i]; }
static ttoken *peek(parser *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static void next(parser *P) { if (P->i + 1 < P->n) P->i++; }

static bool is_op(ttoken *t, int op) { return t->type == T_OP && t->op == op; }
static bool is_name(ttoken *t, const char *name) {
    return t->type == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static const char *describe(parser *P, ttoken *t) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_TEXT: return "template data";
    case T_BLOCK_BEGIN: return "begin of statement block";
    case T_BLOCK_END: return "end of statement block";
    case T_VAR_BEGIN: return "begin of print statement";
    case T_VAR_END: return "end of print statement";
    case T_NAME: return tt_printf(P->c, "%.*s", (int)(t->n > 60 ? 60 : t->n), t->s);
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    default:
        if (t->op > 255) return tt_printf(P->c, "%c%c", t->op / 256, t->op % 256);
        return tt_printf(P->c, "%c", t->op);
    }
}

static _Noreturn void unexpected(parser *P, const char *expected) {
    ttoken *t = cur(P);
    if (expected) tt_fail(P->c, "line %d: Expected %s, got '%s'", t->line, expected, describe(P, t));
    tt_fail(P->c, "line %d: unexpected '%s'", t->line, describe(P, t));
}

static void expect_op(parser *P, int op, const char *what) {
    if (!is_op(cur(P), op)) unexpected(P, what);
    next(P);
}

static const char *expect_name(parser *P) {
    ttoken *t = cur(P);
    if (t->type != T_NAME) unexpected(P, "a name");
    next(P);
    return tt_strdup(P->c, t->s, t->n);
}

static tnode *mk(parser *P, int kind) {
    tnode *n = tt_alloc(P->c, sizeof(tnode));
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->line = cur(P)->line;
    return n;
}

static void push(parser *P, tnodes *l, tnode *n) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        tnode **v = tt_alloc(P->c, (size_t)cap * sizeof(tnode *));
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof(tnode *));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

/* ---------------------------------------------------------------- expressions */

static tnode *parse_expression(parser *P, bool with_cond);
static tnode *parse_or(parser *P);
static tnode *parse_unary(parser *P, bool with_filter);
static tnode *parse_primary(parser *P);
static tnode *parse_postfix(parser *P, tnode *n);

static tnode *parse_tuple(parser *P, bool with_cond, bool explicit_parens) {
    tnode *first = NULL;
    tnode *t = mk(P, N_TUPLE);
    bool is_tuple = false;
    for (;;) {
        ttoken *k = cur(P);
        if (first || is_tuple) {
            if (k->type == T_BLOCK_END || k->type == T_VAR_END || is_op(k, ')') || is_name(k, "in") ||
                is_name(k, "if"))
                break;
        } else if (explicit_parens && is_op(k, ')')) {
            is_tuple = true;
            break;
        }
        tnode *e = with_cond ? parse_expression(P, true) : parse_or(P);
        if (!first) first = e;
        push(P, &t->l1, e);
        if (!is_op(cur(P), ',')) break;
        is_tuple = true;
        next(P);
    }
    if (!is_tuple && first) return first;
    if (!first && !is_tuple) unexpected(P, "an expression");
    return t;
}

static tnode *parse_expression(parser *P, bool with_cond) {
    tt_enter(P->c);
    tnode *n = parse_or(P);
    while (with_cond && is_name(cur(P), "if")) {
        tnode *c = mk(P, N_COND);
        next(P);
        c->b = parse_or(P);
        c->a = n;
        if (is_name(cur(P), "else")) { next(P); c->c = parse_expression(P, true); }
        n = c;
    }
    tt_leave(P->c);
    return n;
}

static tnode *parse_not(parser *P);
static tnode *parse_compare(parser *P);
static tnode *parse_math1(parser *P);

static tnode *parse_or(parser *P) {
    tnode *n = NULL;
    for (;;) {
        tnode *r = NULL;
        /* and-chain */
        for (;;) {
            tnode *x = parse_not(P);
            if (r) { tnode *a = mk(P, N_AND); a->a = r; a->b = x; r = a; } else r = x;
            if (!is_name(cur(P), "and")) break;
            next(P);
        }
        if (n) { tnode *o = mk(P, N_OR); o->a = n; o->b = r; n = o; } else n = r;
        if (!is_name(cur(P), "or")) break;
        next(P);
    }
    return n;
}

static tnode *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        tnode *n = mk(P, N_NOT);
        next(P);
        tt_enter(P->c);
        n->a = parse_not(P);
        tt_leave(P->c);
        return n;
    }
    return parse_compare(P);
}

static int compare_op(parser *P) {
    ttoken *t = cur(P);
    if (t->type == T_OP) {
        switch (t->op) {
        case '<': case '>': case OP2('=', '='): case OP2('!', '='): case OP2('<', '='): case OP2('>', '='):
            next(P);
            return t->op;
        }
        return 0;
    }
    if (is_name(t, "in")) { next(P); return 'i'; }
    if (is_name(t, "not") && is_name(peek(P, 1), "in")) { next(P); next(P); return 'n'; }
    return 0;
}

static tnode *parse_compare(parser *P) {
    tnode *first = parse_math1(P);
    int op = compare_op(P);
    if (!op) return first;
    tnode *n = mk(P, N_CMP);
    n->a = first;
    while (op) {
        tnode *part = mk(P, N_KW);
        part->op = op;
        part->a = parse_math1(P);
        push(P, &n->l1, part);
        op = compare_op(P);
    }
    return n;
}

static tnode *binop(parser *P, int op, tnode *a, tnode *b) {
    tnode *n = mk(P, N_BIN);
    n->op = op; n->a = a; n->b = b;
    return n;
}

static tnode *parse_pow(parser *P) {
    tnode *n = parse_unary(P, true);
    while (is_op(cur(P), OP2('*', '*'))) { next(P); n = binop(P, OP2('*', '*'), n, parse_unary(P, true)); }
    return n;
}

static tnode *parse_math2(parser *P) {
    tnode *n = parse_pow(P);
    for (;;) {
        ttoken *t = cur(P);
        if (!(is_op(t, '*') || is_op(t, '/') || is_op(t, '%') || is_op(t, OP2('/', '/')))) break;
        int op = t->op;
        next(P);
        n = binop(P, op, n, parse_pow(P));
    }
    return n;
}

static tnode *parse_concat(parser *P) {
    tnode *n = parse_math2(P);
    while (is_op(cur(P), '~')) { next(P); n = binop(P, '~', n, parse_math2(P)); }
    return n;
}

static tnode *parse_math1(parser *P) {
    tnode *n = parse_concat(P);
    while (is_op(cur(P), '+') || is_op(cur(P), '-')) {
        int op = cur(P)->op;
        next(P);
        n = binop(P, op, n, parse_concat(P));
    }
    return n;
}

/* ( args ) into n->l1 (positional) and n->l2 (N_KW: name = value). */
static void parse_call_args(parser *P, tnode *n) {
    expect_op(P, '(', "'('");
    while (!is_op(cur(P), ')')) {
        if (n->l1.n || n->l2.n) expect_op(P, ',', "',' or ')'");
        if (is_op(cur(P), ')')) break;
        if (is_op(cur(P), '*') || is_op(cur(P), OP2('*', '*')))
            tt_fail(P->c, "line %d: *args and **kwargs in calls are not supported", cur(P)->line);
        if (cur(P)->type == T_NAME && is_op(peek(P, 1), '=')) {
            tnode *kw = mk(P, N_KW);
            kw->name = expect_name(P);
            next(P);
            kw->a = parse_expression(P, true);
            push(P, &n->l2, kw);
        } else {
            if (n->l2.n) tt_fail(P->c, "line %d: positional argument after keyword argument", cur(P)->line);
            push(P, &n->l1, parse_expression(P, true));
        }
    }
    next(P);
}

static const char *parse_dotted_name(parser *P) {
    const char *name = expect_name(P);
    while (is_op(cur(P), '.') && peek(P, 1)->type == T_NAME) {
        next(P);
        name = tt_printf(P->c, "%s.%s", name, expect_name(P));
    }
    return name;
}

static tnode *parse_filter(parser *P, tnode *n) {
    next(P); /* '|' */
    tnode *f = mk(P, N_FILTER);
    f->name = parse_dotted_name(P);
    f->a = n;
    if (is_op(cur(P), '(')) parse_call_args(P, f);
    return f;
}

static tnode *parse_test(parser *P, tnode *n) {
    next(P); /* 'is' */
    tnode *t = mk(P, N_TEST);
    if (is_name(cur(P), "not")) { next(P); t->op = 1; }
    t->name = parse_dotted_name(P);
    t->a = n;
    ttoken *k = cur(P);
    if (is_op(k, '(')) parse_call_args(P, t);
    else if ((k->type == T_NAME || k->type == T_STRING || k->type == T_INT || k->type == T_FLOAT ||
              is_op(k, '[') || is_op(k, '{')) &&
             !is_name(k, "else") && !is_name(k, "or") && !is_name(k, "and")) {
        if (is_name(k, "is")) tt_fail(P->c, "line %d: You cannot chain multiple tests with is", k->line);
        push(P, &t->l1, parse_postfix(P, parse_primary(P)));
    }
    return t;
}

static tnode *parse_filter_expr(parser *P, tnode *n) {
    for (;;) {
        ttoken *t = cur(P);
        if (is_op(t, '|')) n = parse_filter(P, n);
        else if (is_name(t, "is")) n = parse_test(P, n);
        else if (is_op(t, '(')) {
            tnode *c = mk(P, N_CALL);
            c->a = n;
            parse_call_args(P, c);
            n = c;
        } else break;
    }
    return n;
}

static tnode *parse_subscript(parser *P, tnode *n) {
    ttoken *t = cur(P);
    if (is_op(t, '.')) {
        next(P);
        ttoken *a = cur(P);
        if (a->type == T_NAME) {
            tnode *g = mk(P, N_ATTR);
            g->a = n;
            g->name = expect_name(P);
            return g;
        }
        if (a->type != T_INT) unexpected(P, "an attribute name");
        tnode *g = mk(P, N_ITEM);
        g->a = n;
        g->b = mk(P, N_CONST);
        g->b->cv = tv_int(a->i);
        next(P);
        return g;
    }
    next(P); /* '[' */
    tnode *parts[3] = { NULL, NULL, NULL };
    bool is_slice = false;
    if (!is_op(cur(P), ':')) parts[0] = parse_expression(P, true);
    if (is_op(cur(P), ':')) {
        is_slice = true;
        next(P);
        if (!is_op(cur(P), ']') && !is_op(cur(P), ':')) parts[1] = parse_expression(P, true);
        if (is_op(cur(P), ':')) {
            next(P);
            if (!is_op(cur(P), ']')) parts[2] = parse_expression(P, true);
        }
    }
    expect_op(P, ']', "']'");
    tnode *g = mk(P, is_slice ? N_SLICE : N_ITEM);
    g->a = n;
    if (is_slice) { g->b = parts[0]; g->c = parts[1]; g->d = parts[2]; }
    else g->b = parts[0];
    return g;
}

static tnode *parse_postfix(parser *P, tnode *n) {
    for (;;) {
        ttoken *t = cur(P);
        if (is_op(t, '.') || is_op(t, '[')) n = parse_subscript(P, n);
        else if (is_op(t, '(')) {
            tnode *c = mk(P, N_CALL);
            c->a = n;
            parse_call_args(P, c);
            n = c;
        } else break;
    }
    return n;
}

static tnode *parse_unary(parser *P, bool with_filter) {
    tnode *n;
    tt_enter(P->c);
    if (is_op(cur(P), '-') || is_op(cur(P), '+')) {
        n = mk(P, is_op(cur(P), '-') ? N_NEG : N_POS);
        next(P);
        n->a = parse_unary(P, false);
    } else n = parse_primary(P);
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    tt_leave(P->c);
    return n;
}

static tnode *parse_primary(parser *P) {
    ttoken *t = cur(P);
    tnode *n;
    switch (t->type) {
    case T_NAME:
        n = mk(P, N_CONST);
        if (is_name(t, "true") || is_name(t, "True")) n->cv = tv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) n->cv = tv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) n->cv = tv_none();
        else { n->kind = N_NAME; n->name = tt_strdup(P->c, t->s, t->n); }
        next(P);
        return n;
    case T_STRING: {
        n = mk(P, N_CONST);
        tbuf b = { 0 };
        while (cur(P)->type == T_STRING) { tb_put(P->c, &b, cur(P)->s, cur(P)->n); next(P); }
        n->cv = b.p ? tb_str(&b) : tv_str("", 0);
        return n;
    }
    case T_INT:
        if (t->overflow) tt_fail(P->c, "line %d: integer literal too large", t->line);
        n = mk(P, N_CONST);
        n->cv = tv_int(t->i);
        next(P);
        return n;
    case T_FLOAT:
        n = mk(P, N_CONST);
        n->cv = tv_float(t->f);
        next(P);
        return n;
    case T_OP:
        if (t->op == '(') {
            next(P);
            n = parse_tuple(P, true, true);
            expect_op(P, ')', "')'");
            return n;
        }
        if (t->op == '[') {
            next(P);
            n = mk(P, N_LIST);
            while (!is_op(cur(P), ']')) {
                if (n->l1.n) expect_op(P, ',', "',' or ']'");
                if (is_op(cur(P), ']')) break;
                push(P, &n->l1, parse_expression(P, true));
            }
            next(P);
            return n;
        }
        if (t->op == '{') {
            next(P);
            n = mk(P, N_DICT);
            while (!is_op(cur(P), '}')) {
                if (n->l1.n) expect_op(P, ',', "',' or '}'");
                if (is_op(cur(P), '}')) break;
                push(P, &n->l1, parse_expression(P, true));
                expect_op(P, ':', "':'");
                push(P, &n->l2, parse_expression(P, true));
            }
            next(P);
            return n;
        }
        break;
    default: break;
    }
    unexpected(P, NULL);
}

/* ---------------------------------------------------------------- statements */

static tnode *subparse(parser *P, const char *const *ends, const char *block);

static void expect_block_end(parser *P) {
    if (cur(P)->type != T_BLOCK_END) unexpected(P, "end of statement block");
    next(P);
}

/* A for/set target: a name, names separated by commas, or (for set) ns.attr. */
static tnode *parse_assign_target(parser *P, bool allow_ns) {
    if (allow_ns && cur(P)->type == T_NAME && is_op(peek(P, 1), '.') && peek(P, 2)->type == T_NAME) {
        tnode *n = mk(P, N_ATTR);
        n->a = mk(P, N_NAME);
        n->a->name = expect_name(P);
        next(P);
        n->name = expect_name(P);
        return n;
    }
    bool paren = is_op(cur(P), '(');
    if (paren) next(P);
    tnode *t = mk(P, N_TUPLE);
    for (;;) {
        tnode *nm = mk(P, N_NAME);
        if (cur(P)->type != T_NAME) unexpected(P, "an expression");
        nm->name = expect_name(P);
        push(P, &t->l1, nm);
        if (!is_op(cur(P), ',')) break;
        next(P);
        if (paren && is_op(cur(P), ')')) break;
    }
    if (paren) expect_op(P, ')', "')'");
    return t->l1.n == 1 && !paren ? t->l1.v[0] : t;
}

static bool at_block_name(parser *P, const char *name) {
    return cur(P)->type == T_BLOCK_BEGIN && is_name(peek(P, 1), name);
}

static tnode *parse_for(parser *P) {
    static const char *const ends_body[] = { "endfor", "else", NULL };
    static const char *const ends_else[] = { "endfor", NULL };
    tnode *n = mk(P, S_FOR);
    n->a = parse_assign_target(P, false);
    if (!is_name(cur(P), "in")) unexpected(P, "'in'");
    next(P);
    n->b = parse_tuple(P, false, false);
    if (is_name(cur(P), "if")) { next(P); n->c = parse_expression(P, true); }
    if (is_name(cur(P), "recursive")) tt_fail(P->c, "line %d: recursive for loops are not supported", cur(P)->line);
    expect_block_end(P);
    P->loop_depth++;
    n->d = subparse(P, ends_body, "for");
    P->loop_depth--;
    if (at_block_name(P, "else")) {
        next(P); next(P);
        expect_block_end(P);
        tnode *e = subparse(P, ends_else, "for");
        n->l2 = e->l1;
    }
    next(P); next(P); /* {% endfor */
    return n;
}

static tnode *parse_if(parser *P) {
    static const char *const ends[] = { "elif", "else", "endif", NULL };
    static const char *const ends_else[] = { "endif", NULL };
    tnode *n = mk(P, S_IF);
    n->a = parse_tuple(P, false, false);
    expect_block_end(P);
    n->b = subparse(P, ends, "if");
    if (at_block_name(P, "elif")) {
        next(P); next(P);
        tt_enter(P->c);
        tnode *e = parse_if(P);  /* consumes through endif */
        tt_leave(P->c);
        push(P, &n->l2, e);
        return n;
    }
    if (at_block_name(P, "else")) {
        next(P); next(P);
        expect_block_end(P);
        n->l2 = subparse(P, ends_else, "if")->l1;
    }
    next(P); next(P); /* {% endif */
    return n;
}

static tnode *parse_set(parser *P) {
    static const char *const ends[] = { "endset", NULL };
    tnode *target = parse_assign_target(P, true);
    if (is_op(cur(P), '=')) {
        tnode *n = mk(P, S_SET);
        next(P);
        n->a = target;
        n->b = parse_tuple(P, true, false);
        return n;
    }
    tnode *n = mk(P, S_SETBLOCK);
    n->a = target;
    while (is_op(cur(P), '|')) {  /* filters applied to the block, innermost first */
        tnode *f = parse_filter(P, n->c);
        n->c = f;
    }
    expect_block_end(P);
    n->b = subparse(P, ends, "set");
    next(P); next(P);
    return n;
}

/* (a, b=default, ...) into names l1 (N_NAME) and defaults l2 (N_KW, a may be NULL) */
static void parse_signature(parser *P, tnode *n) {
    expect_op(P, '(', "'('");
    while (!is_op(cur(P), ')')) {
        if (n->l1.n) expect_op(P, ',', "',' or ')'");
        if (is_op(cur(P), ')')) break;
        tnode *arg = mk(P, N_KW);
        arg->name = expect_name(P);
        if (is_op(cur(P), '=')) { next(P); arg->a = parse_expression(P, true); }
        else if (n->l2.n && n->l2.v[n->l2.n - 1]->a)
            tt_fail(P->c, "line %d: non-default argument follows default argument", arg->line);
        push(P, &n->l1, arg);
        push(P, &n->l2, arg);
    }
    next(P);
}

static tnode *parse_macro(parser *P) {
    static const char *const ends[] = { "endmacro", NULL };
    tnode *n = mk(P, S_MACRO);
    n->name = expect_name(P);
    parse_signature(P, n);
    expect_block_end(P);
    int saved = P->loop_depth;
    P->loop_depth = 0;
    n->b = subparse(P, ends, "macro");
    P->loop_depth = saved;
    next(P); next(P);
    if (cur(P)->type == T_NAME) next(P);
    return n;
}

static tnode *parse_call_block(parser *P) {
    static const char *const ends[] = { "endcall", NULL };
    tnode *n = mk(P, S_CALLBLOCK);
    if (is_op(cur(P), '(')) parse_signature(P, n);
    n->a = parse_expression(P, true);
    if (n->a->kind != N_CALL) tt_fail(P->c, "line %d: expected call", n->line);
    expect_block_end(P);
    int saved = P->loop_depth;
    P->loop_depth = 0;
    n->b = subparse(P, ends, "call");
    P->loop_depth = saved;
    next(P); next(P);
    return n;
}

static tnode *parse_filter_block(parser *P) {
    static const char *const ends[] = { "endfilter", NULL };
    tnode *n = mk(P, S_FILTERBLOCK);
    tnode *f = mk(P, N_FILTER);
    f->name = parse_dotted_name(P);
    if (is_op(cur(P), '(')) parse_call_args(P, f);
    while (is_op(cur(P), '|')) f = parse_filter(P, f);
    n->c = f;
    expect_block_end(P);
    n->b = subparse(P, ends, "filter");
    next(P); next(P);
    return n;
}

static tnode *parse_statement(parser *P) {
    ttoken *t = cur(P);
    if (t->type != T_NAME) unexpected(P, "a statement name");
    tnode *n;
    tt_enter(P->c);
    if (is_name(t, "for")) { next(P); n = parse_for(P); }
    else if (is_name(t, "if")) { next(P); n = parse_if(P); }
    else if (is_name(t, "set")) { next(P); n = parse_set(P); }
    else if (is_name(t, "macro")) { next(P); n = parse_macro(P); }
    else if (is_name(t, "call")) { next(P); n = parse_call_block(P); }
    else if (is_name(t, "filter")) { next(P); n = parse_filter_block(P); }
    else if (is_name(t, "break") || is_name(t, "continue")) {
        n = mk(P, is_name(t, "break") ? S_BREAK : S_CONTINUE);
        if (!P->loop_depth)
            tt_fail(P->c, "line %d: '%s' outside loop", t->line, n->kind == S_BREAK ? "break" : "continue");
        next(P);
    } else if (is_name(t, "with")) {
        static const char *const ends[] = { "endwith", NULL };
        next(P);
        n = mk(P, S_WITH);
        while (cur(P)->type != T_BLOCK_END) {
            if (n->l1.n) expect_op(P, ',', "',' or end of statement block");
            tnode *kw = mk(P, N_KW);
            kw->a = parse_assign_target(P, false);
            expect_op(P, '=', "'='");
            kw->b = parse_expression(P, true);
            push(P, &n->l1, kw);
        }
        expect_block_end(P);
        n->b = subparse(P, ends, "with");
        next(P); next(P);
    } else if (is_name(t, "generation")) {
        static const char *const ends[] = { "endgeneration", NULL };
        next(P);
        expect_block_end(P);
        n = subparse(P, ends, "generation");
        next(P); next(P);
    } else {
        tt_fail(P->c, "line %d: Encountered unknown tag '%s'.", t->line, describe(P, t));
    }
    expect_block_end(P);
    tt_leave(P->c);
    return n;
}

static tnode *subparse(parser *P, const char *const *ends, const char *block) {
    tnode *body = mk(P, S_BODY);
    for (;;) {
        ttoken *t = cur(P);
        if (t->type == T_EOF) {
            if (!ends) return body;
            char want[200] = "";
            for (int i = 0; ends[i]; i++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'", i ? " or " : "", ends[i]);
            tt_fail(P->c, "line %d: Unexpected end of template. Jinja was looking for the following tags: %s. "
                    "The innermost block that needs to be closed is '%s'.", t->line, want, block);
        }
        if (t->type == T_TEXT) {
            tnode *n = mk(P, S_TEXT);
            n->name = t->s;
            n->len = t->n;
            push(P, &body->l1, n);
            next(P);
        } else if (t->type == T_VAR_BEGIN) {
            next(P);
            tnode *n = mk(P, S_OUT);
            n->a = parse_tuple(P, true, false);
            if (cur(P)->type != T_VAR_END) unexpected(P, "end of print statement");
            next(P);
            push(P, &body->l1, n);
        } else if (t->type == T_BLOCK_BEGIN) {
            ttoken *name = peek(P, 1);
            if (ends)
                for (int i = 0; ends[i]; i++)
                    if (is_name(name, ends[i])) return body;
            if (name->type == T_NAME && name->n >= 3 &&
                (!memcmp(name->s, "end", 3) || is_name(name, "else") || is_name(name, "elif")))
                tt_fail(P->c, "line %d: Encountered unknown tag '%s'.%s", name->line, describe(P, name),
                        block ? tt_printf(P->c, " The innermost block that needs to be closed is '%s'.", block)
                              : "");
            next(P);
            push(P, &body->l1, parse_statement(P));
        } else unexpected(P, NULL);
    }
}

tnode *tt_parse(tctx *c, ttokens *toks) {
    parser P = { .c = c, .t = toks->v, .n = toks->n, .i = 0 };
    return subparse(&P, NULL, NULL);
}
