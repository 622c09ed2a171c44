/* test_search.c — `theseus search` (src/search/) on small fixtures, in seconds.
 *   search_tiny: tiny-F16 under a KLD gate: the best assignment passes the gate and is
 *     smaller than the source; loading the source with BEST.precision as a load-time
 *     override (the precision engine, not the search) and evaluating it against the
 *     gate's base file gives the same KLD, within the budget; a resumed run redoes no
 *     evaluation and writes the same config; the PNG has a valid signature and chunks.
 *   search_moe_near_tie: olmoe F32 with layer 1's router changed so that all 8 experts
 *     score almost alike (row e = row 0 + 1e-3 noise): a near tie on the top-2 boundary
 *     at every position. The calibration slice is the gate's text here. With --max-flips 0, every unit whose lowering flipped
 *     an expert choice keeps the source type, units that reach no router (layer 1's
 *     experts, output.weight) are lowered, the summary reports the flips; the flips'
 *     reference gaps are below 1e-5 (the unperturbed model's are all above: its flips
 *     are ordinary ones), and layer 1's attention, which reaches only layer 1's router,
 *     flips it. (Equal-ish rows make a tie that most perturbations cannot move: their
 *     score difference is (w_a - w_b).dx, small; still a few positions flip.)
 *   layer_io: th_context_set_layer_io (the runtime side of the search's layer resume) on
 *     tiny-F16: a batch started at layer 2 (or at the head) from the hidden states a full
 *     run saved there gives the full run's logits bit for bit; started from another
 *     layer's states it does not; bad arguments are refused.
 * The log lines are read with the search's own record reader (th_slog_parse). */
#include "check.h"
#include "theseus.h"
#include "search/search_int.h"

#include "context.h"

#include <string.h>
#include <unistd.h>

static const char *TEXT = "/usr/share/common-licenses/GPL-3";

static th_token *tokens_of(th_model *m, size_t *n) {
    size_t len = 0;
    char *text = check_read_file(TEXT, &len);
    if (!text) return NULL;
    size_t cap = len + 16;
    th_token *t = malloc(cap * sizeof *t);
    if (t && th_tokenize(m, text, len, true, false, t, cap, n) != TH_OK) { free(t); t = NULL; }
    free(text);
    return t;
}

static th_status run_search(const char *model, const char *types, double max_kld, int32_t max_flips, int32_t calib_ctx,
                            int32_t calib_chunks, const char *log, const char *resume, th_search_result *r) {
    th_model *m;
    th_model_params mp = th_model_default_params();
    th_status s = th_model_load(model, &mp, &m);
    if (s) return s;
    size_t n = 0;
    th_token *tok = tokens_of(m, &n);
    th_search_params p = th_search_default_params();
    p.source_path = model;
    p.max_kld = max_kld;
    p.max_flips = max_flips;
    p.types = types;
    p.n_ctx = 128;
    p.n_chunks = 4;
    p.calib_ctx = calib_ctx;
    p.calib_chunks = calib_chunks;
    p.max_gate_evals = 8;
    p.log_path = log;
    p.resume_path = resume;
    s = tok ? th_search_run(m, tok, n, &p, r) : TH_ERR_IO;
    free(tok);
    th_model_free(m);
    return s;
}

static bool write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

