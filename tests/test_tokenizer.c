/* test_tokenizer.c — tokenizer tests against real peers: llama.cpp's vocab
 * fixtures (ids made by the reference tokenizers), the tiny/arch prompt ids from
 * llama.cpp, and properties that need no peer (round trips, the streaming UTF-8
 * guard, the token_to_piece contract, unknown pre-tokenizers, invalid UTF-8). */
#include "check.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_internal.h"
#include <stdint.h>

static th_vocab *load_vocab(const char *path, gguf_file **gf) {
    th_vocab *v = NULL;
    *gf = NULL;
    if (gguf_open(path, gf) != TH_OK) return NULL;
    if (th_vocab_load(*gf, &v) != TH_OK) {
        fprintf(stderr, "  %s: %s\n", path, th_last_error());
        gguf_close(*gf);
        *gf = NULL;
        return NULL;
    }
    return v;
}

static th_token *encode(const th_vocab *v, const char *s, size_t n, bool add_special, bool parse_special, size_t *count) {
    size_t cap = n + 16;
    th_token *ids = malloc(cap * sizeof *ids);
    th_status st = th_vocab_tokenize(v, s, n, add_special, parse_special, ids, cap, count);
    if (st != TH_OK) { fprintf(stderr, "  tokenize: %s\n", th_last_error()); free(ids); return NULL; }
    return ids;
}

#define SEP "\n__ggml_vocab_test__\n"

/* Every case of NAME.inp must give the ids of the matching line of NAME.out;
 * for byte-level vocabs decode(encode(x)) must also give x back. */
static int check_fixture(const char *name, bool roundtrip) {
    char p[256];
    snprintf(p, sizeof p, "vocab/%s.gguf", name);
    gguf_file *gf;
    th_vocab *v = load_vocab(fixture(p), &gf);
    if (!v) return -1;
    size_t il, ol;
    snprintf(p, sizeof p, "vocab/%s.gguf.inp", name);
    char *inp = check_read_file(fixture(p), &il);
    snprintf(p, sizeof p, "vocab/%s.gguf.out", name);
    char *outp = check_read_file(fixture(p), &ol);
    int bad = 0, cases = 0;
    char *ip = inp, *op = outp;
    while (ip && op && *op) {
        char *end = strstr(ip, SEP);
        if (!end) break;
        char *eol = strchr(op, '\n');
        if (!eol) break;
        *eol = 0;
        size_t n;
        th_token *ids = encode(v, ip, (size_t)(end - ip), false, false, &n);
        char got[16384];
        size_t g = 0;
        for (size_t i = 0; ids && i < n && g + 16 < sizeof got; i++) g += (size_t)snprintf(got + g, sizeof got - g, " %d", ids[i]);
        got[g] = 0;
        cases++;
        if (!ids || strcmp(got, op)) {
            if (bad++ < 3) fprintf(stderr, "  %s case %d '%.*s'\n    want:%s\n    got: %s\n", name, cases,
                                   (int)(end - ip), ip, op, got);
        }
        if (ids && roundtrip) {
            char text[8192];
            int64_t tl = th_vocab_detokenize(v, ids, n, text, sizeof text, false);
            if (tl != (int64_t)(end - ip) || memcmp(text, ip, (size_t)tl)) {
                if (bad++ < 3) fprintf(stderr, "  %s case %d: decode(encode(x)) != x\n", name, cases);
            }
        }
        free(ids);
        ip = end + strlen(SEP);
        op = eol + 1;
    }
    CHECK(cases == 46, "%s: %d cases read", name, cases);
    free(inp); free(outp);
    th_vocab_free(v);
    gguf_close(gf);
    return bad;
}

static void test_fixture_gpt2(void) { int b = check_fixture("ggml-vocab-gpt-2", true); if (b < 0) SKIP("no fixture"); CHECK(b == 0, "%s", ""); }
static void test_fixture_falcon(void) { int b = check_fixture("ggml-vocab-falcon", true); if (b < 0) SKIP("no fixture"); CHECK(b == 0, "%s", ""); }
static void test_fixture_deepseek_llm(void) { int b = check_fixture("ggml-vocab-deepseek-llm", true); if (b < 0) SKIP("no fixture"); CHECK(b == 0, "%s", ""); }
static void test_fixture_llama_spm(void) { int b = check_fixture("ggml-vocab-llama-spm", false); if (b < 0) SKIP("no fixture"); CHECK(b == 0, "%s", ""); }
static void test_fixture_bert_bge(void) { int b = check_fixture("ggml-vocab-bert-bge", false); if (b < 0) SKIP("no fixture"); CHECK(b == 0, "%s", ""); }

