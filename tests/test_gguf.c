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
#include <unistd.h>

static void put32_le(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
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

/* ---------------- writer round trip ---------------- */

static float small_a[8] = { 1, -2, 3.5f, 0, 1e-3f, -7, 8, 9 };   /* F32 [4,2] */
static uint8_t small_b[2 * 18];                                  /* Q4_0 [32,2] */
static float small_c[8] = { 10, 20, 30, 40, 50, 60, 70, 80 };    /* F32 [8]: 32 bytes, no padding */
static const int16_t small_i16[3] = { -1, 2, -300 };
static const double small_f64[2] = { 0.5, -1e300 };
static const char *const small_strs[4] = { "alpha", "", "gamma with space", "\xce\xb4" };

/* A small file touching every writer call; the last tensor ends exactly at the end of
 * the file, so every strict prefix is malformed. */
static gguf_writer *small_writer(uint32_t alignment) {
    for (int i = 0; i < 36; i++) small_b[i] = (uint8_t)(i * 7 + 1);
    gguf_writer *w = gguf_writer_new(alignment);
    gguf_w_str(w, "general.architecture", "test");
    gguf_w_u32(w, "k.u32", 4000000000u);
    gguf_w_i32(w, "k.i32", -5);
    gguf_w_f32(w, "k.f32", 0.25f);
    gguf_w_bool(w, "k.bool", true);
    gguf_w_arr(w, "k.arr_i16", GGUF_I16, small_i16, 3);
    gguf_w_arr(w, "k.arr_f64", GGUF_F64, small_f64, 2);
    gguf_w_arr(w, "k.arr_empty", GGUF_U8, NULL, 0);
    gguf_w_arr_str(w, "k.strs", small_strs, 4);
    gguf_w_tensor(w, "t.a", TH_F32, 2, (const uint64_t[]){ 4, 2 }, small_a, sizeof small_a);
    gguf_w_tensor(w, "t.b", TH_Q4_0, 2, (const uint64_t[]){ 32, 2 }, small_b, sizeof small_b);
    gguf_w_tensor(w, "t.c", TH_F32, 1, (const uint64_t[]){ 8 }, small_c, sizeof small_c);
    return w;
}

static uint8_t *small_file(uint64_t *size) {
    gguf_writer *w = small_writer(32);
    uint8_t *buf = NULL;
    th_status s = gguf_writer_to_mem(w, &buf, size);
    gguf_writer_free(w);
    if (s) { fprintf(stderr, "writer: %s\n", th_last_error()); return NULL; }
    return buf;
}

static void check_small(const gguf_file *f, uint32_t alignment) {
    uint32_t u = 0;
    int64_t i = 0;
    float x = 0;
    bool b = false;
    gguf_str str;
    CHECK(f->n_tensors == 3 && f->alignment == alignment);
    CHECK(f->n_kv == 9u + (alignment != 32));
    CHECK(gguf_get_str(f, "general.architecture", &str) && str_is(str, "test"));
    CHECK(gguf_get_u32(f, "k.u32", &u) && u == 4000000000u);
    CHECK(gguf_get_i64(f, "k.u32", &i) && i == 4000000000);
    CHECK(!gguf_get_u32(f, "k.i32", &u));                  /* negative does not fit */
    CHECK(gguf_get_i64(f, "k.i32", &i) && i == -5);
    CHECK(gguf_get_f32(f, "k.f32", &x) && x == 0.25f);
    CHECK(!gguf_get_f32(f, "k.u32", &x));
    CHECK(gguf_get_bool(f, "k.bool", &b) && b);
    CHECK(!gguf_get_bool(f, "k.u32", &b));
    const gguf_kv *a = gguf_get_arr(f, "k.arr_i16", GGUF_I16);
    CHECK(a && a->arr_n == 3 && memcmp(a->arr_data, small_i16, 6) == 0);
    a = gguf_get_arr(f, "k.arr_f64", GGUF_F64);
    CHECK(a && a->arr_n == 2 && memcmp(a->arr_data, small_f64, 16) == 0);
    a = gguf_get_arr(f, "k.arr_empty", GGUF_U8);
    CHECK(a && a->arr_n == 0);
    a = gguf_get_arr(f, "k.strs", GGUF_STRING);
    CHECK(a && a->arr_n == 4 && a->arr_strs);
    if (a && a->arr_strs)
        for (int k = 0; k < 4; k++) CHECK(str_is(a->arr_strs[k], small_strs[k]), "string %d", k);
    const gguf_tensor *t = gguf_find_tensor(f, "t.a");
    CHECK(t && t->type == TH_F32 && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 2 && t->nbytes == 32);
    CHECK(t && memcmp(t->data, small_a, 32) == 0);
    t = gguf_find_tensor(f, "t.b");
    CHECK(t && t->type == TH_Q4_0 && t->nbytes == 36 && memcmp(t->data, small_b, 36) == 0);
    t = gguf_find_tensor(f, "t.c");
    CHECK(t && t->n_dims == 1 && t->ne[0] == 8 && t->ne[1] == 1 && memcmp(t->data, small_c, 32) == 0);
    for (uint64_t k = 0; k < f->n_tensors; k++) {
        CHECK(f->tensors[k].offset % alignment == 0);
        CHECK(((uintptr_t)f->tensors[k].data - (uintptr_t)f->base) % alignment == 0);
    }
    CHECK(f->data_offset % alignment == 0);
}

static void test_writer_roundtrip(void) {
    uint64_t size;
    uint8_t *buf = small_file(&size);
    CHECK(buf != NULL);
    if (!buf) return;
    gguf_file *f;
    th_status s = gguf_parse(buf, size, &f);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (!s) {
        CHECK(f->version == 3);
        check_small(f, 32);
        /* t.c (32 bytes) is last and ends the file exactly */
        CHECK(f->data_offset + f->tensors[2].offset + 32 == size);
        gguf_close(f);
    }
    free(buf);
}

/* v2 has the same layout as v3 (64-bit counts; v3 only added big-endian files). */
static void test_version2(void) {
    uint64_t size;
    uint8_t *buf = small_file(&size);
    if (!buf) { CHECK(0); return; }
    put32_le(buf + 4, 2);
    gguf_file *f;
    th_status s = gguf_parse(buf, size, &f);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (!s) { CHECK(f->version == 2); check_small(f, 32); gguf_close(f); }
    free(buf);
}

static void test_writer_alignment_and_file(void) {
    gguf_writer *w = small_writer(256);
    char path[] = "/tmp/theseus_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) { gguf_writer_free(w); return; }
    close(fd);
    th_status s = gguf_writer_to_file(w, path);
    CHECK(s == TH_OK, "%s", th_last_error());
    uint8_t *mem;
    uint64_t msize;
    CHECK(gguf_writer_to_mem(w, &mem, &msize) == TH_OK);
    gguf_writer_free(w);
    gguf_file *f;
    s = gguf_open(path, &f);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (!s) {
        check_small(f, 256);
        uint32_t al = 0;
        CHECK(gguf_get_u32(f, "general.alignment", &al) && al == 256);
        CHECK(f->size == msize && memcmp(f->base, mem, msize) == 0); /* file and buffer agree */
        gguf_close(f);
    }
    free(mem);
    unlink(path);
    w = small_writer(32);
    CHECK(gguf_writer_to_file(w, "/nonexistent/dir/x.gguf") == TH_ERR_IO && strstr(th_last_error(), "/nonexistent/dir/x.gguf"));
    gguf_writer_free(w);
}

/* Copy every kv and tensor of a real file through the writer: same values, same bytes. */
static void test_writer_copy_fixture(void) {
    if (!has_fixtures()) SKIP("no fixtures");
    gguf_file *f, *g;
    if (gguf_open(fixture("tiny/tiny-Q4_K_M.gguf"), &f)) { CHECK(0, "%s", th_last_error()); return; }
    gguf_writer *w = gguf_writer_new(32);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_w_copy_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        gguf_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    uint8_t *buf;
    uint64_t size;
    th_status s = gguf_writer_to_mem(w, &buf, &size);
    gguf_writer_free(w);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (s) { gguf_close(f); return; }
    /* llama.cpp's layout is the canonical one, so the copy is byte-identical */
    CHECK(size == f->size && memcmp(buf, f->base, size) == 0, "copy differs (size %" PRIu64 " vs %" PRIu64 ")", size, f->size);
    s = gguf_parse(buf, size, &g);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (!s) {
        const gguf_kv *tok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
        CHECK(tok && tok->arr_n == 4096 && str_is(tok->arr_strs[2], "</s>"));
        gguf_close(g);
    }
    free(buf);
    gguf_close(f);
}

static void test_writer_errors(void) {
    gguf_writer *w = gguf_writer_new(32);
    float d[4] = { 0 };
    gguf_w_tensor(w, "t.bad", TH_F32, 1, (const uint64_t[]){ 4 }, d, 12);
    uint8_t *buf = NULL;
    uint64_t size;
    CHECK(gguf_writer_to_mem(w, &buf, &size) == TH_ERR_ARG && strstr(th_last_error(), "t.bad"), "%s", th_last_error());
    gguf_writer_free(w);
    w = gguf_writer_new(32);
    gguf_w_tensor(w, "t.q", TH_Q4_K, 1, (const uint64_t[]){ 100 }, d, 16);  /* 100 % 256 != 0 */
    CHECK(gguf_writer_to_mem(w, &buf, &size) == TH_ERR_ARG && strstr(th_last_error(), "t.q"), "%s", th_last_error());
    gguf_writer_free(w);
    w = gguf_writer_new(3);
    CHECK(gguf_writer_to_mem(w, &buf, &size) == TH_ERR_ARG && strstr(th_last_error(), "alignment"));
    gguf_writer_free(w);
}

/* Scalars of every integer width through copy_kv (the writer has no direct call for
 * them), read back through the integer getters' range rules. */
static void test_getters_all_int_types(void) {
    static const struct { uint32_t type; uint64_t bits; bool u32_ok; uint32_t u32; bool i64_ok; int64_t i64; } cases[] = {
        { GGUF_U8, 255, true, 255, true, 255 },
        { GGUF_I8, 0x80, false, 0, true, -128 },
        { GGUF_U16, 65535, true, 65535, true, 65535 },
        { GGUF_I16, 0x7fff, true, 32767, true, 32767 },
        { GGUF_I16, 0xffff, false, 0, true, -1 },
        { GGUF_U64, 4294967295ull, true, 4294967295u, true, 4294967295ll },
        { GGUF_U64, 4294967296ull, false, 0, true, 4294967296ll },
        { GGUF_U64, UINT64_MAX, false, 0, false, 0 },
        { GGUF_I64, 0x8000000000000000ull, false, 0, true, INT64_MIN },
        { GGUF_I64, 7, true, 7, true, 7 },
    };
    gguf_writer *w = gguf_writer_new(32);
    char keys[16][16];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(keys[i], sizeof keys[i], "int.%zu", i);
        gguf_kv kv = { .key = { keys[i], strlen(keys[i]) }, .type = cases[i].type, .raw = (const uint8_t *)&cases[i].bits };
        gguf_w_copy_kv(w, &kv);  /* little-endian host: the low bytes come first */
    }
    double dv = 1.5;
    gguf_kv kd = { .key = { "f.64", 4 }, .type = GGUF_F64, .raw = (const uint8_t *)&dv };
    gguf_w_copy_kv(w, &kd);
    uint8_t *buf;
    uint64_t size;
    CHECK(gguf_writer_to_mem(w, &buf, &size) == TH_OK);
    gguf_writer_free(w);
    gguf_file *f;
    th_status s = gguf_parse(buf, size, &f);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (!s) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            uint32_t u = 0;
            int64_t v = 0;
            bool ok = gguf_get_u32(f, keys[i], &u);
            CHECK(ok == cases[i].u32_ok && (!ok || u == cases[i].u32), "case %zu u32", i);
            ok = gguf_get_i64(f, keys[i], &v);
            CHECK(ok == cases[i].i64_ok && (!ok || v == cases[i].i64), "case %zu i64 %" PRId64, i, v);
            gguf_str st;
            CHECK(!gguf_get_str(f, keys[i], &st));
        }
        float x = 0;
        CHECK(gguf_get_f32(f, "f.64", &x) && x == 1.5f);
        CHECK(strcmp(gguf_vtype_name(GGUF_F64), "f64") == 0 && strcmp(gguf_vtype_name(99), "invalid type") == 0);
        gguf_close(f);
    }
    free(buf);
}

