/* hf_model.c — config.json + safetensors -> a GGUF laid out as llama.cpp's
 * convert_hf_to_gguf.py lays it out: the family (model_type) picks the
 * llama.cpp architecture, config keys become "<arch>.*" metadata, HF tensor
 * names become GGUF names, with the layout changes: Q/K rows permuted for the
 * NORM rope of llama-family models, Gemma norm weights stored as (1 + w),
 * per-expert tensors stacked into one [n_expert, rows, cols] tensor, Llama-3
 * rope scaling as a rope_freqs tensor, 1-D weights as F32. 2-D weights keep
 * their dtype (F32, F16, BF16); F64 is converted to F32.
 *
 * Families: llama / mistral / mixtral -> llama; qwen2; qwen3; qwen3_moe ->
 * qwen3moe; gemma2; gemma3_text (and gemma3 with a text_config) -> gemma3;
 * phi3; olmoe. */
#include "hf/hf.h"
#include "hf/safetensors.h"
#include "quant/quant.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct hf_conv {
    char dir[4096];
    st_set *st;
    cJSON *root;             /* config.json */
    const cJSON *cfg;        /* root, or its text_config */
    gguf_writer *w;
    void **bufs;             /* converted tensor data the writer points at */
    size_t n_bufs;
    char arch[32];
    const char *family;      /* model_type */
    int64_t n_layer, n_embd, n_head, n_kv, head_dim, n_ff, n_vocab, n_expert;
    int64_t n_rot, q_lora, n_dense;   /* deepseek2: rope dims, q LoRA rank (0: none), leading dense layers */
    bool permute_qk, gemma_norms, tied;
};

const char *hf_conv_arch(const hf_conv *c) { return c->arch; }

bool hf_is_model_path(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) return true;
    size_t n = strlen(path);
    return n > 12 && !strcmp(path + n - 12, ".safetensors");
}

/* ------------------------------------------------------------ config keys */

static const cJSON *cfg_item(const hf_conv *c, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(c->cfg, key);
}

static bool present(const cJSON *j) { return j && !cJSON_IsNull(j); }
static bool has(const hf_conv *c, const char *key) { return present(cfg_item(c, key)); }

/* An integer key: TH_OK with *out, TH_ERR_FORMAT if absent and not required
 * (*out unchanged) — or an error naming the key. */
static th_status cfg_int(const hf_conv *c, const char *key, bool required, int64_t *out) {
    const cJSON *j = cfg_item(c, key);
    if (!present(j)) {
        if (!required) return TH_ERR_FORMAT;
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' is missing (needed for %s)", c->dir, key, c->family);
    }
    double d = cJSON_IsNumber(j) ? j->valuedouble : NAN;
    if (!(d >= 0 && d <= 1e15 && d == floor(d)))
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' must be a non-negative integer", c->dir, key);
    *out = (int64_t)d;
    return TH_OK;
}

static th_status cfg_num(const hf_conv *c, const char *key, bool required, double *out) {
    const cJSON *j = cfg_item(c, key);
    if (!present(j)) {
        if (!required) return TH_ERR_FORMAT;
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' is missing (needed for %s)", c->dir, key, c->family);
    }
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' must be a number", c->dir, key);
    *out = j->valuedouble;
    return TH_OK;
}

static th_status cfg_bool(const hf_conv *c, const char *key, bool def, bool *out) {
    const cJSON *j = cfg_item(c, key);
    *out = def;
    if (!present(j)) return TH_OK;
    if (!cJSON_IsBool(j)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' must be true or false", c->dir, key);
    *out = cJSON_IsTrue(j);
    return TH_OK;
}

#define TRY(x) do { th_status s_ = (x); if (s_) return s_; } while (0)
#define ARCH_KEY(buf, suffix) (snprintf(buf, sizeof buf, "%s.%s", c->arch, suffix), buf)

static void w_u32(hf_conv *c, const char *suffix, int64_t v) {
    char k[128];
    gguf_w_u32(c->w, ARCH_KEY(k, suffix), (uint32_t)v);
}
static void w_f32(hf_conv *c, const char *suffix, double v) {
    char k[128];
    gguf_w_f32(c->w, ARCH_KEY(k, suffix), (float)v);
}

/* ------------------------------------------------------------ tensors */

static void *keep(hf_conv *c, size_t n) {
    void **nb = realloc(c->bufs, (c->n_bufs + 1) * sizeof *nb);
    if (!nb) return NULL;
    c->bufs = nb;
    void *p = malloc(n ? n : 1);
    if (p) c->bufs[c->n_bufs++] = p;
    return p;
}

static float elem_f32(const st_tensor *t, uint64_t i) {
    const uint8_t *p = t->data + i * st_dtype_size(t->dtype);
    uint16_t h;
    float f;
    double d;
    switch (t->dtype) {
    case ST_F32: memcpy(&f, p, 4); return f;
    case ST_F16: memcpy(&h, p, 2); return th_f16_to_f32(h);
    case ST_BF16: memcpy(&h, p, 2); return th_bf16_to_f32(h);
    default: memcpy(&d, p, 8); return (float)d;   /* F64 (checked by the caller) */
    }
}

static uint32_t gguf_type_of(int dtype) {
    return dtype == ST_F16 ? TH_F16 : dtype == ST_BF16 ? TH_BF16 : TH_F32;
}

typedef enum { X_NONE, X_PERMUTE_Q, X_PERMUTE_K, X_PLUS_ONE } xform;

static const st_tensor *get(hf_conv *c, const char *name, bool required, th_status *s) {
    *s = TH_OK;
    const st_tensor *t = st_set_find(c->st, name, NULL);
    if (!t && required) *s = th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is missing (required by %s)", c->dir, name, c->family);
    if (t && t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64)
        *s = th_set_error(TH_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported for weights (F32, F16, BF16, F64 are)",
                          c->dir, name, st_dtype_name(t->dtype));
    if (t && (t->n_dims < 1 || t->n_dims > 3))
        *s = th_set_error(TH_ERR_FORMAT, "%s: tensor '%s': %d dimensions (1 to 3 expected)", c->dir, name, t->n_dims);
    return *s ? NULL : t;
}

/* llama.cpp's permute for the NORM rope: within each head, row j*(hd/2)+i
 * (HF's rotate-half order) moves to row 2i+j. */
static void permute_rows(uint8_t *dst, const uint8_t *src, int64_t rows, int64_t n_head, size_t row_bytes) {
    int64_t hd = rows / n_head, half = hd / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (size_t)(h * hd + 2 * i + j) * row_bytes, src + (size_t)(h * hd + j * half + i) * row_bytes, row_bytes);
}

