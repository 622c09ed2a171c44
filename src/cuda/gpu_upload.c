/* gpu_upload.c — puts a model's weights on the device once (the first GPU
 * context of the model does it; the copies live until th_model_free): every
 * th_weight gets a th_cu_weight record (th_weight.dev). Matrices keep their file
 * layout, except the types with a SPLIT layout (split.c: quants and scales in
 * separate arrays, for coalesced loads). Q|K|V and gate|up (dense or shared
 * experts) are uploaded as one matrix when their types match; experts stacked by
 * rows (expert e after e−1), and experts with a type of their own (per-expert
 * types) as parts of one type each beside the 3-D tensor (th_cu_parts, upload_parts);
 * vectors (norms, biases, sinks, rope factors) as fp32.
 * The shapes the kernels rely on are checked here, each error naming the layer.
 * Prints a progress line when verbose or when stderr is a terminal. */
#include "cuda/gpu_internal.h"
#include "cuda/deltanet.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

bool th_cu_type_supported(uint32_t t) {
    switch (t) {
    case TH_F32: case TH_F16: case TH_BF16: case TH_Q4_0: case TH_Q4_1: case TH_Q5_0: case TH_Q5_1:
    case TH_Q8_0: case TH_Q2_K: case TH_Q3_K: case TH_Q4_K: case TH_Q5_K: case TH_Q6_K: case TH_IQ4_NL:
    case TH_IQ4_XS: case TH_MXFP4:
    case TH_Q2: case TH_Q3: case TH_Q4: case TH_Q5: case TH_Q6: case TH_Q7: case TH_Q8:   /* qN: file layout */
    case TH_TQ1_0: case TH_TQ2_0: case TH_Q1_0_G128: case TH_IQ1_BN: case TH_IQ2_BN:   /* 1-bit / ternary: file layout */
        return true;
    default:
        return false;
    }
}

static void progress(th_cu_store *S, size_t bytes) {
    S->done += bytes;
    if (!S->verbose || !S->total) return;
    int pct = (int)(100.0 * (double)S->done / (double)S->total);
    if (pct != S->pct) {
        S->pct = pct;
        fprintf(stderr, "\rtheseus: uploading weights to the GPU: %3d%% (%.0f of %.0f MiB)", pct,
                (double)S->done / (1 << 20), (double)S->total / (1 << 20));
        if (pct == 100) fputc('\n', stderr);
    }
}

static th_status check_weight(const th_weight *w) {
    if (!th_cu_type_supported(w->type))
        return th_set_error(TH_ERR_UNSUPPORTED, "tensor %s: type %s has no CUDA kernel", w->name ? w->name : "?",
                            th_type_name(w->type));
    return TH_OK;
}

/* The record of w (one per weight with data, in the store's array). */
static th_cu_weight *rec(th_cu_store *S, th_weight *w) {
    th_cu_weight *r = &S->recs[S->n_recs++];
    memset(r, 0, sizeof *r);
    r->joint = 1;
    w->dev = r;
    return r;
}

static int64_t rows_of(const th_weight *w) { return w->ne1 * TH_MAX(w->ne2, 1); }

