/* test_precision.c — precision configs (src/precision/): the name matcher, the
 * parser's errors (each naming its line), resolving rules against tensor lists
 * (later rules win, expert selectors, shape checks). Expected values are written
 * out by hand from the rules in docs/precision.md. */
#include "check.h"
#include "gguf/gguf.h"
#include "precision/precision.h"
#include "quant/ref_encode.h"
#include <unistd.h>

static void test_match(void) {
    CHECK(th_prec_match("blk.*.attn_q.weight", "blk.3.attn_q.weight"));
    CHECK(th_prec_match("blk.*.attn_q.weight", "blk.12.attn_q.weight"));
    CHECK(!th_prec_match("blk.*.attn_q.weight", "blk.3.attn_k.weight"));
    CHECK(th_prec_match("blk.3-9.ffn_*.weight", "blk.3.ffn_up.weight"));
    CHECK(th_prec_match("blk.3-9.ffn_*.weight", "blk.9.ffn_down_exps.weight"));
    CHECK(!th_prec_match("blk.3-9.ffn_*.weight", "blk.10.ffn_up.weight"));
    CHECK(!th_prec_match("blk.3-9.ffn_*.weight", "blk.2.ffn_up.weight"));
    CHECK(!th_prec_match("blk.3-9.ffn_*.weight", "blk.39.ffn_up.weight"), "a range matches the whole number");
    CHECK(th_prec_match("blk.10-12.*", "blk.11.attn_v.weight"));
    CHECK(!th_prec_match("blk.1.*", "blk.11.attn_v.weight"));
    CHECK(th_prec_match("*", "output.weight"));
    CHECK(th_prec_match("output.weight", "output.weight"));
    CHECK(!th_prec_match("output.weight", "output.weights"));
    CHECK(!th_prec_match("output.weight", "output.weigh"));
    CHECK(th_prec_match("*.weight", "token_embd.weight"));
    CHECK(th_prec_match("**x*", "abxc"));
    CHECK(!th_prec_match("*x", "abxc"));
    CHECK(th_prec_match("*1-2", "blk.2"));
    CHECK(!th_prec_match("*1-2", "blk.12"), "digits before the range's number: not a whole number");
    CHECK(th_prec_match("", ""));
    CHECK(!th_prec_match("", "a"));
}

/* Parse text that must fail; the message must name `line` and contain `what`. */
static void parse_fails(const char *text, int line, const char *what) {
    th_prec_config *c = NULL;
    th_status s = th_prec_parse(text, strlen(text), "t.cfg", &c);
    char want[32];
    snprintf(want, sizeof want, "t.cfg:%d:", line);
    CHECK(s == TH_ERR_FORMAT && !c, "'%s' parsed", text);
    CHECK(strstr(th_last_error(), want) && strstr(th_last_error(), what), "'%s': %s", text, th_last_error());
}

static void test_parse(void) {
    const char *text = "# a comment\n\n  blk.*.attn_q.weight   Q8_0  # trailing\n"
                       "blk.11.ffn_down_exps.weight[52] q6_k\nblk.0.ffn_up_exps.weight[0-7] F16\noutput.weight f16";
    th_prec_config *c = NULL;
    CHECK(th_prec_parse(text, strlen(text), "x", &c) == TH_OK, "%s", th_last_error());
    if (!c) return;
    CHECK(c->n_rules == 4);
    CHECK(!strcmp(c->rules[0].pattern, "blk.*.attn_q.weight") && c->rules[0].type == TH_Q8_0 && c->rules[0].line == 3 &&
          c->rules[0].x_lo == -1);
    CHECK(!strcmp(c->rules[1].pattern, "blk.11.ffn_down_exps.weight") && c->rules[1].type == TH_Q6_K &&
          c->rules[1].x_lo == 52 && c->rules[1].x_hi == 52 && c->rules[1].line == 4);
    CHECK(c->rules[2].x_lo == 0 && c->rules[2].x_hi == 7 && c->rules[2].type == TH_F16);
    CHECK(c->rules[3].type == TH_F16 && c->rules[3].line == 6);
    th_prec_config_free(c);
    parse_fails("a Q8_0\nb Q9_9\n", 2, "unknown type 'Q9_9'");
    parse_fails("a\n", 1, "type is missing");
    parse_fails("\n\na Q8_0 extra\n", 3, "nothing after the type");
    parse_fails("a[1-] Q8_0\n", 1, "[N] or [N-M]");
    parse_fails("a[x] Q8_0\n", 1, "[N] or [N-M]");
    parse_fails("a[3-1] Q8_0\n", 1, "out of order");
    parse_fails("a[1]b Q8_0\n", 1, "final expert selector");
    parse_fails("[1] Q8_0\n", 1, "tensor name before");
    parse_fails("a Q8_1\n", 1, "cannot be written");    /* an activation type: no weight encoder */
    parse_fails("a IQ2_XXS\n", 1, "cannot be written"); /* a GGML type without kernels */
    /* empty and comment-only configs are fine */
    CHECK(th_prec_parse("# nothing\n", 10, "e", &c) == TH_OK && c && c->n_rules == 0);
    th_prec_config_free(c);
}

