/* model_load.c — th_model_load(): maps (or, use_mmap = false, reads) the GGUF
 * file, picks the architecture descriptor, loads the vocabulary and the weights
 * (typed views into the file's bytes), and the metadata/tensor helpers the
 * descriptors use; the precision hooks (experts with a type of their own,
 * load-time overrides: src/precision/); th_model_check_file / th_model_fault_recover (the file on
 * disk changing under a loaded model). */
#include "arch/arch.h"
#include "hf/hf.h"
#include "model.h"
#include "precision/internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

th_model_params th_model_default_params(void) {
    return (th_model_params){ .use_mmap = true, .verbose = false };
}

static void meta_key(const th_model *m, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", m->arch->name, suffix);
}

th_status th_meta_u32(th_model *m, const char *suffix, uint32_t *out, bool required) {
    char key[256];
    meta_key(m, suffix, key, sizeof key);
    if (gguf_get_u32(m->file, key, out)) return TH_OK;
    if (!required) return TH_ERR_FORMAT;
    return th_set_error(TH_ERR_FORMAT, "model metadata: required key '%s' is missing or not an unsigned 32-bit integer", key);
}

th_status th_meta_f32(th_model *m, const char *suffix, float *out, bool required) {
    char key[256];
    meta_key(m, suffix, key, sizeof key);
    float v;
    if (gguf_get_f32(m->file, key, &v) && v == v) { *out = v; return TH_OK; }
    if (!required) return TH_ERR_FORMAT;
    return th_set_error(TH_ERR_FORMAT, "model metadata: required key '%s' is missing or not a number", key);
}

static const char *store_name(th_model *m, const char *name) {
    size_t n = strlen(name) + 1;
    if (m->names_len + n > m->names_cap) return name; /* storage sized at load; fallback is static */
    char *dst = m->names + m->names_len;
    memcpy(dst, name, n);
    m->names_len += n;
    return dst;
}

/* "[576,49152]": the dimensions a tensor has (trailing 1s of unused dims dropped). */
static const char *shape_text(const uint64_t *ne, int n, char *buf, size_t cap) {
    while (n > 1 && ne[n - 1] == 1) n--;
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", d ? "," : "", (unsigned long long)ne[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

/* A needed shape: 0 (any size) as '*', trailing 1s dropped: "[512,*]". */
static const char *want_text(const int64_t *want, int n, char *buf, size_t cap) {
    while (n > 1 && want[n - 1] == 1) n--;
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n && k < cap; d++)
        k += want[d] ? (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? "," : "", (long long)want[d])
                     : (size_t)snprintf(buf + k, cap - k, "%s*", d ? "," : "");
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

th_status th_weight_get(th_model *m, th_weight *w, bool required, int64_t ne0, int64_t ne1,
                        int64_t ne2, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(w, 0, sizeof *w);
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    if (!t) {
        if (required) return th_set_error(TH_ERR_FORMAT, "tensor '%s' is missing (required by %s)", name, m->arch->name);
        return TH_OK;
    }
    int64_t want[3] = { ne0, ne1, ne2 };
    for (int d = 0; d < 3; d++) {
        uint64_t have = d < (int)t->n_dims ? t->ne[d] : 1;
        if (want[d] != 0 && (uint64_t)want[d] != have) {
            char got[96], need[96];
            return th_set_error(TH_ERR_FORMAT, "tensor '%s': shape %s but the hyper-parameters need %s", name,
                                shape_text(t->ne, (int)t->n_dims, got, sizeof got), want_text(want, 3, need, sizeof need));
        }
    }
    if (t->n_dims > 3 && t->ne[3] != 1)
        return th_set_error(TH_ERR_FORMAT, "tensor '%s': 4-D tensors are not expected here", name);
    const th_type_info *ti = th_type_info_get(t->type);
    if (!ti || !ti->supported)
        return th_set_error(TH_ERR_UNSUPPORTED, "tensor '%s': weight type %s is not supported", name, th_type_name(t->type));
    bool vector = t->n_dims == 1 || (t->ne[1] == 1 && (t->n_dims < 3 || t->ne[2] == 1));
    if (vector && t->type != TH_F32 && ne1 == 1)
        return th_set_error(TH_ERR_UNSUPPORTED, "tensor '%s': 1-D weights must be F32, this one is %s", name, ti->name);
    w->data = t->data;
    w->type = t->type;
    w->ne0 = (int64_t)t->ne[0];
    w->ne1 = t->n_dims > 1 ? (int64_t)t->ne[1] : 1;
    w->ne2 = t->n_dims > 2 ? (int64_t)t->ne[2] : 1;
    uint64_t rb;
    th_row_bytes(t->type, t->ne[0], &rb);   /* validated by the reader */
    w->row_bytes = (size_t)rb;
    w->name = store_name(m, name);
    return TH_OK;
}

static void count_params(th_model *m) {
    m->n_params = 0;
    m->n_bytes = 0;
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const gguf_tensor *t = &m->file->tensors[i];
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) n *= t->ne[d];
        m->n_params += n;
        m->n_bytes += t->nbytes;
    }
}

