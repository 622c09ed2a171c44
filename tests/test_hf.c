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


/* ------------------------------------------------------------ fixtures */

static const char *const FAMILIES[] = { "llama", "llama-spm", "llama3-rope", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "phi3-longrope", "qwen3moe",
                                        "mixtral", "olmoe", "mistral", "deepseek2", "deepseek3", "gpt-oss", "gpt-oss-mxfp4", "deepseek3-fp8" };
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])
static const char *PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time, there was 42 of them!";

static const char *hf_dir(const char *family) {
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ & 3];
    const char *root = getenv("HF_FIXTURES");
    snprintf(b, sizeof buf[0], "%s/%s", root && *root ? root : "tests/fixtures/hf", family);
    return b;
}

static float *run_logits(th_model *m, const int32_t *tok, int n) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = (uint32_t)n;
    cp.n_seq_max = 1;
    cp.kv_block = 16;
    cp.kv_type = TH_KV_F32;
    cp.n_threads = 2;
    th_context *c = NULL;
    if (th_context_new(m, &cp, &c)) { fprintf(stderr, "context: %s\n", th_last_error()); return NULL; }
    int nv = th_model_n_vocab(m);
    float *out = malloc((size_t)n * nv * sizeof(float));
    int8_t *want = malloc((size_t)n);
    memset(want, 1, (size_t)n);
    th_batch b = { .n_tokens = n, .token = tok, .logits = want };
    th_status s = th_decode(c, &b);
    if (s) fprintf(stderr, "decode: %s\n", th_last_error());
    for (int j = 0; !s && j < n; j++) memcpy(out + (size_t)j * nv, th_get_logits(c, j), (size_t)nv * 4);
    free(want);
    th_context_free(c);
    if (s) { free(out); return NULL; }
    return out;
}

/* Our logits from the directory against transformers' (rel-L2 <= 1e-4, top-1
 * equal at every position); the prompt tokenized by us equals the golden's tokens. */
static void test_hf_logits(void) {
    for (size_t i = 0; i < N_FAMILIES; i++) {
        char gp[600];
        snprintf(gp, sizeof gp, "%s/golden.logits", hf_dir(FAMILIES[i]));
        thlg g;
        if (!thlg_load(gp, &g)) { CHECK(0, "cannot read %s", gp); continue; }
        th_model *m = NULL;
        th_status s = th_model_load(hf_dir(FAMILIES[i]), NULL, &m);
        CHECK(s == TH_OK, "load %s: %s", FAMILIES[i], th_last_error());
        if (!s) {
            th_token tok[256];
            size_t n = 0;
            CHECK(th_tokenize(m, PROMPT, strlen(PROMPT), true, false, tok, 256, &n) == TH_OK);
            CHECK(n == g.n && !memcmp(tok, g.tok, n * 4), "%s: our tokens of the prompt differ from the tokenizers library's",
                  FAMILIES[i]);
            float *lg = run_logits(m, g.tok, (int)g.n);
            CHECK(lg && (uint32_t)th_model_n_vocab(m) == g.nv);
            if (lg) {
                double worst, top1;
                int wp;
                compare_logits(lg, g.logits, (int)g.n, (int)g.nv, &worst, &wp, &top1);
                printf("  %-12s rel_l2_max=%.2e (pos %2d) top1=%.3f\n", FAMILIES[i], worst, wp, top1);
                /* MXFP4 experts: our MXFP4 dot product quantizes the activations to Q8_0 (as ggml's does), so
                 * 5e-2 here (seen 1.8e-2; a wrong nibble order gave 1.26); exact through F32 in t_hf.sh */
                double tol = strstr(FAMILIES[i], "mxfp4") ? 5e-2 : 1e-4;
                CHECK(worst <= tol && top1 == 1.0, "%s: rel-L2 %.3e, top-1 %.3f", FAMILIES[i], worst, top1);
            }
            free(lg);
        }
        th_model_free(m);
        thlg_free(&g);
    }
}