/* The arch/tiny prompt ids, from llama.cpp (fixtures/arch/README.md). */
static void test_tiny_spm_prompt(void) {
    gguf_file *gf;
    th_vocab *v = load_vocab(fixture("tiny/tiny-F32.gguf"), &gf);
    if (!v) SKIP("no tiny fixture");
    static const th_token want[] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567, 975, 278, 425, 1537,
                                     437, 106, 49, 1551, 346, 2501, 263, 931, 47, 727, 471 };
    const char *s = "The quick brown fox jumps over the lazy dog. Once upon a time, there was";
    size_t n;
    th_token *ids = encode(v, s, strlen(s), true, false, &n);
    CHECK(ids && n == sizeof want / sizeof want[0], "n=%zu", n);
    for (size_t i = 0; ids && i < n && i < sizeof want / sizeof want[0]; i++) CHECK(ids[i] == want[i], "i=%zu got %d", i, ids[i]);
    CHECK(th_vocab_add_bos(v) && th_vocab_bos(v) == 1 && th_vocab_eos(v) == 2, "%s", "");
    CHECK(!strcmp(th_vocab_model_name(v), "llama"), "%s", "");
    /* after a special token the next fragment gets the SPM space prefix again
     * (llama.cpp): "<s>Hello" == [<s>] + "Hello"; without parse_special "<s>" is text */
    free(ids);
    size_t n1, n2;
    th_token *a = encode(v, "<s>Hello", 8, false, true, &n1), *b = encode(v, "Hello", 5, false, false, &n2);
    CHECK(a && b && n1 == n2 + 1 && a[0] == 1 && !memcmp(a + 1, b, n2 * sizeof *b), "n1=%zu n2=%zu", n1, n2);
    free(a);
    a = encode(v, "<s>Hello", 8, false, false, &n1);
    for (size_t i = 0; a && i < n1; i++) CHECK(a[i] != 1, "i=%zu", i);
    free(a); free(b);
    /* SPM byte fallback for invalid UTF-8: <0xFF> is id 3 + 0xFF */
    ids = encode(v, "\xff", 1, false, false, &n);
    CHECK(ids && n >= 1 && ids[n - 1] == 3 + 0xFF, "n=%zu last=%d", n, ids ? ids[n - 1] : -1);
    free(ids);
    th_vocab_free(v);
    gguf_close(gf);
}

static th_vocab *smollm(gguf_file **gf) { return load_vocab(default_model_path(), gf); }

static void test_smollm_chatml(void) {
    gguf_file *gf;
    th_vocab *v = smollm(&gf);
    if (!v) SKIP("no default model");
    CHECK(!strcmp(th_vocab_pre_name(v), "smollm") && !strcmp(th_vocab_model_name(v), "gpt2"), "%s", "");
    CHECK(!th_vocab_add_bos(v), "%s", "");
    const char *s = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    size_t n, n2;
    th_token *ids = encode(v, s, strlen(s), true, true, &n);
    CHECK(ids && n > 5, "%s", "");
    /* <|im_start|> = 1 and <|im_end|> = 2 in SmolLM2's vocab (token list order) */
    CHECK(ids && ids[0] == 1, "first %d", ids ? ids[0] : -1);
    int starts = 0, ends = 0;
    for (size_t i = 0; ids && i < n; i++) { starts += ids[i] == 1; ends += ids[i] == 2; }
    CHECK(starts == 2 && ends == 1, "starts %d ends %d", starts, ends);
    char text[512];
    int64_t tl = th_vocab_detokenize(v, ids, n, text, sizeof text, true);
    CHECK(tl == (int64_t)strlen(s) && !memcmp(text, s, strlen(s)), "round trip with specials");
    /* without parse_special the control text is plain text */
    th_token *plain = encode(v, s, strlen(s), true, false, &n2);
    for (size_t i = 0; plain && i < n2; i++) CHECK(plain[i] != 1 && plain[i] != 2, "%s", "");
    CHECK(th_vocab_is_eog(v, 2) && th_vocab_is_eog(v, 0), "%s", "");
    free(ids); free(plain);
    th_vocab_free(v);
    gguf_close(gf);
}

