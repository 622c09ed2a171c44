/* test_sample.c — tests of the sampler (th_sampler_*, src/sample/sampler.c).
 * Expectations are worked out by hand from the documented chain (bias →
 * penalties → greedy | top-k → top-p → min-p → temperature → draw), or by an
 * independent, naive re-implementation of the truncation rules (full sort) in
 * this file; empirical frequencies are checked within 5 standard deviations. */
/* check.h: CHECK(cond) without a message, and RUN()'s layout, trip these */
#pragma GCC diagnostic ignored "-Wformat-zero-length"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#include "theseus.h"
#include "check.h"
#include "sample/greedy.h"

#include <float.h>
#include <stdint.h>

/* ---------------------------------------------------------------- helpers */

/* Test-side PRNG for random logits (independent of the sampler's). */
static uint64_t lcg_state = 88172645463325252ull;
static double test_rand01(void) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg_state >> 11) * 0x1.0p-53;
}

/* Params with every truncation and penalty off. */
static th_sampler_params plain(float temperature, uint64_t seed) {
    th_sampler_params p = th_sampler_default_params();
    p.seed = seed;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    return p;
}

static th_sampler *make(const th_sampler_params *p, int32_t n_vocab) {
    th_sampler *s = NULL;
    th_status st = th_sampler_new(p, n_vocab, &s);
    CHECK(st == TH_OK && s, "th_sampler_new: %s", th_last_error());
    return s;
}

/* Draw n times; counts[t]++ per draw. Returns false if a draw was out of range. */
static bool draw_counts(th_sampler *s, const float *logits, int32_t n_vocab, int n, long *counts) {
    for (int32_t t = 0; t < n_vocab; t++) counts[t] = 0;
    for (int i = 0; i < n; i++) {
        th_token t = th_sampler_sample(s, logits);
        if (t < 0 || t >= n_vocab) return false;
        counts[t]++;
    }
    return true;
}

/* Observed frequency within 5 standard deviations of p (and exactly 0 if p == 0). */
static void check_freq(long count, long n, double p, int token) {
    double f = (double)count / (double)n;
    if (p == 0.0) { CHECK(count == 0, "token %d drawn %ld times, expected never", token, count); return; }
    double sd = sqrt(p * (1.0 - p) / (double)n);
    CHECK(fabs(f - p) <= 5.0 * sd + 1e-12, "token %d: frequency %.5f, expected %.5f (sd %.5f)",
          token, f, p, sd);
}

/* The three-token distribution 0.5 / 0.3 / 0.2 used throughout. */
static const double P3[3] = {0.5, 0.3, 0.2};
static void logits3(float *l) { for (int i = 0; i < 3; i++) l[i] = (float)log(P3[i]); }

/* ---------------------------------------------------------------- tests */

static void test_greedy_argmax(void) {
    const float a[4] = {0.1f, 3.0f, -2.0f, 2.9f};
    const float b[3] = {-5.0f, -1.0f, -3.0f};
    const float ties[4] = {1.0f, 4.0f, 4.0f, 2.0f};
    float temps[2] = {0.0f, -1.0f};
    for (int k = 0; k < 2; k++) {
        th_sampler_params p = plain(temps[k], 7);
        p.top_k = 40; p.top_p = 0.5f; p.min_p = 0.1f; /* irrelevant when greedy */
        th_sampler *s4 = make(&p, 4), *s3 = make(&p, 3);
        if (!s4 || !s3) { th_sampler_free(s4); th_sampler_free(s3); return; }
        CHECK(th_sampler_sample(s4, a) == 1);
        CHECK(th_sampler_sample(s3, b) == 1);
        CHECK(th_sampler_sample(s4, ties) == 1, "ties go to the lower id");
        th_sampler_free(s4);
        th_sampler_free(s3);
    }
}

static void test_top_k1_is_greedy(void) {
    enum { V = 1000 };
    static float l[V];
    th_sampler_params p = plain(5.0f, 99);
    p.top_k = 1;
    th_sampler *s = make(&p, V);
    if (!s) return;
    for (int trial = 0; trial < 200; trial++) {
        int best = 0;
        for (int i = 0; i < V; i++) {
            l[i] = (float)(test_rand01() * 10.0 - 5.0);
            if (l[i] > l[best]) best = i;
        }
        th_token t = th_sampler_sample(s, l);
        CHECK(t == best, "trial %d: got %d expected %d", trial, t, best);
    }
    th_sampler_free(s);
}

static void test_top_k2_frequencies(void) {
    float l[3];
    logits3(l);
    th_sampler_params p = plain(1.0f, 5);
    p.top_k = 2;
    th_sampler *s = make(&p, 3);
    if (!s) return;
    long c[3];
    enum { N = 20000 };
    CHECK(draw_counts(s, l, 3, N, c));
    check_freq(c[0], N, 0.5 / 0.8, 0);
    check_freq(c[1], N, 0.3 / 0.8, 1);
    check_freq(c[2], N, 0.0, 2);
    th_sampler_free(s);
}

