/* test_cuda_moe.c — mixture-of-experts and precision on the CUDA backend (the rest
 * of it: test_cuda.c). Without a GPU every test prints "skipped: no GPU". With one:
 *   - the MoE pair order (th_cu_moe_order): for random expert choices of every
 *     size class (1 .. 2,048 pairs, 1 .. 4,096 experts, all pairs on one expert)
 *     a permutation of the pairs in which each expert's pairs are contiguous and
 *     the experts increase;
 *     (and its segments: the hit experts, increasing, covering the order);
 *   - the GEMV path walking its pairs in that order, and the int8 experts run per
 *     hit expert (one weight load for 4 of its pairs), give the logits of the plain
 *     walk bit for bit (F32 experts on the fp32 kernel, Q8_0 on the int8 one,
 *     per-expert types in parts; one batch and token by token in CUDA graphs) — the
 *     walk changes which products share a load, not what a pair gets;
 *   - MoE token independence: a ragged 3-sequence batch equals each sequence
 *     alone, on the GEMV path (also ordered / per hit expert), on the grouped GEMM path and with
 *     the two mixed;
 *   - per-expert types (docs/precision.md) on the olmoe and qwen3moe fixtures:
 *     every expert its own Q8_0 copy (the 3-D tensors Q4_0) gives the GPU logits
 *     of uniform Q8_0 experts bit for bit; a mix of types within a tensor agrees
 *     with the CPU (GEMV and grouped GEMM paths);
 *   - live swap on the GPU: a precision file changed under a GPU context swaps
 *     the device weights between two steps; the same context's logits then equal
 *     those of a fresh model loaded with the new assignment, bit for bit. */
#include "cuda_test.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef TH_CUDA
#include "cuda/kernels.h"
#endif

/* The CUDA backend's test settings (cuda/kernels.h, th_cu_tuning), read by each new
 * context: batches of gemm_min tokens or more take the GEMM path (the grouped expert
 * GEMM); GEMV-path batches of order_min tokens or more (0: none) walk their pairs
 * grouped by expert, of group_min or more per hit expert. No-ops without CUDA. */
static void tune(int gemm_min, int order_min, int group_min) {
#ifdef TH_CUDA
    th_cu_tuning t = th_cu_tuning_default();
    t.gemm_min = gemm_min;
    t.moe_order_min = order_min;
    t.moe_group_min = group_min;
    th_cu_tuning_set(&t);
#else
    (void)gemm_min; (void)order_min; (void)group_min;
#endif
}
static void tune_reset(void) { tune(33, 0, 0); }

#ifdef TH_CUDA
static double max_rel_l2(const float *a, const float *b, int n, int nv) {
    double worst, top1;
    compare_logits(a, b, n, nv, &worst, NULL, &top1);
    return worst;
}

