/* test_repack.c — the 8-row interleaved weight layouts (quant/repack.c, entry points
 * cpu/repack.c) and the gemm_packed entries of every kernel level this CPU has: for every
 * type a level packs, its packed gemm must equal the generic level's gemm (the
 * reference vec_dot per row) on the original layout, on awkward shapes (row ranges not
 * starting at 0, odd and even counts of 8-row groups, batches of 1..33 rows, widths of
 * 1..64 blocks). The integer block sums are exact in both, so the only difference is the
 * order of the f32 additions: relative tolerance 1e-5. The type table's packed layouts
 * are checked against the types the levels pack. */
#include "check.h"
#include <stddef.h>
#include "cpu/kernels.h"
#include "cpu/repack.h"

static uint32_t rng = 12345;
static float frand(void) { rng = rng * 1664525u + 1013904223u; return (float)(rng >> 8) / (float)(1 << 24) * 2.0f - 1.0f; }

/* Random blocks of a weight type: random bytes, with the f16 scale fields set to finite
 * values in [2^-8, 2^-7) (d, and dmin for Q4_K) so that every code path is exercised. */
static bool random_blocks(uint32_t type, uint8_t *p, size_t bytes) {
    size_t bsz = th_type_info_get(type)->bytes, nf = type == TH_Q4_K ? 2 : 1;
    size_t at = type == TH_Q6_K ? offsetof(th_block_q6_K, d) : 0;   /* first f16 field */
    if (type != TH_Q4_0 && type != TH_Q8_0 && type != TH_Q4_K && type != TH_Q6_K && !th_is_qn(type)) return false;
    for (size_t i = 0; i < bytes; i++) { rng = rng * 1664525u + 1013904223u; p[i] = (uint8_t)(rng >> 24); }
    for (size_t b = 0; b + bsz <= bytes; b += bsz)
        for (size_t f = 0; f < nf; f++) {
            rng = rng * 1664525u + 1013904223u;
            uint16_t h = (uint16_t)(0x1c00 + (rng >> 22)); /* [2^-8, 2^-7): exponent 7, any mantissa */
            memcpy(p + b + at + 2 * f, &h, 2);
        }
    return true;
}

static void check_type(const th_kernels *gen, const th_kernels *k, uint32_t type) {
    const uint32_t at = th_type_info_get(type)->act_type;
    const int64_t blk = th_type_info_get(type)->block;
    /* rows 8: one 8-row group; 24, 40 from r0 8: 16-row tiles (AVX-512); 64 from r0 8: an
     * odd group count (a half tile at the end). Batches: every tile width (1, 4, 8 at
     * AVX-512; 1, 4 at AVX2) full and partial, and chunks of 32 plus a rest. */
    const int64_t widths[] = { 1, 3, 8, 64 }, rowss[] = { 8, 24, 40, 64 }, nbs[] = { 1, 2, 3, 4, 5, 7, 8, 9, 12, 20, 33 };
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (size_t ri = 0; ri < sizeof rowss / sizeof *rowss; ri++) {
            int64_t n = widths[wi] * blk, rows = rowss[ri];
            uint64_t rb, ab;
            th_row_bytes(type, (uint64_t)n, &rb);
            th_row_bytes(at, (uint64_t)n, &ab);
            size_t prb = th_repack_row_bytes(type, (size_t)rb);
            uint8_t *w = malloc((size_t)(rb * rows)), *wp = malloc(prb * (size_t)rows), *x = malloc((size_t)ab * 33);
            float *f = malloc((size_t)n * sizeof *f), *y0 = calloc((size_t)(33 * rows), 4), *y1 = calloc((size_t)(33 * rows), 4);
            if (!random_blocks(type, w, (size_t)(rb * rows))) {
                CHECK(0, "no random-block rule for type %u", type);
                return;
            }
            for (int64_t b = 0; b < 33; b++) {
                for (int64_t i = 0; i < n; i++) f[i] = frand();
                gen->quantize[at](f, x + b * ab, n);
            }
            th_repack_rows(type, w, wp, rows, (size_t)rb);
            for (size_t bi = 0; bi < sizeof nbs / sizeof *nbs; bi++) {
                int64_t nb = nbs[bi], r0 = rows > 8 ? 8 : 0;
                memset(y1, 0, (size_t)(33 * rows) * 4);
                gen->gemm[type](n, r0, rows, w, (size_t)rb, nb, x, (size_t)ab, y0, rows);
                k->gemm_packed[type](n, r0, rows, wp, prb, nb, x, (size_t)ab, y1, rows);
                int bad = 0;
                for (int64_t b = 0; b < nb; b++)
                    for (int64_t r = r0; r < rows; r++) {
                        float a = y0[b * rows + r], c = y1[b * rows + r];
                        if (!(fabsf(a - c) <= 1e-5f * (fabsf(a) + (float)n * 0.01f))) { if (getenv("DBG")) fprintf(stderr, "r %lld b %lld: %g vs %g\n", (long long)r, (long long)b, a, c); bad++; }
                    }
                CHECK(bad == 0, "%s %s n %lld rows %lld nb %lld: %d outputs differ", k->level, th_type_name(type),
                      (long long)n, (long long)rows, (long long)nb, bad);
                for (int64_t r = 0; r < r0; r++) CHECK(y1[r] == 0.0f, "row %lld outside [r0, r1) written", (long long)r);
            }
            free(w); free(wp); free(x); free(f); free(y0); free(y1);
        }
}

