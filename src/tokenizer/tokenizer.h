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
/* (named th_vocab_adds_bos: theseus.h already has th_vocab_add_bos(const th_model *)) */
bool th_vocab_adds_bos(const th_vocab *v);
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

/* Streaming-safe output of decoded pieces: bytes go in as tokens are decoded;
 * only complete UTF-8 characters come out, an incomplete tail waits for the next
 * piece, and invalid bytes come out as U+FFFD, so a token boundary inside a
 * multi-byte character never yields broken text. Zero-initialize to start. */
typedef struct th_utf8_stream { uint8_t pending[4]; uint8_t n_pending; } th_utf8_stream;
/* Feed n bytes; writes the ready text to out (capacity >= 3 * (n + 4)); returns its length. */
size_t th_utf8_stream_push(th_utf8_stream *st, const char *in, size_t n, char *out);
/* End of stream: an unfinished character becomes U+FFFD (out >= 3 bytes). Resets st. */
size_t th_utf8_stream_flush(th_utf8_stream *st, char *out);

#endif
