/* json_schema.c — JSON schema to GBNF (th_json_schema_to_gbnf): the subset llama.cpp's
 * json-schema-to-grammar converts, written in the same shape (rule names, the built-in
 * rules, property order, additionalProperties false unless given, at most 16 digits), so
 * llama.cpp's expected grammars apply (json_schema_int.c and json_schema_regex.c say
 * where and why a few differ).
 *
 * Supported: type (one or a list), const, enum, properties / required /
 * additionalProperties, items / prefixItems / additionalItems / minItems / maxItems,
 * minLength / maxLength, pattern, format date / time / date-time / uuid, integer minimum /
 * maximum / exclusive bounds, anyOf / oneOf (as anyOf), allOf of object schemas, local
 * $ref (#/$defs/..., #/definitions/..., any JSON pointer; recursion works), boolean
 * schemas. A schema without assertion keywords is `{}`, which (as in llama.cpp) allows
 * any object; `true` allows any value.
 *
 * Never looser than the schema: every keyword that constrains values is either handled
 * by the branch taken or must be vacuous for the types the grammar can produce (each
 * rule knows its JSON types), else the conversion fails naming the keyword and its JSON
 * pointer (uniqueItems, not, if, multipleOf, minimum on a number, minProperties,
 * patternProperties, contains ... and combinations such as pattern with minLength).
 * Known gaps, documented rather than checked: oneOf is treated as anyOf; an additional
 * property whose key is written with \u escapes is not recognised as a declared key. */
#include "core/core.h"
#include "sample/grammar_internal.h"
#include "sample/json_schema_internal.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct jrule { char *name, *body; } jrule;
typedef struct jref { char *ref, *name; unsigned types; bool busy, used_busy; } jref;

struct jconv {
    const cJSON *root;
    jrule *rules;
    size_t n_rules, cap_rules;
    size_t *ht, ht_cap;          /* rule index + 1 by name */
    jref *refs;
    size_t n_refs, cap_refs;
    int depth;
    size_t out_bytes;
    bool failed;
    th_status status;
};

/* ---------------------------------------------------------------- GBNF text */

void jsb_gbnf_escape(th_bytes *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') th_bytes_str(b, "\\\"");
        else if (ch == '\\') th_bytes_str(b, "\\\\");
        else if (ch == '\n') th_bytes_str(b, "\\n");
        else if (ch == '\r') th_bytes_str(b, "\\r");
        else if (ch == '\t') th_bytes_str(b, "\\t");
        else if (ch < 0x20 || ch == 0x7F) th_bytes_printf(b, "\\x%02X", ch);
        else th_bytes_put(b, (const char *)&ch, 1);
    }
}

void jsb_gbnf_literal(th_bytes *b, const char *s, size_t n) {
    th_bytes_str(b, "\"");
    jsb_gbnf_escape(b, s, n);
    th_bytes_str(b, "\"");
}

/* ---------------------------------------------------------------- errors, names, rules */

bool jconv_fail(jconv *c, const char *path, th_status s, const char *fmt, ...) {
    if (c->failed) return false;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    th_set_error(s, "JSON schema %s: %s", path && *path ? path : "#", msg);
    c->failed = true;
    c->status = s;
    return false;
}

bool jconv_failed(const jconv *c) { return c->failed; }

bool js_nomem(jconv *c) { return jconv_fail(c, "", TH_ERR_NOMEM, "out of memory"); }

char *js_cat3(const char *a, const char *b, const char *d) {
    size_t la = strlen(a), lb = strlen(b), ld = strlen(d);
    char *s = malloc(la + lb + ld + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, d, ld + 1);
    return s;
}

/* name + "-" + part (no dash when name is empty): llama.cpp's sub-rule names */
char *js_sub_name(const char *name, const char *part) { return js_cat3(name, *name ? "-" : "", part); }

/* A JSON pointer one step further (~ and / escaped). */
char *js_path_join(const char *path, const char *key) {
    th_bytes b = JSB_INIT;
    th_bytes_str(&b, path);
    th_bytes_str(&b, "/");
    for (const char *k = key; *k; k++) {
        if (*k == '~') th_bytes_str(&b, "~0");
        else if (*k == '/') th_bytes_str(&b, "~1");
        else th_bytes_put(&b, k, 1);
    }
    return th_bytes_take(&b);
}

char *js_path_index(const char *path, const char *key, size_t i) {
    char num[32];
    snprintf(num, sizeof num, "%zu", i);
    char *p = js_path_join(path, key);
    if (!p) return NULL;
    char *q = js_path_join(p, num);
    free(p);
    return q;
}

