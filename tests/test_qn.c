/* test_qn.c — qN, theseus's n-bit format (docs/qn.md), checked against independent
 * reasoning, not against its own code:
 * - layout: codes written bit by bit into hand-built planes decode to the documented
 *   levels d * (c - (2^n - 1) / 2), and the encoder's bytes decode to values on that grid;
 * - the type table: names q2..q8, ids 1000 + n, 64-element groups of 8n + 2 bytes,
 *   Q8_0 activations; the GGUF reader's table lookup and th_row_bytes take them;
 * - round trip: the RMS error strictly decreases from n = 2 to n = 8, on random
 *   weights and on every F32 tensor of the tiny fixture (printed);
 * - error feedback: the running sum of the error of a group, sum_{j<=k} (x_j - v_j),
 *   stays within d/2 while no code sits at an end of the range (no clamping);
 * - scale search: never worse than feedback rounding at the plain scale amax / top
 *   (computed here by the test's own implementation of the documented rounding);
 * - q8 is not Q8_0: other bytes per element, and decoded values differ (half-integers);
 * - the reference dot product equals the double-precision sum of the decoded weights
 *   times the decoded activations (relative 1e-5 of sum |w a|);
 * - edge inputs: zeros, NaN, huge values encode without crashing to finite values;
 * - files: `quantize --type q8` / `q4` of tiny-F32 (th_quantize_file) writes every
 *   matrix as qN with the encoder's bytes and general.file_type 1000 + n; the model
 *   loads and its logits are compared with llama.cpp's F32 golden: q8 within the
 *   quantized-type tolerance of test_model.c (rel-L2 <= 5e-2, top-1 >= 0.9), the
 *   others printed (the CPU path, repacked where the level packs qN).
 * The SIMD kernels of every level are checked against the reference in
 * test_kernels.c (and test_kernels_neon.c), whose type list includes q2..q8. */
#include "check.h"
#include "gguf/gguf.h"
#include "logits.h"
#include "theseus.h"
#include "quant/qn.h"
#include "quant/ref_encode.h"
#include <stdint.h>
#include <unistd.h>

static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint32_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
/* roughly normal (sum of 4 uniforms), scale 1 */
static float gauss(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) s += (float)(rnd() % 1000001) / 1000000.0f - 0.5f;
    return s * 1.7320508f;
}

static size_t qn_bytes(int n, int64_t count) { return (size_t)(count / 64) * (8u * (unsigned)n + 2u); }

static double rms_roundtrip(int n, const float *x, int64_t count) {
    uint8_t *q = malloc(qn_bytes(n, count));
    float *y = malloc((size_t)count * sizeof *y);
    th_ref_quantize(TH_QN_BASE + (uint32_t)n, x, q, count);
    th_ref_dequantize(TH_QN_BASE + (uint32_t)n, q, y, count);
    double e = 0;
    for (int64_t i = 0; i < count; i++) e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    free(q);
    free(y);
    return sqrt(e / (double)count);
}

static void test_qn_type_table(void) {
    for (int n = 2; n <= 8; n++) {
        const uint32_t t = 1000u + (uint32_t)n;
        const th_type_info *ti = th_type_info_get(t);
        CHECK(ti != NULL, "type %u", t);
        if (!ti) continue;
        char want[16];
        snprintf(want, sizeof want, "q%d", n);
        CHECK(!strcmp(ti->name, want) && !strcmp(th_type_name(t), want), "name %s", ti->name);
        CHECK(ti->block == 64 && ti->bytes == 8u * (unsigned)n + 2u && ti->supported && ti->act_type == TH_Q8_0,
              "q%d: block %u bytes %u act %u", n, ti->block, ti->bytes, ti->act_type);
        CHECK(ti->dequantize && ti->quantize && ti->quantize_weights && ti->vec_dot, "q%d kernels", n);
        uint64_t rb = 0;
        CHECK(th_row_bytes(t, 576, &rb) && rb == 9u * (8u * (unsigned)n + 2u), "row bytes %llu", (unsigned long long)rb);
        CHECK(!th_row_bytes(t, 96, &rb), "96 is not a multiple of 64");
        CHECK(th_can_quantize_weights(t), "q%d encodes weights", n);
    }
    CHECK(th_type_info_get(1001) == NULL && th_type_info_get(1009) == NULL && th_type_info_get(999) == NULL, "ids around qN");
    CHECK(th_type_info_get(TH_TYPE_COUNT) == NULL, "bound");
}