/* A small MoE-like model: names, types, shapes. */
static const th_qtensor tensors[] = {
    { "token_embd.weight", TH_F32, 2, { 256, 100, 1, 1 } },
    { "blk.0.attn_norm.weight", TH_F32, 1, { 256, 1, 1, 1 } },
    { "blk.0.attn_q.weight", TH_F32, 2, { 256, 256, 1, 1 } },
    { "blk.0.ffn_down_exps.weight", TH_F32, 3, { 96, 256, 8, 1 } },
    { "blk.1.attn_q.weight", TH_F32, 2, { 256, 256, 1, 1 } },
    { "blk.1.ffn_down_exps.weight", TH_F32, 3, { 96, 256, 8, 1 } },
    { "blk.1.ffn_gate_inp.weight", TH_F32, 2, { 256, 8, 1, 1 } },
    { "output.weight", TH_F32, 2, { 256, 100, 1, 1 } },
};
#define NT (sizeof tensors / sizeof tensors[0])

static th_status resolve(const char *text, th_prec_assign *a) {
    th_prec_config *c = NULL;
    th_status s = th_prec_parse(text, strlen(text), "r.cfg", &c);
    if (s) return s;
    s = th_prec_resolve(c, tensors, NT, NULL, a);
    th_prec_config_free(c);
    return s;
}

static void test_resolve(void) {
    th_prec_assign a;
    th_status s = resolve("*.weight Q8_0\nblk.1.* Q4_0\nblk.0.ffn_down_exps.weight[3] F16\n"
                          "blk.0-1.ffn_down_exps.weight[5-6] Q4_1\noutput.weight F16\n", &a);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (s) return;
    uint32_t want[NT] = { TH_Q8_0, TH_F32, TH_Q8_0, TH_Q8_0, TH_Q4_0, TH_Q4_0, TH_F32, TH_F16 };
    for (size_t i = 0; i < NT; i++) CHECK(a.type[i] == want[i], "%s: %u", tensors[i].name, a.type[i]);
    CHECK(a.n_expert[3] == 8 && a.expert[3] && !a.expert[2]);
    uint32_t x0[8] = { TH_Q8_0, TH_Q8_0, TH_Q8_0, TH_F16, TH_Q8_0, TH_Q4_1, TH_Q4_1, TH_Q8_0 };
    for (uint32_t e = 0; e < 8 && a.expert[3]; e++) CHECK(th_prec_type_of(&a, 3, e) == x0[e], "expert %u", e);
    for (uint32_t e = 0; e < 8; e++) CHECK(th_prec_type_of(&a, 5, e) == (e == 5 || e == 6 ? TH_Q4_1 : TH_Q4_0));
    th_prec_assign_free(&a);

    /* a later whole-tensor rule replaces earlier per-expert types; a per-expert rule
     * back to the tensor's type leaves no table */
    CHECK(resolve("blk.0.ffn_down_exps.weight[2] Q8_0\nblk.0.ffn_down_exps.weight Q4_0\n", &a) == TH_OK);
    CHECK(a.type[3] == TH_Q4_0 && !a.expert[3]);
    th_prec_assign_free(&a);
    CHECK(resolve("blk.0.ffn_down_exps.weight[2] Q8_0\nblk.0.ffn_down_exps.weight[2] F32\n", &a) == TH_OK);
    CHECK(a.type[3] == TH_F32 && !a.expert[3]);
    th_prec_assign_free(&a);

    /* errors naming the line */
    struct { const char *text, *what; } bad[] = {
        { "blk.0.attn_q.weight Q8_0\nblk.7.attn_q.weight Q8_0\n", "r.cfg:2: 'blk.7.attn_q.weight' matches no quantizable tensor" },
        { "blk.0.attn_norm.weight Q8_0\n", "r.cfg:1:" },                 /* norms are not quantizable */
        { "blk.1.ffn_gate_inp.weight Q8_0\n", "matches no quantizable" }, /* nor is the router */
        { "\nblk.0.ffn_down_exps.weight Q4_K\n", "r.cfg:2: tensor blk.0.ffn_down_exps.weight: rows of 96 values cannot be Q4_K" },
        { "blk.0.ffn_down_exps.weight[8] Q8_0\n", "r.cfg:1: expert 8 is out of range" },
        { "blk.0.attn_q.weight[0] Q8_0\n", "matches no expert tensor" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        s = resolve(bad[k].text, &a);
        CHECK(s == TH_ERR_FORMAT && strstr(th_last_error(), bad[k].what), "%s -> %s", bad[k].text, th_last_error());
        if (!s) th_prec_assign_free(&a);
    }
}

/* Resolving on top of a base assignment keeps what no rule touches. */
static void test_resolve_base(void) {
    th_prec_assign base, a;
    CHECK(resolve("blk.*.attn_q.weight Q4_0\nblk.1.ffn_down_exps.weight[1] Q8_0\n", &base) == TH_OK);
    th_prec_config *c = NULL;
    const char *text = "blk.0.attn_q.weight Q8_0\n";
    CHECK(th_prec_parse(text, strlen(text), "b", &c) == TH_OK);
    CHECK(th_prec_resolve(c, tensors, NT, &base, &a) == TH_OK);
    CHECK(a.type[2] == TH_Q8_0 && a.type[4] == TH_Q4_0 && a.expert[5] && a.expert[5][1] == TH_Q8_0 && a.expert[5][0] == TH_F32);
    th_prec_assign_free(&a);
    th_prec_assign_free(&base);
    th_prec_config_free(c);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

static char *tname(const gguf_tensor *t) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)t->name.len, t->name.ptr);
    return buf;
}

