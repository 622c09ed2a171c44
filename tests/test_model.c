/* test_model.c — the forward pass against llama.cpp's logits for the tiny llama
 * fixture in all 15 weight types (shared/fixtures/tiny/golden), plus
 * batch-vs-sequential equivalence, KV paging across block boundaries and
 * copy-on-write prefix sharing. */
#include "check.h"
#include "logits.h"
#include "theseus.h"
#include <stdint.h>

/* Logits of every token of `tok` decoded in one batch (or batches of `chunk`). */
static float *run_logits(th_model *m, const int32_t *tok, int n, int chunk, uint32_t kv_block, int kv_type) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = (uint32_t)chunk;
    cp.kv_block = kv_block;
    cp.kv_type = kv_type;
    cp.n_threads = 2;
    return decode_all_logits(m, tok, n, &cp);
}

static void check_golden(const char *type, double max_rel, double min_top1) {
    char mp[256], gp[256];
    snprintf(mp, sizeof mp, "tiny/tiny-%s.gguf", type);
    snprintf(gp, sizeof gp, "tiny/golden/tiny-%s.logits", type);
    thlg g;
    th_model *m;
    if (!thlg_load(fixture(gp), &g)) { CHECK(0, "cannot read %s", fixture(gp)); return; }
    th_status s = th_model_load(fixture(mp), NULL, &m);
    CHECK(s == TH_OK, "load %s: %s", mp, th_last_error());
    if (s) { thlg_free(&g); return; }
    CHECK((uint32_t)th_model_n_vocab(m) == g.nv);
    float *lg = run_logits(m, g.tok, (int)g.n, (int)g.n, 16, TH_KV_F32);
    CHECK(lg != NULL, "decode: %s", th_last_error());
    if (lg) {
        double worst, top1;
        compare_logits(lg, g.logits, (int)g.n, (int)g.nv, &worst, NULL, &top1);
        printf("  %-7s rel_l2_max=%.2e top1=%.3f (limits %.0e, %.2f)\n", type, worst, top1, max_rel, min_top1);
        CHECK(worst <= max_rel, "%s: rel-L2 %.3e > %.1e", type, worst, max_rel);
        CHECK(top1 >= min_top1, "%s: top-1 agreement %.3f < %.2f", type, top1, min_top1);
        /* the prompt text must tokenize to the golden's ids */
        const char *prompt = "The quick brown fox jumps over the lazy dog. Once upon a time, there was";
        int32_t ids[64];
        size_t nt = 0;
        CHECK(th_tokenize(m, prompt, strlen(prompt), true, false, ids, 64, &nt) == TH_OK, "%s", th_last_error());
        CHECK(nt == g.n && !memcmp(ids, g.tok, nt * 4), "prompt tokenizes to %zu ids, golden has %u", nt, g.n);
    }
    free(lg);
    th_model_free(m);
    thlg_free(&g);
}

