/* cmd_perplexity.c — `theseus perplexity`: llama-perplexity's perplexity over a
 * text, writing a KL-divergence base file (--kl-divergence-base FILE) and comparing
 * a model with one (--kl-divergence-base FILE --kl-divergence), with llama.cpp's
 * output lines and labels on stdout, a live progress line with ETA on stderr when it
 * is a terminal, and every figure as JSON (--json FILE). The method and the
 * statistics are the library's (th_eval_run, src/eval/). */
#include "cli.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus perplexity -m MODEL -f TEXT [options]\n"
               "       theseus perplexity -m MODEL -f TEXT --kl-divergence-base FILE      (write a base file)\n"
               "       theseus perplexity -m MODEL --kl-divergence-base FILE --kl-divergence (compare with it)\n"
               "  -m, --model FILE          GGUF model\n"
               "  -f, --file TEXT           text to evaluate (one trailing newline dropped, as llama.cpp)\n"
               "  -c, --ctx-size N          tokens per chunk (default 512; with --kl-divergence: the base file's)\n"
               "  -b, --batch-size N        tokens per forward pass (default 2048: several chunks a pass)\n"
               "  --chunks N                evaluate at most N chunks (default: all)\n"
               "  -t, --threads N           threads (default: all cores)\n"
               "  --kl-divergence-base FILE base file of log-probabilities (llama.cpp's format)\n"
               "  --kl-divergence           compare with the base file instead of writing it\n"
               "  --json FILE               write every figure as one JSON object\n"
               "  --router-base FILE        MoE router agreement: write each layer's expert choices (reference run)\n"
               "                            or, with --kl-divergence, compare with them (flips per layer)\n"
               "  --kv-type f16|f32         KV cache precision (default f16, as llama.cpp)\n"
               "  --gpu                     run the model on the GPU (CUDA build)\n"
               "  --gpu-layers SPEC         some layers on the GPU: N (the last N; -ngl N the same) or\n"
               "                            ranges 0-11:cpu,12-23:gpu (docs/hybrid.md)\n");
}

typedef struct opts {
    const char *model, *text, *base, *json, *router;
    long n_ctx, n_batch, n_chunks, threads;
    bool kld, gpu, tty_err, tty_out;
    int kv_type;
} opts;

/* Returns 0 to go on, else the exit code. */
static int parse(int argc, char **argv, opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *c = "perplexity";
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return -1; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) { o->model = v; i++; }
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && v) { o->text = v; i++; }
        else if ((!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) && v) { if (!cli_int(c, a, v, 3, 1 << 20, &o->n_ctx)) return 2; i++; }
        else if ((!strcmp(a, "-b") || !strcmp(a, "--batch-size")) && v) { if (!cli_int(c, a, v, 1, 65536, &o->n_batch)) return 2; i++; }
        else if (!strcmp(a, "--chunks") && v) { if (!cli_int(c, a, v, -1, INT32_MAX, &o->n_chunks)) return 2; i++; }
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) { if (!cli_int(c, a, v, 1, 1024, &o->threads)) return 2; i++; }
        else if (!strcmp(a, "--kl-divergence-base") && v) { o->base = v; i++; }
        else if (!strcmp(a, "--kl-divergence")) o->kld = true;
        else if (!strcmp(a, "--json") && v) { o->json = v; i++; }
        else if (!strcmp(a, "--router-base") && v) { o->router = v; i++; }
        else if (!strcmp(a, "--gpu")) o->gpu = true;
        else if (!strcmp(a, "-ngl") && v) { o->gpu = atol(v) > 0; i++; }
        else if (!strcmp(a, "--kv-type") && v) {
            if (!strcmp(v, "f16")) o->kv_type = TH_KV_F16;
            else if (!strcmp(v, "f32")) o->kv_type = TH_KV_F32;
            else { fprintf(stderr, "theseus perplexity: --kv-type must be f16 or f32\n"); return 2; }
            i++;
        } else { fprintf(stderr, "theseus perplexity: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!o->model || (!o->kld && !o->text)) { usage(stderr); return 2; }
    if (o->kld && !o->base) {
        fprintf(stderr, "theseus perplexity: --kl-divergence needs --kl-divergence-base FILE (made by a run without --kl-divergence)\n");
        return 2;
    }
    return 0;
}

/* ---- output, as llama-perplexity prints it */

static void print_kld_header(void) {
    printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
           "Δp RMS            Same top p\n");
}

static void print_kld_chunk(int chunk, const th_kld_stats *k) {
    printf("%4d    %9.4lf ± %9.4lf    %10.5lf ± %10.5lf    %10.5lf ± %10.5lf    %6.3lf ± %6.3lf %%    %6.3lf ± %6.3lf %%\n",
           chunk, k->ppl, k->ppl_unc, k->ln_ppl_ratio, k->ln_ppl_ratio_unc, k->kld, k->kld_unc,
           100.0 * k->dp_rms, 100.0 * k->dp_rms_unc, 100.0 * k->same_top, 100.0 * k->same_top_unc);
}

