// gemv.cu — matrix × few-vectors products for decode and small batches:
// y[t][r] (+)= W[r] · x[t] for t < n (tokens processed NT at a time so each
// weight is read once per NT tokens). One warp per weight row; lanes walk the
// row in 16-byte coalesced loads.
//   Q4_0, Q8_0 (SPLIT layout): int8 dot products (dp4a) against q8 activations.
//   F32, F16, BF16: fp32 math on 16-byte vector loads.
//   every other type: decode 32 weights at a time (common.cuh) and fp32 math.
#include "cuda/common.cuh"

namespace {

constexpr int WARPS = 4;  // warps per block
constexpr int U = 4;      // 16-byte loads in flight per lane

// Row bookkeeping when WPR warps share a row (WPR in 1, 2, 4): the block holds
// WARPS / WPR rows; warp `sub` of a row takes every WPR-th 32-lane step.
template <int WPR>
struct RowMap {
    int lane, sub;
    int64_t row;
    __device__ RowMap() {
        int warp = threadIdx.x >> 5;
        lane = threadIdx.x & 31;
        sub = warp % WPR;
        row = (int64_t)blockIdx.x * (WARPS / WPR) + warp / WPR;
    }
};

// Sum the NT accumulators over the warp (and over the WPR warps of a row), store.
template <int NT, int WPR>
__device__ __forceinline__ void finish(float (&acc)[NT], const RowMap<WPR> &m, int64_t rows, float *y, int64_t ys,
                                       bool accum) {
    __shared__ float part[WARPS][NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = warp_sum(acc[t]);
    if (WPR > 1) {
        int warp = threadIdx.x >> 5;
        if (m.lane == 0)
#pragma unroll
            for (int t = 0; t < NT; t++) part[warp][t] = acc[t];
        __syncthreads();
        if (m.sub != 0 || m.row >= rows) return;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < WPR; k++) s += part[warp + k][t];
            acc[t] = s;
        }
    }
    if (m.row >= rows) return;
#pragma unroll
    for (int t = 0; t < NT; t++)
        if (m.lane == t) {
            float *p = y + t * ys + m.row;
            *p = accum ? *p + acc[t] : acc[t];
        }
}

// ---- Q4_0 split: 16 bytes of quants = one 32-block per lane-step ----
template <int NT, int WPR>
__global__ void __launch_bounds__(WARPS * 32) gemv_q4_0(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_begin();
    RowMap<WPR> m;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (m.row < w.rows) {
        const int64_t nb = w.K / 32, stride = 32 * WPR;
        const uint4 *wq = (const uint4 *)((const uint8_t *)w.data + m.row * (w.K / 2));
        const __half *wd = (const __half *)w.scales + m.row * nb;
        for (int64_t b0 = m.sub * 32 + m.lane; b0 < nb; b0 += stride * U) {
            uint4 v[U];
            float d[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t b = b0 + u * stride;
                if (b < nb) { v[u] = __ldg(wq + b); d[u] = __half2float(wd[b]); }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t b = b0 + u * stride;
                if (b >= nb) break;
                int lo0 = v[u].x & 0x0f0f0f0f, lo1 = v[u].y & 0x0f0f0f0f, lo2 = v[u].z & 0x0f0f0f0f, lo3 = v[u].w & 0x0f0f0f0f;
                int hi0 = (v[u].x >> 4) & 0x0f0f0f0f, hi1 = (v[u].y >> 4) & 0x0f0f0f0f;
                int hi2 = (v[u].z >> 4) & 0x0f0f0f0f, hi3 = (v[u].w >> 4) & 0x0f0f0f0f;
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const int4 *xa = (const int4 *)(xq.q + t * w.K + b * 32);
                    int4 a0 = xa[0], a1 = xa[1];
                    int s = __dp4a(lo0, a0.x, 0);
                    s = __dp4a(lo1, a0.y, s); s = __dp4a(lo2, a0.z, s); s = __dp4a(lo3, a0.w, s);
                    s = __dp4a(hi0, a1.x, s); s = __dp4a(hi1, a1.y, s); s = __dp4a(hi2, a1.z, s); s = __dp4a(hi3, a1.w, s);
                    int64_t xb = t * nb + b;
                    acc[t] += d[u] * xq.d[xb] * (float)(s - 8 * xq.s[xb]);
                }
            }
        }
    }
    finish<NT, WPR>(acc, m, w.rows, y, ys, accum);
}

