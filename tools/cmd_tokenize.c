/* cmd_tokenize.c — `theseus tokenize -m MODEL [--no-bos] [--special] [--ids|--pieces]`:
 * reads all of stdin (byte-exact, nothing stripped) and prints its token ids on
 * one line, each preceded by a space (the layout of llama.cpp's .out files) (--pieces: one "id<TAB>piece" line per token, the
 * piece with control tokens shown). Uses only the public API. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus tokenize -m MODEL [--no-bos] [--special] [--ids | --pieces] < TEXT\n"
               "  --no-bos   add no BOS/EOS (or other special tokens the vocab adds)\n"
               "  --special  parse control-token text such as <|im_start|> (llama.cpp parse_special)\n"
               "  --ids      print the ids on one line, space-separated (default)\n"
               "  --pieces   print one line per token: id, a tab, the token's text\n");
}

static void print_pieces(const th_model *m, const th_token *ids, size_t n) {
    char small[256];
    for (size_t i = 0; i < n; i++) {
        char *buf = small;
        int32_t r = th_token_to_piece(m, ids[i], small, (int32_t)sizeof small, true);
        if (r < 0 && r != INT32_MIN) {
            buf = malloc((size_t)-r);
            r = buf ? th_token_to_piece(m, ids[i], buf, -r, true) : INT32_MIN;
        }
        printf("%d\t", ids[i]);
        if (r > 0) fwrite(buf, 1, (size_t)r, stdout);
        putchar('\n');
        if (buf != small) free(buf);
    }
}

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL;
    bool add_special = true, parse_special = false, pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(a, "--no-bos")) add_special = false;
        else if (!strcmp(a, "--special")) parse_special = true;
        else if (!strcmp(a, "--ids")) pieces = false;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else { fprintf(stderr, "theseus tokenize: unknown option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!path) { fprintf(stderr, "theseus tokenize: -m MODEL is required\n"); usage(stderr); return 2; }

    size_t len = 0;
    char *text = cli_read_stdin(&len);
    if (!text) { fprintf(stderr, "theseus tokenize: cannot read stdin\n"); return 1; }

    th_model_params mp = cli_model_params();
    mp.vocab_only = true;
    th_model *model = NULL;
    th_status st = th_model_load(path, &mp, &model);
    if (st != TH_OK) { free(text); return cli_fail("tokenize", st); }

    size_t cap = len + 16, n = 0;
    th_token *ids = malloc(cap * sizeof *ids);
    st = ids ? th_tokenize(model, text, len, add_special, parse_special, ids, cap, &n) : TH_ERR_NOMEM;
    if (st == TH_ERR_CAPACITY) {                  /* cannot happen for the vocabs we know; be safe */
        th_token *more = realloc(ids, n * sizeof *ids);
        if (more) { ids = more; cap = n; st = th_tokenize(model, text, len, add_special, parse_special, ids, cap, &n); }
    }
    int rc = 0;
    if (st != TH_OK) rc = cli_fail("tokenize", st);
    else if (pieces) print_pieces(model, ids, n);
    else {
        for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);   /* as llama.cpp's .out files */
        putchar('\n');
    }
    free(ids);
    free(text);
    th_model_free(model);
    return rc;
}
