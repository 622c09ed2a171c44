/* test_quant_dot.c — the reference dot products and the fp16/bf16 conversions.
 *  - hand-built weight and activation blocks with sums worked out by hand;
 *  - structure: for every supported weight type and awkward block counts,
 *    th_ref_vec_dot(w, a) equals sum(dequant(w) * dequant(a)) up to float rounding
 *    (the integer-sum-then-scale form must be the same number);
 *  - accuracy: th_ref_vec_dot(w, quantize_act(x)) is within the bound that the
 *    activation quantization error gives of sum(dequant(w) * x);
 *  - fp16/bf16 conversion of src/core/core.h against known bit patterns. */
#include "check.h"
#include "quant/quant.h"
#include "cpu/kernels.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rand_u32(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 32); }
static float frand(void) { return (float)(rand_u32() * (1.0 / 2147483648.0) - 1.0); } /* [-1, 1) */

/* ------------------------------------------------------------ hand-built dots */

static void test_dot_hand(void) {
    /* Q4_0 block d = 0.5, qs[j] = j | (15-j) << 4 (values (j-8)/2 and (7-j)/2) against a
     * Q8_0 block d = 1, all codes 1: sum of the values = 0.5 * (sum_j (j-8) + sum_j (7-j))
     * = 0.5 * (-8 - 8) = -8. */
    th_block_q4_0 w0 = {.d = 0x3800};
    for (int j = 0; j < 16; j++) w0.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    th_block_q8_0 a0 = {.d = 0x3C00};
    memset(a0.qs, 1, sizeof a0.qs);
    CHECK(th_ref_vec_dot(TH_Q4_0, 32, &w0, &a0) == -8.0f, "Q4_0 . ones = %g", th_ref_vec_dot(TH_Q4_0, 32, &w0, &a0));

    /* Q4_1 block d = 1, m = -2 (values 6 except -2, 13, -1, 0, 12, 5 at 0, 16, 1, 17, 15, 31)
     * against Q8_1 d = 1, codes 1, s = 32 (0x5000): 26*6 + (-2+13-1+0+12+5) = 183, computed
     * as sum(q) + m*s = 247 - 64. */
    th_block_q4_1 w1 = {.d = 0x3C00, .m = 0xC000};
    memset(w1.qs, 0x88, sizeof w1.qs);
    w1.qs[0] = 0xF0; w1.qs[1] = 0x21; w1.qs[15] = 0x7E;
    th_block_q8_1 a1 = {.d = 0x3C00, .s = 0x5000};
    memset(a1.qs, 1, sizeof a1.qs);
    CHECK(th_ref_vec_dot(TH_Q4_1, 32, &w1, &a1) == 183.0f, "Q4_1 . ones = %g", th_ref_vec_dot(TH_Q4_1, 32, &w1, &a1));

    /* Q8_0 weights d = 2, codes -1 (value -2) against Q8_0 d = 0.5, codes 3 (value 1.5)
     * over two blocks: 64 * -3 = -192. */
    th_block_q8_0 w8[2], a8[2];
    for (int i = 0; i < 2; i++) {
        w8[i].d = 0x4000; memset(w8[i].qs, 0xFF, 32);
        a8[i].d = 0x3800; memset(a8[i].qs, 3, 32);
    }
    CHECK(th_ref_vec_dot(TH_Q8_0, 64, w8, a8) == -192.0f, "Q8_0 = %g", th_ref_vec_dot(TH_Q8_0, 64, w8, a8));

    /* Q4_K block of test_quant.c (values 14, -1 x31, 126 at 97, 8, -29 x31, -0.5 x31, 239.5)
     * against Q8_K d = 1, codes 1, bsums 16: sum = 14 - 31 + 126 + 8 - 899 - 15.5 + 239.5 = -558. */
    static const uint8_t k4_scales[12] = {0x81, 0, 0, 0x7F, 0xC2, 0, 0, 0, 0xA5, 0, 0, 0x10};
    th_block_q4_K wk;
    memset(&wk, 0, sizeof wk);
    wk.d = 0x3C00; wk.dmin = 0x3800;
    memcpy(wk.scales, k4_scales, 12);
    wk.qs[0] = 0x7F; wk.qs[33] = 0x20; wk.qs[64] = 0x01; wk.qs[127] = 0xF0;
    th_block_q8_K ak;
    ak.d = 1.0f;
    memset(ak.qs, 1, sizeof ak.qs);
    for (int g = 0; g < 16; g++) ak.bsums[g] = 16;
    CHECK(th_ref_vec_dot(TH_Q4_K, 256, &wk, &ak) == -558.0f, "Q4_K = %g", th_ref_vec_dot(TH_Q4_K, 256, &wk, &ak));

    /* MXFP4 e = 128 (scale 2^(128-127) = 2), codes j | (15-j) << 4, so elements 0..7 hold
     * the e2m1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6; against Q8_0 d = 1 with codes 1 on
     * elements 0..7 and 0 elsewhere: 2 * (0 + 0.5 + 1 + 1.5 + 2 + 3 + 4 + 6) = 36. */
    th_block_mxfp4 wm = {.e = 128};
    for (int j = 0; j < 16; j++) wm.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    th_block_q8_0 am = {.d = 0x3C00};
    memset(am.qs, 0, sizeof am.qs);
    memset(am.qs, 1, 8);
    CHECK(th_ref_vec_dot(TH_MXFP4, 32, &wm, &am) == 36.0f, "MXFP4 = %g", th_ref_vec_dot(TH_MXFP4, 32, &wm, &am));

    /* F16 / BF16 / F32: (1, 2, -3) . (0.5, 0.25, 2) = 0.5 + 0.5 - 6 = -5. */
    const uint16_t h1[3] = {0x3C00, 0x4000, 0xC200}, h2[3] = {0x3800, 0x3400, 0x4000};
    const uint16_t b1[3] = {0x3F80, 0x4000, 0xC040}, b2[3] = {0x3F00, 0x3E80, 0x4000};
    const float f1[3] = {1, 2, -3}, f2[3] = {0.5f, 0.25f, 2};
    CHECK(th_ref_vec_dot(TH_F16, 3, h1, h2) == -5.0f, "F16");
    CHECK(th_ref_vec_dot(TH_BF16, 3, b1, b2) == -5.0f, "BF16");
    CHECK(th_ref_vec_dot(TH_F32, 3, f1, f2) == -5.0f, "F32");
}

