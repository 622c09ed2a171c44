// glu.cu — the gated FFN activation: out = act(gate) · up with gate and up side
// by side in one row (gate at [0,F), up at [F,2F)); SiLU, tanh-GELU, or GPT-OSS's
// clamped SwiGLU (th_op_swiglu_oai: alpha 1.702, limit 7); optional q8 copy of
// the result for the down projection.
#include "cuda/q8.cuh"

namespace {

__device__ __forceinline__ float act_fn(float g, int act) {
    if (act == 1) {
        const float c = 0.7978845608028654f;
        return 0.5f * g * (1.0f + tanhf(c * g * (1.0f + 0.044715f * g * g)));
    }
    return g / (1.0f + expf(-g));
}

// act(g) · u for act 0 SiLU, 1 GELU-tanh, 2 clamped SwiGLU (the CPU's formulas).
__device__ __forceinline__ float glu_fn(float g, float u, int act) {
    if (act == 2) {
        const float alpha = 1.702f, limit = 7.0f;
        g = fminf(g, limit);
        u = fmaxf(fminf(u, limit), -limit);
        return g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
    return act_fn(g, act) * u;
}

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
