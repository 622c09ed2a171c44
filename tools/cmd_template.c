/* cmd_template.c — `theseus template`: render a chat template (from a model's
 * tokenizer.chat_template metadata or a .jinja file) with the messages (and
 * optional tools) of a JSON file, and print the prompt byte-exact. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus template (-m MODEL | --template FILE.jinja) --messages FILE.json\n"
               "                        [--add-generation-prompt] [--bos TEXT] [--eos TEXT]\n"
               "FILE.json holds {\"messages\": [...], \"tools\": [...]?}; other keys become template variables.\n"
               "With -m the template and BOS/EOS texts come from the model; --bos/--eos override them.\n");
}

/* The text of a special token (BOS/EOS) as the template sees it; NULL if none. */
static char *token_text(const th_model *model, th_token t) {
    if (t < 0) return NULL;
    int32_t n = th_token_to_piece(model, t, NULL, 0, true);
    if (n == INT32_MIN) return NULL;
    int32_t cap = n < 0 ? -n : n;
    char *buf = malloc((size_t)cap + 1);
    if (!buf) return NULL;
    n = th_token_to_piece(model, t, buf, cap, true);
    if (n < 0) { free(buf); return NULL; }
    buf[n] = 0;
    return buf;
}

int cmd_template(int argc, char **argv) {
    const char *model_path = NULL, *tmpl_path = NULL, *msg_path = NULL, *bos = NULL, *eos = NULL;
    bool gen = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--add-generation-prompt")) gen = true;
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) model_path = argv[++i];
        else if (!strcmp(a, "--template") && has_val) tmpl_path = argv[++i];
        else if (!strcmp(a, "--messages") && has_val) msg_path = argv[++i];
        else if (!strcmp(a, "--bos") && has_val) bos = argv[++i];
        else if (!strcmp(a, "--eos") && has_val) eos = argv[++i];
        else {
            fprintf(stderr, "theseus template: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if ((!model_path && !tmpl_path) || !msg_path) { usage(stderr); return 2; }

    size_t len;
    char *messages = cli_read_file(msg_path, &len);
    if (!messages) { fprintf(stderr, "theseus template: cannot read %s\n", msg_path); return 1; }
    char *tmpl = NULL, *bos_text = NULL, *eos_text = NULL;
    th_model *model = NULL;
    int rc = 1;
    if (tmpl_path) {
        tmpl = cli_read_file(tmpl_path, &len);
        if (!tmpl) { fprintf(stderr, "theseus template: cannot read %s\n", tmpl_path); goto done; }
        if (strlen(tmpl) != len) { fprintf(stderr, "theseus template: %s contains a NUL byte\n", tmpl_path); goto done; }
    }
    if (model_path) {
        th_model_params mp = cli_model_params();
        mp.vocab_only = true;
        th_status s = th_model_load(model_path, &mp, &model);
        if (s != TH_OK) { rc = cli_fail("template", s); goto done; }
        if (!tmpl) {
            const char *t = th_model_meta_str(model, "tokenizer.chat_template");
            if (!t) { fprintf(stderr, "theseus template: %s has no tokenizer.chat_template\n", model_path); goto done; }
            tmpl = strdup(t);
            if (!tmpl) goto done;
        }
        if (!bos) bos = bos_text = token_text(model, th_token_bos(model));
        if (!eos) eos = eos_text = token_text(model, th_token_eos(model));
    }
    th_chat_opts opts = { .add_generation_prompt = gen, .bos_token = bos, .eos_token = eos, .max_output = 0 };
    char *out = NULL;
    th_status s = th_chat_render(tmpl, messages, &opts, &out);
    if (s != TH_OK) {
        fprintf(stderr, "%s\n", th_last_error());
        goto done;
    }
    size_t n = strlen(out);
    rc = fwrite(out, 1, n, stdout) == n && fflush(stdout) == 0 ? 0 : 1;
    free(out);
done:
    th_model_free(model);
    free(messages);
    free(tmpl);
    free(bos_text);
    free(eos_text);
    return rc;
}