/* ------------------------------------------------------------ random blocks */

/* Random bytes for nb blocks of `type`, with the scale fields set to sane finite values
 * (random fp16 bits would give inf/NaN). */
static void random_weights(uint32_t type, void *buf, int64_t nb) {
    const th_type_info *ti = th_type_info_get(type);
    uint8_t *p = buf;
    for (size_t i = 0; i < (size_t)nb * ti->bytes; i++) p[i] = (uint8_t)rand_u32();
    for (int64_t i = 0; i < nb; i++) {
        uint16_t d = th_f32_to_f16(0.01f + 0.02f * fabsf(frand())), m = th_f32_to_f16(0.02f * frand());
        void *b = p + (size_t)i * ti->bytes;
        switch (type) {
        case TH_F16: *(uint16_t *)b = th_f32_to_f16(frand()); break;
        case TH_BF16: *(uint16_t *)b = th_f32_to_bf16(frand()); break;
        case TH_F32: *(float *)b = frand(); break;
        case TH_Q4_0: ((th_block_q4_0 *)b)->d = d; break;
        case TH_Q4_1: ((th_block_q4_1 *)b)->d = d; ((th_block_q4_1 *)b)->m = m; break;
        case TH_Q5_0: ((th_block_q5_0 *)b)->d = d; break;
        case TH_Q5_1: ((th_block_q5_1 *)b)->d = d; ((th_block_q5_1 *)b)->m = m; break;
        case TH_Q8_0: ((th_block_q8_0 *)b)->d = d; break;
        case TH_Q2_K: ((th_block_q2_K *)b)->d = d; ((th_block_q2_K *)b)->dmin = d; break;
        case TH_Q3_K: ((th_block_q3_K *)b)->d = d; break;
        case TH_Q4_K: ((th_block_q4_K *)b)->d = d; ((th_block_q4_K *)b)->dmin = d; break;
        case TH_Q5_K: ((th_block_q5_K *)b)->d = d; ((th_block_q5_K *)b)->dmin = d; break;
        case TH_Q6_K: ((th_block_q6_K *)b)->d = d; break;
        case TH_IQ4_NL: ((th_block_iq4_nl *)b)->d = d; break;
        case TH_IQ4_XS: ((th_block_iq4_xs *)b)->d = d; break;
        case TH_MXFP4: ((th_block_mxfp4 *)b)->e = (uint8_t)(118 + rand_u32() % 8); break;
        }
    }
}

