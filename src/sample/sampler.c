/* sampler.c — the token sampler behind th_sampler_* (include/theseus.h).
 *
 * One call of th_sampler_sample runs this chain, in llama.cpp's common order:
 *
 *   1. logit bias      cur[t] = logits[t] + bias[t]            (th_sampler_set_logit_bias)
 *   2. penalties       for each token t seen c > 0 times in the last penalty_last_n
 *                      accepted tokens: cur[t] /= repeat_penalty if cur[t] > 0, else
 *                      cur[t] *= repeat_penalty (llama.cpp); then
 *                      cur[t] -= c * frequency_penalty + presence_penalty (OpenAI).
 *   3. sanitize        NaN -> -inf, +inf -> FLT_MAX (so softmax stays finite).
 *                      If every value is now -inf, return the argmax of the raw
 *                      logits (NaN skipped, ties to the lower id), or token 0 if the
 *                      raw logits hold no non-NaN value above -inf.
 *   4. temperature <= 0: greedy — argmax of cur, ties to the lower id. Stop.
 *   5. top-k           keep the k largest (k <= 0: off).
 *   6. top-p           softmax over what is left; keep the smallest prefix of the
 *                      sorted order whose cumulative probability is >= top_p (at
 *                      least one token; top_p == 1: off).
 *   7. min-p           keep tokens with p >= min_p * p_max (min_p <= 0: off).
 *   8. temperature     p ~ exp((cur - max) / temperature) over what is left.
 *   9. draw            one uniform double from xoshiro256** (seeded by splitmix64
 *                      from the 64-bit seed), inverse CDF over the kept tokens.
 *
 * th_sampler_is_greedy says when the whole chain is step 4 for every history
 * (then th_get_argmax, with th_greedy_argmax's rule, gives the same token).
 *
 * "Sorted order" is logit descending, then id ascending: a total order, so every
 * step is deterministic and the same seed gives the same tokens. Steps 5-7 keep a
 * prefix of that order each, so the result is the shortest of the three prefixes.
 *
 * How: top-k is one pass with a k-heap; min-p is a floor on the logit
 * (max + log(min_p)); top-p is a weighted quickselect (no full sort), so the kept
 * tokens are drawn in a deterministic but unsorted order. Only the draw and
 * top-p compute exponentials, and only over the tokens still in play.
 *
 * All buffers are sized for n_vocab at creation; sampling never allocates (the
 * logit-bias table is allocated by the first th_sampler_set_logit_bias). The
 * penalty history is a ring of the last penalty_last_n tokens (or unbounded counts
 * for -1) with a per-token count and a list of distinct tokens, so penalties cost
 * O(distinct tokens) per call.
 */
#include "core/core.h"
#include "sample/greedy.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#define TH_PENALTY_LAST_N_DEFAULT 64
#define TH_PENALTY_LAST_N_MAX (1 << 24)

typedef struct cand {
    float logit;
    float w;      /* weight exp(logit - max), or tempered, when a step needs it */
    int32_t id;
} cand;

struct th_sampler {
    th_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];

    float *cur;       /* [n_vocab] logits after bias, penalties, sanitizing */
    cand *cands;      /* [n_vocab] scratch for truncation and logprobs */
    float *bias;      /* [n_vocab] additive bias; NULL until one is set */

    /* penalty history */
    int32_t window;   /* ring size; 0 = unbounded (penalty_last_n == -1) */
    int32_t *ring;    /* [window] last accepted tokens */
    int32_t ring_len, ring_head;
    int32_t *count;   /* [n_vocab] occurrences in the window */
    int32_t *distinct;/* [n_vocab] tokens with count > 0 */
    int32_t *slot;    /* [n_vocab] index of a token in distinct, -1 if absent */
    int32_t n_distinct;

    bool has_last;
    th_token last;

    float *spec_p;    /* [n_vocab] th_sampler_sample_spec's p; NULL until its first call */
};

/* ---------------------------------------------------------------- rng */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void rng_seed(uint64_t st[4], uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) st[i] = splitmix64(&x);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman & Vigna). */
static uint64_t rng_next(uint64_t st[4]) {
    uint64_t result = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t st[4]) { return (double)(rng_next(st) >> 11) * 0x1.0p-53; }

