/* safetensors.c — the safetensors reader: header length, JSON header (cJSON),
 * per-tensor dtype / shape / data_offsets checks, the whole data area covered
 * by non-overlapping ranges, __metadata__; mapping files; sharded sets through
 * model.safetensors.index.json (every shard it names must exist and hold the
 * tensors the index says it does). */
#include "hf/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; size_t size; } DTYPES[ST_DTYPE_COUNT] = {
    [ST_F32] = { "F32", 4 }, [ST_F16] = { "F16", 2 }, [ST_BF16] = { "BF16", 2 }, [ST_F64] = { "F64", 8 },
    [ST_I64] = { "I64", 8 }, [ST_I32] = { "I32", 4 }, [ST_I16] = { "I16", 2 }, [ST_I8] = { "I8", 1 },
    [ST_U8] = { "U8", 1 }, [ST_BOOL] = { "BOOL", 1 }, [ST_F8_E4M3] = { "F8_E4M3", 1 },
};

const char *st_dtype_name(int d) { return d >= 0 && d < ST_DTYPE_COUNT ? DTYPES[d].name : "?"; }
size_t st_dtype_size(int d) { return d >= 0 && d < ST_DTYPE_COUNT ? DTYPES[d].size : 0; }

static int dtype_of(const char *s) {
    for (int i = 0; i < ST_DTYPE_COUNT; i++) if (!strcmp(s, DTYPES[i].name)) return i;
    return -1;
}

/* A JSON number that is a non-negative integer exactly representable (< 2^53). */
static bool json_u64(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d) return false;
    *out = (uint64_t)d;
    return true;
}

void st_close(st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free(f->t[i].name);
    for (size_t i = 0; i < f->n_meta; i++) { free(f->meta_key[i]); free(f->meta_val[i]); }
    free(f->t);
    free(f->meta_key);
    free(f->meta_val);
    if (f->map) munmap(f->map, (size_t)f->size);
    free(f->name);
    free(f);
}

static th_status read_metadata(st_file *f, const cJSON *meta) {
    if (!cJSON_IsObject(meta))
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': __metadata__ is not an object", f->name);
    size_t n = (size_t)cJSON_GetArraySize(meta);
    f->meta_key = calloc(n ? n : 1, sizeof *f->meta_key);
    f->meta_val = calloc(n ? n : 1, sizeof *f->meta_val);
    if (!f->meta_key || !f->meta_val) return th_set_error(TH_ERR_NOMEM, "safetensors: out of memory");
    for (const cJSON *e = meta->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return th_set_error(TH_ERR_FORMAT, "safetensors '%s': __metadata__ value of '%s' is not a string", f->name,
                                e->string);
        f->meta_key[f->n_meta] = strdup(e->string);
        f->meta_val[f->n_meta] = strdup(e->valuestring);
        if (!f->meta_key[f->n_meta++] || !f->meta_val[f->n_meta - 1])
            return th_set_error(TH_ERR_NOMEM, "safetensors: out of memory");
    }
    return TH_OK;
}

static th_status read_tensor(st_file *f, const cJSON *e, uint64_t data_size, st_tensor *t) {
    const char *nm = e->string;
    if (!cJSON_IsObject(e)) return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s' is not an object", f->name, nm);
    t->name = strdup(nm);
    if (!t->name) return th_set_error(TH_ERR_NOMEM, "safetensors: out of memory");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': field 'dtype' is missing or not a string", f->name, nm);
    if ((t->dtype = dtype_of(dt->valuestring)) < 0)
        return th_set_error(TH_ERR_UNSUPPORTED, "safetensors '%s': tensor '%s': dtype '%s' is not supported (F32, F16, BF16, "
                            "F64, I64, I32, I16, I8, U8, BOOL, F8_E4M3 are)", f->name, nm, dt->valuestring);
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > ST_MAX_DIMS)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': field 'shape' is not an array of at most %d sizes",
                            f->name, nm, ST_MAX_DIMS);
    uint64_t n = 1;
    for (const cJSON *d = sh->child; d; d = d->next) {
        uint64_t v;
        if (!json_u64(d, &v))
            return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': field 'shape' holds a value that is not a "
                                "non-negative integer", f->name, nm);
        if (!th_mul_u64(n, v, &n))
            return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': shape overflows 64 bits", f->name, nm);
        t->shape[t->n_dims++] = v;
    }
    t->n_elem = n;
    uint64_t b, end;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_u64(off->child, &b) || !json_u64(off->child->next, &end))
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': field 'data_offsets' is not [begin, end] "
                            "(two non-negative integers)", f->name, nm);
    if (end < b || end > data_size)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] are not "
                            "inside the data area (%" PRIu64 " bytes)", f->name, nm, b, end, data_size);
    if (!th_mul_u64(n, st_dtype_size(t->dtype), &t->nbytes) || t->nbytes != end - b)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': shape x %s needs %" PRIu64 " elements but "
                            "data_offsets give %" PRIu64 " bytes", f->name, nm, dt->valuestring, n, end - b);
    t->begin = b;
    t->data = f->base + f->data_offset + b;
    return TH_OK;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Ranges sorted by start: each begins where the previous ended (so none
 * overlap and there are no holes), the last ends at the end of the file. */
