/* test_spec.c — speculative decoding (src/runtime/spec.c, step.c's verification,
 * th_sampler_sample_spec), without HTTP:
 *
 *   - the rejection rule on its own: drafts drawn from a known q, the tokens
 *     th_sampler_sample_spec returns against p worked out here (softmax of the
 *     logits under top-k and temperature), by a chi-square test;
 *   - greedy identity: several prompts x 128 tokens on SmolLM2 (and Gemma 3 270M
 *     when present) with each drafter (n-gram; the same file as a draft model;
 *     the first half of the layers) give exactly the tokens of plain greedy
 *     decoding with batch_invariant (what a drafter runs with), all prompts in
 *     one runtime, one speculating and one plain request side by side too;
 *   - distribution: on the tiny fixture, the first 3 sampled tokens of many
 *     seeded requests with and without each drafter, a two-sample chi-square
 *     test at significance 0.001 (penalties and top-p/min-p in some), and the
 *     same test catching a broken acceptance rule (rt_spec_test_accept_all);
 *   - the layer-list parser, the vocabulary check, parameter errors, the KV
 *     after verification.
 *
 * TH_SPEC_PROMPTS (default 3 for SmolLM2, 1 for Gemma) and TH_SPEC_TOKENS
 * (default 128) set the greedy runs' size (tests/spec_identity.sh runs 20 x 128);
 * TH_SPEC_SAMPLES (default 800) the distribution tests' requests per arm;
 * TH_SPEC_GPU=1 runs every runtime on the GPU (a CUDA build with a device). */
#include "check.h"
#include "theseus.h"
#include "context.h"
#include "runtime/spec.h"

static th_model *g_tiny, *g_tiny_q, *g_smol, *g_gemma;

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* ---------------------------------------------------------------- statistics */

/* The chi-square quantile at 1 - alpha for k degrees of freedom, by the
 * Wilson-Hilferty approximation; z: the standard normal quantile of 1 - alpha. */
static double chi2_quantile(int k, double z) {
    double a = 2.0 / (9.0 * k);
    double c = 1.0 - a + z * sqrt(a);
    return k * c * c * c;
}
#define Z_999 3.090232   /* alpha = 0.001 */

/* Two-sample chi-square (a 2 x K table: counts a[] and b[] over K categories);
 * categories whose pooled count is below 10 are merged into one. *dof gets the
 * degrees of freedom. */
static double chi2_two_sample(const int *a, const int *b, int K, int *dof) {
    double na = 0, nb = 0;
    for (int k = 0; k < K; k++) { na += a[k]; nb += b[k]; }
    double stat = 0, ra = 0, rb = 0;
    int cells = 0;
    for (int k = 0; k <= K; k++) {
        double xa, xb;
        if (k < K && a[k] + b[k] < 10) { ra += a[k]; rb += b[k]; continue; }
        if (k < K) { xa = a[k]; xb = b[k]; }
        else { xa = ra; xb = rb; if (xa + xb == 0) break; }
        double tot = xa + xb, ea = tot * na / (na + nb), eb = tot * nb / (na + nb);
        stat += (xa - ea) * (xa - ea) / ea + (xb - eb) * (xb - eb) / eb;
        cells++;
    }
    *dof = cells - 1;
    return stat;
}

/* ---------------------------------------------------------------- the rule alone */

static uint64_t rng_state = 0x1234567;
static double urand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static int draw_from(const double *p, int n) {
    double u = urand(), c = 0;
    for (int i = 0; i < n; i++) if (u < (c += p[i])) return i;
    return n - 1;
}

/* Returned tokens against p for drafts drawn from q (or a fixed draft, q NULL). */
static void rule_case(th_sampler *s, const float *lg, const double *p, int nv, const float *qf, int fixed, const char *what) {
    enum { N = 40000 };
    int got[16] = { 0 }, want[16] = { 0 }, n_acc = 0;
    double q[16];
    for (int i = 0; i < nv; i++) q[i] = qf ? qf[i] : 0;
    for (int t = 0; t < N; t++) {
        int d = qf ? draw_from(q, nv) : fixed;
        bool acc;
        th_token x = th_sampler_sample_spec(s, lg, d, qf, NULL, &acc);
        CHECK(x >= 0 && x < nv, "%s: token %d", what, x);
        if (x < 0 || x >= nv) return;
        CHECK(!acc || x == d, "%s: accepted but returned %d for draft %d", what, x, d);
        n_acc += acc;
        got[x]++;
        want[draw_from(p, nv)]++;   /* an independent sample of p itself */
    }
    int dof;
    double st = chi2_two_sample(got, want, nv, &dof), lim = chi2_quantile(dof, Z_999);
    CHECK(st < lim, "%s: chi-square %.1f above %.1f (%d dof)", what, st, lim, dof);
    CHECK(n_acc > N / 20 && n_acc < N - N / 20, "%s: %d of %d accepted (the case tests nothing)", what, n_acc, N);
}

