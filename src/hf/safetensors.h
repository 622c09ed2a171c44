/* safetensors.h — validated, memory-mapped safetensors reader (one file, or a
 * sharded set resolved through model.safetensors.index.json).
 *
 * Layout of a file: u64 little-endian header length N (at most 100 MB), N bytes
 * of JSON {"name": {"dtype": D, "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"k": "v"}}, then the data area. st_parse checks everything
 * before anything is used: known dtypes, shape x dtype size == end - begin with
 * checked arithmetic, every range inside the data area, ranges non-overlapping
 * and together covering the whole data area (as the format requires), no
 * duplicate names. Errors name the file, the tensor and the field.
 */
#ifndef TH_HF_SAFETENSORS_H
#define TH_HF_SAFETENSORS_H

#include "core/core.h"

#define ST_MAX_HEADER (100u * 1000u * 1000u)
#define ST_MAX_DIMS 8

enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL, ST_F8_E4M3, ST_DTYPE_COUNT };

typedef struct st_tensor {
    char *name;
    int dtype;                      /* enum st_dtype */
    int n_dims;
    uint64_t shape[ST_MAX_DIMS];    /* as written: shape[0] is the slowest (outermost) dimension */
    uint64_t n_elem, nbytes;
    uint64_t begin;                 /* offset in the data area */
    const uint8_t *data;            /* inside the file's bytes */
} st_tensor;

typedef struct st_file {
    char *name;                     /* for messages (the path, or "<buffer>") */
    const uint8_t *base;
    uint64_t size;
    uint64_t data_offset;           /* 8 + header length */
    st_tensor *t;
    size_t n;
    char **meta_key, **meta_val;    /* __metadata__ */
    size_t n_meta;
    void *map;                      /* munmap'd by st_close when non-NULL */
} st_file;

/* Parse caller-owned bytes (kept by the caller; the result points into them). */
th_status st_parse(const uint8_t *data, uint64_t size, const char *name, st_file **out);
/* Map a file read-only and parse it. */
th_status st_open(const char *path, st_file **out);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_dtype_name(int dtype);
size_t st_dtype_size(int dtype);

/* A model's weights: model.safetensors, or every shard the index names. */
typedef struct st_set {
    st_file **files;
    size_t n_files;
} st_set;

/* dir holding model.safetensors.index.json or model.safetensors; or one
 * .safetensors file path. */
th_status st_set_open(const char *path, st_set **out);
void st_set_close(st_set *s);
/* The tensor and (optionally) the file that holds it; NULL if absent. */
const st_tensor *st_set_find(const st_set *s, const char *name, const st_file **file);

/* Read a whole small file (config.json, tokenizer.json) into a NUL-terminated buffer. */
th_status hf_read_text(const char *path, size_t max, char **out, size_t *len);

#endif
