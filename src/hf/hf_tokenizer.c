/* hf_tokenizer.c — tokenizer.json + tokenizer_config.json (+ chat_template.jinja)
 * as the tokenizer.ggml.* keys llama.cpp's convert writes, so the vocabulary
 * loader (src/tokenizer/) builds the same vocabulary a GGUF gives.
 *
 * Supported: byte-level BPE ("model": BPE, pre_tokenizer ByteLevel alone, or a
 * Sequence of Split regexes / Digits and ByteLevel); the pre-tokenizer is
 * identified with the llama.cpp pre type whose regexes it uses (gpt-2,
 * llama-bpe / smaug-bpe, qwen2, gpt-4o, smollm). Normalizer null or NFC.
 * added_tokens: special -> control tokens, others -> user-defined. BOS/EOS from
 * tokenizer_config.json (bos_token / eos_token, add_bos_token / add_eos_token),
 * else from the post_processor's TemplateProcessing.
 * SentencePiece-style BPE (byte_fallback, Metaspace or the Prepend/Replace "▁"
 * normalizer) becomes an SPM vocabulary (tokenizer.ggml.model = llama): scores
 * from the merge order, <0xXX> byte tokens, add_space_prefix. Not yet: Unigram,
 * WordPiece; Metaspace with prepend_scheme "first" adds no "▁" before a text that
 * starts with a space, which our SPM tokenizer (as llama.cpp's) always does.
 * A directory with tokenizer.json but no config.json loads vocabulary-only.  */
#include "hf/hf.h"
#include "hf/safetensors.h"
#include "hf/hf_json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define TT_NORMAL 1
#define TT_CONTROL 3
#define TT_USER 4
#define TT_UNUSED 5

