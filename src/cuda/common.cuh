// common.cuh — device helpers the CUDA kernels share: warp reductions, and the
// decoder of 32 consecutive weights of any supported type (the block layouts of
// src/quant/quant.h, ported from the reference decoders in src/quant/ref_*.c).
#ifndef TH_CUDA_COMMON_CUH
#define TH_CUDA_COMMON_CUH

#include "cuda/kernels.h"
#include "quant/quant.h"
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
static __device__ __forceinline__ int warp_sum_i(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
static __device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
static __device__ __forceinline__ uint16_t ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

__device__ __constant__ static const int8_t k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                           1, 13, 25, 38, 53, 69, 89, 113};
__device__ __constant__ static const int8_t k_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4's e8m0 scale byte as 2^(e−128), half the OCP scale because k_mxfp4 holds
// doubled e2m1 values (th_e8m0_half_to_f32 of src/quant/ref_internal.h); exact.
static __device__ __forceinline__ float e8m0_half(uint32_t e) {
    return e < 2 ? __uint_as_float(0x00200000u << e) : __uint_as_float((e - 1) << 23);
}

static __device__ __forceinline__ void k4_scale_min(int j, const uint8_t *q, int &sc, int &m) {
    if (j < 4) { sc = q[j] & 63; m = q[j + 4] & 63; }
    else { sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4); m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

// The trit (0..2) at position j of a base-3 byte (TQ1_0: q * 3^j; IQ1_BN: q * 3^(4-j),
// both mod 256, then floor(3 v / 256); quant/ref_internal.h's th_tq1_trit, th_iq1bn_trit).
static __device__ __forceinline__ int trit_of(uint32_t q, uint32_t mult) { return (int)((((q * mult) & 255u) * 3u) >> 8); }

// TQ1_0 element e of block b (ref_ternary.c: qs[e%32] trit e/32; qs[32 + (e-160)%16];
// qh[(e-240)%4]).
static __device__ __forceinline__ int tq1_code(const uint8_t *b, int e) {
    const uint32_t p3[5] = { 1, 3, 9, 27, 81 };
    if (e < 160) return trit_of(b[e % 32], p3[e / 32]);
    if (e < 240) return trit_of(b[32 + (e - 160) % 16], p3[(e - 160) / 16]);
    return trit_of(b[48 + (e - 240) % 4], p3[(e - 240) / 4]);
}

// Decode the 32 weights of group g (elements 32g..32g+31) of a GGUF row (for IQ1_BN /
// IQ2_BN the row starts with its scale).
static __device__ void dq32(uint32_t type, const uint8_t *row, int64_t g, float out[32]) {
    switch (type) {
    case TH_F32: { const float *p = (const float *)row + g * 32; for (int j = 0; j < 32; j++) out[j] = p[j]; break; }
    case TH_F16: { const uint16_t *p = (const uint16_t *)row + g * 32; for (int j = 0; j < 32; j++) out[j] = h2f(p[j]); break; }
    case TH_BF16: { const uint16_t *p = (const uint16_t *)row + g * 32; for (int j = 0; j < 32; j++) out[j] = bf2f(p[j]); break; }
    case TH_Q4_0: {
        const uint8_t *b = row + g * 18; float d = h2f(ld_u16(b));
        for (int j = 0; j < 16; j++) { out[j] = ((b[2 + j] & 15) - 8) * d; out[j + 16] = ((b[2 + j] >> 4) - 8) * d; }
        break; }
    case TH_Q4_1: {
        const uint8_t *b = row + g * 20; float d = h2f(ld_u16(b)), m = h2f(ld_u16(b + 2));
        for (int j = 0; j < 16; j++) { out[j] = (b[4 + j] & 15) * d + m; out[j + 16] = (b[4 + j] >> 4) * d + m; }
        break; }
    case TH_Q5_0: {
        const uint8_t *b = row + g * 22; float d = h2f(ld_u16(b));
        uint32_t qh = b[2] | (b[3] << 8) | (b[4] << 16) | ((uint32_t)b[5] << 24);
        for (int j = 0; j < 16; j++) {
            out[j] = (int)(((b[6 + j] & 15) | (((qh >> j) & 1) << 4)) - 16) * d;
            out[j + 16] = (int)(((b[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16) * d;
        }
        break; }
    case TH_Q5_1: {
        const uint8_t *b = row + g * 24; float d = h2f(ld_u16(b)), m = h2f(ld_u16(b + 2));
        uint32_t qh = b[4] | (b[5] << 8) | (b[6] << 16) | ((uint32_t)b[7] << 24);
        for (int j = 0; j < 16; j++) {
            out[j] = ((b[8 + j] & 15) | (((qh >> j) & 1) << 4)) * d + m;
            out[j + 16] = ((b[8 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) * d + m;
        }
        break; }
    case TH_Q8_0: {
        const uint8_t *b = row + g * 34; float d = h2f(ld_u16(b));
        for (int j = 0; j < 32; j++) out[j] = (int8_t)b[2 + j] * d;
        break; }
    case TH_Q2_K: {  // scales[16] qs[64] d dmin
        const uint8_t *b = row + (g / 8) * 84; int sub = (int)(g % 8), half = sub / 4, k = sub % 4;
        float d = h2f(ld_u16(b + 80)), dmin = h2f(ld_u16(b + 82));
        for (int part = 0; part < 2; part++) {
            int sc = b[half * 8 + k * 2 + part];
            float dl = d * (sc & 15), ml = dmin * (sc >> 4);
            for (int l = 0; l < 16; l++) out[16 * part + l] = dl * ((b[16 + 32 * half + 16 * part + l] >> (2 * k)) & 3) - ml;
        }
        break; }
    case TH_Q3_K: {  // hmask[32] qs[64] scales[12] d
        const uint8_t *b = row + (g / 8) * 110; int sub = (int)(g % 8), half = sub / 4, k = sub % 4;
        const uint8_t *hm = b, *qs = b + 32 + 32 * half, *s = b + 96;
        float d = h2f(ld_u16(b + 108));
        int hbit = half * 4 + k;
        for (int part = 0; part < 2; part++) {
            int i = half * 8 + k * 2 + part;
            int lo = i < 8 ? (s[i] & 15) : (s[i - 8] >> 4);
            int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
            float dl = d * ((lo | (hi << 4)) - 32);
            for (int e = 0; e < 16; e++) {
                int l = 16 * part + e;
                out[l] = dl * (((qs[l] >> (2 * k)) & 3) - ((hm[l] >> hbit) & 1 ? 0 : 4));
            }
        }
        break; }
    case TH_Q4_K: {  // d dmin scales[12] qs[128]
        const uint8_t *b = row + (g / 8) * 144; int sub = (int)(g % 8);
        float d = h2f(ld_u16(b)), dmin = h2f(ld_u16(b + 2));
        int sc, m; k4_scale_min(sub, b + 4, sc, m);
        const uint8_t *q = b + 16 + 32 * (sub / 2);
        float dl = d * sc, ml = dmin * m;
        for (int l = 0; l < 32; l++) out[l] = dl * ((sub & 1) ? (q[l] >> 4) : (q[l] & 15)) - ml;
        break; }
    case TH_Q5_K: {  // d dmin scales[12] qh[32] qs[128]
        const uint8_t *b = row + (g / 8) * 176; int sub = (int)(g % 8);
        float d = h2f(ld_u16(b)), dmin = h2f(ld_u16(b + 2));
        int sc, m; k4_scale_min(sub, b + 4, sc, m);
        const uint8_t *qh = b + 16, *q = b + 48 + 32 * (sub / 2);
        float dl = d * sc, ml = dmin * m;
        for (int l = 0; l < 32; l++)
            out[l] = dl * (((sub & 1) ? (q[l] >> 4) : (q[l] & 15)) + (((qh[l] >> sub) & 1) << 4)) - ml;
        break; }
    case TH_Q6_K: {  // ql[128] qh[64] scales[16] d
        const uint8_t *b = row + (g / 8) * 210; int sub = (int)(g % 8), half = sub / 4, quarter = sub % 4;
        float d = h2f(ld_u16(b + 208));
        const int8_t *scales = (const int8_t *)(b + 192);
        for (int l = 0; l < 32; l++) {
            uint8_t ql = b[64 * half + 32 * (quarter & 1) + l];
            int lo = quarter < 2 ? (ql & 15) : (ql >> 4);
            int hi = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
            out[l] = d * scales[(32 * sub + l) / 16] * ((lo | (hi << 4)) - 32);
        }
        break; }
    case TH_IQ4_NL: {
        const uint8_t *b = row + g * 18; float d = h2f(ld_u16(b));
        for (int j = 0; j < 16; j++) { out[j] = d * k_iq4nl[b[2 + j] & 15]; out[j + 16] = d * k_iq4nl[b[2 + j] >> 4]; }
        break; }
    case TH_IQ4_XS: {  // d scales_h scales_l[4] qs[128]
        const uint8_t *b = row + (g / 8) * 136; int ib = (int)(g % 8);
        float d = h2f(ld_u16(b));
        int sh = ld_u16(b + 2);
        int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
        float dl = d * (ls - 32);
        const uint8_t *q = b + 8 + 16 * ib;
        for (int j = 0; j < 16; j++) { out[j] = dl * k_iq4nl[q[j] & 15]; out[j + 16] = dl * k_iq4nl[q[j] >> 4]; }
        break; }
    case TH_MXFP4: {
        const uint8_t *b = row + g * 17; float d = e8m0_half(b[0]);
        for (int j = 0; j < 16; j++) { out[j] = d * k_mxfp4[b[1 + j] & 15]; out[j + 16] = d * k_mxfp4[b[1 + j] >> 4]; }
        break; }
    case TH_Q2: case TH_Q3: case TH_Q4: case TH_Q5: case TH_Q6: case TH_Q7: case TH_Q8: {
        // qN (quant/qn.h): 64-weight groups of 8n + 2 bytes, d then n bit-planes; half g % 2 of group g / 2
        const int n = (int)(type - TH_QN_BASE), h = (int)(g & 1);
        const uint8_t *b = row + (g >> 1) * (8 * n + 2); float d = h2f(ld_u16(b));
        uint32_t pl[8];
        for (int p = 0; p < n; p++) pl[p] = ld_u16(b + 2 + 8 * p + 4 * h) | ((uint32_t)ld_u16(b + 4 + 8 * p + 4 * h) << 16);
        for (int j = 0; j < 32; j++) {
            int c = 0;
            for (int p = 0; p < n; p++) c |= (int)((pl[p] >> j) & 1u) << p;
            out[j] = d * (0.5f * (float)(2 * c - ((1 << n) - 1)));
        }
        break; }
    case TH_TQ1_0: {  // qs[48] qh[4] d; value d (c - 1)
        const uint8_t *b = row + (g / 8) * 54; const float d = h2f(ld_u16(b + 52)); const int e0 = 32 * (int)(g % 8);
        for (int j = 0; j < 32; j++) out[j] = d * (float)(tq1_code(b, e0 + j) - 1);
        break; }
    case TH_TQ2_0: {  // qs[64] d: bits 2l of qs[32h + m] are element 128h + 32l + m
        const uint8_t *b = row + (g / 8) * 66; const float d = h2f(ld_u16(b + 64)); const int gi = (int)(g % 8);
        const uint8_t *q = b + 32 * (gi / 4); const int sh = 2 * (gi % 4);
        for (int j = 0; j < 32; j++) out[j] = d * (float)(((q[j] >> sh) & 3) - 1);
        break; }
    case TH_Q1_0_G128: {  // d qs[16]: bit set +d, clear -d
        const uint8_t *b = row + (g / 4) * 18; const float d = h2f(ld_u16(b)); const uint8_t *q = b + 2 + 4 * (g % 4);
        for (int j = 0; j < 32; j++) out[j] = (q[j / 8] >> (j % 8)) & 1 ? d : -d;
        break; }
    case TH_IQ1_BN: {  // f16 row scale, then 13-byte blocks of 64 trits
        const float d = h2f(ld_u16(row)); const uint8_t *b = row + 2 + (g / 2) * 13; const int e0 = 32 * (int)(g % 2);
        const uint32_t m5[5] = { 81, 27, 9, 3, 1 };
        for (int j = 0; j < 32; j++) {
            const int e = e0 + j, i = e / 16, r = e % 16;
            const int c = r < 15 ? trit_of(b[3 * i + r / 5], m5[r % 5]) : trit_of(b[12], m5[i]);
            out[j] = d * (float)(c - 1);
        }
        break; }
    case TH_IQ2_BN: {  // f32 row scale, then 16-byte blocks: bits 2s of qs[m] are element 16s + m
        const float d = __uint_as_float((uint32_t)ld_u16(row) | ((uint32_t)ld_u16(row + 2) << 16));
        const uint8_t *q = row + 4 + (g / 2) * 16; const int s0 = 2 * (int)(g % 2);
        for (int j = 0; j < 32; j++) out[j] = d * (float)(((q[j % 16] >> (2 * (s0 + j / 16))) & 3) - 1);
        break; }
    default:
        for (int j = 0; j < 32; j++) out[j] = 0.0f;
    }
}

// The current device's multiprocessor count and compute capability major (read once).
static inline int sm_count() {
    static int n = 0;
    if (!n) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 1;
    }
    return n;
}
static inline int cc_major() {
    static int major = -1;
    if (major < 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) major = 0;
    }
    return major;
}

// Programmatic dependent launch (Hopper): every kernel is launched allowed to
// start while its predecessor finishes; at entry it lets its own successor
// launch, then waits until the predecessor has completed and its writes are
// visible (griddepcontrol.wait waits for full completion, so the early trigger
// is safe). The launch latency of the next kernel hides behind this one.
static __device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
static __device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void pdl_begin() {
    pdl_trigger();
    pdl_wait();
}

extern "C" bool th_cu_pdl;  // set by th_cu_set_pdl (misc.cu)

// Kernel launches on st with programmatic dependent launch when th_cu_pdl is set;
// launch_kc with smem bytes of dynamic shared memory and thread-block clusters of
// cluster_z blocks along z (1: no cluster attribute), launch_ks without clusters,
// launch_k with no dynamic shared memory either.
template <typename... KArgs, typename... Args>
static inline void launch_kc(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, unsigned cluster_z,
                             cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = th_cu_pdl ? 1 : 0;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = 1;
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = cluster_z;
    cfg.attrs = attr;
    cfg.numAttrs = cluster_z > 1 ? 2 : 1;
    cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}
template <typename... KArgs, typename... Args>
static inline void launch_ks(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                             Args... args) {
    launch_kc(kernel, grid, block, smem, 1u, st, args...);
}
template <typename... KArgs, typename... Args>
static inline void launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, cudaStream_t st, Args... args) {
    launch_ks(kernel, grid, block, 0, st, args...);
}

#endif
