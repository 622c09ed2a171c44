/* test_split.c — the CUDA backend's SPLIT layouts of Q2_K, Q3_K, MXFP4 and qN
 * (src/cuda/split.c), checked on the host with no GPU: rows of each type (the
 * reference quantizer's, and random bytes with finite fp16 scales, every e8m0
 * exponent for MXFP4) are repacked by th_cu_repack_split, decoded back by the
 * small decoders below — written from split.c's layout description, not from its
 * code — and compared bit for bit with th_ref_dequantize of the GGUF rows. The
 * repacking must also write every byte of both arrays (two runs over buffers
 * poisoned differently must agree), and the sizes must be the documented ones.
 * This proves the layouts; test_cuda proves the kernels that read them. */
#include "check.h"
#include "cuda/split.h"
#include "quant/quant.h"

static uint32_t rng = 777;
static uint32_t next(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }
static float frand(void) { return (float)next() / (float)(1 << 24) * 2.0f - 1.0f; }

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static float f16_at(const uint8_t *p) { return th_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* pack_2bit's sub-block (8 bytes): weight e is in word e/16, byte e%4, bits 2·((e%16)/4). */
static int code2(const uint8_t *q, int e) { return (int)(le32(q + 4 * (e / 16)) >> (8 * (e % 4) + 2 * ((e % 16) / 4))) & 3; }
/* high_bits' 4 bytes: weight e is bit (e%16)/4 + 4·(e/16) of byte e%4. */
static int flag(const uint8_t *f, int e) { return (f[e % 4] >> ((e % 16) / 4 + 4 * (e / 16))) & 1; }

/* Q2_K: codes K/4 bytes a row; 20-byte records {d, dmin, scale bytes sc | m << 4 per 16 weights}. */
static void dec_q2_k(const uint8_t *q, const uint8_t *s, int64_t K, float *out) {
    for (int64_t b = 0; b < K / 32; b++) {
        const uint8_t *rec = s + (b / 8) * 20;
        float d = f16_at(rec), dmin = f16_at(rec + 2);
        for (int e = 0; e < 32; e++) {
            uint8_t sc = rec[4 + 2 * (b % 8) + e / 16];
            float dl = d * (sc & 15), ml = dmin * (sc >> 4);
            out[32 * b + e] = dl * code2(q + 8 * b, e) - ml;
        }
    }
}

/* Q3_K: codes K/4 bytes then minus-4 flags K/8 bytes a row; 18-byte records {d, i8 sc[16]}. */
static void dec_q3_k(const uint8_t *q, const uint8_t *s, int64_t K, float *out) {
    for (int64_t b = 0; b < K / 32; b++) {
        const uint8_t *rec = s + (b / 8) * 18;
        float d = f16_at(rec);
        for (int e = 0; e < 32; e++) {
            float dl = d * (int8_t)rec[2 + 2 * (b % 8) + e / 16];
            out[32 * b + e] = dl * (code2(q + 8 * b, e) - 4 * flag(q + K / 4 + 4 * b, e));
        }
    }
}

/* MXFP4: 16 bytes of codes a sub-block (byte j: weight j low, j + 16 high); one e8m0 byte. */
static void dec_mxfp4(const uint8_t *q, const uint8_t *s, int64_t K, float *out) {
    static const int8_t twice_e2m1[8] = { 0, 1, 2, 3, 4, 6, 8, 12 };  /* 0, .5, 1, 1.5, 2, 3, 4, 6 doubled */
    for (int64_t b = 0; b < K / 32; b++) {
        float d = ldexpf(1.0f, (int)s[b] - 128);  /* half the OCP scale 2^(e−127): the values are doubled */
        for (int e = 0; e < 32; e++) {
            int c = e < 16 ? q[16 * b + e] & 15 : q[16 * b + e - 16] >> 4;
            int v = twice_e2m1[c & 7];
            out[32 * b + e] = d * (c & 8 ? -v : v);
        }
    }
}

/* qN (n = 2..8): fp16 d a 64-weight group (K/64 a row); the codes' parts, each a
 * section of the row: bits 0-3 as Q4_0-order nibbles (16 bytes a sub-block, n >= 4),
 * two bits as Q2_K's (8 bytes: bits 0-1 for n < 4, bits 4-5 for n = 6, 7), one bit
 * (bit n-1, odd n) as Q3_K's flags; q8: 32 bytes c - 128 a sub-block. */
static void dec_qn(int n, const uint8_t *q, const uint8_t *s, int64_t K, float *out) {
    const uint8_t *q2 = q + (n >= 4 && n < 8 ? K / 2 : 0), *q1 = q2 + ((n & 2) ? K / 4 : 0);
    for (int64_t b = 0; b < K / 32; b++) {
        float d = f16_at(s + 2 * (b / 2));
        for (int e = 0; e < 32; e++) {
            int c;
            if (n == 8) {
                c = (int8_t)q[32 * b + e] + 128;
            } else {
                c = 0;
                if (n >= 4) c = e < 16 ? q[16 * b + e] & 15 : q[16 * b + e - 16] >> 4;
                if (n & 2) c |= code2(q2 + 8 * b, e) << (n >= 4 ? 4 : 0);
                if (n & 1) c |= flag(q1 + 4 * b, e) << (n - 1);
            }
            out[32 * b + e] = d * (0.5f * (float)(2 * c - ((1 << n) - 1)));
        }
    }
}

/* Random rows of `type`: random bytes, the fp16 scale fields set to finite values. */
static void random_rows(uint32_t type, uint8_t *w, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)next();
    size_t bsz = th_type_info_get(type)->bytes, d_at = type == TH_Q2_K ? 80 : th_is_qn(type) ? 0 : 108;
    size_t nf = type == TH_Q2_K ? 2 : 1;
    for (size_t b = 0; type != TH_MXFP4 && b < bytes; b += bsz)
        for (size_t f = 0; f < nf; f++) {
            uint16_t h = th_f32_to_f16(frand() * 0.05f);
            memcpy(w + b + d_at + 2 * f, &h, 2);
        }
    if (type == TH_MXFP4) /* every exponent, the subnormal (0, 1) and the largest (255) among them */
        for (size_t b = 0; b < bytes / bsz; b++) w[b * bsz] = (uint8_t)(b * 7 + 1);
}

