/* json_schema_object.c — the object and array parts of the JSON-schema converter
 * (json_schema.c has the rest): properties / required / additionalProperties in
 * llama.cpp's shape (declared order, each optional property through a "-rest" rule,
 * additional keys as a trie of what they must not be), allOf of object schemas, and
 * items / prefixItems / additionalItems with minItems / maxItems. */
#include "core/core.h"
#include "sample/grammar_internal.h"
#include "sample/json_schema_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- objects */

typedef struct prop { const char *name; const cJSON *schema; bool required; const char *kv; } prop;

/* A JSON string that is none of `names` (llama.cpp's _not_strings; the first differing
 * character is also never a backslash or control character, so the key stays valid JSON). */
typedef struct trie { uint32_t cp; bool end; struct trie *kids; int n_kids, cap; } trie;

static void trie_free(trie *t) {
    for (int i = 0; i < t->n_kids; i++) trie_free(&t->kids[i]);
    free(t->kids);
}

static bool trie_insert(trie *t, const char *s) {
    th_utf8_partial st = { 0 };
    for (const char *p = s; *p; p++) {
        uint32_t cp;
        int r = th_utf8_feed(&st, (uint8_t)*p, &cp);
        if (r < 0) return false;
        if (r == 0) continue;
        int k = 0;
        while (k < t->n_kids && t->kids[k].cp < cp) k++;
        if (k == t->n_kids || t->kids[k].cp != cp) {
            if (t->n_kids == t->cap) {
                int cap = t->cap ? t->cap * 2 : 4;
                trie *nk = realloc(t->kids, (size_t)cap * sizeof *nk);
                if (!nk) return false;
                t->kids = nk;
                t->cap = cap;
            }
            memmove(&t->kids[k + 1], &t->kids[k], (size_t)(t->n_kids - k) * sizeof *t->kids);
            t->kids[k] = (trie){ cp, false, NULL, 0, 0 };
            t->n_kids++;
        }
        t = &t->kids[k];
    }
    if (st.n_remain) return false;
    t->end = true;
    return true;
}

static void class_char(th_bytes *b, uint32_t c) {
    char u[4];
    if (c == '\\' || c == ']' || c == '[') { th_bytes_printf(b, "\\%c", (char)c); return; }
    if (c == '-' || c == '^') { th_bytes_printf(b, "\\x%02X", c); return; }
    if (c < 0x80) { u[0] = (char)c; th_bytes_put(b, u, 1); }
    else if (c < 0x800) { u[0] = (char)(0xC0 | c >> 6); u[1] = (char)(0x80 | (c & 63)); th_bytes_put(b, u, 2); }
    else if (c < 0x10000) { u[0] = (char)(0xE0 | c >> 12); u[1] = (char)(0x80 | (c >> 6 & 63)); u[2] = (char)(0x80 | (c & 63)); th_bytes_put(b, u, 3); }
    else { u[0] = (char)(0xF0 | c >> 18); u[1] = (char)(0x80 | (c >> 12 & 63)); u[2] = (char)(0x80 | (c >> 6 & 63)); u[3] = (char)(0x80 | (c & 63)); th_bytes_put(b, u, 4); }
}

static void not_strings_node(th_bytes *o, const trie *t, const char *ch) {
    for (int i = 0; i < t->n_kids; i++) {
        if (i) th_bytes_str(o, " | ");
        th_bytes_str(o, "[");
        class_char(o, t->kids[i].cp);
        th_bytes_str(o, "]");
        if (t->kids[i].n_kids) {
            th_bytes_str(o, " (");
            not_strings_node(o, &t->kids[i], ch);
            th_bytes_str(o, ")");
        } else if (t->kids[i].end) th_bytes_printf(o, " %s+", ch);
    }
    if (t->n_kids) {
        th_bytes_str(o, " | [^\"\\\\");
        for (int i = 0; i < t->n_kids; i++) class_char(o, t->kids[i].cp);
        th_bytes_printf(o, "\\x7F\\x00-\\x1F] %s*", ch);
    }
}

