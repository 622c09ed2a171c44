// dequant.cu — weight rows to fp32 or fp16: the embedding lookup (rows picked
// by token id) and the GEMM path's dequantized tiles.
#include "cuda/split.cuh"

namespace {

// Four threads per 32-group, each writing 8 consecutive values (16 or 32 bytes):
// consecutive threads write consecutive memory. grid.y/z walk the rows.
__global__ void dequant_rows(th_cu_mat w, const int32_t *rows, int64_t row0, void *out, int64_t os, bool f16,
                             float scale) {
    pdl_begin();
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t g = idx >> 2;
    int part = (int)(idx & 3);
    int64_t i = blockIdx.y + (int64_t)gridDim.y * blockIdx.z;
    if (g >= w.K / 32) return;
    int64_t r = rows ? rows[i] : row0 + i;
    float f[32];
    dq32_mat(w, r, g, f);
    const float *p = f + part * 8;
    if (f16) {
        __half2 h[4];
#pragma unroll
        for (int j = 0; j < 4; j++) h[j] = __floats2half2_rn(p[2 * j] * scale, p[2 * j + 1] * scale);
        __half *o = (__half *)out + i * os + g * 32 + part * 8;
        if (((uintptr_t)o & 15) == 0) *(uint4 *)o = *(const uint4 *)h;
        else for (int j = 0; j < 4; j++) ((__half2 *)o)[j] = h[j];
    } else {
        float *o = (float *)out + i * os + g * 32 + part * 8;
#pragma unroll
        for (int j = 0; j < 8; j++) o[j] = p[j] * scale;
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
        int64_t threads = w->K / 32 * 4;
        dim3 grid((unsigned)((threads + 127) / 128), gy, gz);
        launch_k(dequant_rows, dim3(grid), dim3(128), st, *w, rows, row0, out, os, f16, scale);
    }
}
