/* test_quantize.c — the weight encoders and `th_quantize_file` against llama.cpp:
 * shared/fixtures/tiny/tiny-<TYPE>.gguf were written by llama-quantize from
 * tiny-F32.gguf, so encoding each F32 tensor with our encoder for the type the
 * fixture chose must give the fixture's bytes (compared block by block; the
 * fraction of identical blocks is printed). Then whole-file quantization with
 * each mix must choose the fixture's tensor types and write the same tensor
 * data, copy the metadata and set general.file_type as llama.cpp numbers it.
 * Hand-built cases cover zero blocks, the round trip error of each type, the
 * error paths (unknown type, unreadable input, unwritable output) and that the
 * result does not depend on the thread count. */
#include "check.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/ref_encode.h"
#include "quant/quantize_file.h"
#include "theseus.h"
#include <stdint.h>
#include <unistd.h>

static gguf_file *open_fixture(const char *rel) {
    gguf_file *f = NULL;
    if (gguf_open(fixture(rel), &f) != TH_OK) return NULL;
    return f;
}

static void tensor_name(const gguf_tensor *t, char *buf, size_t cap) {
    size_t k = t->name.len < cap - 1 ? t->name.len : cap - 1;
    memcpy(buf, t->name.ptr, k);
    buf[k] = 0;
}

/* Encode every tensor of `want` (a llama.cpp-quantized fixture) whose type is
 * `type` from the F32 fixture and count identical blocks. */
static void compare_type_with_fixture(const char *fixture_rel, uint32_t type, uint64_t *same, uint64_t *total) {
    *same = *total = 0;
    gguf_file *src = open_fixture("tiny/tiny-F32.gguf"), *want = open_fixture(fixture_rel);
    if (!src || !want) { gguf_close(src); gguf_close(want); return; }
    const th_type_info *ti = th_type_info_get(type);
    for (uint64_t i = 0; i < want->n_tensors; i++) {
        const gguf_tensor *wt = &want->tensors[i];
        if (wt->type != type) continue;
        char name[128];
        tensor_name(wt, name, sizeof name);
        const gguf_tensor *st = gguf_find_tensor(src, name);
        CHECK(st && st->type == TH_F32 && st->nbytes / 4 * ti->bytes / ti->block == wt->nbytes, "tensor %s", name);
        if (!st || st->nbytes / 4 * ti->bytes / ti->block != wt->nbytes) continue;
        uint8_t *out = malloc(wt->nbytes);
        CHECK(th_quantize_weights(type, st->data, out, (int64_t)(st->nbytes / 4)), "encode %s", name);
        uint64_t nb = wt->nbytes / ti->bytes, s = 0;
        for (uint64_t b = 0; b < nb; b++)
            s += memcmp(out + b * ti->bytes, (const uint8_t *)wt->data + b * ti->bytes, ti->bytes) == 0;
        if (s != nb) printf("  %s %s: %llu/%llu blocks identical\n", fixture_rel, name, (unsigned long long)s, (unsigned long long)nb);
        *same += s;
        *total += nb;
        free(out);
    }
    gguf_close(src);
    gguf_close(want);
}

static void check_type(const char *fixture_rel, uint32_t type) {
    uint64_t same, total;
    compare_type_with_fixture(fixture_rel, type, &same, &total);
    if (!total) { printf("  %s: no %s tensors or fixture missing\n", fixture_rel, th_type_name(type)); check_cur_failed++; return; }
    printf("  %-22s %-6s %llu/%llu blocks identical (%.4f%%)\n", fixture_rel, th_type_name(type),
           (unsigned long long)same, (unsigned long long)total, 100.0 * same / total);
    CHECK(same == total, "%s: %s blocks differ from llama.cpp", fixture_rel, th_type_name(type));
}

