// dn_chunk.cu — the gated delta rule's chunked (parallel) form for prefill
// (deltanet.h: th_cu_dn_chunk; th_cu_dn_rule picks it for long runs of one
// sequence). The arithmetic is src/cpu/dn_chunk.h's, fp32 with the cumulative log
// decay in double. Per token t of a chunk (from its start state S0, decay
// g_t = exp(lg_t), c_t = Σ_{s<=t} lg_s, γ_t = exp(c_t), r(t, i) = exp(c_t − c_i)):
//   A[t][i] = β_t r(t, i) k_t·k_i (i < t), the UT transform's strictly lower part
//   n = (I + A)⁻¹ β ⊙ (V − γ ⊙ K S0)        (forward substitution, per value column)
//   o_t = scale · (γ_t S0ᵀ q_t + Σ_{i<=t} r(t, i) (q_t·k_i) n_i)
//   S' = γ_L S0 + Σ_i r(L, i) k_i n_iᵀ, clamped to ±1e6
// which is the WY form n = U − W·S0 (U = T·βV, W = T·βγK, T = (I + A)⁻¹) without
// materialising T. q and k come normalised, beta / decay / log decay per token from
// the pre-pass (deltanet.cu's dn_prep).
//
// A block of 256 threads owns CW value columns of one v head of one sequence (the
// columns of the state are independent; K Kᵀ, Q Kᵀ and the solve's matrix are
// recomputed per column slab) and walks that sequence's chunks in order with its
// DK × CW slab of the state in shared memory. A chunk is up to 64 tokens of the
// sequence and ends early after a token whose state is snapshotted (snap >= 0), so
// every snapshot is a chunk's end state. Grid: min(n, n_seq) list entries × Nv × slabs.
#include "cuda/common.cuh"
#include "cuda/deltanet.h"

