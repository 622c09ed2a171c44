/* grammar_internal.h — the library-internal side of GBNF grammars (src/sample/grammar_*.c):
 * the parsed rule layout, the parse-stack store the matcher and the token mask share,
 * and the limits that keep a hostile grammar or input bounded.
 *
 * Layout (llama.cpp's, so its parser tests apply unchanged): every rule is a run of
 * elements ending in GE_END; GE_ALT separates alternatives; a terminal is one of
 * GE_CHAR / GE_CHAR_NOT / GE_CHAR_ANY followed by GE_CHAR_ALT (another char) and
 * GE_CHAR_RNG_UPPER (turns the char before it into a range) elements. All rules are
 * stored back to back in one array; rule r starts at rule_off[r].
 *
 * A parse stack is a linked list of positions (element indices) interned in a hash
 * table, so equal stacks are equal ids and shared tails cost nothing; stack id 0 is
 * the empty stack (the grammar is complete). A parser state is a set of stacks,
 * interned the same way (set id 0 = no stack: dead). Stepping a set by a code point
 * is memoized per (set, code point), so the walks of the token trie turn into table
 * look-ups once a state has been seen. */
#ifndef TH_SAMPLE_GRAMMAR_INTERNAL_H
#define TH_SAMPLE_GRAMMAR_INTERNAL_H

#include "theseus.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    GE_END = 0,          /* end of rule */
    GE_ALT = 1,          /* start of another alternative */
    GE_RULE_REF = 2,     /* value = rule id */
    GE_CHAR = 3,         /* value = code point */
    GE_CHAR_NOT = 4,     /* [^...]: first char of a negated class */
    GE_CHAR_RNG_UPPER = 5, /* upper end of a range starting at the previous char */
    GE_CHAR_ALT = 6,     /* another char of the same class */
    GE_CHAR_ANY = 7,     /* . */
};

typedef struct th_gelem {
    uint32_t type;
    uint32_t value;
} th_gelem;

/* Limits. Text and element counts bound memory; nesting bounds the parser's recursion;
 * the stack limits bound the work of one step. Every one ends in an error naming it. */
#define TH_GBNF_MAX_TEXT      (16u << 20) /* bytes of grammar text */
#define TH_GBNF_MAX_ELEMS     (1u << 22)  /* elements after repetitions are expanded */
#define TH_GBNF_MAX_RULES     (1u << 20)
#define TH_GBNF_MAX_NESTING   1024        /* nested parentheses */
#define TH_GRAMMAR_MAX_STACKS 8192        /* parse stacks alive at once */
#define TH_GRAMMAR_MAX_DEPTH  16384       /* positions on one parse stack */
#define TH_GRAMMAR_MAX_VISITS (1u << 20)  /* stack expansions in one step */
#define TH_GRAMMAR_STORE_MAX  (1u << 22)  /* interned stacks/sets/transitions before a rebuild */

struct th_grammar {
    th_gelem *elems;     /* all rules back to back */
    uint32_t n_elems;
    uint32_t *rule_off;  /* [n_rules] start of each rule in elems */
    uint32_t n_rules;
    char **names;        /* [n_rules] rule names; generated ones are "base_N" */
    uint8_t *generated;  /* [n_rules] 1 for rules made for groups and repetitions */
    uint32_t root;       /* rule id of "root" */
};

/* grammar_parse.c */
th_status th_gbnf_parse(const char *text, size_t len, th_grammar **out);
/* Rules in id order as "id name ::= ELEM ELEM ..." lines (see grammar_parse.c): the
 * form the parser tests compare with llama.cpp's element layout. malloc'd. */
char *th_gbnf_dump(const th_grammar *g);
bool th_gelem_is_end(const th_gelem *e);   /* GE_END or GE_ALT */

/* grammar_match.c — the stack store */
typedef struct th_gstore th_gstore;

typedef struct th_utf8_partial {
    uint32_t value;      /* bits so far */
    uint8_t n_remain;    /* continuation bytes still to come (0: none pending) */
    uint8_t lo, hi;      /* allowed range of the next continuation byte */
} th_utf8_partial;

th_gstore *th_gstore_new(const th_grammar *g);
void th_gstore_free(th_gstore *s);
/* The set of stacks the grammar starts in (its root's alternatives, expanded). 0 on error. */
uint32_t th_gstore_initial(th_gstore *s);
/* The set after code point cp; 0 when no stack accepts it (or on error: then
 * *err is set to the status and th_last_error says why). Memoized. */
uint32_t th_gstore_step(th_gstore *s, uint32_t set, uint32_t cp, th_status *err);
bool th_gstore_set_complete(const th_gstore *s, uint32_t set);  /* holds the empty stack */
/* True when some code point starting with the partial UTF-8 sequence p could be
 * accepted by a stack of set (pruning of the token trie, llama.cpp's partial match). */
bool th_gstore_partial_ok(const th_gstore *s, uint32_t set, const th_utf8_partial *p);
/* True when some stack of set can still take a code point (it is not only the empty stack). */
bool th_gstore_set_can_continue(const th_gstore *s, uint32_t set);
/* Bytes in use; when over TH_GRAMMAR_STORE_MAX entries, th_gstore_rebuild keeps only `set`
 * (re-interned: returns its new id) and forgets everything else. */
bool th_gstore_full(const th_gstore *s);
uint32_t th_gstore_rebuild(th_gstore *s, uint32_t set, th_status *err);
uint64_t th_gstore_generation(const th_gstore *s);  /* bumped by every rebuild */

/* UTF-8 decoding one byte at a time, strict (no overlongs, surrogates, > U+10FFFF).
 * Returns 1 when a code point completed (*cp), 0 when more bytes are needed, -1 when the
 * byte is invalid here. */
int th_utf8_feed(th_utf8_partial *p, uint8_t byte, uint32_t *cp);

/* json_schema*.c */
th_status th_json_schema_convert(const char *schema, size_t len, char **gbnf_out);

#endif
