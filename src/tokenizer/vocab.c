/* vocab.c — th_vocab_load: reads tokenizer.ggml.* from a parsed GGUF file into a
 * self-contained th_vocab (token texts, scores, attributes, BPE merges, special
 * ids, end-of-generation set, the special-token list and the piece cache), with
 * llama.cpp's defaults and fix-ups (llama-vocab.cpp, llama_vocab::impl::load).
 * Also the string -> id hash map and the small accessors. */
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ string map */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static inline uint32_t hash_pair(uint32_t a, uint32_t b) {
    uint64_t k = (((uint64_t)a << 32) | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32) ^ (uint32_t)k;
}

static const char *any_text(const th_vocab *v, uint32_t id, uint32_t *len) {
    if (id < (uint32_t)v->n_tokens) { *len = v->tok_len[id]; return v->text + v->tok_off[id]; }
    id -= (uint32_t)v->n_tokens;
    *len = v->extra_len[id];
    return v->extra_text + v->extra_off[id];
}

int32_t th_vocab_find(const th_vocab *v, const char *s, size_t len) {
    if (!v->map.slots) return -1;
    uint32_t m = v->map.mask;
    for (uint32_t i = (uint32_t)hash_bytes(s, len) & m;; i = (i + 1) & m) {
        uint32_t e = v->map.slots[i];
        if (!e) return -1;
        uint32_t l;
        const char *t = any_text(v, e - 1, &l);
        if (l == len && !memcmp(t, s, len)) return (int32_t)(e - 1);
    }
}

static bool map_grow(th_vocab *v, uint32_t n_entries) {
    uint32_t size = 1024;
    while (size < n_entries * 2u) size *= 2;
    if (v->map.slots && size <= v->map.mask + 1) return true;
    uint32_t *slots = calloc(size, sizeof *slots);
    if (!slots) return false;
    if (v->map.slots) {
        for (uint32_t i = 0; i <= v->map.mask; i++) {
            uint32_t e = v->map.slots[i], l;
            if (!e) continue;
            const char *t = any_text(v, e - 1, &l);
            uint32_t j = (uint32_t)hash_bytes(t, l) & (size - 1);
            while (slots[j]) j = (j + 1) & (size - 1);
            slots[j] = e;
        }
        free(v->map.slots);
    }
    v->map.slots = slots;
    v->map.mask = size - 1;
    return true;
}

/* Insert id (its text must already be stored); keeps an existing entry. */
static void map_insert(th_vocab *v, uint32_t id) {
    uint32_t l;
    const char *t = any_text(v, id, &l);
    uint32_t m = v->map.mask;
    for (uint32_t i = (uint32_t)hash_bytes(t, l) & m;; i = (i + 1) & m) {
        uint32_t e = v->map.slots[i];
        if (!e) { v->map.slots[i] = id + 1; return; }
        uint32_t l2;
        const char *t2 = any_text(v, e - 1, &l2);
        if (l2 == l && !memcmp(t2, t, l)) return;   /* duplicate text: the first id wins */
    }
}

/* Id of a merge-side string, adding it as an extra string if unknown. */
static int64_t find_or_add(th_vocab *v, const char *s, size_t len, size_t *extra_cap, size_t *blob_cap, size_t *blob_n) {
    int32_t id = th_vocab_find(v, s, len);
    if (id >= 0) return id;
    if (v->n_extra == *extra_cap) {
        size_t nc = *extra_cap ? *extra_cap * 2 : 64;
        uint32_t *o = realloc(v->extra_off, nc * sizeof *o);
        if (!o) return -1;
        v->extra_off = o;
        uint32_t *l = realloc(v->extra_len, nc * sizeof *l);
        if (!l) return -1;
        v->extra_len = l;
        *extra_cap = nc;
    }
    if (*blob_n + len > *blob_cap) {
        size_t nc = *blob_cap ? *blob_cap : 4096;
        while (nc < *blob_n + len) nc *= 2;
        char *nb = realloc(v->extra_text, nc);
        if (!nb) return -1;
        v->extra_text = nb;
        *blob_cap = nc;
    }
    if ((uint64_t)*blob_n + len > UINT32_MAX) return -1;
    memcpy(v->extra_text + *blob_n, s, len);
    v->extra_off[v->n_extra] = (uint32_t)*blob_n;
    v->extra_len[v->n_extra] = (uint32_t)len;
    *blob_n += len;
    uint32_t nid = (uint32_t)v->n_tokens + v->n_extra++;
    if (!map_grow(v, nid + 1)) return -1;
    map_insert(v, nid);
    return nid;
}

