// q8.cuh — the warp-wide quantizer of one 32-element activation block into the
// q8 form of backend.h (lane j holds element j): scale amax/127, int8 values
// rounded to nearest, and their integer sum (used by the Q4_0 kernel's -8 offset).
#ifndef TH_CUDA_Q8_CUH
#define TH_CUDA_Q8_CUH
#include "cuda/common.cuh"

static __device__ __forceinline__ void q8_store_block(float v, int lane, const th_cu_q8 &o, int64_t qoff, int64_t boff) {
    float amax = warp_max(fabsf(v));
    float d = amax / 127.0f;
    int q = d > 0.0f ? __float2int_rn(v / d) : 0;
    int s = warp_sum_i(q);
    o.q[qoff + lane] = (int8_t)q;
    if (lane == 0) { o.d[boff] = d; o.s[boff] = s; }
}
#endif
