/* text.c — one choice's output, from token pieces to text a client may see.
 *
 * Pieces pass through a th_utf8_stream, so the text only ever holds whole
 * UTF-8 characters (a character split across tokens waits for its last byte).
 * After each piece the text is searched for the request's stop strings (only
 * where a match could end in the new bytes); the first one found cuts the
 * text before it. Otherwise the text's longest tail that is a proper prefix of
 * some stop string is held back: `ready` never covers bytes a later stop
 * string could take away, so released text is never retracted.
 *
 * Logprob entries (one per generated token) carry the byte offset where the
 * token's bytes begin in the text. An entry is released with the text it
 * starts in (offset < ready); a cut drops the entries at or past the cut —
 * the tokens that carried the stop string — so the entries a client gets
 * cover exactly the returned text. (A token whose bytes straddle the cut is
 * kept: part of it is in the text.) */
#include "runtime/runtime.h"
#include <stdlib.h>

void rt_text_free(rt_text *t) {
    free(t->text);
    free(t->ent);
    memset(t, 0, sizeof *t);
}

static bool text_append(rt_text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        size_t nc = (t->n + n + 1) * 2;
        if (nc < 64) nc = 64;
        char *nb = realloc(t->text, nc);
        if (!nb) return false;
        t->text = nb;
        t->cap = nc;
    }
    if (n) memcpy(t->text + t->n, s, n);
    t->n += n;
    t->text[t->n] = 0;
    return true;
}

static bool ent_append(rt_text *t, const th_token_info *e) {
    if (t->n_ent == t->cap_ent) {
        int32_t nc = t->cap_ent ? t->cap_ent * 2 : 16;
        th_token_info *ne = realloc(t->ent, (size_t)nc * sizeof *ne);
        if (!ne) return false;
        t->ent = ne;
        t->cap_ent = nc;
    }
    t->ent[t->n_ent] = *e;
    t->ent[t->n_ent].text_offset = (uint32_t)(t->n + t->u8.n_pending);
    t->n_ent++;
    return true;
}

/* Earliest stop string that ends in text[from..n): its start, or (size_t)-1. */
static size_t find_stop(const rt_text *t, const rt_stops *st, size_t from) {
    size_t cut = (size_t)-1;
    for (int32_t i = 0; i < st->n; i++) {
        size_t sl = st->len[i];
        if (sl > t->n) continue;
        size_t start = from >= sl ? from - sl + 1 : 0;
        const char *hit = memmem(t->text + start, t->n - start, st->s[i], sl);
        if (hit && (size_t)(hit - t->text) < cut) cut = (size_t)(hit - t->text);
    }
    return cut;
}

/* Length of the text's longest tail that is a proper prefix of a stop string. */
static size_t stop_holdback(const rt_text *t, const rt_stops *st) {
    size_t hold = 0;
    for (int32_t i = 0; i < st->n; i++)
        for (size_t k = TH_MIN(st->len[i] - 1, t->n); k > hold; k--)
            if (!memcmp(t->text + t->n - k, st->s[i], k)) { hold = k; break; }
    return hold;
}

/* Ends the text before a stop string found at `cut`. A stop string that is
 * not valid UTF-8 may match from inside a character: the cut moves back to
 * that character's start (never below `ready`: a match starts at or after it,
 * and `ready` is a character boundary). */
static void cut_at(rt_text *t, size_t cut) {
    while (cut > t->ready && ((unsigned char)t->text[cut] & 0xC0) == 0x80) cut--;
    t->n = cut;
    t->text[cut] = 0;
    t->ready = cut;
    t->cut = true;
    while (t->n_ent > t->ent_released && t->ent[t->n_ent - 1].text_offset >= cut) t->n_ent--;
}

bool rt_text_push(rt_text *t, const rt_stops *st, const char *piece, size_t n, const th_token_info *e) {
    if (t->cut) return true;
    if (e && !ent_append(t, e)) return false;
    char small[3 * (256 + 4)], *out = small;
    if (n > 256 && !(out = malloc(3 * (n + 4)))) return false;
    size_t k = th_utf8_stream_push(&t->u8, piece, n, out);
    size_t from = t->n;
    bool ok = text_append(t, out, k);
    if (out != small) free(out);
    if (!ok) return false;
    size_t cut = st->n ? find_stop(t, st, from) : (size_t)-1;
    if (cut != (size_t)-1) { cut_at(t, cut); return true; }
    size_t r = t->n - (st->n ? stop_holdback(t, st) : 0);
    while (r > t->ready && r < t->n && ((unsigned char)t->text[r] & 0xC0) == 0x80) r--;   /* a character boundary */
    if (r > t->ready) t->ready = r;
    return true;
}

bool rt_text_finish(rt_text *t, const rt_stops *st) {
    if (!t->cut) {
        char tail[8];
        size_t from = t->n, k = th_utf8_stream_flush(&t->u8, tail);
        if (!text_append(t, tail, k)) return false;
        size_t cut = k && st->n ? find_stop(t, st, from) : (size_t)-1;   /* a stop string ending in U+FFFD */
        if (cut != (size_t)-1) cut_at(t, cut);
    }
    t->ready = t->n;
    return true;
}

void rt_text_release(rt_text *t, bool final, const char **text, size_t *n, const th_token_info **ents, int32_t *n_e) {
    *text = t->text ? t->text + t->released : "";
    *n = t->ready > t->released ? t->ready - t->released : 0;
    t->released += *n;
    int32_t e = t->ent_released;
    while (e < t->n_ent && (final || t->ent[e].text_offset < t->ready)) e++;
    *ents = t->ent ? t->ent + t->ent_released : NULL;
    *n_e = e - t->ent_released;
    t->ent_released = e;
}
