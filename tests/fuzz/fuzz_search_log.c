/* fuzz_search_log.c — libFuzzer target for the search log reader (src/search/log.c,
 * what `theseus search --resume` reads): th_slog_parse on the input as one line and on
 * each of its newline-separated lines. Properties (trap on failure): a record it
 * accepts has a known kind, NUL-terminated names, finite figures, flips >= 0 and
 * expert >= -1; written back with th_slog_write, the line parses again to the same
 * record (kind, names, expert, hash, bytes, flips, and the figures within %.9g's
 * rounding). */
#include "search/search_int.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool near(double a, double b) { return fabs(a - b) <= 1e-8 * fmax(1.0, fmax(fabs(a), fabs(b))); }

static void one(const char *line, size_t len) {
    th_slog_rec r, q;
    if (!th_slog_parse(line, len, &r)) return;
    if (r.kind != TH_SLOG_SENS && r.kind != TH_SLOG_GATE && r.kind != TH_SLOG_CALIB) __builtin_trap();
    if (!memchr(r.tensor, 0, sizeof r.tensor) || !memchr(r.type, 0, sizeof r.type)) __builtin_trap();
    if (!isfinite(r.kld) || !isfinite(r.ppl_ratio) || !isfinite(r.gap_min) || r.flips < 0 || r.expert < -1) __builtin_trap();
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return;
    th_slog_write(f, &r);
    fclose(f);
    if (!th_slog_parse(buf, n, &q)) __builtin_trap();
    if (q.kind != r.kind || strcmp(q.tensor, r.tensor) || q.expert != r.expert || q.flips != r.flips ||
        (r.kind == TH_SLOG_SENS && strcmp(q.type, r.type)) || (r.kind != TH_SLOG_SENS && q.hash != r.hash) ||
        !near(q.kld, r.kld) || !near(q.ppl_ratio, r.ppl_ratio) || !near(q.gap_min, r.gap_min) ||
        fabs((double)q.bytes - (double)r.bytes) > 1e-8 * (double)r.bytes + 1)
        __builtin_trap();
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    one(s, size);
    for (size_t i = 0; i < size;) {
        const char *nl = memchr(s + i, '\n', size - i);
        size_t e = nl ? (size_t)(nl - s) : size;
        one(s + i, e - i);
        i = e + 1;
    }
    return 0;
}
