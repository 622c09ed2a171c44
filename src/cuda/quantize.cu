// quantize.cu — activation rows (fp32) to the q8 form the int8 matrix kernels read.
#include "cuda/q8.cuh"

namespace {

__global__ void quantize_q8(const float *x, int64_t xs, int64_t K, th_cu_q8 o) {
    pdl_begin();
    int64_t t = blockIdx.y;
    int lane = threadIdx.x & 31;
    int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (g >= K / 32) return;
    float v = x[t * xs + g * 32 + lane];
    q8_store_block(v, lane, o, t * K + g * 32, t * (K / 32) + g);
}

}  // namespace

extern "C" void th_cu_quantize_q8(const float *x, int64_t xs, int n, int64_t K, const th_cu_q8 *o, cudaStream_t st) {
    if (n <= 0 || K % 32) return;
    dim3 grid((unsigned)((K / 32 + 7) / 8), (unsigned)n);
    launch_k(quantize_q8, dim3(grid), dim3(256), st, x, xs, K, *o);
}
