/* fuzz_safetensors.c — libFuzzer target for the Hugging Face readers (src/hf/).
 * An input starting with 'T' is the rest as a tokenizer.json: written to a
 * directory of this process and translated (hf_tok_write) into a GGUF writer for
 * 512 embedding rows, then serialized and parsed back. Any other input is a
 * safetensors file for st_parse. On success every tensor is touched: its data
 * must lie inside the input after the header, nbytes = elements x dtype size,
 * the tensors (sorted by name) cover the data area exactly and can be found by
 * name; the metadata strings are read. A failed parse must leave *out NULL and
 * set a message. An input starting with 'C' is: one byte choosing a fixture of
 * tests/fixtures/hf (run from the repository root), then a config.json for that
 * fixture's weights and tokenizer (linked into a directory of this process):
 * translated (hf_conv_open, MLA / GPT-OSS / MXFP4 paths included) and, on
 * success, laid out in memory and parsed back. */
#include "hf/hf.h"
#include "hf/safetensors.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile uint8_t sink;

static void check_file(const st_file *f, const uint8_t *data, size_t size) {
    uint64_t total = 0;
    for (size_t i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        if (t->data < data + f->data_offset || t->nbytes > size || t->data + t->nbytes > data + size) __builtin_trap();
        if (t->nbytes != t->n_elem * st_dtype_size(t->dtype)) __builtin_trap();
        if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1];
        if (st_find(f, t->name) != t) __builtin_trap();
        total += t->nbytes;
    }
    if (total != size - f->data_offset) __builtin_trap();
    for (size_t i = 0; i < f->n_meta; i++) sink ^= (uint8_t)(strlen(f->meta_key[i]) + strlen(f->meta_val[i]));
}

static void fuzz_tokenizer(const uint8_t *data, size_t size) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_safetensors.%d", (int)getpid());
        mkdir(dir, 0700);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(data, 1, size, fp);
    fclose(fp);
    gguf_writer *w = gguf_writer_new(32);
    if (!w) return;
    if (hf_tok_write(dir, 512, w) == TH_OK) {
        uint8_t *buf;
        uint64_t n;
        gguf_file *g = NULL;
        if (gguf_writer_to_mem(w, &buf, &n) == TH_OK) {
            if (gguf_parse(buf, n, &g) != TH_OK) __builtin_trap();   /* what we write must read back */
            const gguf_kv *toks = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
            if (!toks || toks->arr_n != 512) __builtin_trap();
            gguf_close(g);
            free(buf);
        }
    } else if (!th_last_error()[0]) {
        __builtin_trap();
    }
    gguf_writer_free(w);
}

static void fuzz_config(const uint8_t *data, size_t size) {
    static const char *const fams[] = { "deepseek3", "deepseek2", "gpt-oss", "gpt-oss-mxfp4", "qwen3moe", "gemma3", "phi3", "llama",
                                        "deepseek3-fp8" };
    static char dir[64];
    static int linked = -1;
    if (size < 1) return;
    int f = data[0] % (int)(sizeof fams / sizeof fams[0]);
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_hfconfig.%d", (int)getpid());
        mkdir(dir, 0700);
    }
    char path[256], src[512];
    if (linked != f) {   /* the chosen fixture's weights and tokenizer beside the config */
        static const char *const files[] = { "model.safetensors", "tokenizer.json", "tokenizer_config.json" };
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            unlink(path);
            char *cwd = getcwd(NULL, 0);
            snprintf(src, sizeof src, "%s/tests/fixtures/hf/%s/%s", cwd ? cwd : ".", fams[f], files[i]);
            free(cwd);
            if (symlink(src, path) != 0) return;
        }
        linked = f;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(data + 1, 1, size - 1, fp);
    fclose(fp);
    th_clear_error();
    hf_conv *c = NULL;
    if (hf_conv_open(dir, &c) == TH_OK) {
        gguf_file *g = NULL;
        if (hf_conv_to_gguf(c, &g) == TH_OK) {
            for (uint64_t i = 0; i < g->n_tensors; i++)
                if (g->tensors[i].nbytes) sink ^= ((const uint8_t *)g->tensors[i].data)[g->tensors[i].nbytes - 1];
            gguf_close(g);
        }
        hf_conv_free(c);
    } else if (c || !th_last_error()[0]) {
        __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && data[0] == 'C') {
        fuzz_config(data + 1, size - 1);
        return 0;
    }
    if (size > 0 && data[0] == 'T') {
        fuzz_tokenizer(data + 1, size - 1);
        return 0;
    }
    st_file *f = (st_file *)(uintptr_t)1;
    th_clear_error();
    th_status s = st_parse(data, size, "fuzz", &f);
    if (s == TH_OK) {
        if (!f) __builtin_trap();
        check_file(f, data, size);
        st_close(f);
    } else if (f || !th_last_error()[0]) {
        __builtin_trap();
    }
    return 0;
}
