// gemm.cu — the batched product for prefill and large batches through cuBLAS:
// F32 weights as SGEMM (exact fp32), F16/BF16 weights used in place with
// activations converted to the same 16-bit type, every other type dequantized to
// fp16 in row chunks that fit the scratch buffer, all with fp32 accumulation on
// tensor cores. Row-major y[n][rows] = x[n][K] · W[rows][K]^T is column-major
// Y(rows×n) = W^T(rows×K) · X(K×n).
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

}  // namespace

extern "C" bool th_cu_gemm(void *cublas, const th_cu_mat *w, const float *x, int64_t xs, int n, float *y,
                           int64_t ys, bool accum, void *wbuf, size_t wbuf_bytes, void *xbuf, cudaStream_t st) {
    cublasHandle_t h = (cublasHandle_t)cublas;
    if (cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS) return false;
    const float one = 1.0f, beta = accum ? 1.0f : 0.0f;
    const int K = (int)w->K;
    if (w->type == TH_F32 && w->layout == TH_CU_GGUF) {
        return cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->rows, n, K, &one, (const float *)w->data,
                           (int)(w->row_bytes / 4), x, (int)xs, &beta, y, (int)ys) == CUBLAS_STATUS_SUCCESS;
    }
    int64_t total = (int64_t)K * n;
    unsigned blocks = (unsigned)((total + 255) / 256);
    if (w->type == TH_BF16 && w->layout == TH_CU_GGUF) {
        launch_k(to_bf16, dim3(blocks), dim3(256), st, x, xs, K, n, (__nv_bfloat16 *)xbuf);
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->rows, n, K, &one, w->data, CUDA_R_16BF,
                            (int)(w->row_bytes / 2), xbuf, CUDA_R_16BF, K, &beta, y, CUDA_R_32F, (int)ys,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    }
    launch_k(to_half, dim3(blocks), dim3(256), st, x, xs, K, n, (__half *)xbuf);
    if (w->type == TH_F16 && w->layout == TH_CU_GGUF) {
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->rows, n, K, &one, w->data, CUDA_R_16F,
                            (int)(w->row_bytes / 2), xbuf, CUDA_R_16F, K, &beta, y, CUDA_R_32F, (int)ys,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    }
    int64_t chunk = (int64_t)(wbuf_bytes / ((size_t)K * 2));
    if (chunk < 1) return false;
    for (int64_t r0 = 0; r0 < w->rows; r0 += chunk) {
        int64_t nr = w->rows - r0 < chunk ? w->rows - r0 : chunk;
        th_cu_dequant_rows(w, nullptr, r0, nr, wbuf, K, true, 1.0f, st);
        if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)nr, n, K, &one, wbuf, CUDA_R_16F, K, xbuf, CUDA_R_16F, K,
                         &beta, y + r0, CUDA_R_32F, (int)ys, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return false;
    }
    return true;
}
