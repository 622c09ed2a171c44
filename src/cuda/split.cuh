// split.cuh — the device side of the SPLIT weight layouts (split.c has the byte
// layouts and the host repacking). KSub<TYPE> holds one 32-weight sub-block of a
// split type in registers: load() reads it (codes with one 16-byte load, 8 bytes
// for the 2-bit codes of Q2_K/Q3_K; its scales from the scale array); dot() is
// its exact int8 product with a q8 activation block, scaled to float (the GEMV,
// gemv.cu, and the MoE GEMV, moe.cu; uses_sum says whether it needs the block's
// integer sum); decode() gives its 32 weights as floats (dequantization,
// dequant.cu, and the fp32-activation GEMVs). The dense Q4_0 GEMV has its own
// kernel (gemv.cu); the MoE GEMV uses KSub<TH_Q4_0> too.
#ifndef TH_CUDA_SPLIT_CUH
#define TH_CUDA_SPLIT_CUH
#include "cuda/common.cuh"
#include <type_traits>

// Host side: f(std::integral_constant<uint32_t, TYPE>{}) for a split type TYPE
// (the types split.c repacks), so that a launcher instantiates its kernel per
// type from one list; false for any other type.
template <typename F>
static inline bool with_split_type(uint32_t type, F &&f) {
    switch (type) {
    case TH_Q4_0: f(std::integral_constant<uint32_t, TH_Q4_0>{}); return true;
    case TH_Q4_1: f(std::integral_constant<uint32_t, TH_Q4_1>{}); return true;
    case TH_Q5_0: f(std::integral_constant<uint32_t, TH_Q5_0>{}); return true;
    case TH_Q5_1: f(std::integral_constant<uint32_t, TH_Q5_1>{}); return true;
    case TH_Q8_0: f(std::integral_constant<uint32_t, TH_Q8_0>{}); return true;
    case TH_Q2_K: f(std::integral_constant<uint32_t, TH_Q2_K>{}); return true;
    case TH_Q3_K: f(std::integral_constant<uint32_t, TH_Q3_K>{}); return true;
    case TH_Q4_K: f(std::integral_constant<uint32_t, TH_Q4_K>{}); return true;
    case TH_Q5_K: f(std::integral_constant<uint32_t, TH_Q5_K>{}); return true;
    case TH_Q6_K: f(std::integral_constant<uint32_t, TH_Q6_K>{}); return true;
    case TH_IQ4_NL: f(std::integral_constant<uint32_t, TH_IQ4_NL>{}); return true;
    case TH_IQ4_XS: f(std::integral_constant<uint32_t, TH_IQ4_XS>{}); return true;
    case TH_MXFP4: f(std::integral_constant<uint32_t, TH_MXFP4>{}); return true;
    case TH_Q2: f(std::integral_constant<uint32_t, TH_Q2>{}); return true;
    case TH_Q3: f(std::integral_constant<uint32_t, TH_Q3>{}); return true;
    case TH_Q4: f(std::integral_constant<uint32_t, TH_Q4>{}); return true;
    case TH_Q5: f(std::integral_constant<uint32_t, TH_Q5>{}); return true;
    case TH_Q6: f(std::integral_constant<uint32_t, TH_Q6>{}); return true;
    case TH_Q7: f(std::integral_constant<uint32_t, TH_Q7>{}); return true;
    case TH_Q8: f(std::integral_constant<uint32_t, TH_Q8>{}); return true;
    default: return false;
    }
}

// Byte j (0..15) of a 16-byte register.
static __device__ __forceinline__ uint32_t byte_of(uint4 q, int j) {
    uint32_t w = j < 4 ? q.x : j < 8 ? q.y : j < 12 ? q.z : q.w;
    return (w >> (8 * (j & 3))) & 0xffu;
}

