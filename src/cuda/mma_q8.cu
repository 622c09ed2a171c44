// mma_q8.cu — batched products on the int8 tensor cores: y[t][r] (+)= W[r] · x[t]
// for t < n (2..thousands of tokens) against q8 activations (th_cu_q8), the SPLIT
// weights (split.c) decoded to int8 in registers — no dequantized copy of the
// matrix. mma.sync m16n8k32 s8·s8→s32 per 32-weight sub-block (two m16n8k16 for
// the types with a scale per 16 weights), the integer result scaled in fp32 per
// sub-block as the GEMV's dp4a kernels do (split.cuh), so the result matches
// theirs to fp32 rounding.
//
// Block shape: a block owns 16 rows × 8·NT8 tokens; its NW warps split the
// sub-blocks of the rows (warp w takes b = w, w + NW, ...) and reduce through
// shared memory at the end. Blocks with the same rows and different token tiles
// are adjacent in the grid (blockIdx.x = token tile), so a batch larger than a
// tile re-reads the weights from L2, not DRAM.
//
// Fragment layouts (PTX ISA, mma.m16n8k32 .s8): lane = 4·g + q; A (16×32, row):
// a0 = row g k 4q..4q+3, a1 = row g+8 same k, a2 = row g k 16+4q.., a3 = row g+8;
// B (32×8, col): b0 = token g k 4q.., b1 = token g k 16+4q..; C: c0,c1 = row g
// tokens 2q, 2q+1; c2,c3 = row g+8. m16n8k16: a0, a1 and b0 as the k32 form's
// first halves.
#include "cuda/mma_q8.cuh"
#include <stdlib.h>