/* Per-element bound on |dequant(quantize(x)) - x| for the activation types, given the
 * amax A of x's block: Q8_0/Q8_1 half a step A/254 plus 127 codes times the fp16 rounding
 * of d (A/127 * 2^-11); Q8_K half a step (d is f32); F16 / BF16 half an ulp. */
static double act_error(uint32_t act, double x, double A) {
    switch (act) {
    case TH_Q8_0: case TH_Q8_1: return A / 254 + A / 2048 + 1e-7 * A;   /* 127 * (A/127) * 2^-11 */
    case TH_Q8_K: return A / 254 + 1e-6 * A;
    case TH_F16: return fabs(x) / 2048;
    case TH_BF16: return fabs(x) / 256;
    default: return 0;
    }
}

static const uint32_t weight_types[] = {TH_F32, TH_F16, TH_BF16, TH_Q4_0, TH_Q4_1, TH_Q5_0, TH_Q5_1, TH_Q8_0,
                                        TH_Q2_K, TH_Q3_K, TH_Q4_K, TH_Q5_K, TH_Q6_K, TH_IQ4_NL, TH_IQ4_XS, TH_MXFP4};

/* Row lengths: 1, 3, 7 and 33 blocks (1, 7, 33, 1000 elements for the float types). */
static int64_t row_len(uint32_t type, int k) {
    const th_type_info *ti = th_type_info_get(type);
    static const int64_t blocks[4] = {1, 3, 7, 33}, floats[4] = {1, 7, 33, 1000};
    return ti->block == 1 ? floats[k] : blocks[k] * ti->block;
}

enum { MAXN = 33 * 256 };
static float x[MAXN], wf[MAXN], af[MAXN];
static _Alignas(64) uint8_t wbuf[MAXN * 4];
static _Alignas(64) uint8_t abuf[MAXN * 4 + 1024];

static void test_dot_structure(void) {
    for (size_t t = 0; t < sizeof weight_types / sizeof weight_types[0]; t++) {
        uint32_t type = weight_types[t];
        const th_type_info *ti = th_type_info_get(type);
        for (int k = 0; k < 4; k++) {
            int64_t n = row_len(type, k);
            random_weights(type, wbuf, n / ti->block);
            for (int64_t i = 0; i < n; i++) x[i] = frand() * (1 + (i / 32) % 3);
            th_ref_quantize(ti->act_type, x, abuf, n);
            th_ref_dequantize(type, wbuf, wf, n);
            th_ref_dequantize(ti->act_type, abuf, af, n);
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) { want += (double)wf[i] * af[i]; mag += fabs((double)wf[i] * af[i]); }
            /* Q8_1 carries s = fp16(d * sum(q)) instead of sum(dequant): the weight's
             * min m multiplies s, so add m * (s - sum of the block's dequantized values). */
            if (ti->act_type == TH_Q8_1) {
                const th_block_q8_1 *a = (const th_block_q8_1 *)abuf;
                for (int64_t b = 0; b < n / 32; b++) {
                    float m = th_f16_to_f32(type == TH_Q4_1 ? ((th_block_q4_1 *)wbuf)[b].m : ((th_block_q5_1 *)wbuf)[b].m);
                    double s = 0;
                    for (int j = 0; j < 32; j++) s += af[32 * b + j];
                    want += m * (th_f16_to_f32(a[b].s) - s);
                    mag += fabs(m * th_f16_to_f32(a[b].s));
                }
            }
            double got = th_ref_vec_dot(type, n, wbuf, abuf);
            /* float accumulation over the blocks and one rounding per scale product */
            double tol = (8.0 + (double)n / ti->block) * 0x1p-23 * mag + 1e-30;
            CHECK(fabs(got - want) <= tol, "%s n=%lld: dot %.9g, sum of dequantized products %.9g (tol %.3g)",
                  ti->name, (long long)n, got, want, tol);
        }
    }
}

