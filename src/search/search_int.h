/* search_int.h — the parts of `theseus search` (th_search_run): the units and
 * their measured costs (search.c), evaluation of an assignment on the loaded
 * model (eval.c), the knapsack and the descent (solve.c), the jsonl log and its
 * reader for --resume (log.c), the reports (report.c) and the PNG plot (plot.c). */
#ifndef TH_SEARCH_INT_H
#define TH_SEARCH_INT_H

#include "theseus.h"
#include "precision/internal.h"
#include "gguf/gguf.h"

#include <stdio.h>

#define TH_SEARCH_MAX_TYPES 24

/* One candidate type of one unit, measured on the calibration slice. */
typedef struct th_search_cost {
    uint32_t type;
    uint64_t bytes;              /* the unit's bytes at this type */
    double kld, ppl_ratio;       /* calibration mean KLD, PPL(Q)/PPL(base) */
    int64_t flips;               /* router flips (MoE), 0 otherwise */
    double gap_min;              /* smallest flip gap (0 without flips) */
    bool measured, allowed;      /* allowed: flips within max_flips */
} th_search_cost;

/* A unit: a tensor (expert -1) or one routed expert of a 3-D expert tensor. */
typedef struct th_search_unit {
    size_t tensor;               /* index in the precision file view (pf) */
    int32_t expert;
    int32_t layer;               /* blk.N (-1: not in a layer) */
    uint64_t elements;
    uint64_t src_bytes;          /* at the source's type */
    uint32_t src_type;
    th_search_cost c[TH_SEARCH_MAX_TYPES];
    int n_c;                     /* candidates that fit the row length */
} th_search_unit;

/* A log record (log.c): what --resume reuses. */
typedef enum { TH_SLOG_SENS = 1, TH_SLOG_GATE = 2, TH_SLOG_CALIB = 3 } th_slog_kind;
typedef struct th_slog_rec {
    th_slog_kind kind;
    char tensor[160];            /* SENS: the tensor name */
    int32_t expert;
    char type[16];
    uint64_t hash;               /* GATE / CALIB: the assignment's hash */
    uint64_t bytes;
    double kld, ppl_ratio, gap_min;
    int64_t flips;
} th_slog_rec;

/* Parse one line of a search log. false (no error set) for a line that is not a
 * record it knows (the header, summaries, garbage): such lines are skipped. */
bool th_slog_parse(const char *line, size_t len, th_slog_rec *out);
void th_slog_write(FILE *f, const th_slog_rec *r);
/* The log's first start line was made with these n_ctx, chunks, calib_ctx, calib_chunks. */
th_status th_slog_check_start(const char *path, const int32_t want[4]);

typedef struct th_search_memo {
    th_slog_rec *r;
    size_t n, cap;
} th_search_memo;
th_status th_search_memo_load(th_search_memo *m, const char *path);
th_status th_search_memo_add(th_search_memo *m, const th_slog_rec *r);
const th_slog_rec *th_search_memo_sens(const th_search_memo *m, const char *tensor, int32_t expert, const char *type);
const th_slog_rec *th_search_memo_hash(const th_search_memo *m, th_slog_kind kind, uint64_t hash);
void th_search_memo_free(th_search_memo *m);

/* The search's state. */
typedef struct th_search {
    const th_search_params *p;
    th_model *m;
    gguf_file *src;
    th_prec_file pf;             /* the source's tensors and own assignment */
    th_prec_assign live;         /* what the model's weights are now */
    th_search_unit *u;
    size_t n_u;
    uint32_t types[TH_SEARCH_MAX_TYPES];
    int n_types;
    uint64_t total_elements, fixed_bytes;   /* over all tensors; bytes of what no unit covers */
    th_kld_base *gate_base, *calib_base;
    char *gate_router, *calib_router;        /* router files (MoE) or NULL */
    bool moe;
    th_context *gate_ctx, *calib_ctx;
    th_search_memo memo;
    FILE *log;
    th_search_result *r;
    double t0;
    double gate_max;             /* the gate's limit */
    int *uniform_best;           /* the smallest feasible uniform point's choice, or NULL */
    /* where the time goes (eval.c): weights re-quantized and swapped, calibration
     * passes, gate passes (seconds, counts) */
    double t_apply, t_calib, t_gate;
    int64_t n_apply, n_calib, n_gate_runs;
    /* additivity (solve.c): the first knapsack start's predicted and measured
     * calibration KLD, and how many starts were checked */
    double add_pred, add_meas;
    int n_add;
    /* layer resume of the sensitivity runs (eval.c): the source's hidden states of
     * the calibration pass at each layer's entry ([n_layer + 1], NULL: off), the
     * layer the next calibration run starts at, and the layers it skipped in all */
    float **x_saved;
    float *x_mem;
    int32_t x_from;
    int64_t layers_skipped, layers_run;
} th_search;

/* Save the source's calibration hidden states (one full calibration run) so that
 * sensitivity runs of a layer's unit start at that layer; off (no error) where the
 * engine cannot: GPU, MoE (router observation), hybrid models, several passes. */
th_status th_search_layer_resume_init(th_search *S);
/* The layer a unit's calibration run may start at (0: the whole model). */
int32_t th_search_unit_start(const th_search *S, size_t unit);

double th_search_now(void);
/* Gate value of an evaluation: KLD or PPL ratio - 1 by the params. */
double th_search_gate_value(const th_search *S, double kld, double ppl_ratio);
/* Point the model's weights at assignment a (units: unit -> candidate index, -1 =
 * source type), re-quantizing what changes. */
th_status th_search_apply(th_search *S, const int *choice);
/* Evaluate the model as it is on the gate (calib false) or the calibration slice. */
th_status th_search_eval(th_search *S, bool calib, double *kld, double *ppl_ratio, int64_t *flips, double *gap_min);
uint64_t th_search_hash(const th_search *S, const int *choice);
uint64_t th_search_bytes(const th_search *S, const int *choice);
double th_search_bpw(const th_search *S, uint64_t bytes);
void th_search_report_progress(th_search *S, const char *phase, int64_t done, int64_t total, double phase_t0,
                               const char *what);
/* Gate evaluation of an assignment (memoized), added to r->points. */
th_status th_search_gate(th_search *S, const int *choice, const char *label, bool uniform, th_search_point *out);

/* solve.c */
th_status th_search_solve(th_search *S);
/* report.c */
th_status th_search_reports(th_search *S, const int *best);
th_status th_search_config_text(th_search *S, const int *choice, char **out);

#endif
