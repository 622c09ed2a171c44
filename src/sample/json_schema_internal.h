/* json_schema_internal.h — what the JSON-schema converter's files share: a string
 * builder, the converter's rule table and error reporting (json_schema.c), integer
 * ranges (json_schema_int.c) and regular expressions (json_schema_regex.c). */
#ifndef TH_SAMPLE_JSON_SCHEMA_INTERNAL_H
#define TH_SAMPLE_JSON_SCHEMA_INTERNAL_H

#include "theseus.h"
#include "core/bytes.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TH_JSON_SCHEMA_MAX_TEXT   (4u << 20)   /* bytes of schema */
#define TH_JSON_SCHEMA_MAX_DEPTH  128          /* nested subschemas */
#define TH_JSON_SCHEMA_MAX_COUNT  100000       /* minItems, maxLength, ... */
#define TH_JSON_SCHEMA_MAX_OUTPUT (8u << 20)   /* bytes of grammar */
#define TH_JSON_SCHEMA_MAX_INT    999999999999999LL  /* integer bounds: 15 digits */

/* Every text builder of the converter is a th_bytes with this limit. */
#define JSB_INIT { .limit = TH_JSON_SCHEMA_MAX_OUTPUT * 2 }

/* A GBNF literal "..." matching exactly the bytes s[0..n) (UTF-8). */
void jsb_gbnf_literal(th_bytes *b, const char *s, size_t n);
/* s[0..n) escaped for use inside a GBNF literal, without the quotes. */
void jsb_gbnf_escape(th_bytes *b, const char *s, size_t n);

typedef struct jconv jconv;
/* Add rule `name` (made a valid rule name) with body; if that name holds another body,
 * name0, name1, ... (llama.cpp's naming). Returns the name used (owned by the converter),
 * NULL after an error. */
const char *jconv_add_rule(jconv *c, const char *name, const char *body);
/* One of the built-in rules ("char", "string", "value", ...) and what it needs. */
const char *jconv_add_primitive(jconv *c, const char *name);
/* Record an error at JSON pointer `path` (first one wins); returns false. */
bool jconv_fail(jconv *c, const char *path, th_status s, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
bool jconv_failed(const jconv *c);

/* The converter's shared pieces (json_schema.c), used by json_schema_object.c. */
struct cJSON;
enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_INT = 32, T_NUM = 64, T_ALL = 127 };  /* JSON types */
typedef struct jres { const char *name; unsigned types; } jres;   /* a rule and the JSON types it produces */
static const jres FAIL = { NULL, 0 };
jres js_visit(jconv *c, const struct cJSON *s, const char *name, const char *path, const char *force);
bool js_nomem(jconv *c);
char *js_cat3(const char *a, const char *b, const char *d);       /* malloc'd a b d */
char *js_sub_name(const char *name, const char *part);             /* name-part (part alone when name is "") */
char *js_path_join(const char *path, const char *key);             /* a JSON pointer one step further */
char *js_path_index(const char *path, const char *key, size_t i);
const struct cJSON *js_get(const struct cJSON *s, const char *k);
const struct cJSON *js_pointer(const struct cJSON *root, const char *p);
const struct cJSON *jconv_root(const jconv *c);
bool js_get_count(jconv *c, const struct cJSON *s, const char *k, long def, long *out, const char *path);
char *js_constant(jconv *c, const struct cJSON *v, const char *path);   /* GBNF literal of v's JSON text */
void js_repetition(th_bytes *b, const char *item, long min, long max, const char *sep);
uint64_t js_kw_bit(const char *k);
uint64_t js_other_keywords(const struct cJSON *s, uint64_t allowed);
const char *js_first_keyword(uint64_t m);
jres js_visit_object(jconv *c, const struct cJSON *s, const char *name, const char *rule_name, const char *path);
jres js_visit_all_of(jconv *c, const struct cJSON *s, const char *name, const char *rule_name, const char *path);
jres js_visit_array(jconv *c, const struct cJSON *s, const char *name, const char *rule_name, const char *path);

/* json_schema_int.c: a GBNF expression for the integers in [min, max] (either side may be
 * open) written as JSON, at most 16 digits. */
void json_int_range(th_bytes *out, bool has_min, int64_t min, bool has_max, int64_t max);

/* json_schema_regex.c: a rule named rule_name matching JSON strings whose value matches
 * the ECMA-262 pattern (the common subset; see the file). Returns the rule name or NULL. */
const char *json_pattern_rule(jconv *c, const char *pattern, size_t len, const char *rule_name, const char *path);

#endif
