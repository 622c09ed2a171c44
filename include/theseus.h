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
    TH_ERR_INTERNAL,    /* broken invariant (a bug)                        */
    TH_ERR_BUSY,        /* runtime: the request queue is full, or the runtime is stopping */
    TH_ERR_CANCELLED    /* runtime: the request was cancelled (or the runtime stopped)   */
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
    /* load-time precision overrides (docs/precision.md): tensors whose type under the
     * config at precision_path differs from the file's are re-quantized at load from
     * source_path (a higher-precision GGUF of the same model); the others stay mapped */
    const char *precision_path;
    const char *source_path;
    int32_t n_threads;   /* threads for that re-quantization (<= 0: all cores) */
    /* a Hugging Face directory quantized at load to this type, as `theseus convert
     * --type` would write it ("Q4_K_M", any th_quantize_type_names entry; uses
     * n_threads, a progress line when stderr is a terminal); NULL: weights as stored */
    const char *hf_type;
    /* CPU weight layout (docs/cpu-performance.md). By default the first CPU context copies
     * the matmul weights whose type has a packed gemm at this CPU level into one interleaved
     * allocation; no_repack keeps them as stored (A/B runs, memory). thp asks for 2 MiB
     * pages for that copy (madvise; opt-in: where the kernel compacts memory at the page
     * faults it cost more load time than it saved). no_amx keeps the packed BF16 gemm off
     * AMX even where the CPU and OS offer it. */
    bool no_repack;
    bool thp;
    bool no_amx;
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
 * case TH_ERR_CAPACITY is returned and out holds the first cap ids).
 * The count is not bounded by len: a SentencePiece vocabulary without a piece
 * for '▁' spends three byte tokens on every space, so size the buffer from the
 * answer: call with a guess (or out = NULL, cap = 0), and on TH_ERR_CAPACITY
 * call again with cap = *n_out. */
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
    const char *layers;    /* NULL or "": every layer; else the layers this context runs, as a list
                            * of indices and ranges ("0-14", "0-9,12,20-29"), in order, then the
                            * output head: a layer-skip draft sharing the model's weights
                            * (speculative decoding). Parsed at creation (not kept); the KV
                            * cache keeps room for every layer. A bad list is TH_ERR_ARG. */
    bool     batch_invariant; /* each row's results do not depend on the other rows of its step
                               * (default false). The CPU's kernels are row-invariant from two rows
                               * up (the runtime pads one-row steps); on the GPU every batch size
                               * runs the GEMV kernels (never MMA or cuBLAS) and one attention
                               * split plan: large batches are slower (docs/speculative.md).
                               * Speculative decoding needs it for greedy identity. */
    uint32_t rs_snapshots; /* hybrid (recurrent) models: keep each sequence's recurrent state after
                            * each of its last rs_snapshots positions (default 0), so that
                            * th_kv_seq_truncate can go back that far (speculative rollback);
                            * costs rs_snapshots x the state per sequence. Truncating further
                            * back (except to 0) is TH_ERR_UNSUPPORTED. */
    const char *gpu_layers; /* NULL or "": placement by `gpu`; else which layers run on the GPU
                             * (it overrides `gpu`): "N" the last N layers (-ngl N; 0 none, N >=
                             * the layer count all), or "A-B:cpu,C-D:gpu" (inclusive ranges or
                             * single layers, each named at most once, the rest on the CPU). A
                             * mixed placement hands the hidden state over between the two per
                             * step; the embedding runs where layer 0 does, the output head
                             * where the last layer does (docs/hybrid.md, "Placement"). Parsed
                             * at creation (not kept): a bad spec is TH_ERR_ARG; GPU layers in
                             * a build without the GPU backend TH_ERR_UNSUPPORTED. */
} th_context_params;

enum { TH_KV_F16 = 0, TH_KV_F32 = 1 };

th_context_params th_context_default_params(void);
th_status th_context_new(th_model *model, const th_context_params *params, th_context **out);
void th_context_free(th_context *ctx);
uint32_t th_context_n_ctx(const th_context *ctx);

/* Observing the forward passes of a context (evaluation: importance matrices,
 * router agreement). The callbacks run on the thread that called th_decode,
 * during it; the pointers they get are valid only during the call.
 *   matmul_input: the F32 input rows of a product with weight `weight_name`
 *     (expert: the index of a routed expert of a 3-D expert weight, else -1):
 *     n_rows rows of row_len values, `stride` floats apart, in batch order
 *     (a routed expert sees the rows of the tokens that chose it).
 *   routing: MoE layer `layer` chose, for the batch's token `token`, the k
 *     expert ids best first; scores: the n_expert selection scores it ranked
 *     (probabilities plus any selection bias; excluded groups -inf).
 * Either callback may be NULL. CPU contexts only (a GPU context answers
 * TH_ERR_UNSUPPORTED). obs NULL removes the observer; obs is copied. */