static void test_rule_alone(void) {
    enum { NV = 8 };
    const float lg[NV] = { 1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.0f, 2.2f };
    const float T = 0.9f;
    th_sampler_params sp = th_sampler_default_params();
    sp.temperature = T; sp.top_k = 5; sp.top_p = 1.0f; sp.min_p = 0.0f; sp.seed = 7;
    th_sampler *s = NULL;
    CHECK(th_sampler_new(&sp, NV, &s) == TH_OK, "%s", th_last_error());
    if (!s) return;
    /* p by hand: the 5 largest logits (ids 1, 7, 3, 5, 0), softmax at T */
    double p[NV] = { 0 }, z = 0;
    const int keep[5] = { 1, 7, 3, 5, 0 };
    for (int i = 0; i < 5; i++) z += p[keep[i]] = exp((lg[keep[i]] - lg[1]) / T);
    for (int i = 0; i < NV; i++) p[i] /= z;
    float pout[NV];
    bool acc;
    th_sampler_sample_spec(s, lg, 3, NULL, pout, &acc);
    for (int i = 0; i < NV; i++) CHECK_NEAR(pout[i], p[i], 1e-6);
    const float q1[NV] = { 0.05f, 0.1f, 0.2f, 0.3f, 0.05f, 0.1f, 0.1f, 0.1f };   /* mass outside p's support too */
    const float q2[NV] = { 0.1f, 0.4f, 0.0f, 0.2f, 0.0f, 0.1f, 0.0f, 0.2f };
    rule_case(s, lg, p, NV, q1, -1, "q1");
    rule_case(s, lg, p, NV, q2, -1, "q2");
    rule_case(s, lg, p, NV, NULL, 3, "point mass at 3");
    rule_case(s, lg, p, NV, NULL, 1, "point mass at the argmax");
    /* greedy: accepted exactly when the draft is the argmax */
    th_sampler_free(s);
    sp.temperature = 0;
    CHECK(th_sampler_new(&sp, NV, &s) == TH_OK, "%s", th_last_error());
    CHECK(th_sampler_sample_spec(s, lg, 1, NULL, NULL, &acc) == 1 && acc, "greedy, the argmax drafted");
    CHECK(th_sampler_sample_spec(s, lg, 7, q1, NULL, &acc) == 1 && !acc, "greedy, another token drafted");
    CHECK(th_sampler_sample_spec(s, lg, -1, NULL, NULL, &acc) == 1 && !acc, "greedy, no draft");
    CHECK(th_sampler_sample_spec(s, lg, NV, NULL, NULL, &acc) == -1, "a draft outside the vocabulary");
    th_sampler_free(s);
}

/* ---------------------------------------------------------------- generation helpers */

#define MAX_GEN 256

typedef struct gen {
    th_token tok[MAX_GEN];
    int n;
    th_finish finish;
    th_status status;
} gen;

static void on_event(const th_event *ev, void *user) {
    gen *g = user;
    if (ev->kind == TH_EVENT_TOKEN && g->n < MAX_GEN) g->tok[g->n++] = ev->token;
    if (ev->kind == TH_EVENT_FINISH) {
        g->finish = ev->finish;
        if (ev->finish == TH_FINISH_EOG && g->n < MAX_GEN) g->tok[g->n++] = ev->token;
    }
    if (ev->kind == TH_EVENT_END) g->status = ev->status;
}

static th_runtime *mk(th_model *m, const th_spec_params *sp, int slots, int slot_ctx, bool keep) {
    th_runtime_params p = th_runtime_default_params();
    p.context.n_threads = 2;
    p.n_slots = slots;
    p.slot_ctx = slot_ctx;
    p.n_batch = 256;
    p.max_queue = 4096;
    p.batch_invariant = true;
    p.keep_prefix = keep;
    p.context.gpu = getenv("TH_SPEC_GPU") && *getenv("TH_SPEC_GPU") == '1';   /* the GPU run (CUDA build) */
    if (sp) p.spec = *sp;
    th_runtime *rt = NULL;
    th_status s = th_runtime_new(m, &p, &rt);
    CHECK(s == TH_OK, "th_runtime_new: %s", th_last_error());
    return rt;
}

