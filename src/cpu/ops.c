/* ops.c — plain-C element-wise and row ops (see ops.h). */
#include "cpu/ops.h"
#include <math.h>

void th_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);   /* float product, double sum: as ggml */
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    if (w)
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

void th_op_rope(float *x, int32_t n_rot, int32_t pos, float base, float freq_scale,
                const float *freq_factors, int rope_type) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta_base = (float)pos;
    int32_t half = n_rot / 2;
    for (int32_t i = 0; i < half; i++) {
        float ff = freq_factors ? freq_factors[i] : 1.0f;
        float theta = theta_base * freq_scale / ff;
        float c = cosf(theta), s = sinf(theta);
        int32_t a = rope_type == 1 ? i : 2 * i;
        int32_t b = rope_type == 1 ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
        theta_base *= theta_scale;
    }
}

void th_op_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void th_op_swiglu(float *a, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        a[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void th_op_geglu(float *a, const float *gate, const float *up, int64_t n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        a[i] = 0.5f * g * (1.0f + tanhf(c * g * (1.0f + 0.044715f * g * g))) * up[i];
    }
}

void th_op_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void th_op_scale(float *y, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

void th_op_softcap(float *x, float cap, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}
