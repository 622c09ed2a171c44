/* gguf.h — validated, memory-mapped GGUF reader (v2, v3) and a small writer.
 *
 * gguf_parse() checks everything before anything is used: every count, length,
 * shape and offset with checked arithmetic, every tensor inside the data section,
 * known types, no duplicate keys or tensor names, alignment. Strings and arrays
 * point into the mapped bytes (not NUL-terminated). Errors name the field and
 * its byte offset.
 */
#ifndef TH_GGUF_H
#define TH_GGUF_H

#include "core/core.h"

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_VTYPE_COUNT
};

typedef struct gguf_str { const char *ptr; uint64_t len; } gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    uint32_t type;           /* enum gguf_vtype */
    /* scalars: raw points at the value's bytes (little-endian); strings and arrays:
     * at the encoded value (string length / array element type) */
    const uint8_t *raw;
    /* strings: the value; arrays: element type + count + first element */
    gguf_str str;
    uint32_t arr_type;
    uint64_t arr_n;
    const uint8_t *arr_data;
    /* string arrays: arr_n entries, built at parse time */
    gguf_str *arr_strs;
} gguf_kv;

#define GGUF_MAX_DIMS 4

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];  /* ne[0] is the contiguous (row) dimension; unused dims = 1 */
    uint32_t type;               /* ggml type id (see quant/quant.h) */
    uint64_t offset;             /* relative to the data section */
    uint64_t nbytes;
    const void *data;            /* inside the map */
} gguf_tensor;

typedef struct gguf_file {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint32_t alignment;
    uint64_t data_offset;        /* start of the tensor data section */
    const uint8_t *base;         /* whole file */
    uint64_t size;
    /* private */
    void *map;                   /* mmap'd region, or malloc'd copy, or NULL (caller's buffer) */
    bool mapped;                 /* map is released with munmap (else free) */
    void (*release)(void *);     /* called by gguf_close with release_arg (src/hf/: the safetensors maps) */
    void *release_arg;
    bool file_backed;            /* map is a mapping of the file itself (not a copy in memory) */
    volatile bool map_zeroed;    /* gguf_map_fault_replace swapped the mapping for zeros */
    /* the file as opened (open.c): for gguf_file_changed */
    char *path;
    uint64_t st_dev, st_ino, st_size;
    int64_t st_mtime_ns;
} gguf_file;

/* Open a file and parse it: mapped (use_mmap, the default of gguf_open) or read
 * whole into anonymous memory (page-aligned), which a later change of the file
 * on disk cannot affect. */
th_status gguf_open(const char *path, gguf_file **out);
th_status gguf_open_ex(const char *path, bool use_mmap, gguf_file **out);
/* Whether the file at f->path is no longer the one opened (another device or
 * inode, size or modification time). True with a description in why (which
 * names the path and what changed); false if unchanged or f was not opened from a file. */
bool gguf_file_changed(const gguf_file *f, char *why, size_t cap);
/* Async-signal-safe: if addr lies inside f's file mapping, replace the whole
 * mapping with zero-filled anonymous memory at the same address (so reads past
 * the end of a file truncated under us see zeros instead of raising SIGBUS
 * again) and return true; false otherwise (nothing changed). */
bool gguf_map_fault_replace(gguf_file *f, const void *addr);
/* Parse bytes the result takes over (map: released by gguf_close, munmap if
 * mapped, else free; NULL: the caller keeps them). On failure the caller keeps them. */
th_status gguf_parse_owned(const uint8_t *data, uint64_t size, void *map, bool mapped, gguf_file **out);
/* Parse a caller-owned buffer (which must outlive the result). Used by the fuzzer. */
th_status gguf_parse(const uint8_t *data, uint64_t size, gguf_file **out);
void gguf_close(gguf_file *f);

/* Lookups (NULL / false if absent or of an incompatible type). */
const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
bool gguf_str_eq(gguf_str s, const char *cstr);

/* Typed getters. Integer getters accept any integer kv type whose value fits. */
bool gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
bool gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
bool gguf_get_f32(const gguf_file *f, const char *key, float *out); /* F32 or F64 */
bool gguf_get_bool(const gguf_file *f, const char *key, bool *out);
bool gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Array: element type, count, data pointer (for string arrays use kv->arr_strs). */
const gguf_kv *gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type);

const char *gguf_vtype_name(uint32_t t);

/* ---- writer (used by quantize and by tests to build malformed files) ---- */

typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_new(uint32_t alignment);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (elem_type not STRING/ARRAY). */
void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Copy a kv from a parsed file (any type). */
void gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv);
/* Tensor: data copied at finish; nbytes must match type and shape. */
void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                   const uint64_t *ne, const void *data, uint64_t nbytes);
/* Serialize to a malloc'd buffer (v3) or to a file. */
th_status gguf_writer_to_mem(gguf_writer *w, uint8_t **out, uint64_t *size);
th_status gguf_writer_to_file(gguf_writer *w, const char *path);
/* A tensor whose data stays where it is (src/hf/: a weight inside a safetensors
 * map): written by gguf_writer_to_file / _to_mem like any other, but left out by
 * gguf_writer_to_map, whose caller points the parsed tensor at it instead. */
void gguf_w_tensor_ref(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                       const uint64_t *ne, const void *data, uint64_t nbytes);
/* Tensor i's data if it was added with gguf_w_tensor_ref, else NULL. */
const void *gguf_writer_ref(const gguf_writer *w, uint64_t i);
/* As gguf_writer_to_mem, into an anonymous mmap of *size bytes (for
 * gguf_parse_owned(.., mapped = true)); the data of ref tensors is not copied
 * (those pages stay untouched zero pages). */
th_status gguf_writer_to_map(gguf_writer *w, uint8_t **out, uint64_t *size);

#endif