/* Upload the rows of `n` weights (same type and row length; experts flattened) as one matrix. */
static th_status upload_rows(th_cu_store *S, th_weight *const *w, int n, th_cu_mat *out) {
    th_status s;
    int64_t rows = 0, K = w[0]->ne0;
    for (int i = 0; i < n; i++) {
        if ((s = check_weight(w[i]))) return s;
        rows += rows_of(w[i]);
    }
    memset(out, 0, sizeof *out);
    out->type = w[0]->type;
    out->rows = rows;
    out->K = K;
    out->row_bytes = w[0]->row_bytes;
    const char *name = w[0]->name ? w[0]->name : "weight";
    size_t qrow, srow;
    if (th_cu_split_sizes(out->type, K, &qrow, &srow)) {
        out->layout = TH_CU_SPLIT;
        void *dq, *dsc;
        if ((s = th_cu_alloc(&S->mem, &dq, qrow * (size_t)rows, name)) || (s = th_cu_alloc(&S->mem, &dsc, srow * (size_t)rows, name)))
            return s;
        out->data = dq;
        out->scales = dsc;
        int64_t r0 = 0;
        for (int i = 0; i < n; i++) {
            int64_t nr = rows_of(w[i]);
            /* repack in slices of rows so the host buffer stays small */
            int64_t slice = TH_MAX(1, (int64_t)((64u << 20) / (qrow + srow)));
            uint8_t *hq = malloc(qrow * (size_t)TH_MIN(slice, nr)), *hs = malloc(srow * (size_t)TH_MIN(slice, nr));
            if (!hq || !hs) { free(hq); free(hs); return th_set_error(TH_ERR_NOMEM, "out of memory repacking %s", name); }
            for (int64_t a = 0; a < nr; a += slice) {
                int64_t c = TH_MIN(slice, nr - a);
                th_cu_repack_split(out->type, (const uint8_t *)w[i]->data + (size_t)a * w[i]->row_bytes,
                                   w[i]->row_bytes, c, K, hq, hs);
                cudaError_t e = cudaMemcpy((uint8_t *)dq + (size_t)(r0 + a) * qrow, hq, qrow * (size_t)c, cudaMemcpyHostToDevice);
                if (!e) e = cudaMemcpy((uint8_t *)dsc + (size_t)(r0 + a) * srow, hs, srow * (size_t)c, cudaMemcpyHostToDevice);
                if (e) { free(hq); free(hs); return th_cu_fail(e, name); }
                progress(S, (size_t)c * w[i]->row_bytes);
            }
            free(hq);
            free(hs);
            r0 += nr;
        }
        return TH_OK;
    }
    out->layout = TH_CU_GGUF;
    void *d;
    if ((s = th_cu_alloc(&S->mem, &d, out->row_bytes * (size_t)rows, name))) return s;
    out->data = d;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t bytes = w[i]->row_bytes * (size_t)rows_of(w[i]);
        for (size_t a = 0; a < bytes; a += (256u << 20)) {
            size_t c = TH_MIN(bytes - a, (size_t)256 << 20);
            cudaError_t e = cudaMemcpy((uint8_t *)d + off + a, (const uint8_t *)w[i]->data + a, c, cudaMemcpyHostToDevice);
            if (e) return th_cu_fail(e, name);
            progress(S, c);
        }
        off += bytes;
    }
    return TH_OK;
}

static th_status upload_mat(th_cu_store *S, th_weight *w) {
    if (!w->data || w->dev) return TH_OK;
    th_cu_weight *r = rec(S, w);
    th_status s = upload_rows(S, &w, 1, &r->mat);
    r->group_q8 = !s && th_cu_gemv_wants_q8(&r->mat);
    return s;
}

/* Weights that read the same input: one matrix when all types and row lengths
 * match (the first weight's record, joint = n), else one each; group_q8 on the
 * first says whether any of them reads q8 activations. */
static th_status upload_group(th_cu_store *S, th_weight *const *w, int n) {
    bool same = true;
    for (int i = 1; i < n; i++) same = same && w[i]->type == w[0]->type && w[i]->row_bytes == w[0]->row_bytes;
    th_status s;
    if (same) {
        th_cu_weight *lead = rec(S, w[0]);
        for (int i = 1; i < n; i++) rec(S, w[i])->joint = 0;
        lead->joint = n;
        if ((s = upload_rows(S, w, n, &lead->mat))) return s;
        lead->group_q8 = th_cu_gemv_wants_q8(&lead->mat);
        for (int i = 1; i < n; i++) ((th_cu_weight *)w[i]->dev)->mat = lead->mat;
        return TH_OK;
    }
    bool q8 = false;
    for (int i = 0; i < n; i++) {
        if ((s = upload_mat(S, w[i]))) return s;
        q8 = q8 || th_cu_gemv_wants_q8(&th_cu_w(w[i])->mat);
    }
    ((th_cu_weight *)w[0]->dev)->group_q8 = q8;
    return TH_OK;
}

