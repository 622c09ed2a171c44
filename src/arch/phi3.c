/* phi3.c — Phi-3 / Phi-3.5: fused attn_qkv [q; k; v], fused ffn_up [gate; up]
 * (SwiGLU), NEOX rope with LongRoPE factors when present (the context picks the
 * long or short set by its size), sliding window on every layer when
 * "phi3.attention.sliding_window" is set. */
#include "arch/arch.h"

static th_status phi3_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .fused_qkv = true, .fused_gate_up = true, .tied_output_ok = true };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    int32_t w = th_decoder_window(m);
    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].window = w;
    return TH_OK;
}

const th_arch th_arch_phi3 = { "phi3", phi3_load, th_describe_common };
