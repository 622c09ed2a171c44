/* fuzz_sampler.c — libFuzzer target for the sampler: the input bytes are the
 * parameters (seed, temperature, top_k, top_p, min_p, the three penalties and
 * their window, as raw floats/ints, so NaN, infinities and negatives come up),
 * a vocabulary size (1 to 512), logit biases, a history of accepted tokens and
 * the logits of a few steps (raw floats, NaN and inf included). Properties
 * (trap on failure): th_sampler_new either refuses with an error message or
 * gives a sampler; every sample is a token id in [0, n_vocab); the
 * log-probabilities are <= 0 (or -inf), descending, and name valid ids; a
 * greedy sampler picks what th_sampler_is_greedy promises (the raw argmax
 * under th_get_argmax's rule); the same seed replays the same tokens. */
#include "theseus.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const uint8_t *p; size_t n; } rd;

static uint32_t take_u32(rd *r) {
    uint32_t v = 0;
    size_t k = r->n < 4 ? r->n : 4;
    memcpy(&v, r->p, k);
    r->p += k; r->n -= k;
    return v;
}
static float take_f32(rd *r) { uint32_t u = take_u32(r); float f; memcpy(&f, &u, 4); return f; }

/* th_get_argmax's rule: NaN as -inf, +inf as FLT_MAX, lowest id among the largest, 0 if none above -inf. */
static int32_t rule_argmax(const float *l, int32_t n) {
    int32_t best = -1;
    float bv = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        float v = isnan(l[i]) ? -INFINITY : isinf(l[i]) && l[i] > 0 ? 3.402823466e38f : l[i];
        if (v > bv) { bv = v; best = i; }
    }
    return best < 0 ? 0 : best;
}

static void run(const uint8_t *data, size_t size, int32_t *trace, int *n_trace) {
    rd r = { data, size };
    th_sampler_params p = th_sampler_default_params();
    p.seed = (uint64_t)take_u32(&r) << 32 | take_u32(&r);
    p.temperature = take_f32(&r);
    p.top_k = (int32_t)take_u32(&r);
    p.top_p = take_f32(&r);
    p.min_p = take_f32(&r);
    p.repeat_penalty = take_f32(&r);
    p.presence_penalty = take_f32(&r);
    p.frequency_penalty = take_f32(&r);
    uint32_t w = take_u32(&r);
    p.penalty_last_n = (w & 0x80000000u) ? (int32_t)w : (int32_t)(w % 200) - 1;
    int32_t nv = (int32_t)(take_u32(&r) % 512) + 1;
    th_sampler *s = NULL;
    th_status st = th_sampler_new(&p, nv, &s);
    if (st != TH_OK) { if (s || !*th_last_error()) __builtin_trap(); return; }
    int n_bias = (int)(take_u32(&r) % 8);
    for (int i = 0; i < n_bias; i++) {
        int32_t t = (int32_t)take_u32(&r);
        float b = take_f32(&r);
        th_sampler_set_logit_bias(s, t % (nv + 2) - 1, b);   /* -1 and nv are out of range */
    }
    int n_hist = (int)(take_u32(&r) % 32);
    for (int i = 0; i < n_hist; i++) th_sampler_accept(s, (int32_t)(take_u32(&r) % (uint32_t)(nv + 4)) - 2);
    bool greedy = th_sampler_is_greedy(s);
    float *logits = malloc((size_t)nv * sizeof *logits);
    th_token_logprob top[20];
    for (int step = 0; logits && step < 4 && r.n > 0; step++) {
        for (int32_t i = 0; i < nv; i++) logits[i] = r.n ? take_f32(&r) : (float)(i % 7);
        th_token t = th_sampler_sample(s, logits);
        if (t < 0 || t >= nv) __builtin_trap();
        if (greedy && t != rule_argmax(logits, nv)) __builtin_trap();
        if (*n_trace < 16) trace[(*n_trace)++] = t;
        float chosen;
        int32_t k = th_sampler_last_logprobs(s, top, 20, &chosen);
        if (k < 0 || k > 20) __builtin_trap();
        if (!(chosen <= 0.0f) && !isnan(chosen)) __builtin_trap();
        for (int32_t i = 0; i < k; i++) {
            if (top[i].token < 0 || top[i].token >= nv || top[i].logprob > 1e-4f) __builtin_trap();
            if (i && top[i].logprob > top[i - 1].logprob) __builtin_trap();
        }
        th_sampler_accept(s, t);
    }
    free(logits);
    th_sampler_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t a[16], b[16];
    int na = 0, nb = 0;
    run(data, size, a, &na);
    run(data, size, b, &nb);   /* the same seed and inputs: the same tokens */
    if (na != nb || memcmp(a, b, (size_t)na * sizeof *a)) __builtin_trap();
    return 0;
}