/* ---------------------------------------------------------------- ordering */

/* a comes before b in sorted order: larger logit first, then lower id. */
static inline bool cand_before(cand a, cand b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static inline void cand_swap(cand *a, cand *b) { cand t = *a; *a = *b; *b = t; }

/* Heapsort of c[0..n) into sorted order. The heap keeps the element first in
 * sorted order at the root; popping it to the back leaves the array reversed,
 * which the last loop undoes. No allocation, O(n log n) always. */
static void sift_down(cand *c, int32_t root, int32_t n) {
    for (;;) {
        int32_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && cand_before(c[child + 1], c[child])) child++;
        if (!cand_before(c[child], c[root])) return;
        cand_swap(&c[child], &c[root]);
        root = child;
    }
}

static void cand_sort(cand *c, int32_t n) {
    for (int32_t i = n / 2 - 1; i >= 0; i--) sift_down(c, i, n);
    for (int32_t end = n - 1; end > 0; end--) {
        cand_swap(&c[0], &c[end]);
        sift_down(c, 0, end);
    }
    /* the min-heap by "before" pops the first element to the back: reverse */
    for (int32_t i = 0, j = n - 1; i < j; i++, j--) cand_swap(&c[i], &c[j]);
}

/* ---------------------------------------------------------------- params */

th_sampler_params th_sampler_default_params(void) {
    th_sampler_params p = {
        .seed = 0,
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalty_last_n = TH_PENALTY_LAST_N_DEFAULT,
    };
    return p;
}

