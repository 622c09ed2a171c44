/* cli_spec.c — the speculative-decoding options that run, chat, bench and serve
 * share (--spec ngram[:N], --draft MODEL, --draft-layers SPEC, --draft-max K,
 * --draft-min K, --draft-fixed, --draft-cpu): parsing, the usage lines, loading
 * the draft model into th_spec_params, and the one-line acceptance summary. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

void cli_spec_usage(FILE *f) {
    fprintf(f, "  --spec ngram[:N]       speculative decoding by n-gram lookup in the text so far\n"
               "                         (N: the longest n-gram looked up, default 3)\n"
               "  --draft MODEL          speculative decoding with a draft model (same vocabulary)\n"
               "  --draft-layers SPEC    speculative decoding by the model's own layers SPEC (e.g. 0-14)\n"
               "                         and its output head\n"
               "  --draft-max K          most draft tokens a step (default 8)\n"
               "  --draft-min K          shortest proposal verified (default 1)\n"
               "  --draft-fixed          always draft --draft-max tokens (no adaptive length)\n"
               "  --draft-cpu            with --gpu: run the draft model on the CPU\n");
}

static int kind_clash(const char *cmd, const cli_spec *o, const char *a) {
    if (o->p.kind == TH_SPEC_NONE) return 0;
    fprintf(stderr, "theseus %s: %s: only one of --spec, --draft and --draft-layers\n", cmd, a);
    return -1;
}

int cli_spec_arg(const char *cmd, const char *a, const char *v, cli_spec *o) {
    long l;
    if (!strcmp(a, "--draft-fixed")) { o->p.fixed = true; return 1; }
    if (!strcmp(a, "--draft-cpu")) { o->p.draft_cpu = true; return 1; }
    bool mine = !strcmp(a, "--spec") || !strcmp(a, "--draft") || !strcmp(a, "--draft-layers") ||
                !strcmp(a, "--draft-max") || !strcmp(a, "--draft-min");
    if (!mine) return 0;
    if (!v) { fprintf(stderr, "theseus %s: %s needs a value\n", cmd, a); return -1; }
    if (!strcmp(a, "--spec")) {
        if (kind_clash(cmd, o, a)) return -1;
        if (strncmp(v, "ngram", 5) || (v[5] && v[5] != ':')) {
            fprintf(stderr, "theseus %s: --spec takes ngram or ngram:N, got '%s'\n", cmd, v);
            return -1;
        }
        if (v[5] == ':') {
            if (!cli_int(cmd, "--spec ngram:N", v + 6, 1, 64, &l)) return -1;
            o->p.ngram = (int32_t)l;
        }
        o->p.kind = TH_SPEC_NGRAM;
    } else if (!strcmp(a, "--draft")) {
        if (kind_clash(cmd, o, a)) return -1;
        o->p.kind = TH_SPEC_DRAFT;
        o->draft_path = v;
    } else if (!strcmp(a, "--draft-layers")) {
        if (kind_clash(cmd, o, a)) return -1;
        o->p.kind = TH_SPEC_LAYERS;
        o->p.layers = v;
    } else {
        if (!cli_int(cmd, a, v, 1, 64, &l)) return -1;
        if (!strcmp(a, "--draft-max")) o->p.draft_max = (int32_t)l;
        else o->p.draft_min = (int32_t)l;
    }
    return 2;
}

th_status cli_spec_open(cli_spec *o, bool verbose) {
    if (o->p.kind != TH_SPEC_DRAFT || o->p.draft) return TH_OK;
    th_model_params mp = cli_model_params();
    mp.verbose = verbose;
    mp.hf_type = NULL;   /* --type is the main model's (a directory quantized at load) */
    th_status s = th_model_load(o->draft_path, &mp, &o->p.draft);
    if (s) return th_set_error(s, "draft model %s: %s", o->draft_path, th_last_error());
    return TH_OK;
}

void cli_spec_close(cli_spec *o) {
    th_model_free(o->p.draft);
    o->p.draft = NULL;
}

void cli_spec_print(FILE *f, int32_t drafted, int32_t accepted, int32_t generated, int32_t rounds) {
    if (drafted <= 0) return;
    fprintf(f, "[speculative: %d drafted, %d accepted (%.1f %%)", drafted, accepted, 100.0 * accepted / drafted);
    if (rounds > 0) fprintf(f, ", %.2f tokens a verification step", (double)generated / rounds);
    fprintf(f, "]\n");
}
