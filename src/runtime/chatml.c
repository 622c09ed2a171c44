/* chatml.c — th_chat_render_chatml: the ChatML conversation format, the
 * fallback of `chat` and `serve` for a model without a chat template (or,
 * in `chat`, one our renderer cannot run). Takes the same context JSON as
 * th_chat_render. */
#include "core/core.h"
#include "core/bytes.h"
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>

th_status th_chat_render_chatml(const char *context_json, const th_chat_opts *opts, char **out) {
    if (!context_json || !out) return th_set_error(TH_ERR_ARG, "th_chat_render_chatml: NULL argument");
    *out = NULL;
    cJSON *root = cJSON_Parse(context_json);
    if (!root) return th_set_error(TH_ERR_FORMAT, "ChatML: the context is not valid JSON");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages"), *m;
    th_status s = cJSON_IsArray(msgs) ? TH_OK : th_set_error(TH_ERR_FORMAT, "ChatML: the context has no 'messages' array");
    th_bytes b = { 0 };
    th_bytes_str(&b, "");
    int i = 0;
    const cJSON *list = s ? NULL : msgs;
    cJSON_ArrayForEach(m, list) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role)) { s = th_set_error(TH_ERR_FORMAT, "ChatML: messages[%d] has no string 'role'", i); break; }
        if (content && !cJSON_IsString(content) && !cJSON_IsNull(content)) {
            s = th_set_error(TH_ERR_FORMAT, "ChatML: messages[%d].content is not a string", i);
            break;
        }
        th_bytes_str(&b, "<|im_start|>");
        th_bytes_str(&b, role->valuestring);
        th_bytes_str(&b, "\n");
        th_bytes_str(&b, cJSON_IsString(content) ? content->valuestring : "");
        th_bytes_str(&b, "<|im_end|>\n");
        i++;
    }
    if (!s && opts && opts->add_generation_prompt) th_bytes_str(&b, "<|im_start|>assistant\n");
    cJSON_Delete(root);
    if (!s && b.failed) s = th_set_error(TH_ERR_NOMEM, "ChatML: out of memory");
    if (s) { th_bytes_free(&b); return s; }
    *out = th_bytes_take(&b);
    return TH_OK;
}
