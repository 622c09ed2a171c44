/* writer.c — builds GGUF v3 files: key-values and tensor infos are serialized into
 * a growing byte buffer as they are added; tensor data is copied from the caller's
 * pointers only at the end (to a buffer or streamed to a file), each tensor padded
 * to the alignment. The writer does not reject duplicate keys or names (tests use
 * it to build malformed files); the reader does. Errors are sticky: the first one
 * (out of memory, a tensor whose nbytes does not match its type and shape) is
 * reported by gguf_writer_to_mem / gguf_writer_to_file.
 */
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "core/bytes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

typedef struct wtensor {
    const void *data;
    uint64_t nbytes, offset;
    bool ref;              /* gguf_w_tensor_ref: not copied by gguf_writer_to_map */
} wtensor;

struct gguf_writer {
    uint32_t alignment;
    bool has_alignment_key;
    th_bytes kvs;          /* serialized key-values */
    uint64_t n_kv;
    th_bytes infos;        /* serialized tensor infos */
    wtensor *tensors;
    uint64_t n_tensors, tensors_cap, data_size;
    th_status err;
    char msg[512];
};

static void put_u32(th_bytes *b, uint32_t v) { th_bytes_put(b, &v, 4); }
static void put_u64(th_bytes *b, uint64_t v) { th_bytes_put(b, &v, 8); }
static void put_str(th_bytes *b, const char *s, uint64_t n) { put_u64(b, n); th_bytes_put(b, s, n); }

static void fail(gguf_writer *w, th_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(gguf_writer *w, th_status s, const char *fmt, ...) {
    if (w->err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->err = s;
}

gguf_writer *gguf_writer_new(uint32_t alignment) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment ? alignment : 32;
    if (w->alignment & (w->alignment - 1))
        fail(w, TH_ERR_ARG, "gguf writer: alignment %u is not a power of two", alignment);
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    free(w->kvs.p);
    free(w->infos.p);
    free(w->tensors);
    free(w);
}

static bool kv_begin(gguf_writer *w, const char *key, uint32_t type) {
    if (!w || w->err) return false;
    if (!key) { fail(w, TH_ERR_ARG, "gguf writer: NULL key"); return false; }
    if (strcmp(key, "general.alignment") == 0) w->has_alignment_key = true;
    put_str(&w->kvs, key, strlen(key));
    put_u32(&w->kvs, type);
    w->n_kv++;
    return true;
}

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v) { if (kv_begin(w, key, GGUF_U32)) put_u32(&w->kvs, v); }
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v) { if (kv_begin(w, key, GGUF_I32)) th_bytes_put(&w->kvs, &v, 4); }
void gguf_w_f32(gguf_writer *w, const char *key, float v) { if (kv_begin(w, key, GGUF_F32)) th_bytes_put(&w->kvs, &v, 4); }

void gguf_w_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    if (kv_begin(w, key, GGUF_BOOL)) th_bytes_put(&w->kvs, &b, 1);
}

void gguf_w_str(gguf_writer *w, const char *key, const char *v) {
    if (!v) v = "";
    if (kv_begin(w, key, GGUF_STRING)) put_str(&w->kvs, v, strlen(v));
}

/* Size of fixed-size element types; 0 for string/array/invalid. */
static uint32_t elem_size(uint32_t t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n) {
    uint64_t es = elem_size(elem_type), total = 0;
    if (w && !w->err && (!es || !th_mul_u64(es, n, &total) || (n && !data))) {
        fail(w, TH_ERR_ARG, "gguf writer: key '%s': bad array (element type %u, %" PRIu64 " elements)",
             key ? key : "(null)", elem_type, n);
        return;
    }
    if (!kv_begin(w, key, GGUF_ARRAY)) return;
    put_u32(&w->kvs, elem_type);
    put_u64(&w->kvs, n);
    th_bytes_put(&w->kvs, data, total);
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    if (w && !w->err && n && !strs) { fail(w, TH_ERR_ARG, "gguf writer: key '%s': NULL string array", key ? key : "(null)"); return; }
    if (!kv_begin(w, key, GGUF_ARRAY)) return;
    put_u32(&w->kvs, GGUF_STRING);
    put_u64(&w->kvs, n);
    for (uint64_t i = 0; i < n; i++) put_str(&w->kvs, strs[i] ? strs[i] : "", strs[i] ? strlen(strs[i]) : 0);
}

