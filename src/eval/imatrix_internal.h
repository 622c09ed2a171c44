/* imatrix_internal.h — the importance matrix's in-memory form, shared by its
 * computation (imatrix.c, needs the forward pass) and its file format
 * (imatrix_file.c, standalone: the quantizer links it without the model code). */
#ifndef TH_EVAL_IMATRIX_INTERNAL_H
#define TH_EVAL_IMATRIX_INTERNAL_H
#include "theseus.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct entry {
    char *name;
    int64_t n;            /* values (columns x experts) */
    float *sum;           /* computing: sums of x²; loaded: the stored values */
    int32_t *count;       /* computing only */
    int32_t ncall;
    int64_t last_pass;    /* the pass that last counted a call */
} entry;

struct th_imatrix {
    entry *e;
    int32_t n, cap;
    int32_t last_call;    /* chunks */
    char *dataset;
    /* computing */
    int32_t n_expert;
    bool process_output;
    int64_t pass;
    th_status err;
};

/* The entry named name, or NULL. */
entry *th_imx_find(th_imatrix *im, const char *name);
/* Appends an entry of n zeroed values (and zeroed counts when counts); NULL when out of memory. */
entry *th_imx_add(th_imatrix *im, const char *name, int64_t n, bool counts);

#endif
