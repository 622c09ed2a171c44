/* fuzz_precision.c — libFuzzer target for precision configs (src/precision/config.c).
 * The input is config text: parsed (th_prec_parse), and when it parses, resolved
 * against a fixed MoE-like tensor list (th_prec_resolve). Properties checked (trap on
 * failure): a failed parse leaves *out NULL and names the origin in its message; every
 * rule has a non-empty pattern, a type that can be written and an ordered expert
 * selector; a resolved assignment gives every tensor a known type whose block divides
 * its rows, and expert tables only for 3-D tensors. The first line of the input is also
 * used as a pattern against a few names and itself (the matcher must terminate). */
#include "precision/precision.h"
#include <stdlib.h>
#include <string.h>

static const th_qtensor tensors[] = {
    { "token_embd.weight", TH_F32, 2, { 256, 64, 1, 1 } },
    { "blk.0.attn_norm.weight", TH_F32, 1, { 256, 1, 1, 1 } },
    { "blk.0.attn_q.weight", TH_F32, 2, { 256, 256, 1, 1 } },
    { "blk.0.ffn_down_exps.weight", TH_F32, 3, { 96, 256, 8, 1 } },
    { "blk.12.ffn_up_exps.weight", TH_F32, 3, { 256, 96, 8, 1 } },
    { "blk.3.ffn_gate_inp.weight", TH_F32, 2, { 256, 8, 1, 1 } },
    { "output.weight", TH_F32, 2, { 256, 64, 1, 1 } },
};
#define NT (sizeof tensors / sizeof tensors[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    th_prec_config *c = (th_prec_config *)1;
    th_status s = th_prec_parse((const char *)data, size, "fz", &c);
    if (s) {
        if (c || !strstr(th_last_error(), "fz")) __builtin_trap();
    } else {
        for (size_t k = 0; k < c->n_rules; k++) {
            const th_prec_rule *r = &c->rules[k];
            if (!r->pattern[0] || !th_type_info_get(r->type) || (r->x_lo >= 0 && r->x_lo > r->x_hi)) __builtin_trap();
        }
        th_prec_assign a;
        if (th_prec_resolve(c, tensors, NT, NULL, &a) == TH_OK) {
            for (size_t i = 0; i < NT; i++) {
                for (uint32_t e = 0; e < a.n_expert[i]; e++) {
                    const th_type_info *ti = th_type_info_get(th_prec_type_of(&a, i, e));
                    if (!ti || tensors[i].ne[0] % ti->block) __builtin_trap();
                }
                if (a.expert[i] && a.n_expert[i] < 2) __builtin_trap();
            }
            th_prec_assign_free(&a);
        }
        th_prec_config_free(c);
    }
    size_t n = 0;
    while (n < size && n < 256 && data[n] != '\n') n++;
    char *pat = malloc(n + 1);
    if (!pat) return 0;
    memcpy(pat, data, n);
    pat[n] = 0;
    if (strlen(pat) == n) {
        for (size_t i = 0; i < NT; i++) th_prec_match(pat, tensors[i].name);
        th_prec_match(pat, pat);
    }
    free(pat);
    return 0;
}
