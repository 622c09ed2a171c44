// qn.cuh — the device side of qN (q2..q8, quant/qn.h) in its SPLIT layout (split.c
// describes the bytes): KSub<TH_Qn>, one 32-weight sub-block in registers, as the
// other split types in split.cuh (which includes this file after its own KSubs):
// load() reads the code parts (nibbles, two bits, one bit; q8: 32 int8 bytes) and
// the group's fp16 scale; dot() is the exact int8 product with a q8 activation
// block: Σ (c − (2^n − 1)/2)·q = (2·Σc·q − (2^n − 1)·Σq) / 2, in integers;
// decode() gives the 32 weights d·((2c − (2^n − 1)) / 2), bit for bit the CPU's.
#ifndef TH_CUDA_QN_CUH
#define TH_CUDA_QN_CUH

// Bytes per row of the quants array (split.c's th_cu_split_sizes).
static __device__ __forceinline__ int64_t qn_qrow(int n, int64_t K) { return (K * n / 8 + 15) & ~(int64_t)15; }

template <int N> struct KSubQN {
    static constexpr bool uses_sum = true;  // whether dot() reads the activation block sum
    static constexpr bool NIB = N >= 4 && N < 8, TWO = (N & 2) != 0, ONE = (N & 1) != 0;
    uint4 q;      // nibbles (n >= 4), or q8's first 16 bytes
    uint4 q8hi;   // q8's last 16 bytes
    uint2 t;      // two-bit part
    uint32_t o;   // one-bit part
    float d;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b) {
        const uint8_t *row = (const uint8_t *)w.data + r * qn_qrow(N, w.K);
        if (N == 8) {
            const uint4 *p = (const uint4 *)row + 2 * b;
            q = __ldg(p);
            q8hi = __ldg(p + 1);
        }
        if (NIB) q = __ldg((const uint4 *)row + b);
        const uint8_t *r2 = row + (NIB ? w.K / 2 : 0);
        if (TWO) t = __ldg((const uint2 *)r2 + b);
        if (ONE) o = __ldg((const uint32_t *)(r2 + (TWO ? w.K / 4 : 0)) + b);
        d = __half2float(__ldg((const __half *)w.scales + r * (w.K / 64) + (b >> 1)));
    }
    // The codes of weights 4k..4k+3 (lo) and 16+4k..16+4k+3 (hi), one a byte
    // (q8: c − 128 as int8).
    __device__ __forceinline__ void codes(int k, uint32_t &lo, uint32_t &hi) const {
        if (N == 8) {
            const uint32_t A[4] = { q.x, q.y, q.z, q.w }, B[4] = { q8hi.x, q8hi.y, q8hi.z, q8hi.w };
            lo = A[k]; hi = B[k];
            return;
        }
        lo = 0; hi = 0;
        if (NIB) {
            const uint32_t L[4] = { q.x, q.y, q.z, q.w };
            lo = L[k] & 0x0f0f0f0fu;
            hi = (L[k] >> 4) & 0x0f0f0f0fu;
        }
        if (TWO) {
            constexpr int S = N >= 4 ? 4 : 0;
            lo |= ((t.x >> (2 * k)) & 0x03030303u) << S;
            hi |= ((t.y >> (2 * k)) & 0x03030303u) << S;
        }
        if (ONE) {
            lo |= ((o >> k) & 0x01010101u) << (N - 1);
            hi |= ((o >> (4 + k)) & 0x01010101u) << (N - 1);
        }
    }
    __device__ __forceinline__ float dot(int4 a0, int4 a1, float xd, int xs) const {
        const int A0[4] = { a0.x, a0.y, a0.z, a0.w }, A1[4] = { a1.x, a1.y, a1.z, a1.w };
        int s = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint32_t lo, hi;
            codes(k, lo, hi);
            s = __dp4a((int)lo, A0[k], s);
            s = __dp4a((int)hi, A1[k], s);
        }
        // 2c − (2^n − 1) summed against q; q8's bytes are c − 128: 2(c − 128) + 1
        int s2 = N == 8 ? 2 * s + xs : 2 * s - ((1 << N) - 1) * xs;
        return 0.5f * d * xd * (float)s2;
    }
    __device__ __forceinline__ void decode(float out[32]) const {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint32_t lo, hi;
            codes(k, lo, hi);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int a = (int)((lo >> (8 * j)) & 0xffu), b = (int)((hi >> (8 * j)) & 0xffu);
                if (N == 8) { a = (int)(int8_t)a + 128; b = (int)(int8_t)b + 128; }
                out[4 * k + j] = d * (0.5f * (float)(2 * a - ((1 << N) - 1)));
                out[16 + 4 * k + j] = d * (0.5f * (float)(2 * b - ((1 << N) - 1)));
            }
        }
    }
};
template <> struct KSub<TH_Q2> : KSubQN<2> {};
template <> struct KSub<TH_Q3> : KSubQN<3> {};
template <> struct KSub<TH_Q4> : KSubQN<4> {};
template <> struct KSub<TH_Q5> : KSubQN<5> {};
template <> struct KSub<TH_Q6> : KSubQN<6> {};
template <> struct KSub<TH_Q7> : KSubQN<7> {};
template <> struct KSub<TH_Q8> : KSubQN<8> {};
#endif
