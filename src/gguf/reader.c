/* reader.c — the GGUF reader: takes the bytes of a file (open.c maps or reads
 * it) or a caller's buffer, validates
 * every count, length, type, shape and offset with checked arithmetic before
 * anything is used, and answers lookups and typed getters.
 *
 * Choices (see also gguf.h):
 *  - Versions 2 and 3 (identical layout, 64-bit counts); v1 and big-endian files
 *    are rejected with a message saying so.
 *  - Arrays of arrays are accepted and validated recursively up to a nesting depth
 *    of GGUF_MAX_ARRAY_DEPTH; their elements are not exposed beyond arr_data.
 *  - A tensor dimension of 0 is rejected (ggml accepts empty tensors; a model
 *    weight with no elements is never meaningful for us).
 *  - Bool values must be 0 or 1.
 *  - Tensors may be stored in any order and with gaps, but each offset must be a
 *    multiple of the alignment, lie inside the data section and not overlap
 *    another tensor (llama.cpp additionally insists on the packed order).
 */
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define GGUF_MAGIC 0x46554747u          /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_ARRAY_DEPTH 8
#define GGUF_MAX_COUNT (1ull << 30)     /* kvs or tensors: far above any real file */
/* Smallest encodings, used to bound counts by the bytes left before allocating. */
#define GGUF_MIN_KV_BYTES 14u           /* key len 8 + 1 byte key + type 4 + 1 byte value */
#define GGUF_MIN_TENSOR_BYTES 33u       /* name len 8 + 1 + n_dims 4 + ne 8 + type 4 + offset 8 */

/* The public struct plus private lookup tables (open addressing, index+1, 0 = empty). */
typedef struct gguf_impl {
    gguf_file pub;
    uint32_t *kv_hash, *tensor_hash;
    uint64_t kv_cap, tensor_cap;       /* power of two, or 0 */
} gguf_impl;

/* ---------- cursor over untrusted bytes ---------- */

typedef struct cursor {
    const uint8_t *base;
    uint64_t size, pos;
} cursor;

static uint64_t cur_left(const cursor *c) { return c->size - c->pos; }

