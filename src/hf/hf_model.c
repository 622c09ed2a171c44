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
 * phi3; olmoe; deepseek_v2 / deepseek_v3 -> deepseek2 and gpt_oss -> gpt-oss
 * (their keys and layers in hf_mla_oss.c). */
#include "hf/hf_internal.h"
#include "hf/hf_json.h"
#include "hf/safetensors.h"
#include "quant/quant.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>



const char *hf_conv_arch(const hf_conv *c) { return c->arch; }

bool hf_is_model_path(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) return true;
    size_t n = strlen(path);
    return n > 12 && !strcmp(path + n - 12, ".safetensors");
}

/* ------------------------------------------------------------ config keys */

const cJSON *hf_cfg_item(const hf_conv *c, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(c->cfg, key);
}

bool hf_present(const cJSON *j) { return j && !cJSON_IsNull(j); }
bool hf_has(const hf_conv *c, const char *key) { return hf_present(hf_cfg_item(c, key)); }

/* An integer key: TH_OK with *out, TH_ERR_FORMAT if absent and not required
 * (*out unchanged) — or an error naming the key. */
th_status hf_cfg_int(const hf_conv *c, const char *key, bool required, int64_t *out) {
    const cJSON *j = hf_cfg_item(c, key);
    if (!hf_present(j)) {
        if (!required) return TH_ERR_FORMAT;
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' is missing (needed for %s)", c->dir, key, c->family);
    }
    double d = cJSON_IsNumber(j) ? j->valuedouble : NAN;
    if (!(d >= 0 && d <= 1e15 && d == floor(d)))
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' must be a non-negative integer", c->dir, key);
    *out = (int64_t)d;
    return TH_OK;
}

th_status hf_cfg_num(const hf_conv *c, const char *key, bool required, double *out) {
    const cJSON *j = hf_cfg_item(c, key);
    if (!hf_present(j)) {
        if (!required) return TH_ERR_FORMAT;
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' is missing (needed for %s)", c->dir, key, c->family);
    }
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' must be a number", c->dir, key);
    *out = j->valuedouble;
    return TH_OK;
}

