/* test_cuda_hybrid.c — the hybrid recurrent models (qwen35, qwen3next, qwen35moe:
 * Gated DeltaNet layers between gated attention layers) on the CUDA backend,
 * with the fixtures of tests/fixtures/hybrid (TH_HYBRID_DIR overrides where they
 * are). Without a GPU (or CUDA) every test prints "skipped". With one:
 *   - each fixture's 64-token prompt against ik_llama.cpp's golden (the CPU test's
 *     1e-3, test_hybrid.c) and against the CPU backend's logits, in three modes:
 *     one batch on the GEMM path, one batch on the GEMV path (a CUDA graph), and
 *     token by token (graphs replayed);
 *   - the prompt then 64 single-token steps equal to 128 tokens in one batch;
 *   - a ragged batch of three interleaved sequences (then one more token each)
 *     equal to each sequence alone;
 *   - truncate from a snapshot (back 2), refused without one (back 10, length and
 *     state unchanged), to 0; sequence copy (state and snapshots) — each against
 *     fresh runs of the same tokens;
 *   - speculative decoding through the runtime (n-gram, draft model, layer skip)
 *     gives plain greedy decoding's tokens (rollback from the device snapshots);
 *   - the two delta-rule kernels (deltanet.h's variants) agree. */
#include "check.h"
#include "logits.h"
#include "theseus.h"
#include <stdint.h>
#include <stdlib.h>
#ifdef TH_CUDA
#include "cuda/kernels.h"
#include "cuda/deltanet.h"
#endif

#define MAXT 160

static char gpu_desc[256];
static int gpu_ok = -1;
static bool have_gpu(void) {
    if (gpu_ok < 0) gpu_ok = th_gpu_available(gpu_desc, sizeof gpu_desc) == TH_OK;
    return gpu_ok;
}
#define NEED_GPU() do { if (!have_gpu()) SKIP("no GPU (%s)", th_last_error()); } while (0)

/* Batches of gemm_min tokens or more take the GEMM path (cuda/kernels.h). */
static void tune(int gemm_min) {
#ifdef TH_CUDA
    th_cu_tuning t = th_cu_tuning_default();
    t.gemm_min = gemm_min;
    th_cu_tuning_set(&t);
#else
    (void)gemm_min;
#endif
}

static const char *fx_path(const char *name, char *buf, size_t cap) {
    const char *d = getenv("TH_HYBRID_DIR");
    snprintf(buf, cap, "%s/%s", d && *d ? d : "tests/fixtures/hybrid", name);
    return buf;
}

static th_model *load(const char *arch) {
    char n[64], p[512];
    snprintf(n, sizeof n, "%s-F32.gguf", arch);
    th_model *m = NULL;
    if (th_model_load(fx_path(n, p, sizeof p), NULL, &m)) fprintf(stderr, "load %s: %s\n", p, th_last_error());
    return m;
}

static th_context *new_ctx(th_model *m, bool gpu, uint32_t n_batch, uint32_t n_seq, uint32_t snaps) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = n_batch;
    cp.n_seq_max = n_seq;
    cp.kv_type = TH_KV_F32;
    cp.n_threads = 2;
    cp.rs_snapshots = snaps;
    cp.gpu = gpu;
    th_context *c = NULL;
    if (th_context_new(m, &cp, &c)) fprintf(stderr, "context: %s\n", th_last_error());
    return c;
}

/* Decode tok[0..n) of sequence seq in chunks of `chunk`, every position's logits into out (or NULL). */
static bool feed(th_context *c, int32_t seq, const int32_t *tok, int n, int chunk, float *out, int nv) {
    int8_t want[MAXT];
    int32_t sq[MAXT];
    memset(want, 1, sizeof want);
    for (int i = 0; i < MAXT; i++) sq[i] = seq;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk;
        th_batch b = { .n_tokens = nb, .token = tok + i0, .seq_id = sq, .logits = want };
        if (th_decode(c, &b)) { fprintf(stderr, "decode: %s\n", th_last_error()); return false; }
        for (int j = 0; out && j < nb; j++) memcpy(out + (size_t)(i0 + j) * nv, th_get_logits(c, j), (size_t)nv * 4);
    }
    return true;
}

/* Tokens after the prompt: test_hybrid.c's scramble inside the 512-token vocabulary. */
static void more_tokens(int32_t *tok, int from, int to) {
    for (int i = from; i < to; i++) tok[i] = 3 + (int32_t)(((uint32_t)i * 2654435761u >> 7) % 509u);
}

static double worst_rel(const float *a, const float *b, int n, int nv) {
    double w, t;
    int p;
    compare_logits(a, b, n, nv, &w, &p, &t);
    return w;
}