static void encode_q2_K_matches_llama(void) { check_type("tiny/tiny-Q2_K.gguf", TH_Q2_K); }
static void encode_q3_K_matches_llama(void) {
    check_type("tiny/tiny-Q3_K_M.gguf", TH_Q3_K);
    check_type("tiny/tiny-Q2_K.gguf", TH_Q3_K);
}
static void encode_q4_K_matches_llama(void) {
    check_type("tiny/tiny-Q4_K_M.gguf", TH_Q4_K);
    check_type("tiny/tiny-Q3_K_M.gguf", TH_Q4_K);
}
static void encode_q5_K_matches_llama(void) {
    check_type("tiny/tiny-Q5_K_M.gguf", TH_Q5_K);
    check_type("tiny/tiny-Q3_K_M.gguf", TH_Q5_K);
}
static void encode_q6_K_matches_llama(void) {
    check_type("tiny/tiny-Q6_K.gguf", TH_Q6_K);
    check_type("tiny/tiny-Q4_K_M.gguf", TH_Q6_K);
}
static void encode_iq4_xs_matches_llama(void) { check_type("tiny/tiny-IQ4_XS.gguf", TH_IQ4_XS); }
static void encode_iq4_nl_matches_llama(void) { check_type("tiny/tiny-IQ4_NL.gguf", TH_IQ4_NL); }
static void encode_legacy_matches_llama(void) {
    check_type("tiny/tiny-Q4_0.gguf", TH_Q4_0);
    check_type("tiny/tiny-Q4_1.gguf", TH_Q4_1);
    check_type("tiny/tiny-Q5_0.gguf", TH_Q5_0);
    check_type("tiny/tiny-Q5_1.gguf", TH_Q5_1);
    check_type("tiny/tiny-Q8_0.gguf", TH_Q8_0);
}
static void encode_float_matches_llama(void) {
    check_type("tiny/tiny-F16.gguf", TH_F16);
    check_type("tiny/tiny-BF16.gguf", TH_BF16);
}

/* ---------------------------------------------------------------- whole files */

static char tmp_dir[] = "/tmp/th_quantize_XXXXXX";

static const char *tmp_path(const char *name) {
    static char buf[4][256];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmp_dir, name);
    return b;
}

static th_status quantize(const char *in, const char *out, const char *type, int threads, bool pure) {
    th_quantize_params p = th_quantize_default_params();
    p.type = type;
    p.n_threads = threads;
    p.pure = pure;
    return th_quantize_file(in, out, &p);
}

static bool kv_same(const gguf_kv *a, const gguf_kv *b) {
    if (a->key.len != b->key.len || memcmp(a->key.ptr, b->key.ptr, a->key.len) || a->type != b->type) return false;
    if (a->type == GGUF_STRING) return a->str.len == b->str.len && !memcmp(a->str.ptr, b->str.ptr, a->str.len);
    if (a->type == GGUF_ARRAY) {
        if (a->arr_type != b->arr_type || a->arr_n != b->arr_n) return false;
        if (a->arr_type == GGUF_STRING) {
            for (uint64_t i = 0; i < a->arr_n; i++)
                if (a->arr_strs[i].len != b->arr_strs[i].len || memcmp(a->arr_strs[i].ptr, b->arr_strs[i].ptr, a->arr_strs[i].len))
                    return false;
            return true;
        }
        static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
        return a->arr_type < 13 && !memcmp(a->arr_data, b->arr_data, a->arr_n * (uint64_t)sz[a->arr_type]);
    }
    static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return a->type < 13 && !memcmp(a->raw, b->raw, (size_t)sz[a->type]);
}

/* Quantize tiny-F32 with `mix`; the result must have the fixture's metadata (same
 * keys, values and order), the same tensor types and the same tensor bytes. */
