// moe.cu — the kernels of the mixture-of-experts FFN (host side: gpu_moe.c).
// Owns the routing, the per-pair GEMV and the weighted sum, all reading the expert
// choice from device memory, so that the GEMV path (decode, small batches) can be
// captured in a CUDA graph whole:
//   moe_route   one warp per token: router logits → probabilities → top-k
//               (selection bias, group limit) → weights; the arithmetic and
//               choice of th_moe_route (src/moe.c): the softmax's sum over the
//               warp, top-k by k warp-wide argmax rounds (ties to the lower id).
//   moe_gemv_q8 a split-layout expert matrix on q8 activations, one kernel per
//               type: a warp owns 4 consecutive rows of the selected expert (rows
//               e·R .. e·R+R−1 of a stacked matrix) for one (token-slot) pair and
//               loads all of its lane's sub-blocks of them before the first
//               int8 product (split.cuh's KSub, as the dense GEMV);
//   moe_gemv    any other matrix, one warp per (output row, pair), on fp32
//               activations with weights decoded by dq32_mat; both add the
//               expert's bias when there is one (after the dot product, as the
//               CPU's th_fwd_add_bias).
//   moe_order   the pairs grouped by expert (one block, counting sort), an order
//               both GEMVs may walk their pairs in so that a shared expert's rows
//               come from L2 after the first pair (tuning.moe_order_min), and the
//               hit experts as segments of it for
//   moe_gemv_q8_grouped  moe_gemv_q8 over the hit experts: a warp's weight loads
//               serve 4 of the expert's pairs (tuning.moe_group_min);
//   moe_sum     out[t] = Σ_j w[t][j] · y[t·k+j] in selection order, each product
//               rounded before the add (as the CPU: dst = src·w, then o += dst);
//               on the grouped path pair p's y row is row[p] (segment order).
// and, for the grouped (GEMM) path of large batches (host side gpu_moe.c, the
// expert GEMMs th_cu_gemm_experts in gemm.cu), the pair rows in segment order:
//   moe_gather  each row's token activations into a contiguous buffer;
//   moe_bias    each row's expert bias, added to its GEMM output.
#include "cuda/split.cuh"

namespace {

// th_op_softmax (src/cpu/ops.c) by one warp over shared memory: max, exp(x − max)
// (−inf → 0), the sum in double, × 1/sum (the sum's order differs from the serial
// one only below float precision).
__device__ void softmax_warp(float *x, int n, int lane) {
    float mx = -INFINITY;
    for (int i = lane; i < n; i += 32) mx = x[i] > mx ? x[i] : mx;
    mx = warp_max(mx);
    double sum = 0.0;
    for (int i = lane; i < n; i += 32) {
        const float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        x[i] = e;
        sum += e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int i = lane; i < n; i += 32) x[i] *= inv;
    __syncwarp();
}

// th_op_softmax over a few values, serially (one thread).
__device__ void softmax_serial(float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

// limit_groups (src/moe.c): experts outside the topk_group best groups (a group
// scores the sum of its two best) get −inf.
__device__ void limit_groups_serial(const th_cu_router &r, float *score) {
    float gs[256];  // n_group <= 256 (checked at upload)
    int per = r.n_expert / r.n_group;
    for (int g = 0; g < r.n_group; g++) {
        float b1 = -INFINITY, b2 = -INFINITY;
        for (int e = g * per; e < (g + 1) * per; e++) {
            if (score[e] > b1) { b2 = b1; b1 = score[e]; }
            else if (score[e] > b2) b2 = score[e];
        }
        gs[g] = per > 1 ? b1 + b2 : b1;
    }
    for (int kept = 0; kept < r.topk_group; kept++) {
        int best = -1;
        for (int g = 0; g < r.n_group; g++)
            if (gs[g] != INFINITY && (best < 0 || gs[g] > gs[best])) best = g;
        if (best >= 0) gs[best] = INFINITY;
    }
    for (int g = 0; g < r.n_group; g++)
        if (gs[g] != INFINITY)
            for (int e = g * per; e < (g + 1) * per; e++) score[e] = -INFINITY;
}

constexpr int MAX_K = 64;  // experts a token uses (gpu_upload.c refuses more)

// The best untaken expert of the scores (the larger score; ties, -inf ones too,
// to the lower id — th_moe_route's partial selection sort), over one warp.
__device__ int best_untaken(const float *sc, const unsigned char *taken, int X, int lane) {
    float bv = -INFINITY;
    int bi = -1;
    for (int e = lane; e < X; e += 32)
        if (!taken[e] && (bi < 0 || sc[e] > bv)) { bv = sc[e]; bi = e; }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) { bv = ov; bi = oi; }
    }
    return bi;
}

