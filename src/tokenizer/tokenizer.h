/* tokenizer.h — vocabulary loaded from GGUF metadata (tokenizer.ggml.*) and the
 * tokenizer algorithms: SentencePiece (llama), byte-level BPE (gpt2) with the
 * pre-tokenizer named by tokenizer.ggml.pre, WordPiece (bert). Special-token
 * handling follows llama.cpp (add_bos/add_eos flags, parse_special). The vocab
 * copies what it needs, so it outlives the gguf_file it was loaded from. */
#ifndef TH_TOKENIZER_H
#define TH_TOKENIZER_H

#include "core/core.h"
#include "gguf/gguf.h"

typedef struct th_vocab th_vocab;

th_status th_vocab_load(const gguf_file *f, th_vocab **out);
void th_vocab_free(th_vocab *v);

int32_t th_vocab_n_tokens(const th_vocab *v);
th_token th_vocab_bos(const th_vocab *v);      /* -1 if none */
th_token th_vocab_eos(const th_vocab *v);      /* -1 if none */
th_token th_vocab_eot(const th_vocab *v);      /* -1 if none */
bool th_vocab_is_eog(const th_vocab *v, th_token t);
bool th_vocab_add_bos(const th_vocab *v);
const char *th_vocab_model_name(const th_vocab *v); /* "llama", "gpt2", "bert" */
const char *th_vocab_pre_name(const th_vocab *v);   /* tokenizer.ggml.pre or "default" */

/* Same contract as th_tokenize() in theseus.h. */
th_status th_vocab_tokenize(const th_vocab *v, const char *text, size_t len,
                            bool add_special, bool parse_special,
                            th_token *out, size_t cap, size_t *n_out);
/* Same contract as th_token_to_piece() in theseus.h. */
int32_t th_vocab_token_to_piece(const th_vocab *v, th_token t, char *buf, int32_t cap, bool special);


/* The whole text of tokens[0..n): their pieces concatenated (no space clean-up).
 * Returns the byte count, -(needed) if cap is too small (buf then holds a prefix),
 * or INT64_MIN if an id is out of range. */
int64_t th_vocab_detokenize(const th_vocab *v, const th_token *tokens, size_t n, char *buf, size_t cap,
                            bool special);

/* th_utf8_stream (streaming-safe output of pieces) is public: see theseus.h. */

#endif
