/* cmd_search.c — `theseus search`: the smallest precision assignment of a
 * high-precision model whose output stays within a KLD or perplexity gate
 * (th_search_run, src/search/): BEST.precision, the frontier table and PNG, the
 * summary of what stayed precise, progress with ETA, --resume from the log, and
 * with --write-gguf the quantized file itself (th_quantize_file with the config). */
#include "cli.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: theseus search -m SOURCE.gguf -f TEXT (--max-kld X | --max-ppl-increase P%%) -o BEST.precision [options]\n"
            "  -m, --model FILE        the high-precision source (F16/BF16/F32, or the best file you have)\n"
            "  -f, --file TEXT         evaluation text (one trailing newline dropped, as llama.cpp)\n"
            "  --max-kld X             gate: mean KL divergence over the gate chunks at most X\n"
            "  --max-ppl-increase P%%   gate: PPL(Q)/PPL(base) - 1 at most P percent\n"
            "  --max-flips N           MoE: also gate on router flips (a unit that flips more stays precise)\n"
            "  --budget BPW            stop descending at this many bits per weight\n"
            "  --types LIST            candidates: comma-separated types, 'ggml' (GGML types only: a GGUF\n"
            "                          llama.cpp also runs; no per-expert units) or 'default'\n"
            "  --no-experts            one unit a 3-D expert tensor instead of one a routed expert\n"
            "  --no-layer-resume       sensitivity runs evaluate every layer (default: a unit of layer L\n"
            "                          starts from the source's saved hidden states at layer L; CPU only)\n"
            "  -c, --ctx-size N        gate chunk size (default 512)\n"
            "  --chunks N              gate chunks (default: all the text)\n"
            "  --calib-ctx N           calibration chunk size (default 256)\n"
            "  --calib-chunks N        calibration chunks (default 1)\n"
            "  --max-evals N           gate evaluations of the descent at most (default 40)\n"
            "  -o, --out FILE          BEST.precision (precision config, docs/precision.md)\n"
            "  --log FILE              the jsonl log (default OUT.jsonl); reference base files beside it\n"
            "  --resume FILE           reuse the finished evaluations of a log\n"
            "  --table FILE            the frontier table (markdown; default OUT.frontier.md)\n"
            "  --plot FILE             the frontier plot (default OUT.frontier.png)\n"
            "  --write-gguf FILE       also write the source quantized with BEST.precision\n"
            "  -t, --threads N         threads (default: all cores)\n"
            "  --gpu                   evaluate on the GPU (CUDA build)\n");
}

typedef struct opts {
    th_search_params p;
    const char *model, *text, *out, *log, *table, *plot, *gguf;
    bool tty;
} opts;

static int parse(int argc, char **argv, opts *o) {
    const char *c = "search";
    long v_l;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return -1; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) { o->model = v; i++; }
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && v) { o->text = v; i++; }
        else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && v) { o->out = v; i++; }
        else if (!strcmp(a, "--log") && v) { o->log = v; i++; }
        else if (!strcmp(a, "--resume") && v) { o->p.resume_path = v; i++; }
        else if (!strcmp(a, "--table") && v) { o->table = v; i++; }
        else if (!strcmp(a, "--plot") && v) { o->plot = v; i++; }
        else if (!strcmp(a, "--write-gguf") && v) { o->gguf = v; i++; }
        else if (!strcmp(a, "--types") && v) {
            o->p.types = v;
            if (!strcmp(v, "ggml")) o->p.per_expert = false;
            i++;
        } else if (!strcmp(a, "--no-experts")) o->p.per_expert = false;
        else if (!strcmp(a, "--no-layer-resume")) o->p.no_layer_resume = true;
        else if (!strcmp(a, "--gpu")) o->p.gpu = true;
        else if (!strcmp(a, "--max-kld") && v) { if (!cli_float(c, a, v, &o->p.max_kld)) return 2; i++; }
        else if (!strcmp(a, "--max-ppl-increase") && v) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            size_t n = strlen(buf);
            if (n && buf[n - 1] == '%') buf[n - 1] = 0;
            if (!cli_float(c, a, buf, &o->p.max_ppl_increase)) return 2;
            o->p.max_ppl_increase /= 100.0;
            i++;
        } else if (!strcmp(a, "--budget") && v) { if (!cli_float(c, a, v, &o->p.budget_bpw)) return 2; i++; }
        else if (!strcmp(a, "--max-flips") && v) { if (!cli_int(c, a, v, -1, INT32_MAX, &v_l)) return 2; o->p.max_flips = (int32_t)v_l; i++; }
        else if ((!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) && v) { if (!cli_int(c, a, v, 8, 1 << 20, &v_l)) return 2; o->p.n_ctx = (int32_t)v_l; i++; }
        else if (!strcmp(a, "--chunks") && v) { if (!cli_int(c, a, v, -1, INT32_MAX, &v_l)) return 2; o->p.n_chunks = (int32_t)v_l; i++; }
        else if (!strcmp(a, "--calib-ctx") && v) { if (!cli_int(c, a, v, 8, 1 << 20, &v_l)) return 2; o->p.calib_ctx = (int32_t)v_l; i++; }
        else if (!strcmp(a, "--calib-chunks") && v) { if (!cli_int(c, a, v, 1, INT32_MAX, &v_l)) return 2; o->p.calib_chunks = (int32_t)v_l; i++; }
        else if (!strcmp(a, "--max-evals") && v) { if (!cli_int(c, a, v, 0, 100000, &v_l)) return 2; o->p.max_gate_evals = (int32_t)v_l; i++; }
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) { if (!cli_int(c, a, v, 1, 1024, &v_l)) return 2; o->p.n_threads = (int32_t)v_l; i++; }
        else { fprintf(stderr, "theseus search: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!o->model || !o->text || !o->out) { usage(stderr); return 2; }
    if ((o->p.max_kld > 0) == (o->p.max_ppl_increase > 0)) {
        fprintf(stderr, "theseus search: give exactly one of --max-kld X and --max-ppl-increase P%%\n");
        return 2;
    }
    return 0;
}

static void fmt_time(char *buf, size_t cap, double s) {
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%d:%02d", t / 60, t % 60);
}

/* A progress line: on a terminal rewritten in place; otherwise one a line (sensitivity: every 25th). */
static void on_progress(const th_search_progress *p, void *ud) {
    const opts *o = ud;
    if (!o->tty && !strcmp(p->phase, "sensitivity") && p->done % 25 && p->done != p->total) return;
    char el[32], eta[32], best[64] = "none yet";
    fmt_time(el, sizeof el, p->seconds);
    fmt_time(eta, sizeof eta, p->eta_seconds);
    if (p->best_bpw > 0) snprintf(best, sizeof best, "%.4f bpw at %.6f", p->best_bpw, p->best_gate);
    fprintf(stderr, "%ssearch: %s %lld/%lld, %s elapsed, phase ETA %s, best %s, %s%s", o->tty ? "\r\033[K" : "",
            p->phase, (long long)p->done, (long long)p->total, el, eta, best, p->what ? p->what : "", o->tty ? "" : "\n");
    fflush(stderr);
}

static th_token *tokenize_text(th_model *m, const char *path, size_t *n_out) {
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) { fprintf(stderr, "theseus search: %s: cannot read\n", path); return NULL; }
    if (len && text[len - 1] == '\n') text[--len] = 0;
    th_token *t = NULL;
    th_status s = cli_tokenize(m, text, len, true, false, &t, n_out);
    free(text);
    if (s) { fprintf(stderr, "theseus search: %s: %s\n", path, th_last_error()); return NULL; }
    return t;
}

