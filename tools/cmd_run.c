/* cmd_run.c — `theseus run` (one prompt → streamed text) and `theseus chat`
 * (each stdin line is a user message; the model's chat template renders the
 * conversation, the KV cache keeps the common prefix between turns). */
#include "generate.h"
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct run_opts {
    const char *model, *prompt, *system;
    long n_predict, threads, ctx;
    bool special, verbose, gpu;
    th_sampler_params sp;
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
               "  --gpu, -ngl N          run the whole model on the GPU (CUDA build)\n"
               "  -v, --verbose          print load information\n");
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
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout, cmd); return 1; }
        else if (!strcmp(a, "--special")) o->special = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true;
        else if (!strcmp(a, "--gpu")) o->gpu = true;
        else if (!strcmp(a, "-ngl") && v) { o->gpu = atol(v) > 0; i++; }
        else if (!v) { fprintf(stderr, "theseus %s: unknown or incomplete option '%s'\n", cmd, a); return 2; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { o->model = v; i++; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { o->prompt = v; i++; }
        else if (!strcmp(a, "--system")) { o->system = v; i++; }
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
    return 0;
}

typedef struct session {
    th_model *m;
    th_context *ctx;
    th_sampler *smp;
    gen_history hist;
} session;

static int open_session(const char *cmd, const run_opts *o, session *S) {
    memset(S, 0, sizeof *S);
    th_model_params mp = th_model_default_params();
    mp.verbose = o->verbose;
    th_status s = th_model_load(o->model, &mp, &S->m);
    if (!s) s = th_sampler_new(&o->sp, th_model_n_vocab(S->m), &S->smp);
    if (!s) {
        th_context_params cp = th_context_default_params();
        cp.n_ctx = (uint32_t)o->ctx;
        cp.n_threads = (int32_t)o->threads;
        cp.gpu = o->gpu;
        /* greedy on the GPU: only each step's argmax comes back (generate takes th_get_argmax) */
        cp.logits_argmax_only = o->gpu && th_sampler_is_greedy(S->smp);
        s = th_context_new(S->m, &cp, &S->ctx);
        if (!s && o->verbose)
            fprintf(stderr, "theseus %s: %s\n", cmd, !th_sampler_is_greedy(S->smp) ? "sampling from the full logits"
                    : cp.logits_argmax_only ? "greedy: argmax taken on the GPU (logits_argmax_only)"
                                            : "greedy: argmax of the logits row (th_get_argmax)");
    }
    return s ? cli_fail(cmd, s) : 0;
}

static void close_session(session *S) {
    th_sampler_free(S->smp);
    th_context_free(S->ctx);
    th_model_free(S->m);
    free(S->hist.tok);
}

static th_status tokenize_all(const th_model *m, const char *text, bool add_special, bool special,
                              th_token **out, size_t *n) {
    size_t len = strlen(text), cap = len + 8;
    *out = malloc(cap * sizeof **out);
    if (!*out) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_status s = th_tokenize(m, text, len, add_special, special, *out, cap, n);
    if (s) { free(*out); *out = NULL; }
    return s;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_opts("run", argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    if (!o.prompt) { usage(stderr, "run"); return 2; }
    session S;
    if ((rc = open_session("run", &o, &S))) { close_session(&S); return rc; }
    th_token *tok;
    size_t n;
    th_status s = tokenize_all(S.m, o.prompt, true, o.special, &tok, &n);
    gen_stats st;
    if (!s) s = generate(S.m, S.ctx, S.smp, &S.hist, tok, n, (int32_t)o.n_predict, stdout, NULL, &st);
    if (s) rc = cli_fail("run", s);
    else { printf("\n"); gen_print_stats(&st); }
    if (!s) free(tok);
    close_session(&S);
    return rc;
}

/* ---------------------------------------------------------------- chat */

static char *token_text(const th_model *m, th_token t) {
    char buf[256];
    int32_t k = t >= 0 ? th_token_to_piece(m, t, buf, sizeof buf, true) : 0;
    return strndup(buf, k > 0 ? (size_t)k : 0);
}

/* ChatML, used when the model has no template or ours cannot render it. */
static char *render_chatml(const cJSON *msgs) {
    size_t cap = 256;
    const cJSON *it;
    cJSON_ArrayForEach(it, msgs) cap += strlen(cJSON_GetObjectItem(it, "content")->valuestring) + 64;
    char *out = malloc(cap), *p = out;
    if (!out) return NULL;
    cJSON_ArrayForEach(it, msgs)
        p += sprintf(p, "<|im_start|>%s\n%s<|im_end|>\n", cJSON_GetObjectItem(it, "role")->valuestring,
                     cJSON_GetObjectItem(it, "content")->valuestring);
    strcpy(p, "<|im_start|>assistant\n");
    return out;
}

static char *render_chat(const th_model *m, const cJSON *msgs, bool *warned) {
    const char *tmpl = th_model_meta_str(m, "tokenizer.chat_template");
    if (tmpl) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemReferenceToObject(root, "messages", (cJSON *)msgs);
        char *json = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        char *bos = token_text(m, th_token_bos(m)), *eos = token_text(m, th_token_eos(m));
        th_chat_opts co = { .add_generation_prompt = true, .bos_token = bos, .eos_token = eos };
        char *out = NULL;
        th_status s = json ? th_chat_render(tmpl, json, &co, &out) : TH_ERR_NOMEM;
        free(json); free(bos); free(eos);
        if (!s) return out;
        if (!*warned) fprintf(stderr, "theseus chat: the model's chat template failed (%s); using ChatML\n", th_last_error());
        *warned = true;
    }
    return render_chatml(msgs);
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
    char *reply = NULL;
    gen_stats st;
    s = generate(S->m, S->ctx, S->smp, &S->hist, tok, n, (int32_t)o->n_predict, stdout, &reply, &st);
    free(tok);
    printf("\n");
    fflush(stdout);
    if (s) { free(reply); return cli_fail("chat", s); }
    if (o->verbose) gen_print_stats(&st);
    add_message(msgs, "assistant", reply);
    free(reply);
    return 0;
}

int cmd_chat(int argc, char **argv) {
    run_opts o;
    int rc = parse_opts("chat", argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    session S;
    if ((rc = open_session("chat", &o, &S))) { close_session(&S); return rc; }
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
