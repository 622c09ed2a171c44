/* hf_internal.h — what the pieces of the config.json translation share
 * (hf_model.c: the common families and the helpers; hf_mla_oss.c: DeepSeek-V2/V3
 * and GPT-OSS). Not a public interface. */
#ifndef TH_HF_INTERNAL_H
#define TH_HF_INTERNAL_H

#include "hf/hf.h"
#include "hf/safetensors.h"
#include <cjson/cJSON.h>

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

#define TRY(x) do { th_status s_ = (x); if (s_) return s_; } while (0)
#define ARCH_KEY(buf, suffix) (snprintf(buf, sizeof buf, "%s.%s", c->arch, suffix), buf)

typedef enum { X_NONE, X_PERMUTE_Q, X_PERMUTE_K, X_PLUS_ONE } xform;

/* config keys (of c->cfg): errors name the key and its expected type */
const cJSON *hf_cfg_item(const hf_conv *c, const char *key);
bool hf_present(const cJSON *j);
bool hf_has(const hf_conv *c, const char *key);
th_status hf_cfg_int(const hf_conv *c, const char *key, bool required, int64_t *out);
th_status hf_cfg_num(const hf_conv *c, const char *key, bool required, double *out);
th_status hf_cfg_bool(const hf_conv *c, const char *key, bool def, bool *out);
const cJSON *hf_rope_obj(const hf_conv *c);
/* "<arch>.<suffix>" keys */
void hf_w_u32(hf_conv *c, const char *suffix, int64_t v);
void hf_w_f32(hf_conv *c, const char *suffix, double v);
/* converted data the writer points at (freed with the conv) */
void *hf_keep(hf_conv *c, size_t n);
float hf_elem_f32(const st_tensor *t, uint64_t i);
uint32_t hf_gguf_type_of(int dtype);
/* an HF weight (F32/F16/BF16/F64, 1-3 dims), NULL with *s set if absent and required */
const st_tensor *hf_get(hf_conv *c, const char *name, bool required, th_status *s);
/* one HF tensor as a GGUF tensor (referenced in place when no change is needed) */
th_status hf_add(hf_conv *c, const char *hf_name, const char *gg_name, bool required, xform x);
/* per-expert 2-D tensors (fmt with layer and expert index) stacked */
th_status hf_add_experts(hf_conv *c, int il, const char *fmt, const char *gg_name);

/* hf_mla_oss.c */
th_status hf_deepseek_keys(hf_conv *c);
th_status hf_deepseek_yarn(hf_conv *c);
th_status hf_add_deepseek_layer(hf_conv *c, const char *pre, int il);
th_status hf_gpt_oss_keys(hf_conv *c);
th_status hf_add_oss_layer(hf_conv *c, const char *pre, int il);

#endif