namespace {
using namespace mmaq8;


constexpr int U = 2;  // sub-blocks a warp loads ahead

// th_cu_mma_set_variant (measurements): 0 the default, the staged form (mma_q8s:
// activations through shared memory, contiguous sub-block ranges); bit 0 two row
// tiles a warp above 32 tokens; bit 3 (staged) stages of 4 sub-blocks instead of 2
// up to 32 tokens; bit 4 (staged) two row tiles a warp from 9 to 32 tokens (the
// activation fragments serve both); bit 2 the gathered form instead (mma_q8: every B fragment
// loaded from the token rows in global memory), with bit 1 contiguous ranges; bit 5
// the prompt-sized kernel (mma_q8g.cu) at every size, its tile pinned to 64 tokens
// with bit 0, to 128 with bit 1.
// H200 lab, Q8_0 8B matrices (bench/gpu/NOTES.md): staged 94.6 vs gathered 114.6 us
// for gate+up at 16 tokens, 215.6 vs 343.0 at 64.
int variant = 0;

// The products of sub-block b for one row tile (rows A: g, B: g+8) with NT8
// token tiles, scaled into acc.
template <uint32_t TYPE, int NT8>
__device__ __forceinline__ void tile_step(const MSub<TYPE> &A, const MSub<TYPE> &B, const uint32_t (&x0)[NT8],
                                          const uint32_t (&x1)[NT8], const float (&d0)[NT8], const float (&d1)[NT8],
                                          const float (&s0)[NT8], const float (&s1)[NT8], float (&acc)[NT8][4]) {
#pragma unroll
    for (int j = 0; j < NT8; j++) {
        int c[4], h[4] = { 0, 0, 0, 0 };
        if (MSub<TYPE>::HALVES) {
            mma_k16(c, A.lo, B.lo, x0[j]);
            mma_k16(h, A.hi, B.hi, x1[j]);
            acc[j][0] += d0[j] * (A.c0 * (float)c[0] + A.c1 * (float)h[0]);
            acc[j][1] += d1[j] * (A.c0 * (float)c[1] + A.c1 * (float)h[1]);
            acc[j][2] += d0[j] * (B.c0 * (float)c[2] + B.c1 * (float)h[2]);
            acc[j][3] += d1[j] * (B.c0 * (float)c[3] + B.c1 * (float)h[3]);
        } else {
            mma_k32(c, A.lo, B.lo, A.hi, B.hi, x0[j], x1[j]);
            if (KSub<TYPE>::uses_sum) {
                acc[j][0] += d0[j] * (A.c0 * (float)c[0] + A.off * s0[j]);
                acc[j][1] += d1[j] * (A.c0 * (float)c[1] + A.off * s1[j]);
                acc[j][2] += d0[j] * (B.c0 * (float)c[2] + B.off * s0[j]);
                acc[j][3] += d1[j] * (B.c0 * (float)c[3] + B.off * s1[j]);
            } else {
                acc[j][0] += d0[j] * (A.c0 * (float)c[0]);
                acc[j][1] += d1[j] * (A.c0 * (float)c[1]);
                acc[j][2] += d0[j] * (B.c0 * (float)c[2]);
                acc[j][3] += d1[j] * (B.c0 * (float)c[3]);
            }
        }
    }
}

// NW warps, MT row tiles of 16 (a warp owns all MT·16 rows of the block: the
// activation fragments serve MT tiles), NT8 tiles of 8 tokens. Shared memory:
// NW·MT·NT8·4·32 floats when NW > 1 (the split-K reduction).
template <uint32_t TYPE, int NW, int MT, int NT8>
__global__ void __launch_bounds__(NW * 32) mma_q8(th_cu_mat w, th_cu_q8 xq, int n, float *y, int64_t ys, bool accum,
                                                  bool contig) {
    pdl_trigger();
    extern __shared__ float red[];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int64_t r0 = (int64_t)blockIdx.y * 16 * MT;
    const int t0 = blockIdx.x * 8 * NT8;
    const int64_t nb = w.K / 32, K = w.K;
    int64_t ra[MT], rb[MT];  // clamped: loads stay inside the matrix
#pragma unroll
    for (int m = 0; m < MT; m++) {
        ra[m] = min(r0 + 16 * m + g, w.rows - 1);
        rb[m] = min(r0 + 16 * m + g + 8, w.rows - 1);
    }
    // the activation rows this lane reads: B fragments of token g, scales of tokens 2q, 2q+1
    int tb[NT8], tc0[NT8], tc1[NT8];
#pragma unroll
    for (int j = 0; j < NT8; j++) {
        tb[j] = min(t0 + 8 * j + g, n - 1);
        tc0[j] = min(t0 + 8 * j + 2 * q, n - 1);
        tc1[j] = min(t0 + 8 * j + 2 * q + 1, n - 1);
    }
    float acc[MT][NT8][4];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT8; j++) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.0f;
    // the sub-blocks of warp wid: every NW-th from wid, or (contig) a contiguous
    // range, so that the rest of a 32-byte sector or 128-byte line hits L1
    const int64_t span = (nb + NW - 1) / NW, stride = contig ? 1 : NW;
    const int64_t base = contig ? wid * span : wid, end = contig ? min(nb, base + span) : nb;
    MSub<TYPE> A[U][MT], B[U][MT];
#pragma unroll
    for (int u = 0; u < U; u++) {  // the first weights before waiting for the activations
        int64_t b = base + (int64_t)u * stride;
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (b < end) { A[u][m].load(w, ra[m], b, q); B[u][m].load(w, rb[m], b, q); }
    }
    pdl_wait();
    for (int64_t b0 = base; b0 < end; b0 += (int64_t)U * stride) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t b = b0 + (int64_t)u * stride;
            if (b >= end) break;
            uint32_t x0[NT8], x1[NT8];
            float d0[NT8], d1[NT8], s0[NT8], s1[NT8];
#pragma unroll
            for (int j = 0; j < NT8; j++) {
                const uint32_t *xp = (const uint32_t *)(xq.q + (int64_t)tb[j] * K + b * 32);
                x0[j] = __ldg(xp + q);
                x1[j] = __ldg(xp + 4 + q);
                d0[j] = __ldg(xq.d + (int64_t)tc0[j] * nb + b);
                d1[j] = __ldg(xq.d + (int64_t)tc1[j] * nb + b);
                s0[j] = KSub<TYPE>::uses_sum ? (float)__ldg(xq.s + (int64_t)tc0[j] * nb + b) : 0.0f;
                s1[j] = KSub<TYPE>::uses_sum ? (float)__ldg(xq.s + (int64_t)tc1[j] * nb + b) : 0.0f;
            }
#pragma unroll
            for (int m = 0; m < MT; m++) tile_step<TYPE, NT8>(A[u][m], B[u][m], x0, x1, d0, d1, s0, s1, acc[m]);
            const int64_t bn = b + (int64_t)U * stride;  // this slot's next sub-block
            if (bn < end)
#pragma unroll
                for (int m = 0; m < MT; m++) { A[u][m].load(w, ra[m], bn, q); B[u][m].load(w, rb[m], bn, q); }
        }
    }
    if (NW > 1) {  // split-K: warp 0 sums the other warps' partial tiles
        constexpr int V = MT * NT8 * 4;  // values a lane holds
        float *a = &acc[0][0][0];
        if (wid > 0)
#pragma unroll
            for (int i = 0; i < V; i++) red[(wid * V + i) * 32 + lane] = a[i];
        __syncthreads();
        if (wid > 0) return;
        for (int v = 1; v < NW; v++)
#pragma unroll
            for (int i = 0; i < V; i++) a[i] += red[(v * V + i) * 32 + lane];
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT8; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t r = r0 + 16 * m + g + (i >= 2 ? 8 : 0);
                const int t = t0 + 8 * j + 2 * q + (i & 1);
                if (r < w.rows && t < n) {
                    float *p = y + (int64_t)t * ys + r;
                    *p = accum ? *p + acc[m][j][i] : acc[m][j][i];
                }
            }
}

