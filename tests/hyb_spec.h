/* hyb_spec.h — the hybrid models' speculative-decoding check, shared by
 * test_hybrid.c (CPU) and test_cuda_hybrid.c (GPU): greedy generation through the
 * runtime with n-gram, same-file draft and layer-skip drafts equals plain greedy
 * generation token for token (rejected drafts roll the recurrent state back from
 * its snapshots; the runtime sets rs_snapshots for speculative decoding). Four
 * requests in four slots at once, repetitive prompts so the n-gram drafter drafts.
 * Include after check.h and theseus.h. */
#ifndef TH_TEST_HYB_SPEC_H
#define TH_TEST_HYB_SPEC_H

#include <stdint.h>
#include <string.h>

typedef struct { th_token tok[128]; int n; th_status st; } hgen;

static void hyb_on_tok(const th_event *ev, void *user) {
    hgen *g = user;
    if (ev->kind == TH_EVENT_TOKEN && g->n < 128) g->tok[g->n++] = ev->token;
    if (ev->kind == TH_EVENT_END) g->st = ev->status;
}

/* nreq requests (40-token prompts, 48 tokens each) through a runtime on m (on the
 * GPU when gpu), speculative decoding sp (NULL: none); their tokens into out and
 * the runtime's drafted count into *drafted. */
static bool hyb_spec_run(th_model *m, bool gpu, const th_spec_params *sp, hgen *out, int nreq, uint64_t *drafted) {
    th_runtime_params p = th_runtime_default_params();
    p.context.n_threads = 2;
    p.context.kv_type = TH_KV_F32;
    p.context.gpu = gpu;
    p.n_slots = nreq;
    p.slot_ctx = 256;
    p.n_batch = 128;
    p.batch_invariant = true;
    if (sp) p.spec = *sp;
    th_runtime *rt = NULL;
    if (th_runtime_new(m, &p, &rt)) { fprintf(stderr, "runtime: %s\n", th_last_error()); return false; }
    th_request *rq[8] = { 0 };
    bool ok = nreq <= 8;
    for (int i = 0; i < nreq && ok; i++) {
        th_token pr[40];
        for (int j = 0; j < 40; j++) pr[j] = 3 + (j % (5 + i)) * 11 + i;   /* repetitive: n-grams to draft */
        th_request_params rp = th_request_default_params();
        rp.max_tokens = 48;
        rp.on_event = hyb_on_tok;
        rp.user = &out[i];
        memset(&out[i], 0, sizeof out[i]);
        ok = th_runtime_submit(rt, &rp, pr, 40, &rq[i]) == TH_OK;
    }
    for (int guard = 0; ok && guard < 100000; guard++) {
        bool all = true;
        for (int i = 0; i < nreq; i++) all &= th_request_done(rq[i]);
        if (all) break;
        if (th_runtime_step(rt, NULL)) { fprintf(stderr, "step: %s\n", th_last_error()); ok = false; }
    }
    for (int i = 0; i < nreq && i < 8; i++) {
        ok = ok && rq[i] && th_request_status(rq[i]) == TH_OK;
        th_request_release(rq[i]);
    }
    th_runtime_stats st;
    th_runtime_stats_get(rt, &st);
    if (drafted) *drafted = st.spec_drafted;
    th_runtime_free(rt);
    return ok;
}

/* The check: m and d (the draft, the same file) loaded by the caller, freed here. */
static void hyb_check_speculative(th_model *m, th_model *d, bool gpu) {
    CHECK(m && d, "models");
    if (!m || !d) { th_model_free(m); th_model_free(d); return; }
    enum { NR = 4 };
    hgen plain[NR], g[NR];
    CHECK(hyb_spec_run(m, gpu, NULL, plain, NR, NULL), "plain run");
    th_spec_params sps[3] = { { .kind = TH_SPEC_NGRAM }, { .kind = TH_SPEC_DRAFT, .draft = d, .draft_max = 6 },
                              { .kind = TH_SPEC_LAYERS, .layers = "0-1", .draft_max = 4 } };
    const char *names[3] = { "ngram", "draft", "layers 0-1" };
    for (int k = 0; k < 3; k++) {
        uint64_t drafted = 0;
        bool ok = hyb_spec_run(m, gpu, &sps[k], g, NR, &drafted);
        int same = 0;
        for (int i = 0; ok && i < NR; i++)
            same += g[i].n == plain[i].n && !memcmp(g[i].tok, plain[i].tok, (size_t)g[i].n * sizeof(th_token));
        printf("  qwen35%s %s: %d/%d requests identical to plain greedy, %llu drafted\n", gpu ? " GPU" : "", names[k], same,
               NR, (unsigned long long)drafted);
        CHECK(ok && same == NR && drafted > 0, "%s: %d/%d identical, %llu drafted", names[k], same, NR,
              (unsigned long long)drafted);
    }
    th_model_free(m);
    th_model_free(d);
}

#endif