/* ---------------- malformed files ---------------- */

/* Parse a malloc'd copy of exactly n bytes (so ASan sees any overread); expect
 * TH_ERR_FORMAT with `want` in the message (NULL: any message). */
static bool expect_bad_n(const uint8_t *data, uint64_t n, const char *want, int line) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, data, n);
    gguf_file *f = (gguf_file *)1;
    th_status s = gguf_parse(copy, n, &f);
    bool ok = s == TH_ERR_FORMAT && f == NULL && strncmp(th_last_error(), "gguf: ", 6) == 0 &&
              (!want || strstr(th_last_error(), want));
    if (!ok) {
        fprintf(stderr, "  line %d: size %" PRIu64 ": status %d, message '%s', wanted '%s'\n", line, n, s,
                s ? th_last_error() : "(parsed ok)", want ? want : "");
        if (!s) gguf_close(f);
    }
    free(copy);
    return ok;
}
#define EXPECT_BAD(buf, n, want) CHECK(expect_bad_n(buf, n, want, __LINE__))

static uint8_t *dup_buf(const uint8_t *b, uint64_t n) { uint8_t *c = malloc(n); memcpy(c, b, n); return c; }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Offset of the (unique) length-prefixed string s in buf: points at its length field. */
static uint64_t find_str(const uint8_t *buf, uint64_t size, const char *s) {
    uint64_t n = strlen(s);
    for (uint64_t i = 8; i + n <= size; i++) {
        uint64_t len;
        memcpy(&len, buf + i - 8, 8);
        if (len == n && memcmp(buf + i, s, n) == 0) return i - 8;
    }
    return 0;
}

