/* gpu_upload.c — puts the model's weights on the device once: every matrix in
 * its file layout, except the types with a SPLIT layout (split.c), which are repacked into the SPLIT
 * layout (split.c: quants and scales in separate arrays) for coalesced loads; Q|K|V and gate|up are
 * fused into one matrix when their types match (and kept fused when the file
 * fuses them); experts stacked in one matrix per gate/up/down (rows of expert e
 * after those of e−1); latent attention's five matrices (MLA, run by gpu_mla.c);
 * vectors (norms, biases, expert biases, sinks) as fp32;
 * each layer's rope constants (base, scaling, YaRN ramp). Prints a progress line
 * when verbose or when stderr is a terminal. */
#include "cuda/gpu_internal.h"
#include "cpu/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

bool th_cu_type_supported(uint32_t t) {
    switch (t) {
    case TH_F32: case TH_F16: case TH_BF16: case TH_Q4_0: case TH_Q4_1: case TH_Q5_0: case TH_Q5_1:
    case TH_Q8_0: case TH_Q2_K: case TH_Q3_K: case TH_Q4_K: case TH_Q5_K: case TH_Q6_K: case TH_IQ4_NL:
    case TH_IQ4_XS: case TH_MXFP4:
        return true;
    default:
        return false;
    }
}

static void progress(th_gpu *g, size_t bytes) {
    g->upload_done += bytes;
    if (!g->verbose || !g->upload_total) return;
    int pct = (int)(100.0 * (double)g->upload_done / (double)g->upload_total);
    if (pct != g->upload_pct) {
        g->upload_pct = pct;
        fprintf(stderr, "\rtheseus: uploading weights to the GPU: %3d%% (%.0f of %.0f MiB)", pct,
                (double)g->upload_done / (1 << 20), (double)g->upload_total / (1 << 20));
        if (pct == 100) fputc('\n', stderr);
    }
}

static th_status check_weight(const th_weight *w) {
    if (!th_cu_type_supported(w->type))
        return th_set_error(TH_ERR_UNSUPPORTED, "tensor %s: type %s has no CUDA kernel", w->name ? w->name : "?",
                            th_type_name(w->type));
    return TH_OK;
}

/* Upload the rows of `n` weights (same type, same row length) as one matrix. */
static th_status upload_mat(th_gpu *g, const th_weight *const *w, int n, th_cu_mat *out) {
    th_status s;
    int64_t rows = 0, K = w[0]->ne0;
    for (int i = 0; i < n; i++) {
        if ((s = check_weight(w[i]))) return s;
        rows += w[i]->ne1;
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
        if ((s = th_cu_alloc(g, &dq, qrow * (size_t)rows, name)) || (s = th_cu_alloc(g, &dsc, srow * (size_t)rows, name)))
            return s;
        out->data = dq;
        out->scales = dsc;
        int64_t r0 = 0;
        for (int i = 0; i < n; i++) {
            int64_t nr = w[i]->ne1;
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
                progress(g, (size_t)c * w[i]->row_bytes);
            }
            free(hq);
            free(hs);
            r0 += nr;
        }
        return TH_OK;
    }
    out->layout = TH_CU_GGUF;
    void *d;
    if ((s = th_cu_alloc(g, &d, out->row_bytes * (size_t)rows, name))) return s;
    out->data = d;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t bytes = w[i]->row_bytes * (size_t)w[i]->ne1;
        for (size_t a = 0; a < bytes; a += (256u << 20)) {
            size_t c = TH_MIN(bytes - a, (size_t)256 << 20);
            cudaError_t e = cudaMemcpy((uint8_t *)d + off + a, (const uint8_t *)w[i]->data + a, c, cudaMemcpyHostToDevice);
            if (e) return th_cu_fail(e, name);
            progress(g, c);
        }
        off += bytes;
    }
    return TH_OK;
}

/* A projection from up to three weights sharing the input: one fused matrix
 * when all types match, else one matrix each. */
static th_status upload_proj(th_gpu *g, const th_weight *a, const th_weight *b, const th_weight *c, th_cu_proj *p) {
    const th_weight *w[3] = { a, b, c };
    int n = c ? 3 : 2;
    memset(p, 0, sizeof *p);
    bool same = true;
    for (int i = 1; i < n; i++) same = same && w[i]->type == w[0]->type && w[i]->row_bytes == w[0]->row_bytes;
    int64_t off = 0;
    th_status s;
    if (same) {
        if ((s = upload_mat(g, w, n, &p->part[0]))) return s;
        p->n = 1;
        p->width = p->part[0].rows;
        return TH_OK;
    }
    for (int i = 0; i < n; i++) {
        if ((s = upload_mat(g, &w[i], 1, &p->part[i]))) return s;
        p->off[i] = off;
        off += w[i]->ne1;
    }
    p->n = n;
    p->width = off;
    return TH_OK;
}

