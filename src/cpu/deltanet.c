/* deltanet.c — the CPU backend's hybrid-model ops (backend.h): the gated DeltaNet
 * mixer of a recurrent layer (recurrent), the sigmoid gate of a gated attention
 * output (att_gate) and the gated shared experts (shexp_gated). The arithmetic
 * follows ik_llama.cpp's graph (src/llama-delta-net.cpp, ggml's ssm_conv and the
 * fused delta-net kernel); the state lives in the context's th_rstate (rstate.h).
 *
 * Per token t of sequence s, recurrent layer slot r (Dk head width, Nk k heads,
 * Nv v heads, C conv taps; Kd = Nk·Dk, Vd = Nv·Dk, Cd = 2·Kd + Vd):
 *   [q k v] = H·Wqkv (Cd), z = H·Wgate (Vd), b = H·Wbeta, a = H·Walpha (Nv)
 *             (qwen3next: one ssm_in and one ssm_ba, grouped per k head)
 *   u = silu(conv_C(window_s ++ [q k v]))   the window keeps the last C-1 inputs
 *   q, k = per head u / max(|u|, eps)       (L2; eps = the RMS norm epsilon)
 *   beta = sigmoid(b), decay = exp(min(softplus(a + dt)·A, 50))
 *   per v head h, k head kh(h), S = state[s][r][h] (Dk × Dk, S[i][j]: key i, value j):
 *     v' = Sᵀk, o = Sᵀq
 *     n  = beta·v − beta·decay·v'
 *     out = decay·o/√Dk + n·(k·q)/√Dk
 *     S  = clamp(decay·S + k ⊗ n, ±1e6)
 *   ATT[t][h] = rmsnorm(out)·ssm_norm · silu(z[h])
 * Decode (and a snapshotted position) runs the recurrence token by token, the
 * kernel table's dn_step; a run of at least dn_chunk_min tokens of one sequence
 * goes through the chunked form in chunks of TH_DN_CHUNK (dn_chunk, cpu/dn_chunk.h:
 * the same rule as matrix products) at the levels where that is faster (generic;
 * at AVX2 the step's matrix-vector products win, so the kernel table says never). Heads are split over the
 * thread pool; each head walks the batch in order, so a ragged batch of several
 * sequences works as long as each sequence's tokens come in position order. */
#include "context.h"
#include "cpu/forward.h"
#include "cpu/dn_chunk.h"
#include <math.h>
#include <stdlib.h>

/* Batches shorter than this never take the chunked form (no scratch for it). */
enum { DN_CHUNK_MIN = 8 };

typedef struct dn_dims { int64_t dk, nk, nv, kd, vd, cd, C, ratio; } dn_dims;

static dn_dims dn_dims_of(const th_hparams *hp) {
    dn_dims d = { .dk = hp->ssm_d_state, .nk = hp->ssm_n_group, .nv = hp->ssm_dt_rank, .C = hp->ssm_d_conv };
    d.kd = d.dk * d.nk;
    d.vd = d.dk * d.nv;
    d.cd = 2 * d.kd + d.vd;
    d.ratio = d.nv / (d.nk > 0 ? d.nk : 1);
    return d;
}

th_status th_dn_alloc(th_cpu *c) {
    const th_model *m = c->model;
    const th_hparams *hp = &m->hp;
    size_t B = c->p.n_batch;
    bool ok = true, shexp = false;
    for (int32_t il = 0; il < hp->n_layer; il++) shexp |= m->layers[il].gate_inp_shexp.data != NULL;
    if (shexp && !(c->dn_shx = malloc(B * (size_t)hp->n_embd * sizeof(float)))) ok = false;
    if (!(c->qgate = malloc(B * (size_t)c->q_w * sizeof(float) + 1))) ok = false;
    if (hp->n_recurrent > 0) {
        dn_dims d = dn_dims_of(hp);
        c->dn_in_w = 2 * d.kd + 2 * d.vd;
        if (!(c->dn_slot = malloc((size_t)hp->n_layer * sizeof(int32_t)))) ok = false;
        else
            for (int32_t il = 0, r = 0; il < hp->n_layer; il++) c->dn_slot[il] = m->layers[il].recurrent ? r++ : -1;
        if (!(c->dn_in = malloc(B * (size_t)c->dn_in_w * sizeof(float)))) ok = false;
        if (!(c->dn_u = malloc(B * (size_t)d.cd * sizeof(float)))) ok = false;
        if (!(c->dn_z = malloc(B * (size_t)d.vd * sizeof(float)))) ok = false;
        if (!(c->dn_ba = malloc(B * 4 * (size_t)d.nv * sizeof(float)))) ok = false;
        /* the chunked form's scratch, one per pool thread (none for batches of one) */
        c->dn_work_n = (size_t)th_dn_chunk_work((int32_t)d.dk, TH_DN_CHUNK);
        if (B >= DN_CHUNK_MIN && !(c->dn_work = malloc((size_t)th_pool_size(c->pool) * c->dn_work_n * sizeof(float))))
            ok = false;
    }
    return ok ? TH_OK : th_set_error(TH_ERR_NOMEM, "out of memory for the DeltaNet scratch (batch %zu)", B);
}

