/* test_repack.c — the 8-row interleaved weight layouts (quant/repack.c, entry points
 * cpu/repack.c) and the gemm_packed entries of every kernel level this CPU has: for every
 * type a level packs, its packed gemm must equal the generic level's gemm (the
 * reference vec_dot per row) on the original layout, on awkward shapes (row ranges not
 * starting at 0, odd and even counts of 8-row groups, batches of 1..33 rows, widths of
 * 1..64 blocks). The integer block sums are exact in both, so the only difference is the
 * order of the f32 additions: relative tolerance 1e-5. The type table's packed layouts
 * are checked against the types the levels pack. F16 and BF16 (check_float) at widths,
 * row ranges and batches around their kernels' blocks, and their layout by hand. The
 * model-wide switches (th_model_params.no_repack / thp / no_amx) on the tiny BF16 model. */
#include "check.h"
#include <stddef.h>
#include "cpu/kernels.h"
#include "cpu/repack.h"
#include "logits.h"
#include "model.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
bool th_avx512_amx_bf16_usable(void);   /* avx512/gemm_amx.c */
#endif

static uint32_t rng = 12345;
static float frand(void) { rng = rng * 1664525u + 1013904223u; return (float)(rng >> 8) / (float)(1 << 24) * 2.0f - 1.0f; }

/* Random blocks of a weight type: random bytes, with the f16 scale fields set to finite
 * values in [2^-8, 2^-7) (d, and dmin for Q4_K) so that every code path is exercised. */
static bool random_blocks(uint32_t type, uint8_t *p, size_t bytes) {
    size_t bsz = th_type_info_get(type)->bytes, nf = type == TH_Q4_K ? 2 : 1;
    size_t at = type == TH_Q6_K ? offsetof(th_block_q6_K, d) : 0;   /* first f16 field */
    if (type != TH_Q4_0 && type != TH_Q8_0 && type != TH_Q4_K && type != TH_Q6_K && type != TH_IQ4_XS &&
        !th_is_qn(type)) return false;
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

/* F16 / BF16 (one element per block): the packed gemm (k-blocked at 256, decode in k
 * blocks of 2048, panels of 32 rows, microkernels of up to 12 activation rows, activation
 * blocks of up to 512 rows) against the generic gemm, which sums exact products in
 * double: widths around and across those blocks (1, 3, 17, 255..257, 600, 2100), row
 * ranges of 1..4 groups and 7 groups from row 8 (16, 32, 56 rows: 16-row and 32-row
 * panels, a padded last panel), batches of 1 (decode) and 2..100 (every microkernel
 * width, several per row block), and 530 rows (two activation blocks). Values in
 * [-1, 1); the f32 accumulation's rounding is within 1e-5 x (|y| + n / 100). */
static void check_float(const th_kernels *gen, const th_kernels *k, uint32_t type) {
    const int64_t ns[] = { 1, 3, 17, 255, 256, 257, 600, 2100 }, rowss[] = { 8, 24, 40, 64 };
    const int64_t nbs[] = { 1, 2, 3, 5, 8, 11, 12, 13, 25, 33, 100, 530 };
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
        for (size_t ri = 0; ri < sizeof rowss / sizeof *rowss; ri++) {
            const int64_t n = ns[ni], rows = rowss[ri], nbmax = n <= 600 ? 530 : 100;
            const size_t rb = (size_t)n * 2;
            uint16_t *w = malloc(rb * (size_t)rows), *wp = malloc(rb * (size_t)rows), *x = malloc(rb * (size_t)nbmax);
            float *y0 = calloc((size_t)(nbmax * rows), 4), *y1 = calloc((size_t)(nbmax * rows), 4);
            for (int64_t i = 0; i < n * rows; i++) w[i] = type == TH_F16 ? th_f32_to_f16(frand()) : th_f32_to_bf16(frand());
            for (int64_t i = 0; i < n * nbmax; i++) x[i] = type == TH_F16 ? th_f32_to_f16(frand()) : th_f32_to_bf16(frand());
            th_repack_rows(type, w, wp, rows, rb);
            for (size_t bi = 0; bi < sizeof nbs / sizeof *nbs; bi++) {
                const int64_t nb = nbs[bi], r0 = rows > 8 ? 8 : 0;
                if (nb > nbmax || (nb == 530 && rows != 40)) continue;
                memset(y1, 0, (size_t)(nbmax * rows) * 4);
                gen->gemm[type](n, r0, rows, w, rb, nb, x, rb, y0, rows);
                k->gemm_packed[type](n, r0, rows, wp, rb, nb, x, rb, y1, rows);
                int bad = 0;
                for (int64_t b = 0; b < nb; b++)
                    for (int64_t r = r0; r < rows; r++) {
                        float a = y0[b * rows + r], c = y1[b * rows + r];
                        if (!(fabsf(a - c) <= 1e-5f * (fabsf(a) + (float)n * 0.01f))) bad++;
                    }
                CHECK(bad == 0, "%s %s n %lld rows %lld nb %lld: %d outputs differ", k->level, th_type_name(type),
                      (long long)n, (long long)rows, (long long)nb, bad);
                for (int64_t b = 0; b < nb; b++)
                    for (int64_t r = 0; r < r0; r++) CHECK(y1[b * rows + r] == 0.0f, "row %lld outside [r0, r1) written", (long long)r);
            }
            free(w); free(wp); free(x); free(y0); free(y1);
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
                if (t == TH_F16 || t == TH_BF16) check_float(&gen, &k, t);
                else check_type(&gen, &k, t);
                types++;
            }
        printf("  %s: %d packed types\n", k.level, types);
        tested += types;
    }
    if (!tested) SKIP("no level of this CPU packs a type");
}