// The full 6-bit codes (0..63) of Q6_K split sub-block words: word k of the
// 16 quant bytes (L) with its high bits (H, see split.c) gives weights
// 4k..4k+3 (lo) and 16+4k..16+4k+3 (hi), one per byte.
static __device__ __forceinline__ void q6k_codes(uint32_t L, uint2 H, int k, uint32_t &lo, uint32_t &hi) {
    uint32_t h = ((k < 2 ? H.x : H.y) >> (4 * (k & 1))) & 0x0f0f0f0fu;
    lo = (L & 0x0f0f0f0fu) | ((h & 0x03030303u) << 4);
    hi = ((L >> 4) & 0x0f0f0f0fu) | ((h & 0x0c0c0c0cu) << 2);
}

// The 5-bit codes (0..31) of Q5_K split sub-block words (fifth bits H, split.c).
static __device__ __forceinline__ void q5k_codes(uint32_t L, uint32_t H, int k, uint32_t &lo, uint32_t &hi) {
    lo = (L & 0x0f0f0f0fu) | (((H >> k) & 0x01010101u) << 4);
    hi = ((L >> 4) & 0x0f0f0f0fu) | (((H >> (4 + k)) & 0x01010101u) << 4);
}

// Q4_0-order nibbles · activations (the 8 dp4a of a 32-weight sub-block).
static __device__ __forceinline__ int dot_nibbles(uint4 q, int4 a0, int4 a1) {
    int s = __dp4a((int)(q.x & 0x0f0f0f0f), a0.x, 0);
    s = __dp4a((int)(q.y & 0x0f0f0f0f), a0.y, s);
    s = __dp4a((int)(q.z & 0x0f0f0f0f), a0.z, s);
    s = __dp4a((int)(q.w & 0x0f0f0f0f), a0.w, s);
    s = __dp4a((int)((q.x >> 4) & 0x0f0f0f0f), a1.x, s);
    s = __dp4a((int)((q.y >> 4) & 0x0f0f0f0f), a1.y, s);
    s = __dp4a((int)((q.z >> 4) & 0x0f0f0f0f), a1.z, s);
    return __dp4a((int)((q.w >> 4) & 0x0f0f0f0f), a1.w, s);
}

template <uint32_t TYPE> struct KSub;

template <> struct KSub<TH_Q4_0> {  // w = d·(q − 8); the dense GEMV has its own kernel (gemv.cu)
    static constexpr bool uses_sum = true;  // whether dot() reads the activation block sum
    uint4 q;
    float d;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = __ldg((const uint4 *)((const uint8_t *)w.data + r * (w.K / 2)) + b);
        d = __half2float(__ldg((const __half *)w.scales + r * (w.K / 32) + b));
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int xs) const {
        return d * xd * (float)(dot_nibbles(q, a0, a1) - 8 * xs);
    }
    __device__ __forceinline__ void decode(float out[32]) const {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t c = byte_of(q, j);
            out[j] = (float)((int)(c & 15) - 8) * d;
            out[j + 16] = (float)((int)(c >> 4) - 8) * d;
        }
    }
};