/* ------------------------------------------------------------ loading steps */

static bool key_str(const gguf_file *f, const char *key, char *buf, size_t cap) {
    gguf_str s;
    if (!gguf_get_str(f, key, &s)) return false;
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(buf, s.ptr, n);
    buf[n] = 0;
    return true;
}

static th_status load_tokens(th_vocab *v, const gguf_file *f) {
    const gguf_kv *toks = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING);
    if (!toks) return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.tokens: missing or not a string array");
    if (toks->arr_n == 0 || toks->arr_n > INT32_MAX / 2)
        return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens is out of range",
                            (unsigned long long)toks->arr_n);
    uint32_t n = (uint32_t)toks->arr_n;
    const void *fscores = NULL, *iscores = NULL, *types = NULL;
    const gguf_kv *sc = gguf_find(f, "tokenizer.ggml.scores");
    if (sc) {
        if (sc->type != GGUF_ARRAY || (sc->arr_type != GGUF_F32 && sc->arr_type != GGUF_I32))
            return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.scores: not an f32/i32 array");
        if (sc->arr_n < n)
            return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.scores: %llu scores for %u tokens",
                                (unsigned long long)sc->arr_n, n);
        if (sc->arr_type == GGUF_F32) fscores = sc->arr_data;
        else iscores = sc->arr_data;
    }
    const gguf_kv *tt = gguf_find(f, "tokenizer.ggml.token_type");
    if (tt) {
        if (tt->type != GGUF_ARRAY || tt->arr_type != GGUF_I32)
            return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.token_type: not an i32 array");
        if (tt->arr_n < n)
            return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.token_type: %llu types for %u tokens",
                                (unsigned long long)tt->arr_n, n);
        types = tt->arr_data;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t l = toks->arr_strs[i].len ? toks->arr_strs[i].len : 24;
        if (!th_add_u64(total, l, &total) || total > UINT32_MAX)
            return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.tokens: token texts exceed 4 GiB");
    }
    v->n_tokens = (int32_t)n;
    v->text = malloc(total ? total : 1);
    v->tok_off = malloc(n * sizeof *v->tok_off);
    v->tok_len = malloc(n * sizeof *v->tok_len);
    v->score = malloc(n * sizeof *v->score);
    v->attr = malloc(n * sizeof *v->attr);
    v->is_eog = calloc(n, 1);
    if (!v->text || !v->tok_off || !v->tok_len || !v->score || !v->attr || !v->is_eog || !map_grow(v, n))
        return th_set_error(TH_ERR_NOMEM, "vocab: out of memory for %u tokens", n);
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        gguf_str s = toks->arr_strs[i];
        uint32_t l = (uint32_t)s.len;
        if (l == 0) l = (uint32_t)snprintf(v->text + off, 24, "[EMPTY_%u]", i);
        else memcpy(v->text + off, s.ptr, l);
        v->tok_off[i] = off;
        v->tok_len[i] = l;
        off += l;
        if (l > v->max_token_len) v->max_token_len = l;
        /* array data in a GGUF file need not be aligned: copy, do not dereference */
        float fs = 0.0f;
        int32_t is = 0, ty = 1;
        if (fscores) memcpy(&fs, (const char *)fscores + 4 * (size_t)i, 4);
        if (iscores) { memcpy(&is, (const char *)iscores + 4 * (size_t)i, 4); fs = (float)is; }
        if (types) memcpy(&ty, (const char *)types + 4 * (size_t)i, 4);
        v->score[i] = fs;
        static const uint32_t attr_of_type[7] = { 0, TH_ATTR_NORMAL, TH_ATTR_UNKNOWN, TH_ATTR_CONTROL,
                                                  TH_ATTR_USER_DEFINED, TH_ATTR_UNUSED, TH_ATTR_BYTE };
        v->attr[i] = (ty >= 0 && ty < 7) ? attr_of_type[ty] : 0;
        map_insert(v, i);
    }
    return TH_OK;
}