// One warp (a block) per token: probabilities p and selection scores sc in shared
// memory, top-k by k warp-wide argmax rounds, then lane 0 finishes the k weights
// exactly as th_moe_route does (softmax over the picked logits, renormalisation, scale).
__global__ void __launch_bounds__(32) moe_route(const float *logits, int n, th_cu_router r, int32_t *sel, float *w) {
    pdl_begin();
    __shared__ float p[TH_CU_MAX_EXPERTS], sc[TH_CU_MAX_EXPERTS];
    __shared__ unsigned char taken[TH_CU_MAX_EXPERTS];
    const int t = blockIdx.x, lane = threadIdx.x, X = r.n_expert, k = r.k;
    const float *lg = logits + (int64_t)t * X;
    for (int e = lane; e < X; e += 32) { p[e] = lg[e]; taken[e] = 0; }
    __syncwarp();
    if (r.gating == 0) softmax_warp(p, X, lane);
    else if (r.gating == 1) for (int e = lane; e < X; e += 32) p[e] = 1.0f / (1.0f + expf(-p[e]));
    for (int e = lane; e < X; e += 32) sc[e] = p[e] + (r.sel_bias ? r.sel_bias[e] : 0.0f);
    __syncwarp();
    if (r.n_group > 1) {
        if (lane == 0) limit_groups_serial(r, sc);
        __syncwarp();
    }
    // the picks in shared memory (lane 0's serial tail would otherwise be a chain
    // of global read-modify-writes), written out at the end by the lanes
    __shared__ int32_t s_sel[MAX_K];
    __shared__ float s_w[MAX_K];
    for (int j = 0; j < k; j++) {
        const int b = best_untaken(sc, taken, X, lane);
        if (lane == 0) { s_sel[j] = b; s_w[j] = p[b]; taken[b] = 1; }
        __syncwarp();
    }
    if (lane == 0) {
        if (r.gating == 2) softmax_serial(s_w, k);
        if (r.norm) {
            double sum = 0;
            for (int j = 0; j < k; j++) sum += s_w[j];
            float d = (float)sum;
            for (int j = 0; j < k; j++) s_w[j] /= d;
        }
        if (r.scale != 1.0f)
            for (int j = 0; j < k; j++) s_w[j] *= r.scale;
    }
    __syncwarp();
    for (int j = lane; j < k; j += 32) {
        sel[(int64_t)t * k + j] = s_sel[j];
        w[(int64_t)t * k + j] = s_w[j];
    }
}

// Row r of w · fp32 input row `row`, summed over the warp (every lane gets the sum).
__device__ float row_dot(const th_cu_mat &w, int64_t r, const float *x, int64_t row, int64_t xs, int lane) {
    const int64_t K = w.K;
    const float *xr = x + row * xs;
    float acc = 0.0f;
    if (K % 32 == 0) {
        for (int64_t g = lane; g < K / 32; g += 32) {
            float f[32];
            dq32_mat(w, r, g, f);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 32; j++) s += f[j] * xr[g * 32 + j];
            acc += s;
        }
    } else {  // float types only (the block types have K % 32 == 0)
        const uint8_t *p = (const uint8_t *)w.data + (size_t)r * w.row_bytes;
        for (int64_t i = lane; i < K; i += 32) {
            float v = w.type == TH_F32 ? ((const float *)p)[i]
                    : w.type == TH_F16 ? h2f(((const uint16_t *)p)[i]) : bf2f(((const uint16_t *)p)[i]);
            acc += v * xr[i];
        }
    }
    return warp_sum(acc);
}

constexpr int MOE_WARPS = 4;

