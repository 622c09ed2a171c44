/* bench_grammar.c — what grammar-constrained sampling costs per decoded token, with the
 * library directly: th_decode + th_constraint_sample + th_constraint_accept against
 * th_decode + th_sampler_sample, on a real model (default SmolLM2-135M) with a JSON grammar
 * (default tests/data/grammar/llama-grammars/json.gbnf).
 *
 *   build/bench/bench_grammar [-m MODEL] [--grammar FILE | --json-schema FILE] [-n TOKENS] [-r REPS] [-t THREADS] [--story]
 *
 * Each repetition generates n tokens three ways from the same chat prompt (asking for
 * JSON), restarting the sequence whenever it ends: free (no grammar), constrained
 * (th_constraint_sample: the sampled token is checked first, the whole vocabulary masked
 * only when it is rejected) and masked (th_constraint_apply on every step, then sampling:
 * the cost without the check-first trick). Reported per token, medians over the
 * repetitions: decode (th_decode), sample, grammar (th_constraint_* calls), and the
 * overhead against the free run. --story asks for a story instead of JSON, so that the
 * sampled token is often rejected. Also timed: masks computed from scratch (a new
 * constraint, empty caches) at the start and inside a string. */
#include "theseus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

typedef struct run { double decode, sample, grammar; int tokens, rejected, restarts, masks, masks_computed; } run;

enum { FREE, CONSTRAINED, MASKED };

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp_d); return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }

