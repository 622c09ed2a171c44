// rope.cu — per token: optional per-head Q/K RMSNorm, rotary embedding of Q
// (in place) and K (NORM: adjacent pairs, NEOX: halves; rope_freqs factors;
// theta computed by repeated multiplication exactly as the CPU reference; YaRN's
// ramp between interpolated and extrapolated angles and the cos/sin magnitude
// as th_op_rope_ext), then K and V written into the token's slot of the paged cache.
#include "cuda/layer_ops.cuh"

namespace {

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