static th_status load_merges(th_vocab *v, const gguf_file *f) {
    const gguf_kv *mk = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_STRING);
    if (!mk) return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.merges: missing or not a string array (needed by a gpt2 vocab)");
    if (mk->arr_n > (1u << 26)) return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.merges: %llu merges is too many",
                                                    (unsigned long long)mk->arr_n);
    uint32_t n = (uint32_t)mk->arr_n, size = 1024;
    while (size < n * 2u) size *= 2;
    v->merges = malloc((size_t)size * sizeof *v->merges);
    if (!v->merges) return th_set_error(TH_ERR_NOMEM, "vocab: out of memory for %u merges", n);
    for (uint32_t i = 0; i < size; i++) v->merges[i].rank = UINT32_MAX;
    v->merge_mask = size - 1;
    size_t extra_cap = 0, blob_cap = 0, blob_n = 0;
    char *cat = NULL;
    size_t cat_cap = 0;
    for (uint32_t r = 0; r < n; r++) {
        gguf_str s = mk->arr_strs[r];
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) continue;                       /* llama.cpp: pair ("", ""), never matches */
        size_t l1 = (size_t)(sp - s.ptr), l2 = s.len - l1 - 1;
        if (l1 + l2 > cat_cap) {
            cat_cap = (l1 + l2) * 2;
            char *nc = realloc(cat, cat_cap);
            if (!nc) { free(cat); return th_set_error(TH_ERR_NOMEM, "vocab: out of memory reading merges"); }
            cat = nc;
        }
        memcpy(cat, s.ptr, l1);
        memcpy(cat + l1, sp + 1, l2);
        int64_t a = find_or_add(v, s.ptr, l1, &extra_cap, &blob_cap, &blob_n);
        int64_t b = a < 0 ? -1 : find_or_add(v, sp + 1, l2, &extra_cap, &blob_cap, &blob_n);
        int64_t c = b < 0 ? -1 : find_or_add(v, cat, l1 + l2, &extra_cap, &blob_cap, &blob_n);
        if (c < 0) { free(cat); return th_set_error(TH_ERR_NOMEM, "vocab: out of memory reading merges"); }
        uint32_t j = hash_pair((uint32_t)a, (uint32_t)b) & v->merge_mask;
        while (v->merges[j].rank != UINT32_MAX && !(v->merges[j].left == a && v->merges[j].right == b))
            j = (j + 1) & v->merge_mask;
        if (v->merges[j].rank == UINT32_MAX)     /* the first (lowest) rank wins */
            v->merges[j] = (th_merge){ (uint32_t)a, (uint32_t)b, r, (uint32_t)c };
    }
    free(cat);
    return TH_OK;
}

const th_merge *th_vocab_merge(const th_vocab *v, uint32_t left, uint32_t right) {
    for (uint32_t j = hash_pair(left, right) & v->merge_mask;; j = (j + 1) & v->merge_mask) {
        const th_merge *m = &v->merges[j];
        if (m->rank == UINT32_MAX) return NULL;
        if (m->left == left && m->right == right) return m;
    }
}

/* ------------------------------------------------------------ special tokens */

