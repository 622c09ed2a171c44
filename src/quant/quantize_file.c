/* quantize_file.c — th_quantize_file: rewrite a GGUF with its weights converted to
 * a llama.cpp mix (Q4_K_M, Q8_0, F16 ...). Owns the per-tensor type rules (the
 * same choices as llama-quantize's llama_tensor_get_type without an importance
 * matrix: output.weight to Q6_K, attn_v / ffn_down bumps by layer, row-length
 * fallbacks, 1-D tensors and norms left alone), the row-parallel conversion on
 * the thread pool (decode a row to f32 if needed, then encode it with
 * th_quantize_weights) and writing the result (metadata copied, file type and
 * quantization version set, tensors in input order, temp file then rename).
 * Memory stays bounded by the largest converted tensor: the GGUF writer first
 * streams the whole layout with zeros where converted tensors go, then each
 * tensor is converted and written into its place.
 * With a precision config (th_quantize_params.config) its rules decide the types
 * on top of the mix (or of the source's types); an expert given a type of its own
 * is written as an extra 2-D tensor "NAME.E" right after its 3-D tensor, which
 * keeps the common type for every expert (docs/precision.md).
 */
#include "quant/quantize_file.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "precision/precision.h"
#include "quant/qn.h"
#include "quant/ref_encode.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

/* llama_ftype numbers (llama.h) of the mixes we write. */
enum {
    FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_BF16 = 32,
};

static const th_qmix mixes[] = {
    { "F32", FT_F32, TH_F32 },         { "F16", FT_F16, TH_F16 },         { "BF16", FT_BF16, TH_BF16 },
    { "Q4_0", FT_Q4_0, TH_Q4_0 },      { "Q4_1", FT_Q4_1, TH_Q4_1 },      { "Q5_0", FT_Q5_0, TH_Q5_0 },
    { "Q5_1", FT_Q5_1, TH_Q5_1 },      { "Q8_0", FT_Q8_0, TH_Q8_0 },      { "Q2_K", FT_Q2_K, TH_Q2_K },
    { "Q3_K_S", FT_Q3_K_S, TH_Q3_K },  { "Q3_K_M", FT_Q3_K_M, TH_Q3_K },  { "Q3_K_L", FT_Q3_K_L, TH_Q3_K },
    { "Q4_K_S", FT_Q4_K_S, TH_Q4_K },  { "Q4_K_M", FT_Q4_K_M, TH_Q4_K },  { "Q5_K_S", FT_Q5_K_S, TH_Q5_K },
    { "Q5_K_M", FT_Q5_K_M, TH_Q5_K },  { "Q6_K", FT_Q6_K, TH_Q6_K },      { "IQ4_NL", FT_IQ4_NL, TH_IQ4_NL },
    { "IQ4_XS", FT_IQ4_XS, TH_IQ4_XS },
    /* theseus's own qN (docs/qn.md): qN for every matrix but the output side (qn_rules),
     * general.file_type 1000 + n */
    { "q2", TH_Q2, TH_Q2 }, { "q3", TH_Q3, TH_Q3 }, { "q4", TH_Q4, TH_Q4 }, { "q5", TH_Q5, TH_Q5 },
    { "q6", TH_Q6, TH_Q6 }, { "q7", TH_Q7, TH_Q7 }, { "q8", TH_Q8, TH_Q8 },
    /* 1-bit and ternary (docs/ternary.md): uniform too, like the peers' llama-quantize --pure;
     * file types are llama.cpp's (TQ*) and ik_llama.cpp's llama_ftype numbers */
    { "TQ1_0", 36, TH_TQ1_0 }, { "TQ2_0", 37, TH_TQ2_0 }, { "Q1_0_G128", 41, TH_Q1_0_G128 },
    { "IQ1_BN", 136, TH_IQ1_BN }, { "IQ2_BN", 137, TH_IQ2_BN },
};
#define N_MIXES (sizeof mixes / sizeof mixes[0])

const th_qmix *th_qmix_find(const char *name) {
    if (!name) return NULL;
    static const char *const alias[][2] = { { "Q3_K", "Q3_K_M" }, { "Q4_K", "Q4_K_M" }, { "Q5_K", "Q5_K_M" } };
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcasecmp(name, alias[i][0])) name = alias[i][1];
    for (size_t i = 0; i < N_MIXES; i++)
        if (!strcasecmp(name, mixes[i].name)) return &mixes[i];
    return NULL;
}

const char *th_quantize_type_names(void) {
    static char buf[320];
    if (!buf[0]) {
        size_t len = 0;
        for (size_t i = 0; i < N_MIXES; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? " " : "", mixes[i].name);
    }
    return buf;
}

/* ---------------------------------------------------------------- type rules */

enum category {
    CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_OUTPUT,
    CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER
};