/* A vector (norm weight, bias, rope factors) as fp32 on the device; absent → no record. */
static th_status upload_vec(th_cu_store *S, th_weight *w) {
    if (!w->data || w->dev) return TH_OK;
    th_status s;
    if ((s = check_weight(w))) return s;
    int64_t n = w->ne0 * TH_MAX(w->ne1, 1);
    float *tmp = malloc((size_t)n * sizeof(float));
    if (!tmp) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_ref_dequantize(w->type, w->data, tmp, n);
    void *d;
    if ((s = th_cu_alloc(&S->mem, &d, (size_t)n * sizeof(float), w->name ? w->name : "vector"))) { free(tmp); return s; }
    cudaError_t e = cudaMemcpy(d, tmp, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
    free(tmp);
    if (e) return th_cu_fail(e, w->name ? w->name : "vector");
    progress(S, w->row_bytes * (size_t)TH_MAX(w->ne1, 1));
    rec(S, w)->vec = d;
    return TH_OK;
}

static size_t wbytes(const th_weight *w) {
    size_t b = w->data ? w->row_bytes * (size_t)TH_MAX(w->ne1, 1) * (size_t)TH_MAX(w->ne2, 1) : 0;
    for (int64_t e = 0; w->data && w->experts && e < w->ne2; e++) {
        const th_expert_slot *x = th_weight_expert(w, e);
        if (x) b += x->row_bytes * (size_t)w->ne1;
    }
    return b;
}

/* Keep a parts record for store_free. */
static th_status keep_parts(th_cu_store *S, th_cu_parts *P) {
    if (S->n_parts == S->cap_parts) {
        size_t nc = S->cap_parts ? 2 * S->cap_parts : 16;
        th_cu_parts **np = realloc(S->parts, nc * sizeof *np);
        if (!np) return th_set_error(TH_ERR_NOMEM, "out of memory");
        S->parts = np;
        S->cap_parts = nc;
    }
    S->parts[S->n_parts++] = P;
    return TH_OK;
}

/* The experts of w (already uploaded as one 3-D matrix) with a copy of their own
 * (per-expert types, docs/precision.md) as parts of one type each (th_cu_parts);
 * nothing when w has none. */
static th_status upload_parts(th_cu_store *S, th_weight *w) {
    int64_t X = w->ne2;
    uint32_t types[TH_CU_MAX_PARTS];
    int nt = 0;
    for (int64_t e = 0; w->experts && e < X; e++) {
        const th_expert_slot *x = th_weight_expert(w, e);
        int i = 0;
        while (x && i < nt && types[i] != x->type) i++;
        if (!x || i < nt) continue;
        if (nt == TH_CU_MAX_PARTS - 1)
            return th_set_error(TH_ERR_UNSUPPORTED, "tensor %s: its experts have more than %d types of their own; the CUDA backend takes at most that many",
                                w->name ? w->name : "?", TH_CU_MAX_PARTS - 1);
        types[nt++] = x->type;
    }
    if (!nt) return TH_OK;
    th_cu_parts *P = calloc(1, sizeof *P + (size_t)(nt + 1) * (size_t)X * sizeof(int32_t));
    th_weight *tmp = calloc((size_t)X, sizeof *tmp);
    th_weight **ptr = calloc((size_t)X, sizeof *ptr);
    th_status s = !P || !tmp || !ptr ? th_set_error(TH_ERR_NOMEM, "out of memory") : keep_parts(S, P);
    if (s) { free(P); free(tmp); free(ptr); return s; }
    int32_t *hs = (int32_t *)(P + 1);
    P->n = nt + 1;
    P->p[0].mat = th_cu_w(w)->mat;
    for (int i = 0; i <= nt; i++) P->p[i].hslot = hs + (size_t)i * X;
    for (int64_t e = 0; e < X; e++) P->p[0].hslot[e] = th_weight_expert(w, e) ? -1 : (int32_t)e;
    for (int i = 1; i <= nt && !s; i++) {
        int n = 0;
        for (int64_t e = 0; e < X; e++) {
            const th_expert_slot *x = th_weight_expert(w, e);
            P->p[i].hslot[e] = -1;
            if (!x || x->type != types[i - 1]) continue;
            tmp[n] = (th_weight){ .data = x->data, .type = x->type, .ne0 = w->ne0, .ne1 = w->ne1, .ne2 = 1,
                                  .row_bytes = x->row_bytes, .name = w->name };
            ptr[n] = &tmp[n];
            P->p[i].hslot[e] = n++;
        }
        s = upload_rows(S, ptr, n, &P->p[i].mat);
    }
    free(tmp);
    free(ptr);
    void *d = NULL;
    if (!s) s = th_cu_alloc(&S->mem, &d, (size_t)(nt + 1) * (size_t)X * sizeof(int32_t), "expert slot maps");
    if (!s) {
        cudaError_t e = cudaMemcpy(d, hs, (size_t)(nt + 1) * (size_t)X * sizeof(int32_t), cudaMemcpyHostToDevice);
        if (e) return th_cu_fail(e, "expert slot maps");
        for (int i = 0; i <= nt; i++) P->p[i].slot = (const int32_t *)d + (size_t)i * X;
        ((th_cu_weight *)w->dev)->parts = P;
    }
    return s;
}

/* Every weight of layer L (the records to make and the bytes to upload). */
#define LAYER_WEIGHTS(L)                                                                                          \
    { &L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk, &L->bv, &L->bo, &L->wqkv, &L->bqkv,          \
      &L->q_norm, &L->k_norm, &L->post_attn_norm, &L->attn_sinks, &L->wq_a, &L->q_a_norm, &L->wq_b,               \
      &L->wkv_a_mqa, &L->kv_a_norm, &L->wkv_b, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down,                    \
      &L->post_ffn_norm, &L->router, &L->router_b, &L->exp_probs_b, &L->gate_exps, &L->up_exps, &L->down_exps,    \
      &L->gate_exps_b, &L->up_exps_b, &L->down_exps_b, &L->gate_shexp, &L->up_shexp, &L->down_shexp,               \
      &L->ssm_in, &L->ssm_qkv, &L->ssm_gate, &L->ssm_ba, &L->ssm_beta, &L->ssm_alpha, &L->ssm_conv1d, &L->ssm_dt,    \
      &L->ssm_a, &L->ssm_norm, &L->ssm_out, &L->gate_inp_shexp, &L->attn_sub_norm, &L->ffn_sub_norm }

static bool shape_is(const th_weight *w, int64_t ne0, int64_t ne1, int64_t ne2) {
    return w->ne0 == ne0 && w->ne1 == ne1 && TH_MAX(w->ne2, 1) == ne2;
}

/* The routed experts of a MoE layer: what the kernels need, then router and stacked gate/up/down. */
static th_status upload_moe(th_cu_store *S, const th_hparams *hp, int il, th_layer *L) {
    int64_t E = hp->n_embd, X = hp->n_expert, F = L->gate_exps.ne1;
    if (!L->gate_exps.data || !L->up_exps.data || !L->down_exps.data)
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: the CUDA backend needs separate gate/up/down expert weights", il);
    if (X < 1 || hp->n_expert_used < 1 || hp->n_expert_used > X || !shape_is(&L->router, E, X, 1) ||
        !shape_is(&L->gate_exps, E, F, X) || !shape_is(&L->up_exps, E, F, X) || !shape_is(&L->down_exps, F, E, X))
        return th_set_error(TH_ERR_FORMAT, "layer %d: expert weights do not have the shapes [%lld,F,%lld] / [F,%lld,%lld] (%lld of %lld experts used)",
                            il, (long long)E, (long long)X, (long long)E, (long long)X, (long long)hp->n_expert_used, (long long)X);
    if (X > TH_CU_MAX_EXPERTS || hp->n_expert_used > 64)
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: %lld experts, %d used; the CUDA backend routes at most %d, %d used",
                            il, (long long)X, hp->n_expert_used, TH_CU_MAX_EXPERTS, 64);
    if (hp->gating < TH_GATING_SOFTMAX || hp->gating > TH_GATING_SOFTMAX_SELECTED)
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: expert gating function %d is not supported by the CUDA backend", il, hp->gating);
    int32_t ng = hp->n_expert_groups > 1 ? hp->n_expert_groups : 0;
    if (ng && (ng > 256 || X % ng || hp->n_expert_groups_used < 1))
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: group-limited routing with %d groups of %lld experts is not supported by the CUDA backend",
                            il, ng, (long long)X);
    if ((L->gate_exps_b.data && !shape_is(&L->gate_exps_b, F, X, 1)) || (L->up_exps_b.data && !shape_is(&L->up_exps_b, F, X, 1)) ||
        (L->down_exps_b.data && !shape_is(&L->down_exps_b, E, X, 1)))
        return th_set_error(TH_ERR_FORMAT, "layer %d: expert biases do not have the shapes [F,%lld] / [%lld,%lld]", il,
                            (long long)X, (long long)E, (long long)X);
    th_status s;
    if ((s = upload_mat(S, &L->router)) || (s = upload_mat(S, &L->gate_exps)) || (s = upload_mat(S, &L->up_exps)) ||
        (s = upload_mat(S, &L->down_exps)) || (s = upload_parts(S, &L->gate_exps)) || (s = upload_parts(S, &L->up_exps)) ||
        (s = upload_parts(S, &L->down_exps)))
        return s;
    if (L->gate_shexp.data || L->up_shexp.data || L->down_shexp.data) {
        if (!L->gate_shexp.data || !L->up_shexp.data || !L->down_shexp.data)
            return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: shared experts need gate, up and down weights", il);
        th_weight *gu[2] = { &L->gate_shexp, &L->up_shexp };
        if ((s = upload_group(S, gu, 2)) || (s = upload_mat(S, &L->down_shexp))) return s;
    }
    return TH_OK;
}

