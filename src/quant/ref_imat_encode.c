/* ref_imat_encode.c — the weight encoders used with an importance matrix
 * (llama-quantize --imatrix): Q2_K, Q3_K, Q4_K, Q5_K and Q4_0, Q4_1, Q5_0, Q5_1,
 * each reproducing the bytes of llama.cpp's weighted path (quantize_row_*_impl in
 * ggml-quants.c), and th_quantize_weights_imat, which picks the weighted encoder
 * of a type (Q6_K, IQ4_NL and IQ4_XS are in ref_kquant_encode.c, beside their
 * unweighted forms).
 *
 * The importance qw[i] of a value enters as the fit weight qw[i] * sqrt(sigma2 +
 * x[i]^2), sigma2 a mean of x^2: over the whole row for the 32-blocks (Q4_0 ..
 * Q5_1), over the 256-element super-block for the K-quants (times 2 for Q3_K,
 * Q4_K, Q5_K). The K-quants then fit their sub-block scales and mins to 4/6-bit
 * codes with a weighted search of their own (fit_positive) instead of scaling
 * them against the largest one. Same float-order rules as ref_kquant_encode.c:
 * sums left to right in float, GGML's grouping of products, no contraction.
 */
#include "quant/ref_encode.h"
#include "quant/ref_internal.h"
#include <math.h>

/* Non-negative x (sub-block scales or mins) to codes 0..nmax with weights w
 * (GGML's make_qp_quants): the scale mapping the largest value to nmax, then 8
 * nearby ones (nmax + 0.1*is, is = -4..4), keeping the least weighted squared
 * error; then up to 5 passes of coordinate descent on the codes, each kept when it
 * raises sumlx^2/suml2. Returns the least-squares scale sumlx/suml2. The codes
 * are stored as GGML stores them (uint8, so a negative code wraps). */
static float fit_positive(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0.0f;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max == 0.0f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)th_nearest_int(iscale * x[i]);
    float scale = 1 / iscale, best_mse = 0.0f;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        float iscale_is = (0.1f * is + nmax) / max, scale_is = 1 / iscale_is, mse = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = TH_MIN(nmax, th_nearest_int(iscale_is * x[i]));
            float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = TH_MIN(nmax, th_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0.0f && sl2 > 0.0f) {
                int new_l = TH_MIN(nmax, th_nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w[i] * x[i] * new_l;
                    sl2 += w[i] * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return sumlx / suml2;
}

static float sum_squares(const float *x, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* Fit weights of n values: qw * sqrt(sigma2 + x^2); returns their float sum. */
static float imat_weights(const float *x, const float *qw, float sigma2, int n, float *w) {
    float sum = 0.0f;
    for (int l = 0; l < n; l++) w[l] = qw[l] * sqrtf(sigma2 + x[l] * x[l]);
    for (int l = 0; l < n; l++) sum += w[l];
    return sum;
}

/* ------------------------------------------------------------ K-quants */

void th_ref_q_q2_K_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q2_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        uint8_t L[TH_QK_K], Laux[16], Ls[16], Lm[16];
        float w[16], sw[16], mins[16], scales[16];
        float sigma2 = sum_squares(x, TH_QK_K) / TH_QK_K;
        for (int j = 0; j < 16; j++) {
            sw[j] = imat_weights(x + 16 * j, qw + TH_QK_K * i + 16 * j, sigma2, 16, w);
            scales[j] = th_kq_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        float dm = fit_positive(16, 15, scales, Ls, sw);
        float mm = fit_positive(16, 15, mins, Lm, sw);
        y[i].d = th_f32_to_f16(dm);
        y[i].dmin = th_f32_to_f16(mm);
        dm = th_f16_to_f32(y[i].d);
        mm = th_f16_to_f32(y[i].dmin);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        for (int j = 0; j < 16; j++) {
            float d = dm * (y[i].scales[j] & 0x0f);
            if (d == 0.0f) continue;
            float m = mm * (y[i].scales[j] >> 4);
            for (int k = 0; k < 16; k++) {
                int l = th_nearest_int((x[16 * j + k] + m) / d);
                L[16 * j + k] = (uint8_t)TH_MAX(0, TH_MIN(3, l));
            }
        }
        th_kq_pack_2bit_planes((const int8_t *)L, y[i].qs);
    }
}

void th_ref_q_q3_K_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q3_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        int8_t L[TH_QK_K], Ls[16];
        float w[16], sw[16], scales[16];
        float sigma2 = 2 * sum_squares(x, TH_QK_K) / TH_QK_K;
        for (int j = 0; j < 16; j++) {
            sw[j] = imat_weights(x + 16 * j, qw + TH_QK_K * i + 16 * j, sigma2, 16, w);
            scales[j] = th_kq_fit_symmetric(16, 4, x + 16 * j, w, L + 16 * j);
        }
        memset(y[i].scales, 0, 12);
        float d_block = th_kq_fit_symmetric(16, 32, scales, sw, Ls);   /* codes already +32 */
        for (int j = 0; j < 16; j++) th_kq_q3k_put_scale(y[i].scales, j, Ls[j]);
        y[i].d = th_f32_to_f16(d_block);
        th_kq_q3k_finish(&y[i], x, L);
    }
}

