// layer_ops.cuh — device pieces of a layer's small ops, shared by the op
// kernels (rope.cu, attention.cu, attn_mma.cu, glu.cu) and the kernel lab's
// fused single-token decode (bench/gpu/lab/fused/): the paged-cache slot of a
// token, per-head Q/K RMSNorm + rotary embedding of one head (a warp, in place),
// the K/V store, the new token's q/k/v roped inside an attention phase (the
// lab's fused kernel), a warp's
// online-softmax step over a few positions, the final softmax scale (with a
// sink), and the gated activations of the FFN.
#ifndef TH_CUDA_LAYER_OPS_CUH
#define TH_CUDA_LAYER_OPS_CUH
#include "cuda/common.cuh"
#include <math.h>

// The factor that turns head h's unnormalized output (acc over positions with
// running max m and sum l) into the result: 1/l, or with a sink s
// exp(m − M) / (l·exp(m − M) + exp(s − M)), M = max(m, s), so the sink joins
// the denominator exactly once.
static __device__ __forceinline__ float final_scale(const th_cu_attn &a, int h, float m, float l) {
    if (!a.sinks) return l > 0.0f ? 1.0f / l : 0.0f;
    const float sk = a.sinks[h], M = fmaxf(m, sk), c = expf(m - M);
    return c / (l * c + expf(sk - M));
}

// Position pos's K (v false) or V row, all KV heads, in cache block blk.
static __device__ __forceinline__ char *kv_row_in(const th_cu_kv &kv, int64_t blk, int32_t layer, int32_t pos, bool v) {
    int64_t slot = pos % kv.block;
    int64_t e = (int64_t)layer * kv.block * (kv.k_dim + kv.v_dim) +
                (v ? (int64_t)kv.block * kv.k_dim + slot * kv.v_dim : slot * kv.k_dim);
    return (char *)kv.pool + blk * kv.block_bytes + e * (kv.f16 ? 2 : 4);
}

// The same of sequence seq (its block looked up in the table).
static __device__ __forceinline__ char *kv_slot(const th_cu_kv &kv, int32_t layer, int32_t seq, int32_t pos, bool v) {
    return kv_row_in(kv, kv.table[(int64_t)seq * kv.max_blocks + pos / kv.block], layer, pos, v);
}

