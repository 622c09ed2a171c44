// attn_mma.cu — causal attention for prompt-sized batches on the fp16 tensor
// cores, flash-attention style, over the paged fp16 KV cache. A block of 4 warps
// takes 64 query tokens of one head (16 a warp); keys come in tiles of 64
// positions, K and V copied into shared memory by cp.async (two stages), so the
// 64 queries share every load. Per tile each warp computes S = Q·Kᵀ with
// mma.sync m16n8k16 (Q from fp32 rounded to fp16 once, held in registers; K by
// ldmatrix), scales, soft-caps and masks it (window and causal bound per query
// row), updates its rows' running max and sum (online softmax in fp32), and adds
// P·V with P rounded to fp16 as the A operand straight from the score registers
// and V by transposed ldmatrix; accumulation is fp32 throughout. The sink logit
// (if any) joins the denominator at the end (final_scale).
//
// Tokens of a tile may belong to several sequences (their block tables differ):
// the block runs one pass over the keys per distinct sequence, each pass
// updating only that sequence's rows. attention.cu sends only runs of at least
// TH_CU_ATTN_MMA_RUN tokens here, so a tile holds at most three sequences.
//
// mma.sync m16n8k16 (PTX ISA), lane = 4g + q: A (16×16, row) a0 = (g, 2q..2q+1),
// a1 = (g+8, ..), a2 = (g, 8+2q..), a3 = (g+8, 8+2q..); B (16×8, col) b0 = (k 2q..2q+1,
// n g), b1 = (k 8+2q.., n g); C c0, c1 = (g, 2q..2q+1), c2, c3 = (g+8, ..).
#include "cuda/mma_q8.cuh"
#include "cuda/layer_ops.cuh"
#include <limits.h>

namespace {

using namespace mmaq8;

constexpr int BM = 64;       // query tokens a block
constexpr int BN = 64;       // key positions a tile
constexpr int THREADS = 128; // 4 warps of 16 query rows

template <int D> __host__ __device__ constexpr int row_halves() { return D + 8; }  // a K/V row in shared memory, padded (no bank conflicts)
template <int D> __host__ __device__ constexpr size_t smem_bytes() { return (size_t)2 * 2 * BN * row_halves<D>() * 2; }  // K and V, 2 stages

__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(const uint32_t *)&h;
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// The block's query rows: position, first visible position (window), sequence
// (-1 past the batch), and the distinct sequences with the key range each needs.
struct Rows {
    int32_t pos[BM], lo[BM], seq[BM];
    int32_t seg_seq[BM], seg_lo[BM], seg_end[BM];
    int n_seg;
};

__device__ void read_rows(Rows &R, const int32_t *pos, const int32_t *seq, int n, int t0, int32_t window) {
    const int tid = threadIdx.x;
    if (tid < BM) {
        const int t = t0 + tid;
        const int32_t p = t < n ? pos[t] : 0;
        R.pos[tid] = p;
        R.seq[tid] = t < n ? seq[t] : -1;
        R.lo[tid] = window > 0 ? max(0, p - window + 1) : 0;
    }
    __syncthreads();
    if (tid == 0) {
        int ns = 0;
        for (int r = 0; r < BM; r++) {
            if (R.seq[r] < 0) continue;
            int i = 0;
            while (i < ns && R.seg_seq[i] != R.seq[r]) i++;
            if (i == ns) { R.seg_seq[ns] = R.seq[r]; R.seg_lo[ns] = INT_MAX; R.seg_end[ns] = 0; ns++; }
            R.seg_lo[i] = min(R.seg_lo[i], R.lo[r]);
            R.seg_end[i] = max(R.seg_end[i], R.pos[r] + 1);
        }
        R.n_seg = ns;
    }
    __syncthreads();
}

// Key positions k0..k0+BN-1 of one sequence (clamped to end - 1: every row read is
// a written one; the clamped ones are masked) into stage buffers ks, vs.
template <int D>
__device__ __forceinline__ void load_tile(const th_cu_kv &kv, const int32_t *table, int64_t lay, int kvh, int32_t k0,
                                          int32_t end, __half *ks, __half *vs) {
    constexpr int PR = D / 8, LD = row_halves<D>();  // 16-byte pieces a row
    for (int i = threadIdx.x; i < BN * PR; i += THREADS) {
        const int r = i / PR, c = i % PR;
        const int32_t j = min(k0 + r, end - 1);
        const __half *base = (const __half *)((const char *)kv.pool + (int64_t)table[j / kv.block] * kv.block_bytes);
        const int64_t slot = j % kv.block;
        cp16(ks + r * LD + c * 8, base + lay + slot * kv.k_dim + (int64_t)kvh * D + c * 8);
        cp16(vs + r * LD + c * 8, base + lay + (int64_t)kv.block * kv.k_dim + slot * kv.v_dim + (int64_t)kvh * D + c * 8);
    }
}

// One warp's state: its 16 rows' running max and (per-thread partial) sum for
// rows g and g+8, and the unnormalized output, D/8 tiles of 8 dims.
template <int D> struct Acc {
    float m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f };
    float o[D / 8][4] = {};
};