/* theseus convert's file, loaded by the GGUF path, gives the directory's logits. */
static void test_convert_same_logits(void) {
    for (size_t i = 0; i < N_FAMILIES; i++) {
        char gp[600];
        snprintf(gp, sizeof gp, "%s/golden.logits", hf_dir(FAMILIES[i]));
        thlg g;
        if (!thlg_load(gp, &g)) { CHECK(0, "cannot read %s", gp); continue; }
        const char *out = tmp_path("converted.gguf");
        CHECK(th_hf_convert(hf_dir(FAMILIES[i]), out) == TH_OK, "convert %s: %s", FAMILIES[i], th_last_error());
        th_model *a = NULL, *b = NULL;
        CHECK(th_model_load(hf_dir(FAMILIES[i]), NULL, &a) == TH_OK && th_model_load(out, NULL, &b) == TH_OK, "%s", th_last_error());
        float *la = a ? run_logits(a, g.tok, (int)g.n) : NULL, *lb = b ? run_logits(b, g.tok, (int)g.n) : NULL;
        CHECK(la && lb);
        if (la && lb) {
            double worst, top1;
            int wp;
            compare_logits(lb, la, (int)g.n, (int)g.nv, &worst, &wp, &top1);
            CHECK(worst == 0.0, "%s: converted file's logits differ from the directory's (rel-L2 %.3e)", FAMILIES[i], worst);
        }
        free(la);
        free(lb);
        th_model_free(a);
        th_model_free(b);
        thlg_free(&g);
    }
}

/* Every case of the vocab suites' inputs: our ids from tokenizer.json equal the
 * tokenizers library's (tokens.txt; added tokens matched in the text as HF does). */
static void tokenizer_ids(const char *const *names, size_t n_names) {
    const char *inps[] = { "bert-bge", "deepseek-llm", "falcon", "gpt-2", "llama-spm" };
    for (size_t i = 0; i < n_names; i++) {
        char tp[600];
        snprintf(tp, sizeof tp, "%s/tokens.txt", hf_dir(names[i]));
        FILE *tf = fopen(tp, "r");
        if (!tf) { CHECK(0, "cannot read %s", tp); continue; }
        th_model_params mp = th_model_default_params();
        mp.vocab_only = true;
        th_model *m = NULL;
        CHECK(th_model_load(hf_dir(names[i]), &mp, &m) == TH_OK, "%s", th_last_error());
        int n_cases = 0, bad = 0;
        char *line = NULL;
        size_t lcap = 0;
        for (size_t k = 0; m && k < sizeof inps / sizeof inps[0]; k++) {
            char ip[300];
            snprintf(ip, sizeof ip, "vocab/ggml-vocab-%s.gguf.inp", inps[k]);
            FILE *f = fopen(fixture(ip), "rb");
            if (!f) { CHECK(0, "cannot read %s", fixture(ip)); continue; }
            static char buf[1 << 20];
            size_t len = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[len] = 0;
            const char *sep = "\n__ggml_vocab_test__\n";
            for (char *p = buf; p < buf + len;) {
                char *e = strstr(p, sep);
                size_t cl = e ? (size_t)(e - p) : strlen(p);
                if (cl > 0) {
                    th_token tok[8192];
                    size_t n = 0;
                    th_status s = th_tokenize(m, p, cl, false, true, tok, 8192, &n);
                    if (getline(&line, &lcap, tf) < 0) { CHECK(0, "%s: fewer lines than cases", tp); break; }
                    char want[1 << 16];
                    size_t w = 0;
                    want[0] = 0;
                    for (size_t j = 0; !s && j < n && w < sizeof want - 16; j++) w += (size_t)sprintf(want + w, "%s%d", j ? " " : "", tok[j]);
                    line[strcspn(line, "\n")] = 0;
                    if (s || strcmp(want, line)) {
                        if (bad++ < 3) fprintf(stderr, "  %s: case %d (%.40s...): ours '%.200s', tokenizers '%.200s'\n", names[i],
                                               n_cases, p, want, line);
                    }
                    n_cases++;
                }
                if (!e) break;
                p = e + strlen(sep);
            }
        }
        printf("  %-12s %d cases, %d differ\n", names[i], n_cases, bad);
        CHECK(bad == 0 && n_cases > 100, "%s: %d of %d cases differ", names[i], bad, n_cases);
        free(line);
        fclose(tf);
        th_model_free(m);
    }
}

static void test_hf_tokenizer_ids(void) { tokenizer_ids(FAMILIES, N_FAMILIES); }