static void test_top_p(void) {
    float l[3];
    logits3(l);
    long c[3];
    enum { N = 20000 };
    /* tiny nucleus: only the top token */
    th_sampler_params p = plain(1.0f, 11);
    p.top_p = 0.01f;
    th_sampler *s = make(&p, 3);
    if (!s) return;
    CHECK(draw_counts(s, l, 3, 1000, c));
    CHECK(c[0] == 1000, "top_p 0.01 drew token 0 only %ld/1000 times", c[0]);
    th_sampler_free(s);

    /* 0.75: 0.5 < 0.75 <= 0.8 keeps {0, 1}, renormalised 0.625 / 0.375 */
    p.top_p = 0.75f;
    s = make(&p, 3);
    if (!s) return;
    CHECK(draw_counts(s, l, 3, N, c));
    check_freq(c[0], N, 0.625, 0);
    check_freq(c[1], N, 0.375, 1);
    check_freq(c[2], N, 0.0, 2);
    th_sampler_free(s);

    /* Top-p works on the untempered distribution. At T = 2 the tempered
     * probabilities are ∝ sqrt(p) = .4154/.3218/.2628 (cum .737 < .75 would keep
     * all three); untempered keeps {0, 1}, drawn ∝ sqrt(.5) : sqrt(.3). */
    p.temperature = 2.0f;
    s = make(&p, 3);
    if (!s) return;
    CHECK(draw_counts(s, l, 3, N, c));
    double a = sqrt(0.5), b = sqrt(0.3);
    check_freq(c[0], N, a / (a + b), 0);
    check_freq(c[1], N, b / (a + b), 1);
    check_freq(c[2], N, 0.0, 2);
    th_sampler_free(s);
}

static void test_min_p(void) {
    float l[3];
    logits3(l);
    long c[3];
    enum { N = 20000 };
    /* min_p 0.5: keep p >= 0.25 → {0, 1} */
    th_sampler_params p = plain(1.0f, 13);
    p.min_p = 0.5f;
    th_sampler *s = make(&p, 3);
    if (!s) return;
    CHECK(draw_counts(s, l, 3, N, c));
    check_freq(c[0], N, 0.625, 0);
    check_freq(c[1], N, 0.375, 1);
    check_freq(c[2], N, 0.0, 2);
    th_sampler_free(s);
    /* min_p 0.7: keep p >= 0.35 → {0} */
    p.min_p = 0.7f;
    s = make(&p, 3);
    if (!s) return;
    CHECK(draw_counts(s, l, 3, 1000, c));
    CHECK(c[0] == 1000, "min_p 0.7 drew token 0 only %ld/1000 times", c[0]);
    th_sampler_free(s);
    /* min_p 0.45 at T = 2: untempered threshold 0.225 drops token 2 (0.2); a
     * tempered one (0.45 * .4154 = .187 < .2628) would keep it. */
    p.min_p = 0.45f;
    p.temperature = 2.0f;
    s = make(&p, 3);
    if (!s) return;
    CHECK(draw_counts(s, l, 3, N, c));
    double a = sqrt(0.5), b = sqrt(0.3);
    check_freq(c[0], N, a / (a + b), 0);
    check_freq(c[2], N, 0.0, 2);
    th_sampler_free(s);
}

static void test_repeat_penalty(void) {
    th_sampler_params p = plain(0.0f, 1);
    p.repeat_penalty = 1.1f;
    th_sampler *s = make(&p, 4);
    if (!s) return;
    /* positive logit divided: 2.0 / 1.1 = 1.818 < 1.9 */
    const float a[4] = {2.0f, 1.9f, -1.0f, 0.5f};
    CHECK(th_sampler_sample(s, a) == 0, "no history yet");
    th_sampler_accept(s, 0);
    CHECK(th_sampler_sample(s, a) == 1);
    /* negative logit multiplied: -0.5 * 1.1 = -0.55 < -0.52 */
    const float b[4] = {-0.5f, -0.52f, -3.0f, -3.0f};
    CHECK(th_sampler_sample(s, b) == 1);
    /* applied once however often the token occurred: 2.0/1.1 = 1.818 > 1.7
     * (three times would give 1.50) */
    const float c[4] = {2.0f, 1.7f, 0.0f, 0.0f};
    th_sampler_accept(s, 0);
    th_sampler_accept(s, 0);
    CHECK(th_sampler_sample(s, c) == 0);
    /* reset forgets the history */
    th_sampler_reset(s);
    CHECK(th_sampler_sample(s, a) == 0);
    /* out-of-range ids are ignored by accept */
    th_sampler_accept(s, -1);
    th_sampler_accept(s, 4);
    CHECK(th_sampler_sample(s, a) == 0);
    th_sampler_free(s);
}

