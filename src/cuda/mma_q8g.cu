// mma_q8g.cu — prompt-sized products on the int8 tensor cores: y[t][r] (+)= W[r] · x[t]
// for batches of ~100 tokens and more, against q8 activations (th_cu_q8), the SPLIT
// weights decoded to int8 once per block into shared memory — no fp16 copy of the
// matrix (the cuBLAS path's dequantize round trip) and the numerics of the GEMV and
// of the small-batch MMA kernel (mma_q8.cu): a row's 32-weight sub-block times a q8
// activation block in exact integer arithmetic, scaled in fp32.
//
// Block: 128 weight rows × BN tokens (64 or 128), 8 warps as 4 (rows, 32 each) × 2
// (tokens, BN/2 each), one block a multiprocessor (capping 64-token blocks at 128
// registers for two a multiprocessor spilled and ran slower: attn-out Q4_0 at 128
// tokens 84 vs 65 us). A stage holds 4 sub-blocks (128 weights of k) of both
// operands in shared memory, double-buffered: the activations arrive by cp.async,
// the weights through registers (MSub::load decodes them while the previous stage
// computes). Fragments come from shared memory by ldmatrix (rows padded to 144
// bytes: the eight 16-byte rows of a fragment fall on distinct banks).
//
// The integer result of each mma enters the fp32 sums without an int→float
// conversion instruction: the accumulator input is 0x4B400000, so the output's bit
// pattern is the float 12582912 + c, exact for |c| < 2^22 (a k32 product of int8s
// is at most 32·128·128 = 2^19); one fp32 subtraction recovers c. The row scale ×
// token scale product, the subtraction and the fused multiply-add are the fp32 work
// per result.
#include "cuda/mma_q8.cuh"

namespace {
using namespace mmaq8;

constexpr int BM = 128;               // weight rows a block
constexpr int KS = 4;                 // sub-blocks of 32 weights a stage
constexpr int ROWB = KS * 32 + 16;    // a row's bytes in a stage, padded (conflict-free ldmatrix)
constexpr int THREADS = 256;
constexpr int ITEMS = BM * KS / THREADS;  // (row, sub-block) pairs a thread decodes a stage, all four lane quarters
constexpr uint32_t MAGIC = 0x4B400000u;       // the float 12582912.0f: 1.5·2^23
constexpr float MAGIC_F = 12582912.0f;

// Types whose weight has an additive term (w = d·q + m: the product needs the
// activation block's integer sum) after Q4_0's and Q5_0's constant offsets are
// folded into the codes.
template <uint32_t TYPE> __host__ __device__ constexpr bool has_min() {
    return TYPE == TH_Q4_1 || TYPE == TH_Q5_1 || TYPE == TH_Q4_K || TYPE == TH_Q5_K;
}
template <uint32_t TYPE> __host__ __device__ constexpr uint32_t fold_bias() {  // per-byte code offset folded in, 0: none
    return TYPE == TH_Q4_0 ? 0x08080808u : TYPE == TH_Q5_0 ? 0x10101010u : 0u;
}

template <int BN> struct Stage {
    uint8_t w[BM * ROWB];  // int8 codes, row-major, k contiguous
    uint8_t x[BN * ROWB];  // q8 activations, token-major
    float wc0[BM][KS];     // row scale of each sub-block (first 16 weights when HALVES)
    float wc1[BM][KS];     // HALVES: the second 16 weights' scale
    float wm[BM][KS];      // has_min: the additive term's scale
    float xd[KS][BN];      // activation block scales
    int32_t xs[KS][BN];    // has_min: activation block integer sums
};

// c = a·b + MAGIC (see the file comment), k32 and k16 shapes. Not volatile: an mma
// has no side effect, so the compiler may issue later ones before this one's
// epilogue (volatile asm keeps program order, and the epilogue's first FADD would
// wait out the mma's latency).
__device__ __forceinline__ void mma32_biased(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(MAGIC));
#endif
}
__device__ __forceinline__ void mma16_biased(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(MAGIC));
#endif
}
__device__ __forceinline__ float unbias(int c) { return __int_as_float(c) - MAGIC_F; }

// The weights of stage s for this thread's ITEMS (row, sub-block) pairs, into
// registers: row tid/4 (+64), sub-block tid%4, so the four lane quarters of a pair
// share one address computation and a warp reads 8 rows' 64 contiguous bytes. No
// branch around a load (rows and sub-blocks past the end are clamped; compute skips
// them): a load under a condition is decoded inside it, and each load would wait out
// the previous one's memory latency (seen in the SASS: a round trip per decode).
template <uint32_t TYPE>
__device__ __forceinline__ void load_w(MSub<TYPE> (&m)[ITEMS][4], const th_cu_mat &w, int64_t r0, int64_t nb, int s,
                                       int tid) {
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        const int it = tid + THREADS * j, sub = it & (KS - 1), row = it / KS;
        const int64_t r = min(r0 + row, w.rows - 1), b = min((int64_t)s * KS + sub, nb - 1);
#pragma unroll
        for (int q = 0; q < 4; q++) m[j][q].load(w, r, b, q);
    }
}