/* Tokenizer-only fixtures (make_tok_fixtures.py): Metaspace "first" / "always", WordPiece. */
static void test_hf_tokenizer_kinds(void) {
    static const char *const TOKS[] = { "tok/metaspace-first", "tok/metaspace-always", "tok/wordpiece", "tok/unigram" };
    tokenizer_ids(TOKS, sizeof TOKS / sizeof TOKS[0]);
    /* special_cases.txt: "text<TAB>ids" with special tokens inside the text */
    for (size_t i = 0; i < sizeof TOKS / sizeof TOKS[0]; i++) {
        char p[600], line[1024];
        snprintf(p, sizeof p, "%s/special_cases.txt", hf_dir(TOKS[i]));
        FILE *f = fopen(p, "r");
        th_model_params mp = th_model_default_params();
        mp.vocab_only = true;
        th_model *m = NULL;
        CHECK(f && th_model_load(hf_dir(TOKS[i]), &mp, &m) == TH_OK, "%s: %s", p, th_last_error());
        int n_cases = 0;
        while (f && m && fgets(line, sizeof line, f)) {
            char *tab = strchr(line, '\t');
            if (!tab) continue;
            *tab = 0;
            tab[strcspn(tab + 1, "\n") + 1] = 0;
            th_token tok[256];
            size_t n = 0;
            char got[2048] = "";
            size_t w = 0;
            if (th_tokenize(m, line, strlen(line), false, true, tok, 256, &n) == TH_OK)
                for (size_t j = 0; j < n; j++) w += (size_t)snprintf(got + w, sizeof got - w, "%s%d", j ? " " : "", tok[j]);
            CHECK(!strcmp(got, tab + 1), "%s: '%s': ours '%s', tokenizers '%s'", TOKS[i], line, got, tab + 1);
            n_cases++;
        }
        CHECK(n_cases == 5, "%s: %d cases", p, n_cases);
        if (f) fclose(f);
        th_model_free(m);
    }
}

/* ------------------------------------------------------------ twins of the arch fixtures */

/* Writes dir/model.safetensors with zeros for every "name dtype d0,d1,.." line of list. */
static bool write_zero_model(const char *list, const char *out) {
    FILE *f = fopen(list, "r");
    if (!f) return false;
    size_t hcap = 1 << 20, hl = 0;
    char *h = malloc(hcap), name[256], dtype[16], dims[128];
    uint64_t off = 0;
    hl += (size_t)snprintf(h + hl, hcap - hl, "{");
    while (fscanf(f, "%255s %15s %127s", name, dtype, dims) == 3) {
        uint64_t n = 4;
        char shape[160] = "";
        size_t sl = 0;
        for (char *d = strtok(dims, ","); d; d = strtok(NULL, ",")) {
            n *= strtoull(d, NULL, 10);
            sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%s", sl ? "," : "", d);
        }
        hl += (size_t)snprintf(h + hl, hcap - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}",
                               off ? "," : "", name, shape, (unsigned long long)off, (unsigned long long)(off + n));
        off += n;
    }
    fclose(f);
    hl += (size_t)snprintf(h + hl, hcap - hl, "}");
    FILE *o = fopen(out, "wb");
    bool ok = o != NULL;
    uint64_t hl64 = hl;
    if (ok) ok = fwrite(&hl64, 8, 1, o) == 1 && fwrite(h, 1, hl, o) == hl;
    static const char zeros[4096];
    for (uint64_t left = off; ok && left > 0;) {
        size_t k = left < sizeof zeros ? (size_t)left : sizeof zeros;
        ok = fwrite(zeros, 1, k, o) == k;
        left -= k;
    }
    if (o && fclose(o) != 0) ok = false;
    free(h);
    return ok;
}

static bool copy_file(const char *from, const char *to) {
    size_t n;
    FILE *f = fopen(from, "rb");
    if (!f) return false;
    static char buf[1 << 20];
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return write_file(to, buf, n);
}

static bool is_tokenizer_key(gguf_str k) { return k.len >= 10 && !memcmp(k.ptr, "tokenizer.", 10); }

/* The converted twin has the llama.cpp fixture's tensor names, shapes and types
 * and its metadata keys (tokenizer keys aside: our fixtures' vocabularies are
 * byte-level BPE, the arch fixtures' SPM). */
