/* spec.c — the runtime's drafters for speculative decoding (spec.h has the
 * design): one table of operations, three drafters (n-gram lookup, a draft
 * model, the target's first layers), the per-slot set-up, the adaptive draft
 * length, and the vocabulary check of a draft model. Verification is step.c's.
 *
 * Adaptive length. Each slot keeps alpha, a running estimate of the chance that
 * a drafted token is accepted (its previous ones accepted): after a verification
 * with a accepted of n drafts, the round tested a + (a < n) tokens and alpha moves
 * a quarter of the way to a / tested. The slot then asks for the largest k with
 * alpha^k >= 1/4 (the k-th draft still has a one-in-four chance to be reached and
 * taken), between draft_min and its cap; alpha starts at 0.8 (k = 6). With
 * spec.fixed it always asks for its cap. */
#include "runtime/spec.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool rt_spec_test_accept_all = false;

enum { SPEC_DEFAULT_MAX = 8, SPEC_MAX = 64, NGRAM_DEFAULT = 3 };

typedef struct drafter_ops {
    /* proposals for the slots list[0..n) (each wants want[k] >= 1 tokens) */
    void (*propose)(rt_spec *sp, th_runtime *rt, const int32_t *list, const int32_t *want, int32_t n);
    void (*free)(rt_spec *sp);
} drafter_ops;

/* A model drafter's state: its context (one sequence a slot) and what each
 * sequence's KV holds; batch buffers of n_batch. */
typedef struct draft_model {
    th_model *m;
    th_context *ctx;
    th_token **hist;
    int32_t *n_hist, cap_hist;
    int32_t *fed;                /* catch-up: next index of the slot's text to feed */
    int32_t *row;                /* batch index of the slot's logits in the last decode, -1 */
    th_token *b_tok;
    int32_t *b_seq;
    int8_t *b_logits;
    int32_t n_batch, n_seq;
} draft_model;

struct rt_spec {
    th_spec_params p;            /* defaults filled in; layers copied */
    char *layers;
    const drafter_ops *ops;
    draft_model dm;              /* draft and layers */
    int32_t *list, *want;        /* [n_slots] scratch of rt_spec_propose */
};

const char *th_spec_kind_name(int32_t kind) {
    switch (kind) {
    case TH_SPEC_NONE: return "none";
    case TH_SPEC_NGRAM: return "ngram";
    case TH_SPEC_DRAFT: return "draft";
    case TH_SPEC_LAYERS: return "layers";
    }
    return NULL;
}

/* The slot's text as the drafter sees it: its history, then its next token. */
static inline th_token text_at(const rt_slot *sl, int32_t j) { return j < sl->n_hist ? sl->hist[j] : sl->next; }

/* ---------------------------------------------------------------- n-gram lookup */

/* The most recent earlier occurrence of the text's last g tokens (g from the
 * configured n down to 2, or 1 when n is 1) proposes the tokens that followed it. */
static int32_t ngram_one(const rt_spec *sp, const rt_slot *sl, int32_t want, th_token *out) {
    int32_t L = sl->n_hist + 1, g_min = sp->p.ngram == 1 ? 1 : 2;
    for (int32_t g = TH_MIN(sp->p.ngram, L - 1); g >= g_min; g--) {
        for (int32_t i = L - g - 1; i >= 0; i--) {
            int32_t k = 0;
            while (k < g && text_at(sl, i + k) == text_at(sl, L - g + k)) k++;
            if (k < g) continue;
            int32_t n = 0;
            for (int32_t j = i + g; j < L && n < want; j++) out[n++] = text_at(sl, j);
            return n;
        }
    }
    return 0;
}

static void ngram_propose(rt_spec *sp, th_runtime *rt, const int32_t *list, const int32_t *want, int32_t n) {
    for (int32_t k = 0; k < n; k++) {
        rt_slot *sl = &rt->slots[list[k]];
        sl->n_draft = ngram_one(sp, sl, want[k], sl->draft);
        sl->use_q = false;
    }
}

static void ngram_free(rt_spec *sp) { (void)sp; }

static const drafter_ops ngram_ops = { ngram_propose, ngram_free };

/* ---------------------------------------------------------------- model drafter */

static void dm_put(draft_model *d, int32_t *n, th_token t, int32_t seq, bool logits) {
    d->b_tok[*n] = t;
    d->b_seq[*n] = seq;
    d->b_logits[*n] = logits;
    (*n)++;
}

/* Decodes the draft batch; a batch of one gets a throw-away second row (sequence
 * n_seq, cleared after) so that the draft runs the same batched kernels as the
 * target's verification: a draft of the target's own weights then proposes what
 * the target computes (on the CPU one row takes kernels whose rounding differs). */