// ---- the staged form (the default; variant bit 2: off): activations through shared memory ----
// The same block shape, warps on contiguous sub-block ranges, but each warp
// copies its next SG sub-blocks of the block's tokens' q8 rows (and their
// scales) into a warp-private shared buffer with cp.async (16-byte pieces,
// coalesced, double-buffered) instead of gathering every B fragment with
// 4-byte loads from 8 token rows; the fragments are then conflict-free shared
// loads (row stride srow bytes: lane (g, q) hits bank 4g + q). Weights as above.
// SG sub-blocks a stage (2, or 4 with variant bit 3: deeper prefetch of weights and activations);
// a token's row of a stage is SG·32 bytes padded by 16 (SROW: conflict-free fragment loads)
template <int SG> __host__ __device__ constexpr int srow() { return SG * 32 + 16; }


// Bytes of one warp's stage buffer for NT tokens: x rows, then d[SG][NT], s[SG][NT].
template <int NT, int SG> __host__ __device__ constexpr int stage_bytes() { return NT * srow<SG>() + 2 * SG * NT * 4; }

// Stage sub-blocks b0 .. b0+SG-1 (those < end) of tokens t0 .. t0+NT-1 (clamped to n-1) into st.
template <uint32_t TYPE, int NT, int SG>
__device__ __forceinline__ void stage(uint8_t *st, const th_cu_q8 &xq, int64_t K, int64_t nb, int t0, int n, int64_t b0,
                                      int64_t end, int lane) {
    constexpr int PIECES = NT * SG * 2, SROW = srow<SG>();  // 16-byte pieces
#pragma unroll
    for (int i = lane; i < PIECES; i += 32) {
        const int t = i / (SG * 2), c = i % (SG * 2);
        const int64_t b = b0 + c / 2;
        if (b < end)
            cp16(st + t * SROW + c * 16, xq.q + (int64_t)min(t0 + t, n - 1) * K + b * 32 + (c & 1) * 16);
    }
    float *d = (float *)(st + NT * SROW);
    int32_t *sm = (int32_t *)(d + SG * NT);
#pragma unroll
    for (int i = lane; i < NT * SG; i += 32) {
        const int t = i / SG, u = i % SG;
        const int64_t b = b0 + u, row = (int64_t)min(t0 + t, n - 1) * nb;
        if (b < end) {
            cp4(d + u * NT + t, xq.d + row + b);
            if (KSub<TYPE>::uses_sum) cp4(sm + u * NT + t, xq.s + row + b);
        }
    }
}