/* Q|K|V (separate or fused), the whole-width or per-head Q/K norms' shapes, or MLA's matrices. */
static th_status upload_attn(th_cu_store *S, const th_hparams *hp, int il, th_layer *L) {
    int64_t q_w = (int64_t)hp->n_head * hp->head_dim, k_w = (int64_t)hp->n_head_kv * hp->head_dim;
    if (L->wkv_a_mqa.data) {
        th_weight *ms[5] = { &L->wq, &L->wq_a, &L->wq_b, &L->wkv_a_mqa, &L->wkv_b };
        th_status s;
        for (int i = 0; i < 5; i++)
            if ((s = upload_mat(S, ms[i]))) return s;
        return TH_OK;
    }
    if (L->wqkv.data) return upload_mat(S, &L->wqkv);
    if (!L->wq.data || !L->wk.data || !L->wv.data)
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: the CUDA backend needs Q/K/V weights (separate or fused)", il);
    bool full = L->q_norm.data && L->q_norm.ne0 != hp->head_dim;
    if (full && (L->q_norm.ne0 != q_w || !L->k_norm.data || L->k_norm.ne0 != k_w))
        return th_set_error(TH_ERR_FORMAT, "layer %d: whole-width q/k norms must be %lld and %lld wide", il, (long long)q_w, (long long)k_w);
    th_weight *qkv[3] = { &L->wq, &L->wk, &L->wv };
    return upload_group(S, qkv, 3);
}

