/* serve_tools.c — the request side of tool calling for /v1/chat/completions:
 * `tools` and `tool_choice` checked (auto / none / required / a named function,
 * `parallel_tool_calls`), history messages with `tool_calls` (arguments given
 * as JSON strings become objects, which the templates print with tojson) and
 * `role: "tool"` results kept for the chat template, the Hermes-style
 * description of the tools for templates that ignore `tools` (SmolLM2's ChatML
 * among them: "teaching" them), and the grammar of a valid call for required /
 * named choices (th_tool_call_grammar). The format and parsing of calls are
 * library code (src/runtime/toolcall.c); serve_resp.c turns them into
 * message.tool_calls. Problems are HTTP statuses with a message naming the field. */
#include "serve.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int err(char *msg, size_t cap, int http, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int err(char *msg, size_t cap, int http, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return http;
}

static const cJSON *get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

void tools_clear(srv_tools *t) {
    cJSON_Delete(t->tools);
    memset(t, 0, sizeof *t);
}

/* `tools` entries: {"type": "function", "function": {"name": string, "parameters": object?, ...}}. */
static int check_tools(const cJSON *tools, char *msg, size_t cap) {
    if (!cJSON_IsArray(tools)) return err(msg, cap, 400, "'tools' must be an array");
    if (cJSON_GetArraySize(tools) > SRV_MAX_TOOLS) return err(msg, cap, 400, "'tools' holds at most %d functions", SRV_MAX_TOOLS);
    const cJSON *t;
    int i = 0;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *type = get(t, "type"), *fn = get(t, "function");
        const cJSON *name = fn ? get(fn, "name") : NULL, *params = fn ? get(fn, "parameters") : NULL;
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function"))
            return err(msg, cap, 400, "'tools[%d]' must be {\"type\": \"function\", \"function\": {...}}", i);
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !*name->valuestring || strlen(name->valuestring) > 64)
            return err(msg, cap, 400, "'tools[%d].function.name' must be a string of 1 to 64 bytes", i);
        if (params && !cJSON_IsObject(params)) return err(msg, cap, 400, "'tools[%d].function.parameters' must be a JSON schema object", i);
        i++;
    }
    return 0;
}

int tools_parse(const cJSON *o, bool chat, srv_tools *t, char *msg, size_t cap) {
    memset(t, 0, sizeof *t);
    const cJSON *tools = get(o, "tools"), *tc = get(o, "tool_choice"), *par = get(o, "parallel_tool_calls");
    if (!tools && !tc && !par) return 0;
    if (!chat && (tools || tc)) return err(msg, cap, 400, "'tools' and 'tool_choice' need /v1/chat/completions");
    int http;
    if (tools && (http = check_tools(tools, msg, cap))) return http;
    bool any = tools && cJSON_GetArraySize(tools) > 0;
    t->choice = any ? TOOLS_AUTO : TOOLS_NONE;
    if (par && !cJSON_IsBool(par)) return err(msg, cap, 400, "'parallel_tool_calls' must be true or false");
    t->parallel = par && cJSON_IsTrue(par);
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        t->choice = !strcmp(s, "none") ? TOOLS_NONE : !strcmp(s, "auto") ? TOOLS_AUTO : !strcmp(s, "required") ? TOOLS_REQUIRED : -1;
        if (t->choice < 0) return err(msg, cap, 400, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    } else if (tc) {
        const cJSON *type = cJSON_IsObject(tc) ? get(tc, "type") : NULL, *fn = cJSON_IsObject(tc) ? get(tc, "function") : NULL;
        const cJSON *name = cJSON_IsObject(fn) ? get(fn, "name") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(name) || strlen(name->valuestring) >= sizeof t->name)
            return err(msg, cap, 400, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        t->choice = TOOLS_NAMED;
        snprintf(t->name, sizeof t->name, "%s", name->valuestring);
    }
    if (t->choice != TOOLS_NONE && !any) return err(msg, cap, 400, "'tool_choice' asks for a tool call but 'tools' is empty or missing");
    if (t->choice == TOOLS_NAMED) {
        const cJSON *it;
        bool found = false;
        cJSON_ArrayForEach(it, tools) found = found || !strcmp(get(get(it, "function"), "name")->valuestring, t->name);
        if (!found) return err(msg, cap, 400, "'tool_choice' names the function '%s', which is not in 'tools'", t->name);
    }
    if (t->choice != TOOLS_NONE && !(t->tools = cJSON_Duplicate(tools, true))) return err(msg, cap, 500, "out of memory");
    return 0;
}

/* ---------------------------------------------------------------- history messages */

/* arguments as an object: a JSON string holding an object is parsed (the templates
 * print arguments with tojson); anything else stays as it is. */
static cJSON *arguments_value(const cJSON *a) {
    if (cJSON_IsString(a)) {
        cJSON *v = cJSON_Parse(a->valuestring);
        if (cJSON_IsObject(v)) return v;
        cJSON_Delete(v);
    }
    return a ? cJSON_Duplicate(a, true) : cJSON_CreateObject();
}