// 5-bit codes (low nibbles + fifth bits H, split.c) · activations.
static __device__ __forceinline__ int dot_5bit(uint4 q, uint32_t H, int4 a0, int4 a1) {
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

static __device__ __forceinline__ uint4 ld_quants(const th_cu_mat &w, int64_t r, int64_t b) {
    return __ldg((const uint4 *)((const uint8_t *)w.data + r * (w.K / 2)) + b);
}

// Four 4-bit codes (one per byte) → the code-book values (int8), one per byte:
// IQ4_NL/IQ4_XS's k_iq4nl, or (MXFP4) the doubled e2m1 values k_mxfp4.
template <uint32_t TYPE>
static __device__ __forceinline__ int iq4_values(uint32_t n) {
    constexpr bool fp4 = TYPE == TH_MXFP4;  // the tables' bytes, 4 values a word
    constexpr uint32_t T0 = fp4 ? 0x03020100u : 0xbfad9881u, T1 = fp4 ? 0x0c080604u : 0xf6eaddcfu;
    constexpr uint32_t T2 = fp4 ? 0xfdfeff00u : 0x26190d01u, T3 = fp4 ? 0xf4f8fafcu : 0x71594535u;
    uint32_t sel = (n & 0x7u) | ((n >> 4) & 0x70u) | ((n >> 8) & 0x700u) | ((n >> 12) & 0x7000u);
    uint32_t lo = __byte_perm(T0, T1, sel), hi = __byte_perm(T2, T3, sel);
    uint32_t m = ((n >> 3) & 0x01010101u) * 0xffu;
    return (int)((lo & ~m) | (hi & m));
}

// w = d·value[q]  (IQ4_XS: d·(scale − 32); MXFP4: d = 2^(e−128), value = 2·e2m1, as the CPU's)
template <uint32_t TYPE> struct KSubIQ4 {
    static constexpr bool uses_sum = false;  // whether dot() reads the activation block sum
    uint4 q;
    float d;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_quants(w, r, b);
        if (TYPE == TH_IQ4_NL) {
            d = __half2float(__ldg((const __half *)w.scales + r * (w.K / 32) + b));
        } else if (TYPE == TH_MXFP4) {
            d = e8m0_half(__ldg((const uint8_t *)w.scales + r * (w.K / 32) + b));
        } else {
            const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 12;
            d = __half2float(__ldg((const __half *)rec)) * (float)(int8_t)__ldg(rec + 4 + (b & 7));
        }
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int) const {
        int s = __dp4a(iq4_values<TYPE>(q.x & 0x0f0f0f0f), a0.x, 0);
        s = __dp4a(iq4_values<TYPE>(q.y & 0x0f0f0f0f), a0.y, s);
        s = __dp4a(iq4_values<TYPE>(q.z & 0x0f0f0f0f), a0.z, s);
        s = __dp4a(iq4_values<TYPE>(q.w & 0x0f0f0f0f), a0.w, s);
        s = __dp4a(iq4_values<TYPE>((q.x >> 4) & 0x0f0f0f0f), a1.x, s);
        s = __dp4a(iq4_values<TYPE>((q.y >> 4) & 0x0f0f0f0f), a1.y, s);
        s = __dp4a(iq4_values<TYPE>((q.z >> 4) & 0x0f0f0f0f), a1.z, s);
        s = __dp4a(iq4_values<TYPE>((q.w >> 4) & 0x0f0f0f0f), a1.w, s);
        return xd * d * (float)s;
    }
    __device__ __forceinline__ void decode(float out[32]) const {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t c = byte_of(q, j);
            const int8_t *v = TYPE == TH_MXFP4 ? k_mxfp4 : k_iq4nl;
            out[j] = d * v[c & 15];
            out[j + 16] = d * v[c >> 4];
        }
    }
};
template <> struct KSub<TH_IQ4_NL> : KSubIQ4<TH_IQ4_NL> {};
template <> struct KSub<TH_IQ4_XS> : KSubIQ4<TH_IQ4_XS> {};
template <> struct KSub<TH_MXFP4> : KSubIQ4<TH_MXFP4> {};

// The 8 bytes of 2-bit codes of a Q2_K/Q3_K sub-block (split.c's pack_2bit).
static __device__ __forceinline__ uint2 ld_2bit(const uint8_t *row, int64_t b) {
    return __ldg((const uint2 *)row + b);
}

