// qn.cu — the qN (q2..q8) GEMV on weights in their file layout with fp32
// activations (the embedding-sized or test matrices not repacked; uploads repack
// qN to the SPLIT layout, split.c, whose int8 GEMV on q8 activations is gemv.cu's
// shared split kernel with qn.cuh's KSub). One warp a row, a lane a 64-weight group.
#include "cuda/split.cuh"

namespace {

constexpr int WARPS = 4;  // warps per block

// ---- qN (quant/qn.h, file layout): a lane per 64-weight group, fp32 math ----
// The group's n planes are read as 16-bit words (groups are 8n + 2 bytes, rows an
// even number of bytes); weight j of half h is bit j of each plane's word h, its
// level (2c - (2^n - 1)) / 2 exact in fp32; the row sum is d times the levels · x.
template <int N, int NT>
__global__ void __launch_bounds__(WARPS * 32) gemv_qn(th_cu_mat w, const float *x, int64_t xs, float *y, int64_t ys, bool accum) {
    pdl_trigger();
    pdl_wait();
    constexpr int GB = 8 * N + 2;
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    float acc[1][NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[0][t] = 0.0f;
    const uint8_t *wr = (const uint8_t *)w.data + row * w.row_bytes;
    for (int64_t g = lane; row < w.rows && g < w.K / 64; g += 32) {
        const unsigned short *p16 = (const unsigned short *)(wr + g * GB);
        const float d = h2f(__ldg(p16));
        uint32_t pl[N][2];
#pragma unroll
        for (int p = 0; p < N; p++)
#pragma unroll
            for (int h = 0; h < 2; h++) pl[p][h] = __ldg(p16 + 1 + 4 * p + 2 * h) | ((uint32_t)__ldg(p16 + 2 + 4 * p + 2 * h) << 16);
        float s[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) s[t] = 0.0f;
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll 8
            for (int j = 0; j < 32; j++) {
                int c = 0;
#pragma unroll
                for (int p = 0; p < N; p++) c |= (int)((pl[p][h] >> j) & 1u) << p;
                const float v = 0.5f * (float)(2 * c - ((1 << N) - 1));
                const int64_t k = g * 64 + 32 * h + j;
#pragma unroll
                for (int t = 0; t < NT; t++) s[t] += v * x[t * xs + k];
            }
#pragma unroll
        for (int t = 0; t < NT; t++) acc[0][t] += d * s[t];
    }
#pragma unroll
    for (int t = 0; t < NT; t++) acc[0][t] = warp_sum(acc[0][t]);
    if (row < w.rows)
#pragma unroll
        for (int t = 0; t < NT; t++)
            if (lane == t) {
                float *p = y + t * ys + row;
                *p = accum ? *p + acc[0][t] : acc[0][t];
            }
}

template <int NT>
bool launch_qn(const th_cu_mat *w, const float *x, int64_t xs, float *y, int64_t ys, bool accum, cudaStream_t st) {
    dim3 grid((unsigned)((w->rows + WARPS - 1) / WARPS)), block(WARPS * 32);
    switch (w->type) {
    case TH_Q2: launch_k(gemv_qn<2, NT>, grid, block, st, *w, x, xs, y, ys, accum); return true;
    case TH_Q3: launch_k(gemv_qn<3, NT>, grid, block, st, *w, x, xs, y, ys, accum); return true;
    case TH_Q4: launch_k(gemv_qn<4, NT>, grid, block, st, *w, x, xs, y, ys, accum); return true;
    case TH_Q5: launch_k(gemv_qn<5, NT>, grid, block, st, *w, x, xs, y, ys, accum); return true;
    case TH_Q6: launch_k(gemv_qn<6, NT>, grid, block, st, *w, x, xs, y, ys, accum); return true;
    case TH_Q7: launch_k(gemv_qn<7, NT>, grid, block, st, *w, x, xs, y, ys, accum); return true;
    case TH_Q8: launch_k(gemv_qn<8, NT>, grid, block, st, *w, x, xs, y, ys, accum); return true;
    default: return false;
    }
}

}  // namespace

extern "C" bool th_cu_gemv_qn(const th_cu_mat *w, const float *x, int64_t xs, int n, float *y, int64_t ys, bool accum,
                              cudaStream_t st) {
    if (!x || w->type < TH_Q2 || w->type > TH_Q8) return false;
    for (int t0 = 0; t0 < n; t0 += 8) {
        int nt = n - t0 < 8 ? n - t0 : 8;
        const float *xt = x + t0 * xs;
        float *yt = y + t0 * ys;
        switch (nt) {
        case 1: launch_qn<1>(w, xt, xs, yt, ys, accum, st); break;
        case 2: launch_qn<2>(w, xt, xs, yt, ys, accum, st); break;
        case 3: launch_qn<3>(w, xt, xs, yt, ys, accum, st); break;
        case 4: launch_qn<4>(w, xt, xs, yt, ys, accum, st); break;
        case 5: launch_qn<5>(w, xt, xs, yt, ys, accum, st); break;
        case 6: launch_qn<6>(w, xt, xs, yt, ys, accum, st); break;
        case 7: launch_qn<7>(w, xt, xs, yt, ys, accum, st); break;
        default: launch_qn<8>(w, xt, xs, yt, ys, accum, st); break;
        }
    }
    return true;
}
