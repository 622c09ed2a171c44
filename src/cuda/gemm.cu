// gemm.cu — the batched product for prefill and large batches through cuBLAS:
// F32 weights as SGEMM (exact fp32), F16/BF16 weights used in place with
// activations converted to the same 16-bit type, every other type dequantized to
// fp16 in row chunks that fit the scratch buffer, all with fp32 accumulation on
// tensor cores. Row-major y[n][rows] = x[n][K] · W[rows][K]^T is column-major
// Y(rows×n) = W^T(rows×K) · X(K×n). Also the grouped form for mixture-of-experts
// prefill (th_cu_gemm_experts): one GEMM per hit expert over its own rows of a
// stacked matrix, the activations converted once, consecutive experts
// dequantized into one tile.
#include "cuda/common.cuh"
#include <cublas_v2.h>

namespace {

__global__ void to_half(const float *x, int64_t xs, int64_t K, int n, __half *o) {
    pdl_begin();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= K * n) return;
    int64_t t = i / K, k = i % K;
    o[i] = __float2half_rn(x[t * xs + k]);
}

__global__ void to_bf16(const float *x, int64_t xs, int64_t K, int n, __nv_bfloat16 *o) {
    pdl_begin();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= K * n) return;
    int64_t t = i / K, k = i % K;
    o[i] = __float2bfloat16_rn(x[t * xs + k]);
}

// n rows of x (xs apart) to fp16 or bf16, rows K apart.
void to_16(const float *x, int64_t xs, int64_t K, int n, bool bf16, void *out, cudaStream_t st) {
    int64_t total = K * n;
    if (total <= 0) return;
    unsigned blocks = (unsigned)((total + 255) / 256);
    if (bf16) launch_k(to_bf16, dim3(blocks), dim3(256), st, x, xs, K, n, (__nv_bfloat16 *)out);
    else launch_k(to_half, dim3(blocks), dim3(256), st, x, xs, K, n, (__half *)out);
}

// Column-major C(m×n, ldc) (+)= A^T · B: A m rows of K (16-bit type t, lda apart),
// B n columns of K (the same type, K apart), fp32 C and accumulation.
bool gemm16(cublasHandle_t h, int m, int n, int K, const void *A, int lda, const void *B, cudaDataType_t t, float *C,
            int ldc, float beta) {
    if (m <= 0 || n <= 0) return true;
    const float one = 1.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, K, &one, A, t, lda, B, t, K, &beta, C, CUDA_R_32F, ldc,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
}

bool sgemm(cublasHandle_t h, int m, int n, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
           float beta) {
    if (m <= 0 || n <= 0) return true;
    const float one = 1.0f;
    return cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, K, &one, A, lda, B, ldb, &beta, C, ldc) == CUBLAS_STATUS_SUCCESS;
}

bool is_gguf(const th_cu_mat *w, uint32_t type) { return w->type == type && w->layout == TH_CU_GGUF; }

// The 16-bit rows of x at row r (xh holds rows of K elements).
const void *row16(const void *xh, int64_t r, int64_t K) { return (const uint16_t *)xh + r * K; }

// Expert ex[i] of a dequantized-type w through fp16 tiles of at most `cap` rows
// in wbuf: one expert in several tiles when it is taller than a tile.
bool expert_tiled(cublasHandle_t h, const th_cu_mat *w, int64_t rpe, int64_t e, int off, int cnt, const void *xh,
                  float *y, int64_t ys, void *wbuf, int64_t cap, cudaStream_t st) {
    const int64_t K = w->K;
    for (int64_t r0 = 0; r0 < rpe; r0 += cap) {
        int64_t nr = rpe - r0 < cap ? rpe - r0 : cap;
        th_cu_dequant_rows(w, nullptr, e * rpe + r0, nr, wbuf, K, true, 1.0f, st);
        if (!gemm16(h, (int)nr, cnt, (int)K, wbuf, (int)K, row16(xh, off, K), CUDA_R_16F, y + (int64_t)off * ys + r0,
                    (int)ys, 0.0f))
            return false;
    }
    return true;
}

}  // namespace

