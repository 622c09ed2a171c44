/* cmd_imatrix.c — `theseus imatrix`: the importance matrix of a model over a text,
 * written in llama.cpp's imatrix.dat format (what `theseus quantize --imatrix` and
 * llama-quantize --imatrix read), with llama-imatrix's method and running
 * perplexity line. The work is the library's (th_imatrix_compute, src/eval/). */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus imatrix -m MODEL -f TEXT [-o imatrix.dat] [options]\n"
               "  -m, --model FILE      GGUF model\n"
               "  -f, --file TEXT       text (one trailing newline dropped, as llama.cpp)\n"
               "  -o, --output FILE     output (default imatrix.dat)\n"
               "  -c, --ctx-size N      tokens per chunk (default 512)\n"
               "  -b, --batch-size N    tokens per decode (default 2048, at most -c)\n"
               "  -ub, --ubatch-size N  tokens per forward pass (default 512)\n"
               "  --chunks N            at most N chunks (default: all)\n"
               "  --process-output      also collect output.weight\n"
               "  -t, --threads N       threads (default: all cores)\n");
}

static void progress(int32_t chunk, int32_t n, double ppl, void *ud) {
    (void)n; (void)ud;
    printf("[%d]%.4lf,", chunk, ppl);
    fflush(stdout);
}

int cmd_imatrix(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *out = "imatrix.dat";
    th_imatrix_params ip = th_imatrix_default_params();
    long v, threads = 0;
    const char *c = "imatrix";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && val) { model = val; i++; }
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && val) { text = val; i++; }
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && val) { out = val; i++; }
        else if ((!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) && val) { if (!cli_int(c, a, val, 3, 1 << 20, &v)) return 2; ip.n_ctx = (int32_t)v; i++; }
        else if ((!strcmp(a, "-b") || !strcmp(a, "--batch-size")) && val) { if (!cli_int(c, a, val, 1, 1 << 20, &v)) return 2; ip.n_batch = (int32_t)v; i++; }
        else if ((!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) && val) { if (!cli_int(c, a, val, 1, 1 << 20, &v)) return 2; ip.n_ubatch = (int32_t)v; i++; }
        else if (!strcmp(a, "--chunks") && val) { if (!cli_int(c, a, val, -1, INT32_MAX, &v)) return 2; ip.n_chunks = (int32_t)v; i++; }
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && val) { if (!cli_int(c, a, val, 1, 1024, &threads)) return 2; i++; }
        else if (!strcmp(a, "--process-output")) ip.process_output = true;
        else { fprintf(stderr, "theseus imatrix: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!model || !text) { usage(stderr); return 2; }
    th_model *m;
    th_model_params mp = cli_model_params();
    th_status s = th_model_load(model, &mp, &m);
    if (s) return cli_fail(c, s);
    size_t len, n_tok = 0;
    char *buf = cli_read_file(text, &len);
    if (!buf) { fprintf(stderr, "theseus imatrix: %s: cannot read\n", text); th_model_free(m); return 1; }
    if (len && buf[len - 1] == '\n') buf[--len] = 0;
    th_token *tok = NULL;
    s = cli_tokenize(m, buf, len, true, false, &tok, &n_tok);
    free(buf);
    if (s) { fprintf(stderr, "theseus imatrix: %s: %s\n", text, th_last_error()); th_model_free(m); return 1; }
    th_context_params cp = th_context_default_params();
    th_imatrix_context_params(&ip, &cp);
    cp.n_threads = (int32_t)threads;
    th_context *ctx = NULL;
    int rc = 0;
    if ((s = th_context_new(m, &cp, &ctx))) rc = cli_fail(c, s);
    if (!rc) {
        fprintf(stderr, "imatrix: %s, %zu tokens, chunks of %d, %u tokens a decode\n", th_model_desc(m), n_tok,
                ip.n_ctx, cp.n_batch);
        ip.progress = progress;
        th_imatrix *im = NULL;
        double ppl = 0, unc = 0;
        s = th_imatrix_compute(m, ctx, tok, n_tok, &ip, &im, &ppl, &unc);
        if (s) {
            const char *msg = th_last_error();
            if (strstr(msg, "the text tokenizes")) fprintf(stderr, "theseus imatrix: %s: %s\n", text, msg);
            else cli_fail(c, s);
            rc = 1;
        } else {
            printf("\nFinal estimate: PPL = %.4lf +/- %.5lf\n", ppl, unc);
            if ((s = th_imatrix_write(im, out, text))) rc = cli_fail(c, s);
            else fprintf(stderr, "imatrix: %d entries over %d chunks written to %s\n", th_imatrix_n_entries(im),
                         th_imatrix_n_chunks(im), out);
        }
        th_imatrix_free(im);
    }
    th_context_free(ctx);
    free(tok);
    th_model_free(m);
    return rc;
}
