/* serve_req.c — turns request bodies into validated work: completion and chat
 * requests into jobs (every field type- and range-checked, every token id and
 * logit_bias key bounds-checked, fields we cannot honour yet refused by name,
 * the chat template rendered, the prompt tokenized and measured against the
 * context), and the /tokenize and /detokenize endpoints. Any problem is a 400
 * with a message naming the field; the parsed JSON and the template's render
 * are paid for from the server's shared memory budget (503 when it is spent). */
#include "serve.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct perr { int *http; char *msg; size_t cap; } perr;

static bool fail(perr *e, int http, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(perr *e, int http, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, e->cap, fmt, ap);
    va_end(ap);
    *e->http = http;
    return false;
}

/* Bytes a parsed tree holds: cJSON nodes (and malloc's overhead) and their strings. */
static size_t json_bytes(const cJSON *o) {
    size_t n = 0;
    for (; o; o = o->next) {
        n += sizeof(cJSON) + 16;
        if (o->valuestring) n += strlen(o->valuestring) + 17;
        if (o->string) n += strlen(o->string) + 17;
        n += json_bytes(o->child);
    }
    return n;
}

/* Parses a whole body as one JSON object; trailing non-space is an error. The
 * parse is paid for from the shared budget: first the most a body of this size
 * can take (a node of 80 bytes for every two bytes of text, strings copied),
 * then what the tree holds; *charged is given back by json_free. */
static cJSON *parse_object(srv_server *S, const char *body, size_t len, perr *e, size_t *charged) {
    *charged = 0;
    if (!body || len == 0) { fail(e, 400, "the request body is empty; expected a JSON object"); return NULL; }
    size_t bound = len > (SIZE_MAX - (64u << 10)) / 48 ? SIZE_MAX : len * 48 + (64u << 10);
    if (!th_mem_budget_take(S->budget, bound)) {
        fail(e, 503, "the server's memory budget for requests in flight (--mem-budget) is exhausted; try again later");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    size_t held = root ? json_bytes(root) : 0;
    th_mem_budget_give(S->budget, bound > held ? bound - held : 0);
    *charged = held < bound ? held : bound;
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        fail(e, 400, "the request body is not valid JSON (error near byte %zu; nesting deeper than %d is refused too)", at,
             CJSON_NESTING_LIMIT);
        return NULL;
    }
    for (const char *p = end; p && p < body + len; p++)
        if (!isspace((unsigned char)*p)) { cJSON_Delete(root); fail(e, 400, "the request body has text after its JSON value"); goto out; }
    if (!cJSON_IsObject(root)) { cJSON_Delete(root); fail(e, 400, "the request body must be a JSON object"); goto out; }
    return root;
out:
    th_mem_budget_give(S->budget, *charged);
    *charged = 0;
    return NULL;
}

static void json_free(srv_server *S, cJSON *o, size_t charged) {
    cJSON_Delete(o);
    th_mem_budget_give(S->budget, charged);
}

static const cJSON *field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool get_num(const cJSON *o, const char *key, double lo, double hi, double *out, perr *e) {
    const cJSON *v = field(o, key);
    if (!v) return true;
    if (!cJSON_IsNumber(v)) return fail(e, 400, "'%s' must be a number", key);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi) return fail(e, 400, "'%s' must be a finite number in [%g, %g]", key, lo, hi);
    *out = d;
    return true;
}

static bool get_int(const cJSON *o, const char *key, double lo, double hi, int64_t *out, perr *e) {
    const cJSON *v = field(o, key);
    if (!v) return true;
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d)) return fail(e, 400, "'%s' must be an integer", key);
    if (d < lo || d > hi) return fail(e, 400, "'%s' is %.0f; it must be in [%.0f, %.0f]", key, d, lo, hi);
    *out = (int64_t)d;
    return true;
}