extern "C" bool th_cu_gemm(void *cublas, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y,
                           int64_t ys, bool accum, void *wbuf, size_t wbuf_bytes, void *xbuf, cudaStream_t st) {
    cublasHandle_t h = (cublasHandle_t)cublas;
    if (cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS) return false;
    const float beta = accum ? 1.0f : 0.0f;
    const int K = (int)w->K;
    if (is_gguf(w, TH_F32))
        return sgemm(h, (int)w->rows, n, K, (const float *)w->data, (int)(w->row_bytes / 4), x, (int)xs, y, (int)ys, beta);
    bool bf = is_gguf(w, TH_BF16);
    to_16(x, xs, K, n, bf, xbuf, st);
    if (bf || is_gguf(w, TH_F16))
        return gemm16(h, (int)w->rows, n, K, w->data, (int)(w->row_bytes / 2), xbuf, bf ? CUDA_R_16BF : CUDA_R_16F, y,
                      (int)ys, beta);
    int64_t chunk = (int64_t)(wbuf_bytes / ((size_t)K * 2));
    if (chunk < 1) return false;
    for (int64_t r0 = 0; r0 < w->rows; r0 += chunk) {
        int64_t nr = w->rows - r0 < chunk ? w->rows - r0 : chunk;
        th_cu_dequant_rows(w, nullptr, r0, nr, wbuf, K, true, 1.0f, st);
        if (!gemm16(h, (int)nr, n, K, wbuf, K, xbuf, CUDA_R_16F, y + r0, (int)ys, beta)) return false;
    }
    return true;
}

extern "C" bool th_cu_gemm_experts(void *cublas, const th_cu_mat *w, int64_t rpe, int n_hit, const int32_t *ex,
                                   const int32_t *off, const int32_t *cnt, int n_rows, const float *x, int64_t xs,
                                   float *y, int64_t ys, void *wbuf, size_t wbuf_bytes, void *xh, cudaStream_t st) {
    cublasHandle_t h = (cublasHandle_t)cublas;
    if (cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS) return false;
    const int K = (int)w->K, R = (int)rpe;
    const uint8_t *wd = (const uint8_t *)w->data;
    if (is_gguf(w, TH_F32)) {  // exact fp32, weights and activations in place
        for (int i = 0; i < n_hit; i++)
            if (!sgemm(h, R, cnt[i], K, (const float *)(wd + (size_t)ex[i] * rpe * w->row_bytes), (int)(w->row_bytes / 4),
                       x + (int64_t)off[i] * xs, (int)xs, y + (int64_t)off[i] * ys, (int)ys, 0.0f))
                return false;
        return true;
    }
    bool bf = is_gguf(w, TH_BF16);
    to_16(x, xs, K, n_rows, bf, xh, st);
    if (bf || is_gguf(w, TH_F16)) {  // 16-bit weights in place
        for (int i = 0; i < n_hit; i++)
            if (!gemm16(h, R, cnt[i], K, wd + (size_t)ex[i] * rpe * w->row_bytes, (int)(w->row_bytes / 2),
                        row16(xh, off[i], K), bf ? CUDA_R_16BF : CUDA_R_16F, y + (int64_t)off[i] * ys, (int)ys, 0.0f))
                return false;
        return true;
    }
    const int64_t cap = (int64_t)(wbuf_bytes / ((size_t)K * 2));  // rows a tile holds
    if (cap < 1) return false;
    for (int i = 0; i < n_hit;) {
        if (rpe > cap) {
            if (!expert_tiled(h, w, rpe, ex[i], off[i], cnt[i], xh, y, ys, wbuf, cap, st)) return false;
            i++;
            continue;
        }
        int j = i + 1;  // experts ex[i..j) consecutive ids: one tile
        while (j < n_hit && ex[j] == ex[j - 1] + 1 && (int64_t)(j - i + 1) * rpe <= cap) j++;
        th_cu_dequant_rows(w, nullptr, (int64_t)ex[i] * rpe, (int64_t)(j - i) * rpe, wbuf, K, true, 1.0f, st);
        for (int m = i; m < j; m++)
            if (!gemm16(h, R, cnt[m], K, (const __half *)wbuf + (int64_t)(ex[m] - ex[i]) * rpe * K, K,
                        row16(xh, off[m], K), CUDA_R_16F, y + (int64_t)off[m] * ys, (int)ys, 0.0f))
                return false;
        i = j;
    }
    return true;
}
