/* gpu.h — the seam between the forward pass (model.c) and a GPU backend
 * (src/cuda/, built with `make CUDA=1`). The CPU side keeps doing batch
 * validation and KV block bookkeeping (kv.c, with no host copy of the data);
 * the backend owns the weights, the KV block pool and the scratch on the device
 * and runs the whole forward pass. Without CUDA the stubs in gpu_stub.c answer
 * "built without CUDA". */
#ifndef TH_GPU_H
#define TH_GPU_H

#include "model.h"

typedef struct th_gpu th_gpu;

typedef struct th_gpu_batch {
    int32_t n_tokens;
    const int32_t *token, *pos, *seq;     /* validated */
    const int32_t *block_table;           /* n_seq × max_blocks block ids (row per sequence) */
    int32_t max_blocks;
    int32_t block;                        /* tokens per block */
    const int32_t *out_row;               /* per token: logits row or -1 */
    int32_t n_out;
    float *logits;                        /* host: n_out × n_vocab, or NULL: no logits download */
    int32_t *argmax;                      /* host: n_out argmax ids (th_greedy_argmax's rule, taken
                                           * on the device), or NULL: none */
} th_gpu_batch;

th_status th_gpu_probe(char *desc, size_t cap);
/* Upload weights (with a progress line if verbose), allocate n_blocks KV blocks
 * of `block` tokens (F16 or F32 per kv_f16), scratch for n_batch tokens.
 * rope_factors: the per-dimension rope frequency factors this context uses
 * (rope_freqs, or LongRoPE's short or long set as the context length picks), or NULL. */
th_status th_gpu_init(const th_model *m, uint32_t n_batch, uint32_t n_blocks, int32_t block,
                      bool kv_f16, int32_t n_seq, const th_weight *rope_factors, bool verbose, th_gpu **out);
void th_gpu_free(th_gpu *g);
/* One forward pass; fills whichever of b->logits / b->argmax is not NULL. */
th_status th_gpu_forward(th_gpu *g, const th_gpu_batch *b);
/* Copy-on-write of a KV block on the device. */
void th_gpu_copy_block(th_gpu *g, int32_t dst, int32_t src);

#endif