// Q2_K: w = d·sc·q − dmin·m, q in 0..3, sc and m (4 bits each) per 16 weights.
// The dot is d·Σ sc·(q·x) − dmin·Σ m·(Σx) in integers, as the CPU's: the sum of
// the first 16 activations by dp4a, that of the last 16 from the block sum.
template <> struct KSub<TH_Q2_K> {
    static constexpr bool uses_sum = true;  // whether dot() reads the activation block sum
    uint2 q;
    uint32_t sm;  // the scale bytes (sc | m << 4) of weights 0..15 (byte 0) and 16..31 (byte 1)
    float d, dmin;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        q = ld_2bit((const uint8_t *)w.data + r * (w.K / 4), b);
        const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 20;
        float2 f = __half22float2(__ldg((const __half2 *)rec));
        d = f.x; dmin = f.y;
        sm = __ldg((const unsigned short *)(rec + 4) + (b & 7));
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int xs) const {
        const int A0[4] = { a0.x, a0.y, a0.z, a0.w }, A1[4] = { a1.x, a1.y, a1.z, a1.w };
        int s0 = 0, s1 = 0, x0 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s0 = __dp4a((int)((q.x >> (2 * k)) & 0x03030303u), A0[k], s0);
            s1 = __dp4a((int)((q.y >> (2 * k)) & 0x03030303u), A1[k], s1);
            x0 = __dp4a(0x01010101, A0[k], x0);
        }
        int isum = (int)(sm & 15) * s0 + (int)((sm >> 8) & 15) * s1;
        int msum = (int)((sm >> 4) & 15) * x0 + (int)((sm >> 12) & 15) * (xs - x0);
        return xd * (d * (float)isum - dmin * (float)msum);
    }
    __device__ __forceinline__ void decode(float out[32]) const {  // the CPU's dl·q − ml, unfused
        const uint32_t W[2] = { q.x, q.y };
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint32_t b = sm >> (8 * h);
            float dl = __fmul_rn(d, (float)(b & 15)), ml = __fmul_rn(dmin, (float)((b >> 4) & 15));
#pragma unroll
            for (int k = 0; k < 4; k++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    out[16 * h + 4 * k + j] = __fsub_rn(__fmul_rn(dl, (float)((W[h] >> (8 * j + 2 * k)) & 3)), ml);
        }
    }
};

// Q3_K values (−4..3, one per byte) of weights 16h+4k..16h+4k+3: the 2-bit codes
// of word L shifted by 2k, minus 4 where the flag (bit 4h+k of byte j of F) is set:
// code | 0xfc is code − 4 as a signed byte.
static __device__ __forceinline__ int q3k_values(uint32_t L, uint32_t F, int h, int k) {
    uint32_t lo = (L >> (2 * k)) & 0x03030303u, f = (F >> (4 * h + k)) & 0x01010101u;
    return (int)(lo | (f * 0xfcu));
}

// Q3_K: w = d·sc·v, v in −4..3, sc (i8) per 16 weights.
template <> struct KSub<TH_Q3_K> {
    static constexpr bool uses_sum = false;  // whether dot() reads the activation block sum
    uint2 q;
    uint32_t f;   // the minus-4 flags (split.c's high_bits)
    uint32_t sc;  // the i8 scales of weights 0..15 (byte 0) and 16..31 (byte 1)
    float d;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        const uint8_t *row = (const uint8_t *)w.data + r * (w.K / 4 + w.K / 8);
        q = ld_2bit(row, b);
        f = __ldg((const uint32_t *)(row + w.K / 4) + b);
        const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 18;
        d = __half2float(__ldg((const __half *)rec));
        sc = __ldg((const unsigned short *)(rec + 2) + (b & 7));
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int) const {
        const int A0[4] = { a0.x, a0.y, a0.z, a0.w }, A1[4] = { a1.x, a1.y, a1.z, a1.w };
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s0 = __dp4a(q3k_values(q.x, f, 0, k), A0[k], s0);
            s1 = __dp4a(q3k_values(q.y, f, 1, k), A1[k], s1);
        }
        int isum = (int)(int8_t)(sc & 0xff) * s0 + (int)(int8_t)(sc >> 8) * s1;
        return xd * d * (float)isum;
    }
    __device__ __forceinline__ void decode(float out[32]) const {  // the CPU's (d·sc)·v
        const uint32_t W[2] = { q.x, q.y };
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float dl = d * (float)(int8_t)(sc >> (8 * h));
#pragma unroll
            for (int k = 0; k < 4; k++) {
                uint32_t v = (uint32_t)q3k_values(W[h], f, h, k);
#pragma unroll
                for (int j = 0; j < 4; j++) out[16 * h + 4 * k + j] = dl * (float)(int8_t)(v >> (8 * j));
            }
        }
    }
};