th_status hf_cfg_bool(const hf_conv *c, const char *key, bool def, bool *out) {
    const cJSON *j = hf_cfg_item(c, key);
    *out = def;
    if (!hf_present(j)) return TH_OK;
    if (!cJSON_IsBool(j)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: key '%s' must be true or false", c->dir, key);
    *out = cJSON_IsTrue(j);
    return TH_OK;
}


void hf_w_u32(hf_conv *c, const char *suffix, int64_t v) {
    char k[128];
    gguf_w_u32(c->w, ARCH_KEY(k, suffix), (uint32_t)v);
}
void hf_w_f32(hf_conv *c, const char *suffix, double v) {
    char k[128];
    gguf_w_f32(c->w, ARCH_KEY(k, suffix), (float)v);
}

/* ------------------------------------------------------------ tensors */

void *hf_keep(hf_conv *c, size_t n) {
    void **nb = realloc(c->bufs, (c->n_bufs + 1) * sizeof *nb);
    if (!nb) return NULL;
    c->bufs = nb;
    void *p = malloc(n ? n : 1);
    if (p) c->bufs[c->n_bufs++] = p;
    return p;
}

float hf_elem_f32(const st_tensor *t, uint64_t i) {
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

uint32_t hf_gguf_type_of(int dtype) {
    return dtype == ST_F16 ? TH_F16 : dtype == ST_BF16 ? TH_BF16 : TH_F32;
}


/* F8_E4M3 (the "fn" variant: no infinities, S.1111.111 is NaN) */
static float f8_e4m3(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    float v = e == 15 && m == 7 ? NAN : e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return b & 0x80 ? -v : v;
}

/* A DeepSeek-V3 style F8_E4M3 weight [rows, cols] with <name>_scale_inv
 * [ceil(rows/B0), ceil(cols/B1)] (B from quantization_config.weight_block_size,
 * default 128 x 128): w = f8 * scale_inv of its block, as an F32 tensor of its own
 * (begin = UINT64_MAX marks it as not inside a file). */
static const st_tensor *fp8_view(hf_conv *c, const st_tensor *t, const char *name, th_status *s) {
    char sn[300];
    snprintf(sn, sizeof sn, "%s_scale_inv", name);
    const st_tensor *sc = st_set_find(c->st, sn, NULL);
    int64_t b0 = 128, b1 = 128;
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->root, "quantization_config"),
                                                       "weight_block_size");
    if (cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2 && cJSON_IsNumber(bs->child) && cJSON_IsNumber(bs->child->next)) {
        b0 = hf_json_i64(bs->child, 0);
        b1 = hf_json_i64(bs->child->next, 0);
    }
    if (b0 < 1 || b1 < 1 || b0 > (1 << 20) || b1 > (1 << 20)) {
        *s = th_set_error(TH_ERR_FORMAT, "%s/config.json: quantization_config.weight_block_size must be two positive integers", c->dir);
        return NULL;
    }
    if (t->n_dims != 2 || !sc || sc->n_dims != 2 || (sc->dtype != ST_F32 && sc->dtype != ST_BF16 && sc->dtype != ST_F16) ||
        sc->shape[0] != (t->shape[0] + (uint64_t)b0 - 1) / (uint64_t)b0 || sc->shape[1] != (t->shape[1] + (uint64_t)b1 - 1) / (uint64_t)b1) {
        *s = th_set_error(TH_ERR_FORMAT, "%s: F8_E4M3 tensor '%s' needs a 2-D F32 '%s' of [ceil(rows/%lld), ceil(cols/%lld)]", c->dir,
                          name, sn, (long long)b0, (long long)b1);
        return NULL;
    }
    st_tensor *v = hf_keep(c, sizeof *v);
    float *f = hf_keep(c, (size_t)t->n_elem * 4);
    if (!v || !f) { *s = th_set_error(TH_ERR_NOMEM, "out of memory converting '%s'", name); return NULL; }
    uint64_t R = t->shape[0], C = t->shape[1];
    for (uint64_t r = 0; r < R; r++)
        for (uint64_t k = 0; k < C; k++)
            f[r * C + k] = f8_e4m3(t->data[r * C + k]) * hf_elem_f32(sc, (r / (uint64_t)b0) * sc->shape[1] + k / (uint64_t)b1);
    *v = *t;
    v->dtype = ST_F32;
    v->nbytes = t->n_elem * 4;
    v->data = (const uint8_t *)f;
    v->begin = UINT64_MAX;
    return v;
}