static void test_frequency_presence_penalty(void) {
    const float l[3] = {1.0f, 0.8f, 0.0f};
    th_sampler_params p = plain(0.0f, 1);
    p.frequency_penalty = 0.15f;
    th_sampler *s = make(&p, 3);
    if (!s) return;
    th_sampler_accept(s, 0);
    CHECK(th_sampler_sample(s, l) == 0, "1.0 - 0.15 = 0.85 > 0.8");
    th_sampler_accept(s, 0);
    CHECK(th_sampler_sample(s, l) == 1, "1.0 - 2*0.15 = 0.7 < 0.8");
    th_sampler_free(s);

    p = plain(0.0f, 1);
    p.presence_penalty = 0.15f;
    s = make(&p, 3);
    if (!s) return;
    for (int i = 0; i < 3; i++) th_sampler_accept(s, 0);
    CHECK(th_sampler_sample(s, l) == 0, "presence does not scale with count: 0.85 > 0.8");
    th_sampler_free(s);
    p.presence_penalty = 0.3f;
    s = make(&p, 3);
    if (!s) return;
    th_sampler_accept(s, 0);
    CHECK(th_sampler_sample(s, l) == 1, "1.0 - 0.3 = 0.7 < 0.8");
    th_sampler_free(s);

    /* both, checked through the logprobs: token 0 → 1.0 - 2*0.15 - 0.1 = 0.6,
     * so the distribution is softmax(0.6, 0.8, 0.0). */
    p = plain(1.0f, 3);
    p.frequency_penalty = 0.15f;
    p.presence_penalty = 0.1f;
    s = make(&p, 3);
    if (!s) return;
    th_sampler_accept(s, 0);
    th_sampler_accept(s, 0);
    th_token t = th_sampler_sample(s, l);
    th_token_logprob top[3];
    float chosen = 0;
    int32_t n = th_sampler_last_logprobs(s, top, 3, &chosen);
    double z = exp(0.6) + exp(0.8) + exp(0.0);
    double want[3] = {0.6 - log(z), 0.8 - log(z), 0.0 - log(z)};
    CHECK(n == 3);
    if (n == 3) {
        CHECK(top[0].token == 1 && top[1].token == 0 && top[2].token == 2);
        CHECK_NEAR(top[0].logprob, want[1], 1e-5);
        CHECK_NEAR(top[1].logprob, want[0], 1e-5);
        CHECK_NEAR(top[2].logprob, want[2], 1e-5);
    }
    if (t >= 0 && t < 3) CHECK_NEAR(chosen, want[t], 1e-5);
    th_sampler_free(s);
}

static void test_penalty_window(void) {
    const float a[4] = {2.0f, 1.9f, -1.0f, 0.5f};
    th_sampler_params p = plain(0.0f, 1);
    p.repeat_penalty = 1.1f;
    p.penalty_last_n = 2;
    th_sampler *s = make(&p, 4);
    if (!s) return;
    th_sampler_accept(s, 0);
    th_sampler_accept(s, 3);
    CHECK(th_sampler_sample(s, a) == 1, "window [0,3]: 0 penalised");
    th_sampler_accept(s, 3);
    CHECK(th_sampler_sample(s, a) == 0, "window [3,3]: 0 slid out");
    th_sampler_accept(s, 0);
    CHECK(th_sampler_sample(s, a) == 1, "window [3,0]");
    th_sampler_free(s);

    /* -1: the whole history counts */
    p.penalty_last_n = -1;
    s = make(&p, 4);
    if (!s) return;
    th_sampler_accept(s, 0);
    for (int i = 0; i < 1000; i++) th_sampler_accept(s, 3);
    CHECK(th_sampler_sample(s, a) == 1);
    th_sampler_free(s);

    /* 0: the default window of 64 */
    p.penalty_last_n = 0;
    s = make(&p, 4);
    if (!s) return;
    th_sampler_accept(s, 0);
    for (int i = 0; i < 63; i++) th_sampler_accept(s, 3);
    CHECK(th_sampler_sample(s, a) == 1, "0 still in the last 64");
    th_sampler_accept(s, 3);
    CHECK(th_sampler_sample(s, a) == 0, "0 slid out of the last 64");
    th_sampler_free(s);
}

/* Cumulative .4/.7/.9/1.0: top_p just below or above each step keeps the
 * smallest prefix reaching it, boundary token included. */
static void test_top_p_boundaries(void) {
    const double p4[4] = {0.4, 0.3, 0.2, 0.1};
    float l[4];
    for (int i = 0; i < 4; i++) l[i] = (float)log(p4[i]);
    const float tp[6] = {0.39f, 0.41f, 0.69f, 0.71f, 0.89f, 0.91f};
    const int kept[6] = {1, 2, 2, 3, 3, 4};
    for (int k = 0; k < 6; k++) {
        th_sampler_params p = plain(1.0f, 30 + k);
        p.top_p = tp[k];
        th_sampler *s = make(&p, 4);
        if (!s) return;
        long c[4];
        CHECK(draw_counts(s, l, 4, 4000, c));
        for (int t = 0; t < 4; t++)
            CHECK((c[t] > 0) == (t < kept[k]), "top_p %g: token %d drawn %ld times, %d should be kept",
                  tp[k], t, c[t], kept[k]);
        th_sampler_free(s);
    }
}

