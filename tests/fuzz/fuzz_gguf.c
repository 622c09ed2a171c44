/* fuzz_gguf.c — libFuzzer target for the GGUF reader: parse the input with
 * gguf_parse, then touch every kv (through the typed getters and the raw value
 * bytes) and every tensor (lookup by name, first and last data byte), so that any
 * offset or length the validator let through wrongly is read under ASan. */
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdlib.h>

static volatile uint64_t sink;

static void touch_kv(const gguf_file *f, const gguf_kv *kv) {
    char key[256];
    if (kv->key.len < sizeof key && !memchr(kv->key.ptr, 0, kv->key.len)) {
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        uint32_t u;
        int64_t i;
        float x;
        bool b;
        gguf_str s;
        sink += gguf_get_u32(f, key, &u) ? u : 0;
        sink += gguf_get_i64(f, key, &i) ? (uint64_t)i : 0;
        sink += gguf_get_f32(f, key, &x) ? (uint64_t)(x == x) : 0;
        sink += gguf_get_bool(f, key, &b) ? b : 0;
        if (gguf_get_str(f, key, &s) && s.len) sink += (uint8_t)s.ptr[s.len - 1];
        if (gguf_find(f, key) != kv || !gguf_str_eq(kv->key, key)) abort();  /* keys are unique */
        sink += gguf_get_arr(f, key, kv->arr_type) != NULL;
    }
    sink += strlen(gguf_vtype_name(kv->type));
    if (kv->type == GGUF_ARRAY) {
        if (kv->arr_strs)
            for (uint64_t j = 0; j < kv->arr_n; j++)
                if (kv->arr_strs[j].len) sink += (uint8_t)kv->arr_strs[j].ptr[kv->arr_strs[j].len - 1];
        if (kv->arr_type != GGUF_STRING && kv->arr_type != GGUF_ARRAY && kv->arr_n)
            sink += kv->arr_data[0];
    } else if (kv->type != GGUF_STRING) {
        sink += kv->raw[0];
    }
}

static void touch_tensor(const gguf_file *f, const gguf_tensor *t) {
    char name[256];
    if (t->name.len < sizeof name && !memchr(t->name.ptr, 0, t->name.len)) {
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        if (gguf_find_tensor(f, name) != t) abort();   /* names are unique */
    }
    const th_type_info *ti = th_type_info_get(t->type);
    if (!ti || t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS || t->nbytes == 0) abort();
    const uint8_t *d = t->data;
    if (d < f->base + f->data_offset || (uint64_t)(d - f->base) + t->nbytes > f->size) abort();
    sink += d[0] + d[t->nbytes - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    if (gguf_parse(data, size, &f) != TH_OK) return 0;
    for (uint64_t i = 0; i < f->n_kv; i++) touch_kv(f, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) touch_tensor(f, &f->tensors[i]);
    gguf_close(f);
    return 0;
}