static bool text_is(const th_vocab *v, int32_t id, const char *s) {
    uint32_t l;
    const char *t = th_tok_text(v, id, &l);
    return l == strlen(s) && !memcmp(t, s, l);
}

static bool text_in(const th_vocab *v, int32_t id, const char *const *list) {
    for (; *list; list++) if (text_is(v, id, *list)) return true;
    return false;
}

/* The special-token ids the metadata names. An id outside the vocabulary is an
 * error naming its key (llama.cpp warns and keeps the default; a model whose
 * BOS silently disappears tokenizes every prompt wrongly). -1 means "none". */
static th_status load_special_ids(th_vocab *v, const gguf_file *f) {
    static const char *const keys[] = {
        "bos_token_id", "eos_token_id", "eot_token_id", "eom_token_id", "unknown_token_id",
        "seperator_token_id", "padding_token_id", "mask_token_id", "fim_pre_token_id",
        "fim_suf_token_id", "fim_mid_token_id", "fim_pad_token_id", "fim_rep_token_id",
        "fim_sep_token_id", "prefix_token_id", "suffix_token_id", "middle_token_id",
    };
    th_token *slots[] = { &v->bos, &v->eos, &v->eot, &v->eom, &v->unk, &v->sep, &v->pad, &v->mask,
                          &v->fim_pre, &v->fim_suf, &v->fim_mid, &v->fim_pad, &v->fim_rep, &v->fim_sep,
                          &v->fim_pre, &v->fim_suf, &v->fim_mid };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        th_token *id = slots[i];
        if (*id >= v->n_tokens) *id = -1;       /* default out of range: disabled */
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s", keys[i]);
        if (!gguf_find(f, key)) continue;
        int64_t nid;
        if (!gguf_get_i64(f, key, &nid))
            return th_set_error(TH_ERR_FORMAT, "%s: must be an integer token id", key);
        if (nid == -1) { *id = -1; continue; }
        if (nid < 0 || nid >= v->n_tokens)
            return th_set_error(TH_ERR_FORMAT, "%s = %lld is not a token of the vocabulary (ids 0 to %d)", key,
                                (long long)nid, v->n_tokens - 1);
        *id = (th_token)nid;
    }
    return TH_OK;
}

static int32_t find_text(const th_vocab *v, const char *s) {
    int32_t id = th_vocab_find(v, s, strlen(s));
    return id < v->n_tokens ? id : -1;
}

/* llama.cpp finds EOT / EOM / FIM tokens by their text when the metadata does not
 * name them, and makes them control tokens. */
