/* theseus_eval.h — the measuring part of the public C API: perplexity and KL
 * divergence (llama-perplexity's method and .kld files), router agreement, the
 * importance matrix, and the precision search built on them. Included by theseus.h
 * (which it needs for th_model, th_context and th_status); include that one. */
#ifndef THESEUS_EVAL_H
#define THESEUS_EVAL_H

#ifndef THESEUS_H
#error "include theseus.h, not theseus_eval.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- evaluation */

/* Perplexity and KL divergence exactly as llama.cpp's llama-perplexity computes them
 * (src/eval/): the tokens are cut into chunks of n_ctx; each chunk is decoded from
 * an empty KV cache with BOS in place of its first token (when the model adds BOS);
 * the logits of positions n_ctx/2 .. n_ctx-2 are scored against the next token.
 *
 * Typical use (what `theseus perplexity` does):
 *     th_eval_params ep = th_eval_default_params();         // n_ctx 512, n_batch 2048
 *     th_context_params cp = th_context_default_params();
 *     th_eval_context_params(&ep, &cp);                      // KV, batch, sequences for ep
 *     cp.gpu = ...;  th_context_new(model, &cp, &ctx);
 *     th_eval_result r;  th_eval_run(model, ctx, tokens, n_tokens, &ep, &r);
 *     ... r.ppl, r.kld ...;  th_eval_write_json(&r, "out.json");  th_eval_result_free(&r);
 *
 * A base file (--kl-divergence-base) is llama.cpp's format, byte for byte, so
 * either engine reads the other's: "_logits_", i32 n_ctx, i32 n_vocab, i32 n_chunk,
 * i32 tokens[n_chunk * n_ctx], then for each chunk and each scored position
 * (n_ctx - 1 - n_ctx/2 of them) a row of 2*((n_vocab+1)/2) + 4 uint16: f32 scale,
 * f32 min_log_prob, then n_vocab log-probabilities as uint16 (log p = scale*v +
 * min_log_prob, everything below max - 16 as 0), padded to even. */

typedef struct th_kld_base th_kld_base;   /* a base file, mapped and validated */

/* Open and validate a base file: magic, header, every token id inside the file's
 * vocabulary, and the exact size the header implies (a truncated file names the
 * chunk it ends in). Rows are checked when read. */
th_status th_kld_base_open(const char *path, th_kld_base **out);
void th_kld_base_close(th_kld_base *b);
int32_t th_kld_base_n_ctx(const th_kld_base *b);
int32_t th_kld_base_n_vocab(const th_kld_base *b);
int32_t th_kld_base_n_chunks(const th_kld_base *b);
/* The n_chunk * n_ctx tokens of the evaluated text, as the file stores them. */
const th_token *th_kld_base_tokens(const th_kld_base *b);
/* Decode the log-probabilities of scored position j (0 .. n_ctx-2-n_ctx/2, i.e.
 * chunk position n_ctx/2 + j) of chunk `chunk` (0-based) into out[n_vocab].
 * TH_ERR_FORMAT (naming the file, chunk and position) when the row's scale is not
 * finite and >= 0 or its min_log_prob not finite and <= 0. */
th_status th_kld_base_logprobs(const th_kld_base *b, int32_t chunk, int32_t j, float *out);

/* KL-divergence statistics of a candidate against a base, with llama-perplexity's
 * definitions (ln is the natural log; "p" is the probability of the scored token;
 * fractions, not percent). The `_unc` fields are llama.cpp's uncertainties
 * (0 with 10 values or fewer). */
typedef struct th_kld_stats {
    int64_t count;                          /* scored positions */
    double ppl, ppl_unc;                    /* Mean PPL(Q) */
    double ppl_base, ppl_base_unc;          /* Mean PPL(base) */
    double cor_ln_ppl;                      /* Cor(ln(PPL(Q)), ln(PPL(base))) */
    double ln_ppl_ratio, ln_ppl_ratio_unc;  /* Mean ln(PPL(Q)/PPL(base)) */
    double ppl_ratio, ppl_ratio_unc;        /* Mean PPL(Q)/PPL(base) */
    double ppl_diff, ppl_diff_unc;          /* Mean PPL(Q)-PPL(base) */
    double kld, kld_unc;                    /* Mean KLD */
    /* KLD distribution: maximum, 99.9, 99, 95, 90 %, median, 10, 5, 1, 0.1 %, minimum
     * (llama.cpp's percentile: linear between the two nearest of the sorted values) */
    double kld_max, kld_p999, kld_p99, kld_p95, kld_p90, kld_median, kld_p10, kld_p5, kld_p1, kld_p01, kld_min;
    double dp, dp_unc;                      /* Mean Δp = p(Q) - p(base) */
    /* Δp distribution: maximum, 99.9, 99, 95, 90, 75 %, median, 25, 10, 5, 1, 0.1 %, minimum */
    double dp_max, dp_p999, dp_p99, dp_p95, dp_p90, dp_p75, dp_median, dp_p25, dp_p10, dp_p5, dp_p1, dp_p01, dp_min;
    double dp_rms, dp_rms_unc;              /* RMS Δp */
    double same_top, same_top_unc;          /* Same top p: share of positions with the same argmax */
    double cor_p;                           /* Pearson correlation of p(Q) and p(base) (not in llama.cpp) */
    bool has_distribution;                  /* the percentile fields are filled (final results only) */
} th_kld_stats;

