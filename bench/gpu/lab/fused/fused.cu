// fused.cu — the whole forward pass of one decode token of one sequence as one
// persistent kernel (backend.h, th_cu_fused). A graph of ~9 small kernels a
// layer spends most of a small model's step between kernels (135M: ~270
// launches, ~3 µs each); here one block per SM runs every phase and the phases
// meet at grid-wide barriers:
//   A  stage x (layer 0: the embedding row) RMS-normalized; Q/K/V rows (+ bias)
//   B  per (head, split) warp: q/k norm + rope of this token (layer_ops.cuh),
//      the leader of a KV group stores K/V, online softmax over its positions,
//      the last split of a head merges (an atomic counter per head)
//   C  stage the attention output; x += Wo · att (+ bo)
//   D  stage x normalized; ff[i] = act(gate_i · h) · (up_i · h)
//   E  stage ff; x += Wdown · ff
// and finally the output head on the normalized x. Activations written by other
// blocks during the launch are read through L2 (__ldcg); weights through the
// read-only path. Each block stages a phase's input in shared memory as floats
// and, for split matrices, in the q8 form of backend.h, quantized exactly as
// norm.cu / q8.cuh do, so the products equal the unfused GEMV's up to the order
// of float additions.
#include "cuda/layer_ops.cuh"
#include "cuda/q8.cuh"
#include "cuda/split.cuh"
#include <math.h>

