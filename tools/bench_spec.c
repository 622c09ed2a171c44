/* bench_spec.c — `theseus bench`'s speculative-decoding rows (--spec, --draft,
 * --draft-layers): greedy generation of -n tokens from a real prompt through the
 * runtime (one slot, stepped here, as `run` does), once plain and once with the
 * drafter, alternating for -r repetitions in the same run (so both see the same
 * machine load); each row is the median tok/s over the repetitions ± sd, tok/s =
 * generated tokens / generation time (th_request_stats: after the prompt). Both
 * runtimes are batch-invariant (the drafter's turns it on; the plain one is set
 * so), so their greedy tokens must be the same: the summary line says whether
 * they were, the acceptance (accepted / drafted), the mean accepted length (drafts
 * accepted per verification of a slot's drafts), and the speed-up (median
 * speculative tok/s / median plain tok/s). */
#include "cli.h"
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The default prompt: rewriting a code file with one change (n-gram lookup's case). */
static const char DEFAULT_PROMPT[] =
    "Rewrite the following C file with one change: rename the function `mean` to `average` everywhere. "
    "Output the whole file and nothing else.\n\n"
    "#include <stdio.h>\n#include <stdlib.h>\n\n"
    "/* The arithmetic mean of n values. */\n"
    "static double mean(const double *x, int n) {\n    double s = 0;\n    for (int i = 0; i < n; i++) s += x[i];\n"
    "    return n > 0 ? s / n : 0;\n}\n\n"
    "/* The variance of n values around their mean. */\n"
    "static double variance(const double *x, int n) {\n    double m = mean(x, n), s = 0;\n"
    "    for (int i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);\n    return n > 1 ? s / (n - 1) : 0;\n}\n\n"
    "int main(int argc, char **argv) {\n    double x[64];\n    int n = 0;\n"
    "    for (int i = 1; i < argc && n < 64; i++) x[n++] = atof(argv[i]);\n"
    "    printf(\"mean %g variance %g\\n\", mean(x, n), variance(x, n));\n    return 0;\n}\n";

typedef struct collect { th_token *tok; int32_t n, cap; } collect;

static void on_token(const th_event *ev, void *user) {
    collect *c = user;
    if (ev->kind == TH_EVENT_TOKEN && c->n < c->cap) c->tok[c->n++] = ev->token;
}

/* The prompt as the model's chat template renders one user message (raw text when it has none). */
static th_status prompt_tokens(const th_model *m, const char *text, th_token **out, size_t *n) {
    const char *tmpl = th_model_meta_str(m, "tokenizer.chat_template");
    char *rendered = NULL;
    if (tmpl) {
        cJSON *root = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(root, "messages"), *u = cJSON_CreateObject();
        cJSON_AddStringToObject(u, "role", "user");
        cJSON_AddStringToObject(u, "content", text);
        cJSON_AddItemToArray(msgs, u);
        char *json = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        th_chat_opts co = { .add_generation_prompt = true };
        if (!json || th_chat_render(tmpl, json, &co, &rendered)) rendered = NULL;
        free(json);
    }
    th_status s = cli_tokenize(m, rendered ? rendered : text, strlen(rendered ? rendered : text), true, rendered != NULL, out, n);
    free(rendered);
    return s;
}

static th_status new_runtime(th_model *m, const bench_spec_opts *o, const th_spec_params *sp, int32_t slot_ctx,
                             th_runtime **rt) {
    th_runtime_params rp = th_runtime_default_params();
    rp.context.n_threads = (int32_t)o->threads;
    rp.context.gpu = o->gpu;
    rp.context.gpu_layers = cli_gpu_layers();
    rp.context.logits_argmax_only = o->argmax_only;
    rp.slot_ctx = slot_ctx;
    rp.batch_invariant = true;
    if (sp) rp.spec = *sp;
    return th_runtime_new(m, &rp, rt);
}

/* One greedy generation; *tps its tok/s, the tokens into c. */
static th_status generate(th_runtime *rt, const th_token *pr, size_t n, long n_gen, collect *c, double *tps) {
    th_request_params rp = th_request_default_params();
    rp.max_tokens = (int32_t)n_gen;
    rp.on_event = on_token;
    rp.user = c;
    c->n = 0;
    th_request *r = NULL;
    th_status s = th_runtime_submit(rt, &rp, pr, (int32_t)n, &r);
    while (!s && !th_request_done(r)) s = th_runtime_step(rt, NULL);
    if (!s && (s = th_request_status(r))) th_set_error(s, "%s", th_request_message(r));
    th_request_stats st;
    th_request_stats_get(r, &st);
    *tps = st.t_generate > 0 ? st.n_generated / st.t_generate : 0;
    th_request_release(r);
    return s;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void stats(double *v, long n, double *med, double *sd) {
    double mean = 0, ss = 0;
    for (long i = 0; i < n; i++) mean += v[i];
    mean /= (double)n;
    for (long i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
    *sd = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void row(const th_model *m, const bench_spec_opts *o, const char *test, double med, double sd) {
    char ts[48];
    snprintf(ts, sizeof ts, "%.2f ± %.2f", med, sd);
    printf("| %-*s | %10s | %10s | %-12s | %7ld | %8s | %21s | %8s | %7s |\n", o->w_model, th_model_desc(m), o->size,
           o->params, o->backend, o->threads, test, ts, "-", "-");
    fflush(stdout);
}

th_status bench_spec(th_model *m, const bench_spec_opts *o) {
    size_t len = 0;
    char *text = o->prompt_file ? cli_read_file(o->prompt_file, &len) : NULL;
    if (o->prompt_file && !text) return th_set_error(TH_ERR_IO, "cannot read the prompt file %s", o->prompt_file);
    th_token *pr = NULL;
    size_t n = 0;
    th_status s = prompt_tokens(m, text ? text : DEFAULT_PROMPT, &pr, &n);
    free(text);
    if (!s) s = cli_spec_open(o->spec, o->verbose);
    th_runtime *plain = NULL, *spec = NULL;
    int32_t slot_ctx = (int32_t)((n + (size_t)o->n_gen + 80) / 16 * 16);
    if (!s) s = new_runtime(m, o, NULL, slot_ctx, &plain);
    if (!s) s = new_runtime(m, o, &o->spec->p, slot_ctx, &spec);
    double *tp = calloc((size_t)o->reps, sizeof *tp), *ts = calloc((size_t)o->reps, sizeof *ts);
    collect a = { .tok = calloc((size_t)o->n_gen, sizeof(th_token)), .cap = (int32_t)o->n_gen };
    collect b = { .tok = calloc((size_t)o->n_gen, sizeof(th_token)), .cap = (int32_t)o->n_gen };
    if (!s && (!tp || !ts || !a.tok || !b.tok)) s = th_set_error(TH_ERR_NOMEM, "out of memory");
    bool same = true;
    long gen_a = 0, gen_b = 0;
    for (long r = 0; !s && r <= o->reps; r++) {   /* repetition 0 warms up, untimed */
        double x, y;
        s = generate(plain, pr, n, o->n_gen, &a, &x);
        if (!s) s = generate(spec, pr, n, o->n_gen, &b, &y);
        if (s || r == 0) continue;
        tp[r - 1] = x;
        ts[r - 1] = y;
        gen_a += a.n;
        gen_b += b.n;
        same &= a.n == b.n && !memcmp(a.tok, b.tok, (size_t)a.n * sizeof(th_token));
    }
    if (!s) {
        th_runtime_stats st;
        th_runtime_stats_get(spec, &st);
        double mp, sdp, msp, sds;
        stats(tp, o->reps, &mp, &sdp);
        stats(ts, o->reps, &msp, &sds);
        char test[48];
        snprintf(test, sizeof test, "tg%ld plain", o->n_gen);
        row(m, o, test, mp, sdp);
        snprintf(test, sizeof test, "tg%ld %s", o->n_gen, th_spec_kind_name(o->spec->p.kind));
        row(m, o, test, msp, sds);
        /* the counters include the warm-up: acceptance and lengths over all of it */
        double acc = st.spec_drafted ? (double)st.spec_accepted / (double)st.spec_drafted : 0;
        printf("\nspeculative (%s%s%s): prompt %zu tokens, %ld generated a run; acceptance %.1f %% (%llu of %llu drafts), "
               "mean accepted length %.2f a verification; speed-up %.2fx over plain decode "
               "(same run, medians of %ld); greedy tokens %s\n",
               th_spec_kind_name(o->spec->p.kind), o->spec->p.kind != TH_SPEC_NGRAM ? " " : "",
               o->spec->p.kind == TH_SPEC_DRAFT ? o->spec->draft_path : o->spec->p.kind == TH_SPEC_LAYERS ? o->spec->p.layers : "",
               n, gen_b / o->reps, 100 * acc, (unsigned long long)st.spec_accepted, (unsigned long long)st.spec_drafted,
               st.spec_rounds ? (double)st.spec_accepted / (double)st.spec_rounds : 0, mp > 0 ? msp / mp : 0, o->reps,
               same && gen_a == gen_b ? "identical to plain" : "DIFFER from plain");
    }
    th_runtime_free(spec);
    th_runtime_free(plain);
    cli_spec_close(o->spec);
    free(tp); free(ts); free(a.tok); free(b.tok); free(pr);
    return s;
}