void th_dn_free(th_cpu *c) {
    free(c->dn_shx); free(c->qgate); free(c->dn_slot); free(c->dn_in); free(c->dn_u); free(c->dn_z); free(c->dn_ba); free(c->dn_work);
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static float siluf(float x) { return x / (1.0f + expf(-x)); }
static float softplusf(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* Does sequence seq keep a snapshot of its state after position pos? */
static bool want_snap(const th_context *ctx, int32_t seq, int32_t pos) {
    const th_rstate *rs = &ctx->rs;
    return rs->n_snap > 0 && pos + 1 > ctx->new_len[seq] - rs->n_snap;
}

/* The projections into u (q k v, not yet convolved), z, beta and alpha (raw). */
static void dn_project(th_cpu *c, const th_layer *L, const dn_dims *d, int32_t n) {
    int64_t E = c->model->hp.n_embd, nv = d->nv;
    float *b = c->dn_ba, *a = c->dn_ba + (size_t)n * nv;
    if (L->ssm_in.data) {
        th_fwd_matmul(c, &L->ssm_in, 0, c->h, E, n, c->dn_in, c->dn_in_w);
        th_fwd_matmul(c, &L->ssm_ba, 0, c->h, E, n, c->dn_ba + 2 * (size_t)n * nv, 2 * nv);
        int64_t gw = 2 * d->dk + 2 * d->ratio * d->dk, vr = d->ratio * d->dk;
        for (int32_t t = 0; t < n; t++) {
            const float *row = c->dn_in + (int64_t)t * c->dn_in_w, *ba = c->dn_ba + 2 * (size_t)n * nv + (size_t)t * 2 * nv;
            float *u = c->dn_u + (int64_t)t * d->cd, *z = c->dn_z + (int64_t)t * d->vd;
            for (int64_t g = 0; g < d->nk; g++) {
                const float *src = row + g * gw;
                memcpy(u + g * d->dk, src, (size_t)d->dk * sizeof(float));
                memcpy(u + d->kd + g * d->dk, src + d->dk, (size_t)d->dk * sizeof(float));
                memcpy(u + 2 * d->kd + g * vr, src + 2 * d->dk, (size_t)vr * sizeof(float));
                memcpy(z + g * vr, src + 2 * d->dk + vr, (size_t)vr * sizeof(float));
                for (int64_t r = 0; r < d->ratio; r++) {
                    b[(size_t)t * nv + g * d->ratio + r] = ba[g * 2 * d->ratio + r];
                    a[(size_t)t * nv + g * d->ratio + r] = ba[g * 2 * d->ratio + d->ratio + r];
                }
            }
        }
        return;
    }
    const th_weight *ws[2] = { &L->ssm_qkv, &L->ssm_gate };
    float *const ys[2] = { c->dn_u, c->dn_z };
    const int64_t strides[2] = { d->cd, d->vd };
    th_fwd_matmul_multi(c, ws, ys, strides, 2, c->h, E, n);
    const th_weight *gs[2] = { &L->ssm_beta, &L->ssm_alpha };
    float *const gy[2] = { b, a };
    const int64_t gstr[2] = { nv, nv };
    th_fwd_matmul_multi(c, gs, gy, gstr, 2, c->h, E, n);
}

typedef struct { th_context *ctx; th_cpu *c; const th_step *st; const th_layer *L; dn_dims d; int32_t r; } dn_task;

/* Conv of channels [ch0, ch1) with each sequence's window, every token in batch order,
 * then silu; a snapshotted position keeps this slice of the window. */
static void dn_conv_channels(const dn_task *k, int64_t ch0, int64_t ch1) {
    th_rstate *rs = &k->ctx->rs;
    int64_t C = k->d.C, w0 = ch0 * (C - 1), wn = (ch1 - ch0) * (C - 1);
    const float *w = k->L->ssm_conv1d.data;
    for (int32_t t = 0; t < k->st->n; t++) {
        float *u = k->c->dn_u + (int64_t)t * k->d.cd, *win = th_rs_conv(rs, k->st->seq[t], k->r);
        for (int64_t ch = ch0; ch < ch1; ch++) {
            float *s = win + ch * (C - 1);
            const float *wc = w + ch * C;
            float acc = 0.0f;
            for (int64_t j = 0; j < C - 1; j++) acc += s[j] * wc[j];
            acc += u[ch] * wc[C - 1];
            for (int64_t j = 0; j + 1 < C - 1; j++) s[j] = s[j + 1];
            if (C > 1) s[C - 2] = u[ch];
            u[ch] = siluf(acc);
        }
        if (wn > 0 && want_snap(k->ctx, k->st->seq[t], k->st->pos[t]))
            memcpy(th_rs_snap_conv(rs, k->st->seq[t], k->st->pos[t] + 1, k->r) + w0, win + w0, (size_t)wn * sizeof(float));
    }
}

/* This thread's share of the conv and gates: whole heads of Dk channels (the conv, then
 * the L2 norm of the q and k heads among them: a head's channels are one thread's) and
 * v heads' beta = sigmoid(b), log decay = min(softplus(a + dt)·A, 50). Per channel and
 * per head the arithmetic is the serial loop's, so any split gives the same bits. */
static void dn_conv_worker(void *arg, int ith, int nth) {
    const dn_task *k = arg;
    const dn_dims *d = &k->d;
    int64_t units = d->cd / d->dk, u0 = units * ith / nth, u1 = units * (ith + 1) / nth, nv = d->nv;
    float eps = k->c->model->hp.norm_eps;
    dn_conv_channels(k, u0 * d->dk, u1 * d->dk);
    for (int32_t t = 0; t < k->st->n; t++) {
        float *u = k->c->dn_u + (int64_t)t * d->cd;
        for (int64_t hh = u0; hh < u1 && hh < 2 * d->nk; hh++) {
            float *x = u + hh * d->dk, ss = 0.0f;
            for (int64_t i = 0; i < d->dk; i++) ss += x[i] * x[i];
            float sc = 1.0f / fmaxf(sqrtf(ss), eps);
            for (int64_t i = 0; i < d->dk; i++) x[i] *= sc;
        }
    }
    const float *dt = k->L->ssm_dt.data, *A = k->L->ssm_a.data;
    float *b = k->c->dn_ba, *a = k->c->dn_ba + (size_t)k->st->n * nv;
    for (int32_t t = 0; t < k->st->n; t++)
        for (int64_t h = nv * ith / nth; h < nv * (ith + 1) / nth; h++) {
            b[(size_t)t * nv + h] = sigmoidf(b[(size_t)t * nv + h]);
            float g = softplusf(a[(size_t)t * nv + h] + dt[h]) * A[h];
            a[(size_t)t * nv + h] = fminf(g, 50.0f);   /* the log of the decay */
        }
}

/* Tokens t0.. of one run (same sequence, batch order) that the chunked form may take:
 * up to the first one whose state is snapshotted (the chunk form keeps only the last). */
static int32_t dn_chunkable(const dn_task *k, int32_t t0, int32_t t1) {
    int32_t t = t0;
    while (t < t1 && !want_snap(k->ctx, k->st->seq[t], k->st->pos[t])) t++;
    return t - t0;
}

/* The delta rule for the heads of this thread, every token in batch order: each run of
 * one sequence's tokens in chunks of TH_DN_CHUNK (dn_chunk) where it is long enough,
 * the rest (decode, snapshotted positions) token by token (dn_step). */
static void dn_rule_worker(void *arg, int ith, int nth) {
    dn_task *k = arg;
    th_cpu *c = k->c;
    const dn_dims *d = &k->d;
    th_rstate *rs = &k->ctx->rs;
    int64_t dk = d->dk, nv = d->nv;
    float scale = 1.0f / sqrtf((float)dk);
    const float *beta = c->dn_ba, *lg = c->dn_ba + (size_t)k->st->n * nv;
    float *work = c->dn_work + (size_t)ith * (size_t)c->dn_work_n;
    for (int64_t h = nv * ith / nth; h < nv * (ith + 1) / nth; h++) {
        int64_t kh = c->model->hp.ssm_repeat == 0 ? h / d->ratio : h % d->nk;
        for (int32_t t = 0; t < k->st->n;) {
            int32_t seq = k->st->seq[t], e = t + 1;
            while (e < k->st->n && k->st->seq[e] == seq) e++;
            float *S = th_rs_ssm(rs, seq, k->r) + h * dk * dk;
            int32_t cmin = c->k->dn_chunk_min, nc = c->dn_work && cmin > 0 ? dn_chunkable(k, t, e) : 0;
            for (; nc >= TH_MAX(cmin, DN_CHUNK_MIN); ) {
                int32_t L = TH_MIN(nc, (int32_t)TH_DN_CHUNK);
                const float *u = c->dn_u + (int64_t)t * d->cd;
                c->k->dn_chunk((int32_t)dk, L, S, u + kh * dk, u + d->kd + kh * dk, u + 2 * d->kd + h * dk, d->cd,
                               beta + (size_t)t * nv + h, lg + (size_t)t * nv + h, nv, scale,
                               c->att + (int64_t)t * c->att_w + h * dk, c->att_w, work);
                t += L;
                nc -= L;
            }
            for (; t < e; t++) {
                const float *u = c->dn_u + (int64_t)t * d->cd;
                const float *q = u + kh * dk, *kk = u + d->kd + kh * dk, *v = u + 2 * d->kd + h * dk;
                float *out = c->att + (int64_t)t * c->att_w + h * dk;
                c->k->dn_step((int32_t)dk, S, q, kk, v, beta[(size_t)t * nv + h], expf(lg[(size_t)t * nv + h]), scale, out);
                if (want_snap(k->ctx, seq, k->st->pos[t]))
                    memcpy(th_rs_snap_conv(rs, seq, k->st->pos[t] + 1, k->r) + rs->conv_n + h * dk * dk, S,
                           (size_t)(dk * dk) * sizeof(float));
            }
        }
    }
}

/* ATT[t][h] = rmsnorm(out)·ssm_norm ⊙ silu(z), for this thread's share of the (t, h) pairs. */
static void dn_output_worker(void *arg, int ith, int nth) {
    const dn_task *k = arg;
    const dn_dims *d = &k->d;
    th_cpu *c = k->c;
    float eps = c->model->hp.norm_eps;
    int64_t np = (int64_t)k->st->n * d->nv;
    for (int64_t p = np * ith / nth; p < np * (ith + 1) / nth; p++) {
        int64_t t = p / d->nv, h = p % d->nv;
        float *o = c->att + t * c->att_w + h * d->dk;
        const float *z = c->dn_z + t * d->vd + h * d->dk;
        th_op_rmsnorm(o, o, k->L->ssm_norm.data, d->dk, eps);
        for (int64_t j = 0; j < d->dk; j++) o[j] *= siluf(z[j]);
    }
}

/* Batches of at least this many values (tokens × channels) split the conv and output loops over the pool. */
enum { DN_SPLIT_MIN = 16384 };

th_status th_dn_recurrent(th_context *ctx, const th_step *st, int32_t il) {
    th_cpu *c = ctx->bd;
    const th_layer *L = &c->model->layers[il];
    dn_task k = { ctx, c, st, L, dn_dims_of(&c->model->hp), c->dn_slot[il] };
    if (k.d.dk > 1024) return th_set_error(TH_ERR_UNSUPPORTED, "DeltaNet head width %lld > 1024", (long long)k.d.dk);
    bool split = (int64_t)st->n * k.d.cd >= DN_SPLIT_MIN;
    dn_project(c, L, &k.d, st->n);
    if (split) th_pool_run(c->pool, dn_conv_worker, &k);
    else dn_conv_worker(&k, 0, 1);
    if (k.d.nv >= 2 && st->n * k.d.dk >= 256) th_pool_run(c->pool, dn_rule_worker, &k);
    else dn_rule_worker(&k, 0, 1);
    if (split) th_pool_run(c->pool, dn_output_worker, &k);
    else dn_output_worker(&k, 0, 1);
    return TH_OK;
}

th_status th_dn_att_gate(th_context *ctx, const th_step *st, int32_t il) {
    th_cpu *c = ctx->bd;
    for (int32_t t = 0; t < st->n; t++) {
        float *a = c->att + (int64_t)t * c->att_w;
        const float *g = c->qgate + (int64_t)t * c->q_w;
        for (int64_t i = 0; i < c->q_w; i++) a[i] *= sigmoidf(g[i]);
    }
    return TH_OK;
}

th_status th_dn_shexp_gated(th_context *ctx, const th_step *st, int32_t il) {
    th_cpu *c = ctx->bd;
    const th_layer *L = &c->model->layers[il];
    int64_t E = c->model->hp.n_embd;
    th_fwd_ffn(c, &L->gate_shexp, &L->up_shexp, &L->down_shexp, c->h, st->n, c->dn_shx, false);
    const float *w = L->gate_inp_shexp.data;
    for (int32_t t = 0; t < st->n; t++) {
        const float *h = c->h + (int64_t)t * E, *y = c->dn_shx + (int64_t)t * E;
        float *o = c->tmp + (int64_t)t * E, g = 0.0f;
        for (int64_t i = 0; i < E; i++) g += h[i] * w[i];
        g = sigmoidf(g);
        for (int64_t i = 0; i < E; i++) o[i] += g * y[i];
    }
    return TH_OK;
}