// y[p][o] = W(o) of expert sel[p] · x[p / x_div] (+ its bias), o < rpe: w0/b0, o >= rpe: w1/b1;
// fp32 activations (weights without a split layout, or no q8 input). slot (per-expert
// types, docs/precision.md): expert e's rows are block slot[e] of the matrix, and a
// pair whose slot is −1 is left alone (another part's launch writes it); NULL: e.
__global__ void __launch_bounds__(MOE_WARPS * 32) moe_gemv(th_cu_mat w0, th_cu_mat w1, const float *b0,
                                                           const float *b1, bool two, int64_t rpe, const int32_t *slot,
                                                           const int32_t *sel, int n_pairs, const int32_t *order,
                                                           int x_div, const float *x, int64_t xs, float *y, int64_t ys) {
    pdl_begin();
    const int lane = threadIdx.x & 31;
    const int64_t out_rows = two ? 2 * rpe : rpe;
    const int64_t o = (int64_t)blockIdx.x * MOE_WARPS + (threadIdx.x >> 5);
    if (o >= out_rows) return;
    for (int yi = blockIdx.y; yi < n_pairs; yi += gridDim.y) {
        const int p = order ? order[yi] : yi;
        const int64_t e = sel[p], we = slot ? (int64_t)slot[e] : e;
        if (we < 0) continue;
        const bool second = o >= rpe;
        const th_cu_mat &w = second ? w1 : w0;
        const int64_t oo = second ? o - rpe : o;
        float v = row_dot(w, we * rpe + oo, x, p / x_div, xs, lane);
        const float *b = second ? b1 : b0;
        if (b) v += b[e * rpe + oo];
        if (lane == 0) y[(int64_t)p * ys + o] = v;
    }
}

// The int8 expert GEMV, one kernel per split type (moe_gemv holds every type's
// loop, and with several sub-blocks in flight there it ran slower: NOTES.md).
// A warp owns RPW consecutive rows of one matrix and loads UU lane-steps of
// all of them before the first product, so that a row of up to UU·32
// sub-blocks is one round trip and the grid is a few warps an SM, not waves
// of one-row warps each waiting on its own chain.
template <uint32_t TYPE, int RPW, int UU>
__global__ void __launch_bounds__(MOE_WARPS * 32) moe_gemv_q8(th_cu_mat w0, th_cu_mat w1, const float *b0,
                                                              const float *b1, bool two, int64_t rpe,
                                                              const int32_t *slot, const int32_t *sel, int n_pairs,
                                                              const int32_t *order, int x_div, th_cu_q8 xq, float *y,
                                                              int64_t ys) {
    pdl_begin();
    const int lane = threadIdx.x & 31;
    const int64_t out_rows = two ? 2 * rpe : rpe;
    const int64_t o0 = ((int64_t)blockIdx.x * MOE_WARPS + (threadIdx.x >> 5)) * RPW;
    if (o0 >= out_rows) return;
    const bool second = o0 >= rpe;  // rpe % RPW == 0: a warp's rows are in one matrix
    const th_cu_mat &w = second ? w1 : w0;
    const float *bias = second ? b1 : b0;
    const int nr = (int)min((int64_t)RPW, out_rows - o0);
    const int64_t nb = w.K / 32;
    for (int yi = blockIdx.y; yi < n_pairs; yi += gridDim.y) {
        const int p = order ? order[yi] : yi;
        const int64_t e = sel[p], we = slot ? (int64_t)slot[e] : e;
        if (we < 0) continue;  // another part's expert (slot, as moe_gemv)
        const int64_t oo = second ? o0 - rpe : o0, r0 = we * rpe + oo, br0 = e * rpe + oo, row = p / x_div;
        float acc[RPW];
#pragma unroll
        for (int i = 0; i < RPW; i++) acc[i] = 0.0f;
        for (int64_t b0 = lane; b0 < nb; b0 += 32 * UU) {
            KSub<TYPE> s[RPW][UU];
#pragma unroll
            for (int u = 0; u < UU; u++)
#pragma unroll
                for (int i = 0; i < RPW; i++)
                    if (b0 + 32 * u < nb && i < nr) s[i][u].load(w, r0 + i, b0 + 32 * u);
#pragma unroll
            for (int u = 0; u < UU; u++) {
                const int64_t b = b0 + 32 * u;
                if (b >= nb) break;
                const int4 *xa = (const int4 *)(xq.q + row * w.K + b * 32);
                const int4 a0 = __ldg(xa), a1 = __ldg(xa + 1);
                const float xd = __ldg(xq.d + row * nb + b);
                const int xs = KSub<TYPE>::uses_sum ? __ldg(xq.s + row * nb + b) : 0;
#pragma unroll
                for (int i = 0; i < RPW; i++)
                    if (i < nr) acc[i] += s[i][u].dot(a0, a1, xd, xs);
            }
        }
#pragma unroll
        for (int i = 0; i < RPW; i++) acc[i] = warp_sum(acc[i]);
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < RPW; i++)
                if (i < nr) y[(int64_t)p * ys + o0 + i] = acc[i] + (bias ? bias[br0 + i] : 0.0f);
    }
}