/* The dense FFN (gate|up as one matrix or two, or fused [gate; up] in w_up). */
static th_status upload_ffn(th_cu_store *S, int il, th_layer *L) {
    if (L->router.data) return TH_OK;
    if (!L->w_up.data || !L->w_down.data)
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: the CUDA backend needs up and down FFN weights", il);
    int64_t gu = L->w_gate.data ? L->w_gate.ne1 + L->w_up.ne1 : L->w_up.ne1;
    if (gu != 2 * L->w_down.ne0)
        return th_set_error(TH_ERR_FORMAT, "layer %d: gate/up give %lld outputs but down takes %lld inputs", il,
                            (long long)gu, (long long)L->w_down.ne0);
    th_status s;
    if (L->w_gate.data) {
        th_weight *g[2] = { &L->w_gate, &L->w_up };
        if ((s = upload_group(S, g, 2))) return s;
    } else if ((s = upload_mat(S, &L->w_up))) {
        return s;
    }
    return upload_mat(S, &L->w_down);
}

/* A gated DeltaNet layer (hybrid models, gpu_deltanet.c): the projections (qwen35's
 * [qkv | z] and [beta | alpha] as joint matrices when their types match; qwen3next's
 * ssm_in, ssm_ba), ssm_out, and the conv taps, dt, A and output norm as fp32. */