namespace {

constexpr int C = TH_CU_DN_CHUNK_LEN, NT = 256;

// exp of a log decay product, 0 below e^-80 (as the CPU's dnc_exp).
__device__ __forceinline__ float cexp(double x) { return x < -80.0 ? 0.0f : expf((float)x); }

template <int DK, int CW>
struct chunk_smem {
    static constexpr int KS = DK + 4, PS = C + 4, NS = CW + 4;   // row strides (floats): float4 rows, few bank conflicts
    static constexpr size_t floats = 2 * C /* cum, double */ + 2 * (size_t)C * KS + (size_t)DK * CW + 2 * (size_t)C * PS +
                                     (size_t)C * NS + 3 * C /* gam, bet, rl */ + C /* tix */;
    static constexpr size_t bytes = floats * 4;
};

template <int DK, int CW>
__global__ void __launch_bounds__(NT) dn_chunk(th_cu_dn d, const float *u, const float *bd, int n,
                                               const int32_t *seq_list, const int32_t *ord, const int32_t *off,
                                               const int32_t *snap, float *out, int64_t os) {
    pdl_begin();
    using SM = chunk_smem<DK, CW>;
    constexpr int KS = SM::KS, PS = SM::PS, NS = SM::NS, RPW = C / (NT / 32), APW = DK / (NT / 32);
    static_assert(CW == 32 && DK % 32 == 0 && RPW == 8, "one warp: 32 columns, 8 chunk rows");
    const int li = blockIdx.x, s = seq_list[li];
    if (s < 0) return;
    const int h = blockIdx.y, c0 = blockIdx.z * CW, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int dk = d.dk, kh = d.repeat ? h % d.nk : h / d.ratio, nv = d.nv;
    const int t0 = off[li], t1 = li + 1 < n ? off[li + 1] : n;
    extern __shared__ float4 smem4[];
    double *cum = reinterpret_cast<double *>(smem4);
    float *Ks = reinterpret_cast<float *>(cum + C), *Qs = Ks + C * KS, *S = Qs + C * KS, *Am = S + DK * CW,
          *Pm = Am + C * PS, *Nn = Pm + C * PS, *gam = Nn + C * NS, *bet = gam + C, *rl = bet + C;
    int *tix = reinterpret_cast<int *>(rl + C);
    __shared__ int Lsh;
    const int64_t hoff = d.layer_off + d.conv_n + (int64_t)h * dk * dk;
    float *Sg = d.cur + (int64_t)s * d.per_seq + hoff;
    for (int x = tid; x < DK * CW; x += NT) {
        const int a = x / CW, j = c0 + x % CW;
        S[x] = a < dk && j < dk ? Sg[(int64_t)a * dk + j] : 0.0f;
    }
    const float scale = rsqrtf((float)dk);
    const bool col_on = c0 + lane < dk;
    for (int c = t0; c < t1;) {
        __syncthreads();   // the previous chunk is done with the shared arrays
        // the chunk: up to C tokens, ending after the first snapshotted one
        if (tid == 0) Lsh = min(C, t1 - c);
        __syncthreads();
        if (tid < C) {
            const int tk = c + tid < t1 ? ord[c + tid] : -1;
            tix[tid] = tk;
            if (tk >= 0 && tid < Lsh && snap[tk] >= 0) atomicMin(&Lsh, tid + 1);
        }
        __syncthreads();
        const int L = Lsh;
        if (w == 0) {   // gates and the cumulative log decay (a warp scan in double; lane owns t and t + 32)
            double x0 = 0.0, x1 = 0.0;
            float b0 = 0.0f, b1 = 0.0f;
            if (lane < L) { x0 = bd[(int64_t)tix[lane] * 3 * nv + 2 * nv + h]; b0 = bd[(int64_t)tix[lane] * 3 * nv + h]; }
            if (lane + 32 < L) { x1 = bd[(int64_t)tix[lane + 32] * 3 * nv + 2 * nv + h]; b1 = bd[(int64_t)tix[lane + 32] * 3 * nv + h]; }
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const double y0 = __shfl_up_sync(0xffffffffu, x0, o), y1 = __shfl_up_sync(0xffffffffu, x1, o);
                if (lane >= o) { x0 += y0; x1 += y1; }
            }
            x1 += __shfl_sync(0xffffffffu, x0, 31);
            cum[lane] = x0;
            cum[lane + 32] = x1;
            bet[lane] = b0;
            bet[lane + 32] = b1;
            gam[lane] = cexp(x0);
            gam[lane + 32] = cexp(x1);
        }
        for (int x = tid; x < C * DK; x += NT) {
            const int t = x / DK, a = x % DK;
            float q = 0.0f, k = 0.0f;
            if (t < L && a < dk) {
                const float *row = u + (int64_t)tix[t] * d.cd + (int64_t)kh * dk;
                q = row[a];
                k = row[d.kd + a];
            }
            Qs[t * KS + a] = q;
            Ks[t * KS + a] = k;
        }
        for (int x = tid; x < C * CW; x += NT) {
            const int t = x / CW, jj = x % CW;
            Nn[t * NS + jj] = t < L && c0 + jj < dk ? u[(int64_t)tix[t] * d.cd + 2 * d.kd + (int64_t)h * dk + c0 + jj] : 0.0f;
        }
        __syncthreads();
        if (tid < C) rl[tid] = tid < L ? cexp(cum[L - 1] - cum[tid]) : 0.0f;
        {   // A = β r ⊙ K Kᵀ (strictly lower), P = r ⊙ Q Kᵀ (lower): a 4 × 4 tile of each, rows ty + 16m, columns tx + 16m
            const int ty = tid / 16, tx = tid % 16;
            float a[4][4] = {}, p[4][4] = {};
            for (int kk = 0; kk < DK; kk += 4) {
                float4 ki[4], kt[4], qt[4];
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    ki[m] = *reinterpret_cast<const float4 *>(Ks + (tx + 16 * m) * KS + kk);
                    kt[m] = *reinterpret_cast<const float4 *>(Ks + (ty + 16 * m) * KS + kk);
                    qt[m] = *reinterpret_cast<const float4 *>(Qs + (ty + 16 * m) * KS + kk);
                }
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int m = 0; m < 4; m++) {
                        a[r][m] += kt[r].x * ki[m].x + kt[r].y * ki[m].y + kt[r].z * ki[m].z + kt[r].w * ki[m].w;
                        p[r][m] += qt[r].x * ki[m].x + qt[r].y * ki[m].y + qt[r].z * ki[m].z + qt[r].w * ki[m].w;
                    }
            }
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    const int t = ty + 16 * r, i = tx + 16 * m;
                    const float rr = i <= t ? cexp(cum[t] - cum[i]) : 0.0f;
                    Am[t * PS + i] = i < t ? bet[t] * rr * a[r][m] : 0.0f;
                    Pm[t * PS + i] = rr * p[r][m];
                }
        }
        // K S0 and Q S0 on the slab: lane = column, warp w rows w·8 .. +8
        float ks0[RPW] = {}, qs0[RPW] = {};
        for (int a = 0; a < DK; a += 4) {
            const float s0 = S[a * CW + lane], s1 = S[(a + 1) * CW + lane], s2 = S[(a + 2) * CW + lane], s3 = S[(a + 3) * CW + lane];
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                const float4 kv = *reinterpret_cast<const float4 *>(Ks + (w * RPW + r) * KS + a);
                const float4 qv = *reinterpret_cast<const float4 *>(Qs + (w * RPW + r) * KS + a);
                ks0[r] += kv.x * s0 + kv.y * s1 + kv.z * s2 + kv.w * s3;
                qs0[r] += qv.x * s0 + qv.y * s1 + qv.z * s2 + qv.w * s3;
            }
        }