static void detect_by_text(th_vocab *v) {
    static const char *const eot[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
        "<end_of_utterance>", NULL };
    static const char *const eom[] = { "<|eom_id|>", NULL };
    static const char *const pre[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
        "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL };
    static const char *const suf[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
        "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL };
    static const char *const mid[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
        "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL };
    static const char *const pad[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL };
    static const char *const rep[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL };
    static const char *const sep[] = { "<|file_sep|>", NULL };
    struct { th_token *id; const char *const *list; } rules[] = {
        { &v->eot, eot }, { &v->eom, eom }, { &v->fim_pre, pre }, { &v->fim_suf, suf },
        { &v->fim_mid, mid }, { &v->fim_pad, pad }, { &v->fim_rep, rep }, { &v->fim_sep, sep },
    };
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        if (*rules[r].id != -1) continue;
        /* llama.cpp takes whichever matching token its hash map yields first; we
         * take the first text of the list that exists (deterministic). */
        for (const char *const *t = rules[r].list; *t; t++) {
            int32_t i = find_text(v, *t);
            if (i < 0) continue;
            *rules[r].id = i;
            v->attr[i] |= TH_ATTR_CONTROL;
            break;
        }
    }
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint32_t l;
        const char *t = th_tok_text(v, i, &l);
        if ((v->attr[i] & TH_ATTR_CONTROL) && memmem(t, l, "unused", 6)) v->attr[i] |= TH_ATTR_UNUSED;
    }
}


static void build_eog(th_vocab *v) {
    static const char *const eog[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL };
    th_token fixed[] = { v->fim_pad, v->fim_rep, v->fim_sep };
    for (int k = 0; k < 3; k++) if (fixed[k] >= 0) v->is_eog[fixed[k]] = 1;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (text_in(v, i, eog)) { v->is_eog[i] = 1; v->attr[i] |= TH_ATTR_CONTROL; }
    /* gpt-oss: these are always rendered */
    static const char *const gptoss[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL };
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (text_in(v, i, gptoss)) v->attr[i] = TH_ATTR_USER_DEFINED;
    th_token named[] = { v->eos, v->eot, v->eom };
    for (int k = 0; k < 3; k++) if (named[k] >= 0) v->is_eog[named[k]] = 1;
    /* o200k_harmony / solar-open: <|end|> is not an end of generation */
    int32_t ret = find_text(v, "<|return|>"), call = find_text(v, "<|call|>"), calls = find_text(v, "<|calls|>");
    int32_t flush = find_text(v, "<|flush|>"), end = find_text(v, "<|end|>");
    bool has_ret = ret >= 0 && v->is_eog[ret], has_call = (call >= 0 && v->is_eog[call]) || (calls >= 0 && v->is_eog[calls]);
    bool has_flush = flush >= 0 && v->is_eog[flush], has_end = end >= 0 && v->is_eog[end];
    if ((has_ret && has_call && has_end) || (has_call && has_flush && has_end)) {
        v->is_eog[end] = 0;
        v->attr[end] = TH_ATTR_USER_DEFINED;
    }
    int32_t tr = find_text(v, "<|tool_response>"), s = find_text(v, "</s>");
    if (tr >= 0 && v->is_eog[tr] && s >= 0 && v->is_eog[s]) {
        v->is_eog[s] = 0;
        v->attr[s] = TH_ATTR_NORMAL;
    }
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const th_vocab *v = ctx;
    th_token x = *(const th_token *)a, y = *(const th_token *)b;
    if (v->tok_len[x] != v->tok_len[y]) return v->tok_len[x] > v->tok_len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static th_status build_special_list(th_vocab *v) {
    v->special = malloc((size_t)v->n_tokens * sizeof *v->special);
    if (!v->special) return th_set_error(TH_ERR_NOMEM, "vocab: out of memory");
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (TH_ATTR_CONTROL | TH_ATTR_USER_DEFINED | TH_ATTR_UNKNOWN)) v->special[v->n_special++] = i;
    qsort_r(v->special, (size_t)v->n_special, sizeof *v->special, cmp_special, v);
    /* index for the one-pass search of special tokens in a text (tokenize.c) */
    v->special_index = malloc((size_t)v->n_tokens * sizeof *v->special_index);
    v->first_len_off = calloc(257, sizeof *v->first_len_off);
    v->first_len = malloc(((size_t)v->n_special + 1) * sizeof *v->first_len);
    if (!v->special_index || !v->first_len_off || !v->first_len) return th_set_error(TH_ERR_NOMEM, "vocab: out of memory");
    for (int32_t i = 0; i < v->n_tokens; i++) v->special_index[i] = -1;
    for (int32_t k = 0; k < v->n_special; k++) v->special_index[v->special[k]] = k;
    /* (first byte, length) of every special token, by byte then longest first */
    uint64_t *keys = malloc(((size_t)v->n_special + 1) * sizeof *keys);
    if (!keys) return th_set_error(TH_ERR_NOMEM, "vocab: out of memory");
    for (int32_t k = 0; k < v->n_special; k++) {
        uint32_t l;
        const char *t = th_tok_text(v, v->special[k], &l);
        keys[k] = ((uint64_t)(uint8_t)t[0] << 32) | (uint32_t)~l;
    }
    qsort(keys, (size_t)v->n_special, sizeof *keys, cmp_u64);
    uint32_t n = 0;
    int32_t k = 0;
    for (int b = 0; b < 256; b++) {
        v->first_len_off[b] = n;
        for (; k < v->n_special && (int)(keys[k] >> 32) == b; k++) {
            uint32_t l = ~(uint32_t)keys[k];
            if (n == v->first_len_off[b] || v->first_len[n - 1] != l) v->first_len[n++] = l;
        }
    }
    free(keys);
    v->first_len_off[256] = n;
    return TH_OK;
}

/* SPM can merge word by word when no token has U+2581 after another character. */
static void check_word_split(th_vocab *v) {
    v->spm_word_split = v->kind == TH_VOCAB_SPM;
    for (int32_t i = 0; i < v->n_tokens && v->spm_word_split; i++) {
        uint32_t l;
        const char *t = th_tok_text(v, i, &l);
        for (uint32_t j = 1; j + 3 <= l; j++) {
            if (memcmp(t + j, "\xE2\x96\x81", 3)) continue;
            if (j < 3 || memcmp(t + j - 3, "\xE2\x96\x81", 3)) { v->spm_word_split = false; break; }
        }
    }
}

/* Per-token strip flags llama.cpp sets by model name (phi-3) or pre type. */
static void set_strip_attrs(th_vocab *v, const gguf_file *f) {
    char name[256] = "";
    key_str(f, "general.name", name, sizeof name);
    for (char *p = name; *p; p++) *p = (char)tolower((unsigned char)*p);
    const char *pre = v->pre_name ? v->pre_name : "";
    char arch[64] = "";
    key_str(f, "general.architecture", arch, sizeof arch);
    if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code") ||
        strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")) {
        int32_t m = find_text(v, "<mask>");
        if (m >= 0) v->attr[m] |= TH_ATTR_LSTRIP;
    } else if (strstr(name, "phi-3") || strstr(name, "phi3")) {
        for (int32_t k = 0; k < v->n_special; k++) v->attr[v->special[k]] |= TH_ATTR_RSTRIP;
        int32_t s = find_text(v, "</s>");
        if (s >= 0) v->attr[s] |= TH_ATTR_RSTRIP;
        static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
        for (int k = 0; k < 3; k++) {
            int32_t id = find_text(v, keep[k]);
            if (id >= 0) v->attr[id] &= ~(uint32_t)TH_ATTR_RSTRIP;
        }
    } else if (strstr(name, "modern-bert")) {
        int32_t m = find_text(v, "[MASK]");
        if (m >= 0) v->attr[m] |= TH_ATTR_LSTRIP;
    }
}