/* The golden's prompt on the GPU in three modes, against the golden and the CPU. */
static void check_golden(const char *arch) {
    NEED_GPU();
    char gn[64], gp[512];
    snprintf(gn, sizeof gn, "%s.logits", arch);
    thlg g = { 0 };
    th_model *m = load(arch);
    CHECK(m != NULL && thlg_load(fx_path(gn, gp, sizeof gp), &g), "model and golden of %s", arch);
    if (!m || !g.n) { th_model_free(m); thlg_free(&g); return; }
    int n = (int)g.n, nv = (int)g.nv;
    float *cpu = malloc((size_t)n * nv * 4), *gpu = malloc((size_t)n * nv * 4);
    th_context *cc = new_ctx(m, false, 64, 1, 0);
    bool ok = cpu && gpu && cc && feed(cc, 0, g.tok, n, n, cpu, nv);
    th_context_free(cc);
    CHECK(ok, "CPU run");
    const char *modes[3] = { "gemm", "gemv", "tokens" };
    const int gemm_min[3] = { 1, 65, 33 }, chunk[3] = { 64, 64, 1 };
    for (int k = 0; ok && k < 3; k++) {
        tune(gemm_min[k]);
        th_context *c = new_ctx(m, true, 64, 1, 0);
        bool r = c && feed(c, 0, g.tok, n, chunk[k], gpu, nv);
        th_context_free(c);
        CHECK(r, "%s %s: %s", arch, modes[k], th_last_error());
        if (!r) continue;
        double wg, wc, top1;
        int pg;
        compare_logits(gpu, g.logits, n, nv, &wg, &pg, &top1);
        wc = worst_rel(gpu, cpu, n, nv);
        printf("  %-9s %-6s vs ik_llama.cpp %.3g (pos %d, top-1 %.3f), vs CPU %.3g\n", arch, modes[k], wg, pg, top1, wc);
        CHECK(wg <= 1e-3 && top1 >= 0.98, "%s %s: vs golden %.3g, top-1 %.3f", arch, modes[k], wg, top1);
        CHECK(wc <= 1e-4, "%s %s: vs CPU %.3g", arch, modes[k], wc);
    }
    tune(33);
    free(cpu); free(gpu);
    thlg_free(&g);
    th_model_free(m);
}

static void test_gpu_qwen35_golden(void) { check_golden("qwen35"); }
static void test_gpu_qwen3next_golden(void) { check_golden("qwen3next"); }
static void test_gpu_qwen35moe_golden(void) { check_golden("qwen35moe"); }

/* The golden's 64-token prompt then 64 single-token steps == 128 tokens in one batch. */
static void check_decode(const char *arch) {
    NEED_GPU();
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m), n = 128, np = 64;
    int32_t tok[MAXT];
    more_tokens(tok, 0, n);
    tok[0] = 1;
    float *a = malloc((size_t)n * nv * 4), *b = malloc((size_t)n * nv * 4);
    th_context *c1 = new_ctx(m, true, 128, 1, 0), *c2 = new_ctx(m, true, 128, 1, 0);
    bool ok = a && b && c1 && c2 && feed(c1, 0, tok, np, np, a, nv) && feed(c1, 0, tok + np, n - np, 1, a + (size_t)np * nv, nv) &&
              feed(c2, 0, tok, n, n, b, nv);
    CHECK(ok, "decodes");
    if (ok) {
        double w = worst_rel(a, b, n, nv);
        printf("  %s: prompt + 64 decode steps vs one batch of 128: %.3g\n", arch, w);
        CHECK(w <= 1e-4, "%s: %.3g", arch, w);
    }
    free(a); free(b);
    th_context_free(c1); th_context_free(c2);
    th_model_free(m);
}

static void test_gpu_qwen35_decode(void) { check_decode("qwen35"); }
static void test_gpu_qwen3next_decode(void) { check_decode("qwen3next"); }
static void test_gpu_qwen35moe_decode(void) { check_decode("qwen35moe"); }

/* Three sequences of 21, 34 and 9 tokens interleaved in one ragged batch, then one
 * more token each, equal each sequence alone (all on the GPU). */
