/* serve_resp.c — the JSON the server answers with: OpenAI error objects,
 * whole chat / text completions (choices, logprobs, usage, tool calls parsed
 * out of the text with finish_reason "tool_calls"), and the SSE chunks of a
 * streamed completion (with tools, content is held back from where a call may
 * begin; the calls go out at the end as OpenAI's tool_calls deltas). Text goes out as valid UTF-8 (invalid bytes become
 * U+FFFD, NUL bytes are dropped) so clients can always parse it. */
#include "serve.h"
#include <stdlib.h>
#include <string.h>

bool buf_append(char **b, size_t *n, size_t *cap, const char *s, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t nc = (*n + len + 1) * 2;
        if (nc < 256) nc = 256;
        char *nb = realloc(*b, nc);
        if (!nb) return false;
        *b = nb;
        *cap = nc;
    }
    memcpy(*b + *n, s, len);
    *n += len;
    (*b)[*n] = 0;
    return true;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t i = 1; i < len; i++) cp = cp << 6 | (s[i] & 0x3F);
    static const uint32_t min_cp[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static char *clean_utf8(const char *s, size_t n) {
    char *out = malloc(n * 3 + 1), *p = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 1 && s[i] == 0) { i++; continue; }
        if (k) { memcpy(p, s + i, k); p += k; i += k; }
        else { memcpy(p, "\xEF\xBF\xBD", 3); p += 3; i++; }
    }
    *p = 0;
    return out;
}

static void add_text(cJSON *o, const char *key, const char *s, size_t n) {
    char *c = clean_utf8(s, n);
    cJSON_AddStringToObject(o, key, c ? c : "");
    free(c);
}

static char *print_free(cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *resp_error(int http, const char *msg) {
    const char *type = http == 401 ? "authentication_error" : http == 404 ? "not_found_error"
                     : http == 503 ? "unavailable_error" : http >= 500 ? "server_error" : "invalid_request_error";
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    add_text(e, "message", msg, strlen(msg));
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    cJSON_AddNumberToObject(e, "code", http);
    return print_free(o);
}

static const char *finish_name(int f) { return f == FINISH_STOP ? "stop" : f == FINISH_LENGTH ? "length" : NULL; }

static cJSON *usage_obj(srv_job *j) {
    int32_t gen = 0;
    for (int c = 0; c < j->p.n; c++) gen += j->choices[c].n_tokens;
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + gen);
    return u;
}

/* ---------------------------------------------------------------- logprobs */

static int piece_of(srv_server *S, th_token t, char *buf, int cap) {
    int32_t k = th_token_to_piece(S->model, t, buf, cap, true);
    return k > 0 ? k : 0;
}

static cJSON *bytes_arr(const char *s, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

static cJSON *chat_lp_entry(srv_server *S, th_token t, float lp) {
    char piece[256];
    int k = piece_of(S, t, piece, sizeof piece);
    cJSON *e = cJSON_CreateObject();
    add_text(e, "token", piece, (size_t)k);
    cJSON_AddNumberToObject(e, "logprob", lp);
    cJSON_AddItemToObject(e, "bytes", bytes_arr(piece, k));
    return e;
}

/* Logprobs of tokens [from, to) of choice c, in the endpoint's format. */
static cJSON *logprobs_obj(srv_server *S, srv_job *j, const srv_choice *c, size_t from, size_t to) {
    cJSON *o = cJSON_CreateObject();
    if (j->p.chat) {
        cJSON *content = cJSON_AddArrayToObject(o, "content");
        for (size_t i = from; i < to; i++) {
            const srv_logprob *L = &c->lp[i];
            cJSON *e = chat_lp_entry(S, L->token, L->logprob), *top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int k = 0; k < L->n_top; k++) cJSON_AddItemToArray(top, chat_lp_entry(S, L->top[k].token, L->top[k].logprob));
            cJSON_AddItemToArray(content, e);
        }
        return o;
    }
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (size_t i = from; i < to; i++) {
        const srv_logprob *L = &c->lp[i];
        char piece[256];
        int k = piece_of(S, L->token, piece, sizeof piece);
        char *clean = clean_utf8(piece, (size_t)k);
        cJSON_AddItemToArray(toks, cJSON_CreateString(clean ? clean : ""));
        free(clean);
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(L->logprob));
        cJSON *top = cJSON_CreateObject();
        for (int q = 0; q < L->n_top; q++) {
            k = piece_of(S, L->top[q].token, piece, sizeof piece);
            clean = clean_utf8(piece, (size_t)k);
            if (clean && !cJSON_GetObjectItemCaseSensitive(top, clean)) cJSON_AddNumberToObject(top, clean, L->top[q].logprob);
            free(clean);
        }
        cJSON_AddItemToArray(tops, top);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(L->text_offset));
    }
    return o;
}