static void test_golden_f32(void) { check_golden("F32", 1e-4, 0.9); }
static void test_golden_f16(void) { check_golden("F16", 3e-3, 0.9); }
static void test_golden_bf16(void) { check_golden("BF16", 1e-2, 0.9); }
static void test_golden_quantized(void) {
    const char *types[] = { "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M",
                            "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_golden(types[i], 5e-2, 0.9);
}

static th_model *tiny(void) {
    th_model *m = NULL;
    if (th_model_load(fixture("tiny/tiny-Q8_0.gguf"), NULL, &m)) fprintf(stderr, "%s\n", th_last_error());
    return m;
}

/* Three sequences of different lengths in one ragged batch (interleaved, two
 * steps) give the same logits as each sequence run alone. */
static void test_batch_vs_sequential(void) {
    th_model *m = tiny();
    CHECK(m != NULL);
    if (!m) return;
    int nv = th_model_n_vocab(m);
    const int32_t seqs[3][12] = { { 1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567, 975 },
                                  { 1, 1551, 346, 2501, 263 },
                                  { 1, 931, 47, 727, 471, 278, 425, 1537 } };
    const int len[3] = { 12, 5, 8 };
    float *alone[3];
    for (int s = 0; s < 3; s++) alone[s] = run_logits(m, seqs[s], len[s], len[s], 16, TH_KV_F32);
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 96; cp.n_seq_max = 3; cp.kv_block = 4; cp.kv_type = TH_KV_F32; cp.n_threads = 2;
    th_context *c;
    CHECK(th_context_new(m, &cp, &c) == TH_OK, "%s", th_last_error());
    /* step 1: the first `split` tokens of every sequence, interleaved; step 2: the rest */
    const int split[3] = { 7, 2, 5 };
    double worst = 0;
    for (int step = 0; step < 2; step++) {
        int32_t tok[32], pos[32], sid[32], n = 0;
        int8_t want[32];
        int owner[32], at[32];
        for (int i = 0; i < 12; i++)
            for (int s = 0; s < 3; s++) {
                int lo = step ? split[s] : 0, hi = step ? len[s] : split[s];
                if (i + lo >= hi) continue;
                tok[n] = seqs[s][i + lo]; pos[n] = i + lo; sid[n] = s; want[n] = 1;
                owner[n] = s; at[n] = i + lo; n++;
            }
        th_batch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
        CHECK(th_decode(c, &b) == TH_OK, "%s", th_last_error());
        for (int j = 0; j < n; j++) {
            const float *x = th_get_logits(c, j), *y = alone[owner[j]] + (size_t)at[j] * nv;
            double num = 0, den = 0;
            for (int v = 0; v < nv; v++) { num += (x[v] - y[v]) * (x[v] - y[v]); den += y[v] * y[v]; }
            if (sqrt(num / den) > worst) worst = sqrt(num / den);
        }
    }
    printf("  ragged batch vs alone: worst rel-L2 %.2e\n", worst);
    CHECK(worst < 1e-5, "worst %.3e", worst);
    th_context_free(c);
    for (int s = 0; s < 3; s++) free(alone[s]);
    th_model_free(m);
}

/* The same prompt with KV blocks of 1, 3 and 64 tokens (so positions cross
 * block boundaries at different places) and decoded one token at a time. */
static void test_kv_paging(void) {
    th_model *m = tiny();
    CHECK(m != NULL);
    if (!m) return;
    const int32_t tok[26] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567, 975, 278,
                              425, 1537, 437, 106, 49, 1551, 346, 2501, 263, 931, 47, 727, 471 };
    int nv = th_model_n_vocab(m);
    float *ref = run_logits(m, tok, 26, 26, 64, TH_KV_F32);
    const uint32_t blocks[3] = { 1, 3, 64 };
    for (int k = 0; k < 3; k++)
        for (int chunk = 1; chunk <= 26; chunk += 25) {
            float *x = run_logits(m, tok, 26, chunk, blocks[k], TH_KV_F32);
            double worst, top1;
            CHECK(x != NULL);
            if (!x) continue;
            compare_logits(x, ref, 26, nv, &worst, NULL, &top1);
            CHECK(worst < 1e-5, "block %u chunk %d: rel-L2 %.3e", blocks[k], chunk, worst);
            free(x);
        }
    free(ref);
    th_model_free(m);
}

/* Two sequences share a prefix by th_kv_seq_copy (copy-on-write), then diverge;
 * each matches a fresh run of its full token list. Also: the KV pool refuses a
 * batch that does not fit, and truncation frees blocks. */