typedef struct th_observer {
    void *ud;
    void (*matmul_input)(void *ud, const char *weight_name, int32_t expert, const float *rows, int64_t n_rows,
                         int64_t row_len, int64_t stride);
    void (*routing)(void *ud, int32_t layer, int32_t token, int32_t k, const int32_t *expert_ids,
                    const float *scores, int32_t n_expert);
} th_observer;
th_status th_context_set_observer(th_context *ctx, const th_observer *obs);

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

/* Speculative verification of one row (src/runtime/ uses it; exact for any draft):
 * p = the distribution th_sampler_sample would draw from for these logits and the
 * history so far (steps 1-8 of the chain: 0 outside what top-k/top-p/min-p keep;
 * greedy: 1 at its argmax). With draft >= 0 the draft token is accepted with
 * probability min(1, p[draft] / q[draft]), where q[n_vocab] is the distribution the
 * drafter drew it from (NULL: a deterministic drafter, q = a point mass at draft);
 * otherwise the returned token is drawn from max(0, p - q) normalised (q NULL: p
 * without the draft token). draft < 0: a plain draw from p. *accepted (may be NULL)
 * says whether the draft was taken. p_out (may be NULL) receives p. The random
 * numbers come from s's stream; the token is not added to the history; afterwards
 * th_sampler_last_logprobs describes this row and the returned token. The first
 * call allocates a row of n_vocab floats. -1 with an error set on failure. */
th_token th_sampler_sample_spec(th_sampler *s, const float *logits, th_token draft, const float *q, float *p_out,
                                bool *accepted);

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

/* ---------------------------------------------------------------- grammar */

/* Grammar-constrained generation (src/sample/grammar_*.c, json_schema*.c).
 *
 * th_grammar: a parsed GBNF grammar (llama.cpp's syntax; start rule "root"), immutable.
 * th_grammar_vocab: a model's token pieces as a byte trie, built once per model and
 *   shared by any number of constraints (read-only, so threads may share it too).
 * th_constraint: one generation under a grammar: the parser state, the masks it has
 *   computed, and the partial UTF-8 character a token may have left pending.
 *
 * Use in a sampling loop (the runtime, `run`, `serve`):
 *
 *   th_grammar *g;  th_grammar_from_json_schema(schema, strlen(schema), &g);  // or th_grammar_parse
 *   th_grammar_vocab *v;  th_grammar_vocab_new(model, &v);                   // once per model
 *   th_constraint *c;  th_constraint_new(g, v, &c);  th_grammar_free(g);     // c keeps a copy
 *   for (;;) {
 *       th_token t = th_constraint_sample(c, sampler, th_get_logits(ctx, i)); // -1: error / stuck
 *       th_constraint_accept(c, t);  th_sampler_accept(sampler, t);
 *       if (th_token_is_eog(model, t)) break;   // EOG is only allowed once the grammar is complete
 *       ... decode t ...
 *   }
 *
 * th_constraint_sample samples the unconstrained logits first and returns that token when
 * the grammar allows it; only otherwise does it mask the whole vocabulary (a copy of the
 * row) and sample again. For temperature-only sampling this draws from exactly the masked
 * distribution; with top-k/top-p the truncation sees the unmasked row first, as in
 * llama.cpp. A caller that needs the masked distribution itself (logprobs) calls
 * th_constraint_apply on its own copy of the row and then th_sampler_sample. Greedy
 * decoding with th_get_argmax / logits_argmax_only cannot be constrained: keep full logits. */
typedef struct th_grammar th_grammar;
typedef struct th_grammar_vocab th_grammar_vocab;
typedef struct th_constraint th_constraint;

/* Parse GBNF text[0..len). Errors (TH_ERR_FORMAT) name line and column: syntax, undefined
 * rule, left recursion, missing root, limits on size (16 MiB of text, 4M elements after
 * expanding repetitions) and nesting (1024 parentheses). */
th_status th_grammar_parse(const char *gbnf, size_t len, th_grammar **out);
/* Convert a JSON schema (JSON text) to GBNF: *gbnf is malloc'd (free with free()). The
 * subset llama.cpp converts, with the same grammar shape; a keyword that would constrain
 * the output but is not supported is an error naming it and its JSON pointer
 * (TH_ERR_UNSUPPORTED), never a silently looser grammar. The schema `true` means any JSON
 * value. Limits: 4 MiB of schema, nesting 128, counts (minItems, maxLength ...) 100000. */