static void test_truncated_small(void) {
    uint64_t size;
    uint8_t *buf = small_file(&size);
    CHECK(buf && size > 200);
    if (!buf) return;
    int bad = 0;
    for (uint64_t n = 0; n < size; n++)
        if (!expect_bad_n(buf, n, NULL, __LINE__)) bad++;
    CHECK(bad == 0, "%d of %" PRIu64 " truncations not rejected", bad, size);
    free(buf);
}

static void test_truncated_fixture(void) {
    if (!has_fixtures()) SKIP("no fixtures");
    gguf_file *f;
    if (gguf_open(fixture("tiny/tiny-Q4_K_M.gguf"), &f)) { CHECK(0, "%s", th_last_error()); return; }
    int bad = 0, tried = 0;
    /* 400 cuts spread over the header (kvs, vocab arrays, tensor infos) plus the bytes
     * around the data section start and the end of the file */
    for (uint64_t k = 0; k < 400; k++) {
        uint64_t n = k * f->data_offset / 400 + (k * 7919) % 13;
        if (n >= f->data_offset) continue;
        tried++;
        if (!expect_bad_n(f->base, n, NULL, __LINE__)) bad++;
    }
    uint64_t extra[] = { f->data_offset - 1, f->data_offset, f->data_offset + 1, f->size - 1, f->size - 31 };
    for (size_t k = 0; k < 5; k++, tried++)
        if (!expect_bad_n(f->base, extra[k], NULL, __LINE__)) bad++;
    CHECK(bad == 0, "%d of %d truncations not rejected", bad, tried);
    gguf_close(f);
}

