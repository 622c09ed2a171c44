// attention.cu — causal attention over the paged KV cache, flash-decoding style:
// each (token, head) pair's positions are split into chunks handled by separate
// blocks (grid = splits × heads × tokens), so one decode token still fills the
// GPU. Two block kernels over a split: for decode (attn_split) each warp takes
// steps of G positions, issuing all K and V loads of the step at once (lanes
// across the head dimension, coalesced), then one warp sum per score and an
// online-softmax update, the warps' states combined in shared memory; for
// larger batches (attn_tile) a thread per position scores tiles of 128, for all
// the query heads of one KV head at once (each K/V row loaded once for them);
// runs of prompt tokens go to the tensor-core kernel instead (attn_mma.cu). The
// last block of a (token, head) to finish merges the splits (an atomic counter
// per pair, reset after use). In graph mode the split count is planned for the
// longest context and each (token, head) stretches its chunk to cover its own
// length with at most that many splits (split_chunk), so a short context runs few
// blocks; blocks past the end exit before waiting for the previous kernel.
// With one token in the batch, every position but the token's own was written by
// earlier steps: attn_split loads those K/V rows before waiting (PDL).
// Optional sliding window and score softcap, as in the CPU reference, and
// optional attention sinks (one logit per head that joins the softmax
// denominator, th_op_softmax_sink): added once per (token, head), in the final
// normalization (final_scale) of the single-split path or of the merge.
#include "cuda/layer_ops.cuh"
#include "cuda/q8.cuh"
#include <math.h>