static enum category category_of(const char *name) {
    if (!strcmp(name, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return CAT_TOKEN_EMBD;
    static const struct { const char *part; enum category cat; } parts[] = {
        { "attn_qkv.weight", CAT_ATTN_QKV }, { "attn_kv_b.weight", CAT_ATTN_KV_B }, { "attn_v.weight", CAT_ATTN_V },
        { "attn_k.weight", CAT_ATTN_K }, { "attn_q.weight", CAT_ATTN_Q }, { "attn_output.weight", CAT_ATTN_OUTPUT },
        { "ffn_up", CAT_FFN_UP }, { "ffn_gate", CAT_FFN_GATE }, { "ffn_down", CAT_FFN_DOWN },
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(name, parts[i].part)) return parts[i].cat;
    return CAT_OTHER;
}

static bool is_attn_v_like(enum category c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

/* Dimensions ignoring trailing 1s (ggml_n_dims). */
static int real_dims(const th_qtensor *t) {
    int n = 1;
    for (uint32_t d = 1; d < t->n_dims && d < 4; d++)
        if (t->ne[d] > 1) n = (int)d + 1;
    return n;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* llama-quantize's tensor_allows_quantization: 2-D+ weights, not norms, gates,
 * position/type embeddings or the small special tensors of some families. */
bool th_qtensor_quantizable(const th_qtensor *t) {
    if (real_dims(t) < 2 || !ends_with(t->name, "weight")) return false;
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_first.weight",
        "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
        "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strstr(t->name, never[i])) return false;
    return strcmp(t->name, "position_embd.weight") && strcmp(t->name, "token_types.weight");
}

static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

typedef struct plan_state {
    const th_qmix *mix;
    const th_qmodel *m;
    bool tied, falcon, is_70b;
    int n_gqa, n_attn_v, i_attn_v, i_ffn_down;
} plan_state;

/* Layer of an ffn_down tensor: its running index, or (MoE) the blk.N in its name. */
static int ffn_layer(const plan_state *s, const char *name) {
    int layer = s->i_ffn_down;
    if (s->m->n_expert > 1 && sscanf(name, "blk.%d.", &layer) != 1) layer = s->i_ffn_down;
    return layer;
}

static uint32_t rule_attn_v(plan_state *s, uint32_t t) {
    int ft = (int)s->mix->ftype;
    if (ft == FT_Q2_K) t = s->n_gqa >= 4 ? TH_Q4_K : TH_Q3_K;
    else if (ft == FT_Q3_K_M) t = s->i_attn_v < 2 ? TH_Q5_K : TH_Q4_K;
    else if (ft == FT_Q3_K_L) t = TH_Q5_K;
    else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && s->n_gqa >= 4) t = TH_Q5_K;
    else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(s->i_attn_v, s->n_attn_v)) t = TH_Q6_K;
    else if (ft == FT_Q4_K_S && s->i_attn_v < 4) t = TH_Q5_K;
    if (s->is_70b && (t == TH_Q3_K || t == TH_Q4_K)) t = TH_Q5_K;
    if (s->m->n_expert == 8) t = TH_Q8_0;
    s->i_attn_v++;
    return t;
}

static uint32_t rule_ffn_down(plan_state *s, const char *name, uint32_t t) {
    int ft = (int)s->mix->ftype, i = ffn_layer(s, name), n = s->m->n_layer;
    if (ft == FT_Q2_K) t = TH_Q3_K;
    else if (ft == FT_Q3_K_M) t = i < n / 16 ? TH_Q5_K : (!s->falcon || use_more_bits(i, n)) ? TH_Q4_K : TH_Q3_K;
    else if (ft == FT_Q3_K_L) t = s->falcon ? TH_Q4_K : TH_Q5_K;
    else if (ft == FT_Q4_K_M) {
        if (s->falcon) t = i < n / 16 ? TH_Q6_K : use_more_bits(i, n) ? TH_Q5_K : TH_Q4_K;
        else if (use_more_bits(i, n)) t = TH_Q6_K;
    } else if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !s->m->has_imatrix) t = TH_Q5_K;
    else if (ft == FT_Q5_K_M && use_more_bits(i, n)) t = TH_Q6_K;
    else if (ft == FT_Q4_K_S && !s->falcon && i < n / 8) t = TH_Q5_K;
    else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && s->m->has_imatrix && i < n / 8)
        t = ft == FT_Q4_0 ? TH_Q4_1 : TH_Q5_1;   /* llama.cpp guards the first ffn_down layers, with an imatrix only */
    s->i_ffn_down++;
    return t;
}

static uint32_t rule_attn_output(const plan_state *s, uint32_t t) {
    int ft = (int)s->mix->ftype;
    if (s->falcon) return ft == FT_Q3_K_L ? TH_Q4_K : t;
    if (s->m->n_expert == 8) {
        bool bump = ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL || ft == FT_Q4_K_S ||
                    ft == FT_Q4_K_M || ft == FT_IQ4_XS;
        return bump ? TH_Q5_K : t;
    }
    if (ft == FT_Q2_K) return TH_Q3_K;
    if (ft == FT_Q3_K_M) return TH_Q4_K;
    if (ft == FT_Q3_K_L) return TH_Q5_K;
    return t;
}

