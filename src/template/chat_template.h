/* chat_template.h — internal interface of the Jinja2-subset chat-template
 * interpreter. The public entry point, th_chat_render(), is in theseus.h.
 *
 * Pipeline: lexer.c (source -> tokens, with Jinja's whitespace control,
 * trim_blocks and lstrip_blocks) -> parser.c (tokens -> AST) -> eval.c
 * (expressions) + exec.c (statements) using value.c (values, arena, Python
 * str/repr, JSON), strings.c (str/dict/list methods, % formatting) and
 * filters.c (filters, tests, globals). render.c holds th_chat_render().
 *
 * Sandbox limits (each gives TH_ERR_FORMAT with a message): TT_MAX_DEPTH,
 * TT_MAX_LOOP_ITERS, TT_MAX_WORK, TT_MAX_MEMORY, and opts->max_output, which
 * also bounds every intermediate string.
 *
 * Memory: every allocation of one render comes from one arena (tctx) with a
 * byte limit, and (th_chat_render_budget) from a budget shared with others; errors longjmp back to the render entry, which frees the arena.
 * So no code below needs to free anything or check allocation results. */
#ifndef TH_CHAT_TEMPLATE_H
#define TH_CHAT_TEMPLATE_H

#include "core/core.h"
#include <setjmp.h>
#include <stdarg.h>

/* ---------------------------------------------------------------- limits */
#define TT_MAX_DEPTH       500        /* nesting of expressions / blocks / macro calls */
#define TT_MAX_LOOP_ITERS  1000000    /* total for-loop iterations per render */
#define TT_MAX_MEMORY      (256u << 20) /* arena bytes per render (or 8 x max_output if more) */
#define TT_DEFAULT_OUTPUT  (1u << 20)
#define TT_MAX_WORK        (1ull << 30) /* work units per render: ~1 per byte scanned, 32 per node evaluated */

typedef struct tctx tctx;
typedef struct tnode tnode;
typedef struct tframe tframe;

/* ---------------------------------------------------------------- values */
typedef enum {
    V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_FUNC, V_LOOP
} tkind;

typedef struct tlist tlist;
typedef struct tdict tdict;
typedef struct tfunc tfunc;
typedef struct tloop tloop;

typedef struct tval {
    tkind k;
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s;  /* V_STR (UTF-8); V_UNDEF: p = message or NULL */
        tlist *l;
        tdict *d;
        tfunc *fn;
        tloop *loop;
    } u;
} tval;

/* is_gen: the result of a filter that is a generator in Jinja (select, map, unique ...):
 * always true, no len(), not reversible, not a sequence, not JSON. Iterating it again
 * still gives its items (Jinja's would be exhausted). */
struct tlist { tval *v; size_t n, cap; bool is_tuple, is_gen; };
struct tdict { tval *key, *val; size_t n, cap; bool is_namespace; };

typedef tval (*tbuiltin)(tctx *c, tval self, tval *args, size_t nargs,
                         const char **kwnames, tval *kwvals, size_t nkw);
struct tfunc {
    const char *name;
    tbuiltin builtin;        /* built-in function or bound method */
    tval self;               /* bound object for methods */
    tnode *macro;            /* macro definition (if not builtin) */
    tframe *closure;         /* frame the macro was defined in */
    tnode *caller_body;      /* for caller(): the call block body */
};

struct tloop {
    tlist *items;
    size_t index0;
    int depth;
};

/* ---------------------------------------------------------------- AST */
typedef struct { tnode **v; int n, cap; } tnodes;

enum {
    /* expressions */
    N_CONST, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_BIN,
    N_NEG, N_POS, N_NOT, N_AND, N_OR, N_COND, N_LIST, N_TUPLE, N_DICT, N_CMP, N_KW,
    /* statements */
    S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_CALLBLOCK,
    S_FILTERBLOCK, S_BREAK, S_CONTINUE, S_BODY, S_WITH
};

struct tnode {
    int kind, line;
    int op;                  /* N_BIN / N_CMP: operator token; N_TEST: negated */
    tnode *a, *b, *c, *d;
    tnodes l1, l2;           /* args / items / body ; kwargs / else-body / defaults */
    const char *name;        /* identifier, attribute, filter/test name; S_TEXT data */
    size_t len;              /* S_TEXT length */
    tval cv;                 /* N_CONST value */
};

/* ---------------------------------------------------------------- lexer */
enum {
    T_EOF, T_TEXT, T_BLOCK_BEGIN, T_BLOCK_END, T_VAR_BEGIN, T_VAR_END,
    T_NAME, T_STRING, T_INT, T_FLOAT, T_OP
};
/* Two-character operators are encoded as a*256+b, single ones as the char. */
#define OP2(a, b) ((a) * 256 + (b))

typedef struct ttoken {
    int type, line;
    int op;                  /* T_OP */
    const char *s; size_t n; /* T_TEXT, T_NAME, T_STRING (decoded) */
    int64_t i; double f;
    bool overflow;           /* T_INT too large for int64 */
} ttoken;

typedef struct { ttoken *v; size_t n, cap; } ttokens;

/* ---------------------------------------------------------------- context */
typedef struct tchunk tchunk;
typedef struct { char *p; size_t n, cap; } tbuf;