const st_tensor *hf_get(hf_conv *c, const char *name, bool required, th_status *s) {
    *s = TH_OK;
    const st_tensor *t = st_set_find(c->st, name, NULL);
    if (!t && required) *s = th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is missing (required by %s)", c->dir, name, c->family);
    if (t && t->dtype == ST_F8_E4M3) return fp8_view(c, t, name, s);
    if (t && t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64)
        *s = th_set_error(TH_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported for weights (F32, F16, BF16, F64, F8_E4M3 with _scale_inv are)",
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
th_status hf_add(hf_conv *c, const char *hf_name, const char *gg_name, bool required, xform x) {
    th_status s;
    const st_tensor *t = hf_get(c, hf_name, required, &s);
    if (!t) return s;
    uint64_t ne[3] = { 1, 1, 1 };
    for (int d = 0; d < t->n_dims; d++) ne[d] = t->shape[t->n_dims - 1 - d];
    bool to_f32 = t->n_dims == 1 || t->dtype == ST_F64 || x == X_PLUS_ONE;
    uint32_t type = to_f32 ? TH_F32 : hf_gguf_type_of(t->dtype);
    size_t esz = to_f32 ? 4 : st_dtype_size(t->dtype);
    uint64_t nbytes = t->n_elem * esz;
    const uint8_t *src = t->data;
    if (to_f32) {
        float *f = hf_keep(c, (size_t)nbytes);
        if (!f) return th_set_error(TH_ERR_NOMEM, "out of memory converting '%s'", hf_name);
        for (uint64_t i = 0; i < t->n_elem; i++) f[i] = hf_elem_f32(t, i) + (x == X_PLUS_ONE ? 1.0f : 0.0f);
        src = (const uint8_t *)f;
    }
    if (x == X_PERMUTE_Q || x == X_PERMUTE_K) {
        int64_t nh = x == X_PERMUTE_Q ? c->n_head : c->n_kv, rows = (int64_t)t->shape[0];
        if (rows % nh || (rows / nh) % 2)
            return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s': %lld rows do not split into %lld heads of even size", c->dir,
                                hf_name, (long long)rows, (long long)nh);
        uint8_t *p = hf_keep(c, (size_t)nbytes);
        if (!p) return th_set_error(TH_ERR_NOMEM, "out of memory converting '%s'", hf_name);
        permute_rows(p, src, rows, nh, (size_t)(nbytes / (uint64_t)rows));
        src = p;
    }
    /* bytes usable as they are stay in the safetensors map (if aligned to their element) */
    if (src == t->data && t->begin != UINT64_MAX && (uintptr_t)src % esz == 0)
        gguf_w_tensor_ref(c->w, gg_name, type, (uint32_t)t->n_dims, ne, src, nbytes);
    else
        gguf_w_tensor(c->w, gg_name, type, (uint32_t)t->n_dims, ne, src, nbytes);
    return TH_OK;
}

/* Experts 0..n-1 of layer il (HF names from fmt with il and the expert index)
 * stacked into one GGUF tensor [cols, rows, n_expert]. */
th_status hf_add_experts(hf_conv *c, int il, const char *fmt, const char *gg_name) {
    char name[256];
    th_status s;
    const st_tensor *t0 = NULL;
    uint8_t *buf = NULL;
    size_t each = 0;
    for (int64_t e = 0; e < c->n_expert; e++) {
        snprintf(name, sizeof name, fmt, il, (int)e);
        const st_tensor *t = hf_get(c, name, true, &s);
        if (!t) return s;
        if (!t0) {
            t0 = t;
            if (t->n_dims != 2) return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is not 2-D", c->dir, name);
            each = (size_t)t->nbytes;
            if (!(buf = hf_keep(c, each * (size_t)c->n_expert))) return th_set_error(TH_ERR_NOMEM, "out of memory stacking '%s'", name);
        } else if (t->dtype != t0->dtype || t->n_dims != 2 || t->shape[0] != t0->shape[0] || t->shape[1] != t0->shape[1]) {
            return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s': dtype or shape differs from expert 0's", c->dir, name);
        }
        memcpy(buf + each * (size_t)e, t->data, each);
    }
    if (t0->dtype == ST_F64) return th_set_error(TH_ERR_UNSUPPORTED, "%s: F64 expert weights are not supported", c->dir);
    uint64_t ne[3] = { t0->shape[1], t0->shape[0], (uint64_t)c->n_expert };
    gguf_w_tensor(c->w, gg_name, hf_gguf_type_of(t0->dtype), 3, ne, buf, each * (size_t)c->n_expert);
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
const cJSON *hf_rope_obj(const hf_conv *c) {
    const cJSON *rs = hf_cfg_item(c, "rope_scaling");
    if (hf_present(rs)) return rs;
    rs = hf_cfg_item(c, "rope_parameters");
    const cJSON *full = cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "full_attention") : NULL;
    return cJSON_IsObject(full) ? full : rs;
}

static const cJSON *local_rope_obj(const hf_conv *c) {
    const cJSON *rs = hf_cfg_item(c, "rope_parameters");
    return cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "sliding_attention") : NULL;
}

/* Phi-3 LongRoPE: long_factor / short_factor as rope_factors_long / _short (the
 * context picks one by its size against original_max_position_embeddings, as
 * llama.cpp does; transformers picks by the sequence length), and the attention
 * factor: attention_factor, else sqrt(1 + ln(s) / ln(orig)) with s = context / orig. */
static th_status longrope(hf_conv *c, const cJSON *rs, int64_t n_rot) {
    int64_t orig = hf_json_i64(cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings"), 0), ctx = 4096;
    if (orig < 1) TRY(hf_cfg_int(c, "original_max_position_embeddings", true, &orig));
    if (hf_has(c, "max_position_embeddings")) TRY(hf_cfg_int(c, "max_position_embeddings", true, &ctx));
    if (orig < 1) return th_set_error(TH_ERR_FORMAT, "%s/config.json: original_max_position_embeddings must be positive", c->dir);
    static const char *const keys[2] = { "long_factor", "short_factor" };
    static const char *const names[2] = { "rope_factors_long.weight", "rope_factors_short.weight" };
    int64_t nf = n_rot / 2;
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(rs, keys[k]);
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != nf)
            return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.%s must be an array of %lld numbers (rope dims / 2)",
                                c->dir, keys[k], (long long)nf);
        float *f = hf_keep(c, (size_t)nf * 4);
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
    hf_w_f32(c, "rope.scaling.attn_factor", af);
    hf_w_u32(c, "rope.scaling.original_context_length", orig);
    return TH_OK;
}

