/* ref_float.c — reference kernels of the float types F32, F16 and BF16:
 * conversion to/from f32 and dot products. As in GGML's scalar path, each
 * product is formed in float and the sum is accumulated in double. */
#include "quant/ref_internal.h"

void th_ref_dq_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
void th_ref_q_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void th_ref_dq_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = th_f16_to_f32(h[i]);
}

void th_ref_q_f16(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = th_f32_to_f16(src[i]);
}

void th_ref_dq_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = th_bf16_to_f32(h[i]);
}

void th_ref_q_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = th_f32_to_bf16(src[i]);
}

void th_ref_dot_f32(int64_t n, float *s, const void *w, const void *a) {
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * y[i]);
    *s = (float)sum;
}

void th_ref_dot_f16(int64_t n, float *s, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(th_f16_to_f32(x[i]) * th_f16_to_f32(y[i]));
    *s = (float)sum;
}

void th_ref_dot_bf16(int64_t n, float *s, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(th_bf16_to_f32(x[i]) * th_bf16_to_f32(y[i]));
    *s = (float)sum;
}
