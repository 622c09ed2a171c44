// gemv.cu — matrix × few-vectors products for decode and small batches:
// y[t][r] (+)= W[r] · x[t] for t < n (tokens processed NT at a time so each
// weight is read once per NT tokens). One warp per weight row; lanes walk the
// row in 16-byte coalesced loads.
//   Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4
//   (SPLIT layout, split.c/split.cuh): int8 dot products (dp4a) against q8 activations.
//   F32, F16, BF16: fp32 math on 16-byte vector loads.
//   q2..q8 (qN) have a split layout too; in the file layout (fp32 activations) their own kernel (qn.cu).
//   TQ1_0, TQ2_0, Q1_0_G128, IQ1_BN, IQ2_BN (file layout): gemv_tern.cu, dp4a on q8 activations.
//   every other type: decode 32 weights at a time (dq32_mat, split.cuh) and fp32 math.
#include "cuda/split.cuh"
#include <stdlib.h>

namespace {

constexpr int WARPS = 4;  // warps per block of the generic kernel
constexpr int U = 4;      // 16-byte steps in flight per lane and row

// Block shape of the fast kernels: NW warps, each owning RPW consecutive rows
// (several rows a warp: more loads in flight, and the activation vector is
// read from L2 once per NW*RPW rows instead of once per row).
template <int NW, int RPW>
struct RowMap {
    int lane;
    int64_t row0;
    __device__ RowMap() {
        lane = threadIdx.x & 31;
        row0 = ((int64_t)blockIdx.x * NW + (threadIdx.x >> 5)) * RPW;
    }
};

// Sum the accumulators over the warp and store rows row0..row0+RPW-1.
template <int NT, int RPW>
__device__ __forceinline__ void finish(float (&acc)[RPW][NT], int lane, int64_t row0, int64_t rows, float *y,
                                       int64_t ys, bool accum) {
#pragma unroll
    for (int r = 0; r < RPW; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = warp_sum(acc[r][t]);
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        if (row0 + r >= rows) return;
#pragma unroll
        for (int t = 0; t < NT; t++)
            if (lane == t) {
                float *p = y + t * ys + row0 + r;
                *p = accum ? *p + acc[r][t] : acc[r][t];
            }
    }
}

// Kernel entry: let the next kernel launch (programmatic dependent launch).
// Weights never depend on the previous kernel, so the fast kernels load their
// first weights before pdl_wait() and only then read the activations. (An L2
// bulk prefetch of the block's rows here as well was measured slower on the
// H200: 8B Q4_0 405 vs 424 tok/s, F16 168 vs 196.)
__device__ __forceinline__ void gemv_enter() {
    pdl_trigger();
    pdl_wait();
}

// ---- Q4_0 split: 16 bytes of quants = one 32-block per lane-step ----
// PF: software pipelining — the next U steps' loads are issued before the
// current ones are consumed.
template <int RPW, int UU>
__device__ __forceinline__ void q4_load(const uint4 *wq, const __half *wd, int64_t nb, int nr, int64_t b0,
                                        uint4 (&v)[RPW][UU], float (&d)[RPW][UU]) {
#pragma unroll
    for (int u = 0; u < UU; u++) {
        int64_t b = b0 + u * 32;
#pragma unroll
        for (int r = 0; r < RPW; r++)
            if (b < nb && r < nr) { v[r][u] = __ldg(wq + r * nb + b); d[r][u] = __half2float(wd[r * nb + b]); }
    }
}

template <int NT, int NW, int RPW, bool PF, int UU>
__global__ void __launch_bounds__(NW * 32) gemv_q4_0(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_trigger();
    RowMap<NW, RPW> m;
    float acc[RPW][NT];
#pragma unroll
    for (int r = 0; r < RPW; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    const int64_t nb = w.K / 32;
    const int nr = (int)min((int64_t)RPW, w.rows - m.row0);
    const uint4 *wq = (const uint4 *)((const uint8_t *)w.data + m.row0 * (w.K / 2));
    const __half *wd = (const __half *)w.scales + m.row0 * nb;
    uint4 v[RPW][UU];
    float d[RPW][UU];
    // the first weights are loaded before waiting for the activations
    if (nr > 0) q4_load<RPW, UU>(wq, wd, nb, nr, m.lane, v, d);
    pdl_wait();
    if (nr > 0) {
        for (int64_t b0 = m.lane; b0 < nb; b0 += 32 * UU) {
            uint4 vn[RPW][UU];
            float dn[RPW][UU];
            if (PF) q4_load<RPW, UU>(wq, wd, nb, nr, b0 + 32 * UU, vn, dn);
#pragma unroll
            for (int u = 0; u < UU; u++) {
                int64_t b = b0 + u * 32;
                if (b >= nb) break;
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const int4 *xa = (const int4 *)(xq.q + t * w.K + b * 32);
                    int4 a0 = __ldg(xa), a1 = __ldg(xa + 1);
                    float xd = __ldg(xq.d + t * nb + b);
                    int xs8 = 8 * __ldg(xq.s + t * nb + b);
#pragma unroll
                    for (int r = 0; r < RPW; r++) {
                        if (r >= nr) break;
                        int s = dot_nibbles(v[r][u], a0, a1);
                        acc[r][t] += d[r][u] * xd * (float)(s - xs8);
                    }
                }
            }
            if (PF) {
#pragma unroll
                for (int u = 0; u < UU; u++)
#pragma unroll
                    for (int r = 0; r < RPW; r++) { v[r][u] = vn[r][u]; d[r][u] = dn[r][u]; }
            } else {
                q4_load<RPW, UU>(wq, wd, nb, nr, b0 + 32 * UU, v, d);
            }
        }
    }
    finish<NT, RPW>(acc, m.lane, m.row0, w.rows, y, ys, accum);
}

// ---- the other split types: one 32-weight sub-block (split.cuh's KSub) per
// lane-step, its int8 dot product against the q8 activations. ----
template <uint32_t TYPE, int NT, int NW, int RPW>
__global__ void __launch_bounds__(NW * 32) gemv_ksplit(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_trigger();
    RowMap<NW, RPW> m;
    float acc[RPW][NT];
#pragma unroll
    for (int r = 0; r < RPW; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    const int64_t nb = w.K / 32;
    const int nr = (int)min((int64_t)RPW, w.rows - m.row0);
    KSub<TYPE> v[RPW][U];
    auto load = [&](int64_t b0) {
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < RPW; r++)
                if (b0 + u * 32 < nb && r < nr) v[r][u].load(w, m.row0 + r, b0 + u * 32);
    };
    // the first weights are loaded before waiting for the activations
    if (nr > 0) load(m.lane);
    pdl_wait();
    if (nr > 0) {
        for (int64_t b0 = m.lane; b0 < nb; b0 += 32 * U) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t b = b0 + u * 32;
                if (b >= nb) break;
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const int4 *xa = (const int4 *)(xq.q + t * w.K + b * 32);
                    int4 a0 = __ldg(xa), a1 = __ldg(xa + 1);
                    float xd = __ldg(xq.d + t * nb + b);
                    int xs = KSub<TYPE>::uses_sum ? __ldg(xq.s + t * nb + b) : 0;
#pragma unroll
                    for (int r = 0; r < RPW; r++)
                        if (r < nr) acc[r][t] += v[r][u].dot(a0, a1, xd, xs);
                }
            }
            if (b0 + 32 * U < nb) load(b0 + 32 * U);
        }
    }
    finish<NT, RPW>(acc, m.lane, m.row0, w.rows, y, ys, accum);
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

