/* log.c — the search log: one JSON object a line. The records --resume reuses:
 *   {"kind":"sens","tensor":NAME,"expert":E,"type":T,"bytes":B,"kld":K,"ppl_ratio":R,"flips":F,"gap_min":G}
 *   {"kind":"gate"|"calib","label":L,"hash":"16 hex","bytes":B,"kld":K,"ppl_ratio":R,"flips":F,"gap_min":G}
 * Other lines (start, nonmonotone, additivity, done) are for people and skipped.
 * The reader accepts only this flat shape (strings without escapes, numbers as
 * strtod/strtoll read them); anything else makes the line not a record. */
#include "search/search_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_name(th_slog_kind k) {
    return k == TH_SLOG_SENS ? "sens" : k == TH_SLOG_GATE ? "gate" : "calib";
}

void th_slog_write(FILE *f, const th_slog_rec *r) {
    if (r->kind == TH_SLOG_SENS)
        fprintf(f, "{\"kind\":\"sens\",\"tensor\":\"%s\",\"expert\":%d,\"type\":\"%s\",", r->tensor, r->expert, r->type);
    else
        fprintf(f, "{\"kind\":\"%s\",\"label\":\"%s\",\"hash\":\"%016" PRIx64 "\",", kind_name(r->kind), r->tensor, r->hash);
    fprintf(f, "\"bytes\":%" PRIu64 ",\"kld\":%.9g,\"ppl_ratio\":%.9g,\"flips\":%" PRId64 ",\"gap_min\":%.9g}\n", r->bytes,
            r->kld, r->ppl_ratio, r->flips, r->gap_min);
}

/* The value after "key": in line[0, len), or NULL. */
static const char *value_of(const char *line, size_t len, const char *key, size_t *vlen) {
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 3 <= len; i++) {
        if (line[i] != '"' || memcmp(line + i + 1, key, kl) || line[i + 1 + kl] != '"' || line[i + 2 + kl] != ':') continue;
        const char *v = line + i + kl + 3, *end = line + len;
        size_t n = 0;
        if (v < end && *v == '"') {
            for (n = 1; v + n < end && v[n] != '"'; n++)
                if (v[n] == '\\' || (unsigned char)v[n] < 0x20) return NULL;
            if (v + n >= end) return NULL;
            n++;
        } else {
            while (v + n < end && v[n] != ',' && v[n] != '}') n++;
        }
        *vlen = n;
        return v;
    }
    return NULL;
}

static bool get_str(const char *line, size_t len, const char *key, char *out, size_t cap) {
    size_t n;
    const char *v = value_of(line, len, key, &n);
    if (!v || n < 2 || v[0] != '"' || n - 2 >= cap) return false;
    memcpy(out, v + 1, n - 2);
    out[n - 2] = 0;
    return true;
}

