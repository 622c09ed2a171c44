/* test_quant.c — hand-built blocks for every weight type, decoded by the
 * reference kernels and compared with values worked out by hand from the format
 * spec (the arithmetic is in the comments); the Q8 activation quantizers and the
 * weight quantizers on inputs with known encodings; the type table against the
 * block structs; unsupported types not crashing. Dot products and fp16/bf16
 * conversion are in test_quant_dot.c. */
#include "check.h"
#include "quant/quant.h"

/* fp16 bit patterns used below */
#define H_0_25 0x3400
#define H_0_5 0x3800
#define H_1 0x3C00
#define H_2 0x4000
#define H_M2 0xC000

static float out[4 * TH_QK_K];

/* Every element equals exp[i] exactly (all hand values are exact in f32). */
static void check_exact(const float *got, const float *exp, int n, const char *what) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (got[i] != exp[i] && bad++ < 5)
            CHECK(got[i] == exp[i], "%s: element %d is %.9g, expected %.9g", what, i, got[i], exp[i]);
}

static void fill(float *v, int from, int to_incl, float val) {
    for (int i = from; i <= to_incl; i++) v[i] = val;
}

/* ------------------------------------------------------------ legacy quants */

static void test_q4_0(void) {
    /* d = 0.5; qs[j] = j | (15-j)<<4. Element j is the low nibble of qs[j]
     * (x = (j-8)*0.5), element 16+j the high nibble (x = ((15-j)-8)*0.5 = (7-j)*0.5). */
    th_block_q4_0 b = {.d = H_0_5};
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    const float exp[32] = {-4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5,
                           3.5, 3, 2.5, 2, 1.5, 1, 0.5, 0, -0.5, -1, -1.5, -2, -2.5, -3, -3.5, -4};
    th_ref_dequantize(TH_Q4_0, &b, out, 32);
    check_exact(out, exp, 32, "Q4_0");
}

static void test_q4_1(void) {
    /* d = 1, m = -2: x = q*1 - 2. qs[0] = 0xF0: e0 = 0-2 = -2, e16 = 15-2 = 13.
     * qs[1] = 0x21: e1 = 1-2 = -1, e17 = 2-2 = 0. qs[15] = 0x7E: e15 = 14-2 = 12,
     * e31 = 7-2 = 5. Every other qs = 0x88: 8-2 = 6. */
    th_block_q4_1 b = {.d = H_1, .m = H_M2};
    memset(b.qs, 0x88, sizeof b.qs);
    b.qs[0] = 0xF0; b.qs[1] = 0x21; b.qs[15] = 0x7E;
    float exp[32];
    fill(exp, 0, 31, 6);
    exp[0] = -2; exp[16] = 13; exp[1] = -1; exp[17] = 0; exp[15] = 12; exp[31] = 5;
    th_ref_dequantize(TH_Q4_1, &b, out, 32);
    check_exact(out, exp, 32, "Q4_1");
}

static void test_q5_0(void) {
    /* d = 2: x = (q5 - 16)*2, q5 = nibble | (bit e of the LE 32-bit qh) << 4.
     * qh = {0x01, 0x01, 0x03, 0x80}: bits 0, 8, 16, 17, 31 set.
     * qs[1] = 0xF3: e1 = 3 (bit 1 clear) -> (3-16)*2 = -26; e17 = 15|16 = 31 -> 30.
     * e0, e8, e16, e31: 0|16 = 16 -> 0. Everything else: 0 -> -32. */
    th_block_q5_0 b = {.d = H_2, .qh = {0x01, 0x01, 0x03, 0x80}};
    memset(b.qs, 0, sizeof b.qs);
    b.qs[1] = 0xF3;
    float exp[32];
    fill(exp, 0, 31, -32);
    exp[0] = exp[8] = exp[16] = exp[31] = 0;
    exp[1] = -26; exp[17] = 30;
    th_ref_dequantize(TH_Q5_0, &b, out, 32);
    check_exact(out, exp, 32, "Q5_0");
}

static void test_q5_1(void) {
    /* d = 0.5, m = 1: x = q5*0.5 + 1. qh bits 0 and 31. qs[0] = 0xA5:
     * e0 = 5|16 = 21 -> 11.5; e16 = 10 -> 6. e31 = 0|16 = 16 -> 9. Others q5 = 0 -> 1. */
    th_block_q5_1 b = {.d = H_0_5, .m = H_1, .qh = {0x01, 0, 0, 0x80}};
    memset(b.qs, 0, sizeof b.qs);
    b.qs[0] = 0xA5;
    float exp[32];
    fill(exp, 0, 31, 1);
    exp[0] = 11.5; exp[16] = 6; exp[31] = 9;
    th_ref_dequantize(TH_Q5_1, &b, out, 32);
    check_exact(out, exp, 32, "Q5_1");
}

static void test_q8_0(void) {
    /* d = 0.25, qs[j] = 8j - 128 (-128 .. 120): x = (8j-128)/4 = 2j - 32. Two blocks,
     * the second with d = -2 and qs[j] = j - 16: x = -2j + 32. */
    th_block_q8_0 b[2] = {{.d = H_0_25}, {.d = 0xC000}};
    float exp[64];
    for (int j = 0; j < 32; j++) {
        b[0].qs[j] = (int8_t)(8 * j - 128);
        exp[j] = 2.0f * j - 32;
        b[1].qs[j] = (int8_t)(j - 16);
        exp[32 + j] = -2.0f * j + 32;
    }
    th_ref_dequantize(TH_Q8_0, b, out, 64);
    check_exact(out, exp, 64, "Q8_0");
}

/* ------------------------------------------------------------ K-quants */