#pragma unroll
        for (int r = 0; r < RPW; r++) {   // the right-hand side β (v − γ S0ᵀk) over V in Nn (this thread's own elements)
            const int t = w * RPW + r;
            Nn[t * NS + lane] = bet[t] * (Nn[t * NS + lane] - gam[t] * ks0[r]);
            qs0[r] *= gam[t];
        }
        __syncthreads();
        {   // forward substitution, a warp's own 4 columns: column 4w + tid % 32 / 8, 8 lanes share a row's sum
            const int jj = tid / 8, p8 = tid % 8;
            for (int t = 1; t < L; t++) {
                float sum = 0.0f;
                for (int i = p8; i < t; i += 8) sum += Am[t * PS + i] * Nn[i * NS + jj];
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                sum += __shfl_xor_sync(0xffffffffu, sum, 4);
                if (p8 == 0) Nn[t * NS + jj] -= sum;
                __syncwarp();
            }
        }
        __syncthreads();
        {   // outputs: lane = column, warp w rows w·8 .. +8 (P is zero past the diagonal)
            float o[RPW];
#pragma unroll
            for (int r = 0; r < RPW; r++) o[r] = qs0[r];
            const int iend = min(L, w * RPW + RPW);
            for (int i = 0; i < iend; i += 4) {
                const float n0 = Nn[i * NS + lane], n1 = Nn[(i + 1) * NS + lane], n2 = Nn[(i + 2) * NS + lane],
                            n3 = Nn[(i + 3) * NS + lane];
#pragma unroll
                for (int r = 0; r < RPW; r++) {
                    const float4 pv = *reinterpret_cast<const float4 *>(Pm + (w * RPW + r) * PS + i);
                    o[r] += pv.x * n0 + pv.y * n1 + pv.z * n2 + pv.w * n3;
                }
            }
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                const int t = w * RPW + r;
                if (t < L && col_on) out[(int64_t)tix[t] * os + (int64_t)h * dk + c0 + lane] = o[r] * scale;
            }
        }
        {   // the state: lane = column, warp w keys w·APW .. +APW
            const float gl = gam[L - 1];
            float acc[APW];
#pragma unroll
            for (int m = 0; m < APW; m++) acc[m] = gl * S[(w * APW + m) * CW + lane];
            for (int i = 0; i < L; i++) {
                const float rn = rl[i] * Nn[i * NS + lane];
#pragma unroll
                for (int m = 0; m < APW; m += 4) {
                    const float4 kv = *reinterpret_cast<const float4 *>(Ks + i * KS + w * APW + m);
                    acc[m] += rn * kv.x;
                    acc[m + 1] += rn * kv.y;
                    acc[m + 2] += rn * kv.z;
                    acc[m + 3] += rn * kv.w;
                }
            }
            const int sc = snap[tix[L - 1]];
            float *Sn = sc >= 0 ? d.snap + (int64_t)sc * d.per_seq + hoff : nullptr;
#pragma unroll
            for (int m = 0; m < APW; m++) {
                const int a = w * APW + m;
                const float v = fminf(fmaxf(acc[m], -1e6f), 1e6f);
                S[a * CW + lane] = v;
                if (Sn && a < dk && col_on) Sn[(int64_t)a * dk + c0 + lane] = v;
            }
        }
        c += L;
    }
    __syncthreads();
    for (int x = tid; x < DK * CW; x += NT) {
        const int a = x / CW, j = c0 + x % CW;
        if (a < dk && j < dk) Sg[(int64_t)a * dk + j] = S[x];
    }
}

// The launch with the kernel's dynamic shared memory (over the default 48 KiB:
// the attribute is set once per instance) and launch_k's programmatic dependent launch.
template <int DK>
void chunk_launch(const th_cu_dn *d, const float *u, const float *bd, const th_cu_dn_batch *b, float *out, int64_t os,
                  cudaStream_t st) {
    constexpr int CW = 32;
    constexpr size_t bytes = chunk_smem<DK, CW>::bytes;
    static bool attr_set = false;
    if (!attr_set) {
        cudaFuncSetAttribute(dn_chunk<DK, CW>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        attr_set = true;
    }
    const int nl = b->n < b->n_seq ? b->n : b->n_seq;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)nl, (unsigned)d->nv, (unsigned)((d->dk + CW - 1) / CW));
    cfg.blockDim = dim3(NT);
    cfg.dynamicSmemBytes = bytes;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = th_cu_pdl ? 1 : 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, dn_chunk<DK, CW>, *d, u, bd, b->n, b->list, b->ord, b->off, b->snap, out, os);
}

}  // namespace

extern "C" bool th_cu_dn_chunk(const th_cu_dn *d, const float *u, const float *bd, const th_cu_dn_batch *b, float *out,
                               int64_t os, cudaStream_t st) {
    if (b->n <= 0) return true;
    if (d->dk <= 64) chunk_launch<64>(d, u, bd, b, out, os, st);
    else if (d->dk <= 128) chunk_launch<128>(d, u, bd, b, out, os, st);
    else return false;
    return true;
}