/* HF's Split regexes (as tokenizer.json spells them) -> llama.cpp pre type. */
static const struct { const char *regex, *pre, *pre_ignore_merges; } SPLITS[] = {
    { "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "smaug-bpe", "llama-bpe" },
    { "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "qwen2", NULL },
    { "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
      "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "gpt-4o", NULL },
};

static const cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static bool type_is(const cJSON *o, const char *t) {
    const cJSON *ty = item(o, "type");
    return cJSON_IsString(ty) && !strcmp(ty->valuestring, t);
}

/* The pre-tokenizer's llama.cpp name, or an error naming what is not known. */
static th_status pre_name(const char *path, const cJSON *pt, bool ignore_merges, const char **out) {
    if (type_is(pt, "ByteLevel")) {
        if (cJSON_IsTrue(item(pt, "add_prefix_space")))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s: pre_tokenizer ByteLevel with add_prefix_space is not supported", path);
        if (cJSON_IsFalse(item(pt, "use_regex")))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s: pre_tokenizer ByteLevel without its regex (and no Split) is not supported", path);
        *out = "gpt-2";
        return TH_OK;
    }
    const cJSON *seq = item(pt, "pretokenizers");
    if (!type_is(pt, "Sequence") || !cJSON_IsArray(seq) || cJSON_GetArraySize(seq) != 2)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: this pre_tokenizer is not supported (ByteLevel, or a Sequence of one Split "
                            "or Digits and a ByteLevel, is)", path);
    const cJSON *a = seq->child, *b = a->next;
    if (!type_is(b, "ByteLevel") || cJSON_IsTrue(item(b, "add_prefix_space")))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: pre_tokenizer Sequence: the second step must be ByteLevel without "
                            "add_prefix_space", path);
    bool b_regex = !cJSON_IsFalse(item(b, "use_regex"));
    if (type_is(a, "Digits") && cJSON_IsTrue(item(a, "individual_digits")) && b_regex) {
        *out = "smollm";
        return TH_OK;
    }
    const cJSON *pat = type_is(a, "Split") ? item(item(a, "pattern"), "Regex") : NULL;
    const cJSON *beh = item(a, "behavior");
    if (!cJSON_IsString(pat) || b_regex || !cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") ||
        cJSON_IsTrue(item(a, "invert")))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: pre_tokenizer Sequence: the first step must be Split (a Regex pattern, "
                            "Isolated) or Digits (individual) before a ByteLevel", path);
    for (size_t i = 0; i < sizeof SPLITS / sizeof SPLITS[0]; i++)
        if (!strcmp(pat->valuestring, SPLITS[i].regex)) {
            *out = ignore_merges && SPLITS[i].pre_ignore_merges ? SPLITS[i].pre_ignore_merges : SPLITS[i].pre;
            return TH_OK;
        }
    return th_set_error(TH_ERR_UNSUPPORTED, "%s: pre_tokenizer Split regex %.200s is not one we know", path, pat->valuestring);
}

typedef struct tok_table {
    const char **text;       /* n entries; NULL = padding */
    int32_t *type;
    int64_t n;
    char **owned;            /* texts made here */
    int64_t n_owned;
} tok_table;

static th_status put_token(const char *path, tok_table *t, const cJSON *id, const char *text, int32_t type) {
    double d = cJSON_IsNumber(id) ? id->valuedouble : -1;
    if (!(d >= 0 && d < (double)t->n && d == (double)(int64_t)d))
        return th_set_error(TH_ERR_FORMAT, "%s: token '%.80s' has id %g, outside the %lld embedding rows (vocab_size)", path, text,
                            d, (long long)t->n);
    int64_t i = (int64_t)d;
    t->text[i] = text;
    t->type[i] = type;
    return TH_OK;
}

/* merges as "a b" strings: either already so, or ["a", "b"] pairs (tokenizers >= 0.20). */
static th_status merges_of(const char *path, const cJSON *mg, char ***out, int64_t *n) {
    int64_t k = cJSON_GetArraySize(mg), i = 0;
    char **m = calloc((size_t)(k ? k : 1), sizeof *m);
    if (!m) return th_set_error(TH_ERR_NOMEM, "out of memory");
    for (const cJSON *e = mg->child; e; e = e->next, i++) {
        if (cJSON_IsString(e)) m[i] = strdup(e->valuestring);
        else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) && cJSON_IsString(e->child->next)) {
            size_t l1 = strlen(e->child->valuestring), l2 = strlen(e->child->next->valuestring);
            if ((m[i] = malloc(l1 + l2 + 2))) sprintf(m[i], "%s %s", e->child->valuestring, e->child->next->valuestring);
        } else {
            for (int64_t j = 0; j < i; j++) free(m[j]);
            free(m);
            return th_set_error(TH_ERR_FORMAT, "%s: model.merges[%lld] is neither \"a b\" nor [\"a\", \"b\"]", path, (long long)i);
        }
        if (!m[i]) { for (int64_t j = 0; j < i; j++) free(m[j]); free(m); return th_set_error(TH_ERR_NOMEM, "out of memory"); }
    }
    *out = m;
    *n = k;
    return TH_OK;
}