/* ------------------------------------------------------------ pieces */

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The byte of a <0xNN> token (strtol of the two characters after "<0x", as llama.cpp). */
static uint8_t byte_of_token(const char *t, uint32_t l) {
    int v = 0;
    for (uint32_t i = 3; i < 5 && i < l && hexval(t[i]) >= 0; i++) v = v * 16 + hexval(t[i]);
    return (uint8_t)v;
}

/* Append token id's piece (special = true) to b. */
static void piece_of(const th_vocab *v, int32_t id, th_bytes *b) {
    uint32_t a = v->attr[id], l;
    const char *t = th_tok_text(v, id, &l);
    if (a & (TH_ATTR_UNKNOWN | TH_ATTR_CONTROL | TH_ATTR_USER_DEFINED)) { th_bytes_put(b, t, l); return; }
    if (a & TH_ATTR_NORMAL) {
        if (v->kind != TH_VOCAB_BPE) {              /* SPM, WPM: '▁' -> ' ' */
            for (uint32_t i = 0; i < l; i++) {
                if (i + 2 < l && (uint8_t)t[i] == 0xE2 && (uint8_t)t[i + 1] == 0x96 && (uint8_t)t[i + 2] == 0x81) {
                    th_bytes_put(b, " ", 1);
                    i += 2;
                } else th_bytes_put(b, t + i, 1);
            }
            return;
        }
        for (size_t i = 0; i < l;) {                /* byte-level: code points -> bytes */
            size_t s = i;
            uint32_t c = th_utf8_next((const uint8_t *)t, l, &i);
            int byte = th_gpt2_cpt_byte(c);
            if (byte >= 0) { char ch = (char)byte; th_bytes_put(b, &ch, 1); continue; }
            char tmp[16];
            th_bytes_put(b, "[UNK_BYTE_0x", 12);
            for (size_t k = s; k < i; k++) { snprintf(tmp, sizeof tmp, "%02x", (uint8_t)t[k]); th_bytes_put(b, tmp, 2); }
            th_bytes_put(b, t, l);
            th_bytes_put(b, "]", 1);
        }
        return;
    }
    if (a & TH_ATTR_BYTE) { char ch = (char)byte_of_token(t, l); th_bytes_put(b, &ch, 1); }
}