th_status th_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf);
/* th_json_schema_to_gbnf, then th_grammar_parse. */
th_status th_grammar_from_json_schema(const char *schema, size_t len, th_grammar **out);
/* The grammar written back as GBNF (every rule, the generated ones for groups and
 * repetitions included); parses to the same language. *out is malloc'd. */
th_status th_grammar_to_gbnf(const th_grammar *g, char **out);
int32_t th_grammar_n_rules(const th_grammar *g);
void th_grammar_free(th_grammar *g);

th_status th_grammar_vocab_new(const th_model *model, th_grammar_vocab **out);
int32_t th_grammar_vocab_n_vocab(const th_grammar_vocab *v);
void th_grammar_vocab_free(th_grammar_vocab *v);

/* A constraint at the grammar's start. g may be freed afterwards (the rules are copied);
 * v must outlive the constraint. v may be NULL for text-only matching
 * (th_constraint_accept_text, is_complete) — the token calls then fail. A grammar whose
 * start already breaks a limit (too many parse stacks) is an error here. */
th_status th_constraint_new(const th_grammar *g, const th_grammar_vocab *v, th_constraint **out);
void th_constraint_free(th_constraint *c);
/* Back to the start of the grammar (the masks computed so far stay cached). */
void th_constraint_reset(th_constraint *c);
/* Set logits[t] = -INFINITY (n_vocab entries) for every token the grammar cannot take
 * next; end-of-generation tokens stay only when the grammar is complete. *n_allowed (if
 * not NULL) gets how many tokens are left: 0 means no token can continue (the grammar
 * needs text no token provides). Errors: a limit on parse stacks (TH_ERR_CAPACITY). */
th_status th_constraint_apply(th_constraint *c, float *logits, int32_t *n_allowed);
/* Would the grammar take token t now? (One walk of t's bytes: cheap.) */
bool th_constraint_allows(th_constraint *c, th_token t);
/* Sample with s from logits (n_vocab, not modified) under the grammar, checking the
 * unconstrained pick first (see above). Does not accept the token. -1 with an error set
 * when no token is allowed or on a limit. */
th_token th_constraint_sample(th_constraint *c, th_sampler *s, const float *logits);
/* Advance by token t. A token the grammar does not allow (or EOG before completion) is
 * TH_ERR_ARG and leaves the state unchanged. After an accepted EOG nothing more is taken. */
th_status th_constraint_accept(th_constraint *c, th_token t);
/* Advance by raw text (UTF-8; a character may be split across calls). On a mismatch
 * TH_ERR_FORMAT, the state is unchanged and *n_matched (if not NULL) is the byte offset
 * of the first character that does not fit (or of the invalid UTF-8 byte). */
th_status th_constraint_accept_text(th_constraint *c, const char *text, size_t len, size_t *n_matched);
/* The text so far is a complete match (no partial character pending). */
bool th_constraint_is_complete(const th_constraint *c);
/* Some further text could still match (false once only the end is possible: a runtime
 * may stop without waiting for an EOG token). */
bool th_constraint_can_continue(const th_constraint *c);
/* Counters since creation (for metrics and benchmarks). */
typedef struct th_constraint_stats {
    uint64_t samples;        /* th_constraint_sample calls */
    uint64_t rejected_first; /* ... whose unconstrained pick the grammar rejected (full mask taken) */
    uint64_t masks;          /* masks needed (th_constraint_apply and rejected picks) */
    uint64_t masks_computed; /* ... of which not in the cache: a walk of the token trie */
} th_constraint_stats;
void th_constraint_get_stats(const th_constraint *c, th_constraint_stats *out);

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
    int32_t imatrix;             /* with --imatrix: 1 this tensor's encoder uses its entry, -1 the
                                  * type would use one but the matrix has none (encoded without,
                                  * as llama-quantize does); 0 otherwise */
} th_quantize_progress;

typedef struct th_quantize_params {
    const char *type;            /* a mix as llama-quantize names it: "Q4_K_M", "Q8_0", "F16" ...
                                  * (th_quantize_type_names lists them) */
    int32_t n_threads;           /* <= 0: all cores */
    bool pure;                   /* every quantizable tensor gets the mix's base type
                                  * (no per-tensor bumps; row-length fallbacks still apply) */
    void (*progress)(const th_quantize_progress *p, void *user);   /* NULL: silent */
    void *user;
    const char *config;          /* a precision config file (docs/precision.md) whose rules set the
                                  * types on top of `type` (NULL type: on top of the source's types);
                                  * NULL: none */
    const char *imatrix;         /* an importance matrix (llama-imatrix's imatrix.dat, or theseus
                                  * imatrix's) used where llama-quantize --imatrix uses it; the path is
                                  * written to quantize.imatrix.file as given. NULL: none */
    bool qn_plain_rounding;      /* qN tensors: plain rounding to the nearest level at the scale
                                  * amax / (2^(n-1) - 1/2), without the error feedback and scale
                                  * search of the encoder (docs/qn.md measures both); the
                                  * file gets quantize.qn.rounding = "plain". false: feedback */
} th_quantize_params;

