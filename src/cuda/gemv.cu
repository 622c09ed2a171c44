// gemv.cu — matrix × few-vectors products for decode and small batches:
// y[t][r] (+)= W[r] · x[t] for t < n (tokens processed NT at a time so each
// weight is read once per NT tokens). One warp per weight row; lanes walk the
// row in 16-byte coalesced loads.
//   Q4_0, Q8_0 (SPLIT layout): int8 dot products (dp4a) against q8 activations.
//   F32, F16, BF16: fp32 math on 16-byte vector loads.
//   every other type: decode 32 weights at a time (common.cuh) and fp32 math.
#include "cuda/common.cuh"

namespace {

constexpr int WARPS = 4;  // rows per block

template <int NT>
__device__ __forceinline__ void store_rows(float (&acc)[NT], int lane, int64_t row, float *y, int64_t ys, bool accum) {
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = warp_sum(acc[t]);
#pragma unroll
    for (int t = 0; t < NT; t++)
        if (lane == t) {
            float *p = y + t * ys + row;
            *p = accum ? *p + acc[t] : acc[t];
        }
}

// ---- Q4_0 split: 16 bytes of quants = one 32-block per lane-step ----
template <int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_q4_0(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_begin();
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= w.rows) return;
    const int64_t nb = w.K / 32;
    const uint4 *wq = (const uint4 *)((const uint8_t *)w.data + row * (w.K / 2));
    const __half *wd = (const __half *)w.scales + row * nb;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
#pragma unroll 4
    for (int64_t b = lane; b < nb; b += 32) {
        uint4 v = __ldg(wq + b);
        float d = __half2float(wd[b]);
        int lo0 = v.x & 0x0f0f0f0f, lo1 = v.y & 0x0f0f0f0f, lo2 = v.z & 0x0f0f0f0f, lo3 = v.w & 0x0f0f0f0f;
        int hi0 = (v.x >> 4) & 0x0f0f0f0f, hi1 = (v.y >> 4) & 0x0f0f0f0f, hi2 = (v.z >> 4) & 0x0f0f0f0f, hi3 = (v.w >> 4) & 0x0f0f0f0f;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const int4 *xa = (const int4 *)(xq.q + t * w.K + b * 32);
            int4 a0 = xa[0], a1 = xa[1];
            int s = __dp4a(lo0, a0.x, 0);
            s = __dp4a(lo1, a0.y, s); s = __dp4a(lo2, a0.z, s); s = __dp4a(lo3, a0.w, s);
            s = __dp4a(hi0, a1.x, s); s = __dp4a(hi1, a1.y, s); s = __dp4a(hi2, a1.z, s); s = __dp4a(hi3, a1.w, s);
            int64_t xb = t * nb + b;
            acc[t] += d * xq.d[xb] * (float)(s - 8 * xq.s[xb]);
        }
    }
    store_rows<NT>(acc, lane, row, y, ys, accum);
}

// ---- Q8_0 split: 32 bytes of quants (two 16-byte loads) per 32-block ----
template <int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_q8_0(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_begin();
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= w.rows) return;
    const int64_t nb = w.K / 32;
    const int4 *wq = (const int4 *)((const int8_t *)w.data + row * w.K);
    const __half *wd = (const __half *)w.scales + row * nb;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
#pragma unroll 4
    for (int64_t b = lane; b < nb; b += 32) {
        int4 v0 = __ldg(wq + 2 * b), v1 = __ldg(wq + 2 * b + 1);
        float d = __half2float(wd[b]);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const int4 *xa = (const int4 *)(xq.q + t * w.K + b * 32);
            int4 a0 = xa[0], a1 = xa[1];
            int s = __dp4a(v0.x, a0.x, 0);
            s = __dp4a(v0.y, a0.y, s); s = __dp4a(v0.z, a0.z, s); s = __dp4a(v0.w, a0.w, s);
            s = __dp4a(v1.x, a1.x, s); s = __dp4a(v1.y, a1.y, s); s = __dp4a(v1.z, a1.z, s); s = __dp4a(v1.w, a1.w, s);
            acc[t] += d * xq.d[t * nb + b] * (float)s;
        }
    }
    store_rows<NT>(acc, lane, row, y, ys, accum);
}

// ---- F32 / F16 / BF16: 8 weights per lane-step ----
template <uint32_t TYPE>
__device__ __forceinline__ void load8(const uint8_t *row, int64_t i, float f[8]) {
    if (TYPE == TH_F32) {
        const float4 *p = (const float4 *)((const float *)row + i);
        float4 a = __ldg(p), b = __ldg(p + 1);
        f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w; f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
    } else {
        uint4 v = __ldg((const uint4 *)((const uint16_t *)row + i));
        uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (TYPE == TH_F16) {
                float2 p = __half22float2(*(const __half2 *)&u[k]);
                f[2 * k] = p.x; f[2 * k + 1] = p.y;
            } else {
                f[2 * k] = __uint_as_float(u[k] << 16);
                f[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
            }
        }
    }
}

