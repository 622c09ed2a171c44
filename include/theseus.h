/* theseus.h — the public C API of the theseus inference engine.
 *
 * Everything the CLI, the server and the tests use goes through this header.
 * Handles are opaque. Every fallible call returns a th_status; on failure
 * th_last_error() holds a message naming what was wrong (thread-local).
 * The library never exits or aborts on bad input.
 */
#ifndef THESEUS_H
#define THESEUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define THESEUS_VERSION "0.1.0"

typedef enum th_status {
    TH_OK = 0,
    TH_ERR_IO,          /* file could not be opened / read / mapped       */
    TH_ERR_FORMAT,      /* malformed input (file, text, request)           */
    TH_ERR_UNSUPPORTED, /* valid but not implemented (type, architecture)  */
    TH_ERR_NOMEM,       /* allocation failed                               */
    TH_ERR_ARG,         /* invalid argument from the caller                */
    TH_ERR_CAPACITY,    /* context / KV cache / batch full                 */
    TH_ERR_INTERNAL     /* broken invariant (a bug)                        */
} th_status;

typedef int32_t th_token;

/* Message of the last failure on this thread ("" if none). */
const char *th_last_error(void);
const char *th_status_name(th_status s);
/* Set this thread's last-error message (printf-style) and return s; for
 * clients that report their own failures the same way. */
