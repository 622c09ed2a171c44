/* llama.c — the Llama family (Llama 1/2/3, SmolLM, Mistral, TinyLlama …):
 * RMSNorm, RoPE (NORM layout, optional rope_freqs for Llama-3 scaling),
 * grouped-query attention, SwiGLU FFN, tied or separate output. */
#include "arch/arch.h"
#include <stdio.h>

static th_status llama_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NORM, .qkv_bias = false, .tied_output_ok = true };
    return th_decoder_load(m, &o);
}

static void llama_describe(const th_model *m, char *buf, size_t cap) {
    snprintf(buf, cap, "rope=norm%s%s", m->rope_freqs.data ? " rope_freqs" : "",
             m->output.data == m->tok_embd.data ? " tied_output" : "");
}

const th_arch th_arch_llama = { "llama", llama_load, llama_describe };
