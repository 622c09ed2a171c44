/* kernels_avx2.c — the AVX2 level of the kernel table: the 8-bit activation
 * quantizers (Q8_0, Q8_1, Q8_K) and th_kernels_fill_avx2, which puts every AVX2
 * kernel (dot_*_avx2.c, gemm_avx2.c) in the table. Compiled with -mavx2 -mfma -mf16c.
 * The quantizers follow the reference rounding exactly (x * (127/amax) for Q8_0/Q8_1,
 * x * (-127/max) for Q8_K, both rounded half to even by vcvtps2dq in the default
 * MXCSR mode), so the bytes equal the reference's. */
#include "cpu/avx2_util.h"

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

void th_kernels_fill_avx2(th_kernels *k) {
    k->quantize[TH_Q8_0] = th_avx2_quantize_q8_0;
    k->quantize[TH_Q8_1] = th_avx2_quantize_q8_1;
    k->quantize[TH_Q8_K] = th_avx2_quantize_q8_K;
    k->quantize[TH_F16] = th_avx2_quantize_f16;
    k->quantize[TH_BF16] = th_avx2_quantize_bf16;

    k->vec_dot[TH_F32] = th_avx2_dot_f32;
    k->vec_dot[TH_F16] = th_avx2_dot_f16;
    k->vec_dot[TH_BF16] = th_avx2_dot_bf16;
    k->vec_dot[TH_Q4_0] = th_avx2_dot_q4_0;
    k->vec_dot[TH_Q4_1] = th_avx2_dot_q4_1;
    k->vec_dot[TH_Q5_0] = th_avx2_dot_q5_0;
    k->vec_dot[TH_Q5_1] = th_avx2_dot_q5_1;
    k->vec_dot[TH_Q8_0] = th_avx2_dot_q8_0;
    k->vec_dot[TH_IQ4_NL] = th_avx2_dot_iq4_nl;
    k->vec_dot[TH_MXFP4] = th_avx2_dot_mxfp4;
    k->vec_dot[TH_Q2_K] = th_avx2_dot_q2_K;
    k->vec_dot[TH_Q3_K] = th_avx2_dot_q3_K;
    k->vec_dot[TH_Q4_K] = th_avx2_dot_q4_K;
    k->vec_dot[TH_Q5_K] = th_avx2_dot_q5_K;
    k->vec_dot[TH_Q6_K] = th_avx2_dot_q6_K;
    k->vec_dot[TH_IQ4_XS] = th_avx2_dot_iq4_xs;

    k->attn_chunk = th_avx2_attn_chunk;
    k->swiglu = th_avx2_swiglu;
    k->dequant[TH_F16] = th_avx2_dequant_f16;

    th_avx2_fill_gemm(k);
    th_avx2_fill_gemm_packed(k);
}