/* ------------------------------------------------------------------ the pair order */

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) { /* uniform-ish in [0, n) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)((rng >> 32) % n);
}

/* One call of th_cu_moe_order on n_pairs random choices of X experts (every pair
 * expert `one` instead when one >= 0): order a permutation with the experts in
 * increasing order; seg the hit experts, increasing, each with its first place in
 * order and its count, covering order exactly. */
static void check_order(int n_pairs, int X, int one) {
    int n_slots = n_pairs < X ? n_pairs : X;
    int32_t *sel = malloc((size_t)n_pairs * 4), *order = malloc((size_t)n_pairs * 4);
    int32_t *seg = malloc((1 + 3 * (size_t)n_slots) * 4);
    unsigned char *seen = calloc((size_t)n_pairs, 1);
    if (!sel || !order || !seg || !seen) { CHECK(0, "out of memory"); free(sel); free(order); free(seg); free(seen); return; }
    for (int p = 0; p < n_pairs; p++) sel[p] = one >= 0 ? one : (int32_t)rnd((uint32_t)X);
    const char *e = th_cu_test_moe_order(sel, n_pairs, X, order, seg);
    CHECK(!e, "%d pairs of %d experts: %s", n_pairs, X, e);
    int bad = 0;
    for (int i = 0; !e && i < n_pairs && !bad; i++) {
        int32_t p = order[i];
        if (p < 0 || p >= n_pairs || seen[p]) bad = 1;
        else if (seen[p] = 1, i > 0 && sel[order[i - 1]] > sel[p]) bad = 2;
    }
    CHECK(!bad, "%d pairs of %d experts: order %s", n_pairs, X,
          bad == 1 ? "is not a permutation of the pairs" : "does not group the pairs by increasing expert");
    /* the segments: consecutive, in order's expert order, every pair of each covered */
    int n_hit = e ? 0 : seg[0], at = 0, seg_bad = n_hit < 1 || n_hit > n_slots;
    for (int h = 0; !seg_bad && h < n_hit; h++) {
        int32_t ex = seg[1 + h], off = seg[1 + n_slots + h], cnt = seg[1 + 2 * n_slots + h];
        if (off != at || cnt < 1 || off + cnt > n_pairs || (h > 0 && ex <= seg[h])) { seg_bad = 1; break; }
        for (int i = off; i < off + cnt; i++) if (sel[order[i]] != ex) seg_bad = 1;
        at += cnt;
    }
    CHECK(!seg_bad && at == n_pairs, "%d pairs of %d experts: the segments (%d hit experts) do not cover the order",
          n_pairs, X, n_hit);
    free(sel); free(order); free(seg); free(seen);
}

static void test_moe_order_kernel(void) {
    NEED_GPU();
    const int cases[][2] = { { 1, 4 }, { 8, 8 }, { 37, 8 }, { 128, 64 }, { 512, 128 }, { 1000, 3 },
                             { 2048, 4096 }, { 5, 4096 }, { 1025, 1025 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_order(cases[i][0], cases[i][1], -1);
    check_order(600, 128, 77);   /* every pair on one expert */
    check_order(64, 4096, 4095); /* the last expert id */
    printf("  th_cu_moe_order: %zu random cases and 2 one-expert cases grouped by expert, segments checked\n",
           sizeof cases / sizeof cases[0]);
}

/* ------------------------------------------------------------------ the ordered GEMV path */

static const int32_t ord_tok[16] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567, 975, 903, 2501, 263, 931 };

/* Logits of ord_tok (one batch of 16, or token by token in graphs) with the pairs
 * walked plainly, in expert order, and per hit expert (the int8 experts' grouped
 * kernel): all three equal bit for bit. */
static void check_ordered_same(th_model *m, const char *what) {
    int nv = th_model_n_vocab(m);
    const int chunk[2] = { 16, 1 };
    const char *walk[3] = { "plain", "in expert order", "per hit expert" };
    for (int c = 0; c < 2; c++) {
        float *l[3];
        for (int w = 0; w < 3; w++) {
            tune(33, w == 1, w == 2);
            l[w] = run_logits(m, ord_tok, 16, chunk[c], true, TH_KV_F32);
        }
        tune_reset();
        CHECK(l[0] && l[1] && l[2], "%s chunk %d: decode failed: %s", what, chunk[c], th_last_error());
        for (int w = 1; w < 3 && l[0] && l[1] && l[2]; w++) {
            bool same = !memcmp(l[0], l[w], (size_t)16 * nv * 4);
            printf("  %-34s chunk %2d: pairs %-15s %s the plain walk\n", what, chunk[c], walk[w],
                   same ? "equal to" : "DIFFER from");
            CHECK(same, "%s chunk %d: pairs %s change the logits (rel-L2 %.3e)", what, chunk[c], walk[w],
                  max_rel_l2(l[w], l[0], 16, nv));
        }
        for (int w = 0; w < 3; w++) free(l[w]);
    }
}

static th_model *load_prec(const char *src, const char *cfg);

static void test_gpu_moe_order(void) {
    NEED_GPU();
    const char *files[3] = { "arch/qwen3moe/model-F32.gguf", "arch/olmoe/model-Q8_0.gguf", "arch/llama/model-F32.gguf" };
    for (int i = 0; i < 3; i++) {
        th_model *m = NULL;
        if (th_model_load(fixture(files[i]), NULL, &m)) { CHECK(0, "load %s: %s", files[i], th_last_error()); continue; }
        check_ordered_same(m, files[i]);
        th_model_free(m);
    }
    /* per-expert types: the experts' matrices in parts, each part's GEMV over its experts' pairs */
    th_model *mix = load_prec(fixture("arch/olmoe/model-F32.gguf"),
                              "blk.*.ffn_*_exps.weight Q8_0\nblk.0.ffn_gate_exps.weight[0-2] Q4_0\n"
                              "blk.1.ffn_up_exps.weight[5] F16\nblk.1.ffn_down_exps.weight[3-4] q6\n");
    if (mix) check_ordered_same(mix, "olmoe, per-expert types");
    th_model_free(mix);
}
#endif

/* ------------------------------------------------------------------ MoE batches */

/* MoE on the GPU, tokens independent of their batch: three sequences
 * interleaved in one ragged batch (then a second step) give the logits each
 * gets alone (GPU both; the CPU's check_moe_batch in test_arch.c, on the GPU).
 * Top-1 must match everywhere; rel-L2 within `limit` (attention splits differ
 * with the batch shape, so not bit-exact). gemm_min is the tuning's gemm_min: 33, no
 * batch here takes the GEMM path; 1, every batch does (the grouped expert GEMM);
 * 13, the ragged batches (22 and 14 tokens) and the 18-token sequence do, the
 * 12- and 6-token ones run the GEMV path. order_min: 1, the GEMV path walks its pairs
 * grouped by expert; 2, per hit expert from 2 tokens (order from 2, single tokens plain). */
static void check_gpu_moe_batch(const char *name, const char *model, const char *gemm_min, int order_min, double limit) {
    char mp[256];
    snprintf(mp, sizeof mp, "arch/%s/%s", name, model);
    tune(atoi(gemm_min), order_min, order_min > 1 ? order_min : 0);
    th_model *m;
    th_status s = th_model_load(fixture(mp), NULL, &m);
    CHECK(s == TH_OK, "load %s: %s", mp, th_last_error());
    if (s) { tune_reset(); return; }
    int nv = th_model_n_vocab(m);
    float *alone[3];
    for (int q = 0; q < 3; q++) {
        int len;
        const int32_t *t = ragged3_seq(q, &len);
        alone[q] = run_logits(m, t, len, len, true, TH_KV_F32);
    }
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64; cp.n_batch = 64; cp.n_seq_max = 3; cp.kv_block = 16; cp.kv_type = TH_KV_F32; cp.n_threads = 2; cp.gpu = true;
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) == TH_OK, "%s", th_last_error());
    double worst = 0;
    int bad = 0, bad_seq = -1, bad_pos = -1;
    bool ok = c && alone[0] && alone[1] && alone[2];
    if (ok && !ragged3_compare(c, alone, nv, &worst, &bad, &bad_seq, &bad_pos)) {
        CHECK(0, "decode: %s", th_last_error());
        ok = false;
    }
    CHECK(bad == 0, "%s (gemm_min %s): %d tokens' top-1 differs (first: seq %d pos %d)", mp, gemm_min, bad, bad_seq,
          bad_pos);
    CHECK(ok, "%s (gemm_min %s): runs failed", mp, gemm_min);
    printf("  %-26s gemm_min %-2s%s GPU ragged batch of 3 vs alone: worst rel-L2 %.2e (limit %.0e)\n", mp,
           gemm_min, order_min > 1 ? " grouped" : order_min ? " ordered" : "", worst, limit);
    CHECK(worst <= limit, "%s (gemm_min %s): ragged batch differs from sequences alone by %.3e", mp, gemm_min, worst);
    th_context_free(c);
    for (int q = 0; q < 3; q++) free(alone[q]);
    th_model_free(m);
    tune_reset();
}