static th_status build_pieces(th_vocab *v) {
    th_bytes b = {0};
    v->piece_off = malloc((size_t)v->n_tokens * sizeof *v->piece_off);
    v->piece_len = malloc((size_t)v->n_tokens * sizeof *v->piece_len);
    if (!v->piece_off || !v->piece_len) return th_set_error(TH_ERR_NOMEM, "vocab: out of memory");
    for (int32_t i = 0; i < v->n_tokens; i++) {
        size_t before = b.n;
        piece_of(v, i, &b);
        if (b.failed || b.n > UINT32_MAX) { free(b.p); return th_set_error(TH_ERR_NOMEM, "vocab: out of memory"); }
        v->piece_off[i] = (uint32_t)before;
        v->piece_len[i] = (uint32_t)(b.n - before);
    }
    v->piece = b.p ? b.p : malloc(1);
    return v->piece ? TH_OK : th_set_error(TH_ERR_NOMEM, "vocab: out of memory");
}

static void build_byte_tokens(th_vocab *v) {
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = find_text(v, hex);
        if (id < 0) { char c = (char)b; id = th_vocab_find(v, &c, 1); if (id >= v->n_tokens) id = -1; }
        v->byte_token[b] = id;
    }
}

/* ------------------------------------------------------------ load */

static th_status set_kind(th_vocab *v, const gguf_file *f) {
    if (!key_str(f, "tokenizer.ggml.model", v->model_name, sizeof v->model_name))
        return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.model: missing (the file has no vocabulary)");
    gguf_str pre;
    bool has_pre = gguf_get_str(f, "tokenizer.ggml.pre", &pre);
    v->pre_name = has_pre && pre.len ? strndup(pre.ptr, (size_t)pre.len) : strdup("default");
    if (!v->pre_name) return th_set_error(TH_ERR_NOMEM, "vocab: out of memory");
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    v->lowercase = v->strip_accents = true;
    if (!strcmp(v->model_name, "llama")) {
        v->kind = TH_VOCAB_SPM;
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_space_prefix = true; v->add_bos = true;
    } else if (!strcmp(v->model_name, "t5")) {      /* Unigram (unigram.c); T5 adds EOS, no BOS */
        v->kind = TH_VOCAB_SPM;
        v->unigram = true;
        v->eos = 1; v->unk = 2;
        v->add_space_prefix = true; v->add_eos = true;
    } else if (!strcmp(v->model_name, "bert")) {
        v->kind = TH_VOCAB_WPM;
        v->bos = 101; v->unk = 100; v->sep = 102; v->pad = 0; v->mask = 103;
        v->add_sep = true; v->add_bos = true; v->clean_spaces = true;
    } else if (!strcmp(v->model_name, "gpt2")) {
        v->kind = TH_VOCAB_BPE;
        v->bos = 11; v->eos = 11;
        v->clean_spaces = true;
        th_pretok_cfg cfg = {0};
        th_status st = th_pretok_new(v->pre_name, &cfg, &v->pretok);
        if (st != TH_OK) return st;
        v->clean_spaces = cfg.clean_spaces;
        v->ignore_merges = cfg.ignore_merges;
        if (cfg.add_bos) v->add_bos = true;
        if (cfg.no_bos) v->bos = -1;
    } else {
        return th_set_error(TH_ERR_UNSUPPORTED, "tokenizer.ggml.model = '%s' is not supported (llama, gpt2, bert, t5 are)",
                            v->model_name);
    }
    bool b;
    if (gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b)) v->add_space_prefix = b;
    gguf_str ps;
    if (gguf_get_str(f, "tokenizer.ggml.metaspace_prepend_scheme", &ps))
        v->prefix_scheme = gguf_str_eq(ps, "first") ? 2 : gguf_str_eq(ps, "always") ? 1 : 0;
    return TH_OK;
}

