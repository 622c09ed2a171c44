/* file_api.c — the th_file_* calls of theseus.h: read-only access to a parsed
 * GGUF file's metadata and tensor table, for `theseus inspect`. */
#include "gguf/gguf.h"
#include "hf/hf.h"
#include "quant/quant.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct th_file {
    gguf_file *g;
    char **keys;      /* NUL-terminated copies */
    char **names;
};

th_status th_file_open(const char *path, th_file **out) {
    *out = NULL;
    th_file *f = calloc(1, sizeof *f);
    if (!f) return th_set_error(TH_ERR_NOMEM, "out of memory");
    th_status s = hf_is_model_path(path) ? hf_open_as_gguf(path, &f->g) : gguf_open(path, &f->g);
    if (s) { free(f); return s; }
    f->keys = calloc(f->g->n_kv + 1, sizeof(char *));
    f->names = calloc(f->g->n_tensors + 1, sizeof(char *));
    if (!f->keys || !f->names) { th_file_close(f); return th_set_error(TH_ERR_NOMEM, "out of memory"); }
    for (uint64_t i = 0; i < f->g->n_kv; i++)
        if (!(f->keys[i] = strndup(f->g->kv[i].key.ptr, f->g->kv[i].key.len))) s = TH_ERR_NOMEM;
    for (uint64_t i = 0; i < f->g->n_tensors; i++)
        if (!(f->names[i] = strndup(f->g->tensors[i].name.ptr, f->g->tensors[i].name.len))) s = TH_ERR_NOMEM;
    if (s) { th_file_close(f); return th_set_error(s, "out of memory"); }
    *out = f;
    return TH_OK;
}

void th_file_close(th_file *f) {
    if (!f) return;
    if (f->keys) for (uint64_t i = 0; i < f->g->n_kv; i++) free(f->keys[i]);
    if (f->names) for (uint64_t i = 0; i < f->g->n_tensors; i++) free(f->names[i]);
    free(f->keys);
    free(f->names);
    gguf_close(f->g);
    free(f);
}

uint32_t th_file_version(const th_file *f) { return f->g->version; }
int64_t th_file_n_meta(const th_file *f) { return (int64_t)f->g->n_kv; }
int64_t th_file_n_tensors(const th_file *f) { return (int64_t)f->g->n_tensors; }

const char *th_file_meta_key(const th_file *f, int64_t i) {
    return i >= 0 && (uint64_t)i < f->g->n_kv ? f->keys[i] : NULL;
}

const char *th_file_meta_type(const th_file *f, int64_t i) {
    static _Thread_local char buf[48];
    if (i < 0 || (uint64_t)i >= f->g->n_kv) return NULL;
    const gguf_kv *kv = &f->g->kv[i];
    if (kv->type != GGUF_ARRAY) return gguf_vtype_name(kv->type);
    snprintf(buf, sizeof buf, "array[%s]", gguf_vtype_name(kv->arr_type));
    return buf;
}

static int scalar_text(uint32_t type, const uint8_t *p, char *buf, size_t cap) {
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64; int64_t i64; float f32; double f64;
    switch (type) {
    case GGUF_U8: memcpy(&u8, p, 1); return snprintf(buf, cap, "%u", u8);
    case GGUF_I8: memcpy(&i8, p, 1); return snprintf(buf, cap, "%d", i8);
    case GGUF_U16: memcpy(&u16, p, 2); return snprintf(buf, cap, "%u", u16);
    case GGUF_I16: memcpy(&i16, p, 2); return snprintf(buf, cap, "%d", i16);
    case GGUF_U32: memcpy(&u32, p, 4); return snprintf(buf, cap, "%" PRIu32, u32);
    case GGUF_I32: memcpy(&i32, p, 4); return snprintf(buf, cap, "%" PRId32, i32);
    case GGUF_U64: memcpy(&u64, p, 8); return snprintf(buf, cap, "%" PRIu64, u64);
    case GGUF_I64: memcpy(&i64, p, 8); return snprintf(buf, cap, "%" PRId64, i64);
    case GGUF_F32: memcpy(&f32, p, 4); return snprintf(buf, cap, "%g", f32);
    case GGUF_F64: memcpy(&f64, p, 8); return snprintf(buf, cap, "%g", f64);
    case GGUF_BOOL: return snprintf(buf, cap, "%s", *p ? "true" : "false");
    }
    return snprintf(buf, cap, "?");
}

static size_t scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    default: return 8;
    }
}

/* Append to buf as snprintf would, tracking the total needed. */
#define APPEND(...) do { int w_ = snprintf(buf + TH_MIN(used, cap ? cap - 1 : 0), used < cap ? cap - used : 0, __VA_ARGS__); \
    if (w_ > 0) used += (size_t)w_; } while (0)

int th_file_meta_value(const th_file *f, int64_t i, char *buf, size_t cap, int max_items) {
    if (i < 0 || (uint64_t)i >= f->g->n_kv) return -1;
    const gguf_kv *kv = &f->g->kv[i];
    size_t used = 0;
    char tmp[64];
    if (cap) buf[0] = 0;
    if (kv->type == GGUF_STRING) {
        APPEND("%.*s", (int)TH_MIN(kv->str.len, (uint64_t)INT32_MAX), kv->str.ptr);
    } else if (kv->type != GGUF_ARRAY) {
        scalar_text(kv->type, kv->raw, tmp, sizeof tmp);
        APPEND("%s", tmp);
    } else {
        APPEND("[");
        uint64_t shown = TH_MIN(kv->arr_n, (uint64_t)(max_items < 0 ? 0 : max_items));
        for (uint64_t k = 0; k < shown; k++) {
            if (kv->arr_type == GGUF_STRING) APPEND("%s\"%.*s\"", k ? ", " : "", (int)TH_MIN(kv->arr_strs[k].len, 64u), kv->arr_strs[k].ptr);
            else if (kv->arr_type == GGUF_ARRAY) APPEND("%s[...]", k ? ", " : "");
            else { scalar_text(kv->arr_type, kv->arr_data + k * scalar_size(kv->arr_type), tmp, sizeof tmp); APPEND("%s%s", k ? ", " : "", tmp); }
        }
        if (shown < kv->arr_n) APPEND("%s... (%" PRIu64 " items)", shown ? ", " : "", kv->arr_n);
        APPEND("]");
    }
    return (int)TH_MIN(used, (size_t)INT32_MAX);
}

th_status th_file_tensor(const th_file *f, int64_t i, th_tensor_info *out) {
    if (i < 0 || (uint64_t)i >= f->g->n_tensors) return th_set_error(TH_ERR_ARG, "tensor index %" PRId64 " out of range", i);
    const gguf_tensor *t = &f->g->tensors[i];
    out->name = f->names[i];
    out->type = th_type_name(t->type);
    out->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++) out->ne[d] = t->ne[d];
    out->nbytes = t->nbytes;
    out->offset = f->g->data_offset + t->offset;
    return TH_OK;
}
