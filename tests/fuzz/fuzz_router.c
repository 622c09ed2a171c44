/* fuzz_router.c — libFuzzer target for the router file reader (src/eval/router.c,
 * our MoE router-agreement file). Each input is parsed twice: as it is, and
 * "fitted": a header with small sizes taken from the first bytes (n_ctx 3..18,
 * 1..3 chunks, k 1..4 of up to 8 experts, 1..3 layers) followed by the input's
 * bytes repeated to exactly the size the header implies, so the layer list and
 * every record's expert-id checks are reached. Properties (trap on failure): a
 * failed parse leaves *out NULL and sets a message; a record check that fails sets
 * a message. */
#include "eval/eval.h"
#include <stdlib.h>
#include <string.h>

static void parse_one(const uint8_t *d, size_t n) {
    th_router_file *f = (th_router_file *)1;
    th_clear_error();
    if (th_router_file_parse(d, n, "fuzz.rt", &f) != TH_OK) {
        if (f != NULL || !*th_last_error()) __builtin_trap();
        return;
    }
    th_clear_error();
    if (th_router_file_check(f) != TH_OK && !*th_last_error()) __builtin_trap();
    th_router_file_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse_one(data, size);
    if (size < 4) return 0;
    int32_t n_ctx = 3 + data[0] % 16, nc = 1 + data[1] % 3, k = 1 + data[2] % 4, ne = k + data[2] / 64;
    int32_t n_moe = 1 + data[3] % 3, n_scored = n_ctx - 1 - n_ctx / 2;
    size_t hdr = 32 + 4 * (size_t)n_moe, rec = 4 * (size_t)k + 4 * ((size_t)k + 1);
    size_t total = hdr + (size_t)nc * (size_t)n_scored * (size_t)n_moe * rec;
    uint8_t *f = malloc(total);
    if (!f) return 0;
    int32_t h[8] = { 0x54524854, 1, n_ctx, nc, n_scored, k, ne, n_moe };
    memcpy(f, h, sizeof h);
    for (int32_t i = 0; i < n_moe; i++) {
        int32_t l = (data[3] & 0x80) ? (int32_t)data[(4 + (size_t)i) % size] : 2 * i;
        memcpy(f + 32 + 4 * (size_t)i, &l, 4);
    }
    for (size_t i = hdr; i < total; i++) f[i] = size > 4 ? data[4 + (i - hdr) % (size - 4)] : 0;
    /* mostly valid ids: reduce each record's ids modulo n_expert unless byte 0 says not */
    if (!(data[0] & 0x80))
        for (size_t r = hdr; r + rec <= total; r += rec)
            for (int32_t j = 0; j < k; j++) {
                uint32_t id;
                memcpy(&id, f + r + 4 * (size_t)j, 4);
                id %= (uint32_t)ne;
                memcpy(f + r + 4 * (size_t)j, &id, 4);
            }
    parse_one(f, total);
    free(f);
    return 0;
}