static const char *token_content(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *c = item(v, "content");
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static int64_t find_id(const tok_table *t, const char *s) {
    for (int64_t i = 0; i < t->n; i++) if (t->text[i] && !strcmp(t->text[i], s)) return i;
    return -1;
}

/* BOS/EOS, add_bos/add_eos, chat template. */
static th_status write_config(const char *dir, const cJSON *tj, const tok_table *t, const char *unk, gguf_writer *w) {
    char p[4200], *text = NULL;
    cJSON *tc = NULL;
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    if (access(p, F_OK) == 0) {
        th_status s = hf_read_text(p, 64u << 20, &text, NULL);
        if (s) return s;
        tc = cJSON_Parse(text);
        free(text);
        if (!cJSON_IsObject(tc)) { cJSON_Delete(tc); return th_set_error(TH_ERR_FORMAT, "%s: not a JSON object", p); }
    }
    static const char *const names[] = { "bos_token", "eos_token", "unk_token", "pad_token" };
    static const char *const keys[] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                         "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id" };
    int64_t ids[4] = { -1, -1, -1, -1 };
    th_status s = TH_OK;
    for (int i = 0; i < 4 && tc && !s; i++) {
        const cJSON *v = item(tc, names[i]);
        if (!v || cJSON_IsNull(v)) continue;
        const char *c = token_content(v);
        if (!c) s = th_set_error(TH_ERR_FORMAT, "%s: key '%s' must be a string or an object with 'content'", p, names[i]);
        else if ((ids[i] = find_id(t, c)) < 0) s = th_set_error(TH_ERR_FORMAT, "%s: %s '%.80s' is not a token", p, names[i], c);
        else gguf_w_u32(w, keys[i], (uint32_t)ids[i]);
    }
    if (!s && ids[2] < 0 && unk && (ids[2] = find_id(t, unk)) >= 0) gguf_w_u32(w, keys[2], (uint32_t)ids[2]);
    /* add_bos: tokenizer_config's flag, else whether the post_processor's single template starts with a special token */
    bool add_bos = false, add_eos = false;
    const cJSON *pp = item(tj, "post_processor");
    const cJSON *single = type_is(pp, "TemplateProcessing") ? item(pp, "single") : NULL;
    if (cJSON_IsArray(single) && single->child) {
        add_bos = item(single->child, "SpecialToken") != NULL;
        const cJSON *last = single->child;
        while (last->next) last = last->next;
        add_eos = last != single->child && item(last, "SpecialToken") != NULL;
        if (add_bos && ids[0] < 0) {
            const cJSON *sid = item(item(single->child, "SpecialToken"), "id");
            if (cJSON_IsString(sid) && (ids[0] = find_id(t, sid->valuestring)) >= 0)
                gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)ids[0]);
        }
    }
    const cJSON *ab = tc ? item(tc, "add_bos_token") : NULL, *ae = tc ? item(tc, "add_eos_token") : NULL;
    if (!s && ab && !cJSON_IsBool(ab)) s = th_set_error(TH_ERR_FORMAT, "%s: key 'add_bos_token' must be true or false", p);
    if (!s && ae && !cJSON_IsBool(ae)) s = th_set_error(TH_ERR_FORMAT, "%s: key 'add_eos_token' must be true or false", p);
    if (ab && cJSON_IsBool(ab)) add_bos = cJSON_IsTrue(ab);
    if (ae && cJSON_IsBool(ae)) add_eos = cJSON_IsTrue(ae);
    if (!s && add_bos && ids[0] < 0) s = th_set_error(TH_ERR_FORMAT, "%s: add_bos_token is true but there is no bos_token", dir);
    if (!s && add_eos && ids[1] < 0) s = th_set_error(TH_ERR_FORMAT, "%s: add_eos_token is true but there is no eos_token", dir);
    if (!s) {
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
        gguf_w_bool(w, "tokenizer.ggml.add_eos_token", add_eos);
    }
    /* chat template: chat_template.jinja beside it, or tokenizer_config's chat_template */
    char *tmpl = NULL;
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    if (!s && access(p, F_OK) == 0) s = hf_read_text(p, 4u << 20, &tmpl, NULL);
    const cJSON *ct = tc ? item(tc, "chat_template") : NULL;
    if (!s && !tmpl && cJSON_IsArray(ct)) {
        for (const cJSON *e = ct->child; e; e = e->next) {
            const cJSON *nm = item(e, "name"), *tx = item(e, "template");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default") && cJSON_IsString(tx)) ct = tx;
        }
    }
    if (!s && tmpl) gguf_w_str(w, "tokenizer.chat_template", tmpl);
    else if (!s && cJSON_IsString(ct)) gguf_w_str(w, "tokenizer.chat_template", ct->valuestring);
    free(tmpl);
    cJSON_Delete(tc);
    return s;
}

/* ------------------------------------------------------------ SentencePiece-style BPE */

/* Whether the tokenizer is SentencePiece-style (Metaspace / "▁" normalizer, byte
 * fallback), and if so whether a "▁" is put before the text (add_space_prefix). */