namespace {

constexpr int TILE = 128;

// The q8 rows of an output that starts t0 rows (os elements each) further on.
th_cu_q8 q8_rows(const th_cu_q8 &q, int64_t t0, int64_t os) {
    th_cu_q8 r = q;
    r.q += t0 * os;
    r.d += t0 * os / 32;
    r.s += t0 * os / 32;
    return r;
}

__device__ __forceinline__ void span(const th_cu_attn &a, int32_t p, int32_t &lo, int32_t &len) {
    lo = a.window > 0 ? max(0, p - a.window + 1) : 0;
    len = p - lo + 1;
}

// The chunk of a (token, head) over len positions: a.chunk, or longer where
// a.n_split chunks of it would not cover len (a multiple of 32 either way).
__device__ __forceinline__ int32_t split_chunk(const th_cu_attn &a, int32_t len) {
    const int32_t c = (len + a.n_split - 1) / a.n_split;
    return max(a.chunk, (c + 31) / 32 * 32);
}

// q8 copy of one head's output row (hdv a multiple of 32) from registers: thread
// tid holds dims tid (o0) and tid + TILE (o1), so warp w quantizes dims 32w.. and 32w + TILE..
__device__ __forceinline__ void head_q8(float o0, float o1, int hdv, int64_t base, const th_cu_q8 &oq) {
    const int lane = threadIdx.x & 31, d0 = threadIdx.x - lane;
    if (d0 < hdv) q8_store_block(o0, lane, oq, base + d0, (base + d0) / 32);
    if (d0 + TILE < hdv) q8_store_block(o1, lane, oq, base + d0 + TILE, (base + d0 + TILE) / 32);
}

// Combine the ns partial states (m, l, unnormalized acc) of one (token, head)
// into this thread's output dims tid (o0) and tid + TILE (o1), in one pass that
// rescales as the running max grows (the loads of all splits are independent).
// Reads through L2 (__ldcg): other blocks wrote them during this launch.
__device__ void merge_splits(const th_cu_attn &a, int h, const float *pp, int ns, int hdv, float &o0, float &o1) {
    const int tid = threadIdx.x;
    float M = -INFINITY, L = 0.0f, a0 = 0.0f, a1 = 0.0f;
#pragma unroll 4
    for (int s = 0; s < ns; s++) {
        const float *ps = pp + s * (hdv + 2);
        const float ms = __ldcg(ps), ls = __ldcg(ps + 1);
        const float x0 = tid < hdv ? __ldcg(ps + 2 + tid) : 0.0f;
        const float x1 = tid + TILE < hdv ? __ldcg(ps + 2 + tid + TILE) : 0.0f;
        const float Mn = fmaxf(M, ms), c = expf(M - Mn), e = expf(ms - Mn);
        L = L * c + ls * e;
        a0 = a0 * c + x0 * e;
        a1 = a1 * c + x1 * e;
        M = Mn;
    }
    const float inv = final_scale(a, h, M, L);
    o0 = a0 * inv;
    o1 = a1 * inv;
}

// The end of a split block, both kernels: its state (max m, sum l, unnormalized
// output dims tid and tid + TILE in acc0, acc1) is the head's output when the
// (token, head) has one split; otherwise it is published and the last block to
// finish merges them all.
__device__ void finish_split(const th_cu_attn &a, int t, int h, int sp, int32_t len, float m, float l, float acc0,
                             float acc1, float *out, int64_t os, const th_cu_q8 &oq, bool q8) {
    const int tid = threadIdx.x, hdv = a.head_dim_v;
    const int32_t chunk = split_chunk(a, len);
    const int ns = (int)((len + chunk - 1) / chunk);  // non-empty splits of this (token, head)
    float o0, o1;
    if (ns == 1) {
        const float inv = final_scale(a, h, m, l);
        o0 = acc0 * inv;
        o1 = acc1 * inv;
    } else {
        // several splits: publish this one's state; the last block to finish merges them all
        float *pp = a.partial + (((int64_t)t * a.n_head + h) * a.n_split + sp) * (hdv + 2);
        if (tid == 0) { pp[0] = m; pp[1] = l; }
        if (tid < hdv) pp[2 + tid] = acc0;
        if (tid + TILE < hdv) pp[2 + tid + TILE] = acc1;
        __threadfence();
        __syncthreads();
        __shared__ int s_last;
        int *cnt = a.counter + (int64_t)t * a.n_head + h;
        if (tid == 0) s_last = atomicAdd(cnt, 1) == ns - 1;
        __syncthreads();
        if (!s_last) return;
        __threadfence();
        if (tid == 0) *cnt = 0;  // ready for the next launch
        merge_splits(a, h, a.partial + ((int64_t)t * a.n_head + h) * a.n_split * (hdv + 2), ns, hdv, o0, o1);
    }
    const int64_t base = (int64_t)t * os + (int64_t)h * hdv;
    if (tid < hdv) out[base + tid] = o0;
    if (tid + TILE < hdv) out[base + tid + TILE] = o1;
    if (q8) head_q8(o0, o1, hdv, base, oq);
}

// Address of position j's K (v = false) or V row of kv head kvh in the paged cache.
template <bool F16>
__device__ __forceinline__ const char *kv_row(const th_cu_kv &kv, const int32_t *table, int64_t lay, int32_t j,
                                              int kvh, int width, bool v) {
    const char *base = (const char *)kv.pool + (int64_t)table[j / kv.block] * kv.block_bytes;
    const int64_t slot = j % kv.block;
    const int64_t e = v ? lay + (int64_t)kv.block * kv.k_dim + slot * kv.v_dim : lay + slot * kv.k_dim;
    return base + (e + (int64_t)kvh * width) * (F16 ? 2 : 4);
}

template <bool F16>
__device__ __forceinline__ float ld_kv(const char *row, int d) {
    return F16 ? __half2float(((const __half *)row)[d]) : ((const float *)row)[d];
}

// The K and V rows of the step's positions g0 + g (g < ng) that lie in [from, to)
// into k[g], v[g] (lanes across the head dimension, coalesced); the others are kept.
template <bool F16, int PL, int G>
__device__ __forceinline__ void warp_load(const th_cu_attn &a, const th_cu_kv &kv, const int32_t *table, int64_t lay,
                                          int kvh, int32_t g0, int ng, int32_t from, int32_t to, int lane,
                                          float (&k)[G][PL], float (&v)[G][PL]) {
    const int hd = a.head_dim, hdv = a.head_dim_v;
#pragma unroll
    for (int g = 0; g < G; g++) {
        const int32_t j = g0 + g;
        if (g >= ng || j < from || j >= to) continue;
        const char *kr = kv_row<F16>(kv, table, lay, j, kvh, hd, false);
        const char *vr = kv_row<F16>(kv, table, lay, j, kvh, hdv, true);
#pragma unroll
        for (int i = 0; i < PL; i++) {
            const int d = lane + 32 * i;
            k[g][i] = d < hd ? ld_kv<F16>(kr, d) : 0.0f;
            v[g][i] = d < hdv ? ld_kv<F16>(vr, d) : 0.0f;
        }
    }
}


// Flash-decoding block: NW warps share one (split, token) and NH query heads of
// one KV head (each K/V row a warp loads serves all NH); warp w takes the split's
// positions in steps of G, steps w, w + NW, ...; the warps' states are then
// combined in shared memory, head by head. PL = dims per lane (head widths up to 32 PL).
template <bool F16, int PL, int NH>
__global__ void __launch_bounds__(TILE) attn_split(const float *qkv, int64_t stride, const int32_t *pos,
                                                   const int32_t *seq, th_cu_attn a, th_cu_kv kv, int32_t layer,
                                                   float *out, int64_t os, th_cu_q8 oq, bool q8) {
    constexpr int NW = TILE / 32, G = 32 / PL;
    pdl_trigger();
    __shared__ float s_m[NH][NW], s_l[NH][NW];
    __shared__ float s_acc[NH][NW][32 * PL];
    const int sp = blockIdx.x, h0 = blockIdx.y * NH, t = blockIdx.z, tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    // batch metadata and the block table are not written by kernels: read before waiting
    const int32_t p = pos[t], sq = seq[t];
    int32_t lo, len;
    span(a, p, lo, len);
    const int32_t chunk = split_chunk(a, len);
    const int64_t first = (int64_t)sp * chunk;
    if (first >= len) return;
    const int32_t start = lo + (int32_t)first;
    const int32_t end = lo + (int32_t)min((int64_t)len, first + chunk);
    const int hd = a.head_dim, kvh = h0 / (a.n_head / a.n_head_kv);
    const int64_t lay = (int64_t)layer * kv.block * (kv.k_dim + kv.v_dim);
    const int32_t *table = kv.table + (int64_t)sq * kv.max_blocks;
    // positions below `early` were cached by earlier steps (one token a batch:
    // all but its own); the warp's first step loads them before waiting
    const int32_t early = gridDim.z == 1 ? p : start;
    int32_t g0 = start + warp * G;
    float k[G][PL] = {}, v[G][PL] = {};
    if (g0 < end) warp_load<F16, PL, G>(a, kv, table, lay, kvh, g0, min(G, end - g0), start, early, lane, k, v);
    pdl_wait();
    float q[NH][PL];
#pragma unroll
    for (int e = 0; e < NH; e++)
#pragma unroll
        for (int i = 0; i < PL; i++) {
            const int d = lane + 32 * i;
            q[e][i] = d < hd ? qkv[(int64_t)t * stride + (int64_t)(h0 + e) * hd + d] : 0.0f;
        }
    WarpState<PL> w[NH];
    for (int32_t from = early; g0 < end; g0 += NW * G, from = start) {
        const int ng = min(G, end - g0);
        warp_load<F16, PL, G>(a, kv, table, lay, kvh, g0, ng, from, end, lane, k, v);
#pragma unroll
        for (int e = 0; e < NH; e++) warp_step<PL, G>(a, q[e], k, v, ng, w[e]);
    }
    const int hdv = a.head_dim_v;
#pragma unroll
    for (int e = 0; e < NH; e++) {
        if (lane == 0) { s_m[e][warp] = w[e].m; s_l[e][warp] = w[e].l; }
#pragma unroll
        for (int i = 0; i < PL; i++) s_acc[e][warp][lane + 32 * i] = w[e].acc[i];
    }
    __syncthreads();
#pragma unroll 1
    for (int e = 0; e < NH; e++) {
        float m = -INFINITY, l = 0.0f, wt[NW];
#pragma unroll
        for (int i = 0; i < NW; i++) m = fmaxf(m, s_m[e][i]);
#pragma unroll
        for (int i = 0; i < NW; i++) { wt[i] = s_l[e][i] > 0.0f ? expf(s_m[e][i] - m) : 0.0f; l += wt[i] * s_l[e][i]; }
        float acc0 = 0.0f, acc1 = 0.0f;  // dims tid and tid + TILE
#pragma unroll
        for (int i = 0; i < NW; i++) {
            if (tid < hdv) acc0 += wt[i] * s_acc[e][i][tid];
            if (tid + TILE < hdv) acc1 += wt[i] * s_acc[e][i][tid + TILE];
        }
        finish_split(a, t, h0 + e, sp, len, m, l, acc0, acc1, out, os, oq, q8);
    }
}

// NH dot products of one K row (k, hd values) with the queries in q (rows of 256).
template <bool F16, int NH>
__device__ __forceinline__ void dot_qn(const float (*q)[256], const char *k, int hd, float (&s)[NH]) {
    constexpr int UN = NH <= 2 ? 4 : 2;  // K loads in flight (one head: a single dependent sum a thread)
#pragma unroll
    for (int e = 0; e < NH; e++) s[e] = 0.0f;
    if (F16 && (hd & 7) == 0) {
#pragma unroll UN
        for (int i = 0; i < hd; i += 8) {
            uint4 v = *(const uint4 *)(k + 2 * i);
            const __half2 *h = (const __half2 *)&v;
            float f[8];
#pragma unroll
            for (int j = 0; j < 4; j++) { float2 x = __half22float2(h[j]); f[2 * j] = x.x; f[2 * j + 1] = x.y; }
#pragma unroll
            for (int e = 0; e < NH; e++)
#pragma unroll
                for (int j = 0; j < 8; j++) s[e] += q[e][i + j] * f[j];
        }
    } else if (!F16 && (hd & 3) == 0) {
#pragma unroll UN
        for (int i = 0; i < hd; i += 4) {
            float4 v = *(const float4 *)(k + 4 * i);
#pragma unroll
            for (int e = 0; e < NH; e++) s[e] += q[e][i] * v.x + q[e][i + 1] * v.y + q[e][i + 2] * v.z + q[e][i + 3] * v.w;
        }
    } else {
        for (int i = 0; i < hd; i++) {
            const float kv = F16 ? __half2float(((const __half *)k)[i]) : ((const float *)k)[i];
#pragma unroll
            for (int e = 0; e < NH; e++) s[e] += q[e][i] * kv;
        }
    }
}

// NH block-wide maxima or sums at once (one barrier pair for all of them).
template <int NH>
__device__ __forceinline__ void block_reduce_n(float (&v)[NH], float (*red)[TILE / 32], bool is_max) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < NH; e++) v[e] = is_max ? warp_max(v[e]) : warp_sum(v[e]);
    __syncthreads();
    if (lane == 0)
