/* ref_kquant_encode.c — reference weight encoders that reproduce llama-quantize's
 * bytes (no importance matrix): the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, the
 * code-book formats IQ4_XS and IQ4_NL (with llama.cpp's scale search), and Q8_0
 * as weights are written (round half away from zero).
 *
 * Bit-exactness depends on doing the same float operations in the same order as
 * GGML's reference C code: every sum is accumulated in float, left to right, the
 * products are grouped as GGML groups them ((w*x)*l, not w*(x*l)), rounding uses
 * the 1.5*2^23 trick (ties to even, th_nearest_int) and fp16 conversion rounds
 * to nearest even. This file is compiled without -mfma and in ISO C mode, so the
 * compiler does not contract a*b+c into a fused multiply-add.
 */
#include "quant/ref_encode.h"
#include "quant/ref_internal.h"
#include <math.h>

/* Blocks whose largest magnitude is below this are encoded as all zero (GGML's GROUP_MAX_EPS). */
#define ZERO_GROUP_EPS 1e-15f

/* ------------------------------------------------------------ scale searches */

/* Symmetric fit of x to integers in [-nmax, nmax-1] weighted by qw (NULL: by x^2):
 * start at the scale that maps the extreme element to -nmax, least-squares refit,
 * then try 18 nearby start scales and keep the best (GGML's make_qx_quants,
 * rmse_type 1). L receives the codes offset by nmax; returns the scale. */