static th_status dm_decode(draft_model *d, int32_t nb) {
    if (nb == 1) dm_put(d, &nb, d->b_tok[0], d->n_seq, false);
    th_batch b = { .n_tokens = nb, .token = d->b_tok, .seq_id = d->b_seq, .logits = d->b_logits };
    th_status s = th_decode(d->ctx, &b);
    th_kv_seq_clear(d->ctx, d->n_seq);
    return s;
}

/* Slot i's next draft token from draft batch row `row`: the argmax for a greedy
 * request (q a point mass), else a draw from q under the draft sampler. */
static th_status dm_sample(draft_model *d, rt_slot *sl, int32_t row, int32_t n_vocab) {
    th_token t;
    if (!sl->dsmp) t = th_get_argmax(d->ctx, row);
    else {
        const float *lg = th_get_logits(d->ctx, row);
        t = lg ? th_sampler_sample_spec(sl->dsmp, lg, -1, NULL, sl->q + (size_t)sl->n_draft * (size_t)n_vocab, NULL) : -1;
    }
    if (t < 0) return TH_ERR_INTERNAL;
    sl->draft[sl->n_draft++] = t;
    return TH_OK;
}

uint32_t rt_spec_snapshots(const th_spec_params *p) {
    int32_t n = p->draft_max > 0 && p->draft_max <= SPEC_MAX ? p->draft_max : SPEC_DEFAULT_MAX;
    return (uint32_t)n + 2;
}

/* Puts the slot's text into its draft sequence: the KV keeps the common prefix
 * (one token less when all of it is there: its logits are needed again; a hybrid
 * draft whose recurrent state has no snapshot there starts again from 0). */
static void dm_sync(draft_model *d, th_runtime *rt, int32_t i) {
    rt_slot *sl = &rt->slots[i];
    int32_t L = sl->n_hist + 1, c = 0;
    while (c < d->n_hist[i] && c < L && d->hist[i][c] == text_at(sl, c)) c++;
    if (c == L) c--;
    if (th_kv_seq_truncate(d->ctx, i, c)) { th_kv_seq_clear(d->ctx, i); c = 0; }
    d->n_hist[i] = c;
    d->fed[i] = c;
}

/* Feeds every listed slot's text not yet in its draft KV (in chunks of n_batch)
 * and samples each one's first draft from its last token's row. */
static th_status dm_catch_up(draft_model *d, th_runtime *rt, const int32_t *list, int32_t n) {
    for (;;) {
        int32_t nb = 0;
        for (int32_t k = 0; k < n; k++) {
            int32_t i = list[k];
            rt_slot *sl = &rt->slots[i];
            int32_t L = sl->n_hist + 1;
            d->row[i] = -1;
            while (d->fed[i] < L && nb < d->n_batch - 1) {
                th_token t = text_at(sl, d->fed[i]);
                d->hist[i][d->n_hist[i]++] = t;
                if (++d->fed[i] == L) d->row[i] = nb;
                dm_put(d, &nb, t, i, d->fed[i] == L);
            }
        }
        if (nb == 0) return TH_OK;
        th_status s = dm_decode(d, nb);
        for (int32_t k = 0; !s && k < n; k++)
            if (d->row[list[k]] >= 0) s = dm_sample(d, &rt->slots[list[k]], d->row[list[k]], rt->n_vocab);
        if (s) return s;
    }
}

static void dm_propose(rt_spec *sp, th_runtime *rt, const int32_t *list, const int32_t *want, int32_t n) {
    draft_model *d = &sp->dm;
    for (int32_t k = 0; k < n; k++) {
        rt_slot *sl = &rt->slots[list[k]];
        sl->n_draft = 0;
        sl->use_q = sl->dsmp != NULL;
        dm_sync(d, rt, list[k]);
    }
    th_status s = dm_catch_up(d, rt, list, n);
    /* then one token a round for every slot that wants more (a drafted EOG ends a slot's proposal) */
    for (int32_t round = 1; !s; round++) {
        int32_t nb = 0;
        for (int32_t k = 0; k < n; k++) {
            int32_t i = list[k];
            rt_slot *sl = &rt->slots[i];
            d->row[i] = -1;
            if (sl->n_draft != round || round >= want[k] || th_token_is_eog(rt->m, sl->draft[round - 1])) continue;
            d->row[i] = nb;
            d->hist[i][d->n_hist[i]++] = sl->draft[round - 1];
            dm_put(d, &nb, sl->draft[round - 1], i, true);
        }
        if (nb == 0) break;
        s = dm_decode(d, nb);
        for (int32_t k = 0; !s && k < n; k++)
            if (d->row[list[k]] >= 0) s = dm_sample(d, &rt->slots[list[k]], d->row[list[k]], rt->n_vocab);
    }
    if (s) {   /* no proposals this step; the draft KV is rebuilt from the text next time */
        for (int32_t k = 0; k < n; k++) {
            rt->slots[list[k]].n_draft = 0;
            th_kv_seq_clear(d->ctx, list[k]);
            d->n_hist[list[k]] = 0;
        }
    }
}

