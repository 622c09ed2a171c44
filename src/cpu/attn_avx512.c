/* attn_avx512.c — the AVX-512 form of attention's chunk kernel (th_attn_chunk,
 * kernels.h). Same steps as attn_avx2.c, 16 lanes wide: the scores of two query rows at
 * a time (8 accumulators share each load of the transposed keys), masks for the rows'
 * key ranges, a 16-lane exp, and acc = acc * corr + Σ p_j v_j in pieces of 64 floats
 * (32 for a last piece). f32 sums with FMA, so results differ from the generic form by
 * rounding only. */
#include "cpu/avx2_util.h"
#include <math.h>

/* e^x, x clamped to [-87.3, 88.3]: the reduction and polynomial of avx2_exp_ps. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    static const float c[] = { 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f };
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    for (int i = 0; i < 5; i++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c[i]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* Lanes of vector u (keys 16u..16u+15) inside [j0, j1). */
static inline __mmask16 in_range(int u, int32_t j0, int32_t j1) {
    int32_t a = TH_MAX(j0 - 16 * u, 0), b = TH_MIN(j1 - 16 * u, 16);
    return a >= b ? 0 : (__mmask16)(((1u << b) - 1) & ~((1u << a) - 1));
}

/* Scaled scores of rows r and r + 1 (rows >= m are not computed): s[i][0..64). */
static void scores2(const th_attn_chunk *a, int32_t r, float s[2][TH_ATTN_TK]) {
    const float *q0 = a->q + (size_t)r * (size_t)a->d, *q1 = r + 1 < a->m ? q0 + a->d : q0;
    __m512 c0[4], c1[4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) c0[u] = c1[u] = _mm512_setzero_ps();
    for (int32_t c = 0; c < a->d; c++) {
        __m512 x0 = _mm512_set1_ps(q0[c]), x1 = _mm512_set1_ps(q1[c]);
        const float *kr = a->kt + (size_t)c * TH_ATTN_TK;
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            __m512 k = _mm512_loadu_ps(kr + 16 * u);
            c0[u] = _mm512_fmadd_ps(x0, k, c0[u]);
            c1[u] = _mm512_fmadd_ps(x1, k, c1[u]);
        }
    }
    const __m512 sc = _mm512_set1_ps(a->scale);
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
        _mm512_storeu_ps(s[0] + 16 * u, _mm512_mul_ps(c0[u], sc));
        _mm512_storeu_ps(s[1] + 16 * u, _mm512_mul_ps(c1[u], sc));
    }
}

/* acc[0..16nv) = acc * corr + Σ_{j in [j0, j1)} p_j v_j[o..o+16nv) (nv = 4 or 2, a constant
 * after inlining, so the accumulators stay in registers). */
static inline __attribute__((always_inline)) void acc_piece(const th_attn_chunk *a, float *acc, const float *p, int32_t o,
                                                            int32_t j0, int32_t j1, float corr, const int nv) {
    __m512 x[4];
    const __m512 vc = _mm512_set1_ps(corr);
#pragma GCC unroll 4
    for (int u = 0; u < nv; u++) x[u] = _mm512_mul_ps(_mm512_loadu_ps(acc + 16 * u), vc);
    for (int32_t j = j0; j < j1; j++) {
        __m512 pj = _mm512_set1_ps(p[j]);
        const float *v = a->v + (size_t)j * (size_t)a->dv_stride + o;
#pragma GCC unroll 4
        for (int u = 0; u < nv; u++) x[u] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16 * u), x[u]);
    }
#pragma GCC unroll 4
    for (int u = 0; u < nv; u++) _mm512_storeu_ps(acc + 16 * u, x[u]);
}

/* One row's update from its scores s (softcap, mask, exp in place). */
static void update_row(const th_attn_chunk *a, int32_t r, float *s) {
    int32_t j0 = a->j0[r], j1 = a->j1[r];
    if (a->softcap > 0)
        for (int32_t j = j0; j < j1; j++) s[j] = a->softcap * tanhf(s[j] / a->softcap);
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int u = 0; u < 4; u++) m = _mm512_mask_max_ps(m, in_range(u, j0, j1), m, _mm512_loadu_ps(s + 16 * u));
    float cmax = _mm512_reduce_max_ps(m), mx = fmaxf(a->mx[r], cmax);
    float corr = a->mx[r] == -INFINITY ? 0.0f : expf(a->mx[r] - mx);
    __m512 sum = _mm512_setzero_ps(), vm = _mm512_set1_ps(mx);
    for (int u = 0; u < 4; u++) {
        __m512 p = _mm512_maskz_mov_ps(in_range(u, j0, j1), exp512(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * u), vm)));
        _mm512_storeu_ps(s + 16 * u, p);
        sum = _mm512_add_ps(sum, p);
    }
    a->sum[r] = a->sum[r] * corr + _mm512_reduce_add_ps(sum);
    a->mx[r] = mx;
    float *acc = a->acc + (size_t)r * (size_t)a->dv_stride;
    int32_t o = 0;
    for (; o + 64 <= a->dv_stride; o += 64) acc_piece(a, acc + o, s, o, j0, j1, corr, 4);
    if (o < a->dv_stride) acc_piece(a, acc + o, s, o, j0, j1, corr, 2);   /* dv_stride is a multiple of 32 */
}

void th_avx512_attn_chunk(const th_attn_chunk *a) {
    float s[2][TH_ATTN_TK];
    for (int32_t r = 0; r < a->m; r += 2) {
        bool live0 = a->j0[r] < a->j1[r], live1 = r + 1 < a->m && a->j0[r + 1] < a->j1[r + 1];
        if (!live0 && !live1) continue;
        scores2(a, r, s);
        if (live0) update_row(a, r, s[0]);
        if (live1) update_row(a, r + 1, s[1]);
    }
}
