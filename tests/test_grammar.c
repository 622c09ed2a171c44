/* test_grammar.c — GBNF grammars, the matcher, JSON schema conversion and constrained
 * sampling (src/sample/grammar_*.c, json_schema*.c).
 *
 * Data (tests/data/grammar/, see its README): llama.cpp's parser, integration and schema
 * tests ported to JSON (parser.json, integration.json, schemas.json), theseus' deliberate
 * differences from llama.cpp (deviations.json), llama.cpp's grammars/ with strings and
 * llama.cpp's verdicts on them (llama-grammars/), and our own schema cases (theseus.json).
 *
 * Extra modes for tests/t_grammar.sh and the golden scripts:
 *   test_grammar --generate FILE.gbnf N SEED   N random strings derived from the grammar, as JSON lines
 *   test_grammar --match FILE.gbnf             for each JSON-string line on stdin: 1 complete match, 0 not
 */
#include "check.h"
#include "theseus.h"
#include "sample/grammar_internal.h"

#include <cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>

static const char *data_dir(void) {
    const char *d = getenv("TH_GRAMMAR_DATA");
    return d && *d ? d : "tests/data/grammar";
}

static cJSON *load_json(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", data_dir(), name);
    char *t = check_read_file(path, NULL);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    return j;
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A grammar given as one string or as an array of lines. */
static char *grammar_text(const cJSON *v) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    size_t n = 1;
    for (const cJSON *l = v ? v->child : NULL; l; l = l->next) n += strlen(l->valuestring) + 1;
    char *s = malloc(n);
    s[0] = 0;
    for (const cJSON *l = v ? v->child : NULL; l; l = l->next) { strcat(s, l->valuestring); strcat(s, "\n"); }
    return s;
}

/* Does the whole of text match g? -1 when the matcher reports a limit. */
static int matches(const th_grammar *g, const char *text, size_t len) {
    th_constraint *c = NULL;
    if (th_constraint_new(g, NULL, &c) != TH_OK) return -1;
    th_status s = th_constraint_accept_text(c, text, len, NULL);
    int r = s == TH_OK ? th_constraint_is_complete(c) : s == TH_ERR_FORMAT ? 0 : -1;
    th_constraint_free(c);
    return r;
}

static th_grammar *schema_grammar(const cJSON *schema) {
    char *txt = cJSON_PrintUnformatted(schema);
    th_grammar *g = NULL;
    if (th_grammar_from_json_schema(txt, strlen(txt), &g) != TH_OK) g = NULL;
    free(txt);
    return g;
}

/* The entry of deviations.json for (file, case index), or NULL. */
static const cJSON *deviation(const cJSON *dev, const char *file, int index) {
    for (const cJSON *d = dev ? cJSON_GetObjectItemCaseSensitive(dev, "deviations")->child : NULL; d; d = d->next) {
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(d, "index");
        if (!strcmp(jstr(d, "file"), file) && cJSON_IsNumber(i) && i->valueint == index) return d;
    }
    return NULL;
}

/* Remove keys named in `strip` everywhere in v (in place). */
static void strip_keys(cJSON *v, const cJSON *strip) {
    if (!v) return;
    if (cJSON_IsObject(v))
        for (const cJSON *k = strip ? strip->child : NULL; k; k = k->next) cJSON_DeleteItemFromObjectCaseSensitive(v, k->valuestring);
    for (cJSON *c = v->child; c; c = c->next) strip_keys(c, strip);
}

/* ---------------------------------------------------------------- llama.cpp's tests */

static void test_parser_llama(void) {
    cJSON *j = load_json("parser.json");
    CHECK(j, "cannot load parser.json");
    if (!j) return;
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cases")->child; c; c = c->next, n++) {
        const char *gtext = jstr(c, "grammar");
        th_grammar *g = NULL;
        th_status s = th_grammar_parse(gtext, strlen(gtext), &g);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "error"))) {
            CHECK(s != TH_OK, "case %d: expected a parse error:\n%s", n, gtext);
        } else if (s != TH_OK) {
            CHECK(0, "case %d: %s", n, th_last_error());
        } else {
            char *dump = th_gbnf_dump(g);
            char *want = grammar_text(cJSON_GetObjectItemCaseSensitive(c, "rules"));
            CHECK(!strcmp(dump, want), "case %d: element layout differs from llama.cpp's\nwant:\n%s\ngot:\n%s", n, want, dump);
            free(dump);
            free(want);
        }
        th_grammar_free(g);
    }
    CHECK(n == 16, "%d parser cases", n);
    cJSON_Delete(j);
}