static void dm_free(rt_spec *sp) {
    draft_model *d = &sp->dm;
    th_context_free(d->ctx);
    for (int32_t i = 0; d->hist && i < d->n_seq; i++) free(d->hist[i]);
    free(d->hist);
    free(d->n_hist);
    free(d->fed);
    free(d->row);
    free(d->b_tok);
    free(d->b_seq);
    free(d->b_logits);
}

static const drafter_ops model_ops = { dm_propose, dm_free };

static th_status dm_open(rt_spec *sp, th_runtime *rt) {
    draft_model *d = &sp->dm;
    const th_runtime_params *rp = &rt->p;
    d->m = sp->p.kind == TH_SPEC_DRAFT ? sp->p.draft : rt->m;
    int32_t n = rp->n_slots;
    d->n_seq = n;
    d->n_batch = rp->n_batch;
    d->cap_hist = rp->slot_ctx + sp->p.draft_max + 1;
    th_context_params cp = rp->context;
    cp.gpu = rp->context.gpu && !sp->p.draft_cpu;
    /* a layer-skip draft keeps the target's placement; another model's draft (its own
     * layer count) follows `gpu` */
    cp.gpu_layers = sp->p.draft_cpu || sp->p.kind == TH_SPEC_DRAFT ? NULL : rp->context.gpu_layers;
    cp.logits_argmax_only = false;
    cp.n_seq_max = (uint32_t)n + 1;   /* and the pad sequence (dm_decode) */
    cp.n_batch = (uint32_t)d->n_batch;
    uint64_t blk = cp.kv_block ? cp.kv_block : 16;
    uint64_t n_ctx = (uint64_t)n * ((uint64_t)d->cap_hist + blk) + 2 * blk;
    if (n_ctx > (1u << 24))
        return th_set_error(TH_ERR_ARG, "speculative decoding: the draft's KV cache of %llu tokens is above %u",
                            (unsigned long long)n_ctx, 1u << 24);
    cp.n_ctx = (uint32_t)n_ctx;
    cp.layers = sp->p.kind == TH_SPEC_LAYERS ? sp->layers : NULL;
    if (cp.rs_snapshots == 0) cp.rs_snapshots = rt_spec_snapshots(&sp->p);   /* hybrid drafts only use them */
    th_status s = th_context_new(d->m, &cp, &d->ctx);
    if (s) return s;
    d->hist = calloc((size_t)n, sizeof *d->hist);
    d->n_hist = calloc((size_t)n, sizeof *d->n_hist);
    d->fed = calloc((size_t)n, sizeof *d->fed);
    d->row = calloc((size_t)n, sizeof *d->row);
    d->b_tok = malloc((size_t)d->n_batch * sizeof *d->b_tok);
    d->b_seq = malloc((size_t)d->n_batch * sizeof *d->b_seq);
    d->b_logits = malloc((size_t)d->n_batch);
    bool ok = d->hist && d->n_hist && d->fed && d->row && d->b_tok && d->b_seq && d->b_logits;
    for (int32_t i = 0; ok && i < n; i++) ok = (d->hist[i] = malloc((size_t)d->cap_hist * sizeof(th_token))) != NULL;
    return ok ? TH_OK : th_set_error(TH_ERR_NOMEM, "speculative decoding: out of memory for the draft's buffers");
}

/* ---------------------------------------------------------------- vocabulary */

static int32_t piece(const th_model *m, th_token t, char *buf, int32_t cap) {
    int32_t k = th_token_to_piece(m, t, buf, cap, true);
    return k < 0 ? -1 : k;
}

