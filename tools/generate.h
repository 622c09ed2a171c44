/* generate.h — the text-generation loop shared by `run` and `chat`: prompt
 * decode in chunks, sampling, streaming UTF-8-safe output, timing. */
#ifndef TH_GENERATE_H
#define TH_GENERATE_H

#include "cli.h"

typedef struct gen_stats {
    int32_t n_prompt, n_gen;
    double t_prompt, t_gen;   /* seconds */
} gen_stats;

/* Token history of sequence 0 of ctx: what the KV cache holds. */
typedef struct gen_history {
    th_token *tok;
    size_t n, cap;
} gen_history;

/* Bring the KV cache to `prompt` (re-using the longest common prefix with hist),
 * then sample up to n_predict tokens (a greedy sampler, th_sampler_is_greedy:
 * th_get_argmax, so a logits_argmax_only context works; stop at end-of-generation or a full
 * context), streaming text to out (may be NULL) and into *text (may be NULL,
 * malloc'd). hist is updated to what the cache holds. */
th_status generate(th_model *m, th_context *ctx, th_sampler *smp, gen_history *hist,
                   const th_token *prompt, size_t n, int32_t n_predict, FILE *out,
                   char **text, gen_stats *st);

void gen_print_stats(const gen_stats *st);

#endif
