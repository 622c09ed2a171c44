/* tokenize.c — th_vocab_tokenize (special-token splitting, then the vocab's
 * algorithm on each text fragment, with BOS/EOS/SEP as llama.cpp adds them),
 * token -> piece, detokenize, and the streaming UTF-8 guard for decoded output. */
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <string.h>

typedef struct frag { th_token tok; uint32_t off, len; } frag;   /* tok -1: raw text */
typedef struct frags { frag *p; size_t n, cap; } frags;

static bool frags_push(frags *f, th_token t, size_t off, size_t len) {
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 16;
        frag *np = realloc(f->p, nc * sizeof *np);
        if (!np) return false;
        f->p = np; f->cap = nc;
    }
    f->p[f->n++] = (frag){ t, (uint32_t)off, (uint32_t)len };
    return true;
}

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Split raw fragments at each occurrence of special token id (llama.cpp's
 * tokenizer_st_partition, one token). */
static bool split_special(const th_vocab *v, th_token id, const char *text, frags *in, frags *out) {
    uint32_t tl;
    const char *t = th_tok_text(v, id, &tl);
    out->n = 0;
    for (size_t k = 0; k < in->n; k++) {
        frag f = in->p[k];
        if (f.tok >= 0) { if (!frags_push(out, f.tok, 0, 0)) return false; continue; }
        size_t off = f.off, len = f.len;
        for (;;) {
            const char *m = len >= tl ? memmem(text + off, len, t, tl) : NULL;
            if (!m) { if (len && !frags_push(out, -1, off, len)) return false; break; }
            size_t mpos = (size_t)(m - text), left = mpos - off;
            if (v->attr[id] & TH_ATTR_LSTRIP) while (left && is_space(text[off + left - 1])) left--;
            if (left && !frags_push(out, -1, off, left)) return false;
            if (!frags_push(out, id, 0, 0)) return false;
            size_t roff = mpos + tl, rlen = off + len - roff;
            if (v->attr[id] & TH_ATTR_RSTRIP) while (rlen && is_space(text[roff])) { roff++; rlen--; }
            off = roff; len = rlen;
            if (!len) break;
        }
    }
    return true;
}

/* Which special tokens occur anywhere in the text (one pass, by first byte and
 * length), so that only those are searched for fragment by fragment. */
static bool *find_occurring(const th_vocab *v, const char *text, size_t len, bool parse_special) {
    bool *occ = calloc((size_t)v->n_special + 1, sizeof *occ);
    if (!occ) return NULL;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)text[i];
        for (uint32_t k = v->first_len_off[b]; k < v->first_len_off[b + 1]; k++) {
            uint32_t l = v->first_len[k];
            if (l > len - i) continue;
            int32_t id = th_vocab_find(v, text + i, l);
            if (id < 0 || id >= v->n_tokens || v->special_index[id] < 0) continue;
            if (!parse_special && (v->attr[id] & (TH_ATTR_CONTROL | TH_ATTR_UNKNOWN))) continue;
            occ[v->special_index[id]] = true;
        }
    }
    return occ;
}

/* llama.cpp's tokenizer_st_partition: special tokens, longest first, each split
 * out of every remaining text fragment at all its (leftmost, non-overlapping)
 * occurrences. Control and unknown tokens only with parse_special. */
static th_status partition(const th_vocab *v, const char *text, size_t len, bool parse_special, frags *res) {
    frags a = {0}, b = {0};
    bool *occ = NULL;
    if (len && !frags_push(&a, -1, 0, len)) goto oom;
    if (len && v->n_special && !(occ = find_occurring(v, text, len, parse_special))) goto oom;
    for (int32_t k = 0; k < v->n_special && a.n; k++) {
        if (!occ[k]) continue;
        if (!split_special(v, v->special[k], text, &a, &b)) goto oom;
        frags tmp = a; a = b; b = tmp;
    }
    free(occ);
    free(b.p);
    *res = a;
    return TH_OK;
oom:
    free(occ); free(a.p); free(b.p);
    return th_set_error(TH_ERR_NOMEM, "tokenize: out of memory");
}

static th_status tokenize_fragments(const th_vocab *v, const char *text, const frags *fr, bool add_special, th_ids *out) {
    th_status st = TH_OK;
    bool prev_special = true;             /* SPM: a space prefix on the first fragment */
    th_bytes tmp = {0};
    if (add_special && v->add_bos && v->kind != TH_VOCAB_WPM) th_ids_push(out, v->bos);
    if (add_special && v->kind == TH_VOCAB_WPM) th_ids_push(out, v->bos);
    for (size_t k = 0; k < fr->n && st == TH_OK; k++) {
        const frag *f = &fr->p[k];
        if (f->tok >= 0) { th_ids_push(out, f->tok); prev_special = true; continue; }
        if (v->kind == TH_VOCAB_SPM) {
            tmp.n = 0;
            bool pre = v->add_space_prefix && prev_special;
            if (pre && v->prefix_scheme && f->len && text[f->off] == ' ') pre = false;   /* HF Metaspace */
            if (pre && v->prefix_scheme == 2 && f->off != 0) pre = false;
            if (pre) th_bytes_put(&tmp, " ", 1);
            th_bytes_put(&tmp, text + f->off, f->len);
            if (tmp.failed) { st = th_set_error(TH_ERR_NOMEM, "tokenize: out of memory"); break; }
            st = v->unigram ? th_ugm_tokenize(v, tmp.p, tmp.n, out) : th_spm_tokenize(v, tmp.p, tmp.n, out);
        } else if (v->kind == TH_VOCAB_BPE) {
            st = th_bpe_tokenize(v, text + f->off, f->len, out);
        } else {
            st = th_wpm_tokenize(v, text + f->off, f->len, out);
        }
        prev_special = false;
    }
    free(tmp.p);
    if (st != TH_OK) return st;
    if (add_special && v->add_eos && v->kind != TH_VOCAB_WPM) th_ids_push(out, v->eos);
    if (add_special && v->kind == TH_VOCAB_WPM) th_ids_push(out, v->sep);
    return out->oom ? th_set_error(TH_ERR_NOMEM, "tokenize: out of memory") : TH_OK;
}