static th_status check_params(const th_sampler_params *p, int32_t n_vocab) {
    if (n_vocab <= 0)
        return th_set_error(TH_ERR_ARG, "sampler: n_vocab %d must be > 0", (int)n_vocab);
    if (!isfinite(p->temperature))
        return th_set_error(TH_ERR_ARG, "sampler: temperature %g is not finite", (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return th_set_error(TH_ERR_ARG, "sampler: top_p %g is outside (0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return th_set_error(TH_ERR_ARG, "sampler: min_p %g is outside [0, 1]", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return th_set_error(TH_ERR_ARG, "sampler: repeat_penalty %g must be finite and > 0",
                            (double)p->repeat_penalty);
    if (!isfinite(p->presence_penalty))
        return th_set_error(TH_ERR_ARG, "sampler: presence_penalty %g is not finite",
                            (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return th_set_error(TH_ERR_ARG, "sampler: frequency_penalty %g is not finite",
                            (double)p->frequency_penalty);
    if (p->penalty_last_n < -1 || p->penalty_last_n > TH_PENALTY_LAST_N_MAX)
        return th_set_error(TH_ERR_ARG, "sampler: penalty_last_n %d is outside [-1, %d]",
                            (int)p->penalty_last_n, TH_PENALTY_LAST_N_MAX);
    return TH_OK;
}

static bool penalties_on(const th_sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

/* ---------------------------------------------------------------- lifecycle */

th_status th_sampler_new(const th_sampler_params *params, int32_t n_vocab, th_sampler **out) {
    if (!out) return th_set_error(TH_ERR_ARG, "sampler: out is NULL");
    *out = NULL;
    th_sampler_params p = params ? *params : th_sampler_default_params();
    th_status st = check_params(&p, n_vocab);
    if (st != TH_OK) return st;

    th_sampler *s = calloc(1, sizeof *s);
    if (!s) return th_set_error(TH_ERR_NOMEM, "sampler: out of memory");
    s->p = p;
    s->n_vocab = n_vocab;
    s->window = p.penalty_last_n == -1 ? 0 : p.penalty_last_n == 0 ? TH_PENALTY_LAST_N_DEFAULT
                                                                    : p.penalty_last_n;
    size_t nv = (size_t)n_vocab;
    s->cur = malloc(nv * sizeof *s->cur);
    s->cands = malloc(nv * sizeof *s->cands);
    s->count = calloc(nv, sizeof *s->count);
    s->distinct = malloc(nv * sizeof *s->distinct);
    s->slot = malloc(nv * sizeof *s->slot);
    s->ring = s->window ? malloc((size_t)s->window * sizeof *s->ring) : NULL;
    if (!s->cur || !s->cands || !s->count || !s->distinct || !s->slot || (s->window && !s->ring)) {
        th_sampler_free(s);
        return th_set_error(TH_ERR_NOMEM, "sampler: out of memory for n_vocab %d", (int)n_vocab);
    }
    th_sampler_reset(s);
    *out = s;
    return TH_OK;
}

void th_sampler_free(th_sampler *s) {
    if (!s) return;
    free(s->cur);
    free(s->cands);
    free(s->bias);
    free(s->ring);
    free(s->count);
    free(s->distinct);
    free(s->slot);
    free(s->spec_p);
    free(s);
}

void th_sampler_reset(th_sampler *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n_distinct; i++) s->count[s->distinct[i]] = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) s->slot[i] = -1;
    s->n_distinct = 0;
    s->ring_len = s->ring_head = 0;
    s->has_last = false;
    rng_seed(s->rng, s->p.seed);
}

th_status th_sampler_set_logit_bias(th_sampler *s, th_token t, float bias) {
    if (!s) return th_set_error(TH_ERR_ARG, "sampler: NULL sampler");
    if (t < 0 || t >= s->n_vocab)
        return th_set_error(TH_ERR_ARG, "sampler: logit bias token %d is outside [0, %d)",
                            (int)t, (int)s->n_vocab);
    if (isnan(bias) || bias == INFINITY)
        return th_set_error(TH_ERR_ARG, "sampler: logit bias %g for token %d must be finite or -inf",
                            (double)bias, (int)t);
    if (!s->bias) {
        s->bias = calloc((size_t)s->n_vocab, sizeof *s->bias);
        if (!s->bias) return th_set_error(TH_ERR_NOMEM, "sampler: out of memory for logit bias");
    }
    s->bias[t] = bias;
    return TH_OK;
}

/* ---------------------------------------------------------------- history */

static void count_add(th_sampler *s, int32_t t) {
    if (s->count[t] == 0) {
        s->slot[t] = s->n_distinct;
        s->distinct[s->n_distinct++] = t;
    }
    if (s->count[t] < INT32_MAX) s->count[t]++;
}

static void count_remove(th_sampler *s, int32_t t) {
    if (--s->count[t] > 0) return;
    int32_t i = s->slot[t], moved = s->distinct[--s->n_distinct];
    s->distinct[i] = moved;
    s->slot[moved] = i;
    s->slot[t] = -1;
}

void th_sampler_accept(th_sampler *s, th_token t) {
    if (!s || t < 0 || t >= s->n_vocab) return;
    if (s->window == 0) { count_add(s, t); return; }
    if (s->ring_len == s->window) {
        count_remove(s, s->ring[s->ring_head]);
        s->ring_len--;
    }
    s->ring[s->ring_head] = t;
    s->ring_head = (s->ring_head + 1) % s->window;
    s->ring_len++;
    count_add(s, t);
}

/* ---------------------------------------------------------------- chain steps */

static void apply_penalties(th_sampler *s) {
    const th_sampler_params *p = &s->p;
    for (int32_t i = 0; i < s->n_distinct; i++) {
        int32_t t = s->distinct[i];
        float c = (float)s->count[t];
        float x = s->cur[t];
        x = x > 0.0f ? x / p->repeat_penalty : x * p->repeat_penalty;
        s->cur[t] = x - (c * p->frequency_penalty + p->presence_penalty);
    }
}

/* Argmax of the raw logits (NaN skipped, ties to the lower id); 0 if none is > -inf. */
static th_token raw_argmax(const float *logits, int32_t n) {
    th_token best = 0;
    float best_v = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > best_v) { best_v = logits[i]; best = i; }
    return best;
}

int32_t th_greedy_argmax(const float *x, int64_t n) {
    int32_t best = 0;
    float best_v = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] == INFINITY ? FLT_MAX : x[i];
        if (v > best_v) { best_v = v; best = (int32_t)i; }   /* NaN and -inf never win */
    }
    return best;
}