/* Runs of characters outside [a-zA-Z0-9-] become one '-'. */
static char *sanitize(const char *name) {
    size_t n = strlen(name), k = 0;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < n;) {
        char ch = name[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-') {
            s[k++] = ch;
            i++;
        } else {
            s[k++] = '-';
            while (i < n && !((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                              (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
                i++;
        }
    }
    s[k] = 0;
    return s;
}

static size_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

static jrule *find_rule(const jconv *c, const char *name) {
    if (!c->ht_cap) return NULL;
    for (size_t h = hash_str(name) & (c->ht_cap - 1); c->ht[h]; h = (h + 1) & (c->ht_cap - 1))
        if (!strcmp(c->rules[c->ht[h] - 1].name, name)) return &c->rules[c->ht[h] - 1];
    return NULL;
}

static bool insert_rule(jconv *c, char *name, char *body) {
    if ((c->n_rules + 1) * 2 > c->ht_cap) {
        size_t cap = c->ht_cap ? c->ht_cap * 2 : 64;
        size_t *ht = calloc(cap, sizeof *ht);
        if (!ht) return js_nomem(c);
        for (size_t i = 0; i < c->n_rules; i++) {
            size_t h = hash_str(c->rules[i].name) & (cap - 1);
            while (ht[h]) h = (h + 1) & (cap - 1);
            ht[h] = i + 1;
        }
        free(c->ht);
        c->ht = ht;
        c->ht_cap = cap;
    }
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? c->cap_rules * 2 : 32;
        jrule *r = realloc(c->rules, cap * sizeof *r);
        if (!r) return js_nomem(c);
        c->rules = r;
        c->cap_rules = cap;
    }
    c->rules[c->n_rules] = (jrule){ name, body };
    size_t h = hash_str(name) & (c->ht_cap - 1);
    while (c->ht[h]) h = (h + 1) & (c->ht_cap - 1);
    c->ht[h] = ++c->n_rules;
    return true;
}

const char *jconv_add_rule(jconv *c, const char *name, const char *body) {
    if (c->failed) return NULL;
    if (!body) { js_nomem(c); return NULL; }
    char *esc = sanitize(name);
    if (!esc) { js_nomem(c); return NULL; }
    jrule *r = find_rule(c, esc);
    if (r && r->body && !strcmp(r->body, body)) { free(esc); return r->name; }
    char *key = esc;
    if (r) {
        size_t n = strlen(esc);
        key = malloc(n + 24);
        if (!key) { free(esc); js_nomem(c); return NULL; }
        for (unsigned i = 0;; i++) {
            snprintf(key, n + 24, "%s%u", esc, i);
            jrule *q = find_rule(c, key);
            if (!q) break;
            if (q->body && !strcmp(q->body, body)) { free(esc); free(key); return q->name; }
        }
        free(esc);
    }
    c->out_bytes += strlen(key) + strlen(body) + 6;
    if (c->out_bytes > TH_JSON_SCHEMA_MAX_OUTPUT) {
        free(key);
        jconv_fail(c, "", TH_ERR_CAPACITY, "the grammar would be larger than %u bytes", TH_JSON_SCHEMA_MAX_OUTPUT);
        return NULL;
    }
    char *b = strdup(body);
    if (!b || !insert_rule(c, key, b)) { free(key); free(b); js_nomem(c); return NULL; }
    return key;
}

/* ---------------------------------------------------------------- built-in rules */

typedef struct prim { const char *name, *body, *deps[6]; } prim;

static const prim PRIMS[] = {
    { "boolean", "(\"true\" | \"false\") space", { 0 } },
    { "decimal-part", "[0-9]{1,16}", { 0 } },
    { "integral-part", "[0] | [1-9] [0-9]{0,15}", { 0 } },
    { "number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
      { "integral-part", "decimal-part" } },
    { "integer", "(\"-\"? integral-part) space", { "integral-part" } },
    { "value", "object | array | string | number | boolean | null",
      { "object", "array", "string", "number", "boolean", "null" } },
    { "object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
      { "string", "value" } },
    { "array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", { "value" } },
    { "uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
              "[0-9a-fA-F]{12} \"\\\"\" space", { 0 } },
    { "char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", { 0 } },
    { "string", "\"\\\"\" char* \"\\\"\" space", { "char" } },
    { "null", "\"null\" space", { 0 } },
    /* string formats. llama.cpp's date allows any day 01-31 in any month; this one only real dates
     * (years 0001-9999, February 29 in leap years) */
    { "date", "( [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9] ) \"-\" "
              "( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] ) "
              "| ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"30\" ) "
              "| \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) "
              "| ( [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\" ) \"-02-29\"",
      { 0 } },
    { "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) "
              "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", { 0 } },
    { "date-time", "date \"T\" time", { "date", "time" } },
    { "date-string", "\"\\\"\" date \"\\\"\" space", { "date" } },
    { "time-string", "\"\\\"\" time \"\\\"\" space", { "time" } },
    { "date-time-string", "\"\\\"\" date-time \"\\\"\" space", { "date-time" } },
    /* not llama.cpp's: what `.` of a pattern can be in JSON text (no raw quote, backslash or
     * control character, their short escapes instead), and a string character that is not a
     * \u escape of a surrogate (minLength >= 2 counts characters as the schema does) */
    { "dot", "[^\\x0A\\x0D\\u2028\\u2029\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bft]", { 0 } },
    { "char-nosurrogate", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | "
                          "[dD] [0-7] [0-9a-fA-F]{2}))", { 0 } },
};

/* llama.cpp's reserved names: a schema rule with one of these names gets a '-' appended */
static bool is_reserved(const char *name) {
    if (!strcmp(name, "root")) return true;
    for (size_t i = 0; i < sizeof PRIMS / sizeof PRIMS[0]; i++)
        if (!strcmp(PRIMS[i].name, name) && strcmp(name, "dot") && strcmp(name, "char-nosurrogate")) return true;
    return false;
}

static const prim *find_prim(const char *name) {
    for (size_t i = 0; i < sizeof PRIMS / sizeof PRIMS[0]; i++)
        if (!strcmp(PRIMS[i].name, name)) return &PRIMS[i];
    return NULL;
}

/* Built-in `p` under the name `as`, and its dependencies under their own names. */
static const char *add_primitive_as(jconv *c, const char *as, const prim *p) {
    const char *n = jconv_add_rule(c, as, p->body);
    for (int k = 0; n && k < 6 && p->deps[k]; k++)
        if (!find_rule(c, p->deps[k]) && !add_primitive_as(c, p->deps[k], find_prim(p->deps[k]))) return NULL;
    return n;
}

const char *jconv_add_primitive(jconv *c, const char *name) {
    const prim *p = find_prim(name);
    if (!p) { jconv_fail(c, "", TH_ERR_INTERNAL, "no built-in rule '%s'", name); return NULL; }
    return add_primitive_as(c, name, p);
}

/* ---------------------------------------------------------------- keywords */

/* Keywords that constrain values, and the JSON types they constrain. */
static const struct { const char *kw; unsigned applies; } KW[] = {
    { "type", T_ALL }, { "enum", T_ALL }, { "const", T_ALL }, { "allOf", T_ALL }, { "anyOf", T_ALL }, { "oneOf", T_ALL },
    { "not", T_ALL }, { "if", T_ALL }, { "then", T_ALL }, { "else", T_ALL }, { "$ref", T_ALL },
    { "$dynamicRef", T_ALL }, { "$recursiveRef", T_ALL },
    { "multipleOf", T_INT | T_NUM }, { "maximum", T_INT | T_NUM }, { "exclusiveMaximum", T_INT | T_NUM },
    { "minimum", T_INT | T_NUM }, { "exclusiveMinimum", T_INT | T_NUM },
    { "maxLength", T_STR }, { "minLength", T_STR }, { "pattern", T_STR }, { "format", T_STR },
    { "contentSchema", T_STR },
    { "items", T_ARR }, { "prefixItems", T_ARR }, { "additionalItems", T_ARR }, { "unevaluatedItems", T_ARR },
    { "contains", T_ARR }, { "minContains", T_ARR }, { "maxContains", T_ARR }, { "minItems", T_ARR },
    { "maxItems", T_ARR }, { "uniqueItems", T_ARR },
    { "properties", T_OBJ }, { "required", T_OBJ }, { "additionalProperties", T_OBJ }, { "patternProperties", T_OBJ },
    { "propertyNames", T_OBJ }, { "unevaluatedProperties", T_OBJ }, { "minProperties", T_OBJ },
    { "maxProperties", T_OBJ }, { "dependentRequired", T_OBJ }, { "dependentSchemas", T_OBJ },
    { "dependencies", T_OBJ },
};
#define N_KW ((int)(sizeof KW / sizeof KW[0]))

static int kw_index(const char *k) {
    for (int i = 0; i < N_KW; i++)
        if (!strcmp(KW[i].kw, k)) return i;
    return -1;
}

uint64_t js_kw_bit(const char *k) { int i = kw_index(k); return i < 0 ? 0 : 1ull << i; }

static bool known_format(const char *f) {
    return !strcmp(f, "date") || !strcmp(f, "time") || !strcmp(f, "date-time") ||
           (!strncmp(f, "uuid", 4) && (f[4] == 0 || (f[4] >= '1' && f[4] <= '5' && f[5] == 0)));
}

/* A keyword whose value constrains nothing. */
static bool vacuous(const cJSON *v) {
    const char *k = v->string;
    if (!strcmp(k, "format")) return !cJSON_IsString(v) || !known_format(v->valuestring);
    if (!strcmp(k, "uniqueItems")) return cJSON_IsFalse(v);
    if (!strcmp(k, "minItems") || !strcmp(k, "minLength") || !strcmp(k, "minProperties") || !strcmp(k, "minContains"))
        return cJSON_IsNumber(v) && v->valuedouble == 0;
    if (!strcmp(k, "required") || !strcmp(k, "allOf")) return cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0;
    if (!strcmp(k, "properties") || !strcmp(k, "patternProperties") || !strcmp(k, "dependentRequired") ||
        !strcmp(k, "dependentSchemas") || !strcmp(k, "dependencies"))
        return cJSON_IsObject(v) && !v->child;
    if (!strcmp(k, "additionalProperties") || !strcmp(k, "additionalItems") || !strcmp(k, "items") ||
        !strcmp(k, "unevaluatedItems") || !strcmp(k, "unevaluatedProperties") || !strcmp(k, "propertyNames") ||
        !strcmp(k, "contentSchema"))
        return cJSON_IsTrue(v) || (cJSON_IsObject(v) && !v->child);
    return false;
}

static const char *why_unsupported(const char *k) {
    if (!strcmp(k, "uniqueItems")) return "uniqueItems is not supported (a grammar cannot compare array items)";
    if (!strcmp(k, "minimum") || !strcmp(k, "maximum") || !strcmp(k, "exclusiveMinimum") || !strcmp(k, "exclusiveMaximum"))
        return "bounds are only supported for \"type\": \"integer\"";
    if (!strcmp(k, "not") || !strcmp(k, "if") || !strcmp(k, "then") || !strcmp(k, "else"))
        return "not / if / then / else are not supported";
    return NULL;
}

static unsigned type_mask(const char *t) {
    if (!strcmp(t, "null")) return T_NULL;
    if (!strcmp(t, "boolean")) return T_BOOL;
    if (!strcmp(t, "object")) return T_OBJ;
    if (!strcmp(t, "array")) return T_ARR;
    if (!strcmp(t, "string")) return T_STR;
    if (!strcmp(t, "integer")) return T_INT;
    if (!strcmp(t, "number")) return T_INT | T_NUM;
    return 0;
}

static unsigned value_type(const cJSON *v) {
    if (cJSON_IsNull(v)) return T_NULL;
    if (cJSON_IsBool(v)) return T_BOOL;
    if (cJSON_IsString(v)) return T_STR;
    if (cJSON_IsArray(v)) return T_ARR;
    if (cJSON_IsObject(v)) return T_OBJ;
    return floor(v->valuedouble) == v->valuedouble ? T_INT : T_NUM;
}

const cJSON *js_get(const cJSON *s, const char *k) { return cJSON_GetObjectItemCaseSensitive(s, k); }

/* A count keyword (minItems ...): a non-negative integer up to the limit. */
bool js_get_count(jconv *c, const cJSON *s, const char *k, long def, long *out, const char *path) {
    const cJSON *v = js_get(s, k);
    if (!v) { *out = def; return true; }
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || floor(v->valuedouble) != v->valuedouble)
        return jconv_fail(c, path, TH_ERR_FORMAT, "'%s' must be a non-negative integer", k);
    if (v->valuedouble > TH_JSON_SCHEMA_MAX_COUNT)
        return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "'%s' %.0f is above the supported %d", k, v->valuedouble,
                          TH_JSON_SCHEMA_MAX_COUNT);
    *out = (long)v->valuedouble;
    return true;
}