/* min-p's floor on .4/.3/.2/.1: token 3 has p / p_max = 0.25, so min_p 0.248
 * keeps it and 0.252 drops it; with top-p off and on (two code paths). */
static void test_min_p_boundaries(void) {
    const double p4[4] = {0.4, 0.3, 0.2, 0.1};
    float l[4];
    for (int i = 0; i < 4; i++) l[i] = (float)log(p4[i]);
    const float mp[2] = {0.248f, 0.252f};
    const float tp[2] = {1.0f, 0.99f};
    for (int k = 0; k < 4; k++) {
        th_sampler_params p = plain(1.0f, 40 + k);
        p.min_p = mp[k & 1];
        p.top_p = tp[k >> 1];
        th_sampler *s = make(&p, 4);
        if (!s) return;
        long c[4];
        CHECK(draw_counts(s, l, 4, 4000, c));
        int kept = k & 1 ? 3 : 4;
        for (int t = 0; t < 4; t++)
            CHECK((c[t] > 0) == (t < kept), "min_p %g top_p %g: token %d drawn %ld times", p.min_p,
                  p.top_p, t, c[t]);
        th_sampler_free(s);
    }
}

/* 1000 tokens (enough for the partitioning path): 20 heavy ones with close
 * weights, shuffled among 980 light ones; top_p placed inside the heavy steps.
 * The kept set must be exactly the first L heavy tokens. */
static void test_top_p_exact_set_large(void) {
    enum { V = 1000, H = 20, N = 400 };
    float l[V];
    int heavy_rank[V];
    double w[H], z = 0;
    for (int trial = 0; trial < 100; trial++) {
        for (int i = 0; i < V; i++) { l[i] = 0.0f; heavy_rank[i] = -1; }
        for (int r = 0; r < H; r++) {
            int id;
            do id = (int)(test_rand01() * V); while (heavy_rank[id] >= 0);
            heavy_rank[id] = r;
            l[id] = 12.0f - 0.01f * (float)r; /* e^12 ≈ 163000 x a light token */
        }
        z = 980.0 * exp(-12.0);
        for (int r = 0; r < H; r++) z += w[r] = exp(-0.01 * r);
        int want = 1 + (int)(test_rand01() * (H - 1)); /* keep `want` heavy tokens */
        double cum_lo = 0, cum_hi;
        for (int r = 0; r < want - 1; r++) cum_lo += w[r];
        cum_hi = cum_lo + w[want - 1];
        th_sampler_params p = plain(1.0f, 500 + trial);
        p.top_p = (float)((cum_lo + cum_hi) / 2 / z); /* midway into token want-1's step */
        th_sampler *s = make(&p, V);
        if (!s) return;
        int seen[H] = {0}, bad = 0;
        for (int i = 0; i < N; i++) {
            th_token t = th_sampler_sample(s, l);
            int r = t >= 0 && t < V ? heavy_rank[t] : -1;
            if (r < 0 || r >= want) bad++;
            else seen[r] = 1;
        }
        int missing = 0;
        for (int r = 0; r < want; r++) missing += !seen[r];
        CHECK(bad == 0 && missing == 0, "trial %d: keep %d, %d draws outside, %d kept never drawn",
              trial, want, bad, missing);
        th_sampler_free(s);
    }
}

/* Sliding windows against a naive count over the last W accepted tokens, read
 * back through the logprobs: with all logits 0, frequency 1 and presence 0.5,
 * token t's logit is -(c_t + 0.5 [c_t > 0]), so logprob_t - logprob_u equals
 * the difference of those. */
static void check_window(int32_t last_n, int window) {
    enum { V = 8, STEPS = 300 };
    static const float zeros[V] = {0};
    static int hist[STEPS];
    th_sampler_params p = plain(0.0f, 1);
    p.frequency_penalty = 1.0f;
    p.presence_penalty = 0.5f;
    p.repeat_penalty = 1.5f; /* no effect on 0 logits: 0 * 1.5 = 0 */
    p.penalty_last_n = last_n;
    th_sampler *s = make(&p, V);
    if (!s) return;
    int errors = 0;
    for (int step = 0; step < STEPS; step++) {
        hist[step] = (int)(test_rand01() * V);
        th_sampler_accept(s, hist[step]);
        th_sampler_sample(s, zeros);
        th_token_logprob top[V];
        if (th_sampler_last_logprobs(s, top, V, NULL) != V) { errors++; continue; }
        double want[V] = {0}, got[V] = {0};
        int cnt[V] = {0};
        int from = window < 0 || step + 1 < window ? 0 : step + 1 - window;
        for (int i = from; i <= step; i++) cnt[hist[i]]++;
        for (int t = 0; t < V; t++) want[t] = -(cnt[t] + (cnt[t] > 0 ? 0.5 : 0.0));
        for (int i = 0; i < V; i++) got[top[i].token] = top[i].logprob;
        for (int t = 1; t < V; t++)
            if (fabs((got[t] - got[0]) - (want[t] - want[0])) > 1e-3) errors++;
    }
    CHECK(errors == 0, "penalty_last_n %d: %d mismatches", last_n, errors);
    th_sampler_free(s);
}

