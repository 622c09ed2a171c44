/* toolcall.c — tool calls in a model's own format (theseus.h's "tool calls"
 * section): which format a chat template teaches (th_tool_format_of_template),
 * parsing a finished message back into content and calls (th_tool_calls_parse),
 * how much of a growing message is surely content (th_tool_calls_content_end,
 * for streaming), and the GBNF of a valid call for tool_choice required / a
 * named function (th_tool_call_grammar, through the JSON-schema converter).
 *
 * Formats:
 *   HERMES   <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>, one or
 *            more, text around them is content (Hermes 2/3, Qwen 2.5, Qwen 3,
 *            SmolLM3, and what we teach templates that ignore `tools`)
 *   LLAMA3   the whole message is {"name": N, "parameters": {...}} (Llama 3.1 /
 *            3.2 JSON tool calling; "arguments" is accepted too), optionally
 *            after <|python_tag|>
 *   MISTRAL  [TOOL_CALLS][{"name": N, "arguments": {...}, "id": I}, ...]
 *            (Mistral Nemo); [TOOL_CALLS] is a control token whose text a
 *            runtime does not show, so a message that is such an array counts too
 * Model output is never an error: text that does not parse as calls is content. */
#include "core/core.h"
#include <cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

static const char HERMES_OPEN[] = "<tool_call>", HERMES_CLOSE[] = "</tool_call>";
static const char MISTRAL_TAG[] = "[TOOL_CALLS]", PYTHON_TAG[] = "<|python_tag|>";

th_tool_format th_tool_format_of_template(const char *tmpl) {
    if (!tmpl) return TH_TOOLS_HERMES;
    if (strstr(tmpl, MISTRAL_TAG)) return TH_TOOLS_MISTRAL;
    if (strstr(tmpl, HERMES_OPEN)) return TH_TOOLS_HERMES;
    if (strstr(tmpl, PYTHON_TAG) || strstr(tmpl, "<|eom_id|>") || strstr(tmpl, "\"parameters\": dictionary of argument"))
        return TH_TOOLS_LLAMA3;
    return TH_TOOLS_HERMES;
}

void th_tool_calls_free(th_tool_calls *tc) {
    if (!tc) return;
    for (int32_t i = 0; i < tc->n; i++) {
        free(tc->calls[i].id);
        free(tc->calls[i].name);
        free(tc->calls[i].arguments);
    }
    free(tc->calls);
    free(tc->content);
    memset(tc, 0, sizeof *tc);
}

/* ---------------------------------------------------------------- parsing */

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && isspace((unsigned char)*p)) p++;
    return p;
}

/* text[a, b) without surrounding white space, appended to *buf. */
static bool append_trimmed(char **buf, size_t *n, const char *a, const char *b) {
    a = skip_ws(a, b);
    while (b > a && isspace((unsigned char)b[-1])) b--;
    if (a == b) return true;
    size_t add = (size_t)(b - a) + (*n ? 1 : 0);
    char *nb = realloc(*buf, *n + add + 1);
    if (!nb) return false;
    *buf = nb;
    if (*n) nb[(*n)++] = '\n';
    memcpy(nb + *n, a, (size_t)(b - a));
    *n += (size_t)(b - a);
    nb[*n] = 0;
    return true;
}

/* One call object {"name": string, <args_key>: object|string, "id"?: string} into c. */
static bool take_call(const cJSON *o, th_tool_call *c) {
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(o)) return false;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    if (!cJSON_IsString(name) || !*name->valuestring) return false;
    if (args && !cJSON_IsObject(args) && !cJSON_IsString(args)) return false;
    c->name = strdup(name->valuestring);
    if (!args) c->arguments = strdup("{}");
    else if (cJSON_IsString(args)) {   /* a JSON string holding the arguments' JSON */
        cJSON *inner = cJSON_Parse(args->valuestring);
        bool obj = cJSON_IsObject(inner);
        cJSON_Delete(inner);
        if (!obj) { free(c->name); c->name = NULL; return false; }
        c->arguments = strdup(args->valuestring);
    } else c->arguments = cJSON_PrintUnformatted(args);
    if (cJSON_IsString(id) && *id->valuestring) c->id = strdup(id->valuestring);
    return true;
}

