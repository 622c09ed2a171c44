/* bytes.h — th_bytes, the library's one growable byte buffer (text being built,
 * a file image being serialized). Appends never fail loudly: the first failed
 * allocation, or growth past `limit` (0 = no limit), sets `failed` and every later
 * append is ignored, so a builder checks once at the end. The content is kept
 * NUL-terminated (p[n] == 0) whenever p is not NULL, so text builders can hand out p.
 * Zero-initialise to start: th_bytes b = { 0 }; or { .limit = N }. */
#ifndef TH_BYTES_H
#define TH_BYTES_H

#include <stdbool.h>
#include <stddef.h>

typedef struct th_bytes {
    char *p;        /* n bytes, then a NUL */
    size_t n, cap;  /* used, allocated (cap > n when p != NULL) */
    size_t limit;   /* largest n allowed; 0 = unlimited */
    bool failed;    /* an append was dropped (no memory, or past limit) */
} th_bytes;

/* Room for `extra` more bytes (and the NUL); false (and failed) if not possible. */
bool th_bytes_reserve(th_bytes *b, size_t extra);
void th_bytes_put(th_bytes *b, const void *s, size_t n);
void th_bytes_str(th_bytes *b, const char *s);
void th_bytes_printf(th_bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The content (caller frees), or NULL if anything failed (then freed); b is reset. */
char *th_bytes_take(th_bytes *b);
void th_bytes_free(th_bytes *b);

#endif