static void check_mix(const char *mix, const char *fixture_rel) {
    const char *out = tmp_path("mix.gguf");
    th_status s = quantize(fixture("tiny/tiny-F32.gguf"), out, mix, 2, false);
    CHECK(s == TH_OK, "%s: %s", mix, th_last_error());
    if (s) return;
    gguf_file *got = NULL, *want = open_fixture(fixture_rel);
    CHECK(gguf_open(out, &got) == TH_OK, "reopen: %s", th_last_error());
    if (!got || !want) { gguf_close(got); gguf_close(want); return; }
    CHECK(got->n_kv == want->n_kv, "%s: %llu keys, fixture %llu", mix, (unsigned long long)got->n_kv, (unsigned long long)want->n_kv);
    for (uint64_t i = 0; i < got->n_kv && i < want->n_kv; i++)
        CHECK(kv_same(&got->kv[i], &want->kv[i]), "%s: key %llu (%.*s) differs", mix, (unsigned long long)i,
              (int)want->kv[i].key.len, want->kv[i].key.ptr);
    CHECK(got->n_tensors == want->n_tensors);
    int same_type = 0, same_bytes = 0;
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *g = &got->tensors[i];
        char name[128];
        tensor_name(g, name, sizeof name);
        const gguf_tensor *w = gguf_find_tensor(want, name);
        CHECK(w, "%s: %s not in the fixture", mix, name);
        if (!w) continue;
        CHECK(g->type == w->type, "%s: %s is %s, llama.cpp chose %s", mix, name, th_type_name(g->type), th_type_name(w->type));
        same_type += g->type == w->type;
        bool same = g->type == w->type && g->nbytes == w->nbytes && !memcmp(g->data, w->data, g->nbytes);
        CHECK(same, "%s: %s data differs from llama.cpp", mix, name);
        same_bytes += same;
    }
    printf("  %-7s %d/%llu tensor types, %d/%llu tensors byte-identical to %s\n", mix, same_type,
           (unsigned long long)got->n_tensors, same_bytes, (unsigned long long)got->n_tensors, fixture_rel);
    gguf_close(got);
    gguf_close(want);
    remove(out);
}

static void mix_q4_K_M_matches_llama(void) { check_mix("Q4_K_M", "tiny/tiny-Q4_K_M.gguf"); }
static void mix_q3_K_M_matches_llama(void) { check_mix("Q3_K_M", "tiny/tiny-Q3_K_M.gguf"); }
static void mix_q5_K_M_matches_llama(void) { check_mix("Q5_K_M", "tiny/tiny-Q5_K_M.gguf"); }
static void mix_q2_K_matches_llama(void) { check_mix("Q2_K", "tiny/tiny-Q2_K.gguf"); }
static void mix_q6_K_matches_llama(void) { check_mix("Q6_K", "tiny/tiny-Q6_K.gguf"); }
static void mix_iq4_xs_matches_llama(void) { check_mix("IQ4_XS", "tiny/tiny-IQ4_XS.gguf"); }
static void mix_iq4_nl_matches_llama(void) { check_mix("IQ4_NL", "tiny/tiny-IQ4_NL.gguf"); }
static void mix_legacy_matches_llama(void) {
    check_mix("Q4_0", "tiny/tiny-Q4_0.gguf");
    check_mix("q8_0", "tiny/tiny-Q8_0.gguf");   /* names are case-insensitive */
}
static void mix_float_matches_llama(void) {
    check_mix("F16", "tiny/tiny-F16.gguf");
    check_mix("BF16", "tiny/tiny-BF16.gguf");
}

static bool files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = false;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

/* Rows are split across threads; the bytes must not depend on how. Requantizing
 * an already-quantized file converts through f32 (and copies same-type tensors). */
static void threads_do_not_change_output(void) {
    const char *a = tmp_path("t1.gguf"), *b = tmp_path("t3.gguf");
    CHECK(quantize(fixture("tiny/tiny-F32.gguf"), a, "Q5_K_S", 1, false) == TH_OK, "%s", th_last_error());
    CHECK(quantize(fixture("tiny/tiny-F32.gguf"), b, "Q5_K_S", 3, false) == TH_OK, "%s", th_last_error());
    CHECK(files_equal(a, b), "1 and 3 threads give different files");
    /* F16 input converts through f32; Q4_K_S on 4 layers: every attn_v (i < 4) -> Q5_K,
     * ffn_down stays (only i < n_layer/8 = 0 is bumped) */
    CHECK(quantize(fixture("tiny/tiny-F16.gguf"), b, "Q4_K_S", 3, false) == TH_OK, "%s", th_last_error());
    gguf_file *g = NULL;
    CHECK(gguf_open(b, &g) == TH_OK);
    const gguf_tensor *v = g ? gguf_find_tensor(g, "blk.3.attn_v.weight") : NULL;
    const gguf_tensor *d = g ? gguf_find_tensor(g, "blk.0.ffn_down.weight") : NULL;
    const gguf_tensor *n = g ? gguf_find_tensor(g, "blk.0.ffn_norm.weight") : NULL;
    CHECK(v && v->type == TH_Q5_K && d && d->type == TH_Q4_K && n && n->type == TH_F32);
    gguf_close(g);
    remove(a);
    remove(b);
}