/* The qN mixes (docs/qn.md "Which tensors get qN"): every matrix gets qN except the
 * output side — output.weight, or token_embd.weight when the model ties it to the
 * output — which gets what llama-quantize gives it for its own ftypes: Q6_K (Q8_0 where
 * the row is not a multiple of 256, llama.cpp's fallback; Q8_0 too where the row is not
 * a multiple of qN's 64, as llama.cpp does when the ftype's block does not fit), except
 * for q8, which keeps it (as llama.cpp's Q8_0 ftype keeps Q8_0). */
static uint32_t qn_rules(const plan_state *s, const th_qtensor *t, uint32_t type) {
    enum category c = category_of(t->name);
    if (!(c == CAT_OUTPUT || (s->tied && c == CAT_TOKEN_EMBD)) || type == TH_Q8) return type;
    return t->ne[0] % th_type_info_get(type)->block != 0 ? TH_Q8_0 : TH_Q6_K;
}

/* llama_tensor_get_type_impl, restricted to the mixes above. */
static uint32_t mix_rules(plan_state *s, const th_qtensor *t, uint32_t type) {
    enum category c = category_of(t->name);
    if (th_is_qn(type)) return qn_rules(s, t, type);
    if (c == CAT_OUTPUT || (s->tied && c == CAT_TOKEN_EMBD)) {
        const th_type_info *ti = th_type_info_get(type);
        if (s->falcon || t->ne[0] % ti->block != 0) return TH_Q8_0;
        return type != TH_Q8_0 ? TH_Q6_K : type;
    }
    if (c == CAT_TOKEN_EMBD) return type;
    if (is_attn_v_like(c)) return rule_attn_v(s, type);
    if (c == CAT_ATTN_K) return s->m->n_expert == 8 ? TH_Q8_0 : type;
    if (c == CAT_FFN_DOWN) return rule_ffn_down(s, t->name, type);
    if (c == CAT_ATTN_OUTPUT) return rule_attn_output(s, type);
    return type;
}

/* A type whose block does not divide the row length falls back as llama.cpp
 * c392e50 does (llama-quant.cpp: Q2_K, Q3_K and IQ4_XS to IQ4_NL, Q4_K to Q5_0,
 * Q5_K to Q5_1, Q6_K to Q8_0; then F16 if the 32-block does not fit either). */
static uint32_t row_fallback(uint32_t type, uint64_t ncols, int *n_fallback) {
    if (ncols % th_type_info_get(type)->block == 0) return type;
    (*n_fallback)++;
    uint32_t fb;
    switch (type) {
    case TH_IQ4_XS: case TH_Q2_K: case TH_Q3_K: fb = TH_IQ4_NL; break;
    case TH_Q4_K: fb = TH_Q5_0; break;
    case TH_Q5_K: fb = TH_Q5_1; break;
    case TH_Q6_K: fb = TH_Q8_0; break;
    case TH_TQ1_0: case TH_TQ2_0: fb = TH_Q4_0; break;   /* llama.cpp's fallback for them */
    default: fb = TH_F16; break;   /* llama.cpp stops here; F16 always fits */
    }
    return ncols % th_type_info_get(fb)->block == 0 ? fb : TH_F16;
}

/* The 1-bit / ternary mixes give every matrix the one type (no per-tensor rules). */
static bool uniform_mix(uint32_t base) {
    return base == TH_TQ1_0 || base == TH_TQ2_0 || base == TH_Q1_0_G128 || base == TH_IQ1_BN ||
           base == TH_IQ2_BN;
}

/* llama.cpp visits tensors sorted by layer (non-layer first) then name; the
 * running attn_v / ffn_down counters depend on that order. */
static int layer_of(const char *name) {
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = -1;
    return layer;
}

static int by_layer_then_name(const void *a, const void *b, void *base) {
    const th_qtensor *t = base, *x = &t[*(const size_t *)a], *y = &t[*(const size_t *)b];
    int lx = layer_of(x->name), ly = layer_of(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->name, y->name);
}

int th_qplan_types(const th_qmix *mix, bool pure, const th_qmodel *m, const th_qtensor *t, size_t n, uint32_t *out) {
    plan_state s = { .mix = mix, .m = m, .tied = true };
    s.falcon = !strcmp(m->arch, "falcon");
    s.is_70b = !strcmp(m->arch, "llama") && m->n_layer == 80 && m->n_head != m->n_head_kv;
    s.n_gqa = m->n_head_kv > 0 ? m->n_head / m->n_head_kv : 1;
    for (size_t i = 0; i < n; i++) {
        enum category c = category_of(t[i].name);
        if (is_attn_v_like(c)) s.n_attn_v++;
        if (c == CAT_OUTPUT) s.tied = false;
    }
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) { th_set_error(TH_ERR_NOMEM, "quantize: out of memory"); return -1; }
    for (size_t i = 0; i < n; i++) order[i] = i;
    qsort_r(order, n, sizeof *order, by_layer_then_name, (void *)t);
    int n_fallback = 0;
    bool quantized_base = th_type_info_get(mix->base)->block > 1;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        const th_qtensor *ti = &t[i];
        if (!th_qtensor_quantizable(ti)) { out[i] = ti->type; continue; }
        uint32_t type = mix->base;
        if (quantized_base) {
            if (!pure && !uniform_mix(mix->base)) type = mix_rules(&s, ti, type);
            type = row_fallback(type, ti->ne[0], &n_fallback);
        }
        out[i] = type;
    }
    free(order);
    return n_fallback;
}