static th_status check_cover(st_file *f, uint64_t data_size) {
    qsort(f->t, f->n, sizeof *f->t, cmp_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        if (t->begin < at)
            return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap "
                                "tensor '%s' (which ends at %" PRIu64 ")", f->name, t->name, t->begin, t->begin + t->nbytes,
                                f->t[i - 1].name, at);
        if (t->begin > at)
            return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s': data_offsets begin at %" PRIu64 ", leaving bytes "
                                "%" PRIu64 "..%" PRIu64 " of the data area unused", f->name, t->name, t->begin, at, t->begin);
        at = t->begin + t->nbytes;
    }
    if (at != data_size)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': the tensors cover %" PRIu64 " bytes, but the data area has %" PRIu64,
                            f->name, at, data_size);
    return TH_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static th_status parse_header(st_file *f, const cJSON *root) {
    if (!cJSON_IsObject(root)) return th_set_error(TH_ERR_FORMAT, "safetensors '%s': the header is not a JSON object", f->name);
    uint64_t data_size = f->size - f->data_offset;
    size_t n = (size_t)cJSON_GetArraySize(root);
    f->t = calloc(n ? n : 1, sizeof *f->t);
    if (!f->t) return th_set_error(TH_ERR_NOMEM, "safetensors: out of memory for %zu tensors", n);
    th_status s;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (f->meta_key) return th_set_error(TH_ERR_FORMAT, "safetensors '%s': __metadata__ appears twice", f->name);
            if ((s = read_metadata(f, e))) return s;
            continue;
        }
        if ((s = read_tensor(f, e, data_size, &f->t[f->n++]))) return s;
    }
    if ((s = check_cover(f, data_size))) return s;
    qsort(f->t, f->n, sizeof *f->t, cmp_name);
    for (size_t i = 1; i < f->n; i++)
        if (!strcmp(f->t[i].name, f->t[i - 1].name))
            return th_set_error(TH_ERR_FORMAT, "safetensors '%s': tensor '%s' appears twice", f->name, f->t[i].name);
    return TH_OK;
}

static th_status parse_into(st_file *f) {
    if (f->size < 8)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': %" PRIu64 " bytes is too short for the header length", f->name, f->size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | f->base[i];
    if (hl > ST_MAX_HEADER)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': header length %" PRIu64 " is over the %u-byte limit", f->name, hl,
                            ST_MAX_HEADER);
    if (hl > f->size - 8)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': header length %" PRIu64 " runs past the end of the file (%" PRIu64
                            " bytes)", f->name, hl, f->size);
    if (hl < 2 || f->base[8] != '{')
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': the header does not start with '{'", f->name);
    f->data_offset = 8 + hl;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)f->base + 8, (size_t)hl, &end, false);
    if (!root)
        return th_set_error(TH_ERR_FORMAT, "safetensors '%s': the header is not valid JSON (near byte %" PRIu64 ")", f->name,
                            (uint64_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - (const char *)f->base : 8));
    for (const char *p = end; p < (const char *)f->base + 8 + hl; p++)
        if (*p != ' ') {
            cJSON_Delete(root);
            return th_set_error(TH_ERR_FORMAT, "safetensors '%s': bytes after the header's JSON object (only spaces may pad it)",
                                f->name);
        }
    th_status s = parse_header(f, root);
    cJSON_Delete(root);
    return s;
}

th_status st_parse(const uint8_t *data, uint64_t size, const char *name, st_file **out) {
    *out = NULL;
    st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name ? name : "<buffer>"))) { free(f); return th_set_error(TH_ERR_NOMEM, "safetensors: out of memory"); }
    f->base = data;
    f->size = size;
    th_status s = parse_into(f);
    if (s) { st_close(f); return s; }
    *out = f;
    return TH_OK;
}