static void test_q2_k(void) {
    /* d = 1, dmin = 0.5. x = d*(sc & 15)*q2 - dmin*(sc >> 4), sub-block s = e/16.
     * Element e = 128h + 32p + 16t + l: byte qs[32h + 16t + l], bits 2p..2p+1.
     * scales[0] = 0x21: scale 1, min 2 -> x = q - 1 (e 0..15)
     * scales[1] = 0x03: scale 3, min 0 -> x = 3q (e 16..31)
     * scales[2] = 0x02: scale 2, min 0 -> x = 2q (e 32..47)
     * scales[9] = 0xF7: scale 7, min 15 -> x = 7q - 7.5 (e 144..159)
     * scales[15] = 0x1F: scale 15, min 1 -> x = 15q - 0.5 (e 240..255); other scales 0 -> 0.
     * qs[0] = 0xEF: bits 0-1 = 3 (e0 -> 3-1 = 2), bits 2-3 = 3 (e32 -> 2*3 = 6), bits 4-7 for
     *   e64, e96 whose scales are 0.
     * qs[16] = 0x02: e16 -> 3*2 = 6.
     * qs[63] = 0x81: bits 0-1 = 1 (e = 128+16+15 = 159 -> 7-7.5 = -0.5),
     *   bits 6-7 = 2 (e = 128+96+16+15 = 255 -> 30-0.5 = 29.5). */
    th_block_q2_K b;
    memset(&b, 0, sizeof b);
    b.d = H_1; b.dmin = H_0_5;
    b.scales[0] = 0x21; b.scales[1] = 0x03; b.scales[2] = 0x02; b.scales[9] = 0xF7; b.scales[15] = 0x1F;
    b.qs[0] = 0xEF; b.qs[16] = 0x02; b.qs[63] = 0x81;
    float exp[256] = {0};
    fill(exp, 0, 15, -1); exp[0] = 2;
    exp[16] = 6;
    exp[32] = 6;
    fill(exp, 144, 158, -7.5f); exp[159] = -0.5f;
    fill(exp, 240, 254, -0.5f); exp[255] = 29.5f;
    th_ref_dequantize(TH_Q2_K, &b, out, 256);
    check_exact(out, exp, 256, "Q2_K");
}

static void test_q3_k(void) {
    /* d = 1. 16 six-bit scales s, value s - 32: low 4 bits from scales[i] (i < 8) or
     * scales[i-8] >> 4 (i >= 8); high 2 bits from scales[8 + i%4] >> 2*(i/4).
     * Base: scales[0..7] = 0, scales[8..11] = 0xAA (every high pair 2) -> s = 32 -> 0.
     *   scale 0 = 33 (+1): scales[0] low nibble 1.
     *   scale 8 = 31 (-1): low 15 -> scales[0] high nibble F (scales[0] = 0xF1);
     *              high 1 -> scales[8] bits 4-5 = 01: 0xAA -> 0x9A.
     *   scale 5 = 63 (+31): scales[5] = 0x0F; high 3 -> scales[9] bits 2-3 = 11: 0xAE.
     *   scale 15 = 0 (-32): scales[7] high nibble 0; scales[11] bits 6-7 = 00: 0x2A.
     * x = d * (s-32) * (q2 - (hmask bit set ? 0 : 4)); element e = 128h + 32p + 16t + l:
     * q2 in qs[32h + 16t + l] bits 2p, hmask[16t + l] bit 4h + p. hmask base 0xFF.
     *   e0   (scale +1):  qs[0] = 3                     -> 1*3 = 3
     *   e1   (scale +1):  hmask[1] bit 0 clear, q2 0    -> 1*(0-4) = -4
     *   e128 (scale -1):  qs[32] = 2, hmask[0] bit 4 clear -> -1*(2-4) = 2
     *   e95  (scale +31, h0 p2 t1 l15): qs[31] bits 4-5 = 1 -> 31
     *   e84  (scale +31, h0 p2 t1 l4): hmask[20] bit 2 clear -> 31*(0-4) = -124
     *   e255 (scale -32, h1 p3 t1 l15): qs[63] bits 6-7 = 3 -> -96
     *   e240 (scale -32, h1 p3 t1 l0): hmask[16] bit 7 clear -> -32*(0-4) = 128
     * All other elements: q2 = 0 with bit set -> 0, or scale 0. */
    th_block_q3_K b;
    memset(&b, 0, sizeof b);
    b.d = H_1;
    const uint8_t sc[12] = {0xF1, 0, 0, 0, 0, 0x0F, 0, 0, 0x9A, 0xAE, 0xAA, 0x2A};
    memcpy(b.scales, sc, 12);
    memset(b.hmask, 0xFF, sizeof b.hmask);
    b.hmask[1] = 0xFE; b.hmask[0] = 0xEF; b.hmask[20] = 0xFB; b.hmask[16] = 0x7F;
    b.qs[0] = 0x03; b.qs[32] = 0x02; b.qs[31] = 0x10; b.qs[63] = 0xC0;
    float exp[256] = {0};
    exp[0] = 3; exp[1] = -4; exp[128] = 2; exp[95] = 31; exp[84] = -124; exp[255] = -96; exp[240] = 128;
    th_ref_dequantize(TH_Q3_K, &b, out, 256);
    check_exact(out, exp, 256, "Q3_K");
}

