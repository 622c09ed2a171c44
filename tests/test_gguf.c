/* test_gguf.c — GGUF reader and writer: every real fixture parses with the values
 * llama.cpp wrote (and with llama.cpp's packed tensor layout, an independent check
 * of our byte sizes), writer round-trips, and malformed files (truncations, huge
 * counts, bad types/shapes/offsets/alignment, duplicates, bad magic/version) fail
 * with a TH_ERR_FORMAT message naming the field. */
/* check.h's CHECK(cond) with no message and RUN's if/else trip these two warnings. */
#pragma GCC diagnostic ignored "-Wformat-zero-length"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#include "check.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <glob.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>

static uint64_t pad32(uint64_t x) { return (x + 31) / 32 * 32; }

static uint64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static bool has_fixtures(void) { return file_size(fixture("tiny/tiny-F32.gguf")) > 0; }

/* llama.cpp writes tensors packed in info order, each padded to the alignment, and the
 * file ends after the last one's padding: a consequence we can check without trusting
 * our own byte-size arithmetic. */
static void check_packed_layout(const gguf_file *f, const char *path) {
    uint64_t expect = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        CHECK(t->offset == expect, "%s: tensor %" PRIu64 " offset %" PRIu64 " expected %" PRIu64,
              path, i, t->offset, expect);
        CHECK(t->data == f->base + f->data_offset + t->offset);
        expect = pad32(t->offset + t->nbytes);
    }
    if (f->n_tensors) {
        CHECK(f->data_offset % 32 == 0);
        CHECK(f->data_offset + expect == f->size, "%s: data %" PRIu64 " + %" PRIu64 " != size %" PRIu64,
              path, f->data_offset, expect, f->size);
    } else {
        CHECK(f->data_offset <= f->size);
    }
}

static bool str_is(gguf_str s, const char *c) { return gguf_str_eq(s, c); }

/* ---------------- real fixtures ---------------- */

static const struct { const char *file; uint32_t ftype, embd_type, attn_q_type, output_type; uint32_t q_row_bytes; } tiny_files[] = {
    /* attn_q is 256x256: row bytes by hand from each format's block layout */
    { "F32", 0, TH_F32, TH_F32, TH_F32, 256 * 4 },
    { "F16", 1, TH_F16, TH_F16, TH_F16, 256 * 2 },
    { "BF16", 32, TH_BF16, TH_BF16, TH_BF16, 256 * 2 },
    { "Q8_0", 7, TH_Q8_0, TH_Q8_0, TH_Q8_0, 8 * 34 },
    { "Q4_0", 2, TH_Q4_0, TH_Q4_0, TH_Q6_K, 8 * 18 },
    { "Q4_1", 3, TH_Q4_1, TH_Q4_1, TH_Q6_K, 8 * 20 },
    { "Q5_0", 8, TH_Q5_0, TH_Q5_0, TH_Q6_K, 8 * 22 },
    { "Q5_1", 9, TH_Q5_1, TH_Q5_1, TH_Q6_K, 8 * 24 },
    { "Q2_K", 10, TH_Q2_K, TH_Q2_K, TH_Q6_K, 84 },
    { "Q3_K_M", 12, TH_Q3_K, TH_Q3_K, TH_Q6_K, 110 },
    { "Q4_K_M", 15, TH_Q4_K, TH_Q4_K, TH_Q6_K, 144 },
    { "Q5_K_M", 17, TH_Q5_K, TH_Q5_K, TH_Q6_K, 176 },
    { "Q6_K", 18, TH_Q6_K, TH_Q6_K, TH_Q6_K, 210 },
    { "IQ4_NL", 25, TH_IQ4_NL, TH_IQ4_NL, TH_Q6_K, 8 * 18 },
    { "IQ4_XS", 30, TH_IQ4_XS, TH_IQ4_XS, TH_Q6_K, 136 },
};

