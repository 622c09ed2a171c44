/* attn.c — the generic (plain C, f32) form of the attention chunk kernel
 * (th_attn_chunk in kernels.h: scores, online softmax and the weighted sum of V over one
 * chunk of keys) and th_attn_finish_row, which turns a row's online-softmax state into
 * its output (shared by every level). The SIMD form is avx2/attn.c (the avx512 level
 * keeps it). */
#include "cpu/kernels.h"
#include <math.h>

void th_attn_chunk_generic(const th_attn_chunk *a) {
    float s[TH_ATTN_TK];
    for (int32_t r = 0; r < a->m; r++) {
        int32_t j0 = a->j0[r], j1 = a->j1[r];
        if (j0 >= j1) continue;
        const float *q = a->q + (size_t)r * (size_t)a->d;
        float cmax = -INFINITY;
        for (int32_t j = j0; j < j1; j++) {
            float dot = 0.0f;
            for (int32_t c = 0; c < a->d; c++) dot += q[c] * a->kt[(size_t)c * TH_ATTN_TK + (size_t)j];
            s[j] = dot * a->scale;
            if (a->softcap > 0) s[j] = a->softcap * tanhf(s[j] / a->softcap);
            cmax = fmaxf(cmax, s[j]);
        }
        float mx = fmaxf(a->mx[r], cmax), corr = expf(a->mx[r] - mx), sum = a->sum[r] * corr;
        float *acc = a->acc + (size_t)r * (size_t)a->dv_stride;
        for (int32_t c = 0; c < a->dv; c++) acc[c] *= corr;
        for (int32_t j = j0; j < j1; j++) {
            float p = expf(s[j] - mx);
            sum += p;
            const float *v = a->v + (size_t)j * (size_t)a->dv_stride;
            for (int32_t c = 0; c < a->dv; c++) acc[c] += p * v[c];
        }
        a->mx[r] = mx;
        a->sum[r] = sum;
    }
}

void th_attn_finish_row(float *out, const float *acc, int32_t dv, float mx, float sum, const float *sink) {
    float top = sink ? fmaxf(mx, *sink) : mx, e = expf(mx - top);
    float den = sum * e + (sink ? expf(*sink - top) : 0.0f);
    float f = den > 0 ? e / den : 0.0f;
    for (int32_t c = 0; c < dv; c++) out[c] = acc[c] * f;
}