// ---- Q8_0 split: 32 bytes of quants (two 16-byte loads) per 32-block ----
template <int NT, int WPR>
__global__ void __launch_bounds__(WARPS * 32) gemv_q8_0(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_begin();
    RowMap<WPR> m;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (m.row < w.rows) {
        const int64_t nb = w.K / 32, stride = 32 * WPR;
        const int4 *wq = (const int4 *)((const int8_t *)w.data + m.row * w.K);
        const __half *wd = (const __half *)w.scales + m.row * nb;
        for (int64_t b0 = m.sub * 32 + m.lane; b0 < nb; b0 += stride * U) {
            int4 v0[U], v1[U];
            float d[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t b = b0 + u * stride;
                if (b < nb) { v0[u] = __ldg(wq + 2 * b); v1[u] = __ldg(wq + 2 * b + 1); d[u] = __half2float(wd[b]); }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t b = b0 + u * stride;
                if (b >= nb) break;
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const int4 *xa = (const int4 *)(xq.q + t * w.K + b * 32);
                    int4 a0 = xa[0], a1 = xa[1];
                    int s = __dp4a(v0[u].x, a0.x, 0);
                    s = __dp4a(v0[u].y, a0.y, s); s = __dp4a(v0[u].z, a0.z, s); s = __dp4a(v0[u].w, a0.w, s);
                    s = __dp4a(v1[u].x, a1.x, s); s = __dp4a(v1[u].y, a1.y, s); s = __dp4a(v1[u].z, a1.z, s); s = __dp4a(v1[u].w, a1.w, s);
                    acc[t] += d[u] * xq.d[t * nb + b] * (float)s;
                }
            }
        }
    }
    finish<NT, WPR>(acc, m, w.rows, y, ys, accum);
}

// ---- F32 / F16 / BF16: 8 weights per lane-step ----
template <uint32_t TYPE>
__device__ __forceinline__ void to8(const uint4 *p, float f[8]) {
    if (TYPE == TH_F32) {
        float4 a = *(const float4 *)&p[0], b = *(const float4 *)&p[1];
        f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w; f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
    } else {
        uint32_t u[4] = { p[0].x, p[0].y, p[0].z, p[0].w };
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (TYPE == TH_F16) {
                float2 q = __half22float2(*(const __half2 *)&u[k]);
                f[2 * k] = q.x; f[2 * k + 1] = q.y;
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

template <uint32_t TYPE, int NT, int WPR>
__global__ void __launch_bounds__(WARPS * 32) gemv_float(th_cu_mat w, const float *x, int64_t xs, float *y, int64_t ys, bool accum) {
    pdl_begin();
    RowMap<WPR> m;
    constexpr int V = TYPE == TH_F32 ? 2 : 1;  // 16-byte loads per 8 weights
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (m.row < w.rows) {
        const uint8_t *wr = (const uint8_t *)w.data + m.row * w.row_bytes;
        const bool vec = (w.K % 8) == 0 && (w.row_bytes % 16) == 0 && (xs % 4) == 0;
        if (vec) {
            const int64_t n8 = w.K / 8, stride = 32 * WPR;
            const uint4 *wp = (const uint4 *)wr;
            for (int64_t c0 = m.sub * 32 + m.lane; c0 < n8; c0 += stride * U) {
                uint4 v[U][V];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int64_t c = c0 + u * stride;
                    if (c < n8)
#pragma unroll
                        for (int k = 0; k < V; k++) v[u][k] = __ldg(wp + c * V + k);
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int64_t c = c0 + u * stride;
                    if (c >= n8) break;
                    float f[8];
                    to8<TYPE>(v[u], f);
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        const float4 *xp = (const float4 *)(x + t * xs + c * 8);
                        float4 a = xp[0], b = xp[1];
                        acc[t] += f[0] * a.x + f[1] * a.y + f[2] * a.z + f[3] * a.w + f[4] * b.x + f[5] * b.y + f[6] * b.z + f[7] * b.w;
                    }
                }
            }
        } else {
            for (int64_t i = m.sub * 32 + m.lane; i < w.K; i += 32 * WPR) {
                float f = load1<TYPE>(wr, i);
#pragma unroll
                for (int t = 0; t < NT; t++) acc[t] += f * x[t * xs + i];
            }
        }
    }
    finish<NT, WPR>(acc, m, w.rows, y, ys, accum);
}

// ---- any type: decode 32 weights per lane-step ----
template <int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_generic(th_cu_mat w, const float *x, int64_t xs, float *y, int64_t ys, bool accum) {
    pdl_begin();
    RowMap<1> m;
    const int lane = m.lane;
    const int64_t row = m.row;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int64_t g = lane; row < w.rows && g < w.K / 32; g += 32) {
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
    finish<NT, 1>(acc, m, w.rows, y, ys, accum);
}

int sm_count() {
    static int n = 0;
    if (!n) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) || n <= 0) n = 132;
    }
    return n;
}

