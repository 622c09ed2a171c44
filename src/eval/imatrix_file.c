/* imatrix_file.c — the importance matrix on disk and its accessors (no forward
 * pass: the quantizer links this alone).
 *
 * File (llama.cpp's imatrix.dat, little-endian): i32 n_entries, then per entry
 * i32 name_len, name, i32 ncall, i32 n_values, f32 values[n_values]; then i32
 * last_call (chunks) and i32 len + the dataset (text file name). Entries with a
 * column never seen (an expert no token chose) are not written, as there. */
#include "eval/imatrix_internal.h"
#include "core/core.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_NAME = 4096 };

entry *th_imx_find(th_imatrix *im, const char *name) {
    for (int32_t i = 0; i < im->n; i++)
        if (!strcmp(im->e[i].name, name)) return &im->e[i];
    return NULL;
}

entry *th_imx_add(th_imatrix *im, const char *name, int64_t n, bool counts) {
    if (im->n == im->cap) {
        int32_t nc = im->cap ? 2 * im->cap : 64;
        entry *ne = realloc(im->e, (size_t)nc * sizeof *ne);
        if (!ne) return NULL;
        im->e = ne;
        im->cap = nc;
    }
    entry *e = &im->e[im->n];
    *e = (entry){ .name = strdup(name), .n = n, .sum = calloc((size_t)n, sizeof(float)),
                  .count = counts ? calloc((size_t)n, sizeof(int32_t)) : NULL, .last_pass = -1 };
    if (!e->name || !e->sum || (counts && !e->count)) {
        free(e->name); free(e->sum); free(e->count);
        return NULL;
    }
    im->n++;
    return e;
}

static bool complete(const entry *e) {
    if (!e->count) return true;
    for (int64_t j = 0; j < e->n; j++)
        if (!e->count[j]) return false;
    return true;
}

int32_t th_imatrix_n_entries(const th_imatrix *im) {
    int32_t n = 0;
    for (int32_t i = 0; i < im->n; i++) n += complete(&im->e[i]);
    return n;
}

int32_t th_imatrix_n_chunks(const th_imatrix *im) { return im->last_call; }
const char *th_imatrix_dataset(const th_imatrix *im) { return im->dataset ? im->dataset : ""; }