static int generate(th_model *m, th_context *ctx, th_constraint *c, const th_token *prompt, size_t n_prompt, int n,
                    int mode, uint64_t seed, run *r) {
    int32_t nv = th_model_n_vocab(m);
    th_sampler_params sp = th_sampler_default_params();
    sp.seed = seed;
    th_sampler *s = NULL;
    if (th_sampler_new(&sp, nv, &s) != TH_OK) return 1;
    float *row = malloc((size_t)nv * sizeof *row);
    memset(r, 0, sizeof *r);
    while (r->tokens < n) {
        th_kv_seq_clear(ctx, 0);
        th_sampler_reset(s);
        if (c) th_constraint_reset(c);
        th_batch b = { .n_tokens = (int32_t)n_prompt, .token = prompt };
        if (th_decode(ctx, &b) != TH_OK) { fprintf(stderr, "decode: %s\n", th_last_error()); return 1; }
        int32_t out = (int32_t)n_prompt - 1;
        r->restarts++;
        for (int len = 0; r->tokens < n && (size_t)len + n_prompt < th_context_n_ctx(ctx) - 1; len++) {
            const float *logits = th_get_logits(ctx, out);
            th_token t;
            double t0 = now();
            if (mode == FREE) {
                t = th_sampler_sample(s, logits);
                r->sample += now() - t0;
            } else if (mode == CONSTRAINED) {
                t = th_constraint_sample(c, s, logits);
                double dt = now() - t0;
                /* the check-first path costs one sampler call; a rejection costs a second one and the mask */
                r->grammar += dt;
            } else {
                memcpy(row, logits, (size_t)nv * sizeof *row);
                th_constraint_apply(c, row, NULL);
                double t1 = now();
                t = th_sampler_sample(s, row);
                r->grammar += t1 - t0;
                r->sample += now() - t1;
            }
            if (t < 0) { fprintf(stderr, "sample: %s\n", th_last_error()); return 1; }
            if (c) {
                double t1 = now();
                if (th_constraint_accept(c, t) != TH_OK) { fprintf(stderr, "accept: %s\n", th_last_error()); return 1; }
                r->grammar += now() - t1;
            }
            th_sampler_accept(s, t);
            r->tokens++;
            if (th_token_is_eog(m, t)) break;
            double t2 = now();
            th_batch one = { .n_tokens = 1, .token = &t };
            if (th_decode(ctx, &one) != TH_OK) { fprintf(stderr, "decode: %s\n", th_last_error()); return 1; }
            r->decode += now() - t2;
            out = 0;
        }
    }
    if (mode == CONSTRAINED) {
        th_constraint_stats cs;
        th_constraint_get_stats(c, &cs);
        r->rejected = (int)cs.rejected_first;
        r->masks_computed = (int)cs.masks_computed;
        r->masks = (int)cs.masks;
    }
    th_sampler_free(s);
    free(row);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf", *gpath = "tests/data/grammar/llama-grammars/json.gbnf";
    const char *spath = NULL;
    int n = 128, reps = 3, threads = 0;
    bool story = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--grammar") && i + 1 < argc) gpath = argv[++i];
        else if (!strcmp(argv[i], "--json-schema") && i + 1 < argc) spath = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--story")) story = true;
        else { fprintf(stderr, "usage: %s [-m MODEL] [--grammar FILE | --json-schema FILE] [-n N] [-r REPS] [-t THREADS]\n", argv[0]); return 2; }
    }
    if (reps < 1 || reps > 64 || n < 1) return 2;
    th_model_params mp = th_model_default_params();
    th_model *m = NULL;
    if (th_model_load(model, &mp, &m) != TH_OK) { fprintf(stderr, "%s: %s\n", model, th_last_error()); return 1; }
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = threads;
    th_context *ctx = NULL;
    if (th_context_new(m, &cp, &ctx) != TH_OK) { fprintf(stderr, "context: %s\n", th_last_error()); return 1; }
    char *text = read_file(spath ? spath : gpath);
    th_grammar *g = NULL;
    th_status st = !text ? TH_ERR_IO : spath ? th_grammar_from_json_schema(text, strlen(text), &g) : th_grammar_parse(text, strlen(text), &g);
    if (st != TH_OK) { fprintf(stderr, "%s: %s\n", spath ? spath : gpath, th_last_error()); return 1; }
    double tv = now();
    th_grammar_vocab *v = NULL;
    if (th_grammar_vocab_new(m, &v) != TH_OK) { fprintf(stderr, "vocab: %s\n", th_last_error()); return 1; }
    tv = now() - tv;
    th_constraint *c = NULL;
    if (th_constraint_new(g, v, &c) != TH_OK) { fprintf(stderr, "constraint: %s\n", th_last_error()); return 1; }

    const char *tmpl = th_model_meta_str(m, "tokenizer.chat_template");
    const char *msgs = story ? "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a short story about a cat.\"}]}"
                             : "{\"messages\": [{\"role\": \"user\", \"content\": \"Describe a cat as a JSON object with its name, age, "
                               "colour and a list of three favourite foods. Answer with JSON only.\"}]}";
    th_chat_opts co = { .add_generation_prompt = true };
    char *prompt_text = NULL;
    if (!tmpl || th_chat_render(tmpl, msgs, &co, &prompt_text) != TH_OK) prompt_text = strdup("{\"name\": ");
    th_token prompt[512];
    size_t n_prompt = 0;
    if (th_tokenize(m, prompt_text, strlen(prompt_text), true, true, prompt, 512, &n_prompt) != TH_OK) return 1;

    const char *names[] = { "free", "constrained", "masked" };
    double dec[3][64], smp[3][64], tot[3][64];
    int rej = 0, toks = 0, masks = 0, computed = 0;
    for (int rep = 0; rep < reps; rep++)
        for (int mode = 0; mode < 3; mode++) {
            run r;
            th_constraint *cm = NULL;   /* a fresh constraint per run: its caches and counters start empty */
            if (mode != FREE && th_constraint_new(g, v, &cm) != TH_OK) return 1;
            if (generate(m, ctx, cm, prompt, n_prompt, n, mode, 1234 + (uint64_t)rep, &r)) return 1;
            th_constraint_free(cm);
            dec[mode][rep] = r.decode / r.tokens * 1e3;
            smp[mode][rep] = (r.sample + r.grammar) / r.tokens * 1e3;
            tot[mode][rep] = dec[mode][rep] + smp[mode][rep];
            if (mode == CONSTRAINED) { rej += r.rejected; toks += r.tokens; masks += r.masks; computed += r.masks_computed; }
        }
    printf("model %s, %s, %d threads, prompt %zu tokens, %d tokens x %d reps; vocabulary trie built in %.1f ms\n",
           th_model_desc(m), spath ? spath : gpath, threads, n_prompt, n, reps, tv * 1e3);
    printf("%-12s %12s %20s %12s %22s\n", "mode", "decode ms/t", "sample+grammar ms/t", "total ms/t", "overhead vs free");
    double df = median(dec[FREE], reps), sf = median(smp[FREE], reps), tf = median(tot[FREE], reps);
    for (int mode = 0; mode < 3; mode++) {
        double d = median(dec[mode], reps), sg = median(smp[mode], reps), t = median(tot[mode], reps);
        if (mode == FREE) printf("%-12s %12.3f %20.3f %12.3f %22s\n", names[mode], d, sg, t, "-");
        else printf("%-12s %12.3f %20.3f %12.3f %+13.1f%% (%+.1f%%)\n", names[mode], d, sg, t, (t - tf) / tf * 100,
                    (sg - sf) / (df + sf) * 100);
    }
    printf("overhead: total per token against the free run; in parentheses only the sampling side (sample+grammar\n"
           "minus the free run's sampling) over the free run's decode+sample, which ignores decode-time noise\n");
    printf("constrained: the sampled token was rejected (whole vocabulary masked) at %d of %d steps; %d masks, %d not cached\n",
           rej, toks, masks, computed);
    /* masks from scratch: a fresh constraint has empty caches */
    int32_t nv = th_model_n_vocab(m), allowed = 0;
    float *row = calloc((size_t)nv, sizeof *row);
    const char *states[] = { "", "{\"" };
    for (int k = 0; k < 2; k++) {
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            th_constraint *fresh = NULL;
            th_constraint_new(g, v, &fresh);
            th_constraint_accept_text(fresh, states[k], strlen(states[k]), NULL);
            double t0 = now();
            th_constraint_apply(fresh, row, &allowed);
            double dt = now() - t0;
            if (dt < best) best = dt;
            th_constraint_free(fresh);
        }
        printf("mask from scratch after '%s': %.3f ms (%d of %d tokens allowed)\n", states[k], best * 1e3, allowed, nv);
    }
    free(row);
    th_constraint_free(c);
    th_grammar_vocab_free(v);
    th_grammar_free(g);
    th_context_free(ctx);
    th_model_free(m);
    free(text);
    free(prompt_text);
    return 0;
}
