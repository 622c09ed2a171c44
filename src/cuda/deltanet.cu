// deltanet.cu — the hybrid models' kernels (deltanet.h): the gated DeltaNet
// mixer's causal conv with rolling windows, the gated delta rule, the gated
// output norm; the gated attention's [q; gate] split and sigmoid gate; the
// sigmoid-gated shared experts' sum. Arithmetic as src/cpu/deltanet.c.
//
// The delta rule's recurrent form (dn_step) walks the tokens one by one inside one
// kernel: a warp owns 8 columns (value index j) of one v head's Dk × Dk state of one
// sequence and keeps them in registers across the batch's tokens, so the state is
// read and written once a step however many tokens the step has. Grid: the batch's
// distinct sequences (padded to n: the grid depends only on the batch size, so a
// CUDA graph replays it for any sequence mix) × column blocks × v heads. Long runs
// of one sequence take the chunked form instead (dn_chunk.cu, after dn_prep).
#include "cuda/common.cuh"
#include "cuda/deltanet.h"

namespace {

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

// Column of the projection row that conv channel ch reads.
__device__ __forceinline__ int64_t in_col(const th_cu_dn &d, int64_t ch) {
    if (!d.fused) return ch;
    int64_t dk = d.dk, vr = (int64_t)d.ratio * dk, gw = 2 * dk + 2 * vr;
    if (ch < d.kd) return (ch / dk) * gw + ch % dk;
    if (ch < 2 * d.kd) { int64_t c = ch - d.kd; return (c / dk) * gw + dk + c % dk; }
    int64_t j = ch - 2 * d.kd;
    return (j / vr) * gw + 2 * dk + j % vr;
}

// Column of z element j (j < Vd).
__device__ __forceinline__ int64_t z_col(const th_cu_dn &d, int64_t j) {
    if (!d.fused) return d.cd + j;
    int64_t dk = d.dk, vr = (int64_t)d.ratio * dk, gw = 2 * dk + 2 * vr;
    return (j / vr) * gw + 2 * dk + vr + j % vr;
}

__global__ void dn_conv(th_cu_dn d, const float *in, int64_t is, int n, const int32_t *seq, const int32_t *snap, float *u) {
    pdl_begin();
    int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= d.cd) return;
    const int Cm = d.C - 1;
    const int64_t col = in_col(d, ch);
    const float *w = d.conv_w + ch * d.C;
    for (int t = 0; t < n; t++) {
        float *win = d.cur + (int64_t)seq[t] * d.per_seq + d.layer_off + ch * Cm;
        float x = in[(int64_t)t * is + col], acc = 0.0f;
        for (int j = 0; j < Cm; j++) acc += win[j] * w[j];
        acc += x * w[Cm];
        for (int j = 0; j + 1 < Cm; j++) win[j] = win[j + 1];
        if (Cm > 0) win[Cm - 1] = x;
        u[(int64_t)t * d.cd + ch] = silu(acc);
        if (snap[t] >= 0) {
            float *sw = d.snap + (int64_t)snap[t] * d.per_seq + d.layer_off + ch * Cm;
            for (int j = 0; j < Cm; j++) sw[j] = win[j];
        }
    }
}

// The raw beta and alpha of v head h from its projection row.
__device__ __forceinline__ void raw_ba(const th_cu_dn &d, const float *ba, int h, float &b, float &a) {
    if (d.fused) {
        int g = h / d.ratio, r = h % d.ratio;
        b = ba[g * 2 * d.ratio + r];
        a = ba[g * 2 * d.ratio + d.ratio + r];
    } else {
        b = ba[h];
        a = ba[d.nv + h];
    }
}

// dn_conv with the window in registers while consecutive tokens belong to one
// sequence (written back when the sequence changes and at the end) and the next
// token's input loaded ahead: the chain from one token to the next stays in
// registers (C - 1 <= CM; dn_conv takes wider windows).
template <int CM>
__global__ void dn_conv_r(th_cu_dn d, const float *in, int64_t is, int n, const int32_t *seq, const int32_t *snap, float *u) {
    pdl_begin();
    int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= d.cd) return;
    const int Cm = d.C - 1;
    const int64_t col = in_col(d, ch);
    float w[CM + 1], win[CM];
#pragma unroll
    for (int j = 0; j <= CM; j++) w[j] = j <= Cm ? d.conv_w[ch * d.C + j] : 0.0f;
