/* fuzz_kld.c — libFuzzer target for the KL-divergence base file reader
 * (src/eval/kld_file.c) and what reads its rows. Each input is parsed twice:
 *   1. as it is (th_kld_base_parse);
 *   2. "fitted": a header with small sizes taken from the first bytes (n_ctx 3..18,
 *      n_vocab 1..64, n_chunk 1..3), then the input's bytes repeated to exactly the
 *      size that header implies, so the token checks, every row's scale/offset checks
 *      and the decoding are reached on most inputs.
 * Every row of a parsed file is decoded (th_kld_base_logprobs) and, when valid,
 * scored against logits made from the input (th_row_kld) into an accumulator whose
 * statistics (with the sorted distribution) are taken at the end. Properties checked
 * (trap on failure): a parse that fails leaves *out NULL and sets a message; a parsed
 * file's counts match its header; the accumulator holds exactly the valid rows. */
#include "eval/eval.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void touch(const th_kld_base *b, const uint8_t *data, size_t size) {
    int32_t n_ctx = th_kld_base_n_ctx(b), nv = th_kld_base_n_vocab(b), nc = th_kld_base_n_chunks(b);
    int32_t n_scored = n_ctx - 1 - n_ctx / 2;
    if (n_ctx < 3 || nv < 1 || nc < 1 || !th_kld_base_tokens(b)) __builtin_trap();
    const th_token *tok = th_kld_base_tokens(b);
    int64_t n_tok = (int64_t)n_ctx * nc;
    for (int64_t i = 0; i < n_tok; i++)
        if (tok[i] < 0 || tok[i] >= nv) __builtin_trap();
    if (nv > 4096 || (int64_t)nc * n_scored > 256) return;   /* keep the run short */
    float *lp = malloc((size_t)nv * sizeof *lp), *lg = malloc((size_t)nv * sizeof *lg);
    th_kld_acc *acc = NULL;
    if (!lp || !lg || th_kld_acc_new(&acc)) { free(lp); free(lg); return; }
    for (int32_t i = 0; i < nv; i++) lg[i] = size ? (float)((int)data[(size_t)i % size] - 128) / 16 : 0;
    int64_t valid = 0;
    for (int32_t c = 0; c < nc; c++)
        for (int32_t j = 0; j < n_scored; j++) {
            if (th_kld_base_logprobs(b, c, j, lp) != TH_OK) {
                if (!*th_last_error()) __builtin_trap();
                continue;
            }
            th_kld_pos p;
            th_row_kld(lg, lp, nv, tok[(size_t)c * n_ctx + n_ctx / 2 + j + 1], &p);
            if (th_kld_acc_push(acc, &p) == TH_OK) valid++;
        }
    if (th_kld_base_logprobs(b, nc, 0, lp) == TH_OK || th_kld_base_logprobs(b, 0, n_scored, lp) == TH_OK) __builtin_trap();
    th_kld_stats s = th_kld_acc_stats(acc, true);
    if (s.count != valid) __builtin_trap();
    th_kld_acc_free(acc);
    free(lp);
    free(lg);
}

static void parse_one(const uint8_t *d, size_t n, const uint8_t *src, size_t src_n) {
    th_kld_base *b = (th_kld_base *)1;
    th_clear_error();
    if (th_kld_base_parse(d, n, "fuzz.kld", &b) != TH_OK) {
        if (b != NULL || !*th_last_error()) __builtin_trap();
        return;
    }
    touch(b, src, src_n);
    th_kld_base_close(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse_one(data, size, data, size);
    if (size < 3) return 0;
    int32_t n_ctx = 3 + data[0] % 16, nv = 1 + data[1] % 64, nc = 1 + data[2] % 3;
    size_t n_scored = (size_t)(n_ctx - 1 - n_ctx / 2), row = (size_t)th_kld_row_len(nv) * 2;
    size_t total = 20 + (size_t)n_ctx * nc * 4 + nc * n_scored * row;
    uint8_t *f = malloc(total);
    if (!f) return 0;
    memcpy(f, "_logits_", 8);
    int32_t h[3] = { n_ctx, nv, nc };
    memcpy(f + 8, h, 12);
    for (size_t i = 20; i < total; i++) f[i] = size > 3 ? data[3 + (i - 20) % (size - 3)] : 0;
    /* mostly in-range tokens: reduce each id modulo the vocabulary unless byte 0 says not */
    if (!(data[0] & 0x80))
        for (size_t i = 0; i < (size_t)n_ctx * nc; i++) {
            uint32_t t;
            memcpy(&t, f + 20 + 4 * i, 4);
            t %= (uint32_t)nv;
            memcpy(f + 20 + 4 * i, &t, 4);
        }
    parse_one(f, total, data, size);
    free(f);
    return 0;
}