int tools_copy_message(const cJSON *m, cJSON *c, int i, char *msg, size_t cap) {
    const cJSON *calls = get(m, "tool_calls"), *id = get(m, "tool_call_id"), *name = get(m, "name");
    if (id && !cJSON_IsString(id)) return err(msg, cap, 400, "'messages[%d].tool_call_id' must be a string", i);
    if (name && !cJSON_IsString(name)) return err(msg, cap, 400, "'messages[%d].name' must be a string", i);
    if (id) cJSON_AddStringToObject(c, "tool_call_id", id->valuestring);
    if (name) cJSON_AddStringToObject(c, "name", name->valuestring);
    if (!calls) return 0;
    if (!cJSON_IsArray(calls)) return err(msg, cap, 400, "'messages[%d].tool_calls' must be an array", i);
    cJSON *out = cJSON_AddArrayToObject(c, "tool_calls");
    const cJSON *tc;
    int k = 0;
    cJSON_ArrayForEach(tc, calls) {
        const cJSON *fn = get(tc, "function"), *fname = fn ? get(fn, "name") : NULL, *tid = get(tc, "id");
        if (!cJSON_IsObject(fn) || !cJSON_IsString(fname) || (tid && !cJSON_IsString(tid)))
            return err(msg, cap, 400, "'messages[%d].tool_calls[%d]' must be {\"id\": string, \"type\": \"function\", "
                       "\"function\": {\"name\": string, \"arguments\": string}}", i, k);
        cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
        if (tid) cJSON_AddStringToObject(o, "id", tid->valuestring);
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddStringToObject(f, "name", fname->valuestring);
        cJSON_AddItemToObject(f, "arguments", arguments_value(get(fn, "arguments")));
        cJSON_AddItemToObject(o, "function", f);
        cJSON_AddItemToArray(out, o);
        k++;
    }
    return 0;
}

/* ---------------------------------------------------------------- teaching a template that ignores tools */

static void append(char **b, size_t *n, size_t *cap, const char *s) { buf_append(b, n, cap, s, strlen(s)); }

static char *describe_tools(const cJSON *tools) {
    char *b = NULL;
    size_t n = 0, cap = 0;
    append(&b, &n, &cap, "You can call functions to help with the request. They are described by JSON schemas "
                         "inside <tools></tools>:\n<tools>\n");
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        char *s = cJSON_PrintUnformatted(t);
        if (s) { append(&b, &n, &cap, s); append(&b, &n, &cap, "\n"); }
        free(s);
    }
    append(&b, &n, &cap, "</tools>\nTo call a function, answer with a JSON object of its name and arguments inside "
                         "<tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function name>, \"arguments\": "
                         "<arguments as a JSON object>}\n</tool_call>");
    return b;
}

/* An assistant message's calls written the way the description asks for. */
static void calls_as_text(cJSON *m) {
    cJSON *calls = cJSON_DetachItemFromObjectCaseSensitive(m, "tool_calls");
    if (!calls) return;
    const cJSON *content = get(m, "content");
    char *b = NULL;
    size_t n = 0, cap = 0;
    append(&b, &n, &cap, cJSON_IsString(content) ? content->valuestring : "");
    const cJSON *tc;
    cJSON_ArrayForEach(tc, calls) {
        const cJSON *fn = get(tc, "function");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "name", cJSON_Duplicate(get(fn, "name"), true));
        cJSON_AddItemToObject(o, "arguments", cJSON_Duplicate(get(fn, "arguments"), true));
        char *s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (n) append(&b, &n, &cap, "\n");
        append(&b, &n, &cap, "<tool_call>\n");
        append(&b, &n, &cap, s ? s : "{}");
        append(&b, &n, &cap, "\n</tool_call>");
        free(s);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(m, "content");
    cJSON_AddStringToObject(m, "content", b ? b : "");
    free(b);
    cJSON_Delete(calls);
}

cJSON *tools_teach(const cJSON *msgs, const cJSON *tools) {
    cJSON *out = cJSON_Duplicate(msgs, true);
    char *desc = describe_tools(tools);
    if (!out || !desc) { cJSON_Delete(out); free(desc); return NULL; }
    cJSON *first = cJSON_GetArrayItem(out, 0), *m;
    const cJSON *role = first ? get(first, "role") : NULL;
    if (cJSON_IsString(role) && !strcmp(role->valuestring, "system")) {
        const cJSON *c = get(first, "content");
        size_t n = strlen(desc) + (cJSON_IsString(c) ? strlen(c->valuestring) : 0) + 3;
        char *joined = malloc(n);
        if (joined) snprintf(joined, n, "%s%s%s", cJSON_IsString(c) ? c->valuestring : "", cJSON_IsString(c) && *c->valuestring ? "\n\n" : "", desc);
        cJSON_DeleteItemFromObjectCaseSensitive(first, "content");
        cJSON_AddStringToObject(first, "content", joined ? joined : desc);
        free(joined);
    } else {
        cJSON *sys = cJSON_CreateObject();
        cJSON_AddStringToObject(sys, "role", "system");
        cJSON_AddStringToObject(sys, "content", desc);
        cJSON_InsertItemInArray(out, 0, sys);
    }
    free(desc);
    cJSON_ArrayForEach(m, out) calls_as_text(m);
    return out;
}

int tools_grammar(const srv_tools *t, th_tool_format f, th_grammar **out, char *msg, size_t cap) {
    *out = NULL;
    if (t->choice != TOOLS_REQUIRED && t->choice != TOOLS_NAMED) return 0;
    char *json = cJSON_PrintUnformatted(t->tools), *gbnf = NULL;
    if (!json) return err(msg, cap, 500, "out of memory");
    th_status s = th_tool_call_grammar(f, json, strlen(json), t->choice == TOOLS_NAMED ? t->name : NULL, t->parallel, &gbnf);
    free(json);
    if (!s) s = th_grammar_parse(gbnf, strlen(gbnf), out);
    free(gbnf);
    if (s == TH_ERR_NOMEM) return err(msg, cap, 500, "out of memory");
    if (s) return err(msg, cap, 400, "'tools' cannot be turned into a grammar for 'tool_choice': %s", th_last_error());
    return 0;
}