static bool get_bool(const cJSON *o, const char *key, bool *out, perr *e) {
    const cJSON *v = field(o, key);
    if (!v) return true;
    if (!cJSON_IsBool(v)) return fail(e, 400, "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return true;
}

/* ---------------------------------------------------------------- sampling fields */

static bool parse_stop(const cJSON *o, srv_params *p, perr *e) {
    const cJSON *v = field(o, "stop");
    if (!v) return true;
    if (cJSON_IsString(v)) {
        if (!*v->valuestring) return true;
        if (strlen(v->valuestring) > SRV_MAX_STOP_LEN) return fail(e, 400, "'stop' strings are limited to %d bytes", SRV_MAX_STOP_LEN);
        p->stop[p->n_stop++] = strdup(v->valuestring);
        return true;
    }
    if (!cJSON_IsArray(v)) return fail(e, 400, "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(v) > SRV_MAX_STOP) return fail(e, 400, "'stop' holds at most %d strings", SRV_MAX_STOP);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it)) return fail(e, 400, "'stop' must be a string or an array of strings");
        if (strlen(it->valuestring) > SRV_MAX_STOP_LEN) return fail(e, 400, "'stop' strings are limited to %d bytes", SRV_MAX_STOP_LEN);
        if (*it->valuestring) p->stop[p->n_stop++] = strdup(it->valuestring);
    }
    return true;
}

static bool parse_token_id(const char *s, int32_t n_vocab, th_token *out) {
    if (!*s || strlen(s) > 10) return false;
    for (const char *q = s; *q; q++) if (*q < '0' || *q > '9') return false;
    long v = strtol(s, NULL, 10);
    if (v < 0 || v >= n_vocab) return false;
    *out = (th_token)v;
    return true;
}

static bool parse_bias(const cJSON *o, srv_params *p, int32_t n_vocab, perr *e) {
    const cJSON *v = field(o, "logit_bias");
    if (!v) return true;
    if (!cJSON_IsObject(v)) return fail(e, 400, "'logit_bias' must be an object mapping token ids to numbers");
    if (cJSON_GetArraySize(v) > SRV_MAX_BIAS) return fail(e, 400, "'logit_bias' holds at most %d entries", SRV_MAX_BIAS);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        th_token t;
        if (!parse_token_id(it->string, n_vocab, &t))
            return fail(e, 400, "'logit_bias' key '%.40s' is not a token id in [0, %d)", it->string, n_vocab);
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || fabs(it->valuedouble) > 100)
            return fail(e, 400, "'logit_bias' value for token %d must be a number in [-100, 100]", t);
        p->bias_tok[p->n_bias] = t;
        p->bias_val[p->n_bias++] = (float)it->valuedouble;
    }
    return true;
}

/* "ignore_eos": true (llama-server's field): the end-of-generation tokens get a
 * bias of -inf, so a completion runs to max_tokens (benchmarks). */
static bool parse_ignore_eos(const srv_server *S, const cJSON *o, srv_params *p, perr *e) {
    bool ignore = false;
    if (!get_bool(o, "ignore_eos", &ignore, e)) return false;
    if (!ignore) return true;
    int32_t n_vocab = th_model_n_vocab(S->model);
    for (th_token t = 0; t < n_vocab; t++) {
        if (!th_token_is_eog(S->model, t)) continue;
        if (p->n_bias >= SRV_MAX_BIAS) return fail(e, 400, "'ignore_eos': 'logit_bias' leaves no room for the end-of-generation tokens");
        p->bias_tok[p->n_bias] = t;
        p->bias_val[p->n_bias++] = -INFINITY;
    }
    return true;
}

static bool parse_logprobs(const cJSON *o, srv_params *p, perr *e) {
    int64_t top = 0;
    if (p->chat) {
        if (!get_bool(o, "logprobs", &p->logprobs, e)) return false;
        if (!get_int(o, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, e)) return false;
        if (top > 0 && !p->logprobs) return fail(e, 400, "'top_logprobs' needs 'logprobs': true");
    } else {
        const cJSON *v = field(o, "logprobs");
        if (v) {
            if (!get_int(o, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, e)) return false;
            p->logprobs = true;
        }
    }
    p->top_logprobs = (int32_t)top;
    return true;
}

static uint64_t random_seed(void) {
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
    }
    if (f) fclose(f);
    return s;
}

void srv_random_hex(char *out, size_t n_hex) {
    static const char hx[] = "0123456789abcdef";
    uint64_t a = random_seed(), b = random_seed();
    for (size_t i = 0; i < n_hex; i++) {
        uint64_t *w = i < 16 ? &a : &b;
        out[i] = hx[*w & 15];
        *w >>= 4;
    }
    out[n_hex] = 0;
}

/* Fields of the OpenAI API we recognise but cannot honour yet: refused by name
 * rather than ignored (a client asking for function calls the old way must not
 * silently get free text). Values that ask for nothing beyond what we do pass:
 * null, function_call "none", best_of 1, suffix "". (response_format, grammar,
 * json_schema: parse_structured; tools, tool_choice: serve_tools.c.) */