static void print_kld_final(const th_kld_stats *k) {
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", k->ppl, k->ppl_unc);
    printf("Mean PPL(base)                : %10.6lf ± %10.6lf\n", k->ppl_base, k->ppl_base_unc);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * k->cor_ln_ppl);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", k->ln_ppl_ratio, k->ln_ppl_ratio_unc);
    printf("Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", k->ppl_ratio, k->ppl_ratio_unc);
    printf("Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", k->ppl_diff, k->ppl_diff_unc);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6lf ± %10.6lf\n", k->kld, k->kld_unc);
    const struct { const char *l; double v; } kq[] = {
        { "Maximum KLD", k->kld_max }, { "99.9%   KLD", k->kld_p999 }, { "99.0%   KLD", k->kld_p99 },
        { "95.0%   KLD", k->kld_p95 }, { "90.0%   KLD", k->kld_p90 }, { "Median  KLD", k->kld_median },
        { "10.0%   KLD", k->kld_p10 }, { " 5.0%   KLD", k->kld_p5 }, { " 1.0%   KLD", k->kld_p1 },
        { " 0.1%   KLD", k->kld_p01 }, { "Minimum KLD", k->kld_min },
    };
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) printf("%s: %10.6f\n", kq[i].l, kq[i].v);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * k->dp, 100.0 * k->dp_unc);
    const struct { const char *l; double v; } dq[] = {
        { "Maximum Δp", k->dp_max }, { "99.9%   Δp", k->dp_p999 }, { "99.0%   Δp", k->dp_p99 },
        { "95.0%   Δp", k->dp_p95 }, { "90.0%   Δp", k->dp_p90 }, { "75.0%   Δp", k->dp_p75 },
        { "Median  Δp", k->dp_median }, { "25.0%   Δp", k->dp_p25 }, { "10.0%   Δp", k->dp_p10 },
        { " 5.0%   Δp", k->dp_p5 }, { " 1.0%   Δp", k->dp_p1 }, { " 0.1%   Δp", k->dp_p01 },
        { "Minimum Δp", k->dp_min },
    };
    for (size_t i = 0; i < sizeof dq / sizeof dq[0]; i++) printf("%s: %6.3lf%%\n", dq[i].l, 100.0 * dq[i].v);
    printf("RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * k->dp_rms, 100.0 * k->dp_rms_unc);
    printf("Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * k->same_top, 100.0 * k->same_top_unc);
    printf("Cor(p(Q), p(base)): %6.2lf%%\n", 100.0 * k->cor_p);
}

/* Router agreement, one line a MoE layer. */
static void print_router(const th_eval_result *r) {
    printf("\n====== Router agreement (%d of %d experts) ======\n", r->router_k, r->router_n_expert);
    printf("layer   positions   flips   flip rate    gap min   gap median    gap max\n");
    for (int32_t i = 0; i < r->n_router_layers; i++) {
        const th_router_layer *L = &r->router[i];
        printf("%5d   %9lld   %5lld   %7.3f %%   %8.5f   %10.5f   %8.5f\n", L->layer, (long long)L->n_positions,
               (long long)L->n_flips, L->n_positions ? 100.0 * (double)L->n_flips / (double)L->n_positions : 0.0,
               L->gap_min, L->gap_median, L->gap_max);
    }
}

static void fmt_time(char *buf, size_t cap, double s) {
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%d:%02d", t / 60, t % 60);
}

/* After every chunk: its line on stdout, and on a terminal stderr the progress line
 * (cleared while the chunk line is written). The running "[i]PPL," values share one
 * line, so when stdout is that terminal too they are printed at the end instead. */
static void on_progress(const th_eval_progress *p, void *ud) {
    const opts *o = ud;
    if (o->tty_err) { fprintf(stderr, "\r\033[K"); fflush(stderr); }
    if (p->kld) {
        if (p->chunk == 1) print_kld_header();
        print_kld_chunk(p->chunk, p->kld);
    } else if (!(o->tty_err && o->tty_out)) {
        printf("[%d]%.4lf,", p->chunk, p->ppl);
    }
    fflush(stdout);
    if (o->tty_err && p->chunk < p->n_chunks) {
        char el[32], eta[32];
        fmt_time(el, sizeof el, p->seconds);
        fmt_time(eta, sizeof eta, p->eta_seconds);
        fprintf(stderr, "perplexity: chunk %d/%d, PPL %.4f, %s elapsed, ETA %s", p->chunk, p->n_chunks,
                p->ppl, el, eta);
        fflush(stderr);
    }
}

static void print_results(const opts *o, const th_eval_result *r) {
    if (r->has_kld) {
        print_kld_final(&r->kld);
        if (r->router) print_router(r);
        return;
    }
    if (o->tty_err && o->tty_out)   /* not printed as they came */
        for (int32_t i = 0; i < r->n_chunks; i++) printf("[%d]%.4lf,", i + 1, r->running_ppl[i]);
    printf("\n");
    printf("Final estimate: PPL = %.4lf +/- %.5lf\n", r->ppl, r->ppl_unc);
}

/* The text, tokenized as llama-perplexity does (BOS as the metadata says). */
static th_token *tokenize_text(th_model *m, const char *path, size_t *n_out) {
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) { fprintf(stderr, "theseus perplexity: %s: cannot read\n", path); return NULL; }
    if (len && text[len - 1] == '\n') text[--len] = 0;
    size_t cap = len + 16, n = 0;
    th_token *t = malloc(cap * sizeof *t);
    th_status s = t ? th_tokenize(m, text, len, true, false, t, cap, &n) : TH_ERR_NOMEM;
    if (s == TH_ERR_CAPACITY) {
        th_token *nt = realloc(t, (n + 1) * sizeof *t);
        s = nt ? th_tokenize(m, text, len, true, false, (t = nt), n + 1, &n) : TH_ERR_NOMEM;
    }
    free(text);
    if (s) { fprintf(stderr, "theseus perplexity: %s: %s\n", path, th_last_error()); free(t); return NULL; }
    *n_out = n;
    return t;
}

