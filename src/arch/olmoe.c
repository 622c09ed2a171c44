/* olmoe.c — OLMoE: q/k RMSNorm over the whole projection (before the split
 * into heads and the rope), NEOX rope, a softmax router whose top-k weights are
 * not renormalised. */
#include "arch/arch.h"

static th_status olmoe_load(th_model *m) {
    th_decoder_opts o = { .rope_type = TH_ROPE_NEOX, .qk_norm = true, .moe_ok = true };
    th_status s = th_decoder_load(m, &o);
    if (s) return s;
    if (m->hp.n_expert == 0) return th_set_error(TH_ERR_FORMAT, "olmoe: expert_count is missing or 0");
    m->hp.gating = TH_GATING_SOFTMAX;
    m->hp.expert_weights_norm = false;
    return TH_OK;
}

const th_arch th_arch_olmoe = { "olmoe", olmoe_load, th_describe_common };
