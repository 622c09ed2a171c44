// gemv_tern.cu — the decode GEMV of the 1-bit and ternary types (TQ1_0, TQ2_0,
// Q1_0_G128, IQ1_BN, IQ2_BN; file layout, quant/ref_ternary.c) on q8 activations:
// a warp per row, a lane per 32-weight group, whose weights become 8 words of signed
// bytes (c - 1, or +-1 for Q1_0_G128) and meet the group's 32 int8 activations in 8
// dp4a; the group adds d_w · d_a · isum (d_w the block scale; the BN types' row scale
// multiplies the row sum). 2-bit codes and sign bits are unpacked 4 at a time with byte
// SIMD (__vsub4); trits by the reference's base-3 digit formula, one at a time.
#include "cuda/common.cuh"

namespace {

constexpr int WARPS = 4;

template <uint32_t T> struct Tern;

// 4 trits - 1 packed as signed bytes
static __device__ __forceinline__ int pack4(int a, int b, int c, int d) {
    return (int)((uint32_t)((a - 1) & 255) | ((uint32_t)((b - 1) & 255) << 8) | ((uint32_t)((c - 1) & 255) << 16) |
                 ((uint32_t)((d - 1) & 255) << 24));
}
static __device__ __forceinline__ uint32_t ld_u32_2(const uint8_t *p) { return (uint32_t)ld_u16(p) | ((uint32_t)ld_u16(p + 2) << 16); }

template <> struct Tern<TH_TQ2_0> {   // 256 weights, 66 bytes: qs[64] d; bits 2l of qs[32h + m]: element 128h + 32l + m
    static __device__ __forceinline__ float decode(const uint8_t *row, int64_t g, int wv[8]) {
        const uint8_t *b = row + (g / 8) * 66;
        const int gi = (int)(g % 8), sh = 2 * (gi % 4);
        const uint8_t *q = b + 32 * (gi / 4);
#pragma unroll
        for (int k = 0; k < 8; k++) wv[k] = (int)__vsub4((ld_u32_2(q + 4 * k) >> sh) & 0x03030303u, 0x01010101u);
        return h2f(ld_u16(b + 64));
    }
};
template <> struct Tern<TH_TQ1_0> {   // 256 weights, 54 bytes: qs[48] qh[4] d
    static __device__ __forceinline__ float decode(const uint8_t *row, int64_t g, int wv[8]) {
        const uint8_t *b = row + (g / 8) * 54;
        const int e0 = 32 * (int)(g % 8);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int e = e0 + 4 * k;
            wv[k] = pack4(tq1_code(b, e), tq1_code(b, e + 1), tq1_code(b, e + 2), tq1_code(b, e + 3));
        }
        return h2f(ld_u16(b + 52));
    }
};
template <> struct Tern<TH_Q1_0_G128> {   // 128 weights, 18 bytes: d qs[16]; bit set +1, clear -1
    static __device__ __forceinline__ float decode(const uint8_t *row, int64_t g, int wv[8]) {
        const uint8_t *b = row + (g / 4) * 18;
        const uint32_t bits = ld_u32_2(b + 2 + 4 * (g % 4));
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint32_t nib = (bits >> (4 * k)) & 15u;
            const uint32_t one = (nib * 0x00204081u) & 0x01010101u;   // bit j -> byte j
            wv[k] = (int)__vsub4(one + one, 0x01010101u);
        }
        return h2f(ld_u16(b));
    }
};
template <> struct Tern<TH_IQ2_BN> {   // row: f32 scale, then 16-byte blocks; bits 2s of qs[m]: element 16s + m
    static __device__ __forceinline__ float decode(const uint8_t *row, int64_t g, int wv[8]) {
        const uint8_t *q = row + 4 + (g / 2) * 16;
        const int s0 = 2 * (int)(g % 2);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int sh = 2 * (s0 + k / 4);
            wv[k] = (int)__vsub4((ld_u32_2(q + 4 * (k % 4)) >> sh) & 0x03030303u, 0x01010101u);
        }
        return 1.0f;
    }
};
template <> struct Tern<TH_IQ1_BN> {   // row: f16 scale, then 13-byte blocks of 64 trits
    static __device__ __forceinline__ int code(const uint8_t *b, int e) {
        const uint32_t m5[5] = { 81, 27, 9, 3, 1 };
        const int i = e / 16, r = e % 16;
        return r < 15 ? trit_of(b[3 * i + r / 5], m5[r % 5]) : trit_of(b[12], m5[i]);
    }
    static __device__ __forceinline__ float decode(const uint8_t *row, int64_t g, int wv[8]) {
        const uint8_t *b = row + 2 + (g / 2) * 13;
        const int e0 = 32 * (int)(g % 2);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int e = e0 + 4 * k;
            wv[k] = pack4(code(b, e), code(b, e + 1), code(b, e + 2), code(b, e + 3));
        }
        return 1.0f;
    }
};

