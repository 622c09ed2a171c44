/* fuzz_http.c — libFuzzer target for the server's request-head checks
 * (tools/serve/serve_frame.c): the input is the first bytes of a connection. The head
 * parser and, for a chunked request, the chunk-size scan run on every prefix
 * length the first byte picks and on the whole input. Properties (trap on
 * failure): the verdict is 0, 1 or -1; a complete head ends with LF inside the
 * input; an accepted head is never both chunked and sized, a refused one
 * carries a status and a message; a head accepted on a prefix is accepted the
 * same way (same length and framing) on the whole input (more bytes cannot
 * change a complete head); and a head that is refused on a prefix stays refused. */
#include "serve_frame.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int check(const char *buf, size_t n, frame_result *r) {
    int v = frame_parse_head(buf, n, 1u << 20, r);
    if (v < -1 || v > 1) __builtin_trap();
    if (v == 1) {
        if (r->head_len == 0 || r->head_len > n || buf[r->head_len - 1] != '\n' || r->status) __builtin_trap();
        if (r->chunked && r->content_length) __builtin_trap();
        if (r->chunked) {
            frame_result c;
            int cv = frame_scan_chunks(buf + r->head_len, n - r->head_len, 1u << 20, &c);
            if (cv != 0 && cv != -1) __builtin_trap();
            if (cv < 0 && (c.status != 400 && c.status != 413)) __builtin_trap();
        }
    }
    if (v == -1 && (r->status < 400 || r->status > 599 || !r->msg[0])) __builtin_trap();
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t cut = data[0] % (size);
    const char *buf = (const char *)data + 1;
    size_t n = size - 1;
    if (cut > n) cut = n;
    frame_result a, b;
    int va = check(buf, cut, &a);
    int vb = check(buf, n, &b);
    if (va == 1 && (vb != 1 || a.head_len != b.head_len || a.chunked != b.chunked ||
                    a.content_length != b.content_length || strcmp(a.method, b.method) || strcmp(a.path, b.path)))
        __builtin_trap();
    if (va == -1 && vb != -1) __builtin_trap();
    return 0;
}