/* ---------------------------------------------------------------- conversion */

/* One tensor's rows, split evenly across the pool's threads. */
typedef struct convert_job {
    const uint8_t *src;
    uint32_t src_type, dst_type;
    uint64_t src_row_bytes, dst_row_bytes;
    int64_t ne0, n_rows;
    uint8_t *dst;
    float *scratch;        /* ne0 floats per thread */
    int64_t *bad_row;      /* per thread: first row with a NaN/Inf, or -1 */
    const float *qw;       /* importance per column and expert (ne0 per slice), or NULL */
    int64_t slice_rows, n_slices;   /* rows per expert slice of qw, slices in qw */
    bool qn_plain;         /* qN rows by th_qn_quantize_plain (--qn-rounding plain) */
} convert_job;

static bool all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

static void convert_rows(void *arg, int ith, int nth) {
    const convert_job *j = arg;
    float *row = j->scratch + (size_t)ith * (size_t)j->ne0;
    int64_t r0 = j->n_rows * ith / nth, r1 = j->n_rows * (ith + 1) / nth;
    j->bad_row[ith] = -1;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *in = j->src + (uint64_t)r * j->src_row_bytes;
        if (j->src_type == TH_F32) memcpy(row, in, (size_t)j->ne0 * sizeof(float));
        else th_ref_dequantize(j->src_type, in, row, j->ne0);
        if (!all_finite(row, j->ne0)) { j->bad_row[ith] = r; return; }
        const float *qw = j->qw ? j->qw + (r / j->slice_rows) % j->n_slices * j->ne0 : NULL;
        uint8_t *out = j->dst + (uint64_t)r * j->dst_row_bytes;
        if (j->qn_plain && th_is_qn(j->dst_type)) th_qn_quantize_plain((int)(j->dst_type - TH_Q2) + 2, row, out, j->ne0);
        else th_quantize_weights_imat(j->dst_type, row, out, j->ne0, qw);
    }
}

th_status th_quantize_rows(th_pool *pool, const void *src, uint32_t src_type, uint32_t dst_type, int64_t ne0,
                           int64_t rows, void *dst, const char *name) {
    int nth = th_pool_size(pool);
    convert_job j = { .src = src, .src_type = src_type, .dst_type = dst_type, .ne0 = ne0, .n_rows = rows, .dst = dst };
    if (!th_row_bytes(src_type, (uint64_t)ne0, &j.src_row_bytes) || !th_row_bytes(dst_type, (uint64_t)ne0, &j.dst_row_bytes))
        return th_set_error(TH_ERR_FORMAT, "tensor %s: rows of %lld values cannot be %s", name, (long long)ne0,
                            th_type_name(dst_type));
    const th_type_info *ti = th_type_info_get(src_type);
    if (!ti || !ti->supported || !ti->dequantize)
        return th_set_error(TH_ERR_UNSUPPORTED, "tensor %s: cannot convert from %s (no decoder)", name, th_type_name(src_type));
    if (!th_can_quantize_weights(dst_type))
        return th_set_error(TH_ERR_UNSUPPORTED, "tensor %s: no encoder for %s", name, th_type_name(dst_type));
    j.scratch = malloc((size_t)nth * (size_t)ne0 * sizeof(float));
    j.bad_row = malloc((size_t)nth * sizeof *j.bad_row);
    th_status s = j.scratch && j.bad_row ? TH_OK : th_set_error(TH_ERR_NOMEM, "tensor %s: out of memory", name);
    if (!s) th_pool_run(pool, convert_rows, &j);
    for (int k = 0; !s && k < nth; k++)
        if (j.bad_row[k] >= 0)
            s = th_set_error(TH_ERR_FORMAT, "tensor %s: row %" PRId64 " holds a NaN or infinite value", name, j.bad_row[k]);
    free(j.scratch);
    free(j.bad_row);
    return s;
}

/* One tensor of the output: a whole input tensor, or (a precision config's
 * per-expert type) one expert of a 3-D input tensor as a 2-D tensor "NAME.E". */
typedef struct qout {
    uint64_t src;          /* input tensor index */
    int32_t expert;        /* -1: the whole tensor */
    char *name;            /* owned when expert >= 0, else the input's name */
    uint32_t type, n_dims;
    uint64_t ne[4];
    uint64_t bytes;        /* bytes in the output */
    uint64_t offset;       /* absolute offset in the output file */
} qout;

