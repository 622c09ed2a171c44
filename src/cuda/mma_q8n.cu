// mma_q8n.cu — int8 tensor-core products for narrow batches (2..32 tokens, the
// batched-decode range): y[t][r] (+)= W[r]·x[t] against q8 activations, Q4_0,
// Q8_0 and Q4_K SPLIT weights (split.c). The other int8 kernels (mma_q8.cu) put 16 weight
// rows in the MMA's A operand and reload the tokens' activations for every 16
// rows; here the weights are the B operand (8 rows a fragment) and 16 tokens the
// A operand, so a block of 128 rows reads each activation once, and both operands
// reach shared memory by cp.async (16-byte pieces, a ring of NS stages) and the
// fragments by ldmatrix: the weight stream keeps many bytes in flight without
// registers. Rows too few to fill the machine split K over a cluster of up to 8
// blocks (sm_90) that sum their partial tiles through distributed shared memory
// in a fixed order — deterministic, no workspace, no second launch.
//
// mma.sync m16n8k32 .s8 (PTX ISA): lane = 4·g + q; A (16 tokens × 32, row):
// a0 token g k 4q..4q+3, a1 token g+8, a2 token g k 16+4q.., a3 token g+8;
// B (32 × 8 rows, col): b0 row g k 4q.., b1 row g k 16+4q..; C: c0, c1 token g
// rows 2q, 2q+1; c2, c3 token g+8. ldmatrix (8×8 b16, row addresses from lanes
// 8j..8j+7 for matrix j) gives lane (g, q) bytes 4q..4q+3 of row g: for a 16-byte
// Q4_0 sub-block row that is word q, whose low nibbles are b0 and high nibbles b1.
// Each product is one sub-block, scaled in fp32 (weight scale × token scale) as
// the GEMV does, so the result matches it to fp32 rounding.
#include "cuda/mma_q8.cuh"
#include <cooperative_groups.h>
#include <stdint.h>

namespace {
namespace cg = cooperative_groups;
using namespace mmaq8;

constexpr int NW = 4;                     // warps a block
constexpr int RG = 4;                     // row groups of 8 a warp
constexpr int ROWS = NW * RG * 8;         // rows a block: 128
constexpr int SG = 4;                     // sub-blocks (32 weights) a stage
constexpr int NS = 3;                     // stages in the ring
constexpr int AROW = SG * 32 + 16;        // a token's bytes in a stage, padded: conflict-free ldmatrix
constexpr int MAX_SPLIT = 8;              // blocks of a cluster (portable limit)

// Per type: QB code bytes a sub-block row; SCB scale bytes a row a stage (Q4_0 / Q8_0: the 4
// sub-blocks' f16 d; Q4_K: its super-block's f16 d and dmin, then the 4 sub-blocks' 6-bit
// scales and mins, one byte each, as split.c unpacks them).
template <uint32_t TYPE> struct Narrow;
template <> struct Narrow<TH_Q4_0> { static constexpr int QB = 16, SCB = 8; };
template <> struct Narrow<TH_Q8_0> { static constexpr int QB = 32, SCB = 8; };
template <> struct Narrow<TH_Q4_K> { static constexpr int QB = 16, SCB = 12; };

template <uint32_t TYPE> __host__ __device__ constexpr int wrow() { return SG * Narrow<TYPE>::QB + 16; }
// One warp's weights in a stage: RG·8 rows of codes, then their scales (SCB bytes a row).
template <uint32_t TYPE> __host__ __device__ constexpr int wbytes() { return RG * 8 * (wrow<TYPE>() + Narrow<TYPE>::SCB); }
// One stage: MT·16 token rows, their scales d[t][SG] and sums s[t][SG], then NW warps' weights.
template <uint32_t TYPE, int MT> __host__ __device__ constexpr int stage_bytes() {
    return MT * 16 * (AROW + 2 * SG * 4) + NW * wbytes<TYPE>();
}

__device__ __forceinline__ void cp8(void *dst, const void *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(smem_u32(dst)), "l"(src));
#endif
}

// Exact int → float for |v| < 2^22 by the 1.5·2^23 bias: two full-rate ops instead of an I2F.
__device__ __forceinline__ float small_int_to_float(int biased) { return __int_as_float(biased) - 12582912.0f; }
constexpr int BIAS = 0x4B400000;