/* A vector (norm weight, bias) as fp32 on the device; absent → NULL. */
static th_status upload_vec(th_gpu *g, const th_weight *w, const float **out) {
    *out = NULL;
    if (!w->data) return TH_OK;
    th_status s;
    if ((s = check_weight(w))) return s;
    int64_t n = w->ne0 * TH_MAX(w->ne1, 1);
    float *tmp = malloc((size_t)n * sizeof(float));
    if (!tmp) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_ref_dequantize(w->type, w->data, tmp, n);
    void *d;
    if ((s = th_cu_alloc(g, &d, (size_t)n * sizeof(float), w->name ? w->name : "vector"))) { free(tmp); return s; }
    cudaError_t e = cudaMemcpy(d, tmp, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
    free(tmp);
    if (e) return th_cu_fail(e, w->name ? w->name : "vector");
    progress(g, w->row_bytes * (size_t)TH_MAX(w->ne1, 1));
    *out = d;
    return TH_OK;
}

static size_t wbytes(const th_weight *w) {
    return w->data ? w->row_bytes * (size_t)TH_MAX(w->ne1, 1) * (size_t)TH_MAX(w->ne2, 1) : 0;
}

static size_t model_bytes(const th_model *m, const th_weight *rope_factors) {
    size_t t = wbytes(&m->tok_embd) + wbytes(&m->output_norm) + wbytes(rope_factors);
    if (m->output.data != m->tok_embd.data) t += wbytes(&m->output);
    for (int i = 0; i < m->hp.n_layer; i++) {
        const th_layer *L = &m->layers[i];
        const th_weight *ws[] = { &L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk, &L->bv, &L->bo,
                                  &L->wqkv, &L->bqkv, &L->q_norm, &L->k_norm, &L->post_attn_norm, &L->ffn_norm,
                                  &L->w_gate, &L->w_up, &L->w_down, &L->post_ffn_norm, &L->router, &L->router_b,
                                  &L->exp_probs_b, &L->gate_exps, &L->up_exps, &L->down_exps, &L->gate_shexp,
                                  &L->up_shexp, &L->down_shexp, &L->attn_sinks, &L->gate_exps_b, &L->up_exps_b,
                                  &L->down_exps_b, &L->wq_a, &L->q_a_norm, &L->wq_b, &L->wkv_a_mqa, &L->kv_a_norm,
                                  &L->wkv_b };
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) t += wbytes(ws[k]);
    }
    return t;
}

/* A weight of ne2 stacked matrices (experts) as one matrix of ne1·ne2 rows. */
static th_status upload_stacked(th_gpu *g, const th_weight *w, th_cu_mat *out) {
    th_weight flat = *w;
    flat.ne1 = w->ne1 * TH_MAX(w->ne2, 1);
    flat.ne2 = 1;
    const th_weight *p = &flat;
    return upload_mat(g, &p, 1, out);
}

static bool shape_is(const th_weight *w, int64_t ne0, int64_t ne1, int64_t ne2) {
    return w->ne0 == ne0 && w->ne1 == ne1 && TH_MAX(w->ne2, 1) == ne2;
}

/* The routed experts of a MoE layer: router, stacked gate/up/down, routing options. */
static th_status upload_moe(th_gpu *g, int il, const th_layer *L, th_cu_moe *M) {
    const th_hparams *hp = &g->m->hp;
    int64_t E = hp->n_embd, X = hp->n_expert, F = L->gate_exps.ne1;
    th_status s;
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
    const th_weight *r = &L->router;
    const float *sel_bias;
    if ((s = upload_mat(g, &r, 1, &M->router)) || (s = upload_stacked(g, &L->gate_exps, &M->gate)) ||
        (s = upload_stacked(g, &L->up_exps, &M->up)) || (s = upload_stacked(g, &L->down_exps, &M->down)) ||
        (s = upload_vec(g, &L->router_b, &M->router_b)) || (s = upload_vec(g, &L->exp_probs_b, &sel_bias)))
        return s;
    if ((L->gate_exps_b.data && !shape_is(&L->gate_exps_b, F, X, 1)) || (L->up_exps_b.data && !shape_is(&L->up_exps_b, F, X, 1)) ||
        (L->down_exps_b.data && !shape_is(&L->down_exps_b, E, X, 1)))
        return th_set_error(TH_ERR_FORMAT, "layer %d: expert biases do not have the shapes [F,%lld] / [%lld,%lld]", il,
                            (long long)X, (long long)E, (long long)X);
    if ((s = upload_vec(g, &L->gate_exps_b, &M->gate_b)) || (s = upload_vec(g, &L->up_exps_b, &M->up_b)) ||
        (s = upload_vec(g, &L->down_exps_b, &M->down_b)))
        return s;
    M->n_expert = (int32_t)X;
    M->k = hp->n_expert_used;
    M->F = F;
    M->route = (th_cu_router){ .n_expert = (int32_t)X, .k = hp->n_expert_used, .gating = hp->gating,
                               .norm = hp->expert_weights_norm, .scale = hp->expert_weights_scale,
                               .sel_bias = sel_bias, .n_group = ng, .topk_group = hp->n_expert_groups_used };
    return TH_OK;
}

