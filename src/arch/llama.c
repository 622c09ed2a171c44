/* llama.c — the Llama family (Llama 1/2/3, SmolLM, Mistral, TinyLlama, Mixtral …):
 * RMSNorm, RoPE (NORM layout, optional rope_freqs for Llama-3 scaling),
 * grouped-query attention, SwiGLU FFN or a Mixtral-style mixture of experts
 * (softmax router, top-k renormalised), Mistral-style sliding window on every
 * layer when "llama.attention.sliding_window" is set, tied or separate output. */
#include "arch/arch.h"
#include <stdio.h>

static th_status llama_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NORM, .tied_output_ok = true, .moe_ok = true };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    m->hp.gating = TH_GATING_SOFTMAX;
    m->hp.expert_weights_norm = true;
    int32_t w = th_decoder_window(m);
    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].window = w;
    return TH_OK;
}

const th_arch th_arch_llama = { "llama", llama_load, th_describe_common };