static th_status push_call(th_tool_calls *tc, const cJSON *o, bool *ok) {
    th_tool_call c;
    if (!take_call(o, &c)) { *ok = false; return TH_OK; }
    th_tool_call *nc = realloc(tc->calls, (size_t)(tc->n + 1) * sizeof *nc);
    if (!nc || !c.name || !c.arguments) {
        free(c.name); free(c.arguments); free(c.id);
        if (nc) tc->calls = nc;
        return th_set_error(TH_ERR_NOMEM, "tool calls: out of memory");
    }
    tc->calls = nc;
    tc->calls[tc->n++] = c;
    return TH_OK;
}

/* One JSON value at the start of [p, end) (after white space); *next after it. */
static cJSON *json_at(const char *p, const char *end, const char **next) {
    p = skip_ws(p, end);
    const char *stop = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &stop, false);
    *next = v && stop ? stop : p;
    return v;
}

static th_status parse_hermes(const char *text, const char *end, th_tool_calls *tc, bool *ok) {
    const char *p = text;
    size_t n_content = 0;
    th_status s = TH_OK;
    while (!s && *ok) {
        const char *open = memmem(p, (size_t)(end - p), HERMES_OPEN, sizeof HERMES_OPEN - 1);
        if (!open) break;
        if (!append_trimmed(&tc->content, &n_content, p, open)) return th_set_error(TH_ERR_NOMEM, "tool calls: out of memory");
        const char *after;
        cJSON *v = json_at(open + sizeof HERMES_OPEN - 1, end, &after);
        if (!v) { *ok = false; break; }
        s = push_call(tc, v, ok);
        cJSON_Delete(v);
        after = skip_ws(after, end);
        if (after == end) { p = end; break; }   /* a closing tag cut off by the end is fine */
        if ((size_t)(end - after) < sizeof HERMES_CLOSE - 1 || memcmp(after, HERMES_CLOSE, sizeof HERMES_CLOSE - 1)) { *ok = false; break; }
        p = after + sizeof HERMES_CLOSE - 1;
    }
    if (!s && *ok && !append_trimmed(&tc->content, &n_content, p, end)) s = th_set_error(TH_ERR_NOMEM, "tool calls: out of memory");
    return s;
}

/* The whole of [p, end) is one JSON value (white space around it allowed). */
static cJSON *whole_json(const char *p, const char *end) {
    const char *after;
    cJSON *v = json_at(p, end, &after);
    if (v && skip_ws(after, end) != end) { cJSON_Delete(v); v = NULL; }
    return v;
}

static th_status parse_json_calls(const char *p, const char *end, th_tool_calls *tc, bool *ok, bool array) {
    cJSON *v = whole_json(p, end);
    th_status s = TH_OK;
    if (!v || (array ? !cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0 : !cJSON_IsObject(v))) *ok = false;
    else if (!array) s = push_call(tc, v, ok);
    else {
        const cJSON *it;
        cJSON_ArrayForEach(it, v) if (!s && *ok) s = push_call(tc, it, ok);
    }
    cJSON_Delete(v);
    return s;
}

th_status th_tool_calls_parse(th_tool_format f, const char *text, size_t len, th_tool_calls *out) {
    if (!out) return th_set_error(TH_ERR_ARG, "th_tool_calls_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!text && len) return th_set_error(TH_ERR_ARG, "th_tool_calls_parse: no text");
    const char *p = text ? text : "", *end = p + len;
    bool ok = true;
    th_status s = TH_OK;
    const char *q = skip_ws(p, end);
    switch (f) {
    case TH_TOOLS_HERMES:
        if (memmem(p, len, HERMES_OPEN, sizeof HERMES_OPEN - 1)) s = parse_hermes(p, end, out, &ok);
        else ok = false;
        break;
    case TH_TOOLS_LLAMA3:
        if ((size_t)(end - q) >= sizeof PYTHON_TAG - 1 && !memcmp(q, PYTHON_TAG, sizeof PYTHON_TAG - 1)) q += sizeof PYTHON_TAG - 1;
        q = skip_ws(q, end);
        if (q < end && *q == '{') s = parse_json_calls(q, end, out, &ok, false);
        else ok = false;
        break;
    case TH_TOOLS_MISTRAL:
        if ((size_t)(end - q) >= sizeof MISTRAL_TAG - 1 && !memcmp(q, MISTRAL_TAG, sizeof MISTRAL_TAG - 1)) q += sizeof MISTRAL_TAG - 1;
        q = skip_ws(q, end);
        if (q < end && *q == '[') s = parse_json_calls(q, end, out, &ok, true);
        else ok = false;
        break;
    default:
        ok = false;
    }
    if (s || !ok || out->n == 0) {   /* not calls after all: all of it is content */
        th_tool_calls_free(out);
        if (s) return s;
        if (!(out->content = malloc(len + 1))) return th_set_error(TH_ERR_NOMEM, "tool calls: out of memory");
        memcpy(out->content, p, len);
        out->content[len] = 0;
        return TH_OK;
    }
    if (!out->content && !(out->content = strdup(""))) { th_tool_calls_free(out); return th_set_error(TH_ERR_NOMEM, "tool calls: out of memory"); }
    return TH_OK;
}

/* Length of the longest suffix of text[0, len) that is a proper prefix of tag. */
static size_t partial_tag(const char *text, size_t len, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < len ? t - 1 : len; k > 0; k--)
        if (!memcmp(text + len - k, tag, k)) return k;
    return 0;
}