static void test_twins_match_arch(void) {
    const char *twins[][2] = { { "llama", "llama3-rope" }, { "qwen2", "qwen2" }, { "qwen3", "qwen3" }, { "gemma2", "gemma2" },
                               { "gemma3", "gemma3" }, { "phi3", "phi3" }, { "deepseek2", "deepseek2" },
                               { "deepseek2-qlora", "deepseek3" }, { "gpt-oss", "gpt-oss" } };
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++) {
        const char *fam = twins[i][0];
        char src[600], dst[600], ref[300];
        const char *d = tmp_path(fam);
        mkdir(d, 0755);
        snprintf(src, sizeof src, "%s/twins/%s/config.json", hf_dir(""), fam);
        snprintf(dst, sizeof dst, "%s/config.json", d);
        CHECK(copy_file(src, dst), "%s", src);
        const char *tf[] = { "tokenizer.json", "tokenizer_config.json" };
        for (int k = 0; k < 2; k++) {
            snprintf(src, sizeof src, "%s/%s", hf_dir(twins[i][1]), tf[k]);
            snprintf(dst, sizeof dst, "%s/%s", d, tf[k]);
            CHECK(copy_file(src, dst), "%s", src);
        }
        snprintf(src, sizeof src, "%s/twins/%s/tensors.txt", hf_dir(""), fam);
        snprintf(dst, sizeof dst, "%s/model.safetensors", d);
        CHECK(write_zero_model(src, dst), "%s", src);
        gguf_file *ours = NULL, *theirs = NULL;
        snprintf(ref, sizeof ref, "arch/%s/model-F32.gguf", fam);
        CHECK(hf_open_as_gguf(d, &ours) == TH_OK, "%s: %s", fam, th_last_error());
        CHECK(gguf_open(fixture(ref), &theirs) == TH_OK, "%s", th_last_error());
        if (ours && theirs) {
            int bad = 0;
            CHECK(ours->n_tensors == theirs->n_tensors, "%s: %llu tensors, llama.cpp's fixture %llu", fam,
                  (unsigned long long)ours->n_tensors, (unsigned long long)theirs->n_tensors);
            for (uint64_t t = 0; t < theirs->n_tensors; t++) {
                const gguf_tensor *b = &theirs->tensors[t];
                char nm[256];
                snprintf(nm, sizeof nm, "%.*s", (int)b->name.len, b->name.ptr);
                const gguf_tensor *a = gguf_find_tensor(ours, nm);
                bool same = a && a->n_dims == b->n_dims && a->type == b->type;
                for (uint32_t k = 0; same && k < b->n_dims; k++) same = a->ne[k] == b->ne[k];
                if (!same && bad++ < 5) fprintf(stderr, "  %s: tensor %s %s\n", fam, nm, a ? "differs in shape or type" : "missing");
            }
            for (uint64_t k = 0; k < theirs->n_kv; k++) {
                gguf_str key = theirs->kv[k].key;
                char kn[256];
                snprintf(kn, sizeof kn, "%.*s", (int)key.len, key.ptr);
                const gguf_kv *a = gguf_find(ours, kn);
                if (!is_tokenizer_key(key) && (!a || a->type != theirs->kv[k].type) && bad++ < 10)
                    fprintf(stderr, "  %s: metadata key %s %s\n", fam, kn, a ? "has another type" : "missing");
            }
            for (uint64_t k = 0; k < ours->n_kv; k++) {
                gguf_str key = ours->kv[k].key;
                char kn[256];
                snprintf(kn, sizeof kn, "%.*s", (int)key.len, key.ptr);
                if (!is_tokenizer_key(key) && !gguf_find(theirs, kn) && bad++ < 10)
                    fprintf(stderr, "  %s: metadata key %s is not in llama.cpp's fixture\n", fam, kn);
            }
            printf("  %-8s %llu tensors, %llu keys: %d differences\n", fam, (unsigned long long)ours->n_tensors,
                   (unsigned long long)ours->n_kv, bad);
            CHECK(bad == 0, "%s: %d differences from the llama.cpp fixture", fam, bad);
        }
        gguf_close(ours);
        gguf_close(theirs);
    }
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
    RUN(test_hf_logits);
    RUN(test_convert_same_logits);
    RUN(test_hf_tokenizer_ids);
    RUN(test_hf_tokenizer_kinds);
    RUN(test_twins_match_arch);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return CHECK_DONE();
}