template <uint32_t TYPE, int NT, int NW, int RPW>
__global__ void __launch_bounds__(NW * 32) gemv_float(th_cu_mat w, const float *x, int64_t xs, float *y, int64_t ys, bool accum) {
    gemv_enter();
    RowMap<NW, RPW> m;
    constexpr int V = TYPE == TH_F32 ? 2 : 1;  // 16-byte loads per 8 weights
    float acc[RPW][NT];
#pragma unroll
    for (int r = 0; r < RPW; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    const int nr = (int)min((int64_t)RPW, w.rows - m.row0);
    if (nr > 0) {
        const uint8_t *wr = (const uint8_t *)w.data + m.row0 * w.row_bytes;
        const bool vec = (w.K % 8) == 0 && (w.row_bytes % 16) == 0 && (xs % 4) == 0;
        if (vec) {
            const int64_t n8 = w.K / 8, rs = (int64_t)(w.row_bytes / 16);
            const uint4 *wp = (const uint4 *)wr;
            for (int64_t c0 = m.lane; c0 < n8; c0 += 32 * U) {
                uint4 v[RPW][U][V];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int64_t c = c0 + u * 32;
#pragma unroll
                    for (int r = 0; r < RPW; r++)
                        if (c < n8 && r < nr)
#pragma unroll
                            for (int k = 0; k < V; k++) v[r][u][k] = __ldg(wp + r * rs + c * V + k);
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int64_t c = c0 + u * 32;
                    if (c >= n8) break;
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        const float4 *xp = (const float4 *)(x + t * xs + c * 8);
                        float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
                        for (int r = 0; r < RPW; r++) {
                            if (r >= nr) break;
                            float f[8];
                            to8<TYPE>(v[r][u], f);
                            acc[r][t] += f[0] * a.x + f[1] * a.y + f[2] * a.z + f[3] * a.w + f[4] * b.x + f[5] * b.y + f[6] * b.z + f[7] * b.w;
                        }
                    }
                }
            }
        } else {
            for (int r = 0; r < nr; r++)
                for (int64_t i = m.lane; i < w.K; i += 32) {
                    float f = load1<TYPE>(wr + r * w.row_bytes, i);
#pragma unroll
                    for (int t = 0; t < NT; t++) acc[r][t] += f * x[t * xs + i];
                }
        }
    }
    finish<NT, RPW>(acc, m.lane, m.row0, w.rows, y, ys, accum);
}

