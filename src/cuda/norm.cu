// norm.cu — RMSNorm of activation rows (optionally gathered by index), with an
// optional q8 copy of the result for the int8 matrix kernels.
#include "cuda/q8.cuh"

namespace {

constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS) rmsnorm(const float *x, int64_t xs, const int32_t *rows, const float *w,
                                                   float eps, int64_t K, float *y, int64_t ys, th_cu_q8 yq, bool q8) {
    pdl_begin();
    __shared__ float red[THREADS / 32];
    __shared__ float s_scale;
    int64_t r = blockIdx.x;
    const float *xr = x + (rows ? rows[r] : r) * xs;
    float *yr = y + r * ys;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < K; i += THREADS) sum += xr[i] * xr[i];
    sum = warp_sum(sum);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        float v = lane < THREADS / 32 ? red[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) s_scale = 1.0f / sqrtf(v / (float)K + eps);
    }
    __syncthreads();
    float scale = s_scale;
    if (q8) {
        for (int64_t g = warp; g < K / 32; g += THREADS / 32) {
            int64_t i = g * 32 + lane;
            float v = xr[i] * scale * (w ? w[i] : 1.0f);
            __syncwarp();
            yr[i] = v;
            q8_store_block(v, lane, yq, r * K + g * 32, r * (K / 32) + g);
        }
    } else {
        for (int64_t i = threadIdx.x; i < K; i += THREADS) yr[i] = xr[i] * scale * (w ? w[i] : 1.0f);
    }
}

}  // namespace

extern "C" void th_cu_rmsnorm(const float *x, int64_t xs, const int32_t *rows, const float *w, float eps, int n,
                              int64_t K, float *y, int64_t ys, const th_cu_q8 *yq, cudaStream_t st) {
    if (n <= 0) return;
    th_cu_q8 q = yq ? *yq : th_cu_q8{};
    launch_k(rmsnorm, dim3(n), dim3(THREADS), st, x, xs, rows, w, eps, K, y, ys, q, yq != nullptr && K % 32 == 0);
}