/* ---------------------------------------------------------------- values */

/* GBNF for exactly the compact JSON text of v (const and enum). */
char *js_constant(jconv *c, const cJSON *v, const char *path) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d)) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "number out of range in const/enum"); return NULL; }
        if (floor(d) == d && fabs(d) >= 9007199254740992.0) {
            jconv_fail(c, path, TH_ERR_UNSUPPORTED, "integer %.17g in const/enum cannot be represented exactly", d);
            return NULL;
        }
    }
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) { js_nomem(c); return NULL; }
    th_bytes b = JSB_INIT;
    jsb_gbnf_literal(&b, txt, strlen(txt));
    cJSON_free(txt);
    char *out = th_bytes_take(&b);
    if (!out) js_nomem(c);
    return out;
}

/* S{min,max} with an optional separator, as llama.cpp's build_repetition writes it. */
void js_repetition(th_bytes *b, const char *item, long min, long max, const char *sep) {
    bool has_max = max >= 0;
    if (min == 0 && max == 1) { th_bytes_printf(b, "%s?", item); return; }
    if (!sep) {
        if (min == 1 && !has_max) th_bytes_printf(b, "%s+", item);
        else if (min == 0 && !has_max) th_bytes_printf(b, "%s*", item);
        else if (has_max) th_bytes_printf(b, "%s{%ld,%ld}", item, min, max);
        else th_bytes_printf(b, "%s{%ld,}", item, min);
        return;
    }
    th_bytes inner = JSB_INIT;
    th_bytes_printf(&inner, "(%s %s)", sep, item);
    char *in = th_bytes_take(&inner);
    if (!in) { b->failed = true; return; }
    if (min == 0) th_bytes_str(b, "(");
    th_bytes_printf(b, "%s ", item);
    js_repetition(b, in, min == 0 ? 0 : min - 1, has_max ? max - 1 : -1, NULL);
    if (min == 0) th_bytes_str(b, ")?");
    free(in);
}