static void test_integration_llama(void) {
    cJSON *j = load_json("integration.json"), *dev = load_json("deviations.json");
    CHECK(j && dev, "cannot load integration.json / deviations.json");
    if (!j || !dev) { cJSON_Delete(j); cJSON_Delete(dev); return; }
    int idx = 0, n_str = 0;
    for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cases")->child; c; c = c->next, idx++) {
        const char *name = jstr(c, "name");
        const cJSON *d = deviation(dev, "integration.json", idx);
        cJSON *schema = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "schema"), 1);
        th_grammar *g = NULL;
        if (schema) {
            if (d && jstr(d, "error")) {     /* we refuse what llama.cpp silently ignores ... */
                char *txt = cJSON_PrintUnformatted(schema), *out = NULL;
                th_status s = th_json_schema_to_gbnf(txt, strlen(txt), &out);
                CHECK(s != TH_OK && strstr(th_last_error(), jstr(d, "error")), "%s: expected an error with '%s', got %s",
                      name, jstr(d, "error"), s == TH_OK ? "success" : th_last_error());
                free(txt);
                free(out);
                strip_keys(schema, cJSON_GetObjectItemCaseSensitive(d, "strip"));   /* ... and test the rest */
            }
            g = schema_grammar(schema);
            CHECK(g, "%s: schema conversion failed: %s", name, th_last_error());
        } else {
            const char *gt = jstr(c, "grammar");
            th_status s = th_grammar_parse(gt, strlen(gt), &g);
            if (jstr(c, "error")) {
                CHECK(s != TH_OK && strstr(th_last_error(), jstr(c, "error")), "%s: expected an error mentioning '%s', got %s",
                      name, jstr(c, "error"), s == TH_OK ? "success" : th_last_error());
                th_grammar_free(g);
                cJSON_Delete(schema);
                continue;
            }
            CHECK(s == TH_OK, "%s: %s", name, th_last_error());
        }
        for (int pass = 1; g && pass >= 0; pass--) {
            for (const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, pass ? "pass" : "fail")->child; t; t = t->next, n_str++) {
                int m = matches(g, t->valuestring, strlen(t->valuestring));
                CHECK(m == pass, "%s: '%s' should %s", name, t->valuestring, pass ? "match" : "not match");
            }
        }
        th_grammar_free(g);
        cJSON_Delete(schema);
    }
    CHECK(idx == 49 && n_str > 300, "%d cases, %d strings", idx, n_str);
    cJSON_Delete(j);
    cJSON_Delete(dev);
}

static void test_schemas_llama(void) {
    cJSON *j = load_json("schemas.json"), *dev = load_json("deviations.json");
    CHECK(j && dev, "cannot load schemas.json / deviations.json");
    if (!j || !dev) { cJSON_Delete(j); cJSON_Delete(dev); return; }
    int idx = 0, same = 0, differ = 0;
    for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cases")->child; c; c = c->next, idx++) {
        const char *name = jstr(c, "name");
        char *txt = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c, "schema")), *out = NULL;
        th_status s = th_json_schema_to_gbnf(txt, strlen(txt), &out);
        if (!strcmp(jstr(c, "status"), "FAILURE")) {
            CHECK(s != TH_OK, "%s: llama.cpp refuses this schema, we converted it", name);
        } else if (s != TH_OK) {
            CHECK(0, "%s: %s", name, th_last_error());
        } else {
            char *want = grammar_text(cJSON_GetObjectItemCaseSensitive(c, "llama_grammar"));
            const cJSON *d = deviation(dev, "schemas.json", idx);
            if (d) {
                CHECK(strcmp(out, want), "%s: listed as a deviation but identical to llama.cpp's grammar", name);
                differ++;
            } else {
                CHECK(!strcmp(out, want), "%s: grammar differs from llama.cpp's\nwant:\n%s\ngot:\n%s", name, want, out);
                same++;
            }
            free(want);
            th_grammar *g = NULL;
            CHECK(th_grammar_parse(out, strlen(out), &g) == TH_OK, "%s: our grammar does not parse: %s", name, th_last_error());
            th_grammar_free(g);
        }
        free(txt);
        free(out);
    }
    printf("  %d schema cases: %d grammars identical to llama.cpp's, %d deliberately different\n", idx, same, differ);
    CHECK(idx == 65 && same + differ == 63, "%d cases", idx);
    cJSON_Delete(j);
    cJSON_Delete(dev);
}

/* ---------------------------------------------------------------- generator */

typedef struct gen {
    const th_grammar *g;
    uint64_t rng;
    uint32_t *minlen;   /* per rule, UINT32_MAX = no finite derivation */
    char *out;
    size_t n, cap, budget;
    bool fail;
} gen;

static uint64_t rnd(gen *q) {
    q->rng ^= q->rng << 13; q->rng ^= q->rng >> 7; q->rng ^= q->rng << 17;
    return q->rng;
}

static void put_cp(gen *q, uint32_t c) {
    if (q->n + 5 > q->cap) { q->cap = q->cap * 2 + 64; q->out = realloc(q->out, q->cap); }
    unsigned char *u = (unsigned char *)q->out + q->n;
    if (c < 0x80) { u[0] = (unsigned char)c; q->n += 1; }
    else if (c < 0x800) { u[0] = (unsigned char)(0xC0 | c >> 6); u[1] = (unsigned char)(0x80 | (c & 63)); q->n += 2; }
    else if (c < 0x10000) { u[0] = (unsigned char)(0xE0 | c >> 12); u[1] = (unsigned char)(0x80 | (c >> 6 & 63)); u[2] = (unsigned char)(0x80 | (c & 63)); q->n += 3; }
    else { u[0] = (unsigned char)(0xF0 | c >> 18); u[1] = (unsigned char)(0x80 | (c >> 12 & 63)); u[2] = (unsigned char)(0x80 | (c >> 6 & 63)); u[3] = (unsigned char)(0x80 | (c & 63)); q->n += 4; }
}