/* Bytes of an already-validated array body (element type, count, elements) at p. */
static uint64_t array_body_size(const uint8_t *p) {
    uint32_t et;
    uint64_t n, size = 12;
    memcpy(&et, p, 4);
    memcpy(&n, p + 4, 8);
    if (elem_size(et)) return size + n * elem_size(et);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        if (et == GGUF_STRING) { memcpy(&len, p + size, 8); size += 8 + len; }
        else size += array_body_size(p + size);
    }
    return size;
}

void gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    if (!w || w->err || !kv) return;
    char key[1024];
    if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len)) {
        fail(w, TH_ERR_ARG, "gguf writer: cannot copy a key of %" PRIu64 " bytes", kv->key.len);
        return;
    }
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = 0;
    if (!kv_begin(w, key, kv->type)) return;
    if (kv->type == GGUF_STRING) put_str(&w->kvs, kv->str.ptr, kv->str.len);
    else if (kv->type == GGUF_ARRAY) th_bytes_put(&w->kvs, kv->raw, array_body_size(kv->raw));
    else th_bytes_put(&w->kvs, kv->raw, elem_size(kv->type));
}

void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                   const uint64_t *ne, const void *data, uint64_t nbytes) {
    if (!w || w->err) return;
    const char *nm = name ? name : "(null)";
    if (!name || n_dims < 1 || n_dims > GGUF_MAX_DIMS || !ne) {
        fail(w, TH_ERR_ARG, "gguf writer: tensor '%s': bad name or n_dims %u", nm, n_dims);
        return;
    }
    uint64_t expect = 0, rows = 1;
    bool ok = th_row_bytes(type, ne[0], &expect);
    for (uint32_t d = 1; d < n_dims && ok; d++) ok = th_mul_u64(rows, ne[d], &rows);
    ok = ok && th_mul_u64(expect, rows, &expect);
    if (!ok || expect != nbytes || (nbytes && !data)) {
        fail(w, TH_ERR_ARG, "gguf writer: tensor '%s' (%s): %" PRIu64 " bytes given, shape needs %" PRIu64,
             nm, th_type_name(type), nbytes, ok ? expect : 0);
        return;
    }
    if (w->n_tensors == w->tensors_cap) {
        uint64_t cap = w->tensors_cap ? 2 * w->tensors_cap : 64;
        wtensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t) { fail(w, TH_ERR_NOMEM, "gguf writer: out of memory"); return; }
        w->tensors = t;
        w->tensors_cap = cap;
    }
    uint64_t pad = (w->alignment - nbytes % w->alignment) % w->alignment;
    w->tensors[w->n_tensors++] = (wtensor){ data, nbytes, w->data_size, false };
    put_str(&w->infos, name, strlen(name));
    put_u32(&w->infos, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) put_u64(&w->infos, ne[d]);
    put_u32(&w->infos, type);
    put_u64(&w->infos, w->data_size);
    w->data_size += nbytes + pad;
}

/* Header + kvs + infos + padding to the data section. */
static th_status build_meta(gguf_writer *w, th_bytes *m) {
    if (!w) return th_set_error(TH_ERR_ARG, "gguf writer: NULL writer");
    if (w->kvs.failed || w->infos.failed) fail(w, TH_ERR_NOMEM, "gguf writer: out of memory");
    if (w->err) return th_set_error(w->err, "%s", w->msg);
    bool add_align = w->alignment != 32 && !w->has_alignment_key;
    put_u32(m, 0x46554747u);
    put_u32(m, 3);
    put_u64(m, w->n_tensors);
    put_u64(m, w->n_kv + (add_align ? 1 : 0));
    if (add_align) {
        put_str(m, "general.alignment", 17);
        put_u32(m, GGUF_U32);
        put_u32(m, w->alignment);
    }
    th_bytes_put(m, w->kvs.p, w->kvs.n);
    th_bytes_put(m, w->infos.p, w->infos.n);
    static const uint8_t zeros[256];
    uint64_t pad = (w->alignment - m->n % w->alignment) % w->alignment;
    while (pad) { uint64_t k = TH_MIN(pad, sizeof zeros); th_bytes_put(m, zeros, k); pad -= k; }
    if (m->failed) { free(m->p); return th_set_error(TH_ERR_NOMEM, "gguf writer: out of memory"); }
    return TH_OK;
}