/* Scales of the Q4_K/Q5_K tests: 8 six-bit (scale, min) pairs in 12 bytes.
 * j < 4: sc = q[j] & 63, m = q[j+4] & 63.
 * j >= 4: sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4, m = (q[j+4] >> 4) | (q[j] >> 6) << 4.
 *   (sc0, m0) = (1, 2):   q[0] = 1, q[4] = 2
 *   (sc3, m3) = (63, 0):  q[3] = 63
 *   (sc4, m4) = (37 = 0x25, 58 = 0x3A): q[8] = 0xA5; q[0] |= 2 << 6 -> 0x81; q[4] |= 3 << 6 -> 0xC2
 *   (sc7, m7) = (16 = 0x10, 1): q[11] = 0x10; q[3] |= 1 << 6 -> 0x7F
 *   all other pairs (0, 0). */
static const uint8_t k4_scales[12] = {0x81, 0, 0, 0x7F, 0xC2, 0, 0, 0, 0xA5, 0, 0, 0x10};

static void test_q4_k(void) {
    /* d = 1, dmin = 0.5: x = sc*q4 - 0.5*m. Sub-block j = e/32: low nibbles of
     * qs[32*(j/2) ..] for even j, high nibbles for odd j.
     *   j0 (1, 2):   x = q - 1;   qs[0] low = 15 -> e0 = 14, e1..31 = -1
     *   j1 (0, 0):   qs[0] high = 7 -> e32 = 0
     *   j3 (63, 0):  qs[33] high = 2 -> e97 = 126
     *   j4 (37, 58): x = 37q - 29; qs[64] low = 1 -> e128 = 8, e129..159 = -29
     *   j7 (16, 1):  x = 16q - 0.5; qs[127] high = 15 -> e255 = 239.5, e224..254 = -0.5 */
    th_block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = H_1; b.dmin = H_0_5;
    memcpy(b.scales, k4_scales, 12);
    b.qs[0] = 0x7F; b.qs[33] = 0x20; b.qs[64] = 0x01; b.qs[127] = 0xF0;
    float exp[256] = {0};
    fill(exp, 0, 31, -1); exp[0] = 14;
    exp[97] = 126;
    fill(exp, 128, 159, -29); exp[128] = 8;
    fill(exp, 224, 255, -0.5f); exp[255] = 239.5f;
    th_ref_dequantize(TH_Q4_K, &b, out, 256);
    check_exact(out, exp, 256, "Q4_K");
}

static void test_q5_k(void) {
    /* The Q4_K block plus high bits: q5 = q4 | (qh[e % 32] >> (e / 32) & 1) << 4.
     *   qh[0] bit 0 -> e0:   q5 = 15+16 = 31 -> 31 - 1 = 30
     *   qh[1] bit 3 -> e97:  q5 = 2+16 = 18 -> 63*18 = 1134
     *   qh[0] bit 4 -> e128: q5 = 1+16 = 17 -> 37*17 - 29 = 600
     *   qh[5] bit 4 -> e133: q5 = 0+16 = 16 -> 37*16 - 29 = 563
     *   qh[31] bit 7 -> e255: q5 = 15+16 = 31 -> 16*31 - 0.5 = 495.5 */
    th_block_q5_K b;
    memset(&b, 0, sizeof b);
    b.d = H_1; b.dmin = H_0_5;
    memcpy(b.scales, k4_scales, 12);
    b.qs[0] = 0x7F; b.qs[33] = 0x20; b.qs[64] = 0x01; b.qs[127] = 0xF0;
    b.qh[0] = 0x11; b.qh[1] = 0x08; b.qh[5] = 0x10; b.qh[31] = 0x80;
    float exp[256] = {0};
    fill(exp, 0, 31, -1); exp[0] = 30;
    exp[97] = 1134;
    fill(exp, 128, 159, -29); exp[128] = 600; exp[133] = 563;
    fill(exp, 224, 255, -0.5f); exp[255] = 495.5f;
    th_ref_dequantize(TH_Q5_K, &b, out, 256);
    check_exact(out, exp, 256, "Q5_K");
}

static void test_q6_k(void) {
    /* d = 0.5, int8 scales: x = 0.5 * scales[e/16] * (q6 - 32). Element
     * e = 128h + 32p + l: low 4 bits from ql[64h + 32(p&1) + l] (low nibble for p < 2,
     * high nibble for p >= 2), high 2 bits from qh[32h + l] >> 2p.
     *   scales[0] = 1:    ql[0] low 5, qh[0] bits 0-1 = 2 -> q6 = 37 -> e0 = 0.5*5 = 2.5;
     *                     e1..15: q6 = 0 -> 0.5*1*-32 = -16
     *   scales[1] = -1:   ql[17] low 15, qh[17] bits 0-1 = 3 -> q6 = 63 -> e17 = -15.5; others 16
     *   scales[4] = -128: ql[0] high 0, qh[0] bits 4-5 = 2 -> q6 = 32 -> e64 = 0; e65..79 = 2048
     *   scales[13] = 127: e223 (h1 p2 l31): ql[95] high 1, qh[63] bits 4-5 = 1 -> q6 = 17
     *                     -> 0.5*127*-15 = -952.5; e208..222 = -2032
     *   scales[15] = 2:   e240 (h1 p3 l16): ql[112] high 10, qh[48] bits 6-7 = 3 -> q6 = 58
     *                     -> 26; e241..255 = -32 */
    th_block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = H_0_5;
    b.scales[0] = 1; b.scales[1] = -1; b.scales[4] = -128; b.scales[13] = 127; b.scales[15] = 2;
    b.ql[0] = 0x05; b.ql[17] = 0x0F; b.ql[95] = 0x10; b.ql[112] = 0xA0;
    b.qh[0] = 0x22; b.qh[17] = 0x03; b.qh[63] = 0x10; b.qh[48] = 0xC0;
    float exp[256] = {0};
    fill(exp, 0, 15, -16); exp[0] = 2.5f;
    fill(exp, 16, 31, 16); exp[17] = -15.5f;
    fill(exp, 64, 79, 2048); exp[64] = 0;
    fill(exp, 208, 223, -2032); exp[223] = -952.5f;
    fill(exp, 240, 255, -32); exp[240] = 26;
    th_ref_dequantize(TH_Q6_K, &b, out, 256);
    check_exact(out, exp, 256, "Q6_K");
}