#pragma unroll
        for (int e = 0; e < NH; e++) red[e][warp] = v[e];
    __syncthreads();
#pragma unroll
    for (int e = 0; e < NH; e++) {
        float r = red[e][0];
        for (int i = 1; i < TILE / 32; i++) r = is_max ? fmaxf(r, red[e][i]) : r + red[e][i];
        v[e] = r;
    }
}

// Σ over the tile's positions of p[e][j] · V_j[d] for the NH heads, eight loads in flight.
template <bool F16, int NH>
__device__ __forceinline__ void v_sum_n(const char *const *vrow, const float (*p)[TILE], int nt, int d, float (&a)[NH]) {
#pragma unroll
    for (int e = 0; e < NH; e++) a[e] = 0.0f;
    int j = 0;
    for (; j + 8 <= nt; j += 8) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
            v[u] = F16 ? __half2float(((const __half *)vrow[j + u])[d]) : ((const float *)vrow[j + u])[d];
#pragma unroll
        for (int e = 0; e < NH; e++)
#pragma unroll
            for (int u = 0; u < 8; u++) a[e] += p[e][j + u] * v[u];
    }
    for (; j < nt; j++) {
        const float v = F16 ? __half2float(((const __half *)vrow[j])[d]) : ((const float *)vrow[j])[d];
#pragma unroll
        for (int e = 0; e < NH; e++) a[e] += p[e][j] * v;
    }
}