static void test_gpu_moe_batch(void) {
    NEED_GPU();
    const char *names[4] = { "llama", "qwen3moe", "olmoe", "deepseek2-qlora" };  /* the last: MLA, dense first layer, shared experts */
    const char *gemm_min[3] = { "33", "1", "13" };  /* GEMV path; grouped GEMM path; both */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) check_gpu_moe_batch(names[i], "model-F32.gguf", gemm_min[j], 0, 1e-4);
    /* 16-bit GEMM inputs (Q8_0 experts dequantized to fp16), every batch on the grouped path */
    check_gpu_moe_batch("olmoe", "model-Q8_0.gguf", "1", 0, 1e-3);
    /* the GEMV path with its pairs grouped by expert: fp32 experts, then the int8 kernel (Q8_0),
     * then that per hit expert */
    check_gpu_moe_batch("qwen3moe", "model-F32.gguf", "33", 1, 1e-4);
    check_gpu_moe_batch("olmoe", "model-Q8_0.gguf", "33", 1, 1e-3);
    check_gpu_moe_batch("olmoe", "model-Q8_0.gguf", "33", 2, 1e-3);
}

#ifdef TH_CUDA
/* ------------------------------------------------------------------ precision on the GPU */

/* cfg into a fresh temporary file (path out, 64 bytes); false on failure. */
static bool write_cfg(const char *cfg, char *path) {
    snprintf(path, 64, "/tmp/th_cuda_prec_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return false;
    size_t n = strlen(cfg);
    bool ok = write(fd, cfg, n) == (ssize_t)n;
    close(fd);
    return ok;
}

/* src (an F32 fixture) loaded with the precision config cfg, re-quantized from itself. */
static th_model *load_prec(const char *src, const char *cfg) {
    char path[64];
    if (!write_cfg(cfg, path)) return NULL;
    th_model_params mp = th_model_default_params();
    mp.precision_path = path;
    mp.source_path = src;
    mp.n_threads = 2;
    th_model *m = NULL;
    th_status s = th_model_load(src, &mp, &m);
    unlink(path);
    CHECK(s == TH_OK, "load %s with precision {%s}: %s", src, cfg, th_last_error());
    return s ? NULL : m;
}

static const int32_t prec_tok[12] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432, 398, 567, 975 };

