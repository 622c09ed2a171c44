/* test_bitnet.c — the bitnet architecture (src/arch/bitnet.c: BitNet b1.58 with its
 * attention and FFN sub-norms) on the CPU: the tiny random fixture of
 * tests/fixtures/bitnet against ik_llama.cpp's logits (README.md there), one batch and
 * token by token; the same on the GPU where there is one (the CUDA backend's ffn_sub). */
#include "check.h"
#include "logits.h"
#include "theseus.h"
#include <stdint.h>

#define DIR "tests/fixtures/bitnet/"

static int read_prompt(int32_t *tok, int cap) {
    char *txt = check_read_file("tests/fixtures/hybrid/prompt.txt", NULL);
    int n = 0;
    for (char *p = txt; p && *p && n < cap;) {
        tok[n++] = (int32_t)strtol(p, &p, 10);
        if (*p == ',') p++;
        else break;
    }
    free(txt);
    return n;
}

static void check_golden(int chunk, bool gpu) {
    thlg g = { 0 };
    th_model *m = NULL;
    if (th_model_load(DIR "bitnet-F32.gguf", NULL, &m)) SKIP("fixture: %s", th_last_error());
    CHECK(thlg_load(DIR "bitnet.logits", &g), "golden");
    int32_t tok[64];
    int n = read_prompt(tok, 64);
    CHECK(n == 64 && (uint32_t)n == g.n && (int)g.nv == th_model_n_vocab(m) && !memcmp(tok, g.tok, (size_t)n * 4),
          "prompt %d, golden %u x %u", n, g.n, g.nv);
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 128; cp.n_batch = (uint32_t)chunk; cp.kv_type = TH_KV_F32; cp.n_threads = 2; cp.gpu = gpu;
    float *out = n == (int)g.n ? decode_all_logits(m, tok, n, &cp) : NULL;
    CHECK(out != NULL, "%s", th_last_error());
    if (out) {
        double worst, top1;
        int wp;
        compare_logits(out, g.logits, n, (int)g.nv, &worst, &wp, &top1);
        printf("  bitnet %s (batches of %d) vs ik_llama.cpp: worst rel L2 %.3g (position %d), top-1 %.3f\n", gpu ? "GPU" : "CPU", chunk, worst, wp, top1);
        CHECK(worst <= 1e-3 && top1 >= 0.98, "rel %.3g, top-1 %.3f", worst, top1);
    }
    free(out);
    thlg_free(&g);
    th_model_free(m);
}

/* ik_llama.cpp's V cache is F16 (as for the hybrid goldens), hence 1e-3. */
static void test_bitnet_golden(void) { check_golden(64, false); }
static void test_bitnet_golden_steps(void) { check_golden(1, false); }

/* The GPU: one batch (its GEMM path) and token by token (GEMV path, decode graphs). */
static void test_bitnet_gpu_golden(void) {
    char desc[256];
    if (th_gpu_available(desc, sizeof desc)) SKIP("no GPU (%s)", th_last_error());
    check_golden(64, true);
    check_golden(1, true);
}

int main(void) {
    RUN(test_bitnet_golden);
    RUN(test_bitnet_golden_steps);
    RUN(test_bitnet_gpu_golden);
    return CHECK_DONE();
}