static bool get_num(const char *line, size_t len, const char *key, double *out) {
    size_t n;
    char buf[64];
    const char *v = value_of(line, len, key, &n);
    if (!v || n == 0 || n >= sizeof buf || v[0] == '"') return false;
    memcpy(buf, v, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (end != buf + n || errno || !isfinite(d)) return false;
    *out = d;
    return true;
}

static bool get_int(const char *line, size_t len, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    double d;
    if (!get_num(line, len, key, &d) || d < (double)lo || d > (double)hi || d != floor(d)) return false;
    *out = (int64_t)d;
    return true;
}

bool th_slog_parse(const char *line, size_t len, th_slog_rec *r) {
    memset(r, 0, sizeof *r);
    char kind[16];
    if (!get_str(line, len, "kind", kind, sizeof kind)) return false;
    if (!strcmp(kind, "sens")) r->kind = TH_SLOG_SENS;
    else if (!strcmp(kind, "gate")) r->kind = TH_SLOG_GATE;
    else if (!strcmp(kind, "calib")) r->kind = TH_SLOG_CALIB;
    else return false;
    int64_t x;
    if (r->kind == TH_SLOG_SENS) {
        if (!get_str(line, len, "tensor", r->tensor, sizeof r->tensor) || !get_str(line, len, "type", r->type, sizeof r->type) ||
            !get_int(line, len, "expert", -1, INT32_MAX, &x))
            return false;
        r->expert = (int32_t)x;
    } else {
        char hex[24], *end;
        if (!get_str(line, len, "hash", hex, sizeof hex) || strlen(hex) != 16) return false;
        errno = 0;
        r->hash = strtoull(hex, &end, 16);
        if (*end || errno) return false;
        get_str(line, len, "label", r->tensor, sizeof r->tensor);
        r->expert = -1;
    }
    double b;
    if (!get_num(line, len, "bytes", &b) || b < 0 || b > 1.8e19 || !get_num(line, len, "kld", &r->kld) ||
        !get_num(line, len, "ppl_ratio", &r->ppl_ratio) || !get_int(line, len, "flips", 0, INT64_MAX / 2, &r->flips) ||
        !get_num(line, len, "gap_min", &r->gap_min))
        return false;
    r->bytes = (uint64_t)b;
    return true;
}

th_status th_search_memo_add(th_search_memo *m, const th_slog_rec *r) {
    if (m->n == m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 256;
        th_slog_rec *n = realloc(m->r, nc * sizeof *n);
        if (!n) return th_set_error(TH_ERR_NOMEM, "search: out of memory");
        m->r = n;
        m->cap = nc;
    }
    m->r[m->n++] = *r;
    return TH_OK;
}

th_status th_search_memo_load(th_search_memo *m, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return th_set_error(TH_ERR_IO, "search --resume %s: cannot open", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    th_status s = TH_OK;
    size_t before = m->n;
    while (!s && (n = getline(&line, &cap, f)) > 0) {
        th_slog_rec r;
        if (th_slog_parse(line, (size_t)n, &r)) s = th_search_memo_add(m, &r);
    }
    free(line);
    fclose(f);
    if (!s) fprintf(stderr, "search: %zu finished evaluations read from %s\n", m->n - before, path);
    return s;
}

const th_slog_rec *th_search_memo_sens(const th_search_memo *m, const char *tensor, int32_t expert, const char *type) {
    for (size_t i = m->n; i-- > 0;) {
        const th_slog_rec *r = &m->r[i];
        if (r->kind == TH_SLOG_SENS && r->expert == expert && !strcmp(r->tensor, tensor) && !strcmp(r->type, type)) return r;
    }
    return NULL;
}

const th_slog_rec *th_search_memo_hash(const th_search_memo *m, th_slog_kind kind, uint64_t hash) {
    for (size_t i = m->n; i-- > 0;)
        if (m->r[i].kind == kind && m->r[i].hash == hash) return &m->r[i];
    return NULL;
}

void th_search_memo_free(th_search_memo *m) {
    free(m->r);
    memset(m, 0, sizeof *m);
}

th_status th_slog_check_start(const char *path, const int32_t want[4]) {
    static const char *const keys[4] = { "n_ctx", "chunks", "calib_ctx", "calib_chunks" };
    FILE *f = fopen(path, "rb");
    if (!f) return th_set_error(TH_ERR_IO, "search --resume %s: cannot open", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    th_status s = TH_OK;
    while ((n = getline(&line, &cap, f)) > 0) {
        char kind[16];
        if (!get_str(line, (size_t)n, "kind", kind, sizeof kind) || strcmp(kind, "start")) continue;
        for (int k = 0; k < 4 && !s; k++) {
            double v;
            if (!get_num(line, (size_t)n, keys[k], &v) || v != (double)want[k])
                s = th_set_error(TH_ERR_ARG, "search --resume %s: the log was made with another %s (the evaluations "
                                 "are not comparable)", path, keys[k]);
        }
        break;   /* the first start line decides */
    }
    free(line);
    fclose(f);
    return s;
}