/* Does the terminal at e accept c? (its own reading of the layout, not the matcher's) */
static bool term_has(const th_gelem *e, uint32_t c) {
    bool in = false, any = e->type == GE_CHAR_ANY;
    for (const th_gelem *p = e;; ) {
        if (p[1].type == GE_CHAR_RNG_UPPER) { if (p->value <= c && c <= p[1].value) in = true; p += 2; }
        else { if (p->type != GE_CHAR_ANY && p->value == c) in = true; p += 1; }
        if (p->type != GE_CHAR_ALT) break;
    }
    if (any) return true;
    return e->type == GE_CHAR_NOT ? !in : in;
}

static const th_gelem *term_end(const th_gelem *e) {
    do e += e[1].type == GE_CHAR_RNG_UPPER ? 2 : 1; while (e->type == GE_CHAR_ALT);
    return e;
}

static uint32_t pick_char(gen *q, const th_gelem *e) {
    if (e->type == GE_CHAR) {                /* a listed char or range */
        int n = 0;
        for (const th_gelem *p = e; p == e || p->type == GE_CHAR_ALT; p += p[1].type == GE_CHAR_RNG_UPPER ? 2 : 1) n++;
        for (int tries = 0; tries < 64; tries++) {
            int k = (int)(rnd(q) % (uint64_t)n);
            const th_gelem *p = e;
            while (k--) p += p[1].type == GE_CHAR_RNG_UPPER ? 2 : 1;
            uint32_t lo = p->value, hi = p[1].type == GE_CHAR_RNG_UPPER ? p[1].value : p->value;
            uint32_t c = lo + (uint32_t)(rnd(q) % ((uint64_t)hi - lo + 1));
            if (c < 0xD800 || c > 0xDFFF) return c;
        }
        q->fail = true;
        return 'x';
    }
    static const uint32_t extra[] = { 0xE9, 0xF1, 0x4E2D, 0x65E5, 0x1F600, 0x3B1, 0x416, 0x20AC };
    for (int tries = 0; tries < 200; tries++) {
        uint64_t r = rnd(q);
        uint32_t c = r % 10 < 7 ? 0x20 + (uint32_t)(r >> 8) % 95 : r % 10 < 8 ? (uint32_t)(r >> 8) % 0x20 : extra[(r >> 8) % 8];
        if (term_has(e, c)) return c;
    }
    q->fail = true;
    return 'x';
}

static uint32_t alt_cost(const gen *q, const th_gelem *e) {
    uint64_t s = 0;
    for (; !th_gelem_is_end(e); ) {
        if (e->type == GE_RULE_REF) { s += q->minlen[e->value]; e++; }
        else { s += 1; e = term_end(e); }
    }
    return s >= UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

static void compute_minlen(gen *q) {
    const th_grammar *g = q->g;
    for (uint32_t r = 0; r < g->n_rules; r++) q->minlen[r] = UINT32_MAX;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++)
            for (const th_gelem *a = g->elems + g->rule_off[r];;) {
                uint32_t c = alt_cost(q, a);
                if (c < q->minlen[r]) { q->minlen[r] = c; changed = true; }
                while (!th_gelem_is_end(a)) a++;
                if (a->type == GE_END) break;
                a++;
            }
    }
}

static void gen_rule(gen *q, uint32_t r, int depth) {
    const th_grammar *g = q->g;
    const th_gelem *alts[256];
    int n = 0, best = -1;
    uint32_t best_cost = UINT32_MAX;
    for (const th_gelem *a = g->elems + g->rule_off[r];;) {
        uint32_t c = alt_cost(q, a);
        if (c != UINT32_MAX && n < 256) {
            if (c < best_cost) { best_cost = c; best = n; }
            alts[n++] = a;
        }
        while (!th_gelem_is_end(a)) a++;
        if (a->type == GE_END) break;
        a++;
    }
    if (n == 0 || depth > 400) { q->fail = true; return; }
    const th_gelem *e = q->n > q->budget ? alts[best] : alts[rnd(q) % (uint64_t)n];
    while (!th_gelem_is_end(e) && !q->fail) {
        if (e->type == GE_RULE_REF) { gen_rule(q, e->value, depth + 1); e++; }
        else { put_cp(q, pick_char(q, e)); e = term_end(e); }
    }
}

/* A random string of g (NULL if the generator got stuck); malloc'd, *len its bytes. */
static char *generate(const th_grammar *g, uint64_t seed, size_t budget, size_t *len) {
    gen q = { .g = g, .rng = seed * 2654435761u + 0x9E3779B97F4A7C15ull, .budget = budget };
    q.minlen = malloc(g->n_rules * sizeof *q.minlen);
    compute_minlen(&q);
    for (int k = 0; k < 4; k++) rnd(&q);
    if (q.minlen[g->root] == UINT32_MAX) q.fail = true;
    else gen_rule(&q, g->root, 0);
    free(q.minlen);
    if (q.fail) { free(q.out); return NULL; }
    put_cp(&q, 0);
    *len = q.n - 1;
    return q.out;
}

/* ---------------------------------------------------------------- llama.cpp's grammars/ */

