/* test_place.c — mixed CPU/GPU layer placement (src/place.c, th_context_params.gpu_layers):
 *   - the spec parser: counts, ranges, every kind of bad spec refused naming it;
 *   - GPU layers without a GPU (or without the CUDA backend) refused, "0" runs on the CPU;
 *   - the hand-over without a GPU: a placement whose two halves are both CPU backends
 *     (th_context_new_placed) gives logits identical to one CPU context, on the tiny
 *     fixture (prompt, then a ragged two-sequence batch after a sequence copy: the
 *     copy-on-write of a shared block) and on the qwen35 hybrid fixture (layers
 *     alternating, 64-token prompt then decode steps);
 *   - with a GPU: half the tiny fixture's layers on the GPU, and the qwen35 fixture
 *     with its DeltaNet layers on the CPU and its attention layers on the GPU, against
 *     the CPU (the CPU-vs-GPU tolerance of test_cuda's ragged test, 3e-3 rel L2). */
#include "check.h"
#include "logits.h"
#include "theseus.h"
#include "context.h"
#include "place.h"
#include <stdint.h>

#define HYB "tests/fixtures/hybrid/qwen35-F32.gguf"

static char gpu_desc[256], no_gpu[256];
static int gpu_ok = -1;
static bool have_gpu(void) {
    if (gpu_ok < 0) {
        gpu_ok = th_gpu_available(gpu_desc, sizeof gpu_desc) == TH_OK;
        snprintf(no_gpu, sizeof no_gpu, "%s", gpu_ok ? "" : th_last_error());
    }
    return gpu_ok;
}

/* ------------------------------------------------------------------ the spec */

static bool parses(const char *spec, int32_t n, const char *want) {
    int8_t dev[64];
    if (th_parse_gpu_layers(spec, n, dev)) { printf("  '%s': %s\n", spec, th_last_error()); return false; }
    for (int32_t i = 0; i < n; i++)
        if (dev[i] != want[i] - '0') return false;
    return true;
}

static bool refused(const char *spec, int32_t n) {
    int8_t dev[64];
    return th_parse_gpu_layers(spec, n, dev) == TH_ERR_ARG && strstr(th_last_error(), "gpu_layers");
}

static void test_spec_parse(void) {
    CHECK(parses("0", 4, "0000"));
    CHECK(parses("1", 4, "0001"));
    CHECK(parses("3", 4, "0111"));
    CHECK(parses("4", 4, "1111"));
    CHECK(parses("99", 4, "1111"));
    CHECK(parses("0-1:cpu,2-3:gpu", 4, "0011"));
    CHECK(parses("2:gpu", 4, "0010"));
    CHECK(parses("0:gpu,3:gpu", 4, "1001"));
    CHECK(parses("0-3:cpu", 4, "0000"));
    CHECK(parses("1-2:gpu,0:cpu", 4, "0110"));
    const char *bad[] = { "", "x", "-1", "1-", "1-2", "3-1:gpu", "0-4:gpu", "4:gpu", "0:gpu,0:cpu", "0-2:gpu,2:gpu",
                          "0:tpu", "0:GPU", "0:gpu;1:cpu", "0:gpu,", ",0:gpu", "0:gpu 1:cpu", "1234567890", "2 ", "0x2" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(refused(bad[i], 4), "'%s' must be refused", bad[i]);
    refused("0-9:gpu", 4);
    printf("  e.g. %s\n", th_last_error());
    CHECK(strstr(th_last_error(), "0-9:gpu") != NULL, "the message names the spec");
}

/* Through th_context_new: a bad spec and GPU layers where there is no GPU. */
static void test_context_refusals(void) {
    th_model *m;
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), NULL, &m)) SKIP("fixture missing: %s", th_last_error());
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 32; cp.n_threads = 1;
    th_context *c = NULL;
    cp.gpu_layers = "0-1:gpu,x";
    CHECK(th_context_new(m, &cp, &c) == TH_ERR_ARG && !c && strstr(th_last_error(), "gpu_layers"), "%s", th_last_error());
    cp.gpu_layers = "0";
    CHECK(th_context_new(m, &cp, &c) == TH_OK && c, "'0' is all on the CPU: %s", th_last_error());
    if (c) CHECK(!strcmp(c->be->name, "cpu"));
    th_context_free(c);
    c = NULL;
    if (!have_gpu()) {
        cp.gpu_layers = "1";
        th_status s = th_context_new(m, &cp, &c);
        printf("  without a GPU: %s\n", th_last_error());
        CHECK(s != TH_OK && !c, "GPU layers without a GPU must fail");
        CHECK(strstr(th_last_error(), "GPU") || strstr(th_last_error(), "CUDA"), "%s", th_last_error());
        if (!th_backend_cuda()) CHECK(s == TH_ERR_UNSUPPORTED && strstr(th_last_error(), "gpu_layers"), "%s", th_last_error());
    }
    th_model_free(m);
}