struct tframe {
    tframe *parent;
    const char **names;
    tval *vals;
    int n, cap;
};

struct tctx {
    jmp_buf jmp;
    char err[1024];
    tchunk *chunks;
    size_t mem_used, mem_limit;
    size_t max_output;
    uint64_t loop_iters;
    uint64_t work;           /* see TT_MAX_WORK */
    int depth;               /* current nesting (parser and evaluator) */
    int line;                /* line being evaluated, for messages */
    tbuf *out;               /* current output (macro calls capture) */
    tframe *globals;
    int loop_ctl;            /* 1 = break, 2 = continue pending */
    bool raised;             /* the error came from raise_exception() */
    ttokens toks;            /* lexer output (malloc'd, freed by the render entry) */
    th_mem_budget *budget;   /* shared with other renders (th_chat_render_budget), or NULL */
    size_t budget_taken;     /* bytes of the arena taken from it */
    bool budget_out;         /* the failure was the shared budget */
};

/* value.c — arena, errors, constructors, conversions */
_Noreturn void tt_fail(tctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *tt_alloc(tctx *c, size_t n);
char *tt_strdup(tctx *c, const char *s, size_t n);
char *tt_printf(tctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tt_arena_free(tctx *c);
void tt_enter(tctx *c);      /* depth++ with the limit check */
void tt_leave(tctx *c);
/* Charge n units of work (bytes scanned, nodes evaluated); fails past TT_MAX_WORK,
 * so no template can run for long without allocating or looping. */
static inline void tt_work(tctx *c, uint64_t n) {
    c->work += n;
    if (c->work > TT_MAX_WORK)
        tt_fail(c, "template work limit exceeded (the template does too much computation)");
}

void tb_put(tctx *c, tbuf *b, const char *s, size_t n);
void tb_putc(tctx *c, tbuf *b, char ch);
tval tb_str(tbuf *b);

tval tv_undef(tctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tval tv_none(void);
tval tv_bool(bool b);
tval tv_int(int64_t i);
tval tv_float(double f);
tval tv_str(const char *p, size_t n);
tval tv_cstr(const char *p);
tval tv_strdup(tctx *c, const char *p, size_t n);
tval tv_list(tctx *c, size_t cap);
tval tv_dict(tctx *c, size_t cap);
tval tv_func(tctx *c, const char *name, tbuiltin fn, tval self);
void tl_push(tctx *c, tlist *l, tval v);
void td_set(tctx *c, tdict *d, tval key, tval val);
tval *td_get(tctx *c, tdict *d, tval key);
tval *td_gets(tdict *d, const char *key);

const char *tv_type_name(tval v);          /* Python type name: str, int, dict ... */
bool tv_truthy(tval v);
bool tv_equal(tctx *c, tval a, tval b);   /* Python ==; charges work */
bool tv_str_eq(tval v, const char *s);
_Noreturn void tv_undef_fail(tctx *c, tval v);
void tv_check_defined(tctx *c, tval v);
void tv_str_append(tctx *c, tbuf *b, tval v);   /* Python str() */
void tv_repr_append(tctx *c, tbuf *b, tval v);  /* Python repr() */
tval tv_to_str(tctx *c, tval v);
void tv_float_repr(double f, char *buf, size_t cap);
tlist *tv_iterate(tctx *c, tval v);        /* list of items (dict: keys; str: chars) */
size_t tv_utf8_len(const char *p, size_t n);
size_t tv_utf8_offset(const char *p, size_t n, size_t chars); /* byte offset of char index */
tval tv_from_json(tctx *c, const void *cjson, const char **numcur); /* numcur: JSON text */
typedef struct {
    int indent;              /* < 0: one line */
    const char *item_sep, *key_sep;
    bool ensure_ascii, sort_keys;
} tjson_opts;
void tv_to_json(tctx *c, tbuf *b, tval v, const tjson_opts *o, int level);

/* lexer.c */
void tt_lex(tctx *c, const char *src, size_t n, ttokens *out);

/* parser.c */
tnode *tt_parse(tctx *c, ttokens *toks);

/* eval.c */
tval tt_eval(tctx *c, tframe *f, tnode *n);
tval tt_call(tctx *c, tframe *f, tval fn, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw);
tval tt_getattr(tctx *c, tval obj, const char *name);
tval tt_getitem(tctx *c, tval obj, tval key);
tval tt_binop(tctx *c, int op, tval a, tval b);
bool tt_compare(tctx *c, int op, tval a, tval b);
tframe *tt_frame_new(tctx *c, tframe *parent);
void tt_frame_set(tctx *c, tframe *f, const char *name, tval v);
tval tt_frame_get(tctx *c, tframe *f, const char *name);

/* exec.c */
void tt_exec(tctx *c, tframe *f, tnode *body);
tval tt_call_macro(tctx *c, tfunc *fn, tval *args, size_t nargs, const char **kwn, tval *kwv, size_t nkw);

/* filters.c */
tval tt_filter(tctx *c, tframe *f, const char *name, tval v, tval *args, size_t nargs,
               const char **kwn, tval *kwv, size_t nkw);
bool tt_test(tctx *c, tframe *f, const char *name, tval v, tval *args, size_t nargs);
tval tt_method(tctx *c, tval obj, const char *name, bool *found);
void tt_install_globals(tctx *c, tframe *g);

#endif