static void test_bad_header(void) {
    uint64_t size;
    uint8_t *buf = small_file(&size), *b;
    if (!buf) { CHECK(0); return; }
    b = dup_buf(buf, size); b[0] = 'X';
    EXPECT_BAD(b, size, "magic"); free(b);
    b = dup_buf(buf, size); put32(b + 4, 1);
    EXPECT_BAD(b, size, "version 1"); free(b);
    b = dup_buf(buf, size); put32(b + 4, 4);
    EXPECT_BAD(b, size, "version 4"); free(b);
    b = dup_buf(buf, size); put32(b + 4, 0x03000000);
    EXPECT_BAD(b, size, "big-endian"); free(b);
    b = dup_buf(buf, size); put64(b + 8, UINT64_MAX);
    EXPECT_BAD(b, size, "n_tensors 18446744073709551615"); free(b);
    b = dup_buf(buf, size); put64(b + 8, 1000);
    EXPECT_BAD(b, size, "n_tensors 1000"); free(b);
    b = dup_buf(buf, size); put64(b + 16, UINT64_MAX);
    EXPECT_BAD(b, size, "n_kv 18446744073709551615"); free(b);
    b = dup_buf(buf, size); put64(b + 16, 1ull << 40);
    EXPECT_BAD(b, size, "n_kv"); free(b);
    b = dup_buf(buf, size); put64(b + 16, (size - 24) / 14);   /* fits the byte bound, then runs out */
    EXPECT_BAD(b, size, "key #"); free(b);
    EXPECT_BAD(buf, 0, "too short");
    free(buf);
}