static bool refuse_unsupported(const cJSON *o, bool chat, perr *e) {
    const cJSON *v;
    if ((v = field(o, "functions"))) return fail(e, 400, "'functions' is not supported (use 'tools')");
    if ((v = field(o, "function_call")) && !(cJSON_IsString(v) && !strcmp(v->valuestring, "none")))
        return fail(e, 400, "'function_call' is not supported (use 'tool_choice')");
    if (!chat) {
        if (field(o, "tools") || field(o, "tool_choice")) return fail(e, 400, "'tools' and 'tool_choice' need /v1/chat/completions");
        if ((v = field(o, "best_of")) && !(cJSON_IsNumber(v) && v->valuedouble == 1))
            return fail(e, 400, "'best_of' is not supported yet (only 1)");
        if ((v = field(o, "suffix")) && !(cJSON_IsString(v) && !*v->valuestring))
            return fail(e, 400, "'suffix' is not supported yet (no fill-in-the-middle)");
    }
    return true;
}

void req_params_clear(srv_params *p) {
    for (int i = 0; i < p->n_stop; i++) free(p->stop[i]);
    p->n_stop = 0;
    th_grammar_free(p->grammar);
    p->grammar = NULL;
}

/* A schema (JSON value) into p->grammar; what names the field for the message. */
static bool schema_grammar(const cJSON *schema, const char *what, srv_params *p, perr *e) {
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema)) return fail(e, 400, "'%s' must be a JSON schema (an object)", what);
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return fail(e, 500, "out of memory");
    th_status s = th_grammar_from_json_schema(text, strlen(text), &p->grammar);
    free(text);
    if (s == TH_ERR_NOMEM) return fail(e, 500, "out of memory");
    if (s) return fail(e, 400, "'%s' cannot be used: %s", what, th_last_error());
    return true;
}

/* `grammar` (GBNF, llama-server's field), `json_schema` (llama-server's), and
 * `response_format` {"type": "text" | "json_object" | "json_schema", ...}: at
 * most one of them constrains the output (p->grammar). */
static bool parse_structured(const cJSON *o, srv_params *p, perr *e) {
    const cJSON *g = field(o, "grammar"), *js = field(o, "json_schema"), *rf = field(o, "response_format");
    const cJSON *type = cJSON_IsObject(rf) ? field(rf, "type") : NULL;
    if (rf && (!cJSON_IsString(type) || (strcmp(type->valuestring, "text") && strcmp(type->valuestring, "json_object") &&
                                          strcmp(type->valuestring, "json_schema"))))
        return fail(e, 400, "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                    "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": ...}}");
    if (rf && !strcmp(type->valuestring, "text")) rf = NULL;
    if ((g != NULL) + (js != NULL) + (rf != NULL) > 1)
        return fail(e, 400, "only one of 'grammar', 'json_schema' and 'response_format' may constrain the output");
    if (g) {
        if (!cJSON_IsString(g)) return fail(e, 400, "'grammar' must be a string (GBNF)");
        th_status s = th_grammar_parse(g->valuestring, strlen(g->valuestring), &p->grammar);
        if (s == TH_ERR_NOMEM) return fail(e, 500, "out of memory");
        if (s) return fail(e, 400, "'grammar' is not a valid GBNF grammar: %s", th_last_error());
        return true;
    }
    if (js) return schema_grammar(js, "json_schema", p, e);
    if (!rf) return true;
    if (!strcmp(type->valuestring, "json_object")) {   /* any object, or llama-server's "schema" beside it */
        const cJSON *sch = field(rf, "schema");
        if (sch) return schema_grammar(sch, "response_format.schema", p, e);
        cJSON *obj = cJSON_CreateObject();
        cJSON_AddStringToObject(obj, "type", "object");
        bool ok = schema_grammar(obj, "response_format", p, e);
        cJSON_Delete(obj);
        return ok;
    }
    const cJSON *spec = field(rf, "json_schema");
    if (!cJSON_IsObject(spec)) return fail(e, 400, "'response_format.json_schema' must be an object {\"name\", \"schema\", \"strict\"}");
    const cJSON *name = field(spec, "name"), *strict = field(spec, "strict"), *sch = field(spec, "schema");
    if (!cJSON_IsString(name) || !*name->valuestring || strlen(name->valuestring) > 64)
        return fail(e, 400, "'response_format.json_schema.name' must be a string of 1 to 64 bytes");
    if (strict && !cJSON_IsBool(strict)) return fail(e, 400, "'response_format.json_schema.strict' must be true or false");
    if (!sch) {   /* no schema: any JSON object */
        cJSON *obj = cJSON_CreateObject();
        cJSON_AddStringToObject(obj, "type", "object");
        bool ok = schema_grammar(obj, "response_format.json_schema", p, e);
        cJSON_Delete(obj);
        return ok;
    }
    return schema_grammar(sch, "response_format.json_schema.schema", p, e);   /* strict or not: always enforced */
}