/* Q4_K (nmax 15) and Q5_K (nmax 31): 8 sub-blocks of 32 with a scale and a min each. */
static void k4_block_w(const float *x, const float *qw, int nmax, bool clamp63, uint16_t *d16, uint16_t *dmin16,
                       uint8_t sc12[12], uint8_t L[TH_QK_K]) {
    uint8_t Laux[32], Ls[8], Lm[8];
    float w[32], sw[8], mins[8], scales[8];
    float sigma2 = 2 * sum_squares(x, TH_QK_K) / TH_QK_K;
    for (int j = 0; j < 8; j++) {
        sw[j] = imat_weights(x + 32 * j, qw + 32 * j, sigma2, 32, w);
        scales[j] = th_kq_fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    float d_block = fit_positive(8, 63, scales, Ls, sw);
    float m_block = fit_positive(8, 63, mins, Lm, sw);
    memset(sc12, 0, 12);
    for (int j = 0; j < 8; j++)
        th_kq_k4_put_scale_min(sc12, j, clamp63 ? TH_MIN(63, Ls[j]) : Ls[j], clamp63 ? TH_MIN(63, Lm[j]) : Lm[j]);
    *d16 = th_f32_to_f16(d_block);
    *dmin16 = th_f32_to_f16(m_block);
    th_kq_k4_reround(x, nmax, *d16, *dmin16, sc12, L);
}

void th_ref_q_q4_K_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q4_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        uint8_t L[TH_QK_K];
        k4_block_w(x, qw + TH_QK_K * i, 15, false, &y[i].d, &y[i].dmin, y[i].scales, L);
        th_kq_q4k_pack(L, y[i].qs);
    }
}

void th_ref_q_q5_K_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q5_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        uint8_t L[TH_QK_K];
        k4_block_w(x, qw + TH_QK_K * i, 31, true, &y[i].d, &y[i].dmin, y[i].scales, L);
        th_kq_q5k_pack(L, &y[i]);
    }
}

/* ------------------------------------------------------------ 32-blocks */

/* sigma2 of the whole row (n values), as llama.cpp's Q4_0..Q5_1 paths take it. */
static float row_sigma2(const float *x, int64_t n) { return sum_squares(x, n) / (float)n; }