/* Steps rt until every one of reqs[0..n) is done. */
static void drive(th_runtime *rt, th_request **reqs, int n) {
    for (int guard = 0; guard < 1000000; guard++) {
        bool all = true;
        for (int i = 0; i < n; i++) all &= !reqs[i] || th_request_done(reqs[i]);
        if (all) return;
        th_status s = th_runtime_step(rt, NULL);
        CHECK(s == TH_OK, "step: %s", th_last_error());
        if (s) return;
    }
    CHECK(false, "requests not done");
}

/* The prompts of the greedy runs (chat-formatted for the instruct models). */
static const char *const PROMPTS[] = {
    "Write a Python function that reverses a list, then explain it line by line.",
    "Repeat this list three times: apple, banana, cherry, date, elderberry, fig, grape.",
    "Tell me a long story about a lighthouse keeper and a storm.",
    "Explain how a hash table works, with an example in C.",
    "List the planets of the solar system with one fact about each.",
    "What is the difference between TCP and UDP? Answer in detail.",
    "Write a poem about the sea, then rewrite it in prose.",
    "Describe the water cycle step by step.",
    "Give me a recipe for bread and explain every step.",
    "Copy this code exactly: for (int i = 0; i < n; i++) { sum += a[i] * b[i]; }",
    "Summarize the history of the printing press.",
    "How do vaccines work? Explain for a child, then for a doctor.",
    "Write a dialogue between a cat and a dog about breakfast.",
    "Explain recursion with three examples.",
    "What are prime numbers? List the first twenty.",
    "Translate to French and back: The weather is nice today and we walk in the park.",
    "Write a shopping list for a week of vegetarian meals.",
    "Explain the rules of chess briefly, piece by piece.",
    "Describe a city in the year 2100.",
    "Write a JSON object describing a book with title, author, year and tags.",
};
enum { N_PROMPTS_MAX = (int)(sizeof PROMPTS / sizeof *PROMPTS) };