template <uint32_t TYPE>
__device__ __forceinline__ float load1(const uint8_t *row, int64_t i) {
    if (TYPE == TH_F32) return ((const float *)row)[i];
    if (TYPE == TH_F16) return h2f(((const uint16_t *)row)[i]);
    return bf2f(((const uint16_t *)row)[i]);
}

template <uint32_t TYPE, int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_float(th_cu_mat w, const float *x, int64_t xs, float *y, int64_t ys, bool accum) {
    pdl_begin();
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= w.rows) return;
    const uint8_t *wr = (const uint8_t *)w.data + row * w.row_bytes;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    const bool vec = (w.K % 8) == 0 && (w.row_bytes % 16) == 0 && (xs % 4) == 0;
    if (vec) {
#pragma unroll 2
        for (int64_t i = 8 * lane; i < w.K; i += 256) {
            float f[8];
            load8<TYPE>(wr, i, f);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float4 *xp = (const float4 *)(x + t * xs + i);
                float4 a = xp[0], b = xp[1];
                acc[t] += f[0] * a.x + f[1] * a.y + f[2] * a.z + f[3] * a.w + f[4] * b.x + f[5] * b.y + f[6] * b.z + f[7] * b.w;
            }
        }
    } else {
        for (int64_t i = lane; i < w.K; i += 32) {
            float f = load1<TYPE>(wr, i);
#pragma unroll
            for (int t = 0; t < NT; t++) acc[t] += f * x[t * xs + i];
        }
    }
    store_rows<NT>(acc, lane, row, y, ys, accum);
}

// ---- any type: decode 32 weights per lane-step ----
template <int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_generic(th_cu_mat w, const float *x, int64_t xs, float *y, int64_t ys, bool accum) {
    pdl_begin();
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= w.rows) return;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int64_t g = lane; g < w.K / 32; g += 32) {
        float f[32];
        dq32_mat(w, row, g, f);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float *xp = x + t * xs + g * 32;
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 32; j++) s += f[j] * xp[j];
            acc[t] += s;
        }
    }
    store_rows<NT>(acc, lane, row, y, ys, accum);
}

template <int NT>
void launch(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys, bool accum,
            cudaStream_t st) {
    dim3 grid((unsigned)((w->rows + WARPS - 1) / WARPS)), block(WARPS * 32);
    if (w->layout == TH_CU_SPLIT && xq) {
        if (w->type == TH_Q4_0) { launch_k(gemv_q4_0<NT>, dim3(grid), dim3(block), st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q8_0) { launch_k(gemv_q8_0<NT>, dim3(grid), dim3(block), st, *w, *xq, y, ys, accum); return; }
    }
    switch (w->type) {
    case TH_F32: launch_k(gemv_float<TH_F32, NT>, dim3(grid), dim3(block), st, *w, x, xs, y, ys, accum); return;
    case TH_F16: launch_k(gemv_float<TH_F16, NT>, dim3(grid), dim3(block), st, *w, x, xs, y, ys, accum); return;
    case TH_BF16: launch_k(gemv_float<TH_BF16, NT>, dim3(grid), dim3(block), st, *w, x, xs, y, ys, accum); return;
    default: launch_k(gemv_generic<NT>, dim3(grid), dim3(block), st, *w, x, xs, y, ys, accum); return;
    }
}

}  // namespace

extern "C" bool th_cu_gemv_wants_q8(const th_cu_mat *w) {
    return w->layout == TH_CU_SPLIT && (w->type == TH_Q4_0 || w->type == TH_Q8_0);
}

extern "C" void th_cu_gemv(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, int n, float *y,
                           int64_t ys, bool accum, cudaStream_t st) {
    for (int t0 = 0; t0 < n; t0 += 8) {
        int nt = n - t0 < 8 ? n - t0 : 8;
        const float *xt = x ? x + t0 * xs : nullptr;
        th_cu_q8 q, *qp = nullptr;
        if (xq) {
            q.q = xq->q + t0 * w->K; q.d = xq->d + t0 * (w->K / 32); q.s = xq->s + t0 * (w->K / 32);
            qp = &q;
        }
        float *yt = y + t0 * ys;
        switch (nt) {
        case 1: launch<1>(w, xt, xs, qp, yt, ys, accum, st); break;
        case 2: launch<2>(w, xt, xs, qp, yt, ys, accum, st); break;
        case 3: launch<3>(w, xt, xs, qp, yt, ys, accum, st); break;
        case 4: launch<4>(w, xt, xs, qp, yt, ys, accum, st); break;
        case 5: launch<5>(w, xt, xs, qp, yt, ys, accum, st); break;
        case 6: launch<6>(w, xt, xs, qp, yt, ys, accum, st); break;
        case 7: launch<7>(w, xt, xs, qp, yt, ys, accum, st); break;
        default: launch<8>(w, xt, xs, qp, yt, ys, accum, st); break;
        }
    }
}
