/* fuzz_gbnf.c — libFuzzer target for the GBNF parser and matcher: the input up to the
 * first NUL byte is the grammar, the rest is text to match. A grammar that parses must
 * print as GBNF that parses again (anything else is a bug: abort); the text goes through
 * th_constraint_accept_text in two pieces (so a character may be split). Errors and
 * limits are fine; crashes, sanitizer reports, hangs and leaks are not. */
#include "theseus.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t tlen = nul ? size - glen - 1 : 0;
    th_grammar *g = NULL;
    if (th_grammar_parse((const char *)data, glen, &g) != TH_OK) return 0;
    char *printed = NULL;
    if (th_grammar_to_gbnf(g, &printed) == TH_OK) {
        th_grammar *g2 = NULL;
        if (th_grammar_parse(printed, strlen(printed), &g2) != TH_OK) abort();   /* the printer wrote bad GBNF */
        th_grammar_free(g2);
        free(printed);
    }
    th_constraint *c = NULL;
    if (th_constraint_new(g, NULL, &c) == TH_OK) {
        size_t half = tlen / 2, n = 0;
        if (th_constraint_accept_text(c, text, half, &n) == TH_OK) th_constraint_accept_text(c, text + half, tlen - half, &n);
        (void)th_constraint_is_complete(c);
        (void)th_constraint_can_continue(c);
        th_constraint_reset(c);
        th_constraint_accept_text(c, text, tlen, &n);
        th_constraint_free(c);
    }
    th_grammar_free(g);
    return 0;
}
