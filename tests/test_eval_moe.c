/* test_eval_moe.c — router agreement (th_eval_params.router_base_out / router_base)
 * on the MoE fixtures (arch/olmoe, arch/qwen3moe): a model compared with itself has
 * no flips; a copy with one router weight of layer 1 changed has flips in layer 1
 * and none in layer 0 (layer 0 is computed before the change can matter), each flip
 * with a non-negative gap that is at most the largest gap we could see; the router
 * file's parser on bad input. The importance matrix (th_imatrix_compute) against
 * llama-imatrix's files committed under tests/peer/ (make_imatrix_goldens.sh has the
 * commands): the tiny dense fixture and the olmoe MoE fixture (per-expert slices),
 * the same entries and ncall, every value within 2e-3 relative (measured worst
 * 6.4e-4 / 4.8e-4: the F16 KV cache and attention sums differ in rounding), the
 * same perplexity line; the reader on bad input. */
#include "check.h"
#include "theseus.h"
#include "eval/eval.h"
#include "gguf/gguf.h"
#include <stdint.h>
#include <unistd.h>

#define GPL3 "/usr/share/common-licenses/GPL-3"

static th_token *gpl3_tokens(th_model *m, size_t *n) {
    FILE *f = fopen(GPL3, "rb");
    if (!f) return NULL;
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    if (len && text[len - 1] == '\n') len--;
    th_token *t = malloc((len + 16) * sizeof *t);
    if (t && th_tokenize(m, text, len, true, false, t, len + 16, n) != TH_OK) { free(t); return NULL; }
    return t;
}

typedef struct ropts {
    int32_t n_ctx, n_chunks, n_batch;
    const char *kld_out, *router_out, *router_in;
    const th_kld_base *base;
} ropts;

static th_status run(th_model *m, const th_token *tok, size_t n, ropts o, th_eval_result *r) {
    th_eval_params ep = th_eval_default_params();
    ep.n_ctx = o.base ? 0 : o.n_ctx;
    ep.n_chunks = o.n_chunks;
    if (o.n_batch) ep.n_batch = o.n_batch;
    ep.n_threads = 2;
    ep.kld_base_out = o.kld_out;
    ep.kld_base = o.base;
    ep.router_base_out = o.router_out;
    ep.router_base = o.router_in;
    th_context_params cp = th_context_default_params();
    th_eval_context_params(&ep, &cp);
    cp.n_threads = 2;
    th_context *ctx;
    th_status s = th_context_new(m, &cp, &ctx);
    if (s) return s;
    s = th_eval_run(m, ctx, tok, n, &ep, r);
    th_context_free(ctx);
    return s;
}

/* A copy of src at dst with the float at index idx of tensor `name` changed by +delta. */
static bool perturbed_copy(const char *src, const char *dst, const char *name, int64_t idx, float delta) {
    gguf_file *g;
    if (gguf_open(src, &g) != TH_OK) return false;
    const gguf_tensor *t = gguf_find_tensor(g, name);
    uint64_t off = t ? g->data_offset + t->offset + 4 * (uint64_t)idx : 0;
    gguf_close(g);
    if (!t) return false;
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) { if (in) fclose(in); if (out) fclose(out); return false; }
    static uint8_t buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, got, out);
    fclose(in);
    float v;
    fseek(out, (long)off, SEEK_SET);
    FILE *rd = fopen(src, "rb");
    fseek(rd, (long)off, SEEK_SET);
    bool ok = fread(&v, 4, 1, rd) == 1;
    fclose(rd);
    v += delta;
    ok = ok && fwrite(&v, 4, 1, out) == 1;
    return fclose(out) == 0 && ok;
}