/* Hand-built planes: code of weight j is (j * 7 + 3) mod 2^n; bit p of it is bit j of
 * plane p (plane bytes little-endian). Decoded value must be d * (c - (2^n - 1) / 2). */
static void test_qn_layout(void) {
    for (int n = 2; n <= 8; n++) {
        uint8_t g[66] = { 0 };
        const float d = 0.375f;                      /* exact in f16 */
        const uint16_t h = th_f32_to_f16(d);
        g[0] = (uint8_t)(h & 0xff);
        g[1] = (uint8_t)(h >> 8);
        int code[64];
        for (int j = 0; j < 64; j++) {
            code[j] = (j * 7 + 3) % (1 << n);
            for (int p = 0; p < n; p++)
                if (code[j] >> p & 1) g[2 + 8 * p + j / 8] |= (uint8_t)(1u << (j % 8));
        }
        float y[64];
        th_ref_dequantize(TH_QN_BASE + (uint32_t)n, g, y, 64);
        int bad = 0;
        for (int j = 0; j < 64; j++) bad += y[j] != d * ((float)code[j] - ((float)(1 << n) - 1.0f) / 2.0f);
        CHECK(bad == 0, "q%d: %d of 64 decoded values off the documented levels", n, bad);
    }
}

/* Each encoded value is an odd multiple of d/2 within +-(2^n - 1) d / 2. */
static void test_qn_encoder_on_grid(void) {
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = gauss() * 0.05f;
    for (int n = 2; n <= 8; n++) {
        uint8_t q[4 * 66];
        float y[256];
        th_ref_quantize(TH_QN_BASE + (uint32_t)n, x, q, 256);
        th_ref_dequantize(TH_QN_BASE + (uint32_t)n, q, y, 256);
        int bad = 0;
        for (int gi = 0; gi < 4; gi++) {
            const uint8_t *g = q + gi * (8 * n + 2);
            const float d = th_f16_to_f32((uint16_t)(g[0] | g[1] << 8));
            CHECK(d > 0, "q%d group %d: scale %g", n, gi, d);
            for (int j = 0; j < 64; j++) {
                const double l = 2.0 * y[64 * gi + j] / d; /* odd integer */
                bad += !(fabs(l - nearbyint(l)) < 1e-6 && ((long)nearbyint(l) & 1) && fabs(l) <= (1 << n) - 1);
            }
        }
        CHECK(bad == 0, "q%d: %d values off the grid", n, bad);
    }
}

/* RMS of plain rounding at the scale amax / top (th_qn_encode_group_plain), for the record. */
static double rms_plain(int n, const float *x, int64_t count) {
    uint8_t g[66];
    float y[64];
    double e = 0;
    for (int64_t i = 0; i < count; i += 64) {
        th_qn_encode_group_plain(n, x + i, g);
        th_ref_dequantize(TH_QN_BASE + (uint32_t)n, g, y, 64);
        for (int j = 0; j < 64; j++) e += ((double)x[i + j] - y[j]) * ((double)x[i + j] - y[j]);
    }
    return sqrt(e / (double)count);
}

static void check_rms_decreasing(const char *what, const float *x, int64_t count, bool print) {
    double prev = INFINITY;
    if (print) printf("  %s (%lld values) RMS:", what, (long long)count);
    for (int n = 2; n <= 8; n++) {
        const double r = rms_roundtrip(n, x, count);
        if (print) printf(" q%d %.3g (plain %.3g)", n, r, rms_plain(n, x, count));
        CHECK(r < prev, "%s: q%d RMS %.6g not below q%d's %.6g", what, n, r, n - 1, prev);
        prev = r;
    }
    if (print) printf("\n");
}