/* The avx512 level's two BF16 kernels (vdpbf16ps where the CPU has AVX512-BF16, and the
 * FMA one), whichever the vendor rule picks by default: th_kernels_set_bf16_dot forces
 * each (with AMX dropped, th_kernels_no_amx); then AMX where the CPU and OS offer it. */
static void test_bf16_both_kernels(void) {
    static th_kernels gen, k;
    th_kernels_fill(&gen, TH_LEVEL_GENERIC);
    if (!th_kernels_fill(&k, TH_LEVEL_AVX512)) { SKIP("no avx512 level"); return; }
    th_gemm_fn by_mode[2];
    for (int mode = 1; mode <= 2; mode++) {   /* vdpbf16ps, FMA */
        th_kernels_set_bf16_dot(mode);
        th_kernels_fill(&k, TH_LEVEL_AVX512);
        th_kernels_no_amx(&k);
        by_mode[mode - 1] = k.gemm_packed[TH_BF16];
        check_float(&gen, &k, TH_BF16);
    }
    th_kernels_set_bf16_dot(0);
#if defined(__x86_64__)
    /* the two modes are two kernels where the CPU has AVX512-BF16 (one FMA kernel without) */
    CHECK(by_mode[0] != NULL && by_mode[1] != NULL);
    unsigned a, b, c, d;   /* cpuid leaf 7 sub-leaf 1, EAX bit 5: AVX512-BF16 */
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) CHECK(by_mode[0] != by_mode[1], "vdpbf16ps and FMA modes gave one kernel");
    /* AMX (gemm_amx.c) where the CPU and OS offer it (the default there) */
    th_kernels_fill(&k, TH_LEVEL_AVX512);
    th_gemm_fn dflt = k.gemm_packed[TH_BF16];
    th_kernels_no_amx(&k);
    if (th_avx512_amx_bf16_usable()) {
        CHECK(dflt != k.gemm_packed[TH_BF16], "no_amx left the AMX kernel in place");
        th_kernels_fill(&k, TH_LEVEL_AVX512);
        check_float(&gen, &k, TH_BF16);
        printf("  avx512: BF16 with AMX checked\n");
    } else {
        CHECK(dflt == k.gemm_packed[TH_BF16], "no AMX here, yet no_amx changed the kernel");
        printf("  (AMX kernel not run: no AMX-BF16 here)\n");
    }