/* JSON pointer (RFC 6901, inside a URI fragment) into the root document. */
const cJSON *js_pointer(const cJSON *root, const char *p) {
    const cJSON *cur = root;
    if (*p == 0) return cur;
    if (*p != '/') return NULL;
    char tok[1024];
    while (*p == '/' && cur) {
        p++;
        size_t k = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) ch = *p++ == '0' ? '~' : '/';
            else if (ch == '%' && p[0] && p[1]) {
                char hx[3] = { p[0], p[1], 0 };
                char *e;
                long v = strtol(hx, &e, 16);
                if (*e) return NULL;
                ch = (char)v;
                p += 2;
            }
            if (k + 1 >= sizeof tok) return NULL;
            tok[k++] = ch;
        }
        tok[k] = 0;
        if (cJSON_IsArray(cur)) {
            char *e;
            long i = strtol(tok, &e, 10);
            if (!*tok || *e || i < 0) return NULL;
            cur = cJSON_GetArrayItem(cur, (int)i);
        } else if (cJSON_IsObject(cur)) {
            cur = js_get(cur, tok);
        } else return NULL;
    }
    return cur;
}

static jres resolve_ref(jconv *c, const char *ref, const char *path) {
    if (ref[0] != '#') {
        jconv_fail(c, path, TH_ERR_UNSUPPORTED, "$ref '%s': only local references ('#/...') are supported", ref);
        return FAIL;
    }
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) {
            if (c->refs[i].busy) {
                c->refs[i].used_busy = true;
                return (jres){ c->refs[i].name, T_ALL };
            }
            return (jres){ c->refs[i].name, c->refs[i].types };
        }
    const cJSON *target = js_pointer(c->root, ref + 1);
    if (!target) { jconv_fail(c, path, TH_ERR_FORMAT, "$ref '%s' does not resolve", ref); return FAIL; }
    const char *slash = strrchr(ref, '/');
    const char *base = slash ? slash + 1 : ref;
    char *planned0 = is_reserved(base) ? js_cat3(base, "-", "") : strdup(base);
    char *planned = planned0 ? sanitize(planned0) : NULL;
    free(planned0);
    if (!planned) { js_nomem(c); return FAIL; }
    if (!*planned || !strcmp(planned, "-")) { free(planned); planned = strdup("ref"); if (!planned) { js_nomem(c); return FAIL; } }
    /* a name no rule and no other reference has yet, so recursive uses can name it now */
    size_t pl = strlen(planned);
    for (unsigned i = 0;; i++) {
        bool taken = find_rule(c, planned) != NULL;
        for (size_t k = 0; !taken && k < c->n_refs; k++) taken = !strcmp(c->refs[k].name, planned);
        if (!taken) break;
        char *np = malloc(pl + 24);
        if (!np) { free(planned); js_nomem(c); return FAIL; }
        snprintf(np, pl + 24, "%.*s%u", (int)pl, planned, i);
        free(planned);
        planned = np;
    }
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 8;
        jref *r = realloc(c->refs, cap * sizeof *r);
        if (!r) { free(planned); js_nomem(c); return FAIL; }
        c->refs = r;
        c->cap_refs = cap;
    }
    size_t idx = c->n_refs++;
    c->refs[idx] = (jref){ strdup(ref), planned, 0, true, false };
    if (!c->refs[idx].ref) { js_nomem(c); return FAIL; }
    jres r = js_visit(c, target, base, ref, planned);
    c->refs[idx].busy = false;
    if (!r.name) return FAIL;
    if (strcmp(r.name, c->refs[idx].name)) {
        if (c->refs[idx].used_busy) {
            jconv_fail(c, path, TH_ERR_UNSUPPORTED, "$ref '%s': recursive reference to a schema that got no rule of its own", ref);
            return FAIL;
        }
        char *nm = strdup(r.name);
        if (!nm) { js_nomem(c); return FAIL; }
        free(c->refs[idx].name);
        c->refs[idx].name = nm;
    }
    c->refs[idx].types = r.types;
    return (jres){ c->refs[idx].name, r.types };
}