namespace {

constexpr int FT = 256;       // threads a block (255 registers a thread: 512 threads spilled ~2 KB each)
constexpr int FW = FT / 32;   // warps a block
constexpr int U = 2;          // 16-byte weight loads a lane and row in flight (× RW rows)
constexpr int HEAD_MAX = 256; // widest head

// The block's shared memory: the staged vector (floats and q8), a reduction
// scratch, and per warp a q and a k head buffer.
struct Stage {
    float *f;
    int8_t *q;
    float *d;
    int32_t *s;
    float *red;
    float *head;
};

__host__ __device__ constexpr size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

__host__ __device__ inline size_t stage_bytes(int64_t max_k) {
    return align16((size_t)max_k * 4) + align16((size_t)max_k) + 2 * align16((size_t)max_k / 32 * 4) +
           align16(FW * 4) + (size_t)(2 * HEAD_MAX + 2 * FW + FW * HEAD_MAX) * 4;
}

__device__ Stage carve(unsigned char *p, int64_t max_k) {
    Stage s;
    s.f = (float *)p; p += align16((size_t)max_k * 4);
    s.q = (int8_t *)p; p += align16((size_t)max_k);
    s.d = (float *)p; p += align16((size_t)max_k / 32 * 4);
    s.s = (int32_t *)p; p += align16((size_t)max_k / 32 * 4);
    s.red = (float *)p; p += align16(FW * 4);
    s.head = (float *)p;
    return s;
}

// ---- grid barrier: a counter zeroed before the launch; barrier k waits for k·blocks arrivals ----
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned ld_relaxed(const unsigned *p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

// With f.prof, block 0 notes the time at every phase boundary (TH_GPU_FUSED_PROF):
// prof[k] when it leaves barrier k (k = 0: the start), prof[5·n_layer + 1 + k]
// when it has finished its own work of the phase before barrier k.
__device__ __forceinline__ void prof_mark(unsigned long long *prof, unsigned idx) {
    if (prof && blockIdx.x == 0 && threadIdx.x == 0) prof[idx] = globaltimer();
}

// The arrival: a fence and an atomic add (waits for its reply), or with
// TH_CU_FUSED_RED_BARRIER a release-add (no reply; the release orders the
// block's writes, made visible to thread 0 by the __syncthreads, before it).
__device__ __forceinline__ void grid_sync(const th_cu_fused &f, unsigned &target) {
    unsigned *bar = f.barrier;
    target += gridDim.x;
    __syncthreads();
    prof_mark(f.prof, 5 * f.n_layer + 1 + target / gridDim.x);
    if (threadIdx.x == 0) {
        if (f.opt & TH_CU_FUSED_RED_BARRIER) {  // relaxed polling (no L1 invalidation a poll), one acquire fence
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" : : "l"(bar) : "memory");
            while (ld_relaxed(bar) < target) {}
            asm volatile("fence.acq_rel.gpu;" : : : "memory");
        } else {
            __threadfence();
            atomicAdd(bar, 1u);
            while (ld_acquire(bar) < target) {}
            __threadfence();
        }
    }
    __syncthreads();
    prof_mark(f.prof, target / gridDim.x);
}

// ---- L2 prefetch (TH_CU_FUSED_PREFETCH): weights never depend on the step,
// so a block asks for its next phase's first rows before it waits at a barrier ----
__device__ __forceinline__ void prefetch_span(const void *p, int64_t bytes) {
    const uintptr_t end = (uintptr_t)p + (uintptr_t)bytes;
    for (uintptr_t a = ((uintptr_t)p & ~(uintptr_t)127) + 128 * (uintptr_t)threadIdx.x; a < end; a += 128 * FT)
        asm volatile("prefetch.global.L2 [%0];" : : "l"(a));
}

// Rows [r0, r0 + n) of w (clipped), quants and scales, for the layouts fused.cu multiplies.
__device__ void prefetch_rows(const th_cu_mat &w, int64_t r0, int64_t n) {
    if (r0 >= w.rows) return;
    n = min(n, w.rows - r0);
    int64_t qb = (int64_t)w.row_bytes, sb = 0;
    if (w.layout == TH_CU_SPLIT && w.type != TH_Q4_0 && w.type != TH_Q8_0 && w.type != TH_Q4_K) return;
    if (w.layout == TH_CU_SPLIT) {
        qb = w.type == TH_Q8_0 ? w.K : w.K / 2;
        sb = w.type == TH_Q4_K ? w.K / 256 * 20 : w.K / 32 * 2;
    }
    prefetch_span((const char *)w.data + r0 * qb, n * qb);
    if (sb) prefetch_span((const char *)w.scales + r0 * sb, n * sb);
}

__device__ __forceinline__ float block_sum(float v, float *red) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = 0.0f;
#pragma unroll
    for (int i = 0; i < FW; i++) t += red[i];
    return t;
}

// ---- staging ----
// x (K floats, written during this launch) into the stage's floats.
__device__ __forceinline__ void stage_load(const float *x, int64_t K, Stage sm) {
    for (int64_t i = 4 * (int64_t)threadIdx.x; i < K; i += 4 * FT)
        *(float4 *)(sm.f + i) = __ldcg((const float4 *)(x + i));
}

// The embedding row of `tok` (times scale) into the stage; block 0 also starts the residual stream x.
__device__ __forceinline__ void stage_embedding(const th_cu_mat &embd, int32_t tok, float scale, int64_t E, float *x, Stage sm) {
    for (int64_t g = threadIdx.x; g < E / 32; g += FT) {
        float v[32];
        dq32_mat(embd, tok, g, v);
#pragma unroll
        for (int j = 0; j < 32; j++) sm.f[g * 32 + j] = v[j] * scale;
    }
    __syncthreads();
    if (blockIdx.x == 0)
        for (int64_t i = threadIdx.x; i < E; i += FT) x[i] = sm.f[i];
}

// The staged floats RMS-normalized with weight w (w NULL: left as they are),
// then their q8 form when q8, as norm.cu's rmsnorm_vec makes it: a thread per
// 4 values (v = x·scale·w), 8 threads a 32-value block (K % 32 == 0, so the
// groups never straddle a warp's active lanes; whole warps past the end stop).
__device__ __forceinline__ void stage_finish(int64_t K, const float *w, float eps, bool q8, Stage sm) {
    __syncthreads();
    const int64_t n4 = K / 4;
    float scale = 1.0f;
    if (w) {
        float ss = 0.0f;
        for (int64_t i = threadIdx.x; i < n4; i += FT) {
            const float4 v = *(const float4 *)(sm.f + 4 * i);
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        scale = 1.0f / sqrtf(block_sum(ss, sm.red) / (float)K + eps);
    }
    const int lane = threadIdx.x & 31;
    for (int64_t base = 0; base < n4; base += FT) {
        if (base + (threadIdx.x & ~31) >= n4) break;  // warp-uniform
        const int64_t i = base + threadIdx.x;
        const bool in = i < n4;
        float4 o = in ? *(const float4 *)(sm.f + 4 * i) : make_float4(0.f, 0.f, 0.f, 0.f);
        if (w && in) {
            const float4 wv = __ldg((const float4 *)w + i);
            o = make_float4(o.x * scale * wv.x, o.y * scale * wv.y, o.z * scale * wv.z, o.w * scale * wv.w);
            *(float4 *)(sm.f + 4 * i) = o;
        }
        if (!q8) continue;
        float am = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
#pragma unroll
        for (int m = 1; m < 8; m <<= 1) am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, m));
        const float id = am != 0.0f ? 127.0f / am : 0.0f;
        const int q0 = __float2int_rn(o.x * id), q1 = __float2int_rn(o.y * id), q2 = __float2int_rn(o.z * id),
                  q3 = __float2int_rn(o.w * id);
        int sum = q0 + q1 + q2 + q3;
#pragma unroll
        for (int m = 1; m < 8; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
        if (in) {
            *(char4 *)(sm.q + 4 * i) = make_char4((signed char)q0, (signed char)q1, (signed char)q2, (signed char)q3);
            if ((lane & 7) == 0) { sm.d[i / 8] = q8_scale_f16(am); sm.s[i / 8] = sum; }
        }
    }
    __syncthreads();
}

// ---- weight rows · the staged vector (a warp) ----

// R rows at once (rows[k] of matrix *m[k], k < nr; all of width K): every
// load of all R rows is issued before the first product, so a warp keeps R·U
// 16-byte loads a lane in flight. Results out[k], summed over the warp.
template <typename KS, int R>
__device__ __forceinline__ void dot_rows_q8(const th_cu_mat *const (&m)[R], const int64_t (&rows)[R], int nr,
                                            Stage sm, int lane, float (&out)[R]) {
    const int64_t nb = m[0]->K / 32;
    float acc[R];
#pragma unroll
    for (int k = 0; k < R; k++) acc[k] = 0.0f;
    for (int64_t b0 = lane; b0 < nb; b0 += 32 * U) {
        KS v[R][U];
#pragma unroll
        for (int k = 0; k < R; k++)
#pragma unroll
            for (int u = 0; u < U; u++)
                if (k < nr && b0 + 32 * u < nb) v[k][u].load(*m[k], rows[k], b0 + 32 * u);
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t b = b0 + 32 * u;
            if (b < nb) {
                const int4 *xa = (const int4 *)(sm.q + b * 32);
                const int4 a0 = xa[0], a1 = xa[1];
                const float xd = sm.d[b];
                const int xs = KS::uses_sum ? sm.s[b] : 0;
#pragma unroll
                for (int k = 0; k < R; k++)
                    if (k < nr) acc[k] += v[k][u].dot(a0, a1, xd, xs);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < R; k++) out[k] = warp_sum(acc[k]);
}

template <uint32_t T>
__device__ __forceinline__ void unpack8(const uint4 *v, float f[8]) {
    if (T == TH_F32) {
        const float4 a = *(const float4 *)&v[0], b = *(const float4 *)&v[1];
        f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w; f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
        return;
    }
    const uint32_t u[4] = { v[0].x, v[0].y, v[0].z, v[0].w };
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (T == TH_F16) {
            const float2 q = __half22float2(*(const __half2 *)&u[k]);
            f[2 * k] = q.x; f[2 * k + 1] = q.y;
        } else {
            f[2 * k] = __uint_as_float(u[k] << 16);
            f[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
        }
    }
}

template <uint32_t T, int R>
__device__ __forceinline__ void dot_rows_float(const th_cu_mat *const (&m)[R], const int64_t (&rows)[R], int nr,
                                               Stage sm, int lane, float (&out)[R]) {
    constexpr int V = T == TH_F32 ? 2 : 1;  // 16-byte loads per 8 weights
    const int64_t n8 = m[0]->K / 8;
    const uint4 *wp[R];
#pragma unroll
    for (int k = 0; k < R; k++)
        wp[k] = k < nr ? (const uint4 *)((const uint8_t *)m[k]->data + rows[k] * m[k]->row_bytes) : nullptr;
    float acc[R];
#pragma unroll
    for (int k = 0; k < R; k++) acc[k] = 0.0f;
    for (int64_t c0 = lane; c0 < n8; c0 += 32 * U) {
        uint4 v[R][U][V];
#pragma unroll
        for (int k = 0; k < R; k++)
#pragma unroll
            for (int u = 0; u < U; u++)
                if (k < nr && c0 + 32 * u < n8)
#pragma unroll
                    for (int j = 0; j < V; j++) v[k][u][j] = __ldg(wp[k] + (c0 + 32 * u) * V + j);
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t c = c0 + 32 * u;
            if (c >= n8) break;
            const float4 a = *(const float4 *)(sm.f + c * 8), b = *(const float4 *)(sm.f + c * 8 + 4);
#pragma unroll
            for (int k = 0; k < R; k++) {
                if (k >= nr) break;
                float f[8];
                unpack8<T>(v[k][u], f);
                acc[k] += f[0] * a.x + f[1] * a.y + f[2] * a.z + f[3] * a.w + f[4] * b.x + f[5] * b.y + f[6] * b.z + f[7] * b.w;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < R; k++) out[k] = warp_sum(acc[k]);
}

__device__ __forceinline__ int64_t grid_warp() { return (int64_t)blockIdx.x * FW + (threadIdx.x >> 5); }
__device__ __forceinline__ int64_t grid_warps() { return (int64_t)gridDim.x * FW; }

constexpr int RW = 4;  // rows a warp multiplies at once

// Row products of one weight type (with_dot picks one per matrix).
template <typename KS>
struct DotQ8 {
    template <int R>
    static __device__ __forceinline__ void rows(const th_cu_mat *const (&m)[R], const int64_t (&r)[R], int nr,
                                                Stage sm, int lane, float (&out)[R]) {
        dot_rows_q8<KS, R>(m, r, nr, sm, lane, out);
    }
};
template <uint32_t T>
struct DotFloat {
    template <int R>
    static __device__ __forceinline__ void rows(const th_cu_mat *const (&m)[R], const int64_t (&r)[R], int nr,
                                                Stage sm, int lane, float (&out)[R]) {
        dot_rows_float<T, R>(m, r, nr, sm, lane, out);
    }
};

// Whether the row products of D read the staged q8 form (else the floats).
template <typename D> struct ReadsQ8 { static constexpr bool value = false; };
template <typename KS> struct ReadsQ8<DotQ8<KS>> { static constexpr bool value = true; };

// y[r] = W[r]·stage (+ bias[r]) (+ y[r] when acc); RW consecutive rows a warp, spread over the grid.
// y's old value is loaded with the weights (in flight at once).
template <typename D>
__device__ __forceinline__ void matvec_t(const th_cu_mat *__restrict__ wp, const float *bias, Stage sm, float *y,
                                         bool acc) {
    const int lane = threadIdx.x & 31;
    const int64_t nrows = wp->rows;
    const th_cu_mat *m[RW];
#pragma unroll
    for (int k = 0; k < RW; k++) m[k] = wp;
    for (int64_t r0 = grid_warp() * RW; r0 < nrows; r0 += grid_warps() * RW) {
        int64_t rows[RW];
#pragma unroll
        for (int k = 0; k < RW; k++) rows[k] = r0 + k;
        const int nr = (int)min((int64_t)RW, nrows - r0);
        const float old = acc && lane < nr ? __ldcg(y + r0 + lane) : 0.0f;
        float d[RW];
        D::template rows<RW>(m, rows, nr, sm, lane, d);
        if (lane < nr) {
            float v = d[0];
#pragma unroll
            for (int k = 1; k < RW; k++) if (lane == k) v = d[k];
            const int64_t r = r0 + lane;
            if (bias) v += bias[r];
            y[r] = acc ? old + v : v;
        }
    }
}

// The block's rows of matvec_t over w in its first `sweeps` sweeps, and its
// gate/up rows of gate_up_t in the first sweep, into L2.
__device__ void prefetch_matvec(const th_cu_fused &f, const th_cu_mat &w, int sweeps) {
    if (!(f.opt & TH_CU_FUSED_PREFETCH)) return;
    for (int k = 0; k < sweeps; k++) prefetch_rows(w, ((int64_t)k * gridDim.x + blockIdx.x) * FW * RW, FW * RW);
}

__device__ void prefetch_gate_up(const th_cu_fused &f, const th_cu_fused_layer &L) {
    if (!(f.opt & TH_CU_FUSED_PREFETCH)) return;
    const int64_t i0 = (int64_t)blockIdx.x * FW * (RW / 2);
    prefetch_rows(L.gate, i0, FW * (RW / 2));
    prefetch_rows(L.up, L.up_row0 + i0, FW * (RW / 2));
}

// ff[i] = act(gate row i · h) · (up row up_row0 + i · h) (gate and up of one type), RW/2 pairs a warp.
template <typename D>
__device__ __forceinline__ void gate_up_t(const th_cu_fused_layer *__restrict__ L, int act, Stage sm, float *ff) {
    constexpr int P = RW / 2;
    const int lane = threadIdx.x & 31;
    const int64_t F = L->F, up0 = L->up_row0;
    const th_cu_mat *m[RW];
#pragma unroll
    for (int k = 0; k < RW; k++) m[k] = k < P ? &L->gate : &L->up;
    for (int64_t i0 = grid_warp() * P; i0 < F; i0 += grid_warps() * P) {
        const int np = (int)min((int64_t)P, F - i0);
        int64_t rows[RW];
#pragma unroll
        for (int k = 0; k < P; k++) { rows[k] = i0 + min(k, np - 1); rows[P + k] = up0 + i0 + min(k, np - 1); }
        float d[RW];
        D::template rows<RW>(m, rows, RW, sm, lane, d);
#pragma unroll
        for (int k = 0; k < P; k++)
            if (lane == k && k < np) ff[i0 + k] = glu_fn(d[k], d[P + k], act);
    }
}

// The output head may have another type than the layers (Q6_K heads on Q4_0
// models): its row products are picked by a switch, in a function of its own.
__device__ __noinline__ void head_matvec(const th_cu_mat *w, Stage sm, float *y) {
    if (w->layout == TH_CU_SPLIT) {
        switch (w->type) {
        case TH_Q4_0: matvec_t<DotQ8<KSub<TH_Q4_0>>>(w, nullptr, sm, y, false); return;
        case TH_Q8_0: matvec_t<DotQ8<KSub<TH_Q8_0>>>(w, nullptr, sm, y, false); return;
        case TH_Q4_K: matvec_t<DotQ8<KSub<TH_Q4_K>>>(w, nullptr, sm, y, false); return;
        case TH_Q5_K: matvec_t<DotQ8<KSub<TH_Q5_K>>>(w, nullptr, sm, y, false); return;
        case TH_Q6_K: matvec_t<DotQ8<KSub<TH_Q6_K>>>(w, nullptr, sm, y, false); return;
        default: return;
        }
    }
    switch (w->type) {
    case TH_F32: matvec_t<DotFloat<TH_F32>>(w, nullptr, sm, y, false); return;
    case TH_F16: matvec_t<DotFloat<TH_F16>>(w, nullptr, sm, y, false); return;
    case TH_BF16: matvec_t<DotFloat<TH_BF16>>(w, nullptr, sm, y, false); return;
    default: return;
    }
}

// ---- attention of this token: one block per (head, split) ----
__device__ __forceinline__ float ld_cache(const char *row, int d, bool f16) {
    return f16 ? __half2float(__ushort_as_half(__ldcg((const unsigned short *)row + d))) : __ldcg((const float *)row + d);
}

// Positions [j0, j0 + ng) into a warp's state: K and V of cached positions from
// the cache (this layer's part of the sequence's blocks), position p's from the
// buffers.
template <int PL, int G>
__device__ __forceinline__ void attend_step(const th_cu_attn &at, const th_cu_kv &kv, const int32_t *table, int64_t lay,
                                            int hd, int hdv, int kvh, int32_t p, const float (&q)[PL], const float *kb,
                                            const float *vnew, int32_t j0, int ng, int lane, WarpState<PL> &st) {
    const bool f16 = kv.f16;
    const int64_t esz = f16 ? 2 : 4;
    float k[G][PL], v[G][PL];
#pragma unroll
    for (int g = 0; g < G; g++) {
        const int32_t j = j0 + g;
        const bool cached = g < ng && j != p, own = g < ng && j == p;
        const char *kr = nullptr, *vr = nullptr;
        if (cached) {
            const char *base = (const char *)kv.pool + (int64_t)table[j / kv.block] * kv.block_bytes;
            const int64_t slot = j % kv.block;
            kr = base + (lay + slot * kv.k_dim + (int64_t)kvh * hd) * esz;
            vr = base + (lay + (int64_t)kv.block * kv.k_dim + slot * kv.v_dim + (int64_t)kvh * hdv) * esz;
        }
#pragma unroll
        for (int i = 0; i < PL; i++) {
            const int d = lane + 32 * i;
            k[g][i] = v[g][i] = 0.0f;
            if (own) {
                if (d < hd) k[g][i] = kb[d];
                if (d < hdv) v[g][i] = round_kv(__ldcg(vnew + d), f16);
            } else if (cached) {
                if (d < hd) k[g][i] = ld_cache(kr, d, f16);
                if (d < hdv) v[g][i] = ld_cache(vr, d, f16);
            }
        }
    }
    warp_step<PL, G>(at, q, k, v, ng, st);
}

// Shared memory of one attention unit (inside Stage.head): q, k, and per warp
// its (m, l) and unnormalized output.
struct AttnBuf {
    float *q, *k, *wm, *wl, *wacc;
    __device__ explicit AttnBuf(float *p) : q(p), k(p + HEAD_MAX), wm(p + 2 * HEAD_MAX), wl(p + 2 * HEAD_MAX + FW),
                                            wacc(p + 2 * HEAD_MAX + 2 * FW) {}
};

// The block's split result (thread d holds output dim d): the head's output
// when the head has one split; else published, and the last split of the head
// to finish merges them all in one pass (a running max, the sums rescaled as it
// grows). The counter's add is acquire-release (thread 0, after the block's
// barrier), so no separate fences: the partials written before it are visible to
// whoever sees its count, and the last block sees every earlier split's.
__device__ __forceinline__ void finish_split(const th_cu_fused &f, int h, int sp, int ns, float m, float l, float acc) {
    const th_cu_attn &a = f.at;
    const int hdv = a.head_dim_v, tid = threadIdx.x;
    float *o = f.att + (int64_t)h * hdv;
    if (ns == 1) {
        if (tid < hdv) o[tid] = l > 0.0f ? acc / l : 0.0f;
        return;
    }
    const int64_t rec = hdv + 2;
    float *pp = a.partial + ((int64_t)h * a.n_split + sp) * rec;
    if (tid == 0) { pp[0] = m; pp[1] = l; }
    if (tid < hdv) pp[2 + tid] = acc;
    __syncthreads();
    __shared__ int s_last;
    if (tid == 0) {
        unsigned old;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(a.counter + h) : "memory");
        s_last = old == (unsigned)ns - 1;
    }
    __syncthreads();
    if (!s_last) return;
    if (tid == 0) a.counter[h] = 0;  // ready for the next layer (the grid barrier orders it)
    const float *p0 = a.partial + (int64_t)h * a.n_split * rec;
    float M = -INFINITY, L = 0.0f, acc2 = 0.0f;
#pragma unroll 4
    for (int s = 0; s < ns; s++) {
        const float ms = __ldcg(p0 + s * rec), ls = __ldcg(p0 + s * rec + 1);
        const float as = tid < hdv ? __ldcg(p0 + s * rec + 2 + tid) : 0.0f;
        if (ms == -INFINITY) continue;
        const float nm = fmaxf(M, ms), co = M == -INFINITY ? 0.0f : expf(M - nm), cn = expf(ms - nm);
        L = L * co + ls * cn;
        acc2 = acc2 * co + as * cn;
        M = nm;
    }
    if (tid < hdv) o[tid] = L > 0.0f ? acc2 / L : 0.0f;
}

// One (head, split) unit; G positions a warp-step (TH_CU_FUSED_ATTN4: 4, which
// keeps all 8 warps busy on a 32-position chunk and the step's code small).
template <int PL, int G>
__device__ __forceinline__ void attention_unit(const th_cu_fused &f, const th_cu_fused_layer &L, int il, int h, int sp,
                                               int ns, int32_t chunk, int32_t p, int32_t sq, Stage sm) {
    const th_cu_attn &a = f.at;
    const th_cu_kv kv = f.kv;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, hd = a.head_dim, hdv = a.head_dim_v;
    const int32_t len = p + 1, first = sp * chunk, end = min(len, first + chunk);
    const int grp = a.n_head / a.n_head_kv, kvh = h / grp;
    AttnBuf buf(sm.head);
    rope_new_token<PL>(f.qkv, L.rope, kv, il, sq, p, h, kvh, end == len, h % grp == 0, buf.q, buf.k, warp, lane);
    __syncthreads();
    float q[PL];
#pragma unroll
    for (int i = 0; i < PL; i++) q[i] = lane + 32 * i < hd ? buf.q[lane + 32 * i] : 0.0f;
    const float *vnew = f.qkv + f.q_w + f.k_w + (int64_t)kvh * hdv;
    const int32_t *table = kv.table + (int64_t)sq * kv.max_blocks;
    const int64_t lay = (int64_t)il * kv.block * (kv.k_dim + kv.v_dim);
    WarpState<PL> st;
#pragma unroll 1
    for (int32_t j0 = first + warp * G; j0 < end; j0 += FW * G)
        attend_step<PL, G>(a, kv, table, lay, hd, hdv, kvh, p, q, buf.k, vnew, j0, min(G, end - j0), lane, st);
    if (lane == 0) { buf.wm[warp] = st.m; buf.wl[warp] = st.l; }
#pragma unroll
    for (int i = 0; i < PL; i++)
        if (lane + 32 * i < hdv) buf.wacc[warp * HEAD_MAX + lane + 32 * i] = st.acc[i];
    __syncthreads();
    float m = -INFINITY, l = 0.0f, acc = 0.0f;
    for (int w = 0; w < FW; w++) m = fmaxf(m, buf.wm[w]);
    for (int w = 0; w < FW; w++) {
        const float c = buf.wl[w] > 0.0f ? expf(buf.wm[w] - m) : 0.0f;
        l += c * buf.wl[w];
        if (threadIdx.x < hdv) acc += c * buf.wacc[w * HEAD_MAX + threadIdx.x];
    }
    finish_split(f, h, sp, ns, m, l, acc);
    __syncthreads();  // the buffers are reused by the block's next unit
}

// This step's splits a head (ns) and positions a split (chunk): they follow the
// sequence's length (known on the device, so a replayed graph still fits it):
// about a block each for the heads' splits, at least 32 positions a split, at
// most the plan's n_split (partial storage).
__device__ __forceinline__ void attn_splits(const th_cu_fused &f, int32_t p, int &ns, int32_t &chunk) {
    const int n_head = f.at.n_head;
    const int32_t len = p + 1;
    ns = (int)min((int64_t)f.at.n_split, max((int64_t)1, ((int64_t)gridDim.x + n_head - 1) / n_head));
    ns = min(ns, max(1, len / 32));
    chunk = (len + ns - 1) / ns;
    ns = (len + chunk - 1) / chunk;
}

__device__ void attention(const th_cu_fused &f, const th_cu_fused_layer &L, int il, int32_t p, int32_t sq,
                          Stage sm) {
    const int n_head = f.at.n_head;
    int ns;
    int32_t chunk;
    attn_splits(f, p, ns, chunk);
    const int width = max(f.at.head_dim, f.at.head_dim_v);
    const bool g4 = f.opt & TH_CU_FUSED_ATTN4;
    for (int u = blockIdx.x; u < n_head * ns; u += gridDim.x) {
        const int h = u % n_head, sp = u / n_head;
        if (width <= 64) {
            if (g4) attention_unit<2, 4>(f, L, il, h, sp, ns, chunk, p, sq, sm);
            else attention_unit<2, 16>(f, L, il, h, sp, ns, chunk, p, sq, sm);
        } else if (width <= 128) {
            if (g4) attention_unit<4, 4>(f, L, il, h, sp, ns, chunk, p, sq, sm);
            else attention_unit<4, 8>(f, L, il, h, sp, ns, chunk, p, sq, sm);
        } else {
            attention_unit<8, 4>(f, L, il, h, sp, ns, chunk, p, sq, sm);
        }
    }
}

// One cached K or V row of the block's first attention unit (thread t:
// position first + t/2, K when t is even, V when odd; up to 128 positions):
// its cache block is looked up when phase A starts, the row is prefetched into
// L2 when phase A's own work is done (the lookup's load has landed by then).
struct KvAhead {
    int32_t blk = -1, j = 0, kvh = 0;
};

__device__ __forceinline__ KvAhead kv_ahead(const th_cu_fused &f, int32_t p, int32_t sq) {
    KvAhead a;
    if (!(f.opt & TH_CU_FUSED_PREFETCH)) return a;
    int ns;
    int32_t chunk;
    attn_splits(f, p, ns, chunk);
    const int n_head = f.at.n_head, u = blockIdx.x;
    if (u >= n_head * ns) return a;
    const int32_t j = (u / n_head) * chunk + (int32_t)(threadIdx.x >> 1);
    if (j >= min(p + 1, (u / n_head + 1) * chunk) || j == p) return a;
    a.j = j;
    a.kvh = (u % n_head) / (n_head / f.at.n_head_kv);
    a.blk = __ldg(f.kv.table + (int64_t)sq * f.kv.max_blocks + j / f.kv.block);
    return a;
}

__device__ __forceinline__ void kv_prefetch(const th_cu_fused &f, const KvAhead &a, int il) {
    if (a.blk < 0) return;
    const th_cu_kv &kv = f.kv;
    const bool v = threadIdx.x & 1;
    const int64_t esz = kv.f16 ? 2 : 4, w = v ? f.at.head_dim_v : f.at.head_dim;
    const uintptr_t row = (uintptr_t)(kv_row_in(kv, a.blk, il, a.j, v) + a.kvh * w * esz);
    for (uintptr_t l = row & ~(uintptr_t)127; l < row + (uintptr_t)(w * esz); l += 128)
        asm volatile("prefetch.global.L2 [%0];" : : "l"(l));
}

template <typename D>
__device__ __forceinline__ void layer(const th_cu_fused &f, int il, int32_t tok, int32_t p, int32_t sq, Stage sm,
                      unsigned &target) {
    const th_cu_fused_layer &L = f.layers[il];
    // A: norm + Q/K/V
    const KvAhead ahead = kv_ahead(f, p, sq);
    if (il == 0) stage_embedding(f.embd, tok, f.embd_scale, f.E, f.x, sm);
    else stage_load(f.x, f.E, sm);
    stage_finish(f.E, L.attn_norm, f.eps, ReadsQ8<D>::value, sm);
    for (int k = 0; k < L.n_qkv; k++)
        matvec_t<D>(&L.qkv[k], L.qkv_bias ? L.qkv_bias + L.qkv_off[k] : nullptr, sm, f.qkv + L.qkv_off[k], false);
    kv_prefetch(f, ahead, il);
    grid_sync(f, target);
    // B: rope, KV store, attention
    attention(f, L, il, p, sq, sm);
    prefetch_matvec(f, L.wo, 1);
    grid_sync(f, target);
    // C: output projection + residual
    stage_load(f.att, f.att_w, sm);
    stage_finish(f.att_w, nullptr, 0.0f, ReadsQ8<D>::value, sm);
    matvec_t<D>(&L.wo, L.bo, sm, f.x, true);
    prefetch_gate_up(f, L);
    grid_sync(f, target);
    // D: norm + gate/up + activation
    stage_load(f.x, f.E, sm);
    stage_finish(f.E, L.ffn_norm, f.eps, ReadsQ8<D>::value, sm);
    gate_up_t<D>(&L, f.act, sm, f.ff);
    prefetch_matvec(f, L.down, 1);
    grid_sync(f, target);
    // E: down + residual
    stage_load(f.ff, L.F, sm);
    stage_finish(L.F, nullptr, 0.0f, ReadsQ8<D>::value, sm);
    matvec_t<D>(&L.down, nullptr, sm, f.x, true);
    if (il + 1 < f.n_layer)
        for (int k = 0; k < f.layers[il + 1].n_qkv; k++) prefetch_matvec(f, f.layers[il + 1].qkv[k], 1);
    else
        prefetch_matvec(f, f.out, 4);
    grid_sync(f, target);
}

// f: the arguments, by value (read through the constant cache); n_out: 0 or 1 logits rows. D:
// the row product of every layer matrix (one instantiation per weight type,
// so each is register-allocated for its own loop).
template <typename D>
__global__ void __launch_bounds__(FT, 1) fused_decode(const __grid_constant__ th_cu_fused f, int n_out) {
    extern __shared__ __align__(16) unsigned char smem[];
    Stage sm = carve(smem, f.max_k);
    unsigned target = 0;
    prof_mark(f.prof, 0);
    const int32_t tok = f.tok[0], p = f.pos[0], sq = f.seq[0];
    for (int il = 0; il < f.n_layer; il++) layer<D>(f, il, tok, p, sq, sm, target);
    if (n_out) {
        stage_load(f.x, f.E, sm);
        stage_finish(f.E, f.out_norm, f.eps, f.out.layout == TH_CU_SPLIT, sm);
        head_matvec(&f.out, sm, f.logits);
    }
    __syncthreads();
    prof_mark(f.prof, target / gridDim.x + 1);
}


typedef void (*fused_kernel)(const th_cu_fused, int);

// The instantiation for the layers' weight type (NULL: none).
fused_kernel kernel_for(uint32_t type, int32_t layout) {
    if (layout == TH_CU_SPLIT) {
        switch (type) {
        case TH_Q4_0: return fused_decode<DotQ8<KSub<TH_Q4_0>>>;
        case TH_Q8_0: return fused_decode<DotQ8<KSub<TH_Q8_0>>>;
        case TH_Q4_K: return fused_decode<DotQ8<KSub<TH_Q4_K>>>;
        default: return nullptr;
        }
    }
    switch (type) {
    case TH_F32: return fused_decode<DotFloat<TH_F32>>;
    case TH_F16: return fused_decode<DotFloat<TH_F16>>;
    default: return nullptr;
    }
}

bool float_mat_ok(const th_cu_mat *w) {
    return w->row_bytes % 16 == 0 && ((uintptr_t)w->data & 15) == 0;
}

}  // namespace

extern "C" bool th_cu_fused_layer_ok(const th_cu_mat *w) {
    return w->K % 32 == 0 && kernel_for(w->type, w->layout) && (w->layout == TH_CU_SPLIT || float_mat_ok(w));
}

extern "C" bool th_cu_fused_head_ok(const th_cu_mat *w) {
    if (w->K % 32) return false;
    if (w->layout == TH_CU_SPLIT)
        return w->type == TH_Q4_0 || w->type == TH_Q8_0 || w->type == TH_Q4_K || w->type == TH_Q5_K || w->type == TH_Q6_K;
    return (w->type == TH_F32 || w->type == TH_F16 || w->type == TH_BF16) && float_mat_ok(w);
}

extern "C" int th_cu_fused_blocks(const th_cu_mat *layer_type, int64_t max_k, int sm_count, size_t *smem) {
    fused_kernel k = kernel_for(layer_type->type, layer_type->layout);
    *smem = stage_bytes(max_k);
    if (!k || cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)*smem)) {
        cudaGetLastError();
        return 0;
    }
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, FT, *smem) || per_sm < 1) {
        cudaGetLastError();
        return 0;
    }
    return sm_count;  // one block per SM: every block is resident, so the barriers cannot deadlock
}

extern "C" int32_t th_cu_fused_splits(int blocks, int32_t n_head, int64_t max_len, size_t partial_cap, int32_t hdv) {
    // the kernel picks the split per step (attention()); this is its most: a block per (head, split)
    int64_t s = ((int64_t)blocks + n_head - 1) / n_head, cap = (int64_t)(partial_cap / ((size_t)n_head * (size_t)(hdv + 2)));
    int64_t most = (max_len + 31) / 32;
    if (s > most) s = most;
    if (s > cap) s = cap;
    return (int32_t)(s < 1 ? 1 : s);
}

extern "C" void th_cu_fused_decode(const th_cu_mat *layer_type, const th_cu_fused *f, int n_out, int blocks,
                                   size_t smem, cudaStream_t st) {
    cudaMemsetAsync(f->barrier, 0, sizeof(unsigned), st);
    kernel_for(layer_type->type, layer_type->layout)<<<blocks, FT, smem, st>>>(*f, n_out);
}