static void test_penalty_window_sliding(void) {
    check_window(1, 1);
    check_window(3, 3);
    check_window(17, 17);
    check_window(0, 64);
    check_window(-1, -1);
}

static void test_seed_reproducible(void) {
    enum { V = 100, N = 1000 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)test_rand01();
    th_sampler_params p = plain(1.0f, 1234);
    th_sampler *a = make(&p, V), *b = make(&p, V);
    p.seed = 1235;
    th_sampler *c = make(&p, V);
    if (!a || !b || !c) { th_sampler_free(a); th_sampler_free(b); th_sampler_free(c); return; }
    static th_token seq[N];
    int same_ab = 0, same_ac = 0, same_reset = 0;
    for (int i = 0; i < N; i++) {
        seq[i] = th_sampler_sample(a, l);
        same_ab += seq[i] == th_sampler_sample(b, l);
        same_ac += seq[i] == th_sampler_sample(c, l);
    }
    th_sampler_reset(a);
    for (int i = 0; i < N; i++) same_reset += seq[i] == th_sampler_sample(a, l);
    CHECK(same_ab == N, "same seed: %d/%d equal", same_ab, N);
    CHECK(same_reset == N, "after reset: %d/%d equal", same_reset, N);
    /* ~100 near-uniform tokens: two independent streams agree ~1% of the time */
    CHECK(same_ac < 100, "different seeds agree on %d/%d draws", same_ac, N);
    th_sampler_free(a);
    th_sampler_free(b);
    th_sampler_free(c);
}

static void test_frequencies_match_distribution(void) {
    float l[3];
    logits3(l);
    th_sampler_params p = plain(1.0f, 2026);
    th_sampler *s = make(&p, 3);
    if (!s) return;
    enum { N = 200000 };
    long c[3];
    CHECK(draw_counts(s, l, 3, N, c));
    double chi2 = 0;
    for (int t = 0; t < 3; t++) {
        check_freq(c[t], N, P3[t], t);
        double e = P3[t] * N;
        chi2 += (c[t] - e) * (c[t] - e) / e;
    }
    /* 2 degrees of freedom: P(chi2 > 18.4) = 1e-4 */
    CHECK(chi2 < 18.4, "chi2 %.2f", chi2);
    th_sampler_free(s);
}

static void test_temperature(void) {
    float l[3];
    logits3(l);
    enum { N = 100000 };
    long c[3];
    float temps[2] = {2.0f, 0.5f};
    for (int k = 0; k < 2; k++) {
        /* logits / T → probabilities ∝ p^(1/T) */
        double w[3], z = 0;
        for (int t = 0; t < 3; t++) z += w[t] = pow(P3[t], 1.0 / temps[k]);
        th_sampler_params p = plain(temps[k], 77 + k);
        th_sampler *s = make(&p, 3);
        if (!s) return;
        CHECK(draw_counts(s, l, 3, N, c));
        for (int t = 0; t < 3; t++) check_freq(c[t], N, w[t] / z, t);
        th_sampler_free(s);
    }
    /* a tiny positive temperature (subnormal: 1/T overflows a float) is greedy in effect */
    th_sampler_params p = plain(1e-45f, 3);
    th_sampler *s = make(&p, 3);
    if (!s) return;
    const float a[3] = {1.0f, 3.0f, 2.999f};
    CHECK(draw_counts(s, a, 3, 1000, c));
    CHECK(c[1] == 1000, "T = 1e-45: argmax drawn %ld/1000 times", c[1]);
    th_sampler_free(s);
}

static void test_logit_bias(void) {
    float l[3];
    logits3(l);
    th_sampler_params p = plain(0.0f, 1);
    th_sampler *s = make(&p, 3);
    if (!s) return;
    CHECK(th_sampler_set_logit_bias(s, 0, -INFINITY) == TH_OK);
    CHECK(th_sampler_sample(s, l) == 1, "banned argmax: next best");
    CHECK(th_sampler_set_logit_bias(s, 2, 1.0f) == TH_OK); /* log .2 + 1 = -0.609 > log .3 = -1.204 */
    CHECK(th_sampler_sample(s, l) == 2);
    CHECK(th_sampler_set_logit_bias(s, -1, 1.0f) == TH_ERR_ARG);
    CHECK(th_sampler_set_logit_bias(s, 3, 1.0f) == TH_ERR_ARG);
    CHECK(strstr(th_last_error(), "token 3") != NULL, "message: %s", th_last_error());
    CHECK(th_sampler_set_logit_bias(s, 1, NAN) == TH_ERR_ARG);
    CHECK(th_sampler_set_logit_bias(s, 1, INFINITY) == TH_ERR_ARG);
    th_sampler_free(s);

    /* sampling: the banned token never comes; the rest renormalise to .6 / .4 */
    p = plain(1.0f, 8);
    s = make(&p, 3);
    if (!s) return;
    CHECK(th_sampler_set_logit_bias(s, 0, -INFINITY) == TH_OK);
    enum { N = 20000 };
    long c[3];
    CHECK(draw_counts(s, l, 3, N, c));
    check_freq(c[0], N, 0.0, 0);
    check_freq(c[1], N, 0.6, 1);
    check_freq(c[2], N, 0.4, 2);
    th_sampler_free(s);
}