static void pack_q5_codes(const uint8_t *L, uint8_t qs[16], uint8_t qh_out[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0x0f) | ((L[j + 16] & 0x0f) << 4));
        qh |= (uint32_t)((L[j] & 0x10u) >> 4) << j;
        qh |= (uint32_t)((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    memcpy(qh_out, &qh, 4);
}

void th_ref_q_q4_0_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q4_0 *y = dst;
    float sigma2 = row_sigma2(x, n), w[TH_QK];
    for (int64_t ib = 0; ib < n / TH_QK; ib++) {
        const float *xb = x + TH_QK * ib;
        int8_t L[TH_QK];
        imat_weights(xb, qw + TH_QK * ib, sigma2, TH_QK, w);
        y[ib].d = th_f32_to_f16(th_kq_fit_symmetric(TH_QK, 8, xb, w, L));
        for (int j = 0; j < 16; j++) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void th_ref_q_q5_0_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q5_0 *y = dst;
    float sigma2 = row_sigma2(x, n), w[TH_QK];
    for (int64_t ib = 0; ib < n / TH_QK; ib++) {
        const float *xb = x + TH_QK * ib;
        int8_t L[TH_QK];
        imat_weights(xb, qw + TH_QK * ib, sigma2, TH_QK, w);
        y[ib].d = th_f32_to_f16(th_kq_fit_symmetric(TH_QK, 16, xb, w, L));
        pack_q5_codes((const uint8_t *)L, y[ib].qs, y[ib].qh);
    }
}

/* Q4_1 (nmax 15) and Q5_1 (nmax 31): scale and min per 32-block. */
static float scale_min_w(const float *xb, const float *w, int nmax, uint8_t *L, uint16_t *m16) {
    uint8_t Laux[TH_QK];
    float neg_min;
    float d = th_kq_fit_scale_min(TH_QK, nmax, xb, w, L, &neg_min, Laux, -0.9f, 0.05f, 36, false);
    *m16 = th_f32_to_f16(-neg_min);
    return d;
}

void th_ref_q_q4_1_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q4_1 *y = dst;
    float sigma2 = row_sigma2(x, n), w[TH_QK];
    for (int64_t ib = 0; ib < n / TH_QK; ib++) {
        const float *xb = x + TH_QK * ib;
        uint8_t L[TH_QK];
        imat_weights(xb, qw + TH_QK * ib, sigma2, TH_QK, w);
        y[ib].d = th_f32_to_f16(scale_min_w(xb, w, 15, L, &y[ib].m));
        for (int j = 0; j < 16; j++) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void th_ref_q_q5_1_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q5_1 *y = dst;
    float sigma2 = row_sigma2(x, n), w[TH_QK];
    for (int64_t ib = 0; ib < n / TH_QK; ib++) {
        const float *xb = x + TH_QK * ib;
        uint8_t L[TH_QK];
        imat_weights(xb, qw + TH_QK * ib, sigma2, TH_QK, w);
        y[ib].d = th_f32_to_f16(scale_min_w(xb, w, 31, L, &y[ib].m));
        pack_q5_codes(L, y[ib].qs, y[ib].qh);
    }
}

/* ------------------------------------------------------------ dispatch */

typedef void (*weighted_fn)(const float *src, void *dst, int64_t n, const float *qw);

static weighted_fn weighted_encoder(uint32_t type) {
    switch (type) {
    case TH_Q2_K: return th_ref_q_q2_K_w;
    case TH_Q3_K: return th_ref_q_q3_K_w;
    case TH_Q4_K: return th_ref_q_q4_K_w;
    case TH_Q5_K: return th_ref_q_q5_K_w;
    case TH_Q6_K: return th_ref_q_q6_K_w;
    case TH_IQ4_NL: return th_ref_q_iq4_nl_w;
    case TH_IQ4_XS: return th_ref_q_iq4_xs_w;
    case TH_Q4_0: return th_ref_q_q4_0_w;
    case TH_Q4_1: return th_ref_q_q4_1_w;
    case TH_Q5_0: return th_ref_q_q5_0_w;
    case TH_Q5_1: return th_ref_q_q5_1_w;
    default: return NULL;
    }
}

bool th_type_uses_imatrix(uint32_t type) { return weighted_encoder(type) != NULL; }

bool th_quantize_weights_imat(uint32_t type, const float *src, void *dst, int64_t n, const float *qw) {
    weighted_fn f = qw ? weighted_encoder(type) : NULL;
    if (!f) return th_quantize_weights(type, src, dst, n);
    const th_type_info *ti = th_type_info_get(type);
    if (n < 0 || n % ti->block != 0) return true;   /* callers validate shapes, as for th_quantize_weights */
    f(src, dst, n, qw);
    return true;
}
