/* mla.h — multi-head latent attention (DeepSeek-V2/V3, non-absorbed tensors) on
 * the CUDA backend: the kernel (mla.cu) that expands the latents into the K
 * and V heads of a layer's Q/K/V rows (gpu_mla.c runs the projections). Plain C. */
#ifndef TH_CUDA_MLA_H
#define TH_CUDA_MLA_H

#include "cuda/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif


/* For each token t < n and head h < n_head:
 *   k[t·stride + h·(nope+rot) ..] = [kvb[t][h·(nope+hdv) .. +nope] ; pe[t·pe_stride .. +rot]]
 *   v[t·stride + h·hdv ..]        =  kvb[t][h·(nope+hdv) + nope .. +hdv]
 * kvb rows are n_head·(nope+hdv) floats, contiguous. pe (the shared rope head) is
 * copied unroped; the rope runs afterwards on every head (th_cu_rope.rope_off). */
void th_cu_mla_kv(const float *kvb, const float *pe, int64_t pe_stride, int n, int32_t n_head, int32_t nope,
                  int32_t rot, int32_t hdv, float *k, float *v, int64_t stride, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
