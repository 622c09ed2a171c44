/* attn.c (avx2) — AVX2/FMA forms of attention's chunk kernel (th_attn_chunk, kernels.h)
 * and of the F16 -> f32 row conversion (F16C) the attention driver uses to load K/V
 * tiles from an F16 cache. The chunk kernel takes one query row at a time: its 64
 * scores in 8 accumulators (one broadcast of q[c] and 8 FMAs with the transposed keys
 * per dimension), a vectorized exp, then acc = acc * corr + Σ p_j v_j in pieces of 32
 * floats (4 independent FMA chains). Sums are f32 (FMA), so results differ from the
 * generic form by rounding only. The fixed-count loops over registers are unrolled by
 * pragma (GCC keeps the accumulators in memory otherwise). */
#include "cpu/avx2/util.h"
#include <math.h>

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* s[0..64) = scale · q·k_j (softcapped); lanes outside [j0, j1) = -inf. Returns the max. */
static float scores(const th_attn_chunk *a, const float *q, int32_t j0, int32_t j1, float *s) {
    __m256 acc[8];
    #pragma GCC unroll 8
    for (int u = 0; u < 8; u++) acc[u] = _mm256_setzero_ps();
    for (int32_t c = 0; c < a->d; c++) {
        __m256 qc = _mm256_set1_ps(q[c]);
        const float *kr = a->kt + (size_t)c * TH_ATTN_TK;
        #pragma GCC unroll 8
        for (int u = 0; u < 8; u++) acc[u] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kr + 8 * u), acc[u]);
    }
    #pragma GCC unroll 8
    for (int u = 0; u < 8; u++) _mm256_storeu_ps(s + 8 * u, _mm256_mul_ps(acc[u], _mm256_set1_ps(a->scale)));
    if (a->softcap > 0)
        for (int32_t j = j0; j < j1; j++) s[j] = a->softcap * tanhf(s[j] / a->softcap);
    __m256 mx = _mm256_set1_ps(-INFINITY), lo = _mm256_set1_ps((float)j0), hi = _mm256_set1_ps((float)j1);
    const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    #pragma GCC unroll 8
    for (int u = 0; u < 8; u++) {
        __m256 j = _mm256_add_ps(lane, _mm256_set1_ps((float)(8 * u)));
        __m256 in = _mm256_and_ps(_mm256_cmp_ps(j, lo, _CMP_GE_OQ), _mm256_cmp_ps(j, hi, _CMP_LT_OQ));
        __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_loadu_ps(s + 8 * u), in);
        _mm256_storeu_ps(s + 8 * u, v);
        mx = _mm256_max_ps(mx, v);
    }
    return hmax_ps(mx);
}

/* p_j = e^(s_j - mx) over the 64 lanes (0 where s_j = -inf); returns their sum. */
static float weights(float *s, float mx) {
    __m256 sum = _mm256_setzero_ps(), m = _mm256_set1_ps(mx), ninf = _mm256_set1_ps(-INFINITY);
    #pragma GCC unroll 8
    for (int u = 0; u < 8; u++) {
        __m256 v = _mm256_loadu_ps(s + 8 * u);
        __m256 p = _mm256_andnot_ps(_mm256_cmp_ps(v, ninf, _CMP_EQ_OQ), avx2_exp_ps(_mm256_sub_ps(v, m)));
        _mm256_storeu_ps(s + 8 * u, p);
        sum = _mm256_add_ps(sum, p);
    }
    return avx2_hsum_ps(sum);
}

/* acc = acc * corr + Σ_{j in [j0, j1)} p_j v_j, 32 floats at a time. */
static void accumulate(const th_attn_chunk *a, float *acc, const float *p, int32_t j0, int32_t j1, float corr) {
    const __m256 vc = _mm256_set1_ps(corr);
    for (int32_t o = 0; o < a->dv_stride; o += 32) {
        __m256 r[4];
        #pragma GCC unroll 4
        for (int u = 0; u < 4; u++) r[u] = _mm256_mul_ps(_mm256_loadu_ps(acc + o + 8 * u), vc);
        for (int32_t j = j0; j < j1; j++) {
            __m256 pj = _mm256_set1_ps(p[j]);
            const float *v = a->v + (size_t)j * (size_t)a->dv_stride + o;
            #pragma GCC unroll 4
            for (int u = 0; u < 4; u++) r[u] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * u), r[u]);
        }
        #pragma GCC unroll 4
        for (int u = 0; u < 4; u++) _mm256_storeu_ps(acc + o + 8 * u, r[u]);
    }
}

void th_avx2_attn_chunk(const th_attn_chunk *a) {
    float s[TH_ATTN_TK];
    for (int32_t r = 0; r < a->m; r++) {
        int32_t j0 = a->j0[r], j1 = a->j1[r];
        if (j0 >= j1) continue;
        float cmax = scores(a, a->q + (size_t)r * (size_t)a->d, j0, j1, s);
        float mx = fmaxf(a->mx[r], cmax), corr = a->mx[r] == -INFINITY ? 0.0f : expf(a->mx[r] - mx);
        a->sum[r] = a->sum[r] * corr + weights(s, mx);
        a->mx[r] = mx;
        accumulate(a, a->acc + (size_t)r * (size_t)a->dv_stride, s, j0, j1, corr);
    }
}

void th_avx2_dequant_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) dst[i] = avx2_f16(x[i]);
}