/* ------------------------------------------------------------ IQ4_NL, IQ4_XS, MXFP4 */

static void test_iq4_nl(void) {
    /* Code book {-127,-104,-83,-65,-49,-35,-22,-10,1,13,25,38,53,69,89,113}, d = 0.5,
     * qs[j] = j | (15-j) << 4: e_j = 0.5*kv[j], e_{16+j} = 0.5*kv[15-j]. */
    th_block_iq4_nl b = {.d = H_0_5};
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    const float half_kv[16] = {-63.5, -52, -41.5, -32.5, -24.5, -17.5, -11, -5,
                               0.5, 6.5, 12.5, 19, 26.5, 34.5, 44.5, 56.5};
    float exp[32];
    for (int j = 0; j < 16; j++) { exp[j] = half_kv[j]; exp[16 + j] = half_kv[15 - j]; }
    th_ref_dequantize(TH_IQ4_NL, &b, out, 32);
    check_exact(out, exp, 32, "IQ4_NL");
}

static void test_iq4_xs(void) {
    /* d = 1. Sub-block ib (32 elements) scale ls = (scales_l[ib/2] >> 4(ib%2) & 15)
     * | (scales_h >> 2ib & 3) << 4, x = (ls - 32) * kv[code].
     *   ib0 ls 33 (+1): low 1, high 2; ib1 ls 31 (-1): low 15, high 1;
     *   ib2..6 ls 32 (0): low 0, high 2; ib7 ls 63 (+31): low 15, high 3.
     *   scales_l = {0xF1, 0, 0, 0xF0}; scales_h = 11 10 10 10 10 10 01 10 (ib7..ib0) = 0xEAA6.
     * qs[16ib + j]: low nibble -> element 32ib + j, high nibble -> 32ib + 16 + j.
     * Base qs 0x88: code 8 -> kv 1, so ib0 = 1, ib1 = -1, ib2..6 = 0, ib7 = 31.
     *   qs[0] = 0x0F:   e0 = kv[15] = 113, e16 = kv[0] = -127
     *   qs[16] = 0x70:  e32 = -1*kv[0] = 127, e48 = -1*kv[7] = 10
     *   qs[127] = 0x3C: e239 = 31*kv[12] = 31*53 = 1643, e255 = 31*kv[3] = 31*-65 = -2015 */
    th_block_iq4_xs b;
    memset(&b, 0, sizeof b);
    b.d = H_1; b.scales_h = 0xEAA6;
    b.scales_l[0] = 0xF1; b.scales_l[3] = 0xF0;
    memset(b.qs, 0x88, sizeof b.qs);
    b.qs[0] = 0x0F; b.qs[16] = 0x70; b.qs[127] = 0x3C;
    float exp[256] = {0};
    fill(exp, 0, 31, 1); exp[0] = 113; exp[16] = -127;
    fill(exp, 32, 63, -1); exp[32] = 127; exp[48] = 10;
    fill(exp, 224, 255, 31); exp[239] = 1643; exp[255] = -2015;
    th_ref_dequantize(TH_IQ4_XS, &b, out, 256);
    check_exact(out, exp, 256, "IQ4_XS");
}

static void test_mxfp4(void) {
    /* OCP MX: x = e2m1(code) * 2^(e - 127). e2m1 codes 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6;
     * bit 3 is the sign. Low nibbles are elements 0..15, high nibbles 16..31.
     *   block 0: e = 127 (scale 1), qs[j] = j | (15-j) << 4.
     *   block 1: e = 130 (scale 8), qs[0] = 0x71: e0 = 0.5*8 = 4, e16 = 6*8 = 48; rest 0.
     *   block 2: e = 0 (scale 2^-127), qs[0] = 0x97: e0 = 6 * 2^-127 = 0x1.8p-125,
     *            e16 = -0.5 * 2^-127 = -0x1p-128 (subnormal, exact).
     *   block 3: e = 254 (scale 2^127), qs[0] = 0x01: e0 = 0.5 * 2^127 = 0x1p126. */
    th_block_mxfp4 b[4];
    memset(b, 0, sizeof b);
    b[0].e = 127; b[1].e = 130; b[2].e = 0; b[3].e = 254;
    for (int j = 0; j < 16; j++) b[0].qs[j] = (uint8_t)(j | ((15 - j) << 4));
    b[1].qs[0] = 0x71; b[2].qs[0] = 0x97; b[3].qs[0] = 0x01;
    const float e2m1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};
    float exp[128] = {0};
    for (int j = 0; j < 16; j++) { exp[j] = e2m1[j]; exp[16 + j] = e2m1[15 - j]; }
    exp[32] = 4; exp[48] = 48;
    exp[64] = 0x1.8p-125f; exp[80] = -0x1p-128f;
    exp[96] = 0x1p126f;
    th_ref_dequantize(TH_MXFP4, b, out, 128);
    check_exact(out, exp, 128, "MXFP4");
}

/* ------------------------------------------------------------ float types */

