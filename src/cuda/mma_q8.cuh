// mma_q8.cuh — the pieces the int8 tensor-core kernels share (mma_q8.cu for
// batches up to ~128 tokens, mma_q8g.cu for prompt-sized ones): MSub<TYPE>, one
// 32-weight sub-block of a SPLIT weight row decoded to int8 codes for one lane
// position, the mma.sync wrappers, the cp.async and ldmatrix helpers (also used
// by the prompt attention, attn_mma.cu).
#ifndef TH_CUDA_MMA_Q8_CUH
#define TH_CUDA_MMA_Q8_CUH
#include "cuda/split.cuh"

namespace mmaq8 {
// One sub-block of one row for lane position q (lane & 3): lo = the int8 codes
// of weights 4q..4q+3, hi = of 16+4q..16+4q+3, one per byte; its product with an
// activation block (scale xd, integer sum xs) is xd·(c0·Σlo-half + c1·Σhi-half +
// off·xs). HALVES: c0 and c1 differ (a scale per 16 weights: two k16 MMAs).
template <uint32_t TYPE> struct MSub;

// the q-th 32-bit word of the 16 quant bytes of sub-block b of row r
static __device__ __forceinline__ uint32_t qword(const th_cu_mat &w, int64_t r, int64_t b, int q) {
    return __ldg((const uint32_t *)((const uint8_t *)w.data + r * (w.K / 2) + b * 16) + q);
}

template <> struct MSub<TH_Q8_0> {  // w = d·q
    static constexpr bool HALVES = false;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        const uint32_t *p = (const uint32_t *)((const int8_t *)w.data + r * w.K + b * 32);
        lo = __ldg(p + q);
        hi = __ldg(p + 4 + q);
        c0 = c1 = __half2float(__ldg((const __half *)w.scales + r * (w.K / 32) + b));
        off = 0.0f;
    }
};

template <> struct MSub<TH_Q4_0> {  // w = d·(q − 8): codes 0..15, −8d·xs
    static constexpr bool HALVES = false;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        uint32_t v = qword(w, r, b, q);
        lo = v & 0x0f0f0f0fu;
        hi = (v >> 4) & 0x0f0f0f0fu;
        c0 = c1 = __half2float(__ldg((const __half *)w.scales + r * (w.K / 32) + b));
        off = -8.0f * c0;
    }
};

template <> struct MSub<TH_Q4_1> {  // w = d·q + m
    static constexpr bool HALVES = false;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        uint32_t v = qword(w, r, b, q);
        lo = v & 0x0f0f0f0fu;
        hi = (v >> 4) & 0x0f0f0f0fu;
        float2 f = __half22float2(__ldg((const __half2 *)w.scales + r * (w.K / 32) + b));
        c0 = c1 = f.x;
        off = f.y;
    }
};

template <uint32_t TYPE> struct MSub5 {  // Q5_0: w = d·(q − 16); Q5_1: w = d·q + m
    static constexpr bool HALVES = false;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        uint2 rec = __ldg((const uint2 *)w.scales + r * (w.K / 32) + b);
        q5k_codes(qword(w, r, b, q), rec.x, q, lo, hi);
        float2 f = __half22float2(*(const __half2 *)&rec.y);
        c0 = c1 = f.x;
        off = TYPE == TH_Q5_0 ? -16.0f * f.x : f.y;
    }
};
template <> struct MSub<TH_Q5_0> : MSub5<TH_Q5_0> {};
template <> struct MSub<TH_Q5_1> : MSub5<TH_Q5_1> {};

template <> struct MSub<TH_Q4_K> {  // w = d·sc·q − dmin·m
    static constexpr bool HALVES = false;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        uint32_t v = qword(w, r, b, q);
        lo = v & 0x0f0f0f0fu;
        hi = (v >> 4) & 0x0f0f0f0fu;
        const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 20;
        float2 d = __half22float2(__ldg((const __half2 *)rec));
        c0 = c1 = d.x * (float)__ldg(rec + 4 + (b & 7));
        off = -d.y * (float)__ldg(rec + 12 + (b & 7));
    }
};

template <> struct MSub<TH_Q5_K> {  // w = d·sc·q − dmin·m, 5-bit q
    static constexpr bool HALVES = false;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        const uint8_t *row = (const uint8_t *)w.scales + r * (w.K / 8 + w.K / 256 * 20);
        q5k_codes(qword(w, r, b, q), __ldg((const uint32_t *)row + b), q, lo, hi);
        const uint8_t *rec = row + w.K / 8 + (b >> 3) * 20;
        float2 d = __half22float2(__ldg((const __half2 *)rec));
        c0 = c1 = d.x * (float)__ldg(rec + 4 + (b & 7));
        off = -d.y * (float)__ldg(rec + 12 + (b & 7));
    }
};

