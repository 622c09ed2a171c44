/* test_structured.c — grammar-constrained generation through the runtime
 * (th_request_params.grammar), without HTTP, on SmolLM2: a yes|no grammar
 * yields only those words (over seeds, at temperature 1.5 so that the
 * unconstrained pick is often rejected) and ends by the grammar (STOP); any-JSON
 * and a JSON schema give text that cJSON parses and that has the schema's
 * keys and types; n > 1 choices each follow the grammar; logprobs under a
 * grammar describe the masked distribution (every reported token allowed);
 * a grammar cannot run in an argmax-only context; max_tokens still ends a
 * choice the grammar would continue. A missing model skips. */
#include "check.h"
#include "theseus.h"
#include <cJSON.h>

static th_model *g_smol;

typedef struct out {
    char text[4][2048];
    size_t n[4];
    th_finish finish[4];
    th_token_info ent[64];
    int n_ent;
} out;

static void on_event(const th_event *ev, void *user) {
    out *o = user;
    if (ev->kind != TH_EVENT_TOKEN && ev->kind != TH_EVENT_FINISH) return;
    int c = ev->choice;
    if (o->n[c] + ev->n_text < sizeof o->text[c]) {
        memcpy(o->text[c] + o->n[c], ev->text, ev->n_text);
        o->n[c] += ev->n_text;
        o->text[c][o->n[c]] = 0;
    }
    for (int i = 0; i < ev->n_tokens && o->n_ent < 64; i++) o->ent[o->n_ent++] = ev->tokens[i];
    if (ev->kind == TH_EVENT_FINISH) o->finish[c] = ev->finish;
}

static th_runtime *mk(int slots, bool argmax_only) {
    th_runtime_params p = th_runtime_default_params();
    p.context.n_threads = 2;
    p.context.logits_argmax_only = argmax_only;
    p.n_slots = slots;
    p.slot_ctx = 512;
    th_runtime *rt = NULL;
    CHECK(th_runtime_new(g_smol, &p, &rt) == TH_OK, "runtime: %s", th_last_error());
    return rt;
}