/* Reference run (writes both files), then the model itself and a perturbed copy. */
static void router_case(const char *arch) {
    char path[96];
    snprintf(path, sizeof path, "arch/%s/model-F32.gguf", arch);
    th_model *m = NULL, *p = NULL;
    if (th_model_load(fixture(path), NULL, &m) != TH_OK) SKIP("no %s fixture", arch);
    size_t n = 0;
    th_token *tok = gpl3_tokens(m, &n);
    if (!tok) { th_model_free(m); SKIP("no " GPL3); }
    char kld[64], rt[64], pert[64];
    snprintf(kld, sizeof kld, "/tmp/th_moe_%d.kld", (int)getpid());
    snprintf(rt, sizeof rt, "/tmp/th_moe_%d.rt", (int)getpid());
    snprintf(pert, sizeof pert, "/tmp/th_moe_%d.gguf", (int)getpid());
    th_eval_result r;
    /* two chunks a pass (-b 128), so rows of different chunks share a batch */
    ropts ref = { .n_ctx = 64, .n_chunks = 6, .n_batch = 128, .kld_out = kld, .router_out = rt };
    th_status s = run(m, tok, n, ref, &r);
    CHECK(s == TH_OK, "%s reference: %s", arch, th_last_error());
    if (!s) th_eval_result_free(&r);
    th_kld_base *b = NULL;
    CHECK(th_kld_base_open(kld, &b) == TH_OK, "%s", th_last_error());
    if (b) {
        /* the same model: the same experts everywhere (one chunk a pass, then four passes a
         * chunk: the first pass of each chunk has no scored rows) */
        for (int nb = 64; nb >= 16; nb /= 4) {
            s = run(m, NULL, 0, (ropts){ .n_batch = nb, .base = b, .router_in = rt }, &r);
            CHECK(s == TH_OK, "%s self: %s", arch, th_last_error());
            if (!s) {
                CHECK(r.n_router_layers == 2 && r.router_k == 2 && r.router_n_expert == 8, "%d layers k %d of %d",
                      r.n_router_layers, r.router_k, r.router_n_expert);
                for (int32_t i = 0; i < r.n_router_layers; i++) {
                    CHECK(r.router[i].layer == i && r.router[i].n_positions == 6 * 31, "%lld", (long long)r.router[i].n_positions);
                    CHECK(r.router[i].n_flips == 0, "%s self: layer %d has %lld flips", arch, i, (long long)r.router[i].n_flips);
                }
                th_eval_result_free(&r);
            }
        }
        /* expert 3's router row in layer 1, first column, changed by 0.5 */
        int64_t E = th_model_n_embd(m);
        CHECK(perturbed_copy(fixture(path), pert, "blk.1.ffn_gate_inp.weight", 3 * E, 0.5f), "copy");
        if (th_model_load(pert, NULL, &p) == TH_OK) {
            s = run(p, NULL, 0, (ropts){ .base = b, .router_in = rt }, &r);
            CHECK(s == TH_OK, "%s perturbed: %s", arch, th_last_error());
            if (!s && r.n_router_layers == 2) {
                const th_router_layer *L0 = &r.router[0], *L1 = &r.router[1];
                CHECK(L0->n_flips == 0, "layer 0 flips %lld", (long long)L0->n_flips);
                CHECK(L1->n_flips > 0 && L1->n_flips < L1->n_positions, "%s layer 1 flips %lld of %lld", arch,
                      (long long)L1->n_flips, (long long)L1->n_positions);
                for (int64_t i = 0; i < L1->n_flips; i++) {
                    const th_router_flip *f = &L1->flips[i];
                    CHECK(f->gap >= 0 && f->chunk >= 0 && f->chunk < 6 && f->pos >= 32 && f->pos <= 62,
                          "flip %lld: chunk %d pos %d gap %g", (long long)i, f->chunk, f->pos, f->gap);
                }
                CHECK(L1->gap_min <= L1->gap_median && L1->gap_median <= L1->gap_max, "gaps");
                printf("  %s: layer 1 flips %lld of %lld, gap median %.5f\n", arch, (long long)L1->n_flips,
                       (long long)L1->n_positions, L1->gap_median);
                char *json = NULL;
                CHECK(th_eval_json(&r, &json) == TH_OK && strstr(json, "\"flip_list\""), "json");
                free(json);
            }
            if (!s) th_eval_result_free(&r);
            th_model_free(p);
        } else {
            CHECK(0, "perturbed copy does not load: %s", th_last_error());
        }
        th_kld_base_close(b);
    }
    unlink(kld);
    unlink(rt);
    unlink(pert);
    free(tok);
    th_model_free(m);
}

static void test_router_olmoe(void) { router_case("olmoe"); }
static void test_router_qwen3moe(void) { router_case("qwen3moe"); }