#pragma unroll
    for (int j = 0; j < CM; j++) win[j] = 0.0f;
    int cs = -1;
    float *wg = nullptr;
    float xn = in[col];
    for (int t = 0; t < n; t++) {
        const float x = xn;
        if (t + 1 < n) xn = in[(int64_t)(t + 1) * is + col];
        const int q = seq[t];
        if (q != cs) {
#pragma unroll
            for (int j = 0; j < CM; j++) if (cs >= 0 && j < Cm) wg[j] = win[j];
            wg = d.cur + (int64_t)q * d.per_seq + d.layer_off + ch * Cm;
#pragma unroll
            for (int j = 0; j < CM; j++) win[j] = j < Cm ? wg[j] : 0.0f;
            cs = q;
        }
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < CM; j++) if (j < Cm) acc += win[j] * w[j];
#pragma unroll
        for (int j = 0; j <= CM; j++) if (j == Cm) acc += x * w[j];
#pragma unroll
        for (int j = 0; j < CM; j++) win[j] = j + 1 < Cm ? win[j + 1 < CM ? j + 1 : j] : j + 1 == Cm ? x : win[j];
        u[(int64_t)t * d.cd + ch] = silu(acc);
        if (snap[t] >= 0) {
            float *sw = d.snap + (int64_t)snap[t] * d.per_seq + d.layer_off + ch * Cm;
#pragma unroll
            for (int j = 0; j < CM; j++) if (j < Cm) sw[j] = win[j];
        }
    }
#pragma unroll
    for (int j = 0; j < CM; j++) if (cs >= 0 && j < Cm) wg[j] = win[j];
}

// beta, decay and log decay of v head h from its projection row.
__device__ __forceinline__ void gates(const th_cu_dn &d, const float *ba, int h, float &beta, float &decay, float &lg) {
    float b, a;
    raw_ba(d, ba, h, b, a);
    beta = sigm(b);
    lg = fminf(softplus(a + d.dt[h]) * d.A[h], 50.0f);
    decay = expf(lg);
}

// The pre-pass, everything of a token that does not need the state, for all
// tokens at once: one warp per (token, k head) L2-normalises q and k in u (in
// place) and stores k·q in kq[t][kh]; warp (t, 0) also stores beta, decay and log
// decay of every v head in bd[t] ([beta | decay | log decay], 3·Nv).
__global__ void dn_prep(th_cu_dn d, float *u, const float *ba, int64_t bas, float *kq, float *bd) {
    pdl_begin();
    const int t = blockIdx.x, kh = blockIdx.y, lane = threadIdx.x, dk = d.dk;
    float *q = u + (int64_t)t * d.cd + (int64_t)kh * dk, *k = q + d.kd;
    float sq = 0.0f, sk = 0.0f, qk = 0.0f;
    for (int i = lane; i < dk; i += 32) { sq += q[i] * q[i]; sk += k[i] * k[i]; qk += q[i] * k[i]; }
    sq = warp_sum(sq);
    sk = warp_sum(sk);
    qk = warp_sum(qk);
    const float rq = 1.0f / fmaxf(sqrtf(sq), d.eps), rk = 1.0f / fmaxf(sqrtf(sk), d.eps);
    for (int i = lane; i < dk; i += 32) { q[i] *= rq; k[i] *= rk; }
    if (lane == 0) kq[(int64_t)t * d.nk + kh] = qk * rq * rk;
    if (kh == 0) {
        float *o = bd + (int64_t)t * 3 * d.nv;
        for (int h = lane; h < d.nv; h += 32) gates(d, ba + (int64_t)t * bas, h, o[h], o[d.nv + h], o[2 * d.nv + h]);
    }
}

// One token's inputs as a lane of dn_step holds them: q and k elements lane + 32·e,
// its column's v; PREP: the pre-pass's normalised q, k, beta, decay and k·q, else
// the raw q, k and the head's raw beta (in b) and alpha (in dc).
template <int QPL, bool PREP>
struct dn_tok {
    float q[QPL], k[QPL], v, b, dc, kq;
    __device__ __forceinline__ void load(const th_cu_dn &d, const float *u, const float *ba, int64_t bas, const float *kqb,
                                         const float *bd, int t, int kh, int h, int j, bool on, int lane) {
        const float *row = u + (int64_t)t * d.cd;
#pragma unroll
        for (int e = 0; e < QPL; e++) {
            const int i = lane + 32 * e;
            q[e] = i < d.dk ? row[(int64_t)kh * d.dk + i] : 0.0f;
            k[e] = i < d.dk ? row[d.kd + (int64_t)kh * d.dk + i] : 0.0f;
        }
        v = on ? row[2 * d.kd + (int64_t)h * d.dk + j] : 0.0f;
        if (PREP) {
            b = bd[(int64_t)t * 3 * d.nv + h];
            dc = bd[(int64_t)t * 3 * d.nv + d.nv + h];
            kq = kqb[(int64_t)t * d.nk + kh];
        } else {
            raw_ba(d, ba + (int64_t)t * bas, h, b, dc);
            kq = 0.0f;
        }
    }
};

