// dequant.cu — weight rows to fp32 or fp16: the embedding lookup (rows picked
// by token id) and the GEMM path's dequantized tiles. The tiles of a SPLIT
// matrix (every cuBLAS-path product of a quantized type) go through a kernel
// instantiated per type: a thread decodes one 32-weight sub-block in registers
// and stores its 64 bytes of fp16; the generic kernel (any layout, fp32 too)
// picks the type at run time.
#include "cuda/split.cuh"

namespace {

// Sub-blocks of rows row0.. of a SPLIT matrix of TYPE to fp16 (rows os apart),
// thread (i, g) = sub-block g of row i. The weights are read before waiting for
// the previous kernel (they do not change within a step); out may still be in
// use by it. Rows stored back to back (os = K): a warp's 32 sub-blocks are 2 KiB
// of contiguous output, which it writes through shared memory as 16 bytes a lane
// at consecutive addresses (the thread's own 64 bytes are 4 stores 64 bytes apart
// across the warp, half of each 32-byte sector per instruction).
constexpr int DQ_THREADS = 256;
template <uint32_t TYPE>
__global__ void __launch_bounds__(DQ_THREADS) dequant_split_f16(th_cu_mat w, int64_t row0, int64_t n, __half *out,
                                                               int64_t os, float scale) {
    __shared__ uint4 stage[DQ_THREADS * 5];  // a thread's 64 bytes, padded to 80 (no bank conflicts)
    const int64_t G = w.K / 32;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = idx < n * G;
    const int64_t i = live ? idx / G : 0, g = live ? idx - i * G : 0;
    KSub<TYPE> s;
    if (live) s.load(w, row0 + i, g);
    pdl_begin();
    float f[32];
    s.decode(f);
    uint4 h[4];
    __half2 *hp = (__half2 *)h;
#pragma unroll
    for (int j = 0; j < 16; j++) hp[j] = __floats2half2_rn(f[2 * j] * scale, f[2 * j + 1] * scale);
    const int lane = threadIdx.x & 31;
    const int64_t first = idx - lane;  // the warp's first sub-block
    if (os == w.K && first + 32 <= n * G && ((uintptr_t)out & 15) == 0) {
        uint4 *mine = stage + threadIdx.x * 5, *warp = stage + (threadIdx.x - lane) * 5;
#pragma unroll
        for (int j = 0; j < 4; j++) mine[j] = h[j];
        __syncwarp();
        uint4 *o = (uint4 *)(out + first * 32);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int p = k * 32 + lane;  // 16-byte piece p of the warp's 2 KiB: sub-block p / 4, quarter p % 4
            o[p] = warp[(p >> 2) * 5 + (p & 3)];
        }
        return;
    }
    if (!live) return;
    __half *o = out + i * os + g * 32;
    if (((uintptr_t)o & 15) == 0) {
#pragma unroll
        for (int j = 0; j < 4; j++) ((uint4 *)o)[j] = h[j];
    } else {
#pragma unroll
        for (int j = 0; j < 16; j++) ((__half2 *)o)[j] = hp[j];
    }
}

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
    if (!rows && f16 && w->layout == TH_CU_SPLIT && w->K % 32 == 0 && (os & 1) == 0 &&
        with_split_type(w->type, [&](auto tc) {
            int64_t threads = n * (w->K / 32);
            launch_k(dequant_split_f16<decltype(tc)::value>, dim3((unsigned)((threads + DQ_THREADS - 1) / DQ_THREADS)),
                     dim3(DQ_THREADS), st,
                     *w, row0, n, (__half *)out, os, scale);
        }))
        return;
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