// ---- any type: decode 32 weights per lane-step ----
template <int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_generic(th_cu_mat w, const float *x, int64_t xs, float *y, int64_t ys, bool accum) {
    gemv_enter();
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    float acc[1][NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[0][t] = 0.0f;
    for (int64_t g = lane; row < w.rows && g < w.K / 32; g += 32) {
        float f[32];
        dq32_mat(w, row, g, f);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float *xp = x + t * xs + g * 32;
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 32; j++) s += f[j] * xp[j];
            acc[0][t] += s;
        }
    }
    finish<NT, 1>(acc, lane, row, w.rows, y, ys, accum);
}

template <int NT, int NW, int RPW>
void launch_w(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys, bool accum,
              cudaStream_t st) {
    dim3 grid((unsigned)((w->rows + NW * RPW - 1) / (NW * RPW))), block(NW * 32);
    if (w->layout == TH_CU_SPLIT && xq) {
        if (w->type == TH_Q4_0) {
            launch_k(gemv_q4_0<NT, NW, RPW, false, 4>, grid, block, st, *w, *xq, y, ys, accum);
            return;
        }
        // the other split types: the shared int8 loop (gemv_q4_0 above is Q4_0's own)
        if (with_split_type(w->type, [&](auto t) {
                constexpr uint32_t T = decltype(t)::value;
                if constexpr (T != TH_Q4_0) launch_k(gemv_ksplit<T, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum);
            }))
            return;
    }
    switch (w->type) {
    case TH_F32: launch_k(gemv_float<TH_F32, NT, NW, RPW>, grid, block, st, *w, x, xs, y, ys, accum); return;
    case TH_F16: launch_k(gemv_float<TH_F16, NT, NW, RPW>, grid, block, st, *w, x, xs, y, ys, accum); return;
    case TH_BF16: launch_k(gemv_float<TH_BF16, NT, NW, RPW>, grid, block, st, *w, x, xs, y, ys, accum); return;
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
    // the block shape: 4 warps a block, a warp a row, except many-row Q4_0 / Q8_0
    // matrices: 2 rows a warp (H200, tg128, against a warp a row: 8B Q4_0 462 ->
    // 466 tok/s, Q8_0 336 -> 341, 135M Q4_0 1400 -> 1527; F16 and Q4_K were 2 %
    // slower with 2 rows). The other shapes measured (8 warps, software prefetch,
    // 8 loads in flight) are in bench/gpu/NOTES.md.
    bool many = w->rows >= 16LL * sm_count() && NT <= 4;
    bool two_rows = many && xq && (w->type == TH_Q4_0 || w->type == TH_Q8_0);
    if (two_rows) launch_w<NT, 4, 2>(w, x, xs, xq, y, ys, accum, st);
    else launch_w<NT, 4, 1>(w, x, xs, xq, y, ys, accum, st);
}

}  // namespace

extern "C" bool th_cu_gemv_wants_q8(const th_cu_mat *w) {
    return w->layout == TH_CU_SPLIT || th_cu_tern_type(w->type);   /* the ternary GEMV: gemv_tern.cu */
}

extern "C" void th_cu_gemv(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, int n, float *y,
                           int64_t ys, bool accum, cudaStream_t st) {
    if (w->layout == TH_CU_GGUF && th_cu_gemv_qn(w, x, xs, n, y, ys, accum, st)) return;
    if (th_cu_gemv_tern(w, xq, n, y, ys, accum, st)) return;   // 1-bit / ternary: dp4a on q8 (gemv_tern.cu)
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