static bool parse_params(srv_server *S, const cJSON *o, srv_params *p, perr *e) {
    int32_t n_vocab = th_model_n_vocab(S->model), slot_ctx = sched_slot_ctx(S->sched);
    if (!refuse_unsupported(o, p->chat, e)) return false;
    const cJSON *model = field(o, "model");
    if (model && !cJSON_IsString(model)) return fail(e, 400, "'model' must be a string");
    p->sp = th_sampler_default_params();
    p->sp.temperature = 1.0f;
    p->sp.top_p = 1.0f;
    p->sp.penalty_last_n = -1;
    double d;
    int64_t i64 = -1;
    d = 1.0; if (!get_num(o, "temperature", 0, 2, &d, e)) return false; p->sp.temperature = (float)d;
    d = 1.0; if (!get_num(o, "top_p", 0, 1, &d, e)) return false; p->sp.top_p = (float)d;
    d = 0.0; if (!get_num(o, "min_p", 0, 1, &d, e)) return false; p->sp.min_p = (float)d;
    d = 0.0; if (!get_num(o, "presence_penalty", -2, 2, &d, e)) return false; p->sp.presence_penalty = (float)d;
    d = 0.0; if (!get_num(o, "frequency_penalty", -2, 2, &d, e)) return false; p->sp.frequency_penalty = (float)d;
    d = 1.0; if (!get_num(o, "repeat_penalty", 0, 10, &d, e)) return false; p->sp.repeat_penalty = (float)d;
    i64 = 0; if (!get_int(o, "top_k", 0, n_vocab, &i64, e)) return false; p->sp.top_k = (int32_t)i64;
    i64 = 1; if (!get_int(o, "n", 1, SRV_MAX_N, &i64, e)) return false; p->n = (int32_t)i64;
    const char *mt = p->chat && field(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    i64 = -1; if (!get_int(o, mt, 1, slot_ctx, &i64, e)) return false; p->max_tokens = (int32_t)i64;
    if (field(o, "seed")) {
        if (!get_int(o, "seed", -9.2e18, 9.2e18, &i64, e)) return false;
        p->sp.seed = (uint64_t)i64;
        p->seed_given = true;
    } else p->sp.seed = random_seed();
    i64 = 0; if (!get_int(o, "draft_max", -1, 64, &i64, e)) return false; p->draft_max = (int32_t)i64;
    if (!get_bool(o, "stream", &p->stream, e) || !get_bool(o, "echo", &p->echo, e)) return false;
    if (p->echo) return fail(e, 400, "'echo' is not supported");
    const cJSON *so = field(o, "stream_options");
    if (so && !cJSON_IsObject(so)) return fail(e, 400, "'stream_options' must be an object");
    if (so && !get_bool(so, "include_usage", &p->include_usage, e)) return false;
    return parse_stop(o, p, e) && parse_bias(o, p, n_vocab, e) && parse_ignore_eos(S, o, p, e) && parse_logprobs(o, p, e) &&
           parse_structured(o, p, e);
}

/* ---------------------------------------------------------------- prompts */

/* The buffer is sized from the tokenizer's answer: a first guess from the byte
 * count, and when that is too small (a SentencePiece vocabulary without '▁'
 * spends three byte tokens on a space) once more with the count it reported. */
static bool tokenize_text(srv_server *S, const char *text, size_t len, bool add_special, bool parse_special,
                          th_token **out, int32_t *n, perr *e) {
    size_t cap = len + 8, got = 0;
    for (int tries = 0; tries < 2; tries++) {
        if (cap > (size_t)INT32_MAX) return fail(e, 400, "the prompt has %zu tokens, too many", cap);
        th_token *t = malloc(cap * sizeof *t);
        if (!t) return fail(e, 500, "out of memory");
        th_status s = th_tokenize(S->model, text, len, add_special, parse_special, t, cap, &got);
        if (s == TH_OK) { *out = t; *n = (int32_t)got; return true; }
        free(t);
        if (s != TH_ERR_CAPACITY) return fail(e, 400, "cannot tokenize the prompt: %s", th_last_error());
        cap = got;
    }
    return fail(e, 500, "cannot tokenize the prompt: %s", th_last_error());
}

static bool parse_prompt(srv_server *S, const cJSON *o, srv_job *j, perr *e) {
    const cJSON *v = field(o, "prompt");
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 &&
        (cJSON_IsString(cJSON_GetArrayItem(v, 0)) || cJSON_IsArray(cJSON_GetArrayItem(v, 0))))
        v = cJSON_GetArrayItem(v, 0);   /* a list of one prompt */
    if (cJSON_IsString(v))
        return tokenize_text(S, v->valuestring, strlen(v->valuestring), true, true, &j->prompt, &j->n_prompt, e);
    if (!cJSON_IsArray(v)) return fail(e, 400, "'prompt' must be a string or an array of token ids");
    const cJSON *first = cJSON_GetArrayItem(v, 0);
    if (cJSON_IsString(first) || cJSON_IsArray(first))
        return fail(e, 400, "'prompt' is a list of %d prompts; this server takes one prompt per request (a string or "
                    "one array of token ids)", cJSON_GetArraySize(v));
    int n = cJSON_GetArraySize(v), n_vocab = th_model_n_vocab(S->model);
    if (n > sched_slot_ctx(S->sched)) return fail(e, 400, "the prompt has %d tokens; a sequence holds at most %d", n, sched_slot_ctx(S->sched));
    j->prompt = malloc((size_t)(n > 0 ? n : 1) * sizeof *j->prompt);
    if (!j->prompt) return fail(e, 500, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || d != floor(d) || d < 0 || d >= n_vocab)
            return fail(e, 400, "'prompt' token %d is not a token id in [0, %d)", j->n_prompt, n_vocab);
        j->prompt[j->n_prompt++] = (th_token)d;
    }
    return true;
}