static void test_float_types(void) {
    /* F16: 0x3C00 = 1, 0xC000 = -2, 0x7BFF = 65504, 0x0001 = 2^-24, 0x8000 = -0.
     * BF16: 0x3F80 = 1, 0xC040 = -3, 0x0001 = 2^-133 (f32 bits 0x00010000). */
    const uint16_t h[5] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000};
    const float hexp[5] = {1, -2, 65504, 0x1p-24f, -0.0f};
    th_ref_dequantize(TH_F16, h, out, 5);
    check_exact(out, hexp, 5, "F16");
    CHECK(signbit(out[4]), "F16 0x8000 must decode to -0");
    const uint16_t bf[3] = {0x3F80, 0xC040, 0x0001};
    const float bexp[3] = {1, -3, 0x1p-133f};
    th_ref_dequantize(TH_BF16, bf, out, 3);
    check_exact(out, bexp, 3, "BF16");
    const float f[3] = {1.5f, -0x1p-140f, 3e38f};
    th_ref_dequantize(TH_F32, f, out, 3);
    check_exact(out, f, 3, "F32");
    /* encoders: 1.5 -> F16 0x3E00, BF16 0x3FC0 */
    uint16_t enc[3];
    th_ref_quantize(TH_F16, f, enc, 1);
    CHECK(enc[0] == 0x3E00, "F16 encode of 1.5: 0x%04x", enc[0]);
    th_ref_quantize(TH_BF16, f, enc, 1);
    CHECK(enc[0] == 0x3FC0, "BF16 encode of 1.5: 0x%04x", enc[0]);
}

/* ------------------------------------------------------------ activation quantizers */

static void test_quantize_q8_0(void) {
    /* Block 0: amax 127 -> d = 1 (fp16 0x3C00), q = round-half-even(x * 127/127):
     *   127 -> 127, 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, -0.5 -> 0, 1.49 -> 1, -127 -> -127, rest 0.
     * Block 1: all zero -> d = 0, q = 0.
     * Block 2: amax 254 -> d = 2 (0x4000), id = 0.5: 5 -> 2.5 -> 2, 7 -> 3.5 -> 4, -254 -> -127. */
    float x[96] = {0};
    x[0] = 127; x[1] = 2.5f; x[2] = 3.5f; x[3] = -2.5f; x[4] = -0.5f; x[5] = 1.49f; x[6] = -127;
    x[64] = 5; x[65] = 7; x[66] = -254;
    th_block_q8_0 b[3];
    memset(b, 0x55, sizeof b);
    th_ref_quantize(TH_Q8_0, x, b, 96);
    CHECK(b[0].d == 0x3C00 && b[1].d == 0 && b[2].d == 0x4000, "d: %04x %04x %04x", b[0].d, b[1].d, b[2].d);
    const int8_t q0[7] = {127, 2, 4, -2, 0, 1, -127};
    for (int j = 0; j < 32; j++) {
        int want0 = j < 7 ? q0[j] : 0, want2 = j == 0 ? 2 : j == 1 ? 4 : j == 2 ? -127 : 0;
        CHECK(b[0].qs[j] == want0, "block 0 q[%d] = %d, want %d", j, b[0].qs[j], want0);
        CHECK(b[1].qs[j] == 0, "block 1 q[%d] = %d", j, b[1].qs[j]);
        CHECK(b[2].qs[j] == want2, "block 2 q[%d] = %d, want %d", j, b[2].qs[j], want2);
    }
}

static void test_quantize_q8_1(void) {
    /* Same first block as Q8_0: codes 127, 2, 4, -2, 0, 1, -127 sum to 5, d = 1 -> s = 5
     * (fp16 0x4500). Second block: amax 254, codes 2, 4, -127 sum -121, d = 2 -> s = -242
     * (fp16: -242 = -1.890625 * 2^7 -> 0xDB90). */
    float x[64] = {0};
    x[0] = 127; x[1] = 2.5f; x[2] = 3.5f; x[3] = -2.5f; x[4] = -0.5f; x[5] = 1.49f; x[6] = -127;
    x[32] = 5; x[33] = 7; x[34] = -254;
    th_block_q8_1 b[2];
    th_ref_quantize(TH_Q8_1, x, b, 64);
    CHECK(b[0].d == 0x3C00 && b[0].s == 0x4500, "block 0 d %04x s %04x", b[0].d, b[0].s);
    CHECK(b[1].d == 0x4000 && b[1].s == 0xDB90, "block 1 d %04x s %04x", b[1].d, b[1].s);
    CHECK(b[0].qs[1] == 2 && b[0].qs[2] == 4 && b[1].qs[2] == -127, "codes");
}

static void test_quantize_q8_k(void) {
    /* Block 0: the value of largest magnitude is -8 (first of -8, 8): iscale = -127/-8 = 15.875,
     * q = nearest (half-even) of 15.875x, capped at 127, d = 1/15.875.
     *   x = -8 -> -127, 8 -> 127, 4 -> 63.5 -> 64, -4 -> -64, 1 -> 15.875 -> 16, 0.2 -> 3.175 -> 3.
     *   bsums[0] = -127+127+64-64+16+3 = 19; bsums[15] gets x[255] = 0.6 -> 9.525 -> 10.
     * Block 1: max is +127: iscale = -1, d = -1: 127 -> -127, 2.5 -> -2.5 -> -2, -127 -> 127.
     * Block 2: all zero -> d = 0, codes and sums 0. */
    float x[768] = {0};
    x[0] = -8; x[1] = 8; x[2] = 4; x[3] = -4; x[4] = 1; x[5] = 0.2f; x[255] = 0.6f;
    x[256] = 127; x[257] = 2.5f; x[258] = -127;
    th_block_q8_K b[3];
    memset(b, 0x55, sizeof b);
    th_ref_quantize(TH_Q8_K, x, b, 768);
    const int8_t q0[6] = {-127, 127, 64, -64, 16, 3};
    for (int j = 0; j < 6; j++) CHECK(b[0].qs[j] == q0[j], "block 0 q[%d] = %d, want %d", j, b[0].qs[j], q0[j]);
    CHECK(b[0].qs[255] == 10, "q[255] = %d", b[0].qs[255]);
    CHECK(b[0].bsums[0] == 19 && b[0].bsums[15] == 10 && b[0].bsums[7] == 0, "bsums %d %d %d",
          b[0].bsums[0], b[0].bsums[15], b[0].bsums[7]);
    CHECK(b[0].d == 1.0f / 15.875f, "d = %.9g", b[0].d);
    CHECK(b[1].d == -1.0f && b[1].qs[0] == -127 && b[1].qs[1] == -2 && b[1].qs[2] == 127,
          "block 1: d %g q %d %d %d", b[1].d, b[1].qs[0], b[1].qs[1], b[1].qs[2]);
    CHECK(b[1].bsums[0] == -2, "block 1 bsums[0] = %d", b[1].bsums[0]);
    CHECK(b[2].d == 0 && b[2].qs[7] == 0 && b[2].bsums[3] == 0, "zero block");
}

