// rope.cu — per token: optional per-head Q/K RMSNorm, rotary embedding of Q
// (in place) and K (NORM: adjacent pairs, NEOX: halves; rope_freqs factors;
// theta computed by repeated multiplication exactly as the CPU reference; YaRN's
// ramp between interpolated and extrapolated angles and the cos/sin magnitude
// as th_op_rope_ext), then K and V written into the token's slot of the paged cache.
#include "cuda/common.cuh"

namespace {

__device__ __forceinline__ char *kv_slot(const th_cu_kv &kv, int32_t layer, int32_t seq, int32_t pos, bool v) {
    int64_t blk = kv.table[(int64_t)seq * kv.max_blocks + pos / kv.block];
    int64_t slot = pos % kv.block;
    int64_t e = (int64_t)layer * kv.block * (kv.k_dim + kv.v_dim) +
                (v ? (int64_t)kv.block * kv.k_dim + slot * kv.v_dim : slot * kv.k_dim);
    return (char *)kv.pool + blk * kv.block_bytes + e * (kv.f16 ? 2 : 4);
}

// yarn_ramp of src/cpu/ops.c: 1 below dim lo, 0 above hi, linear between.
__device__ __forceinline__ float yarn_ramp(float lo, float hi, int i) {
    float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

__device__ void norm_rope_head(float *x, const float *nw, const th_cu_rope &r, int32_t pos, int lane) {
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

__device__ void store_vec(char *dst, const float *src, int n, bool f16, int lane) {
    if (f16) for (int i = lane; i < n; i += 32) ((__half *)dst)[i] = __float2half_rn(src[i]);
    else for (int i = lane; i < n; i += 32) ((float *)dst)[i] = src[i];
}

__global__ void rope_store(float *qkv, int64_t stride, const int32_t *pos, const int32_t *seq, th_cu_rope r,
                           th_cu_kv kv, int32_t layer) {
    pdl_trigger();
    int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    // the batch metadata and block table are not written by kernels: the cache slots are found before waiting
    const int32_t p = pos[t], s = seq[t];
    char *const kslot = kv_slot(kv, layer, s, p, false), *const vslot = kv_slot(kv, layer, s, p, true);
    pdl_wait();
    float *row = qkv + (int64_t)t * stride;
    const int64_t q_w = (int64_t)r.n_head * r.head_dim, k_w = (int64_t)r.n_head_kv * r.head_dim;
    int total = r.n_head + 2 * r.n_head_kv;
    for (int h = blockIdx.x * nw + warp; h < total; h += nw * gridDim.x) {
        if (h < r.n_head) {
            norm_rope_head(row + (int64_t)h * r.head_dim, r.q_norm, r, p, lane);
        } else if (h < r.n_head + r.n_head_kv) {
            int kh = h - r.n_head;
            float *k = row + q_w + (int64_t)kh * r.head_dim;
            norm_rope_head(k, r.k_norm, r, p, lane);
            store_vec(kslot + (int64_t)kh * r.head_dim * (kv.f16 ? 2 : 4), k, r.head_dim, kv.f16, lane);
        } else {
            int vh = h - r.n_head - r.n_head_kv;
            const float *v = row + q_w + k_w + (int64_t)vh * r.head_dim_v;
            store_vec(vslot + (int64_t)vh * r.head_dim_v * (kv.f16 ? 2 : 4), v, r.head_dim_v, kv.f16, lane);
        }
    }
}

}  // namespace

extern "C" void th_cu_rope_store(float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq,
                                 const th_cu_rope *r, const th_cu_kv *kv, int32_t layer, cudaStream_t st) {
    if (n <= 0) return;
    int heads = r->n_head + 2 * r->n_head_kv;  // one warp per head, four heads a block
    launch_k(rope_store, dim3((unsigned)((heads + 3) / 4), (unsigned)n), dim3(128), st, qkv, stride, pos, seq, *r, *kv, layer);
}