/* Validated copy of the messages ({role, content} with text content only, and
 * the tool-calling fields serve_tools.c keeps). */
static cJSON *clean_messages(const cJSON *msgs, perr *e) {
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) { fail(e, 400, "'messages' must be a non-empty array"); return NULL; }
    cJSON *out = cJSON_CreateArray();
    const cJSON *m;
    int i = 0;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = field(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) { fail(e, 400, "'messages[%d]' must be an object with a string 'role'", i); goto bad; }
        char *text = NULL;
        if (!content) text = strdup("");
        else if (cJSON_IsString(content)) text = strdup(content->valuestring);
        else if (cJSON_IsArray(content)) {
            size_t n = 0, cap = 0;
            const cJSON *part;
            cJSON_ArrayForEach(part, content) {
                const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type"), *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
                    free(text);
                    fail(e, 400, "'messages[%d].content' parts must be {\"type\": \"text\", \"text\": ...}", i);
                    goto bad;
                }
                /* as llama-server: the parts' texts joined by "\n" (none before the first
                 * non-empty text) */
                if (n) buf_append(&text, &n, &cap, "\n", 1);
                buf_append(&text, &n, &cap, tx->valuestring, strlen(tx->valuestring));
            }
            if (!text) text = strdup("");
        } else { fail(e, 400, "'messages[%d].content' must be a string, an array of text parts or null", i); goto bad; }
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "role", role->valuestring);
        cJSON_AddStringToObject(c, "content", text ? text : "");
        cJSON_AddItemToArray(out, c);
        free(text);
        int http = tools_copy_message(m, c, i, e->msg, e->cap);   /* tool_calls, tool_call_id, name */
        if (http) { *e->http = http; goto bad; }
        i++;
    }
    return out;
bad:
    cJSON_Delete(out);
    return NULL;
}

static char *token_text(const th_model *m, th_token t) {
    char buf[256];
    int32_t k = t >= 0 ? th_token_to_piece(m, t, buf, sizeof buf, true) : 0;
    return strndup(buf, k > 0 ? (size_t)k : 0);
}

/* msgs (and tools, may be NULL) rendered by tmpl, or as ChatML when there is no
 * template; neither is consumed. NULL with e set. */