static void test_tiny_fixtures(void) {
    if (!has_fixtures()) SKIP("no fixtures under %s", fixture(""));
    for (size_t k = 0; k < sizeof tiny_files / sizeof tiny_files[0]; k++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tiny/tiny-%s.gguf", tiny_files[k].file);
        const char *path = fixture(rel);
        gguf_file *f = NULL;
        th_status s = gguf_open(path, &f);
        CHECK(s == TH_OK, "%s: %s", path, th_last_error());
        if (s) continue;
        CHECK(f->version == 3);
        CHECK(f->n_tensors == 39, "%s: %" PRIu64 " tensors", path, f->n_tensors); /* 4 layers * 9 + 3 */
        CHECK(f->alignment == 32);
        CHECK(f->size == file_size(path));
        gguf_str arch = { 0 };
        CHECK(gguf_get_str(f, "general.architecture", &arch) && str_is(arch, "llama"));
        uint32_t v = 0;
        CHECK(gguf_get_u32(f, "llama.block_count", &v) && v == 4);
        CHECK(gguf_get_u32(f, "llama.embedding_length", &v) && v == 256);
        CHECK(gguf_get_u32(f, "llama.feed_forward_length", &v) && v == 768);
        CHECK(gguf_get_u32(f, "llama.attention.head_count", &v) && v == 8);
        CHECK(gguf_get_u32(f, "llama.attention.head_count_kv", &v) && v == 4);
        CHECK(gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &v) && v == 1);
        CHECK(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &v) && v == 2);
        if (tiny_files[k].ftype != 0) /* the F32 file carries no general.file_type */
            CHECK(gguf_get_u32(f, "general.file_type", &v) && v == tiny_files[k].ftype, "%s: file_type %u", path, v);
        int64_t i64 = 0;
        CHECK(gguf_get_i64(f, "llama.block_count", &i64) && i64 == 4);
        float eps = 0;
        CHECK(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps) && eps > 0 && eps < 1e-3f);
        CHECK(!gguf_get_u32(f, "llama.attention.layer_norm_rms_epsilon", &v)); /* f32 is not an integer */
        CHECK(!gguf_get_str(f, "llama.block_count", &arch));
        CHECK(!gguf_get_u32(f, "no.such.key", &v));

        const gguf_kv *tok = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING);
        CHECK(tok && tok->arr_n == 4096 && tok->arr_strs);
        if (tok && tok->arr_strs) {
            CHECK(str_is(tok->arr_strs[0], "<unk>"));
            CHECK(str_is(tok->arr_strs[1], "<s>"));
            CHECK(str_is(tok->arr_strs[2], "</s>"));
        }
        CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_I32) == NULL);
        const gguf_kv *tt = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32);
        CHECK(tt && tt->arr_n == 4096);
        if (tt) {
            int32_t t0, t1;
            memcpy(&t0, tt->arr_data, 4);
            memcpy(&t1, tt->arr_data + 4, 4);
            CHECK(t0 == 2 && t1 == 3, "token types %d %d (UNKNOWN=2, CONTROL=3)", t0, t1);
        }
        CHECK(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_F32) && gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_F32)->arr_n == 4096);

        const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
        CHECK(te && te->n_dims == 2 && te->ne[0] == 256 && te->ne[1] == 4096 && te->ne[2] == 1 && te->ne[3] == 1);
        CHECK(te && te->type == tiny_files[k].embd_type, "%s: token_embd type %u", path, te ? te->type : 99);
        const gguf_tensor *q = gguf_find_tensor(f, "blk.3.attn_q.weight");
        CHECK(q && q->n_dims == 2 && q->ne[0] == 256 && q->ne[1] == 256);
        CHECK(q && q->type == tiny_files[k].attn_q_type);
        CHECK(q && q->nbytes == 256ull * tiny_files[k].q_row_bytes, "%s: attn_q nbytes %" PRIu64, path, q ? q->nbytes : 0);
        const gguf_tensor *o = gguf_find_tensor(f, "output.weight");
        CHECK(o && o->type == tiny_files[k].output_type);
        const gguf_tensor *n = gguf_find_tensor(f, "output_norm.weight");
        CHECK(n && n->n_dims == 1 && n->ne[0] == 256 && n->type == TH_F32 && n->nbytes == 1024);
        CHECK(gguf_find_tensor(f, "blk.4.attn_q.weight") == NULL);
        CHECK(gguf_find_tensor(f, "blk.0.attn_q.weigh") == NULL);
        check_packed_layout(f, path);
        gguf_close(f);
    }
}

static void test_tiny_f32_values(void) {
    /* F32 norm weights are stored raw: every value must be a finite float, and the
     * tensor pointer must address the same bytes as a plain read of the file. */
    if (!has_fixtures()) SKIP("no fixtures");
    const char *path = fixture("tiny/tiny-F32.gguf");
    gguf_file *f;
    if (gguf_open(path, &f) != TH_OK) { CHECK(0, "%s", th_last_error()); return; }
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.attn_norm.weight");
    CHECK(t != NULL);
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (t && fp) {
        float buf[256];
        CHECK(fseek(fp, (long)(f->data_offset + t->offset), SEEK_SET) == 0);
        CHECK(fread(buf, 4, 256, fp) == 256);
        CHECK(memcmp(buf, t->data, 1024) == 0);
        for (int i = 0; i < 256; i++) CHECK(isfinite(buf[i]));
    }
    if (fp) fclose(fp);
    gguf_close(f);
}

