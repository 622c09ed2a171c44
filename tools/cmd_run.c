/* cmd_run.c — `theseus run` (one prompt → streamed text) and `theseus chat`
 * (each stdin line is a user message; the model's chat template renders the
 * conversation, the KV cache keeps the common prefix between turns). Both are
 * one-slot clients of the runtime (theseus.h's "runtime" section), stepped on
 * this thread: the same scheduler, sampling and detokenization as `serve`. */
#include "cli.h"
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct run_opts {
    const char *model, *prompt, *system;
    long n_predict, threads, ctx;
    bool special, verbose, gpu;
    th_sampler_params sp;
    const char *grammar_file, *schema_file;   /* --grammar, --json-schema */
    bool json;                                /* --json: any JSON value */
    cli_spec spec;              /* speculative decoding (cli_spec.c) */
    bool batch_invariant;       /* --batch-invariant: pad one-row steps (what a drafter does) */
} run_opts;

static void usage(FILE *f, const char *cmd) {
    if (!strcmp(cmd, "run"))
        fprintf(f, "usage: theseus run -m MODEL -p TEXT [options]\n");
    else
        fprintf(f, "usage: theseus chat -m MODEL [options]   (one user message per stdin line; end of input ends)\n"
                   "  --system TEXT          system message\n");
    fprintf(f, "  -m, --model FILE       GGUF model\n"
               "  -p, --prompt TEXT      prompt (run)\n"
               "  -n, --n-predict N      tokens to generate (default 256; -1 = until end of text)\n"
               "  -t, --threads N        threads (default: all cores)\n"
               "  -c, --ctx N            context size (default: min(training context, 4096))\n"
               "  --temp T               temperature (default 0.8; 0 = greedy: with --gpu only the argmax\n"
               "                         comes back from the GPU, not the logits)\n"
               "  --top-k K              (default 40; 0 = off)\n"
               "  --top-p P              (default 0.95; 1 = off)\n"
               "  --min-p P              (default 0.05; 0 = off)\n"
               "  --repeat-penalty R     (default 1.0 = off)\n"
               "  --presence-penalty P   (default 0)\n"
               "  --frequency-penalty P  (default 0)\n"
               "  --seed S               random seed (default 0xC0FFEE; same seed, same text)\n"
               "  --special              parse control-token text in the prompt (run)\n"
               "  --grammar FILE         constrain the output to a GBNF grammar (docs/grammar.md)\n"
               "  --json-schema FILE     constrain the output to JSON valid under a JSON schema\n"
               "  --json                 constrain the output to one JSON value\n"
               "  --gpu                  run the whole model on the GPU (CUDA build)\n"
               "  --gpu-layers SPEC      some layers on the GPU: N (the last N; -ngl N the same) or\n"
               "                         ranges 0-11:cpu,12-23:gpu (docs/hybrid.md)\n"
               "  -v, --verbose          print load information\n");
    cli_spec_usage(f);
    fprintf(f, "  --batch-invariant      pad one-token steps to two rows, as speculative decoding does\n"
               "                         (greedy text then equals that of any --spec/--draft run)\n");
}