static void check_rows(uint32_t type, int64_t rows, int64_t K, bool quantized) {
    uint64_t rb;
    size_t qrow, srow;
    if (!th_row_bytes(type, (uint64_t)K, &rb) || !th_cu_split_sizes(type, K, &qrow, &srow)) {
        CHECK(0, "%s K=%lld: no row size or no split form", th_type_name(type), (long long)K);
        return;
    }
    uint8_t *w = malloc((size_t)rows * rb), *q[2], *s[2];
    float *ref = malloc((size_t)K * 4), *got = malloc((size_t)K * 4), *x = malloc((size_t)K * 4);
    if (quantized) {
        for (int64_t r = 0; r < rows; r++) {
            float scale = 0.01f + 3.0f * (float)r;
            for (int64_t k = 0; k < K; k++) x[k] = frand() * scale * (1.0f + (float)(k % 5));
            th_ref_quantize(type, x, w + r * rb, K);
        }
    } else {
        random_rows(type, w, (size_t)rows * rb);
    }
    for (int p = 0; p < 2; p++) {  /* poisoned 0x00 and 0xff: every byte must be written */
        q[p] = malloc(qrow * (size_t)rows);
        s[p] = malloc(srow * (size_t)rows);
        memset(q[p], p ? 0xff : 0, qrow * (size_t)rows);
        memset(s[p], p ? 0xff : 0, srow * (size_t)rows);
        th_cu_repack_split(type, w, (size_t)rb, rows, K, q[p], s[p]);
    }
    CHECK(!memcmp(q[0], q[1], qrow * (size_t)rows) && !memcmp(s[0], s[1], srow * (size_t)rows),
          "%s K=%lld: the repacking leaves bytes unwritten", th_type_name(type), (long long)K);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        th_ref_dequantize(type, w + r * rb, ref, K);
        const uint8_t *qr = q[0] + r * qrow, *sr = s[0] + r * srow;
        if (type == TH_Q2_K) dec_q2_k(qr, sr, K, got);
        else if (type == TH_Q3_K) dec_q3_k(qr, sr, K, got);
        else if (th_is_qn(type)) dec_qn(th_qn_bits(type), qr, sr, K, got);
        else dec_mxfp4(qr, sr, K, got);
        for (int64_t k = 0; k < K && bad < 3; k++)
            if (memcmp(&ref[k], &got[k], 4)) {
                bad++;
                CHECK(0, "%s K=%lld row %lld weight %lld: split %.9g, reference %.9g", th_type_name(type), (long long)K,
                      (long long)r, (long long)k, got[k], ref[k]);
            }
    }
    for (int p = 0; p < 2; p++) { free(q[p]); free(s[p]); }
    free(w); free(ref); free(got); free(x);
}

