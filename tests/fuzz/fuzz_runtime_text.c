/* fuzz_runtime_text.c — libFuzzer target for the runtime's text pipeline
 * (src/runtime/text.c: token pieces -> UTF-8 holdback -> stop strings ->
 * released text and logprob entries) and for th_chat_render_chatml.
 *
 * Input: an input starting with '{' is a chat context for
 * th_chat_render_chatml. Otherwise byte 0 holds the number of stop strings
 * (its low 2 bits), then each stop string is a length byte (1..16) and its
 * bytes, then the rest is pieces, each a length byte (0..31) and its bytes.
 * After every piece the target checks what a client relies on: released text
 * is only ever appended to (never retracted), is whole UTF-8, and is a prefix
 * of the text; released entries start inside the ready text. At the end: the
 * text holds no stop string, equals the pieces' clean UTF-8 when nothing was
 * cut, and every entry's offset is inside it (or at its end). */
#include "runtime/runtime.h"

#include <stdlib.h>

static bool utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++) if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

static void chatml(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1), *out = NULL;
    if (!s) return;
    memcpy(s, data, size);
    s[size] = 0;
    th_chat_opts o = { .add_generation_prompt = size & 1 };
    if (th_chat_render_chatml(s, &o, &out) == TH_OK && !out) abort();
    free(out);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size && data[0] == '{') { chatml(data, size); return 0; }
    size_t at = 1;
    char *stops[3];
    size_t lens[3];
    rt_stops st = { .s = stops, .len = lens };
    int want = size ? data[0] & 3 : 0;
    while (st.n < want && at < size) {
        size_t k = 1 + data[at++] % 16;
        if (at + k > size) break;
        if (!(stops[st.n] = malloc(k))) break;
        memcpy(stops[st.n], data + at, k);
        lens[st.n++] = k;
        at += k;
    }
    rt_text t = { 0 };
    th_utf8_stream ref_u8 = { 0 };
    char *ref = malloc(3 * size + 16), *seen = malloc(3 * size + 16);   /* clean pieces; released text */
    size_t n_ref = 0, n_seen = 0;
    int32_t n_ent_seen = 0;
    if (!ref || !seen) abort();
    while (at < size && !t.cut) {
        size_t k = data[at++] % 32;
        if (at + k > size) k = size - at;
        th_token_info e = { .token = (th_token)k };
        if (!rt_text_push(&t, &st, (const char *)data + at, k, &e)) abort();
        n_ref += th_utf8_stream_push(&ref_u8, (const char *)data + at, k, ref + n_ref);
        at += k;
        const char *txt;
        size_t n;
        const th_token_info *ents;
        int32_t ne;
        rt_text_release(&t, false, &txt, &n, &ents, &ne);
        memcpy(seen + n_seen, txt, n);
        n_seen += n;
        if (n_seen != t.released || n_seen > t.n || memcmp(seen, t.text, n_seen) || !utf8_valid(seen, n_seen)) abort();
        for (int32_t i = 0; i < ne; i++) if (ents[i].text_offset >= t.ready) abort();
        n_ent_seen += ne;
    }
    if (!rt_text_finish(&t, &st)) abort();
    const char *txt;
    size_t n;
    const th_token_info *ents;
    int32_t ne;
    rt_text_release(&t, true, &txt, &n, &ents, &ne);
    memcpy(seen + n_seen, txt, n);
    n_seen += n;
    n_ref += th_utf8_stream_flush(&ref_u8, ref + n_ref);
    if (n_seen != t.n || (t.n && memcmp(seen, t.text, t.n)) || !utf8_valid(seen, n_seen)) abort();
    for (int i = 0; i < st.n; i++)
        if (t.n && memmem(t.text, t.n, stops[i], lens[i])) abort();
    if (!t.cut && (n_ref != t.n || (t.n && memcmp(ref, t.text, t.n)))) abort();
    if (t.cut && (t.n > n_ref || (t.n && memcmp(ref, t.text, t.n)))) abort();
    if (n_ent_seen + ne != t.n_ent) abort();
    for (int32_t i = 0; i < t.n_ent; i++)
        if (t.ent[i].text_offset > t.n || (i && t.ent[i].text_offset < t.ent[i - 1].text_offset)) abort();
    rt_text_free(&t);
    for (int i = 0; i < st.n; i++) free(stops[i]);
    free(ref);
    free(seen);
    return 0;
}