// moe_gemv_q8 for pairs grouped by expert (th_cu_moe_order's segments): grid.y
// walks the hit experts (slot sl: expert seg.ex[sl], its pairs order[off .. off+cnt)),
// and a warp loads its rows' weights once for TT of the expert's pairs instead of
// once a pair. Each pair's sum takes the same products in the same order as in
// moe_gemv_q8, so y is bit for bit the per-pair kernel's.
template <uint32_t TYPE, int RPW, int UU, int TT>
__global__ void __launch_bounds__(MOE_WARPS * 32) moe_gemv_q8_grouped(th_cu_mat w0, th_cu_mat w1, const float *b0,
                                                                      const float *b1, bool two, int64_t rpe,
                                                                      const int32_t *slot, const int32_t *order,
                                                                      const int32_t *seg, int n_slots, int x_div,
                                                                      th_cu_q8 xq, float *y, int64_t ys) {
    pdl_begin();
    const int lane = threadIdx.x & 31;
    const int64_t out_rows = two ? 2 * rpe : rpe;
    const int64_t o0 = ((int64_t)blockIdx.x * MOE_WARPS + (threadIdx.x >> 5)) * RPW;
    if (o0 >= out_rows) return;
    const bool second = o0 >= rpe;  // rpe % RPW == 0: a warp's rows are in one matrix
    const th_cu_mat &w = second ? w1 : w0;
    const float *bias = second ? b1 : b0;
    const int nr = (int)min((int64_t)RPW, out_rows - o0);
    const int64_t nb = w.K / 32, oo = second ? o0 - rpe : o0;
    const int n_hit = seg[0];
    for (int sl = blockIdx.y; sl < n_hit; sl += gridDim.y) {
        const int64_t e = seg[1 + sl], we = slot ? (int64_t)slot[e] : e;
        if (we < 0) continue;  // another part's expert (slot, as moe_gemv_q8)
        const int off = seg[1 + n_slots + sl], cnt = seg[1 + 2 * n_slots + sl];
        const int64_t r0 = we * rpe + oo, br0 = e * rpe + oo;
        for (int c0 = 0; c0 < cnt; c0 += TT) {
            int p[TT];
            int64_t row[TT];
#pragma unroll
            for (int t = 0; t < TT; t++) {
                p[t] = c0 + t < cnt ? order[off + c0 + t] : -1;
                row[t] = p[t] >= 0 ? p[t] / x_div : 0;
            }
            float acc[RPW][TT];
#pragma unroll
            for (int i = 0; i < RPW; i++)
#pragma unroll
                for (int t = 0; t < TT; t++) acc[i][t] = 0.0f;
            for (int64_t b0 = lane; b0 < nb; b0 += 32 * UU) {
                KSub<TYPE> s[RPW][UU];
#pragma unroll
                for (int u = 0; u < UU; u++)
#pragma unroll
                    for (int i = 0; i < RPW; i++)
                        if (b0 + 32 * u < nb && i < nr) s[i][u].load(w, r0 + i, b0 + 32 * u);
#pragma unroll
                for (int u = 0; u < UU; u++) {
                    const int64_t b = b0 + 32 * u;
                    if (b >= nb) break;
#pragma unroll
                    for (int t = 0; t < TT; t++) {
                        if (p[t] < 0) break;  // the chunk's pairs come first
                        const int4 *xa = (const int4 *)(xq.q + row[t] * w.K + b * 32);
                        const int4 a0 = __ldg(xa), a1 = __ldg(xa + 1);
                        const float xd = __ldg(xq.d + row[t] * nb + b);
                        const int xs = KSub<TYPE>::uses_sum ? __ldg(xq.s + row[t] * nb + b) : 0;
#pragma unroll
                        for (int i = 0; i < RPW; i++)
                            if (i < nr) acc[i][t] += s[i][u].dot(a0, a1, xd, xs);
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < TT; t++)
#pragma unroll
                for (int i = 0; i < RPW; i++) acc[i][t] = warp_sum(acc[i][t]);
            if (lane == 0)
#pragma unroll
                for (int t = 0; t < TT; t++)
                    if (p[t] >= 0)
#pragma unroll
                        for (int i = 0; i < RPW; i++)
                            if (i < nr) y[(int64_t)p[t] * ys + o0 + i] = acc[i][t] + (bias ? bias[br0 + i] : 0.0f);
        }
    }
}

// The y row of pair p: row[p] on the grouped path, p on the GEMV path.
__device__ __forceinline__ int64_t pair_row(const int32_t *row, int64_t p) { return row ? (int64_t)row[p] : p; }

__global__ void moe_sum(const float *y, int64_t ys, const float *w, int k, int64_t E, const int32_t *row, float *out,
                        int64_t os) {
    pdl_begin();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (i >= E) return;
    float acc = __fmul_rn(y[pair_row(row, t * k) * ys + i], w[t * k]);
    for (int j = 1; j < k; j++) acc = __fadd_rn(acc, __fmul_rn(y[pair_row(row, t * k + j) * ys + i], w[t * k + j]));
    out[t * os + i] = acc;
}

// x[i] = h[token of pair list[i]], one thread per column, rows strided over grid.y.
__global__ void moe_gather(const float *h, int64_t hs, const int32_t *list, int k, int rows, int64_t E, float *x,
                           int64_t xs) {
    pdl_begin();
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= E) return;
    for (int i = blockIdx.y; i < rows; i += gridDim.y) x[(int64_t)i * xs + c] = h[(int64_t)(list[i] / k) * hs + c];
}

// y[i][c] += the bias of row i's expert (sel of its pair), c < rpe.
__global__ void moe_bias(float *y, int64_t ys, const float *b, int64_t rpe, const int32_t *list, const int32_t *sel,
                         int rows) {
    pdl_begin();
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= rpe) return;
    for (int i = blockIdx.y; i < rows; i += gridDim.y) y[(int64_t)i * ys + c] += b[(int64_t)sel[list[i]] * rpe + c];
}