static bool is_spm_style(const cJSON *tj, bool *prefix) {
    const cJSON *model = item(tj, "model"), *norm = item(tj, "normalizer"), *pt = item(tj, "pre_tokenizer");
    bool meta = type_is(pt, "Metaspace"), repl = false;
    *prefix = false;
    if (meta) {
        const cJSON *ps = item(pt, "prepend_scheme");
        *prefix = cJSON_IsString(ps) ? strcmp(ps->valuestring, "never") != 0 : !cJSON_IsFalse(item(pt, "add_prefix_space"));
    }
    const cJSON *steps = type_is(norm, "Sequence") ? item(norm, "normalizers") : NULL;
    for (const cJSON *e = cJSON_IsArray(steps) ? steps->child : norm; e; e = steps ? e->next : NULL) {
        const cJSON *pp = item(e, "prepend"), *pat = item(item(e, "pattern"), "String"), *ct = item(e, "content");
        if (type_is(e, "Prepend") && cJSON_IsString(pp) && !strcmp(pp->valuestring, "\xe2\x96\x81")) *prefix = true;
        if (type_is(e, "Replace") && cJSON_IsString(pat) && !strcmp(pat->valuestring, " ") && cJSON_IsString(ct) &&
            !strcmp(ct->valuestring, "\xe2\x96\x81"))
            repl = true;
        if (!steps) break;
    }
    return meta || repl || cJSON_IsTrue(item(model, "byte_fallback"));
}

typedef struct text_ix { const char *text; int64_t id; } text_ix;
static int cmp_text(const void *a, const void *b) { return strcmp(((const text_ix *)a)->text, ((const text_ix *)b)->text); }

static int64_t ix_find(const text_ix *ix, int64_t n, const char *s) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        int c = strcmp(ix[mid].text, s);
        if (!c) return ix[mid].id;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

/* Scores for the SPM merge order: a token made by merge rank r scores -r (so
 * earlier merges win), a token no merge makes scores below every merge. */
static th_status spm_scores(const char *path, const tok_table *t, const cJSON *mg, float *score) {
    text_ix *ix = malloc((size_t)t->n * sizeof *ix);
    if (!ix) return th_set_error(TH_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < t->n; i++) ix[i] = (text_ix){ t->text[i], i };
    qsort(ix, (size_t)t->n, sizeof *ix, cmp_text);
    int64_t r = 0;
    for (int64_t i = 0; i < t->n; i++) score[i] = -1e9f;
    char buf[1024];
    for (const cJSON *e = mg->child; e; e = e->next, r++) {
        const char *sp = cJSON_IsString(e) ? strchr(e->valuestring, ' ') : NULL;
        if (sp) snprintf(buf, sizeof buf, "%.*s%s", (int)(sp - e->valuestring), e->valuestring, sp + 1);
        else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) && cJSON_IsString(e->child->next))
            snprintf(buf, sizeof buf, "%s%s", e->child->valuestring, e->child->next->valuestring);
        else {
            free(ix);
            return th_set_error(TH_ERR_FORMAT, "%s: model.merges[%lld] is neither \"a b\" nor [\"a\", \"b\"]", path, (long long)r);
        }
        int64_t id = ix_find(ix, t->n, buf);
        if (id >= 0 && score[id] == -1e9f) score[id] = -(float)r;
    }
    free(ix);
    return TH_OK;
}

static bool is_byte_token(const char *s) {
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' && strchr("0123456789ABCDEF", s[3]) && strchr("0123456789ABCDEF", s[4]);
}

static th_status fill_table(const char *path, const cJSON *tj, tok_table *t);