/* ---------------------------------------------------------------- composition */

static jres union_rule(jconv *c, const cJSON *alts, bool copies_of_type, const cJSON *s, const char *name,
                       const char *rule_name, const char *path, const char *kw) {
    th_bytes b = JSB_INIT;
    unsigned types = 0;
    int i = 0;
    for (const cJSON *a = alts->child; a; a = a->next, i++) {
        char num[32];
        snprintf(num, sizeof num, "%s%d", *name ? "-" : "alternative-", i);
        char *an = js_cat3(name, num, "");
        char *ap = js_path_index(path, kw, (size_t)i);
        cJSON *copy = NULL;
        const cJSON *alt = a;
        if (copies_of_type) {        /* {"type": [A, B], ...} -> {"type": A, ...} | {"type": B, ...} */
            copy = cJSON_Duplicate(s, true);
            cJSON *t = copy ? cJSON_CreateString(a->valuestring) : NULL;
            if (t && !cJSON_ReplaceItemInObjectCaseSensitive(copy, "type", t)) { cJSON_Delete(t); t = NULL; }
            if (!t) { cJSON_Delete(copy); copy = NULL; }
            alt = copy;
            free(ap);
            ap = path ? strdup(path) : NULL;
        }
        jres r = an && ap && alt ? js_visit(c, alt, an, ap, NULL) : FAIL;
        if ((!an || !ap || !alt) && !c->failed) js_nomem(c);
        free(an); free(ap);
        cJSON_Delete(copy);
        if (!r.name) { free(th_bytes_take(&b)); return FAIL; }
        th_bytes_printf(&b, "%s%s", i ? " | " : "", r.name);
        types |= r.types;
    }
    char *body = th_bytes_take(&b);
    if (!body) { js_nomem(c); return FAIL; }
    jres res = { jconv_add_rule(c, rule_name, body), types };
    free(body);
    return res.name ? res : FAIL;
}

/* The assertion keywords of s other than those in `allowed`, as a bit set. */
uint64_t js_other_keywords(const cJSON *s, uint64_t allowed) {
    uint64_t m = 0;
    for (const cJSON *k = s->child; k; k = k->next) {
        uint64_t b = js_kw_bit(k->string);
        if (b && !(b & allowed) && !vacuous(k)) m |= b;
    }
    return m;
}

const char *js_first_keyword(uint64_t m) {
    for (int i = 0; i < N_KW; i++)
        if (m >> i & 1) return KW[i].kw;
    return "?";
}

/* ---------------------------------------------------------------- strings, numbers */

static jres visit_string_length(jconv *c, const cJSON *s, const char *rule_name, const char *path) {
    long min, max;
    if (!js_get_count(c, s, "minLength", 0, &min, path) || !js_get_count(c, s, "maxLength", -1, &max, path)) return FAIL;
    if (max >= 0 && max < min) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "maxLength is smaller than minLength"); return FAIL; }
    /* with minLength >= 2 an escaped surrogate pair would count as two characters */
    const char *ch = jconv_add_primitive(c, min >= 2 ? "char-nosurrogate" : "char");
    if (!ch) return FAIL;
    th_bytes b = JSB_INIT;
    th_bytes_str(&b, "\"\\\"\" ");
    js_repetition(&b, ch, min, max, NULL);
    th_bytes_str(&b, " \"\\\"\" space");
    char *body = th_bytes_take(&b);
    if (!body) { js_nomem(c); return FAIL; }
    jres r = { jconv_add_rule(c, rule_name, body), T_STR };
    free(body);
    return r.name ? r : FAIL;
}