typedef struct qctx {
    gguf_file *f;
    th_qtensor *t;         /* per input tensor: NUL-terminated name, type, shape */
    uint32_t *out_type;    /* per input tensor: its type in the output */
    qout *out;
    uint64_t n_out;
    th_pool *pool;
    float *scratch;
    int64_t *bad_row;
    float **qw;            /* per input tensor: its importance (values / ncall), or NULL */
    th_imatrix *im;
    int n_threads;
    int64_t max_ne0;       /* longest row converted */
    uint64_t max_out;      /* largest converted tensor, bytes */
    bool qn_plain;         /* th_quantize_params.qn_plain_rounding */
} qctx;

/* The input bytes an output is made from (one expert's slice, or the whole tensor). */
static const uint8_t *source_bytes(const qctx *c, const qout *o, uint64_t *rows) {
    const gguf_tensor *gt = &c->f->tensors[o->src];
    *rows = o->ne[1] * o->ne[2] * o->ne[3];
    if (o->expert < 0) return gt->data;
    uint64_t rb;
    th_row_bytes(gt->type, gt->ne[0], &rb);   /* validated by the reader */
    return (const uint8_t *)gt->data + (uint64_t)o->expert * gt->ne[1] * rb;
}

static bool is_copy(const qctx *c, const qout *o) { return o->type == c->f->tensors[o->src].type; }

static th_status convert_tensor(qctx *c, const qout *o, uint8_t *dst) {
    const gguf_tensor *gt = &c->f->tensors[o->src];
    uint64_t rows;
    convert_job j = { .src = source_bytes(c, o, &rows), .src_type = gt->type, .dst_type = o->type,
                      .ne0 = (int64_t)gt->ne[0], .dst = dst, .scratch = c->scratch, .bad_row = c->bad_row,
                      .qn_plain = c->qn_plain };
    j.n_rows = (int64_t)rows;   /* the reader checked the element count */
    if (c->qw && c->qw[o->src]) {   /* sizes checked by th_qimatrix_match: ne0 * ne2 values */
        j.qw = c->qw[o->src] + (o->expert >= 0 ? (uint64_t)o->expert * gt->ne[0] : 0);
        j.slice_rows = (int64_t)TH_MAX(gt->ne[1], 1);
        j.n_slices = o->expert >= 0 ? 1 : (int64_t)TH_MAX(gt->ne[2], 1);
    }
    th_row_bytes(gt->type, gt->ne[0], &j.src_row_bytes);   /* both checked by plan_sizes */
    th_row_bytes(j.dst_type, gt->ne[0], &j.dst_row_bytes);
    th_pool_run(c->pool, convert_rows, &j);
    for (int k = 0; k < c->n_threads; k++)
        if (c->bad_row[k] >= 0)
            return th_set_error(TH_ERR_FORMAT, "tensor %s: row %" PRId64 " holds a NaN or infinite value", o->name,
                                c->bad_row[k]);
    return TH_OK;
}

/* Every conversion the plan needs must have a decoder and an encoder and a size
 * that fits; notes each output size, the longest row converted (the per-thread
 * scratch) and the largest converted tensor (the output buffer). */
static th_status plan_sizes(qctx *c) {
    for (uint64_t k = 0; k < c->n_out; k++) {
        qout *o = &c->out[k];
        const gguf_tensor *gt = &c->f->tensors[o->src];
        uint32_t from = gt->type, to = o->type;
        uint64_t row_bytes, rows = o->ne[1] * o->ne[2] * o->ne[3];
        if (!th_row_bytes(to, gt->ne[0], &row_bytes) || !th_mul_u64(row_bytes, rows, &o->bytes) || o->bytes > SIZE_MAX)
            return th_set_error(TH_ERR_FORMAT, "tensor %s: shape [%" PRIu64 ", %" PRIu64 "] cannot be stored as %s",
                                o->name, gt->ne[0], rows, th_type_name(to));
        if (from == to) continue;
        c->max_ne0 = TH_MAX(c->max_ne0, (int64_t)gt->ne[0]);
        c->max_out = TH_MAX(c->max_out, o->bytes);
        const th_type_info *ti = th_type_info_get(from);
        if (!ti || !ti->supported || ti->block == 0)
            return th_set_error(TH_ERR_UNSUPPORTED, "tensor %s: cannot convert from %s (no decoder for that type)",
                                o->name, th_type_name(from));
        if (!th_can_quantize_weights(to))
            return th_set_error(TH_ERR_UNSUPPORTED, "tensor %s: no encoder for %s", o->name, th_type_name(to));
    }
    return TH_OK;
}

static void read_model_info(const gguf_file *f, th_qmodel *m, char *arch, size_t cap) {
    gguf_str s;
    arch[0] = 0;
    if (gguf_get_str(f, "general.architecture", &s) && s.len < cap && !memchr(s.ptr, 0, s.len)) {
        memcpy(arch, s.ptr, s.len);
        arch[s.len] = 0;
    }
    m->arch = arch;
    char key[160];
    uint32_t v;
#define META_U32(field, suffix) \
    snprintf(key, sizeof key, "%s." suffix, arch); \
    m->field = gguf_get_u32(f, key, &v) && v <= INT32_MAX ? (int)v : 0;
    META_U32(n_layer, "block_count");
    META_U32(n_head, "attention.head_count");
    META_U32(n_head_kv, "attention.head_count_kv");
    META_U32(n_expert, "expert_count");
#undef META_U32
    if (m->n_head_kv == 0) m->n_head_kv = m->n_head;
}

