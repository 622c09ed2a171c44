/* api.c — the small public accessors of theseus.h: model facts, metadata
 * strings, and the vocabulary calls (which forward to src/tokenizer/). */
#include "arch/arch.h"
#include "model.h"
#include <stdlib.h>

int32_t th_model_n_vocab(const th_model *m) { return m->hp.n_vocab; }
int32_t th_model_n_ctx_train(const th_model *m) { return m->hp.n_ctx_train; }
int32_t th_model_n_embd(const th_model *m) { return m->hp.n_embd; }
int32_t th_model_n_layer(const th_model *m) { return m->hp.n_layer; }
uint64_t th_model_n_params(const th_model *m) { return m->n_params; }
uint64_t th_model_size_bytes(const th_model *m) { return m->n_bytes; }
const char *th_model_arch_name(const th_model *m) { return m->arch->name; }
const char *th_model_desc(const th_model *m) { return m->desc; }

const char *th_model_arch_options(const th_model *m) {
    static _Thread_local char buf[512];
    buf[0] = 0;
    if (m->arch->describe) m->arch->describe(m, buf, sizeof buf);
    return buf;
}

const char *th_model_meta_str(const th_model *mc, const char *key) {
    th_model *m = (th_model *)mc; /* the cache of copies is an implementation detail */
    gguf_str s;
    if (!key || !gguf_get_str(m->file, key, &s)) return NULL;
    for (size_t i = 0; i < m->meta_cache_n; i++)
        if (m->meta_cache[i] && !strncmp(m->meta_cache[i], key, strlen(key) + 1))
            return m->meta_cache[i] + strlen(key) + 1;
    size_t kl = strlen(key) + 1;
    char *copy = malloc(kl + s.len + 1);
    char **nc = realloc(m->meta_cache, (m->meta_cache_n + 1) * sizeof *nc);
    if (!copy || !nc) { free(copy); if (nc) m->meta_cache = nc; return NULL; }
    m->meta_cache = nc;
    memcpy(copy, key, kl);
    memcpy(copy + kl, s.ptr, s.len);
    copy[kl + s.len] = 0;
    m->meta_cache[m->meta_cache_n++] = copy;
    return copy + kl;
}

th_token th_token_bos(const th_model *m) { return th_vocab_bos(m->vocab); }
th_token th_token_eos(const th_model *m) { return th_vocab_eos(m->vocab); }
bool th_token_is_eog(const th_model *m, th_token t) { return th_vocab_is_eog(m->vocab, t); }
bool th_model_add_bos(const th_model *m) { return th_vocab_add_bos(m->vocab); }

th_status th_tokenize(const th_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                      th_token *out, size_t cap, size_t *n_out) {
    if (!m || (!text && len) || !n_out) return th_set_error(TH_ERR_ARG, "th_tokenize: invalid arguments");
    return th_vocab_tokenize(m->vocab, text ? text : "", len, add_special, parse_special, out, cap, n_out);
}

int32_t th_token_to_piece(const th_model *m, th_token t, char *buf, int32_t cap, bool special) {
    return th_vocab_token_to_piece(m->vocab, t, buf, cap, special);
}

int64_t th_detokenize(const th_model *m, const th_token *tokens, size_t n, char *buf, size_t cap, bool special) {
    return th_vocab_detokenize(m->vocab, tokens, n, buf, cap, special);
}
