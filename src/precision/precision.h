/* precision.h — precision configs (config.c), a file's assignment (assign.c),
 * load-time overrides (apply.c) and the live swap of a model's weights (live.c).
 *
 * A config is plain text, one rule a line, '#' starts a comment, later rules win:
 *     <pattern>[<experts>] <type>
 * pattern: a GGUF tensor name where '*' matches any run of characters and N-M
 * matches a whole decimal number between N and M (blk.3-9.ffn_*.weight); the
 * optional expert selector [52] or [0-7] picks routed experts of a 3-D expert
 * tensor (blk.N.ffn_*_exps.weight); type: a type name of the type table (Q8_0,
 * Q4_K, F16, ... and whatever else it names), matched without regard to case.
 * Rules apply only to tensors that can be quantized (th_qtensor_quantizable:
 * 2-D+ weights, not norms, not the router). docs/precision.md is the user's page. */
#ifndef TH_PRECISION_H
#define TH_PRECISION_H

#include "quant/quantize_file.h"

typedef struct th_prec_rule {
    char *pattern;            /* the name part, NUL-terminated */
    int32_t x_lo, x_hi;       /* expert selector (inclusive); x_lo = -1: the whole tensor */
    uint32_t type;
    int line;                 /* 1-based line in the config */
} th_prec_rule;

typedef struct th_prec_config {
    char *origin;             /* the file name (or "<text>") for messages */
    th_prec_rule *rules;
    size_t n_rules;
} th_prec_config;

/* Parse config text (len bytes, need not be NUL-terminated). Errors (TH_ERR_FORMAT)
 * name origin:line: a malformed rule, an unknown type, a type we cannot write. */
th_status th_prec_parse(const char *text, size_t len, const char *origin, th_prec_config **out);
th_status th_prec_load(const char *path, th_prec_config **out);
void th_prec_config_free(th_prec_config *c);

/* Whether a pattern (the name part of a rule) matches a tensor name. */
bool th_prec_match(const char *pattern, const char *name);

/* The type id a name denotes (case-insensitive, any id of the type table), or false. */
bool th_prec_type_from_name(const char *name, uint32_t *out);

/* An assignment: per tensor, the type of the whole tensor and, for 3-D expert
 * tensors where some expert differs, every expert's type (expert[i] NULL: all
 * experts have type[i]). n_expert[i] = the tensor's ne[2] (1 for 2-D). */
typedef struct th_prec_assign {
    size_t n;
    uint32_t *type;
    uint32_t **expert;
    uint32_t *n_expert;
} th_prec_assign;

th_status th_prec_assign_init(th_prec_assign *a, size_t n);
void th_prec_assign_free(th_prec_assign *a);
/* Type of expert e of tensor i (or of the tensor when it has no per-expert types). */
static inline uint32_t th_prec_type_of(const th_prec_assign *a, size_t i, uint32_t e) {
    return a->expert[i] && e < a->n_expert[i] ? a->expert[i][e] : a->type[i];
}

/* Apply the config's rules, in order, on top of `base` (the current assignment of
 * the same n tensors; NULL: each tensor's own type, t[i].type). Errors name the
 * rule's line: a rule that matches no quantizable tensor (or no expert), an expert
 * out of range, a type whose block does not divide a matched tensor's rows. */
th_status th_prec_resolve(const th_prec_config *c, const th_qtensor *t, size_t n, const th_prec_assign *base,
                          th_prec_assign *out);

/* A GGUF file's assignment: its base tensors (t, n; index[k] = the file's tensor
 * number) with a per-expert table where "NAME.E" tensors give experts their own type. */
struct gguf_file;
struct gguf_tensor;
typedef struct th_prec_file {
    th_qtensor *t;
    uint64_t *index;
    size_t n;
    th_prec_assign a;
} th_prec_file;

th_status th_prec_file_read(const struct gguf_file *f, th_prec_file *pf);
void th_prec_file_free(th_prec_file *pf);
/* Whether tensor x is "NAME.E", expert E's own copy of 3-D tensor NAME (its index in *base). */
bool th_prec_expert_tensor(const struct gguf_file *f, const struct gguf_tensor *x, uint64_t *base, uint32_t *expert);
/* The config text that reproduces the assignment, with bits per weight per class
 * and in total as comments (malloc'd). */
th_status th_prec_describe(const th_prec_file *pf, const char *origin, char **out);

/* quantize --config: the config at path resolved on top of types[0..n) (in: the
 * mix's or the source's, out: the config's); *expert_types gets NULL or n entries,
 * each NULL or t[i].ne[2] per-expert types (malloc'd; the caller frees them). */
th_status th_prec_plan_types(const char *path, const th_qtensor *t, size_t n, uint32_t *types, uint32_t ***expert_types);

#endif