static void test_llama_grammars(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/llama-grammars", data_dir());
    DIR *d = opendir(dir);
    CHECK(d, "no %s", dir);
    if (!d) return;
    int n_gram = 0, n_gen = 0, n_cases = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        if (nl < 6 || strcmp(de->d_name + nl - 5, ".gbnf")) continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t len;
        char *text = check_read_file(path, &len);
        th_grammar *g = NULL;
        th_status s = text ? th_grammar_parse(text, len, &g) : TH_ERR_IO;
        CHECK(s == TH_OK, "%s: %s", de->d_name, th_last_error());
        n_gram++;
        for (int k = 0; g && k < 30; k++) {       /* strings generated from the grammar are accepted */
            size_t sl;
            char *str = generate(g, (uint64_t)k + 1, 60, &sl);
            if (!str) continue;
            CHECK(matches(g, str, sl) == 1, "%s: generated string not accepted: %s", de->d_name, str);
            n_gen++;
            free(str);
        }
        /* strings and mutations of them, with llama.cpp's verdicts */
        snprintf(path + strlen(path) - 5, 16, ".cases");
        char *cases = check_read_file(path, NULL);
        cJSON *cj = cases ? cJSON_Parse(cases) : NULL;
        const cJSON *strs = cJSON_GetObjectItemCaseSensitive(cj, "strings"), *ver = cJSON_GetObjectItemCaseSensitive(cj, "llama");
        CHECK(cj && cJSON_GetArraySize(strs) == cJSON_GetArraySize(ver), "%s: bad or missing %s", de->d_name, path);
        for (const cJSON *a = strs ? strs->child : NULL, *b = ver ? ver->child : NULL; g && a && b; a = a->next, b = b->next, n_cases++) {
            int m = matches(g, a->valuestring, strlen(a->valuestring));
            CHECK(m == b->valueint, "%s: llama.cpp says %d, we say %d for '%s'", de->d_name, b->valueint, m, a->valuestring);
        }
        cJSON_Delete(cj);
        free(cases);
        free(text);
        th_grammar_free(g);
    }
    closedir(d);
    printf("  %d grammars, %d generated strings accepted, %d strings agree with llama.cpp\n", n_gram, n_gen, n_cases);
    CHECK(n_gram == 8 && n_gen > 100 && n_cases > 300, "%d grammars, %d generated, %d cases", n_gram, n_gen, n_cases);
}

/* ---------------------------------------------------------------- errors and limits */

static void expect_error(const char *gbnf, const char *want) {
    th_grammar *g = NULL;
    th_status s = th_grammar_parse(gbnf, strlen(gbnf), &g);
    CHECK(s != TH_OK && strstr(th_last_error(), want), "grammar %.60s: want an error with '%s', got %s", gbnf, want,
          s == TH_OK ? "success" : th_last_error());
    th_grammar_free(g);
}

static void test_errors(void) {
    expect_error("root ::= foo\n", "line 1, column 10: undefined rule 'foo'");
    expect_error("root ::= \"a\"\n\nx ::= \"\\q\"\n", "line 3, column 8: unknown escape '\\q'");
    expect_error("root ::= [ab\n", "unterminated character class");
    expect_error("root ::= \"abc\n", "line 1, column 10: unterminated string literal");
    expect_error("root ::= (\"a\"\n", "expecting ')'");
    expect_error("root ::= \"a\")\n", "unbalanced ')'");
    expect_error("root ::= *\n", "expecting an item before the repetition operator");
    expect_error("root ::= \"a\"{,3}\n", "expecting an integer");
    expect_error("root ::= \"a\"{3,2}\n", "maximum is smaller");
    expect_error("root ::= []\n", "empty character class");
    expect_error("root ::= [z-a]\n", "reversed range");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
    expect_error("root := \"a\"\n", "expecting '::='");
    expect_error("x ::= \"a\"\n", "no rule named 'root'");
    expect_error("", "no rule named 'root'");
    expect_error("root ::= \"\\xZZ\"\n", "expecting 2 hex digits");
    expect_error("root ::= \"\\U00110000\"\n", "beyond U+10FFFF");
    expect_error("root ::= \"\xC3\x28\"\n", "invalid UTF-8");
    expect_error("root ::= a\na ::= b a\nb ::= \"x\" | c\nc ::= \"\"\n", "left recursion");  /* hidden, via nullable b */
    expect_error("root ::= x\nx ::= (\"a\" | x) \"b\"\n", "left recursion");
    th_grammar *g = NULL;
    CHECK(th_grammar_parse("root ::= \"a\\x00b\"\n", strlen("root ::= \"a\\x00b\"\n"), &g) == TH_OK, "NUL escape: %s", th_last_error());
    CHECK(g && matches(g, "a\0b", 3) == 1, "NUL in input");
    th_grammar_free(g);
    g = NULL;
    CHECK(th_grammar_parse("root ::= \"a\"\0", 13, &g) != TH_OK && strstr(th_last_error(), "NUL byte"), "raw NUL");
    th_grammar_free(g);
}

