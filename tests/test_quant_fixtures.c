/* test_quant_fixtures.c — cross-checks the reference block decoders against
 * llama.cpp's own quantizer: the fixtures tiny/tiny-<TYPE>.gguf (and the gpt-oss
 * MXFP4 one) hold the same random weights as the F32 file, quantized by
 * llama.cpp. Decoding a quantized tensor must land near the F32 tensor with an
 * error typical of the type; a wrong decoder (swapped nibbles, wrong scale
 * packing, wrong sign) lands at rel-L2 ~1 or more.
 * The GGUF parser here is a throwaway, independent of src/gguf. Set
 * QUANT_LIST=1 to print every tensor's type and error. */
#include "check.h"
#include "quant/quant.h"
#include <stdint.h>

typedef struct {
    char name[96];
    uint32_t type;
    uint64_t n;          /* element count */
    uint64_t ne0;        /* row length */
    const uint8_t *data;
} mini_tensor;

typedef struct {
    uint8_t *buf;
    size_t size;
    mini_tensor *t;
    uint64_t nt;
} mini_gguf;

typedef struct { const uint8_t *p, *end; int bad; } rd;

static uint64_t rd_u(rd *r, int bytes) {
    if (r->end - r->p < bytes) { r->bad = 1; return 0; }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[i] << (8 * i);
    r->p += bytes;
    return v;
}

static void rd_str(rd *r, char *out, size_t cap) {
    uint64_t len = rd_u(r, 8);
    if (r->bad || (uint64_t)(r->end - r->p) < len) { r->bad = 1; return; }
    if (out) { size_t k = len < cap - 1 ? len : cap - 1; memcpy(out, r->p, k); out[k] = 0; }
    r->p += len;
}

static int scalar_size(uint32_t vt) {
    static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return vt < 13 ? sz[vt] : -1;
}

static void rd_value(rd *r, uint32_t vt, uint64_t *u32_out) {
    if (vt == 8) { rd_str(r, NULL, 0); return; }
    if (vt == 9) {
        uint32_t et = (uint32_t)rd_u(r, 4);
        uint64_t cnt = rd_u(r, 8);
        for (uint64_t i = 0; i < cnt && !r->bad; i++) rd_value(r, et, NULL);
        return;
    }
    int s = scalar_size(vt);
    if (s <= 0) { r->bad = 1; return; }
    uint64_t v = rd_u(r, s);
    if (u32_out) *u32_out = v;
}

static void mini_free(mini_gguf *g) { free(g->buf); free(g->t); memset(g, 0, sizeof *g); }

static int mini_load(const char *path, mini_gguf *g) {
    memset(g, 0, sizeof *g);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    g->size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g->buf = malloc(g->size);
    if (!g->buf || fread(g->buf, 1, g->size, f) != g->size) { fclose(f); mini_free(g); return 0; }
    fclose(f);
    rd r = {g->buf, g->buf + g->size, 0};
    if (rd_u(&r, 4) != 0x46554747u) { mini_free(g); return 0; }    /* "GGUF" */
    rd_u(&r, 4);
    g->nt = rd_u(&r, 8);
    uint64_t nkv = rd_u(&r, 8), align = 32;
    for (uint64_t i = 0; i < nkv && !r.bad; i++) {
        char key[128];
        rd_str(&r, key, sizeof key);
        uint32_t vt = (uint32_t)rd_u(&r, 4);
        uint64_t v = 0;
        rd_value(&r, vt, &v);
        if (!strcmp(key, "general.alignment")) align = v;
    }
    if (r.bad || g->nt > 100000 || align == 0) { mini_free(g); return 0; }
    g->t = calloc(g->nt, sizeof *g->t);
    uint64_t *off = calloc(g->nt, sizeof *off);
    for (uint64_t i = 0; i < g->nt && !r.bad; i++) {
        rd_str(&r, g->t[i].name, sizeof g->t[i].name);
        uint32_t nd = (uint32_t)rd_u(&r, 4);
        g->t[i].n = 1;
        for (uint32_t d = 0; d < nd && d < 8; d++) {
            uint64_t ne = rd_u(&r, 8);
            if (d == 0) g->t[i].ne0 = ne;
            g->t[i].n *= ne;
        }
        g->t[i].type = (uint32_t)rd_u(&r, 4);
        off[i] = rd_u(&r, 8);
    }
    size_t data = (size_t)(r.p - g->buf);
    data = (data + align - 1) / align * align;
    for (uint64_t i = 0; i < g->nt && !r.bad; i++) {
        uint64_t bytes;
        if (!th_row_bytes(g->t[i].type, g->t[i].n, &bytes) || data + off[i] + bytes > g->size) {
            g->t[i].data = NULL;    /* a type we cannot size: leave it out */
            continue;
        }
        g->t[i].data = g->buf + data + off[i];
    }
    free(off);
    if (r.bad) { mini_free(g); return 0; }
    return 1;
}