/* ------------------------------------------------------------------ the hand-over on the CPU */

static th_context *placed_cpu(th_model *m, const th_context_params *cp, const int8_t *dev) {
    const th_backend *two[2] = { &th_backend_cpu, &th_backend_cpu };
    th_context *c = NULL;
    if (th_context_new_placed(m, cp, dev, two, &c)) printf("  placed context: %s\n", th_last_error());
    return c;
}

/* Prompt a (6 tokens), copy seq 0 to 1, then 3 tokens on each in one ragged batch:
 * 6 + 6 logits rows into out. */
static bool ragged_run(th_context *c, float *out, int nv) {
    const int32_t a[9] = { 1, 450, 439, 860, 3347, 113, 1701, 123, 432 };
    const int32_t b[9] = { 1, 450, 439, 860, 3347, 113, 975, 278, 425 };
    int8_t want[6] = { 1, 1, 1, 1, 1, 1 };
    th_batch p = { .n_tokens = 6, .token = a, .logits = want };
    if (th_decode(c, &p)) return false;
    for (int j = 0; j < 6; j++) memcpy(out + (size_t)j * nv, th_get_logits(c, j), (size_t)nv * 4);
    if (th_kv_seq_copy(c, 1, 0)) return false;
    int32_t tok[6] = { a[6], b[6], a[7], b[7], a[8], b[8] }, pos[6] = { 6, 6, 7, 7, 8, 8 }, sid[6] = { 0, 1, 0, 1, 0, 1 };
    th_batch d = { .n_tokens = 6, .token = tok, .pos = pos, .seq_id = sid, .logits = want };
    if (th_decode(c, &d)) return false;
    for (int j = 0; j < 6; j++) memcpy(out + (size_t)(6 + j) * nv, th_get_logits(c, j), (size_t)nv * 4);
    return true;
}

static void test_cpu_split_tiny(void) {
    th_model *m;
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), NULL, &m)) SKIP("fixture missing: %s", th_last_error());
    int nv = th_model_n_vocab(m), nl = m->hp.n_layer;
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 24; cp.n_seq_max = 2; cp.kv_block = 4; cp.kv_type = TH_KV_F16; cp.n_threads = 2;
    float *ref = malloc((size_t)12 * nv * 4), *got = malloc((size_t)12 * nv * 4);
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) == TH_OK && ragged_run(c, ref, nv), "%s", th_last_error());
    th_context_free(c);
    int8_t dev[256];
    for (int split = 0; split < 2; split++) {   /* halves; then every layer alternating */
        for (int i = 0; i < nl; i++) dev[i] = split ? (int8_t)(i & 1) : (int8_t)(i >= nl / 2);
        c = placed_cpu(m, &cp, dev);
        CHECK(c && !strcmp(c->be->name, "cpu+gpu"), "a mixed placement");
        bool ok = c && ragged_run(c, got, nv);
        CHECK(ok, "%s", th_last_error());
        size_t diff = 0;
        for (size_t i = 0; ok && i < (size_t)12 * nv; i++) diff += got[i] != ref[i];
        printf("  tiny, %s: %zu of %zu logits differ from one CPU context\n", split ? "alternating" : "halves", diff,
               (size_t)12 * nv);
        CHECK(ok && diff == 0);
        th_context_free(c);
    }
    free(ref); free(got);
    th_model_free(m);
}

/* The hybrid fixture: 64-token prompt in one batch, then 8 single-token steps. */
static bool hybrid_run(th_context *c, float *out, int nv) {
    int32_t tok[72];
    for (int i = 0; i < 72; i++) tok[i] = 3 + (int32_t)(((uint32_t)i * 2654435761u >> 7) % 509u);
    int8_t want[64];
    memset(want, 1, sizeof want);
    th_batch p = { .n_tokens = 64, .token = tok, .logits = want };
    if (th_decode(c, &p)) return false;
    for (int j = 0; j < 64; j++) memcpy(out + (size_t)j * nv, th_get_logits(c, j), (size_t)nv * 4);
    for (int j = 64; j < 72; j++) {
        th_batch d = { .n_tokens = 1, .token = tok + j };
        if (th_decode(c, &d)) return false;
        memcpy(out + (size_t)j * nv, th_get_logits(c, 0), (size_t)nv * 4);
    }
    return true;
}

static th_context_params hybrid_params(void) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 256; cp.n_batch = 64; cp.kv_type = TH_KV_F32; cp.n_threads = 2;
    return cp;
}