static void search_tiny(void) {
    if (access(TEXT, R_OK)) SKIP("no %s", TEXT);
    const char *src = fixture("tiny/tiny-F16.gguf");
    char dir[] = "/tmp/th_search_XXXXXX";
    if (!mkdtemp(dir)) SKIP("no temp dir");
    char log[128], cfg[160], png[160];
    snprintf(log, sizeof log, "%s/s.jsonl", dir);
    snprintf(cfg, sizeof cfg, "%s/best.precision", dir);
    snprintf(png, sizeof png, "%s/f.png", dir);
    th_search_result r;
    th_status s = run_search(src, "Q4_0,Q4_K,Q8_0", 0.002, -1, 64, 2, log, NULL, &r);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (s) return;
    CHECK(r.best.bytes > 0 && r.best.feasible, "a feasible best");
    CHECK(r.best.gate <= 0.002, "gate %g", r.best.gate);
    CHECK(r.best.bytes < r.source_bytes / 2, "best %llu of %llu bytes", (unsigned long long)r.best.bytes,
          (unsigned long long)r.source_bytes);
    CHECK(r.n_sens > 30 && r.n_gate > 3, "%lld sens, %lld gate", (long long)r.n_sens, (long long)r.n_gate);
    CHECK(write_file(cfg, r.config));
    CHECK(th_search_plot(&r, png) == TH_OK, "%s", th_last_error());
    size_t plen = 0;
    char *pb = check_read_file(png, &plen);
    CHECK(pb && plen > 64 && !memcmp(pb, "\x89PNG\r\n\x1a\n", 8) && !memcmp(pb + 12, "IHDR", 4) &&
          !memcmp(pb + plen - 8, "IEND", 4), "PNG structure");
    free(pb);
    /* the written config through the precision engine's load-time override */
    th_model_params mp = th_model_default_params();
    mp.precision_path = cfg;
    mp.source_path = src;
    th_model *m = NULL;
    char gate[160];
    snprintf(gate, sizeof gate, "%s.gate.kld", log);
    th_kld_base *b = NULL;
    s = th_model_load(src, &mp, &m);
    CHECK(s == TH_OK, "%s", th_last_error());
    CHECK(th_kld_base_open(gate, &b) == TH_OK, "%s", th_last_error());
    if (m && b) {
        th_eval_params ep = th_eval_default_params();
        ep.n_ctx = 0;
        ep.kld_base = b;
        th_context_params cp = th_context_default_params();
        th_eval_context_params(&ep, &cp);
        th_context *ctx = NULL;
        th_eval_result er;
        CHECK(th_context_new(m, &cp, &ctx) == TH_OK);
        if (ctx && th_eval_run(m, ctx, th_kld_base_tokens(b), 0, &ep, &er) == TH_OK) {
            CHECK(er.kld.kld <= 0.002, "independent KLD %g", er.kld.kld);
            CHECK_NEAR(er.kld.kld, r.best.kld, 1e-6 + 1e-3 * r.best.kld);
            th_eval_result_free(&er);
        }
        th_context_free(ctx);
    }
    th_kld_base_close(b);
    th_model_free(m);
    /* resume: nothing measured again, the same answer */
    th_search_result r2;
    s = run_search(src, "Q4_0,Q4_K,Q8_0", 0.002, -1, 64, 2, log, log, &r2);
    CHECK(s == TH_OK, "%s", th_last_error());
    if (!s) {
        CHECK(r2.n_sens_reused == r2.n_sens, "%lld of %lld reused", (long long)r2.n_sens_reused, (long long)r2.n_sens);
        CHECK(r2.n_gate_reused == r2.n_gate, "%lld of %lld reused", (long long)r2.n_gate_reused, (long long)r2.n_gate);
        CHECK(!strcmp(r2.config, r.config), "same config after resume");
        th_search_result_free(&r2);
    }
    th_search_result_free(&r);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
}

/* ---- MoE near tie */

static bool make_near_tie(const char *src, const char *dst) {
    size_t len = 0;
    char *data = check_read_file(src, &len);
    th_file *f = NULL;
    if (!data || th_file_open(src, &f) != TH_OK) { free(data); return false; }
    bool ok = false;
    for (int64_t i = 0; i < th_file_n_tensors(f); i++) {
        th_tensor_info ti;
        if (th_file_tensor(f, i, &ti) || strcmp(ti.name, "blk.1.ffn_gate_inp.weight") || strcmp(ti.type, "F32")) continue;
        float *w = (float *)(data + ti.offset);   /* [n_embd, n_expert]: row e = expert e's scores */
        uint64_t ne0 = ti.ne[0];
        uint32_t x = 12345;
        for (uint64_t e = 1; e < ti.ne[1]; e++)
            for (uint64_t j = 0; j < ne0; j++) {
                x = x * 1664525u + 1013904223u;
                w[e * ne0 + j] = w[j] + 1e-3f * ((float)(x >> 8) / 16777216.0f - 0.5f);
            }
        ok = true;
    }
    th_file_close(f);
    FILE *o = ok ? fopen(dst, "wb") : NULL;
    ok = o && fwrite(data, 1, len, o) == len;
    if (o && fclose(o)) ok = false;
    free(data);
    return ok;
}