static void f32_mix_copies_everything(void) {
    const char *out = tmp_path("f32.gguf");
    CHECK(quantize(fixture("tiny/tiny-F32.gguf"), out, "F32", 2, false) == TH_OK, "%s", th_last_error());
    gguf_file *got = NULL, *src = open_fixture("tiny/tiny-F32.gguf");
    CHECK(gguf_open(out, &got) == TH_OK);
    if (got && src) {
        CHECK(got->n_tensors == src->n_tensors);
        for (uint64_t i = 0; i < got->n_tensors; i++) {
            const gguf_tensor *g = &got->tensors[i];
            char name[128];
            tensor_name(g, name, sizeof name);
            const gguf_tensor *w = gguf_find_tensor(src, name);
            CHECK(w && g->type == TH_F32 && g->nbytes == w->nbytes && !memcmp(g->data, w->data, g->nbytes), "%s", name);
        }
        /* llama-quantize's order: tensors outside the layers first, by name; then blk.0, blk.1 ... */
        char first[128], last[128];
        tensor_name(&got->tensors[0], first, sizeof first);
        tensor_name(&got->tensors[got->n_tensors - 1], last, sizeof last);
        CHECK(!strcmp(first, "output.weight") && !strcmp(last, "blk.3.ffn_up.weight"), "order: %s ... %s", first, last);
        uint32_t ft = 99, qv = 0;
        CHECK(gguf_get_u32(got, "general.file_type", &ft) && ft == 0, "file_type %u", ft);
        CHECK(gguf_get_u32(got, "general.quantization_version", &qv) && qv == 2);
    }
    gguf_close(got);
    gguf_close(src);
    remove(out);
}

/* ---------------------------------------------------------------- rules, synthetic models */

/* A 32-layer llama (GQA 4, like Llama-3-8B): names and shapes only. */
#define NL 32
static th_qtensor syn[4 + 9 * NL];
static char syn_names[4 + 9 * NL][48];
static size_t n_syn;

static void add_syn(const char *name, uint64_t ne0, uint64_t ne1) {
    snprintf(syn_names[n_syn], sizeof syn_names[0], "%s", name);
    syn[n_syn] = (th_qtensor){ syn_names[n_syn], TH_F32, ne1 > 1 ? 2u : 1u, { ne0, ne1, 1, 1 } };
    n_syn++;
}

static void build_llama32(bool with_output) {
    n_syn = 0;
    add_syn("token_embd.weight", 4096, 128256);
    static const char *const parts[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down" };
    for (int l = 0; l < NL; l++)
        for (int k = 0; k < 9; k++) {
            char nm[48];
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, parts[k]);
            bool norm = strstr(parts[k], "norm") != NULL, down = !strcmp(parts[k], "ffn_down");
            add_syn(nm, down ? 14336 : 4096, norm ? 1 : down ? 4096 : 1024);
        }
    add_syn("output_norm.weight", 4096, 1);
    if (with_output) add_syn("output.weight", 4096, 128256);
}

static const th_qmodel llama32 = { "llama", NL, 32, 8, 0, false };

static uint32_t syn_type(const uint32_t *out, const char *name) {
    for (size_t i = 0; i < n_syn; i++)
        if (!strcmp(syn[i].name, name)) return out[i];
    return 9999;
}

static uint32_t layer_type(const uint32_t *out, int l, const char *part) {
    char nm[48];
    snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, part);
    return syn_type(out, nm);
}

