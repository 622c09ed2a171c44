// deltanet.cu — the hybrid models' kernels (deltanet.h): the gated DeltaNet
// mixer's causal conv with rolling windows, the gated delta rule, the gated
// output norm; the gated attention's [q; gate] split and sigmoid gate; the
// sigmoid-gated shared experts' sum. Arithmetic as src/cpu/deltanet.c.
//
// The delta rule runs the recurrent form token by token for prefill too, inside
// one kernel: a warp owns 32 columns (value index j) of one v head's Dk × Dk state
// of one sequence and keeps them in registers across the batch's tokens, so the
// state is read and written once a step however many tokens the step has; q and k
// of a token are normalised once in shared memory. Grid: the batch's distinct
// sequences (padded to n: the grid depends only on the batch size, so a CUDA
// graph replays it for any sequence mix) × column blocks × v heads.
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
// registers (C - 1 <= CM). Variants >= 1.
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

// beta and decay of v head h from its projection row.
__device__ __forceinline__ void gates(const th_cu_dn &d, const float *ba, int h, float &beta, float &decay) {
    float b, a;
    raw_ba(d, ba, h, b, a);
    beta = sigm(b);
    decay = expf(fminf(softplus(a + d.dt[h]) * d.A[h], 50.0f));
}

template <int DK>
__global__ void __launch_bounds__(32) dn_rule(th_cu_dn d, const float *u, const float *ba, int64_t bas, int n,
                                              const int32_t *seq, const int32_t *seq_list, const int32_t *snap,
                                              float *out, int64_t os) {
    pdl_begin();
    const int s = seq_list[blockIdx.x];
    if (s < 0) return;
    const int h = blockIdx.z, lane = threadIdx.x, dk = d.dk;
    const int j = blockIdx.y * 32 + lane;
    const bool on = j < dk;
    const int kh = d.repeat ? h % d.nk : h / d.ratio;
    __shared__ float qs[DK], ks[DK];
    float S[DK];
    const int64_t hoff = d.layer_off + d.conv_n + (int64_t)h * dk * dk;
    float *Sg = d.cur + (int64_t)s * d.per_seq + hoff;
#pragma unroll
    for (int i = 0; i < DK; i++) S[i] = on && i < dk ? Sg[(int64_t)i * dk + j] : 0.0f;
    const float scale = rsqrtf((float)dk);
    for (int t = 0; t < n; t++) {
        if (seq[t] != s) continue;
        const float *row = u + (int64_t)t * d.cd;
        float sq = 0.0f, sk = 0.0f;
        for (int i = lane; i < dk; i += 32) {
            float q = row[(int64_t)kh * dk + i], k = row[d.kd + (int64_t)kh * dk + i];
            qs[i] = q;
            ks[i] = k;
            sq += q * q;
            sk += k * k;
        }
        sq = warp_sum(sq);
        sk = warp_sum(sk);
        const float rq = 1.0f / fmaxf(sqrtf(sq), d.eps), rk = 1.0f / fmaxf(sqrtf(sk), d.eps);
        float kq = 0.0f;
        for (int i = lane; i < dk; i += 32) {
            qs[i] *= rq;
            ks[i] *= rk;
            kq += qs[i] * ks[i];
        }
        kq = warp_sum(kq);
        __syncwarp();
        float beta, decay;
        gates(d, ba + (int64_t)t * bas, h, beta, decay);
        float vp = 0.0f, ov = 0.0f;
#pragma unroll
        for (int i = 0; i < DK; i++)
            if (i < dk) { vp += S[i] * ks[i]; ov += S[i] * qs[i]; }
        const float v = on ? row[2 * d.kd + (int64_t)h * dk + j] : 0.0f;
        const float nw = v * beta - vp * beta * decay;
        if (on) out[(int64_t)t * os + (int64_t)h * dk + j] = ov * decay * scale + nw * kq * scale;
#pragma unroll
        for (int i = 0; i < DK; i++)
            if (i < dk) S[i] = fminf(fmaxf(decay * S[i] + nw * ks[i], -1e6f), 1e6f);
        if (on && snap[t] >= 0) {
            float *Sn = d.snap + (int64_t)snap[t] * d.per_seq + hoff;
#pragma unroll
            for (int i = 0; i < DK; i++)
                if (i < dk) Sn[(int64_t)i * dk + j] = S[i];
        }
        __syncwarp();
    }
#pragma unroll
    for (int i = 0; i < DK; i++)
        if (on && i < dk) Sg[(int64_t)i * dk + j] = S[i];
}

