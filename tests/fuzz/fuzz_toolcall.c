/* fuzz_toolcall.c — libFuzzer target for tool calls (src/runtime/toolcall.c): the first
 * byte picks the format (Hermes, Llama 3, Mistral) and the rest is a model's message.
 * th_tool_calls_parse must succeed (model text is never an error) with content set,
 * every call named and its arguments a JSON object (cJSON); without calls the content is
 * the whole text; th_tool_calls_content_end stays inside the text and never passes a
 * call's start on any prefix. An input whose text starts with '[' is also taken as a
 * `tools` array: a grammar th_tool_call_grammar returns must parse. Trap on a failure. */
#include "theseus.h"
#include <cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    th_tool_format f = (th_tool_format)(1 + data[0] % 3);
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    th_tool_calls tc;
    if (th_tool_calls_parse(f, text, len, &tc) != TH_OK) __builtin_trap();
    if (!tc.content) __builtin_trap();
    if (tc.n == 0 && (strlen(tc.content) != len && memchr(text, 0, len) == NULL)) __builtin_trap();
    for (int32_t i = 0; i < tc.n; i++) {
        if (!tc.calls[i].name || !*tc.calls[i].name || !tc.calls[i].arguments) __builtin_trap();
        cJSON *a = cJSON_Parse(tc.calls[i].arguments);
        if (!cJSON_IsObject(a)) __builtin_trap();
        cJSON_Delete(a);
    }
    size_t end = th_tool_calls_content_end(f, text, len);
    if (end > len) __builtin_trap();
    if (tc.n > 0) {   /* a message with calls: no prefix may release text past where the first call began */
        for (size_t k = 0; k <= len; k += 1 + len / 16)
            if (th_tool_calls_content_end(f, text, k) > end) __builtin_trap();
    }
    th_tool_calls_free(&tc);
    if (len > 0 && text[0] == '[') {
        char *g = NULL;
        if (th_tool_call_grammar(f, text, len, NULL, data[0] & 4, &g) == TH_OK) {
            th_grammar *gr = NULL;
            if (th_grammar_parse(g, strlen(g), &gr) != TH_OK) __builtin_trap();
            th_grammar_free(gr);
            free(g);
        }
    }
    return 0;
}