/* use_more_bits(i, 32): the first and last 4 layers and every third one from 6 */
static bool more_bits_32(int i) { return i < 4 || i >= 28 || i == 6 || i == 9 || i == 12 || i == 15 || i == 18 || i == 21 || i == 24 || i == 27; }

static void rules_q4_K_M_32_layers(void) {
    uint32_t out[4 + 9 * NL];
    build_llama32(true);
    CHECK(th_qplan_types(th_qmix_find("Q4_K_M"), false, &llama32, syn, n_syn, out) == 0);
    for (int l = 0; l < NL; l++) {
        uint32_t bumped = more_bits_32(l) ? TH_Q6_K : TH_Q4_K;
        CHECK(layer_type(out, l, "attn_v") == bumped, "layer %d attn_v %s", l, th_type_name(layer_type(out, l, "attn_v")));
        CHECK(layer_type(out, l, "ffn_down") == bumped, "layer %d ffn_down", l);
        CHECK(layer_type(out, l, "attn_q") == TH_Q4_K && layer_type(out, l, "ffn_up") == TH_Q4_K);
        CHECK(layer_type(out, l, "attn_norm") == TH_F32);
    }
    CHECK(syn_type(out, "output.weight") == TH_Q6_K && syn_type(out, "token_embd.weight") == TH_Q4_K);
    /* the input order does not matter: llama.cpp counts attn_v in sorted order */
    th_qtensor tmp = syn[3];
    syn[3] = syn[n_syn - 5];
    syn[n_syn - 5] = tmp;
    uint32_t out2[4 + 9 * NL];
    th_qplan_types(th_qmix_find("Q4_K_M"), false, &llama32, syn, n_syn, out2);
    for (int l = 0; l < NL; l++) CHECK(layer_type(out2, l, "attn_v") == (more_bits_32(l) ? TH_Q6_K : TH_Q4_K));
}

static void rules_other_mixes_32_layers(void) {
    uint32_t out[4 + 9 * NL];
    build_llama32(true);
    th_qplan_types(th_qmix_find("Q3_K_M"), false, &llama32, syn, n_syn, out);
    for (int l = 0; l < NL; l++) {
        CHECK(layer_type(out, l, "attn_v") == (l < 2 ? TH_Q5_K : TH_Q4_K), "Q3_K_M attn_v %d", l);
        CHECK(layer_type(out, l, "ffn_down") == (l < 2 ? TH_Q5_K : TH_Q4_K), "Q3_K_M ffn_down %d", l);
        CHECK(layer_type(out, l, "attn_output") == TH_Q4_K && layer_type(out, l, "ffn_gate") == TH_Q3_K);
    }
    th_qplan_types(th_qmix_find("Q2_K"), false, &llama32, syn, n_syn, out);   /* GQA 4: attn_v to Q4_K */
    CHECK(layer_type(out, 5, "attn_v") == TH_Q4_K && layer_type(out, 5, "ffn_down") == TH_Q3_K &&
          layer_type(out, 5, "attn_output") == TH_Q3_K && layer_type(out, 5, "attn_k") == TH_Q2_K);
    th_qplan_types(th_qmix_find("IQ4_XS"), false, &llama32, syn, n_syn, out);
    for (int l = 0; l < NL; l++) {
        CHECK(layer_type(out, l, "attn_v") == TH_Q5_K, "IQ4_XS attn_v %d (GQA >= 4)", l);
        CHECK(layer_type(out, l, "ffn_down") == (l < 4 ? TH_Q5_K : TH_IQ4_XS), "IQ4_XS ffn_down %d", l);
    }
    th_qplan_types(th_qmix_find("Q4_K_S"), false, &llama32, syn, n_syn, out);
    for (int l = 0; l < NL; l++) {
        CHECK(layer_type(out, l, "attn_v") == (l < 4 ? TH_Q5_K : TH_Q4_K), "Q4_K_S attn_v %d", l);
        CHECK(layer_type(out, l, "ffn_down") == (l < 4 ? TH_Q5_K : TH_Q4_K), "Q4_K_S ffn_down %d", l);
    }
    th_qplan_types(th_qmix_find("Q8_0"), false, &llama32, syn, n_syn, out);
    CHECK(syn_type(out, "output.weight") == TH_Q8_0 && layer_type(out, 0, "attn_v") == TH_Q8_0);
    th_qplan_types(th_qmix_find("F16"), false, &llama32, syn, n_syn, out);
    CHECK(syn_type(out, "output.weight") == TH_F16 && layer_type(out, 0, "attn_norm") == TH_F32);
    th_qplan_types(th_qmix_find("Q4_K_M"), true, &llama32, syn, n_syn, out);   /* pure */
    CHECK(syn_type(out, "output.weight") == TH_Q4_K && layer_type(out, 0, "attn_v") == TH_Q4_K &&
          layer_type(out, 0, "ffn_down") == TH_Q4_K);
    build_llama32(false);   /* tied embeddings: token_embd is the output matrix */
    th_qplan_types(th_qmix_find("Q4_0"), false, &llama32, syn, n_syn, out);
    CHECK(syn_type(out, "token_embd.weight") == TH_Q6_K);
}