template <> struct KSub<TH_Q8_0> {  // w = d·q, 32 int8 codes (two 16-byte loads)
    static constexpr bool uses_sum = false;  // whether dot() reads the activation block sum
    int4 q0, q1;
    float d;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        const int4 *p = (const int4 *)((const int8_t *)w.data + r * w.K) + 2 * b;
        q0 = __ldg(p);
        q1 = __ldg(p + 1);
        d = __half2float(__ldg((const __half *)w.scales + r * (w.K / 32) + b));
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int) const {
        int s = __dp4a(q0.x, a0.x, 0);
        s = __dp4a(q0.y, a0.y, s); s = __dp4a(q0.z, a0.z, s); s = __dp4a(q0.w, a0.w, s);
        s = __dp4a(q1.x, a1.x, s); s = __dp4a(q1.y, a1.y, s); s = __dp4a(q1.z, a1.z, s); s = __dp4a(q1.w, a1.w, s);
        return d * xd * (float)s;
    }
    __device__ __forceinline__ void decode(float out[32]) const {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            out[j] = (float)(int8_t)byte_of(make_uint4(q0.x, q0.y, q0.z, q0.w), j) * d;
            out[j + 16] = (float)(int8_t)byte_of(make_uint4(q1.x, q1.y, q1.z, q1.w), j) * d;
        }
    }
};

template <> struct KSub<TH_Q4_1> {  // w = d·q + m
    static constexpr bool uses_sum = true;  // whether dot() reads the activation block sum
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
    __device__ __forceinline__ void decode(float out[32]) const {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t c = byte_of(q, j);
            out[j] = d * (float)(c & 15) + m;
            out[j + 16] = d * (float)(c >> 4) + m;
        }
    }
};

template <uint32_t TYPE> struct KSub5 {  // Q5_0: w = d·(q − 16); Q5_1: w = d·q + m
    static constexpr bool uses_sum = true;  // whether dot() reads the activation block sum
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
    __device__ __forceinline__ void decode(float out[32]) const {
        const uint32_t L[4] = { q.x, q.y, q.z, q.w };
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint32_t lo, hi;
            q5k_codes(L[k], h, k, lo, hi);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int a = (int)((lo >> (8 * j)) & 31), b = (int)((hi >> (8 * j)) & 31);
                if (TYPE == TH_Q5_0) { out[4 * k + j] = (a - 16) * d; out[16 + 4 * k + j] = (b - 16) * d; }
                else { out[4 * k + j] = d * a + m; out[16 + 4 * k + j] = d * b + m; }
            }
        }
    }
};
template <> struct KSub<TH_Q5_0> : KSub5<TH_Q5_0> {};
template <> struct KSub<TH_Q5_1> : KSub5<TH_Q5_1> {};

template <> struct KSub<TH_Q4_K> {  // w = d·sc·q − dmin·m
    static constexpr bool uses_sum = true;  // whether dot() reads the activation block sum
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
    __device__ __forceinline__ void decode(float out[32]) const {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t c = byte_of(q, j);
            out[j] = ds * (float)(c & 15) - dm;
            out[j + 16] = ds * (float)(c >> 4) - dm;
        }
    }
};

template <> struct KSub<TH_Q5_K> {  // w = d·sc·q − dmin·m, 5-bit q
    static constexpr bool uses_sum = true;  // whether dot() reads the activation block sum
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
    __device__ __forceinline__ void decode(float out[32]) const {
        const uint32_t L[4] = { q.x, q.y, q.z, q.w };
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint32_t lo, hi;
            q5k_codes(L[k], h, k, lo, hi);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                out[4 * k + j] = ds * (float)((lo >> (8 * j)) & 31) - dm;
                out[16 + 4 * k + j] = ds * (float)((hi >> (8 * j)) & 31) - dm;
            }
        }
    }
};