size_t th_tool_calls_content_end(th_tool_format f, const char *text, size_t len) {
    if (!text) return 0;
    const char *tag = f == TH_TOOLS_HERMES ? HERMES_OPEN : f == TH_TOOLS_MISTRAL ? MISTRAL_TAG : NULL;
    if (f == TH_TOOLS_LLAMA3 || f == TH_TOOLS_MISTRAL) {   /* a call is the whole message: wait while it may be one */
        const char *q = skip_ws(text, text + len);
        if (q == text + len) return 0;
        if (*q == '{' || *q == '[' || *q == '<') return 0;
        if (f == TH_TOOLS_LLAMA3) return len;
    }
    if (!tag) return len;
    const char *at = memmem(text, len, tag, strlen(tag));
    if (at) return (size_t)(at - text);
    return len - partial_tag(text, len, tag);
}

/* ---------------------------------------------------------------- the grammar of a call */

/* The schema of one call of function fn ({"name", "parameters"?}); its $defs move to root.
 * A $defs that is not an object, or a name two functions define, sets *bad to why. */
static cJSON *call_schema(const cJSON *fn, const char *args_key, cJSON *root_defs, const char **bad) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    cJSON *o = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(o, "properties");
    cJSON_AddStringToObject(o, "type", "object");
    cJSON *n = cJSON_AddObjectToObject(props, "name");
    cJSON_AddStringToObject(n, "const", name->valuestring);
    cJSON *args = params ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    if (!params) cJSON_AddStringToObject(args, "type", "object");
    for (const char *key = "$defs"; key; key = !strcmp(key, "$defs") ? "definitions" : NULL) {
        cJSON *defs = cJSON_DetachItemFromObjectCaseSensitive(args, key);
        cJSON *d;
        if (!defs) continue;
        if (!cJSON_IsObject(defs)) { *bad = "a function's parameters have a $defs/definitions that is not an object"; cJSON_Delete(defs); continue; }
        cJSON *dst = cJSON_GetObjectItemCaseSensitive(root_defs, key);
        if (!dst) dst = cJSON_AddObjectToObject(root_defs, key);
        while ((d = defs->child)) {
            cJSON_DetachItemViaPointer(defs, d);
            if (cJSON_GetObjectItemCaseSensitive(dst, d->string)) { *bad = "two functions define the same $defs name"; cJSON_Delete(d); continue; }
            cJSON_AddItemToObject(dst, d->string, d);
        }
        cJSON_Delete(defs);
    }
    cJSON_AddItemToObject(props, args_key, args);
    cJSON *req = cJSON_AddArrayToObject(o, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString(args_key));
    return o;
}

/* The converter's GBNF with its start rule renamed "root" -> "tool-call" (also where
 * a recursive schema refers to it), outside literals and classes. */
