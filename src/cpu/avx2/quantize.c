/* quantize.c (avx2) — the activation quantizers of the avx2 level: f32 to Q8_0, Q8_1,
 * Q8_K, F16 and BF16. They follow the reference rounding exactly (x * (127/amax) for
 * Q8_0/Q8_1, x * (-127/max) for Q8_K, both rounded half to even by vcvtps2dq in the
 * default MXCSR mode; F16 by vcvtps2ph, BF16 to nearest even), so the bytes equal the
 * reference's. */
#include "cpu/avx2/util.h"

static inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 4 x 8 int32 -> 32 int8 in element order. */
static inline __m256i pack_i32x32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i r = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element block to int8 with scale d = amax/127 (as f16 in *d_out); values are
 * x * (127/amax) rounded half to even. Returns d in f32; *sum = the sum of the qs. */
static inline float q8_block(const float *x, int8_t *qs, uint16_t *d_out, int *sum) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(m, abs_ps(v[k]));
    }
    const float amax = hmax_ps(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    *d_out = th_f32_to_f16(d);
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], _mm256_set1_ps(id)));
    __m256i packed = pack_i32x32(q[0], q[1], q[2], q[3]);
    _mm256_storeu_si256((__m256i *)qs, packed);
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    *sum = avx2_hsum_epi32(s);
    return d;
}

void th_avx2_quantize_q8_0(const float *x, void *vy, int64_t n) {
    th_block_q8_0 *y = vy;
    int sum;
    for (int64_t i = 0; i < n / TH_QK; i++) q8_block(x + i * TH_QK, y[i].qs, &y[i].d, &sum);
}

void th_avx2_quantize_q8_1(const float *x, void *vy, int64_t n) {
    th_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / TH_QK; i++) {
        int sum;
        float d = q8_block(x + i * TH_QK, y[i].qs, &y[i].d, &sum);
        y[i].s = th_f32_to_f16(d * (float)sum);
    }
}

/* Q8_K: scale -127/max where max is the first element of largest magnitude (sign kept);
 * values rounded half to even (the default MXCSR mode of vcvtps2dq), capped at 127. */
void th_avx2_quantize_q8_K(const float *x, void *vy, int64_t n) {
    th_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < TH_QK_K; k += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + k)));
        const float amax = hmax_ps(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0;
        const __m256 vamax = _mm256_set1_ps(amax);
        for (int k = 0; k < TH_QK_K; k += 8) {
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + k)), vamax, _CMP_EQ_OQ));
            if (hit) { max = x[k + __builtin_ctz((unsigned)hit)]; break; }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i cap = _mm256_set1_epi32(127);
        for (int k = 0; k < TH_QK_K; k += 32) {
            __m256i q[4];
            for (int j = 0; j < 4; j++)
                q[j] = _mm256_min_epi32(cap, _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + k + 8 * j))));
            __m256i packed = pack_i32x32(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(y[i].qs + k), packed);
            /* two 16-element sums per 32 */
            __m256i s01 = _mm256_add_epi32(q[0], q[1]), s23 = _mm256_add_epi32(q[2], q[3]);
            y[i].bsums[k / 16] = (int16_t)avx2_hsum_epi32(s01);
            y[i].bsums[k / 16 + 1] = (int16_t)avx2_hsum_epi32(s23);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* f32 -> f16, round to nearest even (F16C), same bits as th_f32_to_f16 except NaN payloads. */
void th_avx2_quantize_f16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = th_f32_to_f16(x[i]);
}

/* f32 -> bf16, round to nearest even; NaN stays a quiet NaN (as th_f32_to_bf16). */
void th_avx2_quantize_bf16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        r = _mm256_srli_epi32(r, 16);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);
        __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
        r = _mm256_blendv_epi8(r, qnan, nan);
        __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(y + i), packed);
    }
    for (; i < n; i++) y[i] = th_f32_to_bf16(x[i]);
}
