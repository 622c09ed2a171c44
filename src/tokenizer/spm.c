/* spm.c — SentencePiece-style tokenization of one text fragment (llama.cpp's
 * llm_tokenizer_spm): spaces become U+2581, the text is split into UTF-8
 * characters, and adjacent symbols are merged best score first (ties: leftmost)
 * while the merged text is a token. Symbols left that are not tokens fall back
 * to byte tokens <0xNN>. */
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <string.h>

typedef struct sym { int32_t prev, next; uint32_t off, n; } sym;
typedef struct bigram { int32_t left, right; float score; uint32_t size; } bigram;

/* Max-heap on (score, then smaller left). */
static bool bg_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct heap { bigram *p; size_t n, cap; } heap;

static bool heap_push(heap *h, bigram b) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 256;
        bigram *np = realloc(h->p, nc * sizeof *np);
        if (!np) return false;
        h->p = np; h->cap = nc;
    }
    size_t i = h->n++;
    while (i && bg_before(&b, &h->p[(i - 1) / 2])) { h->p[i] = h->p[(i - 1) / 2]; i = (i - 1) / 2; }
    h->p[i] = b;
    return true;
}

static bigram heap_pop(heap *h) {
    bigram top = h->p[0], last = h->p[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bg_before(&h->p[c + 1], &h->p[c])) c++;
        if (!bg_before(&h->p[c], &last)) break;
        h->p[i] = h->p[c];
        i = c;
    }
    if (h->n) h->p[i] = last;
    return top;
}

static bool try_bigram(const th_vocab *v, const char *text, const sym *s, int32_t l, int32_t r, heap *h) {
    if (l < 0 || r < 0) return true;
    uint32_t n = s[l].n + s[r].n;
    int32_t id = th_vocab_find(v, text + s[l].off, n);
    if (id < 0 || id >= v->n_tokens) return true;
    return heap_push(h, (bigram){ l, r, v->score[id], n });
}

static void emit_symbol(const th_vocab *v, const char *text, const sym *s, th_ids *out) {
    int32_t id = th_vocab_find(v, text + s->off, s->n);
    if (id >= 0 && id < v->n_tokens) { th_ids_push(out, id); return; }
    for (uint32_t j = 0; j < s->n; j++) {
        th_token b = v->byte_token[(uint8_t)text[s->off + j]];
        if (b < 0) b = v->unk;          /* llama.cpp would throw here */
        if (b >= 0) th_ids_push(out, b);
    }
}

static bool is_space_sym(const char *t, const sym *s) {
    return s->n == 3 && !memcmp(t + s->off, "\xE2\x96\x81", 3);
}

/* A symbol that is one byte or one well-formed UTF-8 character. */
static bool is_whole_char(const char *t, const sym *s) {
    const uint8_t *b = (const uint8_t *)t + s->off;
    if (s->n == 1) return true;
    if (th_utf8_len(b[0]) != s->n) return false;
    for (uint32_t k = 1; k < s->n; k++) if ((b[k] & 0xC0) != 0x80) return false;
    return true;
}

/* Merge symbols [a, b) as one sequence and emit their tokens. */
static bool merge_range(const th_vocab *v, const char *text, sym *s, int32_t a, int32_t b, heap *h, th_ids *out) {
    for (int32_t i = a; i < b; i++) { s[i].prev = i == a ? -1 : i - 1; s[i].next = i + 1 == b ? -1 : i + 1; }
    h->n = 0;
    for (int32_t i = a + 1; i < b; i++) if (!try_bigram(v, text, s, i - 1, i, h)) return false;
    while (h->n) {
        bigram g = heap_pop(h);
        sym *l = &s[g.left], *r = &s[g.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size) continue;   /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = g.left;
        if (!try_bigram(v, text, s, l->prev, g.left, h) || !try_bigram(v, text, s, g.left, l->next, h)) return false;
    }
    for (int32_t i = a; i != -1; i = s[i].next) emit_symbol(v, text, &s[i], out);
    return true;
}

/* When no token has U+2581 right after another character (v->spm_word_split),
 * no merge can join a symbol to a following "▁" symbol, so the text is merged
 * word by word: the same result as one pass over everything, with small heaps. */
th_status th_spm_tokenize(const th_vocab *v, const char *in, size_t len, th_ids *out) {
    th_bytes text = {0};
    sym *s = NULL;
    heap h = {0};
    th_status st = TH_OK;
    if (!len) return TH_OK;
    for (size_t i = 0; i < len; i++) {            /* ' ' -> U+2581 */
        if (in[i] == ' ') th_bytes_put(&text, "\xE2\x96\x81", 3);
        else th_bytes_put(&text, in + i, 1);
    }
    if (text.failed || text.n > UINT32_MAX / 2 || !(s = malloc(text.n * sizeof *s))) goto oom;
    int32_t n = 0;
    for (size_t off = 0; off < text.n; n++) {
        size_t l = TH_MIN(th_utf8_len((uint8_t)text.p[off]), text.n - off);
        s[n] = (sym){ -1, -1, (uint32_t)off, (uint32_t)l };
        off += l;
    }
    int32_t a = 0;
    for (int32_t i = 1; i <= n; i++) {
        bool cut = i == n || (v->spm_word_split && is_space_sym(text.p, &s[i]) && !is_space_sym(text.p, &s[i - 1]) &&
                              is_whole_char(text.p, &s[i - 1]));
        if (!cut) continue;
        if (!merge_range(v, text.p, s, a, i, &h, out)) goto oom;
        a = i;
    }
    goto done;
oom:
    st = th_set_error(TH_ERR_NOMEM, "tokenize: out of memory");
done:
    free(text.p); free(s); free(h.p);
    return st;
}
