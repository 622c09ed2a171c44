/* fuzz_request.c — libFuzzer target for the server's JSON request layer
 * (tools/serve/serve_req.c): the input is a request body, parsed as
 * /v1/chat/completions, /v1/completions, /tokenize and /detokenize (the first
 * byte picks which, or all), against the vocabulary of the default model
 * (SmolLM2: its chat template, BPE tokenizer) or, without it, the tiny fixture's.
 * The scheduler is a stub (512 tokens a sequence, 4 sequences). Properties (trap
 * on failure): a refusal has an HTTP status in 400..599 and a message; an
 * accepted job has 1..n prompt tokens, every one a token id, a prompt shorter
 * than a sequence, 1 <= max_tokens <= what is left, 1 <= n <= 4, stop strings
 * and logit biases within their limits; every body the endpoints return is JSON;
 * the shared memory budget is back to 0 after each request. */
#include "serve.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static srv_server S;
static srv_config cfg;

/* ---- stubs for what serve_req.c uses from the scheduler (serve_sched.c) ---- */
int32_t sched_slot_ctx(const srv_sched *s) { (void)s; return 512; }
int32_t sched_parallel(const srv_sched *s) { (void)s; return 4; }
double srv_now(void) { return 0; }
srv_job *job_new(void) {
    srv_job *j = calloc(1, sizeof *j);
    if (j) j->refs = 1;
    return j;
}
void job_release(srv_job *j) {
    if (!j) return;
    req_params_clear(&j->p);
    free(j->choices);
    free(j->prompt);
    free(j);
}

static void init(void) {
    const char *m = getenv("THESEUS_MODEL"), *shared = getenv("SHARED");
    char tiny[1024];
    snprintf(tiny, sizeof tiny, "%s/fixtures/tiny/tiny-F32.gguf", shared && *shared ? shared : "../shared");
    th_model_params mp = th_model_default_params();
    mp.vocab_only = true;
    if (th_model_load(m && *m ? m : "models/SmolLM2-135M-Instruct.Q4_1.gguf", &mp, &S.model) != TH_OK &&
        th_model_load(tiny, &mp, &S.model) != TH_OK) {
        fprintf(stderr, "fuzz_request: no vocabulary: %s\n", th_last_error());
        abort();
    }
    cfg.max_body = 1 << 20;
    S.cfg = &cfg;
    if (th_mem_budget_new(64u << 20, &S.budget)) abort();
}

static void check_json(char *s) {
    if (!s) return;   /* out of memory */
    cJSON *o = cJSON_Parse(s);
    if (!o) __builtin_trap();
    cJSON_Delete(o);
    free(s);
}

static void check_job(srv_job *j) {
    int32_t nv = th_model_n_vocab(S.model);
    if (j->n_prompt < 1 || j->n_prompt >= 512) __builtin_trap();
    for (int32_t i = 0; i < j->n_prompt; i++) if (j->prompt[i] < 0 || j->prompt[i] >= nv) __builtin_trap();
    if (j->p.max_tokens < 1 || j->p.max_tokens > 512 - j->n_prompt) __builtin_trap();
    if (j->p.n < 1 || j->p.n > 4 || !j->choices) __builtin_trap();
    if (j->p.n_stop < 0 || j->p.n_stop > SRV_MAX_STOP) __builtin_trap();
    for (int i = 0; i < j->p.n_stop; i++) if (!j->p.stop[i] || !*j->p.stop[i] || strlen(j->p.stop[i]) > SRV_MAX_STOP_LEN) __builtin_trap();
    if (j->p.n_bias < 0 || j->p.n_bias > SRV_MAX_BIAS) __builtin_trap();
    for (int i = 0; i < j->p.n_bias; i++) if (j->p.bias_tok[i] < 0 || j->p.bias_tok[i] >= nv) __builtin_trap();
    if (j->p.top_logprobs < 0 || j->p.top_logprobs > SRV_MAX_TOP_LOGPROBS) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool ready;
    if (!ready) { init(); ready = true; }
    if (size < 1) return 0;
    int pick = data[0] % 5;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    for (int k = 0; k < 4; k++) {
        if (pick != 4 && pick != k) continue;
        int http = 0;
        char msg[512] = "";
        if (k < 2) {
            srv_job *j = req_parse_completion(&S, body, len, k == 0, &http, msg, sizeof msg);
            if (j) { check_job(j); job_release(j); }
            else if (http < 400 || http > 599 || !msg[0]) __builtin_trap();
        } else {
            char *out = k == 2 ? req_tokenize(&S, body, len, &http) : req_detokenize(&S, body, len, &http);
            if (http != 200 && (http < 400 || http > 599)) __builtin_trap();
            check_json(out);
        }
        if (th_mem_budget_used(S.budget) != 0) __builtin_trap();
    }
    return 0;
}