th_status st_open(const char *path, st_file **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return th_set_error(TH_ERR_IO, "safetensors: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return th_set_error(TH_ERR_IO, "safetensors: '%s' is not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    void *map = size ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (map == MAP_FAILED) return th_set_error(TH_ERR_IO, "safetensors: cannot map '%s': %s", path, strerror(errno));
    st_file *f = NULL;
    th_status s = st_parse(map ? map : (const uint8_t *)"", size, path, &f);
    if (s) { if (map) munmap(map, (size_t)size); return s; }
    f->map = map;
    *out = f;
    return TH_OK;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->t[mid].name, name);
        if (!c) return &f->t[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

/* ------------------------------------------------------------ sets of shards */

th_status hf_read_text(const char *path, size_t max, char **out, size_t *len) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return th_set_error(TH_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap > max) { free(buf); fclose(fp); return th_set_error(TH_ERR_FORMAT, "'%s' is larger than %zu bytes", path, max); }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, fp);
        n += r;
        if (r == 0) break;
    }
    fclose(fp);
    if (!buf) return th_set_error(TH_ERR_NOMEM, "out of memory reading '%s'", path);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return TH_OK;
}

void st_set_close(st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) st_close(s->files[i]);
    free(s->files);
    free(s);
}

static th_status set_add(st_set *s, const char *path) {
    st_file **nf = realloc(s->files, (s->n_files + 1) * sizeof *nf);
    if (!nf) return th_set_error(TH_ERR_NOMEM, "out of memory");
    s->files = nf;
    return st_open(path, &s->files[s->n_files++]) ? (s->n_files--, TH_ERR_FORMAT) : TH_OK;
}

static bool has_file(const st_set *s, const char *path) {
    for (size_t i = 0; i < s->n_files; i++) if (!strcmp(s->files[i]->name, path)) return true;
    return false;
}

/* weight_map: {"tensor": "shard file name"}; every shard is opened once and
 * must hold the tensors the index assigns to it. */
static th_status open_index(st_set *s, const char *dir, const char *ipath) {
    char *text;
    th_status st = hf_read_text(ipath, 64u << 20, &text, NULL);
    if (st) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return th_set_error(TH_ERR_FORMAT, "'%s': not JSON with a 'weight_map' object", ipath);
    }
    char path[4096];
    for (const cJSON *e = wm->child; e && !st; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !e->valuestring[0]) {
            st = th_set_error(TH_ERR_FORMAT, "'%s': weight_map entry '%s' is not a file name in the directory", ipath, e->string);
            break;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
        if (!has_file(s, path)) {
            if (access(path, F_OK) != 0) {
                st = th_set_error(TH_ERR_IO, "'%s': shard '%s' (holding tensor '%s') is missing", ipath, e->valuestring, e->string);
                break;
            }
            if ((st = set_add(s, path))) break;
        }
        const st_file *f = NULL;
        for (size_t i = 0; i < s->n_files; i++) if (!strcmp(s->files[i]->name, path)) f = s->files[i];
        if (!st_find(f, e->string))
            st = th_set_error(TH_ERR_FORMAT, "'%s': tensor '%s' is not in shard '%s' although the index says so", ipath,
                              e->string, e->valuestring);
    }
    cJSON_Delete(root);
    return st;
}

th_status st_set_open(const char *path, st_set **out) {
    *out = NULL;
    st_set *s = calloc(1, sizeof *s);
    if (!s) return th_set_error(TH_ERR_NOMEM, "out of memory");
    struct stat st;
    th_status r;
    char p[4096];
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
        if (access(p, F_OK) == 0) r = open_index(s, path, p);
        else {
            snprintf(p, sizeof p, "%s/model.safetensors", path);
            r = access(p, F_OK) == 0 ? set_add(s, p)
                : th_set_error(TH_ERR_IO, "'%s': neither model.safetensors nor model.safetensors.index.json is there", path);
        }
    } else {
        r = set_add(s, path);
    }
    if (r) { st_set_close(s); return r; }
    *out = s;
    return TH_OK;
}

const st_tensor *st_set_find(const st_set *s, const char *name, const st_file **file) {
    for (size_t i = 0; i < s->n_files; i++) {
        const st_tensor *t = st_find(s->files[i], name);
        if (t) { if (file) *file = s->files[i]; return t; }
    }
    return NULL;
}
