/* gpu_stub.c — the GPU seam (gpu.h) when the library is built without CUDA. */
#ifndef TH_CUDA
#include "gpu.h"

th_status th_gpu_probe(char *desc, size_t cap) {
    if (cap) desc[0] = 0;
    return th_set_error(TH_ERR_UNSUPPORTED, "this build has no GPU backend (build with `make CUDA=1`)");
}
th_status th_gpu_init(const th_model *m, uint32_t n_batch, uint32_t n_blocks, int32_t block, bool kv_f16,
                      int32_t n_seq, const th_weight *rope_factors, bool verbose, th_gpu **out) {
    *out = NULL;
    return th_gpu_probe(NULL, 0);
}
void th_gpu_free(th_gpu *g) { (void)g; }
th_status th_gpu_forward(th_gpu *g, const th_gpu_batch *b) { return th_gpu_probe(NULL, 0); }
void th_gpu_copy_block(th_gpu *g, int32_t dst, int32_t src) { (void)g; }
#else
typedef int th_gpu_stub_unused;
#endif

#include "theseus.h"
#include "gpu.h"
th_status th_gpu_available(char *desc, size_t cap) { return th_gpu_probe(desc, cap); }