th_status th_imatrix_write(const th_imatrix *im, const char *path, const char *dataset) {
    FILE *f = fopen(path, "wb");
    if (!f) return th_set_error(TH_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    int32_t n = th_imatrix_n_entries(im);
    bool ok = fwrite(&n, 4, 1, f) == 1;
    for (int32_t i = 0; ok && i < im->n; i++) {
        const entry *e = &im->e[i];
        if (!complete(e)) continue;
        int32_t len = (int32_t)strlen(e->name), nv = (int32_t)e->n;
        ok = fwrite(&len, 4, 1, f) == 1 && fwrite(e->name, 1, (size_t)len, f) == (size_t)len &&
             fwrite(&e->ncall, 4, 1, f) == 1 && fwrite(&nv, 4, 1, f) == 1 &&
             fwrite(e->sum, 4, (size_t)nv, f) == (size_t)nv;
    }
    const char *ds = dataset ? dataset : th_imatrix_dataset(im);
    int32_t dl = (int32_t)strlen(ds);
    ok = ok && fwrite(&im->last_call, 4, 1, f) == 1 && fwrite(&dl, 4, 1, f) == 1 && fwrite(ds, 1, (size_t)dl, f) == (size_t)dl;
    ok = fclose(f) == 0 && ok;
    if (!ok) { remove(path); return th_set_error(TH_ERR_IO, "%s: write failed", path); }
    return TH_OK;
}

/* ------------------------------------------------------------ reading (untrusted) */

static bool rd(const uint8_t *d, size_t size, size_t *off, void *dst, size_t n) {
    if (n > size - *off) return false;
    memcpy(dst, d + *off, n);
    *off += n;
    return true;
}

th_status th_imatrix_parse(const uint8_t *d, size_t size, const char *name, th_imatrix **out) {
    *out = NULL;
    const char *nm = name ? name : "imatrix";
    size_t off = 0;
    int32_t n;
    if (!rd(d, size, &off, &n, 4) || n < 1 || n > (1 << 24))
        return th_set_error(TH_ERR_FORMAT, "%s: not an importance matrix (entry count %s)", nm,
                            size < 4 ? "missing" : "not in [1, 16777216]");
    th_imatrix *im = calloc(1, sizeof *im);
    if (!im) return th_set_error(TH_ERR_NOMEM, "%s: out of memory", nm);
    th_status s = TH_OK;
    char nbuf[MAX_NAME + 1];
    for (int32_t i = 0; !s && i < n; i++) {
        int32_t len, ncall, nv;
        if (!rd(d, size, &off, &len, 4) || len < 1 || len > MAX_NAME || !rd(d, size, &off, nbuf, (size_t)len)) {
            s = th_set_error(TH_ERR_FORMAT, "%s: entry %d: bad or truncated name (at byte %zu)", nm, i, off);
            break;
        }
        nbuf[len] = 0;
        if (strlen(nbuf) != (size_t)len) { s = th_set_error(TH_ERR_FORMAT, "%s: entry %d: a NUL inside the name", nm, i); break; }
        if (!rd(d, size, &off, &ncall, 4) || !rd(d, size, &off, &nv, 4) || nv < 1 || ncall < 0 ||
            (size_t)nv > (size - off) / 4) {
            s = th_set_error(TH_ERR_FORMAT, "%s: entry %d (%s): bad ncall/count or truncated values", nm, i, nbuf);
            break;
        }
        if (th_imx_find(im, nbuf)) { s = th_set_error(TH_ERR_FORMAT, "%s: entry %s appears twice", nm, nbuf); break; }
        entry *e = th_imx_add(im, nbuf, nv, false);
        if (!e) { s = th_set_error(TH_ERR_NOMEM, "%s: out of memory", nm); break; }
        rd(d, size, &off, e->sum, 4 * (size_t)nv);
        e->ncall = ncall;
        for (int32_t j = 0; j < nv; j++)
            if (!isfinite(e->sum[j])) { s = th_set_error(TH_ERR_FORMAT, "%s: %s: value %d is not finite", nm, nbuf, j); break; }
    }
    if (!s && off < size) {   /* optional trailer: chunks and the dataset name */
        int32_t lc, dl;
        if (!rd(d, size, &off, &lc, 4) || !rd(d, size, &off, &dl, 4) || dl < 0 || (size_t)dl != size - off)
            s = th_set_error(TH_ERR_FORMAT, "%s: bad trailer after the entries (at byte %zu)", nm, off);
        else if (!(im->dataset = malloc((size_t)dl + 1)))
            s = th_set_error(TH_ERR_NOMEM, "%s: out of memory", nm);
        else {
            memcpy(im->dataset, d + off, (size_t)dl);
            im->dataset[dl] = 0;
            im->last_call = lc;
        }
    }
    if (s) { th_imatrix_free(im); return s; }
    *out = im;
    return TH_OK;
}

th_status th_imatrix_load(const char *path, th_imatrix **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return th_set_error(TH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *d = NULL;
    size_t size = 0, cap = 0, got;
    th_status s = TH_OK;
    do {
        if (size == cap) {
            uint8_t *nd = realloc(d, cap = cap ? 2 * cap : 1 << 16);
            if (!nd) { s = th_set_error(TH_ERR_NOMEM, "%s: out of memory", path); break; }
            d = nd;
        }
        got = fread(d + size, 1, cap - size, f);
        size += got;
    } while (got > 0);
    if (!s && ferror(f)) s = th_set_error(TH_ERR_IO, "%s: read error", path);
    fclose(f);
    if (!s) s = th_imatrix_parse(d, size, path, out);
    free(d);
    return s;
}

const float *th_imatrix_values(const th_imatrix *im, const char *name, int64_t *n_values, int32_t *ncall) {
    for (int32_t i = 0; i < im->n; i++) {
        const entry *e = &im->e[i];
        if (strcmp(e->name, name) || !complete(e)) continue;
        if (n_values) *n_values = e->n;
        if (ncall) *ncall = e->ncall;
        return e->sum;
    }
    return NULL;
}

const char *th_imatrix_entry_name(const th_imatrix *im, int32_t i) {
    return i >= 0 && i < im->n ? im->e[i].name : NULL;
}

void th_imatrix_free(th_imatrix *im) {
    if (!im) return;
    for (int32_t i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].sum);
        free(im->e[i].count);
    }
    free(im->e);
    free(im->dataset);
    free(im);
}