static char *not_strings(jconv *c, const char **names, int n, const char *path) {
    trie root = { 0 };
    for (int i = 0; i < n; i++) {
        for (const char *p = names[i]; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\') {
                trie_free(&root);
                jconv_fail(c, path, TH_ERR_UNSUPPORTED,
                           "additional properties beside a property name that needs JSON escapes ('%s') are not supported", names[i]);
                return NULL;
            }
        if (!trie_insert(&root, names[i])) {
            trie_free(&root);
            jconv_fail(c, path, TH_ERR_FORMAT, "property name is not valid UTF-8");
            return NULL;
        }
    }
    const char *ch = jconv_add_primitive(c, "char");
    if (!ch) { trie_free(&root); return NULL; }
    th_bytes o = JSB_INIT;
    th_bytes_str(&o, "[\"] ( ");
    not_strings_node(&o, &root, ch);
    th_bytes_str(&o, " )");
    if (!root.end) th_bytes_str(&o, "?");
    th_bytes_str(&o, " [\"] space");
    trie_free(&root);
    char *out = th_bytes_take(&o);
    if (!out) js_nomem(c);
    return out;
}

/* llama.cpp's get_recursive_refs: the optional properties from k on, each optional. */
static char *optional_chain(jconv *c, const char **kv, const char **keys, int n, bool first_optional, const char *name) {
    if (n == 0) return strdup("");
    bool star = keys[0] == NULL;
    th_bytes b = JSB_INIT;
    if (first_optional) th_bytes_printf(&b, "( \",\" space %s )%s", kv[0], star ? "*" : "?");
    else {
        th_bytes_str(&b, kv[0]);
        if (star) th_bytes_printf(&b, " ( \",\" space %s )*", kv[0]);
    }
    if (n > 1) {
        char *rest = optional_chain(c, kv + 1, keys + 1, n - 1, true, name);
        char *rn = js_sub_name(name, star ? "*" : keys[0]);
        char *rn2 = rn ? js_cat3(rn, "-rest", "") : NULL;
        const char *r = rest && rn2 ? jconv_add_rule(c, rn2, rest) : NULL;
        if (!rest || !rn2) js_nomem(c);
        if (r) th_bytes_printf(&b, " %s", r);
        free(rest);
        free(rn);
        free(rn2);
        if (!r) { free(th_bytes_take(&b)); return NULL; }
    }
    char *out = th_bytes_take(&b);
    if (!out) js_nomem(c);
    return out;
}