static th_status upload_dn(th_cu_store *S, const th_hparams *hp, int il, th_layer *L) {
    int64_t dk = hp->ssm_d_state, kd = dk * hp->ssm_n_group, vd = dk * hp->ssm_dt_rank, cd = 2 * kd + vd;
    if (dk < 1 || dk > TH_CU_DN_MAX_DK)
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: DeltaNet head width %lld; the CUDA kernel takes 1 to %d", il,
                            (long long)dk, TH_CU_DN_MAX_DK);
    if (!L->ssm_out.data || !L->ssm_conv1d.data || !L->ssm_dt.data || !L->ssm_a.data || !L->ssm_norm.data ||
        L->ssm_conv1d.ne0 * TH_MAX(L->ssm_conv1d.ne1, 1) != (int64_t)hp->ssm_d_conv * cd || L->ssm_norm.ne0 != dk ||
        L->ssm_out.ne0 != vd)
        return th_set_error(TH_ERR_FORMAT, "layer %d: DeltaNet weights missing or not of the shapes the CUDA backend takes", il);
    th_status s;
    if (L->ssm_in.data) {
        if (!L->ssm_ba.data) return th_set_error(TH_ERR_FORMAT, "layer %d: ssm_in without ssm_ba", il);
        if ((s = upload_mat(S, &L->ssm_in)) || (s = upload_mat(S, &L->ssm_ba))) return s;
    } else {
        if (!L->ssm_qkv.data || !L->ssm_gate.data || !L->ssm_beta.data || !L->ssm_alpha.data)
            return th_set_error(TH_ERR_FORMAT, "layer %d: DeltaNet projections missing", il);
        th_weight *qz[2] = { &L->ssm_qkv, &L->ssm_gate }, *ba[2] = { &L->ssm_beta, &L->ssm_alpha };
        if ((s = upload_group(S, qz, 2)) || (s = upload_group(S, ba, 2))) return s;
    }
    th_weight *vecs[] = { &L->ssm_conv1d, &L->ssm_dt, &L->ssm_a, &L->ssm_norm };
    for (size_t k = 0; k < sizeof vecs / sizeof vecs[0]; k++)
        if ((s = upload_vec(S, vecs[k]))) return s;
    return upload_mat(S, &L->ssm_out);
}

static th_status upload_layer(th_cu_store *S, th_model *m, int il) {
    th_layer *L = &m->layers[il];
    th_status s;
    if (L->router.data && (s = upload_moe(S, &m->hp, il, L))) return s;
    s = L->recurrent ? upload_dn(S, &m->hp, il, L) : upload_attn(S, &m->hp, il, L);
    if (s || (L->gate_inp_shexp.data && (s = upload_vec(S, &L->gate_inp_shexp)))) return s;
    if ((s = upload_ffn(S, il, L)) || (s = upload_mat(S, &L->wo))) return s;
    if (L->attn_sinks.data && L->attn_sinks.ne0 * TH_MAX(L->attn_sinks.ne1, 1) != m->hp.n_head)
        return th_set_error(TH_ERR_FORMAT, "layer %d: attn_sinks has %lld values for %d heads", il,
                            (long long)(L->attn_sinks.ne0 * TH_MAX(L->attn_sinks.ne1, 1)), m->hp.n_head);
    th_weight *vecs[] = { &L->attn_norm, &L->bq, &L->bk, &L->bv, &L->bo, &L->bqkv, &L->q_norm, &L->k_norm,
                          &L->post_attn_norm, &L->attn_sinks, &L->q_a_norm, &L->kv_a_norm, &L->ffn_norm,
                          &L->post_ffn_norm, &L->router_b, &L->exp_probs_b, &L->gate_exps_b, &L->up_exps_b,
                          &L->down_exps_b, &L->attn_sub_norm, &L->ffn_sub_norm };
    for (size_t k = 0; k < sizeof vecs / sizeof vecs[0]; k++)
        if ((s = upload_vec(S, vecs[k]))) return s;
    th_weight *all[] = LAYER_WEIGHTS(L);   /* every weight the loader found now has its copy */
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (all[k]->data && !all[k]->dev)
            return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: tensor %s is not used by the CUDA backend", il,
                                all[k]->name ? all[k]->name : "?");
    return TH_OK;
}