static th_status write_spm(const char *path, const char *dir, const cJSON *tj, int64_t n_vocab, bool prefix, gguf_writer *w) {
    const cJSON *model = item(tj, "model"), *mg = item(model, "merges");
    if (!type_is(model, "BPE") || !cJSON_IsArray(mg))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: a SentencePiece-style tokenizer must be BPE with merges (Unigram is not "
                            "supported yet)", path);
    const cJSON *pt = item(tj, "pre_tokenizer");
    if (pt && !cJSON_IsNull(pt) && !type_is(pt, "Metaspace"))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: SentencePiece-style tokenizer with a pre_tokenizer other than Metaspace", path);
    tok_table t = { .n = n_vocab };
    th_status s = fill_table(path, tj, &t);
    float *score = s ? NULL : malloc((size_t)n_vocab * sizeof *score);
    if (!s && !score) s = th_set_error(TH_ERR_NOMEM, "out of memory");
    if (!s) s = spm_scores(path, &t, mg, score);
    const cJSON *unk = item(model, "unk_token");
    for (int64_t i = 0; !s && i < n_vocab; i++) {
        if (t.type[i] != TT_NORMAL) continue;
        if (is_byte_token(t.text[i])) t.type[i] = 6;
        else if (cJSON_IsString(unk) && !strcmp(unk->valuestring, t.text[i])) t.type[i] = 2;
    }
    if (!s) {
        gguf_w_str(w, "tokenizer.ggml.model", "llama");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", t.text, (uint64_t)n_vocab);
        gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_F32, score, (uint64_t)n_vocab);
        gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, t.type, (uint64_t)n_vocab);
        gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
        /* the Metaspace pre-tokenizer's own rule (src/tokenizer/: prefix_scheme); the legacy
         * Prepend normalizer prepends always, as llama.cpp does */
        const cJSON *ps = type_is(pt, "Metaspace") ? item(pt, "prepend_scheme") : NULL;
        if (prefix && cJSON_IsString(ps) && (!strcmp(ps->valuestring, "first") || !strcmp(ps->valuestring, "always")))
            gguf_w_str(w, "tokenizer.ggml.metaspace_prepend_scheme", ps->valuestring);
        s = write_config(dir, tj, &t, cJSON_IsString(unk) ? unk->valuestring : NULL, w);
    }
    free(score);
    for (int64_t i = 0; i < t.n_owned; i++) free(t.owned[i]);
    free(t.owned);
    free(t.text);
    free(t.type);
    return s;
}

/* ------------------------------------------------------------ byte-level BPE */

/* The token table: model.vocab and added_tokens by id, padding past them. */
static th_status fill_table(const char *path, const cJSON *tj, tok_table *t) {
    const cJSON *vocab = item(item(tj, "model"), "vocab");
    if (!cJSON_IsObject(vocab)) return th_set_error(TH_ERR_FORMAT, "%s: model.vocab must be an object", path);
    int64_t n_vocab = t->n;
    t->text = calloc((size_t)n_vocab, sizeof *t->text);
    t->type = calloc((size_t)n_vocab, sizeof *t->type);
    t->owned = calloc((size_t)n_vocab, sizeof *t->owned);
    th_status s = TH_OK;
    if (!t->text || !t->type || !t->owned) s = th_set_error(TH_ERR_NOMEM, "out of memory for %lld tokens", (long long)n_vocab);
    for (const cJSON *e = vocab->child; e && !s; e = e->next) s = put_token(path, t, e, e->string, TT_NORMAL);
    const cJSON *added = item(tj, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e && !s; e = e->next) {
        const char *c = token_content(e);
        if (!c) { s = th_set_error(TH_ERR_FORMAT, "%s: an added_tokens entry has no 'content' string", path); break; }
        s = put_token(path, t, item(e, "id"), c, cJSON_IsTrue(item(e, "special")) ? TT_CONTROL : TT_USER);
    }
    for (int64_t i = 0; i < n_vocab && !s; i++) {
        if (t->text[i]) continue;
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%lld]", (long long)i);
        if (!(t->owned[t->n_owned] = strdup(buf))) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); break; }
        t->text[i] = t->owned[t->n_owned++];
        t->type[i] = TT_UNUSED;
    }
    return s;
}