/* Logits of prec_tok's 12 tokens: one batch, or (chunk 1) token by token. */
static float *prec_logits(th_model *m, bool gpu, int chunk) { return run_logits(m, prec_tok, 12, chunk, gpu, TH_KV_F32); }

static void check_per_expert(const char *name) {
    char src[256];
    snprintf(src, sizeof src, "%s", fixture(name));
    if (access(src, R_OK)) SKIP("fixture missing: %s", src);
    th_model *uni = load_prec(src, "blk.*.ffn_*_exps.weight Q8_0\n");
    th_model *own = load_prec(src, "blk.*.ffn_*_exps.weight Q4_0\nblk.*.ffn_*_exps.weight[0-7] Q8_0\n");
    th_model *mix = load_prec(src, "blk.*.ffn_*_exps.weight Q8_0\nblk.0.ffn_down_exps.weight[1] q4\n"
                                   "blk.0.ffn_gate_exps.weight[0-2] Q4_0\nblk.1.ffn_up_exps.weight[5] F16\n"
                                   "blk.1.ffn_down_exps.weight[3-4] q6\nblk.*.ffn_up_exps.weight[6] q3\n");
    if (!uni || !own || !mix) { th_model_free(uni); th_model_free(own); th_model_free(mix); return; }
    int nv = th_model_n_vocab(uni);
    /* gemm_min 33: the per-pair GEMV (one batch), 1: the grouped expert GEMM; chunk 1: graphs */
    const int gm[3] = { 33, 1, 33 }, chunk[3] = { 12, 12, 1 };
    for (int mode = 0; mode < 3; mode++) {
        tune(gm[mode], 0, 0);
        float *u = prec_logits(uni, true, chunk[mode]), *o = prec_logits(own, true, chunk[mode]);
        float *x = prec_logits(mix, true, chunk[mode]), *xc = prec_logits(mix, false, chunk[mode]);
        float *uc = prec_logits(uni, false, chunk[mode]);
        CHECK(u && o && x && xc && uc, "%s mode %d: decode failed: %s", name, mode, th_last_error());
        if (u && o && x && xc && uc) {
            CHECK(!memcmp(u, o, (size_t)12 * nv * 4), "%s mode %d: own Q8_0 expert copies differ from uniform Q8_0 experts on the GPU (rel-L2 %.3e)",
                  name, mode, max_rel_l2(o, u, 12, nv));
            double e = max_rel_l2(x, xc, 12, nv), d = max_rel_l2(x, u, 12, nv), dc = max_rel_l2(xc, uc, 12, nv);
            int agree = 0;
            for (int t = 0; t < 12; t++) agree += argmax(x + (size_t)t * nv, nv) == argmax(xc + (size_t)t * nv, nv);
            printf("  %-30s gemm_min %2d chunk %2d: mixed experts GPU vs CPU worst rel-L2 %.2e (top-1 %d/12); mixed vs uniform %.2e GPU, %.2e CPU\n",
                   name, gm[mode], chunk[mode], e, agree, d, dc);
            CHECK(e <= 2e-2 && agree >= 11, "%s mode %d: mixed per-expert types: GPU vs CPU rel-L2 %.3e, top-1 %d/12", name, mode, e, agree);
            CHECK(d > 1e-4 && fabs(d - dc) <= 0.5 * dc, "%s mode %d: the mixed experts must move the GPU logits as they move the CPU's (%.3e vs %.3e)",
                  name, mode, d, dc);
        }
        free(u); free(o); free(x); free(xc); free(uc);
    }
    tune_reset();
    th_model_free(uni); th_model_free(own); th_model_free(mix);
}