// The same with G lanes to a column: lane = c·G + g owns column j = block·(32/G) + c
// and keys i = m·G + g (m < DK/G; interleaved, so the G lanes read distinct shared
// banks), its dot products are partial and summed over the G lanes by shuffles. A
// token's dependent chain is DK/G long instead of DK, and a head has G times as
// many warps (variant 1, the default; variant 0 is dn_rule).
template <int DK, int G>
__global__ void __launch_bounds__(32) dn_rule_g(th_cu_dn d, const float *u, const float *ba, int64_t bas, int n,
                                                const int32_t *seq, const int32_t *seq_list, const int32_t *snap,
                                                float *out, int64_t os) {
    pdl_begin();
    constexpr int KPT = DK / G, CPW = 32 / G;
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
    for (int t = 0; t < n; t++) {
        if (seq[t] != s) continue;
        const float *row = u + (int64_t)t * d.cd;
        float sq = 0.0f, sk = 0.0f;
        for (int i = lane; i < dk; i += 32) {
            float q = row[(int64_t)kh * dk + i], k = row[d.kd + (int64_t)kh * dk + i];
            qs[i] = q;
            ks[i] = k;
            sq += q * q;
            sk += k * k;
        }
        sq = warp_sum(sq);
        sk = warp_sum(sk);
        const float rq = 1.0f / fmaxf(sqrtf(sq), d.eps), rk = 1.0f / fmaxf(sqrtf(sk), d.eps);
        float kq = 0.0f;
        for (int i = lane; i < dk; i += 32) {
            qs[i] *= rq;
            ks[i] *= rk;
            kq += qs[i] * ks[i];
        }
        kq = warp_sum(kq);
        for (int i = dk + lane; i < DK; i += 32) qs[i] = ks[i] = 0.0f;   /* keys past dk: zero */
        __syncwarp();
        float beta, decay;
        gates(d, ba + (int64_t)t * bas, h, beta, decay);
        float vp = 0.0f, ov = 0.0f;
#pragma unroll
        for (int m = 0; m < KPT; m++) { vp += S[m] * ks[m * G + g]; ov += S[m] * qs[m * G + g]; }
#pragma unroll
        for (int o = 1; o < G; o <<= 1) {
            vp += __shfl_xor_sync(0xffffffffu, vp, o);
            ov += __shfl_xor_sync(0xffffffffu, ov, o);
        }
        const float v = on ? row[2 * d.kd + (int64_t)h * dk + j] : 0.0f;
        const float nw = v * beta - vp * beta * decay;
        if (on && g == 0) out[(int64_t)t * os + (int64_t)h * dk + j] = ov * decay * scale + nw * kq * scale;
#pragma unroll
        for (int m = 0; m < KPT; m++) S[m] = fminf(fmaxf(decay * S[m] + nw * ks[m * G + g], -1e6f), 1e6f);
        if (on && snap[t] >= 0) {
            float *Sn = d.snap + (int64_t)snap[t] * d.per_seq + hoff;
#pragma unroll
            for (int m = 0; m < KPT; m++)
                if (m * G + g < dk) Sn[(int64_t)(m * G + g) * dk + j] = S[m];
        }
        __syncwarp();
    }
#pragma unroll
    for (int m = 0; m < KPT; m++)
        if (on && m * G + g < dk) Sg[(int64_t)(m * G + g) * dk + j] = S[m];
}

