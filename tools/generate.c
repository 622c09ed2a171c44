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

size_t utf8_complete_prefix(const char *buf, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)buf[n - back];
        if ((c & 0xC0) == 0x80) continue;           /* continuation byte */
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back < need ? n - back : n;
    }
    return n;
}

typedef struct { char *buf; size_t n, cap, flushed; } text_buf;

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

static void text_flush(text_buf *t, FILE *out, bool all) {
    size_t end = all ? t->n : utf8_complete_prefix(t->buf, t->n);
    if (out && end > t->flushed) { fwrite(t->buf + t->flushed, 1, end - t->flushed, out); fflush(out); }
    if (end > t->flushed) t->flushed = end;
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
    for (int32_t g = 0; n_predict < 0 || g < n_predict; g++) {
        const float *lg = th_get_logits(ctx, last);
        if (!lg) { s = TH_ERR_INTERNAL; break; }
        th_token t = th_sampler_sample(smp, lg);
        if (th_token_is_eog(m, t)) break;
        th_sampler_accept(smp, t);
        char piece[256];
        int32_t k = th_token_to_piece(m, t, piece, sizeof piece, false);
        if (k > 0 && !text_append(&tb, piece, (size_t)k)) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); break; }
        text_flush(&tb, out, false);
        st->n_gen++;
        if (hist->n + 1 >= th_context_n_ctx(ctx)) break;  /* context full */
        th_batch b = { .n_tokens = 1, .token = &t };
        if ((s = th_decode(ctx, &b))) break;
        last = 0;
        if (!hist_push(hist, t)) { s = th_set_error(TH_ERR_NOMEM, "out of memory"); break; }
    }
    text_flush(&tb, out, true);
    st->t_gen = now_s() - t1;
    if (text) *text = tb.buf ? tb.buf : strdup("");
    else free(tb.buf);
    return s;
}

void gen_print_stats(const gen_stats *st) {
    fprintf(stderr, "\n[prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s]\n", st->n_prompt,
            st->t_prompt > 0 ? st->n_prompt / st->t_prompt : 0.0, st->n_gen, st->t_gen > 0 ? st->n_gen / st->t_gen : 0.0);
}