template <uint32_t TYPE, int BN>
__device__ __forceinline__ void store_w(Stage<BN> &st, MSub<TYPE> (&m)[ITEMS][4], int tid) {
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        const int it = tid + THREADS * j, sub = it & (KS - 1), row = it / KS;
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            lo[q] = m[j][q].lo;
            hi[q] = m[j][q].hi;
            if (fold_bias<TYPE>()) { lo[q] = __vsub4(lo[q], fold_bias<TYPE>()); hi[q] = __vsub4(hi[q], fold_bias<TYPE>()); }
        }
        uint4 *p = (uint4 *)(st.w + row * ROWB + sub * 32);  // 16-byte aligned: ROWB and 32 are multiples of 16
        p[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        p[1] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        st.wc0[row][sub] = m[j][0].c0;
        if (MSub<TYPE>::HALVES) st.wc1[row][sub] = m[j][0].c1;
        if (has_min<TYPE>()) st.wm[row][sub] = m[j][0].off;
    }
}

// The activations of stage s (tokens t0.., clamped to n-1) by cp.async.
template <uint32_t TYPE, int BN>
__device__ __forceinline__ void load_x(Stage<BN> &st, const th_cu_q8 &xq, int64_t K, int64_t nb, int t0, int n, int s,
                                       int tid) {
    static_assert(BN * KS * 2 % THREADS == 0 && BN * KS % THREADS == 0, "whole trips");
#pragma unroll
    for (int j = 0; j < BN * KS * 2 / THREADS; j++) {
        const int i = tid + THREADS * j, t = i / (KS * 2), c = i % (KS * 2);
        const int64_t b = (int64_t)s * KS + c / 2;
        if (b < nb) cp16(st.x + t * ROWB + c * 16, xq.q + (int64_t)min(t0 + t, n - 1) * K + b * 32 + (c & 1) * 16);
    }
#pragma unroll
    for (int j = 0; j < BN * KS / THREADS; j++) {
        const int i = tid + THREADS * j, sub = i / BN, t = i % BN;
        const int64_t b = (int64_t)s * KS + sub, row = (int64_t)min(t0 + t, n - 1) * nb;
        if (b < nb) {
            cp4(&st.xd[sub][t], xq.d + row + b);
            if (has_min<TYPE>()) cp4(&st.xs[sub][t], xq.s + row + b);
        }
    }
}

// This warp's products of stage s into acc: rows wr.. (2 tiles of 16), tokens wt..
// (NT tiles of 8).
template <uint32_t TYPE, int BN, int NT>
__device__ __forceinline__ void compute(const Stage<BN> &st, int64_t nb, int s, int wr, int wt, int lane,
                                        float (&acc)[2][NT][4]) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int sub = 0; sub < KS; sub++) {
        if ((int64_t)s * KS + sub >= nb) break;
        uint32_t a[2][4], bf[NT][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
            ldsm_x4(a[mt], st.w + (wr + mt * 16 + (lane & 15)) * ROWB + sub * 32 + (lane >> 4) * 16);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t r[4];
            ldsm_x4(r, st.x + (wt + np * 16 + (lane & 7) + 8 * (lane >> 4)) * ROWB + sub * 32 + ((lane >> 3) & 1) * 16);
            bf[2 * np][0] = r[0];
            bf[2 * np][1] = r[1];
            bf[2 * np + 1][0] = r[2];
            bf[2 * np + 1][1] = r[3];
        }
        float c0[2][2], c1[2][2], mn[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = wr + mt * 16 + g + 8 * h;
                c0[mt][h] = st.wc0[row][sub];
                c1[mt][h] = MSub<TYPE>::HALVES ? st.wc1[row][sub] : 0.0f;
                mn[mt][h] = has_min<TYPE>() ? st.wm[row][sub] : 0.0f;
            }
        float dt[NT][2], ds[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const float2 d = *(const float2 *)&st.xd[sub][wt + nt * 8 + 2 * q];
            dt[nt][0] = d.x;
            dt[nt][1] = d.y;
            ds[nt][0] = ds[nt][1] = 0.0f;
            if (has_min<TYPE>()) {
                const int2 sm = *(const int2 *)&st.xs[sub][wt + nt * 8 + 2 * q];
                ds[nt][0] = d.x * (float)sm.x;
                ds[nt][1] = d.y * (float)sm.y;
            }
        }
        // a row tile's NT products first, then their epilogue (the mma latency is
        // covered by the later mmas instead of stalling the first FADD)
#pragma unroll
        for (int mt = 0; mt < 2; mt++) {
            int c[NT][4], h[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                if (MSub<TYPE>::HALVES) {
                    mma16_biased(c[nt], a[mt][0], a[mt][1], bf[nt][0]);
                    mma16_biased(h[nt], a[mt][2], a[mt][3], bf[nt][1]);
                } else {
                    mma32_biased(c[nt], a[mt], bf[nt][0], bf[nt][1]);
                }
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int rh = i >> 1, tk = i & 1;
                    if (MSub<TYPE>::HALVES) {
                        const float v = c0[mt][rh] * unbias(c[nt][i]) + c1[mt][rh] * unbias(h[nt][i]);
                        acc[mt][nt][i] = fmaf(dt[nt][tk], v, acc[mt][nt][i]);
                    } else {
                        acc[mt][nt][i] = fmaf(c0[mt][rh] * dt[nt][tk], unbias(c[nt][i]), acc[mt][nt][i]);
                        if (has_min<TYPE>()) acc[mt][nt][i] = fmaf(mn[mt][rh], ds[nt][tk], acc[mt][nt][i]);
                    }
                }
        }
    }
}