static const mini_tensor *mini_find(const mini_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->nt; i++)
        if (!strcmp(g->t[i].name, name)) return &g->t[i];
    return NULL;
}

static double rel_l2(const float *a, const float *ref, uint64_t n) {
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (float)((rng >> 40) * (1.0 / 8388608.0) - 1.0); }

/* rel-L2 of y = W x over up to 1024 rows of quantized tensor qt (dot products by
 * th_ref_vec_dot against x quantized to the activation type) vs the F32 tensor ft. */
static double matvec_error(uint32_t type, const mini_tensor *qt, const mini_tensor *ft) {
    const th_type_info *ti = th_type_info_get(type);
    uint64_t n = qt->ne0, rows = qt->n / n, wrow, arow;
    if (rows > 1024) rows = 1024;
    if (!th_row_bytes(type, n, &wrow) || !th_row_bytes(ti->act_type, n, &arow)) return 1e9;
    float *x = malloc(n * sizeof *x);
    void *a = malloc(arow + 64);
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) x[i] = frand();
    th_ref_quantize(ti->act_type, x, a, (int64_t)n);
    for (uint64_t r = 0; r < rows; r++) {
        const float *w = (const float *)ft->data + r * n;
        double want = 0;
        for (uint64_t i = 0; i < n; i++) want += (double)w[i] * x[i];
        double got = th_ref_vec_dot(type, (int64_t)n, qt->data + r * wrow, a);
        num += (got - want) * (got - want);
        den += want * want;
    }
    free(x);
    free(a);
    return sqrt(num / (den > 0 ? den : 1));
}

/* Worst and count of tensors of `type` in quantized file q vs. the F32 file f. */
static void compare_file(const char *qpath, const char *fpath, uint32_t type, double tol, int min_tensors) {
    mini_gguf q, f;
    if (!mini_load(qpath, &q)) SKIP("cannot read %s", qpath);
    if (!mini_load(fpath, &f)) { mini_free(&q); SKIP("cannot read %s", fpath); }
    int list = getenv("QUANT_LIST") != NULL, count = 0;
    double worst = 0, best = 1e9, worst_mv = 0;
    for (uint64_t i = 0; i < q.nt; i++) {
        const mini_tensor *qt = &q.t[i], *ft = mini_find(&f, qt->name);
        if (list) printf("  %s: %-28s %-7s n=%llu\n", qpath, qt->name, th_type_name(qt->type), (unsigned long long)qt->n);
        if (qt->type != type || !qt->data || !ft || !ft->data || ft->type != TH_F32 || ft->n != qt->n) continue;
        float *out = malloc(qt->n * sizeof *out);
        th_ref_dequantize(type, qt->data, out, (int64_t)qt->n);
        double e = rel_l2(out, (const float *)ft->data, qt->n);
        free(out);
        if (list) printf("    rel-L2 %.5f\n", e);
        CHECK(e <= tol, "%s %s: rel-L2 %.5f > %.3g", qpath, qt->name, e, tol);
        /* a matmul through th_ref_vec_dot with the activation type: the rows (up to 1024)
         * times a random vector, against the F32 weights times the same vector in double;
         * the error is the weight error plus the activation quantization (measured 1.0-1.6x
         * the weight error), so allow 1.5 tol */
        double ye = matvec_error(type, qt, ft);
        if (list) printf("    matvec rel-L2 %.5f\n", ye);
        CHECK(ye <= 1.5 * tol, "%s %s: matvec rel-L2 %.5f", qpath, qt->name, ye);
        worst_mv = ye > worst_mv ? ye : worst_mv;
        worst = e > worst ? e : worst;
        best = e < best ? e : best;
        count++;
    }
    CHECK(count >= min_tensors, "%s: only %d tensors of type %s", qpath, count, th_type_name(type));
    printf("  %-7s %3d tensors, rel-L2 %.5f .. %.5f (tolerance %.3g), matvec worst %.5f\n", th_type_name(type),
           count, best, worst, tol, worst_mv);
    mini_free(&q);
    mini_free(&f);
}