static void check_type(uint32_t type, const int64_t *Ks, size_t nK) {
    CHECK(th_cu_type_splittable(type), "%s has no split layout", th_type_name(type));
    for (size_t i = 0; i < nK; i++) {
        check_rows(type, 5, Ks[i], true);
        check_rows(type, 7, Ks[i], false);
    }
}

static void test_split_q2_k(void) {
    const int64_t Ks[] = { 256, 768, 2816 };
    check_type(TH_Q2_K, Ks, 3);
}

static void test_split_q3_k(void) {
    const int64_t Ks[] = { 256, 768, 2816 };
    check_type(TH_Q3_K, Ks, 3);
}

static void test_split_mxfp4(void) {
    const int64_t Ks[] = { 32, 96, 1312, 8192 };  /* 8192: 256 blocks, so every e8m0 byte occurs */
    check_type(TH_MXFP4, Ks, 4);
}

static void test_split_qn(void) {
    const int64_t Ks[] = { 64, 192, 1344 };   /* 1344: rows not a multiple of 16 bytes for odd n (padded) */
    for (uint32_t t = TH_Q2; t <= TH_Q8; t++) check_type(t, Ks, 3);
}

/* The documented sizes, and no split form where the block does not divide K. */
static void test_split_sizes(void) {
    static const struct { uint32_t type; int64_t K; size_t qrow, srow; } want[] = {
        { TH_Q2_K, 512, 128, 40 }, { TH_Q3_K, 512, 192, 36 }, { TH_MXFP4, 64, 32, 2 },
        { TH_Q3, 64, 32, 2 }, { TH_Q5, 128, 80, 4 }, { TH_Q7, 1344, 1184, 42 }, { TH_Q8, 64, 64, 2 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t q = 0, s = 0;
        bool ok = th_cu_split_sizes(want[i].type, want[i].K, &q, &s);
        CHECK(ok && q == want[i].qrow && s == want[i].srow, "%s K=%lld: %d %zu %zu", th_type_name(want[i].type),
              (long long)want[i].K, ok, q, s);
    }
    size_t q, s;
    CHECK(!th_cu_split_sizes(TH_Q2_K, 224, &q, &s) && !th_cu_split_sizes(TH_Q3_K, 288, &q, &s) &&
          !th_cu_split_sizes(TH_MXFP4, 48, &q, &s) && !th_cu_split_sizes(TH_MXFP4, 0, &q, &s) &&
          !th_cu_split_sizes(TH_Q4, 96, &q, &s), "a bad K has a split form");
}

int main(void) {
    RUN(test_split_sizes);
    RUN(test_split_q2_k);
    RUN(test_split_q3_k);
    RUN(test_split_mxfp4);
    RUN(test_split_qn);
    return CHECK_DONE();
}