static void test_limits(void) {
    expect_error("root ::= \"a\"{5000000}\n", "too large");
    expect_error("root ::= \"ab\"{3000}{3000}\n", "grammar too large");
    char *deep = malloc(5000);
    strcpy(deep, "root ::= ");
    for (int i = 0; i < 2000; i++) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 2000; i++) strcat(deep, ")");
    expect_error(deep, "nested deeper than 1024");
    free(deep);
    /* ambiguity: after n x's the pending "a"/"b" suffixes make 2^n stacks: cut off with an error */
    th_grammar *g = NULL;
    const char *amb = "root ::= \"x\" root \"a\" | \"x\" root \"b\" | \"\"\n";
    CHECK(th_grammar_parse(amb, strlen(amb), &g) == TH_OK, "%s", th_last_error());
    th_constraint *c = NULL;
    th_status s = g ? th_constraint_new(g, NULL, &c) : TH_ERR_ARG;
    if (s == TH_OK) {
        char xs[64];
        memset(xs, 'x', sizeof xs);
        s = th_constraint_accept_text(c, xs, 20, NULL);
    }
    CHECK(s == TH_ERR_CAPACITY && strstr(th_last_error(), "parse stacks"), "ambiguous grammar: %s", th_last_error());
    th_constraint_free(c);
    th_grammar_free(g);
    /* deep nesting of the input is bounded by the stack depth limit */
    const char *nest = "root ::= \"(\" root \")\" | \"\"\n";
    CHECK(th_grammar_parse(nest, strlen(nest), &g) == TH_OK, "%s", th_last_error());
    size_t n = 40000;
    char *open = malloc(n);
    memset(open, '(', n);
    c = NULL;
    s = th_constraint_new(g, NULL, &c);
    if (s == TH_OK) s = th_constraint_accept_text(c, open, n, NULL);
    CHECK(s == TH_ERR_CAPACITY && strstr(th_last_error(), "deeper"), "deep input: %s", th_last_error());
    /* ... and after an error the state is unchanged: still at the start */
    CHECK(c && th_constraint_is_complete(c), "state kept after an error");
    th_constraint_free(c);
    free(open);
    /* the store keeps only the live state when it is rebuilt: stepping goes on the same */
    th_gstore *st = th_gstore_new(g);
    th_status err;
    uint32_t set = th_gstore_initial(st);
    for (int i = 0; i < 3; i++) set = th_gstore_step(st, set, '(', &err);
    uint32_t again = th_gstore_rebuild(st, set, &err);
    CHECK(again && th_gstore_generation(st) == 1 && !th_gstore_set_complete(st, again), "rebuild: %s", th_last_error());
    for (int i = 0; i < 3; i++) again = th_gstore_step(st, again, ')', &err);
    CHECK(again && th_gstore_set_complete(st, again), "after a rebuild");
    CHECK(!th_gstore_step(st, again, ')', &err) && err == TH_OK, "one ')' too many");
    th_gstore_free(st);
    th_grammar_free(g);
    /* a long input over a small state space: the memo keeps it cheap */
    const char *list = "root ::= item+\nitem ::= [a-z] [0-9]\n";
    th_grammar_parse(list, strlen(list), &g);
    c = NULL;
    th_constraint_new(g, NULL, &c);
    s = TH_OK;
    for (int i = 0; i < 20000 && s == TH_OK; i++) s = th_constraint_accept_text(c, "a1b2c3", 6, NULL);
    CHECK(s == TH_OK && th_constraint_is_complete(c), "long input: %s", th_last_error());
    th_constraint_free(c);
    th_grammar_free(g);
    /* text too large */
    char *big = calloc(1, (TH_GBNF_MAX_TEXT) + 2);
    g = NULL;
    CHECK(th_grammar_parse(big, TH_GBNF_MAX_TEXT + 1, &g) != TH_OK && strstr(th_last_error(), "limit"), "size limit");
    free(big);
}

/* ---------------------------------------------------------------- printing, UTF-8 */

static int cmp_line(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The lines of s, sorted and joined (printing order follows rule ids, which differ on re-parse). */
static char *sorted_lines(const char *s) {
    char *copy = strdup(s), *lines[4096];
    int n = 0;
    for (char *t = strtok(copy, "\n"); t && n < 4096; t = strtok(NULL, "\n")) lines[n++] = t;
    qsort(lines, (size_t)n, sizeof *lines, cmp_line);
    char *out = calloc(1, strlen(s) + 2);
    for (int i = 0; i < n; i++) { strcat(out, lines[i]); strcat(out, "\n"); }
    free(copy);
    return out;
}

static void test_print_roundtrip(void) {
    const char *files[] = { "json.gbnf", "c.gbnf", "chess.gbnf", "arithmetic.gbnf", "japanese.gbnf", "list.gbnf" };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/llama-grammars/%s", data_dir(), files[f]);
        size_t len;
        char *text = check_read_file(path, &len);
        th_grammar *g = NULL, *g2 = NULL, *g3 = NULL;
        char *p1 = NULL, *p2 = NULL;
        CHECK(text && th_grammar_parse(text, len, &g) == TH_OK, "%s", files[f]);
        if (g && th_grammar_to_gbnf(g, &p1) == TH_OK && th_grammar_parse(p1, strlen(p1), &g2) == TH_OK &&
            th_grammar_to_gbnf(g2, &p2) == TH_OK) {
            char *a = sorted_lines(p1), *b = sorted_lines(p2);
            CHECK(!strcmp(a, b), "%s: printing is not stable", files[f]);
            free(a);
            free(b);
            for (int k = 0; k < 20; k++) {     /* the printed grammar accepts what the original generates */
                size_t sl;
                char *str = generate(g, (uint64_t)k + 100, 60, &sl);
                if (str) CHECK(matches(g2, str, sl) == 1, "%s printed: '%s' not accepted", files[f], str);
                free(str);
            }
        } else CHECK(0, "%s: print/re-parse failed: %s", files[f], th_last_error());
        free(p1); free(p2); free(text);
        th_grammar_free(g); th_grammar_free(g2); th_grammar_free(g3);
    }
}

