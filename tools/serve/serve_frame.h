/* serve_frame.h — strict HTTP/1.1 request-head checks (RFC 9112) for the
 * server's front door: the request line, header field syntax and, above all,
 * message framing (Content-Length / Transfer-Encoding), which must be
 * unambiguous or the request is refused — the shapes a proxy and this server
 * could read differently (request smuggling). Pure functions over bytes, no
 * libmicrohttpd: the gate (serve_conn.c) runs them on the peeked head of a new
 * connection, the handler (serve_http.c) the framing part on the header list
 * libmicrohttpd parsed for later requests of a kept-alive connection. */
#ifndef TH_SERVE_FRAME_H
#define TH_SERVE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_HEAD_MAX   (32u << 10)   /* bytes of request line + headers */
#define FRAME_MAX_FIELDS 100

/* Accumulated framing facts of one request's header fields. */
typedef struct frame_state {
    bool http10;                 /* HTTP/1.0 (else 1.1) */
    int n_cl, n_te, n_host;
    bool cl_differ, cl_bad;      /* several different values / one not a plain decimal that fits */
    uint64_t content_length;     /* the (first) value */
    char te[64];                 /* the Transfer-Encoding values joined by ", " (truncated) */
    size_t te_len;
    bool te_long;
} frame_state;

typedef struct frame_result {
    int status;                  /* 0: acceptable; else the HTTP status to answer (400, 413, 431) */
    char msg[160];               /* why, for the error body */
    size_t head_len;             /* bytes of the head including its blank line (parse only) */
    bool chunked;                /* the body is chunked (else content_length bytes, maybe 0) */
    uint64_t content_length;
    char method[16];
    char path[64];               /* the target up to '?' (truncated; for routing the reserve) */
} frame_result;

void frame_init(frame_state *st, bool http10);
/* Feeds one header field (name without the colon, value with surrounding
 * whitespace already removed). Names compare case-insensitively. */
void frame_field(frame_state *st, const char *name, size_t nlen, const char *value, size_t vlen);
/* The framing verdict: both Content-Length and Transfer-Encoding, differing or
 * malformed Content-Length, any coding but a single "chunked", Transfer-Encoding
 * in HTTP/1.0, a Content-Length over max_body (413), no Host or several Host
 * fields in HTTP/1.1. Fills r->status/msg/chunked/content_length. */
void frame_finish(const frame_state *st, uint64_t max_body, frame_result *r);

/* Parses the start of a connection's bytes as a request head.
 * Returns 0 when the head is not complete yet (more bytes may make it so),
 * 1 when it is complete and acceptable (r filled, r->status 0),
 * -1 when it is unacceptable (r->status and r->msg say why; for a head over
 * FRAME_HEAD_MAX bytes, 431 even if incomplete). */
int frame_parse_head(const char *buf, size_t n, uint64_t max_body, frame_result *r);

/* The chunked body that follows a head, as far as buf[0..n) holds it: every
 * chunk-size line must be 1 to 16 hex digits (optionally ";extensions") and the
 * sizes must not add up past max_body. -1 with r->status 400 (a malformed size
 * line) or 413 (too large); 0 when nothing wrong was seen (more may follow). */
int frame_scan_chunks(const char *buf, size_t n, uint64_t max_body, frame_result *r);

#endif
