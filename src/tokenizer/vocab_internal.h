/* vocab_internal.h — the th_vocab structure shared by the tokenizer files
 * (vocab.c loads it; spm.c, bpe.c, wordpiece.c, pretok.c use it), the string ->
 * id hash map, and a growable scratch buffer type. Not a public seam. */
#ifndef TH_TOK_VOCAB_INTERNAL_H
#define TH_TOK_VOCAB_INTERNAL_H

#include "tokenizer/tokenizer.h"
#include "core/bytes.h"
#include <stdlib.h>

/* llama.cpp token attributes (from tokenizer.ggml.token_type). */
enum {
    TH_ATTR_UNKNOWN = 1 << 0, TH_ATTR_UNUSED = 1 << 1, TH_ATTR_NORMAL = 1 << 2,
    TH_ATTR_CONTROL = 1 << 3, TH_ATTR_USER_DEFINED = 1 << 4, TH_ATTR_BYTE = 1 << 5,
    TH_ATTR_LSTRIP = 1 << 7, TH_ATTR_RSTRIP = 1 << 8,
};

typedef enum { TH_VOCAB_SPM, TH_VOCAB_BPE, TH_VOCAB_WPM } th_vocab_kind;

/* Open-addressing map from byte strings (stored elsewhere) to int32 ids. */
typedef struct th_strmap {
    uint32_t *slots;        /* id + 1, 0 = empty */
    uint32_t mask;
    const char *(*text)(const void *ctx, uint32_t id, uint32_t *len);
    const void *ctx;
} th_strmap;

/* One BPE merge rule, keyed by (left id, right id). */
typedef struct th_merge { uint32_t left, right, rank, result; } th_merge;

typedef struct th_pretok th_pretok;   /* pretok.c */

struct th_vocab {
    th_vocab_kind kind;
    char model_name[16];
    char *pre_name;
    int32_t n_tokens;
    /* token i: text[tok_off[i] .. tok_off[i]+tok_len[i]) */
    char *text;
    uint32_t *tok_off, *tok_len;
    float *score;
    uint32_t *attr;
    uint32_t max_token_len;
    th_strmap map;               /* vocab tokens (ids < n_tokens) and merge-only strings */
    /* strings that appear in merges but are not tokens get ids >= n_tokens */
    uint32_t n_extra;
    char *extra_text;
    uint32_t *extra_off, *extra_len;
    /* merges */
    th_merge *merges;            /* hash table, size merge_mask+1; rank UINT32_MAX = empty */
    uint32_t merge_mask;
    th_pretok *pretok;           /* BPE only */
    /* special ids (-1 = none) */
    th_token bos, eos, eot, eom, unk, sep, pad, mask, fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    uint8_t *is_eog;             /* n_tokens flags */
    bool add_space_prefix, add_bos, add_eos, add_sep, ignore_merges, clean_spaces;
    bool lowercase, strip_accents;
    /* SPM space prefix as Hugging Face's Metaspace pre-tokenizer does it
     * (tokenizer.ggml.metaspace_prepend_scheme, written by src/hf/): 0 = llama.cpp's
     * (every fragment after a special token), 1 = "always" (not when the fragment
     * already starts with a space), 2 = "first" (as 1, and only at offset 0) */
    uint8_t prefix_scheme;
    bool unigram;                /* tokenizer.ggml.model = t5: SPM-style text, Unigram (Viterbi) segmentation */
    th_token *special;           /* control/user-defined/unknown ids, longest text first */
    int32_t n_special;
    bool spm_word_split;         /* no token has U+2581 after another character */
    int32_t *special_index;      /* id -> index in special[], -1 if not special */
    uint32_t *first_len_off;     /* [257]: special token lengths by first byte ... */
    uint32_t *first_len;         /* ... distinct lengths, in first_len[first_len_off[b] ..] */
    th_token byte_token[256];    /* SPM: <0xNN> (or the 1-char token), -1 if none */
    /* token_to_piece(special = true) of every token */
    char *piece;
    uint32_t *piece_off, *piece_len;
};

static inline const char *th_tok_text(const th_vocab *v, int32_t id, uint32_t *len) {
    *len = v->tok_len[id];
    return v->text + v->tok_off[id];
}

/* Lookup of a byte string: vocab id, an id >= n_tokens for merge-only strings, or -1. */
int32_t th_vocab_find(const th_vocab *v, const char *s, size_t len);

/* The merge rule for (left, right) ids, or NULL. */
const th_merge *th_vocab_merge(const th_vocab *v, uint32_t left, uint32_t right);

/* Growable buffers (scratch for one tokenize call). */
typedef struct th_ids { th_token *p; size_t n, cap; bool oom; } th_ids;
static inline void th_ids_push(th_ids *a, th_token t) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 256;
        th_token *np = realloc(a->p, nc * sizeof *np);
        if (!np) { a->oom = true; return; }
        a->p = np; a->cap = nc;
    }
    a->p[a->n++] = t;
}
/* Text scratch is a th_bytes (core/bytes.h). */

/* Algorithms on one raw-text fragment (after special-token splitting). */
th_status th_spm_tokenize(const th_vocab *v, const char *text, size_t len, th_ids *out);
th_status th_bpe_tokenize(const th_vocab *v, const char *text, size_t len, th_ids *out);
th_status th_wpm_tokenize(const th_vocab *v, const char *text, size_t len, th_ids *out);
/* unigram.c: Viterbi over the pieces' scores (kind SPM with unigram set: model t5) */
th_status th_ugm_tokenize(const th_vocab *v, const char *text, size_t len, th_ids *out);

/* pretok.c: the pre-tokenizer named by tokenizer.ggml.pre. */
typedef struct th_pretok_cfg { bool ignore_merges, clean_spaces, add_bos, no_bos; } th_pretok_cfg;
/* Compile the pre-tokenizer named `name` (its regexes, PCRE2 + JIT) and report the
 * vocab flags that llama.cpp ties to it. An unknown name is TH_ERR_UNSUPPORTED. */
th_status th_pretok_new(const char *name, th_pretok_cfg *cfg, th_pretok **out);
void th_pretok_free(th_pretok *p);
/* Split text into words: calls emit(ctx, word, len) for each, in order (bytes of the
 * normalized UTF-8, i.e. invalid input bytes already replaced by U+FFFD). */
typedef void (*th_word_fn)(void *ctx, const char *word, size_t len);
th_status th_pretok_split(const th_pretok *p, const char *text, size_t len, th_word_fn emit, void *ctx);
/* Names of all supported pre types, NULL-terminated. */
const char *const *th_pretok_names(void);

#endif