th_status gguf_writer_to_mem(gguf_writer *w, uint8_t **out, uint64_t *size) {
    th_bytes m = { 0 };
    th_status s = build_meta(w, &m);
    if (s) return s;
    uint64_t total = m.n + w->data_size;
    uint8_t *p = realloc(m.p, total ? total : 1);   /* the data section after the metadata */
    if (!p) { free(m.p); return th_set_error(TH_ERR_NOMEM, "gguf writer: out of memory (%" PRIu64 " bytes)", total); }
    memset(p + m.n, 0, w->data_size);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (w->tensors[i].nbytes) memcpy(p + m.n + w->tensors[i].offset, w->tensors[i].data, w->tensors[i].nbytes);
    *out = p;
    *size = total;
    return TH_OK;
}

void gguf_w_tensor_ref(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                       const uint64_t *ne, const void *data, uint64_t nbytes) {
    uint64_t n = w ? w->n_tensors : 0;
    gguf_w_tensor(w, name, type, n_dims, ne, data, nbytes);
    if (w && !w->err && w->n_tensors == n + 1) w->tensors[n].ref = true;
}

const void *gguf_writer_ref(const gguf_writer *w, uint64_t i) {
    return w && i < w->n_tensors && w->tensors[i].ref ? w->tensors[i].data : NULL;
}

th_status gguf_writer_to_map(gguf_writer *w, uint8_t **out, uint64_t *size) {
    th_bytes m = { 0 };
    th_status s = build_meta(w, &m);
    if (s) return s;
    uint64_t total = m.n + w->data_size;
    /* anonymous zero pages: the regions of ref tensors are never touched */
    void *p = mmap(NULL, (size_t)(total ? total : 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { free(m.p); return th_set_error(TH_ERR_NOMEM, "gguf writer: cannot map %" PRIu64 " bytes", total); }
    memcpy(p, m.p, m.n);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (w->tensors[i].nbytes && !w->tensors[i].ref)
            memcpy((uint8_t *)p + m.n + w->tensors[i].offset, w->tensors[i].data, w->tensors[i].nbytes);
    free(m.p);
    *out = p;
    *size = total ? total : 1;
    return TH_OK;
}

th_status gguf_writer_to_file(gguf_writer *w, const char *path) {
    th_bytes m = { 0 };
    th_status s = build_meta(w, &m);
    if (s) return s;
    FILE *fp = fopen(path, "wb");
    if (!fp) { free(m.p); return th_set_error(TH_ERR_IO, "gguf writer: cannot create '%s': %s", path, strerror(errno)); }
    bool ok = fwrite(m.p, 1, m.n, fp) == m.n;
    free(m.p);
    static const uint8_t zeros[256];
    for (uint64_t i = 0; i < w->n_tensors && ok; i++) {
        const wtensor *t = &w->tensors[i];
        ok = fwrite(t->data, 1, t->nbytes, fp) == t->nbytes;
        uint64_t pad = (w->alignment - t->nbytes % w->alignment) % w->alignment;
        while (ok && pad) {
            uint64_t k = TH_MIN(pad, sizeof zeros);
            ok = fwrite(zeros, 1, k, fp) == k;
            pad -= k;
        }
    }
    int e = errno;
    if (fclose(fp) != 0 && ok) { ok = false; e = errno; }
    if (!ok) return th_set_error(TH_ERR_IO, "gguf writer: cannot write '%s': %s", path, strerror(e));
    return TH_OK;
}