// This warp's weights of sub-blocks b .. b+SG-1 for rows r0 .. r0+RG·8-1 (clamped) into wst.
template <uint32_t TYPE>
__device__ __forceinline__ void stage_weights(uint8_t *wst, const th_cu_mat &w, int64_t r0, int64_t b, int lane) {
    constexpr int QB = Narrow<TYPE>::QB, PER_ROW = SG * QB / 16, WROW = wrow<TYPE>();
    const int64_t rowq = QB == 16 ? w.K / 2 : w.K, nb = w.K / 32;
#pragma unroll
    for (int i = lane; i < RG * 8 * PER_ROW; i += 32) {
        const int r = i / PER_ROW, c = i % PER_ROW;
        const int64_t row = min(r0 + r, w.rows - 1);
        cp16(wst + r * WROW + c * 16, (const uint8_t *)w.data + row * rowq + b * QB + c * 16);
    }
    uint8_t *sc = wst + RG * 8 * WROW;
#pragma unroll
    for (int r = lane; r < RG * 8; r += 32) {
        const int64_t row = min(r0 + r, w.rows - 1);
        if (TYPE == TH_Q4_K) {  // the 20-byte record of super-block b/8: d, dmin, sc[8], m[8]; this stage's half
            const uint8_t *rec = (const uint8_t *)w.scales + (row * (w.K / 256) + (b >> 3)) * 20;
            const int half = (int)((b >> 2) & 1);
            cp4(sc + r * 12, rec);
            cp4(sc + r * 12 + 4, rec + 4 + 4 * half);
            cp4(sc + r * 12 + 8, rec + 12 + 4 * half);
        } else {
            cp8(sc + r * 8, (const __half *)w.scales + row * nb + b);
        }
    }
}

// The block's activations of sub-blocks b .. b+SG-1 for tokens t0 .. t0+MT·16-1 (clamped to n−1).
template <int MT>
__device__ __forceinline__ void stage_acts(uint8_t *st, const th_cu_q8 &xq, int64_t K, int t0, int n, int64_t b) {
    constexpr int NT = MT * 16, PIECES = NT * SG * 2;
    const int64_t nb = K / 32;
    for (int i = threadIdx.x; i < PIECES + 2 * NT; i += NW * 32) {
        if (i < PIECES) {
            const int t = i / (SG * 2), c = i % (SG * 2);
            cp16(st + t * AROW + c * 16, xq.q + (int64_t)min(t0 + t, n - 1) * K + b * 32 + c * 16);
        } else {  // d[t][SG] then s[t][SG]: one 16-byte piece a token each
            const int j = i - PIECES, t = j % NT;
            const int64_t off = (int64_t)min(t0 + t, n - 1) * nb + b;
            uint8_t *dst = st + NT * AROW + (j < NT ? 0 : NT * SG * 4) + t * SG * 4;
            cp16(dst, j < NT ? (const void *)(xq.d + off) : (const void *)(xq.s + off));
        }
    }
}

__device__ __forceinline__ void mma_k32_c(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int ca, int cb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%11,%11};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(ca), "r"(cb));
#endif
}