/* Step 3: sanitize cur in place. Returns the first maximal token, -1 if all are -inf. */
static th_token sanitize_argmax(float *cur, int32_t n) {
    th_token best = -1;
    float best_v = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        float x = cur[i];
        if (x != x) cur[i] = x = -INFINITY;
        else if (x == INFINITY) cur[i] = x = FLT_MAX;
        if (x > best_v) { best_v = x; best = i; }
    }
    return best;
}

/* Tokens of cur with logit >= floor (floor > -inf excludes banned ones) into c. */
static int32_t gather(const float *cur, int32_t n_vocab, float floor, cand *c) {
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (cur[i] >= floor) { c[n].logit = cur[i]; c[n].id = i; n++; }
    return n;
}

/* Heap whose root is the element LAST in sorted order (for streaming top-k). */
static void sift_down_last(cand *c, int32_t root, int32_t n) {
    for (;;) {
        int32_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && cand_before(c[child], c[child + 1])) child++;
        if (!cand_before(c[root], c[child])) return;
        cand_swap(&c[child], &c[root]);
        root = child;
    }
}

/* The k first tokens of cur in sorted order (among those >= floor) into c[0..k),
 * in one pass with a k-heap. Returns how many (< k if fewer qualify). */
static int32_t gather_top_k(const float *cur, int32_t n_vocab, float floor, int32_t k, cand *c) {
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (!(cur[i] >= floor)) continue;
        cand x = {.logit = cur[i], .id = i};
        if (n < k) {
            c[n++] = x;
            if (n == k) for (int32_t j = k / 2 - 1; j >= 0; j--) sift_down_last(c, j, k);
        } else if (cand_before(x, c[0])) {
            c[0] = x;
            sift_down_last(c, 0, k);
        }
    }
    return n;
}

/* Top-p by weighted selection: rearranges c[0..n) so that its shortest sorted
 * prefix with weight (c[i].w) >= target is c[0..L), and returns L. A quickselect
 * that recurses on the side holding the boundary: O(n) expected, no full sort. */
static int32_t top_p_select(cand *c, int32_t n, double target) {
    int32_t lo = 0, hi = n, rounds = 0;
    double acc = 0.0; /* weight of c[0..lo), all inside the prefix; acc < target */
    while (hi - lo > 32 && ++rounds <= 64) {
        int32_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (cand_before(c[mid], c[lo])) cand_swap(&c[mid], &c[lo]);
        if (cand_before(c[last], c[lo])) cand_swap(&c[last], &c[lo]);
        if (cand_before(c[last], c[mid])) cand_swap(&c[last], &c[mid]);
        cand_swap(&c[mid], &c[last]); /* median of three as pivot, at the end */
        cand pivot = c[last];
        int32_t store = lo;
        double mass = 0.0;
        for (int32_t i = lo; i < last; i++)
            if (cand_before(c[i], pivot)) { mass += c[i].w; cand_swap(&c[i], &c[store++]); }
        cand_swap(&c[store], &c[last]);
        if (acc + mass >= target) { hi = store; continue; }
        acc += mass + c[store].w;
        if (acc >= target) return store + 1;
        lo = store + 1;
    }
    cand_sort(c + lo, hi - lo);
    for (int32_t i = lo; i < hi; i++) {
        acc += c[i].w;
        if (acc >= target) return i + 1;
    }
    /* Not reached: either hi == n and the kept tokens hold less than the target
     * (min-p removed mass, or top_p ~ 1 and rounding), or rounding left acc just
     * short of a sum that did reach it. Either way [0, hi) is the prefix. */
    return hi;
}

/* Steps 5-7. Fills s->cands with the kept tokens and returns their count. */
static int32_t truncate_cands(th_sampler *s, float max) {
    const th_sampler_params *p = &s->p;
    cand *c = s->cands;
    /* p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p) */
    float min_p_floor = p->min_p > 0.0f ? max + logf(p->min_p) : -FLT_MAX;
    bool top_p_on = p->top_p < 1.0f;
    /* without top-p nothing needs the tokens below the min-p floor */
    float floor = top_p_on ? -FLT_MAX : min_p_floor;
    int32_t n = p->top_k > 0 ? gather_top_k(s->cur, s->n_vocab, floor, p->top_k, c)
                             : gather(s->cur, s->n_vocab, floor, c);
    if (!top_p_on) return n;
    double z = 0.0;
    for (int32_t i = 0; i < n; i++) z += c[i].w = expf(c[i].logit - max);
    if (p->min_p > 0.0f) { /* partition: tokens above the floor first */
        int32_t kept = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].logit >= min_p_floor) cand_swap(&c[kept++], &c[i]);
        n = kept;
    }
    return top_p_select(c, n, (double)p->top_p * z);
}