/* rope_scaling: linear / yarn as metadata, llama3 as a rope_freqs tensor. */
static th_status rope_scaling(hf_conv *c, double theta, int64_t n_rot) {
    const cJSON *rs = hf_rope_obj(c);
    if (!hf_present(rs)) return TH_OK;
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
        hf_w_f32(c, "rope.scaling.factor", factor);
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings");
        if (!strcmp(type, "yarn")) {
            const int64_t orig = hf_json_i64(o, 0);
            if (orig < 1 || orig > UINT32_MAX)
                return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_scaling.original_max_position_embeddings is missing or not "
                                    "a positive 32-bit integer (yarn)", c->dir);
            hf_w_u32(c, "rope.scaling.original_context_length", orig);
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
    float *f = hf_keep(c, (size_t)nf * 4);
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
        TRY(hf_cfg_bool(c, "use_sliding_window", false, &use));
        if (use) return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: use_sliding_window = true is not supported for %s", c->dir, c->family);
        return TH_OK;
    }
    if (!strcmp(c->family, "llama") || !hf_has(c, "sliding_window")) return TH_OK;
    TRY(hf_cfg_int(c, "sliding_window", true, &w));
    if (w > 0) hf_w_u32(c, "attention.sliding_window", w);
    return TH_OK;
}

/* The MoE keys of each family; n_expert = 0 for dense models. */
static th_status experts(hf_conv *c) {
    bool oss = !strcmp(c->family, "gpt_oss");
    bool moe = !strcmp(c->family, "mixtral") || !strcmp(c->family, "qwen3_moe") || !strcmp(c->family, "olmoe") || oss;
    c->n_expert = 0;
    if (!moe) return TH_OK;
    /* transformers 4 writes num_experts for qwen3_moe / olmoe, 5 writes num_local_experts everywhere */
    const char *count = hf_has(c, "num_local_experts") || !hf_has(c, "num_experts") ? "num_local_experts" : "num_experts";
    int64_t used, ff;
    bool norm;
    TRY(hf_cfg_int(c, count, true, &c->n_expert));
    TRY(hf_cfg_int(c, "num_experts_per_tok", true, &used));
    if (c->n_expert < 1 || used < 1 || used > c->n_expert)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: %lld experts with %lld per token is not plausible", c->dir,
                            (long long)c->n_expert, (long long)used);
    hf_w_u32(c, "expert_count", c->n_expert);
    hf_w_u32(c, "expert_used_count", used);
    if (!strcmp(c->family, "qwen3_moe")) {
        int64_t step = 1;
        TRY(hf_cfg_int(c, "moe_intermediate_size", true, &ff));
        hf_w_u32(c, "expert_feed_forward_length", ff);
        if (hf_has(c, "decoder_sparse_step")) TRY(hf_cfg_int(c, "decoder_sparse_step", true, &step));
        const cJSON *mo = hf_cfg_item(c, "mlp_only_layers");
        if (step != 1 || (hf_present(mo) && cJSON_GetArraySize(mo) > 0))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: decoder_sparse_step / mlp_only_layers (dense layers between "
                                "MoE layers) are not supported", c->dir);
    }
    if (oss) return hf_gpt_oss_keys(c);
    if (strcmp(c->family, "mixtral")) {
        TRY(hf_cfg_bool(c, "norm_topk_prob", false, &norm));
        if (norm != !strcmp(c->family, "qwen3_moe"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: norm_topk_prob = %s is not supported for %s", c->dir,
                                norm ? "true" : "false", c->family);
    }
    return TH_OK;
}