/* Returns 0 on success, 1 = handled (help), 2 = usage error. */
static int parse_opts(const char *cmd, int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 256;
    o->sp = th_sampler_default_params();
    o->sp.temperature = 0.8f; o->sp.top_k = 40; o->sp.top_p = 0.95f; o->sp.min_p = 0.05f;
    o->sp.seed = 0xC0FFEE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d; long l;
        int sa = cli_spec_arg(cmd, a, v, &o->spec);
        if (sa < 0) return 2;
        if (sa > 0) { i += sa - 1; continue; }
        if (!strcmp(a, "--batch-invariant")) { o->batch_invariant = true; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout, cmd); return 1; }
        else if (!strcmp(a, "--special")) o->special = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true;
        else if (!strcmp(a, "--gpu")) o->gpu = true;
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "-ngl") && v) { o->gpu = atol(v) > 0; i++; }
        else if (!v) { fprintf(stderr, "theseus %s: unknown or incomplete option '%s'\n", cmd, a); return 2; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { o->model = v; i++; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { o->prompt = v; i++; }
        else if (!strcmp(a, "--system")) { o->system = v; i++; }
        else if (!strcmp(a, "--grammar")) { o->grammar_file = v; i++; }
        else if (!strcmp(a, "--json-schema")) { o->schema_file = v; i++; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { if (!cli_int(cmd, a, v, -1, 1 << 24, &o->n_predict)) return 2; i++; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_int(cmd, a, v, 1, 1024, &o->threads)) return 2; i++; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (!cli_int(cmd, a, v, 16, 1 << 24, &o->ctx)) return 2; i++; }
        else if (!strcmp(a, "--seed")) { if (!cli_int(cmd, a, v, 0, 0x7fffffffffffffffL, &l)) return 2; o->sp.seed = (uint64_t)l; i++; }
        else if (!strcmp(a, "--top-k")) { if (!cli_int(cmd, a, v, 0, 1 << 30, &l)) return 2; o->sp.top_k = (int32_t)l; i++; }
        else if (!cli_float(cmd, a, v, &d)) return 2;
        else if (!strcmp(a, "--temp")) { o->sp.temperature = (float)d; i++; }
        else if (!strcmp(a, "--top-p")) { o->sp.top_p = (float)d; i++; }
        else if (!strcmp(a, "--min-p")) { o->sp.min_p = (float)d; i++; }
        else if (!strcmp(a, "--repeat-penalty")) { o->sp.repeat_penalty = (float)d; i++; }
        else if (!strcmp(a, "--presence-penalty")) { o->sp.presence_penalty = (float)d; i++; }
        else if (!strcmp(a, "--frequency-penalty")) { o->sp.frequency_penalty = (float)d; i++; }
        else { fprintf(stderr, "theseus %s: unknown option '%s'\n", cmd, a); return 2; }
    }
    if (!o->model) { usage(stderr, cmd); return 2; }
    if ((o->grammar_file != NULL) + (o->schema_file != NULL) + o->json > 1) {
        fprintf(stderr, "theseus %s: --grammar, --json-schema and --json exclude each other\n", cmd);
        return 2;
    }
    return 0;
}

typedef struct session {
    th_model *m;
    th_runtime *rt;             /* one slot, stepped here: the same runtime as `serve` */
    th_sampler_params sp;
    long n_predict;
    th_grammar *grammar;        /* --grammar / --json-schema / --json, or NULL */
    cli_spec spec;
} session;

/* The grammar the options ask for (NULL: none). Returns 0, or 2 after printing
 * why the file or the grammar is bad. */
static int load_grammar(const char *cmd, const run_opts *o, th_grammar **out) {
    *out = NULL;
    if (!o->grammar_file && !o->schema_file && !o->json) return 0;
    const char *path = o->grammar_file ? o->grammar_file : o->schema_file;
    size_t n = 4;
    char *text = path ? cli_read_file(path, &n) : strdup("true");   /* --json: the schema `true`, any value */
    if (!text) { fprintf(stderr, "theseus %s: cannot read %s\n", cmd, path); return 2; }
    th_status s = o->grammar_file ? th_grammar_parse(text, n, out) : th_grammar_from_json_schema(text, n, out);
    free(text);
    if (s) { fprintf(stderr, "theseus %s: %s: %s\n", cmd, path ? path : "--json", th_last_error()); return 2; }
    return 0;
}