static void test_qn_rms_random(void) {
    enum { N = 64 * 512 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = gauss() * (0.01f + 0.05f * (float)((i / 64) % 7));
    check_rms_decreasing("random", x, N, true);
    for (int i = 0; i < N; i++) x[i] = (float)(rnd() % 2000001) / 1000000.0f - 1.0f; /* uniform */
    check_rms_decreasing("uniform", x, N, true);
    free(x);
}

static void test_qn_rms_fixture(void) {
    gguf_file *f = NULL;
    if (gguf_open(fixture("tiny/tiny-F32.gguf"), &f) != TH_OK) SKIP("tiny-F32.gguf not found (set SHARED)");
    int checked = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->type != TH_F32 || t->ne[0] % 64 != 0 || t->nbytes / 4 < 4096) continue;
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        check_rms_decreasing(name, t->data, (int64_t)(t->nbytes / 4), checked == 0 || !strcmp(name, "output.weight"));
        checked++;
    }
    CHECK(checked >= 8, "only %d tensors", checked);
    printf("  %d F32 tensors of tiny-F32.gguf checked\n", checked);
    gguf_close(f);
}

/* The running error sum of the documented feedback rounding stays within d/2 unless a
 * code at an end of the range shows the target may have been clamped. */
static void test_qn_feedback_bound(void) {
    enum { G = 200 };
    float x[64];
    int groups = 0, prefixes = 0;
    for (int n = 2; n <= 8; n++)
        for (int gi = 0; gi < G; gi++) {
            for (int j = 0; j < 64; j++) x[j] = gauss() * 0.02f;
            uint8_t g[66];
            float y[64];
            th_ref_quantize(TH_QN_BASE + (uint32_t)n, x, g, 64);
            th_ref_dequantize(TH_QN_BASE + (uint32_t)n, g, y, 64);
            uint8_t c[64];
            th_qn_codes(g, n, c);
            const double d = th_f16_to_f32((uint16_t)(g[0] | g[1] << 8));
            double run = 0;
            for (int j = 0; j < 64; j++) {
                if (c[j] == 0 || c[j] == (1 << n) - 1) break;
                run += (double)x[j] - y[j];
                CHECK(fabs(run) <= d / 2 * (1 + 1e-5) + 1e-9, "q%d group %d: running error %.3g at %d > d/2 = %.3g",
                      n, gi, run, j, d / 2);
                prefixes++;
            }
            groups++;
        }
    CHECK(prefixes > groups * 4, "only %d prefixes of %d groups checked", prefixes, groups);
}

/* The test's own feedback rounding at scale d (docs/qn.md: target = x + carried error,
 * level = floor(target / d) + 1/2 clamped to the 2^n levels). */
static double feedback_sse(int n, const float *x, float d) {
    double sse = 0;
    float e = 0;
    const int lo = -(1 << (n - 1)), hi = (1 << (n - 1)) - 1;
    for (int j = 0; j < 64; j++) {
        float t = x[j] + e;
        int q = (int)floorf(t / d);
        q = q < lo ? lo : q > hi ? hi : q;
        float v = d * ((float)q + 0.5f);
        e = t - v;
        sse += ((double)x[j] - v) * ((double)x[j] - v);
    }
    return sse;
}

static void test_qn_search_beats_plain_scale(void) {
    float x[64], y[64];
    int worse = 0, better = 0;
    for (int n = 2; n <= 8; n++)
        for (int gi = 0; gi < 100; gi++) {
            for (int j = 0; j < 64; j++) x[j] = gauss() * 0.03f;
            uint8_t g[66];
            th_ref_quantize(TH_QN_BASE + (uint32_t)n, x, g, 64);
            th_ref_dequantize(TH_QN_BASE + (uint32_t)n, g, y, 64);
            double sse = 0, amax = 0;
            for (int j = 0; j < 64; j++) {
                sse += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
                if (fabs(x[j]) > amax) amax = fabs(x[j]);
            }
            const float dplain = th_f16_to_f32(th_f32_to_f16((float)(amax / ((1 << (n - 1)) - 0.5))));
            const double plain = feedback_sse(n, x, dplain);
            worse += sse > plain * (1 + 1e-4);
            better += sse < plain * 0.999;
        }
    CHECK(worse == 0, "%d groups worse than feedback at the plain scale", worse);
    CHECK(better > 100, "the search improved only %d of 700 groups", better);
    printf("  search better than the plain scale in %d of 700 groups\n", better);
}