// Batches (decode batches, short prompt runs): a thread per position for the
// scores (tiles of TILE positions) and a thread per value dimension for the
// output, which covers a tile with far fewer instructions than the warp-per-step
// kernel. A block takes NH query heads that share one KV head (GQA), so each K
// and V row it loads serves all of them.
template <bool F16, int NH>
__global__ void __launch_bounds__(TILE) attn_tile(const float *qkv, int64_t stride, const int32_t *pos,
                                                   const int32_t *seq, th_cu_attn a, th_cu_kv kv, int32_t layer,
                                                   float *out, int64_t os, th_cu_q8 oq, bool q8) {
    pdl_trigger();
    __shared__ float s_q[NH][256];
    __shared__ float s_p[NH][TILE];
    __shared__ const char *s_v[TILE];
    __shared__ float red[NH][TILE / 32];
    const int sp = blockIdx.x, h0 = blockIdx.y * NH, t = blockIdx.z, tid = threadIdx.x;
    const int32_t p = pos[t], sq = seq[t];
    int32_t lo, len;
    span(a, p, lo, len);
    const int32_t chunk = split_chunk(a, len);
    const int64_t first = (int64_t)sp * chunk;
    if (first >= len) return;
    const int32_t start = lo + (int32_t)first;
    const int32_t end = lo + (int32_t)min((int64_t)len, first + chunk);
    const int hd = a.head_dim, hdv = a.head_dim_v, kvh = h0 / (a.n_head / a.n_head_kv);
    const size_t esz = F16 ? 2 : 4;
    const int64_t lay = (int64_t)layer * kv.block * (kv.k_dim + kv.v_dim);
    const int32_t *table = kv.table + (int64_t)sq * kv.max_blocks;
    pdl_wait();
    for (int e = 0; e < NH; e++)
        for (int i = tid; i < hd; i += TILE) s_q[e][i] = qkv[(int64_t)t * stride + (int64_t)(h0 + e) * hd + i];
    __syncthreads();
    float m[NH], l[NH], acc0[NH], acc1[NH];
#pragma unroll
    for (int e = 0; e < NH; e++) { m[e] = -INFINITY; l[e] = acc0[e] = acc1[e] = 0.0f; }
    for (int32_t t0 = start; t0 < end; t0 += TILE) {
        const int32_t j = t0 + tid;
        float sc[NH];
#pragma unroll
        for (int e = 0; e < NH; e++) sc[e] = -INFINITY;
        if (j < end) {
            const char *base = (const char *)kv.pool + (int64_t)table[j / kv.block] * kv.block_bytes;
            const int64_t slot = j % kv.block;
            const char *k = base + (lay + slot * kv.k_dim + (int64_t)kvh * hd) * esz;
            s_v[tid] = base + (lay + (int64_t)kv.block * kv.k_dim + slot * kv.v_dim + (int64_t)kvh * hdv) * esz;
            dot_qn<F16, NH>(s_q, k, hd, sc);
#pragma unroll
            for (int e = 0; e < NH; e++) {
                sc[e] *= a.scale;
                if (a.softcap > 0.0f) sc[e] = a.softcap * tanhf(sc[e] / a.softcap);
            }
        }
        float mx[NH], pj[NH], corr[NH];
#pragma unroll
        for (int e = 0; e < NH; e++) mx[e] = sc[e];
        block_reduce_n<NH>(mx, red, true);
#pragma unroll
        for (int e = 0; e < NH; e++) {
            mx[e] = fmaxf(m[e], mx[e]);
            pj[e] = j < end ? expf(sc[e] - mx[e]) : 0.0f;
            corr[e] = expf(m[e] - mx[e]);
            s_p[e][tid] = pj[e];
        }
        block_reduce_n<NH>(pj, red, false);  // the tile's sums (the barriers also publish s_p and s_v)
        const int nt = min(TILE, end - t0);
        float a0[NH], a1[NH];
        if (tid < hdv) v_sum_n<F16, NH>(s_v, s_p, nt, tid, a0);
        if (tid + TILE < hdv) v_sum_n<F16, NH>(s_v, s_p, nt, tid + TILE, a1);
#pragma unroll
        for (int e = 0; e < NH; e++) {
            l[e] = l[e] * corr[e] + pj[e];
            acc0[e] = acc0[e] * corr[e] + (tid < hdv ? a0[e] : 0.0f);
            acc1[e] = acc1[e] * corr[e] + (tid + TILE < hdv ? a1[e] : 0.0f);
            m[e] = mx[e];
        }
        __syncthreads();
    }
#pragma unroll
    for (int e = 0; e < NH; e++) finish_split(a, t, h0 + e, sp, len, m[e], l[e], acc0[e], acc1[e], out, os, oq, q8);
}

