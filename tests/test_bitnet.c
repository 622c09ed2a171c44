/* test_bitnet.c — the bitnet architecture (src/arch/bitnet.c: BitNet b1.58 with its
 * attention and FFN sub-norms) on the CPU: the tiny random fixture of
 * tests/fixtures/bitnet against ik_llama.cpp's logits (README.md there), one batch and
 * token by token; a GPU context of it refused (no CUDA sub-norm FFN yet). */
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

static void check_golden(int chunk) {
    thlg g = { 0 };
    th_model *m = NULL;
    if (th_model_load(DIR "bitnet-F32.gguf", NULL, &m)) SKIP("fixture: %s", th_last_error());
    CHECK(thlg_load(DIR "bitnet.logits", &g), "golden");
    int32_t tok[64];
    int n = read_prompt(tok, 64);
    CHECK(n == 64 && (uint32_t)n == g.n && (int)g.nv == th_model_n_vocab(m) && !memcmp(tok, g.tok, (size_t)n * 4),
          "prompt %d, golden %u x %u", n, g.n, g.nv);
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 128; cp.n_batch = (uint32_t)chunk; cp.kv_type = TH_KV_F32; cp.n_threads = 2;
    float *out = n == (int)g.n ? decode_all_logits(m, tok, n, &cp) : NULL;
    CHECK(out != NULL, "%s", th_last_error());
    if (out) {
        double worst, top1;
        int wp;
        compare_logits(out, g.logits, n, (int)g.nv, &worst, &wp, &top1);
        printf("  bitnet (batches of %d) vs ik_llama.cpp: worst rel L2 %.3g (position %d), top-1 %.3f\n", chunk, worst, wp, top1);
        CHECK(worst <= 1e-3 && top1 >= 0.98, "rel %.3g, top-1 %.3f", worst, top1);
    }
    free(out);
    thlg_free(&g);
    th_model_free(m);
}

/* ik_llama.cpp's V cache is F16 (as for the hybrid goldens), hence 1e-3. */
static void test_bitnet_golden(void) { check_golden(64); }
static void test_bitnet_golden_steps(void) { check_golden(1); }

static void test_bitnet_gpu_refused(void) {
    char desc[256];
    if (th_gpu_available(desc, sizeof desc)) SKIP("no GPU (%s)", th_last_error());
    th_model *m = NULL;
    if (th_model_load(DIR "bitnet-F32.gguf", NULL, &m)) SKIP("fixture: %s", th_last_error());
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64; cp.gpu = true;
    th_context *c = NULL;
    th_status s = th_context_new(m, &cp, &c);
    printf("  %s\n", th_last_error());
    CHECK(s == TH_ERR_UNSUPPORTED && !c && strstr(th_last_error(), "sub-norm"), "%s", th_last_error());
    th_context_free(c);
    th_model_free(m);
}

int main(void) {
    RUN(test_bitnet_golden);
    RUN(test_bitnet_golden_steps);
    RUN(test_bitnet_gpu_refused);
    return CHECK_DONE();
}