/* th_sampler_greedy_below (the runtime's fast path for a greedy request that bans
 * tokens, e.g. ignore_eos): when it holds and the raw argmax is not lowered, the
 * raw argmax is what the full chain samples; it does not hold for a raised token,
 * penalties or a temperature without top_k 1. */
static void test_greedy_below(void) {
    enum { NV = 64 };
    th_sampler_params p = plain(0.0f, 0);
    th_sampler *s = make(&p, NV);
    if (!s) return;
    CHECK(th_sampler_greedy_below(s), "greedy without biases");
    CHECK(th_sampler_bias_of(s, 3) == 0.0f);
    CHECK(th_sampler_set_logit_bias(s, 7, -INFINITY) == TH_OK);
    CHECK(th_sampler_set_logit_bias(s, 9, -2.0f) == TH_OK);
    CHECK(th_sampler_greedy_below(s), "greedy with lowered tokens");
    CHECK(th_sampler_bias_of(s, 7) == -INFINITY && th_sampler_bias_of(s, 9) == -2.0f && th_sampler_bias_of(s, 8) == 0.0f);
    CHECK(!th_sampler_is_greedy(s), "a bias table is not plain greedy");
    uint32_t st = 99;
    int fast = 0, slow = 0;
    for (int it = 0; it < 400; it++) {
        float l[NV];
        for (int i = 0; i < NV; i++) { st = st * 1664525u + 1013904223u; l[i] = (float)(st >> 20) / 256.0f; }
        if (it % 3 == 0) l[7] = 1e4f;                       /* the banned token is the raw argmax */
        if (it % 5 == 0) l[9] = l[7 + (it % 2)] + 1.0f;     /* the lowered one is */
        if (it % 7 == 0) l[20] = l[21] = 1e5f;              /* a tie: the lower id */
        int32_t a = th_greedy_argmax(l, NV);
        th_token t = th_sampler_sample(s, l);
        if (th_sampler_bias_of(s, a) == 0.0f) {
            fast++;
            CHECK(t == a, "iteration %d: raw argmax %d (not lowered) but the chain sampled %d", it, a, t);
        } else slow++;   /* lowered: the fast path does not apply (the full chain decides) */
    }
    CHECK(fast > 50 && slow > 50, "both cases seen (%d fast, %d slow)", fast, slow);
    CHECK(th_sampler_set_logit_bias(s, 11, 0.5f) == TH_OK);
    CHECK(!th_sampler_greedy_below(s), "a raised token");
    th_sampler_free(s);
    p = plain(0.8f, 0);
    s = make(&p, NV);
    if (s) { CHECK(!th_sampler_greedy_below(s), "temperature sampling"); th_sampler_free(s); }
    p = plain(0.8f, 1);
    p.top_k = 1;
    s = make(&p, NV);
    if (s) { CHECK(th_sampler_greedy_below(s), "top_k 1"); th_sampler_free(s); }
    p = plain(0.0f, 0);
    p.repeat_penalty = 1.1f;
    s = make(&p, NV);
    if (s) { CHECK(!th_sampler_greedy_below(s), "penalties"); th_sampler_free(s); }
}