th_quantize_params th_quantize_default_params(void);
/* Rewrite the GGUF at in_path into out_path with every weight converted as
 * llama-quantize would (same per-tensor types and, with or without an importance
 * matrix, the same bytes). Metadata is copied, general.file_type and
 * general.quantization_version are set (and the quantize.imatrix.* keys with a
 * matrix); tensors are written in llama-quantize's order (outside the layers first,
 * then by layer, by name within each), so a mix gives llama-quantize's file. The
 * output is written to a temporary file next to out_path and renamed at the end. */
th_status th_quantize_file(const char *in_path, const char *out_path, const th_quantize_params *params);
/* The accepted type names, space-separated ("F32 F16 BF16 Q4_0 ..."). */
const char *th_quantize_type_names(void);

/* ---------------------------------------------------------------- Hugging Face models (src/hf/)
 *
 * th_model_load and th_file_open also take a Hugging Face directory (config.json,
 * model.safetensors or shards + model.safetensors.index.json, tokenizer.json,
 * tokenizer_config.json) or a .safetensors file next to its config.json.
 * th_hf_convert writes that model as a GGUF with llama.cpp's tensor names,
 * metadata keys and layout (weights keep their F32/F16/BF16 type; quantize the
 * result with th_quantize_file). */
th_status th_hf_convert(const char *hf_path, const char *out_gguf);
/* ---------------------------------------------------------------- precision (docs/precision.md) */

/* The precision assignment of the GGUF at path as a config that reproduces it
 * (one rule a line; bits per weight per tensor class and in total as comments).
 * *out is malloc'd (free with free()). */
th_status th_precision_describe(const char *path, char **out);

/* Live promotion: a precision config file watched for a loaded model. The hook
 * th_precision_live_between_steps (th_runtime_params.between_steps, user = the live
 * handle) looks at the file at most once a second; when it changed and parses and
 * resolves, the tensors whose type differs from the model's are re-quantized from
 * source_path in a background thread, and a later call swaps them in (CPU weights;
 * a model on the GPU keeps its device copies and the swap is refused with a log
 * line). A bad file is logged on stderr and ignored: the old assignment stays. */
typedef struct th_precision_live th_precision_live;
th_status th_precision_live_new(th_model *model, const char *config_path, const char *source_path, int32_t n_threads,
                                th_precision_live **out);
void th_precision_live_between_steps(void *live);
/* The assignment now in the model as config text (malloc'd, free with free()), its
 * weight bytes, an FNV-1a hash of the text, and how many swaps happened so far. */
th_status th_precision_live_info(th_precision_live *live, char **text, uint64_t *bytes, uint64_t *hash, uint64_t *swaps);
void th_precision_live_free(th_precision_live *live);

/* ---------------------------------------------------------------- runtime
 *
 * The runtime (src/runtime/) is the one generation loop of the project: a
 * continuous-batching scheduler over a th_context of its own. A request is a
 * prompt (token ids) and how to continue it; the runtime admits requests from
 * a bounded queue into sequence slots, feeds long prompts in chunks, builds one
 * ragged batch a step (one token for every generating slot first, then prompt
 * chunks up to n_batch), samples every slot with the sampler chain
 * (th_sampler_*), turns tokens into text (UTF-8 never broken, stop strings
 * held back until they cannot start), and reports it through events.
 * `theseus serve` (many slots, a thread) and `run`/`chat` (one slot, stepped by
 * the caller) are both clients of it.
 *
 * Threading model.
 *   - One driver runs the scheduler: either the runtime's own thread
 *     (th_runtime_start) or the caller, calling th_runtime_step in a loop.
 *     Never both, never two threads stepping at once. The th_context is used
 *     only by the driver.
 *   - th_runtime_submit, th_runtime_stats_get, th_request_cancel, th_request_done,
 *     th_request_wait, th_request_release and the th_request_* result calls:
 *     any thread, any time (results once th_request_done is true).
 *   - Event callbacks run on the driver (inside th_runtime_step, the runtime's
 *     thread, or th_runtime_stop), one at a time, in order for each request,
 *     with no runtime lock held. A callback may submit, cancel, release and read
 *     stats; it must not step, start, stop or free the runtime, and should be
 *     quick (every slot waits for it).
 *   - th_request_wait blocks until the request ends; it needs a driver on
 *     another thread (th_runtime_start).
 *
 * Seams for later work:
 *   (a) constraints / logits processors: th_request_params.processor is called
 *       with a copy of each logits row before the sampler and with every
 *       chosen token (a grammar masks what it forbids and advances its state);
 *       this one works today (a request with a processor never takes the
 *       greedy argmax shortcut).
 *   (b) speculative decoding (th_runtime_params.spec, docs/speculative.md): a
 *       drafter proposes tokens after a generating slot's next token; they join
 *       the step's one ragged batch (logits for each), row k decides draft k
 *       (greedy argmax, or th_sampler_sample_spec's rejection rule) and the KV
 *       of what is rejected is truncated (th_kv_seq_truncate).
 */

