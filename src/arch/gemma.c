/* gemma.c — Gemma 2 and Gemma 3. Both: embeddings × sqrt(E), GELU-gated FFN,
 * post-attention and post-FFN RMSNorms before each residual add, NEOX rope,
 * tied output. Gemma 2: attention and final-logit soft-capping, sliding window
 * on even layers. Gemma 3: per-head q/k RMSNorm, a pattern of 5 local
 * (sliding-window, rope base 10000, unscaled) layers to 1 global layer, no caps.
 * The query scale is "<arch>.attention.scale" when the file has it, else
 * 1/sqrt(head_dim), except 1/sqrt(E/heads) for the 27B models (which the layer
 * count identifies, as llama.cpp does). */
#include "arch/arch.h"
#include <math.h>

static void gemma_common(th_model *m, int32_t layers_27b) {
    th_hparams *hp = &m->hp;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->act_fn = TH_ACT_GELU;
    float scale;
    bool in_meta = th_meta_f32(m, "attention.scale", &scale, false) == TH_OK && scale > 0;
    if (!in_meta && hp->n_layer == layers_27b) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
}

static th_status gemma2_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .post_norms = true, .tied_output_ok = true };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    th_hparams *hp = &m->hp;
    gemma_common(m, 46);
    th_meta_f32(m, "attn_logit_softcapping", &hp->attn_softcap, false);
    th_meta_f32(m, "final_logit_softcapping", &hp->final_softcap, false);
    int32_t w = th_decoder_window(m);
    for (int il = 0; il < hp->n_layer; il++) m->layers[il].window = il % 2 == 0 ? w : 0;
    return TH_OK;
}

static th_status gemma3_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .post_norms = true, .qk_norm = true, .tied_output_ok = true };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    th_hparams *hp = &m->hp;
    gemma_common(m, 62);
    uint32_t pattern = 6;
    if (th_meta_u32(m, "attention.sliding_window_pattern", &pattern, false) != TH_OK || pattern < 1) pattern = 6;
    int32_t w = th_decoder_window(m);
    for (int il = 0; il < hp->n_layer; il++) {
        th_layer *L = &m->layers[il];
        if ((uint32_t)(il + 1) % pattern != 0 && w > 0) {
            L->window = w;
            L->rope_base = 10000.0f;
            L->rope_freq_scale = 1.0f;
        }
    }
    return TH_OK;
}

const th_arch th_arch_gemma2 = { "gemma2", gemma2_load, th_describe_common };
const th_arch th_arch_gemma3 = { "gemma3", gemma3_load, th_describe_common };