/* Every weight of m that may have a device copy, into out (NULL: count only). */
static size_t all_weights(th_model *m, th_weight **out) {
    th_weight *top[] = { &m->tok_embd, &m->output_norm, &m->output, &m->rope_freqs, &m->rope_long, &m->rope_short };
    size_t n = 0;
    for (size_t k = 0; k < sizeof top / sizeof top[0]; k++, n++)
        if (out) out[n] = top[k];
    for (int32_t il = 0; m->layers && il < m->hp.n_layer; il++) {
        th_layer *L = &m->layers[il];
        th_weight *all[] = LAYER_WEIGHTS(L);
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++, n++)
            if (out) out[n] = all[k];
    }
    return n;
}

/* The store's device memory and host records (the weights' dev pointers untouched). */
static void store_release(th_cu_store *S) {
    int prev = -1;
    if (cudaGetDevice(&prev) == cudaSuccess && prev != S->device) cudaSetDevice(S->device);
    th_cu_allocs_free(&S->mem);
    for (size_t i = 0; i < S->n_parts; i++) free(S->parts[i]);
    free(S->parts);
    if (prev >= 0 && prev != S->device) cudaSetDevice(prev);
    free(S->recs);
    free(S->layer_done);
    free(S);
}

static void store_free(th_model *m) {
    th_cu_store *S = m->dev_store;
    if (!S) return;
    store_release(S);
    size_t n = all_weights(m, NULL);
    th_weight **w = malloc(n * sizeof *w);
    if (w) {
        all_weights(m, w);
        for (size_t k = 0; k < n; k++) w[k]->dev = NULL;
        free(w);
    } else {   /* no memory for the list: the same walk, by hand */
        th_weight *top[] = { &m->tok_embd, &m->output_norm, &m->output, &m->rope_freqs, &m->rope_long, &m->rope_short };
        for (size_t k = 0; k < sizeof top / sizeof top[0]; k++) top[k]->dev = NULL;
        for (int32_t il = 0; m->layers && il < m->hp.n_layer; il++) {
            th_layer *L = &m->layers[il];
            th_weight *all[] = LAYER_WEIGHTS(L);
            for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) all[k]->dev = NULL;
        }
    }
    m->dev_store = NULL;
    m->dev_free = NULL;
    m->dev_refresh = NULL;
}

/* What of m the store still lacks for layers (NULL: all): the embedding if layer 0 is
 * one of them, the head if the last is, then the layers. The first call sizes the
 * records for the whole model. */
static th_status upload_all(th_cu_store *S, th_model *m, const bool *layers) {
    th_weight *top[] = { &m->tok_embd, &m->output_norm, &m->output, &m->rope_freqs, &m->rope_long, &m->rope_short };
    int32_t nl = m->hp.n_layer;
    bool first = !S->recs, tied = m->output.data == m->tok_embd.data;
    bool embd = !layers || layers[0], head = !layers || layers[nl - 1];
    if (first) {
        size_t n = sizeof top / sizeof top[0];
        for (int32_t il = 0; il < nl; il++) {
            th_layer *L = &m->layers[il];
            th_weight *all[] = LAYER_WEIGHTS(L);
            n += sizeof all / sizeof all[0];
        }
        if (!(S->recs = calloc(n, sizeof *S->recs)) || !(S->layer_done = calloc((size_t)nl, sizeof(bool))))
            return th_set_error(TH_ERR_NOMEM, "out of memory");
        for (size_t k = 1; k < sizeof top / sizeof top[0]; k++) S->total += k == 2 ? 0 : wbytes(top[k]);
    }
    if ((embd || (tied && head)) && !m->tok_embd.dev) S->total += wbytes(&m->tok_embd);
    if (head && !S->head_done && !tied) S->total += wbytes(&m->output);
    for (int32_t il = 0; il < nl; il++) {
        if ((layers && !layers[il]) || S->layer_done[il]) continue;
        th_layer *L = &m->layers[il];
        th_weight *all[] = LAYER_WEIGHTS(L);
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) S->total += wbytes(all[k]);
    }
    th_status s;
    if ((embd || (tied && head)) && !m->tok_embd.dev && (s = upload_mat(S, &m->tok_embd))) return s;
    S->embd_done |= embd;
    if (head && !S->head_done) {
        if (tied) m->output.dev = m->tok_embd.dev;   /* tied: the same copy */
        else if ((s = upload_mat(S, &m->output))) return s;
        S->head_done = true;
    }
    if (first) {
        for (size_t k = 3; k < sizeof top / sizeof top[0]; k++)
            if ((s = upload_vec(S, top[k]))) return s;
        if ((s = upload_vec(S, &m->output_norm))) return s;
    }
    for (int32_t il = 0; il < nl; il++) {
        if ((layers && !layers[il]) || S->layer_done[il]) continue;
        if ((s = upload_layer(S, m, il))) return s;
        S->layer_done[il] = true;
    }
    if (S->verbose && S->pct != 100) fputc('\n', stderr);
    return TH_OK;
}