static int open_session(const char *cmd, const run_opts *o, bool keep_prefix, session *S) {
    memset(S, 0, sizeof *S);
    S->sp = o->sp;
    S->n_predict = o->n_predict;
    int rc = load_grammar(cmd, o, &S->grammar);
    if (rc) return rc;
    th_model_params mp = cli_model_params();
    mp.verbose = o->verbose;
    th_status s = th_model_load(o->model, &mp, &S->m);
    S->spec = o->spec;
    if (!s) s = cli_spec_open(&S->spec, o->verbose);
    th_sampler *probe = NULL;   /* checks the sampling flags; says whether decoding is greedy */
    if (!s) s = th_sampler_new(&o->sp, th_model_n_vocab(S->m), &probe);
    if (!s) {
        bool greedy = th_sampler_is_greedy(probe);
        th_runtime_params rp = th_runtime_default_params();
        rp.context.n_threads = (int32_t)o->threads;
        rp.context.gpu = o->gpu;
        rp.context.gpu_layers = cli_gpu_layers();
        /* greedy on the GPU: only each step's argmax comes back (the runtime takes th_get_argmax) */
        rp.context.logits_argmax_only = o->gpu && greedy && !S->grammar;   /* a grammar masks the logits */
        rp.slot_ctx = (int32_t)o->ctx;
        rp.keep_prefix = keep_prefix;   /* chat: the KV keeps the conversation's shared prefix */
        rp.spec = S->spec.p;
        rp.batch_invariant = o->batch_invariant;
        s = th_runtime_new(S->m, &rp, &S->rt);
        if (!s && o->verbose)
            fprintf(stderr, "theseus %s: %s\n", cmd, !greedy ? "sampling from the full logits"
                    : rp.context.logits_argmax_only ? "greedy: argmax taken on the GPU (logits_argmax_only)"
                                                    : "greedy: argmax of the logits row (th_get_argmax)");
    }
    th_sampler_free(probe);
    return s ? cli_fail(cmd, s) : 0;
}

static void close_session(session *S) {
    th_runtime_free(S->rt);
    cli_spec_close(&S->spec);
    th_model_free(S->m);
    th_grammar_free(S->grammar);
}

static void print_text(const th_event *ev, void *user) {
    if ((ev->kind == TH_EVENT_TOKEN || ev->kind == TH_EVENT_FINISH) && ev->n_text) {
        fwrite(ev->text, 1, ev->n_text, (FILE *)user);
        fflush((FILE *)user);
    }
}

/* Generates the continuation of prompt (streamed to out) through the runtime,
 * stepping it on this thread; *req is the finished request (release it). */
static th_status generate(session *S, const th_token *prompt, size_t n, FILE *out, th_request **req) {
    *req = NULL;
    if (n > INT32_MAX) return th_set_error(TH_ERR_CAPACITY, "the prompt has %zu tokens", n);
    th_request_params rp = th_request_default_params();
    rp.sampling = S->sp;
    rp.max_tokens = (int32_t)S->n_predict;
    rp.penalize_prompt = true;
    rp.on_event = print_text;
    rp.user = out;
    rp.grammar = S->grammar;
    th_status s = th_runtime_submit(S->rt, &rp, prompt, (int32_t)n, req);
    while (!s && !th_request_done(*req)) s = th_runtime_step(S->rt, NULL);
    if (!s && (s = th_request_status(*req))) th_set_error(s, "%s", th_request_message(*req));
    return s;
}

static void print_stats(const th_request *r) {
    th_request_stats st;
    th_request_stats_get(r, &st);
    int32_t n_prompt = st.n_prompt - st.n_prompt_cached;
    fprintf(stderr, "\n[prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s]\n", n_prompt,
            st.t_prompt > 0 ? n_prompt / st.t_prompt : 0.0, st.n_generated,
            st.t_generate > 0 ? st.n_generated / st.t_generate : 0.0);
    if (st.t_grammar > 0)   /* --grammar / --json-schema / --json: what the constraint cost */
        fprintf(stderr, "[grammar: %.2f ms, %.2f %% of generation; %llu whole-vocabulary masks]\n", st.t_grammar * 1e3,
                st.t_generate > 0 ? 100.0 * st.t_grammar / st.t_generate : 0.0, (unsigned long long)st.grammar_masks);
    cli_spec_print(stderr, st.n_drafted, st.n_accepted, st.n_generated, 0);
}

/* All of text's tokens (the buffer sized from the tokenizer's answer: a
 * vocabulary without merges can give more tokens than bytes). */