// S = Q·Kᵀ for the warp's 16 rows and the tile's 64 keys.
template <int D>
__device__ __forceinline__ void scores(const uint32_t (&qf)[D / 16][4], const __half *ks, float (&s)[BN / 8][4]) {
    constexpr int LD = row_halves<D>();
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < D / 16; kc++)
#pragma unroll
        for (int np = 0; np < BN / 16; np++) {
            uint32_t b[4];  // keys np·16 + 0..7 / 8..15, dims kc·16 + 0..7 / 8..15
            ldsm_x4(b, ks + (np * 16 + ((lane >> 4) & 1) * 8 + (lane & 7)) * LD + kc * 16 + ((lane >> 3) & 1) * 8);
            mma_f16(s[2 * np], qf[kc], b[0], b[1]);
            mma_f16(s[2 * np + 1], qf[kc], b[2], b[3]);
        }
}

// Scale, soft-cap and mask the scores, then the online-softmax update and O += P·V.
template <int D>
__device__ __forceinline__ void softmax_pv(const th_cu_attn &a, float (&s)[BN / 8][4], int32_t k0, const bool (&in)[2],
                                           const int32_t (&lo)[2], const int32_t (&p)[2], const __half *vs, Acc<D> &A) {
    constexpr int LD = row_halves<D>();
    const int lane = threadIdx.x & 31, q = lane & 3;
    float mx[2] = { -INFINITY, -INFINITY };
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = e >> 1;
            const int32_t key = k0 + nt * 8 + 2 * q + (e & 1);
            float v = s[nt][e] * a.scale;
            if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
            v = in[r] && key >= lo[r] && key <= p[r] ? v : -INFINITY;
            s[nt][e] = v;
            mx[r] = fmaxf(mx[r], v);
        }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mn = fmaxf(A.m[r], mx[r]);
        corr[r] = mn == -INFINITY ? 1.0f : __expf(A.m[r] - mn);
        A.m[r] = mn;
    }
    float sum[2] = { 0.0f, 0.0f };
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = e >> 1;
            const float pe = A.m[r] == -INFINITY ? 0.0f : __expf(s[nt][e] - A.m[r]);
            s[nt][e] = pe;
            sum[r] += pe;
        }
#pragma unroll
    for (int r = 0; r < 2; r++) A.l[r] = A.l[r] * corr[r] + sum[r];
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++) {
        A.o[dt][0] *= corr[0]; A.o[dt][1] *= corr[0];
        A.o[dt][2] *= corr[1]; A.o[dt][3] *= corr[1];
    }
#pragma unroll
    for (int kc = 0; kc < BN / 16; kc++) {
        const uint32_t pa[4] = { pack_h2(s[2 * kc][0], s[2 * kc][1]), pack_h2(s[2 * kc][2], s[2 * kc][3]),
                                 pack_h2(s[2 * kc + 1][0], s[2 * kc + 1][1]), pack_h2(s[2 * kc + 1][2], s[2 * kc + 1][3]) };
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t b[4];  // keys kc·16 + 0..7 / 8..15, dims dp·16 + 0..7 / 8..15, transposed
            ldsm_x4_t(b, vs + (kc * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + dp * 16 + ((lane >> 4) & 1) * 8);
            mma_f16(A.o[2 * dp], pa, b[0], b[1]);
            mma_f16(A.o[2 * dp + 1], pa, b[2], b[3]);
        }
    }
}