/* ---------------------------------------------------------------- tool calls */

/* Choice c's text split into content and calls (j->p.tools); false: out of memory. */
static bool split_calls(srv_job *j, const srv_choice *c, th_tool_calls *tc) {
    if (th_tool_calls_parse(j->p.tools, c->text ? c->text : "", c->n, tc) == TH_OK) return true;
    memset(tc, 0, sizeof *tc);
    return false;
}

/* OpenAI's call object; with_body false: only index and arguments (a stream's later delta). */
static cJSON *call_obj(srv_job *j, const th_tool_call *call, int index, bool head, bool args) {
    cJSON *o = cJSON_CreateObject(), *f;
    if (index >= 0) cJSON_AddNumberToObject(o, "index", index);
    if (head) {
        char id[40], hex[25];
        if (call->id) snprintf(id, sizeof id, "%.39s", call->id);
        else if (j->p.tools == TH_TOOLS_MISTRAL) { srv_random_hex(hex, 9); snprintf(id, sizeof id, "%s", hex); }   /* 9 characters, as its template wants */
        else { srv_random_hex(hex, 24); snprintf(id, sizeof id, "call_%s", hex); }
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "type", "function");
    }
    f = cJSON_AddObjectToObject(o, "function");
    if (head) add_text(f, "name", call->name, strlen(call->name));
    add_text(f, "arguments", args ? call->arguments : "", args ? strlen(call->arguments) : 0);
    return o;
}

/* ---------------------------------------------------------------- whole responses */

static cJSON *envelope(srv_server *S, srv_job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", S->model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "theseus-" THESEUS_VERSION);
    return o;
}

char *resp_completion(srv_server *S, srv_job *j) {
    cJSON *o = envelope(S, j, j->p.chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < j->p.n; i++) {
        const srv_choice *c = &j->choices[i];
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", i);
        th_tool_calls tc = { 0 };
        if (j->p.chat && j->p.tools && !split_calls(j, c, &tc)) { cJSON_Delete(o); return NULL; }
        if (j->p.chat) {
            cJSON *m = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            if (tc.n > 0) {   /* content is null when the message is only calls, as OpenAI's */
                if (*tc.content) add_text(m, "content", tc.content, strlen(tc.content));
                else cJSON_AddNullToObject(m, "content");
                cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
                for (int32_t k = 0; k < tc.n; k++) cJSON_AddItemToArray(calls, call_obj(j, &tc.calls[k], -1, true, true));
            } else add_text(m, "content", c->text ? c->text : "", c->n);
        } else add_text(ch, "text", c->text ? c->text : "", c->n);
        if (j->p.logprobs) cJSON_AddItemToObject(ch, "logprobs", logprobs_obj(S, j, c, 0, c->n_lp));
        else cJSON_AddNullToObject(ch, "logprobs");
        const char *f = tc.n > 0 && c->finish == FINISH_STOP ? "tool_calls" : finish_name(c->finish);
        th_tool_calls_free(&tc);
        if (f) cJSON_AddStringToObject(ch, "finish_reason", f);
        else cJSON_AddNullToObject(ch, "finish_reason");
        cJSON_AddItemToArray(choices, ch);
    }
    cJSON_AddItemToObject(o, "usage", usage_obj(j));
    return print_free(o);
}