/* Steps 8-9: draw from c[0..n) with weights exp((logit - max) / temperature). */
static th_token draw(th_sampler *s, int32_t n, float max) {
    cand *c = s->cands;
    /* in double: 1 / a subnormal temperature overflows a float, and 0 * inf is NaN */
    double inv_t = 1.0 / (double)s->p.temperature, total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += c[i].w = expf((float)((double)(c[i].logit - max) * inv_t));
    double u = rng_uniform(s->rng) * total, cum = 0.0;
    int32_t last_nonzero = 0;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].w <= 0.0f) continue;
        cum += c[i].w;
        last_nonzero = i;
        if (u < cum) return c[i].id;
    }
    return c[last_nonzero].id; /* u landed on the rounding edge */
}

/* The chain reduces to step 4's argmax (th_greedy_argmax's rule) for every history:
 * nothing changes the raw logits (steps 1-2), and either the temperature stops at
 * step 4 or top-k keeps one token — the first in sorted order, i.e. that argmax —
 * which top-p and min-p always keep and the draw then returns (steps 6-9). */
bool th_sampler_greedy_below(const th_sampler *s) {
    if (!s || penalties_on(&s->p) || !(s->p.temperature <= 0.0f || s->p.top_k == 1)) return false;
    if (s->bias)
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (!(s->bias[i] <= 0.0f)) return false;
    return true;
}

float th_sampler_bias_of(const th_sampler *s, int32_t t) {
    return s && s->bias && t >= 0 && t < s->n_vocab ? s->bias[t] : 0.0f;
}

bool th_sampler_is_greedy(const th_sampler *s) {
    if (!s || penalties_on(&s->p)) return false;
    if (s->bias)
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (s->bias[i] != 0.0f) return false;
    return s->p.temperature <= 0.0f || s->p.top_k == 1;
}

th_token th_sampler_sample(th_sampler *s, const float *logits) {
    if (!s || !logits) { th_set_error(TH_ERR_ARG, "sampler: NULL sampler or logits"); return -1; }
    int32_t nv = s->n_vocab;
    if (s->bias) for (int32_t i = 0; i < nv; i++) s->cur[i] = logits[i] + s->bias[i];
    else memcpy(s->cur, logits, (size_t)nv * sizeof *s->cur);
    if (penalties_on(&s->p)) apply_penalties(s);

    th_token best = sanitize_argmax(s->cur, nv), tok;
    if (best < 0) tok = raw_argmax(logits, nv);
    else if (s->p.temperature <= 0.0f) tok = best;
    else {
        float max = s->cur[best];
        tok = draw(s, truncate_cands(s, max), max);
    }
    s->has_last = true;
    s->last = tok;
    return tok;
}

/* ---------------------------------------------------------------- speculative verification */

/* p[n_vocab] = the distribution th_sampler_sample draws from for logits (steps 1-8):
 * the same weights draw() uses, normalised; one-hot where the chain is an argmax. */
static void chain_probs(th_sampler *s, const float *logits, float *p) {
    int32_t nv = s->n_vocab;
    if (s->bias) for (int32_t i = 0; i < nv; i++) s->cur[i] = logits[i] + s->bias[i];
    else memcpy(s->cur, logits, (size_t)nv * sizeof *s->cur);
    if (penalties_on(&s->p)) apply_penalties(s);
    memset(p, 0, (size_t)nv * sizeof *p);
    th_token best = sanitize_argmax(s->cur, nv);
    if (best < 0) { p[raw_argmax(logits, nv)] = 1.0f; return; }
    if (s->p.temperature <= 0.0f) { p[best] = 1.0f; return; }
    float max = s->cur[best];
    int32_t n = truncate_cands(s, max);
    cand *c = s->cands;
    double inv_t = 1.0 / (double)s->p.temperature, total = 0.0;
    for (int32_t i = 0; i < n; i++) total += c[i].w = expf((float)((double)(c[i].logit - max) * inv_t));
    for (int32_t i = 0; i < n; i++) p[c[i].id] = (float)((double)c[i].w / total);
}

