/* cmd_grammar.c — `theseus grammar (--grammar FILE.gbnf | --json-schema FILE.json) [--print] [--check]`:
 * parse a GBNF grammar or convert a JSON schema, print the (converted) GBNF, and match
 * stdin against it. Exit codes: 0 = valid (and, with --check, stdin is a complete match),
 * 1 = stdin does not match (the byte offset is named on stderr), 2 = invalid grammar or
 * schema, unreadable file, bad usage, or a matcher limit hit (too many parse stacks). */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus grammar (--grammar FILE.gbnf | --json-schema FILE.json) [--print] [--check]\n"
               "  --print   print the GBNF (a schema converted; a grammar as parsed, every rule)\n"
               "  --check   match stdin (all of it) against the grammar: exit 0 if it is a complete match,\n"
               "            1 if not (the byte offset where it failed is on stderr)\n"
               "exit 2: invalid grammar or schema (the message names line and column or the schema path)\n");
}

int cmd_grammar(int argc, char **argv) {
    const char *gpath = NULL, *spath = NULL;
    bool print = false, check = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--print")) print = true;
        else if (!strcmp(a, "--check")) check = true;
        else if (!strcmp(a, "--grammar") && has_val) gpath = argv[++i];
        else if (!strcmp(a, "--json-schema") && has_val) spath = argv[++i];
        else {
            fprintf(stderr, "theseus grammar: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!gpath == !spath) { usage(stderr); return 2; }
    const char *path = gpath ? gpath : spath;
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) { fprintf(stderr, "theseus grammar: cannot read %s\n", path); return 2; }

    char *gbnf = NULL;
    th_grammar *g = NULL;
    th_status s;
    if (spath) {
        s = th_json_schema_to_gbnf(text, len, &gbnf);
        if (s == TH_OK) s = th_grammar_parse(gbnf, strlen(gbnf), &g);
    } else {
        s = th_grammar_parse(text, len, &g);
    }
    if (s != TH_OK) {
        fprintf(stderr, "theseus grammar: %s: %s\n", path, th_last_error());
        free(text);
        free(gbnf);
        return 2;
    }
    int rc = 0;
    if (print) {
        char *out = gbnf;
        if (!out && th_grammar_to_gbnf(g, &out) != TH_OK) { rc = cli_fail("grammar", TH_ERR_NOMEM); out = NULL; }
        if (out) {
            fputs(out, stdout);
            if (fflush(stdout) != 0) rc = 2;
            if (out != gbnf) free(out);
        }
    }
    if (check && rc == 0) {
        size_t n;
        char *input = cli_read_stdin(&n);
        th_constraint *c = NULL;
        if (!input) { fprintf(stderr, "theseus grammar: cannot read stdin\n"); rc = 2; }
        else if ((s = th_constraint_new(g, NULL, &c)) != TH_OK) {
            fprintf(stderr, "theseus grammar: %s\n", th_last_error());
            rc = 2;
        } else {
            size_t ok_bytes = 0;
            s = th_constraint_accept_text(c, input, n, &ok_bytes);
            if (s == TH_ERR_FORMAT) {
                fprintf(stderr, "theseus grammar: no match at byte %zu\n", ok_bytes);
                rc = 1;
            } else if (s != TH_OK) {     /* a limit of the matcher: the grammar is too ambiguous for this input */
                fprintf(stderr, "theseus grammar: at byte %zu: %s\n", ok_bytes, th_last_error());
                rc = 2;
            } else if (!th_constraint_is_complete(c)) {
                fprintf(stderr, "theseus grammar: no match at byte %zu: the input ends before the grammar is complete\n", n);
                rc = 1;
            }
        }
        th_constraint_free(c);
        free(input);
    }
    th_grammar_free(g);
    free(gbnf);
    free(text);
    return rc;
}