/* One HF tensor as a GGUF tensor (dims reversed: ne[0] is HF's last). */
static th_status add(hf_conv *c, const char *hf_name, const char *gg_name, bool required, xform x) {
    th_status s;
    const st_tensor *t = get(c, hf_name, required, &s);
    if (!t) return s;
    uint64_t ne[3] = { 1, 1, 1 };
    for (int d = 0; d < t->n_dims; d++) ne[d] = t->shape[t->n_dims - 1 - d];
    bool to_f32 = t->n_dims == 1 || t->dtype == ST_F64 || x == X_PLUS_ONE;
    uint32_t type = to_f32 ? TH_F32 : gguf_type_of(t->dtype);
    size_t esz = to_f32 ? 4 : st_dtype_size(t->dtype);
    uint64_t nbytes = t->n_elem * esz;
    const uint8_t *src = t->data;
    if (to_f32) {
        float *f = keep(c, (size_t)nbytes);
        if (!f) return th_set_error(TH_ERR_NOMEM, "out of memory converting '%s'", hf_name);
        for (uint64_t i = 0; i < t->n_elem; i++) f[i] = elem_f32(t, i) + (x == X_PLUS_ONE ? 1.0f : 0.0f);
        src = (const uint8_t *)f;
    }
    if (x == X_PERMUTE_Q || x == X_PERMUTE_K) {
        int64_t nh = x == X_PERMUTE_Q ? c->n_head : c->n_kv, rows = (int64_t)t->shape[0];
        if (rows % nh || (rows / nh) % 2)
            return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s': %lld rows do not split into %lld heads of even size", c->dir,
                                hf_name, (long long)rows, (long long)nh);
        uint8_t *p = keep(c, (size_t)nbytes);
        if (!p) return th_set_error(TH_ERR_NOMEM, "out of memory converting '%s'", hf_name);
        permute_rows(p, src, rows, nh, (size_t)(nbytes / (uint64_t)rows));
        src = p;
    }
    /* bytes usable as they are stay in the safetensors map (if aligned to their element) */
    if (src == t->data && (uintptr_t)src % esz == 0)
        gguf_w_tensor_ref(c->w, gg_name, type, (uint32_t)t->n_dims, ne, src, nbytes);
    else
        gguf_w_tensor(c->w, gg_name, type, (uint32_t)t->n_dims, ne, src, nbytes);
    return TH_OK;
}

/* Experts 0..n-1 of layer il (HF names from fmt with il and the expert index)
 * stacked into one GGUF tensor [cols, rows, n_expert]. */
static th_status add_experts(hf_conv *c, int il, const char *fmt, const char *gg_name) {
    char name[256];
    th_status s;
    const st_tensor *t0 = NULL;
    uint8_t *buf = NULL;
    size_t each = 0;
    for (int64_t e = 0; e < c->n_expert; e++) {
        snprintf(name, sizeof name, fmt, il, (int)e);
        const st_tensor *t = get(c, name, true, &s);
        if (!t) return s;
        if (!t0) {
            t0 = t;
            if (t->n_dims != 2) return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is not 2-D", c->dir, name);
            each = (size_t)t->nbytes;
            if (!(buf = keep(c, each * (size_t)c->n_expert))) return th_set_error(TH_ERR_NOMEM, "out of memory stacking '%s'", name);
        } else if (t->dtype != t0->dtype || t->n_dims != 2 || t->shape[0] != t0->shape[0] || t->shape[1] != t0->shape[1]) {
            return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s': dtype or shape differs from expert 0's", c->dir, name);
        }
        memcpy(buf + each * (size_t)e, t->data, each);
    }
    if (t0->dtype == ST_F64) return th_set_error(TH_ERR_UNSUPPORTED, "%s: F64 expert weights are not supported", c->dir);
    uint64_t ne[3] = { t0->shape[1], t0->shape[0], (uint64_t)c->n_expert };
    gguf_w_tensor(c->w, gg_name, gguf_type_of(t0->dtype), 3, ne, buf, each * (size_t)c->n_expert);
    return TH_OK;
}

/* ------------------------------------------------------------ families */

static const struct { const char *model_type, *arch; } FAMILIES[] = {
    { "llama", "llama" }, { "mistral", "llama" }, { "mixtral", "llama" }, { "qwen2", "qwen2" }, { "qwen3", "qwen3" },
    { "qwen3_moe", "qwen3moe" }, { "gemma2", "gemma2" }, { "gemma3_text", "gemma3" }, { "gemma3", "gemma3" },
    { "phi3", "phi3" }, { "olmoe", "olmoe" }, { "deepseek_v2", "deepseek2" }, { "deepseek_v3", "deepseek2" },
    { "gpt_oss", "gpt-oss" },
};

static th_status pick_family(hf_conv *c) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c->root, "model_type");
    if (!cJSON_IsString(mt))
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key 'model_type' is missing or not a string", c->dir);
    c->family = mt->valuestring;
    if (!strcmp(c->family, "gemma3")) {   /* the multimodal wrapper: the text model's config */
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->root, "text_config");
        if (!cJSON_IsObject(tc)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: gemma3 without a 'text_config' object", c->dir);
        c->cfg = tc;
    }
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        if (!strcmp(c->family, FAMILIES[i].model_type)) {
            snprintf(c->arch, sizeof c->arch, "%s", FAMILIES[i].arch);
            return TH_OK;
        }
    return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: model_type '%s' is not supported (llama, mistral, mixtral, qwen2, "
                        "qwen3, qwen3_moe, gemma2, gemma3_text, gemma3, phi3, olmoe, deepseek_v2, deepseek_v3, gpt_oss are)", c->dir, c->family);
}

/* The rope parameters of the global (full-attention) layers: rope_scaling
 * (transformers 4), or rope_parameters (transformers 5; per layer type for
 * Gemma 3: its "full_attention" entry). */
static const cJSON *rope_obj(const hf_conv *c) {
    const cJSON *rs = cfg_item(c, "rope_scaling");
    if (present(rs)) return rs;
    rs = cfg_item(c, "rope_parameters");
    const cJSON *full = cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "full_attention") : NULL;
    return cJSON_IsObject(full) ? full : rs;
}

static const cJSON *local_rope_obj(const hf_conv *c) {
    const cJSON *rs = cfg_item(c, "rope_parameters");
    return cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "sliding_attention") : NULL;
}

/* Phi-3 LongRoPE: long_factor / short_factor as rope_factors_long / _short (the
 * context picks one by its size against original_max_position_embeddings, as
 * llama.cpp does; transformers picks by the sequence length), and the attention
 * factor: attention_factor, else sqrt(1 + ln(s) / ln(orig)) with s = context / orig. */
static th_status longrope(hf_conv *c, const cJSON *rs, int64_t n_rot) {
    int64_t orig = 0, ctx = 4096;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings");
    if (cJSON_IsNumber(o) && o->valuedouble >= 1) orig = (int64_t)o->valuedouble;
    else TRY(cfg_int(c, "original_max_position_embeddings", true, &orig));
    if (has(c, "max_position_embeddings")) TRY(cfg_int(c, "max_position_embeddings", true, &ctx));
    if (orig < 1) return th_set_error(TH_ERR_FORMAT, "%s/config.json: original_max_position_embeddings must be positive", c->dir);
    static const char *const keys[2] = { "long_factor", "short_factor" };
    static const char *const names[2] = { "rope_factors_long.weight", "rope_factors_short.weight" };
    int64_t nf = n_rot / 2;
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(rs, keys[k]);
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != nf)
            return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.%s must be an array of %lld numbers (rope dims / 2)",
                                c->dir, keys[k], (long long)nf);
        float *f = keep(c, (size_t)nf * 4);
        if (!f) return th_set_error(TH_ERR_NOMEM, "out of memory");
        int64_t i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            if (!cJSON_IsNumber(e) || !(e->valuedouble > 0))
                return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.%s[%lld] is not a positive number", c->dir, keys[k],
                                    (long long)i);
            f[i] = (float)e->valuedouble;
        }
        uint64_t ne[1] = { (uint64_t)nf };
        gguf_w_tensor(c->w, names[k], TH_F32, 1, ne, f, (uint64_t)nf * 4);
    }
    double af = 1.0, sc = (double)ctx / (double)orig;
    const cJSON *aj = cJSON_GetObjectItemCaseSensitive(rs, "attention_factor");
    if (cJSON_IsNumber(aj) && aj->valuedouble > 0) af = aj->valuedouble;
    else if (sc > 1 && orig > 1) af = sqrt(1 + log(sc) / log((double)orig));
    w_f32(c, "rope.scaling.attn_factor", af);
    w_u32(c, "rope.scaling.original_context_length", orig);
    return TH_OK;
}