static void test_token_to_piece_contract(void) {
    gguf_file *gf;
    th_vocab *v = smollm(&gf);
    if (!v) SKIP("no default model");
    char buf[64];
    CHECK(th_vocab_token_to_piece(v, -1, buf, sizeof buf, true) == INT32_MIN, "%s", "");
    CHECK(th_vocab_token_to_piece(v, th_vocab_n_tokens(v), buf, sizeof buf, true) == INT32_MIN, "%s", "");
    CHECK(th_vocab_token_to_piece(v, 1, buf, sizeof buf, false) == 0, "control hidden without special");
    CHECK(th_vocab_token_to_piece(v, 1, buf, sizeof buf, true) == 12 && !memcmp(buf, "<|im_start|>", 12), "%s", "");
    CHECK(th_vocab_token_to_piece(v, 1, buf, 4, true) == -12, "too small -> -(needed)");
    size_t n;
    th_token *ids = encode(v, " Paris", 6, false, false, &n);
    CHECK(ids && n == 1, "' Paris' is one token");
    if (ids && n == 1) CHECK(th_vocab_token_to_piece(v, ids[0], buf, sizeof buf, false) == 6 && !memcmp(buf, " Paris", 6), "%s", "");
    free(ids);
    th_vocab_free(v);
    gguf_close(gf);
}

/* llama.cpp replaces each invalid byte by U+FFFD before byte-level BPE. */
static void test_bpe_invalid_utf8(void) {
    gguf_file *gf;
    th_vocab *v = smollm(&gf);
    if (!v) SKIP("no default model");
    size_t n1, n2;
    th_token *a = encode(v, "a\xff" "b\xe2\x82", 5, false, false, &n1);
    th_token *b = encode(v, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD", 11, false, false, &n2);
    CHECK(a && b && n1 == n2 && !memcmp(a, b, n1 * sizeof *a), "%s", "");
    free(a); free(b);
    th_vocab_free(v);
    gguf_close(gf);
}

static void test_utf8_stream(void) {
    const char *s = "h\xC3\xA9llo \xF0\x9F\xA6\x99 \xE4\xB8\xAD";    /* héllo 🦙 中 */
    size_t n = strlen(s);
    for (size_t cut = 1; cut < n; cut++) {                            /* two pieces, every boundary */
        th_utf8_stream st = {0};
        char out[128];
        size_t w = th_utf8_stream_push(&st, s, cut, out);
        for (size_t i = 0; i < w;) {                                    /* output so far is complete UTF-8 */
            uint8_t c = (uint8_t)out[i];
            size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            CHECK(i + l <= w, "cut %zu: broken character in output", cut);
            i += l;
        }
        w += th_utf8_stream_push(&st, s + cut, n - cut, out + w);
        w += th_utf8_stream_flush(&st, out + w);
        CHECK(w == n && !memcmp(out, s, n), "cut %zu", cut);
    }
    th_utf8_stream st = {0};
    char out[64];
    size_t w = th_utf8_stream_push(&st, "a\x80" "b\xC3", 4, out);        /* stray continuation, unfinished lead */
    w += th_utf8_stream_flush(&st, out + w);
    CHECK(w == 8 && !memcmp(out, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD", 8), "%s", "");
}

static void test_pretok_names(void) {
    const char *const *names = th_pretok_names();
    int n = 0;
    for (; names[n]; n++) {
        th_pretok_cfg cfg;
        th_pretok *p = NULL;
        th_status st = th_pretok_new(names[n], &cfg, &p);
        CHECK(st == TH_OK, "%s: %s", names[n], th_last_error());
        th_pretok_free(p);
    }
    CHECK(n > 40, "%d names", n);
    th_pretok_cfg cfg;
    th_pretok *p = NULL;
    CHECK(th_pretok_new("no-such-pre", &cfg, &p) == TH_ERR_UNSUPPORTED && !p, "%s", "");
    CHECK(strstr(th_last_error(), "no-such-pre") != NULL, "error names the pre type: %s", th_last_error());
}

int main(void) {
    RUN(test_fixture_gpt2);
    RUN(test_fixture_falcon);
    RUN(test_fixture_deepseek_llm);
    RUN(test_fixture_llama_spm);
    RUN(test_fixture_bert_bge);
    RUN(test_tiny_spm_prompt);
    RUN(test_smollm_chatml);
    RUN(test_token_to_piece_contract);
    RUN(test_bpe_invalid_utf8);
    RUN(test_utf8_stream);
    RUN(test_pretok_names);
    return CHECK_DONE();
}