typedef struct flipstat { int units_flipping, flipping_kept, flipping_lowered, layer1_tie; double gap_min; } flipstat;

/* The type the config gives tensor `name` (expert e, or -1), resolved by the precision
 * engine's own rules over the model file's tensors; UINT32_MAX if not found. */
static uint32_t type_in(const char *cfg_text, const char *model, const char *name, int32_t e) {
    gguf_file *g = NULL;
    th_prec_file pf;
    th_prec_config *c = NULL;
    th_prec_assign a;
    uint32_t t = UINT32_MAX;
    if (gguf_open(model, &g)) return t;
    if (!th_prec_file_read(g, &pf)) {
        if (!th_prec_parse(cfg_text, strlen(cfg_text), "test", &c) && !th_prec_resolve(c, pf.t, pf.n, NULL, &a)) {
            for (size_t i = 0; i < pf.n; i++)
                if (!strcmp(pf.t[i].name, name)) t = th_prec_type_of(&a, i, e < 0 ? 0 : (uint32_t)e);
            th_prec_assign_free(&a);
        }
        th_prec_config_free(c);
        th_prec_file_free(&pf);
    }
    gguf_close(g);
    return t;
}

static flipstat read_flips(const char *log, const char *cfg_text, const char *model) {
    flipstat st = { 0, 0, 0, 0, 1e9 };
    FILE *f = fopen(log, "rb");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while (f && (n = getline(&line, &cap, f)) > 0) {
        th_slog_rec r;
        if (!th_slog_parse(line, (size_t)n, &r) || r.kind != TH_SLOG_SENS || r.flips == 0) continue;
        st.units_flipping++;
        if (r.gap_min < st.gap_min) st.gap_min = r.gap_min;
        /* layer 1's attention reaches only layer 1's router: its flips are that router's */
        if (!strncmp(r.tensor, "blk.1.attn_", 11) && r.gap_min < 1e-5) st.layer1_tie++;
        uint32_t want, got = type_in(cfg_text, model, r.tensor, r.expert);
        if (th_prec_type_from_name(r.type, &want) && got == want) st.flipping_lowered++;
        else if (got == TH_F32) st.flipping_kept++;
    }
    free(line);
    if (f) fclose(f);
    return st;
}

static void search_moe_near_tie(void) {
    if (access(TEXT, R_OK)) SKIP("no %s", TEXT);
    const char *src = fixture("arch/olmoe/model-F32.gguf");
    char dir[] = "/tmp/th_search_moe_XXXXXX";
    if (!mkdtemp(dir)) SKIP("no temp dir");
    char tie[128], log[128], log0[128];
    snprintf(tie, sizeof tie, "%s/tie.gguf", dir);
    snprintf(log, sizeof log, "%s/tie.jsonl", dir);
    snprintf(log0, sizeof log0, "%s/plain.jsonl", dir);
    CHECK(make_near_tie(src, tie), "writing the perturbed model");
    th_search_result r, r0;
    th_status s = run_search(tie, "Q8_0", 10.0, 0, 128, 4, log, NULL, &r);
    CHECK(s == TH_OK, "%s", th_last_error());
    th_status s0 = run_search(src, "Q8_0", 10.0, 0, 128, 4, log0, NULL, &r0);
    CHECK(s0 == TH_OK, "%s", th_last_error());
    if (s || s0) return;
    flipstat st = read_flips(log, r.config, tie), st0 = read_flips(log0, r0.config, src);
    printf("  near tie: %d units flip (smallest gap %.3g, %d of layer 1's attention at a gap < 1e-5); unperturbed: "
           "%d (smallest gap %.3g)\n", st.units_flipping, st.gap_min, st.layer1_tie, st0.units_flipping, st0.gap_min);
    CHECK(st.gap_min < 1e-5 && st0.gap_min > 1e-5, "the flips at the near tie are the perturbed router's");
    CHECK(st.layer1_tie > 0, "layer 1's router flips");
    CHECK(st0.layer1_tie == 0);
    CHECK(st.flipping_lowered == 0, "%d flipping units lowered", st.flipping_lowered);
    CHECK(st.flipping_kept == st.units_flipping);
    CHECK(r.best.flips == 0, "best has %lld flips", (long long)r.best.flips);
    CHECK(strstr(r.summary, "router flips") != NULL, "summary reports the flips");
    /* downstream of layer 1's router: nothing there can flip it, so it is lowered */
    CHECK(type_in(r.config, tie, "output.weight", -1) == TH_Q8_0, "output lowered:\n%s", r.config);
    for (int32_t e = 0; e < 8; e++)
        CHECK(type_in(r.config, tie, "blk.1.ffn_down_exps.weight", e) == TH_Q8_0, "layer 1 down expert %d lowered", e);
    if (getenv("TH_KEEP")) printf("  kept %s\n%s\n%s\n", dir, r.config, r.summary);
    th_search_result_free(&r);
    th_search_result_free(&r0);
    if (getenv("TH_KEEP")) return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
}