static th_status write_bpe(const char *path, const char *dir, const cJSON *tj, int64_t n_vocab, gguf_writer *w) {
    const cJSON *model = item(tj, "model");
    const cJSON *vocab = item(model, "vocab"), *mg = item(model, "merges");
    if (!type_is(model, "BPE") && !(model && !item(model, "type") && cJSON_IsArray(mg)))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: model type is not BPE (WordPiece and Unigram tokenizers are not supported yet)", path);
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(mg))
        return th_set_error(TH_ERR_FORMAT, "%s: model.vocab must be an object and model.merges an array", path);
    const cJSON *norm = item(tj, "normalizer");
    if (norm && !cJSON_IsNull(norm) && !type_is(norm, "NFC"))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: this normalizer is not supported for byte-level BPE (none or NFC is)", path);
    bool ignore_merges = cJSON_IsTrue(item(model, "ignore_merges"));
    const char *pre = NULL;
    th_status s = pre_name(path, item(tj, "pre_tokenizer"), ignore_merges, &pre);
    if (s) return s;
    tok_table t = { .n = n_vocab };
    char **merges = NULL;
    int64_t n_merges = 0;
    s = fill_table(path, tj, &t);
    if (!s) s = merges_of(path, mg, &merges, &n_merges);
    if (!s) {
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", pre);
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", t.text, (uint64_t)n_vocab);
        gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, t.type, (uint64_t)n_vocab);
        gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)n_merges);
        s = write_config(dir, tj, &t, NULL, w);
    }
    for (int64_t i = 0; i < n_merges; i++) free(merges[i]);
    free(merges);
    for (int64_t i = 0; i < t.n_owned; i++) free(t.owned[i]);
    free(t.owned);
    free(t.text);
    free(t.type);
    return s;
}

/* ------------------------------------------------------------ Unigram */

/* model.vocab [[piece, score], ...] -> tokenizer.ggml.model = t5 (src/tokenizer/unigram.c):
 * pieces and scores by id, unk_id as the unknown token, Metaspace's "▁" prefix. Only
 * without a normalizer (T5's Precompiled charsmap is refused) and without byte_fallback. */
static th_status write_unigram(const char *path, const char *dir, const cJSON *tj, int64_t n_vocab, gguf_writer *w) {
    const cJSON *model = item(tj, "model"), *vocab = item(model, "vocab"), *norm = item(tj, "normalizer"), *pt = item(tj, "pre_tokenizer");
    if (!cJSON_IsArray(vocab)) return th_set_error(TH_ERR_FORMAT, "%s: Unigram model.vocab must be an array of [piece, score]", path);
    if (norm && !cJSON_IsNull(norm))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: Unigram with a normalizer (%s) is not supported", path,
                            cJSON_IsString(item(norm, "type")) ? item(norm, "type")->valuestring : "?");
    if (cJSON_IsTrue(item(model, "byte_fallback"))) return th_set_error(TH_ERR_UNSUPPORTED, "%s: Unigram byte_fallback is not supported", path);
    if (pt && !cJSON_IsNull(pt) && !type_is(pt, "Metaspace"))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: Unigram with a pre_tokenizer other than Metaspace", path);
    tok_table t = { .n = n_vocab };
    t.text = calloc((size_t)n_vocab, sizeof *t.text);
    t.type = calloc((size_t)n_vocab, sizeof *t.type);
    t.owned = calloc((size_t)n_vocab, sizeof *t.owned);
    float *score = calloc((size_t)n_vocab, sizeof *score);
    th_status s = t.text && t.type && t.owned && score ? TH_OK : th_set_error(TH_ERR_NOMEM, "out of memory");
    int64_t i = 0;
    for (const cJSON *e = vocab->child; e && !s; e = e->next, i++) {
        const cJSON *pc = cJSON_IsArray(e) ? e->child : NULL, *sc = pc ? pc->next : NULL;
        if (!cJSON_IsString(pc) || !cJSON_IsNumber(sc) || i >= n_vocab)
            s = th_set_error(TH_ERR_FORMAT, "%s: model.vocab[%lld] is not [piece, score] (or past vocab_size)", path, (long long)i);
        else { t.text[i] = pc->valuestring; t.type[i] = TT_NORMAL; score[i] = (float)sc->valuedouble; }
    }
    const cJSON *added = item(tj, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e && !s; e = e->next) {
        const char *c = token_content(e);
        if (!c) s = th_set_error(TH_ERR_FORMAT, "%s: an added_tokens entry has no 'content' string", path);
        else s = put_token(path, &t, item(e, "id"), c, cJSON_IsTrue(item(e, "special")) ? TT_CONTROL : TT_USER);
    }
    const cJSON *uid = item(model, "unk_id");
    int64_t unk = hf_json_i64(uid, -1);
    if (!s && (unk < 0 || unk >= n_vocab || !t.text[unk]))
        s = th_set_error(TH_ERR_FORMAT, "%s: Unigram model.unk_id is missing or not a token", path);
    for (int64_t k = 0; !s && k < n_vocab; k++) {
        if (t.text[k]) continue;
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%lld]", (long long)k);
        if (!(t.owned[t.n_owned] = strdup(buf))) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); break; }
        t.text[k] = t.owned[t.n_owned++];
        t.type[k] = TT_UNUSED;
    }
    if (!s) {
        t.type[unk] = 2;
        const cJSON *ps = type_is(pt, "Metaspace") ? item(pt, "prepend_scheme") : NULL;
        bool prefix = type_is(pt, "Metaspace") && !(cJSON_IsString(ps) && !strcmp(ps->valuestring, "never"));
        gguf_w_str(w, "tokenizer.ggml.model", "t5");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", t.text, (uint64_t)n_vocab);
        gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_F32, score, (uint64_t)n_vocab);
        gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, t.type, (uint64_t)n_vocab);
        gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
        if (prefix && cJSON_IsString(ps) && (!strcmp(ps->valuestring, "first") || !strcmp(ps->valuestring, "always")))
            gguf_w_str(w, "tokenizer.ggml.metaspace_prepend_scheme", ps->valuestring);
        s = write_config(dir, tj, &t, t.text[unk], w);
    }
    for (int64_t k = 0; k < t.n_owned; k++) free(t.owned[k]);
    free(t.owned); free(t.text); free(t.type); free(score);
    return s;
}