static void check_ragged(const char *arch) {
    NEED_GPU();
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m);
    enum { NS = 3 };
    const int len[NS] = { 21, 34, 9 };
    int32_t tok[NS][MAXT];
    for (int s = 0; s < NS; s++) more_tokens(tok[s], 0, 40), tok[s][0] = 1 + s * 7, tok[s][3] = 100 + s;
    float *alone[NS] = { 0 };
    bool ok = true;
    for (int s = 0; s < NS; s++) {
        alone[s] = malloc((size_t)(len[s] + 1) * nv * 4);
        th_context *c = new_ctx(m, true, 64, 1, 0);
        ok = ok && c && alone[s] && feed(c, 0, tok[s], len[s] + 1, len[s] + 1, alone[s], nv);
        th_context_free(c);
    }
    th_context *c = new_ctx(m, true, 64, NS, 0);
    int32_t bt[MAXT], bs[MAXT], row_seq[MAXT], row_pos[MAXT];
    int8_t want[MAXT];
    int nb = 0, done[NS] = { 0 };
    while (ok && nb < len[0] + len[1] + len[2])
        for (int s = 0; s < NS; s++)
            if (done[s] < len[s]) { bt[nb] = tok[s][done[s]]; bs[nb] = s; row_seq[nb] = s; row_pos[nb] = done[s]++; want[nb++] = 1; }
    th_batch b = { .n_tokens = nb, .token = bt, .seq_id = bs, .logits = want };
    ok = ok && c && th_decode(c, &b) == TH_OK;
    double worst = 0;
    for (int i = 0; ok && i < nb; i++) {
        double r = rel_l2(th_get_logits(c, i), alone[row_seq[i]] + (size_t)row_pos[i] * nv, nv);
        if (!(r <= worst)) worst = r;
    }
    for (int s = 0; s < NS; s++) { bt[s] = tok[s][len[s]]; bs[s] = s; }
    th_batch b2 = { .n_tokens = NS, .token = bt, .seq_id = bs, .logits = want };
    ok = ok && th_decode(c, &b2) == TH_OK;
    for (int s = 0; ok && s < NS; s++) {
        double r = rel_l2(th_get_logits(c, s), alone[s] + (size_t)len[s] * nv, nv);
        if (!(r <= worst)) worst = r;
    }
    CHECK(ok, "decodes: %s", th_last_error());
    printf("  %s: ragged batch of 3 vs each alone: worst rel L2 %.3g\n", arch, worst);
    CHECK(worst <= 1e-4, "%s: %.3g", arch, worst);
    for (int s = 0; s < NS; s++) free(alone[s]);
    th_context_free(c);
    th_model_free(m);
}

static void test_gpu_qwen35_ragged(void) { check_ragged("qwen35"); }
static void test_gpu_qwen3next_ragged(void) { check_ragged("qwen3next"); }
static void test_gpu_qwen35moe_ragged(void) { check_ragged("qwen35moe"); }

/* test_hybrid.c's truncate/copy sequence on the GPU, against fresh GPU runs. */
static void check_truncate_copy(const char *arch) {
    NEED_GPU();
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m);
    int32_t tok[MAXT], alt[MAXT];
    more_tokens(tok, 0, 60);
    memcpy(alt, tok, sizeof tok);
    for (int i = 40; i < 60; i++) alt[i] = 3 + (i * 37) % 509;
    float *ref = malloc((size_t)60 * nv * 4), *ref_alt = malloc((size_t)60 * nv * 4), *got = malloc((size_t)20 * nv * 4);
    th_context *f = new_ctx(m, true, 64, 1, 0);
    bool ok = ref && ref_alt && got && f && feed(f, 0, tok, 60, 60, ref, nv);
    th_context_free(f);
    f = new_ctx(m, true, 64, 1, 0);
    ok = ok && f && feed(f, 0, alt, 60, 60, ref_alt, nv);
    th_context_free(f);
    th_context *c = new_ctx(m, true, 64, 2, 4);
    ok = ok && c && feed(c, 0, tok, 40, 40, NULL, nv);
    ok = ok && th_kv_seq_truncate(c, 0, 38) == TH_OK && th_kv_seq_len(c, 0) == 38;   /* back 2, from a snapshot */
    ok = ok && feed(c, 0, tok + 38, 8, 3, got, nv);
    double w = 0;
    for (int i = 0; ok && i < 8; i++) w = fmax(w, rel_l2(got + (size_t)i * nv, ref + (size_t)(38 + i) * nv, nv));
    CHECK(ok && w <= 1e-4, "%s: truncate to a snapshot: %.3g (%s)", arch, w, th_last_error());
    th_status s = ok ? th_kv_seq_truncate(c, 0, 36) : TH_OK;   /* back 10: no snapshot */
    CHECK(s == TH_ERR_UNSUPPORTED && strstr(th_last_error(), "not kept"), "truncate without a snapshot: %d %s", s, th_last_error());
    CHECK(th_kv_seq_len(c, 0) == 46, "length kept after a refused truncate: %d", th_kv_seq_len(c, 0));
    ok = ok && feed(c, 0, tok + 46, 2, 2, got, nv);
    double w2 = 0;
    for (int i = 0; ok && i < 2; i++) w2 = fmax(w2, rel_l2(got + (size_t)i * nv, ref + (size_t)(46 + i) * nv, nv));
    CHECK(ok && w2 <= 1e-4, "%s: after a refused truncate: %.3g", arch, w2);
    ok = ok && th_kv_seq_truncate(c, 0, 0) == TH_OK && feed(c, 0, tok, 40, 40, NULL, nv);   /* to 0, again */
    ok = ok && th_kv_seq_copy(c, 1, 0) == TH_OK && th_kv_seq_len(c, 1) == 40;
    ok = ok && feed(c, 1, alt + 40, 10, 4, got + (size_t)10 * nv, nv) && feed(c, 0, tok + 40, 10, 10, got, nv);
    double w0 = 0, w1 = 0;
    for (int i = 0; ok && i < 10; i++) {
        w0 = fmax(w0, rel_l2(got + (size_t)i * nv, ref + (size_t)(40 + i) * nv, nv));
        w1 = fmax(w1, rel_l2(got + (size_t)(10 + i) * nv, ref_alt + (size_t)(40 + i) * nv, nv));
    }
    printf("  %s: truncate back 2 %.3g; after truncate to 0 + copy: seq 0 %.3g, seq 1 %.3g\n", arch, w, w0, w1);
    CHECK(ok && w0 <= 1e-4 && w1 <= 1e-4, "%s: copy: %.3g %.3g (%s)", arch, w0, w1, th_last_error());
    /* the copy's snapshots: seq 1 back one position equals its own history */
    ok = ok && th_kv_seq_truncate(c, 1, 49) == TH_OK && feed(c, 1, alt + 49, 1, 1, got, nv);
    CHECK(ok && rel_l2(got, ref_alt + (size_t)49 * nv, nv) <= 1e-4, "%s: seq 1 back one position", arch);
    free(ref); free(ref_alt); free(got);
    th_context_free(c);
    th_model_free(m);
}

