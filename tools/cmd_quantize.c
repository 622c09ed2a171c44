/* cmd_quantize.c — `theseus quantize`: rewrite a GGUF with its weights in another
 * type or llama.cpp mix, or as a precision config says (th_quantize_file), printing one progress line per tensor
 * on stderr and a size summary at the end. */
#include "cli.h"
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus quantize -m IN.gguf -o OUT.gguf (--type TYPE | --config FILE | both) [--imatrix FILE] [-t N] [--pure] [--qn-rounding feedback|plain] [-q]\n"
               "  -m, --model FILE    input GGUF (F32, F16, BF16 or already quantized weights)\n"
               "  -o, --out FILE      output GGUF (written to FILE.tmp, then renamed)\n"
               "  --type TYPE         a llama.cpp mix: %s\n"
               "                      (Q3_K, Q4_K, Q5_K mean the _M mixes, as in llama-quantize)\n"
               "  --config FILE       a precision config (docs/precision.md): its rules set the types,\n"
               "                      on top of --type's mix if given, else of the input's types\n"
               "  --imatrix FILE      importance matrix (llama-imatrix's imatrix.dat, or theseus imatrix's):\n"
               "                      used where llama-quantize --imatrix uses it, with the same bytes\n"
               "  -t, --threads N     worker threads (default: all cores)\n"
               "  --pure              every weight gets the mix's base type (no per-tensor bumps;\n"
               "                      for qN: the output / tied embedding matrix gets qN too)\n"
               "  --qn-rounding R     qN encoder: feedback (default: error feedback + scale search) or\n"
               "                      plain (nearest level at the amax scale; docs/qn.md compares them)\n"
               "  -q, --quiet         no progress lines\n",
            th_quantize_type_names());
}

static void progress_line(const th_quantize_progress *p, void *user) {
    (void)user;
    char shape[96];
    int w = snprintf(shape, sizeof shape, "[");
    for (uint32_t d = 0; d < p->n_dims && d < 4; d++)
        w += snprintf(shape + w, sizeof shape - (size_t)w, "%s%" PRIu64, d ? ", " : "", p->ne[d]);
    snprintf(shape + w, sizeof shape - (size_t)w, "]");
    bool same = !strcmp(p->from_type, p->to_type);
    bool from_float = !strcmp(p->from_type, "F32") || !strcmp(p->from_type, "F16") || !strcmp(p->from_type, "BF16");
    const char *note = same ? "  (copied)" : from_float ? "" : "  (requantized: error adds up)";
    const char *imat = p->imatrix < 0 ? "  (no imatrix entry: quantized without)" : "";
    fprintf(stderr, "[%*d/%*d] %-36s %6s -> %-6s %s%s%s\n", 3, p->index, 3, p->count, p->name, p->from_type,
            p->to_type, shape, note, imat);
}

static double file_mib(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (double)st.st_size / (1 << 20) : 0.0;
}

int cmd_quantize(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    bool quiet = false;
    th_quantize_params p = th_quantize_default_params();
    p.type = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) in = argv[++i];
        else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && has_val) out = argv[++i];
        else if (!strcmp(a, "--type") && has_val) p.type = argv[++i];
        else if (!strcmp(a, "--config") && has_val) p.config = argv[++i];
        else if (!strcmp(a, "--imatrix") && has_val) p.imatrix = argv[++i];
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has_val) {
            long n;
            if (!cli_int("quantize", a, argv[++i], 1, 1024, &n)) return 2;
            p.n_threads = (int32_t)n;
        } else if (!strcmp(a, "--pure")) p.pure = true;
        else if (!strcmp(a, "--qn-rounding") && has_val) {
            const char *v = argv[++i];
            if (strcmp(v, "plain") && strcmp(v, "feedback")) {
                fprintf(stderr, "theseus quantize: --qn-rounding takes feedback or plain, not '%s'\n", v);
                return 2;
            }
            p.qn_plain_rounding = !strcmp(v, "plain");
        }
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else { fprintf(stderr, "theseus quantize: unknown option or missing value '%s'\n", a); usage(stderr); return 2; }
    }
    if (!in || !out || (!p.type && !p.config)) {
        fprintf(stderr, "theseus quantize: -m, -o and --type or --config are required\n");
        usage(stderr);
        return 2;
    }
    p.progress = quiet ? NULL : progress_line;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    th_status s = th_quantize_file(in, out, &p);
    if (s) return cli_fail("quantize", s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    fprintf(stderr, "theseus quantize: %s (%.2f MiB) -> %s (%.2f MiB, %s%s%s) in %.2f s\n", in, file_mib(in), out,
            file_mib(out), p.config ? p.config : p.type, p.imatrix ? ", imatrix " : "", p.imatrix ? p.imatrix : "", secs);
    return 0;
}