static void test_dot_accuracy(void) {
    for (size_t t = 0; t < sizeof weight_types / sizeof weight_types[0]; t++) {
        uint32_t type = weight_types[t];
        const th_type_info *ti = th_type_info_get(type);
        uint32_t bs = ti->act_type == TH_Q8_K ? 256 : 32;
        for (int k = 0; k < 4; k++) {
            int64_t n = row_len(type, k);
            /* weights from the type's own quantizer where one exists (keeps |m| <= max|w|) */
            if (th_ref_can_quantize(type)) {
                for (int64_t i = 0; i < n; i++) x[i] = frand();
                th_ref_quantize(type, x, wbuf, n);
            } else {
                random_weights(type, wbuf, n / ti->block);
            }
            th_ref_dequantize(type, wbuf, wf, n);
            for (int64_t i = 0; i < n; i++) x[i] = frand() * (1 + (i / 32) % 3);
            th_ref_quantize(ti->act_type, x, abuf, n);
            double want = 0, bound = 0, mag = 0;
            for (int64_t b0 = 0; b0 < n; b0 += bs) {
                double A = 0, wmax = 0;
                int64_t end = TH_MIN(n, b0 + (int64_t)bs);
                for (int64_t i = b0; i < end; i++) { A = fmax(A, fabs(x[i])); wmax = fmax(wmax, fabs(wf[i])); }
                for (int64_t i = b0; i < end; i++) {
                    want += (double)wf[i] * x[i];
                    mag += fabs((double)wf[i] * x[i]);
                    bound += fabs(wf[i]) * act_error(ti->act_type, x[i], A);
                }
                /* Q8_1: the weight min (|m| <= wmax) times the fp16 rounding of s = d*sum(q)
                 * and of d: at most 32 * 127 * d * 2^-10 */
                if (ti->act_type == TH_Q8_1) bound += wmax * 32 * A * 0x1p-10;
            }
            double got = th_ref_vec_dot(type, n, wbuf, abuf);
            bound += 1e-5 * mag;
            CHECK(fabs(got - want) <= bound, "%s n=%lld: dot %.7g vs exact-activation %.7g, bound %.3g",
                  ti->name, (long long)n, got, want, bound);
        }
    }
}

/* The generic level of the kernel table is these reference kernels (the type table's),
 * and its gemm is the reference dot product per (row, column): same numbers bit for bit.
 * (Filled locally: no level's gemm depends on the process-wide table.) */