/* ---------------------------------------------------------------- streaming */

static bool put_event(cJSON *o, char **out, size_t *n, size_t *cap) {
    char *s = print_free(o);
    if (!s) return false;
    bool ok = buf_append(out, n, cap, "data: ", 6) && buf_append(out, n, cap, s, strlen(s)) && buf_append(out, n, cap, "\n\n", 2);
    free(s);
    return ok;
}

static cJSON *chunk(srv_server *S, srv_job *j, int idx, cJSON **choice) {
    cJSON *o = envelope(S, j, j->p.chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(*choice, "index", idx);
    cJSON_AddItemToArray(choices, *choice);
    if (j->p.include_usage) cJSON_AddNullToObject(o, "usage");
    return o;
}

/* Caller holds j->mu. */
bool resp_stream_delta(srv_server *S, srv_job *j, int idx, size_t *sent, size_t *lp_sent, bool first, bool finish,
                       char **out, size_t *n, size_t *cap) {
    const srv_choice *c = &j->choices[idx];
    size_t ready = c->ready;
    th_tool_calls tc = { 0 };
    if (j->p.chat && j->p.tools) {   /* content only up to where a call may begin; the calls at the end */
        if (finish && !split_calls(j, c, &tc)) return false;
        if (!finish || tc.n > 0) {
            size_t end = th_tool_calls_content_end(j->p.tools, c->text ? c->text : "", ready);
            ready = end > *sent ? end : *sent;
        }
    }
    size_t lp_to = *lp_sent;
    while (lp_to < c->n_lp && (finish || c->lp[lp_to].text_offset < ready)) lp_to++;
    bool ok = true;
    if (first || ready > *sent || lp_to > *lp_sent) {
        cJSON *ch, *o = chunk(S, j, idx, &ch);
        if (j->p.chat) {
            cJSON *d = cJSON_AddObjectToObject(ch, "delta");
            if (first) cJSON_AddStringToObject(d, "role", "assistant");
            add_text(d, "content", c->text ? c->text + *sent : "", ready - *sent);
        } else add_text(ch, "text", c->text ? c->text + *sent : "", ready - *sent);
        if (j->p.logprobs) cJSON_AddItemToObject(ch, "logprobs", logprobs_obj(S, j, c, *lp_sent, lp_to));
        else cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddNullToObject(ch, "finish_reason");
        ok = put_event(o, out, n, cap);
        *sent = ready;
        *lp_sent = lp_to;
    }
    for (int32_t k = 0; ok && k < tc.n; k++)   /* as OpenAI streams them: id, type and name first, then the arguments */
        for (int part = 0; ok && part < 2; part++) {
            cJSON *ch, *o = chunk(S, j, idx, &ch);
            cJSON *d = cJSON_AddObjectToObject(ch, "delta"), *calls = cJSON_AddArrayToObject(d, "tool_calls");
            cJSON_AddItemToArray(calls, call_obj(j, &tc.calls[k], k, part == 0, part == 1));
            cJSON_AddNullToObject(ch, "logprobs");
            cJSON_AddNullToObject(ch, "finish_reason");
            ok = put_event(o, out, n, cap);
        }
    if (ok && finish) {
        cJSON *ch, *o = chunk(S, j, idx, &ch);
        if (j->p.chat) cJSON_AddObjectToObject(ch, "delta");
        else cJSON_AddStringToObject(ch, "text", "");
        cJSON_AddNullToObject(ch, "logprobs");
        const char *f = tc.n > 0 && c->finish == FINISH_STOP ? "tool_calls" : finish_name(c->finish);
        cJSON_AddStringToObject(ch, "finish_reason", f ? f : "stop");
        ok = put_event(o, out, n, cap);
    }
    th_tool_calls_free(&tc);
    return ok;
}

bool resp_stream_usage(srv_server *S, srv_job *j, char **out, size_t *n, size_t *cap) {
    cJSON *o = envelope(S, j, j->p.chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToObject(o, "usage", usage_obj(j));
    return put_event(o, out, n, cap);
}