static void test_q8_is_not_q8_0(void) {
    enum { N = 64 * 8 };
    float x[N], a[N], b[N];
    for (int i = 0; i < N; i++) x[i] = gauss();
    uint8_t q8[8 * 66], q80[16 * 34];
    th_ref_quantize(TH_Q8, x, q8, N);
    CHECK(th_quantize_weights(TH_Q8_0, x, q80, N), "Q8_0");
    uint64_t b8 = 0, b80 = 0;
    th_row_bytes(TH_Q8, N, &b8);
    th_row_bytes(TH_Q8_0, N, &b80);
    CHECK(b8 == 8 * 66 && b80 == 16 * 34 && b8 != b80, "bytes %llu vs %llu", (unsigned long long)b8, (unsigned long long)b80);
    CHECK(memcmp(q8, q80, sizeof q8) != 0, "q8's bytes are Q8_0's");
    th_ref_dequantize(TH_Q8, q8, a, N);
    th_ref_dequantize(TH_Q8_0, q80, b, N);
    int differ = 0;
    for (int i = 0; i < N; i++) differ += memcmp(&a[i], &b[i], 4) != 0;
    CHECK(differ > N / 2, "only %d of %d decoded values differ from Q8_0's", differ, N);
    double e8 = 0, e80 = 0;
    for (int i = 0; i < N; i++) {
        e8 += ((double)x[i] - a[i]) * ((double)x[i] - a[i]);
        e80 += ((double)x[i] - b[i]) * ((double)x[i] - b[i]);
    }
    printf("  q8 vs Q8_0: %d of %d decoded values differ; RMS q8 %.4g, Q8_0 %.4g\n", differ, N, sqrt(e8 / N), sqrt(e80 / N));
}

static void test_qn_dot_matches_decoded(void) {
    enum { N = 64 * 11 };
    float x[N], w[N], fa[N], fw[N];
    uint8_t qa[N / 32 * 34], qw[N / 64 * 66];
    for (int rep = 0; rep < 5; rep++)
        for (int n = 2; n <= 8; n++) {
            for (int i = 0; i < N; i++) { x[i] = gauss() * (1 + i % 5); w[i] = gauss() * 0.02f; }
            th_ref_quantize(TH_Q8_0, x, qa, N);
            th_ref_quantize(TH_QN_BASE + (uint32_t)n, w, qw, N);
            th_ref_dequantize(TH_Q8_0, qa, fa, N);
            th_ref_dequantize(TH_QN_BASE + (uint32_t)n, qw, fw, N);
            double want = 0, mag = 0;
            for (int i = 0; i < N; i++) { want += (double)fw[i] * fa[i]; mag += fabs((double)fw[i] * fa[i]); }
            const float got = th_ref_vec_dot(TH_QN_BASE + (uint32_t)n, N, qw, qa);
            CHECK(fabs(got - want) <= 1e-5 * mag, "q%d: dot %.9g, decoded sum %.9g (S %.3g)", n, got, want, mag);
        }
}

static void test_qn_edges(void) {
    float x[128], y[128];
    uint8_t g[2 * 66];
    for (int n = 2; n <= 8; n++) {
        memset(x, 0, sizeof x);
        th_ref_quantize(TH_QN_BASE + (uint32_t)n, x, g, 128);
        th_ref_dequantize(TH_QN_BASE + (uint32_t)n, g, y, 128);
        int nz = 0;
        for (int j = 0; j < 128; j++) nz += y[j] != 0.0f;
        CHECK(nz == 0, "q%d: zeros decode to %d non-zeros", n, nz);
        for (int j = 0; j < 128; j++) x[j] = j < 64 ? 1e6f * (j % 2 ? 1 : -1) : (j == 70 ? NAN : 0.001f * j);
        th_ref_quantize(TH_QN_BASE + (uint32_t)n, x, g, 128);
        th_ref_dequantize(TH_QN_BASE + (uint32_t)n, g, y, 128);
        int fin = 0;
        for (int j = 0; j < 128; j++) fin += isfinite(y[j]) != 0;
        CHECK(fin == 128, "q%d: %d of 128 finite after huge / NaN input", n, fin);
    }
}

