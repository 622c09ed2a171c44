// misc.cu — small element-wise ops: bias add, residual add, softcap.
#include "cuda/common.cuh"

namespace {

__global__ void add_bias(float *y, int64_t stride, const float *b, int64_t width) {
    pdl_begin();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < width) y[blockIdx.y * stride + i] += b[i];
}

__global__ void add_rows(float *y, const float *x, int64_t stride, int64_t width) {
    pdl_begin();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < width) y[blockIdx.y * stride + i] += x[blockIdx.y * stride + i];
}

__global__ void softcap(float *x, int64_t count, float cap) {
    pdl_begin();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) x[i] = cap * tanhf(x[i] / cap);
}

}  // namespace

extern "C" void th_cu_add_bias(float *y, int64_t stride, const float *b, int64_t width, int n, cudaStream_t st) {
    if (n <= 0) return;
    launch_k(add_bias, dim3(dim3((unsigned)((width + 255) / 256), (unsigned)n)), dim3(256), st, y, stride, b, width);
}

extern "C" void th_cu_add_rows(float *y, const float *x, int64_t stride, int64_t width, int n, cudaStream_t st) {
    if (n <= 0) return;
    launch_k(add_rows, dim3(dim3((unsigned)((width + 255) / 256), (unsigned)n)), dim3(256), st, y, x, stride, width);
}

extern "C" void th_cu_softcap(float *x, int64_t count, float cap, cudaStream_t st) {
    if (count <= 0) return;
    launch_k(softcap, dim3((unsigned)((count + 255) / 256)), dim3(256), st, x, count, cap);
}

extern "C" {
bool th_cu_pdl = true;
void th_cu_set_pdl(bool on) { th_cu_pdl = on; }
}
