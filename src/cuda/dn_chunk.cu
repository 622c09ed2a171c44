// dn_chunk.cu — the gated delta rule's chunked (parallel) form for prefill
// (deltanet.h: th_cu_dn_chunk; th_cu_dn_rule picks it for long runs of one
// sequence). The arithmetic is src/cpu/dn_chunk.h's, fp32 with the cumulative log
// decay in double. Per token t of a chunk (from its start state S0, decay
// g_t = exp(lg_t), c_t = Σ_{s<=t} lg_s, γ_t = exp(c_t), r(t, i) = exp(c_t − c_i)):
//   A[t][i] = β_t r(t, i) k_t·k_i (i < t), T = (I + A)⁻¹ (the UT transform)
//   W = T·(βγ ⊙ K), U = T·(β ⊙ V), n = U − W·S0   (n_t: the rule's new value row)
//   o_t = scale · (γ_t S0ᵀ q_t + Σ_{i<=t} r(t, i) (q_t·k_i) n_i)
//   S' = γ_L S0 + Σ_i r(L, i) k_i n_iᵀ, clamped to ±1e6 (the recurrence clamps
//   after every token: the two agree while the state stays inside)
// q and k come normalised, beta / decay / log decay per token from the pre-pass
// (deltanet.cu's dn_prep). The chunks (th_cu_dn_order, staged on the host) are up
// to 64 tokens of one sequence, a chunk ending after each snapshotted token so
// that every snapshot is a chunk's end state.
//
// Two forms (TH_CU_DN_CHUNK, TH_CU_DN_CHUNK1; bench/gpu/bench_dn.c times them):
//  - WY, two kernels: dn_wy, one block per (chunk, v head), all chunks at once:
//    A and P = r ⊙ Q Kᵀ, then W and U by forward substitution (a thread a column
//    of [βγK | βV]), into scratch; dn_chunk_state, one block per (sequence, v head,
//    32-column slab of the state, which the columns of the state are independent),
//    walks its chunks in order with its Dk × 32 slab in shared memory: n = U − W S0,
//    the outputs, the new state.
//  - one kernel (dn_chunk1): the block of the state pass recomputes A, P and solves
//    for n itself (per slab, in the sequential pass).
#include "cuda/common.cuh"
#include "cuda/deltanet.h"