/* Multi-head latent attention's weights (gpu_mla.c runs them): q (direct or
 * through the q LoRA and its norm), the latent projection, its norm, Wkv_b. */
static th_status upload_mla(th_gpu *g, const th_layer *L, th_cu_mla *M) {
    const th_weight *wq = &L->wq, *wq_a = &L->wq_a, *wq_b = &L->wq_b, *wkv_a = &L->wkv_a_mqa, *wkv_b = &L->wkv_b;
    th_status s;
    if (wq_a->data) {
        if ((s = upload_mat(g, &wq_a, 1, &M->wq_a)) || (s = upload_mat(g, &wq_b, 1, &M->wq_b)) ||
            (s = upload_vec(g, &L->q_a_norm, &M->q_a_norm)))
            return s;
    } else if ((s = upload_mat(g, &wq, 1, &M->wq))) {
        return s;
    }
    if ((s = upload_mat(g, &wkv_a, 1, &M->wkv_a)) || (s = upload_mat(g, &wkv_b, 1, &M->wkv_b)) ||
        (s = upload_vec(g, &L->kv_a_norm, &M->kv_a_norm)))
        return s;
    M->on = true;
    return TH_OK;
}

/* Q|K|V (separate or fused with its fused bias) and the per-head or whole-width
 * Q/K norms; or the latent attention's weights. */
static th_status upload_attn(th_gpu *g, int il, const th_layer *L, th_cu_layer *D) {
    const th_hparams *hp = &g->m->hp;
    int64_t q_w = (int64_t)hp->n_head * hp->head_dim, k_w = (int64_t)hp->n_head_kv * hp->head_dim;
    th_status s;
    if (L->wkv_a_mqa.data) return upload_mla(g, L, &D->mla);
    if (L->wqkv.data) {
        const th_weight *w = &L->wqkv;
        if ((s = upload_mat(g, &w, 1, &D->qkv.part[0]))) return s;
        D->qkv.n = 1;
        D->qkv.width = D->qkv.part[0].rows;
        const float *b;
        if ((s = upload_vec(g, &L->bqkv, &b))) return s;
        if (b) { D->bq = b; D->bk = b + q_w; D->bv = b + q_w + k_w; }
    } else {
        if (!L->wq.data || !L->wk.data || !L->wv.data)
            return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: the CUDA backend needs Q/K/V weights (separate or fused)", il);
        if ((s = upload_proj(g, &L->wq, &L->wk, &L->wv, &D->qkv))) return s;
        if ((s = upload_vec(g, &L->bq, &D->bq)) || (s = upload_vec(g, &L->bk, &D->bk)) || (s = upload_vec(g, &L->bv, &D->bv)))
            return s;
    }
    D->qk_norm_full = L->q_norm.data && L->q_norm.ne0 != hp->head_dim;
    if (D->qk_norm_full && (L->q_norm.ne0 != q_w || !L->k_norm.data || L->k_norm.ne0 != k_w))
        return th_set_error(TH_ERR_FORMAT, "layer %d: whole-width q/k norms must be %lld and %lld wide", il, (long long)q_w, (long long)k_w);
    return TH_OK;
}

/* The dense FFN (gate|up separate or fused [gate; up]), or the experts of a MoE
 * layer plus its shared experts as the dense part. */
