/* ops.c (avx2) — AVX2/FMA forms of small vector ops of the forward pass that are in the
 * kernel table: SwiGLU (avx2_exp_ps, ~2e-7 relative error against expf). Any n (scalar
 * tail); the gated delta-rule step of one head (th_op_dn_step's order, 8 value columns
 * at a time, the clamp as max/min). */
#include "cpu/avx2/util.h"
#include "cpu/ops.h"
#include "cpu/dn_chunk.h"

void th_avx2_swiglu(float *a, const float *gate, const float *up, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = avx2_exp_ps(_mm256_sub_ps(zero, g));
        _mm256_storeu_ps(a + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    th_op_swiglu(a + i, gate + i, up + i, n - i);
}

void th_avx2_dn_step(int32_t dk, float *S, const float *q, const float *k, const float *v, float beta, float decay,
                     float scale, float *out) {
    float vp[1024], ov[1024], nw[1024], kq = 0.0f;
    for (int32_t i = 0; i < dk; i++) kq += k[i] * q[i];
    int32_t j8 = dk & ~7;
    for (int32_t j = 0; j < dk; j++) vp[j] = ov[j] = 0.0f;
    for (int32_t i = 0; i < dk; i++) {
        const float *Si = S + (int64_t)i * dk;
        __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
        for (int32_t j = 0; j < j8; j += 8) {
            __m256 s = _mm256_loadu_ps(Si + j);
            _mm256_storeu_ps(vp + j, _mm256_fmadd_ps(s, ki, _mm256_loadu_ps(vp + j)));
            _mm256_storeu_ps(ov + j, _mm256_fmadd_ps(s, qi, _mm256_loadu_ps(ov + j)));
        }
        for (int32_t j = j8; j < dk; j++) { vp[j] += Si[j] * k[i]; ov[j] += Si[j] * q[i]; }
    }
    for (int32_t j = 0; j < dk; j++) {
        nw[j] = v[j] * beta - vp[j] * beta * decay;
        out[j] = ov[j] * decay * scale + nw[j] * kq * scale;
    }
    const __m256 vd = _mm256_set1_ps(decay), lo = _mm256_set1_ps(-1e6f), hi = _mm256_set1_ps(1e6f);
    for (int32_t i = 0; i < dk; i++) {
        float *Si = S + (int64_t)i * dk;
        __m256 ki = _mm256_set1_ps(k[i]);
        for (int32_t j = 0; j < j8; j += 8) {
            __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(nw + j), ki, _mm256_mul_ps(_mm256_loadu_ps(Si + j), vd));
            _mm256_storeu_ps(Si + j, _mm256_min_ps(_mm256_max_ps(x, lo), hi));
        }
        for (int32_t j = j8; j < dk; j++) {
            float x = decay * Si[j] + nw[j] * k[i];
            Si[j] = x < -1e6f ? -1e6f : x > 1e6f ? 1e6f : x;
        }
    }
}

/* The chunked delta rule (cpu/dn_chunk.h), compiled at this file's level. */
void th_avx2_dn_chunk(int32_t dk, int32_t L, float *S, const float *q, const float *k, const float *v, int64_t xs,
                      const float *beta, const float *lg, int64_t gs, float scale, float *out, int64_t os, float *work) {
    th_dn_chunk_body(dk, L, S, q, k, v, xs, beta, lg, gs, scale, out, os, work);
}