// yarn_ramp of src/cpu/ops.c: 1 below dim lo, 0 above hi, linear between.
static __device__ __forceinline__ float yarn_ramp(float lo, float hi, int i) {
    float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

static __device__ __forceinline__ void norm_rope_head(float *x, const float *nw, const th_cu_rope &r, int32_t pos, int lane) {
    const int hd = r.head_dim;
    if (nw) {
        float ss = 0.0f;
        for (int i = lane; i < hd; i += 32) ss += x[i] * x[i];
        ss = warp_sum(ss);
        float scale = 1.0f / sqrtf(ss / (float)hd + r.norm_eps);
        for (int i = lane; i < hd; i += 32) x[i] = x[i] * scale * nw[i];
        __syncwarp();
    }
    x += r.rope_off;  // MLA: [nope dims; rope dims]
    const int half = r.n_rot / 2;
    for (int i = lane; i < half; i += 32) {
        float tb = (float)pos;
        for (int k = 0; k < i; k++) tb *= r.theta_scale;
        float ff = r.freq_factors ? r.freq_factors[i] : 1.0f;
        float extrap = tb / ff, theta = r.freq_scale * extrap;  // the CPU reference's order (th_op_rope_ext)
        if (r.ext_factor != 0.0f) {
            float mix = yarn_ramp(r.corr_lo, r.corr_hi, i) * r.ext_factor;
            theta = theta * (1.0f - mix) + extrap * mix;
        }
        float c = cosf(theta) * r.mscale, s = sinf(theta) * r.mscale;
        int a = r.rope_type == 1 ? i : 2 * i, b = r.rope_type == 1 ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
    __syncwarp();
}

static __device__ void store_vec(char *dst, const float *src, int n, bool f16, int lane) {
    if (f16) for (int i = lane; i < n; i += 32) ((__half *)dst)[i] = __float2half_rn(src[i]);
    else for (int i = lane; i < n; i += 32) ((float *)dst)[i] = src[i];
}

// v as the cache holds it (rounded to f16 for an f16 cache).
static __device__ __forceinline__ float round_kv(float v, bool f16) { return f16 ? __half2float(__float2half_rn(v)) : v; }

// `n` (≤ 32·PL) floats from src into a warp's buffer, all loads in flight at once.
template <int PL>
static __device__ __forceinline__ void warp_fetch(const float *src, int n, float *dst, int lane) {
    float v[PL];
#pragma unroll
    for (int i = 0; i < PL; i++) v[i] = lane + 32 * i < n ? __ldcg(src + lane + 32 * i) : 0.0f;
#pragma unroll
    for (int i = 0; i < PL; i++) if (lane + 32 * i < n) dst[lane + 32 * i] = v[i];
    __syncwarp();
}

// A kernel that ropes the new token itself (the fused decode's attention
// phase; tried in attention.cu's decode kernel too, slower: NOTES.md): from the token's raw Q/K/V row, head h's q (warp 0) and, when with_k
// (the block covers the token's own position), its KV head's k (warp 1), normed
// and roped into the block's buffers qb, kb; the KV group's leader stores K
// (warp 1) and V (warp 2) into the token's cache slot. The three chains run side
// by side, each looking its slot up first. kb is left rounded to the cache's type.
template <int PL>
static __device__ __forceinline__ void rope_new_token(const float *row, const th_cu_rope &r, const th_cu_kv &kv,
                                                      int32_t layer, int32_t seq, int32_t p, int h, int kvh, bool with_k,
                                                      bool leader, float *qb, float *kb, int warp, int lane) {
    const int hd = r.head_dim, hdv = r.head_dim_v;
    const int64_t q_w = (int64_t)r.n_head * hd, k_w = (int64_t)r.n_head_kv * hd;
    const size_t esz = kv.f16 ? 2 : 4;
    if (warp == 0) {
        warp_fetch<PL>(row + (int64_t)h * hd, hd, qb, lane);
        norm_rope_head(qb, r.q_norm, r, p, lane);
    } else if (warp == 1 && with_k) {
        char *ks = leader ? kv_slot(kv, layer, seq, p, false) + (int64_t)kvh * hd * esz : nullptr;
        warp_fetch<PL>(row + q_w + (int64_t)kvh * hd, hd, kb, lane);
        norm_rope_head(kb, r.k_norm, r, p, lane);
        if (leader) store_vec(ks, kb, hd, kv.f16, lane);
        for (int i = lane; i < hd; i += 32) kb[i] = round_kv(kb[i], kv.f16);
        __syncwarp();
    } else if (warp == 2 && with_k && leader) {
        char *vs = kv_slot(kv, layer, seq, p, true) + (int64_t)kvh * hdv * esz;
        const float *v = row + q_w + k_w + (int64_t)kvh * hdv;
        float x[PL];
#pragma unroll
        for (int i = 0; i < PL; i++) x[i] = lane + 32 * i < hdv ? __ldcg(v + lane + 32 * i) : 0.0f;
#pragma unroll
        for (int i = 0; i < PL; i++) {
            const int d = lane + 32 * i;
            if (d >= hdv) continue;
            if (kv.f16) ((__half *)vs)[d] = __float2half_rn(x[i]);
            else ((float *)vs)[d] = x[i];
        }
    }
}

static __device__ __forceinline__ float act_fn(float g, int act) {
    if (act == 1) {
        const float c = 0.7978845608028654f;
        return 0.5f * g * (1.0f + tanhf(c * g * (1.0f + 0.044715f * g * g)));
    }
    return g / (1.0f + expf(-g));
}

// act(g) · u for act 0 SiLU, 1 GELU-tanh, 2 clamped SwiGLU (the CPU's formulas).
static __device__ __forceinline__ float glu_fn(float g, float u, int act) {
    if (act == 2) {
        const float alpha = 1.702f, limit = 7.0f;
        g = fminf(g, limit);
        u = fmaxf(fminf(u, limit), -limit);
        return g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
    return act_fn(g, act) * u;
}

// One warp's running softmax state over the positions it has seen: max m, sum l,
// and lane's share of the unnormalized output (dims lane + 32 i).
template <int PL>
struct WarpState {
    float m = -INFINITY, l = 0.0f, acc[PL] = {};
};

// The G positions g0..g0+ng-1 whose K and V are in k, v into the warp's state:
// the scores (one warp sum each), then the online-softmax update.
template <int PL, int G>
__device__ __forceinline__ void warp_step(const th_cu_attn &a, const float (&q)[PL], const float (&k)[G][PL],
                                          const float (&v)[G][PL], int ng, WarpState<PL> &w) {
    float sc[G], mx = w.m;
#pragma unroll
    for (int g = 0; g < G; g++) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < PL; i++) s += q[i] * k[g][i];
        s = warp_sum(s) * a.scale;
        if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
        sc[g] = g < ng ? s : -INFINITY;
        mx = fmaxf(mx, sc[g]);
    }
    const float corr = expf(w.m - mx);
    w.l *= corr;
#pragma unroll
    for (int i = 0; i < PL; i++) w.acc[i] *= corr;
#pragma unroll
    for (int g = 0; g < G; g++) {
        const float pg = g < ng ? expf(sc[g] - mx) : 0.0f;
        w.l += pg;
#pragma unroll
        for (int i = 0; i < PL; i++) w.acc[i] += pg * v[g][i];
    }
    w.m = mx;
}

#endif
