/* fuzz_schema.c — libFuzzer target for the JSON-schema converter: the input is the
 * schema. A schema that converts must give GBNF that parses (anything else is a bug:
 * abort); the schema text itself, a JSON document, is then matched against its grammar.
 * Errors are fine; crashes, sanitizer reports, hangs and leaks are not. */
#include "theseus.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *gbnf = NULL;
    if (th_json_schema_to_gbnf((const char *)data, size, &gbnf) != TH_OK) return 0;
    th_grammar *g = NULL;
    if (th_grammar_parse(gbnf, strlen(gbnf), &g) != TH_OK) abort();   /* the converter wrote bad GBNF */
    th_constraint *c = NULL;
    if (th_constraint_new(g, NULL, &c) == TH_OK) {
        size_t n;
        th_constraint_accept_text(c, (const char *)data, size, &n);
        (void)th_constraint_is_complete(c);
        th_constraint_free(c);
    }
    th_grammar_free(g);
    free(gbnf);
    return 0;
}