// Exclusive prefix sum of v over the block (ORDER_THREADS threads); total: the sum of all.
__device__ int block_scan(int v, int *warp_base, int &total) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    int inc = v;  // inclusive over the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += u;
    }
    __syncthreads();  // warp_base is free (a previous scan has read it)
    if (lane == 31) warp_base[wid] = inc;
    __syncthreads();
    if (wid == 0) {
        const int mine = warp_base[lane];
        int t = mine;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int u = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += u;
        }
        warp_base[lane] = t - mine;
        if (lane == 31) warp_base[32] = t;
    }
    __syncthreads();
    total = warp_base[32];
    return warp_base[wid] + inc - v;
}

// The pairs grouped by expert for the GEMV path: order[i] (i < n_pairs) lists the
// pairs of expert 0, then of expert 1, ... (within an expert in no fixed order:
// a pair's products do not depend on it). The per-pair GEMVs walk their grid's y
// index through it, so that the blocks of the pairs sharing an expert run close
// together and all but the first of them find its rows in L2. With seg, also the
// hit experts as segments of order for moe_gemv_q8_grouped: seg[0] their number,
// then n_slots expert ids, n_slots first places, n_slots counts (ids increasing).
// One block: counts per expert in shared memory, prefix sums, each pair's place.
constexpr int ORDER_THREADS = 1024;  // 32 warps: the warp totals' scan is one warp
__global__ void __launch_bounds__(ORDER_THREADS) moe_order(const int32_t *sel, int n_pairs, int X, int32_t *order,
                                                           int32_t *seg, int n_slots) {
    pdl_begin();
    __shared__ int at[TH_CU_MAX_EXPERTS];  // counts, then each expert's next place
    __shared__ int warp_base[ORDER_THREADS / 32 + 1];
    const int tid = threadIdx.x;
    for (int e = tid; e < X; e += ORDER_THREADS) at[e] = 0;
    __syncthreads();
    // an id outside [0, X) (never from moe_route) is counted as expert 0, so order stays a permutation
    auto expert = [&](int p) { const int e = sel[p]; return e >= 0 && e < X ? e : 0; };
    for (int p = tid; p < n_pairs; p += ORDER_THREADS) atomicAdd(&at[expert(p)], 1);
    __syncthreads();
    const int per = (X + ORDER_THREADS - 1) / ORDER_THREADS, e0 = min(X, tid * per), e1 = min(X, e0 + per);
    int run = 0, hits = 0;  // this thread's experts' pairs, and how many of them are hit
    for (int e = e0; e < e1; e++) {
        run += at[e];
        hits += at[e] > 0;
    }
    int total, n_hit;
    int next = block_scan(run, warp_base, total), h = block_scan(hits, warp_base, n_hit);
    for (int e = e0; e < e1; e++) {
        const int c = at[e];
        at[e] = next;
        if (seg && c) {
            seg[1 + h] = e;
            seg[1 + n_slots + h] = next;
            seg[1 + 2 * n_slots + h] = c;
            h++;
        }
        next += c;
    }
    if (seg && tid == 0) seg[0] = n_hit;
    __syncthreads();
    for (int p = tid; p < n_pairs; p += ORDER_THREADS) order[atomicAdd(&at[expert(p)], 1)] = p;
}

}  // namespace