/* ------------------------------------------------------------ WordPiece (BERT) */

/* The special token named by tokenizer_config's key (or the default text), -1 if none. */
static int64_t config_token(const char *dir, const char *key, const char *def, const tok_table *t) {
    char p[4200], *text = NULL;
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    int64_t id = -1;
    if (access(p, F_OK) == 0 && !hf_read_text(p, 64u << 20, &text, NULL)) {
        cJSON *tc = cJSON_Parse(text);
        const char *c = token_content(item(tc, key));
        if (c) id = find_id(t, c);
        cJSON_Delete(tc);
        free(text);
        if (c) return id;
    }
    return find_id(t, def);
}

/* As llama.cpp's convert writes a BERT vocabulary (tokenizer.ggml.model = bert):
 * a word-initial piece gets a "▁" in front, a "##" continuation loses its "##",
 * bracketed and added tokens stay as they are. The normalizer must be
 * BertNormalizer (lowercase: tokenizer.ggml.normalizer.lowercase), the
 * pre-tokenizer BertPreTokenizer (or Whitespace / none). */
static th_status write_wordpiece(const char *path, const char *dir, const cJSON *tj, int64_t n_vocab, gguf_writer *w) {
    const cJSON *model = item(tj, "model"), *norm = item(tj, "normalizer"), *pt = item(tj, "pre_tokenizer");
    const cJSON *pfx = item(model, "continuing_subword_prefix");
    const char *cont = cJSON_IsString(pfx) ? pfx->valuestring : "##";
    if (strcmp(cont, "##"))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: WordPiece continuing_subword_prefix '%s' (only \"##\" is supported)", path, cont);
    if (!type_is(norm, "BertNormalizer"))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: WordPiece with a normalizer other than BertNormalizer", path);
    if (pt && !cJSON_IsNull(pt) && !type_is(pt, "BertPreTokenizer"))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: WordPiece with a pre_tokenizer other than BertPreTokenizer", path);
    const cJSON *lc = item(norm, "lowercase"), *sa = item(norm, "strip_accents");
    bool lower = !cJSON_IsFalse(lc), strip = cJSON_IsBool(sa) ? cJSON_IsTrue(sa) : lower;
    tok_table t = { .n = n_vocab };
    th_status s = fill_table(path, tj, &t);
    for (int64_t i = 0; !s && i < n_vocab; i++) {
        const char *x = t.text[i];
        size_t n = strlen(x);
        if (t.type[i] != TT_NORMAL || (n >= 2 && x[0] == '[' && x[n - 1] == ']')) continue;
        char *y = malloc(n + 4);
        if (!y) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); break; }
        if (!strncmp(x, "##", 2)) memcpy(y, x + 2, n - 1);
        else { memcpy(y, "\xe2\x96\x81", 3); memcpy(y + 3, x, n + 1); }
        t.owned[t.n_owned++] = y;
        t.text[i] = y;
    }
    if (!s) {
        gguf_w_str(w, "tokenizer.ggml.model", "bert");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", t.text, (uint64_t)n_vocab);
        gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, t.type, (uint64_t)n_vocab);
        if (!lower || strip != lower) {
            gguf_w_bool(w, "tokenizer.ggml.normalizer.lowercase", lower);
            gguf_w_bool(w, "tokenizer.ggml.normalizer.strip_accents", strip);
        }
        static const char *const ck[] = { "cls_token", "sep_token", "unk_token", "pad_token", "mask_token" };
        static const char *const cd[] = { "[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]" };
        static const char *const gk[] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.seperator_token_id",
                                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                                          "tokenizer.ggml.mask_token_id" };
        int64_t ids[5];
        for (int i = 0; i < 5; i++) {
            if ((ids[i] = config_token(dir, ck[i], cd[i], &t)) >= 0) gguf_w_u32(w, gk[i], (uint32_t)ids[i]);
            if (i == 0 && ids[0] >= 0) gguf_w_u32(w, "tokenizer.ggml.cls_token_id", (uint32_t)ids[0]);   /* llama.cpp's name */
        }
        if (ids[0] < 0 || ids[1] < 0)
            s = th_set_error(TH_ERR_FORMAT, "%s: WordPiece tokenizer without a [CLS] or [SEP] token", path);
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
        gguf_w_bool(w, "tokenizer.ggml.add_sep_token", true);
    }
    for (int64_t i = 0; i < t.n_owned; i++) free(t.owned[i]);
    free(t.owned);
    free(t.text);
    free(t.type);
    return s;
}