static void test_bad_params(void) {
    struct { const char *field; th_sampler_params p; } cases[12];
    int n = 0;
    th_sampler_params d = th_sampler_default_params();
#define BAD(FIELD, VALUE) do { cases[n].field = #FIELD; cases[n].p = d; cases[n].p.FIELD = VALUE; n++; } while (0)
    BAD(temperature, NAN);
    BAD(temperature, INFINITY);
    BAD(top_p, 0.0f);
    BAD(top_p, 1.5f);
    BAD(top_p, NAN);
    BAD(min_p, -0.1f);
    BAD(min_p, NAN);
    BAD(repeat_penalty, 0.0f);
    BAD(repeat_penalty, NAN);
    BAD(presence_penalty, NAN);
    BAD(frequency_penalty, INFINITY);
    BAD(penalty_last_n, -2);
#undef BAD
    for (int i = 0; i < n; i++) {
        static char dummy;
        th_sampler *s = (th_sampler *)&dummy; /* must be overwritten with NULL */
        th_status st = th_sampler_new(&cases[i].p, 10, &s);
        CHECK(st == TH_ERR_ARG && s == NULL, "case %d (%s) accepted", i, cases[i].field);
        CHECK(strstr(th_last_error(), cases[i].field) != NULL, "case %d: message '%s' does not name %s",
              i, th_last_error(), cases[i].field);
    }
    th_sampler *s = NULL;
    CHECK(th_sampler_new(&d, 0, &s) == TH_ERR_ARG && !s);
    CHECK(strstr(th_last_error(), "n_vocab") != NULL);
    CHECK(th_sampler_new(&d, 10, NULL) == TH_ERR_ARG);
    /* edges that are valid */
    th_sampler_params ok = d;
    ok.top_p = 1.0f; ok.min_p = 0.0f; ok.temperature = -1.0f; ok.penalty_last_n = -1;
    CHECK(th_sampler_new(&ok, 10, &s) == TH_OK && s);
    th_sampler_free(s);
    s = NULL;
    CHECK(th_sampler_new(NULL, 10, &s) == TH_OK && s, "NULL params means defaults");
    th_sampler_free(s);
}

static void test_nonfinite_logits(void) {
    th_sampler_params g = plain(0.0f, 1), r = plain(1.0f, 4);
    th_sampler *sg = make(&g, 3), *sr = make(&r, 3);
    if (!sg || !sr) { th_sampler_free(sg); th_sampler_free(sr); return; }
    const float nan_first[3] = {NAN, 1.0f, 2.0f};
    CHECK(th_sampler_sample(sg, nan_first) == 2);
    long c[3];
    CHECK(draw_counts(sr, nan_first, 3, 5000, c));
    CHECK(c[0] == 0, "NaN token drawn %ld times", c[0]);
    const float all_nan[3] = {NAN, NAN, NAN};
    CHECK(th_sampler_sample(sg, all_nan) == 0);
    CHECK(th_sampler_sample(sr, all_nan) == 0);
    const float all_ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK(th_sampler_sample(sg, all_ninf) == 0);
    CHECK(th_sampler_sample(sr, all_ninf) == 0);
    const float pinf[3] = {0.0f, INFINITY, 5.0f};
    CHECK(th_sampler_sample(sg, pinf) == 1);
    CHECK(draw_counts(sr, pinf, 3, 1000, c));
    CHECK(c[1] == 1000, "+inf token drawn %ld/1000", c[1]);
    const float two_inf[3] = {INFINITY, 0.0f, INFINITY};
    CHECK(th_sampler_sample(sg, two_inf) == 0, "ties to the lower id");
    CHECK(draw_counts(sr, two_inf, 3, 4000, c));
    check_freq(c[0], 4000, 0.5, 0);
    check_freq(c[1], 4000, 0.0, 1);
    /* everything banned by bias: documented fallback = argmax of the raw logits */
    const float raw[3] = {-INFINITY, 3.0f, NAN};
    CHECK(th_sampler_set_logit_bias(sr, 1, -INFINITY) == TH_OK);
    CHECK(th_sampler_sample(sr, raw) == 1);
    th_sampler_free(sg);
    th_sampler_free(sr);
}

static void test_logits_not_modified(void) {
    float l[3], copy[3];
    logits3(l);
    memcpy(copy, l, sizeof l);
    th_sampler_params p = plain(1.0f, 1);
    p.repeat_penalty = 1.3f;
    p.frequency_penalty = 0.5f;
    th_sampler *s = make(&p, 3);
    if (!s) return;
    th_sampler_accept(s, 0);
    CHECK(th_sampler_set_logit_bias(s, 1, 2.0f) == TH_OK);
    for (int i = 0; i < 10; i++) th_sampler_sample(s, l);
    CHECK(memcmp(l, copy, sizeof l) == 0);
    th_sampler_free(s);
}

static void test_logprobs(void) {
    float l[4];
    logits3(l);
    l[3] = -INFINITY;
    th_sampler_params p = plain(2.0f, 21);
    th_sampler *s = make(&p, 4);
    if (!s) return;
    th_token_logprob top[10];
    float chosen = 0;
    CHECK(th_sampler_last_logprobs(s, top, 10, &chosen) == -1, "no sample yet");
    th_token t = th_sampler_sample(s, l);
    int32_t n = th_sampler_last_logprobs(s, top, 10, &chosen);
    CHECK(n == 3, "zero-probability token left out, n = %d", n);
    if (n == 3)
        for (int i = 0; i < 3; i++) {
            CHECK(top[i].token == i);
            CHECK_NEAR(top[i].logprob, log(P3[i]), 1e-6); /* untempered */
        }
    if (t >= 0 && t < 3) CHECK_NEAR(chosen, log(P3[t]), 1e-6);
    CHECK(th_sampler_last_logprobs(s, top, 1, NULL) == 1 && top[0].token == 0);
    CHECK(th_sampler_last_logprobs(s, NULL, 0, &chosen) == 0);
    th_sampler_reset(s);
    CHECK(th_sampler_last_logprobs(s, top, 10, &chosen) == -1, "reset forgets the sample");
    th_sampler_free(s);
}