/* Every level the CPU has, not only the process-wide one. */
static void test_packed_gemm_equals_reference(void) {
    static th_kernels gen, k;
    th_kernels_fill(&gen, TH_LEVEL_GENERIC);
    int tested = 0;
    for (int l = 0; l < TH_LEVEL_COUNT; l++) {
        if (!th_kernels_fill(&k, l)) continue;
        int types = 0;
        for (uint32_t t = 0; t < TH_TYPE_COUNT; t++)
            if (k.gemm_packed[t]) {
                CHECK(th_type_info_get(t)->repack8 != NULL, "%s packs %s, which has no packed layout", k.level, th_type_name(t));
                check_type(&gen, &k, t);
                types++;
            }
        printf("  %s: %d packed types\n", k.level, types);
        tested += types;
    }
    if (!tested) SKIP("no level of this CPU packs a type");
}

/* Packing rule: only whole groups of 8 rows, only types with a packed kernel. */
static void test_repack_supported(void) {
    const th_kernels *k = th_cpu_kernels();
    CHECK(!th_repack_supported(k, TH_Q4_0, 12, 256));
    CHECK(!th_repack_supported(k, TH_Q4_0, 0, 256));
    CHECK(!th_repack_supported(k, TH_TYPE_COUNT, 8, 256));
    CHECK(!th_repack_supported(k, TH_Q4_0, 16, TH_REPACK_MAX_N + 32));
    CHECK(th_repack_supported(k, TH_Q4_0, 16, 256) == (k->gemm_packed[TH_Q4_0] != NULL));
}

/* The Q4_0 layout by hand: block b of the group holds d of rows 0..7, then 4-byte
 * groups qs[4k..4k+3] of rows 0..7 for k = 0..3. */
static void test_q4_0_layout(void) {
    th_block_q4_0 rows[8][2];
    for (int i = 0; i < 8; i++)
        for (int b = 0; b < 2; b++) {
            rows[i][b].d = (uint16_t)(0x3c00 + 16 * i + b);
            for (int j = 0; j < 16; j++) rows[i][b].qs[j] = (uint8_t)(i * 16 + j + 128 * b);
        }
    uint8_t out[8 * 2 * sizeof(th_block_q4_0)];
    th_repack_rows(TH_Q4_0, rows, out, 8, 2 * sizeof(th_block_q4_0));
    const uint8_t *blk1 = out + 144;
    uint16_t d;
    memcpy(&d, blk1 + 2 * 5, 2);
    CHECK(d == 0x3c00 + 16 * 5 + 1, "d of row 5, block 1: %#x", d);
    /* block 1, k = 2, row 3, byte 1: qs[9] of row 3 = 3*16 + 9 + 128 */
    CHECK(blk1[16 + 32 * 2 + 4 * 3 + 1] == 3 * 16 + 9 + 128, "%d", blk1[16 + 64 + 13]);
    CHECK(out[16] == 0 && out[16 + 4] == 16, "block 0 R_0 starts with rows 0 and 1: %d %d", out[16], out[20]);
}

int main(void) {
    RUN(test_repack_supported);
    RUN(test_q4_0_layout);
    RUN(test_packed_gemm_equals_reference);
    return CHECK_DONE();
}
