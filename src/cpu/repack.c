/* repack.c — the entry points of the 8-row interleaved weight layouts (see repack.h):
 * which matrices are packed, the packed row size and the copy, all from the type
 * table's packed_bytes and repack8 (the layouts themselves are quant/repack.c's). */
#include "cpu/repack.h"
#include <string.h>

static const th_type_info *packed_type(uint32_t type) {
    const th_type_info *ti = th_type_info_get(type);
    return ti && ti->packed_bytes && ti->repack8 ? ti : NULL;
}

bool th_repack_supported(const th_kernels *k, uint32_t type, int64_t rows, int64_t n) {
    return packed_type(type) && k->gemm_packed[type] && rows > 0 && rows % 8 == 0 && n > 0 && n <= TH_REPACK_MAX_N;
}

size_t th_repack_row_bytes(uint32_t type, size_t row_bytes) {
    const th_type_info *ti = packed_type(type);
    return ti ? row_bytes / ti->bytes * ti->packed_bytes : row_bytes;
}

void th_repack_rows(uint32_t type, const void *src, void *dst, int64_t rows, size_t row_bytes) {
    const th_type_info *ti = packed_type(type);
    const size_t out_bytes = th_repack_row_bytes(type, row_bytes);
    for (int64_t r = 0; r < rows; r += 8) {
        const uint8_t *g = (const uint8_t *)src + (size_t)r * row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)r * out_bytes;
        if (!ti) { memcpy(out, g, 8 * row_bytes); continue; }
        const uint8_t *row[8];
        for (int i = 0; i < 8; i++) row[i] = g + (size_t)i * row_bytes;
        ti->repack8(row, (int64_t)(row_bytes / ti->bytes), out);
    }
}
