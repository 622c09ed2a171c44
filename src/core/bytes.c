/* bytes.c — th_bytes, the one growable byte buffer (see bytes.h). */
#include "core/bytes.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool th_bytes_reserve(th_bytes *b, size_t extra) {
    if (b->failed) return false;
    if (extra > SIZE_MAX / 2 - b->n - 1 || (b->limit && b->n + extra > b->limit)) { b->failed = true; return false; }
    size_t need = b->n + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) { b->failed = true; return false; }
    b->p = np;
    b->cap = cap;
    b->p[b->n] = 0;     /* NUL-terminated from the first allocation on */
    return true;
}

void th_bytes_put(th_bytes *b, const void *s, size_t n) {
    if (!th_bytes_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void th_bytes_str(th_bytes *b, const char *s) { th_bytes_put(b, s, strlen(s)); }

void th_bytes_printf(th_bytes *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) b->failed = true;
    else if (th_bytes_reserve(b, (size_t)k)) {
        vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap2);
        b->n += (size_t)k;
    }
    va_end(ap2);
}

char *th_bytes_take(th_bytes *b) {
    char *p = NULL;
    if (!b->failed) {
        if (!b->p) th_bytes_reserve(b, 0);
        p = b->failed ? NULL : b->p;
        if (p) b->p = NULL;
    }
    th_bytes_free(b);
    return p;
}

void th_bytes_free(th_bytes *b) {
    free(b->p);
    size_t limit = b->limit;
    memset(b, 0, sizeof *b);
    b->limit = limit;
}
