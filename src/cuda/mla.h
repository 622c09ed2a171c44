/* mla.h — multi-head latent attention (DeepSeek-V2/V3, non-absorbed tensors) on
 * the CUDA backend: a layer's MLA weights on the device (uploaded by
 * gpu_upload.c, run by gpu_mla.c) and the kernel (mla.cu) that expands the
 * latents into the K and V heads of the layer's Q/K/V rows. Plain C. */
#ifndef TH_CUDA_MLA_H
#define TH_CUDA_MLA_H

#include "cuda/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct th_cu_mla {
    bool on;                            /* false: the layer has a standard Q/K/V projection */
    th_cu_mat wq;                       /* E → H·(nope+rot), when there is no q LoRA */
    th_cu_mat wq_a, wq_b;               /* the q LoRA: E → q_lora_rank → H·(nope+rot) */
    th_cu_mat wkv_a;                    /* E → kv_lora_rank + rot: [latent; shared rope head] */
    th_cu_mat wkv_b;                    /* kv_lora_rank → H·(nope+hdv): per head [k_nope; v] */
    const float *q_a_norm, *kv_a_norm;  /* RMSNorm weights of the q LoRA and of the latent */
} th_cu_mla;

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