template <> struct KSub<TH_Q6_K> {  // w = d·sc16·(q − 32), one scale per 16 weights
    static constexpr bool uses_sum = false;  // whether dot() reads the activation block sum
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
    __device__ __forceinline__ void decode(float out[32]) const {
        const uint32_t L[4] = { q.x, q.y, q.z, q.w };
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint32_t lo, hi;
            q6k_codes(L[k], h, k, lo, hi);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                out[4 * k + j] = d0 * (float)((int)((lo >> (8 * j)) & 63) - 32);
                out[16 + 4 * k + j] = d1 * (float)((int)((hi >> (8 * j)) & 63) - 32);
            }
        }
    }
};

#include "cuda/qn.cuh"  // KSub of qN (q2..q8)

// Sub-block g (32 weights) of row r of a SPLIT matrix, to floats.
template <uint32_t TYPE>
static __device__ __forceinline__ void dq32_as(const th_cu_mat &w, int64_t r, int64_t g, float out[32]) {
    KSub<TYPE> s;
    s.load(w, r, g);
    s.decode(out);
}

static __device__ __forceinline__ void dq32_split(const th_cu_mat &w, int64_t r, int64_t g, float out[32]) {
    switch (w.type) {
    case TH_Q4_0: dq32_as<TH_Q4_0>(w, r, g, out); return;
    case TH_Q8_0: dq32_as<TH_Q8_0>(w, r, g, out); return;
    case TH_Q4_1: dq32_as<TH_Q4_1>(w, r, g, out); return;
    case TH_Q5_0: dq32_as<TH_Q5_0>(w, r, g, out); return;
    case TH_Q5_1: dq32_as<TH_Q5_1>(w, r, g, out); return;
    case TH_Q4_K: dq32_as<TH_Q4_K>(w, r, g, out); return;
    case TH_Q5_K: dq32_as<TH_Q5_K>(w, r, g, out); return;
    case TH_Q6_K: dq32_as<TH_Q6_K>(w, r, g, out); return;
    case TH_Q2_K: dq32_as<TH_Q2_K>(w, r, g, out); return;
    case TH_Q3_K: dq32_as<TH_Q3_K>(w, r, g, out); return;
    case TH_IQ4_NL: dq32_as<TH_IQ4_NL>(w, r, g, out); return;
    case TH_IQ4_XS: dq32_as<TH_IQ4_XS>(w, r, g, out); return;
    case TH_MXFP4: dq32_as<TH_MXFP4>(w, r, g, out); return;
    case TH_Q2: dq32_as<TH_Q2>(w, r, g, out); return;
    case TH_Q3: dq32_as<TH_Q3>(w, r, g, out); return;
    case TH_Q4: dq32_as<TH_Q4>(w, r, g, out); return;
    case TH_Q5: dq32_as<TH_Q5>(w, r, g, out); return;
    case TH_Q6: dq32_as<TH_Q6>(w, r, g, out); return;
    case TH_Q7: dq32_as<TH_Q7>(w, r, g, out); return;
    case TH_Q8: dq32_as<TH_Q8>(w, r, g, out); return;
    default: for (int j = 0; j < 32; j++) out[j] = 0.0f; return;  // no split form (never uploaded so)
    }
}

// Group g of row r of a device matrix (either layout).
static __device__ __forceinline__ void dq32_mat(const th_cu_mat &w, int64_t r, int64_t g, float out[32]) {
    if (w.layout == TH_CU_SPLIT) dq32_split(w, r, g, out);
    else dq32(w.type, (const uint8_t *)w.data + (size_t)r * w.row_bytes, g, out);
}
#endif