/* Tensor list with NUL-terminated names (the reader's are not). */
static th_status describe_tensors(qctx *c) {
    uint64_t n = c->f->n_tensors;
    c->t = calloc(n ? n : 1, sizeof *c->t);
    c->out_type = calloc(n ? n : 1, sizeof *c->out_type);
    if (!c->t || !c->out_type) return th_set_error(TH_ERR_NOMEM, "quantize: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *gt = &c->f->tensors[i];
        char *name = malloc(gt->name.len + 1);
        if (!name) return th_set_error(TH_ERR_NOMEM, "quantize: out of memory");
        memcpy(name, gt->name.ptr, gt->name.len);
        name[gt->name.len] = 0;
        c->t[i] = (th_qtensor){ name, gt->type, gt->n_dims, { gt->ne[0], gt->ne[1], gt->ne[2], gt->ne[3] } };
    }
    return TH_OK;
}

/* The outputs: every input tensor in llama-quantize's order (non-layer tensors,
 * then by layer; by name within each), so a mix gives llama-quantize's file byte
 * for byte; each followed by its experts that have a type of their own
 * (expert_type[i]: NULL, or ne[2] types). */
static th_status plan_outputs(qctx *c, uint32_t *const *expert_type) {
    uint64_t n = c->f->n_tensors, extra = 0;
    for (uint64_t i = 0; expert_type && i < n; i++)
        for (uint64_t e = 0; expert_type[i] && e < c->t[i].ne[2]; e++) extra += expert_type[i][e] != c->out_type[i];
    c->out = calloc(n + extra + 1, sizeof *c->out);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!c->out || !order) { free(order); return th_set_error(TH_ERR_NOMEM, "quantize: out of memory"); }
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    qsort_r(order, n, sizeof *order, by_layer_then_name, (void *)c->t);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = order[k];
        const th_qtensor *t = &c->t[i];
        c->out[c->n_out++] = (qout){ .src = i, .expert = -1, .name = (char *)t->name, .type = c->out_type[i],
                                     .n_dims = t->n_dims, .ne = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] } };
        for (uint64_t e = 0; expert_type && expert_type[i] && e < t->ne[2]; e++) {
            if (expert_type[i][e] == c->out_type[i]) continue;
            size_t len = strlen(t->name) + 24;
            char *name = malloc(len);
            if (!name) { free(order); return th_set_error(TH_ERR_NOMEM, "quantize: out of memory"); }
            snprintf(name, len, "%s.%" PRIu64, t->name, e);
            c->out[c->n_out++] = (qout){ .src = i, .expert = (int32_t)e, .name = name, .type = expert_type[i][e],
                                         .n_dims = 2, .ne = { t->ne[0], t->ne[1], 1, 1 } };
        }
    }
    free(order);
    return TH_OK;
}

static void qctx_free(qctx *c) {
    for (uint64_t k = 0; c->out && k < c->n_out; k++)
        if (c->out[k].expert >= 0) free(c->out[k].name);
    if (c->t)
        for (uint64_t i = 0; i < c->f->n_tensors; i++) free((void *)c->t[i].name);
    free(c->out);
    free(c->t);
    free(c->out_type);
    free(c->scratch);
    free(c->bad_row);
    th_qimatrix_free(c->qw, c->f ? c->f->n_tensors : 0);
    th_imatrix_free(c->im);
    th_pool_free(c->pool);
    gguf_close(c->f);
}

/* ---------------------------------------------------------------- output */

static bool key_is(const gguf_kv *kv, const char *key) { return gguf_str_eq(kv->key, key); }

static const char *const imatrix_keys[] = { "quantize.imatrix.file", "quantize.imatrix.dataset",
                                            "quantize.imatrix.entries_count", "quantize.imatrix.chunks_count" };

/* A string as llama-quantize stores it in a key override (at most 127 bytes). */
static void put_str127(gguf_writer *w, const char *key, const char *v) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    gguf_w_str(w, key, buf);
}

/* ftype < 0: a precision config's mix, which has no llama.cpp file type (none is written).
 * With an importance matrix (im, read from imatrix_path) its four keys follow, as
 * llama-quantize sets them (replacing any the input had). */