typedef struct th_runtime th_runtime;
typedef struct th_request th_request;

#define TH_MAX_TOP_LOGPROBS 20

/* Speculative decoding (src/runtime/spec.c, docs/speculative.md): a drafter proposes
 * up to draft_max tokens after a generating slot's next token; they are verified in
 * the step's one ragged batch (logits for each) and the rejected ones leave the KV.
 * Greedy output is token-identical to decoding without it with batch_invariant on,
 * which a drafter turns on (every speculative step decodes two or more rows, and on
 * the CPU one row takes other kernels whose rounding differs); sampled output has
 * the same distribution (th_sampler_sample_spec). */
typedef struct th_spec_params {
    int32_t kind;           /* TH_SPEC_NONE (0), TH_SPEC_NGRAM, TH_SPEC_DRAFT, TH_SPEC_LAYERS */
    int32_t ngram;          /* NGRAM: longest n-gram of the recent text looked up (0 = 3); also
                             * shorter ones down to 2 (1 when ngram is 1) */
    th_model *draft;        /* DRAFT: the draft model (same vocabulary, checked; not owned: keep
                             * it loaded until the runtime is freed); its own context and KV */
    const char *layers;     /* LAYERS: the target's layers the draft runs, e.g. "0-14"
                             * (th_context_params.layers; copied) */
    int32_t draft_max;      /* most draft tokens a step (0 = 8; at most 64) */
    int32_t draft_min;      /* proposals shorter than this are not verified, and the adaptive
                             * length never drops below it (0 = 1) */
    bool fixed;             /* always ask for draft_max (no adaptation) */
    bool draft_cpu;         /* the draft context runs on the CPU even when context.gpu is set */
} th_spec_params;

typedef struct th_runtime_params {
    th_context_params context;  /* threads, gpu, kv_type, kv_block, logits_argmax_only; n_ctx,
                                 * n_batch and n_seq_max are set by the runtime from the fields below */
    int32_t n_slots;            /* sequences decoded together (0 = 1) */
    int32_t slot_ctx;           /* tokens one sequence may hold, prompt and completion together
                                 * (0 = min(training context, 4096)) */
    int32_t n_batch;            /* tokens per forward pass (0 = 512); at least n_slots + 1 */
    int32_t max_queue;          /* requests that may wait for free slots (0 = 64); beyond: TH_ERR_BUSY */
    bool batch_invariant;       /* pad a one-token step with a throw-away token so that a
                                 * sequence's logits do not depend on how many others share its
                                 * steps (the CPU takes another matmul kernel for one row); for a
                                 * server whose greedy text must not depend on concurrency */
    bool keep_prefix;           /* a finished request's KV stays in its slot; a new request takes
                                 * the free slot sharing the longest prefix with its prompt and
                                 * decodes only the rest (chat turns). A request that ends by
                                 * max_tokens then decodes its last token too, so the slot holds
                                 * all of its text */
    th_spec_params spec;        /* speculative decoding (above); zero: off */
    /* called on the stepping thread at the start of every step, before admission, so
     * never under a running forward pass: the place to change the model's weights
     * (th_precision_live_between_steps); with the runtime's own thread (th_runtime_start)
     * also every 250 ms while it is idle, so an idle server sees a change. NULL: none */
    void (*between_steps)(void *user);
    void *between_user;
} th_runtime_params;

enum { TH_SPEC_NONE = 0, TH_SPEC_NGRAM = 1, TH_SPEC_DRAFT = 2, TH_SPEC_LAYERS = 3 };
/* "none", "ngram", "draft", "layers" (NULL for another value). */
const char *th_spec_kind_name(int32_t kind);
/* TH_OK when the two models' vocabularies are the same (size and every token's
 * text); else TH_ERR_ARG naming the first token that differs. */
th_status th_spec_check_vocab(const th_model *target, const th_model *draft);

th_runtime_params th_runtime_default_params(void);
/* Creates the context (n_slots sequences of slot_ctx tokens) and the queue.
 * Nothing runs until th_runtime_start or th_runtime_step. */
