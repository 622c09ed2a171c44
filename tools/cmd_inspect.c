/* cmd_inspect.c — `theseus inspect`: a model file's metadata, tensors (name,
 * type, shape, bytes) and, when the architecture is supported, its summary;
 * with --precision, the precision assignment as a config (th_precision_describe). */
#include "cli.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus inspect -m MODEL [--all] [--precision]\n"
               "  -m, --model FILE   GGUF file\n"
               "  --all              print every array element (default: the first 8)\n"
               "  --precision        print only the file's precision assignment, as a config that\n"
               "                     reproduces it, with bits per weight per tensor class and in total\n");
}

static void print_meta(const th_file *f, int max_items) {
    char small[512];
    printf("metadata (%" PRId64 " keys):\n", th_file_n_meta(f));
    for (int64_t i = 0; i < th_file_n_meta(f); i++) {
        int need = th_file_meta_value(f, i, small, sizeof small, max_items);
        const char *val = small;
        char *big = NULL;
        if (need >= (int)sizeof small && (big = malloc((size_t)need + 1))) {
            th_file_meta_value(f, i, big, (size_t)need + 1, max_items);
            val = big;
        }
        printf("  %-44s %-14s %s\n", th_file_meta_key(f, i), th_file_meta_type(f, i), val);
        free(big);
    }
}

static void print_tensors(const th_file *f) {
    printf("tensors (%" PRId64 "):\n", th_file_n_tensors(f));
    uint64_t total = 0;
    for (int64_t i = 0; i < th_file_n_tensors(f); i++) {
        th_tensor_info t;
        if (th_file_tensor(f, i, &t)) continue;
        char shape[96];
        int w = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t.n_dims; d++)
            w += snprintf(shape + w, sizeof shape - (size_t)w, "%s%" PRIu64, d ? ", " : "", t.ne[d]);
        snprintf(shape + w, sizeof shape - (size_t)w, "]");
        printf("  %-40s %-7s %-22s %12" PRIu64 " bytes\n", t.name, t.type, shape, t.nbytes);
        total += t.nbytes;
    }
    printf("  total %.2f MiB\n", (double)total / (1 << 20));
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int max_items = 8;
    bool precision = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--all")) max_items = 1 << 30;
        else if (!strcmp(argv[i], "--precision")) precision = true;
        else { fprintf(stderr, "theseus inspect: unknown option '%s'\n", argv[i]); usage(stderr); return 2; }
    }
    if (!path) { usage(stderr); return 2; }
    if (precision) {
        char *text = NULL;
        th_status ps = th_precision_describe(path, &text);
        if (ps) return cli_fail("inspect", ps);
        fputs(text, stdout);
        free(text);
        return 0;
    }
    th_file *f;
    th_status s = th_file_open(path, &f);
    if (s) return cli_fail("inspect", s);
    printf("file: %s (GGUF v%u)\n", path, th_file_version(f));
    print_meta(f, max_items);
    print_tensors(f);
    th_file_close(f);
    th_model *m;
    th_model_params mp = cli_model_params();
    if ((s = th_model_load(path, &mp, &m))) {
        printf("model: not loadable: %s\n", th_last_error());
        return 1;
    }
    printf("model: %s | architecture %s | %" PRIu64 " parameters | %d layers, embedding %d, vocab %d, context %d\n",
           th_model_desc(m), th_model_arch_name(m), th_model_n_params(m), th_model_n_layer(m), th_model_n_embd(m),
           th_model_n_vocab(m), th_model_n_ctx_train(m));
    printf("options: %s\n", th_model_arch_options(m));
    th_model_free(m);
    return 0;
}