/* rope_scaling: linear / yarn as metadata, llama3 as a rope_freqs tensor. */
static th_status rope_scaling(hf_conv *c, double theta, int64_t n_rot) {
    const cJSON *rs = rope_obj(c);
    if (!present(rs)) return TH_OK;
    if (!cJSON_IsObject(rs)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: key 'rope_scaling' must be an object or null", c->dir);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(ty)) ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(ty)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.rope_type is missing or not a string", c->dir);
    const char *type = ty->valuestring;
    if (!strcmp(type, "default")) return TH_OK;
    if (!strcmp(type, "longrope") || !strcmp(type, "su")) return longrope(c, rs, n_rot);
    const cJSON *fj = cJSON_GetObjectItemCaseSensitive(rs, "factor");
    if (!cJSON_IsNumber(fj) || !(fj->valuedouble > 0))
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.factor is missing or not a positive number", c->dir);
    double factor = fj->valuedouble;
    char k[128];
    if (!strcmp(type, "linear") || !strcmp(type, "yarn")) {
        gguf_w_str(c->w, ARCH_KEY(k, "rope.scaling.type"), type);
        w_f32(c, "rope.scaling.factor", factor);
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings");
        if (!strcmp(type, "yarn")) {
            if (!cJSON_IsNumber(o)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.original_max_position_embeddings is missing (yarn)", c->dir);
            w_u32(c, "rope.scaling.original_context_length", (int64_t)o->valuedouble);
        }
        return TH_OK;
    }
    if (!strcmp(type, "longrope") || !strcmp(type, "su")) return longrope(c, rs, n_rot);
    if (strcmp(type, "llama3"))
        return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: rope_scaling type '%s' is not supported (linear, yarn, llama3, "
                            "longrope are)", c->dir, type);
    const char *need[] = { "low_freq_factor", "high_freq_factor", "original_max_position_embeddings" };
    double v[3];
    for (int i = 0; i < 3; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(rs, need[i]);
        if (!cJSON_IsNumber(j) || !(j->valuedouble > 0))
            return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.%s is missing or not a positive number", c->dir, need[i]);
        v[i] = j->valuedouble;
    }
    double lo_wl = v[2] / v[0], hi_wl = v[2] / v[1];
    int64_t nf = n_rot / 2;
    float *f = keep(c, (size_t)nf * 4);
    if (!f) return th_set_error(TH_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < nf; i++) {
        double freq = 1.0 / pow(theta, (double)(2 * i) / (double)n_rot), wl = 2 * M_PI / freq;
        if (wl < hi_wl) f[i] = 1.0f;
        else if (wl > lo_wl) f[i] = (float)factor;
        else {
            double sm = (v[2] / wl - v[0]) / (v[1] - v[0]);
            f[i] = (float)(1.0 / ((1 - sm) / factor + sm));
        }
    }
    uint64_t ne[1] = { (uint64_t)nf };
    gguf_w_tensor(c->w, "rope_freqs.weight", TH_F32, 1, ne, f, (uint64_t)nf * 4);
    return TH_OK;
}

static th_status sliding_window(hf_conv *c) {
    int64_t w = 0;
    bool use = false;
    if (!strncmp(c->family, "qwen", 4)) {
        TRY(cfg_bool(c, "use_sliding_window", false, &use));
        if (use) return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: use_sliding_window = true is not supported for %s", c->dir, c->family);
        return TH_OK;
    }
    if (!strcmp(c->family, "llama") || !has(c, "sliding_window")) return TH_OK;
    TRY(cfg_int(c, "sliding_window", true, &w));
    if (w > 0) w_u32(c, "attention.sliding_window", w);
    return TH_OK;
}

/* GPT-OSS: expert width, the fixed clamped SwiGLU (alpha 1.702, limit 7) and the
 * sliding pattern our gpt-oss runs (sliding on even layers) checked, not assumed. */
static th_status gpt_oss_keys(hf_conv *c) {
    double alpha = 1.702, limit = 7.0;
    if (has(c, "swiglu_alpha")) TRY(cfg_num(c, "swiglu_alpha", true, &alpha));
    if (has(c, "swiglu_limit")) TRY(cfg_num(c, "swiglu_limit", true, &limit));
    if (fabs(alpha - 1.702) > 1e-6 || fabs(limit - 7.0) > 1e-6)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: swiglu_alpha %g / swiglu_limit %g (only 1.702 / 7 are supported)",
                            c->dir, alpha, limit);
    const cJSON *lt = cfg_item(c, "layer_types");
    int il = 0;
    for (const cJSON *e = cJSON_IsArray(lt) ? lt->child : NULL; e; e = e->next, il++)
        if (!cJSON_IsString(e) || strcmp(e->valuestring, il % 2 ? "full_attention" : "sliding_attention"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: layer_types[%d] must be '%s' (sliding on even layers)", c->dir, il,
                                il % 2 ? "full_attention" : "sliding_attention");
    w_u32(c, "expert_feed_forward_length", c->n_ff);
    return TH_OK;
}

/* The MoE keys of each family; n_expert = 0 for dense models. */
static th_status experts(hf_conv *c) {
    bool oss = !strcmp(c->family, "gpt_oss");
    bool moe = !strcmp(c->family, "mixtral") || !strcmp(c->family, "qwen3_moe") || !strcmp(c->family, "olmoe") || oss;
    c->n_expert = 0;
    if (!moe) return TH_OK;
    /* transformers 4 writes num_experts for qwen3_moe / olmoe, 5 writes num_local_experts everywhere */
    const char *count = has(c, "num_local_experts") || !has(c, "num_experts") ? "num_local_experts" : "num_experts";
    int64_t used, ff;
    bool norm;
    TRY(cfg_int(c, count, true, &c->n_expert));
    TRY(cfg_int(c, "num_experts_per_tok", true, &used));
    if (c->n_expert < 1 || used < 1 || used > c->n_expert)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: %lld experts with %lld per token is not plausible", c->dir,
                            (long long)c->n_expert, (long long)used);
    w_u32(c, "expert_count", c->n_expert);
    w_u32(c, "expert_used_count", used);
    if (!strcmp(c->family, "qwen3_moe")) {
        int64_t step = 1;
        TRY(cfg_int(c, "moe_intermediate_size", true, &ff));
        w_u32(c, "expert_feed_forward_length", ff);
        if (has(c, "decoder_sparse_step")) TRY(cfg_int(c, "decoder_sparse_step", true, &step));
        const cJSON *mo = cfg_item(c, "mlp_only_layers");
        if (step != 1 || (present(mo) && cJSON_GetArraySize(mo) > 0))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: decoder_sparse_step / mlp_only_layers (dense layers between "
                                "MoE layers) are not supported", c->dir);
    }
    if (oss) return gpt_oss_keys(c);
    if (strcmp(c->family, "mixtral")) {
        TRY(cfg_bool(c, "norm_topk_prob", false, &norm));
        if (norm != !strcmp(c->family, "qwen3_moe"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: norm_topk_prob = %s is not supported for %s", c->dir,
                                norm ? "true" : "false", c->family);
    }
    return TH_OK;
}

/* DeepSeek-V2/V3 (MLA): head shapes from the LoRA ranks, the MoE keys (the first
 * first_k_dense_replace layers dense), V2 softmax gating, V3 sigmoid with a selection
 * bias. Group-limited routing (n_group > 1 with topk_group < n_group) and
 * V3 with rope_interleave false are refused. */
static th_status deepseek_keys(hf_conv *c) {
    int64_t nope, rope, v, kv_rank, q_rank = 0, dense, used, ff, shared, groups = 1, topk_groups = 1;
    double scale = 1.0;
    bool norm, v3 = !strcmp(c->family, "deepseek_v3"), interleave;
    TRY(cfg_int(c, "qk_nope_head_dim", true, &nope));
    TRY(cfg_int(c, "qk_rope_head_dim", true, &rope));
    TRY(cfg_int(c, "v_head_dim", true, &v));
    TRY(cfg_int(c, "kv_lora_rank", true, &kv_rank));
    if (has(c, "q_lora_rank")) TRY(cfg_int(c, "q_lora_rank", true, &q_rank));
    TRY(cfg_int(c, "first_k_dense_replace", true, &dense));
    TRY(cfg_int(c, "n_routed_experts", true, &c->n_expert));
    TRY(cfg_int(c, "num_experts_per_tok", true, &used));
    TRY(cfg_int(c, "moe_intermediate_size", true, &ff));
    TRY(cfg_int(c, "n_shared_experts", true, &shared));
    if (has(c, "n_group")) TRY(cfg_int(c, "n_group", true, &groups));
    if (has(c, "topk_group")) TRY(cfg_int(c, "topk_group", true, &topk_groups));
    if (has(c, "routed_scaling_factor")) TRY(cfg_num(c, "routed_scaling_factor", true, &scale));
    TRY(cfg_bool(c, "norm_topk_prob", false, &norm));
    TRY(cfg_bool(c, "rope_interleave", true, &interleave));
    if (nope < 1 || rope < 2 || rope % 2 || v < 1 || kv_rank < 1 || q_rank < 0 || dense < 0 || c->n_expert < 1 || used < 1 ||
        used > c->n_expert || shared < 0 || nope + rope > 1024)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: implausible MLA / MoE sizes (qk_nope_head_dim %lld, qk_rope_head_dim %lld, "
                            "v_head_dim %lld, kv_lora_rank %lld, %lld experts, %lld per token)", c->dir, (long long)nope,
                            (long long)rope, (long long)v, (long long)kv_rank, (long long)c->n_expert, (long long)used);
    if (c->n_kv != c->n_head)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: num_key_value_heads must equal num_attention_heads for MLA", c->dir);
    if (groups > 1 && topk_groups < groups)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: group-limited expert routing (n_group %lld, topk_group %lld) is "
                            "not supported", c->dir, (long long)groups, (long long)topk_groups);
    if (v3 && !interleave)
        return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: rope_interleave = false is not supported", c->dir);
    c->n_rot = rope;
    c->q_lora = q_rank;
    c->n_dense = dense;
    c->head_dim = nope + rope;
    w_u32(c, "attention.key_length", nope + rope);
    w_u32(c, "attention.value_length", v);
    w_u32(c, "rope.dimension_count", rope);
    w_u32(c, "attention.kv_lora_rank", kv_rank);
    if (q_rank > 0) w_u32(c, "attention.q_lora_rank", q_rank);
    w_u32(c, "leading_dense_block_count", dense);
    w_u32(c, "expert_count", c->n_expert);
    w_u32(c, "expert_used_count", used);
    w_u32(c, "expert_feed_forward_length", ff);
    w_u32(c, "expert_shared_count", shared);
    w_f32(c, "expert_weights_scale", scale);
    char k[128];
    gguf_w_bool(c->w, ARCH_KEY(k, "expert_weights_norm"), norm);
    w_u32(c, "expert_gating_func", v3 ? 2 : 1);   /* llama.cpp: 1 softmax, 2 sigmoid */
    return TH_OK;
}