th_status th_runtime_new(th_model *model, const th_runtime_params *params, th_runtime **out);
/* Starts the runtime's own driver thread (it sleeps while there is no work). */
th_status th_runtime_start(th_runtime *rt);
/* One scheduling step on the caller's thread: admission, cancellations, one
 * th_decode, sampling, events. *did_work (may be NULL) is false when there was
 * nothing to do. TH_ERR_ARG if the runtime's own thread runs. Request failures
 * are reported through the requests' events, not here. */
th_status th_runtime_step(th_runtime *rt, bool *did_work);
/* Stops the driver thread (if started) and ends every queued and running
 * request (status TH_ERR_CANCELLED, "the runtime stopped"); later submits get
 * TH_ERR_BUSY. Idempotent. Not concurrently with th_runtime_step. */
void th_runtime_stop(th_runtime *rt);
/* th_runtime_stop, then frees the runtime and its context. Request handles the
 * client still holds stay readable until released. */
void th_runtime_free(th_runtime *rt);

int32_t th_runtime_slot_ctx(const th_runtime *rt);
int32_t th_runtime_n_slots(const th_runtime *rt);

typedef struct th_runtime_stats {
    int32_t queued;             /* requests waiting for slots */
    int32_t active_slots;       /* slots holding a running request */
    uint32_t kv_blocks_used, kv_blocks_total;
    uint64_t steps;             /* th_decode calls so far */
    /* speculative decoding, since creation: tokens proposed and verified, of them
     * accepted, and verifications (a slot's drafts checked in a step) */
    uint64_t spec_drafted, spec_accepted, spec_rounds;
} th_runtime_stats;
/* A snapshot, consistent as of the driver's last update (before every event). */
void th_runtime_stats_get(const th_runtime *rt, th_runtime_stats *out);

/* ---- requests */

typedef enum th_finish {
    TH_FINISH_NONE = 0,         /* still running (or the request failed) */
    TH_FINISH_EOG,              /* the model ended its text (an end-of-generation token) */
    TH_FINISH_STOP,             /* a stop string: the text ends before it */
    TH_FINISH_LENGTH,           /* max_tokens reached */
    TH_FINISH_CONTEXT           /* the slot's context is full */
} th_finish;

typedef struct th_token_info {  /* one generated token, as logprobs report it */
    th_token token;
    float logprob;              /* (with logprobs) see th_sampler_last_logprobs */
    int32_t n_top;
    th_token_logprob top[TH_MAX_TOP_LOGPROBS];
    uint32_t text_offset;       /* byte offset in the choice's text where the token's bytes begin */
} th_token_info;

typedef enum th_event_kind {
    TH_EVENT_START,             /* the request left the queue and holds its slots */
    TH_EVENT_TOKEN,             /* choice sampled `token` (not an end-of-generation token) */
    TH_EVENT_FINISH,            /* choice is complete (finish says why) */
    TH_EVENT_END                /* the request is over: status says how; the last event */
} th_event_kind;

typedef struct th_event {
    th_event_kind kind;
    th_request *request;
    int32_t choice;             /* TOKEN, FINISH */
    th_token token;             /* TOKEN; FINISH by TH_FINISH_EOG: the EOG token; else -1 */
    /* TOKEN, FINISH: text released by this event, to append to the choice's
     * text: whole UTF-8 characters, nothing that may still begin a stop string.
     * Valid during the callback. */
    const char *text;
    size_t n_text;
    /* TOKEN, FINISH (with logprobs): the entries released with it; together
     * they cover exactly the choice's returned text (entries of tokens that
     * carried a stop string are dropped), text_offset inside it. */
    const th_token_info *tokens;
    int32_t n_tokens;
    th_finish finish;           /* FINISH */
    th_status status;           /* END: TH_OK, TH_ERR_CANCELLED, or why it failed */
    const char *message;        /* END with status != TH_OK: what happened */
} th_event;

typedef void (*th_event_fn)(const th_event *ev, void *user);

/* Seam (a): a per-request logits processor / constraint. */
typedef struct th_logits_processor {
    /* Before each sample of a choice: logits[0..n_vocab) is a copy of the row
     * that apply may change (e.g. -INFINITY for tokens a grammar forbids).
     * Non-TH_OK fails the request with th_last_error(). */
    th_status (*apply)(void *user, int32_t choice, float *logits, int32_t n_vocab);
    /* After a token is chosen for a choice (EOG included). May be NULL. */
    void (*accept)(void *user, int32_t choice, th_token token);
    void *user;
} th_logits_processor;