static void test_cpu_split_hybrid(void) {
    th_model *m;
    if (th_model_load(HYB, NULL, &m)) SKIP("fixture missing: %s", th_last_error());
    int nv = th_model_n_vocab(m), nl = m->hp.n_layer;
    th_context_params cp = hybrid_params();
    float *ref = malloc((size_t)72 * nv * 4), *got = malloc((size_t)72 * nv * 4);
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) == TH_OK && hybrid_run(c, ref, nv), "%s", th_last_error());
    th_context_free(c);
    int8_t dev[256];
    for (int i = 0; i < nl; i++) dev[i] = m->layers[i].recurrent ? TH_DEV_CPU : TH_DEV_GPU;
    c = placed_cpu(m, &cp, dev);
    bool ok = c && hybrid_run(c, got, nv);
    CHECK(ok, "%s", th_last_error());
    size_t diff = 0;
    for (size_t i = 0; ok && i < (size_t)72 * nv; i++) diff += got[i] != ref[i];
    printf("  qwen35 (%d layers), DeltaNet | attention split: %zu of %zu logits differ\n", nl, diff, (size_t)72 * nv);
    CHECK(ok && diff == 0);
    th_context_free(c);
    free(ref); free(got);
    th_model_free(m);
}

/* ------------------------------------------------------------------ on a GPU */

static double worst_rel(const float *a, const float *b, int n, int nv) {
    double worst, top1;
    compare_logits(a, b, n, nv, &worst, NULL, &top1);
    return worst;
}

static void test_gpu_split_tiny(void) {
    if (!have_gpu()) SKIP("no GPU (%s)", no_gpu);
    th_model *m;
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), NULL, &m)) SKIP("fixture missing: %s", th_last_error());
    int nv = th_model_n_vocab(m), nl = m->hp.n_layer;
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 24; cp.n_seq_max = 2; cp.kv_block = 4; cp.kv_type = TH_KV_F16; cp.n_threads = 2;
    float *ref = malloc((size_t)12 * nv * 4), *got = malloc((size_t)12 * nv * 4);
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) == TH_OK && ragged_run(c, ref, nv), "%s", th_last_error());
    th_context_free(c);
    char spec[32];
    snprintf(spec, sizeof spec, "%d", nl / 2);
    const char *specs[] = { spec, "0:gpu", NULL };
    char alt[256] = "";
    for (int i = 0; i < nl && strlen(alt) < 200; i++)
        snprintf(alt + strlen(alt), sizeof alt - strlen(alt), "%s%d:%s", i ? "," : "", i, i & 1 ? "gpu" : "cpu");
    specs[2] = alt;
    for (int k = 0; k < 3; k++) {
        cp.gpu_layers = specs[k];
        c = NULL;
        bool ok = th_context_new(m, &cp, &c) == TH_OK && ragged_run(c, got, nv);
        CHECK(ok, "'%s': %s", specs[k], th_last_error());
        double w = ok ? worst_rel(got, ref, 12, nv) : 1;
        printf("  tiny --gpu-layers %s vs CPU: worst rel L2 %.2e\n", specs[k], w);
        CHECK(w < 3e-3, "'%s': %.3g", specs[k], w);
        th_context_free(c);
    }
    free(ref); free(got);
    th_model_free(m);
}

static void test_gpu_split_hybrid(void) {
    if (!have_gpu()) SKIP("no GPU (%s)", no_gpu);
    th_model *m;
    if (th_model_load(HYB, NULL, &m)) SKIP("fixture missing: %s", th_last_error());
    int nv = th_model_n_vocab(m), nl = m->hp.n_layer;
    th_context_params cp = hybrid_params();
    float *ref = malloc((size_t)72 * nv * 4), *got = malloc((size_t)72 * nv * 4);
    th_context *c = NULL;
    CHECK(th_context_new(m, &cp, &c) == TH_OK && hybrid_run(c, ref, nv), "%s", th_last_error());
    th_context_free(c);
    char spec[256] = "";
    for (int i = 0; i < nl; i++)
        snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%d:%s", i ? "," : "", i,
                 m->layers[i].recurrent ? "cpu" : "gpu");
    cp.gpu_layers = spec;
    c = NULL;
    th_status s = th_context_new(m, &cp, &c);
    if (s) {
        th_model_free(m);
        free(ref); free(got);
        SKIP("the CUDA backend cannot take qwen35's attention layers yet: %s", th_last_error());
    }
    bool ok = hybrid_run(c, got, nv);
    CHECK(ok, "%s", th_last_error());
    double w = ok ? worst_rel(got, ref, 72, nv) : 1;
    printf("  qwen35 --gpu-layers %s (DeltaNet on the CPU) vs CPU: worst rel L2 %.2e\n", spec, w);
    CHECK(w < 3e-3, "%.3g", w);
    th_context_free(c);
    free(ref); free(got);
    th_model_free(m);
}

int main(void) {
    RUN(test_spec_parse);
    RUN(test_context_refusals);
    RUN(test_cpu_split_tiny);
    RUN(test_cpu_split_hybrid);
    RUN(test_gpu_split_tiny);
    RUN(test_gpu_split_hybrid);
    return CHECK_DONE();
}