static void test_gpu_qwen35_truncate_copy(void) { check_truncate_copy("qwen35"); }
static void test_gpu_qwen3next_truncate_copy(void) { check_truncate_copy("qwen3next"); }

/* The delta-rule kernels (deltanet.h's variants: one lane a state column; four over
 * a quarter of the keys each; the same with the next token's inputs prefetched;
 * that after a parallel pre-pass of the norms and gates)
 * give the same logits, prefill and decode (unless TH_GPU_DN_VARIANT pins one). */
static void check_variants(const char *arch) {
    NEED_GPU();
#ifdef TH_CUDA
    th_model *m = load(arch);
    CHECK(m != NULL, "model");
    if (!m) return;
    int nv = th_model_n_vocab(m), n = 80;
    int32_t tok[MAXT];
    more_tokens(tok, 0, n);
    float *lg[4][2];
    bool ok = true;
    for (int v = 0; v < 4; v++) {
        th_cu_dn_set_variant(v);
        for (int k = 0; k < 2; k++) {   /* one batch (GEMM path), token by token (graphs) */
            lg[v][k] = malloc((size_t)n * nv * 4);
            th_context *c = new_ctx(m, true, 128, 1, 0);
            ok = ok && lg[v][k] && c && feed(c, 0, tok, n, k ? 1 : n, lg[v][k], nv);
            th_context_free(c);
        }
    }
    th_cu_dn_set_variant(-1);
    CHECK(ok, "decodes: %s", th_last_error());
    for (int v = 1; ok && v < 4; v++) {
        double wb = worst_rel(lg[v][0], lg[0][0], n, nv), wt = worst_rel(lg[v][1], lg[0][1], n, nv);
        printf("  %s: delta-rule kernel %d vs 0: batch %.3g, tokens %.3g\n", arch, v, wb, wt);
        CHECK(wb <= 1e-5 && wt <= 1e-5, "%s variant %d: %.3g %.3g", arch, v, wb, wt);
    }
    for (int v = 0; v < 4; v++) free(lg[v][0]), free(lg[v][1]);
    th_model_free(m);
#else
    (void)arch;
#endif
}

static void test_gpu_qwen35_variants(void) { check_variants("qwen35"); }
static void test_gpu_qwen3next_variants(void) { check_variants("qwen3next"); }

/* test_hybrid.c's speculative check on the GPU: greedy generation through the
 * runtime with n-gram, same-file draft and layer-skip drafts equals plain greedy
 * generation (rejected drafts roll the device state back from its snapshots). */