static char *render(srv_server *S, const char *tmpl, const cJSON *msgs, const cJSON *tools, perr *e) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemReferenceToObject(root, "messages", (cJSON *)msgs);
    if (tools) cJSON_AddItemReferenceToObject(root, "tools", (cJSON *)tools);
    char *json = cJSON_PrintUnformatted(root), *prompt = NULL;
    cJSON_Delete(root);
    if (!json) { fail(e, 500, "out of memory"); return NULL; }
    if (tmpl) {
        char *bos = token_text(S->model, th_token_bos(S->model)), *eos = token_text(S->model, th_token_eos(S->model));
        th_chat_opts co = { .add_generation_prompt = true, .bos_token = bos, .eos_token = eos };
        th_status s = th_chat_render_budget(tmpl, json, &co, S->budget, &prompt);
        free(bos); free(eos);
        if (s == TH_ERR_CAPACITY) fail(e, 503, "the chat template could not run: %s (--mem-budget); try again later", th_last_error());
        else if (s) fail(e, s == TH_ERR_NOMEM ? 500 : 400, "the chat template failed: %s", th_last_error());
    } else {   /* no template: ChatML (th_chat_render_chatml, shared with `chat`) */
        th_chat_opts co = { .add_generation_prompt = true };
        if (th_chat_render_chatml(json, &co, &prompt)) fail(e, 500, "ChatML: %s", th_last_error());
    }
    free(json);
    return prompt;
}

/* With tools: the template's own rendering when it uses them (the calls' format is
 * the one it teaches), else the tools taught in the system message (Hermes format).
 * Then the grammar of a call for tool_choice required / named. */
static char *render_with_tools(srv_server *S, const char *tmpl, const cJSON *msgs, srv_tools *tl, srv_params *p, perr *e) {
    char *prompt = render(S, tmpl, msgs, tl->tools, e);
    if (!prompt || !tl->tools) return prompt;
    if (p->grammar) {
        free(prompt);
        fail(e, 400, "'grammar', 'json_schema' and 'response_format' cannot be combined with 'tools' (unless 'tool_choice' is \"none\")");
        return NULL;
    }
    th_tool_format f = th_tool_format_of_template(tmpl);
    char *plain = tmpl ? render(S, tmpl, msgs, NULL, e) : NULL;
    if (!tmpl || (plain && !strcmp(plain, prompt))) {   /* the template ignores tools: teach them */
        cJSON *taught = tools_teach(msgs, tl->tools);
        free(prompt);
        prompt = taught ? render(S, tmpl, taught, NULL, e) : NULL;
        if (!taught) fail(e, 500, "out of memory");
        cJSON_Delete(taught);
        f = TH_TOOLS_HERMES;
    }
    free(plain);
    int http = prompt ? tools_grammar(tl, f, &p->grammar, e->msg, e->cap) : 0;
    if (http) { *e->http = http; free(prompt); return NULL; }
    p->tools = f;
    return prompt;
}

static bool parse_messages(srv_server *S, const cJSON *o, srv_job *j, perr *e) {
    srv_tools tl;
    int http = tools_parse(o, true, &tl, e->msg, e->cap);
    if (http) { *e->http = http; return false; }
    cJSON *msgs = clean_messages(field(o, "messages"), e);
    if (!msgs) { tools_clear(&tl); return false; }
    const cJSON *ct = field(o, "chat_template");
    if (ct && !cJSON_IsString(ct)) { cJSON_Delete(msgs); tools_clear(&tl); return fail(e, 400, "'chat_template' must be a string"); }
    const char *tmpl = ct ? ct->valuestring : th_model_meta_str(S->model, "tokenizer.chat_template");
    char *prompt = render_with_tools(S, tmpl, msgs, &tl, &j->p, e);
    cJSON_Delete(msgs);
    tools_clear(&tl);
    if (!prompt) return false;
    bool ok = tokenize_text(S, prompt, strlen(prompt), true, true, &j->prompt, &j->n_prompt, e);
    free(prompt);
    th_token bos = th_token_bos(S->model);   /* a template writing BOS plus a vocab adding it: keep one */
    if (ok && j->n_prompt >= 2 && j->prompt[0] == bos && j->prompt[1] == bos) {
        memmove(j->prompt, j->prompt + 1, (size_t)(j->n_prompt - 1) * sizeof *j->prompt);
        j->n_prompt--;
    }
    return ok;
}