static void test_utf8(void) {
    const char *gt = "root ::= \"é\" [α-ω]+ \"😀\"\n";
    th_grammar *g = NULL;
    CHECK(th_grammar_parse(gt, strlen(gt), &g) == TH_OK, "%s", th_last_error());
    if (!g) return;
    const char *s = "éαβγ😀";
    size_t n = strlen(s);
    for (size_t cut = 0; cut <= n; cut++) {    /* any split of the bytes across two calls */
        th_constraint *c = NULL;
        th_constraint_new(g, NULL, &c);
        th_status a = th_constraint_accept_text(c, s, cut, NULL), b = th_constraint_accept_text(c, s + cut, n - cut, NULL);
        CHECK(a == TH_OK && b == TH_OK && th_constraint_is_complete(c), "split at %zu", cut);
        if (cut > 0 && cut < n && ((unsigned char)s[cut] & 0xC0) == 0x80)
            CHECK(1, "");
        th_constraint_free(c);
    }
    th_constraint *c = NULL;
    th_constraint_new(g, NULL, &c);
    size_t at = 99;
    CHECK(th_constraint_accept_text(c, "\xC3", 1, &at) == TH_OK && !th_constraint_is_complete(c), "partial é");
    CHECK(th_constraint_accept_text(c, "x", 1, &at) == TH_ERR_FORMAT && at == 0, "invalid continuation at %zu", at);
    CHECK(th_constraint_accept_text(c, "\xA9\xCE\xB1\xCE", 4, &at) == TH_OK, "é α + half");
    CHECK(th_constraint_accept_text(c, "\xC3\xA9", 2, &at) == TH_ERR_FORMAT && at == 0, "bad byte after a partial char: %zu", at);
    CHECK(th_constraint_accept_text(c, "\xB2\xF0\x9F\x98\x80", 5, &at) == TH_OK && th_constraint_is_complete(c), "complete");
    CHECK(th_constraint_accept_text(c, "\xED\xA0\x80", 3, &at) == TH_ERR_FORMAT && at == 0, "surrogate rejected");
    th_constraint_reset(c);
    CHECK(th_constraint_accept_text(c, "éa", 3, &at) == TH_ERR_FORMAT && at == 2, "mismatch offset %zu", at);
    CHECK(th_constraint_accept_text(c, "\xC0\x80", 2, &at) == TH_ERR_FORMAT && at == 0, "overlong rejected");
    th_constraint_free(c);
    th_grammar_free(g);
}

/* ---------------------------------------------------------------- schema errors (our own cases) */

static void test_theseus_schemas(void) {
    cJSON *j = load_json("theseus.json");
    CHECK(j, "cannot load theseus.json");
    if (!j) return;
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cases")->child; c; c = c->next, n++) {
        const char *name = jstr(c, "name"), *err = jstr(c, "error");
        const cJSON *depth = cJSON_GetObjectItemCaseSensitive(c, "schema_depth");
        char *txt, *out = NULL;
        if (jstr(c, "schema_text")) txt = strdup(jstr(c, "schema_text"));
        else if (depth) {                   /* {"items": {"items": ... {} ...}} */
            int d = depth->valueint;
            txt = malloc((size_t)d * 12 + 3);
            txt[0] = 0;
            for (int k = 0; k < d; k++) strcat(txt, "{\"items\":");
            strcat(txt, "{}");
            for (int k = 0; k < d; k++) strcat(txt, "}");
        } else txt = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c, "schema"));
        th_status s = th_json_schema_to_gbnf(txt, strlen(txt), &out);
        if (err) CHECK(s != TH_OK && strstr(th_last_error(), err), "%s: want an error with '%s', got %s", name, err,
                       s == TH_OK ? out : th_last_error());
        else {
            CHECK(s == TH_OK, "%s: %s", name, th_last_error());
            th_grammar *g = NULL;
            if (s == TH_OK) CHECK(th_grammar_parse(out, strlen(out), &g) == TH_OK, "%s: %s", name, th_last_error());
            th_grammar_free(g);
        }
        free(txt);
        free(out);
    }
    CHECK(n > 20, "%d cases", n);
    cJSON_Delete(j);
    /* found by fuzz_schema: JSON text that is not UTF-8 (cJSON passes it through) */
    char *out = NULL;
    const char bad[] = "{\"const\":\"\xA1\"}", nul[] = "{\"const\":\"a\0b\"}";
    CHECK(th_json_schema_to_gbnf(bad, sizeof bad - 1, &out) == TH_ERR_FORMAT && strstr(th_last_error(), "invalid UTF-8 at byte 10"),
          "invalid UTF-8: %s", th_last_error());
    CHECK(th_json_schema_to_gbnf(nul, sizeof nul - 1, &out) == TH_ERR_FORMAT && strstr(th_last_error(), "control character"),
          "raw NUL: %s", th_last_error());
    free(out);
}

/* ---------------------------------------------------------------- with a vocabulary */

