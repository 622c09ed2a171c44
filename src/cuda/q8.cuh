// q8.cuh — the warp-wide quantizer of one 32-element activation block into the
// q8 form of backend.h (lane j holds element j), as the CPU reference does it
// (src/quant/ref_legacy.c): id = 127/amax, values rounded half-to-even, the
// scale amax/127 rounded to fp16; plus the block's integer sum (used by the
// Q4_0 kernel's -8 offset).
#ifndef TH_CUDA_Q8_CUH
#define TH_CUDA_Q8_CUH
#include "cuda/common.cuh"

static __device__ __forceinline__ float q8_scale_f16(float amax) { return __half2float(__float2half_rn(amax / 127.0f)); }

static __device__ __forceinline__ void q8_store_block(float v, int lane, const th_cu_q8 &o, int64_t qoff, int64_t boff) {
    float amax = warp_max(fabsf(v));
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int q = __float2int_rn(v * id);
    int s = warp_sum_i(q);
    o.q[qoff + lane] = (int8_t)q;
    if (lane == 0) { o.d[boff] = q8_scale_f16(amax); o.s[boff] = s; }
}
#endif