static void copy_metadata(gguf_writer *w, const gguf_file *f, int64_t ftype, const th_imatrix *im,
                          const char *imatrix_path) {
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        if (key_is(kv, "general.file_type") || key_is(kv, "general.quantization_version") || key_is(kv, "split.no") ||
            key_is(kv, "split.count") || key_is(kv, "split.tensors.count") || key_is(kv, "quantize.qn.rounding"))
            continue;
        bool replaced = false;
        for (size_t k = 0; im && k < sizeof imatrix_keys / sizeof imatrix_keys[0]; k++) replaced |= key_is(kv, imatrix_keys[k]);
        if (!replaced) gguf_w_copy_kv(w, kv);
    }
    /* appended last, in this order, as llama-quantize does */
    gguf_w_u32(w, "general.quantization_version", 2);
    if (ftype >= 0) gguf_w_u32(w, "general.file_type", (uint32_t)ftype);
    if (!im) return;
    put_str127(w, imatrix_keys[0], imatrix_path);
    if (th_imatrix_dataset(im)[0]) put_str127(w, imatrix_keys[1], th_imatrix_dataset(im));
    gguf_w_i32(w, imatrix_keys[2], th_imatrix_n_entries(im));
    if (th_imatrix_n_chunks(im) > 0) gguf_w_i32(w, imatrix_keys[3], th_imatrix_n_chunks(im));
}

/* Pass 1: the whole layout — metadata, copied tensors, zeros where converted
 * tensors go (read from a zero mapping, which costs no memory) — streamed to
 * `path` by the GGUF writer. */
