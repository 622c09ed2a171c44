/* serve_frame.c — strict request-head checks (see serve_frame.h). The rules
 * are RFC 9112's, and never more liberal than libmicrohttpd 0.9.75, which
 * reads the same bytes after us: it does not trim trailing whitespace from a
 * value, so "Content-Length: 5 " and "Transfer-Encoding: chunked " are refused
 * here (it would answer the first with a malformed double response and read
 * the second as a body that ends at close). */
#include "serve_frame.h"
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool name_is(const char *name, size_t n, const char *want) {
    return n == strlen(want) && !strncasecmp(name, want, n);
}

void frame_init(frame_state *st, bool http10) {
    memset(st, 0, sizeof *st);
    st->http10 = http10;
}

/* A Content-Length value: 1 to 19 decimal digits and nothing else. */
static bool parse_cl(const char *v, size_t n, uint64_t *out) {
    if (n == 0 || n > 19) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return true;
}

void frame_field(frame_state *st, const char *name, size_t nlen, const char *value, size_t vlen) {
    if (name_is(name, nlen, "Content-Length")) {
        uint64_t v;
        if (!parse_cl(value, vlen, &v)) st->cl_bad = true;
        else if (st->n_cl == 0) st->content_length = v;
        else if (v != st->content_length) st->cl_differ = true;
        st->n_cl++;
    } else if (name_is(name, nlen, "Transfer-Encoding")) {
        const char *sep = st->n_te ? ", " : "";
        size_t need = strlen(sep) + vlen;
        if (st->te_len + need >= sizeof st->te) st->te_long = true;
        else {
            memcpy(st->te + st->te_len, sep, strlen(sep));
            memcpy(st->te + st->te_len + strlen(sep), value, vlen);
            st->te_len += need;
            st->te[st->te_len] = 0;
        }
        st->n_te++;
    } else if (name_is(name, nlen, "Host")) {
        st->n_host++;
    }
}

static void refuse(frame_result *r, int status, const char *fmt, const char *arg) {
    r->status = status;
    snprintf(r->msg, sizeof r->msg, fmt, arg);
}

void frame_finish(const frame_state *st, uint64_t max_body, frame_result *r) {
    r->status = 0;
    r->msg[0] = 0;
    r->chunked = false;
    r->content_length = 0;
    if (st->n_te && st->n_cl) { refuse(r, 400, "%srequest with both Content-Length and Transfer-Encoding (ambiguous framing)", ""); return; }
    if (st->n_te) {
        if (st->http10) { refuse(r, 400, "%sTransfer-Encoding in an HTTP/1.0 request", ""); return; }
        if (st->te_long || st->n_te != 1 || strcasecmp(st->te, "chunked")) {
            refuse(r, 400, "Transfer-Encoding '%.60s' is not supported (only a single 'chunked')", st->te);
            return;
        }
        r->chunked = true;
    }
    if (st->cl_bad) { refuse(r, 400, "%sContent-Length is not a plain decimal number of bytes", ""); return; }
    if (st->cl_differ) { refuse(r, 400, "%sseveral different Content-Length values", ""); return; }
    if (!st->http10 && st->n_host != 1) {
        refuse(r, 400, "%s", st->n_host ? "several Host header fields" : "an HTTP/1.1 request without a Host header field");
        return;
    }
    r->content_length = st->content_length;
    if (st->n_cl && st->content_length > max_body) {
        r->status = 413;
        snprintf(r->msg, sizeof r->msg, "the request body (%llu bytes) is larger than the limit of %llu bytes",
                 (unsigned long long)st->content_length, (unsigned long long)max_body);
    }
}

/* ---------------------------------------------------------------- a raw head */

/* The next line of buf[*pos..n): [*line, *line + *len) without its terminator
 * (LF or CRLF). Returns 1 for a line, 0 if no terminator yet, -1 for a CR not
 * followed by LF. */
static int next_line(const char *buf, size_t n, size_t *pos, const char **line, size_t *len) {
    for (size_t i = *pos; i < n; i++) {
        if (buf[i] == '\n') {
            size_t end = i > *pos && buf[i - 1] == '\r' ? i - 1 : i;
            *line = buf + *pos;
            *len = end - *pos;
            *pos = i + 1;
            return memchr(*line, '\r', *len) ? -1 : 1;
        }
    }
    const char *cr = memchr(buf + *pos, '\r', n - *pos);
    if (cr && (size_t)(cr - buf) + 1 < n) return -1;   /* CR followed by something other than LF */
    return 0;
}

static int bad(frame_result *r, int status, const char *msg) {
    r->status = status;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    return -1;
}