/* With an importance matrix (llama-quant.cpp c392e50, ffn_down branch): IQ4_NL/IQ4_XS no
 * longer bump ffn_down of the first n_layer/8 layers to Q5_K, and Q4_0/Q5_0 move those
 * layers to Q4_1/Q5_1; layers from n_layer/8 on and the other tensors are unchanged. */
static void rules_with_imatrix_32_layers(void) {
    uint32_t out[4 + 9 * NL];
    th_qmodel m = llama32;
    static const struct { const char *mix; uint32_t plain, imat, rest; } cases[] = {
        { "IQ4_XS", TH_Q5_K, TH_IQ4_XS, TH_IQ4_XS }, { "IQ4_NL", TH_Q5_K, TH_IQ4_NL, TH_IQ4_NL },
        { "Q4_0", TH_Q4_0, TH_Q4_1, TH_Q4_0 },      { "Q5_0", TH_Q5_0, TH_Q5_1, TH_Q5_0 },
        { "Q4_1", TH_Q4_1, TH_Q4_1, TH_Q4_1 },      { "Q4_K_M", TH_Q6_K, TH_Q6_K, TH_Q4_K },
    };
    build_llama32(true);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int with = 0; with < 2; with++) {
            m.has_imatrix = with;
            th_qplan_types(th_qmix_find(cases[c].mix), false, &m, syn, n_syn, out);
            for (int l = 0; l < 4; l++)
                CHECK(layer_type(out, l, "ffn_down") == (with ? cases[c].imat : cases[c].plain), "%s%s: layer %d ffn_down %s",
                      cases[c].mix, with ? " + imatrix" : "", l, th_type_name(layer_type(out, l, "ffn_down")));
            CHECK(layer_type(out, 4, "ffn_down") == cases[c].rest, "%s: layer 4 ffn_down %s", cases[c].mix,
                  th_type_name(layer_type(out, 4, "ffn_down")));
            CHECK(layer_type(out, 0, "ffn_up") == th_qmix_find(cases[c].mix)->base, "%s: ffn_up", cases[c].mix);
        }
    }
}

static void rules_row_length_fallbacks(void) {
    n_syn = 0;
    add_syn("blk.0.attn_q.weight", 160, 64);    /* multiple of 32, not of 256 */
    add_syn("blk.0.ffn_up.weight", 100, 64);    /* not even a multiple of 32 */
    add_syn("blk.0.ffn_gate_inp.weight", 256, 8);
    add_syn("output.weight", 160, 64);
    add_syn("blk.0.attn_k.weight", 256, 1);     /* [256, 1] has one real dimension */
    th_qmodel m = { "llama", 1, 4, 4, 0, false };
    uint32_t out[8];
    static const struct { const char *mix; uint32_t q; } cases[] = {
        { "Q4_K_M", TH_Q5_0 }, { "Q5_K_S", TH_Q5_1 }, { "Q6_K", TH_Q8_0 }, { "Q2_K", TH_IQ4_NL }, { "Q3_K_M", TH_IQ4_NL },
        { "IQ4_XS", TH_IQ4_NL },   /* llama-quant.cpp c392e50, convert_incompatible_tensor */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int nf = th_qplan_types(th_qmix_find(cases[i].mix), false, &m, syn, n_syn, out);
        CHECK(out[0] == cases[i].q, "%s: row 160 -> %s", cases[i].mix, th_type_name(out[0]));
        CHECK(out[1] == TH_F16, "%s: row 100 -> %s", cases[i].mix, th_type_name(out[1]));
        CHECK(out[2] == TH_F32 && out[4] == TH_F32, "%s: gate_inp / 1-row tensors stay", cases[i].mix);
        CHECK(out[3] == TH_Q8_0, "%s: output.weight with row 160 -> %s", cases[i].mix, th_type_name(out[3]));
        CHECK(nf == 2, "%s: %d fallbacks", cases[i].mix, nf);
    }
    CHECK(th_qmix_find("q4_k") == th_qmix_find("Q4_K_M") && th_qmix_find("Q4_K_X") == NULL && th_qmix_find("Q8_K") == NULL);
}