static th_status write_layout(qctx *c, const char *path, int64_t ftype, const char *imatrix_path) {
    size_t zsize = (size_t)TH_MAX(c->max_out, 1);
    void *zeros = mmap(NULL, zsize, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (zeros == MAP_FAILED) return th_set_error(TH_ERR_NOMEM, "quantize: cannot map %zu bytes", zsize);
    gguf_writer *w = gguf_writer_new(c->f->alignment);
    th_status s = TH_OK;
    if (!w) s = th_set_error(TH_ERR_NOMEM, "quantize: out of memory");
    else {
        copy_metadata(w, c->f, ftype, c->im, imatrix_path);
        if (c->qn_plain) gguf_w_str(w, "quantize.qn.rounding", "plain");
        for (uint64_t k = 0; k < c->n_out; k++) {
            const qout *o = &c->out[k];
            uint64_t rows;
            const void *data = is_copy(c, o) ? source_bytes(c, o, &rows) : zeros;
            gguf_w_tensor(w, o->name, o->type, o->n_dims, o->ne, data, o->bytes);
        }
        s = gguf_writer_to_file(w, path);
        gguf_writer_free(w);
    }
    munmap(zeros, zsize);
    return s;
}

/* Where each tensor's data landed in the file pass 1 wrote (read back by the
 * validating reader, which also checks the layout is what we asked for). */
static th_status read_offsets(qctx *c, const char *path) {
    gguf_file *o = NULL;
    th_status s = gguf_open(path, &o);
    if (s) return s;
    if (o->n_tensors != c->n_out) s = th_set_error(TH_ERR_INTERNAL, "quantize: %s: tensor count changed", path);
    for (uint64_t i = 0; !s && i < o->n_tensors; i++) {
        if (!gguf_str_eq(o->tensors[i].name, c->out[i].name) || o->tensors[i].nbytes != c->out[i].bytes)
            s = th_set_error(TH_ERR_INTERNAL, "quantize: %s: tensor %s laid out wrongly", path, c->out[i].name);
        c->out[i].offset = o->data_offset + o->tensors[i].offset;
    }
    gguf_close(o);
    return s;
}

static th_status pwrite_all(int fd, const uint8_t *p, uint64_t n, uint64_t off, const char *path) {
    while (n) {
        ssize_t k = pwrite(fd, p, (size_t)TH_MIN(n, (uint64_t)1 << 30), (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return th_set_error(TH_ERR_IO, "quantize: cannot write '%s': %s", path, k < 0 ? strerror(errno) : "short write");
        p += k;
        n -= (uint64_t)k;
        off += (uint64_t)k;
    }
    return TH_OK;
}

static void report(const th_quantize_params *p, const qctx *c, uint64_t k) {
    if (!p->progress) return;
    const qout *o = &c->out[k];
    th_quantize_progress pr = { (int32_t)(k + 1), (int32_t)c->n_out, o->name, th_type_name(c->t[o->src].type),
                                th_type_name(o->type), o->n_dims, { o->ne[0], o->ne[1], o->ne[2], o->ne[3] }, 0 };
    if (c->im && !is_copy(c, o) && th_type_uses_imatrix(o->type)) pr.imatrix = c->qw && c->qw[o->src] ? 1 : -1;
    p->progress(&pr, p->user);
}

/* Pass 2: convert tensor by tensor into one buffer and write each into its place. */
static th_status fill_converted(qctx *c, const char *path, const th_quantize_params *p) {
    th_status s = read_offsets(c, path);
    if (s) return s;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return th_set_error(TH_ERR_IO, "quantize: cannot reopen '%s': %s", path, strerror(errno));
    uint8_t *buf = malloc((size_t)TH_MAX(c->max_out, 1));
    if (!buf) s = th_set_error(TH_ERR_NOMEM, "quantize: out of memory (%" PRIu64 " bytes)", c->max_out);
    for (uint64_t k = 0; !s && k < c->n_out; k++) {
        report(p, c, k);
        if (is_copy(c, &c->out[k])) continue;
        s = convert_tensor(c, &c->out[k], buf);
        if (!s) s = pwrite_all(fd, buf, c->out[k].bytes, c->out[k].offset, path);
    }
    free(buf);
    if (close(fd) != 0 && !s) s = th_set_error(TH_ERR_IO, "quantize: cannot write '%s': %s", path, strerror(errno));
    return s;
}

static th_status write_output(qctx *c, const char *out_path, int64_t ftype, const th_quantize_params *p) {
    size_t len = strlen(out_path);
    char *tmp = malloc(len + 8);
    if (!tmp) return th_set_error(TH_ERR_NOMEM, "quantize: out of memory");
    snprintf(tmp, len + 8, "%s.tmp", out_path);
    th_status s = write_layout(c, tmp, ftype, p->imatrix);
    if (!s) s = fill_converted(c, tmp, p);
    if (!s && rename(tmp, out_path) != 0)
        s = th_set_error(TH_ERR_IO, "quantize: cannot rename '%s' to '%s': %s", tmp, out_path, strerror(errno));
    if (s) remove(tmp);
    free(tmp);
    return s;
}

/* ---------------------------------------------------------------- entry point */

#define MAX_THREADS 512

th_quantize_params th_quantize_default_params(void) {
    return (th_quantize_params){ .type = "Q4_K_M", .n_threads = 0 };
}

/* The per-tensor types: the mix's (if any), then the precision config's rules on
 * top (src/precision/assign.c resolves them). */

static th_status plan_types(qctx *c, const th_quantize_params *p, const th_qmix *mix, uint32_t ***expert_type) {
    uint64_t n = c->f->n_tensors;
    if (mix) {
        th_qmodel m;
        char arch[64];
        read_model_info(c->f, &m, arch, sizeof arch);
        m.has_imatrix = c->im != NULL;
        if (th_qplan_types(mix, p->pure, &m, c->t, n, c->out_type) < 0) return TH_ERR_NOMEM;
    } else {
        for (uint64_t i = 0; i < n; i++) c->out_type[i] = c->t[i].type;
    }
    if (!p->config) return TH_OK;
    return th_prec_plan_types(p->config, c->t, n, c->out_type, expert_type);
}

static th_status prepare(qctx *c, const char *in_path, const th_quantize_params *p, const th_qmix *mix) {
    th_status s = gguf_open(in_path, &c->f);
    if (s) return s;
    if ((s = describe_tensors(c))) return s;
    if (p->imatrix && (s = th_imatrix_load(p->imatrix, &c->im))) return s;
    uint32_t **expert_type = NULL;
    s = plan_types(c, p, mix, &expert_type);
    if (!s && c->im) s = th_qimatrix_match(c->im, p->imatrix, in_path, c->t, c->out_type, c->f->n_tensors, &c->qw);
    if (!s) s = plan_outputs(c, expert_type);
    for (uint64_t i = 0; expert_type && i < c->f->n_tensors; i++) free(expert_type[i]);
    free(expert_type);
    if (s || (s = plan_sizes(c))) return s;
    c->n_threads = TH_MIN(p->n_threads > 0 ? p->n_threads : th_n_cores(), MAX_THREADS);
    uint64_t scratch_bytes;
    if (!th_mul_u64((uint64_t)c->n_threads * sizeof(float), (uint64_t)TH_MAX(c->max_ne0, 1), &scratch_bytes) ||
        scratch_bytes > SIZE_MAX)
        return th_set_error(TH_ERR_NOMEM, "quantize: rows of %" PRId64 " values are too long", c->max_ne0);
    c->scratch = malloc((size_t)scratch_bytes);
    c->bad_row = malloc((size_t)c->n_threads * sizeof *c->bad_row);
    if (!c->scratch || !c->bad_row) return th_set_error(TH_ERR_NOMEM, "quantize: out of memory");
    c->pool = th_pool_new(c->n_threads);
    return c->pool ? TH_OK : TH_ERR_NOMEM;
}

th_status th_quantize_file(const char *in_path, const char *out_path, const th_quantize_params *p) {
    if (!in_path || !out_path || !p || (!p->type && !p->config))
        return th_set_error(TH_ERR_ARG, "th_quantize_file: NULL argument");
    const th_qmix *mix = p->type ? th_qmix_find(p->type) : NULL;
    if (p->type && !mix)
        return th_set_error(TH_ERR_ARG, "unknown quantization type '%s' (valid: %s)", p->type, th_quantize_type_names());
    qctx c = { .qn_plain = p->qn_plain_rounding };
    th_status s = prepare(&c, in_path, p, mix);
    /* a config makes a mix llama.cpp has no file type for */
    if (!s) s = write_output(&c, out_path, p->config || !mix ? -1 : (int64_t)mix->ftype, p);
    qctx_free(&c);
    return s;
}