static jres visit_integer_range(jconv *c, const cJSON *s, const char *rule_name, const char *path) {
    const double LIM = 1e16;      /* the integer grammar has at most 16 digits anyway */
    bool has_min = false, has_max = false;
    double lo = -INFINITY, hi = INFINITY;
    const char *keys[] = { "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum" };
    for (int k = 0; k < 4; k++) {
        const cJSON *v = js_get(s, keys[k]);
        if (!v) continue;
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
            jconv_fail(c, path, TH_ERR_UNSUPPORTED, "'%s' must be a number (the draft-04 boolean form is not supported)", keys[k]);
            return FAIL;
        }
        double d = v->valuedouble;
        if (k == 0) lo = fmax(lo, ceil(d));
        else if (k == 1) lo = fmax(lo, floor(d) + 1);
        else if (k == 2) hi = fmin(hi, floor(d));
        else hi = fmin(hi, ceil(d) - 1);
    }
    has_min = lo > -LIM;
    has_max = hi < LIM;
    if (lo > hi) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "no integer satisfies the bounds"); return FAIL; }
    if ((has_min && fabs(lo) > TH_JSON_SCHEMA_MAX_INT) || (has_max && fabs(hi) > TH_JSON_SCHEMA_MAX_INT)) {
        jconv_fail(c, path, TH_ERR_UNSUPPORTED, "integer bounds beyond 15 digits are not supported");
        return FAIL;
    }
    if (!has_min && !has_max) {
        jres r = { jconv_add_rule(c, rule_name, "(\"-\"? integral-part) space"), T_INT };
        return r.name && jconv_add_primitive(c, "integral-part") ? r : FAIL;
    }
    th_bytes b = JSB_INIT;
    th_bytes_str(&b, "(");
    json_int_range(&b, has_min, has_min ? (int64_t)lo : 0, has_max, has_max ? (int64_t)hi : 0);
    th_bytes_str(&b, ") space");
    char *body = th_bytes_take(&b);
    if (!body) { js_nomem(c); return FAIL; }
    jres r = { jconv_add_rule(c, rule_name, body), T_INT };
    free(body);
    return r.name ? r : FAIL;
}

/* ---------------------------------------------------------------- visit */

/* Check what s says against what the branch handled (`used`) and the types the rule
 * produces: any other assertion keyword must be vacuous or about other types. */
static bool check_used(jconv *c, const cJSON *s, uint64_t used, unsigned types, const char *path) {
    for (const cJSON *k = s->child; k; k = k->next) {
        int i = kw_index(k->string);
        if (i < 0 || (used >> i & 1) || vacuous(k) || !(KW[i].applies & types)) continue;
        const char *why = why_unsupported(k->string);
        return why ? jconv_fail(c, path, TH_ERR_UNSUPPORTED, "%s", why)
                   : jconv_fail(c, path, TH_ERR_UNSUPPORTED, "'%s' is not supported here", k->string);
    }
    return true;
}

static bool has_assertions(const cJSON *s) {
    for (const cJSON *k = s->child; k; k = k->next)
        if (kw_index(k->string) >= 0 && !vacuous(k)) return true;
    return false;
}