srv_job *req_parse_completion(srv_server *S, const char *body, size_t len, bool chat, int *http, char *msg, size_t cap) {
    perr e = { http, msg, cap };
    size_t charged;
    cJSON *o = parse_object(S, body, len, &e, &charged);
    if (!o) return NULL;
    srv_job *j = job_new();
    if (!j) { json_free(S, o, charged); fail(&e, 500, "out of memory"); return NULL; }
    j->p.chat = chat;
    bool ok = parse_params(S, o, &j->p, &e) && (chat ? parse_messages(S, o, j, &e) : parse_prompt(S, o, j, &e));
    json_free(S, o, charged);
    int32_t slot_ctx = sched_slot_ctx(S->sched);
    if (ok && j->n_prompt == 0) ok = fail(&e, 400, "the prompt is empty");
    if (ok && j->n_prompt >= slot_ctx)
        ok = fail(&e, 400, "the prompt has %d tokens; the context of a sequence holds %d (prompt and completion together)",
                  j->n_prompt, slot_ctx);
    if (ok && j->p.n > sched_parallel(S->sched))
        ok = fail(&e, 400, "'n' is %d but the server runs %d sequences at once (--parallel)", j->p.n, sched_parallel(S->sched));
    if (ok && (j->p.max_tokens < 0 || j->p.max_tokens > slot_ctx - j->n_prompt)) j->p.max_tokens = slot_ctx - j->n_prompt;
    if (ok && !(j->choices = calloc((size_t)j->p.n, sizeof *j->choices))) ok = fail(&e, 500, "out of memory");
    if (!ok) { job_release(j); return NULL; }
    j->created = (int64_t)time(NULL);
    j->t_arrive = srv_now();
    char hex[25];
    srv_random_hex(hex, 24);
    snprintf(j->id, sizeof j->id, "%s-%s", chat ? "chatcmpl" : "cmpl", hex);
    return j;
}

/* ---------------------------------------------------------------- tokenize / detokenize */

char *req_tokenize(srv_server *S, const char *body, size_t len, int *http) {
    char msg[256];
    perr e = { http, msg, sizeof msg };
    size_t charged;
    cJSON *o = parse_object(S, body, len, &e, &charged);
    if (!o) return resp_error(*http, msg);
    const cJSON *c = field(o, "content");
    bool add_special = false, parse_special = true;
    th_token *t = NULL;
    int32_t n = 0;
    char *out = NULL;
    if (!cJSON_IsString(c)) fail(&e, 400, "'content' must be a string");
    else if (get_bool(o, "add_special", &add_special, &e) && get_bool(o, "parse_special", &parse_special, &e) &&
             tokenize_text(S, c->valuestring, strlen(c->valuestring), add_special, parse_special, &t, &n, &e)) {
        cJSON *r = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(r, "tokens");
        for (int32_t i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(t[i]));
        out = cJSON_PrintUnformatted(r);
        cJSON_Delete(r);
        *http = 200;
    }
    free(t);
    json_free(S, o, charged);
    return out ? out : resp_error(*http, msg);
}

char *req_detokenize(srv_server *S, const char *body, size_t len, int *http) {
    char msg[256];
    perr e = { http, msg, sizeof msg };
    size_t charged;
    cJSON *o = parse_object(S, body, len, &e, &charged);
    if (!o) return resp_error(*http, msg);
    const cJSON *arr = field(o, "tokens"), *it;
    int n_vocab = th_model_n_vocab(S->model), i = 0;
    char *text = NULL, *out = NULL;
    size_t n = 0, cap = 0;
    bool ok = cJSON_IsArray(arr) || fail(&e, 400, "'tokens' must be an array of token ids");
    buf_append(&text, &n, &cap, "", 0);
    const cJSON *list = ok ? arr : NULL;
    cJSON_ArrayForEach(it, list) {
        double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || d != floor(d) || d < 0 || d >= n_vocab) { ok = fail(&e, 400, "'tokens[%d]' is not a token id in [0, %d)", i, n_vocab); break; }
        char piece[256];
        int32_t k = th_token_to_piece(S->model, (th_token)d, piece, sizeof piece, true);
        if (k > 0) buf_append(&text, &n, &cap, piece, (size_t)k);
        i++;
    }
    if (ok) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "content", text ? text : "");
        out = cJSON_PrintUnformatted(r);
        cJSON_Delete(r);
        *http = 200;
    }
    free(text);
    json_free(S, o, charged);
    return out ? out : resp_error(*http, msg);
}
