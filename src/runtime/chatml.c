/* chatml.c — th_chat_render_chatml: the ChatML conversation format, the
 * fallback of `chat` and `serve` for a model without a chat template (or,
 * in `chat`, one our renderer cannot run). Takes the same context JSON as
 * th_chat_render. */
#include "core/core.h"
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { char *p; size_t n, cap; bool oom; } sbuf;

static void put(sbuf *b, const char *s) {
    size_t k = strlen(s);
    if (b->oom) return;
    if (b->n + k + 1 > b->cap) {
        size_t nc = (b->n + k + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, k + 1);
    b->n += k;
}

th_status th_chat_render_chatml(const char *context_json, const th_chat_opts *opts, char **out) {
    if (!context_json || !out) return th_set_error(TH_ERR_ARG, "th_chat_render_chatml: NULL argument");
    *out = NULL;
    cJSON *root = cJSON_Parse(context_json);
    if (!root) return th_set_error(TH_ERR_FORMAT, "ChatML: the context is not valid JSON");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages"), *m;
    th_status s = cJSON_IsArray(msgs) ? TH_OK : th_set_error(TH_ERR_FORMAT, "ChatML: the context has no 'messages' array");
    sbuf b = { 0 };
    put(&b, "");
    int i = 0;
    const cJSON *list = s ? NULL : msgs;
    cJSON_ArrayForEach(m, list) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role)) { s = th_set_error(TH_ERR_FORMAT, "ChatML: messages[%d] has no string 'role'", i); break; }
        if (content && !cJSON_IsString(content) && !cJSON_IsNull(content)) {
            s = th_set_error(TH_ERR_FORMAT, "ChatML: messages[%d].content is not a string", i);
            break;
        }
        put(&b, "<|im_start|>");
        put(&b, role->valuestring);
        put(&b, "\n");
        put(&b, cJSON_IsString(content) ? content->valuestring : "");
        put(&b, "<|im_end|>\n");
        i++;
    }
    if (!s && opts && opts->add_generation_prompt) put(&b, "<|im_start|>assistant\n");
    cJSON_Delete(root);
    if (!s && b.oom) s = th_set_error(TH_ERR_NOMEM, "ChatML: out of memory");
    if (s) { free(b.p); return s; }
    *out = b.p;
    return TH_OK;
}
