/* repack.c — the 8-row interleaved weight layouts (see repack.h); plain C, run once
 * per weight when a context is created. */
#include "cpu/repack.h"
#include <string.h>

bool th_repack_supported(const th_kernels *k, uint32_t type, int64_t rows, int64_t n) {
    return type < TH_TYPE_COUNT && k->gemm_packed[type] && rows > 0 && rows % 8 == 0 && n > 0 && n <= TH_REPACK_MAX_N;
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

/* Q4_K sub-block j's 6-bit scale and min from the 12-byte field (the reference layout). */
static void k4_scale_min(const uint8_t *q, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K: per super-block (8 x 148 bytes): the 8 rows' d, their dmin, 8 x 8 scales
 * (byte 32 + 8c + i: row i, sub-block c), 4 x 16 mins (byte 96 + 16p + 2i + e: row i,
 * sub-block 2p + e), then for p < 4, k < 8: 32 bytes = the 8 rows' qs[32p+4k..+3]. */
static void pack_q4_K_group(const th_block_q4_K *const row[8], int64_t nsb, uint8_t *dst) {
    for (int64_t b = 0; b < nsb; b++, dst += 8 * TH_Q4_K_PACKED_BYTES) {
        for (int i = 0; i < 8; i++) {
            memcpy(dst + 2 * i, &row[i][b].d, 2);
            memcpy(dst + 16 + 2 * i, &row[i][b].dmin, 2);
            for (int c = 0; c < 8; c++) {
                uint8_t sc, m;
                k4_scale_min(row[i][b].scales, c, &sc, &m);
                dst[32 + 8 * c + i] = sc;
                dst[96 + 16 * (c / 2) + 2 * i + (c & 1)] = m;
            }
        }
        for (int p = 0; p < 4; p++)
            for (int k = 0; k < 8; k++)
                for (int i = 0; i < 8; i++) memcpy(dst + 160 + 256 * p + 32 * k + 4 * i, row[i][b].qs + 32 * p + 4 * k, 4);
    }
}

/* Q6_K: per super-block (8 x 210 bytes): the 8 rows' d, their 16 sub-block scales
 * (byte 16 + 8s + i: row i, sub-block s), then for h, g < 2, k < 8: 32 bytes = the 8
 * rows' ql[64h+32g+4k..+3] (byte 144 + 512h + 256g + 32k + 4i), then for h < 2, k < 8:
 * 32 bytes = the 8 rows' qh[32h+4k..+3] (byte 1168 + 256h + 32k + 4i). */
static void pack_q6_K_group(const th_block_q6_K *const row[8], int64_t nsb, uint8_t *dst) {
    for (int64_t b = 0; b < nsb; b++, dst += 8 * sizeof(th_block_q6_K)) {
        for (int i = 0; i < 8; i++) {
            memcpy(dst + 2 * i, &row[i][b].d, 2);
            for (int j = 0; j < 16; j++) dst[16 + 8 * j + i] = (uint8_t)row[i][b].scales[j];
        }
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 8; k++)
                for (int i = 0; i < 8; i++) {
                    for (int g = 0; g < 2; g++)
                        memcpy(dst + 144 + 512 * h + 256 * g + 32 * k + 4 * i, row[i][b].ql + 64 * h + 32 * g + 4 * k, 4);
                    memcpy(dst + 1168 + 256 * h + 32 * k + 4 * i, row[i][b].qh + 32 * h + 4 * k, 4);
                }
    }
}

size_t th_repack_row_bytes(uint32_t type, size_t row_bytes) {
    if (type == TH_Q4_K) return row_bytes / sizeof(th_block_q4_K) * TH_Q4_K_PACKED_BYTES;
    return row_bytes;
}

void th_repack_rows(uint32_t type, const void *src, void *dst, int64_t rows, size_t row_bytes) {
    for (int64_t r = 0; r < rows; r += 8) {
        const uint8_t *g = (const uint8_t *)src + (size_t)r * row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)r * th_repack_row_bytes(type, row_bytes);
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
        case TH_Q4_K: {
            const th_block_q4_K *row[8];
            for (int i = 0; i < 8; i++) row[i] = (const th_block_q4_K *)(g + (size_t)i * row_bytes);
            pack_q4_K_group(row, (int64_t)(row_bytes / sizeof(th_block_q4_K)), out);
            break;
        }
        case TH_Q6_K: {
            const th_block_q6_K *row[8];
            for (int i = 0; i < 8; i++) row[i] = (const th_block_q6_K *)(g + (size_t)i * row_bytes);
            pack_q6_K_group(row, (int64_t)(row_bytes / sizeof(th_block_q6_K)), out);
            break;
        }
        default: memcpy(out, g, 8 * row_bytes); break;
        }
    }
}