typedef struct th_request_params {
    th_sampler_params sampling; /* choice c samples with seed sampling.seed + c */
    const th_token *bias_token; /* logit bias: n_bias (token, value) pairs (copied) */
    const float *bias_value;
    int32_t n_bias;
    int32_t n_choices;          /* 0 = 1; at most n_slots. The choices share the prompt's KV
                                 * blocks (th_kv_seq_copy): it is decoded once */
    int32_t max_tokens;         /* per choice; < 0: until end of generation or a full context */
    const char *const *stop;    /* n_stop stop strings (copied; empty ones ignored) */
    int32_t n_stop;
    bool logprobs;              /* report th_token_info entries */
    int32_t top_logprobs;       /* 0..TH_MAX_TOP_LOGPROBS alternatives per token */
    bool penalize_prompt;       /* the prompt's tokens enter the penalty history too (as `run` does) */
    const th_logits_processor *processor;  /* seam (a); NULL: none (copied) */
    th_event_fn on_event;       /* NULL: no events (poll th_request_done) */
    void *user;                 /* passed to on_event and cancelled */
    /* Polled by the driver every step while the request is queued or running
     * (may be NULL): returning true cancels it as th_request_cancel does. */
    bool (*cancelled)(void *user);
    /* Grammar-constrained generation (docs/grammar.md): every choice's text follows this
     * grammar (one th_constraint per choice, made at submit: the caller may free the grammar
     * then). Tokens it forbids are masked (the sampled token is checked first), end of
     * generation is allowed only where the grammar is complete, and a choice ends with
     * TH_FINISH_STOP as soon as the grammar can take nothing more. Needs full logits (not a
     * logits_argmax_only context). A choice with no allowed token fails the request
     * (TH_ERR_CAPACITY, "grammar: ..."). NULL: unconstrained. */
    const th_grammar *grammar;
    /* Speculative decoding for this request (a runtime with spec.kind set): 0 = the
     * runtime's draft_max, -1 = off (plain decoding), > 0 = at most this many drafts a step. */
    int32_t draft_max;
} th_request_params;

th_request_params th_request_default_params(void);   /* greedy, one choice, no limit */

/* Queues a request; the prompt is copied. *out is the client's handle (release
 * it with th_request_release; the request goes on without it). Errors:
 * TH_ERR_BUSY (queue full or stopping), TH_ERR_ARG (bad parameters, n_choices
 * above n_slots, logits needed from a logits_argmax_only context),
 * TH_ERR_CAPACITY (the prompt does not fit a slot with room to generate). */
th_status th_runtime_submit(th_runtime *rt, const th_request_params *params, const th_token *prompt,
                            int32_t n_prompt, th_request **out);
/* The request ends at the driver's next step (status TH_ERR_CANCELLED); its
 * slots and KV blocks are freed then. No effect on a finished request. */
void th_request_cancel(th_request *r);
bool th_request_done(const th_request *r);
void th_request_wait(th_request *r);
void th_request_release(th_request *r);

/* After th_request_done: */
th_status th_request_status(const th_request *r);      /* TH_OK, TH_ERR_CANCELLED, or the failure */
const char *th_request_message(const th_request *r);   /* "" when TH_OK */
/* The choice's whole returned text (NUL-terminated; *len without it) and why it ended. */
const char *th_request_text(const th_request *r, int32_t choice, size_t *len);
th_finish th_request_finish(const th_request *r, int32_t choice);

typedef struct th_request_stats {
    int32_t n_prompt;           /* prompt tokens */
    int32_t n_prompt_cached;    /* of them, reused from the slot's KV (keep_prefix) */
    int32_t n_generated;        /* generated tokens over all choices (EOG not counted) */
    double t_queue;             /* seconds from submit to admission */
    double t_prompt;            /* admission to the prompt's last chunk decoded */
    double t_generate;          /* from then to the last choice's finish */
    double t_grammar;           /* of t_generate, seconds in the grammar (checks, masks, advancing) */
    uint64_t grammar_masks;     /* whole-vocabulary masks the grammar needed (rejected first picks) */
    int32_t n_drafted;          /* speculative decoding: draft tokens verified (all choices) */
    int32_t n_accepted;         /* ... of them accepted */
} th_request_stats;
void th_request_stats_get(const th_request *r, th_request_stats *out);

/* The ChatML rendering (<|im_start|>ROLE\nCONTENT<|im_end|>\n ..., then
 * <|im_start|>assistant\n with add_generation_prompt) of the same context JSON
 * th_chat_render takes ({"messages": [{"role", "content"}, ...]}; a null
 * content is ""); for models without a chat template. *out is malloc'd. */
th_status th_chat_render_chatml(const char *context_json, const th_chat_opts *opts, char **out);
/* ---------------------------------------------------------------- tool calls */