extern "C" void th_cu_moe_route(const float *logits, int n, const th_cu_router *r, int32_t *sel, float *w,
                                cudaStream_t st) {
    if (n <= 0 || r->n_expert > TH_CU_MAX_EXPERTS) return;  // the upload refuses more experts
    launch_k(moe_route, dim3((unsigned)n), dim3(32), st, logits, n, *r, sel, w);
}

extern "C" void th_cu_moe_order(const int32_t *sel, int n_pairs, int n_expert, const th_cu_moe_walk *walk,
                                cudaStream_t st) {
    if (n_pairs <= 0 || n_expert <= 0 || n_expert > TH_CU_MAX_EXPERTS) return;  // the upload refuses more experts
    launch_k(moe_order, dim3(1), dim3(ORDER_THREADS), st, sel, n_pairs, n_expert, walk->order, walk->seg,
             walk->n_slots);
}

// A grid's y size for `rows` rows (pairs) of a kernel that strides over gridDim.y.
static unsigned grid_rows(int rows) { return (unsigned)(rows < 65535 ? rows : 65535); }

// moe_gemv_q8 of w0's type over w0 (and w1, of the same type, when not NULL):
// 4 rows a warp (1 when rpe is not a multiple of 4), lane-steps for the row length.
// With walk->seg, the grouped kernel (grid.y over the hit experts, 4 of a expert's pairs a weight load).
constexpr int GROUP_TT = 4;
template <int RPW, int UU>
static void launch_moe_q8_as(const th_cu_mat *w0, const th_cu_mat *w1, const float *b0, const float *b1, int64_t rpe,
                             const int32_t *slot, const int32_t *sel, int n_pairs, const th_cu_moe_walk *walk,
                             int x_div, const th_cu_q8 *xq, float *y, int64_t ys, cudaStream_t st) {
    const bool two = w1 != nullptr, grouped = walk && walk->seg;
    const int64_t per_block = MOE_WARPS * RPW;
    dim3 grid((unsigned)(((two ? 2 : 1) * rpe + per_block - 1) / per_block),
              grid_rows(grouped ? walk->n_slots : n_pairs));
    with_split_type(w0->type, [&](auto t) {  // every split type (th_cu_gemv_wants_q8)
        if (grouped)
            launch_k(moe_gemv_q8_grouped<decltype(t)::value, RPW, UU, GROUP_TT>, grid, dim3(MOE_WARPS * 32), st, *w0,
                     two ? *w1 : *w0, b0, two ? b1 : nullptr, two, rpe, slot, walk->order, walk->seg, walk->n_slots,
                     x_div, *xq, y, ys);
        else
            launch_k(moe_gemv_q8<decltype(t)::value, RPW, UU>, grid, dim3(MOE_WARPS * 32), st, *w0, two ? *w1 : *w0,
                     b0, two ? b1 : nullptr, two, rpe, slot, sel, n_pairs, walk ? walk->order : nullptr, x_div, *xq,
                     y, ys);
    });
}

static void launch_moe_q8(const th_cu_mat *w0, const th_cu_mat *w1, const float *b0, const float *b1, int64_t rpe,
                          const int32_t *slot, const int32_t *sel, int n_pairs, const th_cu_moe_walk *walk,
                          int x_div, const th_cu_q8 *xq, float *y, int64_t ys, cudaStream_t st) {
    const int64_t steps = (w0->K / 32 + 31) / 32;  // lane-steps a row
    if (rpe % 4) launch_moe_q8_as<1, 4>(w0, w1, b0, b1, rpe, slot, sel, n_pairs, walk, x_div, xq, y, ys, st);
    else if (steps <= 1) launch_moe_q8_as<4, 1>(w0, w1, b0, b1, rpe, slot, sel, n_pairs, walk, x_div, xq, y, ys, st);
    else if (steps <= 2) launch_moe_q8_as<4, 2>(w0, w1, b0, b1, rpe, slot, sel, n_pairs, walk, x_div, xq, y, ys, st);
    else launch_moe_q8_as<4, 4>(w0, w1, b0, b1, rpe, slot, sel, n_pairs, walk, x_div, xq, y, ys, st);
}

