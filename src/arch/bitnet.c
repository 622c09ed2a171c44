/* bitnet.c — BitNet b1.58 as llama.cpp and ik_llama.cpp name it ("bitnet"; their
 * convert_hf_to_gguf.py BitnetModel): a llama-style block (RMSNorm, NEOX rope as both
 * peers rotate it, GQA,
 * SwiGLU) with two extra RMSNorms, attn_sub_norm on the attention output before wo
 * and ffn_sub_norm on silu(gate) ⊙ up before down, and the output head always the
 * token embedding. The ternary weights come as TQ1_0 / TQ2_0 / IQ2_BN (or F16/F32);
 * the optional per-tensor "scale" tensors of older conversions are refused (the
 * converters fold the scale into the quantized blocks). The sub-norm FFN is the backend
 * op ffn_sub (CPU and CUDA); a backend without it refuses such models. */
#include "arch/arch.h"
#include <stdio.h>

static th_status bitnet_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .tied_output_ok = true };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    const th_hparams *hp = &m->hp;
    int64_t att = (int64_t)hp->n_head * hp->head_dim_v;
    for (int il = 0; il < hp->n_layer; il++) {
        th_layer *L = &m->layers[il];
        if ((s = th_weight_get(m, &L->attn_sub_norm, true, att, 1, 1, "blk.%d.attn_sub_norm.weight", il)) ||
            (s = th_weight_get(m, &L->ffn_sub_norm, true, hp->n_ff, 1, 1, "blk.%d.ffn_sub_norm.weight", il)))
            return s;
        if (L->attn_sub_norm.type != TH_F32 || L->ffn_sub_norm.type != TH_F32)
            return th_set_error(TH_ERR_UNSUPPORTED, "blk.%d: bitnet's sub-norm weights must be F32", il);
        const char *sc[] = { "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down" };
        for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) {
            th_weight w = { 0 };
            if ((s = th_weight_get(m, &w, false, 1, 1, 1, "blk.%d.%s.scale", il, sc[k]))) return s;
            if (w.data)
                return th_set_error(TH_ERR_UNSUPPORTED, "blk.%d.%s.scale: per-tensor scales of bitnet files are not supported",
                                    il, sc[k]);
        }
    }
    m->output = m->tok_embd;   /* the head is the embedding, even where an output.weight exists */
    return TH_OK;
}

const th_arch th_arch_bitnet = { "bitnet", bitnet_load, th_describe_common };