/* llama.cpp's _build_object_rule. excluded: names whose schema is false (never present). */
static char *object_rule(jconv *c, prop *props, int n, const char **excluded, int n_excl, const char *name,
                         const cJSON *additional, const char *path) {
    const char **kv = malloc((size_t)(n + 1) * sizeof *kv), **keys = malloc((size_t)(n + 1) * sizeof *keys);
    const char **all = malloc((size_t)(n + n_excl + 1) * sizeof *all);
    char *out = NULL;
    if (!kv || !keys || !all) { js_nomem(c); goto done; }
    for (int i = 0; i < n; i++) {
        char *pn = js_sub_name(name, props[i].name);
        char *pp = js_path_join(path, props[i].name);
        char *pp2 = pp ? js_cat3(path, "/properties", pp + strlen(path)) : NULL;
        if (!pn || !pp || !pp2) { free(pn); free(pp); free(pp2); js_nomem(c); goto done; }
        jres r = js_visit(c, props[i].schema, pn, pp2, NULL);
        free(pp);
        free(pp2);
        if (!r.name) { free(pn); goto done; }
        cJSON *js = cJSON_CreateString(props[i].name);
        char *lit = js ? js_constant(c, js, path) : NULL;
        cJSON_Delete(js);
        char *body = lit ? js_cat3(lit, " space \":\" space ", r.name) : NULL;
        char *kvn = js_cat3(pn, "-kv", "");
        props[i].kv = body && kvn ? jconv_add_rule(c, kvn, body) : NULL;
        if ((!lit || !body || !kvn) && !jconv_failed(c)) js_nomem(c);
        free(lit); free(body); free(kvn); free(pn);
        if (!props[i].kv) goto done;
    }
    int n_opt = 0, n_req = 0;
    for (int i = 0; i < n; i++) all[i] = props[i].name;
    for (int i = 0; i < n_excl; i++) all[n + i] = excluded[i];
    for (int i = 0; i < n; i++)
        if (!props[i].required) { kv[n_opt] = props[i].kv; keys[n_opt] = props[i].name; n_opt++; }
    if (additional && (cJSON_IsTrue(additional) || cJSON_IsObject(additional))) {
        char *sn = js_sub_name(name, "additional");
        if (!sn) { js_nomem(c); goto done; }
        const char *value = NULL, *key = NULL;
        if (cJSON_IsObject(additional)) {
            char *vn = js_cat3(sn, "-value", ""), *ap = js_cat3(path, "/additionalProperties", "");
            if (vn && ap) value = js_visit(c, additional, vn, ap, NULL).name;
            else js_nomem(c);
            free(vn); free(ap);
        } else value = jconv_add_primitive(c, "value");
        if (value) {
            if (n + n_excl == 0) key = jconv_add_primitive(c, "string");
            else {
                char *ns = not_strings(c, all, n + n_excl, path);
                char *kn = js_cat3(sn, "-k", "");
                if (ns && kn) key = jconv_add_rule(c, kn, ns);
                else if (!jconv_failed(c)) js_nomem(c);
                free(ns); free(kn);
            }
        }
        char *body = key ? js_cat3(key, " \":\" space ", value) : NULL;
        char *kvn = js_cat3(sn, "-kv", "");
        const char *akv = body && kvn ? jconv_add_rule(c, kvn, body) : NULL;
        if (key && (!body || !kvn)) js_nomem(c);
        free(body); free(kvn); free(sn);
        if (!akv) goto done;
        kv[n_opt] = akv;
        keys[n_opt] = NULL;       /* the additional-properties entry */
        n_opt++;
    }
    th_bytes b = JSB_INIT;
    th_bytes_str(&b, "\"{\" space ");
    for (int i = 0; i < n; i++)
        if (props[i].required) th_bytes_printf(&b, "%s%s", n_req++ ? " \",\" space " : "", props[i].kv);
    if (n_opt) {
        th_bytes_str(&b, " (");
        if (n_req) th_bytes_str(&b, " \",\" space ( ");
        for (int i = 0; i < n_opt; i++) {
            char *ch = optional_chain(c, kv + i, keys + i, n_opt - i, false, name);
            if (!ch) { free(th_bytes_take(&b)); goto done; }
            th_bytes_printf(&b, "%s%s", i ? " | " : "", ch);
            free(ch);
        }
        if (n_req) th_bytes_str(&b, " )");
        th_bytes_str(&b, " )?");
    }
    th_bytes_str(&b, " \"}\" space");
    out = th_bytes_take(&b);
    if (!out) js_nomem(c);
done:
    free(kv); free(keys); free(all);
    return out;
}

jres js_visit_object(jconv *c, const cJSON *s, const char *name, const char *rule_name, const char *path) {
    const cJSON *props = js_get(s, "properties"), *req = js_get(s, "required"), *add = js_get(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) { jconv_fail(c, path, TH_ERR_FORMAT, "'properties' must be an object"); return FAIL; }
    if (req && !cJSON_IsArray(req)) { jconv_fail(c, path, TH_ERR_FORMAT, "'required' must be an array"); return FAIL; }
    if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add)) {
        jconv_fail(c, path, TH_ERR_FORMAT, "'additionalProperties' must be a schema");
        return FAIL;
    }
    int n = props ? cJSON_GetArraySize(props) : 0, np = 0, nx = 0;
    prop *pv = calloc((size_t)n + 1, sizeof *pv);
    const char **excl = calloc((size_t)n + 1, sizeof *excl);
    jres res = FAIL;
    if (!pv || !excl) { js_nomem(c); goto done; }
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) { jconv_fail(c, path, TH_ERR_FORMAT, "'required' must hold strings"); goto done; }
        const cJSON *ps = props ? js_get(props, r->valuestring) : NULL;
        if (!ps) {
            jconv_fail(c, path, TH_ERR_UNSUPPORTED, "required property '%s' is not among 'properties'", r->valuestring);
            goto done;
        }
        if (cJSON_IsFalse(ps)) {
            jconv_fail(c, path, TH_ERR_UNSUPPORTED, "required property '%s' has the schema false", r->valuestring);
            goto done;
        }
    }
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        for (const cJSON *q = props->child; q != p; q = q->next)
            if (!strcmp(q->string, p->string)) { jconv_fail(c, path, TH_ERR_FORMAT, "property '%s' listed twice", p->string); goto done; }
        if (cJSON_IsFalse(p)) { excl[nx++] = p->string; continue; }
        bool required = false;
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!strcmp(r->valuestring, p->string)) required = true;
        pv[np++] = (prop){ p->string, p, required, NULL };
    }
    char *body = object_rule(c, pv, np, excl, nx, name, add, path);
    if (body) {
        res.name = jconv_add_rule(c, rule_name, body);
        res.types = T_OBJ;
        free(body);
    }
