/* wordpiece.c — WordPiece (tokenizer.ggml.model = bert), as llama.cpp's
 * llm_tokenizer_wpm: BERT-style normalization (NFD first code point and accent
 * removal, lower-casing), splitting on whitespace and around punctuation and CJK
 * characters, then greedy longest-prefix matching of "▁word" against the vocab;
 * a word that cannot be matched completely becomes [UNK]. */
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <string.h>

static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Greedy longest match of "▁" + word; appends tokens or one [UNK]. */
static void match_word(const th_vocab *v, const char *w, size_t wn, th_bytes *tmp, th_ids *out) {
    tmp->n = 0;
    th_bytes_put(tmp, "\xE2\x96\x81", 3);
    th_bytes_put(tmp, w, wn);
    if (tmp->failed) return;
    size_t n = tmp->n, start = out->n;
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        size_t jmax = TH_MIN(n, i + v->max_token_len + 1);
        for (size_t j = jmax; j > i; j--) {
            int32_t id = th_vocab_find(v, tmp->p + i, j - i);
            if (id >= 0 && id < v->n_tokens) { th_ids_push(out, id); found = true; i = j - 1; break; }
        }
        if (!found) { out->n = start; break; }
    }
    if (out->n == start && v->unk >= 0) th_ids_push(out, v->unk);
}

th_status th_wpm_tokenize(const th_vocab *v, const char *text, size_t len, th_ids *out) {
    th_bytes word = {0}, tmp = {0};
    const uint8_t *s = (const uint8_t *)text;
    for (size_t i = 0; i < len && !word.failed && !tmp.failed;) {
        uint32_t c = th_utf8_next(s, len, &i);
        if (v->strip_accents) c = th_cpt_nfd_first(c);
        unsigned f = th_cpt_flags(c);
        if (f & TH_CPT_WHITESPACE) {
            if (word.n) { match_word(v, word.p, word.n, &tmp, out); word.n = 0; }
            continue;
        }
        if (c == 0 || c == 0xFFFD || (f & TH_CPT_CONTROL)) continue;
        if (v->strip_accents && (f & TH_CPT_MARK)) continue;
        char u[4];
        int l = th_utf8_put(v->lowercase ? th_cpt_tolower(c) : c, u);
        if ((f & TH_CPT_PUNCT) || (c < 0x7F && (f & TH_CPT_SYMBOL)) || is_chinese(c)) {
            if (word.n) { match_word(v, word.p, word.n, &tmp, out); word.n = 0; }
            match_word(v, u, (size_t)l, &tmp, out);
        } else {
            th_bytes_put(&word, u, (size_t)l);
        }
    }
    if (word.n && !word.failed) match_word(v, word.p, word.n, &tmp, out);
    bool oom = word.failed || tmp.failed;
    free(word.p); free(tmp.p);
    return oom ? th_set_error(TH_ERR_NOMEM, "tokenize: out of memory") : TH_OK;
}