/* ---------------------------------------------------------------- errors */

static void write_small(const char *path, uint32_t type, const void *data, uint64_t nbytes, uint64_t ne0) {
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_str(w, "general.architecture", "llama");
    uint64_t ne[2] = { ne0, 2 };
    gguf_w_tensor(w, "blk.0.attn_q.weight", type, 2, ne, data, nbytes);
    CHECK(gguf_writer_to_file(w, path) == TH_OK, "%s", th_last_error());
    gguf_writer_free(w);
}

static void errors_name_the_problem(void) {
    const char *in = fixture("tiny/tiny-F32.gguf"), *out = tmp_path("err.gguf");
    th_status s = quantize(in, out, "Q4_K_X", 1, false);
    CHECK(s == TH_ERR_ARG && strstr(th_last_error(), "Q4_K_X") && strstr(th_last_error(), "Q4_K_M") && strstr(th_last_error(), "IQ4_XS"),
          "%s", th_last_error());
    s = quantize("/nonexistent/model.gguf", out, "Q4_K_M", 1, false);
    CHECK(s == TH_ERR_IO && strstr(th_last_error(), "/nonexistent/model.gguf"), "%s", th_last_error());
    s = quantize(in, "/nonexistent-dir/out.gguf", "Q4_K_M", 1, false);
    CHECK(s == TH_ERR_IO && strstr(th_last_error(), "/nonexistent-dir/out.gguf"), "%s", th_last_error());
    /* a type we cannot decode, that the mix wants to change */
    static uint8_t iq2[2 * 66];
    const char *small = tmp_path("iq2.gguf");
    write_small(small, TH_IQ2_XXS, iq2, sizeof iq2, 256);
    s = quantize(small, out, "Q4_K_M", 1, false);
    CHECK(s == TH_ERR_UNSUPPORTED && strstr(th_last_error(), "blk.0.attn_q.weight") && strstr(th_last_error(), "IQ2_XXS"),
          "%s", th_last_error());
    /* NaN weights */
    static float nan_rows[512];
    nan_rows[300] = NAN;
    write_small(small, TH_F32, nan_rows, sizeof nan_rows, 256);
    s = quantize(small, out, "Q6_K", 2, false);
    CHECK(s == TH_ERR_FORMAT && strstr(th_last_error(), "blk.0.attn_q.weight") && strstr(th_last_error(), "row 1"),
          "%s", th_last_error());
    CHECK(access(out, F_OK) != 0 && access(tmp_path("err.gguf.tmp"), F_OK) != 0, "no output or temp file after errors");
    remove(small);
}

/* ---------------------------------------------------------------- encoders, by hand */

static uint32_t rng = 12345;
static float frand(void) { rng = rng * 1664525u + 1013904223u; return (float)(rng >> 8) / (float)(1 << 24) * 2.0f - 1.0f; }

/* Round trip of random rows: the rel-L2 error must be small and typical of the bit width
 * (a wrong packing or scale lands near 1). Zero rows must decode to zeros. */