#define TINY(file) fixture("tiny/tiny-" file ".gguf")
#define TINY_F32 TINY("F32")

/* Tolerances: the measured worst rel-L2 of each type with a margin of ~1.4x
 * (measured: F16 2.1e-4, BF16 1.7e-3, Q8_0 5.4e-3, Q4_0 0.087, Q4_1 0.079,
 * Q5_0 0.043, Q5_1 0.038, Q2_K 0.298, Q3_K 0.152, Q4_K 0.072, Q5_K 0.036,
 * Q6_K 0.018, IQ4_NL 0.077, IQ4_XS 0.077, MXFP4 0.118); a layout mistake gives
 * errors around 1. The last argument is the number of tensors of the type in
 * the file, so a file whose types we misread fails too. */
static void test_fixture_f16(void) { compare_file(TINY("F16"), TINY_F32, TH_F16, 3e-4, 30); }
static void test_fixture_bf16(void) { compare_file(TINY("BF16"), TINY_F32, TH_BF16, 2.5e-3, 30); }
static void test_fixture_q8_0(void) { compare_file(TINY("Q8_0"), TINY_F32, TH_Q8_0, 7.5e-3, 30); }
static void test_fixture_q4_0(void) { compare_file(TINY("Q4_0"), TINY_F32, TH_Q4_0, 0.12, 29); }
static void test_fixture_q4_1(void) { compare_file(TINY("Q4_1"), TINY_F32, TH_Q4_1, 0.11, 29); }
static void test_fixture_q5_0(void) { compare_file(TINY("Q5_0"), TINY_F32, TH_Q5_0, 0.06, 29); }
static void test_fixture_q5_1(void) { compare_file(TINY("Q5_1"), TINY_F32, TH_Q5_1, 0.055, 29); }
static void test_fixture_q2_k(void) { compare_file(TINY("Q2_K"), TINY_F32, TH_Q2_K, 0.4, 17); }
static void test_fixture_q3_k(void) { compare_file(TINY("Q3_K_M"), TINY_F32, TH_Q3_K, 0.2, 17); }
static void test_fixture_q4_k(void) { compare_file(TINY("Q4_K_M"), TINY_F32, TH_Q4_K, 0.1, 25); }
static void test_fixture_q5_k(void) { compare_file(TINY("Q5_K_M"), TINY_F32, TH_Q5_K, 0.05, 25); }
static void test_fixture_q6_k(void) { compare_file(TINY("Q6_K"), TINY_F32, TH_Q6_K, 0.025, 30); }
static void test_fixture_iq4_nl(void) { compare_file(TINY("IQ4_NL"), TINY_F32, TH_IQ4_NL, 0.1, 29); }
static void test_fixture_iq4_xs(void) { compare_file(TINY("IQ4_XS"), TINY_F32, TH_IQ4_XS, 0.1, 29); }
static void test_fixture_mxfp4(void) {
    compare_file(fixture("arch/gpt-oss/model-Q8_0-MXFP4.gguf"), fixture("arch/gpt-oss/model-F32.gguf"), TH_MXFP4, 0.16, 6);
}

int main(void) {
    RUN(test_fixture_f16);
    RUN(test_fixture_bf16);
    RUN(test_fixture_q8_0);
    RUN(test_fixture_q4_0);
    RUN(test_fixture_q4_1);
    RUN(test_fixture_q5_0);
    RUN(test_fixture_q5_1);
    RUN(test_fixture_q2_k);
    RUN(test_fixture_q3_k);
    RUN(test_fixture_q4_k);
    RUN(test_fixture_q5_k);
    RUN(test_fixture_q6_k);
    RUN(test_fixture_iq4_nl);
    RUN(test_fixture_iq4_xs);
    RUN(test_fixture_mxfp4);
    return CHECK_DONE();
}