/* A running accumulator of positions (for callers that score rows themselves). */
typedef struct th_kld_acc th_kld_acc;
th_status th_kld_acc_new(th_kld_acc **out);
void th_kld_acc_free(th_kld_acc *a);
/* One position: the candidate's n_vocab logits, the base's log-probabilities of the
 * same position as th_kld_base_logprobs gives them (base_logprobs[n_vocab]) and the
 * token that follows. Returns the position's KLD in *kld (may be NULL). */
th_status th_kld_acc_add(th_kld_acc *a, const float *logits, const float *base_logprobs,
                         int32_t n_vocab, th_token next, double *kld);
/* The statistics so far; with_distribution also sorts for the percentiles. */
th_kld_stats th_kld_acc_stats(const th_kld_acc *a, bool with_distribution);

typedef struct th_eval_progress {
    int32_t chunk, n_chunks;     /* chunks finished (1-based count), chunks in the run */
    double seconds, eta_seconds; /* since the first pass; estimate for the rest */
    double ppl;                  /* running estimate after this chunk */
    const th_kld_stats *kld;     /* running KLD statistics (no distribution), NULL without a base */
} th_eval_progress;

/* The forward passes of a run, for observers that need to know which batch row is
 * which chunk position (router agreement, imatrix). Passed before each th_decode. */
typedef struct th_eval_pass {
    int32_t n_tokens;
    const th_token *token;
    const int32_t *pos;          /* position inside its chunk */
    const int32_t *seq_id;
    const int32_t *chunk;        /* chunk index of each row */
    const int8_t *logits;        /* rows that are scored */
} th_eval_pass;

/* Router agreement of a mixture-of-experts model (src/eval/router.c): a reference
 * run records, in our own router file, each MoE layer's k chosen experts and k+1
 * best selection scores at every scored position (router_base_out); a candidate run
 * (router_base) compares its choices position by position. A flip is a position
 * whose expert set differs; its gap is the reference's k-th minus (k+1)-th score. */
typedef struct th_router_flip { int32_t chunk, pos; float gap; } th_router_flip;   /* chunk 0-based */
typedef struct th_router_layer {
    int32_t layer;                       /* model layer index */
    int64_t n_positions, n_flips;        /* compared positions; those with another expert set */
    th_router_flip *flips;               /* [n_flips], in evaluation order */
    int64_t cap_flips;                   /* (allocation) */
    double gap_min, gap_median, gap_max; /* of the flips' gaps (0 without flips) */
} th_router_layer;

typedef struct th_eval_params {
    int32_t n_ctx;        /* tokens per chunk (default 512); with kld_base: 0 (take the file's) or
                           * the file's n_ctx (another value is an error) */
    int32_t n_batch;      /* tokens per forward pass (default 2048): below n_ctx a chunk takes several
                           * passes, otherwise n_batch / n_ctx chunks share one pass */
    int32_t n_chunks;     /* at most this many chunks (<= 0: all the text / base file has) */
    int32_t n_threads;    /* threads for the statistics over the vocabulary (<= 0: all cores) */
    const char *kld_base_out;        /* write a base file of this run here (llama.cpp's format) */
    const th_kld_base *kld_base;     /* compare with this base: its tokens are evaluated, the
                                      * tokens argument of th_eval_run is ignored */
    void (*progress)(const th_eval_progress *p, void *ud);   /* after every chunk; NULL: silent */
    th_status (*on_pass)(const th_eval_pass *p, void *ud);   /* before every pass; NULL: none */
    void *ud;
    /* Router agreement (MoE models, CPU contexts: the run installs its own observer
     * with th_context_set_observer and removes it at the end). */
    const char *router_base_out;     /* write the router file of this run here */
    const char *router_base;         /* compare with this router file (made on the same text and
                                      * chunks: with kld_base, from the reference run that wrote it) */
} th_eval_params;

th_eval_params th_eval_default_params(void);
/* Set cp's n_ctx (KV tokens), n_batch and n_seq_max to what a run with ep needs
 * (for a comparison run, call after setting ep->kld_base). */