static int evaluate(const opts *o, th_model *m, th_kld_base *base, const th_token *tok, size_t n_tok) {
    th_eval_params ep = th_eval_default_params();
    if (o->n_ctx) ep.n_ctx = (int32_t)o->n_ctx;
    else if (base) ep.n_ctx = 0;
    if (o->n_batch) ep.n_batch = (int32_t)o->n_batch;
    ep.n_chunks = (int32_t)o->n_chunks;
    ep.n_threads = (int32_t)o->threads;
    ep.kld_base = base;
    ep.kld_base_out = base ? NULL : o->base;
    ep.router_base = base ? o->router : NULL;
    ep.router_base_out = base ? NULL : o->router;
    ep.progress = on_progress;
    ep.ud = (void *)o;
    th_context_params cp = th_context_default_params();
    th_eval_context_params(&ep, &cp);
    cp.n_threads = (int32_t)o->threads;
    cp.kv_type = o->kv_type;
    cp.gpu = o->gpu;
    cp.gpu_layers = cli_gpu_layers();
    th_context *ctx;
    th_status s = th_context_new(m, &cp, &ctx);
    if (s) return cli_fail("perplexity", s);
    int32_t C = base ? th_kld_base_n_ctx(base) : ep.n_ctx;
    if (C > th_model_n_ctx_train(m) && th_model_n_ctx_train(m) > 0)
        fprintf(stderr, "perplexity: warning: the model was trained on only %d context tokens (%d a chunk)\n",
                th_model_n_ctx_train(m), C);
    fprintf(stderr, "perplexity: %s, %zu tokens, chunks of %d, %u tokens a pass (%u chunk%s)%s%s\n", th_model_desc(m),
            base ? (size_t)th_kld_base_n_chunks(base) * (size_t)C : n_tok, C, cp.n_batch, cp.n_seq_max,
            cp.n_seq_max == 1 ? "" : "s", o->gpu ? ", GPU" : "",
            base ? ", comparing with the base file" : o->base ? ", writing the base file" : "");
    if (o->tty_err) { fprintf(stderr, "perplexity: first pass ..."); fflush(stderr); }
    th_eval_result r;
    s = th_eval_run(m, ctx, tok, n_tok, &ep, &r);
    th_context_free(ctx);
    if (s) {
        if (o->tty_err) fprintf(stderr, "\r\033[K");
        const char *src = base ? NULL : o->text;
        const char *msg = th_last_error();
        if (src && strstr(msg, "the text tokenizes")) fprintf(stderr, "theseus perplexity: %s: %s\n", src, msg);
        else cli_fail("perplexity", s);
        return 1;
    }
    print_results(o, &r);
    fprintf(stderr, "perplexity: %d chunks, %lld positions scored in %.2f s\n", r.n_chunks, (long long)r.count, r.seconds);
    int rc = 0;
    if (o->json && (s = th_eval_write_json(&r, o->json))) rc = cli_fail("perplexity", s);
    th_eval_result_free(&r);
    return rc;
}

int cmd_perplexity(int argc, char **argv) {
    opts o = { .kv_type = TH_KV_F16, .n_chunks = -1 };
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    o.tty_err = isatty(2);
    o.tty_out = isatty(1);
    th_kld_base *base = NULL;
    th_status s;
    if (o.kld && (s = th_kld_base_open(o.base, &base))) return cli_fail("perplexity", s);
    th_model *m;
    th_model_params mp = cli_model_params();
    if ((s = th_model_load(o.model, &mp, &m))) { th_kld_base_close(base); return cli_fail("perplexity", s); }
    th_token *tok = NULL;
    size_t n_tok = 0;
    if (!o.kld && !(tok = tokenize_text(m, o.text, &n_tok))) rc = 1;
    if (!rc) rc = evaluate(&o, m, base, tok, n_tok);
    free(tok);
    th_model_free(m);
    th_kld_base_close(base);
    return rc;
}