/* The quantization as llama.cpp names it (general.file_type), else the weight
 * type holding the most bytes. */
static const char *quant_name(const th_model *m) {
    static const char *const ftype[] = {
        [0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0", [9] = "Q5_1",
        [10] = "Q2_K", [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M",
        [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K", [21] = "Q2_K_S", [25] = "IQ4_NL", [30] = "IQ4_XS",
        [32] = "BF16", [38] = "MXFP4_MOE" };
    uint32_t ft;
    if (gguf_get_u32(m->file, "general.file_type", &ft) && ft < sizeof ftype / sizeof ftype[0] && ftype[ft])
        return ftype[ft];
    uint64_t bytes[TH_TYPE_COUNT] = { 0 };
    uint32_t best = TH_F32;
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const gguf_tensor *t = &m->file->tensors[i];
        if (t->type < TH_TYPE_COUNT && (bytes[t->type] += t->nbytes) > bytes[best]) best = t->type;
    }
    return th_type_name(best);
}

static void make_desc(th_model *m) {
    double p = (double)m->n_params;
    char size[32];
    if (p >= 1e9) snprintf(size, sizeof size, "%.1fB", p / 1e9);
    else if (p >= 1e6) snprintf(size, sizeof size, "%.0fM", p / 1e6);
    else snprintf(size, sizeof size, "%.2fM", p / 1e6);
    snprintf(m->desc, sizeof m->desc, "%s %s %s", m->arch->name, size, quant_name(m));
}

/* The embedding and output matrices need a row per token of the vocabulary.
 * Checked before the architecture reads its shapes (which take the vocabulary
 * size from token_embd), so that the tensor that is short is the one named. */
static th_status check_vocab_rows(th_model *m) {
    const gguf_kv *toks = gguf_get_arr(m->file, "tokenizer.ggml.tokens", GGUF_STRING);
    if (!toks) return TH_OK;   /* the vocabulary loader reports it */
    static const char *const names[] = { "token_embd.weight", "output.weight" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const gguf_tensor *t = gguf_find_tensor(m->file, names[i]);
        if (t && t->n_dims >= 2 && t->ne[1] < toks->arr_n)
            return th_set_error(TH_ERR_FORMAT, "tensor '%s': %llu rows, but the vocabulary (tokenizer.ggml.tokens) has "
                                "%llu tokens and needs one row each", names[i], (unsigned long long)t->ne[1],
                                (unsigned long long)toks->arr_n);
    }
    return TH_OK;
}

/* Tokenizer only: any architecture, no weights (theseus tokenize on vocab files). */
static const th_arch vocab_only_arch = { "vocab-only", NULL, NULL };

static th_status load_vocab_only(th_model *m, const char *path, const char *archname, th_model **out) {
    th_status s = th_vocab_load(m->file, &m->vocab);
    if (s) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", th_last_error());
        th_model_free(m);
        return th_set_error(s, "%s: %s", path, msg);
    }
    m->arch = &vocab_only_arch;
    m->hp.n_vocab = th_vocab_n_tokens(m->vocab);
    snprintf(m->desc, sizeof m->desc, "%s (vocabulary only)", archname);
    *out = m;
    return TH_OK;
}

th_status th_model_load(const char *path, const th_model_params *params, th_model **out) {
    *out = NULL;
    th_model_params dp = th_model_default_params();
    if (!params) params = &dp;
    if (!path) return th_set_error(TH_ERR_ARG, "th_model_load: no path");
    th_model *m = calloc(1, sizeof *m);
    if (!m) return th_set_error(TH_ERR_NOMEM, "out of memory");
    m->no_repack = params->no_repack;
    m->thp = params->thp;
    m->no_amx = params->no_amx;
    /* a Hugging Face directory (or .safetensors file) is presented as a GGUF (src/hf/) */
    bool hf = hf_is_model_path(path), quant = params->hf_type && !params->vocab_only;
    if (quant && !hf) {
        free(m);
        return th_set_error(TH_ERR_ARG, "%s: --type %s quantizes a Hugging Face directory at load; for a GGUF use theseus quantize",
                            path, params->hf_type);
    }
    th_status s = !hf ? gguf_open_ex(path, params->use_mmap, &m->file)
                  : quant ? hf_open_quantized(path, params->hf_type, params->n_threads, &m->file)
                  : hf_open_as_gguf(path, &m->file);
    if (s) { free(m); return s; }
    gguf_str arch;
    if (!gguf_get_str(m->file, "general.architecture", &arch)) {
        th_model_free(m);
        return th_set_error(TH_ERR_FORMAT, "%s: general.architecture is missing or not a string", path);
    }
    char archname[64];
    snprintf(archname, sizeof archname, "%.*s", (int)TH_MIN(arch.len, 63), arch.ptr);
    if (params->vocab_only) return load_vocab_only(m, path, archname, out);
    m->arch = th_arch_find(archname);
    if (!m->arch) {
        th_model_free(m);
        return th_set_error(TH_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)", path,
                            archname, th_arch_names());
    }
    m->names_cap = 64 * (m->file->n_tensors + 8);
    m->names = malloc(m->names_cap);
    if (!m->names) { th_model_free(m); return th_set_error(TH_ERR_NOMEM, "out of memory"); }
    if ((s = check_vocab_rows(m)) || (s = m->arch->load(m)) || (s = th_prec_bind_experts(m)) ||
        (s = th_prec_apply_load(m, params)) || (s = th_vocab_load(m->file, &m->vocab))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", th_last_error());
        th_model_free(m);
        return th_set_error(s, "%s: %s", path, msg);
    }
    if (th_vocab_n_tokens(m->vocab) > m->hp.n_vocab) {
        th_model_free(m);
        return th_set_error(TH_ERR_FORMAT, "%s: vocabulary has %d tokens but token_embd has only %d rows", path,
                            th_vocab_n_tokens(m->vocab), m->hp.n_vocab);
    }
    count_params(m);
    make_desc(m);
    if (params->verbose)
        fprintf(stderr, "theseus: loaded %s (%s, %.1f MiB, %d layers, vocab %d)\n", path, m->desc,
                (double)m->n_bytes / (1 << 20), m->hp.n_layer, m->hp.n_vocab);
    *out = m;
    return TH_OK;
}