static th_status set_flags(th_vocab *v, const gguf_file *f) {
    bool b;
    if (gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b)) v->add_bos = b;
    if (gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &b)) v->add_eos = b;
    if (gguf_get_bool(f, "tokenizer.ggml.add_sep_token", &b)) v->add_sep = b;
    if (v->add_bos && v->bos < 0)
        return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
    if (v->add_eos && v->eos < 0)
        return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
    if (v->add_sep && v->sep < 0)
        return th_set_error(TH_ERR_FORMAT, "tokenizer.ggml.add_sep_token is true, but tokenizer.ggml.seperator_token_id is not set");
    if (gguf_get_bool(f, "tokenizer.ggml.normalizer.lowercase", &b)) v->lowercase = v->strip_accents = b;
    if (gguf_get_bool(f, "tokenizer.ggml.normalizer.strip_accents", &b)) v->strip_accents = b;
    return TH_OK;
}

th_status th_vocab_load(const gguf_file *f, th_vocab **out) {
    *out = NULL;
    th_vocab *v = calloc(1, sizeof *v);
    if (!v) return th_set_error(TH_ERR_NOMEM, "vocab: out of memory");
    th_status st = set_kind(v, f);
    if (st == TH_OK) st = load_tokens(v, f);
    if (st == TH_OK && v->kind == TH_VOCAB_BPE) st = load_merges(v, f);
    if (st == TH_OK) st = load_special_ids(v, f);
    if (st == TH_OK) st = set_flags(v, f);
    if (st == TH_OK) {
        detect_by_text(v);
        build_eog(v);
        st = build_special_list(v);
    }
    if (st == TH_OK) st = build_pieces(v);
    if (st != TH_OK) { th_vocab_free(v); return st; }
    set_strip_attrs(v, f);
    build_byte_tokens(v);
    check_word_split(v);
    *out = v;
    return TH_OK;
}

void th_vocab_free(th_vocab *v) {
    if (!v) return;
    th_pretok_free(v->pretok);
    free(v->pre_name); free(v->text); free(v->tok_off); free(v->tok_len); free(v->score); free(v->attr);
    free(v->map.slots); free(v->extra_text); free(v->extra_off); free(v->extra_len); free(v->merges);
    free(v->is_eog); free(v->special); free(v->special_index); free(v->first_len_off); free(v->first_len); free(v->piece); free(v->piece_off); free(v->piece_len);
    free(v);
}

int32_t th_vocab_n_tokens(const th_vocab *v) { return v->n_tokens; }
th_token th_vocab_bos(const th_vocab *v) { return v->bos; }
th_token th_vocab_eos(const th_vocab *v) { return v->eos; }
th_token th_vocab_eot(const th_vocab *v) { return v->eot; }
bool th_vocab_is_eog(const th_vocab *v, th_token t) { return t >= 0 && t < v->n_tokens && v->is_eog[t]; }
bool th_vocab_add_bos(const th_vocab *v) { return v->add_bos; }
const char *th_vocab_model_name(const th_vocab *v) { return v->model_name; }
const char *th_vocab_pre_name(const th_vocab *v) { return v->pre_name; }