static char *rename_root(const char *g) {
    size_t n = strlen(g), o = 0;
    char *out = malloc(n * 2 + 64);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        char c = g[i];
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            out[o++] = g[i++];
            while (i < n && g[i] != close) {
                if (g[i] == '\\' && i + 1 < n) out[o++] = g[i++];
                out[o++] = g[i++];
            }
            if (i < n) out[o++] = g[i++];
        } else if ((i == 0 || !(isalnum((unsigned char)g[i - 1]) || g[i - 1] == '-' || g[i - 1] == '_')) && !strncmp(g + i, "root", 4) &&
                   !(isalnum((unsigned char)g[i + 4]) || g[i + 4] == '-' || g[i + 4] == '_')) {
            memcpy(out + o, "tool-call", 9);
            o += 9;
            i += 4;
        } else out[o++] = g[i++];
    }
    out[o] = 0;
    return out;
}

static th_status tools_schema(th_tool_format f, const char *tools_json, size_t len, const char *only, char **schema) {
    cJSON *tools = cJSON_ParseWithLength(tools_json, len);
    if (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) == 0) {
        cJSON_Delete(tools);
        return th_set_error(TH_ERR_FORMAT, "'tools' must be a non-empty array");
    }
    cJSON *root = cJSON_CreateObject(), *any = cJSON_AddArrayToObject(root, "anyOf");
    const char *args_key = f == TH_TOOLS_LLAMA3 ? "parameters" : "arguments";
    const cJSON *t;
    int i = 0, n_used = 0;
    const char *bad = NULL;
    th_status s = TH_OK;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *name = fn ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        const cJSON *params = fn ? cJSON_GetObjectItemCaseSensitive(fn, "parameters") : NULL;
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsObject(fn) ||
            !cJSON_IsString(name) || !*name->valuestring || (params && !cJSON_IsObject(params))) {
            s = th_set_error(TH_ERR_FORMAT, "'tools[%d]' must be {\"type\": \"function\", \"function\": {\"name\": string, "
                             "\"parameters\": object?}}", i);
            break;
        }
        i++;
        if (only && strcmp(only, name->valuestring)) continue;
        cJSON_AddItemToArray(any, call_schema(fn, args_key, root, &bad));
        n_used++;
        if (bad) { s = th_set_error(TH_ERR_UNSUPPORTED, "'tools': %s", bad); break; }
    }
    if (!s && n_used == 0) s = th_set_error(TH_ERR_ARG, "'tool_choice' names the function '%s', which is not in 'tools'", only ? only : "");
    if (!s && !(*schema = cJSON_PrintUnformatted(root))) s = th_set_error(TH_ERR_NOMEM, "tool calls: out of memory");
    cJSON_Delete(root);
    cJSON_Delete(tools);
    return s;
}

th_status th_tool_call_grammar(th_tool_format f, const char *tools_json, size_t len, const char *only, bool parallel,
                               char **gbnf) {
    if (!gbnf || !tools_json) return th_set_error(TH_ERR_ARG, "th_tool_call_grammar: invalid arguments");
    *gbnf = NULL;
    if (f != TH_TOOLS_HERMES && f != TH_TOOLS_LLAMA3 && f != TH_TOOLS_MISTRAL)
        return th_set_error(TH_ERR_ARG, "th_tool_call_grammar: unknown format %d", (int)f);
    char *schema = NULL, *g = NULL;
    th_status s = tools_schema(f, tools_json, len, only, &schema);
    if (!s) {
        s = th_json_schema_to_gbnf(schema, strlen(schema), &g);
        if (s) {   /* name the part of the request the converter refused */
            char msg[400];
            snprintf(msg, sizeof msg, "%s", th_last_error());
            th_set_error(s, "a tool's 'parameters' schema: %s", msg);
        }
    }
    free(schema);
    char *body = s ? NULL : rename_root(g);
    free(g);
    if (!s && !body) s = th_set_error(TH_ERR_NOMEM, "tool calls: out of memory");
    if (s) return s;
    const char *head = f == TH_TOOLS_HERMES
        ? (parallel ? "root ::= tool-block (\"\\n\" tool-block)*\ntool-block ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n"
                    : "root ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n")
        : f == TH_TOOLS_MISTRAL ? (parallel ? "root ::= \"[\" tool-call (\", \" tool-call)* \"]\"\n" : "root ::= \"[\" tool-call \"]\"\n")
                                : "root ::= tool-call\n";
    size_t n = strlen(head) + strlen(body) + 1;
    if (!(*gbnf = malloc(n))) { free(body); return th_set_error(TH_ERR_NOMEM, "tool calls: out of memory"); }
    snprintf(*gbnf, n, "%s%s", head, body);
    free(body);
    return TH_OK;
}