/* ---- large vocabulary against a naive reference of the truncation rules ---- */

typedef struct { float logit; int id; } ref_cand;
static ref_cand ref_sorted[50000];
static int ref_cmp(const void *a, const void *b) {
    const ref_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

/* Kept count per the spec, by full sort: shortest of the top-k prefix, the
 * top-p prefix (probabilities over the top-k set) and the min-p prefix. rank[id]
 * gets each token's position in sorted order. */
static int ref_kept(const float *l, int n, int top_k, float top_p, float min_p, int *rank) {
    ref_cand *c = ref_sorted;
    for (int i = 0; i < n; i++) { c[i].logit = l[i]; c[i].id = i; }
    qsort(c, (size_t)n, sizeof c[0], ref_cmp);
    for (int i = 0; i < n; i++) rank[c[i].id] = i;
    double max = c[0].logit;
    int k = top_k > 0 && top_k < n ? top_k : n;
    int kept = k;
    if (top_p < 1.0f) {
        double z = 0, cum = 0;
        for (int i = 0; i < k; i++) z += exp(c[i].logit - max);
        for (int i = 0; i < k; i++) {
            cum += exp(c[i].logit - max);
            if (cum >= top_p * z) { kept = i + 1; break; }
        }
    }
    if (min_p > 0.0f) {
        int m = 0;
        while (m < n && exp(c[m].logit - max) >= min_p) m++;
        if (m < kept) kept = m;
    }
    return kept;
}

static void check_large(int top_k, float top_p, float min_p, uint64_t seed) {
    enum { V = 50000, N = 800 };
    static float l[V];
    static int rank[V];
    for (int i = 0; i < V; i++) l[i] = (float)(test_rand01() * 3.0);
    int kept = ref_kept(l, V, top_k, top_p, min_p, rank);
    th_sampler_params p = plain(1.0f, seed);
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    th_sampler *s = make(&p, V);
    if (!s) return;
    int worst = -1, outside = 0;
    for (int i = 0; i < N; i++) {
        th_token t = th_sampler_sample(s, l);
        if (t < 0 || t >= V) { outside++; continue; }
        if (rank[t] >= kept) outside++;
        if (rank[t] > worst) worst = rank[t];
    }
    CHECK(outside == 0, "k=%d p=%g min_p=%g: %d draws outside the %d kept", top_k, top_p, min_p,
          outside, kept);
    /* The kept tail is reached too (nothing dropped early): the shortest tail of
     * the kept ranks holding a mass fraction f with (1-f)^N < 1e-9 must be hit. */
    double mass = 0, tail = 0, f_min = 1.0 - exp(log(1e-9) / N);
    for (int i = 0; i < kept; i++) mass += exp(ref_sorted[i].logit - ref_sorted[0].logit);
    int tail_start = kept;
    while (tail_start > 0 && tail < f_min * mass)
        tail += exp(ref_sorted[--tail_start].logit - ref_sorted[0].logit);
    if (tail_start > 0)
        CHECK(worst >= tail_start, "k=%d p=%g min_p=%g: deepest rank %d, expected one in [%d, %d)",
              top_k, top_p, min_p, worst, tail_start, kept);
    th_sampler_free(s);
}

static void test_large_vocab_truncation(void) {
    check_large(0, 0.5f, 0.0f, 1);      /* big nucleus: many growth rounds */
    check_large(0, 0.001f, 0.0f, 2);    /* tiny nucleus inside the first chunk */
    check_large(1000, 0.5f, 0.0f, 3);   /* top-p renormalised over top-k */
    check_large(0, 0.9f, 0.5f, 4);      /* min-p shorter than top-p */
    check_large(200, 1.0f, 0.0f, 5);    /* top-k alone */
    check_large(5000, 0.95f, 0.3f, 6);  /* all three */
}

int main(void) {
    RUN(test_greedy_argmax);
    RUN(test_top_k1_is_greedy);
    RUN(test_top_k2_frequencies);
    RUN(test_top_p);
    RUN(test_min_p);
    RUN(test_repeat_penalty);
    RUN(test_frequency_presence_penalty);
    RUN(test_penalty_window);
    RUN(test_top_p_boundaries);
    RUN(test_min_p_boundaries);
    RUN(test_top_p_exact_set_large);
    RUN(test_penalty_window_sliding);
    RUN(test_seed_reproducible);
    RUN(test_frequencies_match_distribution);
    RUN(test_temperature);
    RUN(test_logit_bias);
    RUN(test_greedy_below);
    RUN(test_bad_params);
    RUN(test_nonfinite_logits);
    RUN(test_logits_not_modified);
    RUN(test_logprobs);
    RUN(test_large_vocab_truncation);
    return CHECK_DONE();
}