th_status hf_tok_write(const char *dir, int64_t n_vocab, gguf_writer *w) {
    char path[4200], *text = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    th_status s = hf_read_text(path, 256u << 20, &text, NULL);
    if (s) return s;
    cJSON *tj = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(tj)) { cJSON_Delete(tj); return th_set_error(TH_ERR_FORMAT, "%s: not a JSON object", path); }
    if (n_vocab <= 0) {   /* tokenizer only: as many rows as the highest id needs */
        n_vocab = 0;
        const cJSON *vocab = item(item(tj, "model"), "vocab"), *added = item(tj, "added_tokens");
        for (const cJSON *e = cJSON_IsObject(vocab) ? vocab->child : NULL; e; e = e->next)
            if (cJSON_IsNumber(e) && e->valuedouble >= n_vocab && e->valuedouble < (1 << 24)) n_vocab = (int64_t)e->valuedouble + 1;
        if (cJSON_IsArray(vocab) && cJSON_GetArraySize(vocab) < (1 << 24)) n_vocab = cJSON_GetArraySize(vocab);   /* Unigram */
        for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
            const cJSON *id = item(e, "id");
            if (cJSON_IsNumber(id) && id->valuedouble >= n_vocab && id->valuedouble < (1 << 24)) n_vocab = (int64_t)id->valuedouble + 1;
        }
        if (n_vocab == 0) { cJSON_Delete(tj); return th_set_error(TH_ERR_FORMAT, "%s: no tokens", path); }
    }
    bool prefix;
    s = type_is(item(tj, "model"), "WordPiece") ? write_wordpiece(path, dir, tj, n_vocab, w)
        : type_is(item(tj, "model"), "Unigram")  ? write_unigram(path, dir, tj, n_vocab, w)
        : is_spm_style(tj, &prefix)              ? write_spm(path, dir, tj, n_vocab, prefix, w)
                                                 : write_bpe(path, dir, tj, n_vocab, w);
    cJSON_Delete(tj);
    return s;
}