// Warps per row: enough warps in flight to cover the memory latency (about two
// resident waves), but at least two 16-byte steps per lane.
int pick_wpr(int64_t rows, int64_t steps) {
    int64_t target = 64LL * sm_count();
    int wpr = 1;
    while (wpr < 4 && rows * wpr < target && steps >= 64LL * wpr * 2) wpr *= 2;
    return wpr;
}

template <int NT, int WPR>
void launch_w(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys, bool accum,
              cudaStream_t st) {
    dim3 grid((unsigned)((w->rows + WARPS / WPR - 1) / (WARPS / WPR))), block(WARPS * 32);
    if (w->layout == TH_CU_SPLIT && xq) {
        if (w->type == TH_Q4_0) { launch_k(gemv_q4_0<NT, WPR>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q8_0) { launch_k(gemv_q8_0<NT, WPR>, grid, block, st, *w, *xq, y, ys, accum); return; }
    }
    switch (w->type) {
    case TH_F32: launch_k(gemv_float<TH_F32, NT, WPR>, grid, block, st, *w, x, xs, y, ys, accum); return;
    case TH_F16: launch_k(gemv_float<TH_F16, NT, WPR>, grid, block, st, *w, x, xs, y, ys, accum); return;
    case TH_BF16: launch_k(gemv_float<TH_BF16, NT, WPR>, grid, block, st, *w, x, xs, y, ys, accum); return;
    default: break;
    }
}

template <int NT>
void launch(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys, bool accum,
            cudaStream_t st) {
    bool fast = (w->layout == TH_CU_SPLIT && xq) || w->type == TH_F32 || w->type == TH_F16 || w->type == TH_BF16;
    if (!fast) {
        dim3 grid((unsigned)((w->rows + WARPS - 1) / WARPS)), block(WARPS * 32);
        launch_k(gemv_generic<NT>, grid, block, st, *w, x, xs, y, ys, accum);
        return;
    }
    int64_t steps = w->layout == TH_CU_SPLIT ? w->K / 32 : w->K / 8;
    switch (pick_wpr(w->rows, steps)) {
    case 1: launch_w<NT, 1>(w, x, xs, xq, y, ys, accum, st); break;
    case 2: launch_w<NT, 2>(w, x, xs, xq, y, ys, accum, st); break;
    default: launch_w<NT, 4>(w, x, xs, xq, y, ys, accum, st); break;
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
