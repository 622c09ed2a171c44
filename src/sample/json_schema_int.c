/* json_schema_int.c — GBNF for integer ranges ("type": "integer" with minimum / maximum /
 * exclusive bounds), in the shape llama.cpp's json-schema-to-grammar writes: digit ranges
 * per leading digit, at most 16 digits, no leading zeros.
 *
 * Two of llama.cpp's open-ended cases accept numbers outside the range and are written
 * differently here: a lower bound whose remaining digits start with 0 (llama.cpp's
 * minimum 100 accepts "10", 105 accepts "15"), and a negative upper bound (maximum -5
 * accepts "-05" and "-01"). Everything else comes out as llama.cpp has it. */
#include "sample/json_schema_internal.h"

#include <stdio.h>
#include <string.h>

static void digit_range(th_bytes *o, char from, char to) {
    if (from == to) th_bytes_printf(o, "[%c]", from);
    else th_bytes_printf(o, "[%c-%c]", from, to);
}

static void more_digits(th_bytes *o, int min_d, int max_d) {
    th_bytes_str(o, "[0-9]");
    if (min_d == max_d && min_d == 1) return;
    if (min_d == max_d) th_bytes_printf(o, "{%d}", min_d);
    else th_bytes_printf(o, "{%d,%d}", min_d, max_d);
}

/* Equal-length digit strings from <= s <= to (llama.cpp's uniform_range). */
static void uniform_range(th_bytes *o, const char *from, const char *to, size_t len) {
    size_t i = 0;
    while (i < len && from[i] == to[i]) i++;
    if (i > 0) {
        th_bytes_str(o, "\"");
        th_bytes_put(o, from, i);
        th_bytes_str(o, "\"");
    }
    if (i >= len) return;
    if (i > 0) th_bytes_str(o, " ");
    size_t sub = len - i - 1;
    if (sub == 0) { th_bytes_printf(o, "[%c-%c]", from[i], to[i]); return; }
    char zeros[24], nines[24];
    memset(zeros, '0', sub); zeros[sub] = 0;
    memset(nines, '9', sub); nines[sub] = 0;
    bool to_reached = false;
    th_bytes_str(o, "(");
    if (!memcmp(from + i + 1, zeros, sub)) {
        digit_range(o, from[i], (char)(to[i] - 1));
        th_bytes_str(o, " ");
        more_digits(o, (int)sub, (int)sub);
    } else {
        th_bytes_printf(o, "[%c] (", from[i]);
        uniform_range(o, from + i + 1, nines, sub);
        th_bytes_str(o, ")");
        if (from[i] < to[i] - 1) {
            th_bytes_str(o, " | ");
            if (!memcmp(to + i + 1, nines, sub)) {
                digit_range(o, (char)(from[i] + 1), to[i]);
                to_reached = true;
            } else digit_range(o, (char)(from[i] + 1), (char)(to[i] - 1));
            th_bytes_str(o, " ");
            more_digits(o, (int)sub, (int)sub);
        }
    }
    if (!to_reached) {
        th_bytes_str(o, " | ");
        digit_range(o, to[i], to[i]);
        th_bytes_str(o, " ");
        uniform_range(o, zeros, to + i + 1, sub);
    }
    th_bytes_str(o, ")");
}

/* Digit strings of at most dl digits that are longer than r, or as long and >= r (r may
 * start with 0: it is the tail of a larger bound). top: no leading zero allowed. */
static void at_least(th_bytes *o, const char *r, int dl, bool top) {
    size_t len = strlen(r);
    int less = dl - 1 > 1 ? dl - 1 : 1;
    bool zeros = strspn(r, "0") == len;
    if (zeros) {
        if (top) { th_bytes_str(o, "[0] | [1-9] "); more_digits(o, 0, less); }
        else more_digits(o, (int)len, dl);
        return;
    }
    char c = r[0], start = top ? '1' : '0';
    if (len == 1) {
        if (c > start) {
            digit_range(o, start, (char)(c - 1));
            th_bytes_str(o, " ");
            more_digits(o, 1, less);
            th_bytes_str(o, " | ");
        }
        digit_range(o, c, '9');
        th_bytes_str(o, " ");
        more_digits(o, 0, less);
        return;
    }
    if (c > start) {
        digit_range(o, start, (char)(c - 1));
        th_bytes_str(o, " ");
        more_digits(o, (int)len, less);
        th_bytes_str(o, " | ");
    }
    digit_range(o, c, c);
    th_bytes_str(o, " (");
    at_least(o, r + 1, less, false);
    th_bytes_str(o, ")");
    if (c < '9') {
        th_bytes_str(o, " | ");
        digit_range(o, (char)(c + 1), '9');
        th_bytes_str(o, " ");
        more_digits(o, (int)len - 1, less);
    }
}

static void both(th_bytes *o, int64_t min, int64_t max) {
    if (min < 0 && max < 0) {
        th_bytes_str(o, "\"-\" (");
        both(o, -max, -min);
        th_bytes_str(o, ")");
        return;
    }
    if (min < 0) {
        th_bytes_str(o, "\"-\" (");
        both(o, 0, -min);
        th_bytes_str(o, ") | ");
        min = 0;
    }
    char min_s[24], max_s[24], nines[24];
    snprintf(min_s, sizeof min_s, "%lld", (long long)min);
    snprintf(max_s, sizeof max_s, "%lld", (long long)max);
    size_t min_d = strlen(min_s), max_d = strlen(max_s);
    for (size_t d = min_d; d < max_d; d++) {
        memset(nines, '9', d); nines[d] = 0;
        uniform_range(o, min_s, nines, d);
        min_s[0] = '1';
        memset(min_s + 1, '0', d);
        min_s[d + 1] = 0;
        th_bytes_str(o, " | ");
    }
    uniform_range(o, min_s, max_s, max_d);
}

void json_int_range(th_bytes *o, bool has_min, int64_t min, bool has_max, int64_t max) {
    const int dl = 16, less = 15;
    char buf[24];
    if (has_min && has_max) { both(o, min, max); return; }
    if (has_min) {
        if (min < 0) {
            th_bytes_str(o, "\"-\" (");
            both(o, 0, -min);     /* llama.cpp reaches the same through its max-only case */
            th_bytes_str(o, ") | [0] | [1-9] ");
            more_digits(o, 0, dl - 1);
        } else {
            snprintf(buf, sizeof buf, "%lld", (long long)min);
            at_least(o, buf, dl, true);
        }
        return;
    }
    if (max >= 0) {
        th_bytes_str(o, "\"-\" [1-9] ");
        more_digits(o, 0, less);
        th_bytes_str(o, " | ");
        both(o, 0, max);
    } else {
        snprintf(buf, sizeof buf, "%lld", (long long)-max);
        th_bytes_str(o, "\"-\" (");
        at_least(o, buf, dl, true);
        th_bytes_str(o, ")");
    }
}