/* Each output tensor's bytes equal the per-type encoder's on the source rows. */
static bool bytes_match(const gguf_tensor *st, uint64_t first_row, const gguf_tensor *ot) {
    uint64_t rb;
    if (!th_row_bytes(ot->type, ot->ne[0], &rb)) return false;
    uint64_t rows = ot->nbytes / rb;
    uint8_t *buf = malloc(rb);
    bool same = buf != NULL;
    for (uint64_t r = 0; same && r < rows; r++) {
        const float *x = (const float *)st->data + (first_row + r) * st->ne[0];
        th_quantize_weights(ot->type, x, buf, (int64_t)st->ne[0]);
        same = !memcmp(buf, (const uint8_t *)ot->data + r * rb, rb);
    }
    free(buf);
    return same;
}

/* quantize --config on the tiny F32 model: attention Q8_0, FFN Q4_K, output F16;
 * the types follow the rules (written out here) and the bytes the encoders. */
static void test_quantize_config(void) {
    char cfg[] = "/tmp/th_prec_cfgXXXXXX", out[64];
    int fd = mkstemp(cfg);
    if (fd < 0) SKIP("no temp file");
    close(fd);
    snprintf(out, sizeof out, "%s.gguf", cfg);
    write_text(cfg, "blk.*.attn_*.weight Q8_0\nblk.*.ffn_*.weight Q4_K\noutput.weight F16\n");
    th_quantize_params p = th_quantize_default_params();
    p.type = NULL;
    p.config = cfg;
    p.n_threads = 2;
    th_status s = th_quantize_file(fixture("tiny/tiny-F32.gguf"), out, &p);
    if (s == TH_ERR_IO && access(fixture("tiny/tiny-F32.gguf"), R_OK)) { unlink(cfg); SKIP("no tiny fixture"); }
    CHECK(s == TH_OK, "%s", th_last_error());
    gguf_file *src = NULL, *o = NULL;
    if (!s && !gguf_open(fixture("tiny/tiny-F32.gguf"), &src) && !gguf_open(out, &o)) {
        CHECK(o->n_tensors == src->n_tensors);
        uint32_t ft;
        CHECK(!gguf_get_u32(o, "general.file_type", &ft), "a mixed config has no llama.cpp file type");
        int n_q8 = 0, n_q4k = 0;
        for (uint64_t i = 0; i < o->n_tensors; i++) {
            const gguf_tensor *ot = &o->tensors[i];
            const char *n = tname(ot);
            bool norm = strstr(n, "_norm.") != NULL;
            uint32_t want = TH_F32;
            if (!norm && strstr(n, ".attn_")) want = TH_Q8_0;
            if (!norm && strstr(n, ".ffn_")) want = TH_Q4_K;
            if (!strcmp(n, "output.weight")) want = TH_F16;
            CHECK(ot->type == want, "%s: %s", n, th_type_name(ot->type));
            n_q8 += ot->type == TH_Q8_0;
            n_q4k += ot->type == TH_Q4_K;
            const gguf_tensor *st = gguf_find_tensor(src, n);
            CHECK(st && bytes_match(st, 0, ot), "%s: bytes differ from the %s encoder", n, th_type_name(ot->type));
        }
        CHECK(n_q8 == 16 && n_q4k == 12, "4 layers: 4 attention and 3 FFN matrices each (%d, %d)", n_q8, n_q4k);
    }
    gguf_close(src);
    gguf_close(o);
    /* a rule that matches nothing fails and names its line; nothing is written */
    write_text(cfg, "output.weight F16\nblk.9.attn_q.weight Q8_0\n");
    unlink(out);
    s = th_quantize_file(fixture("tiny/tiny-F32.gguf"), out, &p);
    CHECK(s == TH_ERR_FORMAT && strstr(th_last_error(), ":2: 'blk.9.attn_q.weight' matches no"), "%s", th_last_error());
    CHECK(access(out, F_OK) != 0);
    unlink(out);
    unlink(cfg);
}

int main(void) {
    RUN(test_match);
    RUN(test_parse);
    RUN(test_resolve);
    RUN(test_resolve_base);
    RUN(test_quantize_config);
    return CHECK_DONE();
}