/* ------------------------------------------------------------ weight quantizers */

static void test_quantize_weights(void) {
    /* Inputs whose encodings are exact, so the expected bytes follow from the spec:
     * Q4_0: x_j = j-8, x_{16+j} = 7-j: largest magnitude -8 -> d = -8/-8 = 1,
     *       q = x + 8 -> qs[j] = j | (15-j) << 4, d = 0x3C00. */
    float x[32];
    for (int j = 0; j < 16; j++) { x[j] = j - 8.0f; x[16 + j] = 7.0f - j; }
    th_block_q4_0 a;
    th_ref_quantize(TH_Q4_0, x, &a, 32);
    CHECK(a.d == 0x3C00, "Q4_0 d %04x", a.d);
    for (int j = 0; j < 16; j++) CHECK(a.qs[j] == (j | ((15 - j) << 4)), "Q4_0 qs[%d] = %02x", j, a.qs[j]);

    /* Q4_1: x_j = j-2, x_{16+j} = 13-j: min -2, max 13 -> d = 15/15 = 1, m = -2 (0xC000),
     * q = x + 2 -> qs[j] = j | (15-j) << 4. */
    for (int j = 0; j < 16; j++) { x[j] = j - 2.0f; x[16 + j] = 13.0f - j; }
    th_block_q4_1 b;
    th_ref_quantize(TH_Q4_1, x, &b, 32);
    CHECK(b.d == 0x3C00 && b.m == 0xC000, "Q4_1 d %04x m %04x", b.d, b.m);
    for (int j = 0; j < 16; j++) CHECK(b.qs[j] == (j | ((15 - j) << 4)), "Q4_1 qs[%d] = %02x", j, b.qs[j]);

    /* Q5_0: x_j = j - 16 (j = 0..31): largest magnitude -16 -> d = 1, q5 = j: low nibbles
     * j & 15, qh bit j = j >> 4, so qh = 0xFFFF0000 -> bytes {0, 0, 0xFF, 0xFF};
     * qs[j] = j | j << 4 (element 16+j has low 4 bits j). */
    for (int j = 0; j < 32; j++) x[j] = j - 16.0f;
    th_block_q5_0 c;
    th_ref_quantize(TH_Q5_0, x, &c, 32);
    CHECK(c.d == 0x3C00 && c.qh[0] == 0 && c.qh[1] == 0 && c.qh[2] == 0xFF && c.qh[3] == 0xFF,
          "Q5_0 d %04x qh %02x %02x %02x %02x", c.d, c.qh[0], c.qh[1], c.qh[2], c.qh[3]);
    for (int j = 0; j < 16; j++) CHECK(c.qs[j] == (j | (j << 4)), "Q5_0 qs[%d] = %02x", j, c.qs[j]);

    /* Q5_1: x_j = 31 - j: min 0, max 31 -> d = 1, m = 0, q5 = 31 - j: qh bit j set for
     * j < 16 -> bytes {0xFF, 0xFF, 0, 0}; qs[j] = (15-j) | (15-j) << 4. */
    for (int j = 0; j < 32; j++) x[j] = 31.0f - j;
    th_block_q5_1 e;
    th_ref_quantize(TH_Q5_1, x, &e, 32);
    CHECK(e.d == 0x3C00 && e.m == 0 && e.qh[0] == 0xFF && e.qh[1] == 0xFF && e.qh[2] == 0 && e.qh[3] == 0,
          "Q5_1 d %04x m %04x qh %02x %02x %02x %02x", e.d, e.m, e.qh[0], e.qh[1], e.qh[2], e.qh[3]);
    for (int j = 0; j < 16; j++) CHECK(e.qs[j] == ((15 - j) | ((15 - j) << 4)), "Q5_1 qs[%d] = %02x", j, e.qs[j]);

    /* IQ4_NL: x = 0.5 * kv[code] for the IQ4_NL test block's codes: the largest magnitude
     * is 0.5*-127 -> the codes come back exactly and the fitted scale is 0.5 (0x3800). */
    static const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    for (int j = 0; j < 16; j++) { x[j] = 0.5f * kv[j]; x[16 + j] = 0.5f * kv[15 - j]; }
    th_block_iq4_nl g;
    th_ref_quantize(TH_IQ4_NL, x, &g, 32);
    CHECK(g.d == 0x3800, "IQ4_NL d %04x", g.d);
    for (int j = 0; j < 16; j++) CHECK(g.qs[j] == (j | ((15 - j) << 4)), "IQ4_NL qs[%d] = %02x", j, g.qs[j]);

    /* MXFP4: x = the e2m1 values of the MXFP4 test block (codes j | (15-j) << 4 at scale 1):
     * amax 6 -> e = floor(log2 6) - 2 + 127 = 127, so the codes come back exactly, except
     * that -0 (code 8, at elements 8 and 16+7) is encoded as +0 (code 0, the first of two
     * equally near codes): qs[8] = 0x78 -> 0x70, qs[7] = 0x87 -> 0x07.
     * A second block of x * 2^-20: e = 107, same codes. */
    static const float e2m1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};
    float xm[64];
    for (int j = 0; j < 16; j++) { xm[j] = e2m1[j]; xm[16 + j] = e2m1[15 - j]; }
    for (int j = 0; j < 32; j++) xm[32 + j] = xm[j] * 0x1p-20f;
    th_block_mxfp4 mb[2];
    th_ref_quantize(TH_MXFP4, xm, mb, 64);
    CHECK(mb[0].e == 127 && mb[1].e == 107, "MXFP4 e %u %u", mb[0].e, mb[1].e);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 16; j++) {
            int want = j == 8 ? 0x70 : j == 7 ? 0x07 : (j | ((15 - j) << 4));
            CHECK(mb[k].qs[j] == want, "MXFP4 block %d qs[%d] = %02x, want %02x", k, j, mb[k].qs[j], want);
        }
}