// Token t's inputs as a lane of dn_rule_p holds them: q and k elements lane + 32·e,
// its column's v, the head's raw beta and alpha.
template <int QPL>
__device__ __forceinline__ void dn_load(const th_cu_dn &d, const float *u, const float *ba, int64_t bas, int t, int kh,
                                        int h, int j, bool on, int lane, float *q, float *k, float &v, float &b, float &a) {
    const float *row = u + (int64_t)t * d.cd;
#pragma unroll
    for (int e = 0; e < QPL; e++) {
        const int i = lane + 32 * e;
        q[e] = i < d.dk ? row[(int64_t)kh * d.dk + i] : 0.0f;
        k[e] = i < d.dk ? row[d.kd + (int64_t)kh * d.dk + i] : 0.0f;
    }
    v = on ? row[2 * d.kd + (int64_t)h * d.dk + j] : 0.0f;
    raw_ba(d, ba + (int64_t)t * bas, h, b, a);
}

// dn_rule_g walking its sequence's tokens by first / nxt, with the next token's
// inputs (and its successor's index) loaded before this token is computed, so the
// global loads' latency hides behind the arithmetic (variant 2).
template <int DK, int G>
__global__ void __launch_bounds__(32) dn_rule_p(th_cu_dn d, const float *u, const float *ba, int64_t bas,
                                                const int32_t *seq_list, const int32_t *first, const int32_t *nxt,
                                                const int32_t *snap, float *out, int64_t os) {
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
    const float scale = rsqrtf((float)dk), dt = d.dt[h], A = d.A[h];
    int t = first[blockIdx.x], tn = nxt[t], sc = snap[t];
    float qc[QPL], kc[QPL], vc, bc, ac;
    dn_load<QPL>(d, u, ba, bas, t, kh, h, j, on, lane, qc, kc, vc, bc, ac);
    while (t >= 0) {
        float qn[QPL], kn[QPL], vn = 0.0f, bn = 0.0f, an = 0.0f;
        int tnn = -1, sn = -1;
        if (tn >= 0) {
            dn_load<QPL>(d, u, ba, bas, tn, kh, h, j, on, lane, qn, kn, vn, bn, an);
            tnn = nxt[tn];
            sn = snap[tn];
        }
        float sq = 0.0f, sk = 0.0f;
#pragma unroll
        for (int e = 0; e < QPL; e++) { sq += qc[e] * qc[e]; sk += kc[e] * kc[e]; }
        sq = warp_sum(sq);
        sk = warp_sum(sk);
        const float rq = 1.0f / fmaxf(sqrtf(sq), d.eps), rk = 1.0f / fmaxf(sqrtf(sk), d.eps);
        float kq = 0.0f;
#pragma unroll
        for (int e = 0; e < QPL; e++) {
            const float qq = qc[e] * rq, kk = kc[e] * rk;
            qs[lane + 32 * e] = qq;
            ks[lane + 32 * e] = kk;
            kq += qq * kk;
        }
        kq = warp_sum(kq);
        __syncwarp();
        const float beta = sigm(bc), decay = expf(fminf(softplus(ac + dt) * A, 50.0f));
        float vp = 0.0f, ov = 0.0f;
#pragma unroll
        for (int m = 0; m < KPT; m++) { vp += S[m] * ks[m * G + g]; ov += S[m] * qs[m * G + g]; }
#pragma unroll
        for (int o = 1; o < G; o <<= 1) {
            vp += __shfl_xor_sync(0xffffffffu, vp, o);
            ov += __shfl_xor_sync(0xffffffffu, ov, o);
        }
        const float nw = vc * beta - vp * beta * decay;
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
#pragma unroll
        for (int e = 0; e < QPL; e++) { qc[e] = qn[e]; kc[e] = kn[e]; }
        vc = vn; bc = bn; ac = an;
    }
#pragma unroll
    for (int m = 0; m < KPT; m++)
        if (on && m * G + g < dk) Sg[(int64_t)(m * G + g) * dk + j] = S[m];
}

// Variant 3's pre-pass, everything of a token that does not need the state, for
// all tokens at once: one warp per (token, k head) L2-normalises q and k in u (in
// place) and stores k·q in kq[t][kh]; warp (t, 0) also stores beta and decay of
// every v head in bd[t] ([beta | decay], 2·Nv).
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
    if (kh == 0)
        for (int h = lane; h < d.nv; h += 32) gates(d, ba + (int64_t)t * bas, h, bd[(int64_t)t * 2 * d.nv + h], bd[(int64_t)t * 2 * d.nv + d.nv + h]);
}

