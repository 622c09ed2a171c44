/* cli_util.c — small helpers shared by the CLI subcommands: error printing,
 * number parsing with range checks, reading files and stdin, the options every
 * command takes (--no-mmap, --no-repack, --no-amx, --thp), tokenizing into a buffer of the right size. */
#include "cli.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *cmd, th_status s) {
    const char *msg = th_last_error();
    fprintf(stderr, "theseus %s: %s\n", cmd, msg && *msg ? msg : th_status_name(s));
    return 1;
}

bool cli_int(const char *cmd, const char *flag, const char *val, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || errno || *end || end == val || v < lo || v > hi) {
        fprintf(stderr, "theseus %s: %s needs an integer in [%ld, %ld], got '%s'\n", cmd, flag, lo, hi,
                val ? val : "(nothing)");
        return false;
    }
    *out = v;
    return true;
}

bool cli_float(const char *cmd, const char *flag, const char *val, double *out) {
    char *end;
    errno = 0;
    double v = val ? strtod(val, &end) : 0;
    if (!val || errno || *end || end == val || v != v) {
        fprintf(stderr, "theseus %s: %s needs a number, got '%s'\n", cmd, flag, val ? val : "(nothing)");
        return false;
    }
    *out = v;
    return true;
}

static char *read_stream(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) return NULL;
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) { free(buf); return NULL; }
        buf = nb;
        cap *= 2;
    }
    if (ferror(f)) { free(buf); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = read_stream(f, len);
    fclose(f);
    return b;
}

char *cli_read_stdin(size_t *len) { return read_stream(stdin, len); }

static bool no_mmap, no_repack, no_amx, thp;

static const char *precision_path, *source_path, *hf_type;
static const char *gpu_layers, *gpu_layers_flag = "--gpu-layers";

/* Does a --gpu-layers spec put any layer on the GPU? (a count > 0, or a ":gpu" range) */
static bool spec_wants_gpu(const char *spec) {
    bool digits = *spec != 0;
    for (const char *p = spec; *p; p++) digits &= *p >= '0' && *p <= '9';
    return digits ? strspn(spec, "0") != strlen(spec) : strstr(spec, "gpu") != NULL;
}

/* run, chat, serve, bench, logits and perplexity place layers (--gpu-layers, -ngl). */
static bool places_layers(const char *cmd) {
    const char *cmds[] = { "run", "chat", "serve", "bench", "logits", "perplexity" };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i])) return true;
    return false;
}

const char *cli_gpu_layers(void) { return gpu_layers; }

void cli_common_options(int *argc, char **argv) {
    int k = 1;
    /* inspect's --precision is a flag of its own (print the assignment) */
    bool overrides = *argc < 2 || strcmp(argv[1], "inspect");
    /* quantize and convert read --type themselves (their output's type) */
    bool load_type = overrides && (*argc < 2 || (strcmp(argv[1], "quantize") && strcmp(argv[1], "convert")));
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(argv[i], "--no-mmap")) { no_mmap = true; continue; }
        if (!strcmp(argv[i], "--no-repack")) { no_repack = true; continue; }
        if (!strcmp(argv[i], "--no-amx")) { no_amx = true; continue; }
        if (!strcmp(argv[i], "--thp")) { thp = true; continue; }
        if (overrides && !strcmp(argv[i], "--precision") && i + 1 < *argc) { precision_path = argv[++i]; continue; }
        if (overrides && !strcmp(argv[i], "--source") && i + 1 < *argc) { source_path = argv[++i]; continue; }
        if (load_type && !strcmp(argv[i], "--type") && i + 1 < *argc) { hf_type = argv[++i]; continue; }
        if (*argc >= 2 && places_layers(argv[1]) && (!strcmp(argv[i], "--gpu-layers") || !strcmp(argv[i], "-ngl")) &&
            i + 1 < *argc) {
            gpu_layers_flag = argv[i];
            gpu_layers = argv[++i];
            continue;
        }
        argv[k++] = argv[i];
    }
    argv[k] = NULL;
    *argc = k;
    char desc[256];
    if (gpu_layers && spec_wants_gpu(gpu_layers) && th_gpu_available(desc, sizeof desc)) {
        fprintf(stderr, "theseus %s: %s %s puts layers on the GPU: %s\n", argv[1], gpu_layers_flag, gpu_layers, th_last_error());
        exit(2);
    }
}

th_model_params cli_model_params(void) {
    th_model_params p = th_model_default_params();
    p.use_mmap = !no_mmap;
    p.no_repack = no_repack;
    p.no_amx = no_amx;
    p.thp = thp;
    p.precision_path = precision_path;
    p.source_path = source_path;
    p.hf_type = hf_type;
    return p;
}

th_status cli_tokenize(const th_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                       th_token **out, size_t *n) {
    size_t cap = len + 8;
    *out = NULL;
    for (int tries = 0; tries < 2; tries++) {
        th_token *t = malloc((cap ? cap : 1) * sizeof *t);
        if (!t) return th_set_error(TH_ERR_NOMEM, "out of memory for %zu token ids", cap);
        th_status s = th_tokenize(m, text, len, add_special, parse_special, t, cap, n);
        if (s == TH_OK) { *out = t; return TH_OK; }
        free(t);
        if (s != TH_ERR_CAPACITY) return s;
        cap = *n;   /* the size the tokenizer needs */
    }
    return th_set_error(TH_ERR_INTERNAL, "tokenize: the token count changed between two calls");
}