static th_status gemma_keys(hf_conv *c) {
    double v;
    char k[128];
    if (hf_has(c, "query_pre_attn_scalar")) {
        TRY(hf_cfg_num(c, "query_pre_attn_scalar", true, &v));
        if (!(v > 0)) return th_set_error(TH_ERR_FORMAT, "%s/config.json: query_pre_attn_scalar must be positive", c->dir);
        if (v != (double)c->head_dim) hf_w_f32(c, "attention.scale", 1.0 / sqrt(v));
    }
    const char *caps[] = { "attn_logit_softcapping", "final_logit_softcapping" };
    for (int i = 0; i < 2; i++) {
        if (!hf_has(c, caps[i])) continue;
        TRY(hf_cfg_num(c, caps[i], true, &v));
        if (!strcmp(c->arch, "gemma3"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: %s is not supported for gemma3", c->dir, caps[i]);
        hf_w_f32(c, caps[i], v);
    }
    if (strcmp(c->arch, "gemma3")) return TH_OK;
    const cJSON *lr = local_rope_obj(c);
    const cJSON *lt_theta = cJSON_IsObject(lr) ? cJSON_GetObjectItemCaseSensitive(lr, "rope_theta") : NULL;
    if (hf_has(c, "rope_local_base_freq") || cJSON_IsNumber(lt_theta)) {
        if (hf_has(c, "rope_local_base_freq")) TRY(hf_cfg_num(c, "rope_local_base_freq", true, &v));
        else v = lt_theta->valuedouble;
        const cJSON *lty = cJSON_IsObject(lr) ? cJSON_GetObjectItemCaseSensitive(lr, "rope_type") : NULL;
        if (cJSON_IsString(lty) && strcmp(lty->valuestring, "default"))
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: rope scaling of the sliding layers ('%s') is not supported", c->dir, lty->valuestring);
        if (v != 10000.0)
            return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: rope_local_base_freq %g is not supported (10000 is)", c->dir, v);
    }
    int64_t pattern = 6;
    const cJSON *lt = hf_cfg_item(c, "layer_types");
    if (hf_has(c, "sliding_window_pattern")) TRY(hf_cfg_int(c, "sliding_window_pattern", true, &pattern));
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
    TRY(hf_cfg_int(c, "num_hidden_layers", true, &c->n_layer));
    TRY(hf_cfg_int(c, "hidden_size", true, &c->n_embd));
    TRY(hf_cfg_int(c, "num_attention_heads", true, &c->n_head));
    TRY(hf_cfg_int(c, "intermediate_size", true, &c->n_ff));
    TRY(hf_cfg_int(c, "vocab_size", true, &c->n_vocab));
    TRY(hf_cfg_num(c, "rms_norm_eps", true, &eps));
    c->n_kv = c->n_head;
    if (hf_has(c, "num_key_value_heads")) TRY(hf_cfg_int(c, "num_key_value_heads", true, &c->n_kv));
    if (c->n_layer < 1 || c->n_layer > 4096 || c->n_head < 1 || c->n_kv < 1 || c->n_head % c->n_kv || c->n_vocab < 1)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: implausible sizes (%lld layers, %lld/%lld heads, vocab %lld)", c->dir,
                            (long long)c->n_layer, (long long)c->n_head, (long long)c->n_kv, (long long)c->n_vocab);
    c->head_dim = c->n_embd / c->n_head;
    if (hf_has(c, "head_dim")) TRY(hf_cfg_int(c, "head_dim", true, &c->head_dim));
    if (c->head_dim < 2 || c->head_dim > 1024)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: head_dim %lld is not plausible", c->dir, (long long)c->head_dim);
    if (hf_has(c, "max_position_embeddings")) TRY(hf_cfg_int(c, "max_position_embeddings", true, &ctx));
    if (hf_has(c, "rope_theta")) TRY(hf_cfg_num(c, "rope_theta", true, &theta));
    else {
        const cJSON *rt = cJSON_IsObject(hf_rope_obj(c)) ? cJSON_GetObjectItemCaseSensitive(hf_rope_obj(c), "rope_theta") : NULL;
        if (hf_present(rt) && !cJSON_IsNumber(rt))
            return th_set_error(TH_ERR_FORMAT, "%s/config.json: rope_parameters.rope_theta must be a number", c->dir);
        if (hf_present(rt)) theta = rt->valuedouble;
    }
    if (hf_has(c, "partial_rotary_factor")) TRY(hf_cfg_num(c, "partial_rotary_factor", true, &prf));
    int64_t n_rot = (int64_t)((double)c->head_dim * prf);
    if (prf <= 0 || prf > 1 || n_rot % 2)
        return th_set_error(TH_ERR_FORMAT, "%s/config.json: partial_rotary_factor %g gives an odd or empty rope width", c->dir, prf);
    const char *base = strrchr(c->dir, '/');
    gguf_w_str(c->w, "general.architecture", c->arch);
    gguf_w_str(c->w, "general.name", base && base[1] ? base + 1 : c->dir);
    gguf_w_u32(c->w, "general.file_type", file_type(c, embd_name));
    hf_w_u32(c, "context_length", ctx);
    hf_w_u32(c, "embedding_length", c->n_embd);
    hf_w_u32(c, "block_count", c->n_layer);
    hf_w_u32(c, "feed_forward_length", c->n_ff);
    hf_w_u32(c, "attention.head_count", c->n_head);
    hf_w_u32(c, "attention.head_count_kv", c->n_kv);
    bool mla = !strcmp(c->arch, "deepseek2");
    if (!mla) {   /* deepseek_keys writes its own head shapes */
        hf_w_u32(c, "attention.key_length", c->head_dim);
        hf_w_u32(c, "attention.value_length", c->head_dim);
        hf_w_u32(c, "rope.dimension_count", n_rot);
    }
    hf_w_f32(c, "rope.freq_base", theta);
    hf_w_f32(c, "attention.layer_norm_rms_epsilon", eps);
    TRY(sliding_window(c));
    if (!strncmp(c->arch, "gemma", 5)) TRY(gemma_keys(c));
    TRY(mla ? hf_deepseek_keys(c) : experts(c));
    bool b;
    TRY(hf_cfg_bool(c, "tie_word_embeddings", !strncmp(c->arch, "gemma", 5), &c->tied));
    TRY(hf_cfg_bool(c, "mlp_bias", false, &b));
    if (b) return th_set_error(TH_ERR_UNSUPPORTED, "%s/config.json: mlp_bias = true is not supported", c->dir);
    if (mla) n_rot = c->n_rot;
    TRY(rope_scaling(c, theta, n_rot));
    return mla ? hf_deepseek_yarn(c) : TH_OK;
}

/* ------------------------------------------------------------ tensor map */

static th_status add_layer(hf_conv *c, const char *pre, int il) {
    char h[256], g[128];
    bool gm = c->gemma_norms;
    xform norm = gm ? X_PLUS_ONE : X_NONE;
#define HF(fmt) (snprintf(h, sizeof h, "%slayers.%d." fmt, pre, il), h)
#define GG(fmt) (snprintf(g, sizeof g, "blk.%d." fmt, il), g)
    TRY(hf_add(c, HF("input_layernorm.weight"), GG("attn_norm.weight"), true, norm));
    if (!strcmp(c->arch, "phi3")) {
        TRY(hf_add(c, HF("self_attn.qkv_proj.weight"), GG("attn_qkv.weight"), true, X_NONE));
    } else {
        bool bias = !strcmp(c->arch, "qwen2");
        xform q = c->permute_qk ? X_PERMUTE_Q : X_NONE, k = c->permute_qk ? X_PERMUTE_K : X_NONE;
        TRY(hf_add(c, HF("self_attn.q_proj.weight"), GG("attn_q.weight"), true, q));
        TRY(hf_add(c, HF("self_attn.k_proj.weight"), GG("attn_k.weight"), true, k));
        TRY(hf_add(c, HF("self_attn.v_proj.weight"), GG("attn_v.weight"), true, X_NONE));
        TRY(hf_add(c, HF("self_attn.q_proj.bias"), GG("attn_q.bias"), bias, q));
        TRY(hf_add(c, HF("self_attn.k_proj.bias"), GG("attn_k.bias"), bias, k));
        TRY(hf_add(c, HF("self_attn.v_proj.bias"), GG("attn_v.bias"), bias, X_NONE));
    }
    bool qkn = !strcmp(c->arch, "qwen3") || !strcmp(c->arch, "qwen3moe") || !strcmp(c->arch, "gemma3") || !strcmp(c->arch, "olmoe");
    TRY(hf_add(c, HF("self_attn.q_norm.weight"), GG("attn_q_norm.weight"), qkn, norm));
    TRY(hf_add(c, HF("self_attn.k_norm.weight"), GG("attn_k_norm.weight"), qkn, norm));
    TRY(hf_add(c, HF("self_attn.o_proj.weight"), GG("attn_output.weight"), true, X_NONE));
    TRY(hf_add(c, HF("self_attn.o_proj.bias"), GG("attn_output.bias"), false, X_NONE));
    if (gm) {
        TRY(hf_add(c, HF("post_attention_layernorm.weight"), GG("post_attention_norm.weight"), true, norm));
        TRY(hf_add(c, HF("pre_feedforward_layernorm.weight"), GG("ffn_norm.weight"), true, norm));
    } else {
        TRY(hf_add(c, HF("post_attention_layernorm.weight"), GG("ffn_norm.weight"), true, norm));
    }
    if (c->n_expert > 0) {
        char fmt[256];
        bool mixtral = !strcmp(c->family, "mixtral");
        TRY(hf_add(c, mixtral ? HF("block_sparse_moe.gate.weight") : HF("mlp.gate.weight"), GG("ffn_gate_inp.weight"), true, X_NONE));
        static const char *const part[3][3] = { { "w1", "gate_proj", "ffn_gate_exps.weight" },
                                                 { "w3", "up_proj", "ffn_up_exps.weight" },
                                                 { "w2", "down_proj", "ffn_down_exps.weight" } };
        for (int p = 0; p < 3; p++) {
            snprintf(fmt, sizeof fmt, mixtral ? "%slayers.%%d.block_sparse_moe.experts.%%d.%s.weight"
                                              : "%slayers.%%d.mlp.experts.%%d.%s.weight", pre, part[p][mixtral ? 0 : 1]);
            snprintf(g, sizeof g, "blk.%d.%s", il, part[p][2]);
            TRY(hf_add_experts(c, il, fmt, g));
        }
    } else if (!strcmp(c->arch, "phi3")) {
        TRY(hf_add(c, HF("mlp.gate_up_proj.weight"), GG("ffn_up.weight"), true, X_NONE));
        TRY(hf_add(c, HF("mlp.down_proj.weight"), GG("ffn_down.weight"), true, X_NONE));
    } else {
        TRY(hf_add(c, HF("mlp.gate_proj.weight"), GG("ffn_gate.weight"), true, X_NONE));
        TRY(hf_add(c, HF("mlp.up_proj.weight"), GG("ffn_up.weight"), true, X_NONE));
        TRY(hf_add(c, HF("mlp.down_proj.weight"), GG("ffn_down.weight"), true, X_NONE));
    }
    if (gm) TRY(hf_add(c, HF("post_feedforward_layernorm.weight"), GG("post_ffw_norm.weight"), true, norm));
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
    TRY(hf_add(c, h, "token_embd.weight", true, X_NONE));
    const st_tensor *e = st_set_find(c->st, h, NULL);
    if (e->n_dims != 2 || (int64_t)e->shape[0] != c->n_vocab || (int64_t)e->shape[1] != c->n_embd)
        return th_set_error(TH_ERR_FORMAT, "%s: tensor '%s' is not [vocab_size %lld, hidden_size %lld]", c->dir, h,
                            (long long)c->n_vocab, (long long)c->n_embd);
    snprintf(h, sizeof h, "%snorm.weight", pre);
    TRY(hf_add(c, h, "output_norm.weight", true, norm));
    bool tied = c->tied;
    if (!tied || c->cfg != c->root) {
        const char *lm = c->cfg != c->root && st_set_find(c->st, "language_model.lm_head.weight", NULL)
                         ? "language_model.lm_head.weight" : "lm_head.weight";
        TRY(hf_add(c, lm, "output.weight", !tied, X_NONE));
    }
    for (int il = 0; il < c->n_layer; il++)
        TRY(!strcmp(c->arch, "deepseek2") ? hf_add_deepseek_layer(c, pre, il)
            : !strcmp(c->arch, "gpt-oss") ? hf_add_oss_layer(c, pre, il) : add_layer(c, pre, il));
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
