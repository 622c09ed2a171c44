/* test_ternary.c — the 1-bit and ternary weight types (TQ1_0, TQ2_0, Q1_0_G128, IQ1_BN,
 * IQ2_BN; src/quant/ref_ternary.c, docs/ternary.md): the type table against the peers'
 * sizes, the layouts against hand-worked blocks, the encoders byte for byte and the
 * decoders (hash of the f32 output) against the peers' own quantizer and dequantizer
 * (tests/data/ternary/, made by tests/peer/make_ternary_goldens.sh), the reference dot
 * products against the decoded values, and whole-model logits against the peers'. */
#include "check.h"
#include "gguf/gguf.h"
#include "logits.h"
#include "quant/quant.h"
#include "quant/ref_encode.h"
#include "theseus.h"
#include <stdint.h>
#include <unistd.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ULL; }
    return h;
}

static uint32_t rng = 12345;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static const struct { uint32_t type; const char *name; uint32_t block, bytes, meta; } types[] = {
    { TH_TQ1_0, "TQ1_0", 256, 54, 0 },     /* ggml-common.h: block_tq1_0 */
    { TH_TQ2_0, "TQ2_0", 256, 66, 0 },
    { TH_Q1_0_G128, "Q1_0_G128", 128, 18, 0 },   /* ik_llama.cpp: block_q1_0_g128 */
    { TH_IQ1_BN, "IQ1_BN", 64, 13, 2 },    /* ik_llama.cpp: row_meta_size 2 (f16), 4 (f32) */
    { TH_IQ2_BN, "IQ2_BN", 64, 16, 4 },
};
#define NTYPES (int)(sizeof types / sizeof types[0])

static void test_ternary_type_table(void) {
    CHECK(TH_TQ1_0 == 34 && TH_TQ2_0 == 35 && TH_Q1_0_G128 == 41 && TH_IQ1_BN == 134 && TH_IQ2_BN == 135, "ids");
    for (int i = 0; i < NTYPES; i++) {
        const th_type_info *ti = th_type_info_get(types[i].type);
        CHECK(ti && !strcmp(ti->name, types[i].name) && ti->block == types[i].block && ti->bytes == types[i].bytes &&
              ti->row_meta == types[i].meta && ti->supported && ti->quantize_weights, "%s", types[i].name);
        uint64_t rb = 0;
        CHECK(th_row_bytes(types[i].type, 768, &rb) && rb == types[i].meta + 768 / types[i].block * types[i].bytes,
              "%s row of 768: %llu bytes", types[i].name, (unsigned long long)rb);
        CHECK(!th_row_bytes(types[i].type, 768 + 32, &rb), "%s: a partial block is refused", types[i].name);
    }
    /* the row scale is counted once per row: 2 rows of 64 IQ1_BN weights are 2 x (2 + 13) bytes */
    uint64_t one = 0;
    CHECK(th_row_bytes(TH_IQ1_BN, 64, &one) && one == 15 && th_row_bytes(TH_IQ2_BN, 64, &one) && one == 20, "BN rows");
}