/* The router file parser on hand-made bytes. */
static void test_router_file_parse(void) {
    int32_t h[8 + 1 + 2 * 3 * (2 + 3)];   /* header, 1 layer, 1 chunk of n_ctx 6 (2 scored), k 2 */
    int32_t hd[9] = { 0x54524854, 1, 6, 1, 2, 2, 4, 1, 0 };
    memset(h, 0, sizeof h);
    memcpy(h, hd, sizeof hd);
    size_t size = (9 + 2 * 5) * 4;
    th_router_file *f = NULL;
    CHECK(th_router_file_parse((const uint8_t *)h, size, "a.rt", &f) == TH_OK, "%s", th_last_error());
    if (f) { CHECK(th_router_file_check(f) == TH_OK, "%s", th_last_error()); th_router_file_close(f); }
    CHECK(th_router_file_parse((const uint8_t *)h, size - 4, "a.rt", &f) == TH_ERR_FORMAT &&
          strstr(th_last_error(), "a.rt") && strstr(th_last_error(), "truncated"), "%s", th_last_error());
    h[9] = 4;   /* expert id 4 of 4 */
    CHECK(th_router_file_parse((const uint8_t *)h, size, "a.rt", &f) == TH_OK, "%s", th_last_error());
    if (f) {
        CHECK(th_router_file_check(f) == TH_ERR_FORMAT && strstr(th_last_error(), "expert id 4"), "%s", th_last_error());
        th_router_file_close(f);
    }
    h[5] = 5;   /* k above n_expert */
    CHECK(th_router_file_parse((const uint8_t *)h, size, "a.rt", &f) == TH_ERR_FORMAT, "k");
    h[5] = 2;
    h[0] = 0;
    CHECK(th_router_file_parse((const uint8_t *)h, size, "a.rt", &f) == TH_ERR_FORMAT && strstr(th_last_error(), "THRT"), "magic");
}

/* A dense model has no routing to record: a clear error. */
static void test_router_dense_model(void) {
    th_model *m = NULL;
    if (th_model_load(fixture("tiny/tiny-F32.gguf"), NULL, &m) != TH_OK) SKIP("no tiny fixture");
    size_t n = 0;
    th_token *tok = gpl3_tokens(m, &n);
    char rt[64];
    snprintf(rt, sizeof rt, "/tmp/th_dense_%d.rt", (int)getpid());
    th_eval_result r;
    th_status s = run(m, tok, n, (ropts){ .n_ctx = 32, .n_chunks = 2, .router_out = rt }, &r);
    CHECK(s == TH_ERR_UNSUPPORTED && strstr(th_last_error(), "no mixture-of-experts layer"), "%d %s", s, th_last_error());
    CHECK(access(rt, F_OK) != 0, "partial router file left behind");
    if (!s) th_eval_result_free(&r);
    free(tok);
    th_model_free(m);
}

