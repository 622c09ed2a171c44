/* cmd_logits.c — `theseus logits`: runs a prompt through the model in one batch
 * (or chunks of --batch) and writes the logits of every position as THLG:
 * u32 magic "THLG", u32 version 1, u32 n_tokens, u32 n_vocab, i32 tokens[], f32 logits[][]
 * (through a temporary file renamed on success). */
#include "cli.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus logits -m MODEL (-p TEXT | --tokens 1,2,3) --out FILE [options]\n"
               "  -m, --model FILE     GGUF model\n"
               "  -p, --prompt TEXT    prompt (BOS added as the model's metadata says)\n"
               "  --tokens LIST        comma-separated token ids instead of a prompt\n"
               "  --out FILE           THLG output file\n"
               "  -t, --threads N      threads (default: all cores)\n"
               "  --batch N            tokens per forward pass (default: the whole prompt)\n"
               "  --kv-type f16|f32    KV cache precision (default f32: exact logits)\n"
               "  --gpu                run the whole model on the GPU (CUDA build)\n"
               "  --gpu-layers SPEC    some layers on the GPU: N (the last N; -ngl N the same) or\n"
               "                       ranges 0-11:cpu,12-23:gpu (docs/hybrid.md)\n");
}

static bool parse_tokens(const char *s, th_token **out, size_t *n) {
    size_t cap = 16, k = 0;
    th_token *t = malloc(cap * sizeof *t);
    while (t && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX) { free(t); return false; }
        if (k == cap) { th_token *nt = realloc(t, (cap *= 2) * sizeof *t); if (!nt) { free(t); return false; } t = nt; }
        t[k++] = (th_token)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) { free(t); return false; }
    }
    *out = t;
    *n = k;
    return t && k > 0;
}

/* Writes to PATH.tmp.PID next to the output and renames it over PATH at the
 * end, so a failed write (full disk) never leaves a truncated THLG behind. */
static int write_thlg(const char *path, const th_token *tok, uint32_t n, uint32_t nv, const float *logits) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        fprintf(stderr, "theseus logits: the output path is too long\n");
        return 1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) { fprintf(stderr, "theseus logits: cannot create %s: %s\n", tmp, strerror(errno)); return 1; }
    uint32_t hdr[4] = { 0x474C4854u, 1, n, nv };
    errno = 0;
    bool ok = fwrite(hdr, 4, 4, f) == 4 && fwrite(tok, 4, n, f) == n &&
              fwrite(logits, sizeof(float), (size_t)n * nv, f) == (size_t)n * nv && fflush(f) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) { ok = false; e = errno; }
    if (ok && rename(tmp, path) != 0) {
        e = errno;
        fprintf(stderr, "theseus logits: cannot rename %s to %s: %s\n", tmp, path, strerror(e));
        unlink(tmp);
        return 1;
    }
    if (!ok) {
        fprintf(stderr, "theseus logits: cannot write %s: %s (nothing written)\n", path, e ? strerror(e) : "short write");
        unlink(tmp);
        return 1;
    }
    return 0;
}

int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *toks = NULL, *outp = NULL;
    long threads = 0, batch = 0;
    int kv_type = TH_KV_F32;
    bool gpu = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) { model = v; i++; }
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && v) { prompt = v; i++; }
        else if (!strcmp(a, "--tokens") && v) { toks = v; i++; }
        else if (!strcmp(a, "--out") && v) { outp = v; i++; }
        else if (!strcmp(a, "--gpu")) gpu = true;
        else if (!strcmp(a, "-ngl") && v) { gpu = atol(v) > 0; i++; }
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) { if (!cli_int("logits", a, v, 1, 1024, &threads)) return 2; i++; }
        else if (!strcmp(a, "--batch") && v) { if (!cli_int("logits", a, v, 1, 65536, &batch)) return 2; i++; }
        else if (!strcmp(a, "--kv-type") && v) {
            if (!strcmp(v, "f16")) kv_type = TH_KV_F16;
            else if (!strcmp(v, "f32")) kv_type = TH_KV_F32;
            else { fprintf(stderr, "theseus logits: --kv-type must be f16 or f32\n"); return 2; }
            i++;
        } else { fprintf(stderr, "theseus logits: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!model || !outp || (!prompt == !toks)) { usage(stderr); return 2; }
    th_model *m;
    th_model_params mp = cli_model_params();
    th_status s = th_model_load(model, &mp, &m);
    if (s) return cli_fail("logits", s);
    th_token *tok = NULL;
    size_t n = 0;
    int rc = 1;
    if (toks) {
        if (!parse_tokens(toks, &tok, &n)) { fprintf(stderr, "theseus logits: bad --tokens list\n"); th_model_free(m); return 2; }
    } else {
        if ((s = cli_tokenize(m, prompt, strlen(prompt), true, false, &tok, &n))) { th_model_free(m); return cli_fail("logits", s); }
    }
    th_context_params cp = th_context_default_params();
    cp.n_ctx = (uint32_t)n;
    cp.n_batch = (uint32_t)(batch ? TH_MIN_SZ(batch, n) : n);
    cp.n_threads = (int32_t)threads;
    cp.kv_type = kv_type;
    cp.gpu = gpu;
    cp.gpu_layers = cli_gpu_layers();
    th_context *ctx = NULL;
    uint32_t nv = (uint32_t)th_model_n_vocab(m);
    float *all = malloc(n * nv * sizeof(float));
    int8_t *want = malloc(n);
    if (!all || !want) { fprintf(stderr, "theseus logits: out of memory\n"); goto done; }
    memset(want, 1, n);
    if ((s = th_context_new(m, &cp, &ctx))) { cli_fail("logits", s); goto done; }
    for (size_t i0 = 0; i0 < n; i0 += cp.n_batch) {
        int32_t nb = (int32_t)TH_MIN_SZ(cp.n_batch, n - i0);
        th_batch b = { .n_tokens = nb, .token = tok + i0, .logits = want };
        if ((s = th_decode(ctx, &b))) { cli_fail("logits", s); goto done; }
        for (int32_t j = 0; j < nb; j++) memcpy(all + (i0 + (size_t)j) * nv, th_get_logits(ctx, j), nv * sizeof(float));
    }
    rc = write_thlg(outp, tok, (uint32_t)n, nv, all);
done:
    th_context_free(ctx);
    free(all);
    free(want);
    free(tok);
    th_model_free(m);
    return rc;
}