void th_eval_context_params(const th_eval_params *ep, th_context_params *cp);

typedef struct th_eval_result {
    int32_t n_ctx, n_batch, n_seq;   /* chunk size, tokens a pass, chunks a pass */
    int32_t n_chunks;                /* chunks evaluated */
    int64_t n_tokens;                /* tokens of the text (or base file) */
    int64_t count;                   /* scored positions */
    double ppl, ppl_unc;             /* Final estimate: PPL = ppl +/- ppl_unc */
    double *running_ppl;             /* [n_chunks]: the estimate after each chunk, as printed */
    double *chunk_ppl;               /* [n_chunks]: each chunk on its own */
    double seconds;                  /* wall time of the passes and statistics */
    bool has_kld;
    th_kld_stats kld;                /* with a base: the full statistics */
    int32_t n_vocab;
    uint64_t n_params, model_bytes;  /* of the model evaluated (th_model_n_params, th_model_size_bytes) */
    char model_desc[96];
    /* with router_base: per MoE layer, how often the expert set differed */
    int32_t n_router_layers, router_k, router_n_expert;
    th_router_layer *router;         /* [n_router_layers] */
} th_eval_result;

/* Run the evaluation on ctx (created with th_eval_context_params' sizes; any other
 * context settings, GPU included, are the caller's). tokens are the whole text,
 * tokenized as llama.cpp does (th_tokenize with add_special, not parse_special).
 * Errors: a text shorter than two chunks, a base file for another vocabulary or
 * another n_ctx, a model whose tokenizer adds EOS, decode failures. On success
 * free r with th_eval_result_free. */
th_status th_eval_run(th_model *model, th_context *ctx, const th_token *tokens, size_t n_tokens,
                      const th_eval_params *ep, th_eval_result *r);
void th_eval_result_free(th_eval_result *r);
/* Every figure of r as one JSON object (malloc'd string / a file). */
th_status th_eval_json(const th_eval_result *r, char **out);
th_status th_eval_write_json(const th_eval_result *r, const char *path);

/* Importance matrix (src/eval/imatrix.c) as llama-imatrix computes it: chunks of
 * n_ctx tokens (BOS first), all positions decoded in calls of at most
 * min(n_batch, n_ctx, n_ubatch) tokens; per matrix weight blk.* (output.weight with
 * process_output) the mean square of each input column (per expert for MoE expert
 * weights) over the rows it saw, dense products of fewer than 16 rows skipped.
 * The file is llama.cpp's imatrix.dat (what llama-quantize --imatrix reads); its
 * values are mean * ncall, as there. CPU contexts only (it uses th_observer). */
typedef struct th_imatrix th_imatrix;
typedef struct th_imatrix_params {
    int32_t n_ctx, n_batch, n_ubatch;  /* defaults 512, 2048, 512 */
    int32_t n_chunks;                  /* <= 0: all the text has */
    bool process_output;               /* also output.weight (llama-imatrix --process-output) */
    void (*progress)(int32_t chunk, int32_t n_chunks, double ppl, void *ud);
    void *ud;
} th_imatrix_params;
th_imatrix_params th_imatrix_default_params(void);
void th_imatrix_context_params(const th_imatrix_params *ip, th_context_params *cp);
/* Installs (and at the end removes) its observer on ctx. ppl / ppl_unc (may be NULL):
 * the perplexity of the run, as llama-imatrix prints it. */
th_status th_imatrix_compute(th_model *model, th_context *ctx, const th_token *tokens, size_t n_tokens,
                             const th_imatrix_params *ip, th_imatrix **out, double *ppl, double *ppl_unc);