template <uint32_t TYPE, int NW, int MT, int NT8, int SG>
__global__ void __launch_bounds__(NW * 32) mma_q8s(th_cu_mat w, th_cu_q8 xq, int n, float *y, int64_t ys, bool accum) {
    pdl_trigger();
    constexpr int NT = 8 * NT8, SB = stage_bytes<NT, SG>(), SROW = srow<SG>();
    extern __shared__ __align__(16) uint8_t smem[];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int64_t r0 = (int64_t)blockIdx.y * 16 * MT;
    const int t0 = blockIdx.x * NT;
    const int64_t nb = w.K / 32, K = w.K;
    int64_t ra[MT], rb[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        ra[m] = min(r0 + 16 * m + g, w.rows - 1);
        rb[m] = min(r0 + 16 * m + g + 8, w.rows - 1);
    }
    float acc[MT][NT8][4];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT8; j++) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.0f;
    const int64_t span = (nb + NW - 1) / NW, base = wid * span, end = min(nb, base + span);
    uint8_t *buf[2] = { smem + (size_t)wid * 2 * SB, smem + (size_t)wid * 2 * SB + SB };
    MSub<TYPE> A[SG][MT], B[SG][MT];
#pragma unroll
    for (int u = 0; u < SG; u++) {  // the first weights before waiting for the activations
        const int64_t b = base + u;
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (b < end) { A[u][m].load(w, ra[m], b, q); B[u][m].load(w, rb[m], b, q); }
    }
    pdl_wait();
    if (base < end) stage<TYPE, NT, SG>(buf[0], xq, K, nb, t0, n, base, end, lane);
    cp_commit();
    for (int64_t b0 = base, it = 0; b0 < end; b0 += SG, it++) {
        if (b0 + SG < end) stage<TYPE, NT, SG>(buf[(it + 1) & 1], xq, K, nb, t0, n, b0 + SG, end, lane);
        cp_commit();
        cp_wait<1>();  // this stage's copies (the next one may still be in flight)
        __syncwarp();
        const uint8_t *st = buf[it & 1];
        const float *sd = (const float *)(st + NT * SROW);
        const int32_t *ss = (const int32_t *)(sd + SG * NT);
#pragma unroll
        for (int u = 0; u < SG; u++) {
            const int64_t b = b0 + u;
            if (b >= end) break;
            uint32_t x0[NT8], x1[NT8];
            float d0[NT8], d1[NT8], s0[NT8], s1[NT8];
#pragma unroll
            for (int j = 0; j < NT8; j++) {
                const uint32_t *xp = (const uint32_t *)(st + (8 * j + g) * SROW + u * 32);
                x0[j] = xp[q];
                x1[j] = xp[4 + q];
                const float2 dd = *(const float2 *)(sd + u * NT + 8 * j + 2 * q);
                d0[j] = dd.x;
                d1[j] = dd.y;
                if (KSub<TYPE>::uses_sum) {
                    const int2 sv = *(const int2 *)(ss + u * NT + 8 * j + 2 * q);
                    s0[j] = (float)sv.x;
                    s1[j] = (float)sv.y;
                } else s0[j] = s1[j] = 0.0f;
            }
#pragma unroll
            for (int m = 0; m < MT; m++) tile_step<TYPE, NT8>(A[u][m], B[u][m], x0, x1, d0, d1, s0, s1, acc[m]);
            const int64_t bn = b + SG;
            if (bn < end)
#pragma unroll
                for (int m = 0; m < MT; m++) { A[u][m].load(w, ra[m], bn, q); B[u][m].load(w, rb[m], bn, q); }
        }
        __syncwarp();  // every lane is done with this buffer before the next stage overwrites it
    }
    cp_wait<0>();
    if (NW > 1) {  // split-K: warp 0 sums the other warps' partial tiles (the stage buffers reused)
        constexpr int V = MT * NT8 * 4;
        float *red = (float *)smem, *a = &acc[0][0][0];
        __syncthreads();
        if (wid > 0)
#pragma unroll
            for (int i = 0; i < V; i++) red[(wid * V + i) * 32 + lane] = a[i];
        __syncthreads();
        if (wid > 0) return;
        for (int v = 1; v < NW; v++)
#pragma unroll
            for (int i = 0; i < V; i++) a[i] += red[(v * V + i) * 32 + lane];
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT8; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t r = r0 + 16 * m + g + (i >= 2 ? 8 : 0);
                const int t = t0 + 8 * j + 2 * q + (i & 1);
                if (r < w.rows && t < n) {
                    float *p = y + (int64_t)t * ys + r;
                    *p = accum ? *p + acc[m][j][i] : acc[m][j][i];
                }
            }
}

