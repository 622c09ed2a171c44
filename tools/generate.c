/* generate.c — see generate.h. */
#include "generate.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Generated text: what was printed so far, kept whole for the caller. */
typedef struct { char *buf; size_t n, cap; th_utf8_stream utf8; } text_buf;

static bool text_append(text_buf *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        size_t nc = (t->n + n + 1) * 2;
        char *nb = realloc(t->buf, nc);
        if (!nb) return false;
        t->buf = nb;
        t->cap = nc;
    }
    memcpy(t->buf + t->n, s, n);
    t->n += n;
    t->buf[t->n] = 0;
    return true;
}

/* Feed a token's bytes (or flush at the end): complete UTF-8 characters go to
 * out and into the kept text; an incomplete tail waits for the next token. */
static bool text_emit(text_buf *t, const char *piece, size_t n, bool end, FILE *out) {
    char ready[3 * (256 + 4)];
    size_t k = end ? th_utf8_stream_flush(&t->utf8, ready) : th_utf8_stream_push(&t->utf8, piece, n, ready);
    if (k && out) { fwrite(ready, 1, k, out); fflush(out); }
    return text_append(t, ready, k);
}

static bool hist_push(gen_history *h, th_token t) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 256;
        th_token *nt = realloc(h->tok, nc * sizeof *nt);
        if (!nt) return false;
        h->tok = nt;
        h->cap = nc;
    }
    h->tok[h->n++] = t;
    return true;
}

/* Decodes what the cache lacks of prompt; *last gets the batch index holding the
 * logits of the prompt's final token. */
static th_status decode_prompt(th_context *ctx, gen_history *hist, const th_token *prompt, size_t n, int32_t *last) {
    size_t keep = 0;
    while (keep < hist->n && keep < n && hist->tok[keep] == prompt[keep]) keep++;
    if (keep == n && n > 0) keep--;               /* re-decode the last token to get its logits */
    th_kv_seq_truncate(ctx, 0, (int32_t)keep);
    hist->n = keep;
    uint32_t nb = 512;
    for (size_t i = keep; i < n; i += nb) {
        int32_t cnt = (int32_t)TH_MIN_SZ(nb, n - i);
        th_batch b = { .n_tokens = cnt, .token = prompt + i };
        th_status s = th_decode(ctx, &b);
        if (s) return s;
        *last = cnt - 1;
        for (int32_t j = 0; j < cnt; j++) if (!hist_push(hist, prompt[i + (size_t)j])) return th_set_error(TH_ERR_NOMEM, "out of memory");
    }
    return TH_OK;
}

/* The next token from batch index `last`: a greedy sampler's pick is the argmax
 * (th_get_argmax: the same token, and the only thing a logits_argmax_only
 * context keeps); otherwise the sampler over the logits row. -1 on error. */
static th_token pick(th_context *ctx, th_sampler *smp, bool greedy, int32_t last) {
    if (greedy) return th_get_argmax(ctx, last);
    const float *lg = th_get_logits(ctx, last);
    return lg ? th_sampler_sample(smp, lg) : -1;
}

th_status generate(th_model *m, th_context *ctx, th_sampler *smp, gen_history *hist,
                   const th_token *prompt, size_t n, int32_t n_predict, FILE *out,
                   char **text, gen_stats *st) {
    memset(st, 0, sizeof *st);
    if (n == 0) return th_set_error(TH_ERR_ARG, "empty prompt");
    if (n >= th_context_n_ctx(ctx))
        return th_set_error(TH_ERR_CAPACITY, "the prompt has %zu tokens; the context holds %u", n, th_context_n_ctx(ctx));
    double t0 = now_s();
    size_t before = hist->n;
    int32_t last = 0;
    th_status s = decode_prompt(ctx, hist, prompt, n, &last);
    if (s) return s;
    st->n_prompt = (int32_t)(n - TH_MIN_SZ(before, n));
    double t1 = now_s();
    st->t_prompt = t1 - t0;
    th_sampler_reset(smp);
    for (size_t i = 0; i < n; i++) th_sampler_accept(smp, prompt[i]);
    text_buf tb = { 0 };
    bool greedy = th_sampler_is_greedy(smp);
    for (int32_t g = 0; n_predict < 0 || g < n_predict; g++) {
        th_token t = pick(ctx, smp, greedy, last);
        if (t < 0) { s = TH_ERR_INTERNAL; break; }
        if (th_token_is_eog(m, t)) break;
        th_sampler_accept(smp, t);
        char piece[256];
        int32_t k = th_token_to_piece(m, t, piece, sizeof piece, false);
        if (!text_emit(&tb, piece, k > 0 ? (size_t)k : 0, false, out)) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); break; }
        st->n_gen++;
        if (hist->n + 1 >= th_context_n_ctx(ctx)) break;  /* context full */
        th_batch b = { .n_tokens = 1, .token = &t };
        if ((s = th_decode(ctx, &b))) break;
        last = 0;
        if (!hist_push(hist, t)) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); break; }
    }
    if (!text_emit(&tb, NULL, 0, true, out) && !s) s = th_set_error(TH_ERR_NOMEM, "out of memory");
    st->t_gen = now_s() - t1;
    if (text) *text = tb.buf ? tb.buf : strdup("");
    else free(tb.buf);
    return s;
}

void gen_print_stats(const gen_stats *st) {
    fprintf(stderr, "\n[prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s]\n", st->n_prompt,
            st->t_prompt > 0 ? st->n_prompt / st->t_prompt : 0.0, st->n_gen, st->t_gen > 0 ? st->n_gen / st->t_gen : 0.0);
}