static void test_kv_share_and_capacity(void) {
    th_model *m = tiny();
    CHECK(m != NULL);
    if (!m) return;
    int nv = th_model_n_vocab(m);
    const int32_t a[9] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432 };
    const int32_t b[9] = { 1, 450, 439, 860, 3347, 113, 975, 278, 425 };
    float *ra = run_logits(m, a, 9, 9, 4, TH_KV_F32), *rb = run_logits(m, b, 9, 9, 4, TH_KV_F32);
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 24; cp.n_seq_max = 2; cp.kv_block = 4; cp.kv_type = TH_KV_F32; cp.n_threads = 1;
    th_context *c;
    CHECK(th_context_new(m, &cp, &c) == TH_OK);
    th_batch p = { .n_tokens = 6, .token = a };
    CHECK(th_decode(c, &p) == TH_OK, "%s", th_last_error());
    CHECK(th_kv_blocks_used(c) == 2, "used %u", th_kv_blocks_used(c));
    CHECK(th_kv_seq_copy(c, 1, 0) == TH_OK);
    CHECK(th_kv_blocks_used(c) == 2, "sharing must not copy: used %u", th_kv_blocks_used(c));
    int32_t tok[6] = { a[6], b[6], a[7], b[7], a[8], b[8] }, pos[6] = { 6, 6, 7, 7, 8, 8 }, sid[6] = { 0, 1, 0, 1, 0, 1 };
    int8_t want[6] = { 1, 1, 1, 1, 1, 1 };
    th_batch d = { .n_tokens = 6, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
    CHECK(th_decode(c, &d) == TH_OK, "%s", th_last_error());
    double worst = 0;
    for (int j = 0; j < 6; j++) {
        const float *x = th_get_logits(c, j), *y = (j % 2 ? rb : ra) + (size_t)pos[j] * nv;
        double num = 0, den = 0;
        for (int v = 0; v < nv; v++) { num += (x[v] - y[v]) * (x[v] - y[v]); den += y[v] * y[v]; }
        if (sqrt(num / den) > worst) worst = sqrt(num / den);
    }
    CHECK(worst < 1e-5, "shared-prefix logits differ: %.3e", worst);
    /* blocks: shared [0..4), seq0 tail copy-on-write + new, seq1 own: 5 */
    CHECK(th_kv_blocks_used(c) == 5, "used %u", th_kv_blocks_used(c));
    /* a batch the pool cannot hold: seq 0 would grow to 17 tokens = 5 blocks,
     * 2 more than it has, and only 1 of the 6 is free */
    int32_t big[8] = { 0 };
    th_batch too = { .n_tokens = 8, .token = big };
    CHECK(th_decode(c, &too) == TH_ERR_CAPACITY, "expected capacity error");
    CHECK(th_kv_seq_len(c, 0) == 9, "failed batch must not change the cache");
    CHECK(th_kv_seq_clear(c, 1) == TH_OK && th_kv_blocks_used(c) == 3, "used %u", th_kv_blocks_used(c));
    /* bad input */
    int32_t bad = 99999;
    th_batch bt = { .n_tokens = 1, .token = &bad };
    CHECK(th_decode(c, &bt) == TH_ERR_ARG && strstr(th_last_error(), "vocabulary"));
    int32_t okt = 5, badpos = 3;
    th_batch bp = { .n_tokens = 1, .token = &okt, .pos = &badpos };
    CHECK(th_decode(c, &bp) == TH_ERR_ARG && strstr(th_last_error(), "position"));
    th_context_free(c);
    free(ra); free(rb);
    th_model_free(m);
}

static void test_load_errors(void) {
    th_model *m = NULL;
    CHECK(th_model_load("/nonexistent/model.gguf", NULL, &m) != TH_OK && m == NULL);
    CHECK(strstr(th_last_error(), "/nonexistent/model.gguf") != NULL, "error should name the path: %s", th_last_error());
    /* a vocab-only file has no weights: the error names the missing tensor */
    CHECK(th_model_load(fixture("vocab/ggml-vocab-llama-spm.gguf"), NULL, &m) != TH_OK);
    CHECK(strstr(th_last_error(), "token_embd") || strstr(th_last_error(), "missing"), "%s", th_last_error());
}

int main(void) {
    RUN(test_golden_f32);
    RUN(test_golden_f16);
    RUN(test_golden_bf16);
    RUN(test_golden_quantized);
    RUN(test_batch_vs_sequential);
    RUN(test_kv_paging);
    RUN(test_kv_share_and_capacity);
    RUN(test_load_errors);
    return CHECK_DONE();
}
