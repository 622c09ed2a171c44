// gemv.cu — matrix × few-vectors products for decode and small batches:
// y[t][r] (+)= W[r] · x[t] for t < n (tokens processed NT at a time so each
// weight is read once per NT tokens). One warp per weight row; lanes walk the
// row in 16-byte coalesced loads.
//   Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS (SPLIT layout): int8 dot products (dp4a) against q8 activations.
//   F32, F16, BF16: fp32 math on 16-byte vector loads.
//   every other type: decode 32 weights at a time (common.cuh) and fp32 math.
#include "cuda/common.cuh"
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

// Q4_0-order nibbles · activations (the 8 dp4a of a 32-weight sub-block).
__device__ __forceinline__ int dot_nibbles(uint4 q, int4 a0, int4 a1) {
    int s = __dp4a((int)(q.x & 0x0f0f0f0f), a0.x, 0);
    s = __dp4a((int)(q.y & 0x0f0f0f0f), a0.y, s);
    s = __dp4a((int)(q.z & 0x0f0f0f0f), a0.z, s);
    s = __dp4a((int)(q.w & 0x0f0f0f0f), a0.w, s);
    s = __dp4a((int)((q.x >> 4) & 0x0f0f0f0f), a1.x, s);
    s = __dp4a((int)((q.y >> 4) & 0x0f0f0f0f), a1.y, s);
    s = __dp4a((int)((q.z >> 4) & 0x0f0f0f0f), a1.z, s);
    return __dp4a((int)((q.w >> 4) & 0x0f0f0f0f), a1.w, s);
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

// ---- Q8_0 split: 32 bytes of quants (two 16-byte loads) per 32-block ----
template <int RPW>
__device__ __forceinline__ void q8_load(const int4 *wq, const __half *wd, int64_t nb, int nr, int64_t b0,
                                        int4 (&v0)[RPW][U], int4 (&v1)[RPW][U], float (&d)[RPW][U]) {
#pragma unroll
    for (int u = 0; u < U; u++) {
        int64_t b = b0 + u * 32;
#pragma unroll
        for (int r = 0; r < RPW; r++)
            if (b < nb && r < nr) {
                v0[r][u] = __ldg(wq + 2 * (r * nb + b));
                v1[r][u] = __ldg(wq + 2 * (r * nb + b) + 1);
                d[r][u] = __half2float(wd[r * nb + b]);
            }
    }
}

template <int NT, int NW, int RPW>
__global__ void __launch_bounds__(NW * 32) gemv_q8_0(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_trigger();
    RowMap<NW, RPW> m;
    float acc[RPW][NT];
#pragma unroll
    for (int r = 0; r < RPW; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    const int64_t nb = w.K / 32;
    const int nr = (int)min((int64_t)RPW, w.rows - m.row0);
    const int4 *wq = (const int4 *)((const int8_t *)w.data + m.row0 * w.K);
    const __half *wd = (const __half *)w.scales + m.row0 * nb;
    int4 v0[RPW][U], v1[RPW][U];
    float d[RPW][U];
    // the first weights are loaded before waiting for the activations
    if (nr > 0) q8_load<RPW>(wq, wd, nb, nr, m.lane, v0, v1, d);
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
#pragma unroll
                    for (int r = 0; r < RPW; r++) {
                        if (r >= nr) break;
                        int s = __dp4a(v0[r][u].x, a0.x, 0);
                        s = __dp4a(v0[r][u].y, a0.y, s); s = __dp4a(v0[r][u].z, a0.z, s); s = __dp4a(v0[r][u].w, a0.w, s);
                        s = __dp4a(v1[r][u].x, a1.x, s); s = __dp4a(v1[r][u].y, a1.y, s); s = __dp4a(v1[r][u].z, a1.z, s); s = __dp4a(v1[r][u].w, a1.w, s);
                        acc[r][t] += d[r][u] * xd * (float)s;
                    }
                }
            }
            if (b0 + 32 * U < nb) q8_load<RPW>(wq, wd, nb, nr, b0 + 32 * U, v0, v1, d);
        }
    }
    finish<NT, RPW>(acc, m.lane, m.row0, w.rows, y, ys, accum);
}

// ---- Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS split: one 32-weight sub-block (16 bytes of 4-bit codes, plus
// 8 bytes of high bits for Q6_K) per lane-step; per-sub-block scales from the
// 256-weight records (split.c). Int8 dot products against q8 activations. ----
template <uint32_t TYPE> struct KSub;

// 5-bit codes (low nibbles + fifth bits H, split.c) · activations.
__device__ __forceinline__ int dot_5bit(uint4 q, uint32_t H, int4 a0, int4 a1) {
    const uint32_t L[4] = { q.x, q.y, q.z, q.w };
    const int A0[4] = { a0.x, a0.y, a0.z, a0.w }, A1[4] = { a1.x, a1.y, a1.z, a1.w };
    int s = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t lo, hi;
        q5k_codes(L[k], H, k, lo, hi);
        s = __dp4a((int)lo, A0[k], s);
        s = __dp4a((int)hi, A1[k], s);
    }
    return s;
}