static void test_bad_kvs(void) {
    uint64_t size;
    uint8_t *buf = small_file(&size), *b;
    if (!buf) { CHECK(0); return; }
    uint64_t ku = find_str(buf, size, "k.u32"), ks = find_str(buf, size, "k.strs");
    uint64_t kb = find_str(buf, size, "k.bool"), ka = find_str(buf, size, "k.arr_i16");
    uint64_t kg = find_str(buf, size, "general.architecture");
    CHECK(ku && ks && kb && ka && kg);
    b = dup_buf(buf, size); put64(b + ku, UINT64_MAX);          /* key length */
    EXPECT_BAD(b, size, "string length 18446744073709551615 exceeds"); free(b);
    b = dup_buf(buf, size); put64(b + ku, 0);
    EXPECT_BAD(b, size, "empty key"); free(b);
    b = dup_buf(buf, size); put32(b + ku + 8 + 5, 13);          /* value type */
    EXPECT_BAD(b, size, "'k.u32' at offset"); free(b);
    b = dup_buf(buf, size); put32(b + ku + 8 + 5, 0xffffffffu);
    EXPECT_BAD(b, size, "value type 4294967295"); free(b);
    b = dup_buf(buf, size); put64(b + kg + 8 + 20 + 4, 1ull << 62);   /* string value length */
    EXPECT_BAD(b, size, "general.architecture"); free(b);
    b = dup_buf(buf, size); b[kb + 8 + 6 + 4] = 2;               /* bool value */
    EXPECT_BAD(b, size, "bool value 2"); free(b);
    b = dup_buf(buf, size); put32(b + ka + 8 + 9 + 4, 13);       /* array element type */
    EXPECT_BAD(b, size, "array element type 13"); free(b);
    b = dup_buf(buf, size); put64(b + ka + 8 + 9 + 8, UINT64_MAX / 2);   /* array count */
    EXPECT_BAD(b, size, "k.arr_i16"); free(b);
    b = dup_buf(buf, size); put64(b + ks + 8 + 6 + 8, 1ull << 61);       /* string array count */
    EXPECT_BAD(b, size, "array of 2305843009213693952 string"); free(b);
    b = dup_buf(buf, size); put64(b + ks + 8 + 6 + 12, UINT64_MAX - 3);  /* first element length */
    EXPECT_BAD(b, size, "k.strs"); free(b);
    free(buf);

    /* duplicates, empty key, bad alignment values and type: built with the writer */
    static const struct { const char *what, *want; } cases[] = {
        { "dup", "duplicate key" }, { "align0", "general.alignment" }, { "align3", "not a nonzero power of two" },
        { "align_i32", "expected u32" }, { "empty", "empty key" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gguf_writer *w = gguf_writer_new(32);
        gguf_w_u32(w, "a.b", 1);
        if (!strcmp(cases[i].what, "dup")) gguf_w_str(w, "a.b", "again");
        if (!strcmp(cases[i].what, "align0")) gguf_w_u32(w, "general.alignment", 0);
        if (!strcmp(cases[i].what, "align3")) gguf_w_u32(w, "general.alignment", 3);
        if (!strcmp(cases[i].what, "align_i32")) gguf_w_i32(w, "general.alignment", 32);
        if (!strcmp(cases[i].what, "empty")) gguf_w_u32(w, "", 1);
        uint8_t *m;
        uint64_t n;
        CHECK(gguf_writer_to_mem(w, &m, &n) == TH_OK);
        gguf_writer_free(w);
        EXPECT_BAD(m, n, cases[i].want);
        free(m);
    }
}

/* Hand-built file: header + one kv holding arrays nested `depth` levels. */
static uint8_t *nested_file(int depth, uint64_t *size) {
    uint8_t *b = calloc(1, 4096);
    uint64_t p = 0;
    put32(b, 0x46554747u); put32(b + 4, 3); put64(b + 8, 0); put64(b + 16, 1); p = 24;
    put64(b + p, 3); memcpy(b + p + 8, "n.a", 3); p += 11;
    put32(b + p, GGUF_ARRAY); p += 4;
    for (int d = 1; d < depth; d++) { put32(b + p, GGUF_ARRAY); put64(b + p + 4, 1); p += 12; }
    put32(b + p, GGUF_U8); put64(b + p + 4, 3); b[p + 12] = 1; b[p + 13] = 2; b[p + 14] = 3; p += 15;
    *size = p;
    return b;
}

static void test_nested_arrays(void) {
    uint64_t n;
    uint8_t *b = nested_file(3, &n);
    gguf_file *f;
    th_status s = gguf_parse(b, n, &f);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (!s) {
        const gguf_kv *kv = gguf_find(f, "n.a");
        CHECK(kv && kv->type == GGUF_ARRAY && kv->arr_type == GGUF_ARRAY && kv->arr_n == 1);
        /* copy through the writer: the nested bytes come out unchanged */
        gguf_writer *w = gguf_writer_new(32);
        gguf_w_copy_kv(w, kv);
        uint8_t *m;
        uint64_t mn;
        CHECK(gguf_writer_to_mem(w, &m, &mn) == TH_OK);
        gguf_writer_free(w);
        CHECK(mn == 32 * ((n + 31) / 32) && memcmp(m, b, n) == 0);
        free(m);
        gguf_close(f);
    }
    for (uint64_t k = 0; k < n; k++) EXPECT_BAD(b, k, NULL);
    free(b);
    b = nested_file(8, &n);
    CHECK(gguf_parse(b, n, &f) == TH_OK, "%s", th_last_error());
    if (f) gguf_close(f);
    free(b);
    b = nested_file(9, &n);
    EXPECT_BAD(b, n, "nested deeper than 8");
    free(b);
}

static void test_bad_tensors(void) {
    uint64_t size;
    uint8_t *buf = small_file(&size), *b;
    if (!buf) { CHECK(0); return; }
    /* tensor info layout after the name: n_dims u32, ne u64[n_dims], type u32, offset u64 */
    uint64_t ta = find_str(buf, size, "t.a") + 8 + 3, tb = find_str(buf, size, "t.b") + 8 + 3;
    uint64_t tc = find_str(buf, size, "t.c") + 8 + 3;
    b = dup_buf(buf, size); put32(b + ta, 0);
    EXPECT_BAD(b, size, "'t.a' (#0 at offset"); EXPECT_BAD(b, size, "n_dims 0"); free(b);
    b = dup_buf(buf, size); put32(b + ta, 5);
    EXPECT_BAD(b, size, "n_dims 5 "); free(b);
    b = dup_buf(buf, size); put32(b + ta + 4 + 16, 99);
    EXPECT_BAD(b, size, "tensor 't.a'"); EXPECT_BAD(b, size, "unknown tensor type 99"); free(b);
    b = dup_buf(buf, size); put32(b + ta + 4 + 16, 4);       /* Q4_2: removed from ggml */
    EXPECT_BAD(b, size, "unknown tensor type 4"); free(b);
    b = dup_buf(buf, size); put32(b + ta + 4 + 16, TH_GGML_TYPE_COUNT);
    EXPECT_BAD(b, size, "unknown tensor type 40"); free(b);
    b = dup_buf(buf, size); put32(b + ta + 4 + 16, TH_TYPE_COUNT);   /* past theseus's qN ids */
    EXPECT_BAD(b, size, "unknown tensor type 1009"); free(b);
    b = dup_buf(buf, size); put32(b + ta + 4 + 16, 1001);            /* q1: not a qN type */
    EXPECT_BAD(b, size, "unknown tensor type 1001"); free(b);
    b = dup_buf(buf, size); put64(b + ta + 4 + 8, 0);
    EXPECT_BAD(b, size, "dimension 1"); EXPECT_BAD(b, size, "is 0"); free(b);
    b = dup_buf(buf, size); put64(b + ta + 4, 1ull << 40); put64(b + ta + 12, 1ull << 40);
    EXPECT_BAD(b, size, "overflows"); free(b);
    b = dup_buf(buf, size); put64(b + ta + 4, 4ull << 60);  /* ne > INT64_MAX */
    EXPECT_BAD(b, size, "overflows"); free(b);
    b = dup_buf(buf, size); put64(b + tb + 4, 48);           /* Q4_0 row of 48: not a multiple of 32 */
    EXPECT_BAD(b, size, "block size 32"); EXPECT_BAD(b, size, "'t.b'"); free(b);
    b = dup_buf(buf, size); put64(b + tb + 4, 64);           /* 2x the bytes: overlaps t.c */
    EXPECT_BAD(b, size, "overlaps"); free(b);
    uint64_t off_c = tc + 4 + 8 + 4, off_b = tb + 4 + 16 + 4;
    uint64_t c_off;
    memcpy(&c_off, buf + off_c, 8);
    b = dup_buf(buf, size); memcpy(b + off_c, buf + off_b, 8);  /* t.c at t.b's offset */
    EXPECT_BAD(b, size, "overlaps tensor"); free(b);
    b = dup_buf(buf, size); put64(b + off_c, c_off + 32);       /* just past the end */
    EXPECT_BAD(b, size, "tensor 't.c' (F32, shape [8]) needs 32 bytes at data offset"); free(b);
    b = dup_buf(buf, size); put64(b + off_c, UINT64_MAX - 31);  /* offset + nbytes overflows */
    EXPECT_BAD(b, size, "'t.c'"); free(b);
    b = dup_buf(buf, size); put64(b + off_c, c_off + 4);
    EXPECT_BAD(b, size, "not a multiple of the alignment 32"); free(b);
    b = dup_buf(buf, size); put64(b + off_c - 4 - 8 - 4 - 3 - 8, 0);
    EXPECT_BAD(b, size, "empty tensor name"); free(b);
    free(buf);

    /* the brief's example: Q6_K [256,256] at data offset 1024 with only 1024 bytes after it */
    static uint8_t q6[256 * 210];
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_tensor(w, "blk.0.pad", TH_F32, 1, (const uint64_t[]){ 256 }, q6, 1024);
    gguf_w_tensor(w, "blk.3.attn_q.weight", TH_Q6_K, 2, (const uint64_t[]){ 256, 256 }, q6, sizeof q6);
    gguf_w_tensor(w, "blk.0.pad", TH_F32, 1, (const uint64_t[]){ 256 }, q6, 1024);
    uint8_t *m;
    uint64_t n;
    CHECK(gguf_writer_to_mem(w, &m, &n) == TH_OK);
    gguf_writer_free(w);
    EXPECT_BAD(m, n, "duplicate tensor name (first defined as tensor #0)");
    uint64_t q = find_str(m, n, "blk.3.attn_q.weight") + 8 + 19 + 4 + 16 + 4;
    uint64_t third = find_str(m + q, n - q, "blk.0.pad") + q;   /* rename the duplicate */
    m[third + 8] = 'X';
    put64(m + q, 0);     /* overlap with the first tensor */
    EXPECT_BAD(m, n, "tensor 'blk.3.attn_q.weight' (data offset 0, 53760 bytes) overlaps tensor 'blk.0.pad'");
    put64(m + q, 1024);  /* back in place: now valid */
    gguf_file *f;
    CHECK(gguf_parse(m, n, &f) == TH_OK, "%s", th_last_error());
    if (f) gguf_close(f);
    EXPECT_BAD(m, n - 1024 - 53760, "tensor 'blk.3.attn_q.weight' (Q6_K, shape [256,256]) needs 53760 bytes at data offset 1024 but the file has only 0 bytes after it");
    free(m);
}

/* ---------------- fuzz seeds (test_gguf --write-seeds DIR) ---------------- */

static bool save(const char *dir, const char *name, const uint8_t *b, uint64_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    bool ok = fp && fwrite(b, 1, n, fp) == n;
    if (fp) ok = fclose(fp) == 0 && ok;
    if (!ok) fprintf(stderr, "cannot write %s\n", path);
    return ok;
}

/* A real file's metadata with its arrays cut to 16 entries and every tensor shrunk to
 * 2 rows of one block (names, types and n_dims kept): small but realistic. */
static bool save_shrunk(const char *dir, const char *name, const char *rel) {
    gguf_file *f;
    if (gguf_open(fixture(rel), &f)) { fprintf(stderr, "%s\n", th_last_error()); return false; }
    gguf_writer *w = gguf_writer_new(32);
    static uint8_t zeros[4096];
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv kv = f->kv[i];
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv.key.len, kv.key.ptr);
        if (kv.type == GGUF_ARRAY && kv.arr_type == GGUF_STRING && kv.arr_n > 16) {
            const char *strs[16];
            char tmp[16][64];
            for (int k = 0; k < 16; k++) {
                snprintf(tmp[k], sizeof tmp[k], "%.*s", (int)kv.arr_strs[k].len, kv.arr_strs[k].ptr);
                strs[k] = tmp[k];
            }
            gguf_w_arr_str(w, key, strs, 16);
        } else if (kv.type == GGUF_ARRAY && kv.arr_type != GGUF_ARRAY && kv.arr_n > 16) {
            gguf_w_arr(w, key, kv.arr_type, kv.arr_data, 16);
        } else {
            gguf_w_copy_kv(w, &kv);
        }
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char tn[256];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        const th_type_info *ti = th_type_info_get(t->type);
        uint64_t ne[4] = { ti->block < 32 ? 32 : ti->block, 2, 1, 1 }, nb;
        th_row_bytes(t->type, ne[0], &nb);
        gguf_w_tensor(w, tn, t->type, t->n_dims, ne, zeros, t->n_dims > 1 ? 2 * nb : nb);
    }
    uint8_t *b;
    uint64_t n;
    bool ok = gguf_writer_to_mem(w, &b, &n) == TH_OK && save(dir, name, b, n);
    if (ok) free(b);
    gguf_writer_free(w);
    gguf_close(f);
    return ok;
}