// Variant 3: dn_rule_p on the pre-pass's normalised q, k, k·q, beta and decay: a
// token's sequential work is two dot chains of DK/G, two shuffle steps and the update.
template <int DK, int G>
__global__ void __launch_bounds__(32) dn_rule_q(th_cu_dn d, const float *u, const float *kqb, const float *bd,
                                                const int32_t *seq_list, const int32_t *first, const int32_t *nxt,
                                                const int32_t *snap, float *out, int64_t os) {
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
    float qc[QPL], kc[QPL], vc, bc, dc, kqc;
    auto load = [&](int t, float *q, float *k, float &v, float &b, float &dd, float &kq) {
        const float *row = u + (int64_t)t * d.cd;
#pragma unroll
        for (int e = 0; e < QPL; e++) {
            const int i = lane + 32 * e;
            q[e] = i < dk ? row[(int64_t)kh * dk + i] : 0.0f;
            k[e] = i < dk ? row[d.kd + (int64_t)kh * dk + i] : 0.0f;
        }
        v = on ? row[2 * d.kd + (int64_t)h * dk + j] : 0.0f;
        b = bd[(int64_t)t * 2 * d.nv + h];
        dd = bd[(int64_t)t * 2 * d.nv + d.nv + h];
        kq = kqb[(int64_t)t * d.nk + kh];
    };
    int t = first[blockIdx.x], tn = nxt[t], sc = snap[t];
    load(t, qc, kc, vc, bc, dc, kqc);
    while (t >= 0) {
        float qn[QPL], kn[QPL], vn = 0.0f, bn = 0.0f, dn = 0.0f, kqn = 0.0f;
        int tnn = -1, sn = -1;
        if (tn >= 0) {
            load(tn, qn, kn, vn, bn, dn, kqn);
            tnn = nxt[tn];
            sn = snap[tn];
        }
#pragma unroll
        for (int e = 0; e < QPL; e++) { qs[lane + 32 * e] = qc[e]; ks[lane + 32 * e] = kc[e]; }
        __syncwarp();
        float vp = 0.0f, ov = 0.0f;
#pragma unroll
        for (int m = 0; m < KPT; m++) { vp += S[m] * ks[m * G + g]; ov += S[m] * qs[m * G + g]; }
#pragma unroll
        for (int o = 1; o < G; o <<= 1) {
            vp += __shfl_xor_sync(0xffffffffu, vp, o);
            ov += __shfl_xor_sync(0xffffffffu, ov, o);
        }
        const float nw = vc * bc - vp * bc * dc;
        if (on && g == 0) out[(int64_t)t * os + (int64_t)h * dk + j] = ov * dc * scale + nw * kqc * scale;
#pragma unroll
        for (int m = 0; m < KPT; m++) S[m] = fminf(fmaxf(dc * S[m] + nw * ks[m * G + g], -1e6f), 1e6f);
        if (on && sc >= 0) {
            float *Sn = d.snap + (int64_t)sc * d.per_seq + hoff;
#pragma unroll
            for (int m = 0; m < KPT; m++)
                if (m * G + g < dk) Sn[(int64_t)(m * G + g) * dk + j] = S[m];
        }
        __syncwarp();
        t = tn; tn = tnn; sc = sn;
#pragma unroll
        for (int e = 0; e < QPL; e++) { qc[e] = qn[e]; kc[e] = kn[e]; }
        vc = vn; bc = bn; dc = dn; kqc = kqn;
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

// -1 (default): variant 2 for batches under 16 tokens (decode: the pre-pass's extra
// launch costs more than it saves), 3 from 16 (prefill). H200, the 8-layer qwen35 bench
// model (F16): pp512 53.7k / 71.8k / 87.5k tok/s and tg128 2506 / 2614 / 2503 tok/s for
// variants 1 / 2 / 3; variant 0 10.5k and 1577.
static int dn_variant = -1;
extern "C" void th_cu_dn_set_variant(int v) { dn_variant = v; }

extern "C" void th_cu_dn_conv(const th_cu_dn *d, const float *in, int64_t is, int n, const int32_t *seq,
                              const int32_t *snap, float *u, cudaStream_t st) {
    if (n <= 0) return;
    if (dn_variant != 0 && d->C >= 1 && d->C <= 8) {
        launch_k(dn_conv_r<7>, dim3((unsigned)((d->cd + 127) / 128)), dim3(128), st, *d, in, is, n, seq, snap, u);
        return;
    }
    launch_k(dn_conv, dim3((unsigned)((d->cd + 127) / 128)), dim3(128), st, *d, in, is, n, seq, snap, u);
}

extern "C" void th_cu_dn_rule(const th_cu_dn *d, float *u, const float *ba, int64_t bas, int n,
                              const int32_t *seq, const int32_t *seq_list, const int32_t *first, const int32_t *nxt,
                              const int32_t *snap, float *out, int64_t os, cudaStream_t st) {
    if (n <= 0) return;
    const int variant = dn_variant >= 0 ? dn_variant : n < 16 ? 2 : 3;
    if (variant == 3) {
        constexpr int G = 4;
        float *kq = d->scratch, *bd = d->scratch + (int64_t)n * d->nk;
        launch_k(dn_prep, dim3((unsigned)n, (unsigned)d->nk), dim3(32), st, *d, u, ba, bas, kq, bd);
        dim3 grid((unsigned)n, (unsigned)((d->dk + 32 / G - 1) / (32 / G)), (unsigned)d->nv);
        if (d->dk <= 32) launch_k(dn_rule_q<32, G>, grid, dim3(32), st, *d, u, (const float *)kq, (const float *)bd, seq_list, first, nxt, snap, out, os);
        else if (d->dk <= 64) launch_k(dn_rule_q<64, G>, grid, dim3(32), st, *d, u, (const float *)kq, (const float *)bd, seq_list, first, nxt, snap, out, os);
        else if (d->dk <= 128) launch_k(dn_rule_q<128, G>, grid, dim3(32), st, *d, u, (const float *)kq, (const float *)bd, seq_list, first, nxt, snap, out, os);
        else launch_k(dn_rule_q<256, G>, grid, dim3(32), st, *d, u, (const float *)kq, (const float *)bd, seq_list, first, nxt, snap, out, os);
        return;
    }
    if (variant == 2) {
        constexpr int G = 4;
        dim3 grid((unsigned)n, (unsigned)((d->dk + 32 / G - 1) / (32 / G)), (unsigned)d->nv);
        if (d->dk <= 32) launch_k(dn_rule_p<32, G>, grid, dim3(32), st, *d, u, ba, bas, seq_list, first, nxt, snap, out, os);
        else if (d->dk <= 64) launch_k(dn_rule_p<64, G>, grid, dim3(32), st, *d, u, ba, bas, seq_list, first, nxt, snap, out, os);
        else if (d->dk <= 128) launch_k(dn_rule_p<128, G>, grid, dim3(32), st, *d, u, ba, bas, seq_list, first, nxt, snap, out, os);
        else launch_k(dn_rule_p<256, G>, grid, dim3(32), st, *d, u, ba, bas, seq_list, first, nxt, snap, out, os);
        return;
    }
    if (variant == 1) {
        constexpr int G = 4;
        dim3 grid((unsigned)n, (unsigned)((d->dk + 32 / G - 1) / (32 / G)), (unsigned)d->nv);
        if (d->dk <= 32) launch_k(dn_rule_g<32, G>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
        else if (d->dk <= 64) launch_k(dn_rule_g<64, G>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
        else if (d->dk <= 128) launch_k(dn_rule_g<128, G>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
        else launch_k(dn_rule_g<256, G>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
        return;
    }
    dim3 grid((unsigned)n, (unsigned)((d->dk + 31) / 32), (unsigned)d->nv);
    if (d->dk <= 32) launch_k(dn_rule<32>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
    else if (d->dk <= 64) launch_k(dn_rule<64>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
    else if (d->dk <= 128) launch_k(dn_rule<128>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
    else launch_k(dn_rule<256>, grid, dim3(32), st, *d, u, ba, bas, n, seq, seq_list, snap, out, os);
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
