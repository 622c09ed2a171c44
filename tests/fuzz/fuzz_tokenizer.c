/* fuzz_tokenizer.c — libFuzzer target for the tokenizers: random bytes go into
 * th_vocab_tokenize (every vocabulary we have: the five llama.cpp vocab fixtures,
 * the tiny SPM vocab, the default model's SmolLM2 vocab), with and without
 * special-token parsing and BOS/EOS, with a too-small output buffer too; the ids
 * are decoded again, and random ids go through token_to_piece and the streaming
 * UTF-8 guard. Properties checked (trap on failure):
 *   - byte-level BPE with all 256 byte tokens: decode(encode(x), special) == x
 *     for valid UTF-8 x (Falcon's vocab lacks some bytes; those are dropped, as
 *     llama.cpp drops them);
 *   - TH_ERR_CAPACITY reports the same count and the same first ids;
 *   - SPM merged word by word (the fast path) == SPM merged in one pass;
 *   - the streaming guard only ever emits valid UTF-8.
 * Vocabularies: $SHARED/fixtures (default ../shared), $THESEUS_MODEL
 * (default models/SmolLM2-135M-Instruct.Q4_1.gguf), Gemma 3's (models/, when
 * fetched) and a SentencePiece vocabulary built here with byte fallback but no
 * piece for '▁' (three byte tokens a space: more tokens than bytes, the case
 * that once overflowed the server's buffer); missing ones are skipped. */
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCABS 12
static th_vocab *vocabs[MAX_VOCABS];
static gguf_file *files[MAX_VOCABS];
static int n_vocabs;
static bool all_bytes[MAX_VOCABS];   /* byte-level vocab with a token for each of the 256 bytes */

static bool has_all_bytes(const th_vocab *v) {
    if (strcmp(th_vocab_model_name(v), "gpt2")) return false;
    for (int b = 0; b < 256; b++) {
        int l;
        const char *u = th_gpt2_byte_utf8((uint8_t)b, &l);
        int32_t id = th_vocab_find(v, u, (size_t)l);
        if (id < 0 || id >= th_vocab_n_tokens(v)) return false;   /* e.g. Falcon lacks 28 bytes */
    }
    return true;
}

static void add_vocab(const char *path) {
    gguf_file *f;
    th_vocab *v;
    if (n_vocabs == MAX_VOCABS || gguf_open(path, &f) != TH_OK) return;
    if (th_vocab_load(f, &v) != TH_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, th_last_error());
        gguf_close(f);
        return;
    }
    files[n_vocabs] = f;
    all_bytes[n_vocabs] = has_all_bytes(v);
    vocabs[n_vocabs++] = v;
}

/* SPM: <unk> <s> </s>, the 256 byte tokens, a few letters and pairs — and no '▁'. */
static void add_spaceless_spm(void) {
    static const char *const extra[] = { "a", "b", "c", "e", "t", "h", "th", "he", "the", "ab", "é" };
    enum { N_EXTRA = sizeof extra / sizeof extra[0], N = 3 + 256 + N_EXTRA };
    static char bytes[256][8];
    const char *toks[N];
    float scores[N];
    int32_t types[N];
    toks[0] = "<unk>"; toks[1] = "<s>"; toks[2] = "</s>";
    types[0] = 2; types[1] = types[2] = 3;
    for (int b = 0; b < 256; b++) { snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b); toks[3 + b] = bytes[b]; types[3 + b] = 6; }
    for (int i = 0; i < N_EXTRA; i++) { toks[259 + i] = extra[i]; types[259 + i] = 1; }
    for (int i = 0; i < N; i++) scores[i] = i < 259 ? 0.0f : -(float)(int)strlen(toks[i] ? toks[i] : "");
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, N);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, N);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, N);
    uint8_t *buf;
    uint64_t n;
    gguf_file *f;
    th_vocab *v;
    if (gguf_writer_to_mem(w, &buf, &n) != TH_OK) { gguf_writer_free(w); return; }
    gguf_writer_free(w);
    if (gguf_parse(buf, n, &f) != TH_OK || th_vocab_load(f, &v) != TH_OK) {   /* buf stays: the file points into it */
        fprintf(stderr, "fuzz_tokenizer: the spaceless vocabulary: %s\n", th_last_error());
        return;
    }
    files[n_vocabs] = f;
    all_bytes[n_vocabs] = false;
    vocabs[n_vocabs++] = v;
}

static void init(void) {
    static const char *const rel[] = {
        "fixtures/vocab/ggml-vocab-gpt-2.gguf", "fixtures/vocab/ggml-vocab-falcon.gguf",
        "fixtures/vocab/ggml-vocab-deepseek-llm.gguf", "fixtures/vocab/ggml-vocab-llama-spm.gguf",
        "fixtures/vocab/ggml-vocab-bert-bge.gguf", "fixtures/tiny/tiny-F32.gguf",
    };
    const char *shared = getenv("SHARED");
    if (!shared || !*shared) shared = "../shared";
    char p[1024];
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", shared, rel[i]);
        add_vocab(p);
    }
    const char *m = getenv("THESEUS_MODEL");
    add_vocab(m && *m ? m : "models/SmolLM2-135M-Instruct.Q4_1.gguf");
    add_vocab("models/gemma-3-270m-Q4_K_M.gguf");
    add_spaceless_spm();
    fprintf(stderr, "fuzz_tokenizer: %d vocabularies\n", n_vocabs);
    if (!n_vocabs) abort();
}