template <> struct MSub<TH_Q6_K> {  // w = d·sc16·(q − 32)
    static constexpr bool HALVES = true;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        const uint8_t *row = (const uint8_t *)w.scales + r * (w.K / 4 + w.K / 256 * 24);
        uint2 H = __ldg((const uint2 *)row + b);
        uint32_t l, h;
        q6k_codes(qword(w, r, b, q), H, q, l, h);
        lo = __vsub4(l, 0x20202020u);
        hi = __vsub4(h, 0x20202020u);
        const uint8_t *rec = row + w.K / 4 + (b >> 3) * 24;
        float d = __half2float(__ldg((const __half *)rec));
        unsigned short sc = __ldg((const unsigned short *)(rec + 8) + (b & 7));
        c0 = d * (float)(int8_t)(sc & 0xff);
        c1 = d * (float)(int8_t)(sc >> 8);
        off = 0.0f;
    }
};

template <> struct MSub<TH_Q3_K> {  // w = d·sc·v, v in −4..3, sc per 16 weights
    static constexpr bool HALVES = true;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        const uint8_t *row = (const uint8_t *)w.data + r * (w.K / 4 + w.K / 8);
        uint2 c = ld_2bit(row, b);
        uint32_t f = __ldg((const uint32_t *)(row + w.K / 4) + b);
        lo = (uint32_t)q3k_values(c.x, f, 0, q);
        hi = (uint32_t)q3k_values(c.y, f, 1, q);
        const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 18;
        float d = __half2float(__ldg((const __half *)rec));
        unsigned short sc = __ldg((const unsigned short *)(rec + 2) + (b & 7));
        c0 = d * (float)(int8_t)(sc & 0xff);
        c1 = d * (float)(int8_t)(sc >> 8);
        off = 0.0f;
    }
};

template <uint32_t TYPE> struct MSubIQ4 {  // w = d·table[q]
    static constexpr bool HALVES = false;
    uint32_t lo, hi;
    float c0, c1, off;
    __device__ __forceinline__ void load(const th_cu_mat &w, int64_t r, int64_t b, int q) {
        uint32_t v = qword(w, r, b, q);
        lo = (uint32_t)iq4_values<TYPE>(v & 0x0f0f0f0fu);
        hi = (uint32_t)iq4_values<TYPE>((v >> 4) & 0x0f0f0f0fu);
        float d;
        if (TYPE == TH_IQ4_NL) {
            d = __half2float(__ldg((const __half *)w.scales + r * (w.K / 32) + b));
        } else if (TYPE == TH_MXFP4) {
            d = e8m0_half(__ldg((const uint8_t *)w.scales + r * (w.K / 32) + b));
        } else {
            const uint8_t *rec = (const uint8_t *)w.scales + (r * (w.K / 256) + (b >> 3)) * 12;
            d = __half2float(__ldg((const __half *)rec)) * (float)(int8_t)__ldg(rec + 4 + (b & 7));
        }
        c0 = c1 = d;
        off = 0.0f;
    }
};
template <> struct MSub<TH_IQ4_NL> : MSubIQ4<TH_IQ4_NL> {};
template <> struct MSub<TH_IQ4_XS> : MSubIQ4<TH_IQ4_XS> {};
template <> struct MSub<TH_MXFP4> : MSubIQ4<TH_MXFP4> {};

__device__ __forceinline__ void mma_k32(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
#endif
}

__device__ __forceinline__ void mma_k16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(0), "r"(0), "r"(0), "r"(0));
#endif
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp16(void *dst, const void *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src));
#endif
}
__device__ __forceinline__ void cp4(void *dst, const void *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(dst)), "l"(src));
#endif
}
__device__ __forceinline__ void cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}
// Four 8×8 16-bit matrices from shared memory (lanes 8j..8j+7 give matrix j's
// row addresses): r[j] is lane (g, q)'s pair at row g, columns 2q, 2q+1; the
// transposed form gives the pair at rows 2q, 2q+1 of column g.
__device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
#endif
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t *r, const void *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
#endif
}

template <uint32_t TYPE> constexpr bool has_msub() {
    return TYPE == TH_Q4_0 || TYPE == TH_Q4_1 || TYPE == TH_Q5_0 || TYPE == TH_Q5_1 || TYPE == TH_Q8_0 ||
           TYPE == TH_Q3_K || TYPE == TH_Q4_K || TYPE == TH_Q5_K || TYPE == TH_Q6_K || TYPE == TH_IQ4_NL ||
           TYPE == TH_IQ4_XS || TYPE == TH_MXFP4;
}

}  // namespace mmaq8

#endif