template <int D>
__global__ void __launch_bounds__(THREADS) attn_prompt(const float *qkv, int64_t stride, int n, const int32_t *pos,
                                                       const int32_t *seq, th_cu_attn a, th_cu_kv kv, int32_t layer,
                                                       float *out, int64_t os) {
    constexpr int LD = row_halves<D>();
    extern __shared__ __align__(16) uint8_t smem[];
    __half *sk = (__half *)smem, *sv = sk + 2 * BN * LD;  // [stage][BN][LD] each
    __shared__ Rows R;
    pdl_trigger();
    const int t0 = blockIdx.x * BM, h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3;
    const int kvh = h / (a.n_head / a.n_head_kv);
    const int64_t lay = (int64_t)layer * kv.block * (kv.k_dim + kv.v_dim);
    read_rows(R, pos, seq, n, t0, a.window);   // batch metadata: not written by kernels
    pdl_wait();
    const int rr[2] = { warp * 16 + g, warp * 16 + g + 8 };
    uint32_t qf[D / 16][4];
    {
        const float *qr[2];
        for (int r = 0; r < 2; r++) qr[r] = R.seq[rr[r]] >= 0 ? qkv + (int64_t)(t0 + rr[r]) * stride + (int64_t)h * D : nullptr;
#pragma unroll
        for (int kc = 0; kc < D / 16; kc++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float *x = qr[j & 1];
                const int d = kc * 16 + 2 * q + (j >> 1) * 8;
                qf[kc][j] = x ? pack_h2(x[d], x[d + 1]) : 0u;
            }
    }
    Acc<D> A;
    for (int si = 0; si < R.n_seg; si++) {
        const int32_t sq = R.seg_seq[si], klo = R.seg_lo[si], kend = R.seg_end[si];
        bool in[2];
        int32_t lo[2], p[2];
        int32_t wlo = INT_MAX, wend = 0;  // the keys this warp's rows of the sequence see
        for (int r = 0; r < 2; r++) {
            in[r] = R.seq[rr[r]] == sq;
            lo[r] = R.lo[rr[r]];
            p[r] = R.pos[rr[r]];
            if (in[r]) { wlo = min(wlo, lo[r]); wend = max(wend, p[r] + 1); }
        }
        for (int o = 1; o < 32; o <<= 1) {
            wlo = min(wlo, __shfl_xor_sync(0xffffffffu, wlo, o));
            wend = max(wend, __shfl_xor_sync(0xffffffffu, wend, o));
        }
        const int32_t *table = kv.table + (int64_t)sq * kv.max_blocks;
        const int nt = (kend - klo + BN - 1) / BN;
        load_tile<D>(kv, table, lay, kvh, klo, kend, sk, sv);
        cp_commit();
        for (int it = 0; it < nt; it++) {
            const int cur = it & 1;
            if (it + 1 < nt) {
                load_tile<D>(kv, table, lay, kvh, klo + (it + 1) * BN, kend, sk + (cur ^ 1) * BN * LD, sv + (cur ^ 1) * BN * LD);
                cp_commit();
                cp_wait<1>();
            } else {
                cp_wait<0>();
            }
            __syncthreads();
            const int32_t k0 = klo + it * BN;
            if (k0 < wend && k0 + BN > wlo) {
                float s[BN / 8][4];
                scores<D>(qf, sk + cur * BN * LD, s);
                softmax_pv<D>(a, s, k0, in, lo, p, sv + cur * BN * LD, A);
            }
            __syncthreads();  // the stage is free for the load two tiles on
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float l = A.l[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (R.seq[rr[r]] < 0) continue;
        const float inv = final_scale(a, h, A.m[r], l);
        float *o = out + (int64_t)(t0 + rr[r]) * os + (int64_t)h * D + 2 * q;
#pragma unroll
        for (int dt = 0; dt < D / 8; dt++) {
            o[dt * 8] = A.o[dt][2 * r] * inv;
            o[dt * 8 + 1] = A.o[dt][2 * r + 1] * inv;
        }
    }
}

template <int D>
void launch_prompt(const float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq, const th_cu_attn &a,
                   const th_cu_kv &kv, int32_t layer, float *out, int64_t os, cudaStream_t st) {
    static bool attr = false;  // the dynamic shared memory above 48 KiB, once
    if (!attr) {
        cudaFuncSetAttribute(attn_prompt<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes<D>());
        attr = true;
    }
    dim3 grid((unsigned)((n + BM - 1) / BM), (unsigned)a.n_head);
    launch_ks(attn_prompt<D>, grid, dim3(THREADS), smem_bytes<D>(), st, qkv, stride, n, pos, seq, a, kv, layer, out, os);
}

}  // namespace

extern "C" bool th_cu_attn_prompt_supports(const th_cu_attn *a, const th_cu_kv *kv) {
    return kv->f16 && a->head_dim == a->head_dim_v && (a->head_dim == 32 || a->head_dim == 64 || a->head_dim == 128) &&
           kv->k_dim % 8 == 0 && kv->v_dim % 8 == 0 && kv->block_bytes % 16 == 0 && ((uintptr_t)kv->pool & 15) == 0 &&
           a->n_head % a->n_head_kv == 0;
}

extern "C" void th_cu_attn_prompt(const float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq,
                                  const th_cu_attn *a, const th_cu_kv *kv, int32_t layer, float *out, int64_t os,
                                  cudaStream_t st) {
    if (n <= 0) return;
    if (a->head_dim == 32) launch_prompt<32>(qkv, stride, n, pos, seq, *a, *kv, layer, out, os, st);
    else if (a->head_dim == 64) launch_prompt<64>(qkv, stride, n, pos, seq, *a, *kv, layer, out, os, st);
    else launch_prompt<128>(qkv, stride, n, pos, seq, *a, *kv, layer, out, os, st);
}