__device__ __forceinline__ uint4 ld_quants(const th_cu_mat &w, int64_t r, int64_t b) {
    return __ldg((const uint4 *)((const uint8_t *)w.data + r * (w.K / 2)) + b);
}

// Four 4-bit codes (one per byte) → the IQ4 values (int8), one per byte.
__device__ __forceinline__ int iq4_values(uint32_t n) {
    constexpr uint32_t T0 = 0xbfad9881u, T1 = 0xf6eaddcfu, T2 = 0x26190d01u, T3 = 0x71594535u;  // k_iq4nl[0..15]
    uint32_t sel = (n & 0x7u) | ((n >> 4) & 0x70u) | ((n >> 8) & 0x700u) | ((n >> 12) & 0x7000u);
    uint32_t lo = __byte_perm(T0, T1, sel), hi = __byte_perm(T2, T3, sel);
    uint32_t m = ((n >> 3) & 0x01010101u) * 0xffu;
    return (int)((lo & ~m) | (hi & m));
}

template <uint32_t TYPE> struct KSubIQ4 {  // w = d·value[q]  (IQ4_XS: d·(scale − 32))
    uint4 q;
    float d;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_quants(w, r, b);
        if (TYPE == TH_IQ4_NL) {
            d = __half2float(__ldg((const __half *)w.scales + r * (w.K / 32) + b));
        } else {
            const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 12;
            d = __half2float(__ldg((const __half *)rec)) * (float)(int8_t)__ldg(rec + 4 + (b & 7));
        }
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int) const {
        int s = __dp4a(iq4_values(q.x & 0x0f0f0f0f), a0.x, 0);
        s = __dp4a(iq4_values(q.y & 0x0f0f0f0f), a0.y, s);
        s = __dp4a(iq4_values(q.z & 0x0f0f0f0f), a0.z, s);
        s = __dp4a(iq4_values(q.w & 0x0f0f0f0f), a0.w, s);
        s = __dp4a(iq4_values((q.x >> 4) & 0x0f0f0f0f), a1.x, s);
        s = __dp4a(iq4_values((q.y >> 4) & 0x0f0f0f0f), a1.y, s);
        s = __dp4a(iq4_values((q.z >> 4) & 0x0f0f0f0f), a1.z, s);
        s = __dp4a(iq4_values((q.w >> 4) & 0x0f0f0f0f), a1.w, s);
        return xd * d * (float)s;
    }
};
template <> struct KSub<TH_IQ4_NL> : KSubIQ4<TH_IQ4_NL> {};
template <> struct KSub<TH_IQ4_XS> : KSubIQ4<TH_IQ4_XS> {};

template <> struct KSub<TH_Q4_1> {  // w = d·q + m
    uint4 q;
    float d, m;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_quants(w, r, b);
        float2 f = __half22float2(__ldg((const __half2 *)w.scales + r * (w.K / 32) + b));
        d = f.x; m = f.y;
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int xs) const {
        return xd * (d * (float)dot_nibbles(q, a0, a1) + m * (float)xs);
    }
};

template <uint32_t TYPE> struct KSub5 {  // Q5_0: w = d·(q − 16); Q5_1: w = d·q + m
    uint4 q;
    uint32_t h;
    float d, m;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_quants(w, r, b);
        uint2 rec = __ldg((const uint2 *)w.scales + r * (w.K / 32) + b);
        h = rec.x;
        float2 f = __half22float2(*(const __half2 *)&rec.y);
        d = f.x; m = f.y;
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int xs) const {
        int s = dot_5bit(q, h, a0, a1);
        if (TYPE == TH_Q5_0) return xd * d * (float)(s - 16 * xs);
        return xd * (d * (float)s + m * (float)xs);
    }
};
template <> struct KSub<TH_Q5_0> : KSub5<TH_Q5_0> {};
template <> struct KSub<TH_Q5_1> : KSub5<TH_Q5_1> {};

template <> struct KSub<TH_Q4_K> {  // w = d·sc·q − dmin·m
    uint4 q;
    float ds, dm;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_quants(w, r, b);
        const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 20;
        float2 d = __half22float2(__ldg((const __half2 *)rec));
        ds = d.x * (float)__ldg(rec + 4 + (b & 7));
        dm = d.y * (float)__ldg(rec + 12 + (b & 7));
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int xs) const {
        return xd * (ds * (float)dot_nibbles(q, a0, a1) - dm * (float)xs);
    }
};

template <> struct KSub<TH_Q5_K> {  // w = d·sc·q − dmin·m, 5-bit q
    uint4 q;
    uint32_t h;
    float ds, dm;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_quants(w, r, b);
        const uint8_t *row = (const uint8_t *)w.scales + r * (w.K / 8 + w.K / 256 * 20);
        h = __ldg((const uint32_t *)row + b);
        const uint8_t *rec = row + w.K / 8 + (b >> 3) * 20;
        float2 d = __half22float2(__ldg((const __half2 *)rec));
        ds = d.x * (float)__ldg(rec + 4 + (b & 7));
        dm = d.y * (float)__ldg(rec + 12 + (b & 7));
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int xs) const {
        int s = dot_5bit(q, h, a0, a1);
        return xd * (ds * (float)s - dm * (float)xs);
    }
};