static void test_gpu_per_expert(void) {
    NEED_GPU();
    check_per_expert("arch/olmoe/model-F32.gguf");
    check_per_expert("arch/qwen3moe/model-F32.gguf");
}

/* Prompt (8 tokens, one batch) then 4 single tokens (CUDA graphs) in sequence 0
 * of c, cleared first: the logits of every step's last token, 5 × nv. */
static bool live_steps(th_context *c, int nv, float *out) {
    if (th_kv_seq_clear(c, 0)) return false;
    int8_t want[8] = { 0, 0, 0, 0, 0, 0, 0, 1 };
    th_batch b = { .n_tokens = 8, .token = prec_tok, .logits = want };
    if (th_decode(c, &b)) return false;
    memcpy(out, th_get_logits(c, 7), (size_t)nv * 4);
    for (int i = 0; i < 4; i++) {
        int8_t one = 1;
        th_batch s = { .n_tokens = 1, .token = prec_tok + 8 + i, .logits = &one };
        if (th_decode(c, &s)) return false;
        memcpy(out + (size_t)(i + 1) * nv, th_get_logits(c, 0), (size_t)nv * 4);
    }
    return true;
}

/* A live precision file on a GPU model: change it, run the between-steps hook
 * until the swap is in, and the same context (graphs captured before) must give
 * the logits of a fresh model loaded with the new file; a second change too. */
