// argmax.cu — the argmax of each logits row on the device, for greedy decoding
// without downloading the logits (th_context_params.logits_argmax_only).
//
// One block per row. Each thread scans its share of the row with 16-byte loads
// (a scalar head up to the first 16-byte boundary and a scalar tail, so any
// row length and alignment works), keeping the first (lowest-index) maximum it
// sees; then (value, index) pairs are reduced by warp shuffles and across the
// warps through shared memory, the larger value winning and, on equal values,
// the lower index. Before comparing, NaN becomes -inf and +inf becomes FLT_MAX,
// exactly as the host rule th_greedy_argmax (src/sample/greedy.h) and the
// sampler's sanitize step do; a row of nothing but NaN and -inf gives 0 (every
// element ties at -inf, the lowest index wins).
#include "cuda/common.cuh"
#include <float.h>

namespace {

constexpr int kThreads = 1024;

struct best_t {
    float v;
    int32_t i;
};

static __device__ __forceinline__ float sanitize(float x) {
    if (x != x) return -INFINITY;
    return x == INFINITY ? FLT_MAX : x;
}

// a replaces b: larger value, or the same value at a lower index.
static __device__ __forceinline__ bool better(float av, int32_t ai, float bv, int32_t bi) {
    return av > bv || (av == bv && ai < bi);
}

static __device__ __forceinline__ void take(best_t &b, float x, int32_t i) {
    float v = sanitize(x);
    if (better(v, i, b.v, b.i)) { b.v = v; b.i = i; }
}

static __device__ __forceinline__ best_t warp_best(best_t b) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, b.v, o);
        int32_t oi = __shfl_xor_sync(0xffffffffu, b.i, o);
        if (better(ov, oi, b.v, b.i)) { b.v = ov; b.i = oi; }
    }
    return b;
}

// This thread's best over x[0..n): scalar head to 16-byte alignment, float4 body, scalar tail.
static __device__ best_t scan_row(const float *x, int64_t n) {
    best_t b = { -INFINITY, INT32_MAX };
    int64_t head = (int64_t)(((16 - ((uintptr_t)x & 15)) & 15) / 4);
    if (head > n) head = n;
    for (int64_t i = threadIdx.x; i < head; i += blockDim.x) take(b, x[i], (int32_t)i);
    const float4 *x4 = reinterpret_cast<const float4 *>(x + head);
    int64_t n4 = (n - head) / 4;
#pragma unroll 4
    for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
        float4 q = x4[j];
        int32_t i = (int32_t)(head + 4 * j);
        take(b, q.x, i); take(b, q.y, i + 1); take(b, q.z, i + 2); take(b, q.w, i + 3);
    }
    for (int64_t i = head + 4 * n4 + threadIdx.x; i < n; i += blockDim.x) take(b, x[i], (int32_t)i);
    return b;
}

__global__ void __launch_bounds__(kThreads) argmax_rows(const float *x, int64_t stride, int64_t n, int32_t *out) {
    pdl_begin();
    __shared__ float sv[kThreads / 32];
    __shared__ int32_t si[kThreads / 32];
    best_t b = warp_best(scan_row(x + (int64_t)blockIdx.x * stride, n));
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    if (lane == 0) { sv[warp] = b.v; si[warp] = b.i; }
    __syncthreads();
    if (warp == 0) {
        b = lane < n_warps ? best_t{ sv[lane], si[lane] } : best_t{ -INFINITY, INT32_MAX };
        b = warp_best(b);
        if (lane == 0) out[blockIdx.x] = b.i == INT32_MAX ? 0 : b.i;
    }
}

}  // namespace

extern "C" void th_cu_argmax_rows(const float *x, int64_t stride, int64_t n, int rows, int32_t *out, cudaStream_t st) {
    if (rows <= 0 || n <= 0) return;
    int threads = n >= 4 * kThreads ? kThreads : (int)((n / 4 + 31) / 32 * 32);
    if (threads < 32) threads = 32;
    launch_k(argmax_rows, dim3((unsigned)rows), dim3((unsigned)threads), st, x, stride, n, out);
}