/* yarn: the attention-scale multiplier llama.cpp's convert writes (0.1 * mscale_all_dim). */
static th_status deepseek_yarn(hf_conv *c) {
    const cJSON *rs = rope_obj(c), *ty = cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "rope_type") : NULL;
    if (!cJSON_IsString(ty)) ty = cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "type") : NULL;
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "yarn")) return TH_OK;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(rs, "mscale_all_dim");
    if (cJSON_IsNumber(m)) w_f32(c, "rope.scaling.yarn_log_multiplier", 0.1 * m->valuedouble);
    return TH_OK;
}

/* GPT-OSS experts: gate_up_proj [E, in, 2*ff] (x @ W, gate and up interleaved in the
 * last dim) -> ffn_gate_exps / ffn_up_exps [in, ff, E]; down_proj [E, ff, out] ->
 * ffn_down_exps [ff, out, E]; biases de-interleaved likewise. */
/* One MXFP4 block from HF's layout (16 bytes: element 2k low nibble, 2k+1 high) to
 * ggml's (e, then qs[j]: element j low nibble, j+16 high); the E2M1 codes and the
 * E8M0 exponent are the same numbers in both. */
static void mxfp4_block(uint8_t *dst, const uint8_t *codes, uint8_t e) {
    uint8_t v[32];
    for (int k = 0; k < 16; k++) { v[2 * k] = codes[k] & 15; v[2 * k + 1] = codes[k] >> 4; }
    dst[0] = e;
    for (int j = 0; j < 16; j++) dst[1 + j] = (uint8_t)(v[j] | (v[j + 16] << 4));
}

/* <name>_blocks U8 [E, rows, nb, 16] + <name>_scales U8 [E, rows, nb] as ggml MXFP4
 * rows; rows r0, r0 + step, ... (step 2 takes gate or up out of gate_up). */
static th_status mxfp4_rows(hf_conv *c, const char *pre, int il, const char *name, int64_t step, int64_t r0, uint8_t **out,
                            uint64_t *rows, uint64_t *cols) {
    char h[256], hs[256];
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.%s_blocks", pre, il, name);
    snprintf(hs, sizeof hs, "%slayers.%d.mlp.experts.%s_scales", pre, il, name);
    const st_tensor *b = st_set_find(c->st, h, NULL), *sc = st_set_find(c->st, hs, NULL);
    if (!b || !sc) return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is missing (MXFP4 experts)", c->dir, b ? hs : h);
    if (b->dtype != ST_U8 || sc->dtype != ST_U8 || b->n_dims != 4 || sc->n_dims != 3 || b->shape[3] != 16 ||
        b->shape[0] != (uint64_t)c->n_expert || sc->shape[0] != b->shape[0] || sc->shape[1] != b->shape[1] ||
        sc->shape[2] != b->shape[2] || b->shape[1] % (uint64_t)step)
        return th_set_error(TH_ERR_FORMAT, "%s: '%s' / '%s' must be U8 [%lld, rows, blocks, 16] / [%lld, rows, blocks]", c->dir, h, hs,
                            (long long)c->n_expert, (long long)c->n_expert);
    uint64_t E = b->shape[0], R = b->shape[1] / (uint64_t)step, nb = b->shape[2];
    uint8_t *d = keep(c, E * R * nb * 17);
    if (!d) return th_set_error(TH_ERR_NOMEM, "out of memory converting '%s'", h);
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t r = 0; r < R; r++) {
            uint64_t src_row = e * b->shape[1] + r * (uint64_t)step + (uint64_t)r0;
            for (uint64_t k = 0; k < nb; k++)
                mxfp4_block(d + ((e * R + r) * nb + k) * 17, b->data + (src_row * nb + k) * 16, sc->data[src_row * nb + k]);
        }
    *out = d;
    *rows = R;
    *cols = nb * 32;
    return TH_OK;
}

