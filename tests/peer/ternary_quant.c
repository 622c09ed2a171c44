/* ternary_quant.c — a peer-side program (built against llama.cpp's or ik_llama.cpp's
 * ggml by tests/peer/make_ternary_goldens.sh, never part of theseus): quantizes an F32
 * tensor with the peer's own quantizer (ggml_quantize_chunk) and writes the bytes, and
 * prints the FNV-1a 64 hash of the peer's dequantization of them. These are the goldens
 * tests/test_ternary.c compares theseus's encoders and decoders with.
 *
 *   ternary_quant MODEL.gguf TENSOR TYPE_ID OUT.bin
 *   ternary_quant - synthetic TYPE_ID OUT.bin     (4 rows of 768: x_j = ((37 j) % 17 - 8) / 8,
 *                                                  row r scaled by r + 1: exact ties at 1/2)
 * Prints: "<type name> <rows>x<cols> bytes <n> dequant_fnv <16 hex digits>".
 * For types with a per-row scale in front (ik_llama.cpp's row_meta_size: IQ1_BN f16,
 * IQ2_BN f32) the peer's to_float decodes a row's blocks to c - 1 without the scale; the
 * hash is then of scale * to_float(row's blocks), the value the peer's matmul uses. */
#include "ggml.h"
#if __has_include("gguf.h")
#include "gguf.h"
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ULL; }
    return h;
}

static float f16_to_f32(const unsigned char *p) {
    uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
    return ggml_fp16_to_fp32(h);
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s MODEL.gguf|- TENSOR|synthetic TYPE_ID OUT.bin\n", argv[0]); return 2; }
    enum ggml_type type = (enum ggml_type)atoi(argv[3]);
    int64_t rows, cols;
    float *src;
    /* ggml_init fills ggml's f16 table, which the decoders read (the gguf reader calls it too) */
    struct ggml_init_params gp = { .mem_size = 1024, .mem_buffer = NULL, .no_alloc = true };
    struct ggml_context *g0 = ggml_init(gp);
    if (!g0) { fprintf(stderr, "ggml_init failed\n"); return 1; }
    if (strcmp(argv[1], "-") == 0) {
        rows = 4; cols = 768;
        src = malloc(sizeof(float) * rows * cols);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < cols; j++) src[r * cols + j] = (float)(r + 1) * (float)((37 * j) % 17 - 8) / 8.0f;
    } else {
        struct ggml_context *ctx = NULL;
        struct gguf_init_params ip = { .no_alloc = false, .ctx = &ctx };
        struct gguf_context *g = gguf_init_from_file(argv[1], ip);
        if (!g) { fprintf(stderr, "cannot read %s\n", argv[1]); return 1; }
        struct ggml_tensor *t = ggml_get_tensor(ctx, argv[2]);
        if (!t || t->type != GGML_TYPE_F32) { fprintf(stderr, "no F32 tensor %s\n", argv[2]); return 1; }
        cols = t->ne[0]; rows = ggml_nrows(t);
        src = malloc(sizeof(float) * rows * cols);
        memcpy(src, t->data, sizeof(float) * rows * cols);
    }
    size_t row_size = ggml_row_size(type, cols);
    size_t meta = row_size - ggml_type_size(type) * (cols / ggml_blck_size(type));
    unsigned char *q = malloc(row_size * rows);
#if __has_include("gguf.h")
    size_t n = ggml_quantize_chunk(type, src, q, 0, rows, cols, NULL);
#else
    size_t n = ggml_quantize_chunk(type, src, q, 0, rows, cols, NULL, NULL);   /* ik_llama.cpp: user_data */
#endif
    if (n != row_size * rows) { fprintf(stderr, "quantize wrote %zu bytes, expected %zu\n", n, row_size * rows); return 1; }
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(q, 1, n, f) != n || fclose(f)) { fprintf(stderr, "cannot write %s\n", argv[4]); return 1; }
#if __has_include("gguf.h")
    ggml_to_float_t to_float = ggml_get_type_traits(type)->to_float;
#else
    ggml_to_float_t to_float = ggml_internal_get_type_traits(type).to_float;
#endif
    float *y = malloc(sizeof(float) * cols);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t r = 0; r < rows; r++) {
        const unsigned char *row = q + r * row_size;
        to_float(row + meta, y, cols);
        float scale = 1.0f;
        if (meta == 2) scale = f16_to_f32(row);
        if (meta == 4) memcpy(&scale, row, 4);
        if (meta) for (int64_t j = 0; j < cols; j++) y[j] *= scale;
        h = fnv(h, y, sizeof(float) * cols);
    }
    printf("%s %lldx%lld bytes %zu dequant_fnv %016llx\n", ggml_type_name(type), (long long)rows, (long long)cols, n,
           (unsigned long long)h);
    return 0;
}