namespace {

constexpr int C = TH_CU_DN_CHUNK_LEN, NT = 256, CW = 32, PS = C + 4, NS = CW + 4;

// exp of a log decay product, 0 below e^-80 (as the CPU's dnc_exp).
__device__ __forceinline__ float cexp(double x) { return x < -80.0 ? 0.0f : expf((float)x); }

__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

// Warp 0: the chunk's beta and cumulative log decay (a warp scan in double, a
// lane owning tokens lane and lane + 32; zero past L), γ = exp(cum).
__device__ void chunk_gates(const float *bd, int nv, int h, const int *tix, int L, int lane, double *cum, float *bet,
                            float *gam) {
    double x0 = 0.0, x1 = 0.0;
    float b0 = 0.0f, b1 = 0.0f;
    const int64_t st = 3 * (int64_t)nv;
    if (lane < L) { x0 = bd[tix[lane] * st + 2 * nv + h]; b0 = bd[tix[lane] * st + h]; }
    if (lane + 32 < L) { x1 = bd[tix[lane + 32] * st + 2 * nv + h]; b1 = bd[tix[lane + 32] * st + h]; }
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

// Normalised q and k rows of the chunk's tokens (zero past L and dk) into Qs, Ks.
template <int DK>
__device__ void chunk_qk(const th_cu_dn &d, const float *u, int kh, const int *tix, int L, int tid, float *Qs, float *Ks) {
    constexpr int KS = DK + 4;
    for (int x = tid; x < C * DK; x += NT) {
        const int t = x / DK, a = x % DK;
        float q = 0.0f, k = 0.0f;
        if (t < L && a < d.dk) {
            const float *row = u + (int64_t)tix[t] * d.cd + (int64_t)kh * d.dk;
            q = row[a];
            k = row[d.kd + a];
        }
        Qs[t * KS + a] = q;
        Ks[t * KS + a] = k;
    }
}

// A = β r ⊙ K Kᵀ (strictly lower), P = r ⊙ Q Kᵀ (lower, zero above): a thread a
// 4 × 4 tile of each, rows ty + 16m, columns tx + 16m.
template <int DK>
__device__ void chunk_ap(const float *Ks, const float *Qs, const double *cum, const float *bet, int tid, float *Am, float *Pm) {
    constexpr int KS = DK + 4;
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
                a[r][m] += dot4(kt[r], ki[m]);
                p[r][m] += dot4(qt[r], ki[m]);
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

// The state pass's end of a chunk, lane = slab column, warp w: the outputs of rows
// w·8 .. +8 (qs0 = γ_t S0ᵀq_t of them; P zero past the diagonal), then the state
// rows (keys) w·DK/8 .. +DK/8: S = γ_L S + Σ_i r(L, i) k_i n_iᵀ, clamped.
template <int DK>
__device__ void chunk_finish(const th_cu_dn &d, const float *Ks, const float *Pm, const float *Nn, const float *gam,
                             const float *rl, const int *tix, int L, const float *qs0, float *S, float *out, int64_t os,
                             int h, int c0, int lane, int w) {
    constexpr int KS = DK + 4, RPW = C / (NT / 32), APW = DK / (NT / 32);
    const int dk = d.dk;
    const bool col_on = c0 + lane < dk;
    const float scale = rsqrtf((float)dk);
    float o[RPW];
#pragma unroll
    for (int r = 0; r < RPW; r++) o[r] = qs0[r];
    const int iend = min(L, w * RPW + RPW);
    for (int i = 0; i < iend; i += 4) {
        const float n0 = Nn[i * NS + lane], n1 = Nn[(i + 1) * NS + lane], n2 = Nn[(i + 2) * NS + lane], n3 = Nn[(i + 3) * NS + lane];
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
#pragma unroll
    for (int m = 0; m < APW; m++) S[(w * APW + m) * CW + lane] = fminf(fmaxf(acc[m], -1e6f), 1e6f);
}

// The slab of the state from / to global memory (zero past dk).
template <int DK>
__device__ void slab_io(float *S, float *g, int dk, int c0, int tid, bool load) {
    for (int x = tid; x < DK * CW; x += NT) {
        const int a = x / CW, j = c0 + x % CW;
        if (load) S[x] = a < dk && j < dk ? g[(int64_t)a * dk + j] : 0.0f;
        else if (a < dk && j < dk) g[(int64_t)a * dk + j] = S[x];
    }
}

template <int DK>
struct wy_smem {   // dn_wy: cum (double), Ks, Qs, X = [βγK | βV] (C × 2DK), A, P, bet, gam, tix
    static constexpr size_t bytes = 8 * C + 4 * (2 * (size_t)C * (DK + 4) + (size_t)C * 2 * DK + 2 * (size_t)C * PS + 3 * C);
};
template <int DK>
struct state_smem {   // dn_chunk_state: Ws, Qs, Ks, S, P, Nn, gam, rl, tix
    static constexpr size_t bytes = 4 * (3 * (size_t)C * (DK + 4) + (size_t)DK * CW + (size_t)C * PS + (size_t)C * NS + 3 * C);
};
template <int DK>
struct one_smem {   // dn_chunk1: cum (double), Ks, Qs, S, A, P, Nn, gam, bet, rl, tix
    static constexpr size_t bytes = 8 * C + 4 * (2 * (size_t)C * (DK + 4) + (size_t)DK * CW + 2 * (size_t)C * PS + (size_t)C * NS + 4 * C);
};

// A chunk's scratch row of token tok (TH_CU_DN_WY_FLOATS): [W | U] (Vd each), then per
// head a row of P (C) and [γ_t, r(L, t)].
__device__ __forceinline__ float *wy_row(const th_cu_dn &d, int tok) {
    return d.wy + (int64_t)tok * TH_CU_DN_WY_FLOATS(d.vd, d.nv);
}

template <int DK>
__global__ void __launch_bounds__(NT) dn_wy(th_cu_dn d, const float *u, const float *bd, const int32_t *ord,
                                            const int32_t *ch_start, const int32_t *ch_len) {
    pdl_begin();
    constexpr int KS = DK + 4, XS = 2 * DK;
    const int ci = blockIdx.x, L = ch_len[ci];
    if (L <= 0) return;
    const int h = blockIdx.y, tid = threadIdx.x, dk = d.dk, kh = d.repeat ? h % d.nk : h / d.ratio;
    extern __shared__ float4 smem4[];
    double *cum = reinterpret_cast<double *>(smem4);
    float *Ks = reinterpret_cast<float *>(cum + C), *Qs = Ks + C * KS, *X = Qs + C * KS, *Am = X + C * XS, *Pm = Am + C * PS,
          *bet = Pm + C * PS, *gam = bet + C;
    int *tix = reinterpret_cast<int *>(gam + C);
    if (tid < C) tix[tid] = tid < L ? ord[ch_start[ci] + tid] : 0;
    __syncthreads();
    if (tid < 32) chunk_gates(bd, d.nv, h, tix, L, tid, cum, bet, gam);
    chunk_qk<DK>(d, u, kh, tix, L, tid, Qs, Ks);
    __syncthreads();
    for (int x = tid; x < C * XS; x += NT) {
        const int t = x / XS, c = x % XS;
        float v = 0.0f;
        if (c < DK) v = bet[t] * gam[t] * Ks[t * KS + c];
        else if (t < L && c - DK < dk) v = bet[t] * u[(int64_t)tix[t] * d.cd + 2 * d.kd + (int64_t)h * dk + c - DK];
        X[t * XS + c] = v;
    }
    chunk_ap<DK>(Ks, Qs, cum, bet, tid, Am, Pm);
    __syncthreads();
    for (int c = tid; c < XS; c += NT) {   // forward substitution: X = (I + A)⁻¹ X, a thread its column
        for (int t = 1; t < L; t++) {
            float s0 = X[t * XS + c], s1 = 0.0f;
            int i = 0;
            for (; i + 1 < t; i += 2) { s0 -= Am[t * PS + i] * X[i * XS + c]; s1 -= Am[t * PS + i + 1] * X[(i + 1) * XS + c]; }
            if (i < t) s0 -= Am[t * PS + i] * X[i * XS + c];
            X[t * XS + c] = s0 + s1;
        }
    }
    __syncthreads();
    for (int x = tid; x < L * XS; x += NT) {
        const int t = x / XS, c = x % XS;
        if (c % DK < dk) wy_row(d, tix[t])[(c < DK ? 0 : d.vd) + (int64_t)h * dk + c % DK] = X[t * XS + c];
    }
    for (int x = tid; x < L * C; x += NT) {
        const int t = x / C, i = x % C;
        wy_row(d, tix[t])[2 * d.vd + (int64_t)h * C + i] = Pm[t * PS + i];
    }
    if (tid < L) {
        float *g = wy_row(d, tix[tid]) + 2 * d.vd + (int64_t)d.nv * C + 2 * h;
        g[0] = gam[tid];
        g[1] = cexp(cum[L - 1] - cum[tid]);
    }
}

template <int DK>
__global__ void __launch_bounds__(NT) dn_chunk_state(th_cu_dn d, const float *u, int n, const int32_t *seq_list,
                                                     const int32_t *ord, const int32_t *off, const int32_t *ch_len,
                                                     const int32_t *ch_off, const int32_t *snap, float *out, int64_t os) {
    pdl_begin();
    constexpr int KS = DK + 4, RPW = C / (NT / 32);
    const int li = blockIdx.x, s = seq_list[li];
    if (s < 0) return;
    const int h = blockIdx.y, c0 = blockIdx.z * CW, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int dk = d.dk, kh = d.repeat ? h % d.nk : h / d.ratio;
    const int t0 = off[li], t1 = li + 1 < n ? off[li + 1] : n;
    extern __shared__ float4 smem4[];
    float *Ws = reinterpret_cast<float *>(smem4), *Qs = Ws + C * KS, *Ks = Qs + C * KS, *S = Ks + C * KS, *Pm = S + DK * CW,
          *Nn = Pm + C * PS, *gam = Nn + C * NS, *rl = gam + C;
    int *tix = reinterpret_cast<int *>(rl + C);
    const int64_t hoff = d.layer_off + d.conv_n + (int64_t)h * dk * dk;
    float *Sg = d.cur + (int64_t)s * d.per_seq + hoff;
    slab_io<DK>(S, Sg, dk, c0, tid, true);
    for (int p = t0, ci = ch_off[li]; p < t1; ci++) {
        const int L = ch_len[ci];
        __syncthreads();   // the previous chunk is done with the shared arrays
        if (tid < C) tix[tid] = tid < L ? ord[p + tid] : 0;
        __syncthreads();
        if (tid < C) {
            const float *g = wy_row(d, tix[tid]) + 2 * d.vd + (int64_t)d.nv * C + 2 * h;
            gam[tid] = tid < L ? g[0] : 0.0f;
            rl[tid] = tid < L ? g[1] : 0.0f;
        }
        chunk_qk<DK>(d, u, kh, tix, L, tid, Qs, Ks);
        for (int x = tid; x < C * DK; x += NT) {
            const int t = x / DK, a = x % DK;
            Ws[t * KS + a] = t < L && a < dk ? wy_row(d, tix[t])[(int64_t)h * dk + a] : 0.0f;
        }
        for (int x = tid; x < C * C; x += NT) {
            const int t = x / C, i = x % C;
            Pm[t * PS + i] = t < L ? wy_row(d, tix[t])[2 * d.vd + (int64_t)h * C + i] : 0.0f;
        }
        for (int x = tid; x < C * CW; x += NT) {
            const int t = x / CW, jj = x % CW;
            Nn[t * NS + jj] = t < L && c0 + jj < dk ? wy_row(d, tix[t])[d.vd + (int64_t)h * dk + c0 + jj] : 0.0f;
        }
        __syncthreads();
        float ws0[RPW] = {}, qs0[RPW] = {};   // W S0 and Q S0: lane = column, warp w rows w·8 .. +8
        for (int a = 0; a < DK; a += 4) {
            const float s0 = S[a * CW + lane], s1 = S[(a + 1) * CW + lane], s2 = S[(a + 2) * CW + lane], s3 = S[(a + 3) * CW + lane];
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                const float4 wv = *reinterpret_cast<const float4 *>(Ws + (w * RPW + r) * KS + a);
                const float4 qv = *reinterpret_cast<const float4 *>(Qs + (w * RPW + r) * KS + a);
                ws0[r] += wv.x * s0 + wv.y * s1 + wv.z * s2 + wv.w * s3;
                qs0[r] += qv.x * s0 + qv.y * s1 + qv.z * s2 + qv.w * s3;
            }
        }
#pragma unroll
        for (int r = 0; r < RPW; r++) {   // n = U − W S0 (this thread's own elements)
            const int t = w * RPW + r;
            Nn[t * NS + lane] -= ws0[r];
            qs0[r] *= gam[t];
        }
        __syncthreads();
        chunk_finish<DK>(d, Ks, Pm, Nn, gam, rl, tix, L, qs0, S, out, os, h, c0, lane, w);
        const int sc = snap[tix[L - 1]];
        if (sc >= 0) {
            __syncthreads();
            slab_io<DK>(S, d.snap + (int64_t)sc * d.per_seq + hoff, dk, c0, tid, false);
        }
        p += L;
    }
    __syncthreads();
    slab_io<DK>(S, Sg, dk, c0, tid, false);
}

// The one-kernel form: per chunk A and P, the right-hand side β (v − γ S0ᵀk), the
// solve for n (a warp's own 4 columns, 8 lanes sharing a row's sum), the rest as above.
template <int DK>
__global__ void __launch_bounds__(NT) dn_chunk1(th_cu_dn d, const float *u, const float *bd, int n, const int32_t *seq_list,
                                                const int32_t *ord, const int32_t *off, const int32_t *ch_len,
                                                const int32_t *ch_off, const int32_t *snap, float *out, int64_t os) {
    pdl_begin();
    constexpr int KS = DK + 4, RPW = C / (NT / 32);
    const int li = blockIdx.x, s = seq_list[li];
    if (s < 0) return;
    const int h = blockIdx.y, c0 = blockIdx.z * CW, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int dk = d.dk, kh = d.repeat ? h % d.nk : h / d.ratio;
    const int t0 = off[li], t1 = li + 1 < n ? off[li + 1] : n;
    extern __shared__ float4 smem4[];
    double *cum = reinterpret_cast<double *>(smem4);
    float *Ks = reinterpret_cast<float *>(cum + C), *Qs = Ks + C * KS, *S = Qs + C * KS, *Am = S + DK * CW, *Pm = Am + C * PS,
          *Nn = Pm + C * PS, *gam = Nn + C * NS, *bet = gam + C, *rl = bet + C;
    int *tix = reinterpret_cast<int *>(rl + C);
    const int64_t hoff = d.layer_off + d.conv_n + (int64_t)h * dk * dk;
    float *Sg = d.cur + (int64_t)s * d.per_seq + hoff;
    slab_io<DK>(S, Sg, dk, c0, tid, true);
    for (int p = t0, ci = ch_off[li]; p < t1; ci++) {
        const int L = ch_len[ci];
        __syncthreads();
        if (tid < C) tix[tid] = tid < L ? ord[p + tid] : 0;
        __syncthreads();
        if (tid < 32) chunk_gates(bd, d.nv, h, tix, L, tid, cum, bet, gam);
        chunk_qk<DK>(d, u, kh, tix, L, tid, Qs, Ks);
        for (int x = tid; x < C * CW; x += NT) {
            const int t = x / CW, jj = x % CW;
            Nn[t * NS + jj] = t < L && c0 + jj < dk ? u[(int64_t)tix[t] * d.cd + 2 * d.kd + (int64_t)h * dk + c0 + jj] : 0.0f;
        }
        __syncthreads();
        if (tid < C) rl[tid] = tid < L ? cexp(cum[L - 1] - cum[tid]) : 0.0f;
        chunk_ap<DK>(Ks, Qs, cum, bet, tid, Am, Pm);
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
        for (int r = 0; r < RPW; r++) {
            const int t = w * RPW + r;
            Nn[t * NS + lane] = bet[t] * (Nn[t * NS + lane] - gam[t] * ks0[r]);
            qs0[r] *= gam[t];
        }
        __syncthreads();
        {
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
        chunk_finish<DK>(d, Ks, Pm, Nn, gam, rl, tix, L, qs0, S, out, os, h, c0, lane, w);
        const int sc = snap[tix[L - 1]];
        if (sc >= 0) {
            __syncthreads();
            slab_io<DK>(S, d.snap + (int64_t)sc * d.per_seq + hoff, dk, c0, tid, false);
        }
        p += L;
    }
    __syncthreads();
    slab_io<DK>(S, Sg, dk, c0, tid, false);
}

// A launch with dynamic shared memory over the default 48 KiB (the attribute set
// once per kernel) and launch_k's programmatic dependent launch.
template <typename... KArgs, typename... Args>
void launch_smem(bool &attr_set, void (*kernel)(KArgs...), dim3 grid, size_t bytes, cudaStream_t st, Args... args) {
    if (!attr_set) {
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        attr_set = true;
    }
    launch_ks(kernel, grid, dim3(NT), bytes, st, args...);
}

template <int DK>
void chunk_launch(const th_cu_dn *d, const float *u, const float *bd, const th_cu_dn_batch *b, float *out, int64_t os,
                  bool wy, cudaStream_t st) {
    static bool set_wy = false, set_state = false, set_one = false;
    const int nl = b->n < b->n_seq ? b->n : b->n_seq;
    const dim3 grid((unsigned)nl, (unsigned)d->nv, (unsigned)((d->dk + CW - 1) / CW));
    if (wy) {
        launch_smem(set_wy, dn_wy<DK>, dim3((unsigned)b->n_chunk, (unsigned)d->nv), wy_smem<DK>::bytes, st, *d, u, bd, b->ord,
                    b->ch_start, b->ch_len);
        launch_smem(set_state, dn_chunk_state<DK>, grid, state_smem<DK>::bytes, st, *d, u, b->n, b->list, b->ord, b->off,
                    b->ch_len, b->ch_off, b->snap, out, os);
    } else {
        launch_smem(set_one, dn_chunk1<DK>, grid, one_smem<DK>::bytes, st, *d, u, bd, b->n, b->list, b->ord, b->off, b->ch_len,
                    b->ch_off, b->snap, out, os);
    }
}

}  // namespace

extern "C" bool th_cu_dn_chunk(const th_cu_dn *d, const float *u, const float *bd, const th_cu_dn_batch *b, float *out,
                               int64_t os, bool wy, cudaStream_t st) {
    if (b->n <= 0) return true;
    if (wy && !d->wy) return false;
    if (d->dk <= 64) chunk_launch<64>(d, u, bd, b, out, os, wy, st);
    else if (d->dk <= 128) chunk_launch<128>(d, u, bd, b, out, os, wy, st);
    else return false;
    return true;
}