static void test_arch_fixtures(void) {
    if (!has_fixtures()) SKIP("no fixtures");
    glob_t g;
    char pat[1024];
    snprintf(pat, sizeof pat, "%s", fixture("arch/*/*.gguf"));
    if (glob(pat, 0, NULL, &g) != 0) SKIP("no arch fixtures");
    CHECK(g.gl_pathc >= 15, "%zu arch fixtures", g.gl_pathc);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *path = g.gl_pathv[i];
        gguf_file *f;
        th_status s = gguf_open(path, &f);
        CHECK(s == TH_OK, "%s: %s", path, th_last_error());
        if (s) continue;
        /* folder name = architecture, except deepseek2-qlora */
        char dir[256];
        const char *end = strrchr(path, '/'), *start = end;
        while (start > path && start[-1] != '/') start--;
        snprintf(dir, sizeof dir, "%.*s", (int)(end - start), start);
        if (strcmp(dir, "deepseek2-qlora") == 0) strcpy(dir, "deepseek2");
        gguf_str arch;
        CHECK(gguf_get_str(f, "general.architecture", &arch) && str_is(arch, dir), "%s", path);
        char key[300];
        uint32_t n_layer = 0;
        snprintf(key, sizeof key, "%s.block_count", dir);
        CHECK(gguf_get_u32(f, key, &n_layer) && n_layer >= 1, "%s: %s", path, key);
        const gguf_kv *tok = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING);
        CHECK(tok && tok->arr_n == 4096 && str_is(tok->arr_strs[1], "<s>"), "%s", path);
        const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
        CHECK(te && te->ne[1] == 4096, "%s", path);
        bool q8 = strstr(path, "Q8_0") != NULL;
        const gguf_tensor *q = gguf_find_tensor(f, "blk.0.attn_q.weight");
        if (!q) q = gguf_find_tensor(f, "blk.0.attn_qkv.weight");   /* phi3 */
        if (!q) q = gguf_find_tensor(f, "blk.0.attn_q_a.weight");   /* deepseek2 q-LoRA */
        CHECK(q != NULL, "%s: no attention query weight", path);
        if (q) CHECK(q->type == (q8 ? TH_Q8_0 : TH_F32), "%s: type %s", path, th_type_name(q->type));
        if (strstr(path, "gpt-oss/model-Q8_0-MXFP4")) {
            const gguf_tensor *e = gguf_find_tensor(f, "blk.0.ffn_gate_exps.weight");
            CHECK(e && e->type == TH_MXFP4 && e->n_dims == 3 && e->ne[2] == 8);
            CHECK(e && e->nbytes == 64ull * 8 * 2 * 17); /* 64x64x8, 2 MXFP4 blocks of 17 bytes per row */
        }
        check_packed_layout(f, path);
        gguf_close(f);
    }
    globfree(&g);
}

static void test_vocab_fixtures(void) {
    if (!has_fixtures()) SKIP("no fixtures");
    static const struct { const char *name, *model; uint64_t n_vocab; } vf[] = {
        { "llama-spm", "llama", 32000 }, { "gpt-2", "gpt2", 50257 }, { "bert-bge", "bert", 30522 },
        { "falcon", "gpt2", 65024 }, { "deepseek-llm", "gpt2", 102400 },
    };
    for (size_t i = 0; i < sizeof vf / sizeof vf[0]; i++) {
        char rel[200];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vf[i].name);
        const char *path = fixture(rel);
        gguf_file *f;
        th_status s = gguf_open(path, &f);
        CHECK(s == TH_OK, "%s: %s", path, th_last_error());
        if (s) continue;
        CHECK(f->n_tensors == 0);
        gguf_str m;
        CHECK(gguf_get_str(f, "tokenizer.ggml.model", &m) && str_is(m, vf[i].model), "%s", path);
        const gguf_kv *tok = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING);
        CHECK(tok && tok->arr_n >= vf[i].n_vocab && tok->arr_n < vf[i].n_vocab + 300, "%s: %" PRIu64, path, tok ? tok->arr_n : 0);
        if (strcmp(vf[i].name, "llama-spm") == 0 && tok) {
            CHECK(tok->arr_n == 32000 && str_is(tok->arr_strs[1], "<s>") && str_is(tok->arr_strs[2], "</s>"));
            bool b = true;
            CHECK(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b) && b);
            CHECK(gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &b) && !b);
        }
        if (strcmp(vf[i].name, "gpt-2") == 0 && tok)
            CHECK(str_is(tok->arr_strs[0], "!") && str_is(tok->arr_strs[50256], "<|endoftext|>"));
        check_packed_layout(f, path);
        gguf_close(f);
    }
}

static void test_open_errors(void) {
    gguf_file *f = (gguf_file *)1;
    th_status s = gguf_open("/nonexistent/dir/model.gguf", &f);
    CHECK(s == TH_ERR_IO && f == NULL);
    CHECK(strstr(th_last_error(), "/nonexistent/dir/model.gguf") && strstr(th_last_error(), "No such file"), "%s", th_last_error());
    s = gguf_open("/tmp", &f);
    CHECK(s == TH_ERR_IO && strstr(th_last_error(), "/tmp"), "%s", th_last_error());
    s = gguf_parse(NULL, 0, &f);
    CHECK(s == TH_ERR_FORMAT && f == NULL, "%s", th_last_error());
}

int main(void) {
    RUN(test_tiny_fixtures);
    RUN(test_tiny_f32_values);
    RUN(test_arch_fixtures);
    RUN(test_vocab_fixtures);
    RUN(test_open_errors);
    return CHECK_DONE();
}