/* One batch of n tokens through a fresh context, optionally resumed at `from` from
 * x_in and/or saving into x_out; the last token's logits copied to out. */
static th_status layer_io_run(th_model *m, const th_token *tok, int32_t n, int32_t from, const float *x_in,
                              float **x_out, float *out) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.n_threads = 2;
    th_context *c;
    th_status s = th_context_new(m, &cp, &c);
    if (s) return s;
    int32_t pos[64], seq[64];
    int8_t want[64];
    for (int32_t i = 0; i < n; i++) { pos[i] = i; seq[i] = 0; want[i] = i == n - 1; }
    th_batch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .logits = want };
    s = th_context_set_layer_io(c, from, x_in, x_out);
    if (!s) s = th_decode(c, &b);
    const float *lg = s ? NULL : th_get_logits(c, n - 1);
    if (lg) memcpy(out, lg, (size_t)m->hp.n_vocab * sizeof *out);
    else if (!s) s = TH_ERR_ARG;
    th_context_free(c);
    return s;
}

static void layer_io(void) {
    const char *path = "../shared/fixtures/tiny/tiny-F16.gguf";
    if (access(path, R_OK)) SKIP("no %s", path);
    th_model *m;
    th_model_params mp = th_model_default_params();
    CHECK(th_model_load(path, &mp, &m) == TH_OK, "load: %s", th_last_error());
    if (check_cur_failed) return;
    size_t nt = 0;
    th_token *tok = tokens_of(m, &nt);
    const int32_t n = 48, L = m->hp.n_layer, E = (int32_t)m->hp.n_embd, V = (int32_t)m->hp.n_vocab;
    CHECK(tok && nt >= (size_t)n && L >= 3, "text of %zu tokens, %d layers", nt, L);
    float **x = calloc((size_t)L + 1, sizeof *x), *mem = malloc((size_t)(L + 1) * n * E * sizeof *mem);
    float *full = malloc((size_t)V * sizeof *full), *got = malloc((size_t)V * sizeof *got);
    if (!check_cur_failed && x && mem && full && got) {
        for (int32_t l = 0; l <= L; l++) x[l] = mem + (size_t)l * n * E;
        CHECK(layer_io_run(m, tok, n, 0, NULL, x, full) == TH_OK, "full run: %s", th_last_error());
        CHECK(layer_io_run(m, tok, n, 2, x[2], NULL, got) == TH_OK, "from layer 2: %s", th_last_error());
        CHECK(!memcmp(full, got, (size_t)V * sizeof *got), "from layer 2: logits differ from the full run's");
        CHECK(layer_io_run(m, tok, n, L, x[L], NULL, got) == TH_OK, "head only: %s", th_last_error());
        CHECK(!memcmp(full, got, (size_t)V * sizeof *got), "head only: logits differ from the full run's");
        CHECK(layer_io_run(m, tok, n, 2, x[1], NULL, got) == TH_OK, "from layer 2 (layer 1's states)");
        CHECK(memcmp(full, got, (size_t)V * sizeof *got) != 0, "layer 1's states at layer 2: same logits (not resumed?)");
        CHECK(layer_io_run(m, tok, n, L + 1, x[0], NULL, got) == TH_ERR_ARG, "layer past the model accepted");
        CHECK(layer_io_run(m, tok, n, 1, NULL, NULL, got) == TH_ERR_ARG, "resume without states accepted");
    }
    free(x); free(mem); free(full); free(got); free(tok);
    th_model_free(m);
}

int main(void) {
    RUN(layer_io);
    RUN(search_tiny);
    RUN(search_moe_near_tie);
    return CHECK_DONE();
}