/* GPT-OSS experts as the released checkpoints ship them (MXFP4), kept MXFP4. */
static th_status add_oss_mxfp4(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
    th_status s;
    uint8_t *gate, *up, *down;
    uint64_t ff, in, ff2, in2, out, ffd;
    TRY(mxfp4_rows(c, pre, il, "gate_up_proj", 2, 0, &gate, &ff, &in));
    TRY(mxfp4_rows(c, pre, il, "gate_up_proj", 2, 1, &up, &ff2, &in2));
    TRY(mxfp4_rows(c, pre, il, "down_proj", 1, 0, &down, &out, &ffd));
    const st_tensor *bg, *bd;
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.gate_up_proj_bias", pre, il);
    if (!(bg = get(c, h, true, &s))) return s;
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.down_proj_bias", pre, il);
    if (!(bd = get(c, h, true, &s))) return s;
    uint64_t E = (uint64_t)c->n_expert;
    if (ffd != ff || bg->n_elem != E * 2 * ff || bd->n_elem != E * out)
        return th_set_error(TH_ERR_FORMAT, "%s: layer %d: MXFP4 expert shapes do not agree", c->dir, il);
    float *gb = keep(c, E * ff * 4), *ub = keep(c, E * ff * 4), *db = keep(c, E * out * 4);
    if (!gb || !ub || !db) return th_set_error(TH_ERR_NOMEM, "out of memory");
    for (uint64_t k = 0; k < E * ff; k++) { gb[k] = elem_f32(bg, 2 * k); ub[k] = elem_f32(bg, 2 * k + 1); }
    for (uint64_t k = 0; k < E * out; k++) db[k] = elem_f32(bd, k);
    uint64_t ng[3] = { in, ff, E }, nd[3] = { ff, out, E }, nbg[2] = { ff, E }, nbd[2] = { out, E };
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    gguf_w_tensor(c->w, GG("ffn_gate_exps.weight"), TH_MXFP4, 3, ng, gate, E * ff * in / 32 * 17);
    gguf_w_tensor(c->w, GG("ffn_gate_exps.bias"), TH_F32, 2, nbg, gb, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_up_exps.weight"), TH_MXFP4, 3, ng, up, E * ff * in / 32 * 17);
    gguf_w_tensor(c->w, GG("ffn_up_exps.bias"), TH_F32, 2, nbg, ub, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_down_exps.weight"), TH_MXFP4, 3, nd, down, E * out * ff / 32 * 17);
    gguf_w_tensor(c->w, GG("ffn_down_exps.bias"), TH_F32, 2, nbd, db, E * out * 4);
#undef GG
    return TH_OK;
}

static th_status add_oss_experts(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
    th_status s;
    snprintf(h, sizeof h, "%slayers.%d.mlp.experts.gate_up_proj_blocks", pre, il);
    if (st_set_find(c->st, h, NULL)) return add_oss_mxfp4(c, pre, il);
    const st_tensor *t[4];
    static const char *const nm[4] = { "gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias" };
    for (int i = 0; i < 4; i++) {
        snprintf(h, sizeof h, "%slayers.%d.mlp.experts.%s", pre, il, nm[i]);
        if (!(t[i] = get(c, h, true, &s))) return s;
        if (t[i]->dtype == ST_F64 || t[i]->n_dims != (i % 2 ? 2 : 3) || t[i]->shape[0] != (uint64_t)c->n_expert)
            return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' must be %s with %lld experts first (not F64)", c->dir, h,
                                i % 2 ? "2-D" : "3-D", (long long)c->n_expert);
    }
    uint64_t E = t[0]->shape[0], in = t[0]->shape[1], ff2 = t[0]->shape[2], ff = ff2 / 2, out = t[2]->shape[2];
    if (ff2 % 2 || t[2]->shape[1] != ff || t[1]->shape[1] != ff2 || t[3]->shape[1] != out)
        return th_set_error(TH_ERR_FORMAT, "%s: layer %d: gate_up_proj / down_proj shapes do not agree", c->dir, il);
    size_t es = st_dtype_size(t[0]->dtype), ed = st_dtype_size(t[2]->dtype);
    uint8_t *gate = keep(c, E * ff * in * es), *up = keep(c, E * ff * in * es), *down = keep(c, E * out * ff * ed);
    float *gb = keep(c, E * ff * 4), *ub = keep(c, E * ff * 4), *db = keep(c, E * out * 4);
    if (!gate || !up || !down || !gb || !ub || !db) return th_set_error(TH_ERR_NOMEM, "out of memory converting layer %d experts", il);
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t i = 0; i < in; i++)
            for (uint64_t o = 0; o < ff; o++) {
                const uint8_t *src = t[0]->data + ((e * in + i) * ff2 + 2 * o) * es;
                memcpy(gate + ((e * ff + o) * in + i) * es, src, es);
                memcpy(up + ((e * ff + o) * in + i) * es, src + es, es);
            }
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t i = 0; i < ff; i++)
            for (uint64_t o = 0; o < out; o++)
                memcpy(down + ((e * out + o) * ff + i) * ed, t[2]->data + ((e * ff + i) * out + o) * ed, ed);
    for (uint64_t k = 0; k < E * ff; k++) {
        gb[k] = elem_f32(t[1], 2 * k);
        ub[k] = elem_f32(t[1], 2 * k + 1);
    }
    for (uint64_t k = 0; k < E * out; k++) db[k] = elem_f32(t[3], k);
    uint64_t ng[3] = { in, ff, E }, nd[3] = { ff, out, E }, nbg[2] = { ff, E }, nbd[2] = { out, E };
    uint32_t tg = gguf_type_of(t[0]->dtype), td = gguf_type_of(t[2]->dtype);
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    gguf_w_tensor(c->w, GG("ffn_gate_exps.weight"), tg, 3, ng, gate, E * ff * in * es);
    gguf_w_tensor(c->w, GG("ffn_gate_exps.bias"), TH_F32, 2, nbg, gb, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_up_exps.weight"), tg, 3, ng, up, E * ff * in * es);
    gguf_w_tensor(c->w, GG("ffn_up_exps.bias"), TH_F32, 2, nbg, ub, E * ff * 4);
    gguf_w_tensor(c->w, GG("ffn_down_exps.weight"), td, 3, nd, down, E * out * ff * ed);
    gguf_w_tensor(c->w, GG("ffn_down_exps.bias"), TH_F32, 2, nbd, db, E * out * 4);
#undef GG
    return TH_OK;
}