static int chat_tokens(th_model *m, const char *user, th_token *out, int cap) {
    char buf[1024];
    snprintf(buf, sizeof buf, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
    const char *tmpl = th_model_meta_str(m, "tokenizer.chat_template");
    bool gemma = tmpl && strstr(tmpl, "<start_of_turn>");
    if (gemma) snprintf(buf, sizeof buf, "<start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n", user);
    size_t n = 0;
    th_status s = th_tokenize(m, buf, strlen(buf), true, true, out, (size_t)cap, &n);
    CHECK(s == TH_OK, "tokenize: %s", th_last_error());
    return s ? 0 : (int)n;
}

/* Greedy runs of n prompts in one runtime (one slot each), max_tokens each. */
static void greedy_runs(th_model *m, const th_spec_params *sp, int n, int max_tokens, gen *out, th_runtime_stats *st) {
    th_runtime *rt = mk(m, sp, n, 512, false);
    if (!rt) return;
    th_request *reqs[N_PROMPTS_MAX] = { 0 };
    for (int i = 0; i < n; i++) {
        th_token pr[256];
        int np = chat_tokens(m, PROMPTS[i], pr, 256);
        th_request_params rp = th_request_default_params();
        rp.max_tokens = max_tokens;
        rp.on_event = on_event;
        rp.user = &out[i];
        memset(&out[i], 0, sizeof out[i]);
        CHECK(th_runtime_submit(rt, &rp, pr, np, &reqs[i]) == TH_OK, "submit: %s", th_last_error());
    }
    drive(rt, reqs, n);
    for (int i = 0; i < n; i++) {
        CHECK(reqs[i] && th_request_status(reqs[i]) == TH_OK, "request %d: %s", i, reqs[i] ? th_request_message(reqs[i]) : "");
        th_request_release(reqs[i]);
    }
    if (st) th_runtime_stats_get(rt, st);
    th_runtime_free(rt);
}

static void check_identity(th_model *m, const char *name, const th_spec_params *sp, const gen *plain, int n, int max_tokens) {
    gen *g = calloc((size_t)n, sizeof *g);
    th_runtime_stats st;
    greedy_runs(m, sp, n, max_tokens, g, &st);
    int same = 0;
    for (int i = 0; i < n; i++) {
        bool eq = g[i].n == plain[i].n && !memcmp(g[i].tok, plain[i].tok, (size_t)g[i].n * sizeof(th_token)) &&
                  g[i].finish == plain[i].finish;
        int k = 0;
        while (k < g[i].n && k < plain[i].n && g[i].tok[k] == plain[i].tok[k]) k++;
        CHECK(eq, "%s, prompt %d: %d and %d tokens, first difference at %d", name, i, g[i].n, plain[i].n, k);
        same += eq;
    }
    CHECK(st.spec_drafted > 0, "%s: nothing was drafted", name);
    printf("  %s %s: %d/%d prompts identical; %llu drafted, %llu accepted (%.1f %%), %llu verifications\n",
           th_model_desc(m), name, same, n, (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_accepted,
           st.spec_drafted ? 100.0 * (double)st.spec_accepted / (double)st.spec_drafted : 0.0,
           (unsigned long long)st.spec_rounds);
    free(g);
}

/* The draft model is the target's own file unless DRAFT_ENV names another (e.g. a
 * Q4_0 copy made by theseus quantize, as the identity check asks). */
static void identity_for(th_model *m, const char *path, const char *draft_env, const char *half, int n) {
    int T = env_int("TH_SPEC_TOKENS", 128);
    if (n < 1) n = 1;
    if (n > N_PROMPTS_MAX) n = N_PROMPTS_MAX;
    if (T > MAX_GEN - 1) T = MAX_GEN - 1;
    gen *plain = calloc((size_t)n, sizeof *plain);
    greedy_runs(m, NULL, n, T, plain, NULL);
    th_spec_params ng = { .kind = TH_SPEC_NGRAM };
    check_identity(m, "ngram", &ng, plain, n, T);
    th_model *draft = NULL;
    th_model_params mp = th_model_default_params();
    const char *dpath = getenv(draft_env) && *getenv(draft_env) ? getenv(draft_env) : path;
    if (th_model_load(dpath, &mp, &draft) == TH_OK) {
        th_spec_params dp = { .kind = TH_SPEC_DRAFT, .draft = draft, .draft_max = 6 };
        char label[300];
        snprintf(label, sizeof label, "draft (%s)", dpath == path ? "same file" : dpath);
        check_identity(m, label, &dp, plain, n, T);
        th_model_free(draft);
    }
    th_spec_params lp = { .kind = TH_SPEC_LAYERS, .layers = half, .draft_max = 4 };
    check_identity(m, "layers", &lp, plain, n, T);
    free(plain);
}

static void test_greedy_identity_smollm(void) {
    if (!g_smol) SKIP("no SmolLM2 model");
    char half[32];
    snprintf(half, sizeof half, "0-%d", th_model_n_layer(g_smol) / 2 - 1);
    identity_for(g_smol, default_model_path(), "TH_SPEC_DRAFT_SMOL", half, env_int("TH_SPEC_PROMPTS", 3));
}

static void test_greedy_identity_gemma(void) {
    if (!g_gemma) SKIP("no Gemma 3 270M (models/gemma-3-270m-Q4_K_M.gguf)");
    char half[32];
    snprintf(half, sizeof half, "0-%d", th_model_n_layer(g_gemma) / 2 - 1);
    identity_for(g_gemma, "models/gemma-3-270m-Q4_K_M.gguf", "TH_SPEC_DRAFT_GEMMA", half, env_int("TH_SPEC_PROMPTS", 1));
}

/* A speculating and a plain request in the same steps, and the KV afterwards. */
static void test_mixed_and_kv(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_token pr[16];
    for (int i = 0; i < 16; i++) pr[i] = (th_token)(100 + (i % 4) * 7);   /* repeats: n-gram drafts */
    gen ref = { 0 }, a = { 0 }, b = { 0 };
    th_runtime *rt = mk(g_tiny, NULL, 1, 128, false);
    th_request_params rp = th_request_default_params();
    rp.max_tokens = 40;
    rp.on_event = on_event;
    rp.user = &ref;
    th_request *r0 = NULL, *r1 = NULL, *r2 = NULL;
    CHECK(th_runtime_submit(rt, &rp, pr, 16, &r0) == TH_OK, "%s", th_last_error());
    drive(rt, &r0, 1);
    th_request_release(r0);
    th_runtime_free(rt);
    th_spec_params ng = { .kind = TH_SPEC_NGRAM, .ngram = 2, .draft_max = 5, .fixed = true };
    rt = mk(g_tiny, &ng, 2, 128, true);
    rp.user = &a;
    CHECK(th_runtime_submit(rt, &rp, pr, 16, &r1) == TH_OK, "%s", th_last_error());
    rp.user = &b;
    rp.draft_max = -1;   /* plain */
    CHECK(th_runtime_submit(rt, &rp, pr, 16, &r2) == TH_OK, "%s", th_last_error());
    th_request *both[2] = { r1, r2 };
    drive(rt, both, 2);
    CHECK(a.n == ref.n && !memcmp(a.tok, ref.tok, (size_t)a.n * sizeof(th_token)), "speculating: %d vs %d tokens", a.n, ref.n);
    CHECK(b.n == ref.n && !memcmp(b.tok, ref.tok, (size_t)b.n * sizeof(th_token)), "plain: %d vs %d tokens", b.n, ref.n);
    th_request_stats s1, s2;
    th_request_stats_get(r1, &s1);
    th_request_stats_get(r2, &s2);
    CHECK(s1.n_drafted > 0 && s1.n_accepted <= s1.n_drafted, "drafted %d accepted %d", s1.n_drafted, s1.n_accepted);
    CHECK(s2.n_drafted == 0, "the plain request drafted %d", s2.n_drafted);
    th_request_release(r1);
    th_request_release(r2);
    th_runtime_free(rt);
    /* the KV after verification holds exactly the text: with keep_prefix the slot
     * keeps prompt + all generated tokens (max_tokens decodes the last one too) */
    rt = mk(g_tiny, &ng, 1, 128, true);
    rp.draft_max = 0;
    gen c = { 0 };
    rp.user = &c;
    CHECK(th_runtime_submit(rt, &rp, pr, 16, &r1) == TH_OK, "%s", th_last_error());
    drive(rt, &r1, 1);
    th_request_release(r1);
    for (int k = 0; k < 3; k++) th_runtime_step(rt, NULL);   /* the tail token */
    th_runtime_stats st;
    th_runtime_stats_get(rt, &st);
    /* a second request whose prompt is the whole first text reuses all of it but its last token */
    th_token all[64];
    memcpy(all, pr, sizeof pr);
    memcpy(all + 16, c.tok, (size_t)c.n * sizeof(th_token));
    gen d = { 0 };
    rp.user = &d;
    rp.max_tokens = 1;
    CHECK(th_runtime_submit(rt, &rp, all, 16 + c.n, &r2) == TH_OK, "%s", th_last_error());
    drive(rt, &r2, 1);
    th_request_stats s3;
    th_request_stats_get(r2, &s3);
    CHECK(s3.n_prompt_cached == 16 + c.n - 1, "cached %d of %d (the KV does not hold the text)", s3.n_prompt_cached, 16 + c.n);
    th_request_release(r2);
    th_runtime_free(rt);
}

/* ---------------------------------------------------------------- distribution */

typedef struct first3 { th_token t[3]; int n; } first3;

static void on_first3(const th_event *ev, void *user) {
    first3 *f = user;
    bool tok = ev->kind == TH_EVENT_TOKEN || (ev->kind == TH_EVENT_FINISH && ev->finish == TH_FINISH_EOG);
    if (tok && f->n < 3) f->t[f->n++] = ev->token;
}

/* Category of a sample: the 3 tokens' ranks among the tokens seen at each place. */
typedef struct catmap { th_token seen[3][64]; int n[3]; } catmap;

static int cat_of(catmap *m, const first3 *f) {
    int c = 0;
    for (int j = 0; j < 3; j++) {
        th_token t = j < f->n ? f->t[j] : -1;
        int k = 0;
        while (k < m->n[j] && m->seen[j][k] != t) k++;
        if (k == m->n[j] && k < 63) m->seen[j][m->n[j]++] = t;
        c = c * 64 + (k < 63 ? k : 63);
    }
    return c;
}

/* N seeded requests (seeds seed0 ..) of the same prompt; their first 3 tokens. */
static void sample_arm(th_model *m, const th_spec_params *sp, const th_sampler_params *smp, bool penal,
                       const th_token *pr, int np, int N, uint64_t seed0, first3 *out, th_runtime_stats *st) {
    th_runtime *rt = mk(m, sp, 8, 64, true);
    if (!rt) return;
    th_request **reqs = calloc((size_t)N, sizeof *reqs);
    for (int i = 0; i < N; i++) {
        th_request_params rp = th_request_default_params();
        rp.sampling = *smp;
        rp.sampling.seed = seed0 + (uint64_t)i;
        rp.penalize_prompt = penal;
        rp.max_tokens = 3;
        rp.on_event = on_first3;
        rp.user = &out[i];
        memset(&out[i], 0, sizeof out[i]);
        th_status s = th_runtime_submit(rt, &rp, pr, np, &reqs[i]);
        CHECK(s == TH_OK, "submit %d: %s", i, th_last_error());
        if (s) break;
    }
    drive(rt, reqs, N);
    for (int i = 0; i < N; i++) th_request_release(reqs[i]);
    free(reqs);
    if (st) th_runtime_stats_get(rt, st);
    th_runtime_free(rt);
}

/* The chi-square of the first-3-token distributions with and without the drafter;
 * *rate gets the share of drafts accepted. Returns false when the arms could not run. */
static bool dist_case(const th_spec_params *sp, const th_sampler_params *smp, bool penal, double *stat, double *lim,
                      double *rate) {
    int N = env_int("TH_SPEC_SAMPLES", 800);
    /* the prompt repeats a stretch of the model's own greedy text, so n-gram drafts are likely tokens */
    th_token pr[24];
    pr[0] = 1;
    gen g = { 0 };
    th_runtime *rt = mk(g_tiny, NULL, 1, 64, false);
    if (!rt) return false;
    th_request_params rp = th_request_default_params();
    rp.max_tokens = 10;
    rp.on_event = on_event;
    rp.user = &g;
    th_token start[2] = { 1, 500 };
    th_request *r = NULL;
    CHECK(th_runtime_submit(rt, &rp, start, 2, &r) == TH_OK, "%s", th_last_error());
    drive(rt, &r, 1);
    th_request_release(r);
    th_runtime_free(rt);
    if (g.n < 10) return false;
    int np = 0;
    pr[np++] = 1;
    pr[np++] = 500;
    for (int k = 0; k < 10; k++) pr[np++] = g.tok[k];
    pr[np++] = 500;
    pr[np++] = g.tok[0];
    pr[np++] = g.tok[1];
    first3 *a = calloc((size_t)N, sizeof *a), *b = calloc((size_t)N, sizeof *b);
    th_runtime_stats st;
    sample_arm(g_tiny, NULL, smp, penal, pr, np, N, 1000, a, NULL);
    sample_arm(g_tiny, sp, smp, penal, pr, np, N, 1000000, b, &st);
    catmap cm = { 0 };
    enum { K = 64 * 64 * 64 };
    int *ca = calloc(K, sizeof *ca), *cb = calloc(K, sizeof *cb);
    for (int i = 0; i < N; i++) { ca[cat_of(&cm, &a[i])]++; cb[cat_of(&cm, &b[i])]++; }
    int dof;
    *stat = chi2_two_sample(ca, cb, K, &dof);
    *lim = chi2_quantile(dof > 0 ? dof : 1, Z_999);
    *rate = st.spec_drafted ? (double)st.spec_accepted / (double)st.spec_drafted : 0;
    printf("  %s: chi-square %.1f (%d dof, limit %.1f at 0.001), %llu drafted, %.1f %% accepted\n",
           th_spec_kind_name(sp->kind), *stat, dof, *lim, (unsigned long long)st.spec_drafted, 100 * *rate);
    free(ca); free(cb); free(a); free(b);
    return true;
}

static th_sampler_params sampling(float temp, int top_k, float top_p, float min_p) {
    th_sampler_params s = th_sampler_default_params();
    s.temperature = temp; s.top_k = top_k; s.top_p = top_p; s.min_p = min_p;
    return s;
}

static void test_distribution_ngram(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_spec_params sp = { .kind = TH_SPEC_NGRAM, .ngram = 2, .draft_max = 2, .fixed = true };
    th_sampler_params s = sampling(1.0f, 4, 1.0f, 0.0f);
    double st, lim, rate;
    if (!dist_case(&sp, &s, false, &st, &lim, &rate)) { CHECK(false, "could not run"); return; }
    CHECK(st < lim, "chi-square %.1f above %.1f", st, lim);
    CHECK(rate > 0.02 && rate < 0.98, "accepted %.3f: the case does not test the rule", rate);
}

static void test_distribution_draft_penalties(void) {
    if (!g_tiny || !g_tiny_q) SKIP("no tiny fixtures (F32 and Q4_0)");
    th_spec_params sp = { .kind = TH_SPEC_DRAFT, .draft = g_tiny_q, .draft_max = 2, .fixed = true };
    th_sampler_params s = sampling(1.0f, 4, 0.9f, 0.05f);
    s.repeat_penalty = 1.3f;
    s.presence_penalty = 0.4f;
    s.frequency_penalty = 0.2f;
    double st, lim, rate;
    if (!dist_case(&sp, &s, true, &st, &lim, &rate)) { CHECK(false, "could not run"); return; }
    CHECK(st < lim, "chi-square %.1f above %.1f", st, lim);
    CHECK(rate > 0.02 && rate < 0.98, "accepted %.3f: the case does not test the rule", rate);
}

static void test_distribution_layers(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_spec_params sp = { .kind = TH_SPEC_LAYERS, .layers = "0-2", .draft_max = 2, .fixed = true };
    th_sampler_params s = sampling(0.8f, 4, 1.0f, 0.0f);
    s.repeat_penalty = 1.2f;
    double st, lim, rate;
    if (!dist_case(&sp, &s, true, &st, &lim, &rate)) { CHECK(false, "could not run"); return; }
    CHECK(st < lim, "chi-square %.1f above %.1f", st, lim);
    CHECK(rate > 0.02 && rate < 0.98, "accepted %.3f: the case does not test the rule", rate);
}

/* The same test must reject a sampler that accepts every draft. */
static void test_distribution_catches_broken_rule(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_spec_params sp = { .kind = TH_SPEC_NGRAM, .ngram = 2, .draft_max = 2, .fixed = true };
    th_sampler_params s = sampling(1.0f, 4, 1.0f, 0.0f);
    double st, lim, rate;
    rt_spec_test_accept_all = true;
    bool ran = dist_case(&sp, &s, false, &st, &lim, &rate);
    rt_spec_test_accept_all = false;
    CHECK(ran, "could not run");
    CHECK(ran && st > lim, "accept-always gave chi-square %.1f, below the limit %.1f: the test cannot see a broken rule", st, lim);
}

/* ---------------------------------------------------------------- parsing and errors */

static void test_layer_list(void) {
    bool run[30];
    CHECK(th_parse_layer_list("0-14", 30, run) == TH_OK && run[0] && run[14] && !run[15], "0-14");
    CHECK(th_parse_layer_list("3", 30, run) == TH_OK && run[3] && !run[2] && !run[4], "3");
    CHECK(th_parse_layer_list("0-9,12,20-29", 30, run) == TH_OK && run[12] && !run[11] && run[29] && !run[10], "list");
    CHECK(th_parse_layer_list("29", 30, run) == TH_OK, "the last layer");
    const char *bad[] = { "", "30", "0-30", "5-2", "a", "1,", ",1", "1--2", "1-", "-1", "1 2", "9999999999", "0-14x" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        th_status s = th_parse_layer_list(bad[i], 30, run);
        CHECK(s == TH_ERR_ARG && strstr(th_last_error(), "layer list"), "'%s': %d %s", bad[i], s, th_last_error());
    }
    CHECK(th_parse_layer_list("0-30", 30, run) == TH_ERR_ARG && strstr(th_last_error(), "layer 30"), "%s", th_last_error());
    if (!g_tiny) return;
    th_context_params cp = th_context_default_params();
    cp.layers = "0-4";
    th_context *c = NULL;
    CHECK(th_context_new(g_tiny, &cp, &c) == TH_ERR_ARG && !c && strstr(th_last_error(), "layer 4"), "%s", th_last_error());
}

/* A context running every layer listed equals one with no list; fewer layers differ. */
static void test_layer_subset_context(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64; cp.n_threads = 2; cp.kv_type = TH_KV_F32;
    th_context *all = NULL, *listed = NULL, *half = NULL;
    th_context_new(g_tiny, &cp, &all);
    cp.layers = "0-3";
    th_context_new(g_tiny, &cp, &listed);
    cp.layers = "0-1";
    th_context_new(g_tiny, &cp, &half);
    CHECK(all && listed && half, "%s", th_last_error());
    if (!all || !listed || !half) return;
    th_token t[6] = { 1, 50, 60, 70, 80, 90 };
    th_batch b = { .n_tokens = 6, .token = t };
    CHECK(th_decode(all, &b) == TH_OK && th_decode(listed, &b) == TH_OK && th_decode(half, &b) == TH_OK, "%s", th_last_error());
    const float *x = th_get_logits(all, 5), *y = th_get_logits(listed, 5), *z = th_get_logits(half, 5);
    int nv = th_model_n_vocab(g_tiny), same = 0;
    double dz = 0;
    for (int i = 0; i < nv; i++) { same += x[i] == y[i]; dz = fmax(dz, fabs(x[i] - z[i])); }
    CHECK(same == nv, "'0-3' on a 4-layer model: %d of %d logits equal", same, nv);
    CHECK(dz > 1e-3, "two layers give the same logits as four (max diff %g)", dz);
    th_context_free(all); th_context_free(listed); th_context_free(half);
}

static void test_vocab_and_params(void) {
    if (!g_tiny) SKIP("no tiny fixture");
    if (g_tiny_q) CHECK(th_spec_check_vocab(g_tiny, g_tiny_q) == TH_OK, "%s", th_last_error());
    if (g_smol) {
        th_status s = th_spec_check_vocab(g_tiny, g_smol);
        CHECK(s == TH_ERR_ARG && strstr(th_last_error(), "at token 0") && strstr(th_last_error(), "<unk>"), "%s", th_last_error());
        th_spec_params sp = { .kind = TH_SPEC_DRAFT, .draft = g_smol };
        th_runtime_params p = th_runtime_default_params();
        p.slot_ctx = 64;
        p.spec = sp;
        th_runtime *rt = NULL;
        CHECK(th_runtime_new(g_tiny, &p, &rt) == TH_ERR_ARG && !rt && strstr(th_last_error(), "vocabulary"), "%s", th_last_error());
    }
    struct { th_spec_params sp; const char *msg; } bad[] = {
        { { .kind = 9 }, "unknown kind" },
        { { .kind = TH_SPEC_NGRAM, .draft_max = 65 }, "draft_max" },
        { { .kind = TH_SPEC_NGRAM, .draft_max = 4, .draft_min = 5 }, "draft_min" },
        { { .kind = TH_SPEC_NGRAM, .ngram = 65 }, "n-gram" },
        { { .kind = TH_SPEC_DRAFT }, "no draft model" },
        { { .kind = TH_SPEC_LAYERS }, "no layer list" },
        { { .kind = TH_SPEC_LAYERS, .layers = "0-9" }, "layer 9" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        th_runtime_params p = th_runtime_default_params();
        p.slot_ctx = 64;
        p.spec = bad[i].sp;
        th_runtime *rt = NULL;
        th_status s = th_runtime_new(g_tiny, &p, &rt);
        CHECK(s != TH_OK && !rt && strstr(th_last_error(), bad[i].msg), "case %zu: '%s'", i, th_last_error());
    }
    th_spec_params ng = { .kind = TH_SPEC_NGRAM };
    th_runtime *rt = mk(g_tiny, &ng, 1, 64, false);
    th_request_params rp = th_request_default_params();
    rp.draft_max = -2;
    th_token pr[2] = { 1, 5 };
    th_request *r = NULL;
    CHECK(th_runtime_submit(rt, &rp, pr, 2, &r) == TH_ERR_ARG && strstr(th_last_error(), "draft_max"), "%s", th_last_error());
    th_runtime_free(rt);
    CHECK(!strcmp(th_spec_kind_name(TH_SPEC_LAYERS), "layers") && !th_spec_kind_name(7), "kind names");
}

int main(void) {
    th_model_params mp = th_model_default_params();
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), &mp, &g_tiny)) g_tiny = NULL;
    if (th_model_load(fixture("tiny/tiny-Q4_0.gguf"), &mp, &g_tiny_q)) g_tiny_q = NULL;
    if (th_model_load(default_model_path(), &mp, &g_smol)) g_smol = NULL;
    if (th_model_load("models/gemma-3-270m-Q4_K_M.gguf", &mp, &g_gemma)) g_gemma = NULL;
    RUN(test_rule_alone);
    RUN(test_layer_list);
    RUN(test_layer_subset_context);
    RUN(test_vocab_and_params);
    RUN(test_mixed_and_kv);
    RUN(test_distribution_ngram);
    RUN(test_distribution_draft_penalties);
    RUN(test_distribution_layers);
    RUN(test_distribution_catches_broken_rule);
    RUN(test_greedy_identity_smollm);
    RUN(test_greedy_identity_gemma);
    th_model_free(g_tiny);
    th_model_free(g_tiny_q);
    th_model_free(g_smol);
    th_model_free(g_gemma);
    return CHECK_DONE();
}