// The products of one stage for this warp: acc[mt][rg][i] as C's layout (tokens
// mt·16 + g (+8), rows rg·8 + 2q (+1)). The MMA's C input carries the int → float
// bias (and Q4_0's −8·sum), so a result is bias + integer product. (Skipping the
// epilogue of tokens 8..15 for batches of at most 8 was slower: H200 lab, 8B Q4_0
// down at 8 tokens 36.8 us against 23.5 with it, 2026-12-04.)
template <uint32_t TYPE, int MT>
__device__ __forceinline__ void stage_mma(const uint8_t *st, const uint8_t *wst, int lane, float (&acc)[MT][RG][4]) {
    constexpr int NT = MT * 16, WROW = wrow<TYPE>(), BW = SG * Narrow<TYPE>::QB / 16;
    const int g = lane >> 2, q = lane & 3, lr = lane & 7, lm = lane >> 3;  // lane l addresses row l & 7 of matrix l >> 3
    const float *sd = (const float *)(st + NT * AROW);
    const int *ss = (const int *)(sd + NT * SG);
    float4 da[MT], db[MT];  // token scales of tokens g and g+8, per sub-block
    int4 oa[MT], ob[MT];    // C inputs: BIAS − 8·sum (Q4_0), or BIAS
    float4 xsa[MT], xsb[MT];  // Q4_K: token scale × integer sum (the mins' term)
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        da[mt] = *(const float4 *)(sd + (mt * 16 + g) * SG);
        db[mt] = *(const float4 *)(sd + (mt * 16 + g + 8) * SG);
        if (TYPE == TH_Q4_0) {
            const int4 sa = *(const int4 *)(ss + (mt * 16 + g) * SG);
            const int4 sb = *(const int4 *)(ss + (mt * 16 + g + 8) * SG);
            oa[mt] = make_int4(BIAS - 8 * sa.x, BIAS - 8 * sa.y, BIAS - 8 * sa.z, BIAS - 8 * sa.w);
            ob[mt] = make_int4(BIAS - 8 * sb.x, BIAS - 8 * sb.y, BIAS - 8 * sb.z, BIAS - 8 * sb.w);
        } else {
            oa[mt] = ob[mt] = make_int4(BIAS, BIAS, BIAS, BIAS);
        }
        if (TYPE == TH_Q4_K) {
            const int4 sa = *(const int4 *)(ss + (mt * 16 + g) * SG), sb = *(const int4 *)(ss + (mt * 16 + g + 8) * SG);
            xsa[mt] = make_float4(da[mt].x * (float)sa.x, da[mt].y * (float)sa.y, da[mt].z * (float)sa.z, da[mt].w * (float)sa.w);
            xsb[mt] = make_float4(db[mt].x * (float)sb.x, db[mt].y * (float)sb.y, db[mt].z * (float)sb.z, db[mt].w * (float)sb.w);
        }
    }
    // B for every row group first (more loads in flight before the first MMA): Q4_0 word q of
    // sub-blocks 0..3 of row rg·8 + g (one ldmatrix); Q8_0 bytes 4q.. of the 16-byte halves of
    // sub-blocks 0, 0, 1, 1 and 2, 2, 3, 3 (two); and the 4 scales of rows rg·8 + 2q, + 1
    constexpr int SCB = Narrow<TYPE>::SCB, SW = SCB / 4;
    const uint8_t *sc = wst + RG * 8 * WROW;
    uint32_t wv[RG][BW];
    uint32_t h0[RG][SW], h1[RG][SW];  // the scale words of rows rg·8 + 2q and + 1
#pragma unroll
    for (int rg = 0; rg < RG; rg++) {
#pragma unroll
        for (int h = 0; h < BW / 4; h++) ldsm_x4(&wv[rg][4 * h], wst + (rg * 8 + lr) * WROW + h * 64 + lm * 16);
#pragma unroll
        for (int k = 0; k < SW; k++) {
            h0[rg][k] = *(const uint32_t *)(sc + (rg * 8 + 2 * q) * SCB + 4 * k);
            h1[rg][k] = *(const uint32_t *)(sc + (rg * 8 + 2 * q + 1) * SCB + 4 * k);
        }
    }
#pragma unroll
    for (int u = 0; u < SG; u++) {
        uint32_t a[MT][4];  // matrices: tokens 0-7 / 8-15 × bytes 0-15 / 16-31 of sub-block u
#pragma unroll
        for (int mt = 0; mt < MT; mt++) ldsm_x4(a[mt], st + (mt * 16 + lr + 8 * (lm & 1)) * AROW + u * 32 + 16 * (lm >> 1));
#pragma unroll
        for (int rg = 0; rg < RG; rg++) {
            uint32_t b0, b1;
            if (Narrow<TYPE>::QB == 16) {
                b0 = wv[rg][u] & 0x0f0f0f0fu;
                b1 = (wv[rg][u] >> 4) & 0x0f0f0f0fu;
            } else {
                b0 = wv[rg][2 * u];
                b1 = wv[rg][2 * u + 1];
            }
            float w0, w1, m0 = 0.0f, m1 = 0.0f;  // rows 2q, 2q+1: scale, and (Q4_K) −dmin·min
            if (TYPE == TH_Q4_K) {
                const float2 d0 = __half22float2(*(const __half2 *)&h0[rg][0]), d1 = __half22float2(*(const __half2 *)&h1[rg][0]);
                w0 = d0.x * (float)((h0[rg][1] >> (8 * u)) & 0xffu);
                w1 = d1.x * (float)((h1[rg][1] >> (8 * u)) & 0xffu);
                m0 = -d0.y * (float)((h0[rg][2] >> (8 * u)) & 0xffu);
                m1 = -d1.y * (float)((h1[rg][2] >> (8 * u)) & 0xffu);
            } else {
                w0 = __half2float(__ushort_as_half((unsigned short)(h0[rg][u >> 1] >> (16 * (u & 1)))));
                w1 = __half2float(__ushort_as_half((unsigned short)(h1[rg][u >> 1] >> (16 * (u & 1)))));
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                int c[4];
                mma_k32_c(c, a[mt], b0, b1, (&oa[mt].x)[u], (&ob[mt].x)[u]);
                const float xa = (&da[mt].x)[u], xb = (&db[mt].x)[u];
                acc[mt][rg][0] = fmaf(w0 * xa, small_int_to_float(c[0]), acc[mt][rg][0]);
                acc[mt][rg][1] = fmaf(w1 * xa, small_int_to_float(c[1]), acc[mt][rg][1]);
                acc[mt][rg][2] = fmaf(w0 * xb, small_int_to_float(c[2]), acc[mt][rg][2]);
                acc[mt][rg][3] = fmaf(w1 * xb, small_int_to_float(c[3]), acc[mt][rg][3]);
                if (TYPE == TH_Q4_K) {
                    const float sa = (&xsa[mt].x)[u], sb = (&xsb[mt].x)[u];
                    acc[mt][rg][0] = fmaf(m0, sa, acc[mt][rg][0]);
                    acc[mt][rg][1] = fmaf(m1, sa, acc[mt][rg][1]);
                    acc[mt][rg][2] = fmaf(m0, sb, acc[mt][rg][2]);
                    acc[mt][rg][3] = fmaf(m1, sb, acc[mt][rg][3]);
                }
            }
        }
    }
}