static void test_generic_kernel_table(void) {
    th_kernels k;
    CHECK(th_kernels_fill(&k, TH_LEVEL_GENERIC) && !strcmp(k.level, "generic"), "level %s", k.level);
    for (uint32_t t = 0; t < TH_TYPE_COUNT; t++) {
        const th_type_info *ti = th_type_info_get(t);
        CHECK(k.vec_dot[t] == (ti ? ti->vec_dot : NULL) && k.quantize[t] == (ti ? ti->quantize : NULL) &&
              k.dequant[t] == (ti ? ti->dequantize : NULL) && !k.gemm_packed[t] && !k.gemm[t] == !k.vec_dot[t],
              "type %u: the generic entries are not the type table's", t);
    }
    for (size_t t = 0; t < sizeof weight_types / sizeof weight_types[0]; t++) {
        uint32_t type = weight_types[t];
        const th_type_info *ti = th_type_info_get(type);
        int64_t n = row_len(type, 1), rows = 3;
        uint64_t wrow, arow;
        CHECK(th_row_bytes(type, n, &wrow) && th_row_bytes(ti->act_type, n, &arow), "%s row bytes", ti->name);
        random_weights(type, wbuf, rows * n / ti->block);
        for (int64_t i = 0; i < 2 * n; i++) x[i] = frand();
        CHECK(k.quantize[ti->act_type] && k.vec_dot[type] && k.gemm[type] && k.dequant[type], "%s entries", ti->name);
        if (!k.quantize[ti->act_type] || !k.vec_dot[type] || !k.gemm[type] || !k.dequant[type]) continue;
        k.quantize[ti->act_type](x, abuf, n);
        k.quantize[ti->act_type](x + n, abuf + arow, n);
        float y[2 * 3];
        k.gemm[type](n, 0, rows, wbuf, wrow, 2, abuf, arow, y, rows);
        for (int64_t r = 0; r < rows; r++)
            for (int b = 0; b < 2; b++) {
                float want = th_ref_vec_dot(type, n, wbuf + r * wrow, abuf + b * arow), got1;
                k.vec_dot[type](n, &got1, wbuf + r * wrow, abuf + b * arow);
                CHECK(y[b * rows + r] == want && got1 == want, "%s row %lld col %d: gemm %g dot %g ref %g",
                      ti->name, (long long)r, b, y[b * rows + r], got1, want);
            }
        k.dequant[type](wbuf, wf, n);
        th_ref_dequantize(type, wbuf, af, n);
        CHECK(!memcmp(wf, af, (size_t)n * sizeof(float)), "%s dequant", ti->name);
    }
}

/* ------------------------------------------------------------ fp16 / bf16 conversion */