static th_status add_oss_layer(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
#define HF(f) (snprintf(h, sizeof h, "%slayers.%d." f, pre, il), h)
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    TRY(add(c, HF("input_layernorm.weight"), GG("attn_norm.weight"), true, X_NONE));
    static const char *const p[4][2] = { { "q_proj", "attn_q" }, { "k_proj", "attn_k" }, { "v_proj", "attn_v" }, { "o_proj", "attn_output" } };
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 2; b++) {
            snprintf(h, sizeof h, "%slayers.%d.self_attn.%s.%s", pre, il, p[i][0], b ? "bias" : "weight");
            snprintf(g, sizeof g, "blk.%d.%s.%s", il, p[i][1], b ? "bias" : "weight");
            TRY(add(c, h, g, true, X_NONE));
        }
    TRY(add(c, HF("self_attn.sinks"), GG("attn_sinks.weight"), true, X_NONE));
    TRY(add(c, HF("post_attention_layernorm.weight"), GG("post_attention_norm.weight"), true, X_NONE));
    TRY(add(c, HF("mlp.router.weight"), GG("ffn_gate_inp.weight"), true, X_NONE));
    TRY(add(c, HF("mlp.router.bias"), GG("ffn_gate_inp.bias"), true, X_NONE));
#undef HF
#undef GG
    return add_oss_experts(c, pre, il);
}

/* One DeepSeek layer: MLA attention (q direct or through q_a/q_b), dense or MoE FFN. */
static th_status add_deepseek_layer(hf_conv *c, const char *pre, int il) {
    char h[256], g[128], fmt[256];
#define HF(f) (snprintf(h, sizeof h, "%slayers.%d." f, pre, il), h)
#define GG(f) (snprintf(g, sizeof g, "blk.%d." f, il), g)
    TRY(add(c, HF("input_layernorm.weight"), GG("attn_norm.weight"), true, X_NONE));
    if (c->q_lora > 0) {
        TRY(add(c, HF("self_attn.q_a_proj.weight"), GG("attn_q_a.weight"), true, X_NONE));
        TRY(add(c, HF("self_attn.q_a_layernorm.weight"), GG("attn_q_a_norm.weight"), true, X_NONE));
        TRY(add(c, HF("self_attn.q_b_proj.weight"), GG("attn_q_b.weight"), true, X_NONE));
    } else {
        TRY(add(c, HF("self_attn.q_proj.weight"), GG("attn_q.weight"), true, X_NONE));
    }
    TRY(add(c, HF("self_attn.kv_a_proj_with_mqa.weight"), GG("attn_kv_a_mqa.weight"), true, X_NONE));
    TRY(add(c, HF("self_attn.kv_a_layernorm.weight"), GG("attn_kv_a_norm.weight"), true, X_NONE));
    TRY(add(c, HF("self_attn.kv_b_proj.weight"), GG("attn_kv_b.weight"), true, X_NONE));
    TRY(add(c, HF("self_attn.o_proj.weight"), GG("attn_output.weight"), true, X_NONE));
    TRY(add(c, HF("post_attention_layernorm.weight"), GG("ffn_norm.weight"), true, X_NONE));
    if (il < c->n_dense) {
        TRY(add(c, HF("mlp.gate_proj.weight"), GG("ffn_gate.weight"), true, X_NONE));
        TRY(add(c, HF("mlp.up_proj.weight"), GG("ffn_up.weight"), true, X_NONE));
        TRY(add(c, HF("mlp.down_proj.weight"), GG("ffn_down.weight"), true, X_NONE));
        return TH_OK;
    }
    TRY(add(c, HF("mlp.gate.weight"), GG("ffn_gate_inp.weight"), true, X_NONE));
    TRY(add(c, HF("mlp.gate.e_score_correction_bias"), GG("exp_probs_b.bias"), !strcmp(c->family, "deepseek_v3"), X_NONE));
    static const char *const part[3][2] = { { "gate_proj", "ffn_gate" }, { "up_proj", "ffn_up" }, { "down_proj", "ffn_down" } };
    for (int p = 0; p < 3; p++) {
        snprintf(fmt, sizeof fmt, "%slayers.%%d.mlp.experts.%%d.%s.weight", pre, part[p][0]);
        snprintf(g, sizeof g, "blk.%d.%s_exps.weight", il, part[p][1]);
        TRY(add_experts(c, il, fmt, g));
        snprintf(h, sizeof h, "%slayers.%d.mlp.shared_experts.%s.weight", pre, il, part[p][0]);
        snprintf(g, sizeof g, "blk.%d.%s_shexp.weight", il, part[p][1]);
        TRY(add(c, h, g, true, X_NONE));
    }
#undef HF
#undef GG
    return TH_OK;
}