static void test_gpu_live_swap(void) {
    NEED_GPU();
    char src[256];
    snprintf(src, sizeof src, "%s", fixture("tiny/tiny-F32.gguf"));
    if (access(src, R_OK)) SKIP("fixture missing: %s", src);
    const char *cfgs[3] = { "blk.0.attn_q.weight Q8_0\n",
                            "blk.*.ffn_gate.weight Q4_0\nblk.*.ffn_up.weight Q4_0\nblk.*.ffn_down.weight Q4_0\nblk.0.attn_q.weight Q8_0\n",
                            "blk.*.ffn_gate.weight q4\nblk.*.ffn_up.weight q4\nblk.*.ffn_down.weight q4\nblk.1.attn_q.weight q6\n"
                            "blk.1.attn_output.weight q6\noutput.weight Q8_0\n" };
    char path[64];
    th_model *m = NULL;
    th_precision_live *live = NULL;
    if (!write_cfg(cfgs[0], path)) { CHECK(0, "temporary file"); return; }
    th_status s = th_model_load(src, NULL, &m);
    CHECK(s == TH_OK, "%s", th_last_error());
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 32; cp.n_batch = 8; cp.kv_type = TH_KV_F32; cp.n_threads = 2; cp.gpu = true;
    th_context *c = NULL;
    if (!s) s = th_precision_live_new(m, path, src, 2, &live);
    CHECK(s == TH_OK, "live: %s", th_last_error());
    if (!s) s = th_context_new(m, &cp, &c);
    CHECK(s == TH_OK, "GPU context: %s", th_last_error());
    int nv = m ? th_model_n_vocab(m) : 0;
    float *got = malloc((size_t)5 * nv * 4), *want = malloc((size_t)5 * nv * 4), *before = malloc((size_t)5 * nv * 4);
    for (int k = 0; !s && k < 3; k++) {
        if (k > 0) {   /* change the file (another size, so the check sees it), then the hook until the swap is in */
            uint64_t b0, b1, h0, h1, sw0, sw1;
            char *t = NULL;
            th_precision_live_info(live, &t, &b0, &h0, &sw0);
            free(t);
            FILE *f = fopen(path, "wb");
            if (f) { fputs(cfgs[k], f); fclose(f); }
            sw1 = sw0;
            for (int i = 0; i < 600 && sw1 == sw0; i++) {
                usleep(20000);
                th_precision_live_between_steps(live);
                th_precision_live_info(live, &t, &b1, &h1, &sw1);
                free(t);
            }
            CHECK(sw1 == sw0 + 1 && h1 != h0, "change %d: no swap after 12 s (swaps %llu -> %llu)", k,
                  (unsigned long long)sw0, (unsigned long long)sw1);
        }
        CHECK(live_steps(c, nv, got), "steps after change %d: %s", k, th_last_error());
        th_model *fresh = load_prec(src, cfgs[k]);
        th_context *fc = NULL;
        if (fresh && th_context_new(fresh, &cp, &fc) == TH_OK && live_steps(fc, nv, want)) {
            CHECK(!memcmp(got, want, (size_t)5 * nv * 4), "change %d: the swapped GPU model differs from a fresh load (rel-L2 %.3e)", k,
                  max_rel_l2(got, want, 5, nv));
            if (k > 0) CHECK(memcmp(got, before, (size_t)5 * nv * 4), "change %d: the logits did not change", k);
            printf("  live swap %d on the GPU: equal to a fresh load of the new file%s\n", k, k ? " (and differ from before)" : "");
        } else {
            CHECK(0, "fresh model %d: %s", k, th_last_error());
        }
        memcpy(before, got, (size_t)5 * nv * 4);
        th_context_free(fc);
        th_model_free(fresh);
    }
    free(got); free(want); free(before);
    th_context_free(c);
    th_precision_live_free(live);
    th_model_free(m);
    unlink(path);
}
#endif

int main(void) {
    if (!have_gpu()) printf("skipped: no GPU (%s)\n", th_last_error());
#ifdef TH_CUDA
    RUN(test_moe_order_kernel);
    RUN(test_gpu_moe_order);
#endif
    RUN(test_gpu_moe_batch);
#ifdef TH_CUDA
    RUN(test_gpu_per_expert);
    RUN(test_gpu_live_swap);
#endif
    return CHECK_DONE();
}