/* Blocks worked by hand from the peers' layout descriptions (not from our encoder). */
static void test_ternary_layout(void) {
    float y[256];
    /* TQ1_0: trits (2, 0, 1, 1, 2) -> 2*81 + 0*27 + 1*9 + 1*3 + 2 = 176 -> ceil(176 * 256 / 243) = 186:
     * in qs[0] they are elements 0, 32, 64, 96, 128; d = 1 */
    th_block_tq1_0 t1;
    memset(&t1, 0, sizeof t1);
    for (int i = 0; i < 48; i++) t1.qs[i] = 128;    /* ceil(121 * 256 / 243): 121 = 11111 in base 3, all zeros */
    for (int i = 0; i < 4; i++) t1.qh[i] = 128;
    t1.qs[0] = 186;
    t1.d = 0x3c00;
    th_ref_dequantize(TH_TQ1_0, &t1, y, 256);
    CHECK(y[0] == 1 && y[32] == -1 && y[64] == 0 && y[96] == 0 && y[128] == 1, "tq1 %g %g %g %g %g", y[0], y[32], y[64], y[96], y[128]);
    int nz = 0;
    for (int i = 0; i < 256; i++) nz += y[i] != 0;
    CHECK(nz == 3, "tq1: %d non-zeros", nz);
    /* TQ1_0 tail: qh[1] = trits (2, 2, 0, 0) then 0 -> (2*27 + 2*9) * 3 = 216 -> ceil(216*256/243) = 228;
     * elements 241, 245, 249, 253 */
    t1.qs[0] = 128;
    t1.qh[1] = 228;
    th_ref_dequantize(TH_TQ1_0, &t1, y, 256);
    CHECK(y[241] == 1 && y[245] == 1 && y[249] == -1 && y[253] == -1 && y[240] == 0, "tq1 tail");
    /* TQ1_0 middle: qs[32 + 3] holds elements 163, 179, 195, 211, 227: trits (0,0,0,0,0) = byte 0 */
    t1.qh[1] = 128;
    t1.qs[35] = 0;
    th_ref_dequantize(TH_TQ1_0, &t1, y, 256);
    CHECK(y[163] == -1 && y[179] == -1 && y[195] == -1 && y[211] == -1 && y[227] == -1 && y[162] == 0, "tq1 middle");
    /* TQ2_0: qs[33] = 0b11100100: elements 129 (code 0), 161 (1), 193 (2), 225 (3) at d = 2 */
    th_block_tq2_0 t2;
    memset(t2.qs, 0x55, sizeof t2.qs);
    t2.qs[33] = 0xe4;
    t2.d = 0x4000;
    th_ref_dequantize(TH_TQ2_0, &t2, y, 256);
    CHECK(y[129] == -2 && y[161] == 0 && y[193] == 2 && y[225] == 4 && y[0] == 0, "tq2 %g %g %g %g", y[129], y[161], y[193], y[225]);
    /* Q1_0_G128: bit 3 of qs[5] is element 43 */
    th_block_q1_0_g128 q1;
    memset(&q1, 0, sizeof q1);
    q1.d = 0x3800;   /* 0.5 */
    q1.qs[5] = 8;
    th_ref_dequantize(TH_Q1_0_G128, &q1, y, 128);
    CHECK(y[43] == 0.5f && y[42] == -0.5f && y[44] == -0.5f, "q1");
    /* IQ1_BN: row scale f16 2.0, then a block: ql[3] holds elements 16..20, digit j of the
     * base-3 number first (186 encodes 176 = 2*81 + 0*27 + 1*9 + 1*3 + 2: digits 2, 1, 1, 0, 2);
     * extra holds 15, 31, 47, 63 as digits 0..3 (0, 2, 1, 1: 0 + 2*3 + 9 + 27 = 42 -> ceil(42*256/243) = 45) */
    uint8_t bn[2 + 13];
    bn[0] = 0x00; bn[1] = 0x40;
    memset(bn + 2, 128, 12);
    bn[2 + 3] = 186;
    bn[2 + 12] = 45;
    th_ref_dequantize(TH_IQ1_BN, bn, y, 64);
    CHECK(y[16] == 2 && y[17] == 0 && y[18] == 0 && y[19] == -2 && y[20] == 2 && y[21] == 0, "iq1_bn %g %g %g %g %g",
          y[16], y[17], y[18], y[19], y[20]);
    CHECK(y[15] == -2 && y[31] == 2 && y[47] == 0 && y[63] == 0, "iq1_bn extra %g %g %g %g", y[15], y[31], y[47], y[63]);
    /* IQ2_BN: row scale f32 0.25; qs[2] = 0b00011011: elements 2 (code 3), 18 (2), 34 (1), 50 (0) */
    uint8_t b2[4 + 16];
    float sc = 0.25f;
    memcpy(b2, &sc, 4);
    memset(b2 + 4, 0x55, 16);
    b2[4 + 2] = 0x1b;
    th_ref_dequantize(TH_IQ2_BN, b2, y, 64);
    CHECK(y[2] == 0.5f && y[18] == 0.25f && y[34] == 0 && y[50] == -0.25f && y[3] == 0, "iq2_bn");
}

/* The input of a golden file: the fixture tensor or the synthetic rows (as ternary_quant.c). */
static float *golden_input(bool synthetic, int64_t *rows, int64_t *cols) {
    if (synthetic) {
        *rows = 4; *cols = 768;
        float *x = malloc(sizeof(float) * 4 * 768);
        for (int64_t r = 0; r < 4; r++)
            for (int64_t j = 0; j < 768; j++) x[r * 768 + j] = (float)(r + 1) * (float)((37 * j) % 17 - 8) / 8.0f;
        return x;
    }
    gguf_file *f = NULL;
    if (gguf_open(fixture("tiny/tiny-F32.gguf"), &f) != TH_OK) return NULL;
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.ffn_down.weight");
    float *x = NULL;
    if (t && t->type == TH_F32) {
        *cols = (int64_t)t->ne[0];
        *rows = (int64_t)(t->nbytes / 4) / *cols;
        x = malloc(t->nbytes);
        memcpy(x, t->data, t->nbytes);
    }
    gguf_close(f);
    return x;
}

