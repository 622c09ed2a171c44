/* status.c — thread-local last-error message and status names. */
#include "core.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char th_error_buf[1024];

th_status th_set_error(th_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(th_error_buf, sizeof th_error_buf, fmt, ap);
    va_end(ap);
    return s;
}

void th_clear_error(void) { th_error_buf[0] = 0; }

const char *th_last_error(void) { return th_error_buf; }

const char *th_status_name(th_status s) {
    switch (s) {
    case TH_OK: return "ok";
    case TH_ERR_IO: return "i/o error";
    case TH_ERR_FORMAT: return "format error";
    case TH_ERR_UNSUPPORTED: return "unsupported";
    case TH_ERR_NOMEM: return "out of memory";
    case TH_ERR_ARG: return "invalid argument";
    case TH_ERR_CAPACITY: return "capacity exceeded";
    case TH_ERR_INTERNAL: return "internal error";
    case TH_ERR_BUSY: return "busy";
    case TH_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}