static void test_vocab_mask(void) {
    th_model_params mp = th_model_default_params();
    mp.vocab_only = true;
    th_model *m = NULL;
    if (th_model_load(default_model_path(), &mp, &m) != TH_OK) SKIP("no %s", default_model_path());
    th_grammar_vocab *v = NULL;
    CHECK(th_grammar_vocab_new(m, &v) == TH_OK, "%s", th_last_error());
    int32_t nv = th_model_n_vocab(m);
    th_token eos = th_token_eos(m);
    const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\",\"minimum\":0,"
        "\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\\u00e9\"]}}},\"required\":[\"name\",\"age\"]}",
        "true",
    };
    float *logits = malloc((size_t)nv * sizeof *logits);
    for (size_t si = 0; v && si < 2; si++) {
        th_grammar *g = NULL;
        CHECK(th_grammar_from_json_schema(schemas[si], strlen(schemas[si]), &g) == TH_OK, "%s", th_last_error());
        th_constraint *c = NULL;
        CHECK(g && th_constraint_new(g, v, &c) == TH_OK, "%s", th_last_error());
        th_grammar_free(g);
        /* walk a document token by token; at every step the mask must equal the per-token check */
        const char *doc = si == 0 ? "{\"name\": \"Zoë 😀\", \"age\": 42, \"tags\": [\"bé\", \"a\"]}"
                                  : "[1, {\"x\": null}, \"\\u00e9t\u00e9\", -2.5e3, true]";
        th_token toks[256];
        size_t nt = 0;
        CHECK(th_tokenize(m, doc, strlen(doc), false, false, toks, 256, &nt) == TH_OK, "tokenize");
        int mismatches = 0;
        int32_t min_allowed = INT32_MAX, max_allowed = 0;
        for (size_t k = 0; c && k <= nt; k++) {
            for (int32_t t = 0; t < nv; t++) logits[t] = 0;
            int32_t n_allowed = -1;
            CHECK(th_constraint_apply(c, logits, &n_allowed) == TH_OK, "%s", th_last_error());
            int32_t count = 0;
            for (int32_t t = 0; t < nv; t++) {
                bool masked = logits[t] == -INFINITY, ok = th_constraint_allows(c, t);
                count += !masked;
                if (masked == ok && mismatches++ < 5) CHECK(0, "step %zu token %d: mask says %d, check says %d", k, t, !masked, ok);
            }
            CHECK(count == n_allowed, "step %zu: %d unmasked, apply says %d", k, count, n_allowed);
            if (n_allowed < min_allowed) min_allowed = n_allowed;
            if (n_allowed > max_allowed) max_allowed = n_allowed;
            CHECK(k == nt ? th_constraint_allows(c, eos) : !th_constraint_allows(c, eos), "EOS at step %zu", k);
            if (k < nt) CHECK(th_constraint_accept(c, toks[k]) == TH_OK, "token %zu: %s", k, th_last_error());
        }
        CHECK(c && th_constraint_is_complete(c), "document complete");
        printf("  schema %zu: %zu tokens, %d to %d of %d tokens allowed along the way\n", si, nt, min_allowed, max_allowed, nv);
        /* a disallowed token leaves the state alone */
        th_token brace;
        size_t one;
        th_tokenize(m, "}", 1, false, false, &brace, 1, &one);
        th_constraint_reset(c);
        CHECK(th_constraint_accept(c, brace) != TH_OK && !th_constraint_is_complete(c), "'}' at the start");
        CHECK(th_constraint_accept(c, eos) != TH_OK, "EOS at the start");
        th_constraint_free(c);
    }
    /* partial UTF-8 across tokens: byte-level BPE has a token per byte */
    const char *gt = "root ::= \"é\" | \"😀!\"\n";
    th_grammar *g = NULL;
    th_grammar_parse(gt, strlen(gt), &g);
    th_constraint *c = NULL;
    if (v && g && th_constraint_new(g, v, &c) == TH_OK) {
        th_token b1 = -1, b2 = -1;
        for (int32_t t = 0; t < nv; t++) {
            char piece[8];
            int32_t k = th_token_to_piece(m, t, piece, sizeof piece, false);
            if (k == 1 && (unsigned char)piece[0] == 0xF0) b1 = t;
            if (k == 1 && (unsigned char)piece[0] == 0xC3) b2 = t;
        }
        CHECK(b1 >= 0 && b2 >= 0, "byte tokens F0 / C3 in the vocabulary");
        CHECK(th_constraint_allows(c, b1) && th_constraint_allows(c, b2), "lead bytes allowed");
        CHECK(th_constraint_accept(c, b1) == TH_OK && !th_constraint_allows(c, b2) && !th_constraint_allows(c, eos),
              "after F0 only its continuation");
        for (int32_t t = 0; t < nv; t++) logits[t] = 1;
        int32_t n_allowed = 0;
        th_constraint_apply(c, logits, &n_allowed);
        CHECK(n_allowed >= 1 && logits[b2] == -INFINITY, "mask after a partial character: %d", n_allowed);
        th_sampler_params sp = th_sampler_default_params();
        sp.seed = 7;
        th_sampler *s = NULL;
        th_sampler_new(&sp, nv, &s);
        for (int32_t t = 0; t < nv; t++) logits[t] = (float)(t % 97) / 10;
        for (int step = 0; step < 8 && !th_constraint_is_complete(c); step++) {
            th_token t = th_constraint_sample(c, s, logits);
            CHECK(t >= 0 && th_constraint_accept(c, t) == TH_OK, "sampled token %d: %s", t, th_last_error());
        }
        CHECK(th_constraint_is_complete(c) && !th_constraint_can_continue(c), "😀! completed by sampling");
        CHECK(th_constraint_sample(c, s, logits) == eos || th_token_is_eog(m, th_constraint_sample(c, s, logits)), "then EOS");
        th_sampler_free(s);
    }
    th_constraint_free(c);
    th_grammar_free(g);
    free(logits);
    th_grammar_vocab_free(v);
    th_model_free(m);
}

/* ---------------------------------------------------------------- modes */

