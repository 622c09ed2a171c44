/* test_hf_load.c — how a Hugging Face directory is loaded (src/hf/): weights whose
 * bytes are usable as they are stay in the safetensors map (the tensor points
 * outside the in-memory GGUF, at bytes equal to the file's), transformed ones
 * (Q/K permutation, 1-D norms to F32, stacked experts) have memory of their own;
 * quantize-on-load (th_model_params.hf_type) gives logits byte-identical to
 * th_hf_convert + th_quantize_file of the same type, then load; --type on a
 * GGUF is an error. */
#include "check.h"
#include "logits.h"
#include "hf/hf.h"
#include "hf/safetensors.h"
#include "gguf/gguf.h"
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *hf_dir(const char *family) {
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ & 3];
    const char *root = getenv("HF_FIXTURES");
    snprintf(b, sizeof buf[0], "%s/%s", root && *root ? root : "tests/fixtures/hf", family);
    return b;
}

static bool inside(const gguf_file *f, const void *p) {
    return (const uint8_t *)p >= f->base && (const uint8_t *)p < f->base + f->size;
}

/* gguf name, HF name, whether it must be referenced in place */
static const struct { const char *gg, *hf; bool in_place; } LLAMA[] = {
    { "blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", true },
    { "blk.1.attn_v.weight", "model.layers.1.self_attn.v_proj.weight", true },
    { "blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight", true },
    { "token_embd.weight", "model.embed_tokens.weight", true },
    { "blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", false },   /* rows permuted */
    { "blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", false },
};

static void test_mapped_in_place(void) {
    gguf_file *g = NULL;
    st_set *st = NULL;
    CHECK(hf_open_as_gguf(hf_dir("llama"), &g) == TH_OK, "%s", th_last_error());
    CHECK(st_set_open(hf_dir("llama"), &st) == TH_OK, "%s", th_last_error());
    if (!g || !st) { gguf_close(g); st_set_close(st); return; }
    for (size_t i = 0; i < sizeof LLAMA / sizeof LLAMA[0]; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, LLAMA[i].gg);
        const st_tensor *s = st_set_find(st, LLAMA[i].hf, NULL);
        CHECK(t && s, "%s / %s missing", LLAMA[i].gg, LLAMA[i].hf);
        if (!t || !s) continue;
        CHECK(inside(g, t->data) == !LLAMA[i].in_place, "%s: %s", LLAMA[i].gg,
              LLAMA[i].in_place ? "copied into the GGUF (wanted in place)" : "not given memory of its own");
        if (LLAMA[i].in_place) CHECK(t->nbytes == s->nbytes && !memcmp(t->data, s->data, (size_t)s->nbytes), "%s: bytes differ", LLAMA[i].gg);
        else CHECK(t->nbytes == s->nbytes && memcmp(t->data, s->data, (size_t)s->nbytes), "%s: permuted bytes equal the file's", LLAMA[i].gg);
    }
    /* 1-D weights are written as F32 (own memory), stacked experts too */
    const gguf_tensor *n = gguf_find_tensor(g, "blk.0.attn_norm.weight");
    CHECK(n && inside(g, n->data), "attn_norm should have memory of its own");
    gguf_close(g);
    st_set_close(st);
    g = NULL;
    CHECK(hf_open_as_gguf(hf_dir("mixtral"), &g) == TH_OK, "%s", th_last_error());
    const gguf_tensor *e = g ? gguf_find_tensor(g, "blk.0.ffn_up_exps.weight") : NULL;
    CHECK(e && inside(g, e->data), "stacked experts should have memory of their own");
    gguf_close(g);
}

static float *logits_of(th_model *m, const thlg *g) {
    th_context_params cp = th_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = (uint32_t)g->n;
    cp.kv_type = TH_KV_F32;
    cp.n_threads = 2;
    return decode_all_logits(m, g->tok, (int)g->n, &cp);
}

/* --type T at load == convert --type T, then load: the same bytes of logits. */
static void test_quantize_on_load(void) {
    const char *fams[] = { "llama", "qwen3moe" };
    const char *types[] = { "Q8_0", "Q4_K_M" };
    char tmp[256], f_path[300], q_path[300];
    snprintf(tmp, sizeof tmp, "/tmp/test_hf_load.%d", (int)getpid());
    mkdir(tmp, 0755);
    snprintf(f_path, sizeof f_path, "%s/f.gguf", tmp);
    snprintf(q_path, sizeof q_path, "%s/q.gguf", tmp);
    for (size_t i = 0; i < 2; i++) {
        char gp[600];
        snprintf(gp, sizeof gp, "%s/golden.logits", hf_dir(fams[i]));
        thlg g;
        if (!thlg_load(gp, &g)) { CHECK(0, "cannot read %s", gp); continue; }
        th_quantize_params qp = th_quantize_default_params();
        qp.type = types[i];
        CHECK(th_hf_convert(hf_dir(fams[i]), f_path) == TH_OK && th_quantize_file(f_path, q_path, &qp) == TH_OK, "%s",
              th_last_error());
        th_model_params mp = th_model_default_params();
        mp.hf_type = types[i];
        th_model *a = NULL, *b = NULL;
        CHECK(th_model_load(hf_dir(fams[i]), &mp, &a) == TH_OK, "%s --type %s: %s", fams[i], types[i], th_last_error());
        CHECK(th_model_load(q_path, NULL, &b) == TH_OK, "%s", th_last_error());
        float *la = a ? logits_of(a, &g) : NULL, *lb = b ? logits_of(b, &g) : NULL;
        CHECK(la && lb);
        if (la && lb) {
            size_t nb = (size_t)g.n * (size_t)th_model_n_vocab(a) * sizeof(float);
            CHECK(th_model_n_vocab(a) == th_model_n_vocab(b) && !memcmp(la, lb, nb),
                  "%s: logits with --type %s at load differ from convert --type %s", fams[i], types[i], types[i]);
            /* and they are quantized: not the float directory's logits */
            double worst, top1;
            int wp;
            compare_logits(la, g.logits, (int)g.n, (int)g.nv, &worst, &wp, &top1);
            CHECK(worst > 0.0, "%s: --type %s gave the float logits", fams[i], types[i]);
            printf("  %-9s --type %-6s: logits equal convert+quantize; rel-L2 vs transformers f32 %.2e\n", fams[i], types[i], worst);
        }
        if (a) printf("  %-9s --type %-6s: loaded as '%s'\n", fams[i], types[i], th_model_desc(a));
        CHECK(i != 0 || (a && strstr(th_model_desc(a), "Q8_0")), "desc: %s", a ? th_model_desc(a) : "-");
        free(la);
        free(lb);
        th_model_free(a);
        th_model_free(b);
        thlg_free(&g);
    }
    /* --type on a GGUF is refused by name */
    th_model_params mp = th_model_default_params();
    mp.hf_type = "Q8_0";
    th_model *m = NULL;
    CHECK(th_model_load(q_path, &mp, &m) != TH_OK && strstr(th_last_error(), "--type"), "GGUF with hf_type: %s", th_last_error());
    th_model_free(m);
    mp.hf_type = "NOT_A_TYPE";
    CHECK(th_model_load(hf_dir("llama"), &mp, &m) != TH_OK && strstr(th_last_error(), "NOT_A_TYPE"), "bad type: %s", th_last_error());
    th_model_free(m);
    unlink(f_path);
    unlink(q_path);
    rmdir(tmp);
}

int main(void) {
    RUN(test_mapped_in_place);
    RUN(test_quantize_on_load);
    return CHECK_DONE();
}