static jres visit_inner(jconv *c, const cJSON *s, const char *name, const char *path, const char *force) {
    char *rn_alloc = NULL;
    /* an empty name is the root only at the top: llama.cpp also names the rule of a top-level
     * property "" root, and its grammar then matches that property's value instead of the object */
    const char *rule_name = force ? force : !*name ? (c->depth == 1 ? "root" : "empty-name")
                          : is_reserved(name) ? (rn_alloc = js_cat3(name, "-", "")) : name;
    if (!rule_name) { js_nomem(c); return FAIL; }
    jres r = FAIL;
    uint64_t used = 0;
#define USE(k) (used |= js_kw_bit(k))
    if (cJSON_IsTrue(s)) {
        const char *v = jconv_add_primitive(c, "value");
        r = (jres){ v ? jconv_add_rule(c, rule_name, v) : NULL, T_ALL };
        goto out;
    }
    if (cJSON_IsFalse(s)) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "the schema false allows nothing"); goto out; }
    if (!cJSON_IsObject(s)) { jconv_fail(c, path, TH_ERR_FORMAT, "a schema must be an object or a boolean"); goto out; }
    for (const cJSON *k = s->child; k; k = k->next)
        for (const cJSON *q = s->child; q != k; q = q->next)
            if (!strcmp(q->string, k->string)) { jconv_fail(c, path, TH_ERR_FORMAT, "key '%s' appears twice", k->string); goto out; }
    const cJSON *type = js_get(s, "type"), *fmt = js_get(s, "format");
    if (type && !cJSON_IsString(type) && !cJSON_IsArray(type)) { jconv_fail(c, path, TH_ERR_FORMAT, "invalid 'type'"); goto out; }
    if (fmt && !cJSON_IsString(fmt)) { jconv_fail(c, path, TH_ERR_FORMAT, "'format' must be a string"); goto out; }
    const char *t = cJSON_IsString(type) ? type->valuestring : NULL, *f = fmt ? fmt->valuestring : "";
    if (t && !type_mask(t)) { jconv_fail(c, path, TH_ERR_FORMAT, "unknown type '%s'", t); goto out; }
    bool t_none = !type, t_obj = t && !strcmp(t, "object"), t_arr = t && !strcmp(t, "array"), t_str = t && !strcmp(t, "string");
    const cJSON *any = js_get(s, "anyOf"), *one = js_get(s, "oneOf"), *ref = js_get(s, "$ref");

    if (ref) {
        USE("$ref");
        if (!cJSON_IsString(ref)) { jconv_fail(c, path, TH_ERR_FORMAT, "'$ref' must be a string"); goto out; }
        jres target = resolve_ref(c, ref->valuestring, path);
        if (target.name) r = (jres){ jconv_add_rule(c, rule_name, target.name), target.types };
        if (r.name && js_other_keywords(s, used)) {
            jconv_fail(c, path, TH_ERR_UNSUPPORTED, "'%s' beside $ref is not supported", js_first_keyword(js_other_keywords(s, used)));
            r = FAIL;
        }
        goto out;
    }
    if (any || one) {
        if (any && one) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "anyOf together with oneOf is not supported"); goto out; }
        const cJSON *alts = any ? any : one;
        USE(any ? "anyOf" : "oneOf");
        if (!cJSON_IsArray(alts) || !alts->child) { jconv_fail(c, path, TH_ERR_FORMAT, "'%s' must be a non-empty array", any ? "anyOf" : "oneOf"); goto out; }
        r = union_rule(c, alts, false, s, name, rule_name, path, any ? "anyOf" : "oneOf");
        if (r.name && type) {
            USE("type");
            unsigned allowed = 0;
            if (t) allowed = type_mask(t);
            else for (const cJSON *e = type->child; e; e = e->next) allowed |= cJSON_IsString(e) ? type_mask(e->valuestring) : 0;
            if (r.types & ~allowed) {
                jconv_fail(c, path, TH_ERR_UNSUPPORTED, "'type' beside %s would exclude values an alternative allows", any ? "anyOf" : "oneOf");
                r = FAIL;
            }
        }
        goto check;
    }
    if (cJSON_IsArray(type)) {
        if (!type->child) { jconv_fail(c, path, TH_ERR_FORMAT, "'type' is an empty list"); goto out; }
        for (const cJSON *e = type->child; e; e = e->next)
            if (!cJSON_IsString(e) || !type_mask(e->valuestring)) { jconv_fail(c, path, TH_ERR_FORMAT, "invalid entry in 'type'"); goto out; }
        r = union_rule(c, type, true, s, name, rule_name, path, "type");
        goto out;                     /* every keyword was checked in each copy */
    }
    const cJSON *cst = js_get(s, "const"), *en = js_get(s, "enum");
    if (cst || en) {
        USE("type");
        USE(cst ? "const" : "enum");
        if (en && (!cJSON_IsArray(en) || !en->child)) { jconv_fail(c, path, TH_ERR_FORMAT, "'enum' must be a non-empty array"); goto out; }
        th_bytes b = JSB_INIT;
        unsigned types = 0;
        if (en) th_bytes_str(&b, "(");
        for (const cJSON *v = cst ? cst : en->child; v; v = cst ? NULL : v->next) {
            unsigned vt = value_type(v);
            if (t && !(vt & type_mask(t))) { free(th_bytes_take(&b)); jconv_fail(c, path, TH_ERR_UNSUPPORTED, "a %s value does not fit 'type' %s", cst ? "const" : "enum", t); goto out; }
            char *lit = js_constant(c, v, path);
            if (!lit) { free(th_bytes_take(&b)); goto out; }
            th_bytes_printf(&b, "%s%s", types ? " | " : "", lit);
            types |= vt;
            free(lit);
        }
        th_bytes_str(&b, en ? ") space" : " space");
        char *body = th_bytes_take(&b);
        if (!body) { js_nomem(c); goto out; }
        r = (jres){ jconv_add_rule(c, rule_name, body), types };
        free(body);
        goto check;
    }
    const cJSON *props = js_get(s, "properties"), *addp = js_get(s, "additionalProperties");
    if ((t_none || t_obj) && (props || (addp && !cJSON_IsTrue(addp)))) {
        USE("type"); USE("properties"); USE("required"); USE("additionalProperties"); USE("unevaluatedProperties");
        r = js_visit_object(c, s, name, rule_name, path);
        goto check;
    }
    if ((t_none || t_obj) && js_get(s, "allOf")) {
        USE("type"); USE("allOf");
        r = js_visit_all_of(c, s, name, rule_name, path);
        goto check;
    }
    bool has_count = js_get(s, "minItems") || js_get(s, "maxItems");
    if (((t_none || t_arr) && (js_get(s, "items") || js_get(s, "prefixItems"))) || (t_arr && has_count)) {
        USE("type"); USE("items"); USE("prefixItems"); USE("additionalItems"); USE("minItems"); USE("maxItems");
        r = js_visit_array(c, s, name, rule_name, path);
        goto check;
    }
    const cJSON *pat = js_get(s, "pattern");
    if ((t_none || t_str) && pat) {
        USE("type"); USE("pattern");
        if (!cJSON_IsString(pat)) { jconv_fail(c, path, TH_ERR_FORMAT, "'pattern' must be a string"); goto out; }
        r = (jres){ json_pattern_rule(c, pat->valuestring, strlen(pat->valuestring), rule_name, path), T_STR };
        goto check;
    }
    if ((t_none || t_str) && !strncmp(f, "uuid", 4) && known_format(f)) {
        USE("type"); USE("format");
        r = (jres){ add_primitive_as(c, !strcmp(rule_name, "root") ? "root" : f, find_prim("uuid")), T_STR };
        goto check;
    }
    if ((t_none || t_str) && known_format(f)) {
        USE("type"); USE("format");
        char *pn = js_cat3(f, "-string", "");
        const char *p = pn ? jconv_add_primitive(c, pn) : NULL;
        if (!pn) js_nomem(c);
        free(pn);
        r = (jres){ p ? jconv_add_rule(c, rule_name, p) : NULL, T_STR };
        goto check;
    }
    if (t_str && (js_get(s, "minLength") || js_get(s, "maxLength"))) {
        USE("type"); USE("minLength"); USE("maxLength");
        r = visit_string_length(c, s, rule_name, path);
        goto check;
    }
    if (t && !strcmp(t, "integer") &&
        (js_get(s, "minimum") || js_get(s, "maximum") || js_get(s, "exclusiveMinimum") || js_get(s, "exclusiveMaximum"))) {
        USE("type"); USE("minimum"); USE("maximum"); USE("exclusiveMinimum"); USE("exclusiveMaximum");
        r = visit_integer_range(c, s, rule_name, path);
        goto check;
    }
    if ((t_none && !has_assertions(s)) || t_obj) {
        USE("type");
        const char *o = jconv_add_primitive(c, "object");
        r = (jres){ o ? jconv_add_rule(c, rule_name, o) : NULL, T_OBJ };
        goto check;
    }
    if (!t) {
        jconv_fail(c, path, TH_ERR_UNSUPPORTED, "cannot convert this schema (give it a 'type'; '%s' alone is not supported)",
                   js_first_keyword(js_other_keywords(s, 0)));
        goto out;
    }
    USE("type");
    r = (jres){ add_primitive_as(c, !strcmp(rule_name, "root") ? "root" : t, find_prim(t)), type_mask(t) };