static void test_f16_conversion(void) {
    struct { float f; uint16_t h; } enc[] = {
        {1.0f, 0x3C00}, {-2.0f, 0xC000}, {0.0f, 0x0000}, {-0.0f, 0x8000},
        {65504.0f, 0x7BFF},                       /* largest finite */
        {65519.99f, 0x7BFF},                      /* below the tie with 65536 */
        {65520.0f, 0x7C00},                       /* tie 65504 | 65536: even -> 65536 = inf */
        {1e10f, 0x7C00}, {-1e10f, 0xFC00},
        {INFINITY, 0x7C00}, {-INFINITY, 0xFC00},
        {0x1p-14f, 0x0400},                       /* smallest normal */
        {0x1p-24f, 0x0001},                       /* smallest subnormal */
        {0x3FFp-24f, 0x03FF},                     /* largest subnormal */
        {0x1p-25f, 0x0000},                       /* tie 0 | 2^-24: even -> 0 */
        {0x1.000002p-25f, 0x0001},                /* just above the tie */
        {0x3p-25f, 0x0002},                       /* tie 1 | 2 (x 2^-24): even -> 2 */
        {0x5p-25f, 0x0002},                       /* tie 2 | 3: even -> 2 */
        {0x1p-26f, 0x0000}, {-0x1p-24f, 0x8001},
        {0x1.002p0f, 0x3C00},                     /* 1 + 2^-11: tie, even -> 1 */
        {0x1.006p0f, 0x3C02},                     /* 1 + 3*2^-11: tie, even -> 1 + 2^-9 */
        {0x1.00201p0f, 0x3C01},                   /* just above the tie */
        {0x1.ffep-15f, 0x0400},                   /* subnormal range rounding up to the smallest normal */
    };
    for (size_t i = 0; i < sizeof enc / sizeof enc[0]; i++) {
        uint16_t h = th_f32_to_f16(enc[i].f);
        CHECK(h == enc[i].h, "f16(%a) = 0x%04x, want 0x%04x", enc[i].f, h, enc[i].h);
    }
    uint16_t qnan = th_f32_to_f16(NAN);
    CHECK((qnan & 0x7C00) == 0x7C00 && (qnan & 0x03FF) != 0, "f16(NaN) = 0x%04x", qnan);
    /* a NaN with only low mantissa bits set must stay a NaN, not become inf */
    uint16_t lownan = th_f32_to_f16(th_bits_f32(0x7F800001u));
    CHECK((lownan & 0x7C00) == 0x7C00 && (lownan & 0x03FF) != 0, "f16(0x7F800001) = 0x%04x", lownan);

    struct { uint16_t h; float f; } dec[] = {
        {0x3C00, 1.0f}, {0xC000, -2.0f}, {0x7BFF, 65504.0f}, {0x0001, 0x1p-24f}, {0x03FF, 0x3FFp-24f},
        {0x0400, 0x1p-14f}, {0x8001, -0x1p-24f}, {0x3555, 0x1.554p-2f}, {0x7C00, INFINITY}, {0xFC00, -INFINITY},
    };
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++)
        CHECK(th_f16_to_f32(dec[i].h) == dec[i].f, "f32(0x%04x) = %a, want %a", dec[i].h, th_f16_to_f32(dec[i].h), dec[i].f);
    CHECK(isnan(th_f16_to_f32(0x7E00)) && isnan(th_f16_to_f32(0xFC01)), "f16 NaN decodes to NaN");
    CHECK(signbit(th_f16_to_f32(0x8000)) && th_f16_to_f32(0x8000) == 0, "-0");
    /* every finite f16 survives a round trip */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00) continue;
        if (th_f32_to_f16(th_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d f16 values do not round-trip", bad);
}

static void test_bf16_conversion(void) {
    struct { uint32_t f; uint16_t h; } enc[] = {
        {0x3F800000u, 0x3F80},   /* 1 */
        {0x3F808000u, 0x3F80},   /* 1 + 2^-8: tie, even -> 1 */
        {0x3F818000u, 0x3F82},   /* 1 + 3*2^-8: tie, even -> up */
        {0x3F808001u, 0x3F81},   /* just above the tie */
        {0x3F807FFFu, 0x3F80},   /* just below */
        {0xC0400000u, 0xC040},   /* -3 */
        {0x7F7FFFFFu, 0x7F80},   /* FLT_MAX rounds to inf */
        {0x7F800000u, 0x7F80}, {0xFF800000u, 0xFF80},
        {0x00010000u, 0x0001},   /* subnormal kept */
        {0x00008000u, 0x0000},   /* tie 0 | 1: even -> 0 */
        {0x80000000u, 0x8000},
    };
    for (size_t i = 0; i < sizeof enc / sizeof enc[0]; i++) {
        uint16_t h = th_f32_to_bf16(th_bits_f32(enc[i].f));
        CHECK(h == enc[i].h, "bf16(0x%08x) = 0x%04x, want 0x%04x", enc[i].f, h, enc[i].h);
    }
    uint16_t n1 = th_f32_to_bf16(th_bits_f32(0x7F800001u)), n2 = th_f32_to_bf16(th_bits_f32(0xFFFFFFFFu));
    CHECK((n1 & 0x7F80) == 0x7F80 && (n1 & 0x7F) != 0, "bf16(sNaN 0x7F800001) = 0x%04x", n1);
    CHECK((n2 & 0x7F80) == 0x7F80 && (n2 & 0x7F) != 0, "bf16(NaN 0xFFFFFFFF) = 0x%04x", n2);
    CHECK(th_f32_bits(th_bf16_to_f32(0x3F81)) == 0x3F810000u, "bf16 decode");
    CHECK(isnan(th_bf16_to_f32(0x7FC0)), "bf16 NaN decode");
}

int main(void) {
    RUN(test_dot_hand);
    RUN(test_dot_structure);
    RUN(test_dot_accuracy);
    RUN(test_generic_kernel_table);
    RUN(test_f16_conversion);
    RUN(test_bf16_conversion);
    return CHECK_DONE();
}
