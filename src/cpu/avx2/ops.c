/* ops.c (avx2) — AVX2/FMA forms of small vector ops of the forward pass that are in the
 * kernel table: SwiGLU (avx2_exp_ps, ~2e-7 relative error against expf). Any n (scalar
 * tail); the gated delta-rule step of one head (th_op_dn_step's order, 8 value columns
 * at a time, the clamp as max/min). */
#include "cpu/avx2/util.h"
#include "cpu/ops.h"

/* The chunked delta rule's products (dn_chunk.h's dnc_gemm): 4 × 16 tiles of C in
 * eight registers, a broadcast of A and two loads of B per step of kk. */
static void avx2_dnc_gemm(int32_t m, int32_t n, int32_t kk, const float *A, int64_t lda, const float *B, int64_t ldb,
                          float *C, int64_t ldc, int acc);
#define DNC_GEMM avx2_dnc_gemm
#include "cpu/dn_chunk.h"

static void avx2_dnc_gemm(int32_t m, int32_t n, int32_t kk, const float *A, int64_t lda, const float *B, int64_t ldb,
                          float *C, int64_t ldc, int acc) {
    int32_t m4 = m & ~3, n16 = n & ~15;
    for (int32_t i = 0; i < m4; i += 4)
        for (int32_t j = 0; j < n16; j += 16) {
            __m256 c[4][2];
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++)
                    c[r][h] = acc ? _mm256_loadu_ps(C + (i + r) * ldc + j + 8 * h) : _mm256_setzero_ps();
            const float *a = A + i * lda;
            for (int32_t p = 0; p < kk; p++) {
                __m256 b0 = _mm256_loadu_ps(B + p * ldb + j), b1 = _mm256_loadu_ps(B + p * ldb + j + 8);
                for (int r = 0; r < 4; r++) {
                    __m256 x = _mm256_broadcast_ss(a + r * lda + p);
                    c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);
                    c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++) _mm256_storeu_ps(C + (i + r) * ldc + j + 8 * h, c[r][h]);
        }
    if (m4 < m || n16 < n) {   /* the edges through the plain form */
        if (n16 < n) dnc_gemm(m4, n - n16, kk, A, lda, B + n16, ldb, C + n16, ldc, acc);
        if (m4 < m) dnc_gemm(m - m4, n, kk, A + m4 * lda, lda, B, ldb, C + m4 * ldc, ldc, acc);
    }
}

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