th_status th_set_error(th_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void th_clear_error(void);

/* ---------------------------------------------------------------- model */

typedef struct th_model th_model;

typedef struct th_model_params {
    bool use_mmap;       /* map the file (default true); false reads it into memory */
    bool verbose;        /* print load progress to stderr */
    bool vocab_only;     /* load only the tokenizer (any architecture, no weights) */
} th_model_params;

th_model_params th_model_default_params(void);
th_status th_model_load(const char *path, const th_model_params *params, th_model **out);
void th_model_free(th_model *model);

int32_t th_model_n_vocab(const th_model *model);
int32_t th_model_n_ctx_train(const th_model *model);
int32_t th_model_n_embd(const th_model *model);
int32_t th_model_n_layer(const th_model *model);
uint64_t th_model_n_params(const th_model *model);
uint64_t th_model_size_bytes(const th_model *model);   /* bytes of weights */
const char *th_model_arch_name(const th_model *model);
/* One line, e.g. "llama 135M Q4_1" — for bench rows and logs. */
const char *th_model_desc(const th_model *model);
/* The architecture's distinctive options as text, e.g. "rope=norm tied_output". */
const char *th_model_arch_options(const th_model *model);

/* Metadata string value (NUL-terminated copy owned by the model) or NULL. */
const char *th_model_meta_str(const th_model *model, const char *key);

/* ---------------------------------------------------------------- model files */

/* A parsed, validated GGUF file, for inspection (no architecture needed). */
typedef struct th_file th_file;

typedef struct th_tensor_info {
    const char *name;
    const char *type;       /* "Q4_K" */
    uint32_t n_dims;
    uint64_t ne[4];         /* ne[0] = row length */
    uint64_t nbytes;
    uint64_t offset;        /* in the file */
} th_tensor_info;

th_status th_file_open(const char *path, th_file **out);
void th_file_close(th_file *f);
uint32_t th_file_version(const th_file *f);
int64_t th_file_n_meta(const th_file *f);
const char *th_file_meta_key(const th_file *f, int64_t i);
const char *th_file_meta_type(const th_file *f, int64_t i);   /* "u32", "string", "array[string]" */
/* The value as text (arrays: the first max_items elements and the count). Returns
 * the length it needed (like snprintf). */
int th_file_meta_value(const th_file *f, int64_t i, char *buf, size_t cap, int max_items);
int64_t th_file_n_tensors(const th_file *f);
th_status th_file_tensor(const th_file *f, int64_t i, th_tensor_info *out);

/* ---------------------------------------------------------------- vocab */

th_token th_token_bos(const th_model *model);   /* -1 if none */
th_token th_token_eos(const th_model *model);   /* -1 if none */
bool th_token_is_eog(const th_model *model, th_token t); /* end of generation */
bool th_model_add_bos(const th_model *model);   /* tokenizer adds BOS by default */

/* Tokenize text[0..len). add_special: BOS/EOS as the vocab's metadata says.
 * parse_special: control-token text (e.g. "<|im_start|>") becomes the control token.
 * Writes up to cap ids to out; *n_out gets the full count (even if > cap, in which
 * case TH_ERR_CAPACITY is returned and out holds the first cap ids). */
th_status th_tokenize(const th_model *model, const char *text, size_t len,
                      bool add_special, bool parse_special,
                      th_token *out, size_t cap, size_t *n_out);

/* The bytes of one token's text (SPM '▁' → ' ', byte tokens → the byte).
 * Control tokens give "" unless special is true. Returns the byte count,
 * or -(needed) if buf is too small, or INT32_MIN for an invalid id. */
int32_t th_token_to_piece(const th_model *model, th_token t, char *buf, int32_t cap, bool special);

/* The text of tokens[0..n): their pieces concatenated. Returns the byte count,
 * -(needed) if cap is too small (buf then holds a prefix), INT64_MIN for a bad id. */
int64_t th_detokenize(const th_model *model, const th_token *tokens, size_t n, char *buf, size_t cap,
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

/* ---------------------------------------------------------------- context */

typedef struct th_context th_context;

typedef struct th_context_params {
    uint32_t n_ctx;        /* KV capacity in tokens, summed over sequences (0 = min(train, 4096)) */
    uint32_t n_batch;      /* max tokens per th_decode call (0 = 512) */
    uint32_t n_seq_max;    /* max distinct sequence ids (0 = 1) */
    uint32_t kv_block;     /* tokens per KV block (0 = 16) */
    int32_t  n_threads;    /* 0 = number of cores */
    int32_t  kv_type;      /* TH_KV_F16 (default, as llama.cpp) or TH_KV_F32 */
    bool     gpu;          /* run the whole model on the GPU (CUDA build, a device present) */
    bool     logits_argmax_only; /* only the argmax of each output row is needed (default false):
                                  * th_get_argmax works, th_get_logits returns NULL with an error
                                  * (on either backend). On the GPU the logits rows stay on the
                                  * device: a kernel takes each row's argmax and only n_out int32
                                  * are copied back. For greedy decoding (th_sampler_is_greedy). */
} th_context_params;

enum { TH_KV_F16 = 0, TH_KV_F32 = 1 };

th_context_params th_context_default_params(void);
th_status th_context_new(th_model *model, const th_context_params *params, th_context **out);
void th_context_free(th_context *ctx);
uint32_t th_context_n_ctx(const th_context *ctx);

/* A ragged batch: token i belongs to sequence seq_id[i] at position pos[i];
 * logits[i] != 0 asks for its logits. Positions of a sequence must continue
 * where its cached part ends. pos/seq_id/logits may be NULL: then pos continues
 * each sequence, seq_id is 0, and only the last token gets logits. */
typedef struct th_batch {
    int32_t n_tokens;
    const th_token *token;
    const int32_t *pos;
    const int32_t *seq_id;
    const int8_t *logits;
} th_batch;

th_status th_decode(th_context *ctx, const th_batch *batch);

/* Logits of batch token i of the last th_decode (i must have asked for them).
 * NULL with an error set otherwise, and always NULL (error "logits not kept:
 * context created with logits_argmax_only") for a logits_argmax_only context.
 * n_vocab floats. */
const float *th_get_logits(th_context *ctx, int32_t i);

/* The argmax of the logits of batch token i of the last th_decode (i must have
 * asked for logits): NaN counts as -inf and +inf as FLT_MAX, then the lowest id
 * among the largest values wins (ties go to the lower id); 0 when every value
 * is NaN or -inf. This is exactly the token a greedy sampler
 * (th_sampler_is_greedy) returns for that row. Works with and without
 * logits_argmax_only (without it, a scan of the host logits). -1 with an error
 * set if i has no logits. */
th_token th_get_argmax(th_context *ctx, int32_t i);

/* KV cache management per sequence. */
int32_t th_kv_seq_len(const th_context *ctx, int32_t seq);     /* cached positions */
th_status th_kv_seq_clear(th_context *ctx, int32_t seq);        /* drop all, free blocks */
th_status th_kv_seq_truncate(th_context *ctx, int32_t seq, int32_t n_keep); /* keep [0,n_keep) */
th_status th_kv_seq_copy(th_context *ctx, int32_t dst, int32_t src); /* share src's blocks (copy-on-write) */
uint32_t th_kv_blocks_used(const th_context *ctx);
uint32_t th_kv_blocks_total(const th_context *ctx);

/* ---------------------------------------------------------------- sampling */

typedef struct th_sampler th_sampler;

typedef struct th_sampler_params {
    uint64_t seed;
    float temperature;      /* <= 0: greedy */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off (llama.cpp semantics) */
    float presence_penalty; /* 0: off */
    float frequency_penalty;/* 0: off */
    int32_t penalty_last_n; /* window of recent tokens for penalties (0 = 64, -1 = all) */
} th_sampler_params;

th_sampler_params th_sampler_default_params(void);
th_status th_sampler_new(const th_sampler_params *params, int32_t n_vocab, th_sampler **out);
void th_sampler_free(th_sampler *s);
/* Optional additive bias per token (OpenAI logit_bias). */
th_status th_sampler_set_logit_bias(th_sampler *s, th_token t, float bias);
/* Pick a token from n_vocab logits (not modified). The chain and its order are
 * documented in src/sample/sampler.c. Returns -1 only if s or logits is NULL. */
th_token th_sampler_sample(th_sampler *s, const float *logits);
/* True when s always picks the argmax of the raw logits, whatever its history:
 * no non-zero logit bias, no penalties (repeat 1, presence 0, frequency 0), and
 * temperature <= 0 or top_k == 1. Then th_sampler_sample(s, row) equals
 * th_get_argmax's rule on that row, so a client may take th_get_argmax instead
 * (with logits_argmax_only on the GPU) — th_sampler_last_logprobs then has no
 * sample to report on. false for NULL. */
bool th_sampler_is_greedy(const th_sampler *s);
/* Record a token as part of the history (prompt or generated) for penalties.
 * Ids outside [0, n_vocab) are ignored. */
void th_sampler_accept(th_sampler *s, th_token t);
/* Forget the penalty history and restart the random stream from the seed
 * (logit biases stay). */
void th_sampler_reset(th_sampler *s);

/* Log-probabilities behind the last th_sampler_sample (for OpenAI `logprobs`):
 * log-softmax over all n_vocab logits after logit bias and penalties, before
 * top-k/top-p/min-p and temperature. Writes the n_top most likely tokens into
 * top (descending, ties to the lower id; only tokens whose logit is above -inf)
 * and returns how many it wrote; *chosen_logprob (if not NULL) gets the
 * log-probability of the token the last sample returned. Returns -1 with an
 * error set if there was no sample since creation or reset. */
typedef struct th_token_logprob {
    th_token token;
    float logprob;
} th_token_logprob;
int32_t th_sampler_last_logprobs(th_sampler *s, th_token_logprob *top, int32_t n_top,
                                 float *chosen_logprob);

/* ---------------------------------------------------------------- chat templates */

/* A sandboxed Jinja2-subset renderer for chat templates (src/template/). */
typedef struct th_chat_opts {
    bool add_generation_prompt;
    const char *bos_token;   /* "" if NULL */
    const char *eos_token;   /* "" if NULL */
    size_t max_output;       /* bytes; 0 = 1 MiB */
} th_chat_opts;

/* Render `tmpl` with the context given as JSON text: {"messages": [...], "tools": [...]?}.
 * On success *out is a malloc'd NUL-terminated string (free with free()).
 * A template error (syntax, raise_exception, a limit) returns TH_ERR_FORMAT
 * with the message in th_last_error(). */
th_status th_chat_render(const char *tmpl, const char *context_json,
                         const th_chat_opts *opts, char **out);

/* ---------------------------------------------------------------- quantize */

/* One line of progress: called once per tensor, before it is converted. */
typedef struct th_quantize_progress {
    int32_t index, count;        /* 1-based tensor index, number of tensors */
    const char *name;            /* "blk.1.ffn_up.weight" */
    const char *from_type;       /* "F32" */
    const char *to_type;         /* "Q4_K" (same as from_type: copied unchanged) */
    uint32_t n_dims;
    uint64_t ne[4];              /* ne[0] = row length */
} th_quantize_progress;

typedef struct th_quantize_params {
    const char *type;            /* a mix as llama-quantize names it: "Q4_K_M", "Q8_0", "F16" ...
                                  * (th_quantize_type_names lists them) */
    int32_t n_threads;           /* <= 0: all cores */
    bool pure;                   /* every quantizable tensor gets the mix's base type
                                  * (no per-tensor bumps; row-length fallbacks still apply) */
    void (*progress)(const th_quantize_progress *p, void *user);   /* NULL: silent */
    void *user;
} th_quantize_params;

th_quantize_params th_quantize_default_params(void);
/* Rewrite the GGUF at in_path into out_path with every weight converted as
 * llama-quantize would (same per-tensor types and, without an importance matrix,
 * the same bytes). Metadata is copied, general.file_type and
 * general.quantization_version are set, tensors keep their order. The output is
 * written to a temporary file next to out_path and renamed at the end. */
th_status th_quantize_file(const char *in_path, const char *out_path, const th_quantize_params *params);
/* The accepted type names, space-separated ("F32 F16 BF16 Q4_0 ..."). */
const char *th_quantize_type_names(void);

/* ---------------------------------------------------------------- misc */

/* TH_OK if a GPU backend can run here; otherwise an error saying why
 * ("built without CUDA", "no CUDA device"). desc gets the device name. */
th_status th_gpu_available(char *desc, size_t cap);

/* Which CPU kernel level is in use: "generic", "avx2", "avx512", "neon". */
const char *th_cpu_level(void);

#ifdef __cplusplus
}
#endif
#endif