static void moe_gemv_any(const th_cu_mat *w0, const th_cu_mat *w1, const float *b0, const float *b1, int64_t rpe,
                         const int32_t *slot, const int32_t *sel, int n_pairs, const th_cu_moe_walk *walk, int x_div,
                         const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys, cudaStream_t st) {
    if (n_pairs <= 0 || rpe <= 0) return;
    bool two = w1 != nullptr;
    int64_t out_rows = two ? 2 * rpe : rpe;
    dim3 block(MOE_WARPS * 32);
    /* the int8 expert kernels read the split layout (the 1-bit / ternary types want q8 for the dense GEMV only) */
    if (!xq || w0->layout != TH_CU_SPLIT || (two && w1->layout != TH_CU_SPLIT)) {
        dim3 grid((unsigned)((out_rows + MOE_WARPS - 1) / MOE_WARPS), grid_rows(n_pairs));
        launch_k(moe_gemv, grid, block, st, *w0, two ? *w1 : *w0, b0, two ? b1 : nullptr, two, rpe, slot, sel, n_pairs,
                 walk ? walk->order : nullptr, x_div, x, xs, y, ys);  // fp32: the order, never grouped
        return;
    }
    // int8 products: one launch for both matrices when they share a type, else one each
    bool both = two && w1->type == w0->type;
    launch_moe_q8(w0, both ? w1 : nullptr, b0, both ? b1 : nullptr, rpe, slot, sel, n_pairs, walk, x_div, xq, y, ys, st);
    if (two && !both) launch_moe_q8(w1, nullptr, b1, nullptr, rpe, slot, sel, n_pairs, walk, x_div, xq, y + rpe, ys, st);
}

extern "C" void th_cu_moe_gemv(const th_cu_mat *w0, const th_cu_mat *w1, const float *b0, const float *b1,
                               int64_t rpe, const int32_t *sel, int n_pairs, const th_cu_moe_walk *walk, int x_div,
                               const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys, cudaStream_t st) {
    moe_gemv_any(w0, w1, b0, b1, rpe, nullptr, sel, n_pairs, walk, x_div, x, xs, xq, y, ys, st);
}

extern "C" void th_cu_moe_gemv_part(const th_cu_mat *w, const int32_t *slot, const float *b, int64_t rpe,
                                    const int32_t *sel, int n_pairs, const th_cu_moe_walk *walk, int x_div,
                                    const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys,
                                    cudaStream_t st) {
    moe_gemv_any(w, nullptr, b, nullptr, rpe, slot, sel, n_pairs, walk, x_div, x, xs, xq, y, ys, st);
}

extern "C" void th_cu_moe_sum(const float *y, int64_t ys, const float *w, int k, int n, int64_t E, const int32_t *row,
                              float *out, int64_t os, cudaStream_t st) {
    if (n <= 0) return;
    launch_k(moe_sum, dim3((unsigned)((E + 127) / 128), (unsigned)n), dim3(128), st, y, ys, w, k, E, row, out, os);
}

static dim3 rows_grid(int64_t width, int rows) {
    return dim3((unsigned)((width + 127) / 128), grid_rows(rows));
}

extern "C" void th_cu_moe_gather(const float *h, int64_t hs, const int32_t *list, int k, int rows, int64_t E, float *x,
                                 int64_t xs, cudaStream_t st) {
    if (rows <= 0 || E <= 0) return;
    launch_k(moe_gather, rows_grid(E, rows), dim3(128), st, h, hs, list, k, rows, E, x, xs);
}

extern "C" void th_cu_moe_bias(float *y, int64_t ys, const float *b, int64_t rpe, const int32_t *list,
                               const int32_t *sel, int rows, cudaStream_t st) {
    if (rows <= 0 || rpe <= 0) return;
    launch_k(moe_bias, rows_grid(rpe, rows), dim3(128), st, y, ys, b, rpe, list, sel, rows);
}