// The recurrent form: G lanes to a state column (lane = c·G + g owns column
// j = block·(32/G) + c and keys i = m·G + g, m < DK/G, interleaved so the G lanes
// read distinct shared banks); the dot products are partial and summed over the G
// lanes by shuffles, so a token's dependent chain is DK/G long. The block walks its
// sequence's tokens by first / nxt with the next token's inputs (and its
// successor's index) loaded before this token is computed, so the loads' latency
// hides behind the arithmetic. PREP: on the pre-pass's outputs, the sequential
// part is the state's arithmetic alone (TH_CU_DN_STEP_PREP), else the norms and
// gates are computed here too (TH_CU_DN_STEP).
template <int DK, int G, bool PREP>
__global__ void __launch_bounds__(32) dn_step(th_cu_dn d, const float *u, const float *ba, int64_t bas, const float *kqb,
                                              const float *bd, const int32_t *seq_list, const int32_t *first,
                                              const int32_t *nxt, const int32_t *snap, float *out, int64_t os) {
    pdl_begin();
    constexpr int KPT = DK / G, CPW = 32 / G, QPL = DK / 32;
    const int s = seq_list[blockIdx.x];
    if (s < 0) return;
    const int h = blockIdx.z, lane = threadIdx.x, dk = d.dk, g = lane % G;
    const int j = blockIdx.y * CPW + lane / G;
    const bool on = j < dk;
    const int kh = d.repeat ? h % d.nk : h / d.ratio;
    __shared__ float qs[DK], ks[DK];
    float S[KPT];
    const int64_t hoff = d.layer_off + d.conv_n + (int64_t)h * dk * dk;
    float *Sg = d.cur + (int64_t)s * d.per_seq + hoff;
#pragma unroll
    for (int m = 0; m < KPT; m++) {
        const int i = m * G + g;
        S[m] = on && i < dk ? Sg[(int64_t)i * dk + j] : 0.0f;
    }
    const float scale = rsqrtf((float)dk);
    int t = first[blockIdx.x], tn = nxt[t], sc = snap[t];
    dn_tok<QPL, PREP> cur, nx;
    cur.load(d, u, ba, bas, kqb, bd, t, kh, h, j, on, lane);
    while (t >= 0) {
        int tnn = -1, sn = -1;
        if (tn >= 0) {
            nx.load(d, u, ba, bas, kqb, bd, tn, kh, h, j, on, lane);
            tnn = nxt[tn];
            sn = snap[tn];
        }
        float beta = cur.b, decay = cur.dc, kq = cur.kq;
        if (!PREP) {
            float sq = 0.0f, sk = 0.0f;
#pragma unroll
            for (int e = 0; e < QPL; e++) { sq += cur.q[e] * cur.q[e]; sk += cur.k[e] * cur.k[e]; }
            sq = warp_sum(sq);
            sk = warp_sum(sk);
            const float rq = 1.0f / fmaxf(sqrtf(sq), d.eps), rk = 1.0f / fmaxf(sqrtf(sk), d.eps);
            kq = 0.0f;
#pragma unroll
            for (int e = 0; e < QPL; e++) {
                cur.q[e] *= rq;
                cur.k[e] *= rk;
                kq += cur.q[e] * cur.k[e];
            }
            kq = warp_sum(kq);
            beta = sigm(cur.b);
            decay = expf(fminf(softplus(cur.dc + d.dt[h]) * d.A[h], 50.0f));
        }
#pragma unroll
        for (int e = 0; e < QPL; e++) { qs[lane + 32 * e] = cur.q[e]; ks[lane + 32 * e] = cur.k[e]; }
        __syncwarp();
        float vp = 0.0f, ov = 0.0f;
#pragma unroll
        for (int m = 0; m < KPT; m++) { vp += S[m] * ks[m * G + g]; ov += S[m] * qs[m * G + g]; }
#pragma unroll
        for (int o = 1; o < G; o <<= 1) {
            vp += __shfl_xor_sync(0xffffffffu, vp, o);
            ov += __shfl_xor_sync(0xffffffffu, ov, o);
        }
        const float nw = cur.v * beta - vp * beta * decay;
        if (on && g == 0) out[(int64_t)t * os + (int64_t)h * dk + j] = ov * decay * scale + nw * kq * scale;
#pragma unroll
        for (int m = 0; m < KPT; m++) S[m] = fminf(fmaxf(decay * S[m] + nw * ks[m * G + g], -1e6f), 1e6f);
        if (on && sc >= 0) {
            float *Sn = d.snap + (int64_t)sc * d.per_seq + hoff;
#pragma unroll
            for (int m = 0; m < KPT; m++)
                if (m * G + g < dk) Sn[(int64_t)(m * G + g) * dk + j] = S[m];
        }
        __syncwarp();
        t = tn; tn = tnn; sc = sn;
        cur = nx;
    }
#pragma unroll
    for (int m = 0; m < KPT; m++)
        if (on && m * G + g < dk) Sg[(int64_t)(m * G + g) * dk + j] = S[m];
}