static th_status upload_ffn(th_gpu *g, int il, const th_layer *L, th_cu_layer *D) {
    const th_weight *gate = L->w_gate.data ? &L->w_gate : NULL, *up = &L->w_up, *down = &L->w_down;
    th_status s;
    if (L->router.data) {
        if ((s = upload_moe(g, il, L, &D->moe))) return s;
        if (!L->gate_shexp.data && !L->up_shexp.data && !L->down_shexp.data) return TH_OK;
        gate = &L->gate_shexp, up = &L->up_shexp, down = &L->down_shexp;
        if (!gate->data) return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: shared experts without a gate weight", il);
    }
    if (!up->data || !down->data)
        return th_set_error(TH_ERR_UNSUPPORTED, "layer %d: the CUDA backend needs up and down FFN weights", il);
    if (gate) {
        if ((s = upload_proj(g, gate, up, NULL, &D->gu))) return s;
    } else {  /* fused [gate; up] rows: already the gu layout (gate at [0,F), up at [F,2F)) */
        if ((s = upload_mat(g, &up, 1, &D->gu.part[0]))) return s;
        D->gu.n = 1;
        D->gu.width = D->gu.part[0].rows;
    }
    if ((s = upload_mat(g, &down, 1, &D->down))) return s;
    if (D->gu.width != 2 * D->down.K)
        return th_set_error(TH_ERR_FORMAT, "layer %d: gate/up give %lld outputs but down takes %lld inputs", il,
                            (long long)D->gu.width, (long long)D->down.K);
    return TH_OK;
}

/* The layer's rope: base and scaling as the CPU's setup_rope (src/model.c). */
static void rope_layer(const th_hparams *hp, const th_layer *L, th_cu_layer *D) {
    D->theta_scale = powf(L->rope_base, -2.0f / (float)hp->n_rot);
    D->freq_scale = L->rope_freq_scale;
    D->corr_lo = D->corr_hi = 0.0f;
    if (hp->rope_ext_factor != 0.0f)
        th_rope_corr_dims(hp->n_rot, hp->rope_n_ctx_orig, L->rope_base, hp->rope_beta_fast, hp->rope_beta_slow,
                          &D->corr_lo, &D->corr_hi);
}

static th_status upload_layer(th_gpu *g, int il) {
    const th_model *m = g->m;
    const th_layer *L = &m->layers[il];
    th_cu_layer *D = &g->L[il];
    th_status s;
    if ((s = upload_attn(g, il, L, D)) || (s = upload_ffn(g, il, L, D))) return s;
    const th_weight *wo = &L->wo;
    if ((s = upload_mat(g, &wo, 1, &D->wo))) return s;
    if ((s = upload_vec(g, &L->attn_norm, &D->attn_norm)) || (s = upload_vec(g, &L->ffn_norm, &D->ffn_norm)) ||
        (s = upload_vec(g, &L->post_attn_norm, &D->post_attn_norm)) || (s = upload_vec(g, &L->post_ffn_norm, &D->post_ffn_norm)) ||
        (s = upload_vec(g, &L->bo, &D->bo)) || (s = upload_vec(g, &L->q_norm, &D->q_norm)) || (s = upload_vec(g, &L->k_norm, &D->k_norm)))
        return s;
    if (L->attn_sinks.data && L->attn_sinks.ne0 * TH_MAX(L->attn_sinks.ne1, 1) != m->hp.n_head)
        return th_set_error(TH_ERR_FORMAT, "layer %d: attn_sinks has %lld values for %d heads", il,
                            (long long)(L->attn_sinks.ne0 * TH_MAX(L->attn_sinks.ne1, 1)), m->hp.n_head);
    if ((s = upload_vec(g, &L->attn_sinks, &D->sinks))) return s;
    D->window = L->window;
    rope_layer(&m->hp, L, D);
    return TH_OK;
}

/* rope_factors: the rope frequency factors the context uses (th_gpu_init), or NULL. */
th_status th_cu_upload_weights(th_gpu *g, const th_weight *rope_factors) {
    const th_model *m = g->m;
    const th_weight none = { 0 }, *rf = rope_factors ? rope_factors : &none;
    th_status s;
    g->upload_total = model_bytes(m, rf);
    g->upload_done = 0;
    g->upload_pct = -1;
    g->L = calloc((size_t)m->hp.n_layer, sizeof *g->L);
    if (!g->L) return th_set_error(TH_ERR_NOMEM, "out of memory");
    const th_weight *e = &m->tok_embd;
    if ((s = upload_mat(g, &e, 1, &g->embd))) return s;
    if (m->output.data == m->tok_embd.data) {
        g->out = g->embd;
    } else {
        const th_weight *o = &m->output;
        if ((s = upload_mat(g, &o, 1, &g->out))) return s;
    }
    if ((s = upload_vec(g, &m->output_norm, &g->out_norm)) || (s = upload_vec(g, rf, &g->rope_freqs))) return s;
    for (int il = 0; il < m->hp.n_layer; il++)
        if ((s = upload_layer(g, il))) return s;
    if (g->verbose && g->upload_pct != 100) fputc('\n', stderr);
    return TH_OK;
}
