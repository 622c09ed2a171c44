/* quantize_file.h — the per-tensor type choice of th_quantize_file (quantize_file.c),
 * exposed so tests can check the rules on synthetic tensor lists without data. */
#ifndef TH_QUANTIZE_FILE_H
#define TH_QUANTIZE_FILE_H

#include "quant/quant.h"

/* A mix: llama.cpp's file type ("Q4_K_M" = ftype 15, base type Q4_K). */
typedef struct th_qmix {
    const char *name;
    uint32_t ftype;     /* llama_ftype number, written to general.file_type */
    uint32_t base;      /* ggml type most weights get */
} th_qmix;

/* What the rules need to know about the model (from its metadata). */
typedef struct th_qmodel {
    const char *arch;   /* general.architecture ("" if absent) */
    int n_layer, n_head, n_head_kv, n_expert;
    bool has_imatrix;   /* quantizing with an importance matrix (two rules change) */
} th_qmodel;

typedef struct th_qtensor {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[4];
} th_qtensor;

/* Whether llama-quantize would quantize this tensor (2-D+ weights, not norms, not
 * the router, not position embeddings ...): the tensors a precision rule can reach. */
bool th_qtensor_quantizable(const th_qtensor *t);

/* NULL if unknown. Case-insensitive; Q3_K/Q4_K/Q5_K mean the _M mixes, as in llama-quantize. */
const th_qmix *th_qmix_find(const char *name);
/* Output type of each tensor (out[i] for t[i]) as llama-quantize chooses it (with
 * an importance matrix if m->has_imatrix). `pure` skips the per-tensor bumps. Returns how many tensors
 * needed a row-length fallback, -1 (error set) if out of memory. */
int th_qplan_types(const th_qmix *mix, bool pure, const th_qmodel *m, const th_qtensor *t, size_t n, uint32_t *out);

/* The importance each converted tensor is quantized with (quantize_imatrix.c):
 * *qw_out[i] = t[i]'s entry divided by its ncall (ne0 * ne2 floats), or NULL when
 * t[i] is not converted (out_type[i] == t[i].type) or the matrix has no entry for
 * it (llama-quantize quantizes it without, so do we). Errors, naming imatrix_path
 * and the tensor: an entry of the wrong size (except token_embd.weight, skipped as
 * llama-quantize does), or a matrix that names no tensor of the model at all. */
th_status th_qimatrix_match(const th_imatrix *im, const char *imatrix_path, const char *model_path,
                            const th_qtensor *t, const uint32_t *out_type, size_t n, float ***qw_out);
void th_qimatrix_free(float **qw, size_t n);

/* Convert `rows` rows of ne0 values from src_type to dst_type (decode, then the
 * weight encoder), the rows split across the pool's threads. Errors name `name`. */
struct th_pool;
th_status th_quantize_rows(struct th_pool *pool, const void *src, uint32_t src_type, uint32_t dst_type, int64_t ne0,
                           int64_t rows, void *dst, const char *name);

#endif