th_status th_spec_check_vocab(const th_model *target, const th_model *draft) {
    if (!target || !draft) return th_set_error(TH_ERR_ARG, "th_spec_check_vocab: no model");
    int32_t nt = th_model_n_vocab(target), nd = th_model_n_vocab(draft), n = TH_MIN(nt, nd);
    char a[512], b[512];
    for (th_token t = 0; t < n; t++) {
        int32_t ka = piece(target, t, a, sizeof a), kb = piece(draft, t, b, sizeof b);
        if (ka == kb && (ka <= 0 || !memcmp(a, b, (size_t)ka))) continue;
        return th_set_error(TH_ERR_ARG, "the draft model's vocabulary differs from the target's at token %d: "
                                        "target '%.*s', draft '%.*s'", t, ka > 0 ? TH_MIN(ka, 64) : 0, a,
                            kb > 0 ? TH_MIN(kb, 64) : 0, b);
    }
    if (nt != nd) {
        const th_model *longer = nt > nd ? target : draft;
        int32_t k = piece(longer, n, a, sizeof a);
        return th_set_error(TH_ERR_ARG, "the draft model's vocabulary differs from the target's at token %d: the %s has "
                                        "'%.*s', the %s has %d tokens only", n, nt > nd ? "target" : "draft",
                            k > 0 ? TH_MIN(k, 64) : 0, a, nt > nd ? "draft" : "target", n);
    }
    return TH_OK;
}

/* ---------------------------------------------------------------- set-up */

static th_status check_params(const th_runtime *rt, th_spec_params *p) {
    if (!th_spec_kind_name(p->kind)) return th_set_error(TH_ERR_ARG, "speculative decoding: unknown kind %d", p->kind);
    if (p->draft_max == 0) p->draft_max = SPEC_DEFAULT_MAX;
    if (p->draft_min == 0) p->draft_min = 1;
    if (p->ngram == 0) p->ngram = NGRAM_DEFAULT;
    if (p->draft_max < 1 || p->draft_max > SPEC_MAX)
        return th_set_error(TH_ERR_ARG, "speculative decoding: draft_max %d is outside [1, %d]", p->draft_max, SPEC_MAX);
    if (p->draft_min < 1 || p->draft_min > p->draft_max)
        return th_set_error(TH_ERR_ARG, "speculative decoding: draft_min %d is outside [1, draft_max = %d]", p->draft_min,
                            p->draft_max);
    if (p->ngram < 1 || p->ngram > 64) return th_set_error(TH_ERR_ARG, "speculative decoding: n-gram size %d is outside [1, 64]", p->ngram);
    if (p->draft_max + rt->p.n_slots > rt->p.n_batch)
        return th_set_error(TH_ERR_ARG, "speculative decoding: draft_max %d and %d slots do not fit n_batch %d",
                            p->draft_max, rt->p.n_slots, rt->p.n_batch);
    if (p->kind == TH_SPEC_DRAFT && !p->draft) return th_set_error(TH_ERR_ARG, "speculative decoding: no draft model");
    if (p->kind == TH_SPEC_LAYERS && (!p->layers || !*p->layers))
        return th_set_error(TH_ERR_ARG, "speculative decoding: no layer list for the layer-skip draft");
    if (p->kind == TH_SPEC_DRAFT) return th_spec_check_vocab(rt->m, p->draft);
    return TH_OK;
}

th_status rt_spec_new(th_runtime *rt, rt_spec **out) {
    *out = NULL;
    th_spec_params p = rt->p.spec;
    if (p.kind == TH_SPEC_NONE) return TH_OK;
    th_status s = check_params(rt, &p);
    if (s) return s;
    rt_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return th_set_error(TH_ERR_NOMEM, "out of memory");
    sp->p = p;
    sp->p.layers = NULL;
    sp->list = calloc((size_t)rt->p.n_slots, sizeof *sp->list);
    sp->want = calloc((size_t)rt->p.n_slots, sizeof *sp->want);
    if (!sp->list || !sp->want || (p.kind == TH_SPEC_LAYERS && !(sp->layers = strdup(p.layers))))
        s = th_set_error(TH_ERR_NOMEM, "out of memory");
    sp->ops = p.kind == TH_SPEC_NGRAM ? &ngram_ops : &model_ops;
    if (!s && p.kind != TH_SPEC_NGRAM) s = dm_open(sp, rt);
    if (s) { rt_spec_free(sp); return s; }
    /* every slot's proposal buffer */
    for (int32_t i = 0; i < rt->p.n_slots; i++)
        if (!(rt->slots[i].draft = malloc((size_t)p.draft_max * sizeof(th_token)))) {
            rt_spec_free(sp);
            return th_set_error(TH_ERR_NOMEM, "out of memory");
        }
    *out = sp;
    return TH_OK;
}

void rt_spec_free(rt_spec *sp) {
    if (!sp) return;
    if (sp->ops && sp->ops->free) sp->ops->free(sp);
    free(sp->layers);
    free(sp->list);
    free(sp->want);
    free(sp);
}