static th_status tokenize_all(const th_model *m, const char *text, bool add_special, bool special,
                              th_token **out, size_t *n) {
    return cli_tokenize(m, text, strlen(text), add_special, special, out, n);
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_opts("run", argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    if (!o.prompt) { usage(stderr, "run"); return 2; }
    session S;
    if ((rc = open_session("run", &o, false, &S))) { close_session(&S); return rc; }
    th_token *tok = NULL;
    size_t n;
    th_request *r = NULL;
    th_status s = tokenize_all(S.m, o.prompt, true, o.special, &tok, &n);
    if (!s) s = generate(&S, tok, n, stdout, &r);
    if (s) rc = cli_fail("run", s);
    else { printf("\n"); print_stats(r); }
    th_request_release(r);
    free(tok);
    close_session(&S);
    return rc;
}

/* ---------------------------------------------------------------- chat */

static char *token_text(const th_model *m, th_token t) {
    char buf[256];
    int32_t k = t >= 0 ? th_token_to_piece(m, t, buf, sizeof buf, true) : 0;
    return strndup(buf, k > 0 ? (size_t)k : 0);
}

/* The model's chat template, or ChatML (th_chat_render_chatml) when it has
 * none or ours cannot render it. */
static char *render_chat(const th_model *m, const cJSON *msgs, bool *warned) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemReferenceToObject(root, "messages", (cJSON *)msgs);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return NULL;
    const char *tmpl = th_model_meta_str(m, "tokenizer.chat_template");
    th_chat_opts co = { .add_generation_prompt = true };
    char *out = NULL;
    if (tmpl) {
        char *bos = token_text(m, th_token_bos(m)), *eos = token_text(m, th_token_eos(m));
        co.bos_token = bos;
        co.eos_token = eos;
        th_status s = th_chat_render(tmpl, json, &co, &out);
        free(bos); free(eos);
        if (!s) { free(json); return out; }
        if (!*warned) fprintf(stderr, "theseus chat: the model's chat template failed (%s); using ChatML\n", th_last_error());
        *warned = true;
        co.bos_token = co.eos_token = NULL;
    }
    if (th_chat_render_chatml(json, &co, &out)) out = NULL;
    free(json);
    return out;
}

static void add_message(cJSON *msgs, const char *role, const char *content) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "role", role);
    cJSON_AddStringToObject(o, "content", content);
    cJSON_AddItemToArray(msgs, o);
}

static int chat_turn(session *S, const run_opts *o, cJSON *msgs, bool *warned) {
    char *prompt = render_chat(S->m, msgs, warned);
    if (!prompt) return cli_fail("chat", th_set_error(TH_ERR_NOMEM, "out of memory"));
    th_token *tok;
    size_t n;
    th_status s = tokenize_all(S->m, prompt, true, true, &tok, &n);
    free(prompt);
    if (s) return cli_fail("chat", s);
    /* a template that writes BOS itself plus a vocab that adds it: keep one */
    th_token bos = th_token_bos(S->m);
    if (n >= 2 && tok[0] == bos && tok[1] == bos) { memmove(tok, tok + 1, (n - 1) * sizeof *tok); n--; }
    th_request *r = NULL;
    s = generate(S, tok, n, stdout, &r);
    free(tok);
    printf("\n");
    fflush(stdout);
    if (s) { th_request_release(r); return cli_fail("chat", s); }
    if (o->verbose) print_stats(r);
    add_message(msgs, "assistant", th_request_text(r, 0, NULL));
    th_request_release(r);
    return 0;
}

int cmd_chat(int argc, char **argv) {
    run_opts o;
    int rc = parse_opts("chat", argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    session S;
    if ((rc = open_session("chat", &o, true, &S))) { close_session(&S); return rc; }
    cJSON *msgs = cJSON_CreateArray();
    if (o.system) add_message(msgs, "system", o.system);
    bool warned = false, tty = isatty(0);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    if (tty) fprintf(stderr, "chatting with %s — type a message, Ctrl-D to end\n> ", th_model_desc(S.m));
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) { if (tty) fprintf(stderr, "> "); continue; }
        add_message(msgs, "user", line);
        if ((rc = chat_turn(&S, &o, msgs, &warned))) break;
        if (tty) fprintf(stderr, "> ");
    }
    free(line);
    cJSON_Delete(msgs);
    close_session(&S);
    return rc;
}