template <> struct KSub<TH_Q6_K> {  // w = d·sc16·(q − 32), one scale per 16 weights
    uint4 q;
    uint2 h;
    float d0, d1;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_quants(w, r, b);
        const uint8_t *row = (const uint8_t *)w.scales + r * (w.K / 4 + w.K / 256 * 24);
        h = __ldg((const uint2 *)row + b);
        const uint8_t *rec = row + w.K / 4 + (b >> 3) * 24;
        float d = __half2float(__ldg((const __half *)rec));
        unsigned short sc = __ldg((const unsigned short *)(rec + 8) + (b & 7));
        d0 = d * (float)(int8_t)(sc & 0xff);
        d1 = d * (float)(int8_t)(sc >> 8);
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int) const {
        const uint32_t L[4] = { q.x, q.y, q.z, q.w };
        const int A0[4] = { a0.x, a0.y, a0.z, a0.w }, A1[4] = { a1.x, a1.y, a1.z, a1.w };
        int slo = 0, shi = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint32_t lo, hi;
            q6k_codes(L[k], h, k, lo, hi);
            slo = __dp4a((int)__vsub4(lo, 0x20202020u), A0[k], slo);
            shi = __dp4a((int)__vsub4(hi, 0x20202020u), A1[k], shi);
        }
        return xd * (d0 * (float)slo + d1 * (float)shi);
    }
};

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
                    int xs = __ldg(xq.s + t * nb + b);
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

int sm_count() {
    static int n = 0;
    if (!n) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) || n <= 0) n = 132;
    }
    return n;
}

// TH_GPU_GEMV (measurement aid): 0 = warp per row, 4 loads in flight (default),
// 1 = + software prefetch, 2 = 8 warps × 2 rows a block, 3 = 8 loads in flight on
// rows of >= 8192 weights, 4 = 4 warps × 2 rows, 5 = 8 warps × 1 row. Measured on
// the H200, 8B Q4_0 tg128: 415, 382, 381 and 381 tok/s for 0-3.
int gemv_variant() {
    static int v = -1;
    if (v < 0) { const char *e = getenv("TH_GPU_GEMV"); v = e ? atoi(e) : 0; }
    return v;
}

template <int NT, int NW, int RPW>
void launch_w(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, float *y, int64_t ys, bool accum,
              cudaStream_t st) {
    dim3 grid((unsigned)((w->rows + NW * RPW - 1) / (NW * RPW))), block(NW * 32);
    if (w->layout == TH_CU_SPLIT && xq) {
        if (w->type == TH_Q4_0) {
            bool u8 = w->K / 32 >= 32 * 8 && gemv_variant() == 3;  // measured slower on the H200
            if (gemv_variant() == 1) launch_k(gemv_q4_0<NT, NW, RPW, true, 4>, grid, block, st, *w, *xq, y, ys, accum);
            else if (u8) launch_k(gemv_q4_0<NT, NW, RPW, false, 8>, grid, block, st, *w, *xq, y, ys, accum);
            else launch_k(gemv_q4_0<NT, NW, RPW, false, 4>, grid, block, st, *w, *xq, y, ys, accum);
            return;
        }
        if (w->type == TH_Q8_0) { launch_k(gemv_q8_0<NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q4_1) { launch_k(gemv_ksplit<TH_Q4_1, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q5_0) { launch_k(gemv_ksplit<TH_Q5_0, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q5_1) { launch_k(gemv_ksplit<TH_Q5_1, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_IQ4_NL) { launch_k(gemv_ksplit<TH_IQ4_NL, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_IQ4_XS) { launch_k(gemv_ksplit<TH_IQ4_XS, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q4_K) { launch_k(gemv_ksplit<TH_Q4_K, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q5_K) { launch_k(gemv_ksplit<TH_Q5_K, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
        if (w->type == TH_Q6_K) { launch_k(gemv_ksplit<TH_Q6_K, NT, NW, RPW>, grid, block, st, *w, *xq, y, ys, accum); return; }
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
    // many rows: 8 warps × 2 rows a block; few rows (small models): a warp per row, 4 a block
    int v = gemv_variant();
    bool many = w->rows >= 16LL * sm_count() && NT <= 4;
    if (v == 2 && many) launch_w<NT, 8, 2>(w, x, xs, xq, y, ys, accum, st);
    else if (v == 4 && many) launch_w<NT, 4, 2>(w, x, xs, xq, y, ys, accum, st);
    else if (v == 5 && many) launch_w<NT, 8, 1>(w, x, xs, xq, y, ys, accum, st);
    else launch_w<NT, 4, 1>(w, x, xs, xq, y, ys, accum, st);
}

}  // namespace

extern "C" bool th_cu_gemv_wants_q8(const th_cu_mat *w) {
    return w->layout == TH_CU_SPLIT;
}

extern "C" void th_cu_gemv(const th_cu_mat *w, const float *x, int64_t xs, const th_cu_q8 *xq, int n, float *y,
                           int64_t ys, bool accum, cudaStream_t st) {
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