done:
    free(pv);
    free(excl);
    return res;
}

/* allOf of object schemas (llama.cpp: the properties of every part, required; those of an
 * anyOf inside, optional). Parts that could make the merged object too loose are refused. */
static bool all_of_part(jconv *c, const cJSON *part, bool required, prop **pv, int *n, int *cap, int n_parts,
                        const char *path, int depth) {
    if (depth > 32) return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: $ref chain too long");
    if (!cJSON_IsObject(part)) return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: every part must be an object schema");
    const cJSON *ref = js_get(part, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) return jconv_fail(c, path, TH_ERR_FORMAT, "'$ref' must be a string");
        if (js_other_keywords(part, js_kw_bit("$ref")))
            return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: keywords beside $ref are not supported");
        if (ref->valuestring[0] != '#')
            return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "$ref '%s': only local references are supported", ref->valuestring);
        const cJSON *t = js_pointer(jconv_root(c), ref->valuestring + 1);
        if (!t) return jconv_fail(c, path, TH_ERR_FORMAT, "$ref '%s' does not resolve", ref->valuestring);
        return all_of_part(c, t, required, pv, n, cap, n_parts, ref->valuestring, depth + 1);
    }
    const cJSON *type = js_get(part, "type"), *add = js_get(part, "additionalProperties"), *req = js_get(part, "required");
    if (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "object")))
        return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: every part must be an object schema");
    if (add && !cJSON_IsTrue(add) && n_parts > 1)
        return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: additionalProperties in a part that is merged with others");
    if (!required && req && cJSON_GetArraySize(req) > 0)
        return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: 'required' inside an anyOf part is not supported");
    uint64_t extra = js_other_keywords(part, js_kw_bit("type") | js_kw_bit("properties") | js_kw_bit("required") |
                                              js_kw_bit("additionalProperties"));
    if (extra) return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: '%s' in a part is not supported", js_first_keyword(extra));
    const cJSON *props = js_get(part, "properties");
    if (props && !cJSON_IsObject(props)) return jconv_fail(c, path, TH_ERR_FORMAT, "'properties' must be an object");
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        for (int k = 0; k < *n; k++)
            if (!strcmp((*pv)[k].name, p->string))
                return jconv_fail(c, path, TH_ERR_UNSUPPORTED, "allOf: property '%s' appears in two parts", p->string);
        if (*n == *cap) {
            int nc = *cap ? *cap * 2 : 8;
            prop *np = realloc(*pv, (size_t)nc * sizeof *np);
            if (!np) return js_nomem(c);
            *pv = np;
            *cap = nc;
        }
        (*pv)[(*n)++] = (prop){ p->string, p, required, NULL };
    }
    return true;
}

jres js_visit_all_of(jconv *c, const cJSON *s, const char *name, const char *rule_name, const char *path) {
    const cJSON *all = js_get(s, "allOf");
    if (!cJSON_IsArray(all) || !all->child) { jconv_fail(c, path, TH_ERR_FORMAT, "'allOf' must be a non-empty array"); return FAIL; }
    prop *pv = NULL;
    int n = 0, cap = 0, n_parts = cJSON_GetArraySize(all), i = 0;
    bool ok = true;
    for (const cJSON *t = all->child; ok && t; t = t->next, i++) {
        char *tp = js_path_index(path, "allOf", (size_t)i);
        if (!tp) { ok = js_nomem(c); break; }
        const cJSON *any = cJSON_IsObject(t) ? js_get(t, "anyOf") : NULL;
        if (any) {
            if (!cJSON_IsArray(any)) ok = jconv_fail(c, tp, TH_ERR_FORMAT, "'anyOf' must be an array");
            else if (js_other_keywords(t, js_kw_bit("anyOf"))) ok = jconv_fail(c, tp, TH_ERR_UNSUPPORTED, "allOf: keywords beside anyOf are not supported");
            for (const cJSON *a = ok ? any->child : NULL; ok && a; a = a->next)
                ok = all_of_part(c, a, false, &pv, &n, &cap, n_parts + 1, tp, 0);
        } else ok = all_of_part(c, t, true, &pv, &n, &cap, n_parts, tp, 0);
        free(tp);
    }
    jres res = FAIL;
    if (ok) {
        char *body = object_rule(c, pv, n, NULL, 0, name, NULL, path);
        if (body) res = (jres){ jconv_add_rule(c, rule_name, body), T_OBJ };
        free(body);
    }
    free(pv);
    return res.name ? res : FAIL;
}