template <uint32_t TYPE, int BN>
__global__ void __launch_bounds__(THREADS, 1) mma_q8g(th_cu_mat w, th_cu_q8 xq, int n, float *y, int64_t ys,
                                                      bool accum) {
    pdl_trigger();
    constexpr int NT = BN / 16;  // token tiles of 8 a warp
    extern __shared__ __align__(16) uint8_t smem[];
    Stage<BN> *buf = (Stage<BN> *)smem;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int wr = (wid & 3) * 32, wt = (wid >> 2) * (BN / 2);
    const int64_t r0 = (int64_t)blockIdx.y * BM, nb = w.K / 32;
    const int t0 = blockIdx.x * BN, stages = (int)((nb + KS - 1) / KS);
    float acc[2][NT][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
    MSub<TYPE> m[ITEMS][4];
    load_w<TYPE>(m, w, r0, nb, 0, tid);  // the weights do not depend on the previous kernel
    pdl_wait();
    load_x<TYPE, BN>(buf[0], xq, w.K, nb, t0, n, 0, tid);
    cp_commit();
    store_w<TYPE, BN>(buf[0], m, tid);
    cp_wait<0>();
    __syncthreads();
    for (int s = 0; s < stages; s++) {
        Stage<BN> &cur = buf[s & 1], &next = buf[(s + 1) & 1];
        const bool more = s + 1 < stages;
        if (more) {
            load_w<TYPE>(m, w, r0, nb, s + 1, tid);
            load_x<TYPE, BN>(next, xq, w.K, nb, t0, n, s + 1, tid);
        }
        cp_commit();
        compute<TYPE, BN, NT>(cur, nb, s, wr, wt, lane, acc);
        if (more) store_w<TYPE, BN>(next, m, tid);
        cp_wait<0>();
        __syncthreads();
    }
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t r = r0 + wr + mt * 16 + g + 8 * (i >> 1);
                const int t = t0 + wt + nt * 8 + 2 * q + (i & 1);
                if (r < w.rows && t < n) {
                    float *p = y + (int64_t)t * ys + r;
                    *p = accum ? *p + acc[mt][nt][i] : acc[mt][nt][i];
                }
            }
}

template <uint32_t TYPE, int BN>
void launch(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, cudaStream_t st) {
    dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((w->rows + BM - 1) / BM)), block(THREADS);
    const size_t smem = 2 * sizeof(Stage<BN>);
    static bool attr_set = false;  // above 48 KiB of dynamic shared memory needs the opt-in
    if (!attr_set) {
        cudaFuncSetAttribute(mma_q8g<TYPE, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        attr_set = true;
    }
    launch_ks(mma_q8g<TYPE, BN>, grid, block, smem, st, *w, *xq, n, y, ys, accum);
}

// The waves of a grid of `blocks`, one block a multiprocessor.
long waves(long blocks) { return (blocks + sm_count() - 1) / sm_count(); }

}  // namespace

// The tile with the shorter estimated time: waves × a block's time, a 64-token
// block taking 0.68 of a 128-token one (H200 lab, Q4_0 attn-out: 65 vs 95 us), so
// 64 where the grid of 128s would leave the last wave emptier or pad many tokens.
extern "C" void th_cu_mma_q8g(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum,
                              int tile, cudaStream_t st) {
    const long rt = (long)((w->rows + BM - 1) / BM);
    const bool wide = tile ? tile == 128 : (double)waves(rt * ((n + 127) / 128)) <= 0.68 * (double)waves(rt * ((n + 63) / 64));
    with_split_type(w->type, [&](auto t) {
        constexpr uint32_t T = decltype(t)::value;
        if constexpr (has_msub<T>()) {
            if (wide) launch<T, 128>(w, xq, n, y, ys, accum, st);
            else launch<T, 64>(w, xq, n, y, ys, accum, st);
        }
    });
}