#endif
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

/* The F16/BF16 layout by hand: element k of rows 0..7 side by side. */
static void test_16bit_layout(void) {
    uint16_t rows[8][5], out[40];
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 5; k++) rows[i][k] = (uint16_t)(100 * i + k);
    th_repack_rows(TH_F16, rows, out, 8, sizeof rows[0]);
    CHECK(out[0] == 0 && out[1] == 100 && out[7] == 700 && out[8] == 1, "k 0: %u %u %u, k 1 row 0: %u", out[0], out[1], out[7], out[8]);
    CHECK(out[8 * 4 + 3] == 304, "k 4 row 3: %u", out[35]);
    th_repack_rows(TH_BF16, rows, out, 8, sizeof rows[0]);
    CHECK(out[8 * 2 + 5] == 502, "bf16 k 2 row 5: %u", out[21]);
}

/* The logits of 8 tokens through `path` loaded with mp (NULL on failure; *out the
 * model, or NULL). */
static float *model_logits(const char *path, const int32_t tok[8], const th_model_params *mp, th_model **out) {
    *out = NULL;
    if (th_model_load(path, mp, out)) return NULL;
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 32; cp.n_batch = 8; cp.n_threads = 2;
    return decode_all_logits(*out, tok, 8, &cp);
}

static float *layout_logits(const th_model_params *mp, th_model **out) {
    static const int32_t tok[8] = { 1, 450, 439, 860, 3347, 113, 1701, 123 };
    return model_logits(fixture("tiny/tiny-BF16.gguf"), tok, mp, out);
}

static double max_abs_diff(const float *a, const float *b, size_t n, double *scale) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)a[i]));
    }
    *scale = s;
    return d;
}

/* Default: the matmul weights packed (where this level packs BF16). no_repack: none
 * packed, the logits those of the packed run up to summation order (and the BF16
 * roundings of activations it flips). thp: the copy
 * 2 MiB aligned (it is > 2 MiB), the logits bit-identical. no_amx: without AMX on this
 * CPU the same kernels, bit-identical; with AMX, equal to rounding. */
static void test_model_layout_switches(void) {
    th_model_params mp = th_model_default_params();
    th_model *m0, *m;
    float *l0 = layout_logits(&mp, &m0), *l;
    CHECK(l0 != NULL, "%s", th_last_error());
    if (!l0) { th_model_free(m0); return; }
    size_t n = 8 * (size_t)th_model_n_vocab(m0);
    const th_weight *wq = &m0->layers[0].wq;
    bool packs = th_repack_supported(th_cpu_kernels(), TH_BF16, wq->ne1, wq->ne0) && wq->ne1 % 8 == 0;
    if (packs) CHECK(m0->packed_buf != NULL && wq->packed != NULL, "default: blk.0.attn_q not packed");
    double scale, d;

    mp.no_repack = true;
    l = layout_logits(&mp, &m);
    CHECK(l != NULL, "no_repack: %s", th_last_error());
    if (l) {
        CHECK(m->packed_buf == NULL && m->layers[0].wq.packed == NULL && m->output.packed == NULL, "no_repack packed");
        d = max_abs_diff(l0, l, n, &scale);
        printf("  no_repack: logits differ by %.3g (largest %.3g)\n", d, scale);
        /* BF16 activations: another f32 summation order can flip an activation's BF16
         * rounding (2^-8 relative), and the tiny random model carries that to the logits —
         * measured 1.2e-3 (avx512) and 2.9e-3 (avx2) of the largest between packed and
         * unpacked, 3.0e-3 between the two unpacked kernels (the packed ones agree to
         * 5e-7). A layout mistake moves logits by O(1). */
        CHECK(d <= 1e-2 * scale, "no_repack: logits differ by %g (largest %g)", d, scale);
    }
    free(l); th_model_free(m);

    mp = th_model_default_params();
    mp.thp = true;
    l = layout_logits(&mp, &m);
    CHECK(l != NULL, "thp: %s", th_last_error());
    if (l) {
        if (packs) CHECK(m->packed_buf && (uintptr_t)m->packed_buf % ((uintptr_t)2 << 20) == 0, "thp: copy not 2 MiB aligned");
        CHECK(!memcmp(l0, l, n * sizeof *l), "thp: logits not bit-identical");
    }
    free(l); th_model_free(m);

    mp = th_model_default_params();
    mp.no_amx = true;
    l = layout_logits(&mp, &m);
    CHECK(l != NULL, "no_amx: %s", th_last_error());
    if (l) {
        bool amx = th_cpu_kernels_no_amx()->gemm_packed[TH_BF16] != th_cpu_kernels()->gemm_packed[TH_BF16];
        if (!amx) CHECK(!memcmp(l0, l, n * sizeof *l), "no_amx without AMX: logits not bit-identical");
        d = max_abs_diff(l0, l, n, &scale);
        CHECK(d <= 1e-2 * scale, "no_amx: logits differ by %g (largest %g)", d, scale);  /* as no_repack's */
        printf("  AMX %s; no_amx: logits differ by %.3g\n", amx ? "in use by default" : "not here", d);
    }
    free(l); th_model_free(m);
    free(l0); th_model_free(m0);
}

