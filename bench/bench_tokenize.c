/* bench_tokenize.c — tokenization speed: ~1 MiB of text (the vocab fixtures'
 * test inputs repeated, plus generated English-like prose with digits,
 * punctuation, code and some non-Latin text) tokenized with every vocabulary we
 * have; prints tokens, seconds and MB/s per vocab, wall clock and CPU time
 * (best of 3 runs; the CPU figure is the one to trust on a shared machine).
 *   build/bench/bench_tokenize [MiB]   ($SHARED, $THESEUS_MODEL as the tests) */
#include "tokenizer/tokenizer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void append(char **buf, size_t *n, size_t *cap, const char *s, size_t l) {
    if (*n + l + 1 > *cap) {
        while (*n + l + 1 > *cap) *cap = *cap ? *cap * 2 : 1 << 20;
        *buf = realloc(*buf, *cap);
        if (!*buf) { fprintf(stderr, "out of memory\n"); exit(1); }
    }
    memcpy(*buf + *n, s, l);
    *n += l;
}

static char *make_text(const char *shared, size_t target, size_t *len) {
    static const char *const words[] = { "the", "of", "and", "tokenizer", "model", "inference", "Paris", "is",
        "capital", "France", "engine", "quickly", "don't", "we'll", "it's", "GPU", "2024", "3.14159", "x", "hello",
        "world", "über", "naïve", "café", "Москва", "東京", "नमस्ते", "🦙", "(", ")", "{", "}", ";", "==", "->" };
    static const char *const seps[] = { " ", " ", " ", " ", ", ", ". ", "\n", "  ", "\t", ": " };
    char *buf = NULL;
    size_t n = 0, cap = 0;
    static const char *const inps[] = { "gpt-2", "llama-spm", "bert-bge", "falcon", "deepseek-llm" };
    for (size_t k = 0; k < sizeof inps / sizeof inps[0]; k++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/fixtures/vocab/ggml-vocab-%s.gguf.inp", shared, inps[k]);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        char chunk[8192];
        size_t got = fread(chunk, 1, sizeof chunk, f);
        fclose(f);
        for (int rep = 0; rep < 20; rep++) append(&buf, &n, &cap, chunk, got);
    }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    while (n < target) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        const char *w = words[s % (sizeof words / sizeof words[0])];
        append(&buf, &n, &cap, w, strlen(w));
        const char *sp = seps[(s >> 20) % (sizeof seps / sizeof seps[0])];
        append(&buf, &n, &cap, sp, strlen(sp));
    }
    *len = n;
    return buf;
}

static void bench_one(const char *path, const char *text, size_t len) {
    gguf_file *f;
    th_vocab *v;
    if (gguf_open(path, &f) != TH_OK) { printf("%-40s (missing)\n", path); return; }
    if (th_vocab_load(f, &v) != TH_OK) { printf("%-40s %s\n", path, th_last_error()); gguf_close(f); return; }
    size_t cap = len + 16, n = 0;
    th_token *ids = malloc(cap * sizeof *ids);
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (th_vocab_tokenize(v, text, len, false, true, ids, cap, &n) != TH_OK) {
            printf("%-40s tokenize failed: %s\n", path, th_last_error());
            break;
        }
        double t = clock_s(CLOCK_MONOTONIC) - t0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (t < best) best = t;
        if (c < best_cpu) best_cpu = c;
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    printf("%-34s %-6s %-13s %8zu tokens  %6.3f s %7.2f MB/s   (cpu %6.3f s %7.2f MB/s)\n", name,
           th_vocab_model_name(v), th_vocab_pre_name(v), n, best, (double)len / 1e6 / best, best_cpu,
           (double)len / 1e6 / best_cpu);
    free(ids);
    th_vocab_free(v);
    gguf_close(f);
}

int main(int argc, char **argv) {
    double mib = argc > 1 ? atof(argv[1]) : 1.0;
    const char *shared = getenv("SHARED");
    if (!shared || !*shared) shared = "../shared";
    size_t len;
    char *text = make_text(shared, (size_t)(mib * 1024 * 1024), &len);
    printf("text: %zu bytes\n", len);
    static const char *const vocabs[] = { "gpt-2", "llama-spm", "bert-bge", "falcon", "deepseek-llm" };
    char p[1024];
    for (size_t k = 0; k < sizeof vocabs / sizeof vocabs[0]; k++) {
        snprintf(p, sizeof p, "%s/fixtures/vocab/ggml-vocab-%s.gguf", shared, vocabs[k]);
        bench_one(p, text, len);
    }
    const char *m = getenv("THESEUS_MODEL");
    bench_one(m && *m ? m : "models/SmolLM2-135M-Instruct.Q4_1.gguf", text, len);
    free(text);
    return 0;
}
