/* ops.c — plain-C element-wise and row ops (see ops.h). */
#include "cpu/ops.h"
#include "cpu/dn_chunk.h"
#include <math.h>

void th_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);   /* float product, double sum: as ggml */
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    if (w)
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

static float yarn_ramp(float lo, float hi, int32_t i) {
    float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

static float corr_dim(int32_t n_rot, int32_t n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void th_rope_corr_dims(int32_t n_rot, int32_t n_ctx_orig, float base, float beta_fast, float beta_slow,
                       float *lo, float *hi) {
    float start = floorf(corr_dim(n_rot, n_ctx_orig, beta_fast, base));
    float end = ceilf(corr_dim(n_rot, n_ctx_orig, beta_slow, base));
    *lo = fmaxf(0.0f, start);
    *hi = fminf((float)(n_rot - 1), end);
}

/* cs[2(i - i0)], cs[2(i - i0) + 1] = cos, sin of pair i's angle (times mscale), i in [i0, i1). */
static void rope_table_range(float *cs, int32_t pos, const th_rope_params *r, int32_t i0, int32_t i1) {
    const float theta_scale = powf(r->base, -2.0f / (float)r->n_rot);
    float theta_base = (float)pos, mscale = r->attn_factor;
    if (r->ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
    for (int32_t i = 0; i < i1; i++) {   /* theta_base advances from pair 0, as ggml does */
        if (i >= i0) {
            float ff = r->freq_factors ? r->freq_factors[i] : 1.0f;
            float extrap = theta_base / ff, theta = r->freq_scale * extrap;
            if (r->ext_factor != 0.0f) {
                float mix = yarn_ramp(r->corr_lo, r->corr_hi, i) * r->ext_factor;
                theta = theta * (1.0f - mix) + extrap * mix;
            }
            cs[2 * (i - i0)] = cosf(theta) * mscale;
            cs[2 * (i - i0) + 1] = sinf(theta) * mscale;
        }
        theta_base *= theta_scale;
    }
}

static void rope_apply_range(float *x, const float *cs, const th_rope_params *r, int32_t i0, int32_t i1) {
    int32_t half = r->n_rot / 2;
    for (int32_t i = i0; i < i1; i++) {
        float c = cs[2 * (i - i0)], s = cs[2 * (i - i0) + 1];
        int32_t a = r->type == 1 ? i : 2 * i;
        int32_t b = r->type == 1 ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

bool th_op_rope_table(float *cs, int32_t pos, const th_rope_params *r) {
    if (r->n_rot / 2 > TH_ROPE_TABLE_MAX) return false;
    rope_table_range(cs, pos, r, 0, r->n_rot / 2);
    return true;
}

void th_op_rope_apply(float *x, const float *cs, const th_rope_params *r) {
    rope_apply_range(x, cs, r, 0, r->n_rot / 2);
}

void th_op_rope_ext(float *x, int32_t pos, const th_rope_params *r) {
    float cs[2 * TH_ROPE_TABLE_MAX];
    for (int32_t i0 = 0; i0 < r->n_rot / 2; i0 += TH_ROPE_TABLE_MAX) {
        int32_t i1 = r->n_rot / 2 - i0 < TH_ROPE_TABLE_MAX ? r->n_rot / 2 : i0 + TH_ROPE_TABLE_MAX;
        rope_table_range(cs, pos, r, i0, i1);
        rope_apply_range(x, cs, r, i0, i1);
    }
}

void th_op_rope(float *x, int32_t n_rot, int32_t pos, float base, float freq_scale,
                const float *freq_factors, int rope_type) {
    th_rope_params r = { .n_rot = n_rot, .type = rope_type, .base = base, .freq_scale = freq_scale,
                         .attn_factor = 1.0f, .freq_factors = freq_factors };
    th_op_rope_ext(x, pos, &r);
}

void th_op_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void th_op_softmax_sink(float *x, int64_t n, float sink) {
    float mx = sink;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = expf(sink - mx);
    for (int64_t i = 0; i < n; i++) {
        float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void th_op_swiglu(float *a, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        a[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void th_op_geglu(float *a, const float *gate, const float *up, int64_t n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        a[i] = 0.5f * g * (1.0f + tanhf(c * g * (1.0f + 0.044715f * g * g))) * up[i];
    }
}

void th_op_swiglu_oai(float *a, const float *gate, const float *up, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; i++) {
        float g = fminf(gate[i], limit), u = fmaxf(fminf(up[i], limit), -limit);
        a[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

void th_op_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void th_op_scale(float *y, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

void th_op_softcap(float *x, float cap, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

void th_op_sigmoid(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
}

void th_op_dn_step(int32_t dk, float *S, const float *q, const float *k, const float *v, float beta, float decay,
                   float scale, float *out) {
    float vp[1024], ov[1024], nw[1024], kq = 0.0f;
    for (int32_t i = 0; i < dk; i++) kq += k[i] * q[i];
    for (int32_t j = 0; j < dk; j++) vp[j] = ov[j] = 0.0f;
    for (int32_t i = 0; i < dk; i++) {
        const float *Si = S + (int64_t)i * dk;
        for (int32_t j = 0; j < dk; j++) { vp[j] += Si[j] * k[i]; ov[j] += Si[j] * q[i]; }
    }
    for (int32_t j = 0; j < dk; j++) {
        nw[j] = v[j] * beta - vp[j] * beta * decay;
        out[j] = ov[j] * decay * scale + nw[j] * kq * scale;
    }
    for (int32_t i = 0; i < dk; i++) {
        float *Si = S + (int64_t)i * dk;
        for (int32_t j = 0; j < dk; j++) {
            float x = decay * Si[j] + nw[j] * k[i];
            Si[j] = x < -1e6f ? -1e6f : x > 1e6f ? 1e6f : x;
        }
    }
}

/* The chunked delta rule (cpu/dn_chunk.h), compiled at this file's level. */
void th_op_dn_chunk(int32_t dk, int32_t L, float *S, const float *q, const float *k, const float *v, int64_t xs,
                    const float *beta, const float *lg, int64_t gs, float scale, float *out, int64_t os, float *work) {
    th_dn_chunk_body(dk, L, S, q, k, v, xs, beta, lg, gs, scale, out, os, work);
}
