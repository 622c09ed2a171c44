/* fuzz_template.c — libFuzzer target for the chat-template interpreter: the
 * input bytes are the template (up to the first NUL), rendered with a small
 * fixed context; any outcome but a crash, sanitizer report, hang or leak is fine.
 * The output limit is kept small so the fuzzer spends its time on the parser
 * and evaluator rather than on writing big strings. */
#include "theseus.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *CTX =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 <think>x</think>\"},"
    " {\"role\": \"assistant\", \"content\": \"Hello\", \"tool_calls\": [{\"type\": \"function\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [1.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int once;
    if (!once) { setenv("SOURCE_DATE_EPOCH", "1767312000", 1); once = 1; }
    char *tmpl = malloc(size + 1);
    if (!tmpl) return 0;
    memcpy(tmpl, data, size);
    tmpl[size] = 0;
    th_chat_opts opts = { .add_generation_prompt = size & 1, .bos_token = "<s>", .eos_token = "</s>",
                          .max_output = 1 << 16 };
    char *out = NULL;
    if (th_chat_render(tmpl, CTX, &opts, &out) == TH_OK) free(out);
    free(tmpl);
    return 0;
}
