/* cmd_convert.c — `theseus convert HF_DIR -o OUT.gguf [--type T]`: a Hugging Face
 * model directory written as a GGUF with llama.cpp's names, keys and layout
 * (th_hf_convert); with --type, the weights then quantized (th_quantize_file)
 * from a temporary F32/F16/BF16 file next to OUT. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus convert HF_DIR -o OUT.gguf [--type TYPE] [-t N]\n"
               "  HF_DIR              config.json + model.safetensors (or shards + index) + tokenizer.json\n"
               "  -o, --out FILE      output GGUF\n"
               "  --type TYPE         quantize after converting: %s\n"
               "  -t, --threads N     quantization threads (default: all cores)\n",
            th_quantize_type_names());
}

int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *type = NULL;
    long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && has_val) out = argv[++i];
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) in = argv[++i];
        else if (!strcmp(a, "--type") && has_val) type = argv[++i];
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has_val) {
            if (!cli_int("convert", a, argv[++i], 1, 1024, &threads)) return 2;
        } else if (a[0] != '-' && !in) in = a;
        else { fprintf(stderr, "theseus convert: unknown option or missing value '%s'\n", a); usage(stderr); return 2; }
    }
    if (!in || !out) { usage(stderr); return 2; }
    if (!type) {
        th_status s = th_hf_convert(in, out);
        if (s) return cli_fail("convert", s);
        fprintf(stderr, "theseus convert: wrote %s\n", out);
        return 0;
    }
    size_t n = strlen(out) + 16;
    char *tmp = malloc(n);
    if (!tmp) return 1;
    snprintf(tmp, n, "%s.f.tmp", out);
    th_status s = th_hf_convert(in, tmp);
    if (!s) {
        th_quantize_params p = th_quantize_default_params();
        p.type = type;
        p.n_threads = (int32_t)threads;
        s = th_quantize_file(tmp, out, &p);
    }
    unlink(tmp);
    free(tmp);
    if (s) return cli_fail("convert", s);
    fprintf(stderr, "theseus convert: wrote %s (%s)\n", out, type);
    return 0;
}