/* A draw from the weights w[n_vocab] (not necessarily normalised); -1 if they sum to 0. */
static th_token draw_dense(th_sampler *s, const float *w, int32_t nv) {
    double total = 0.0;
    for (int32_t i = 0; i < nv; i++) total += w[i];
    if (!(total > 0.0)) return -1;
    double u = rng_uniform(s->rng) * total, cum = 0.0;
    th_token last = -1;
    for (int32_t i = 0; i < nv; i++) {
        if (w[i] <= 0.0f) continue;
        cum += w[i];
        last = i;
        if (u < cum) return i;
    }
    return last;
}

th_token th_sampler_sample_spec(th_sampler *s, const float *logits, th_token draft, const float *q, float *p_out,
                                bool *accepted) {
    if (accepted) *accepted = false;
    if (!s || !logits) { th_set_error(TH_ERR_ARG, "sampler: NULL sampler or logits"); return -1; }
    int32_t nv = s->n_vocab;
    if (draft >= nv) { th_set_error(TH_ERR_ARG, "sampler: draft token %d is outside [0, %d)", (int)draft, (int)nv); return -1; }
    if (!s->spec_p && !(s->spec_p = malloc((size_t)nv * sizeof *s->spec_p))) {
        th_set_error(TH_ERR_NOMEM, "sampler: out of memory for a probability row");
        return -1;
    }
    float *p = s->spec_p;
    chain_probs(s, logits, p);
    if (p_out) memcpy(p_out, p, (size_t)nv * sizeof *p);
    th_token tok = -1;
    if (draft >= 0) {
        /* accept with probability min(1, p/q): u < p/q for u uniform in [0, 1) */
        double qd = q ? (double)q[draft] : 1.0, u = rng_uniform(s->rng);
        if (u * qd < (double)p[draft]) {
            tok = draft;
            if (accepted) *accepted = true;
        } else {   /* the residual max(0, p - q), in place */
            if (q) for (int32_t i = 0; i < nv; i++) p[i] = p[i] > q[i] ? p[i] - q[i] : 0.0f;
            else p[draft] = 0.0f;
            tok = draw_dense(s, p, nv);
            if (tok < 0) chain_probs(s, logits, p);   /* p == q up to rounding: draw from p */
        }
    }
    if (tok < 0) tok = draw_dense(s, p, nv);
    if (tok < 0) tok = raw_argmax(logits, nv);   /* not reached: p sums to 1 */
    s->has_last = true;
    s->last = tok;
    return tok;
}

/* ---------------------------------------------------------------- logprobs */

int32_t th_sampler_last_logprobs(th_sampler *s, th_token_logprob *top, int32_t n_top,
                                 float *chosen_logprob) {
    if (!s) { th_set_error(TH_ERR_ARG, "sampler: NULL sampler"); return -1; }
    if (!s->has_last) {
        th_set_error(TH_ERR_ARG, "sampler: no sample taken since creation or reset");
        return -1;
    }
    if (n_top > 0 && !top) { th_set_error(TH_ERR_ARG, "sampler: top is NULL"); return -1; }
    th_token best = sanitize_argmax(s->cur, s->n_vocab); /* cur is already sanitized */
    if (best < 0) {
        if (chosen_logprob) *chosen_logprob = -INFINITY;
        return 0;
    }
    double max = s->cur[best], sum = 0.0;
    for (int32_t i = 0; i < s->n_vocab; i++) sum += exp((double)s->cur[i] - max);
    double log_z = max + log(sum);
    if (chosen_logprob) *chosen_logprob = (float)((double)s->cur[s->last] - log_z);
    int32_t k = n_top <= 0 ? 0 : gather_top_k(s->cur, s->n_vocab, -FLT_MAX, n_top, s->cands);
    cand_sort(s->cands, k);
    for (int32_t i = 0; i < k; i++) {
        top[i].token = s->cands[i].id;
        top[i].logprob = (float)((double)s->cands[i].logit - log_z);
    }
    return k;
}