/* ---------------------------------------------------------------- arrays */

jres js_visit_array(jconv *c, const cJSON *s, const char *name, const char *rule_name, const char *path) {
    const cJSON *items = js_get(s, "items"), *prefix = js_get(s, "prefixItems"), *extra = js_get(s, "additionalItems");
    long min, max;
    if (!js_get_count(c, s, "minItems", 0, &min, path) || !js_get_count(c, s, "maxItems", -1, &max, path)) return FAIL;
    if (max >= 0 && max < min) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "maxItems is smaller than minItems"); return FAIL; }
    const cJSON *tuple = NULL, *rest = NULL;
    const char *rest_kw = "items";
    bool any_rest = false;
    if (cJSON_IsArray(prefix)) { tuple = prefix; rest = items; }          /* 2020-12 */
    else if (cJSON_IsArray(items)) { tuple = items; rest = extra; rest_kw = "additionalItems"; }  /* draft 7 */
    else if (items) rest = items;
    else if (prefix) { rest = prefix; rest_kw = "prefixItems"; }       /* llama.cpp: one prefixItems schema acts as items */
    else any_rest = true;                                                /* only minItems / maxItems */
    th_bytes b = JSB_INIT;
    jres res = FAIL;
    const char *item_rule = NULL;
    if (any_rest || cJSON_IsTrue(rest)) item_rule = jconv_add_primitive(c, "value");
    else if (rest && !cJSON_IsFalse(rest)) {
        char *in = js_sub_name(name, "item"), *ip = js_path_join(path, rest_kw);
        if (in && ip) item_rule = js_visit(c, rest, in, ip, NULL).name;
        else js_nomem(c);
        free(in); free(ip);
    } else if (!tuple) max = 0;                                         /* items: false */
    if (jconv_failed(c)) return FAIL;
    th_bytes_str(&b, "\"[\" space ");
    if (tuple) {
        int nt = cJSON_GetArraySize(tuple), i = 0;
        if (max >= 0 && max < nt) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "maxItems smaller than the number of prefixItems"); goto done; }
        if (!item_rule && min > nt) { jconv_fail(c, path, TH_ERR_UNSUPPORTED, "minItems larger than the tuple allows"); goto done; }
        for (const cJSON *t = tuple->child; t; t = t->next, i++) {
            char num[32];
            snprintf(num, sizeof num, "tuple-%d", i);
            char *tn = js_sub_name(name, num), *tp = js_path_index(path, tuple == prefix ? "prefixItems" : "items", (size_t)i);
            jres r = tn && tp ? js_visit(c, t, tn, tp, NULL) : FAIL;
            if ((!tn || !tp) && !jconv_failed(c)) js_nomem(c);
            free(tn); free(tp);
            if (!r.name) goto done;
            th_bytes_printf(&b, "%s%s", i ? " \",\" space " : "", r.name);
        }
        if (item_rule) {
            long rmin = min > nt ? min - nt : 0, rmax = max >= 0 ? max - nt : -1;
            th_bytes in = JSB_INIT;
            th_bytes_printf(&in, "( \",\" space %s )", item_rule);
            char *t = th_bytes_take(&in);
            if (!t) { js_nomem(c); goto done; }
            if (nt == 0) js_repetition(&b, item_rule, rmin, rmax, "\",\" space");
            else if (rmax != 0) { th_bytes_str(&b, " "); js_repetition(&b, t, rmin, rmax, NULL); }
            free(t);
        }
    } else if (item_rule) {
        js_repetition(&b, item_rule, min, max, "\",\" space");
    } else if (min > 0) {
        jconv_fail(c, path, TH_ERR_UNSUPPORTED, "minItems with items false");
        goto done;
    }
    th_bytes_str(&b, " \"]\" space");
    char *body = th_bytes_take(&b);
    if (!body) { js_nomem(c); return FAIL; }
    res = (jres){ jconv_add_rule(c, rule_name, body), T_ARR };
    free(body);
    return res.name ? res : FAIL;
done:
    free(th_bytes_take(&b));
    return FAIL;
}