/* METHOD SP TARGET SP HTTP/1.x */
static int request_line(const char *l, size_t n, frame_result *r, bool *http10) {
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)l[i])) i++;
    if (i == 0 || i >= sizeof r->method || i >= n || l[i] != ' ') return bad(r, 400, "malformed request line (method)");
    memcpy(r->method, l, i);
    r->method[i] = 0;
    size_t t0 = ++i;
    while (i < n && (unsigned char)l[i] > 0x20 && (unsigned char)l[i] < 0x7F) i++;
    if (i == t0 || i >= n || l[i] != ' ') return bad(r, 400, "malformed request line (target)");
    size_t plen = 0;
    while (t0 + plen < i && l[t0 + plen] != '?' && plen + 1 < sizeof r->path) plen++;
    memcpy(r->path, l + t0, plen);
    r->path[plen] = 0;
    const char *v = l + i + 1;
    size_t vn = n - i - 1;
    if (vn == 8 && !memcmp(v, "HTTP/1.1", 8)) *http10 = false;
    else if (vn == 8 && !memcmp(v, "HTTP/1.0", 8)) *http10 = true;
    else if (vn == 8 && !memcmp(v, "HTTP/", 5) && v[5] >= '0' && v[5] <= '9' && v[6] == '.' && v[7] >= '0' && v[7] <= '9')
        return bad(r, 505, "HTTP version not supported (1.0 and 1.1 are)");
    else return bad(r, 400, "malformed request line (version)");
    return 1;
}

/* name ":" OWS value; no whitespace before the colon, no obs-fold, no CTLs. */
static int header_line(const char *l, size_t n, frame_state *st, frame_result *r) {
    if (l[0] == ' ' || l[0] == '\t') return bad(r, 400, "obsolete line folding in a header field");
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)l[i])) i++;
    if (i == 0 || i >= n || l[i] != ':') return bad(r, 400, "malformed header field name (or whitespace before the colon)");
    size_t v = i + 1;
    while (v < n && (l[v] == ' ' || l[v] == '\t')) v++;
    for (size_t k = v; k < n; k++) {
        unsigned char c = (unsigned char)l[k];
        if ((c < 0x20 && c != '\t') || c == 0x7F) return bad(r, 400, "control character in a header field value");
    }
    frame_field(st, l, i, l + v, n - v);
    return 1;
}

int frame_parse_head(const char *buf, size_t n, uint64_t max_body, frame_result *r) {
    memset(r, 0, sizeof *r);
    size_t pos = 0;
    while (pos < n && pos < 8 && (buf[pos] == '\r' || buf[pos] == '\n')) pos++;   /* empty lines before it */
    const char *line;
    size_t len;
    int got = next_line(buf, n, &pos, &line, &len);
    bool http10 = false;
    if (got < 0) return bad(r, 400, "a CR not followed by LF in the request line");
    if (got == 0) return n >= FRAME_HEAD_MAX ? bad(r, 431, "the request line is too long") : 0;
    if (request_line(line, len, r, &http10) < 0) return -1;
    frame_state st;
    frame_init(&st, http10);
    for (int fields = 0;; fields++) {
        got = next_line(buf, n, &pos, &line, &len);
        if (got < 0) return bad(r, 400, "a CR not followed by LF in a header field");
        if (got == 0) return n >= FRAME_HEAD_MAX ? bad(r, 431, "the request head is too large") : 0;
        if (pos > FRAME_HEAD_MAX) return bad(r, 431, "the request head is too large");
        if (len == 0) break;
        if (fields >= FRAME_MAX_FIELDS) return bad(r, 431, "too many header fields");
        if (header_line(line, len, &st, r) < 0) return -1;
    }
    r->head_len = pos;
    frame_finish(&st, max_body, r);
    return r->status ? -1 : 1;
}

/* ---------------------------------------------------------------- a chunked body's sizes */

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int frame_scan_chunks(const char *buf, size_t n, uint64_t max_body, frame_result *r) {
    size_t pos = 0;
    uint64_t total = 0;
    while (pos < n) {
        /* chunk-size [; ext] CRLF */
        size_t i = pos;
        uint64_t size = 0;
        int digits = 0;
        for (; i < n && hexval(buf[i]) >= 0; i++) {
            if (++digits > 16) return bad(r, 400, "a chunk size with more than 16 hex digits");
            size = size << 4 | (uint64_t)hexval(buf[i]);
        }
        if (i == n) return 0;   /* the line goes on past what we have */
        if (digits == 0) return bad(r, 400, "a malformed chunk size line");
        if (buf[i] != '\r' && buf[i] != '\n' && buf[i] != ';') return bad(r, 400, "a malformed chunk size line");
        const char *lf = memchr(buf + i, '\n', n - i);
        if (!lf) return 0;
        if (size > max_body || total + size > max_body) {
            r->status = 413;
            snprintf(r->msg, sizeof r->msg, "the chunked request body is larger than the limit of %llu bytes",
                     (unsigned long long)max_body);
            return -1;
        }
        total += size;
        if (size == 0) return 0;   /* the last chunk; trailers follow */
        pos = (size_t)(lf - buf) + 1;
        if (n - pos < size + 1) return 0;
        pos += (size_t)size;
        if (buf[pos] == '\r') pos++;
        if (pos < n && buf[pos] != '\n') return bad(r, 400, "a chunk not followed by CRLF");
        pos++;
    }
    return 0;
}