static inline uint64_t rd_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t rd_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t rd_u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Printable copy of an untrusted name for error messages (at most 96 bytes). */
static const char *printable(gguf_str s, char *buf, size_t cap) {
    size_t n = 0;
    for (uint64_t i = 0; i < s.len && n + 4 < cap; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (s.len > cap - 4) { buf[n++] = '.'; buf[n++] = '.'; buf[n++] = '.'; }
    buf[n] = 0;
    return buf;
}

/* Where an error is: "key #3 'general.name' at offset 120" and similar. */
typedef struct where {
    char text[200];
} where;

static th_status fmt_err(const where *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static th_status fmt_err(const where *w, const char *fmt, ...) {
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return th_set_error(TH_ERR_FORMAT, "gguf: %s: %s", w->text, msg);
}

static th_status need(const cursor *c, uint64_t n, const where *w, const char *what) {
    if (n > cur_left(c))
        return fmt_err(w, "%s at offset %" PRIu64 " needs %" PRIu64 " bytes but only %" PRIu64
                       " are left in the file", what, c->pos, n, cur_left(c));
    return TH_OK;
}

static th_status read_u32(cursor *c, uint32_t *v, const where *w, const char *what) {
    th_status s = need(c, 4, w, what);
    if (s) return s;
    *v = rd_u32(c->base + c->pos);
    c->pos += 4;
    return TH_OK;
}

static th_status read_u64(cursor *c, uint64_t *v, const where *w, const char *what) {
    th_status s = need(c, 8, w, what);
    if (s) return s;
    *v = rd_u64(c->base + c->pos);
    c->pos += 8;
    return TH_OK;
}

static th_status read_str(cursor *c, gguf_str *out, const where *w, const char *what) {
    uint64_t at = c->pos, len;
    th_status s = read_u64(c, &len, w, what);
    if (s) return s;
    if (len > cur_left(c))
        return fmt_err(w, "%s at offset %" PRIu64 ": string length %" PRIu64
                       " exceeds the %" PRIu64 " bytes left", what, at, len, cur_left(c));
    out->ptr = (const char *)(c->base + c->pos);
    out->len = len;
    c->pos += len;
    return TH_OK;
}

/* ---------- value types ---------- */

static const char *const vtype_names[GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *gguf_vtype_name(uint32_t t) {
    return t < GGUF_VTYPE_COUNT ? vtype_names[t] : "invalid type";
}

/* Bytes of a fixed-size value type, 0 for string/array/invalid. */
static uint32_t vtype_size(uint32_t t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

static th_status check_bools(const uint8_t *p, uint64_t n, uint64_t at, const where *w) {
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1)
            return fmt_err(w, "bool value %u at offset %" PRIu64 " is not 0 or 1", p[i], at + i);
    return TH_OK;
}

/* Validate an array body (element type + count + elements) at the cursor; fills the
 * array fields of kv when kv != NULL (top level). */
static th_status parse_array(cursor *c, gguf_kv *kv, int depth, const where *w) {
    uint64_t at = c->pos, n;
    uint32_t et;
    th_status s = read_u32(c, &et, w, "array element type");
    if (s) return s;
    if (et >= GGUF_VTYPE_COUNT)
        return fmt_err(w, "array element type %u at offset %" PRIu64 " is not a GGUF value type (0..12)", et, at);
    if (et == GGUF_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return fmt_err(w, "arrays nested deeper than %d levels at offset %" PRIu64, GGUF_MAX_ARRAY_DEPTH, at);
    uint64_t n_at = c->pos;
    if ((s = read_u64(c, &n, w, "array count"))) return s;
    uint64_t esz = vtype_size(et);
    uint64_t min_each = esz ? esz : (et == GGUF_STRING ? 8 : 12);
    uint64_t min_total;
    if (!th_mul_u64(n, min_each, &min_total) || min_total > cur_left(c))
        return fmt_err(w, "array of %" PRIu64 " %s at offset %" PRIu64 " cannot fit in the %" PRIu64
                       " bytes left (each needs at least %" PRIu64 ")", n, gguf_vtype_name(et), n_at,
                       cur_left(c), min_each);
    if (kv) { kv->arr_type = et; kv->arr_n = n; kv->arr_data = c->base + c->pos; }
    if (esz) {
        if (et == GGUF_BOOL && (s = check_bools(c->base + c->pos, n, c->pos, w))) return s;
        c->pos += min_total;
        return TH_OK;
    }
    if (et == GGUF_STRING) {
        gguf_str *strs = NULL;
        if (kv && n) {
            strs = malloc(n * sizeof *strs);  /* n <= bytes left / 8: bounded by the file */
            if (!strs) return th_set_error(TH_ERR_NOMEM, "gguf: %s: no memory for %" PRIu64 " strings", w->text, n);
            kv->arr_strs = strs;
        }
        for (uint64_t i = 0; i < n; i++) {
            gguf_str tmp;
            if ((s = read_str(c, strs ? &strs[i] : &tmp, w, "array string"))) return s;
        }
        return TH_OK;
    }
    for (uint64_t i = 0; i < n; i++)
        if ((s = parse_array(c, NULL, depth + 1, w))) return s;
    return TH_OK;
}

static th_status parse_value(cursor *c, gguf_kv *kv, const where *w) {
    uint32_t sz = vtype_size(kv->type);
    kv->raw = c->base + c->pos;
    if (sz) {
        th_status s = need(c, sz, w, gguf_vtype_name(kv->type));
        if (s) return s;
        if (kv->type == GGUF_BOOL && (s = check_bools(kv->raw, 1, c->pos, w))) return s;
        c->pos += sz;
        return TH_OK;
    }
    if (kv->type == GGUF_STRING) return read_str(c, &kv->str, w, "string value");
    return parse_array(c, kv, 0, w);
}

/* ---------- hash tables for duplicate detection and lookup ---------- */

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) { h ^= (unsigned char)p[i]; h *= 1099511628211ull; }
    return h;
}

static bool str_eq(gguf_str a, const char *p, uint64_t n) {
    return a.len == n && memcmp(a.ptr, p, n) == 0;
}

static uint64_t table_cap(uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

/* Names are read through get_name(items, i). Returns the index of an existing equal
 * name, or UINT64_MAX after inserting i. */
typedef gguf_str (*name_fn)(const void *items, uint64_t i);
static gguf_str kv_name(const void *items, uint64_t i) { return ((const gguf_kv *)items)[i].key; }
static gguf_str tensor_name(const void *items, uint64_t i) { return ((const gguf_tensor *)items)[i].name; }

static uint64_t table_insert(uint32_t *tab, uint64_t cap, const void *items, name_fn get, uint64_t i) {
    gguf_str s = get(items, i);
    for (uint64_t h = hash_bytes(s.ptr, s.len) & (cap - 1);; h = (h + 1) & (cap - 1)) {
        if (!tab[h]) { tab[h] = (uint32_t)(i + 1); return UINT64_MAX; }
        if (str_eq(get(items, tab[h] - 1), s.ptr, s.len)) return tab[h] - 1;
    }
}

static int64_t table_find(const uint32_t *tab, uint64_t cap, const void *items, name_fn get, const char *key) {
    if (!tab || !key) return -1;
    size_t n = strlen(key);
    for (uint64_t h = hash_bytes(key, n) & (cap - 1);; h = (h + 1) & (cap - 1)) {
        if (!tab[h]) return -1;
        if (str_eq(get(items, tab[h] - 1), key, n)) return tab[h] - 1;
    }
}

/* ---------- header, kvs, tensor infos ---------- */

static th_status parse_header(cursor *c, gguf_file *f) {
    where w = { "header" };
    if (c->size < 4 || rd_u32(c->base) != GGUF_MAGIC) {
        if (c->size < 4) return fmt_err(&w, "file is %" PRIu64 " bytes, too short for the GGUF magic", c->size);
        return fmt_err(&w, "bad magic %02x %02x %02x %02x at offset 0 (expected \"GGUF\")",
                       c->base[0], c->base[1], c->base[2], c->base[3]);
    }
    c->pos = 4;
    th_status s = read_u32(c, &f->version, &w, "version");
    if (s) return s;
    if (f->version == 1)
        return fmt_err(&w, "version 1 at offset 4 is not supported (GGUF v1 used 32-bit counts; re-convert the model)");
    if (f->version != 2 && f->version != 3) {
        uint32_t v = f->version;
        if ((v & 0xffff) == 0 && (v >> 24) >= 1 && (v >> 24) <= 3)
            return fmt_err(&w, "version field %u at offset 4 looks like a big-endian GGUF v%u file, which is not supported", v, v >> 24);
        return fmt_err(&w, "version %u at offset 4 is not supported (this reader handles 2 and 3)", v);
    }
    if ((s = read_u64(c, &f->n_tensors, &w, "tensor count"))) return s;
    if ((s = read_u64(c, &f->n_kv, &w, "key-value count"))) return s;
    return TH_OK;
}

static th_status check_count(const cursor *c, uint64_t n, uint64_t min_each, uint64_t at, const char *what) {
    uint64_t total;
    if (n > GGUF_MAX_COUNT)
        return th_set_error(TH_ERR_FORMAT, "gguf: header: %s %" PRIu64 " at offset %" PRIu64
                            " exceeds the limit of %llu", what, n, at, GGUF_MAX_COUNT);
    if (!th_mul_u64(n, min_each, &total) || total > cur_left(c))
        return th_set_error(TH_ERR_FORMAT, "gguf: header: %s %" PRIu64 " at offset %" PRIu64
                            " cannot fit in the %" PRIu64 " bytes left (each needs at least %" PRIu64 ")",
                            what, n, at, cur_left(c), min_each);
    return TH_OK;
}

static th_status parse_kvs(cursor *c, gguf_impl *im) {
    gguf_file *f = &im->pub;
    th_status s = check_count(c, f->n_kv, GGUF_MIN_KV_BYTES, 16, "n_kv");
    if (s) return s;
    if (f->n_kv) {
        f->kv = calloc(f->n_kv, sizeof *f->kv);
        im->kv_cap = table_cap(f->n_kv);
        im->kv_hash = calloc(im->kv_cap, sizeof *im->kv_hash);
        if (!f->kv || !im->kv_hash) return th_set_error(TH_ERR_NOMEM, "gguf: no memory for %" PRIu64 " keys", f->n_kv);
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        where w;
        char nm[100];
        uint64_t at = c->pos;
        snprintf(w.text, sizeof w.text, "key #%" PRIu64 " at offset %" PRIu64, i, at);
        if ((s = read_str(c, &kv->key, &w, "key"))) return s;
        if (kv->key.len == 0) return fmt_err(&w, "empty key");
        snprintf(w.text, sizeof w.text, "key #%" PRIu64 " '%s' at offset %" PRIu64, i,
                 printable(kv->key, nm, sizeof nm), at);
        uint64_t type_at = c->pos;
        if ((s = read_u32(c, &kv->type, &w, "value type"))) return s;
        if (kv->type >= GGUF_VTYPE_COUNT)
            return fmt_err(&w, "value type %u at offset %" PRIu64 " is not a GGUF value type (0..12)", kv->type, type_at);
        if ((s = parse_value(c, kv, &w))) return s;
        uint64_t dup = table_insert(im->kv_hash, im->kv_cap, f->kv, kv_name, i);
        if (dup != UINT64_MAX) return fmt_err(&w, "duplicate key (first defined as key #%" PRIu64 ")", dup);
    }
    return TH_OK;
}

static th_status parse_alignment(gguf_impl *im) {
    gguf_file *f = &im->pub;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = table_find(im->kv_hash, im->kv_cap, f->kv, kv_name, "general.alignment");
    if (i < 0) return TH_OK;
    const gguf_kv *kv = &f->kv[i];
    uint64_t at = (uint64_t)(kv->raw - f->base);
    if (kv->type != GGUF_U32)
        return th_set_error(TH_ERR_FORMAT, "gguf: key 'general.alignment' at offset %" PRIu64
                            " has type %s, expected u32", at, gguf_vtype_name(kv->type));
    uint32_t a = rd_u32(kv->raw);
    if (a == 0 || (a & (a - 1)) != 0)
        return th_set_error(TH_ERR_FORMAT, "gguf: key 'general.alignment' at offset %" PRIu64
                            ": value %u is not a nonzero power of two", at, a);
    f->alignment = a;
    return TH_OK;
}

static const char *shape_str(const gguf_tensor *t, char *buf, size_t cap) {
    size_t n = 0;
    buf[n++] = '[';
    for (uint32_t d = 0; d < t->n_dims && d < GGUF_MAX_DIMS; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ",%" PRIu64 : "%" PRIu64, t->ne[d]);
    snprintf(buf + n, cap - n, "]");
    return buf;
}

/* Shape, type and byte size of one tensor (its offset is checked later). */
static th_status check_tensor_shape(gguf_tensor *t, const where *w, uint64_t dims_at) {
    char sh[120];
    const th_type_info *ti = th_type_info_get(t->type);
    if (!ti) return fmt_err(w, "unknown tensor type %u (not a ggml or theseus qN type id)", t->type);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0)
            return fmt_err(w, "dimension %u at offset %" PRIu64 " is 0 (empty tensors are not accepted)", d, dims_at + 8 * d);
        if (t->ne[d] > INT64_MAX || !th_mul_u64(elems, t->ne[d], &elems) || elems > INT64_MAX)
            return fmt_err(w, "shape %s: element count overflows", shape_str(t, sh, sizeof sh));
    }
    uint64_t row;
    if (!th_row_bytes(t->type, t->ne[0], &row))
        return fmt_err(w, "type %s, shape %s: row length ne[0]=%" PRIu64 " is not a multiple of the block size %u",
                       ti->name, shape_str(t, sh, sizeof sh), t->ne[0], ti->block);
    uint64_t rows = elems / t->ne[0];
    if (!th_mul_u64(row, rows, &t->nbytes))
        return fmt_err(w, "type %s, shape %s: byte size overflows", ti->name, shape_str(t, sh, sizeof sh));
    return TH_OK;
}

static th_status parse_tensor_info(cursor *c, gguf_impl *im, uint64_t i) {
    gguf_file *f = &im->pub;
    gguf_tensor *t = &f->tensors[i];
    where w;
    char nm[100];
    uint64_t at = c->pos;
    snprintf(w.text, sizeof w.text, "tensor #%" PRIu64 " at offset %" PRIu64, i, at);
    th_status s = read_str(c, &t->name, &w, "tensor name");
    if (s) return s;
    if (t->name.len == 0) return fmt_err(&w, "empty tensor name");
    snprintf(w.text, sizeof w.text, "tensor '%s' (#%" PRIu64 " at offset %" PRIu64 ")",
             printable(t->name, nm, sizeof nm), i, at);
    uint64_t nd_at = c->pos;
    if ((s = read_u32(c, &t->n_dims, &w, "n_dims"))) return s;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fmt_err(&w, "n_dims %u at offset %" PRIu64 " is not in 1..%d", t->n_dims, nd_at, GGUF_MAX_DIMS);
    uint64_t dims_at = c->pos;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if ((s = read_u64(c, &t->ne[d], &w, "dimension"))) return s;
    if ((s = read_u32(c, &t->type, &w, "tensor type"))) return s;
    if ((s = read_u64(c, &t->offset, &w, "tensor data offset"))) return s;
    if ((s = check_tensor_shape(t, &w, dims_at))) return s;
    uint64_t dup = table_insert(im->tensor_hash, im->tensor_cap, f->tensors, tensor_name, i);
    if (dup != UINT64_MAX) return fmt_err(&w, "duplicate tensor name (first defined as tensor #%" PRIu64 ")", dup);
    return TH_OK;
}

static th_status parse_tensor_infos(cursor *c, gguf_impl *im) {
    gguf_file *f = &im->pub;
    th_status s = check_count(c, f->n_tensors, GGUF_MIN_TENSOR_BYTES, 8, "n_tensors");
    if (s) return s;
    if (!f->n_tensors) return TH_OK;
    f->tensors = calloc(f->n_tensors, sizeof *f->tensors);
    im->tensor_cap = table_cap(f->n_tensors);
    im->tensor_hash = calloc(im->tensor_cap, sizeof *im->tensor_hash);
    if (!f->tensors || !im->tensor_hash)
        return th_set_error(TH_ERR_NOMEM, "gguf: no memory for %" PRIu64 " tensors", f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if ((s = parse_tensor_info(c, im, i))) return s;
    return TH_OK;
}

/* ---------- data section: placement, alignment, overlap ---------- */

typedef struct span { uint64_t start, end, idx; } span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx ? 1 : 0;   /* deterministic messages */
}

static th_status place_tensor(gguf_file *f, gguf_tensor *t) {
    char nm[100], sh[120];
    uint64_t avail = f->size - f->data_offset, end;
    if (t->offset % f->alignment != 0)
        return th_set_error(TH_ERR_FORMAT, "gguf: tensor '%s': data offset %" PRIu64
                            " is not a multiple of the alignment %u", printable(t->name, nm, sizeof nm),
                            t->offset, f->alignment);
    if (!th_add_u64(t->offset, t->nbytes, &end) || end > avail)
        return th_set_error(TH_ERR_FORMAT, "gguf: tensor '%s' (%s, shape %s) needs %" PRIu64
                            " bytes at data offset %" PRIu64 " but the file has only %" PRIu64
                            " bytes after it", printable(t->name, nm, sizeof nm), th_type_name(t->type),
                            shape_str(t, sh, sizeof sh), t->nbytes, t->offset,
                            t->offset > avail ? 0 : avail - t->offset);
    t->data = f->base + f->data_offset + t->offset;
    return TH_OK;
}

static th_status place_tensors(gguf_file *f, uint64_t infos_end) {
    uint64_t pad = (f->alignment - infos_end % f->alignment) % f->alignment;
    f->data_offset = infos_end + pad;  /* cannot overflow: infos_end <= size < 2^63 */
    if (f->data_offset > f->size) {
        if (f->n_tensors == 0) { f->data_offset = f->size; return TH_OK; } /* vocab-only files */
        return th_set_error(TH_ERR_FORMAT, "gguf: data section would start at offset %" PRIu64
                            " (tensor infos end at %" PRIu64 ", alignment %u) but the file is only %"
                            PRIu64 " bytes", f->data_offset, infos_end, f->alignment, f->size);
    }
    th_status s;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if ((s = place_tensor(f, &f->tensors[i]))) return s;
    if (f->n_tensors < 2) return TH_OK;
    span *sp = malloc(f->n_tensors * sizeof *sp);
    if (!sp) return th_set_error(TH_ERR_NOMEM, "gguf: no memory to check tensor overlap");
    for (uint64_t i = 0; i < f->n_tensors; i++)
        sp[i] = (span){ f->tensors[i].offset, f->tensors[i].offset + f->tensors[i].nbytes, i };
    qsort(sp, f->n_tensors, sizeof *sp, span_cmp);
    s = TH_OK;
    for (uint64_t i = 1; i < f->n_tensors && !s; i++) {
        if (sp[i].start >= sp[i - 1].end) continue;
        char a[100], b[100];
        const gguf_tensor *x = &f->tensors[sp[i - 1].idx], *y = &f->tensors[sp[i].idx];
        s = th_set_error(TH_ERR_FORMAT, "gguf: tensor '%s' (data offset %" PRIu64 ", %" PRIu64
                         " bytes) overlaps tensor '%s' (data offset %" PRIu64 ", %" PRIu64 " bytes)",
                         printable(y->name, b, sizeof b), y->offset, y->nbytes,
                         printable(x->name, a, sizeof a), x->offset, x->nbytes);
    }
    free(sp);
    return s;
}

/* ---------- public entry points ---------- */

static th_status parse_into(gguf_impl *im) {
    gguf_file *f = &im->pub;
    cursor c = { f->base, f->size, 0 };
    th_status s;
    if ((s = parse_header(&c, f))) return s;
    if ((s = parse_kvs(&c, im))) return s;
    if ((s = parse_alignment(im))) return s;
    if ((s = parse_tensor_infos(&c, im))) return s;
    return place_tensors(f, c.pos);
}

th_status gguf_parse_owned(const uint8_t *data, uint64_t size, void *map, bool mapped, gguf_file **out) {
    *out = NULL;
    gguf_impl *im = calloc(1, sizeof *im);
    if (!im) return th_set_error(TH_ERR_NOMEM, "gguf: out of memory");
    im->pub.base = data;
    im->pub.size = size;
    im->pub.map = map;
    im->pub.mapped = mapped;
    th_status s = (size > INT64_MAX) ? th_set_error(TH_ERR_FORMAT, "gguf: buffer too large") : parse_into(im);
    if (s) {
        im->pub.map = NULL;  /* the caller still owns (and unmaps) its buffer on failure */
        gguf_close(&im->pub);
        return s;
    }
    *out = &im->pub;
    return TH_OK;
}

th_status gguf_parse(const uint8_t *data, uint64_t size, gguf_file **out) {
    if (!out) return th_set_error(TH_ERR_ARG, "gguf_parse: out is NULL");
    if (!data && size) { *out = NULL; return th_set_error(TH_ERR_ARG, "gguf_parse: data is NULL"); }
    static const uint8_t empty[1];
    return gguf_parse_owned(data ? data : empty, size, NULL, false, out);
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    gguf_impl *im = (gguf_impl *)f;
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++) free(f->kv[i].arr_strs);
    free(f->kv);
    free(f->tensors);
    free(im->kv_hash);
    free(im->tensor_hash);
    if (f->map) {
        if (f->mapped) munmap(f->map, (size_t)f->size);
        else free(f->map);
    }
    if (f->release) f->release(f->release_arg);
    free(f->path);
    free(im);
}

