/* cuda_test.h — what the GPU test programs (test_cuda.c, test_cuda_moe.c,
 * test_cuda_hybrid.c) share: whether a GPU is there (each GPU test starts with
 * NEED_GPU(), which skips it with the reason when there is none) and the logits
 * of a token list decoded in batches on the GPU or the CPU. */
#ifndef TH_TEST_CUDA_TEST_H
#define TH_TEST_CUDA_TEST_H
#include "check.h"
#include "logits.h"
#include "theseus.h"

static char gpu_desc[256];
static int gpu_ok = -1;

static inline bool have_gpu(void) {
    if (gpu_ok < 0) gpu_ok = th_gpu_available(gpu_desc, sizeof gpu_desc) == TH_OK;
    return gpu_ok;
}
#define NEED_GPU() do { if (!have_gpu()) SKIP("no GPU (%s)", th_last_error()); } while (0)

/* Logits of every token of `tok`, decoded in batches of `chunk` on the GPU (or CPU). */
static inline float *run_logits_ctx(th_model *m, const int32_t *tok, int n, int chunk, bool gpu, int kv_type,
                                    uint32_t n_ctx) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = (uint32_t)chunk;
    cp.kv_block = 16;
    cp.kv_type = kv_type;
    cp.n_threads = 2;
    cp.gpu = gpu;
    return decode_all_logits(m, tok, n, &cp);
}

static inline float *run_logits(th_model *m, const int32_t *tok, int n, int chunk, bool gpu, int kv_type) {
    return run_logits_ctx(m, tok, n, chunk, gpu, kv_type, 64);
}
#endif