static int chat_prompt(const char *question, th_token *tok, int cap) {
    char text[1024];
    snprintf(text, sizeof text, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", question);
    size_t n = 0;
    CHECK(th_tokenize(g_smol, text, strlen(text), false, true, tok, (size_t)cap, &n) == TH_OK, "%s", th_last_error());
    return (int)n;
}

/* Runs one request to its end on this thread; returns its status. */
static th_status run(th_runtime *rt, th_request_params *p, const th_token *prompt, int n, out *o, th_request_stats *st) {
    memset(o, 0, sizeof *o);
    p->on_event = on_event;
    p->user = o;
    th_request *r = NULL;
    th_status s = th_runtime_submit(rt, p, prompt, n, &r);
    if (s) return s;
    for (int k = 0; k < 2000 && !th_request_done(r); k++) th_runtime_step(rt, NULL);
    CHECK(th_request_done(r), "not done");
    s = th_request_status(r);
    if (st) th_request_stats_get(r, st);
    if (s) fprintf(stderr, "  (request: %s)\n", th_request_message(r));
    th_request_release(r);
    return s;
}

static th_grammar *gbnf(const char *text) {
    th_grammar *g = NULL;
    CHECK(th_grammar_parse(text, strlen(text), &g) == TH_OK, "%s", th_last_error());
    return g;
}

static void test_yes_no(void) {
    if (!g_smol) SKIP("no SmolLM2");
    th_runtime *rt = mk(1, false);
    th_grammar *g = gbnf("root ::= \"yes\" | \"no\"\n");
    th_token prompt[256];
    int n = chat_prompt("Write a long poem about the sea.", prompt, 256);
    int yes = 0, no = 0;
    uint64_t masks = 0;
    for (int seed = 0; seed < 12; seed++) {
        th_request_params p = th_request_default_params();
        p.sampling.temperature = 1.5f;
        p.sampling.seed = (uint64_t)seed;
        p.max_tokens = 32;
        p.grammar = g;
        out o;
        th_request_stats st;
        CHECK(run(rt, &p, prompt, n, &o, &st) == TH_OK, "seed %d", seed);
        CHECK(!strcmp(o.text[0], "yes") || !strcmp(o.text[0], "no"), "seed %d: '%s'", seed, o.text[0]);
        CHECK(o.finish[0] == TH_FINISH_STOP, "seed %d: finish %d (the grammar ends it)", seed, o.finish[0]);
        CHECK(st.t_grammar > 0 && st.t_grammar <= st.t_generate + st.t_prompt + 1e-3, "grammar time %g", st.t_grammar);
        yes += !strcmp(o.text[0], "yes");
        no += !strcmp(o.text[0], "no");
        masks += st.grammar_masks;
    }
    /* a poem's first token is never "yes"/"no": the check-first pick is rejected */
    CHECK(masks > 0, "no whole-vocabulary mask was needed");
    printf("  yes %d, no %d over 12 seeds; %llu masks\n", yes, no, (unsigned long long)masks);
    /* greedy too */
    th_request_params p = th_request_default_params();
    p.grammar = g;
    out o;
    CHECK(run(rt, &p, prompt, n, &o, NULL) == TH_OK && (!strcmp(o.text[0], "yes") || !strcmp(o.text[0], "no")), "greedy: '%s'", o.text[0]);
    th_grammar_free(g);
    th_runtime_free(rt);
}

static bool json_parses(const char *s) {
    cJSON *j = cJSON_Parse(s);
    bool ok = j != NULL;
    cJSON_Delete(j);
    return ok;
}

static void test_any_json(void) {
    if (!g_smol) SKIP("no SmolLM2");
    th_runtime *rt = mk(2, false);
    th_grammar *g = NULL;
    CHECK(th_grammar_from_json_schema("true", 4, &g) == TH_OK, "%s", th_last_error());
    th_token prompt[256];
    int n = chat_prompt("Describe a cat as a JSON object.", prompt, 256);
    for (int seed = 0; seed < 3; seed++) {
        th_request_params p = th_request_default_params();
        p.sampling.temperature = 0.8f;
        p.sampling.seed = (uint64_t)seed * 2;
        p.n_choices = 2;
        p.max_tokens = 300;
        p.grammar = g;
        out o;
        CHECK(run(rt, &p, prompt, n, &o, NULL) == TH_OK, "seed %d", seed);
        for (int c = 0; c < 2; c++) {
            if (o.finish[c] == TH_FINISH_LENGTH) { printf("  seed %d choice %d hit max_tokens\n", seed, c); continue; }
            CHECK(json_parses(o.text[c]), "seed %d choice %d: not JSON: '%s'", seed, c, o.text[c]);
        }
    }
    th_grammar_free(g);
    th_runtime_free(rt);
}

static void test_schema(void) {
    if (!g_smol) SKIP("no SmolLM2");
    th_runtime *rt = mk(1, false);
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":20},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"pet\":{\"enum\":[\"cat\",\"dog\"]}},"
                         "\"required\":[\"name\",\"age\",\"pet\"]}";
    th_grammar *g = NULL;
    CHECK(th_grammar_from_json_schema(schema, strlen(schema), &g) == TH_OK, "%s", th_last_error());
    th_token prompt[256];
    int n = chat_prompt("Make up a person with a name, an age and a pet, as JSON.", prompt, 256);
    for (int seed = 0; seed < 5; seed++) {
        th_request_params p = th_request_default_params();
        p.sampling.temperature = 1.0f;
        p.sampling.seed = (uint64_t)seed;
        p.max_tokens = 200;
        p.grammar = g;
        p.logprobs = seed == 0;
        p.top_logprobs = 5;
        out o;
        CHECK(run(rt, &p, prompt, n, &o, NULL) == TH_OK, "seed %d", seed);
        cJSON *j = cJSON_Parse(o.text[0]);
        CHECK(j && cJSON_IsObject(j), "seed %d: not a JSON object: '%s'", seed, o.text[0]);
        cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name"), *age = cJSON_GetObjectItemCaseSensitive(j, "age");
        cJSON *pet = cJSON_GetObjectItemCaseSensitive(j, "pet");
        CHECK(cJSON_IsString(name) && strlen(name->valuestring) <= 20 * 4, "seed %d: name", seed);
        CHECK(cJSON_IsNumber(age) && age->valuedouble >= 0 && age->valuedouble <= 150 && age->valuedouble == (int)age->valuedouble,
              "seed %d: age", seed);
        CHECK(cJSON_IsString(pet) && (!strcmp(pet->valuestring, "cat") || !strcmp(pet->valuestring, "dog")), "seed %d: pet", seed);
        CHECK(cJSON_GetArraySize(j) == 3, "seed %d: extra keys", seed);
        cJSON_Delete(j);
        if (seed == 0) {
            /* logprobs under a grammar: the alternatives are all tokens the grammar allowed
             * (finite log-probabilities; the masked ones had probability 0) */
            CHECK(o.n_ent > 0, "no logprob entries");
            for (int k = 0; k < o.n_ent; k++)
                for (int q = 0; q < o.ent[k].n_top; q++)
                    CHECK(isfinite(o.ent[k].top[q].logprob), "entry %d alternative %d: logprob %g", k, q, o.ent[k].top[q].logprob);
        }
    }
    th_grammar_free(g);
    th_runtime_free(rt);
}

static void test_refusals(void) {
    if (!g_smol) SKIP("no SmolLM2");
    th_grammar *g = gbnf("root ::= \"yes\" | \"no\"\n");
    th_token prompt[64];
    int n = chat_prompt("Hi", prompt, 64);
    th_runtime *rt = mk(1, true);
    th_request_params p = th_request_default_params();
    p.grammar = g;
    th_request *r = NULL;
    CHECK(th_runtime_submit(rt, &p, prompt, n, &r) == TH_ERR_ARG && strstr(th_last_error(), "grammar"), "%s", th_last_error());
    th_runtime_free(rt);
    th_grammar_free(g);
    /* the grammar ends the choice even with max_tokens left, and max_tokens ends it before */
    rt = mk(1, false);
    th_grammar *g3 = gbnf("root ::= \"a\"{3,40}\n");
    out o;
    p = th_request_default_params();
    p.grammar = g3;
    p.max_tokens = 2;
    CHECK(run(rt, &p, prompt, n, &o, NULL) == TH_OK && o.finish[0] == TH_FINISH_LENGTH && o.n[0] >= 2 &&
          strspn(o.text[0], "a") == o.n[0], "'%s' finish %d", o.text[0], o.finish[0]);
    th_grammar_free(g3);
    th_runtime_free(rt);
}

int main(void) {
    th_model_params mp = th_model_default_params();
    if (th_model_load(default_model_path(), &mp, &g_smol)) g_smol = NULL;
    RUN(test_yes_no);
    RUN(test_any_json);
    RUN(test_schema);
    RUN(test_refusals);
    th_model_free(g_smol);
    return CHECK_DONE();
}
