// dequant.cu — weight rows to fp32 or fp16: the embedding lookup (rows picked
// by token id) and the GEMM path's dequantized tiles.
#include "cuda/common.cuh"

namespace {

// One thread per 32-group; grid.y walks the rows.
__global__ void dequant_rows(th_cu_mat w, const int32_t *rows, int64_t row0, void *out, int64_t os, bool f16,
                             float scale) {
    pdl_begin();
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t i = blockIdx.y + (int64_t)gridDim.y * blockIdx.z;
    if (g >= w.K / 32) return;
    int64_t r = rows ? rows[i] : row0 + i;
    float f[32];
    dq32_mat(w, r, g, f);
    if (f16) {
        __half2 *o = (__half2 *)((__half *)out + i * os + g * 32);
#pragma unroll
        for (int j = 0; j < 16; j++) o[j] = __floats2half2_rn(f[2 * j] * scale, f[2 * j + 1] * scale);
    } else {
        float *o = (float *)out + i * os + g * 32;
#pragma unroll
        for (int j = 0; j < 32; j++) o[j] = f[j] * scale;
    }
}

// Float types whose K is not a multiple of 32: one thread per element.
__global__ void dequant_rows_float(th_cu_mat w, const int32_t *rows, int64_t row0, void *out, int64_t os, bool f16,
                                   float scale) {
    pdl_begin();
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t i = blockIdx.y + (int64_t)gridDim.y * blockIdx.z;
    if (e >= w.K) return;
    int64_t r = rows ? rows[i] : row0 + i;
    const uint8_t *row = (const uint8_t *)w.data + r * w.row_bytes;
    float v = w.type == TH_F32 ? ((const float *)row)[e] : w.type == TH_F16 ? h2f(((const uint16_t *)row)[e])
                                                                             : bf2f(((const uint16_t *)row)[e]);
    v *= scale;
    if (f16) ((__half *)out)[i * os + e] = __float2half_rn(v);
    else ((float *)out)[i * os + e] = v;
}

}  // namespace

extern "C" void th_cu_dequant_rows(const th_cu_mat *w, const int32_t *rows, int64_t row0, int64_t n, void *out,
                                   int64_t os, bool f16, float scale, cudaStream_t st) {
    if (n <= 0) return;
    unsigned gy = (unsigned)(n < 65535 ? n : 65535), gz = (unsigned)((n + gy - 1) / gy);
    if (gz * (int64_t)gy != n) {  // keep the grid exact: do the remainder separately
        int64_t full = (n / 65535) * 65535;
        th_cu_dequant_rows(w, rows, row0, full, out, os, f16, scale, st);
        th_cu_dequant_rows(w, rows ? rows + full : nullptr, row0 + full, n - full,
                           f16 ? (void *)((__half *)out + full * os) : (void *)((float *)out + full * os), os, f16,
                           scale, st);
        return;
    }
    bool is_float = w->type == TH_F32 || w->type == TH_F16 || w->type == TH_BF16;
    if (is_float && w->K % 32) {
        dim3 grid((unsigned)((w->K + 127) / 128), gy, gz);
        launch_k(dequant_rows_float, dim3(grid), dim3(128), st, *w, rows, row0, out, os, f16, scale);
    } else {
        int64_t groups = w->K / 32;
        dim3 grid((unsigned)((groups + 63) / 64), gy, gz);
        launch_k(dequant_rows, dim3(grid), dim3(64), st, *w, rows, row0, out, os, f16, scale);
    }
}