template <uint32_t TYPE, int NW, int MT, int NT8, int SG = 2>
void launch_s(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, cudaStream_t st) {
    const int tile = 8 * NT8;
    dim3 grid((unsigned)((n + tile - 1) / tile), (unsigned)((w->rows + 16 * MT - 1) / (16 * MT))), block(NW * 32);
    const size_t stg = (size_t)NW * 2 * stage_bytes<8 * NT8, SG>(), red = NW > 1 ? (size_t)NW * MT * NT8 * 4 * 32 * 4 : 0;
    const size_t smem = stg > red ? stg : red;
    static bool attr_set = false;
    if (!attr_set && smem > 48 * 1024) {
        cudaFuncSetAttribute(mma_q8s<TYPE, NW, MT, NT8, SG>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        attr_set = true;
    }
    launch_ks(mma_q8s<TYPE, NW, MT, NT8, SG>, grid, block, smem, st, *w, *xq, n, y, ys, accum);
}

template <uint32_t TYPE, int NW, int MT, int NT8>
void launch_t(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, cudaStream_t st) {
    const int tile = 8 * NT8;
    dim3 grid((unsigned)((n + tile - 1) / tile), (unsigned)((w->rows + 16 * MT - 1) / (16 * MT))), block(NW * 32);
    size_t smem = NW > 1 ? (size_t)NW * MT * NT8 * 4 * 32 * sizeof(float) : 0;
    static bool attr_set = false;  // above 48 KiB of dynamic shared memory needs the opt-in
    if (!attr_set && smem > 48 * 1024) {
        cudaFuncSetAttribute(mma_q8<TYPE, NW, MT, NT8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        attr_set = true;
    }
    launch_ks(mma_q8<TYPE, NW, MT, NT8>, grid, block, smem, st, *w, *xq, n, y, ys, accum, (variant & 2) != 0);
}


// The token tile by batch size: the smallest of 8, 16, 32, 64 that holds n
// (larger batches run several 64-token tiles).
template <uint32_t TYPE>
void launch_n(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, cudaStream_t st) {
    if ((variant & 20) == 16) {  // staged activations, two row tiles a warp from 9 to 32 tokens too
        if (n <= 8) launch_s<TYPE, 8, 1, 1>(w, xq, n, y, ys, accum, st);
        else if (n <= 16) launch_s<TYPE, 8, 2, 2>(w, xq, n, y, ys, accum, st);
        else if (n <= 32) launch_s<TYPE, 8, 2, 4>(w, xq, n, y, ys, accum, st);
        else if (variant & 1) launch_s<TYPE, 4, 2, 8>(w, xq, n, y, ys, accum, st);
        else launch_s<TYPE, 8, 1, 8>(w, xq, n, y, ys, accum, st);
        return;
    }
    if ((variant & 12) == 8) {  // staged activations, 4 sub-blocks a stage up to 32 tokens
        if (n <= 8) launch_s<TYPE, 8, 1, 1, 4>(w, xq, n, y, ys, accum, st);
        else if (n <= 16) launch_s<TYPE, 8, 1, 2, 4>(w, xq, n, y, ys, accum, st);
        else if (n <= 32) launch_s<TYPE, 8, 1, 4, 4>(w, xq, n, y, ys, accum, st);
        else if (variant & 1) launch_s<TYPE, 4, 2, 8>(w, xq, n, y, ys, accum, st);
        else launch_s<TYPE, 8, 1, 8>(w, xq, n, y, ys, accum, st);
        return;
    }
    if (variant == 0 && n <= 16) {  // the default up to 16 tokens, per type from the H200 lab (NOTES.md):
        // Q8_0 two row tiles a warp (gate+up at 16 tokens 80.3 vs 93.6 us), the others 4-sub-block
        // stages (Q4_0 gate+up 80.7 vs 87.7, down 39.3 vs 58.3)
        if (TYPE == TH_Q8_0) {
            if (n <= 8) launch_s<TYPE, 8, 1, 1>(w, xq, n, y, ys, accum, st);
            else launch_s<TYPE, 8, 2, 2>(w, xq, n, y, ys, accum, st);
        } else if (n <= 8) launch_s<TYPE, 8, 1, 1, 4>(w, xq, n, y, ys, accum, st);
        else launch_s<TYPE, 8, 1, 2, 4>(w, xq, n, y, ys, accum, st);
        return;
    }
    if (!(variant & 4)) {  // staged activations (the default)
        if (n <= 8) launch_s<TYPE, 8, 1, 1>(w, xq, n, y, ys, accum, st);
        else if (n <= 16) launch_s<TYPE, 8, 1, 2>(w, xq, n, y, ys, accum, st);
        else if (n <= 32) launch_s<TYPE, 8, 1, 4>(w, xq, n, y, ys, accum, st);
        else if (variant & 1) launch_s<TYPE, 4, 2, 8>(w, xq, n, y, ys, accum, st);
        else launch_s<TYPE, 8, 1, 8>(w, xq, n, y, ys, accum, st);
        return;
    }
    if (n <= 8) launch_t<TYPE, 8, 1, 1>(w, xq, n, y, ys, accum, st);
    else if (n <= 16) launch_t<TYPE, 8, 1, 2>(w, xq, n, y, ys, accum, st);
    else if (n <= 32) launch_t<TYPE, 8, 1, 4>(w, xq, n, y, ys, accum, st);
    else if (variant & 1) launch_t<TYPE, 4, 2, 8>(w, xq, n, y, ys, accum, st);
    else launch_t<TYPE, 8, 1, 8>(w, xq, n, y, ys, accum, st);
}

}  // namespace

extern "C" void th_cu_mma_set_variant(int v) { variant = v; }

extern "C" bool th_cu_mma_q8_supports(const th_cu_mat *w) {
    if (w->layout != TH_CU_SPLIT || w->K % 32 || cc_major() < 8) return false;
    bool yes = false;
    with_split_type(w->type, [&](auto t) { yes = has_msub<decltype(t)::value>(); });
    return yes;
}

extern "C" bool th_cu_mma_q8(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum,
                             cudaStream_t st) {
    if (n <= 0 || !th_cu_mma_q8_supports(w)) return false;
    if (variant & 128) return th_cu_mma_q8n(w, xq, n, y, ys, accum, (variant >> 8) & 15, st);  /* the narrow form only (false where it does not apply) */
    if (variant == 0 && n <= TH_CU_MMA_NARROW_MAX && th_cu_mma_q8n(w, xq, n, y, ys, accum, 0, st)) return true;
    if ((variant == 0 && n >= TH_CU_MMA_PROMPT_MIN) || (variant & 32)) {  /* prompt-sized: mma_q8g.cu */
        th_cu_mma_q8g(w, xq, n, y, ys, accum, variant & 32 ? (variant & 1 ? 64 : variant & 2 ? 128 : 0) : 0, st);
        return true;
    }
    with_split_type(w->type, [&](auto t) {
        constexpr uint32_t T = decltype(t)::value;
        if constexpr (has_msub<T>()) launch_n<T>(w, xq, n, y, ys, accum, st);
    });
    return true;
}