/* The DeltaNet projections of a hybrid model are packed too (repack_model.c's list):
 * the qwen35 fixture quantized to Q8_0 (pure), its attn_qkv packed where this level
 * packs Q8_0, the logits those of the unpacked run up to f32 addition order. */
static void test_hybrid_projections_packed(void) {
    char q8[64];
    snprintf(q8, sizeof q8, "/tmp/th_test_qwen35_q8_%d.gguf", (int)getpid());
    th_quantize_params qp = th_quantize_default_params();
    qp.type = "Q8_0";
    qp.pure = true;
    qp.n_threads = 2;
    if (th_quantize_file("tests/fixtures/hybrid/qwen35-F32.gguf", q8, &qp)) {
        CHECK(0, "quantize the qwen35 fixture: %s", th_last_error());
        return;
    }
    static const int32_t tok[8] = { 1, 45, 39, 86, 33, 113, 170, 12 };
    th_model_params mp = th_model_default_params();
    th_model *m0, *m1;
    float *l0 = model_logits(q8, tok, &mp, &m0);
    mp.no_repack = true;
    float *l1 = model_logits(q8, tok, &mp, &m1);
    CHECK(l0 && l1, "qwen35 Q8_0: %s", th_last_error());
    if (l0 && l1) {
        const th_weight *w = &m0->layers[0].ssm_qkv;
        CHECK(w->data != NULL, "layer 0 has no attn_qkv (not a DeltaNet layer?)");
        if (th_repack_supported(th_cpu_kernels(), TH_Q8_0, w->ne1, w->ne0) && w->ne1 % 8 == 0)
            CHECK(w->packed != NULL && m0->layers[0].ssm_gate.packed != NULL, "blk.0.attn_qkv / attn_gate not packed");
        CHECK(m1->layers[0].ssm_qkv.packed == NULL, "no_repack: attn_qkv packed");
        double scale, d = max_abs_diff(l0, l1, 8 * (size_t)th_model_n_vocab(m0), &scale);
        CHECK(d <= 1e-3 * scale, "qwen35 Q8_0 packed vs unpacked: logits differ by %g (largest %g)", d, scale);
        printf("  qwen35 Q8_0: packed vs unpacked logits differ by %.2g (largest %.3g)\n", d, scale);
    }
    free(l0); free(l1); th_model_free(m0); th_model_free(m1);
    remove(q8);
}

int main(void) {
    RUN(test_16bit_layout);
    RUN(test_hybrid_projections_packed);
    RUN(test_repack_supported);
    RUN(test_q4_0_layout);
    RUN(test_packed_gemm_equals_reference);
    RUN(test_bf16_both_kernels);
    RUN(test_model_layout_switches);
    return CHECK_DONE();
}