th_status th_vocab_tokenize(const th_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                            th_token *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || (!text && len) || (!out && cap) || !n_out)
        return th_set_error(TH_ERR_ARG, "tokenize: NULL argument");
    if (len > UINT32_MAX / 4) return th_set_error(TH_ERR_ARG, "tokenize: text of %zu bytes is too long", len);
    frags fr = {0};
    th_ids ids = {0};
    th_status st = partition(v, text, len, parse_special, &fr);
    if (st == TH_OK) st = tokenize_fragments(v, text, &fr, add_special, &ids);
    free(fr.p);
    if (st == TH_OK) {
        *n_out = ids.n;
        if (ids.n && cap) memcpy(out, ids.p, TH_MIN(ids.n, cap) * sizeof *out);
        if (ids.n > cap)
            st = th_set_error(TH_ERR_CAPACITY, "tokenize: %zu tokens do not fit in a buffer of %zu", ids.n, cap);
    }
    free(ids.p);
    return st;
}

int32_t th_vocab_token_to_piece(const th_vocab *v, th_token t, char *buf, int32_t cap, bool special) {
    if (!v || t < 0 || t >= v->n_tokens) return INT32_MIN;
    if (!special && (v->attr[t] & (TH_ATTR_UNKNOWN | TH_ATTR_CONTROL))) return 0;
    uint32_t n = v->piece_len[t];
    if (n > INT32_MAX) return INT32_MIN;
    if (cap < 0 || (uint32_t)cap < n || (!buf && n)) return -(int32_t)n;
    memcpy(buf, v->piece + v->piece_off[t], n);
    return (int32_t)n;
}

int64_t th_vocab_detokenize(const th_vocab *v, const th_token *toks, size_t n, char *buf, size_t cap, bool special) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        th_token t = toks[i];
        if (!v || t < 0 || t >= v->n_tokens) return INT64_MIN;
        if (!special && (v->attr[t] & (TH_ATTR_UNKNOWN | TH_ATTR_CONTROL))) continue;
        uint32_t l = v->piece_len[t];
        if (buf && total + l <= cap) memcpy(buf + total, v->piece + v->piece_off[t], l);
        total += l;
    }
    return total <= cap ? (int64_t)total : -(int64_t)total;
}

/* ---- streaming UTF-8 guard ---- */

/* Length of a complete, valid UTF-8 sequence at s[0..n), 0 if it is a valid
 * prefix that needs more bytes, -1 if invalid (strict: no overlongs, surrogates
 * or values above U+10FFFF). */
static int utf8_seq(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    int len;
    uint32_t lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c < 0xC2) return -1;
    if (c < 0xE0) len = 2;
    else if (c < 0xF0) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c < 0xF5) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return -1;
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n) return 0;
        uint8_t b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return -1;
    }
    return len;
}

size_t th_utf8_stream_push(th_utf8_stream *st, const char *in, size_t n, char *out) {
    size_t w = 0, i = 0;
    while (i < n || st->n_pending) {
        /* work on pending bytes + as much input as needed */
        uint8_t seq[4];
        size_t have = st->n_pending;
        memcpy(seq, st->pending, have);
        while (have < 4 && i + (have - st->n_pending) < n) { seq[have] = (uint8_t)in[i + have - st->n_pending]; have++; }
        if (!have) break;
        int r = utf8_seq(seq, have);
        if (r == 0) {                 /* incomplete: keep everything for later */
            size_t take = have - st->n_pending;
            memcpy(st->pending + st->n_pending, in + i, take);
            st->n_pending = (uint8_t)have;
            i += take;
            break;
        }
        size_t used = r < 0 ? 1 : (size_t)r;
        if (r < 0) { memcpy(out + w, "\xEF\xBF\xBD", 3); w += 3; }
        else { memcpy(out + w, seq, used); w += used; }
        /* consume `used` bytes: first from pending, then from input */
        size_t from_pending = TH_MIN(used, (size_t)st->n_pending);
        memmove(st->pending, st->pending + from_pending, st->n_pending - from_pending);
        st->n_pending = (uint8_t)(st->n_pending - from_pending);
        i += used - from_pending;
    }
    return w;
}

size_t th_utf8_stream_flush(th_utf8_stream *st, char *out) {
    size_t w = 0;
    if (st->n_pending) { memcpy(out, "\xEF\xBF\xBD", 3); w = 3; }
    st->n_pending = 0;
    return w;
}