// Grid: x = token tiles of MT·16 (adjacent, so that a batch of several tiles reads
// each weight from DRAM once and again from L2), y = row blocks of ROWS, z = the K
// split (a cluster of `split` blocks along z, each a contiguous range of stages).
template <uint32_t TYPE, int MT>
__global__ void __launch_bounds__(NW * 32) mma_q8n(th_cu_mat w, th_cu_q8 xq, int n, float *y, int64_t ys, bool accum,
                                                   int split) {
    pdl_trigger();
    constexpr int NT = MT * 16, SB = stage_bytes<TYPE, MT>();
    extern __shared__ __align__(16) uint8_t smem[];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int64_t rb0 = (int64_t)blockIdx.y * ROWS, wr0 = rb0 + wid * RG * 8;
    const int t0 = blockIdx.x * NT;
    const int64_t stages = w.K / (32 * SG), per = (stages + split - 1) / split;
    const int64_t s_beg = min(stages, (int64_t)blockIdx.z * per), s_end = min(stages, s_beg + per), ns = s_end - s_beg;
    float acc[MT][RG][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int rg = 0; rg < RG; rg++) acc[mt][rg][0] = acc[mt][rg][1] = acc[mt][rg][2] = acc[mt][rg][3] = 0.0f;
    auto act = [&](int64_t s) { return smem + (size_t)(s % NS) * SB; };
    auto wgt = [&](int64_t s) { return act(s) + NT * (AROW + 2 * SG * 4) + wid * wbytes<TYPE>(); };
    // the first stages' weights before waiting for the activations (the previous kernel's output)
#pragma unroll
    for (int s = 0; s < NS - 1; s++)
        if (s < ns) stage_weights<TYPE>(wgt(s), w, wr0, (s_beg + s) * SG, lane);
    pdl_wait();
#pragma unroll
    for (int s = 0; s < NS - 1; s++) {
        if (s < ns) stage_acts<MT>(act(s), xq, w.K, t0, n, (s_beg + s) * SG);
        cp_commit();
    }
    for (int64_t s = 0; s < ns; s++) {
        cp_wait<NS - 2>();  // stage s's copies (this thread's)
        __syncthreads();    // everyone's, and everyone is done with stage s−1's buffer
        const int64_t nx = s + NS - 1;
        if (nx < ns) {
            stage_weights<TYPE>(wgt(nx), w, wr0, (s_beg + nx) * SG, lane);
            stage_acts<MT>(act(nx), xq, w.K, t0, n, (s_beg + nx) * SG);
        }
        cp_commit();
        stage_mma<TYPE, MT>(act(s), wgt(s), lane, acc);
    }
    cp_wait<0>();
    __syncthreads();
    // the block's partial tile [NT tokens][ROWS rows] in shared memory (the ring reused)
    float *part = (float *)smem;
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int rg = 0; rg < RG; rg++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int t = mt * 16 + g + (i >= 2 ? 8 : 0), r = wid * RG * 8 + rg * 8 + 2 * q + (i & 1);
                part[t * ROWS + r] = acc[mt][rg][i];
            }
    // block z of the cluster sums elements [z·E/split, (z+1)·E/split) over the blocks in rank order
    constexpr int E = NT * ROWS;
    const int z = (int)blockIdx.z, e0 = z * E / split, e1 = (z + 1) * E / split;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::cluster_group cl = cg::this_cluster();
    if (split > 1) cl.sync(); else __syncthreads();
#else
    __syncthreads();
