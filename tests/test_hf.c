/* test_hf.c — Hugging Face models (src/hf/): the safetensors reader on good and
 * malformed files (header length, dtypes, sizes, overlapping / uncovered ranges,
 * metadata), sharded sets (a shard missing from the index), config.json errors
 * (a key of the wrong type, an unsupported model_type), and the fixtures of
 * tests/fixtures/hf: our logits from each directory against transformers'
 * float32 logits (rel-L2 <= 1e-4, top-1 equal), the converted GGUF giving the
 * same logits as the directory, the converted file's tensor names, shapes and
 * metadata keys against the llama.cpp-made arch fixture of the same family, and
 * tokenizer ids against the tokenizers library's. */
#include "check.h"
#include "logits.h"
#include "hf/hf.h"
#include "hf/safetensors.h"
#include "gguf/gguf.h"
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

/* A safetensors file's bytes: u64 header length, the header, data_len bytes of data. */
static uint8_t *st_bytes(const char *header, uint64_t hl_override, uint64_t data_len, uint64_t *size) {
    uint64_t hl = strlen(header);
    *size = 8 + hl + data_len;
    uint8_t *b = calloc(1, (size_t)*size);
    uint64_t h = hl_override ? hl_override : hl;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(h >> (8 * i));
    memcpy(b + 8, header, hl);
    for (uint64_t i = 0; i < data_len; i++) b[8 + hl + i] = (uint8_t)i;
    return b;
}

/* Parse; expect failure with a message containing want (NULL: expect success). */
static void expect(const char *header, uint64_t hl_override, uint64_t data_len, const char *want) {
    uint64_t size;
    uint8_t *b = st_bytes(header, hl_override, data_len, &size);
    st_file *f = NULL;
    th_status s = st_parse(b, size, "test.safetensors", &f);
    if (!want) CHECK(s == TH_OK && f, "parse failed: %s", th_last_error());
    else {
        CHECK(s != TH_OK, "parse of %s succeeded, wanted an error with '%s'", header, want);
        if (s) CHECK(strstr(th_last_error(), want) && strstr(th_last_error(), "test.safetensors"), "message: %s (wanted '%s')",
                     th_last_error(), want);
    }
    st_close(f);
    free(b);
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

/* ------------------------------------------------------------ safetensors */

static void test_st_good(void) {
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}  ";
    uint64_t size;
    uint8_t *b = st_bytes(h, 0, 28, &size);
    st_file *f = NULL;
    CHECK(st_parse(b, size, "good", &f) == TH_OK, "%s", th_last_error());
    if (f) {
        const st_tensor *a = st_find(f, "a"), *t = st_find(f, "b");
        CHECK(a && t && !st_find(f, "c"));
        if (a && t) {
            CHECK(a->dtype == ST_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->nbytes == 24);
            CHECK(a->data == b + 8 + strlen(h) && t->data == a->data + 24 && t->dtype == ST_F16);
        }
        CHECK(f->n_meta == 1 && !strcmp(f->meta_key[0], "format") && !strcmp(f->meta_val[0], "pt"));
    }
    st_close(f);
    free(b);
    expect("{}", 0, 0, NULL);                                                   /* no tensors, no data */
    expect("{\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,2]}}", 0, 2, NULL);  /* a scalar */
}

static void test_st_header_length(void) {
    expect("{}", 1000, 0, "runs past the end of the file");
    expect("{}", (uint64_t)ST_MAX_HEADER + 1, 0, "over the");
    uint8_t small[4] = { 0 };
    st_file *f = NULL;
    CHECK(st_parse(small, 4, "test.safetensors", &f) != TH_OK && strstr(th_last_error(), "too short"));
    expect("[1,2]", 0, 0, "does not start with '{'");
    expect("{\"a\":", 0, 0, "not valid JSON");
    expect("{} x", 0, 0, "after the header");
}

static void test_st_dtype_and_shape(void) {
    expect("{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 0, 1, "dtype 'F4' is not supported");
    expect("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, "field 'dtype'");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 8, "needs 3 elements");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 0, 8, "field 'shape'");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 0, 8, "field 'shape'");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 0, 8, "overflows");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 0, 8, "field 'data_offsets'");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,80]}}", 0, 8, "not inside the data area");
    expect("{\"a\":7}", 0, 0, "tensor 'a' is not an object");
    expect("{\"__metadata__\":{\"k\":1}}", 0, 0, "__metadata__ value of 'k'");
}

static void test_st_ranges(void) {
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 12, "overlap");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, "overlap");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 12, "unused");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 12, "data area has 12");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 0, 16, "appears twice");
}

