/* test_precision.c — precision configs (src/precision/): the name matcher, the
 * parser's errors (each naming its line), resolving rules against tensor lists
 * (later rules win, expert selectors, shape checks). Expected values are written
 * out by hand from the rules in docs/precision.md. */
#include "check.h"
#include "gguf/gguf.h"
#include "precision/internal.h"
#include "precision/precision.h"
#include "quant/ref_encode.h"
#include "logits.h"
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

/* ---------------------------------------------------------------- per-expert types on the MoE fixtures */

static char tmpdir[64];

static const char *tmp_path(const char *name) {
    static char buf[32][256];
    static int slot;
    char *b = buf[slot++ & 31];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static th_status quantize_with(const char *src, const char *out, const char *cfg_text) {
    const char *cfg = tmp_path("c.cfg");
    write_text(cfg, cfg_text);
    th_quantize_params p = th_quantize_default_params();
    p.type = NULL;
    p.config = cfg;
    p.n_threads = 2;
    return th_quantize_file(src, out, &p);
}

/* Every tensor of a is in b with the same type, shape and bytes; *extra = b's others. */
static bool contains_same(const gguf_file *a, const gguf_file *b, uint64_t *extra) {
    bool ok = true;
    for (uint64_t i = 0; i < a->n_tensors; i++) {
        const gguf_tensor *x = &a->tensors[i], *y = gguf_find_tensor(b, tname(x));
        if (!y || y->type != x->type || y->nbytes != x->nbytes || memcmp(x->data, y->data, x->nbytes)) {
            printf("  tensor %s differs\n", tname(x));
            ok = false;
        }
    }
    *extra = b->n_tensors - a->n_tensors;
    return ok;
}

/* An F32 copy of model file `q` (whose source is `src`): every expert tensor decoded
 * expert by expert from q (its own NAME.E copy where q has one), the rest from src. */
static bool write_dequantized(const gguf_file *src, const gguf_file *q, const char *out) {
    gguf_writer *w = gguf_writer_new(src->alignment);
    for (uint64_t i = 0; i < src->n_kv; i++) gguf_w_copy_kv(w, &src->kv[i]);
    float **keep = calloc(src->n_tensors, sizeof *keep);
    bool ok = w && keep;
    for (uint64_t i = 0; ok && i < src->n_tensors; i++) {
        const gguf_tensor *st = &src->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%s", tname(st));
        const gguf_tensor *qt = gguf_find_tensor(q, name);
        if (!strstr(name, "_exps.weight") || !qt) { gguf_w_tensor(w, name, st->type, st->n_dims, st->ne, st->data, st->nbytes); continue; }
        uint64_t per = st->ne[0] * st->ne[1];
        float *f = keep[i] = malloc(st->nbytes);
        for (uint64_t e = 0; f && e < st->ne[2]; e++) {
            char xn[300];
            snprintf(xn, sizeof xn, "%s.%llu", name, (unsigned long long)e);
            const gguf_tensor *xt = gguf_find_tensor(q, xn);
            uint64_t rb;
            th_row_bytes(qt->type, qt->ne[0], &rb);
            const void *data = xt ? xt->data : (const uint8_t *)qt->data + e * st->ne[1] * rb;
            th_ref_dequantize(xt ? xt->type : qt->type, data, f + e * per, (int64_t)per);
        }
        if (f) gguf_w_tensor(w, name, TH_F32, st->n_dims, st->ne, f, st->nbytes);
        ok = f != NULL;
    }
    ok = ok && gguf_writer_to_file(w, out) == TH_OK;
    for (uint64_t i = 0; keep && i < src->n_tensors; i++) free(keep[i]);
    free(keep);
    gguf_writer_free(w);
    return ok;
}

/* Logits of a fixed token run, decoded one token a step (n_batch 1) or all at once. */
static float *logits_of(const char *path, const th_model_params *mp, bool one_by_one, int *nv) {
    static const int32_t tok[12] = { 1, 17, 99, 5, 42, 7, 250, 3, 64, 128, 9, 31 };
    th_model *m;
    if (th_model_load(path, mp, &m)) { printf("  load %s: %s\n", path, th_last_error()); return NULL; }
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = one_by_one ? 1 : 12;
    cp.n_threads = 2;
    *nv = th_model_n_vocab(m);
    float *lg = decode_all_logits(m, tok, 12, &cp);
    th_model_free(m);
    return lg;
}

static double worst_rel(const float *a, const float *b, int nv) {
    double worst, top1;
    compare_logits(a, b, 12, nv, &worst, NULL, &top1);
    return worst;
}

/* What an observer (th_context_set_observer) saw of the routed experts: a hash of every
 * (weight name, expert id, rows) in order, the calls, and those on an expert tensor
 * that named no expert (-1). */
typedef struct obs_log { uint64_t hash, calls, no_expert, exp_calls; } obs_log;

static void obs_matmul(void *ud, const char *name, int32_t expert, const float *rows, int64_t n_rows, int64_t len,
                       int64_t stride) {
    (void)rows; (void)len; (void)stride;
    obs_log *o = ud;
    if (!strstr(name, "_exps.weight")) return;
    o->exp_calls++;
    o->no_expert += expert < 0;
    uint64_t h = o->hash ? o->hash : 1469598103934665603ull;
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    h = (h ^ (uint64_t)(uint32_t)expert) * 1099511628211ull;
    o->hash = (h ^ (uint64_t)n_rows) * 1099511628211ull;
}

static bool observe_run(const char *path, obs_log *o) {
    static const int32_t tok[12] = { 1, 17, 99, 5, 42, 7, 250, 3, 64, 128, 9, 31 };
    *o = (obs_log){ 0 };
    th_model *m;
    if (th_model_load(path, NULL, &m)) return false;
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 12;
    cp.n_threads = 2;
    th_context *c = NULL;
    bool ok = th_context_new(m, &cp, &c) == TH_OK;
    th_observer ob = { .ud = o, .matmul_input = obs_matmul };
    ok = ok && th_context_set_observer(c, &ob) == TH_OK;
    th_batch b = { .n_tokens = 12, .token = tok };
    ok = ok && th_decode(c, &b) == TH_OK;
    th_context_free(c);
    th_model_free(m);
    return ok;
}

/* m's weights changed to `cfg` on top of the file's assignment, as live promotion does
 * (plan from src, then swap); *restored: the plan's changes that took the file's bytes. */
static th_status live_change(th_model *m, const gguf_file *src, const char *cfg, size_t *n_changes, size_t *restored,
                             uint64_t *requantized) {
    th_prec_file pf;
    th_prec_config *c = NULL;
    th_prec_assign cur = { 0 }, want = { 0 };
    th_prec_plan plan = { 0 };
    th_status s = th_prec_file_read(m->file, &pf);
    if (s) return s;
    if (!(s = th_prec_parse(cfg, strlen(cfg), "live.cfg", &c)) && !(s = th_prec_model_assign(m, &pf, &cur)) &&
        !(s = th_prec_resolve(c, pf.t, pf.n, &pf.a, &want)) &&
        !(s = th_prec_make_plan(m, src, &pf, &cur, &want, 2, false, &plan))) {
        *n_changes = plan.n;
        *restored = 0;
        for (size_t k = 0; k < plan.n; k++) *restored += plan.ch[k].restore != NULL;
        *requantized = plan.bytes;
        s = th_prec_swap(m, &plan);
    }
    th_prec_plan_free(&plan);
    th_prec_assign_free(&cur);
    th_prec_assign_free(&want);
    th_prec_config_free(c);
    th_prec_file_free(&pf);
    return s;
}

/* The slot of expert e of weight `name` in m, or NULL. */
static const th_expert_slot *slot_of(th_model *m, const char *name, int e) {
    size_t n = th_model_weights(m, NULL, 0);
    th_weight **all = malloc((n ? n : 1) * sizeof *all);
    const th_expert_slot *x = NULL;
    th_model_weights(m, all, n);
    for (size_t i = 0; i < n; i++)
        if (all[i]->name && !strcmp(all[i]->name, name)) x = th_weight_expert(all[i], e);
    free(all);
    return x;
}

/* An expert with its own copy in the file (C: blk.1.ffn_down_exps.weight.3, F16), promoted
 * to another type and reverted: it gets the file's mapped bytes back (no re-quantizing:
 * the file's encoder may differ from ours), and the logits of a fresh load of the file. */
static void check_expert_revert(const char *arch, const char *src_path, const char *C) {
    th_model *m = NULL;
    gguf_file *src = NULL;
    if (th_model_load(C, NULL, &m) || gguf_open(src_path, &src)) { CHECK(0, "%s: %s", arch, th_last_error()); goto out; }
    int nv = th_model_n_vocab(m);
    static const int32_t tok[12] = { 1, 17, 99, 5, 42, 7, 250, 3, 64, 128, 9, 31 };
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 12;
    cp.n_threads = 2;
    float *l0 = decode_all_logits(m, tok, 12, &cp);
    const gguf_tensor *own = gguf_find_tensor(m->file, "blk.1.ffn_down_exps.weight.3");
    size_t n = 0, restored = 0;
    uint64_t rq = 0;
    th_status s = live_change(m, src, "blk.1.ffn_down_exps.weight[3] Q4_0\n", &n, &restored, &rq);
    const th_expert_slot *x = slot_of(m, "blk.1.ffn_down_exps.weight", 3);
    CHECK(!s && n == 1 && restored == 0 && rq > 0 && x && x->type == TH_Q4_0, "%s: promote expert 3: %s", arch,
          s ? th_last_error() : "");
    s = live_change(m, src, "# back to the file\n", &n, &restored, &rq);
    x = slot_of(m, "blk.1.ffn_down_exps.weight", 3);
    CHECK(!s && n == 1 && restored == 1 && rq == 0, "%s: revert: %zu changes, %zu from the file, %llu bytes re-quantized (%s)",
          arch, n, restored, (unsigned long long)rq, s ? th_last_error() : "");
    CHECK(own && x && x->data == own->data && x->type == TH_F16, "%s: reverted expert 3 does not read the file's bytes", arch);
    float *l1 = decode_all_logits(m, tok, 12, &cp);
    CHECK(l0 && l1 && !memcmp(l0, l1, (size_t)12 * nv * 4), "%s: logits after the revert differ from the file's", arch);
    free(l0);
    free(l1);
out:
    gguf_close(src);
    th_model_free(m);
}

#define EXPERTS_Q8 "blk.*.ffn_*_exps.weight Q8_0\n"
#define EXPERTS_MIXED EXPERTS_Q8 "blk.*.ffn_down_exps.weight[0-1] F16\nblk.*.ffn_down_exps.weight[2-3] Q4_0\n" \
    "blk.*.ffn_down_exps.weight[4-5] Q5_0\nblk.*.ffn_gate_exps.weight[0-3] Q4_1\nblk.*.ffn_up_exps.weight[4-7] F32\n" \
    "blk.*.ffn_up_exps.weight[1] Q5_1\n"

static void check_moe_fixture(const char *arch) {
    char srcp[256];
    snprintf(srcp, sizeof srcp, "arch/%s/model-F32.gguf", arch);
    const char *src = fixture(srcp), *A = tmp_path("a.gguf"), *B = tmp_path("b.gguf"), *C = tmp_path("c.gguf");
    const char *R = tmp_path("r.gguf"), *S = tmp_path("s.gguf");
    th_status s;
    if ((s = quantize_with(src, A, EXPERTS_Q8)) || (s = quantize_with(src, B, EXPERTS_MIXED)) ||
        (s = quantize_with(src, C, EXPERTS_Q8 "blk.1.ffn_down_exps.weight[3] F16\n"))) {
        CHECK(0, "%s: quantize: %s", arch, th_last_error());
        return;
    }
    gguf_file *fs = NULL, *fa = NULL, *fb = NULL, *fc = NULL;
    if (gguf_open(src, &fs) || gguf_open(A, &fa) || gguf_open(B, &fb) || gguf_open(C, &fc)) {
        CHECK(0, "%s: open: %s", arch, th_last_error());
        goto done;
    }
    uint32_t n_layer = 0;
    char key[64];
    snprintf(key, sizeof key, "%s.block_count", arch);
    gguf_get_u32(fs, key, &n_layer);
    /* promoting one expert of one layer: A's bytes all there, plus that one expert's */
    uint64_t extra;
    CHECK(contains_same(fa, fc, &extra) && extra == 1, "%s: C = A + 1 tensor (%llu)", arch, (unsigned long long)extra);
    const gguf_tensor *x3 = gguf_find_tensor(fc, "blk.1.ffn_down_exps.weight.3");
    CHECK(x3 && x3->type == TH_F16 && x3->n_dims == 2, "%s: blk.1.ffn_down_exps.weight.3", arch);
    if (x3) CHECK(bytes_match(gguf_find_tensor(fs, "blk.1.ffn_down_exps.weight"), 3 * x3->ne[1], x3), "%s: expert 3 bytes", arch);
    /* experts of every layer with types of their own: 15 own copies a layer (down 6, gate 4, up 5) */
    CHECK(contains_same(fa, fb, &extra) && extra == 15ull * n_layer, "%s: B = A + 15 per layer (%llu, %u layers)", arch,
          (unsigned long long)extra, n_layer);
    for (uint64_t i = 0; i < fb->n_tensors; i++) {
        const gguf_tensor *t = &fb->tensors[i];
        const char *n = tname(t), *dot = strrchr(n, '.');
        if (!strstr(n, "_exps.weight.")) continue;
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(dot - n), n);
        unsigned e = (unsigned)atoi(dot + 1);
        uint32_t want = strstr(n, "down") ? (e < 2 ? TH_F16 : e < 4 ? TH_Q4_0 : TH_Q5_0)
                      : strstr(n, "gate") ? TH_Q4_1 : e == 1 ? TH_Q5_1 : TH_F32;
        CHECK(t->type == want, "%s: %s is %s", arch, n, th_type_name(t->type));
        CHECK(bytes_match(gguf_find_tensor(fs, base), e * t->ne[1], t), "%s: %s bytes", arch, n);
    }
    /* logits: an own copy equal to the slice changes nothing; the mixed file equals the
     * F32 model of its decoded experts within the activation rounding */
    {
        gguf_writer *w = gguf_writer_new(fa->alignment);
        for (uint64_t i = 0; i < fa->n_kv; i++) gguf_w_copy_kv(w, &fa->kv[i]);
        for (uint64_t i = 0; i < fa->n_tensors; i++) {
            const gguf_tensor *t = &fa->tensors[i];
            char name[256];
            snprintf(name, sizeof name, "%s", tname(t));
            gguf_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
            if (!strcmp(name, "blk.1.ffn_down_exps.weight")) {
                uint64_t ne[4] = { t->ne[0], t->ne[1], 1, 1 }, slice = t->nbytes / t->ne[2];
                gguf_w_tensor(w, "blk.1.ffn_down_exps.weight.3", t->type, 2, ne, (const uint8_t *)t->data + 3 * slice, slice);
                gguf_w_tensor(w, "blk.1.ffn_up_exps.weight.2", t->type, 2, ne,
                              (const uint8_t *)gguf_find_tensor(fa, "blk.1.ffn_up_exps.weight")->data + 2 * slice, slice);
            }
        }
        CHECK(gguf_writer_to_file(w, S) == TH_OK);
        gguf_writer_free(w);
    }
    /* the observer names an expert that runs from its own copy as it names the others
     * (imatrix attributes its rows to it): the same log as the file without own copies */
    {
        obs_log oa, os;
        CHECK(observe_run(A, &oa) && observe_run(S, &os), "%s: observed runs: %s", arch, th_last_error());
        CHECK(oa.exp_calls > 0 && oa.no_expert == 0 && os.no_expert == 0 && oa.hash == os.hash && oa.exp_calls == os.exp_calls,
              "%s: observer: %llu expert products (%llu without an id) vs %llu with own copies (%llu without an id)", arch,
              (unsigned long long)oa.exp_calls, (unsigned long long)oa.no_expert, (unsigned long long)os.exp_calls,
              (unsigned long long)os.no_expert);
    }
    check_expert_revert(arch, src, C);
    CHECK(write_dequantized(fs, fb, R), "%s: reference file", arch);
    th_model_params mp = th_model_default_params();
    for (int one = 0; one < 2; one++) {
        int nv = 0;
        float *la = logits_of(A, &mp, one, &nv), *ls = logits_of(S, &mp, one, &nv), *lb = logits_of(B, &mp, one, &nv);
        float *lr = logits_of(R, &mp, one, &nv);
        CHECK(la && ls && lb && lr, "%s: logits", arch);
        if (la && ls && lb && lr) {
            CHECK(!memcmp(la, ls, (size_t)12 * nv * 4), "%s: own copies equal to the slices change the logits (%s)", arch,
                  one ? "decode" : "prefill");
            double rb = worst_rel(lb, lr, nv), ra = worst_rel(la, lr, nv);
            printf("  %-9s %s: mixed experts vs their decoded F32 model rel-L2 %.2e (all-Q8_0 file vs it: %.2e)\n", arch,
                   one ? "decode " : "prefill", rb, ra);
            CHECK(rb < 5e-2 && rb < ra / 4, "%s: mixed file far from its reference", arch);
        }
        /* load-time: A loaded with the mixed config from the source = B loaded */
        th_model_params mo = mp;
        const char *cfg = tmp_path("m.cfg");
        write_text(cfg, EXPERTS_MIXED);
        mo.precision_path = cfg;
        mo.source_path = src;
        mo.n_threads = 2;
        float *lo = logits_of(A, &mo, one, &nv);
        CHECK(lo && lb && !memcmp(lo, lb, (size_t)12 * nv * 4), "%s: A --precision mixed != B (%s)", arch, one ? "decode" : "prefill");
        /* and back: B loaded with the all-Q8_0 config = A */
        write_text(cfg, EXPERTS_Q8);
        float *lq = logits_of(B, &mo, one, &nv);
        CHECK(lq && la && !memcmp(lq, la, (size_t)12 * nv * 4), "%s: B --precision Q8_0 != A (%s)", arch, one ? "decode" : "prefill");
        free(la); free(ls); free(lb); free(lr); free(lo); free(lq);
    }
done:
    gguf_close(fs); gguf_close(fa); gguf_close(fb); gguf_close(fc);
    unlink(A); unlink(B); unlink(C); unlink(R); unlink(S);
}

static void test_moe_experts(void) {
    if (access(fixture("arch/olmoe/model-F32.gguf"), R_OK)) SKIP("no MoE fixtures");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/th_precXXXXXX");
    if (!mkdtemp(tmpdir)) SKIP("no temp dir");
    const char *arch[] = { "olmoe", "qwen3moe", "llama" };
    for (size_t i = 0; i < 3; i++) check_moe_fixture(arch[i]);
    unlink(tmp_path("c.cfg"));
    unlink(tmp_path("m.cfg"));
    rmdir(tmpdir);
}

int main(void) {
    RUN(test_match);
    RUN(test_parse);
    RUN(test_resolve);
    RUN(test_resolve_base);
    RUN(test_quantize_config);
    RUN(test_moe_experts);
    return CHECK_DONE();
}