/* ---------- lookups and getters ---------- */

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    if (!f) return NULL;
    const gguf_impl *im = (const gguf_impl *)f;
    int64_t i = table_find(im->kv_hash, im->kv_cap, f->kv, kv_name, key);
    return i < 0 ? NULL : &f->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    if (!f) return NULL;
    const gguf_impl *im = (const gguf_impl *)f;
    int64_t i = table_find(im->tensor_hash, im->tensor_cap, f->tensors, tensor_name, name);
    return i < 0 ? NULL : &f->tensors[i];
}

bool gguf_str_eq(gguf_str s, const char *cstr) {
    return cstr && str_eq(s, cstr, strlen(cstr));
}

/* Integer value as sign + magnitude; false if the kv is not an integer type. */
static bool kv_int(const gguf_kv *kv, bool *neg, uint64_t *mag) {
    int64_t sv;
    *neg = false;
    switch (kv->type) {
    case GGUF_U8: *mag = kv->raw[0]; return true;
    case GGUF_U16: *mag = rd_u16(kv->raw); return true;
    case GGUF_U32: *mag = rd_u32(kv->raw); return true;
    case GGUF_U64: *mag = rd_u64(kv->raw); return true;
    case GGUF_I8: sv = (int8_t)kv->raw[0]; break;
    case GGUF_I16: sv = (int16_t)rd_u16(kv->raw); break;
    case GGUF_I32: sv = (int32_t)rd_u32(kv->raw); break;
    case GGUF_I64: sv = (int64_t)rd_u64(kv->raw); break;
    default: return false;
    }
    *neg = sv < 0;
    *mag = sv < 0 ? (uint64_t)0 - (uint64_t)sv : (uint64_t)sv;
    return true;
}

bool gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    const gguf_kv *kv = gguf_find(f, key);
    bool neg;
    uint64_t mag;
    if (!kv || !kv_int(kv, &neg, &mag) || neg || mag > UINT32_MAX) return false;
    *out = (uint32_t)mag;
    return true;
}

bool gguf_get_i64(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find(f, key);
    bool neg;
    uint64_t mag;
    if (!kv || !kv_int(kv, &neg, &mag)) return false;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1) return false;
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > INT64_MAX) return false;
        *out = (int64_t)mag;
    }
    return true;
}

bool gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return false;
    if (kv->type == GGUF_F32) { memcpy(out, kv->raw, 4); return true; }
    if (kv->type == GGUF_F64) { double d; memcpy(&d, kv->raw, 8); *out = (float)d; return true; }
    return false;
}

bool gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv || kv->type != GGUF_BOOL) return false;
    *out = kv->raw[0] != 0;
    return true;
}

bool gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv || kv->type != GGUF_STRING) return false;
    *out = kv->str;
    return true;
}

const gguf_kv *gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv || kv->type != GGUF_ARRAY || kv->arr_type != elem_type) return NULL;
    return kv;
}