/* A directory whose index names a shard that is not there. */
static void test_shard_missing(void) {
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    uint64_t size;
    uint8_t *b = st_bytes(h, 0, 8, &size);
    mkdir(tmp_path("shards"), 0755);
    CHECK(write_file(tmp_path("shards/model-00001-of-00002.safetensors"), b, (size_t)size));
    const char *idx = "{\"metadata\":{},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                      "\"b\":\"model-00002-of-00002.safetensors\"}}";
    CHECK(write_file(tmp_path("shards/model.safetensors.index.json"), idx, strlen(idx)));
    st_set *s = NULL;
    CHECK(st_set_open(tmp_path("shards"), &s) != TH_OK);
    CHECK(strstr(th_last_error(), "model-00002-of-00002.safetensors") && strstr(th_last_error(), "missing") &&
          strstr(th_last_error(), "'b'"), "message: %s", th_last_error());
    /* the index says a tensor is in a shard that does not hold it */
    const char *idx2 = "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"z\":\"model-00001-of-00002.safetensors\"}}";
    CHECK(write_file(tmp_path("shards/model.safetensors.index.json"), idx2, strlen(idx2)));
    CHECK(st_set_open(tmp_path("shards"), &s) != TH_OK && strstr(th_last_error(), "'z'"), "%s", th_last_error());
    const char *idx3 = "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\"}}";
    CHECK(write_file(tmp_path("shards/model.safetensors.index.json"), idx3, strlen(idx3)));
    CHECK(st_set_open(tmp_path("shards"), &s) == TH_OK, "%s", th_last_error());
    if (s) CHECK(st_set_find(s, "a", NULL) && !st_set_find(s, "b", NULL));
    st_set_close(s);
    free(b);
}

/* ------------------------------------------------------------ config.json */

static void expect_config(const char *config, const char *want) {
    mkdir(tmp_path("cfg"), 0755);
    CHECK(write_file(tmp_path("cfg/config.json"), config, strlen(config)));
    const char *h = "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[4,2],\"data_offsets\":[0,32]}}";
    uint64_t size;
    uint8_t *b = st_bytes(h, 0, 32, &size);
    CHECK(write_file(tmp_path("cfg/model.safetensors"), b, (size_t)size));
    free(b);
    hf_conv *c = NULL;
    th_status s = hf_conv_open(tmp_path("cfg"), &c);
    CHECK(s != TH_OK, "config %s accepted", config);
    if (s) CHECK(strstr(th_last_error(), want), "message: %s (wanted '%s')", th_last_error(), want);
    hf_conv_free(c);
}

static void test_config_errors(void) {
    expect_config("{\"model_type\":\"llama\",\"num_hidden_layers\":1,\"hidden_size\":2,\"num_attention_heads\":\"1\","
                  "\"intermediate_size\":4,\"vocab_size\":4,\"rms_norm_eps\":1e-5}",
                  "key 'num_attention_heads' must be a non-negative integer");
    expect_config("{\"model_type\":\"llama\",\"num_hidden_layers\":1,\"hidden_size\":2,\"num_attention_heads\":1,"
                  "\"intermediate_size\":4,\"vocab_size\":4,\"rms_norm_eps\":\"small\"}", "key 'rms_norm_eps' must be a number");
    expect_config("{\"model_type\":\"llama\",\"num_hidden_layers\":1,\"hidden_size\":2,\"num_attention_heads\":1,"
                  "\"intermediate_size\":4,\"vocab_size\":4}", "key 'rms_norm_eps' is missing");
    expect_config("{\"model_type\":\"llama\",\"num_hidden_layers\":1,\"hidden_size\":2,\"num_attention_heads\":1,"
                  "\"intermediate_size\":4,\"vocab_size\":4,\"rms_norm_eps\":1e-5,\"tie_word_embeddings\":1}",
                  "key 'tie_word_embeddings' must be true or false");
    expect_config("{\"model_type\":\"bloom\"}", "model_type 'bloom' is not supported");
    expect_config("{\"architectures\":[\"X\"]}", "'model_type' is missing");
    expect_config("[1]", "not a JSON object");
}

int main(int argc, char **argv) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_hf.%d", (int)getpid());
    mkdir(tmpdir, 0755);
    RUN(test_st_good);
    RUN(test_st_header_length);
    RUN(test_st_dtype_and_shape);
    RUN(test_st_ranges);
    RUN(test_shard_missing);
    RUN(test_config_errors);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return CHECK_DONE();
}