static th_status gemma_keys(hf_conv *c) {
    double v;
    char k[128];
    if (has(c, "query_pre_attn_scalar")) {
        TRY(cfg_num(c, "query_pre_attn_scalar", true, &v));
        if (!(v > 0)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: query_pre_attn_scalar must be positive", c->dir);
        if (v != (double)c->head_dim) w_f32(c, "attention.scale", 1.0 / sqrt(v));
    }
    const char *caps[] = { "attn_logit_softcapping", "final_logit_softcapping" };
    for (int i = 0; i < 2; i++) {
        if (!has(c, caps[i])) continue;
        TRY(cfg_num(c, caps[i], true, &v));
        if (!strcmp(c->arch, "gemma3"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: %s is not supported for gemma3", c->dir, caps[i]);
        w_f32(c, caps[i], v);
    }
    if (strcmp(c->arch, "gemma3")) return TH_OK;
    const cJSON *lr = local_rope_obj(c);
    const cJSON *lt_theta = cJSON_IsObject(lr) ? cJSON_GetObjectItemCaseSensitive(lr, "rope_theta") : NULL;
    if (has(c, "rope_local_base_freq") || cJSON_IsNumber(lt_theta)) {
        if (has(c, "rope_local_base_freq")) TRY(cfg_num(c, "rope_local_base_freq", true, &v));
        else v = lt_theta->valuedouble;
        const cJSON *lty = cJSON_IsObject(lr) ? cJSON_GetObjectItemCaseSensitive(lr, "rope_type") : NULL;
        if (cJSON_IsString(lty) && strcmp(lty->valuestring, "default"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: rope scaling of the sliding layers ('%s') is not supported", c->dir, lty->valuestring);
        if (v != 10000.0)
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: rope_local_base_freq %g is not supported (10000 is)", c->dir, v);
    }
    int64_t pattern = 6;
    const cJSON *lt = cfg_item(c, "layer_types");
    if (has(c, "sliding_window_pattern")) TRY(cfg_int(c, "sliding_window_pattern", true, &pattern));
    else if (cJSON_IsArray(lt) && cJSON_GetArraySize(lt) > 0) {
        pattern = 0;
        int i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++)
            if (cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention")) { pattern = i + 1; break; }
        if (!pattern) pattern = c->n_layer + 1;
    }
    if (pattern < 1) return th_set_error(TH_ERR_FORMAT, "%s/config.json: sliding_window_pattern must be at least 1", c->dir);
    if (cJSON_IsArray(lt)) {
        int i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            bool full = (i + 1) % pattern == 0;
            if (!cJSON_IsString(e) || strcmp(e->valuestring, full ? "full_attention" : "sliding_attention"))
                return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: layer_types[%d] does not follow a pattern of %lld "
                                    "sliding layers to 1 global layer", c->dir, i, (long long)pattern - 1);
        }
    }
    if (pattern != 6) gguf_w_u32(c->w, ARCH_KEY(k, "attention.sliding_window_pattern"), (uint32_t)pattern);
    return TH_OK;
}

static uint32_t file_type(const hf_conv *c, const char *embd) {
    const st_tensor *t = st_set_find(c->st, embd, NULL);
    return !t ? 0 : t->dtype == ST_F16 ? 1 : t->dtype == ST_BF16 ? 32 : 0;
}

static th_status write_hparams(hf_conv *c, const char *embd_name) {
    int64_t ctx = 4096;
    double theta = 10000, eps, prf = 1.0;
    TRY(cfg_int(c, "num_hidden_layers", true, &c->n_layer));
    TRY(cfg_int(c, "hidden_size", true, &c->n_embd));
    TRY(cfg_int(c, "num_attention_heads", true, &c->n_head));
    TRY(cfg_int(c, "intermediate_size", true, &c->n_ff));
    TRY(cfg_int(c, "vocab_size", true, &c->n_vocab));
    TRY(cfg_num(c, "rms_norm_eps", true, &eps));
    c->n_kv = c->n_head;
    if (has(c, "num_key_value_heads")) TRY(cfg_int(c, "num_key_value_heads", true, &c->n_kv));
    if (c->n_layer < 1 || c->n_layer > 4096 || c->n_head < 1 || c->n_kv < 1 || c->n_head % c->n_kv || c->n_vocab < 1)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: implausible sizes (%lld layers, %lld/%lld heads, vocab %lld)", c->dir,
                            (long long)c->n_layer, (long long)c->n_head, (long long)c->n_kv, (long long)c->n_vocab);
    c->head_dim = c->n_embd / c->n_head;
    if (has(c, "head_dim")) TRY(cfg_int(c, "head_dim", true, &c->head_dim));
    if (c->head_dim < 2 || c->head_dim > 1024)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: head_dim %lld is not plausible", c->dir, (long long)c->head_dim);
    if (has(c, "max_position_embeddings")) TRY(cfg_int(c, "max_position_embeddings", true, &ctx));
    if (has(c, "rope_theta")) TRY(cfg_num(c, "rope_theta", true, &theta));
    else {
        const cJSON *rt = cJSON_IsObject(rope_obj(c)) ? cJSON_GetObjectItemCaseSensitive(rope_obj(c), "rope_theta") : NULL;
        if (present(rt) && !cJSON_IsNumber(rt))
            return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_parameters.rope_theta must be a number", c->dir);
        if (present(rt)) theta = rt->valuedouble;
    }
    if (has(c, "partial_rotary_factor")) TRY(cfg_num(c, "partial_rotary_factor", true, &prf));
    int64_t n_rot = (int64_t)((double)c->head_dim * prf);
    if (prf <= 0 || prf > 1 || n_rot % 2)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: partial_rotary_factor %g gives an odd or empty rope width", c->dir, prf);
    const char *base = strrchr(c->dir, '/');
    gguf_w_str(c->w, "general.architecture", c->arch);
    gguf_w_str(c->w, "general.name", base && base[1] ? base + 1 : c->dir);
    gguf_w_u32(c->w, "general.file_type", file_type(c, embd_name));
    w_u32(c, "context_length", ctx);
    w_u32(c, "embedding_length", c->n_embd);
    w_u32(c, "block_count", c->n_layer);
    w_u32(c, "feed_forward_length", c->n_ff);
    w_u32(c, "attention.head_count", c->n_head);
    w_u32(c, "attention.head_count_kv", c->n_kv);
    bool mla = !strcmp(c->arch, "deepseek2");
    if (!mla) {   /* deepseek_keys writes its own head shapes */
        w_u32(c, "attention.key_length", c->head_dim);
        w_u32(c, "attention.value_length", c->head_dim);
        w_u32(c, "rope.dimension_count", n_rot);
    }
    w_f32(c, "rope.freq_base", theta);
    w_f32(c, "attention.layer_norm_rms_epsilon", eps);
    TRY(sliding_window(c));
    if (!strncmp(c->arch, "gemma", 5)) TRY(gemma_keys(c));
    TRY(mla ? deepseek_keys(c) : experts(c));
    bool b;
    TRY(cfg_bool(c, "tie_word_embeddings", !strncmp(c->arch, "gemma", 5), &c->tied));
    TRY(cfg_bool(c, "mlp_bias", false, &b));
    if (b) return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: mlp_bias = true is not supported", c->dir);
    if (mla) n_rot = c->n_rot;
    TRY(rope_scaling(c, theta, n_rot));
    return mla ? deepseek_yarn(c) : TH_OK;
}

/* ------------------------------------------------------------ tensor map */

static th_status add_layer(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
    bool gm = c->gemma_norms;
    xform norm = gm ? X_PLUS_ONE : X_NONE;
#define HF(fmt) (snprintf(h, sizeof h, "%slayers.%d." fmt, pre, il), h)
#define GG(fmt) (snprintf(g, sizeof g, "blk.%d." fmt, il), g)
    TRY(add(c, HF("input_layernorm.weight"), GG("attn_norm.weight"), true, norm));
    if (!strcmp(c->arch, "phi3")) {
        TRY(add(c, HF("self_attn.qkv_proj.weight"), GG("attn_qkv.weight"), true, X_NONE));
    } else {
        bool bias = !strcmp(c->arch, "qwen2");
        xform q = c->permute_qk ? X_PERMUTE_Q : X_NONE, k = c->permute_qk ? X_PERMUTE_K : X_NONE;
        TRY(add(c, HF("self_attn.q_proj.weight"), GG("attn_q.weight"), true, q));
        TRY(add(c, HF("self_attn.k_proj.weight"), GG("attn_k.weight"), true, k));
        TRY(add(c, HF("self_attn.v_proj.weight"), GG("attn_v.weight"), true, X_NONE));
        TRY(add(c, HF("self_attn.q_proj.bias"), GG("attn_q.bias"), bias, q));
        TRY(add(c, HF("self_attn.k_proj.bias"), GG("attn_k.bias"), bias, k));
        TRY(add(c, HF("self_attn.v_proj.bias"), GG("attn_v.bias"), bias, X_NONE));
    }
    bool qkn = !strcmp(c->arch, "qwen3") || !strcmp(c->arch, "qwen3moe") || !strcmp(c->arch, "gemma3") || !strcmp(c->arch, "olmoe");
    TRY(add(c, HF("self_attn.q_norm.weight"), GG("attn_q_norm.weight"), qkn, norm));
    TRY(add(c, HF("self_attn.k_norm.weight"), GG("attn_k_norm.weight"), qkn, norm));
    TRY(add(c, HF("self_attn.o_proj.weight"), GG("attn_output.weight"), true, X_NONE));
    TRY(add(c, HF("self_attn.o_proj.bias"), GG("attn_output.bias"), false, X_NONE));
    if (gm) {
        TRY(add(c, HF("post_attention_layernorm.weight"), GG("post_attention_norm.weight"), true, norm));
        TRY(add(c, HF("pre_feedforward_layernorm.weight"), GG("ffn_norm.weight"), true, norm));
    } else {
        TRY(add(c, HF("post_attention_layernorm.weight"), GG("ffn_norm.weight"), true, norm));
    }
    if (c->n_expert > 0) {
        char fmt[256];
        bool mixtral = !strcmp(c->family, "mixtral");
        TRY(add(c, mixtral ? HF("block_sparse_moe.gate.weight") : HF("mlp.gate.weight"), GG("ffn_gate_inp.weight"), true, X_NONE));
        static const char *const part[3][3] = { { "w1", "gate_proj", "ffn_gate_exps.weight" },
                                                 { "w3", "up_proj", "ffn_up_exps.weight" },
                                                 { "w2", "down_proj", "ffn_down_exps.weight" } };
        for (int p = 0; p < 3; p++) {
            snprintf(fmt, sizeof fmt, mixtral ? "%slayers.%%d.block_sparse_moe.experts.%%d.%s.weight"
                                              : "%slayers.%%d.mlp.experts.%%d.%s.weight", pre, part[p][mixtral ? 0 : 1]);
            snprintf(g, sizeof g, "blk.%d.%s", il, part[p][2]);
            TRY(add_experts(c, il, fmt, g));
        }
    } else if (!strcmp(c->arch, "phi3")) {
        TRY(add(c, HF("mlp.gate_up_proj.weight"), GG("ffn_up.weight"), true, X_NONE));
        TRY(add(c, HF("mlp.down_proj.weight"), GG("ffn_down.weight"), true, X_NONE));
    } else {
        TRY(add(c, HF("mlp.gate_proj.weight"), GG("ffn_gate.weight"), true, X_NONE));
        TRY(add(c, HF("mlp.up_proj.weight"), GG("ffn_up.weight"), true, X_NONE));
        TRY(add(c, HF("mlp.down_proj.weight"), GG("ffn_down.weight"), true, X_NONE));
    }
    if (gm) TRY(add(c, HF("post_feedforward_layernorm.weight"), GG("post_ffw_norm.weight"), true, norm));
#undef HF
#undef GG
    return TH_OK;
}

/* "model.", or the text model inside a multimodal checkpoint. */
static const char *prefix(const hf_conv *c) {
    static const char *const pre[] = { "model.", "model.language_model.", "language_model.model." };
    char name[128];
    for (size_t i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%sembed_tokens.weight", pre[i]);
        if (st_set_find(c->st, name, NULL)) return pre[i];
    }
    return pre[0];
}

static th_status add_tensors(hf_conv *c, const char *pre) {
    char h[256];
    xform norm = c->gemma_norms ? X_PLUS_ONE : X_NONE;
    snprintf(h, sizeof h, "%sembed_tokens.weight", pre);
    TRY(add(c, h, "token_embd.weight", true, X_NONE));
    const st_tensor *e = st_set_find(c->st, h, NULL);
    if (e->n_dims != 2 || (int64_t)e->shape[0] != c->n_vocab || (int64_t)e->shape[1] != c->n_embd)
        return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is not [vocab_size %lld, hidden_size %lld]", c->dir, h,
                            (long long)c->n_vocab, (long long)c->n_embd);
    snprintf(h, sizeof h, "%snorm.weight", pre);
    TRY(add(c, h, "output_norm.weight", true, norm));
    bool tied = c->tied;
    if (!tied || c->cfg != c->root) {
        const char *lm = c->cfg != c->root && st_set_find(c->st, "language_model.lm_head.weight", NULL)
                         ? "language_model.lm_head.weight" : "lm_head.weight";
        TRY(add(c, lm, "output.weight", !tied, X_NONE));
    }
    for (int il = 0; il < c->n_layer; il++)
        TRY(!strcmp(c->arch, "deepseek2") ? add_deepseek_layer(c, pre, il)
            : !strcmp(c->arch, "gpt-oss") ? add_oss_layer(c, pre, il) : add_layer(c, pre, il));
    return TH_OK;
}

/* ------------------------------------------------------------ open / write */

th_status hf_conv_open(const char *path, hf_conv **out) {
    *out = NULL;
    hf_conv *c = calloc(1, sizeof *c);
    if (!c) return th_set_error(TH_ERR_NOMEM, "out of memory");
    struct stat st;
    snprintf(c->dir, sizeof c->dir, "%s", path);
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {   /* a .safetensors file: its directory */
        char *slash = strrchr(c->dir, '/');
        if (slash) *slash = 0; else snprintf(c->dir, sizeof c->dir, ".");
    }
    size_t n = strlen(c->dir);
    while (n > 1 && c->dir[n - 1] == '/') c->dir[--n] = 0;
    char p[4200], *text = NULL;
    snprintf(p, sizeof p, "%s/config.json", c->dir);
    snprintf(p + 2100, sizeof p - 2100, "%s/tokenizer.json", c->dir);
    if (access(p, F_OK) != 0 && access(p + 2100, F_OK) == 0) {   /* a tokenizer alone: vocabulary-only loads */
        th_status s = (c->w = gguf_writer_new(32)) ? TH_OK : th_set_error(TH_ERR_NOMEM, "out of memory");
        if (!s) {
            gguf_w_str(c->w, "general.architecture", "hf-tokenizer");
            s = hf_tok_write(c->dir, 0, c->w);
        }
        if (s) { hf_conv_free(c); return s; }
        snprintf(c->arch, sizeof c->arch, "hf-tokenizer");
        *out = c;
        return TH_OK;
    }
    th_status s = hf_read_text(p, 16u << 20, &text, NULL);
    if (!s && !(c->root = cJSON_Parse(text))) s = th_set_error(TH_ERR_FORMAT, "%s: not valid JSON", p);
    free(text);
    if (!s && !cJSON_IsObject(c->root)) s = th_set_error(TH_ERR_FORMAT, "%s: not a JSON object", p);
    c->cfg = c->root;
    if (!s) s = pick_family(c);
    if (!s) s = st_set_open(path, &c->st);
    if (!s && !(c->w = gguf_writer_new(32))) s = th_set_error(TH_ERR_NOMEM, "out of memory");
    c->permute_qk = !strcmp(c->arch, "llama");
    c->gemma_norms = !strncmp(c->arch, "gemma", 5);
    const char *pre = s ? "" : prefix(c);
    char embd[128];
    snprintf(embd, sizeof embd, "%sembed_tokens.weight", pre);
    if (!s) s = write_hparams(c, embd);
    if (!s) s = hf_tok_write(c->dir, c->n_vocab, c->w);
    if (!s) s = add_tensors(c, pre);
    if (s) { hf_conv_free(c); return s; }
    *out = c;
    return TH_OK;
}

th_status hf_conv_to_file(hf_conv *c, const char *out_path) { return gguf_writer_to_file(c->w, out_path); }

static void release_st(void *st) { st_set_close(st); }

th_status hf_conv_to_gguf(hf_conv *c, gguf_file **out) {
    uint8_t *buf;
    uint64_t size;
    th_status s = gguf_writer_to_map(c->w, &buf, &size);
    if (s) return s;
    s = gguf_parse_owned(buf, size, buf, true, out);
    if (s) { munmap(buf, (size_t)size); return s; }
    /* tensors added as refs point into the safetensors maps, which the file now owns */
    gguf_file *f = *out;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const void *ref = gguf_writer_ref(c->w, i);
        if (ref) f->tensors[i].data = ref;
    }
    f->release = release_st;
    f->release_arg = c->st;
    c->st = NULL;
    return TH_OK;
}

void hf_conv_free(hf_conv *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
    free(c->bufs);
    gguf_writer_free(c->w);
    st_set_close(c->st);
    cJSON_Delete(c->root);
    free(c);
}

/* ------------------------------------------------------------ entry points */

th_status hf_open_as_gguf(const char *path, gguf_file **out) {
    hf_conv *c;
    th_status s = hf_conv_open(path, &c);
    if (s) return s;
    s = hf_conv_to_gguf(c, out);
    hf_conv_free(c);
    return s;
}

th_status th_hf_convert(const char *hf_path, const char *out_path) {
    if (!hf_path || !out_path) return th_set_error(TH_ERR_ARG, "th_hf_convert: NULL path");
    hf_conv *c;
    th_status s = hf_conv_open(hf_path, &c);
    if (s) return s;
    s = hf_conv_to_file(c, out_path);
    hf_conv_free(c);
    return s;
}