// Query heads a block takes: the largest of 8, 4, 2, 1 that divides the group, is
// at most `cap` and leaves the launch at least a.group_blocks blocks (fewer, longer
// blocks lose where the kernel is latency-bound: small decode batches).
int block_heads(const th_cu_attn &a, int cap, int64_t blocks_one_head) {
    const int group = a.n_head / a.n_head_kv;
    const int64_t want = a.group_blocks > 0 ? a.group_blocks : TH_CU_ATTN_GROUP_BLOCKS;
    int nh = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
    while (nh > cap || (nh > 1 && blocks_one_head / nh < want)) nh /= 2;
    return nh;
}

template <bool F16>
void launch_tile(unsigned n_split, int n, cudaStream_t st, const float *qkv, int64_t stride, const int32_t *pos,
                 const int32_t *seq, const th_cu_attn &a, const th_cu_kv &kv, int32_t layer, float *out, int64_t os,
                 const th_cu_q8 &q, bool q8) {
    const int nh = block_heads(a, 2, (int64_t)n_split * a.n_head * n);  // 2 at most: 4 lost at 64 tokens (NOTES.md)
    dim3 grid(n_split, (unsigned)(a.n_head / nh), (unsigned)n);
    if (nh == 2) launch_k(attn_tile<F16, 2>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else launch_k(attn_tile<F16, 1>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
}

// Dims per lane for a head width (at most 256).
int lanes_dims(int width) { return width <= 64 ? 2 : width <= 128 ? 4 : 8; }

// Query heads an attn_split block takes (block_heads): at most 4, 2 for 256-wide
// heads (their K/V and query registers).
int split_heads(const th_cu_attn &a, int width, const dim3 &grid) {
    return block_heads(a, width <= 128 ? 4 : 2, (int64_t)grid.x * grid.y * grid.z);
}

template <bool F16>
void launch_attn(dim3 grid, cudaStream_t st, int width, const float *qkv, int64_t stride, const int32_t *pos,
                 const int32_t *seq, const th_cu_attn &a, const th_cu_kv &kv, int32_t layer, float *out, int64_t os,
                 const th_cu_q8 &q, bool q8) {
    const int pl = lanes_dims(width), nh = split_heads(a, width, grid);
    grid.y = (unsigned)(a.n_head / nh);
    if (pl == 2 && nh == 4) launch_k(attn_split<F16, 2, 4>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else if (pl == 2 && nh == 2) launch_k(attn_split<F16, 2, 2>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else if (pl == 2) launch_k(attn_split<F16, 2, 1>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else if (pl == 4 && nh == 4) launch_k(attn_split<F16, 4, 4>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else if (pl == 4 && nh == 2) launch_k(attn_split<F16, 4, 2>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else if (pl == 4) launch_k(attn_split<F16, 4, 1>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else if (nh == 2) launch_k(attn_split<F16, 8, 2>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
    else launch_k(attn_split<F16, 8, 1>, grid, dim3(TILE), st, qkv, stride, pos, seq, a, kv, layer, out, os, q, q8);
}

}  // namespace

extern "C" int32_t th_cu_attn_step(int32_t head_dim, int32_t head_dim_v) {
    return (TILE / 32) * (32 / lanes_dims(head_dim > head_dim_v ? head_dim : head_dim_v));
}

extern "C" void th_cu_attn_plan(int n, int32_t n_head, int32_t hdv, int64_t max_len, size_t partial_cap,
                                int sm_count, int32_t min_chunk, int32_t *n_split, int32_t *chunk) {
    if (max_len < 1) max_len = 1;
    int64_t pieces = (max_len + 31) / 32;
    int64_t pairs = (int64_t)n * n_head;
    int64_t want = (4 * (int64_t)sm_count + pairs - 1) / pairs;
    int64_t cap = (int64_t)(partial_cap / ((size_t)pairs * (size_t)(hdv + 2)));
    int64_t s = pieces < want ? pieces : want;
    if (s > cap) s = cap;
    if (s < 1) s = 1;
    if (min_chunk > 0) {  // graph mode: the kernels stretch the chunk to each length (split_chunk)
        *chunk = min_chunk;
        *n_split = (int32_t)s;
        return;
    }
    int64_t c = (max_len + s - 1) / s;
    c = (c + 31) / 32 * 32;
    *chunk = (int32_t)c;
    *n_split = (int32_t)((max_len + c - 1) / c);
}

// The CUDA-core kernels over n tokens: attn_tile for batches, attn_split for decode.
static void attention_simt(const float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq,
                           const th_cu_attn *a, const th_cu_kv *kv, int32_t layer, float *out, int64_t os,
                           const th_cu_q8 *oq, cudaStream_t st) {
    if (n <= 0) return;
    bool q8 = oq && a->head_dim_v % 32 == 0;
    th_cu_q8 q = oq ? *oq : th_cu_q8{};
    if (n >= (a->tile_min > 0 ? a->tile_min : TH_CU_ATTN_TILE_MIN) && !a->split_only) {
        if (kv->f16) launch_tile<true>((unsigned)a->n_split, n, st, qkv, stride, pos, seq, *a, *kv, layer, out, os, q, q8);
        else launch_tile<false>((unsigned)a->n_split, n, st, qkv, stride, pos, seq, *a, *kv, layer, out, os, q, q8);
        return;
    }
    const int width = a->head_dim > a->head_dim_v ? a->head_dim : a->head_dim_v;  // at most 256 (gpu.c checks)
    // tokens whose split partials fit the buffer (a batch-invariant context sends
    // every batch size here); each group is an independent launch of the same kernel
    const size_t per_token = (size_t)a->n_head * (size_t)a->n_split * (size_t)(a->head_dim_v + 2);
    int group = n;
    if (a->n_split > 1 && a->partial_cap > 0 && (size_t)n * per_token > a->partial_cap)
        group = (int)(a->partial_cap / per_token) > 0 ? (int)(a->partial_cap / per_token) : 1;
    for (int t0 = 0; t0 < n; t0 += group) {
        const int nt = n - t0 < group ? n - t0 : group;
        dim3 gg((unsigned)a->n_split, (unsigned)a->n_head, (unsigned)nt);
        const th_cu_q8 qt = q8 ? q8_rows(q, t0, os) : q;
        const float *qx = qkv + (int64_t)t0 * stride;
        if (kv->f16) launch_attn<true>(gg, st, width, qx, stride, pos + t0, seq + t0, *a, *kv, layer, out + (int64_t)t0 * os, os, qt, q8);
        else launch_attn<false>(gg, st, width, qx, stride, pos + t0, seq + t0, *a, *kv, layer, out + (int64_t)t0 * os, os, qt, q8);
    }
}

// The end of the run of tokens from t that belong to seq[t].
static int run_end(const int32_t *seq, int n, int t) {
    int u = t + 1;
    while (u < n && seq[u] == seq[t]) u++;
    return u;
}

// Runs of at least TH_CU_ATTN_MMA_RUN tokens of one sequence (prompts) go to the
// tensor-core kernel (attn_mma.cu), the others (decode tokens) to the CUDA-core
// ones; each maximal stretch of one kind is one launch.
extern "C" void th_cu_attention(const float *qkv, int64_t stride, int n, const int32_t *pos, const int32_t *seq,
                                const th_cu_attn *a, const th_cu_kv *kv, int32_t layer, float *out, int64_t os,
                                const th_cu_q8 *oq, cudaStream_t st) {
    if (n <= 0) return;
    if (!a->host_seq || a->split_only || n < TH_CU_ATTN_MMA_RUN || !th_cu_attn_prompt_supports(a, kv)) {
        attention_simt(qkv, stride, n, pos, seq, a, kv, layer, out, os, oq, st);
        return;
    }
    for (int t = 0; t < n;) {
        int u = run_end(a->host_seq, n, t);
        const bool mma = u - t >= TH_CU_ATTN_MMA_RUN;
        while (u < n) {
            const int e = run_end(a->host_seq, n, u);
            if ((e - u >= TH_CU_ATTN_MMA_RUN) != mma) break;
            u = e;
        }
        const int nt = u - t;
        const th_cu_q8 qt = oq ? q8_rows(*oq, t, os) : th_cu_q8{};
        if (mma) {
            th_cu_attn_prompt(qkv + (int64_t)t * stride, stride, nt, pos + t, seq + t, a, kv, layer, out + (int64_t)t * os,
                              os, st);
            if (oq && a->head_dim_v % 32 == 0) th_cu_quantize_q8(out + (int64_t)t * os, os, nt, os, &qt, st);
        } else {
            attention_simt(qkv + (int64_t)t * stride, stride, nt, pos + t, seq + t, a, kv, layer, out + (int64_t)t * os,
                           os, oq ? &qt : NULL, st);
        }
        t = u;
    }
}