/* Strict UTF-8 (no overlongs, surrogates, > U+10FFFF). */
static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t l = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!l || i + l > n) return false;
        for (size_t k = 1; k < l; k++) if ((s[i + k] & 0xC0) != 0x80) return false;
        if (l == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F))) return false;
        if (l == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))) return false;
        i += l;
    }
    return true;
}

static void check_vocab(const th_vocab *v, bool complete, const uint8_t *d, size_t n, uint8_t flags) {
    bool add_special = flags & 1, parse_special = flags & 2;
    size_t cap = n + 8, count = 0;
    th_token *ids = malloc(cap * sizeof *ids);
    if (!ids) return;
    th_status st = th_vocab_tokenize(v, (const char *)d, n, add_special, parse_special, ids, cap, &count);
    if (st == TH_ERR_CAPACITY) {   /* more tokens than bytes: ask again with the size it reported */
        if (count <= cap) __builtin_trap();
        free(ids);
        cap = count;
        if (!(ids = malloc(cap * sizeof *ids))) return;
        st = th_vocab_tokenize(v, (const char *)d, n, add_special, parse_special, ids, cap, &count);
        if (st == TH_OK && count != cap) __builtin_trap();
    }
    if (st != TH_OK) {
        if (st != TH_ERR_NOMEM) { fprintf(stderr, "tokenize failed: %s\n", th_last_error()); __builtin_trap(); }
        free(ids);
        return;
    }
    for (size_t i = 0; i < count; i++) if (ids[i] < 0 || ids[i] >= th_vocab_n_tokens(v)) __builtin_trap();
    if (count > 1 && (flags & 4)) {                 /* a too-small buffer */
        size_t small = count / 2, c2 = 0;
        th_token *ids2 = malloc(small * sizeof *ids2);
        if (ids2) {
            st = th_vocab_tokenize(v, (const char *)d, n, add_special, parse_special, ids2, small, &c2);
            if (st != TH_ERR_CAPACITY || c2 != count || memcmp(ids, ids2, small * sizeof *ids)) __builtin_trap();
            free(ids2);
        }
    }
    if (v->spm_word_split) {                        /* fast path == one pass over everything */
        th_vocab *mv = (th_vocab *)v;
        size_t c3 = 0;
        th_token *ids3 = malloc(cap * sizeof *ids3);
        mv->spm_word_split = false;
        st = ids3 ? th_vocab_tokenize(v, (const char *)d, n, add_special, parse_special, ids3, cap, &c3) : TH_ERR_NOMEM;
        mv->spm_word_split = true;
        if (st == TH_OK && (c3 != count || memcmp(ids, ids3, count * sizeof *ids))) __builtin_trap();
        free(ids3);
    }
    size_t tcap = count * 64 + 16;
    char *text = malloc(tcap);
    if (text) {
        int64_t tl = th_vocab_detokenize(v, ids, count, text, tcap, true);
        if (tl < 0) __builtin_trap();
        if (complete && !add_special && valid_utf8(d, n)) {
            if ((size_t)tl != n || memcmp(text, d, n)) {
                fprintf(stderr, "round trip failed (%zu bytes -> %lld)\n", n, (long long)tl);
                __builtin_trap();
            }
        }
        free(text);
    }
    free(ids);
}

static void check_pieces(const th_vocab *v, const uint8_t *d, size_t n) {
    th_utf8_stream st = {0};
    char piece[512], out[3 * (512 + 4)];
    for (size_t i = 0; i + 4 <= n; i += 4) {
        int32_t id;
        memcpy(&id, d + i, 4);
        if (d[i] & 1) id = (int32_t)((uint32_t)id % (uint32_t)th_vocab_n_tokens(v));
        int32_t cap = (int32_t)(d[i + 1] % 64);
        int32_t r = th_vocab_token_to_piece(v, id, piece, cap, d[i + 2] & 1);
        if (r == INT32_MIN) { if (id >= 0 && id < th_vocab_n_tokens(v)) __builtin_trap(); continue; }
        if (r < 0) r = th_vocab_token_to_piece(v, id, piece, (int32_t)sizeof piece, d[i + 2] & 1);
        if (r < 0) continue;                        /* a piece longer than 512 bytes */
        size_t w = th_utf8_stream_push(&st, piece, (size_t)r, out);
        if (!valid_utf8((const uint8_t *)out, w)) __builtin_trap();
    }
    size_t w = th_utf8_stream_flush(&st, out);
    if (!valid_utf8((const uint8_t *)out, w)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool ready;
    if (!ready) { init(); ready = true; }
    if (size < 1) return 0;
    uint8_t flags = data[0];
    data++; size--;
    for (int i = 0; i < n_vocabs; i++) {
        if ((flags >> 4) % (n_vocabs + 1) != (unsigned)n_vocabs && (flags >> 4) % (n_vocabs + 1) != (unsigned)i)
            continue;                               /* high bits pick one vocab, or all */
        check_vocab(vocabs[i], all_bytes[i], data, size, flags);
        check_pieces(vocabs[i], data, size);
    }
    return 0;
}
