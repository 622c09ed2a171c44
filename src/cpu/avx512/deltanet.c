/* deltanet.c (avx512) — the gated delta-rule step of one head (th_op_dn_step's
 * arithmetic: vp = Sᵀk, ov = Sᵀq, nw = beta·(v - decay·vp), out = scale·(decay·ov +
 * (k·q)·nw), S = clamp(decay·S + k nwᵀ, ±1e6)) for head widths that are a multiple of
 * 16 up to 128: the vp / ov sums of a whole row stay in zmm registers across the dk
 * rows of S (AVX2 keeps them in memory, 16 ymm registers hold only 128 floats),
 * and S is read 16 floats a load. Other widths take the AVX2 step. */
#include "cpu/avx512/util.h"

/* NB = dk / 16 vectors of 16 columns; always inlined with a constant NB so that the
 * accumulator arrays are registers. */
static inline __attribute__((always_inline)) void dn_step_nb(const int NB, int32_t dk, float *S, const float *q,
                                                             const float *k, const float *v, float beta, float decay,
                                                             float scale, float *out) {
    __m512 vp[8], ov[8], nw[8];
    float kq = 0.0f;
    for (int32_t i = 0; i < dk; i++) kq += k[i] * q[i];
#pragma GCC unroll 8
    for (int b = 0; b < NB; b++) vp[b] = ov[b] = _mm512_setzero_ps();
    for (int32_t i = 0; i < dk; i++) {
        const float *Si = S + (int64_t)i * dk;
        const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++) {
            __m512 s = _mm512_loadu_ps(Si + 16 * b);
            vp[b] = _mm512_fmadd_ps(s, ki, vp[b]);
            ov[b] = _mm512_fmadd_ps(s, qi, ov[b]);
        }
    }
    const __m512 vb = _mm512_set1_ps(beta), vbd = _mm512_set1_ps(beta * decay);
    const __m512 vds = _mm512_set1_ps(decay * scale), vks = _mm512_set1_ps(kq * scale);
#pragma GCC unroll 8
    for (int b = 0; b < NB; b++) {
        nw[b] = _mm512_fnmadd_ps(vp[b], vbd, _mm512_mul_ps(_mm512_loadu_ps(v + 16 * b), vb));
        _mm512_storeu_ps(out + 16 * b, _mm512_fmadd_ps(nw[b], vks, _mm512_mul_ps(ov[b], vds)));
    }
    const __m512 vd = _mm512_set1_ps(decay), lo = _mm512_set1_ps(-1e6f), hi = _mm512_set1_ps(1e6f);
    for (int32_t i = 0; i < dk; i++) {
        float *Si = S + (int64_t)i * dk;
        const __m512 ki = _mm512_set1_ps(k[i]);
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++) {
            __m512 x = _mm512_fmadd_ps(nw[b], ki, _mm512_mul_ps(_mm512_loadu_ps(Si + 16 * b), vd));
            _mm512_storeu_ps(Si + 16 * b, _mm512_min_ps(_mm512_max_ps(x, lo), hi));
        }
    }
}

void th_avx512_dn_step(int32_t dk, float *S, const float *q, const float *k, const float *v, float beta, float decay,
                       float scale, float *out) {
    switch (dk % 16 ? 0 : dk / 16) {
    case 1: dn_step_nb(1, dk, S, q, k, v, beta, decay, scale, out); return;
    case 2: dn_step_nb(2, dk, S, q, k, v, beta, decay, scale, out); return;
    case 3: dn_step_nb(3, dk, S, q, k, v, beta, decay, scale, out); return;
    case 4: dn_step_nb(4, dk, S, q, k, v, beta, decay, scale, out); return;
    case 5: dn_step_nb(5, dk, S, q, k, v, beta, decay, scale, out); return;
    case 6: dn_step_nb(6, dk, S, q, k, v, beta, decay, scale, out); return;
    case 7: dn_step_nb(7, dk, S, q, k, v, beta, decay, scale, out); return;
    case 8: dn_step_nb(8, dk, S, q, k, v, beta, decay, scale, out); return;
    default: th_avx2_dn_step(dk, S, q, k, v, beta, decay, scale, out); return;
    }
}