/* Tool calls in the format a model's chat template teaches (src/runtime/toolcall.c):
 *   TH_TOOLS_HERMES   <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call> (Hermes,
 *                     Qwen 2.5, Qwen 3, SmolLM3; also the format to teach a model whose
 *                     template ignores `tools`)
 *   TH_TOOLS_LLAMA3   the whole message is {"name": N, "parameters": {...}} (Llama 3.1/3.2)
 *   TH_TOOLS_MISTRAL  [TOOL_CALLS][{"name": N, "arguments": {...}, "id": I}] (Mistral Nemo;
 *                     the control token's text may be missing from the output) */
typedef enum th_tool_format {
    TH_TOOLS_NONE = 0,
    TH_TOOLS_HERMES,
    TH_TOOLS_LLAMA3,
    TH_TOOLS_MISTRAL
} th_tool_format;

typedef struct th_tool_call {
    char *id;                   /* the model's id (Mistral) or NULL */
    char *name;
    char *arguments;            /* a JSON object, as compact JSON text */
} th_tool_call;

typedef struct th_tool_calls {
    char *content;              /* the text around the calls ("" when none); all of it without calls */
    th_tool_call *calls;
    int32_t n;
} th_tool_calls;

/* The format template teaches (HERMES when it names none: our fallback). */
th_tool_format th_tool_format_of_template(const char *tmpl);
/* A finished message split into content and calls. Text that is not a well-formed call
 * (bad JSON, no "name", arguments not an object) is content: never an error but NOMEM. */
th_status th_tool_calls_parse(th_tool_format f, const char *text, size_t len, th_tool_calls *out);
void th_tool_calls_free(th_tool_calls *tc);
/* While a message grows: bytes of text[0, len) that are content whatever follows (before
 * a call, or a prefix of its opening tag, may begin). */
size_t th_tool_calls_content_end(th_tool_format f, const char *text, size_t len);
/* GBNF of a valid call in format f: tools_json is the OpenAI `tools` array (JSON text);
 * only (or NULL: any) names the one function allowed; parallel allows several calls
 * (HERMES, MISTRAL). Arguments follow each function's `parameters` JSON schema (the
 * converter's subset: an unsupported keyword is TH_ERR_UNSUPPORTED naming it; bad
 * `tools` TH_ERR_FORMAT; an unknown `only` TH_ERR_ARG). *gbnf is malloc'd. */
th_status th_tool_call_grammar(th_tool_format f, const char *tools_json, size_t len, const char *only, bool parallel,
                               char **gbnf);

/* Evaluation (perplexity, KL divergence, router agreement, imatrix) and the precision
 * search: theseus_eval.h. */
#include "theseus_eval.h"

/* ---------------------------------------------------------------- hardening (issue 27) */

/* A model file that changes on disk while it is mapped (use_mmap, the default)
 * is a hazard: reading a page past the end of a truncated file raises SIGBUS.
 * A model loaded with use_mmap = false holds a private copy and is immune.
 *
 * th_model_check_file: TH_OK if the file at the path the model was loaded from
 * is still the one mapped (same device, inode, size and modification time);
 * otherwise TH_ERR_IO with a message saying what changed. Always TH_OK for a
 * model read into memory. Cheap (one stat): a server calls it before admitting
 * each request.
 *
 * th_model_fault_recover: for a SIGBUS handler (async-signal-safe). If addr lies
 * in the model's file mapping, the whole mapping is replaced by zero-filled
 * memory at the same address and true is returned: the faulting read, when the
 * handler returns, reads zeros, and so does every later one — the model's
 * output is garbage from then on and the caller must treat the model as failed
 * (fail what is in flight, refuse new work). false: not this model's mapping. */
th_status th_model_check_file(const th_model *model);
bool th_model_fault_recover(th_model *model, const void *addr);
bool th_model_is_mapped(const th_model *model);   /* loaded with use_mmap (and not yet replaced) */

/* A memory budget shared by many concurrent users (bytes in flight): a take that
 * would pass the limit fails instead of allocating. Thread-safe. */
typedef struct th_mem_budget th_mem_budget;
th_status th_mem_budget_new(size_t limit, th_mem_budget **out);
void th_mem_budget_free(th_mem_budget *b);
bool th_mem_budget_take(th_mem_budget *b, size_t n);   /* false (nothing taken) if it would pass the limit */
void th_mem_budget_give(th_mem_budget *b, size_t n);
size_t th_mem_budget_used(const th_mem_budget *b);
size_t th_mem_budget_limit(const th_mem_budget *b);
/* th_chat_render with a shared budget: the render's memory is also taken from
 * budget (the per-render limit stays). When the budget is exhausted the render
 * fails with TH_ERR_CAPACITY ("memory budget exhausted ..."); any other
 * template error is TH_ERR_FORMAT as for th_chat_render. budget may be NULL. */
th_status th_chat_render_budget(const char *tmpl, const char *context_json, const th_chat_opts *opts,
                                th_mem_budget *budget, char **out);

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
