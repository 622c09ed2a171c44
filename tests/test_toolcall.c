/* test_toolcall.c — tool calls (src/runtime/toolcall.c): the format each chat-template
 * fixture teaches; parsing messages of each format into content and calls (several
 * calls, text around them, arguments given as a JSON string, a closing tag cut off,
 * and malformed calls that stay content); how much of a growing message is surely
 * content (streaming); and the grammar of a valid call, matched as text: calls of the
 * named function with arguments valid under its schema are accepted, others rejected.
 * Expected values are written by hand from the formats the templates document. */
#include "check.h"
#include "theseus.h"

static void test_format_of_template(void) {
    static const struct { const char *file; th_tool_format f; } cases[] = {
        { "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", TH_TOOLS_HERMES },
        { "Qwen-Qwen2.5-7B-Instruct.jinja", TH_TOOLS_HERMES },
        { "Qwen-Qwen3-0.6B.jinja", TH_TOOLS_HERMES },
        { "HuggingFaceTB-SmolLM3-3B.jinja", TH_TOOLS_HERMES },
        { "meta-llama-Llama-3.1-8B-Instruct.jinja", TH_TOOLS_LLAMA3 },
        { "meta-llama-Llama-3.2-3B-Instruct.jinja", TH_TOOLS_LLAMA3 },
        { "mistralai-Mistral-Nemo-Instruct-2407.jinja", TH_TOOLS_MISTRAL },
        { "google-gemma-2-2b-it.jinja", TH_TOOLS_HERMES },   /* no tool format: the fallback */
    };
    int found = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "chat-templates/%s", cases[i].file);
        char *t = check_read_file(fixture(rel), NULL);
        if (!t) continue;
        found++;
        CHECK(th_tool_format_of_template(t) == cases[i].f, "%s: %d, want %d", cases[i].file, th_tool_format_of_template(t), cases[i].f);
        free(t);
    }
    if (!found) SKIP("no chat-template fixtures");
    CHECK(th_tool_format_of_template(NULL) == TH_TOOLS_HERMES, "no template");
}

/* Parses text; checks content and the calls "name|arguments" joined by ';'. */
static void parse_case(th_tool_format f, const char *text, const char *content, const char *calls) {
    th_tool_calls tc;
    CHECK(th_tool_calls_parse(f, text, strlen(text), &tc) == TH_OK, "%s", th_last_error());
    char got[2048] = "";
    for (int32_t i = 0; i < tc.n; i++) {
        size_t k = strlen(got);
        snprintf(got + k, sizeof got - k, "%s%s|%s", i ? ";" : "", tc.calls[i].name, tc.calls[i].arguments);
    }
    CHECK(tc.content && !strcmp(tc.content, content), "content of '%s': '%s', want '%s'", text, tc.content ? tc.content : "(null)", content);
    CHECK(!strcmp(got, calls), "calls of '%s': '%s', want '%s'", text, got, calls);
    th_tool_calls_free(&tc);
}

