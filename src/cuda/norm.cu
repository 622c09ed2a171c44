// norm.cu — RMSNorm of activation rows (optionally gathered by index), with an
// optional q8 copy of the result for the int8 matrix kernels. The fast path
// keeps the row in registers (16-byte loads, up to 8 per thread, one block of
// up to 1024 threads a row) and quantizes in groups of 8 threads (32 values).
#include "cuda/q8.cuh"

namespace {

constexpr int MAXPER = 8;

__device__ __forceinline__ float block_sum(float v, float *red) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < nw; i++) t += red[i];
    return t;
}

__global__ void __launch_bounds__(1024) rmsnorm_vec(const float *x, int64_t xs, const int32_t *rows, const float *w,
                                                    float eps, int64_t K, float *y, int64_t ys, th_cu_q8 yq, bool q8) {
    pdl_trigger();
    __shared__ float red[32];
    const int64_t r = blockIdx.x, n4 = K / 4;
    const float4 *w4 = (const float4 *)w;
    // the weights of the first float4 a thread (all of a row of up to 4096) load before waiting
    const float4 w0 = w && threadIdx.x < n4 ? w4[threadIdx.x] : make_float4(1.f, 1.f, 1.f, 1.f);
    pdl_wait();
    const float4 *xr = (const float4 *)(x + (rows ? rows[r] : r) * xs);
    float4 v[MAXPER];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < MAXPER; j++) {
        int64_t i = threadIdx.x + (int64_t)j * blockDim.x;
        v[j] = i < n4 ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
    const float scale = 1.0f / sqrtf(block_sum(ss, red) / (float)K + eps);
    float4 *yr = (float4 *)(y + r * ys);
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < MAXPER; j++) {
        if ((int64_t)j * blockDim.x >= n4) break;
        int64_t i = threadIdx.x + (int64_t)j * blockDim.x;
        bool in = i < n4;
        float4 o = v[j];
        if (in) {
            float4 wv = j == 0 ? w0 : w ? w4[i] : make_float4(1.f, 1.f, 1.f, 1.f);
            o = make_float4(o.x * scale * wv.x, o.y * scale * wv.y, o.z * scale * wv.z, o.w * scale * wv.w);
            yr[i] = o;
        }
        if (q8) {
            float am = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
#pragma unroll
            for (int m = 1; m < 8; m <<= 1) am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, m));
            float id = am != 0.0f ? 127.0f / am : 0.0f;
            int q0 = __float2int_rn(o.x * id), q1 = __float2int_rn(o.y * id), q2 = __float2int_rn(o.z * id),
                q3 = __float2int_rn(o.w * id);
            int s = q0 + q1 + q2 + q3;
#pragma unroll
            for (int m = 1; m < 8; m <<= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
            if (in) {
                int64_t e = r * K + 4 * i;
                *(char4 *)(yq.q + e) = make_char4((signed char)q0, (signed char)q1, (signed char)q2, (signed char)q3);
                if ((lane & 7) == 0) { yq.d[e / 32] = q8_scale_f16(am); yq.s[e / 32] = s; }
            }
        }
    }
}

constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS) rmsnorm(const float *x, int64_t xs, const int32_t *rows, const float *w,
                                                   float eps, int64_t K, float *y, int64_t ys, th_cu_q8 yq, bool q8) {
    pdl_begin();
    __shared__ float red[THREADS / 32];
    int64_t r = blockIdx.x;
    const float *xr = x + (rows ? rows[r] : r) * xs;
    float *yr = y + r * ys;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < K; i += THREADS) sum += xr[i] * xr[i];
    float scale = 1.0f / sqrtf(block_sum(sum, red) / (float)K + eps);
    __syncthreads();  // every thread has read x before anyone writes y (y may be x)
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (q8) {
        for (int64_t g = warp; g < K / 32; g += THREADS / 32) {
            int64_t i = g * 32 + lane;
            float v = xr[i] * scale * (w ? w[i] : 1.0f);
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
    bool q8 = yq != nullptr && K % 32 == 0;
    if (K % 32 == 0 && xs % 4 == 0 && ys % 4 == 0 && K / 4 <= 1024 * MAXPER) {
        int64_t n4 = K / 4;
        int threads = (int)(n4 < 1024 ? (n4 + 31) / 32 * 32 : 1024);
        launch_k(rmsnorm_vec, dim3(n), dim3(threads), st, x, xs, rows, w, eps, K, y, ys, q, q8);
    } else {
        launch_k(rmsnorm, dim3(n), dim3(THREADS), st, x, xs, rows, w, eps, K, y, ys, q, q8);
    }
}