template <uint32_t T> static __device__ __forceinline__ float row_scale(const uint8_t *row) {
    if constexpr (T == TH_IQ1_BN) return h2f(ld_u16(row));
    else if constexpr (T == TH_IQ2_BN) return __uint_as_float(ld_u32_2(row));
    else return 1.0f;
}

template <uint32_t T, int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_tern(th_cu_mat w, th_cu_q8 xq, float *y, int64_t ys, bool accum) {
    pdl_trigger();
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= w.rows) return;
    const uint8_t *wr = (const uint8_t *)w.data + row * w.row_bytes;
    const int64_t ng = w.K / 32;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int64_t g = lane; g < ng; g += 32) {
        int wv[8];
        const float dw = Tern<T>::decode(wr, g, wv);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const int4 *xa = (const int4 *)(xq.q + t * w.K + g * 32);
            const int4 a0 = __ldg(xa), a1 = __ldg(xa + 1);
            int is = 0;
            is = __dp4a(wv[0], a0.x, is); is = __dp4a(wv[1], a0.y, is); is = __dp4a(wv[2], a0.z, is); is = __dp4a(wv[3], a0.w, is);
            is = __dp4a(wv[4], a1.x, is); is = __dp4a(wv[5], a1.y, is); is = __dp4a(wv[6], a1.z, is); is = __dp4a(wv[7], a1.w, is);
            acc[t] += dw * __ldg(xq.d + t * ng + g) * (float)is;
        }
    }
    const float rs = row_scale<T>(wr);
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const float v = warp_sum(acc[t]) * rs;
        if (lane == t) {
            float *p = y + t * ys + row;
            *p = accum ? *p + v : v;
        }
    }
}

template <uint32_t T, int NT>
void launch_t(const th_cu_mat *w, const th_cu_q8 *xq, float *y, int64_t ys, bool accum, cudaStream_t st) {
    dim3 grid((unsigned)((w->rows + WARPS - 1) / WARPS)), block(WARPS * 32);
    launch_k(gemv_tern<T, NT>, grid, block, st, *w, *xq, y, ys, accum);
}

template <uint32_t T>
void launch_n(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum, cudaStream_t st) {
    for (int t0 = 0; t0 < n; t0 += 4) {
        const int nt = n - t0 < 4 ? n - t0 : 4;
        th_cu_q8 q = { xq->q + t0 * w->K, xq->d + t0 * (w->K / 32), xq->s + t0 * (w->K / 32) };
        float *yt = y + t0 * ys;
        switch (nt) {
        case 1: launch_t<T, 1>(w, &q, yt, ys, accum, st); break;
        case 2: launch_t<T, 2>(w, &q, yt, ys, accum, st); break;
        case 3: launch_t<T, 3>(w, &q, yt, ys, accum, st); break;
        default: launch_t<T, 4>(w, &q, yt, ys, accum, st); break;
        }
    }
}

}  // namespace

extern "C" bool th_cu_tern_type(uint32_t t) {
    return t == TH_TQ1_0 || t == TH_TQ2_0 || t == TH_Q1_0_G128 || t == TH_IQ1_BN || t == TH_IQ2_BN;
}

extern "C" bool th_cu_gemv_tern(const th_cu_mat *w, const th_cu_q8 *xq, int n, float *y, int64_t ys, bool accum,
                                cudaStream_t st) {
    if (!xq || w->layout != TH_CU_GGUF || w->K % 32) return false;
    switch (w->type) {
    case TH_TQ1_0: launch_n<TH_TQ1_0>(w, xq, n, y, ys, accum, st); return true;
    case TH_TQ2_0: launch_n<TH_TQ2_0>(w, xq, n, y, ys, accum, st); return true;
    case TH_Q1_0_G128: launch_n<TH_Q1_0_G128>(w, xq, n, y, ys, accum, st); return true;
    case TH_IQ1_BN: launch_n<TH_IQ1_BN>(w, xq, n, y, ys, accum, st); return true;
    case TH_IQ2_BN: launch_n<TH_IQ2_BN>(w, xq, n, y, ys, accum, st); return true;
    default: return false;
    }
}