static pthread_mutex_t upload_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t store_gen;   /* under upload_lock */

static th_cu_store *store_new(int device, bool verbose) {
    th_cu_store *S = calloc(1, sizeof *S);
    if (!S) return NULL;
    S->device = device;
    S->verbose = verbose;
    S->pct = -1;
    S->gen = ++store_gen;
    return S;
}

/* Live swaps (th_model.dev_refresh; precision/live.c calls it between two steps,
 * after the host weights changed): every weight is uploaded again into a fresh
 * store (the new types, joint groups and per-expert parts as a first upload makes
 * them), the weights' records point at it, and the old store is freed; contexts
 * see the new store number at their next step and drop their CUDA graphs. Until
 * the new store is complete the old one stays in use; on failure it stays (the
 * error says why). Needs the old and the new copies on the device at once. */
static th_status weights_refresh(th_model *m) {
    pthread_mutex_lock(&upload_lock);
    th_cu_store *old = m->dev_store;
    th_status s = TH_OK;
    size_t n = all_weights(m, NULL);
    th_weight **w = malloc(n * sizeof *w);
    void **keep = malloc(n * sizeof *keep);
    th_cu_store *S = old ? store_new(old->device, false) : NULL;
    if (!old) s = th_set_error(TH_ERR_INTERNAL, "GPU weight refresh without device weights");
    else if (!w || !keep || !S) s = th_set_error(TH_ERR_NOMEM, "out of memory");
    int prev = -1;
    if (!s) {
        all_weights(m, w);
        for (size_t k = 0; k < n; k++) { keep[k] = w[k]->dev; w[k]->dev = NULL; }
        if (cudaGetDevice(&prev) == cudaSuccess && prev != old->device) cudaSetDevice(old->device);
        cudaError_t e = cudaDeviceSynchronize();   /* nothing in flight reads the old copies when they go */
        s = e ? th_cu_fail(e, "GPU weight refresh") : upload_all(S, m, old->layer_done);
        if (s) {
            for (size_t k = 0; k < n; k++) w[k]->dev = keep[k];
        } else {
            m->dev_store = S;
            store_release(old);
            S = NULL;
        }
        if (prev >= 0 && prev != old->device) cudaSetDevice(prev);
    }
    if (S) store_release(S);
    free(w);
    free(keep);
    pthread_mutex_unlock(&upload_lock);
    return s;
}

th_status th_cu_weights_upload_layers(th_model *m, bool verbose, const bool *layers) {
    pthread_mutex_lock(&upload_lock);
    th_status s = TH_OK;
    if (!m->dev_store) {
        int dev = 0;
        cudaGetDevice(&dev);
        th_cu_store *S = store_new(dev, verbose || isatty(2));
        if (!S) s = th_set_error(TH_ERR_NOMEM, "out of memory");
        if (S) {
            m->dev_store = S;
            m->dev_free = store_free;
            m->dev_refresh = weights_refresh;
            if ((s = upload_all(S, m, layers))) store_free(m);   /* nothing half-uploaded stays */
        }
    } else {   /* an earlier (mixed) placement may have left layers out */
        s = upload_all(m->dev_store, m, layers);
    }
    pthread_mutex_unlock(&upload_lock);
    return s;
}

th_status th_cu_weights_upload(th_model *m, bool verbose) { return th_cu_weights_upload_layers(m, verbose, NULL); }