static void encoders_round_trip(void) {
    static const struct { uint32_t type; double max_err; } cases[] = {
        { TH_Q2_K, 0.40 }, { TH_Q3_K, 0.20 }, { TH_Q4_K, 0.10 }, { TH_Q5_K, 0.05 }, { TH_Q6_K, 0.025 },
        { TH_IQ4_XS, 0.10 }, { TH_IQ4_NL, 0.10 }, { TH_Q8_0, 0.008 },
    };
    enum { N = 1024 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < N; i++) x[i] = frand() * (i < 256 ? 1e-3f : 1.0f) + (i >= 768 ? 0.5f : 0.0f);
        CHECK(th_quantize_weights(cases[c].type, x, q, N));
        th_ref_dequantize(cases[c].type, q, y, N);
        double num = 0, den = 0;
        for (int i = 0; i < N; i++) { num += (x[i] - y[i]) * (double)(x[i] - y[i]); den += (double)x[i] * x[i]; }
        double err = sqrt(num / den);
        CHECK(err < cases[c].max_err, "%s: rel-L2 %.4f", th_type_name(cases[c].type), err);
        memset(x, 0, sizeof x);
        CHECK(th_quantize_weights(cases[c].type, x, q, N));
        th_ref_dequantize(cases[c].type, q, y, N);
        int nonzero = 0;
        for (int i = 0; i < N; i++) nonzero += y[i] != 0.0f;
        CHECK(nonzero == 0, "%s: zero row decodes to %d non-zeros", th_type_name(cases[c].type), nonzero);
    }
}

/* Values on the grid k/8 with every 16-element sub-block holding -4 as its extreme:
 * the first guess maps -4 to code -32, so the sub-block scale is exactly 1/8, the
 * super-block scale d = 1/(-128/(1/8)) = -1/1024 is exact in fp16 and each sub-block
 * multiplier is -128: every value must come back exactly. */
static void q6_K_exact_grid(void) {
    float x[256], y[256];
    th_block_q6_K b;
    for (int i = 0; i < 256; i++) x[i] = i % 16 == 0 ? -4.0f : (float)((i * 7 + i / 16 * 5) % 63 - 31) / 8.0f;
    th_quantize_weights(TH_Q6_K, x, &b, 256);
    th_ref_dequantize(TH_Q6_K, &b, y, 256);
    int exact = 0;
    for (int i = 0; i < 256; i++) exact += x[i] == y[i];
    CHECK(exact == 256, "%d/256 exact", exact);
    CHECK(b.d == 0x8000 + (5u << 10) && b.scales[0] == -128, "d %04x scale %d", b.d, b.scales[0]);   /* fp16 -2^-10 */
}

int main(void) {
    RUN(encode_q2_K_matches_llama);
    RUN(encode_q3_K_matches_llama);
    RUN(encode_q4_K_matches_llama);
    RUN(encode_q5_K_matches_llama);
    RUN(encode_q6_K_matches_llama);
    RUN(encode_iq4_xs_matches_llama);
    RUN(encode_iq4_nl_matches_llama);
    RUN(encode_legacy_matches_llama);
    RUN(encode_float_matches_llama);
    if (!mkdtemp(tmp_dir)) { printf("FAIL mkdtemp\n"); return 1; }
    RUN(mix_q4_K_M_matches_llama);
    RUN(mix_q3_K_M_matches_llama);
    RUN(mix_q5_K_M_matches_llama);
    RUN(mix_q2_K_matches_llama);
    RUN(mix_q6_K_matches_llama);
    RUN(mix_iq4_xs_matches_llama);
    RUN(mix_iq4_nl_matches_llama);
    RUN(mix_legacy_matches_llama);
    RUN(mix_float_matches_llama);
    RUN(threads_do_not_change_output);
    RUN(f32_mix_copies_everything);
    RUN(rules_q4_K_M_32_layers);
    RUN(rules_other_mixes_32_layers);
    RUN(rules_with_imatrix_32_layers);
    RUN(rules_row_length_fallbacks);
    RUN(errors_name_the_problem);
    RUN(encoders_round_trip);
    RUN(q6_K_exact_grid);
    rmdir(tmp_dir);
    return CHECK_DONE();
}