static int write_seeds(const char *dir) {
    uint64_t n;
    uint8_t *b = small_file(&n);
    bool ok = b && save(dir, "small-align32.gguf", b, n);
    free(b);
    gguf_writer *w = small_writer(64);
    ok = ok && gguf_writer_to_mem(w, &b, &n) == TH_OK && save(dir, "small-align64.gguf", b, n);
    gguf_writer_free(w);
    free(b);
    b = nested_file(3, &n);
    ok = ok && save(dir, "nested.gguf", b, n);
    free(b);
    ok = ok && save_shrunk(dir, "tiny-Q4_K_M-shrunk.gguf", "tiny/tiny-Q4_K_M.gguf");
    ok = ok && save_shrunk(dir, "gpt-oss-mxfp4-shrunk.gguf", "arch/gpt-oss/model-Q8_0-MXFP4.gguf");
    ok = ok && save_shrunk(dir, "vocab-spm-shrunk.gguf", "vocab/ggml-vocab-llama-spm.gguf");
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) return write_seeds(argv[2]);
    RUN(test_tiny_fixtures);
    RUN(test_tiny_f32_values);
    RUN(test_arch_fixtures);
    RUN(test_vocab_fixtures);
    RUN(test_open_errors);
    RUN(test_writer_roundtrip);
    RUN(test_version2);
    RUN(test_writer_alignment_and_file);
    RUN(test_writer_copy_fixture);
    RUN(test_writer_errors);
    RUN(test_getters_all_int_types);
    RUN(test_truncated_small);
    RUN(test_truncated_fixture);
    RUN(test_bad_header);
    RUN(test_bad_kvs);
    RUN(test_nested_arrays);
    RUN(test_bad_tensors);
    return CHECK_DONE();
}
