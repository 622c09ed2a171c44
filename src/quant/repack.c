/* repack.c (quant) — the 8-row interleaved weight layouts (see repack.h); plain C, run
 * once per weight when a context is created (cpu/repack.c's th_repack_rows). The
 * type table (types.c) points at these. */
#include "quant/repack.h"
#include "quant/ref_internal.h"
#include "quant/qn.h"
#include <string.h>

/* Q4_0: per block, the 8 rows' d, then R_k (k < 4) = the 8 rows' qs[4k..4k+3]. */
void th_repack8_q4_0(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst) {
    const th_block_q4_0 *row[8];
    for (int i = 0; i < 8; i++) row[i] = (const th_block_q4_0 *)(const void *)rows[i];
    for (int64_t b = 0; b < nblk; b++, dst += 8 * sizeof(th_block_q4_0)) {
        for (int i = 0; i < 8; i++) memcpy(dst + 2 * i, &row[i][b].d, 2);
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 8; i++) memcpy(dst + 16 + 32 * k + 4 * i, row[i][b].qs + 4 * k, 4);
    }
}

/* Q8_0: per block, the 8 rows' d, then R_k (k < 8) = the 8 rows' qs[4k..4k+3]. */
void th_repack8_q8_0(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst) {
    const th_block_q8_0 *row[8];
    for (int i = 0; i < 8; i++) row[i] = (const th_block_q8_0 *)(const void *)rows[i];
    for (int64_t b = 0; b < nblk; b++, dst += 8 * sizeof(th_block_q8_0)) {
        for (int i = 0; i < 8; i++) memcpy(dst + 2 * i, &row[i][b].d, 2);
        for (int k = 0; k < 8; k++)
            for (int i = 0; i < 8; i++) memcpy(dst + 16 + 32 * k + 4 * i, row[i][b].qs + 4 * k, 4);
    }
}

/* Q4_K: per super-block (8 x 148 bytes): the 8 rows' d, their dmin, 8 x 8 scales
 * (byte 32 + 8c + i: row i, sub-block c), 4 x 16 mins (byte 96 + 16p + 2i + e: row i,
 * sub-block 2p + e), then for p < 4, k < 8: 32 bytes = the 8 rows' qs[32p+4k..+3]. */
void th_repack8_q4_K(const uint8_t *const rows[8], int64_t nsb, uint8_t *dst) {
    const th_block_q4_K *row[8];
    for (int i = 0; i < 8; i++) row[i] = (const th_block_q4_K *)(const void *)rows[i];
    for (int64_t b = 0; b < nsb; b++, dst += 8 * TH_Q4_K_PACKED_BYTES) {
        for (int i = 0; i < 8; i++) {
            memcpy(dst + 2 * i, &row[i][b].d, 2);
            memcpy(dst + 16 + 2 * i, &row[i][b].dmin, 2);
            for (int c = 0; c < 8; c++) {
                uint8_t sc, m;
                th_k4_scale_min(c, row[i][b].scales, &sc, &m);
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
void th_repack8_q6_K(const uint8_t *const rows[8], int64_t nsb, uint8_t *dst) {
    const th_block_q6_K *row[8];
    for (int i = 0; i < 8; i++) row[i] = (const th_block_q6_K *)(const void *)rows[i];
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

/* IQ4_XS: per super-block (8 x 138 bytes): the 8 rows' d, their 8 sub-block scales as
 * signed bytes (ls - 32, byte 16 + 8c + i: row i, sub-block c), then for c < 8, k < 4:
 * 32 bytes = the 8 rows' qs[16c+4k..+3] (byte 80 + 128c + 32k + 4i), whose low nibbles
 * are the codes of elements 32c+4k..+3 and high nibbles those of 32c+16+4k..+3. */
void th_repack8_iq4_xs(const uint8_t *const rows[8], int64_t nsb, uint8_t *dst) {
    const th_block_iq4_xs *row[8];
    for (int i = 0; i < 8; i++) row[i] = (const th_block_iq4_xs *)(const void *)rows[i];
    for (int64_t b = 0; b < nsb; b++, dst += 8 * TH_IQ4_XS_PACKED_BYTES) {
        for (int i = 0; i < 8; i++) {
            const th_block_iq4_xs *x = &row[i][b];
            memcpy(dst + 2 * i, &x->d, 2);
            for (int c = 0; c < 8; c++) {
                int ls = ((x->scales_l[c / 2] >> (4 * (c & 1))) & 0xf) | (((x->scales_h >> (2 * c)) & 3) << 4);
                dst[16 + 8 * c + i] = (uint8_t)(int8_t)(ls - 32);
            }
        }
        for (int c = 0; c < 8; c++)
            for (int k = 0; k < 4; k++)
                for (int i = 0; i < 8; i++) memcpy(dst + 80 + 128 * c + 32 * k + 4 * i, row[i][b].qs + 16 * c + 4 * k, 4);
    }
}

/* qN (n bits, groups of 64): per group of the 8 rows (8 x (8n + 2) bytes): the 8 rows'
 * d, then for each pair of 4-element steps kk < 8 (elements 8kk..8kk+7) and p < n a
 * 64-bit little-endian mask at byte 16 + 8 (n kk + p) whose bit 32h + 4i + e is bit p of
 * the code of element 8kk + 4h + e of row i: as a mask register it gives the 8 rows'
 * codes of both steps as 64 bytes (avx512/qn.c). */
static void repack8_qn(int n, const uint8_t *const rows[8], int64_t ngr, uint8_t *dst) {
    const size_t gb = th_qn_group_bytes(n);
    for (int64_t b = 0; b < ngr; b++, dst += 8 * gb) {
        uint8_t codes[8][TH_QN_BLOCK];
        for (int i = 0; i < 8; i++) {
            memcpy(dst + 2 * i, rows[i] + b * gb, 2);
            th_qn_codes(rows[i] + b * gb, n, codes[i]);
        }
        for (int kk = 0; kk < 8; kk++)
            for (int p = 0; p < n; p++) {
                uint64_t m = 0;
                for (int h = 0; h < 2; h++)
                    for (int i = 0; i < 8; i++)
                        for (int e = 0; e < 4; e++)
                            m |= (uint64_t)((codes[i][8 * kk + 4 * h + e] >> p) & 1u) << (32 * h + 4 * i + e);
                uint8_t *o = dst + 16 + 8 * (n * kk + p);
                for (int y = 0; y < 8; y++) o[y] = (uint8_t)(m >> (8 * y));
            }
    }
}

#define QN_REPACK(N) \
    void th_repack8_q##N(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst) { repack8_qn(N, rows, ngr, dst); }
QN_REPACK(2)
QN_REPACK(3)
QN_REPACK(4)
QN_REPACK(5)
QN_REPACK(6)
QN_REPACK(7)
QN_REPACK(8)

/* F16 and BF16 (one 16-bit element per "block"): element k of the 8 rows side by side,
 * dst[8k + i] = row i's element k, so that a k-major gemm loads the 8 rows' weights at
 * one k with one 16-byte load. Same size as the original. */
void th_repack8_16bit(const uint8_t *const rows[8], int64_t n, uint8_t *dst) {
    uint16_t *d = (uint16_t *)(void *)dst;
    for (int64_t k = 0; k < n; k++)
        for (int i = 0; i < 8; i++) memcpy(d + 8 * k + i, rows[i] + 2 * k, 2);
}
