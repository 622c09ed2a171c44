// mla.cu — multi-head latent attention's expansion step (th_cu_mla_kv, mla.h):
// each token's K heads ([k_nope of the head; the shared rope head]) and V heads
// gathered from the Wkv_b product and the latent projection, one thread per output.
#include "cuda/common.cuh"
#include "cuda/mla.h"

namespace {

__global__ void mla_kv(const float *kvb, const float *pe, int64_t pe_stride, int32_t n_head, int32_t nope,
                       int32_t rot, int32_t hdv, float *k, float *v, int64_t stride) {
    pdl_begin();
    const int64_t t = blockIdx.y, hd = nope + rot, kvw = nope + hdv, k_w = (int64_t)n_head * hd;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k_w + (int64_t)n_head * hdv) return;
    const float *src = kvb + t * n_head * kvw;
    if (i < k_w) {
        const int64_t h = i / hd, d = i % hd;
        k[t * stride + i] = d < nope ? src[h * kvw + d] : pe[t * pe_stride + d - nope];
    } else {
        const int64_t j = i - k_w, h = j / hdv, d = j % hdv;
        v[t * stride + j] = src[h * kvw + nope + d];
    }
}

}  // namespace

extern "C" void th_cu_mla_kv(const float *kvb, const float *pe, int64_t pe_stride, int n, int32_t n_head,
                             int32_t nope, int32_t rot, int32_t hdv, float *k, float *v, int64_t stride,
                             cudaStream_t st) {
    if (n <= 0) return;
    int64_t total = (int64_t)n_head * (nope + rot + hdv);
    launch_k(mla_kv, dim3((unsigned)((total + 255) / 256), (unsigned)n), dim3(256), st, kvb, pe, pe_stride, n_head,
             nope, rot, hdv, k, v, stride);
}