float th_kq_fit_symmetric(int n, int nmax, const float *x, const float *qw, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < ZERO_GROUP_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = TH_MAX(-nmax, TH_MIN(nmax - 1, th_nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = TH_MAX(-nmax, TH_MIN(nmax - 1, th_nearest_int(iscale * x[i])));
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = TH_MAX(-nmax, TH_MIN(nmax - 1, th_nearest_int(iscale * x[i])));
                L[i] = (int8_t)(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric fit for Q3_K (GGML's make_q3_quants with do_rmse): round at the
 * extreme-to--nmax scale, then up to 5 passes of coordinate descent, each code
 * moved to its best value given the others when that lowers the x^2-weighted
 * error. L receives codes offset by nmax; returns the least-squares scale. */
static float fit_symmetric_descent(int n, int nmax, const float *x, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < ZERO_GROUP_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = TH_MAX(-nmax, TH_MIN(nmax - 1, th_nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0.0f) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = TH_MAX(-nmax, TH_MIN(nmax - 1, th_nearest_int(x[i] * sl2 / slx)));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric fit x ~ scale*L + min with L in [0, nmax], min <= 0 (GGML's
 * make_qkx2_quants): start from the range, then try nstep+1 scales
 * (rmin + rdelta*is + nmax)/range, each with a weighted least-squares
 * scale and min, keeping the one of lowest weighted error (squared, or absolute
 * when use_mad). Returns the scale; *neg_min receives -min (>= 0). */
float th_kq_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                          uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = th_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)TH_MAX(0, TH_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = TH_MAX(0, TH_MIN(nmax, th_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) {
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                err += w[i] * diff;
            }
            if (err < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Pack 256 2-bit codes as Q2_K/Q3_K do: byte l of each 32-byte group holds
 * elements l, l+32, l+64, l+96 of the 128-element half. */
void th_kq_pack_2bit_planes(const int8_t *L, uint8_t *qs) {
    for (int j = 0; j < TH_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* ------------------------------------------------------------ Q2_K */

void th_ref_q_q2_K(const float *x, void *dst, int64_t n) {
    th_block_q2_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        uint8_t L[TH_QK_K], Laux[16];
        float w[16], mins[16], scales[16], max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = th_kq_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0.0f) {
            float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)th_nearest_int(iscale * scales[j]);
            y[i].d = th_f32_to_f16(max_scale / 15.0f);
        } else {
            for (int j = 0; j < 16; j++) y[i].scales[j] = 0;
            y[i].d = th_f32_to_f16(0.0f);
        }
        if (max_min > 0.0f) {
            float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++) y[i].scales[j] |= (uint8_t)(th_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = th_f32_to_f16(max_min / 15.0f);
        } else {
            y[i].dmin = th_f32_to_f16(0.0f);
        }
        /* re-round every element with the stored (fp16, 4-bit) scale and min */
        for (int j = 0; j < 16; j++) {
            float d = th_f16_to_f32(y[i].d) * (y[i].scales[j] & 0x0f);
            if (d == 0.0f) continue;
            float dm = th_f16_to_f32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int k = 0; k < 16; k++) {
                int l = th_nearest_int((x[16 * j + k] + dm) / d);
                L[16 * j + k] = (uint8_t)TH_MAX(0, TH_MIN(3, l));
            }
        }
        th_kq_pack_2bit_planes((const int8_t *)L, y[i].qs);
    }
}

/* ------------------------------------------------------------ Q3_K */

/* Store signed 6-bit scale code l (0..63 after the +32 offset) of sub-block j. */
void th_kq_q3k_put_scale(uint8_t *sc, int j, int l) {
    if (j < 8) sc[j] = (uint8_t)(l & 0x0f);
    else sc[j - 8] |= (uint8_t)((l & 0x0f) << 4);
    sc[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
}

void th_ref_q_q3_K(const float *x, void *dst, int64_t n) {
    th_block_q3_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        int8_t L[TH_QK_K];
        float scales[16], max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_symmetric_descent(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale != 0.0f) {
            float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                int8_t l = (int8_t)th_nearest_int(iscale * scales[j]);
                th_kq_q3k_put_scale(y[i].scales, j, TH_MAX(-32, TH_MIN(31, l)) + 32);
            }
            y[i].d = th_f32_to_f16(1 / iscale);
        } else {
            y[i].d = th_f32_to_f16(0.0f);
        }
        th_kq_q3k_finish(&y[i], x, L);
    }
}

void th_kq_q3k_finish(th_block_q3_K *y, const float *x, int8_t L[TH_QK_K]) {
    int8_t sc[16];
    th_q3k_scales(y->scales, sc);
    for (int j = 0; j < 16; j++) {
        float d = th_f16_to_f32(y->d) * sc[j];
        if (d == 0.0f) continue;
        for (int k = 0; k < 16; k++) {
            int l = th_nearest_int(x[16 * j + k] / d);
            L[16 * j + k] = (int8_t)(TH_MAX(-4, TH_MIN(3, l)) + 4);
        }
    }
    /* high bit of element j goes to bit j/32 of hmask[j%32] */
    memset(y->hmask, 0, TH_QK_K / 8);
    for (int j = 0; j < TH_QK_K; j++) {
        if (L[j] > 3) {
            y->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            L[j] = (int8_t)(L[j] - 4);
        }
    }
    th_kq_pack_2bit_planes(L, y->qs);
}

/* ------------------------------------------------------------ Q4_K / Q5_K */

/* The eight (scale, min) pairs of a Q4_K/Q5_K super-block: fit each 32-element
 * sub-block with weights sqrt(mean x^2) + |x|, quantize scales and mins to 6
 * bits against their maxima, store d, dmin and the packed 12-byte scales, then
 * re-round every element (codes 0..nmax) with the stored values into L. */
static void kquant_scale_min_block(const float *x, int nmax, float rmin, int nstep,
                                   uint16_t *d_out, uint16_t *dmin_out, uint8_t sc12[12], uint8_t L[TH_QK_K]) {
    uint8_t Laux[32];
    float w[32], mins[8], scales[8], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = th_kq_fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)th_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)th_nearest_int(inv_min * mins[j]);
        th_kq_k4_put_scale_min(sc12, j, TH_MIN(63, ls), TH_MIN(63, lm));
    }
    *d_out = th_f32_to_f16(max_scale / 63.0f);
    *dmin_out = th_f32_to_f16(max_min / 63.0f);
    th_kq_k4_reround(x, nmax, *d_out, *dmin_out, sc12, L);
}

void th_kq_k4_put_scale_min(uint8_t sc12[12], int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        sc12[j] = ls;
        sc12[j + 4] = lm;
    } else {
        sc12[j + 4] = (uint8_t)((ls & 0x0f) | ((lm & 0x0f) << 4));
        sc12[j - 4] |= (uint8_t)((ls >> 4) << 6);
        sc12[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

void th_kq_k4_reround(const float *x, int nmax, uint16_t d16, uint16_t dmin16, const uint8_t sc12[12], uint8_t L[TH_QK_K]) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        th_k4_scale_min(j, sc12, &sc, &m);
        float d = th_f16_to_f32(d16) * sc;
        if (d == 0.0f) continue;
        float dm = th_f16_to_f32(dmin16) * m;
        for (int k = 0; k < 32; k++) {
            int l = th_nearest_int((x[32 * j + k] + dm) / d);
            L[32 * j + k] = (uint8_t)TH_MAX(0, TH_MIN(nmax, l));
        }
    }
}

void th_ref_q_q4_K(const float *x, void *dst, int64_t n) {
    th_block_q4_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        uint8_t L[TH_QK_K];
        memset(y[i].scales, 0, 12);
        kquant_scale_min_block(x, 15, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        th_kq_q4k_pack(L, y[i].qs);
    }
}

/* 64 elements per 32 bytes: low nibbles the first 32, high nibbles the next */
void th_kq_q4k_pack(const uint8_t L[TH_QK_K], uint8_t qs[TH_QK_K / 2]) {
    for (int j = 0; j < TH_QK_K; j += 64)
        for (int l = 0; l < 32; l++) qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

void th_ref_q_q5_K(const float *x, void *dst, int64_t n) {
    th_block_q5_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        uint8_t L[TH_QK_K];
        memset(y[i].scales, 0, 12);
        kquant_scale_min_block(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        th_kq_q5k_pack(L, &y[i]);
    }
}

/* As Q4_K for the low nibbles; bit 4 of element 64*g + j (+32) goes to bit 2g (2g+1) of qh[j]. */
void th_kq_q5k_pack(const uint8_t L[TH_QK_K], th_block_q5_K *y) {
    memset(y->qh, 0, TH_QK_K / 8);
    for (int g = 0; g < 4; g++) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[64 * g + j], l2 = L[64 * g + j + 32];
            if (l1 > 15) { l1 -= 16; y->qh[j] |= (uint8_t)(1u << (2 * g)); }
            if (l2 > 15) { l2 -= 16; y->qh[j] |= (uint8_t)(2u << (2 * g)); }
            y->qs[32 * g + j] = (uint8_t)(l1 | (l2 << 4));
        }
    }
}

/* ------------------------------------------------------------ Q6_K */

void th_ref_q_q6_K(const float *x, void *dst, int64_t n) { th_ref_q_q6_K_w(x, dst, n, NULL); }

/* qw: the importance of each of the n values (NULL: none). With it llama.cpp fits
 * each 16-element group weighted by qw itself (not qw * sqrt(sigma2 + x^2)). */
void th_ref_q_q6_K_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_q6_K *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        int8_t L[TH_QK_K];
        float scales[16], max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int ib = 0; ib < 16; ib++) {
            const float *w = qw ? qw + TH_QK_K * i + 16 * ib : NULL;
            scales[ib] = th_kq_fit_symmetric(16, 32, x + 16 * ib, w, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) { max_abs_scale = fabsf(scales[ib]); max_scale = scales[ib]; }
        }
        if (max_abs_scale < ZERO_GROUP_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.0f / max_scale;
        y[i].d = th_f32_to_f16(1 / iscale);
        for (int ib = 0; ib < 16; ib++) y[i].scales[ib] = (int8_t)TH_MIN(127, th_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < 16; j++) {
            float d = th_f16_to_f32(y[i].d) * y[i].scales[j];
            if (d == 0.0f) continue;
            for (int k = 0; k < 16; k++) {
                int l = th_nearest_int(x[16 * j + k] / d);
                L[16 * j + k] = (int8_t)(TH_MAX(-32, TH_MIN(31, l)) + 32);
            }
        }
        /* per 128 elements: 64 bytes of low nibbles (l, l+64 | l+32, l+96), 32 bytes of 2-bit highs */
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0x0f) | ((Lh[l + 64] & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0x0f) | ((Lh[l + 96] & 0x0f) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

/* ------------------------------------------------------------ IQ4_NL / IQ4_XS */

/* Index of the code-book value nearest to v; exactly half-way goes to the larger
 * value. Compares 2v with the sum of neighbours, which is exact. A NaN (only from
 * an all-zero importance) gives 15, as GGML's best_index_int8 does. */
static int iq4_nearest(float v) {
    if (v != v) return 15;
    float v2 = v + v;
    int idx = 0;
    for (int step = 8; step > 0; step >>= 1) {
        int j = idx + step;
        if (v2 >= (float)(th_iq4nl_values[j - 1] + th_iq4nl_values[j])) idx = j;
    }
    return idx;
}

/* The fit weights of one 32-element sub-block: x^2 without an importance, else
 * qw * sqrt(sigma2 + x^2) with sigma2 = 2 * mean x^2 over the super-block. */
static void iq4_weights(const float *x, const float *qw, float sigma2, float w[32]) {
    for (int j = 0; j < 32; j++) w[j] = qw ? qw[j] * sqrtf(sigma2 + x[j] * x[j]) : x[j] * x[j];
}

static float iq4_sigma2(const float *x, int n) {
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += x[j] * x[j];
    return s * (2.0f / n);
}

/* Best scale of one 32-element sub-block with weights w: start at the scale that
 * maps the extreme element to the code book's end, least-squares refit, then try
 * 15 start scales (itry - 127)/max, itry in -7..7, keeping the best weighted fit.
 * Returns 0 for an all-zero block (NaN if every weight is 0, as in GGML). */
static float iq4_block_scale(const float *x, const float *w) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    if (amax < ZERO_GROUP_EPS) return 0.0f;
    const int v0 = th_iq4nl_values[0];
    float d = -max / v0, id = 1 / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        float q = th_iq4nl_values[iq4_nearest(id * x[j])];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; itry++) {
        id = (itry + v0) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < 32; j++) {
            float q = th_iq4nl_values[iq4_nearest(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* Codes of 32 elements at inverse scale id, packed as IQ4_NL nibbles (j | j+16). */
static void iq4_pack(const float *x, float id, uint8_t qs[16]) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(iq4_nearest(id * x[j]) | (iq4_nearest(id * x[j + 16]) << 4));
}

void th_ref_q_iq4_nl_search(const float *x, void *dst, int64_t n) { th_ref_q_iq4_nl_w(x, dst, n, NULL); }

/* qw: the importance of each of the n values (NULL: none); sigma2 is per 32 values. */
void th_ref_q_iq4_nl_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_iq4_nl *y = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, x += TH_QK) {
        float w[32];
        iq4_weights(x, qw ? qw + TH_QK * i : NULL, qw ? iq4_sigma2(x, TH_QK) : 0.0f, w);
        float d = iq4_block_scale(x, w);
        y[i].d = th_f32_to_f16(d);
        iq4_pack(x, d != 0.0f ? 1 / d : 0.0f, y[i].qs);
    }
}

void th_ref_q_iq4_xs(const float *x, void *dst, int64_t n) { th_ref_q_iq4_xs_w(x, dst, n, NULL); }

/* qw as for IQ4_NL; sigma2 is per 256 values. */
void th_ref_q_iq4_xs_w(const float *x, void *dst, int64_t n, const float *qw) {
    th_block_iq4_xs *y = dst;
    for (int64_t i = 0; i < n / TH_QK_K; i++, x += TH_QK_K) {
        float scales[8], max_scale = 0.0f, amax_scale = 0.0f;
        float sigma2 = qw ? iq4_sigma2(x, TH_QK_K) : 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            float w[32];
            iq4_weights(x + 32 * ib, qw ? qw + TH_QK_K * i + 32 * ib : NULL, sigma2, w);
            scales[ib] = iq4_block_scale(x + 32 * ib, w);
            if (fabsf(scales[ib]) > amax_scale) { amax_scale = fabsf(scales[ib]); max_scale = scales[ib]; }
        }
        /* super-block scale d, 6-bit signed sub-block multipliers l (stored l+32) */
        float d = -max_scale / 32;
        y[i].d = th_f32_to_f16(d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        float id = d != 0.0f ? 1 / d : 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            int l = TH_MAX(-32, TH_MIN(31, th_nearest_int(id * scales[ib])));
            float dl = d * l, idl = dl != 0.0f ? 1 / dl : 0.0f;
            iq4_pack(x + 32 * ib, idl, y[i].qs + 16 * ib);
            l += 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((l & 0x0f) << (4 * (ib % 2)));
            y[i].scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
    }
}

/* ------------------------------------------------------------ Q8_0 weights */

/* llama.cpp's quantize_row_q8_0_ref: d = amax/127, codes round(x * (1/d)) with
 * halves away from zero (the activation encoder rounds halves to even and uses
 * 127/amax, which can differ in the last bit). */
void th_ref_q_q8_0_weights(const float *x, void *dst, int64_t n) {
    th_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / TH_QK; i++, x += TH_QK) {
        float amax = 0.0f;
        for (int j = 0; j < TH_QK; j++) amax = TH_MAX(amax, fabsf(x[j]));
        float d = amax / 127, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = th_f32_to_f16(d);
        for (int j = 0; j < TH_QK; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}