check:
    if (r.name && !check_used(c, s, used, r.types, path)) r = FAIL;
out:
#undef USE
    free(rn_alloc);
    if (c->failed) return FAIL;
    return r;
}

jres js_visit(jconv *c, const cJSON *s, const char *name, const char *path, const char *force) {
    if (c->failed) return FAIL;
    if (c->depth >= TH_JSON_SCHEMA_MAX_DEPTH) {
        jconv_fail(c, path, TH_ERR_UNSUPPORTED, "schema nested deeper than %d", TH_JSON_SCHEMA_MAX_DEPTH);
        return FAIL;
    }
    c->depth++;
    jres r = visit_inner(c, s, name, path, force);
    c->depth--;
    return r;
}

/* ---------------------------------------------------------------- public */

static int cmp_rule(const void *a, const void *b) { return strcmp(((const jrule *)a)->name, ((const jrule *)b)->name); }

th_status th_json_schema_convert(const char *schema, size_t len, char **gbnf_out) {
    if (!gbnf_out || (!schema && len)) return th_set_error(TH_ERR_ARG, "th_json_schema_to_gbnf: invalid arguments");
    *gbnf_out = NULL;
    if (len > TH_JSON_SCHEMA_MAX_TEXT)
        return th_set_error(TH_ERR_FORMAT, "JSON schema: %zu bytes is more than the limit of %u", len, TH_JSON_SCHEMA_MAX_TEXT);
    th_utf8_partial u8 = { 0 };     /* JSON text is UTF-8; cJSON would pass anything through */
    for (size_t i = 0; i < len; i++) {
        uint32_t cp;
        unsigned char b = (unsigned char)schema[i];
        if (b < 0x20 && b != '\t' && b != '\n' && b != '\r')
            return th_set_error(TH_ERR_FORMAT, "JSON schema: control character 0x%02X at byte %zu", b, i);
        if (th_utf8_feed(&u8, b, &cp) < 0) return th_set_error(TH_ERR_FORMAT, "JSON schema: invalid UTF-8 at byte %zu", i);
    }
    if (u8.n_remain) return th_set_error(TH_ERR_FORMAT, "JSON schema: invalid UTF-8 at the end");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(schema ? schema : "", len, &end, false);
    if (!root) {
        size_t at = end && schema && end >= schema ? (size_t)(end - schema) : 0;
        return th_set_error(TH_ERR_FORMAT, "JSON schema: invalid JSON near byte %zu", at);
    }
    for (const char *p = end; p && p < schema + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return th_set_error(TH_ERR_FORMAT, "JSON schema: unexpected text after the JSON value at byte %zu", (size_t)(p - schema));
        }
    jconv c = { .root = root };
    jconv_add_rule(&c, "space", "| \" \" | \"\\n\" [ \\t]{0,20}");
    js_visit(&c, root, "", "#", NULL);
    th_status st = c.failed ? c.status : TH_OK;
    if (st == TH_OK) {
        qsort(c.rules, c.n_rules, sizeof *c.rules, cmp_rule);
        th_bytes b = JSB_INIT;
        for (size_t i = 0; i < c.n_rules; i++) th_bytes_printf(&b, "%s ::= %s\n", c.rules[i].name, c.rules[i].body);
        *gbnf_out = th_bytes_take(&b);
        if (!*gbnf_out) st = th_set_error(TH_ERR_NOMEM, "JSON schema: out of memory");
    }
    for (size_t i = 0; i < c.n_rules; i++) { free(c.rules[i].name); free(c.rules[i].body); }
    for (size_t i = 0; i < c.n_refs; i++) { free(c.refs[i].ref); free(c.refs[i].name); }
    free(c.rules); free(c.ht); free(c.refs);
    cJSON_Delete(root);
    return st;
}

/* The converted GBNF must also fit the parser's limits (a schema can ask for nesting or
 * size beyond them, e.g. a key trie over a very long property name): both public
 * entry points parse it, so neither hands out a grammar that would not load. */
static th_status convert_and_parse(const char *schema, size_t len, char **gbnf_out, th_grammar **out) {
    char *gbnf = NULL;
    th_status s = th_json_schema_convert(schema, len, &gbnf);
    if (s != TH_OK) return s;
    th_grammar *g = NULL;
    s = th_gbnf_parse(gbnf, strlen(gbnf), &g);
    if (s != TH_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", th_last_error());
        th_set_error(TH_ERR_UNSUPPORTED, "JSON schema: the converted grammar does not parse: %s", msg);
        s = TH_ERR_UNSUPPORTED;
        free(gbnf);
        return s;
    }
    if (out) *out = g;
    else th_grammar_free(g);
    if (gbnf_out) *gbnf_out = gbnf;
    else free(gbnf);
    return TH_OK;
}

th_status th_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf) {
    if (gbnf) *gbnf = NULL;
    if (!gbnf) return th_set_error(TH_ERR_ARG, "th_json_schema_to_gbnf: invalid arguments");
    return convert_and_parse(schema, len, gbnf, NULL);
}

th_status th_grammar_from_json_schema(const char *schema, size_t len, th_grammar **out) {
    if (out) *out = NULL;
    if (!out) return th_set_error(TH_ERR_ARG, "th_grammar_from_json_schema: invalid arguments");
    return convert_and_parse(schema, len, NULL, out);
}

const cJSON *jconv_root(const jconv *c) { return c->root; }