static int mode_generate(const char *path, int n, uint64_t seed) {
    size_t len;
    char *text = check_read_file(path, &len);
    th_grammar *g = NULL;
    if (!text || th_grammar_parse(text, len, &g) != TH_OK) { fprintf(stderr, "%s: %s\n", path, th_last_error()); return 2; }
    for (int k = 0; k < n; k++) {
        size_t sl;
        char *s = generate(g, seed + (uint64_t)k, 80, &sl);
        if (!s) continue;
        cJSON *js = cJSON_CreateString(s);
        char *line = cJSON_PrintUnformatted(js);
        puts(line);
        free(line);
        cJSON_Delete(js);
        free(s);
    }
    th_grammar_free(g);
    free(text);
    return 0;
}

static int mode_match(const char *path) {
    size_t len;
    char *text = check_read_file(path, &len);
    th_grammar *g = NULL;
    if (!text || th_grammar_parse(text, len, &g) != TH_OK) { fprintf(stderr, "%s: %s\n", path, th_last_error()); return 2; }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) > 0) {
        cJSON *js = cJSON_Parse(line);
        if (!cJSON_IsString(js)) { printf("?\n"); cJSON_Delete(js); continue; }
        /* cJSON strings stop at NUL; JSON lines here carry none */
        printf("%d\n", matches(g, js->valuestring, strlen(js->valuestring)));
        cJSON_Delete(js);
    }
    free(line);
    th_grammar_free(g);
    free(text);
    return 0;
}

/* Seeds for tests/fuzz: every grammar of the data (with a string it matches after a NUL)
 * into DIR/gbnf, every schema into DIR/schema. */
static int mode_seeds(const char *dir) {
    char path[1200];
    int n = 0;
    const char *files[] = { "parser.json", "integration.json", "schemas.json", "theseus.json" };
    for (int f = 0; f < 4; f++) {
        cJSON *j = load_json(files[f]);
        for (const cJSON *c = j ? cJSON_GetObjectItemCaseSensitive(j, "cases")->child : NULL; c; c = c->next) {
            const cJSON *sch = cJSON_GetObjectItemCaseSensitive(c, "schema"), *gr = cJSON_GetObjectItemCaseSensitive(c, "grammar");
            const cJSON *pass = cJSON_GetObjectItemCaseSensitive(c, "pass");
            snprintf(path, sizeof path, "%s/%s/%s-%d", dir, sch ? "schema" : "gbnf", files[f], n++);
            FILE *o = fopen(path, "wb");
            if (!o) { fprintf(stderr, "cannot write %s\n", path); return 1; }
            if (sch) {
                char *t = cJSON_PrintUnformatted(sch);
                fputs(t, o);
                free(t);
            } else if (gr) {
                char *t = grammar_text(gr);
                fputs(t, o);
                free(t);
                if (pass && pass->child) { fputc(0, o); fputs(pass->child->valuestring, o); }
            }
            fclose(o);
        }
        cJSON_Delete(j);
    }
    snprintf(path, sizeof path, "%s/llama-grammars", data_dir());
    DIR *d = opendir(path);
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t nl = strlen(de->d_name);
        if (nl < 6 || strcmp(de->d_name + nl - 5, ".gbnf")) continue;
        char src[1300], dst[1300];
        snprintf(src, sizeof src, "%s/%s", path, de->d_name);
        snprintf(dst, sizeof dst, "%s/gbnf/%s", dir, de->d_name);
        size_t len;
        char *t = check_read_file(src, &len);
        FILE *o = fopen(dst, "wb");
        if (t && o) fwrite(t, 1, len, o);
        if (o) fclose(o);
        free(t);
        n++;
    }
    if (d) closedir(d);
    printf("%d seeds\n", n);
    return 0;
}

/* A schema whose grammar exceeds the parser's limits (found by fuzz_schema: a key trie
 * over a long property name nests deeper than 1024): both entry points refuse it with
 * a message, neither hands out GBNF that would not load. */
static void test_schema_beyond_limits(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz-schema-deep.json", data_dir());
    size_t n = 0;
    char *text = check_read_file(path, &n);
    if (!text) { CHECK(0, "cannot read %s", path); return; }
    char *gbnf = NULL;
    th_status s = th_json_schema_to_gbnf(text, n, &gbnf);
    CHECK(s == TH_ERR_UNSUPPORTED && !gbnf && strstr(th_last_error(), "does not parse"), "to_gbnf: %d %s", s, th_last_error());
    th_grammar *g = NULL;
    s = th_grammar_from_json_schema(text, n, &g);
    CHECK(s == TH_ERR_UNSUPPORTED && !g && strstr(th_last_error(), "nested deeper"), "from_json_schema: %d %s", s, th_last_error());
    free(gbnf);
    th_grammar_free(g);
    free(text);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return mode_seeds(argv[2]);
    if (argc == 5 && !strcmp(argv[1], "--generate")) return mode_generate(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "--match")) return mode_match(argv[2]);
    RUN(test_parser_llama);
    RUN(test_integration_llama);
    RUN(test_schemas_llama);
    RUN(test_llama_grammars);
    RUN(test_errors);
    RUN(test_limits);
    RUN(test_schema_beyond_limits);
    RUN(test_print_roundtrip);
    RUN(test_utf8);
    RUN(test_theseus_schemas);
    RUN(test_vocab_mask);
    return CHECK_DONE();
}
