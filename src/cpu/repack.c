/* repack.c — the 8-row interleaved weight layouts (see repack.h); plain C, run once
 * per weight when a context is created. */
#include "cpu/repack.h"
#include <string.h>

bool th_repack_supported(const th_kernels *k, uint32_t type, int64_t rows) {
    return type < TH_TYPE_COUNT && k->gemm_packed[type] && rows > 0 && rows % 8 == 0;
}

/* Q4_0: per block, the 8 rows' d, then R_k (k < 4) = the 8 rows' qs[4k..4k+3]. */
static void pack_q4_0_group(const th_block_q4_0 *const row[8], int64_t nblk, uint8_t *dst) {
    for (int64_t b = 0; b < nblk; b++, dst += 8 * sizeof(th_block_q4_0)) {
        for (int i = 0; i < 8; i++) memcpy(dst + 2 * i, &row[i][b].d, 2);
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 8; i++) memcpy(dst + 16 + 32 * k + 4 * i, row[i][b].qs + 4 * k, 4);
    }
}

/* Q8_0: per block, the 8 rows' d, then R_k (k < 8) = the 8 rows' qs[4k..4k+3]. */
static void pack_q8_0_group(const th_block_q8_0 *const row[8], int64_t nblk, uint8_t *dst) {
    for (int64_t b = 0; b < nblk; b++, dst += 8 * sizeof(th_block_q8_0)) {
        for (int i = 0; i < 8; i++) memcpy(dst + 2 * i, &row[i][b].d, 2);
        for (int k = 0; k < 8; k++)
            for (int i = 0; i < 8; i++) memcpy(dst + 16 + 32 * k + 4 * i, row[i][b].qs + 4 * k, 4);
    }
}

void th_repack_rows(uint32_t type, const void *src, void *dst, int64_t rows, size_t row_bytes) {
    for (int64_t r = 0; r < rows; r += 8) {
        const uint8_t *g = (const uint8_t *)src + (size_t)r * row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)r * row_bytes;
        switch (type) {
        case TH_Q4_0: {
            const th_block_q4_0 *row[8];
            for (int i = 0; i < 8; i++) row[i] = (const th_block_q4_0 *)(g + (size_t)i * row_bytes);
            pack_q4_0_group(row, (int64_t)(row_bytes / sizeof(th_block_q4_0)), out);
            break;
        }
        case TH_Q8_0: {
            const th_block_q8_0 *row[8];
            for (int i = 0; i < 8; i++) row[i] = (const th_block_q8_0 *)(g + (size_t)i * row_bytes);
            pack_q8_0_group(row, (int64_t)(row_bytes / sizeof(th_block_q8_0)), out);
            break;
        }
        default: memcpy(out, g, 8 * row_bytes); break;
        }
    }
}