typedef struct { th_token tok[128]; int n; th_status st; } hgen;
static void on_tok(const th_event *ev, void *user) {
    hgen *g = user;
    if (ev->kind == TH_EVENT_TOKEN && g->n < 128) g->tok[g->n++] = ev->token;
    if (ev->kind == TH_EVENT_END) g->st = ev->status;
}
static bool spec_run(th_model *m, const th_spec_params *sp, hgen *out, int nreq, uint64_t *drafted) {
    th_runtime_params p = th_runtime_default_params();
    p.context.n_threads = 2;
    p.context.kv_type = TH_KV_F32;
    p.context.gpu = true;
    p.n_slots = nreq;
    p.slot_ctx = 256;
    p.n_batch = 128;
    p.batch_invariant = true;
    if (sp) p.spec = *sp;
    th_runtime *rt = NULL;
    if (th_runtime_new(m, &p, &rt)) { fprintf(stderr, "runtime: %s\n", th_last_error()); return false; }
    th_request *rq[8] = { 0 };
    bool ok = true;
    for (int i = 0; i < nreq && ok; i++) {
        th_token pr[40];
        for (int j = 0; j < 40; j++) pr[j] = 3 + (j % (5 + i)) * 11 + i;   /* repetitive: n-grams to draft */
        th_request_params rp = th_request_default_params();
        rp.max_tokens = 48;
        rp.on_event = on_tok;
        rp.user = &out[i];
        memset(&out[i], 0, sizeof out[i]);
        ok = th_runtime_submit(rt, &rp, pr, 40, &rq[i]) == TH_OK;
    }
    for (int guard = 0; ok && guard < 100000; guard++) {
        bool all = true;
        for (int i = 0; i < nreq; i++) all &= th_request_done(rq[i]);
        if (all) break;
        if (th_runtime_step(rt, NULL)) { fprintf(stderr, "step: %s\n", th_last_error()); ok = false; }
    }
    for (int i = 0; i < nreq; i++) {
        ok = ok && rq[i] && th_request_status(rq[i]) == TH_OK;
        th_request_release(rq[i]);
    }
    th_runtime_stats st;
    th_runtime_stats_get(rt, &st);
    if (drafted) *drafted = st.spec_drafted;
    th_runtime_free(rt);
    return ok;
}

static void test_gpu_qwen35_speculative(void) {
    NEED_GPU();
    th_model *m = load("qwen35"), *d = load("qwen35");
    CHECK(m && d, "models");
    if (!m || !d) { th_model_free(m); th_model_free(d); return; }
    enum { NR = 4 };
    hgen plain[NR], g[NR];
    CHECK(spec_run(m, NULL, plain, NR, NULL), "plain run");
    th_spec_params sps[3] = { { .kind = TH_SPEC_NGRAM }, { .kind = TH_SPEC_DRAFT, .draft = d, .draft_max = 6 },
                              { .kind = TH_SPEC_LAYERS, .layers = "0-1", .draft_max = 4 } };
    const char *names[3] = { "ngram", "draft", "layers 0-1" };
    for (int k = 0; k < 3; k++) {
        uint64_t drafted = 0;
        bool ok = spec_run(m, &sps[k], g, NR, &drafted);
        int same = 0;
        for (int i = 0; ok && i < NR; i++)
            same += g[i].n == plain[i].n && !memcmp(g[i].tok, plain[i].tok, (size_t)g[i].n * sizeof(th_token));
        printf("  qwen35 GPU %s: %d/%d requests identical to plain greedy, %llu drafted\n", names[k], same, NR,
               (unsigned long long)drafted);
        CHECK(ok && same == NR && drafted > 0, "%s: %d/%d identical, %llu drafted", names[k], same, NR,
              (unsigned long long)drafted);
    }
    th_model_free(m);
    th_model_free(d);
}

int main(void) {
    RUN(test_gpu_qwen35_golden);
    RUN(test_gpu_qwen3next_golden);
    RUN(test_gpu_qwen35moe_golden);
    RUN(test_gpu_qwen35_decode);
    RUN(test_gpu_qwen3next_decode);
    RUN(test_gpu_qwen35moe_decode);
    RUN(test_gpu_qwen35_ragged);
    RUN(test_gpu_qwen3next_ragged);
    RUN(test_gpu_qwen35moe_ragged);
    RUN(test_gpu_qwen35_truncate_copy);
    RUN(test_gpu_qwen3next_truncate_copy);
    RUN(test_gpu_qwen35_speculative);
    RUN(test_gpu_qwen35_variants);
    RUN(test_gpu_qwen3next_variants);
    return CHECK_DONE();
}