static void check_file(int n, bool strict) {
    char out[64];
    snprintf(out, sizeof out, "/tmp/theseus-test-qn-%d-q%d.gguf", (int)getpid(), n);
    th_quantize_params qp = th_quantize_default_params();
    char type[8];
    snprintf(type, sizeof type, "q%d", n);
    qp.type = type;
    qp.n_threads = 2;
    CHECK(th_quantize_file(fixture("tiny/tiny-F32.gguf"), out, &qp) == TH_OK, "quantize %s: %s", type, th_last_error());
    gguf_file *src = NULL, *got = NULL;
    CHECK(gguf_open(fixture("tiny/tiny-F32.gguf"), &src) == TH_OK && gguf_open(out, &got) == TH_OK, "%s", th_last_error());
    if (!src || !got) { gguf_close(src); gguf_close(got); remove(out); return; }
    uint32_t ft = 0;
    CHECK(gguf_get_u32(got, "general.file_type", &ft) && ft == 1000u + (uint32_t)n, "file_type %u", ft);
    gguf_file *peer = NULL;   /* llama-quantize's Q4_0 of the same model */
    CHECK(gguf_open(fixture("tiny/tiny-Q4_0.gguf"), &peer) == TH_OK, "%s", th_last_error());
    const gguf_tensor *po = peer ? gguf_find_tensor(peer, "output.weight") : NULL;
    uint32_t peer_output = po ? po->type : 0;
    CHECK(peer_output == TH_Q6_K, "llama.cpp's Q4_0 output.weight is %u", peer_output);
    gguf_close(peer);
    int mats = 0, same = 0;
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *t = &got->tensors[i];
        char tn[128];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        const gguf_tensor *st = gguf_find_tensor(src, tn);   /* the output is in llama-quantize's order */
        CHECK(st != NULL, "%s not in the source", tn);
        if (!st) continue;
        if (t->n_dims < 2) { CHECK(t->type == TH_F32, "vector of type %u", t->type); continue; }
        mats++;
        /* the output side as llama-quantize's own ftypes leave it: its Q4_0 file's output.weight
         * type for q2..q7 (Q6_K), the base type for q8 (as its Q8_0 file keeps Q8_0) */
        uint32_t want_type = n < 8 && !strcmp(tn, "output.weight") ? peer_output : 1000u + (uint32_t)n;
        CHECK(t->type == want_type, "matrix %s has type %u, not %u", tn, t->type, want_type);
        uint8_t *want = malloc(t->nbytes);
        th_ref_quantize(t->type, st->data, want, (int64_t)(st->nbytes / 4));
        same += memcmp(want, t->data, t->nbytes) == 0;
        free(want);
    }
    CHECK(mats == 30 && same == mats, "%d matrices, %d with the encoder's bytes", mats, same);
    gguf_close(src);
    gguf_close(got);
    thlg g;
    th_model *m = NULL;
    if (!thlg_load(fixture("tiny/golden/tiny-F32.logits"), &g)) { CHECK(0, "no golden"); remove(out); return; }
    CHECK(th_model_load(out, NULL, &m) == TH_OK, "load: %s", th_last_error());
    if (m) {
        th_context_params cp = th_context_default_params();
        cp.n_ctx = 64;
        cp.n_threads = 2;
        cp.kv_type = TH_KV_F32;
        float *lg = decode_all_logits(m, g.tok, (int)g.n, &cp);
        CHECK(lg != NULL, "decode: %s", th_last_error());
        if (lg) {
            double worst, top1;
            compare_logits(lg, g.logits, (int)g.n, (int)g.nv, &worst, NULL, &top1);
            printf("  q%d vs llama.cpp's F32 logits: rel_l2_max=%.3e top1=%.3f\n", n, worst, top1);
            if (strict) CHECK(worst <= 5e-2 && top1 >= 0.9, "q%d: rel-L2 %.3e, top-1 %.3f", n, worst, top1);
            else CHECK(isfinite(worst) && worst < 1.5, "q%d: rel-L2 %.3e", n, worst);
        }
        free(lg);
        th_model_free(m);
    }
    thlg_free(&g);
    remove(out);
}

static void test_qn_files(void) {
    FILE *probe = fopen(fixture("tiny/tiny-F32.gguf"), "rb");
    if (!probe) SKIP("tiny-F32.gguf not found (set SHARED)");
    fclose(probe);
    check_file(8, true);
    for (int n = 2; n <= 6; n++) check_file(n, false);
}

int main(void) {
    RUN(test_qn_type_table);
    RUN(test_qn_layout);
    RUN(test_qn_encoder_on_grid);
    RUN(test_qn_rms_random);
    RUN(test_qn_rms_fixture);
    RUN(test_qn_feedback_bound);
    RUN(test_qn_search_beats_plain_scale);
    RUN(test_q8_is_not_q8_0);
    RUN(test_qn_dot_matches_decoded);
    RUN(test_qn_edges);
    RUN(test_qn_files);
    return CHECK_DONE();
}
