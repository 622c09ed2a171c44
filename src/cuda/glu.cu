// glu.cu — the gated FFN activation: out = act(gate) · up with gate and up side
// by side in one row (gate at [0,F), up at [F,2F)); SiLU, tanh-GELU, or GPT-OSS's
// clamped SwiGLU (th_op_swiglu_oai: alpha 1.702, limit 7); optional q8 copy of
// the result for the down projection.
#include "cuda/layer_ops.cuh"
#include "cuda/q8.cuh"

namespace {

__global__ void glu(const float *gu, int64_t gs, int64_t F, int act, float *out, int64_t os, th_cu_q8 oq, bool q8) {
    pdl_begin();
    int64_t t = blockIdx.y;
    const float *g = gu + t * gs, *u = g + F;
    float *o = out + t * os;
    if (q8) {
        int lane = threadIdx.x & 31;
        int64_t grp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
        if (grp >= F / 32) return;
        int64_t i = grp * 32 + lane;
        float v = glu_fn(g[i], u[i], act);
        o[i] = v;
        q8_store_block(v, lane, oq, t * F + i - lane, t * (F / 32) + grp);
    } else {
        int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
        if (i < F) o[i] = glu_fn(g[i], u[i], act);
    }
}

}  // namespace

extern "C" void th_cu_glu(const float *gu, int64_t gs, int64_t F, int n, int act, float *out, int64_t os,
                          const th_cu_q8 *oq, cudaStream_t st) {
    if (n <= 0) return;
    dim3 grid((unsigned)((F + 255) / 256), (unsigned)n);
    launch_k(glu, dim3(grid), dim3(256), st, gu, gs, F, act, out, os, oq ? *oq : th_cu_q8{}, oq != nullptr && F % 32 == 0);
}