int32_t rt_spec_draft_max(const rt_spec *sp) { return sp ? sp->p.draft_max : 0; }

/* ---------------------------------------------------------------- slots */

th_status rt_spec_slot_setup(th_runtime *rt, int32_t i) {
    rt_spec *sp = rt->spec;
    rt_slot *sl = &rt->slots[i];
    th_request *r = sl->req;
    sl->draft_max = 0;
    sl->n_draft = 0;
    sl->alpha = 0.8f;
    /* a grammar-constrained request decodes plainly: its masked rows are not the
     * target's p, so drafts could not be verified exactly (docs/speculative.md) */
    if (!sp || r->p.draft_max < 0 || r->cons) return TH_OK;
    sl->draft_max = r->p.draft_max > 0 ? TH_MIN(r->p.draft_max, sp->p.draft_max) : sp->p.draft_max;
    if (sp->p.kind == TH_SPEC_NGRAM || th_sampler_is_greedy(sl->smp)) return TH_OK;
    /* a sampled request of a model drafter: q is the draft's distribution under the
     * request's settings and logit bias, without penalties (any q keeps the output exact) */
    th_sampler_params dp = r->p.sampling;
    dp.seed = dp.seed + (uint64_t)sl->choice + 0x5EC0D0ULL;
    dp.repeat_penalty = 1.0f;
    dp.presence_penalty = dp.frequency_penalty = 0.0f;
    th_status s = th_sampler_new(&dp, rt->n_vocab, &sl->dsmp);
    for (int32_t k = 0; !s && k < r->p.n_bias; k++) s = th_sampler_set_logit_bias(sl->dsmp, r->bias_tok[k], r->bias_val[k]);
    if (!s && !sl->q && !(sl->q = malloc((size_t)sp->p.draft_max * (size_t)rt->n_vocab * sizeof *sl->q)))
        s = th_set_error(TH_ERR_NOMEM, "out of memory for the draft's distributions");
    return s;
}

void rt_spec_slot_release(th_runtime *rt, int32_t i) {
    rt_slot *sl = &rt->slots[i];
    th_sampler_free(sl->dsmp);
    sl->dsmp = NULL;
    sl->draft_max = 0;
    sl->n_draft = 0;
}

/* The draft length slot sl asks for (before the caps of the step). */
static int32_t adaptive_want(const rt_spec *sp, const rt_slot *sl) {
    if (sp->p.fixed) return sl->draft_max;
    int32_t k = 1;
    double a = sl->alpha, pk = a;
    while (k < sl->draft_max && pk * a >= 0.25) { pk *= a; k++; }
    return TH_MAX(k, TH_MIN(sp->p.draft_min, sl->draft_max));
}

void rt_spec_propose(th_runtime *rt, int32_t budget) {
    rt_spec *sp = rt->spec;
    int32_t n = 0;
    for (int32_t i = 0; i < rt->p.n_slots; i++) {
        rt_slot *sl = &rt->slots[i];
        sl->n_draft = 0;
        if (!sp || !sl->req || sl->phase != SLOT_GEN || sl->draft_max < 1) continue;
        const th_request *r = sl->req;
        int32_t k = adaptive_want(sp, sl);
        /* the KV never passes slot_ctx - 1 (next and the drafts join it) */
        k = TH_MIN(k, rt->p.slot_ctx - 2 - th_kv_seq_len(rt->ctx, i));
        /* k drafts give at most k + 1 tokens */
        if (r->p.max_tokens >= 0) k = TH_MIN(k, r->p.max_tokens - r->ch[sl->choice].n_generated - 1);
        k = TH_MIN(k, budget);
        if (k < sp->p.draft_min || k < 1) continue;
        sp->list[n] = i;
        sp->want[n++] = k;
        budget -= k;
    }
    if (n > 0) sp->ops->propose(sp, rt, sp->list, sp->want, n);
    for (int32_t k = 0; k < n; k++) {
        rt_slot *sl = &rt->slots[sp->list[k]];
        if (sl->n_draft < sp->p.draft_min) sl->n_draft = 0;
    }
}

void rt_spec_observe(th_runtime *rt, int32_t i, int32_t n, int32_t n_acc) {
    rt_slot *sl = &rt->slots[i];
    if (n <= 0) return;
    int32_t tested = n_acc + (n_acc < n);
    sl->alpha += 0.25f * ((float)n_acc / (float)tested - sl->alpha);
    atomic_fetch_add(&rt->st_drafted, (unsigned long long)n);
    atomic_fetch_add(&rt->st_accepted, (unsigned long long)n_acc);
    atomic_fetch_add(&rt->st_rounds, 1);
}