/* dataset: the text's name written at the end (NULL: the loaded one). */
th_status th_imatrix_write(const th_imatrix *im, const char *path, const char *dataset);
/* Read and validate an imatrix.dat (every count and size checked; values finite). */
th_status th_imatrix_load(const char *path, th_imatrix **out);
th_status th_imatrix_parse(const uint8_t *data, size_t size, const char *name, th_imatrix **out);
void th_imatrix_free(th_imatrix *im);
int32_t th_imatrix_n_entries(const th_imatrix *im);      /* entries that are written / were read */
int32_t th_imatrix_n_chunks(const th_imatrix *im);       /* the file's chunk count (0 if absent) */
const char *th_imatrix_dataset(const th_imatrix *im);    /* "" if absent */
const char *th_imatrix_entry_name(const th_imatrix *im, int32_t i);
/* The stored values of weight `name` (mean square * ncall), NULL if absent. */
const float *th_imatrix_values(const th_imatrix *im, const char *name, int64_t *n_values, int32_t *ncall);
/* ---------------------------------------------------------------- search (issue 21, src/search/)
 *
 * The smallest precision assignment that keeps a model's output within a gate
 * (docs/search.md). The model is the high-precision source (loaded from
 * source_path); the search changes its weights in place and puts them back.
 *   1. reference: the model's logits on the text, written once as .kld base files
 *      beside the log (gate: n_chunks chunks of n_ctx; calibration: calib_chunks
 *      chunks of calib_ctx), and a router file for MoE models;
 *   2. sensitivity: every unit (a tensor, or one routed expert of a 3-D expert
 *      tensor) lowered alone to every candidate type, measured on the calibration
 *      slice (mean KLD, router flips and their gaps); non-monotone rows logged;
 *   3. a knapsack over the measured costs (Lagrangian, additive prediction) gives
 *      starts under the gate, each checked by the full gate and against its
 *      predicted calibration KLD (additivity); then a verified greedy descent
 *      (groups of the cheapest predicted steps, halved on failure), every accepted
 *      step measured by the full gate on the whole evaluated text.
 * Every evaluation is a jsonl record in log_path; resume_path's records are reused. */
typedef struct th_search_progress {
    const char *phase;           /* "reference", "sensitivity", "uniform", "knapsack", "descent" */
    int64_t done, total;         /* evaluations in this phase (total: an estimate in descent) */
    double seconds, eta_seconds; /* since the start; estimate for the phase's rest */
    double best_bpw, best_gate;  /* best feasible assignment so far (0, 0: none yet) */
    const char *what;            /* the unit or step just evaluated */
} th_search_progress;

typedef struct th_search_params {
    const char *source_path;     /* the file the model was loaded from (re-quantizing source) */
    double max_kld;              /* > 0: gate on mean KLD over the gate chunks */
    double max_ppl_increase;     /* > 0 (fraction, 0.01 = 1 %): gate on PPL(Q)/PPL(base) - 1 */
    int32_t max_flips;           /* MoE: >= 0 also gates on router flips (sum over layers); a unit
                                  * whose lowering flips more is kept precise; < 0: flips reported only */
    double budget_bpw;           /* > 0: stop descending at this many bits per weight */
    const char *types;           /* candidates: NULL (default list), "ggml", or "Q4_K,Q6_K,q4,..." */
    bool per_expert;             /* units per routed expert (default true; "ggml" turns it off) */
    int32_t n_ctx, n_chunks;     /* gate: chunks of n_ctx (default 512, <= 0: all the text) */
    int32_t calib_ctx, calib_chunks;  /* calibration slice (default 256, 1) */
    int32_t n_threads;
    bool gpu;
    int32_t max_gate_evals;      /* descent's evaluations at most (default 40) */
    const char *log_path;        /* required: the jsonl log; base files are log_path.gate.kld etc. */
    const char *resume_path;     /* NULL or a log whose records are reused */
    bool no_layer_resume;        /* sensitivity runs evaluate every layer (default: a unit of layer L
                                  * starts from the source's saved hidden states at L; CPU, dense) */
    void (*progress)(const th_search_progress *p, void *ud);
    void *ud;
} th_search_params;

typedef struct th_search_point {
    char label[48];              /* "uniform Q4_K", "knapsack 3", "descent 7", "source" */
    uint64_t bytes;
    double bpw, gate, kld, ppl_ratio;
    int64_t flips;
    bool uniform, feasible, frontier;
} th_search_point;

typedef struct th_search_result {
    char *config;                /* BEST.precision text (malloc'd) */
    char *summary;               /* what stayed precise, flips, additivity (malloc'd text) */
    char *table;                 /* the frontier table (malloc'd text) */
    th_search_point best;
    th_search_point *points;     /* every gate evaluation */
    size_t n_points;
    uint64_t source_bytes;
    double source_bpw, gate_max;
    int64_t n_units, n_sens, n_sens_reused, n_gate, n_gate_reused, n_nonmonotone;
    double additivity_worst;     /* max |measured/predicted - 1| of the calibration KLD of the checked starts */
    double seconds;
} th_search_result;

th_search_params th_search_default_params(void);
/* tokens: the whole text (th_tokenize with add_special). */
th_status th_search_run(th_model *model, const th_token *tokens, size_t n_tokens, const th_search_params *p,
                        th_search_result *r);
void th_search_result_free(th_search_result *r);
/* The points as a PNG plot: bits per weight (x) against gate value (y, log scale);
 * uniform types as squares, the frontier as a line, the best as a ring. */
th_status th_search_plot(const th_search_result *r, const char *png_path);

#ifdef __cplusplus
}
#endif

#endif /* THESEUS_EVAL_H */