void th_model_free(th_model *m) {
    if (!m) return;
    th_vocab_free(m->vocab);
    for (size_t i = 0; i < m->meta_cache_n; i++) free(m->meta_cache[i]);
    free(m->meta_cache);
    free(m->layers);
    free(m->names);
    free(m->packed_buf);
    if (m->dev_free) m->dev_free(m);
    th_prec_model_free(m);
    gguf_close(m->file);
    free(m);
}

/* ---------------------------------------------------------------- the file under a loaded model */

th_status th_model_check_file(const th_model *m) {
    char why[1024];
    if (!m) return th_set_error(TH_ERR_ARG, "th_model_check_file: NULL model");
    if (!m->file->file_backed) return TH_OK;   /* read into memory: what is on disk no longer matters */
    if (m->file->map_zeroed)
        return th_set_error(TH_ERR_IO, "the mapping of '%s' faulted (the file shrank under it) and was replaced by zeros",
                            m->file->path);
    if (gguf_file_changed(m->file, why, sizeof why)) return th_set_error(TH_ERR_IO, "%s since it was loaded", why);
    return TH_OK;
}

bool th_model_fault_recover(th_model *m, const void *addr) {
    return m && gguf_map_fault_replace(m->file, addr);
}

bool th_model_is_mapped(const th_model *m) { return m && m->file->file_backed && !m->file->map_zeroed; }