/* Round trip of random data through every weight quantizer, error measured in
 * quantization steps of the block (step relative to the block's amax).
 * Bounds from the formats: half a step for the asymmetric Q4_1/Q5_1; a whole step
 * for Q4_0/Q5_0, whose grid -8..7 (-16..15) is anchored at the signed max, so a value
 * of the opposite sign and equal magnitude is clipped by one step; Q8_0 half a step
 * plus 127 codes times the fp16 rounding of d (2^-11 relative) = 0.56; IQ4_NL half the
 * widest code gap (24/127 of amax) plus the least-squares refit of d (allow 0.65);
 * MXFP4 with scale s = 2^floor(log2 amax) / 4 <= amax/4 (the "step"): half the widest
 * gap (2s / 2) inside [-6s, 6s], clipping of up to 8s - 6s = 2s above it. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0) - 1.0);
}

static void test_weight_round_trip(void) {
    const uint32_t types[] = {TH_Q4_0, TH_Q4_1, TH_Q5_0, TH_Q5_1, TH_Q8_0, TH_IQ4_NL, TH_MXFP4};
    const double step[] = {1.0 / 8, 2.0 / 15, 1.0 / 16, 2.0 / 31, 1.0 / 127, 24.0 / 127, 1.0 / 4};
    const double bound[] = {1.0, 0.5, 1.0, 0.5, 0.5 + 127.0 / 2048, 0.65, 2.0};
    enum { N = 32 * 40 };
    static float x[N], y[N];
    static uint8_t buf[N * 2];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (int i = 0; i < N; i++) x[i] = frand() * (1 + (i / 32) % 5);
        th_ref_quantize(types[t], x, buf, N);
        th_ref_dequantize(types[t], buf, y, N);
        double worst = 0;
        for (int blk = 0; blk < N / 32; blk++) {
            double amax = 0;
            for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(x[32 * blk + j]));
            for (int j = 0; j < 32; j++) {
                double err = fabs(y[32 * blk + j] - x[32 * blk + j]) / amax;
                worst = fmax(worst, err / step[t]);
            }
        }
        /* + 0.02 for the fp16 rounding of d and m */
        CHECK(worst <= bound[t] + 0.02, "%s: worst error %.3f steps", th_type_name(types[t]), worst);
        CHECK(worst >= 0.3, "%s: worst error %.3f steps is implausibly small", th_type_name(types[t]), worst);
    }
}

/* ------------------------------------------------------------ table and dispatch */

static void test_type_table(void) {
    struct { uint32_t type; size_t size; uint32_t block; } want[] = {
        {TH_Q4_0, sizeof(th_block_q4_0), 32}, {TH_Q4_1, sizeof(th_block_q4_1), 32},
        {TH_Q5_0, sizeof(th_block_q5_0), 32}, {TH_Q5_1, sizeof(th_block_q5_1), 32},
        {TH_Q8_0, sizeof(th_block_q8_0), 32}, {TH_Q8_1, sizeof(th_block_q8_1), 32},
        {TH_Q2_K, sizeof(th_block_q2_K), 256}, {TH_Q3_K, sizeof(th_block_q3_K), 256},
        {TH_Q4_K, sizeof(th_block_q4_K), 256}, {TH_Q5_K, sizeof(th_block_q5_K), 256},
        {TH_Q6_K, sizeof(th_block_q6_K), 256}, {TH_Q8_K, sizeof(th_block_q8_K), 256},
        {TH_IQ4_NL, sizeof(th_block_iq4_nl), 32}, {TH_IQ4_XS, sizeof(th_block_iq4_xs), 256},
        {TH_MXFP4, sizeof(th_block_mxfp4), 32},
    };
    /* GGML's sizes: Q4_0 18, Q4_1 20, Q5_0 22, Q5_1 24, Q8_0 34, Q8_1 36, Q2_K 84, Q3_K 110,
     * Q4_K 144, Q5_K 176, Q6_K 210, Q8_K 292, IQ4_NL 18, IQ4_XS 136, MXFP4 17. */
    const size_t ggml_bytes[] = {18, 20, 22, 24, 34, 36, 84, 110, 144, 176, 210, 292, 18, 136, 17};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const th_type_info *ti = th_type_info_get(want[i].type);
        CHECK(ti && ti->bytes == want[i].size && ti->bytes == ggml_bytes[i] && ti->block == want[i].block,
              "%s: table %u bytes / %u, struct %zu, ggml %zu", th_type_name(want[i].type),
              ti ? ti->bytes : 0, ti ? ti->block : 0, want[i].size, ggml_bytes[i]);
    }
    /* every supported type has a decoder, a dot product, and a quantizer for its act type */
    for (uint32_t t = 0; t < TH_TYPE_COUNT; t++) {
        const th_type_info *ti = th_type_info_get(t);
        if (!ti || !ti->supported) continue;
        CHECK(th_ref_can_quantize(ti->act_type), "%s: act type %s has no quantizer", ti->name, th_type_name(ti->act_type));
        float v[256];
        _Alignas(16) uint8_t zero[512] = {0};
        th_ref_dequantize(t, zero, v, ti->block);
        CHECK(v[0] == 0, "%s: zero block decodes to %g", ti->name, v[0]);
        float dot = th_ref_vec_dot(t, ti->block, zero, zero);
        CHECK(dot == 0, "%s: zero dot %g", ti->name, dot);
    }
    CHECK(th_ref_can_quantize(TH_Q4_K) && th_ref_can_quantize(TH_IQ4_XS), "K-quant / IQ4_XS encoders (ref_kquant_encode.c)");
}