/* theseus imatrix's work on `model` (-c 128 --chunks 4) against the peer's file. */
static void imatrix_case(const char *model, const char *peer, double peer_ppl) {
    th_model *m = NULL;
    if (th_model_load(fixture(model), NULL, &m) != TH_OK) SKIP("no %s", model);
    size_t n = 0;
    th_token *tok = gpl3_tokens(m, &n);
    th_imatrix *ref = NULL, *im = NULL;
    th_status s = th_imatrix_load(peer, &ref);
    CHECK(s == TH_OK, "%s", th_last_error());
    th_imatrix_params ip = th_imatrix_default_params();
    ip.n_ctx = 128;
    ip.n_chunks = 4;
    th_context_params cp = th_context_default_params();
    th_imatrix_context_params(&ip, &cp);
    cp.n_threads = 2;
    th_context *ctx = NULL;
    double ppl = 0;
    if (!s && tok && th_context_new(m, &cp, &ctx) == TH_OK) {
        s = th_imatrix_compute(m, ctx, tok, n, &ip, &im, &ppl, NULL);
        CHECK(s == TH_OK, "%s", th_last_error());
    }
    if (im && ref) {
        CHECK(fabs(ppl - peer_ppl) <= 1e-4 * peer_ppl, "PPL %.4f vs llama-imatrix %.4f", ppl, peer_ppl);
        CHECK(th_imatrix_n_entries(im) == th_imatrix_n_entries(ref), "%d vs %d entries", th_imatrix_n_entries(im),
              th_imatrix_n_entries(ref));
        CHECK(th_imatrix_n_chunks(ref) == 4 && !strcmp(th_imatrix_dataset(ref), GPL3), "trailer");
        double worst = 0;
        for (int32_t i = 0; i < th_imatrix_n_entries(ref); i++) {
            const char *name = th_imatrix_entry_name(ref, i);
            int64_t na = 0, nb = 0;
            int32_t ca = 0, cb = 0;
            const float *a = th_imatrix_values(im, name, &na, &ca), *b = th_imatrix_values(ref, name, &nb, &cb);
            CHECK(a && na == nb && ca == cb, "%s: %lld values ncall %d vs %lld ncall %d", name, (long long)na, ca,
                  (long long)nb, cb);
            if (!a || na != nb) continue;
            for (int64_t j = 0; j < na; j++) {
                double e = fabs((double)a[j] - b[j]) / fmax(fabs((double)b[j]), 1e-6);
                if (e > worst) worst = e;
            }
        }
        CHECK(worst <= 2e-3, "worst relative difference %.3g", worst);
        printf("  %s: %d entries, worst relative difference %.2g, PPL %.4f (llama-imatrix %.4f)\n", model,
               th_imatrix_n_entries(ref), worst, ppl, peer_ppl);
        /* written and read back: the same values */
        char path[64];
        snprintf(path, sizeof path, "/tmp/th_imatrix_%d.dat", (int)getpid());
        th_imatrix *back = NULL;
        CHECK(th_imatrix_write(im, path, GPL3) == TH_OK && th_imatrix_load(path, &back) == TH_OK, "%s", th_last_error());
        if (back) {
            int64_t nb = 0;
            const char *name = th_imatrix_entry_name(ref, 0);
            const float *x = th_imatrix_values(back, name, &nb, NULL), *y = th_imatrix_values(im, name, NULL, NULL);
            CHECK(x && y && !memcmp(x, y, (size_t)nb * 4), "round trip");
            th_imatrix_free(back);
        }
        unlink(path);
    }
    th_context_free(ctx);
    th_imatrix_free(im);
    th_imatrix_free(ref);
    free(tok);
    th_model_free(m);
}

static void test_imatrix_tiny(void) { imatrix_case("tiny/tiny-F32.gguf", "tests/peer/tiny-F32-c128.imatrix.dat", 4227.5016); }
static void test_imatrix_olmoe(void) {
    imatrix_case("arch/olmoe/model-F32.gguf", "tests/peer/olmoe-F32-c128.imatrix.dat", 351786.8877);
}

static void test_imatrix_parse(void) {
    uint8_t d[64];
    size_t o = 0;
    int32_t v[] = { 1, 3 };
    memcpy(d, v, 8); o = 8;
    memcpy(d + o, "abc", 3); o += 3;
    int32_t nc[] = { 2, 2 };
    memcpy(d + o, nc, 8); o += 8;
    float f[] = { 1.5f, 2.5f };
    memcpy(d + o, f, 8); o += 8;
    th_imatrix *im = NULL;
    CHECK(th_imatrix_parse(d, o, "x.dat", &im) == TH_OK, "%s", th_last_error());
    if (im) {
        int64_t n = 0;
        const float *x = th_imatrix_values(im, "abc", &n, NULL);
        CHECK(x && n == 2 && x[1] == 2.5f, "values");
        th_imatrix_free(im);
    }
    CHECK(th_imatrix_parse(d, o - 1, "x.dat", &im) == TH_ERR_FORMAT && strstr(th_last_error(), "x.dat") && !im, "cut");
    CHECK(th_imatrix_parse(d, o + 3, "x.dat", &im) == TH_ERR_FORMAT && strstr(th_last_error(), "trailer"), "trailer");
    d[0] = 0;
    CHECK(th_imatrix_parse(d, o, "x.dat", &im) == TH_ERR_FORMAT, "no entries");
}

int main(void) {
    RUN(test_router_file_parse);
    RUN(test_router_olmoe);
    RUN(test_router_qwen3moe);
    RUN(test_router_dense_model);
    RUN(test_imatrix_parse);
    RUN(test_imatrix_tiny);
    RUN(test_imatrix_olmoe);
    return check_total_failed ? 1 : 0;
}