static void test_parse_hermes(void) {
    th_tool_format H = TH_TOOLS_HERMES;
    parse_case(H, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
               "get_weather|{\"city\":\"Paris\"}");
    parse_case(H, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>{\"name\": \"b\", "
               "\"arguments\": {\"x\": [1, 2]}}</tool_call>", "Let me check.", "a|{};b|{\"x\":[1,2]}");
    /* the closing tag cut off by the end (max_tokens or a stop string) */
    parse_case(H, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"</tool_call>\"}}", "", "a|{\"q\":\"</tool_call>\"}");
    /* arguments as a JSON string holding an object */
    parse_case(H, "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call>", "", "a|{\"k\": 1}");
    /* no arguments: {} */
    parse_case(H, "<tool_call>{\"name\": \"ping\"}</tool_call>", "", "ping|{}");
    /* malformed: all of it is content */
    parse_case(H, "Hello there", "Hello there", "");
    parse_case(H, "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}</tool_call>", "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}</tool_call>", "");
    parse_case(H, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>", "");
    parse_case(H, "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>", "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>", "");
    parse_case(H, "<tool_call>{\"name\": \"a\"} trailing</tool_call>", "<tool_call>{\"name\": \"a\"} trailing</tool_call>", "");
    parse_case(H, "", "", "");
}

static void test_parse_llama3_mistral(void) {
    th_tool_format L = TH_TOOLS_LLAMA3, M = TH_TOOLS_MISTRAL;
    parse_case(L, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Tokyo\"}}", "", "get_weather|{\"city\":\"Tokyo\"}");
    parse_case(L, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", "f|{}");
    parse_case(L, "  {\"name\": \"f\", \"arguments\": {\"a\": true}}\n", "", "f|{\"a\":true}");
    parse_case(L, "The answer is {\"name\": 1}", "The answer is {\"name\": 1}", "");
    parse_case(L, "{\"x\": 1}", "{\"x\": 1}", "");
    parse_case(L, "{\"name\": \"f\", \"parameters\": {}} and more", "{\"name\": \"f\", \"parameters\": {}} and more", "");
    parse_case(M, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"n\": 2}, \"id\": \"abcDEF123\"}]", "", "f|{\"n\":2}");
    parse_case(M, "[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"s\": \"x\"}}]", "", "f|{};g|{\"s\":\"x\"}");
    parse_case(M, "[1, 2]", "[1, 2]", "");
    parse_case(M, "[]", "[]", "");
    th_tool_calls tc;
    const char *t = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"abcDEF123\"}]";
    CHECK(th_tool_calls_parse(M, t, strlen(t), &tc) == TH_OK && tc.n == 1 && tc.calls[0].id && !strcmp(tc.calls[0].id, "abcDEF123"), "id");
    th_tool_calls_free(&tc);
    CHECK(th_tool_calls_parse(TH_TOOLS_NONE, "x", 1, &tc) == TH_OK && tc.n == 0 && !strcmp(tc.content, "x"), "format none");
    th_tool_calls_free(&tc);
}

static void test_content_end(void) {
    const char *t = "Sure, checking <tool_call>\n{";
    CHECK(th_tool_calls_content_end(TH_TOOLS_HERMES, t, strlen(t)) == 15, "before the tag: %zu",
          th_tool_calls_content_end(TH_TOOLS_HERMES, t, strlen(t)));
    t = "Sure <tool_";
    CHECK(th_tool_calls_content_end(TH_TOOLS_HERMES, t, strlen(t)) == 5, "a partial tag is held back");
    t = "Sure <b>";
    CHECK(th_tool_calls_content_end(TH_TOOLS_HERMES, t, strlen(t)) == strlen(t), "not a tag prefix");
    t = "Hello";
    CHECK(th_tool_calls_content_end(TH_TOOLS_LLAMA3, t, 5) == 5, "llama3 text");
    t = "  {\"na";
    CHECK(th_tool_calls_content_end(TH_TOOLS_LLAMA3, t, strlen(t)) == 0, "llama3 maybe a call");
    CHECK(th_tool_calls_content_end(TH_TOOLS_LLAMA3, "  ", 2) == 0, "only space: wait");
    t = "[TOOL_CALLS][";
    CHECK(th_tool_calls_content_end(TH_TOOLS_MISTRAL, t, strlen(t)) == 0, "mistral");
    t = "Hi [TOOL";
    CHECK(th_tool_calls_content_end(TH_TOOLS_MISTRAL, t, strlen(t)) == 3, "mistral partial tag");
}

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"},"
    " \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"$ref\": \"#/$defs/num\"}}, \"required\": [\"a\", \"b\"],"
    " \"$defs\": {\"num\": {\"type\": \"integer\"}}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

static bool matches(const char *gbnf, const char *text) {
    th_grammar *g = NULL;
    if (th_grammar_parse(gbnf, strlen(gbnf), &g) != TH_OK) { CHECK(0, "grammar does not parse: %s\n%s", th_last_error(), gbnf); return false; }
    th_constraint *c = NULL;
    bool ok = th_constraint_new(g, NULL, &c) == TH_OK && th_constraint_accept_text(c, text, strlen(text), NULL) == TH_OK &&
              th_constraint_is_complete(c);
    th_constraint_free(c);
    th_grammar_free(g);
    return ok;
}

static char *grammar(th_tool_format f, const char *only, bool parallel) {
    char *g = NULL;
    th_status s = th_tool_call_grammar(f, TOOLS, strlen(TOOLS), only, parallel, &g);
    CHECK(s == TH_OK, "grammar: %s", th_last_error());
    return g;
}

static void test_grammar(void) {
    char *g = grammar(TH_TOOLS_HERMES, NULL, false);
    if (!g) return;
    CHECK(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"), "hermes weather");
    CHECK(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>"), "unit");
    CHECK(matches(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>"), "add ($ref to $defs)");
    CHECK(matches(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"), "no parameters: any object");
    CHECK(!matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>"), "missing required");
    CHECK(!matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"k\"}}\n</tool_call>"), "bad enum");
    CHECK(!matches(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": 2}}\n</tool_call>"), "not an integer");
    CHECK(!matches(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"), "unknown function");
    CHECK(!matches(g, "Hello"), "text");
    CHECK(!matches(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"),
          "one call only");
    free(g);
    g = grammar(TH_TOOLS_HERMES, NULL, true);
    CHECK(g && matches(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"),
          "parallel calls");
    free(g);
    g = grammar(TH_TOOLS_HERMES, "add", false);
    CHECK(g && matches(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"), "named: add");
    CHECK(g && !matches(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"), "named: not now");
    free(g);
    g = grammar(TH_TOOLS_LLAMA3, NULL, false);
    CHECK(g && matches(g, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"), "llama3");
    CHECK(g && !matches(g, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"), "llama3 key");
    free(g);
    g = grammar(TH_TOOLS_MISTRAL, NULL, true);
    CHECK(g && matches(g, "[{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}]"), "mistral");
    free(g);
    /* refusals name the problem */
    char *out = NULL;
    CHECK(th_tool_call_grammar(TH_TOOLS_HERMES, TOOLS, strlen(TOOLS), "nope", false, &out) == TH_ERR_ARG && strstr(th_last_error(), "nope"),
          "%s", th_last_error());
    const char *bad = "[{\"type\": \"function\", \"function\": {\"parameters\": {}}}]";
    CHECK(th_tool_call_grammar(TH_TOOLS_HERMES, bad, strlen(bad), NULL, false, &out) == TH_ERR_FORMAT && strstr(th_last_error(), "tools[0]"),
          "%s", th_last_error());
    const char *unsup = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"array\", \"uniqueItems\": true}}}]";
    CHECK(th_tool_call_grammar(TH_TOOLS_HERMES, unsup, strlen(unsup), NULL, false, &out) == TH_ERR_UNSUPPORTED &&
          strstr(th_last_error(), "uniqueItems"), "%s", th_last_error());
    /* a $defs that is not an object (found by fuzz_toolcall: it leaked), and one name defined twice */
    const char *arr_defs = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"$defs\": [{\"a\": 1}]}}}]";
    CHECK(th_tool_call_grammar(TH_TOOLS_HERMES, arr_defs, strlen(arr_defs), NULL, false, &out) == TH_ERR_UNSUPPORTED &&
          strstr(th_last_error(), "not an object"), "%s", th_last_error());
    const char *twice = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"$defs\": {\"n\": {}}}}},"
                        " {\"type\": \"function\", \"function\": {\"name\": \"g\", \"parameters\": {\"$defs\": {\"n\": {}}}}}]";
    CHECK(th_tool_call_grammar(TH_TOOLS_HERMES, twice, strlen(twice), NULL, false, &out) == TH_ERR_UNSUPPORTED &&
          strstr(th_last_error(), "same $defs name"), "%s", th_last_error());
    CHECK(th_tool_call_grammar(TH_TOOLS_HERMES, "[]", 2, NULL, false, &out) == TH_ERR_FORMAT, "empty tools");
    CHECK(!out, "no grammar on errors");
}

int main(void) {
    RUN(test_format_of_template);
    RUN(test_parse_hermes);
    RUN(test_parse_llama3_mistral);
    RUN(test_content_end);
    RUN(test_grammar);
    return CHECK_DONE();
}