static char *with_suffix(const char *base, const char *suffix) {
    size_t n = strlen(base) + strlen(suffix) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s", base, suffix);
    return p;
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static int finish(opts *o, th_search_result *r) {
    char *tp = o->table ? NULL : with_suffix(o->out, ".frontier.md"), *pp = o->plot ? NULL : with_suffix(o->out, ".frontier.png");
    const char *table = o->table ? o->table : tp, *plot = o->plot ? o->plot : pp;
    int rc = 0;
    if (!write_text(o->out, r->config)) { fprintf(stderr, "theseus search: cannot write %s\n", o->out); rc = 1; }
    if (!rc && table && !write_text(table, r->table)) { fprintf(stderr, "theseus search: cannot write %s\n", table); rc = 1; }
    th_status s;
    if (!rc && plot && (s = th_search_plot(r, plot))) rc = cli_fail("search", s);
    if (!rc) {
        printf("%s\n%s\n", r->table, r->summary);
        printf("wrote %s, %s, %s; %.1f s\n", o->out, table, plot, r->seconds);
    }
    if (!rc && o->gguf) {
        th_quantize_params qp = th_quantize_default_params();
        qp.type = NULL;
        qp.config = o->out;
        qp.n_threads = o->p.n_threads;
        if ((s = th_quantize_file(o->model, o->gguf, &qp))) rc = cli_fail("search", s);
        else printf("wrote %s (the source quantized with %s)\n", o->gguf, o->out);
    }
    free(tp);
    free(pp);
    return rc;
}

int cmd_search(int argc, char **argv) {
    opts o = { .p = th_search_default_params() };
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    o.tty = isatty(2);
    char *log = o.log ? NULL : with_suffix(o.out, ".jsonl");
    o.p.log_path = o.log ? o.log : log;
    o.p.source_path = o.model;
    o.p.progress = on_progress;
    o.p.ud = &o;
    th_model *m;
    th_model_params mp = cli_model_params();
    th_status s = th_model_load(o.model, &mp, &m);
    if (s) { free(log); return cli_fail("search", s); }
    size_t n_tok = 0;
    th_token *tok = tokenize_text(m, o.text, &n_tok);
    if (!tok) rc = 1;
    th_search_result r;
    if (!rc && (s = th_search_run(m, tok, n_tok, &o.p, &r))) {
        if (o.tty) fprintf(stderr, "\n");
        rc = cli_fail("search", s);
    } else if (!rc) {
        if (o.tty) fprintf(stderr, "\n");
        rc = finish(&o, &r);
        if (!rc && r.best.bytes == r.source_bytes)
            fprintf(stderr, "theseus search: no assignment smaller than the source meets the gate; %s keeps the "
                            "source's types\n", o.out);
        th_search_result_free(&r);
    }
    free(tok);
    free(log);
    th_model_free(m);
    return rc;
}