#endif
    for (int e = e0 + (int)threadIdx.x; e < e1; e += NW * 32) {
        float v = part[e];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (split > 1) {
            v = 0.0f;
            for (int k = 0; k < split; k++) v += cl.map_shared_rank(part, k)[e];
        }
#endif
        const int t = t0 + e / ROWS;
        const int64_t r = rb0 + e % ROWS;
        if (t < n && r < w.rows) {
            float *p = y + (int64_t)t * ys + r;
            *p = accum ? *p + v : v;
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (split > 1) cl.sync();  // no block leaves while another still reads its tile
#endif
}

// The K split: the least (waves of resident blocks) × (stages a block + 2 for its
// prologue). H200 lab, 8B Q4_0 at 16 tokens, us by split 1 / 2 / 4 / 8: gate+up
// (224 row blocks, 3 resident a multiprocessor) 46.7 / 48.6 / 42.6 / 47.6; down
// (32 row blocks) 75.7 / 41.5 / 38.9 / 23.4; at 32 tokens (2 resident) gate+up
// 52.2 / 61.8 / 69.7 / 84.1. Misses measured: qkv at 16 tokens takes 8 (15.1 us)
// where 6 ran 13.3.
int choose_split(int64_t row_blocks, int tiles, int64_t stages, int resident) {
    const int64_t slots = (int64_t)sm_count() * (resident > 0 ? resident : 1);
    int best = 1;
    int64_t best_cost = INT64_MAX;
    for (int sp = 1; sp <= MAX_SPLIT && sp <= stages; sp++) {
        const int64_t per = (stages + sp - 1) / sp, waves = (row_blocks * tiles * sp + slots - 1) / slots;
        if (waves * (per + 2) < best_cost) { best_cost = waves * (per + 2); best = sp; }
    }
    return best;
}

template <uint32_t TYPE, int MT>
void launch(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, int split, cudaStream_t st) {
    const int64_t row_blocks = (w->rows + ROWS - 1) / ROWS, stages = w->K / (32 * SG);
    const int tiles = (n + MT * 16 - 1) / (MT * 16);
    const size_t ring = (size_t)NS * stage_bytes<TYPE, MT>(), part = (size_t)MT * 16 * ROWS * 4;
    const size_t smem = ring > part ? ring : part;
    static int resident = -1;  // blocks a multiprocessor holds
    if (resident < 0) {
        cudaFuncSetAttribute(mma_q8n<TYPE, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, mma_q8n<TYPE, MT>, NW * 32, smem) != cudaSuccess)
            resident = 1;
    }
    if (split <= 0) split = choose_split(row_blocks, tiles, stages, resident);
    launch_kc(mma_q8n<TYPE, MT>, dim3((unsigned)tiles, (unsigned)row_blocks, (unsigned)split), dim3(NW * 32), smem,
              (unsigned)split, st, *w, *xq, n, y, ys, accum, split);
}

template <uint32_t TYPE>
void launch_n(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, int split,
              cudaStream_t st) {
    if (n <= 16) launch<TYPE, 1>(w, xq, n, y, ys, accum, split, st);
    else launch<TYPE, 2>(w, xq, n, y, ys, accum, split, st);
}

}  // namespace

extern "C" bool th_cu_mma_q8n_supports(const th_cu_mat *w) {
    const int64_t k_unit = w->type == TH_Q4_K ? 256 : 32 * SG;  // Q4_K: whole super-blocks
    return w->layout == TH_CU_SPLIT && (w->type == TH_Q4_0 || w->type == TH_Q8_0 || w->type == TH_Q4_K) && w->K % k_unit == 0 &&
           (uintptr_t)w->data % 16 == 0 && (uintptr_t)w->scales % (w->type == TH_Q4_K ? 4 : 8) == 0 && cc_major() >= 9;
}

extern "C" bool th_cu_mma_q8n(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum,
                              int split, cudaStream_t st) {
    if (n <= 0 || n > TH_CU_MMA_NARROW_MAX || !th_cu_mma_q8n_supports(w)) return false;
    if ((uintptr_t)xq->q % 16 || (uintptr_t)xq->d % 16 || (uintptr_t)xq->s % 16) return false;
    if (split < 0 || split > MAX_SPLIT) return false;
    if (w->type == TH_Q4_0) launch_n<TH_Q4_0>(w, xq, n, y, ys, accum, split, st);
    else if (w->type == TH_Q4_K) launch_n<TH_Q4_K>(w, xq, n, y, ys, accum, split, st);
    else launch_n<TH_Q8_0>(w, xq, n, y, ys, accum, split, st);
    return true;
}