/* The table's kernels agree with its facts: supported exactly when the type has a
 * decoder, a dot product and an encoder for its activation type; every activation type
 * (F32, F16, BF16, Q8_0, Q8_1, Q8_K) encodes and decodes; the weight encoder is the
 * activation one except Q8_0's (halves away from zero) and absent for the activation-
 * only Q8_1 / Q8_K; the packed layouts are Q4_0, Q8_0, Q6_K at their own size and Q4_K
 * at 148 bytes (scales and mins as bytes: 16 + 16 + 64 + 64 bytes of 8 rows, plus 128
 * of codes per row = 8 x 148); types without kernels have none. */
static void test_type_table_kernels(void) {
    const uint32_t acts[] = {TH_F32, TH_F16, TH_BF16, TH_Q8_0, TH_Q8_1, TH_Q8_K};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        const th_type_info *ti = th_type_info_get(acts[i]);
        CHECK(ti->quantize && ti->dequantize && ti->act_type == acts[i], "%s: activation type", ti->name);
    }
    int supported = 0;
    for (uint32_t t = 0; t < TH_TYPE_COUNT; t++) {
        const th_type_info *ti = th_type_info_get(t);
        if (!ti) continue;
        const th_type_info *ai = th_type_info_get(ti->act_type);
        const bool runnable = ti->dequantize && ti->vec_dot && ai && ai->quantize;
        CHECK(ti->supported == runnable, "%s: supported %d, kernels %d", ti->name, ti->supported, runnable);
        supported += ti->supported;
        if (ti->supported)
            CHECK(ti->quantize && (t == TH_Q8_0 ? ti->quantize_weights != ti->quantize : ti->quantize_weights == ti->quantize),
                  "%s: encoders", ti->name);
        if (!ti->supported)
            CHECK(!ti->quantize_weights && !ti->vec_dot && !ti->repack8, "%s: kernels of a type we do not run", ti->name);
        if (!ti->quantize) CHECK(!ti->dequantize, "%s: a decoder without an encoder", ti->name);
        const bool packs = t == TH_Q4_0 || t == TH_Q8_0 || t == TH_Q4_K || t == TH_Q6_K || t == TH_IQ4_XS ||
                           th_is_qn(t) || t == TH_F16 || t == TH_BF16;
        CHECK(packs == (ti->repack8 != NULL) && packs == (ti->packed_bytes != 0), "%s: packed layout", ti->name);
        if (packs)
            CHECK(ti->packed_bytes == (t == TH_Q4_K ? 148u : t == TH_IQ4_XS ? 138u : ti->bytes), "%s: %u packed bytes",
                  ti->name, ti->packed_bytes);
    }
    CHECK(supported == 28, "%d supported types (F32 F16 BF16, 7 of 32 elements, 5 K-quants, IQ4_XS, q2..q8, "
          "TQ1_0 TQ2_0 Q1_0_G128 IQ1_BN IQ2_BN)", supported);
}

static void test_unsupported_types(void) {
    /* No crash: decode writes NaN, dot returns NaN, encode writes nothing. */
    uint8_t blk[512];
    memset(blk, 0x11, sizeof blk);
    const uint32_t types[] = {TH_IQ2_XXS, TH_IQ3_S, TH_IQ1_S, TH_I32, 31, 99, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        out[0] = 0;
        th_ref_dequantize(types[i], blk, out, 256);
        CHECK(isnan(out[0]) && isnan(out[255]), "type %u decode", types[i]);
        CHECK(isnan(th_ref_vec_dot(types[i], 256, blk, blk)), "type %u dot", types[i]);
        float x[256] = {1};
        th_ref_quantize(types[i], x, blk, 256);
        CHECK(blk[0] == 0x11 && blk[511] == 0x11, "type %u encode wrote", types[i]);
        CHECK(!th_ref_can_quantize(types[i]), "type %u", types[i]);
    }
}

int main(void) {
    RUN(test_q4_0);
    RUN(test_q4_1);
    RUN(test_q5_0);
    RUN(test_q5_1);
    RUN(test_q8_0);
    RUN(test_q2_k);
    RUN(test_q3_k);
    RUN(test_q4_k);
    RUN(test_q5_k);
    RUN(test_q6_k);
    RUN(test_iq4_nl);
    RUN(test_iq4_xs);
    RUN(test_mxfp4);
    RUN(test_float_types);
    RUN(test_quantize_q8_0);
    RUN(test_quantize_q8_1);
    RUN(test_quantize_q8_k);
    RUN(test_quantize_weights);
    RUN(test_weight_round_trip);
    RUN(test_type_table);
    RUN(test_type_table_kernels);
    RUN(test_unsupported_types);
    return CHECK_DONE();
}