// One warp per (v head, token): rmsnorm of the head's output · norm ⊙ silu(z).
__global__ void dn_output(th_cu_dn d, float *out, int64_t os, const float *in, int64_t is) {
    pdl_begin();
    const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x, dk = d.dk;
    float *o = out + (int64_t)t * os + (int64_t)h * dk;
    const float *row = in + (int64_t)t * is;
    float ss = 0.0f;
    for (int j = lane; j < dk; j += 32) ss += o[j] * o[j];
    ss = warp_sum(ss);
    const float sc = rsqrtf(ss / (float)dk + d.eps);
    for (int j = lane; j < dk; j += 32)
        o[j] = o[j] * sc * d.norm[j] * silu(row[z_col(d, (int64_t)h * dk + j)]);
}

__global__ void split_qgate(const float *wide, int64_t ws, int32_t n_head, int32_t hd, int64_t kv_w, float *qkv,
                            int64_t qs, float *gate) {
    pdl_begin();
    const int64_t t = blockIdx.y, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t q_w = (int64_t)n_head * hd;
    const float *w = wide + t * ws;
    if (i < q_w) {
        int64_t h = i / hd, e = i % hd;
        qkv[t * qs + i] = w[2 * h * hd + e];
        gate[t * q_w + i] = w[2 * h * hd + hd + e];
    } else if (i < q_w + kv_w) {
        qkv[t * qs + i] = w[q_w + i];
    }
}

__global__ void sigmoid_mul(float *att, int64_t as, const float *gate, int64_t w) {
    pdl_begin();
    const int64_t t = blockIdx.y, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w) att[t * as + i] *= sigm(gate[t * w + i]);
}

__global__ void shexp_gate(float *out, const float *h, const float *y, const float *w, int64_t E) {
    pdl_begin();
    __shared__ float red[32];
    const int64_t t = blockIdx.x;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < E; i += blockDim.x) acc += h[t * E + i] * w[i];
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    float g = 0.0f;
    for (int k = 0; k < (int)(blockDim.x >> 5); k++) g += red[k];
    g = sigm(g);
    for (int64_t i = threadIdx.x; i < E; i += blockDim.x) out[t * E + i] += g * y[t * E + i];
}

}  // namespace

// TH_CU_DN_AUTO: TH_CU_DN_STEP for batches under 16 tokens (decode: the pre-pass's
// extra launch costs more than it saves), TH_CU_DN_STEP_PREP from 16, TH_CU_DN_CHUNK1
// once a sequence has TH_CU_DN_CHUNK_MIN tokens in the batch (deltanet.h). H200, the 8-layer
// qwen35 bench model (F16), before the chunked form: pp512 71.8k / 87.5k tok/s and
// tg128 2614 / 2503 tok/s for STEP / STEP_PREP (two losing variants, one lane a
// column and no prefetch, were 10.5k / 1577 and 53.7k / 2506, and are gone).
static int dn_variant = TH_CU_DN_AUTO;
extern "C" void th_cu_dn_set_variant(int v) { dn_variant = v; }

extern "C" void th_cu_dn_conv(const th_cu_dn *d, const float *in, int64_t is, int n, const int32_t *seq,
                              const int32_t *snap, float *u, cudaStream_t st) {
    if (n <= 0) return;
    if (d->C >= 1 && d->C <= 8) {
        launch_k(dn_conv_r<7>, dim3((unsigned)((d->cd + 127) / 128)), dim3(128), st, *d, in, is, n, seq, snap, u);
        return;
    }
    launch_k(dn_conv, dim3((unsigned)((d->cd + 127) / 128)), dim3(128), st, *d, in, is, n, seq, snap, u);
}