static void test_ternary_peer_encoders(void) {
    FILE *g = fopen("tests/data/ternary/goldens.txt", "r");
    if (!g) { CHECK(0, "tests/data/ternary/goldens.txt missing (run from the repository root)"); return; }
    FILE *probe = fopen(fixture("tiny/tiny-F32.gguf"), "rb");
    if (!probe) { fclose(g); SKIP("tiny-F32.gguf not found (set SHARED)"); }
    fclose(probe);
    char file[64], tname[32], shape[32];
    unsigned long long nbytes, hash;
    int lines = 0;
    while (fscanf(g, "%63s %31s %31s bytes %llu dequant_fnv %llx", file, tname, shape, &nbytes, &hash) == 5) {
        lines++;
        uint32_t type = UINT32_MAX;
        for (int i = 0; i < NTYPES; i++) {
            char lower[16];
            size_t k = 0;
            for (; types[i].name[k] && k < 15; k++) lower[k] = (char)(types[i].name[k] | (types[i].name[k] >= 'A' && types[i].name[k] <= 'Z' ? 0x20 : 0));
            lower[k] = 0;
            if (!strcmp(lower, tname)) type = types[i].type;
        }
        CHECK(type != UINT32_MAX, "unknown type %s", tname);
        if (type == UINT32_MAX) continue;
        int64_t rows = 0, cols = 0;
        float *x = golden_input(strstr(file, "synthetic") != NULL, &rows, &cols);
        char path[128];
        snprintf(path, sizeof path, "tests/data/ternary/%s", file);
        size_t len = 0;
        char *want = check_read_file(path, &len);
        uint64_t rb = 0;
        CHECK(x && want && th_row_bytes(type, (uint64_t)cols, &rb) && len == nbytes && len == rb * (uint64_t)rows,
              "%s: %zu bytes, %lld rows of %llu", file, len, (long long)rows, (unsigned long long)rb);
        if (!x || !want || len != rb * (uint64_t)rows) { free(x); free(want); continue; }
        uint8_t *got = malloc(len);
        float *y = malloc(sizeof(float) * cols);
        int64_t bad_row = -1;
        uint64_t h = 0xcbf29ce484222325ULL;
        for (int64_t r = 0; r < rows; r++) {
            th_quantize_weights(type, x + r * cols, got + r * rb, cols);
            if (bad_row < 0 && memcmp(got + r * rb, want + r * rb, rb)) bad_row = r;
            th_ref_dequantize(type, want + r * rb, y, cols);
            h = fnv(h, y, sizeof(float) * cols);
        }
        CHECK(bad_row < 0, "%s: our encoding differs from the peer's first in row %lld", file, (long long)bad_row);
        CHECK(h == hash, "%s: decode hash %016llx, the peer's %016llx", file, (unsigned long long)h, hash);
        printf("  %s: %lld rows, %zu bytes identical to the peer's; decode hash matches\n", file, (long long)rows, len);
        free(got); free(y); free(x); free(want);
    }
    fclose(g);
    CHECK(lines == 2 * NTYPES, "%d golden lines", lines);
}

/* The reference dot product equals the dot of the decoded weights with the decoded
 * activations (double sums), on random blocks, every code the format can hold (TQ2_0's
 * and IQ2_BN's code 3 too). */
static void test_ternary_dot_matches_decoded(void) {
    enum { N = 768 };
    float x[N], wd[N], ad[N];
    for (int i = 0; i < NTYPES; i++) {
        const uint32_t t = types[i].type;
        const th_type_info *ti = th_type_info_get(t);
        uint64_t rb = 0;
        th_row_bytes(t, N, &rb);
        uint8_t *w = malloc(rb), *a = malloc(N * 2);
        double worst = 0;
        for (int rep = 0; rep < 50; rep++) {
            for (uint64_t k = 0; k < rb; k++) w[k] = (uint8_t)rnd();
            /* sane scales: f16 ones in [0.25, 2) where the format keeps them */
            float rs = 0.5f + (float)(rnd() % 1000) / 1000.0f;
            if (t == TH_IQ2_BN) memcpy(w, &rs, 4);
            if (t == TH_IQ1_BN) { uint16_t h = th_f32_to_f16(rs); w[0] = (uint8_t)h; w[1] = (uint8_t)(h >> 8); }
            for (uint64_t b = 0; b < N / types[i].block; b++) {
                uint8_t *blk = w + types[i].meta + b * types[i].bytes;
                uint16_t h = th_f32_to_f16(0.25f + (float)(rnd() % 1000) / 600.0f);
                if (t == TH_TQ1_0) memcpy(blk + 52, &h, 2);
                if (t == TH_TQ2_0) memcpy(blk + 64, &h, 2);
                if (t == TH_Q1_0_G128) memcpy(blk, &h, 2);
            }
            for (int k = 0; k < N; k++) x[k] = (float)((int)(rnd() % 2001) - 1000) / 500.0f;
            th_ref_quantize(ti->act_type, x, a, N);
            th_ref_dequantize(t, w, wd, N);
            th_ref_dequantize(ti->act_type, a, ad, N);
            double want = 0, mag = 0;
            for (int k = 0; k < N; k++) { want += (double)wd[k] * ad[k]; mag += fabs((double)wd[k] * ad[k]); }
            float got = th_ref_vec_dot(t, N, w, a);
            double e = fabs(got - want) / (mag + 1e-30);
            if (e > worst) worst = e;
        }
        CHECK(worst <= 1e-6, "%s: dot vs decoded, worst %.3g of sum |w a|", types[i].name, worst);
        free(w); free(a);
    }
}

int main(void) {
    RUN(test_ternary_type_table);
    RUN(test_ternary_layout);
    RUN(test_ternary_peer_encoders);
    RUN(test_ternary_dot_matches_decoded);
    return CHECK_DONE();
}
