// mma_f16.cu — batched products of F16 / BF16 weights (GGUF layout, in place) on
// the 16-bit tensor cores: y[t][r] (+)= W[r] · x[t] for t < n, the fp32
// activations rounded to the weights' type as they are loaded (no converted
// copy), fp32 accumulation (mma.sync m16n8k16 .f32.f16 / .bf16). The same block
// shape as mma_q8.cu: 16 rows × 8·NT8 tokens a block, NW warps splitting the row
// into 32-wide chunks, a shared-memory reduction at the end.
//
// A lane (g = lane / 4, q = lane % 4) loads 8 consecutive weights of chunk c
// (k = 32c + 8q .. +7) for rows g and g+8, and the same 8 activations of token g.
// A dot product does not depend on the order of k, so the first MMA takes
// weights 8q..8q+3 as its k-slots {2q, 2q+1, 2q+8, 2q+9} and the second 8q+4..
// 8q+7 — weights and activations in the same slots (fragment layouts as in the
// PTX ISA's m16n8k16: a0 row g k 2q..2q+1, a1 row g+8, a2 row g k 2q+8.., a3 row
// g+8; b0 token g k 2q.., b1 k 2q+8..; c0,c1 row g tokens 2q, 2q+1; c2,c3 row g+8).
#include "cuda/common.cuh"

namespace {

template <bool BF>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
    if (BF) {
        __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        return *(uint32_t *)&h;
    }
    __half2 h = __floats2half2_rn(a, b);
    return *(uint32_t *)&h;
}

template <bool BF>
__device__ __forceinline__ void mma16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                      uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (BF)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

constexpr int U = 2;  // chunks a warp loads ahead

template <bool BF, int NW, int NT8>
__global__ void __launch_bounds__(NW * 32) mma_f16(th_cu_mat w, const float *x, int64_t xs, int n, float *y, int64_t ys,
                                                   bool accum) {
    pdl_trigger();
    extern __shared__ float red[];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int64_t r0 = (int64_t)blockIdx.y * 16;
    const int t0 = blockIdx.x * 8 * NT8;
    const int64_t nc = w.K / 32, rs = (int64_t)(w.row_bytes / 16);  // chunks a row, 16-byte steps a row
    const int64_t ra = min(r0 + g, w.rows - 1), rb = min(r0 + g + 8, w.rows - 1);
    const uint4 *pa = (const uint4 *)w.data + ra * rs + q, *pb = (const uint4 *)w.data + rb * rs + q;
    float acc[NT8][4];
#pragma unroll
    for (int j = 0; j < NT8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    uint4 A[U], B[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        int64_t c = wid + (int64_t)u * NW;
        if (c < nc) { A[u] = __ldg(pa + 4 * c); B[u] = __ldg(pb + 4 * c); }
    }
    pdl_wait();
    for (int64_t c0 = wid; c0 < nc; c0 += (int64_t)U * NW) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t c = c0 + (int64_t)u * NW;
            if (c >= nc) break;
#pragma unroll
            for (int j = 0; j < NT8; j++) {
                const int tb = min(t0 + 8 * j + g, n - 1);
                const float4 *xp = (const float4 *)(x + (int64_t)tb * xs + c * 32 + 8 * q);
                const float4 v0 = __ldg(xp), v1 = __ldg(xp + 1);
                mma16<BF>(acc[j], A[u].x, B[u].x, A[u].y, B[u].y, pack2<BF>(v0.x, v0.y), pack2<BF>(v0.z, v0.w));
                mma16<BF>(acc[j], A[u].z, B[u].z, A[u].w, B[u].w, pack2<BF>(v1.x, v1.y), pack2<BF>(v1.z, v1.w));
            }
            const int64_t cn = c + (int64_t)U * NW;
            if (cn < nc) { A[u] = __ldg(pa + 4 * cn); B[u] = __ldg(pb + 4 * cn); }
        }
    }
    if (NW > 1) {  // split-K: warp 0 sums the other warps' partial tiles
        if (wid > 0)
#pragma unroll
            for (int j = 0; j < NT8; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) red[((wid * NT8 + j) * 4 + i) * 32 + lane] = acc[j][i];
        __syncthreads();
        if (wid > 0) return;
        for (int v = 1; v < NW; v++)
#pragma unroll
            for (int j = 0; j < NT8; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[j][i] += red[((v * NT8 + j) * 4 + i) * 32 + lane];
    }
#pragma unroll
    for (int j = 0; j < NT8; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int64_t r = r0 + g + (i >= 2 ? 8 : 0);
            const int t = t0 + 8 * j + 2 * q + (i & 1);
            if (r < w.rows && t < n) {
                float *p = y + (int64_t)t * ys + r;
                *p = accum ? *p + acc[j][i] : acc[j][i];
            }
        }
}

template <bool BF, int NW, int NT8>
void launch_t(const th_cu_mat *w, const float *x, int64_t xs, int n, float *y, int64_t ys, bool accum, cudaStream_t st) {
    const int tile = 8 * NT8;
    launch_ks(mma_f16<BF, NW, NT8>, dim3((unsigned)((n + tile - 1) / tile), (unsigned)((w->rows + 15) / 16)),
              dim3(NW * 32), NW > 1 ? (size_t)NW * NT8 * 4 * 32 * sizeof(float) : 0, st, *w, x, xs, n, y, ys, accum);
}

template <bool BF>
void launch_n(const th_cu_mat *w, const float *x, int64_t xs, int n, float *y, int64_t ys, bool accum, cudaStream_t st) {
    if (n <= 8) launch_t<BF, 8, 1>(w, x, xs, n, y, ys, accum, st);
    else if (n <= 16) launch_t<BF, 8, 2>(w, x, xs, n, y, ys, accum, st);
    else if (n <= 32) launch_t<BF, 8, 4>(w, x, xs, n, y, ys, accum, st);
    else launch_t<BF, 8, 8>(w, x, xs, n, y, ys, accum, st);
}

}  // namespace

extern "C" bool th_cu_mma_f16_supports(const th_cu_mat *w, int64_t xs) {
    int dev = 0, major = 0;
    static int ok = -1;
    if (ok < 0) {
        cudaGetDevice(&dev);
        ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 8;
    }
    return ok == 1 && w->layout == TH_CU_GGUF && (w->type == TH_F16 || w->type == TH_BF16) && w->K % 32 == 0 &&
           w->row_bytes % 16 == 0 && xs % 4 == 0;
}

extern "C" bool th_cu_mma_f16(const th_cu_mat *w, const float *x, int64_t xs, int n, float *y, int64_t ys, bool accum,
                              cudaStream_t st) {
    if (n <= 0 || ((uintptr_t)x & 15) || !th_cu_mma_f16_supports(w, xs)) return false;
    if (w->type == TH_BF16) launch_n<true>(w, x, xs, n, y, ys, accum, st);
    else launch_n<false>(w, x, xs, n, y, ys, accum, st);
    return true;
}