template <int DK, bool PREP>
static void step_launch(const th_cu_dn *d, const float *u, const float *ba, int64_t bas, const float *kq,
                        const float *bd, const th_cu_dn_batch *b, float *out, int64_t os, cudaStream_t st) {
    constexpr int G = 4;
    dim3 grid((unsigned)b->n, (unsigned)((d->dk + 32 / G - 1) / (32 / G)), (unsigned)d->nv);
    launch_k(dn_step<DK, G, PREP>, grid, dim3(32), st, *d, u, ba, bas, kq, bd, b->list, b->first, b->nxt, b->snap, out, os);
}

template <bool PREP>
static void step_dk(const th_cu_dn *d, const float *u, const float *ba, int64_t bas, const float *kq, const float *bd,
                    const th_cu_dn_batch *b, float *out, int64_t os, cudaStream_t st) {
    if (d->dk <= 32) step_launch<32, PREP>(d, u, ba, bas, kq, bd, b, out, os, st);
    else if (d->dk <= 64) step_launch<64, PREP>(d, u, ba, bas, kq, bd, b, out, os, st);
    else if (d->dk <= 128) step_launch<128, PREP>(d, u, ba, bas, kq, bd, b, out, os, st);
    else step_launch<256, PREP>(d, u, ba, bas, kq, bd, b, out, os, st);
}

extern "C" void th_cu_dn_rule(const th_cu_dn *d, float *u, const float *ba, int64_t bas, const th_cu_dn_batch *b,
                              float *out, int64_t os, cudaStream_t st) {
    const int n = b->n;
    if (n <= 0) return;
    int variant = dn_variant;
    if (variant < 0)
        variant = TH_CU_DN_CHUNK_MIN > 0 && b->max_run >= TH_CU_DN_CHUNK_MIN ? TH_CU_DN_CHUNK1
                  : n < 16                                                 ? TH_CU_DN_STEP
                                                                           : TH_CU_DN_STEP_PREP;
    if (variant == TH_CU_DN_STEP) {
        step_dk<false>(d, u, ba, bas, nullptr, nullptr, b, out, os, st);
        return;
    }
    float *kq = d->scratch, *bd = d->scratch + (int64_t)n * d->nk;
    launch_k(dn_prep, dim3((unsigned)n, (unsigned)d->nk), dim3(32), st, *d, u, ba, bas, kq, bd);
    if ((variant == TH_CU_DN_CHUNK || variant == TH_CU_DN_CHUNK1) &&
        th_cu_dn_chunk(d, u, bd, b, out, os, variant == TH_CU_DN_CHUNK, st))
        return;
    step_dk<true>(d, u, ba, bas, kq, bd, b, out, os, st);
}

extern "C" void th_cu_dn_output(const th_cu_dn *d, float *out, int64_t os, const float *in, int64_t is, int n,
                                cudaStream_t st) {
    if (n <= 0) return;
    launch_k(dn_output, dim3((unsigned)d->nv, (unsigned)n), dim3(32), st, *d, out, os, in, is);
}

extern "C" void th_cu_split_qgate(const float *wide, int64_t ws, int n, int32_t n_head, int32_t hd, int64_t kv_w,
                                  float *qkv, int64_t qs, float *gate, cudaStream_t st) {
    if (n <= 0) return;
    int64_t w = (int64_t)n_head * hd + kv_w;
    launch_k(split_qgate, dim3((unsigned)((w + 255) / 256), (unsigned)n), dim3(256), st, wide, ws, n_head, hd, kv_w,
             qkv, qs, gate);
}

extern "C" void th_cu_sigmoid_mul(float *att, int64_t as, const float *gate, int64_t w, int n, cudaStream_t st) {
    if (n <= 0) return;
    launch_k(sigmoid_mul, dim3((unsigned)((w + 255) / 256), (unsigned)n), dim3(256), st, att, as, gate, w);
}

extern "C" void th_cu_shexp_gate(float *out, const float *h, const float *y, const float *w, int64_t E, int n,
                                 cudaStream_t st) {
    if (n <= 0) return;
    launch_k(shexp_gate, dim3((unsigned)n), dim3(256), st, out, h, y, w, E);
}
