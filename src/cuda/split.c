/* split.c — the SPLIT weight layouts of the CUDA backend (split.h, backend.h):
 * which types have one, their sizes, and the host-side repacking from GGUF rows.
 * Plain C (no CUDA header): also built into the CPU library for tests/test_split.c.
 *
 * Every split type keeps its quants and its scales in two arrays so that a warp
 * reads one 32-weight sub-block per lane with one 16-byte load (8 bytes for the
 * 2-bit codes of Q2_K and Q3_K):
 *   Q4_0  quants: 16 bytes a sub-block; scales: the fp16 d of each sub-block.
 *   Q8_0  quants: 32 bytes a sub-block; scales: as Q4_0.
 *   Q4_1  quants: as Q4_0; scales: {fp16 d, fp16 m} a sub-block.
 *   Q5_0, Q5_1  quants: the low 4 bits as Q4_0; scales: {u32 fifth bits (high_bits),
 *         fp16 d, fp16 m (Q5_1) or 0} a sub-block.
 *   IQ4_NL  as Q4_0 (the codes index the IQ4 value table).
 *   MXFP4  quants: as Q4_0 (the file's, the codes index the doubled e2m1 table
 *         th_mxfp4_values); scales: the file's e8m0 byte of each sub-block.
 *   IQ4_XS  quants: as in the file (already Q4_0 order); scales: a 12-byte record per
 *         256 weights {fp16 d, 2 bytes padding, i8 (6-bit scale − 32)[8]}.
 *   Q2_K  quants: 8 bytes of 2-bit codes a sub-block (pack_2bit); scales: a 20-byte
 *         record per 256 weights {fp16 d, fp16 dmin, u8 scales[16]}: the file's
 *         bytes (sc | m << 4, one per 16 weights), bytes 2s and 2s+1 for sub-block s.
 *   Q3_K  quants: per row first the low 2 bits, 8 bytes a sub-block (pack_2bit),
 *         then the "minus 4" flags (hmask bit clear), 4 bytes a sub-block
 *         (high_bits); scales: an 18-byte record per 256 weights {fp16 d,
 *         i8 sc[16]} (the 6-bit scales − 32, one per 16 weights).
 *   Q4_K  quants: 16 bytes a sub-block; scales: a 20-byte record per 256
 *         weights {fp16 d, fp16 dmin, u8 sc[8], u8 m[8]} (the 6-bit scales unpacked).
 *   Q5_K  quants: the low 4 bits, 16 bytes a sub-block; scales: per row first the
 *         fifth bits, 4 bytes a sub-block (see high_bits), then Q4_K's records.
 *   Q6_K  quants: the low 4 bits, 16 bytes a sub-block; scales: per row first the
 *         high 2 bits, 8 bytes a sub-block (see q6k_high), then a 24-byte record per
 *         256 weights {fp16 d, 6 bytes padding, i8 sc[16]}.
 *   qN (q2..q8, quant/qn.h)  scales: the fp16 d of each 64-weight group (K/64 a
 *         row). quants: the n-bit codes c (0..2^n-1) cut into parts, each part a
 *         section of the row (sub-block b at offset b × part size): bits 0-3 as
 *         Q4_0-order nibbles (16 bytes a sub-block, n >= 4), then two bits
 *         (pack_2bit, 8 bytes: bits 0-1 for n = 2, 3; bits 4-5 for n = 6, 7), then
 *         one bit (high_bits, 4 bytes: bit n-1 for odd n); q8: the 32 bytes
 *         c − 128 (int8) a sub-block instead. Rows padded to 16 bytes.
 * 4-bit sub-blocks use Q4_0's order: byte i holds weight i (low nibble) and
 * weight i + 16 (high nibble). Values and scales are the file's, bit for bit. */
#include "cuda/split.h"
#include "quant/ref_internal.h"
#include <string.h>

bool th_cu_type_splittable(uint32_t t) {
    return t == TH_Q4_0 || t == TH_Q8_0 || t == TH_Q4_1 || t == TH_Q5_0 || t == TH_Q5_1 || t == TH_Q2_K ||
           t == TH_Q3_K || t == TH_Q4_K || t == TH_Q5_K || t == TH_Q6_K || t == TH_IQ4_NL || t == TH_IQ4_XS ||
           t == TH_MXFP4 || th_is_qn(t);
}

bool th_cu_split_sizes(uint32_t type, int64_t K, size_t *qrow, size_t *srow) {
    if (!th_cu_type_splittable(type) || K <= 0 || K % 32) return false;
    size_t k = (size_t)K;
    if (th_is_qn(type)) {
        if (k % 64) return false;
        *qrow = (k * (size_t)th_qn_bits(type) / 8 + 15) & ~(size_t)15;
        *srow = k / 64 * 2;
        return true;
    }
    switch (type) {
    case TH_Q4_0: case TH_IQ4_NL: *qrow = k / 2; *srow = k / 32 * 2; return true;
    case TH_IQ4_XS: if (k % 256) return false; *qrow = k / 2; *srow = k / 256 * 12; return true;
    case TH_MXFP4: *qrow = k / 2; *srow = k / 32; return true;
    case TH_Q8_0: *qrow = k; *srow = k / 32 * 2; return true;
    case TH_Q2_K: if (k % 256) return false; *qrow = k / 4; *srow = k / 256 * 20; return true;
    case TH_Q3_K: if (k % 256) return false; *qrow = k / 4 + k / 8; *srow = k / 256 * 18; return true;
    case TH_Q4_1: *qrow = k / 2; *srow = k / 32 * 4; return true;
    case TH_Q5_0: case TH_Q5_1: *qrow = k / 2; *srow = k / 32 * 8; return true;
    case TH_Q4_K: if (k % 256) return false; *qrow = k / 2; *srow = k / 256 * 20; return true;
    case TH_Q5_K: if (k % 256) return false; *qrow = k / 2; *srow = k / 8 + k / 256 * 20; return true;
    default: if (k % 256) return false; *qrow = k / 2; *srow = k / 4 + k / 256 * 24; return true;
    }
}

/* 32 4-bit codes (0..15) → 16 bytes in Q4_0 order. */
static void pack_nibbles(const uint8_t c[32], uint8_t out[16]) {
    for (int i = 0; i < 16; i++) out[i] = (uint8_t)((c[i] & 15) | (c[i + 16] << 4));
}

/* The high 2 bits of 32 Q6_K codes → 8 bytes. Byte j of the first word holds
 * (bits 0-1, 2-3, 4-5, 6-7) the high bits of weights j, j+16, j+4, j+20; the
 * second word the same for j+8, j+24, j+12, j+28. The GEMV turns word k of the
 * 16 quant bytes plus these into the full codes of weights 4k..4k+3 and
 * 16+4k..16+4k+3 with a shift and two masks. */
static void q6k_high(const uint8_t c[32], uint8_t out[8]) {
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < 4; j++) {
            int a = 8 * w + j;
            out[4 * w + j] = (uint8_t)((c[a] >> 4) | ((c[a + 16] >> 4) << 2) | ((c[a + 4] >> 4) << 4) | ((c[a + 20] >> 4) << 6));
        }
}

/* Bit `bit` of 32 codes → 4 bytes: bit k (k < 4) of byte j is that of weight
 * 4k+j, bit 4+k that of weight 16+4k+j, so word k of the Q4_0-order quant bytes
 * (or shift k of pack_2bit's words) gets its bits with one shift and mask per half.
 * The fifth bits of Q5_0/Q5_1/Q5_K (bit 4) and Q3_K's minus-4 flags (bit 0). */
static void high_bits(const uint8_t c[32], int bit, uint8_t out[4]) {
    for (int j = 0; j < 4; j++) {
        out[j] = 0;
        for (int k = 0; k < 4; k++)
            out[j] |= (uint8_t)((((c[4 * k + j] >> bit) & 1) << k) | (((c[16 + 4 * k + j] >> bit) & 1) << (4 + k)));
    }
}

/* 32 2-bit codes → 8 bytes: bits 2k..2k+1 of byte j of word h (0, 1) hold the
 * code of weight 16h + 4k + j, so (word h >> 2k) & 0x03030303 gives weights
 * 16h+4k..16h+4k+3, one per byte. */
static void pack_2bit(const uint8_t c[32], uint8_t out[8]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++) {
            out[4 * h + j] = 0;
            for (int k = 0; k < 4; k++) out[4 * h + j] |= (uint8_t)((c[16 * h + 4 * k + j] & 3) << (2 * k));
        }
}

/* Element e (0..255) of a Q2_K/Q3_K block: its 2-bit code's byte and shift in qs,
 * and (Q3_K) its hmask bit: e = 128·half + 32·plane + l. */
static int k23_code(const uint8_t qs[64], int e) {
    int half = e / 128, plane = (e % 128) / 32, l = e % 32;
    return (qs[32 * half + l] >> (2 * plane)) & 3;
}

static void repack_q2_k_row(const th_block_q2_K *b, int64_t nsb, uint8_t *q, uint8_t *rec) {
    for (int64_t i = 0; i < nsb; i++, rec += 20) {
        uint8_t codes[256];
        for (int e = 0; e < 256; e++) codes[e] = (uint8_t)k23_code(b[i].qs, e);
        for (int s = 0; s < 8; s++) pack_2bit(codes + 32 * s, q + (i * 8 + s) * 8);
        memcpy(rec, &b[i].d, 2);
        memcpy(rec + 2, &b[i].dmin, 2);
        memcpy(rec + 4, b[i].scales, 16);  /* scales[is] covers weights 16·is.. */
    }
}

static void repack_q3_k_row(const th_block_q3_K *b, int64_t nsb, uint8_t *q, uint8_t *rec) {
    uint8_t *lo = q, *flags = q + nsb * 64;
    for (int64_t i = 0; i < nsb; i++, rec += 18) {
        uint8_t codes[256], minus4[256];
        for (int e = 0; e < 256; e++) {
            int half = e / 128, plane = (e % 128) / 32, l = e % 32;
            codes[e] = (uint8_t)k23_code(b[i].qs, e);
            minus4[e] = (uint8_t)!((b[i].hmask[l] >> (4 * half + plane)) & 1);
        }
        for (int s = 0; s < 8; s++) {
            pack_2bit(codes + 32 * s, lo + (i * 8 + s) * 8);
            high_bits(minus4 + 32 * s, 0, flags + (i * 8 + s) * 4);
        }
        int8_t sc[16];
        th_q3k_scales(b[i].scales, sc);
        memcpy(rec, &b[i].d, 2);
        memcpy(rec + 2, sc, 16);
    }
}

/* The {d, dmin, sc[8], m[8]} record of a Q4_K/Q5_K block. */
static void k4_record(uint16_t d, uint16_t dmin, const uint8_t scales[12], uint8_t rec[20]) {
    memcpy(rec, &d, 2);
    memcpy(rec + 2, &dmin, 2);
    for (int s = 0; s < 8; s++) th_k4_scale_min(s, scales, &rec[4 + s], &rec[12 + s]);
}

static void repack_q4_k_row(const th_block_q4_K *b, int64_t nsb, uint8_t *q, uint8_t *rec) {
    for (int64_t i = 0; i < nsb; i++, rec += 20) {
        uint8_t codes[256];
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                codes[64 * j + l] = b[i].qs[32 * j + l] & 15;
                codes[64 * j + 32 + l] = b[i].qs[32 * j + l] >> 4;
            }
        for (int s = 0; s < 8; s++) pack_nibbles(codes + 32 * s, q + (i * 8 + s) * 16);
        k4_record(b[i].d, b[i].dmin, b[i].scales, rec);
    }
}

static void repack_q5_k_row(const th_block_q5_K *b, int64_t nsb, uint8_t *q, uint8_t *srow) {
    uint8_t *hi = srow, *rec = srow + nsb * 32;
    for (int64_t i = 0; i < nsb; i++, rec += 20) {
        uint8_t codes[256];
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                codes[64 * j + l] = (uint8_t)((b[i].qs[32 * j + l] & 15) | (((b[i].qh[l] >> (2 * j)) & 1) << 4));
                codes[64 * j + 32 + l] = (uint8_t)((b[i].qs[32 * j + l] >> 4) | (((b[i].qh[l] >> (2 * j + 1)) & 1) << 4));
            }
        for (int s = 0; s < 8; s++) {
            pack_nibbles(codes + 32 * s, q + (i * 8 + s) * 16);
            high_bits(codes + 32 * s, 4, hi + (i * 8 + s) * 4);
        }
        k4_record(b[i].d, b[i].dmin, b[i].scales, rec);
    }
}

static void repack_q6_k_row(const th_block_q6_K *b, int64_t nsb, uint8_t *q, uint8_t *srow) {
    uint8_t *hi = srow, *rec = srow + nsb * 64;
    for (int64_t i = 0; i < nsb; i++, rec += 24) {
        uint8_t codes[256];
        for (int e = 0; e < 256; e++) codes[e] = (uint8_t)th_q6k_code(&b[i], e);
        for (int s = 0; s < 8; s++) {
            pack_nibbles(codes + 32 * s, q + (i * 8 + s) * 16);
            q6k_high(codes + 32 * s, hi + (i * 8 + s) * 8);
        }
        memset(rec, 0, 8);
        memcpy(rec, &b[i].d, 2);
        memcpy(rec + 8, b[i].scales, 16);
    }
}

/* One Q4_1/Q5_0/Q5_1 row: codes, then the per-sub-block scale record. */
static void repack_legacy_row(uint32_t type, const uint8_t *row, int64_t nb, uint8_t *q, uint8_t *s) {
    size_t bsz = type == TH_Q4_1 ? 20 : type == TH_Q5_0 ? 22 : 24;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * bsz;
        if (type == TH_Q4_1) {
            memcpy(s + b * 4, blk, 4);          /* d, m */
            memcpy(q + b * 16, blk + 4, 16);    /* already in Q4_0 order */
            continue;
        }
        size_t dm = type == TH_Q5_0 ? 2 : 4;    /* bytes of d (and m) before qh */
        uint32_t qh;
        memcpy(&qh, blk + dm, 4);
        const uint8_t *qs = blk + dm + 4;
        uint8_t codes[32];
        for (int j = 0; j < 16; j++) {
            codes[j] = (uint8_t)((qs[j] & 15) | (((qh >> j) & 1) << 4));
            codes[j + 16] = (uint8_t)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
        pack_nibbles(codes, q + b * 16);
        high_bits(codes, 4, s + b * 8);
        memset(s + b * 8 + 4, 0, 4);
        memcpy(s + b * 8 + 4, blk, dm);
    }
}

static void repack_iq4_xs_row(const th_block_iq4_xs *b, int64_t nsb, uint8_t *q, uint8_t *rec) {
    for (int64_t i = 0; i < nsb; i++, rec += 12) {
        memcpy(q + i * 128, b[i].qs, 128);
        memset(rec, 0, 4);
        memcpy(rec, &b[i].d, 2);
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((b[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b[i].scales_h >> (2 * ib)) & 3) << 4);
            rec[4 + ib] = (uint8_t)(int8_t)(ls - 32);
        }
    }
}

/* One qN row (K/64 groups of 8n + 2 bytes): the codes to their parts, d to the scales. */
static void repack_qn_row(int n, const uint8_t *row, int64_t K, size_t qrow, uint8_t *q, uint8_t *s) {
    size_t nib = n >= 4 && n < 8 ? (size_t)K / 2 : 0, two = (n & 2) ? (size_t)K / 4 : 0;
    uint8_t *q2 = q + nib, *q1 = q2 + two;
    memset(q, 0, qrow);
    for (int64_t g = 0; g < K / 64; g++) {
        const uint8_t *b = row + (size_t)g * (8 * (size_t)n + 2);
        memcpy(s + 2 * g, b, 2);
        uint8_t codes[64];
        for (int j = 0; j < 64; j++) {
            int c = 0;
            for (int p = 0; p < n; p++) c |= ((b[2 + 8 * p + j / 8] >> (j % 8)) & 1) << p;
            codes[j] = (uint8_t)c;
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *c = codes + 32 * h;
            int64_t sb = 2 * g + h;
            if (n == 8) {
                for (int j = 0; j < 32; j++) q[sb * 32 + j] = (uint8_t)(c[j] ^ 0x80);
                continue;
            }
            uint8_t part[32];
            if (nib) {
                for (int j = 0; j < 32; j++) part[j] = c[j] & 15;
                pack_nibbles(part, q + sb * 16);
            }
            if (two) {
                for (int j = 0; j < 32; j++) part[j] = (uint8_t)(c[j] >> (n >= 4 ? 4 : 0));
                pack_2bit(part, q2 + sb * 8);
            }
            if (n & 1) high_bits(c, n - 1, q1 + sb * 4);
        }
    }
}

void th_cu_repack_split(uint32_t type, const void *src, size_t row_bytes, int64_t rows, int64_t K, uint8_t *qs,
                        uint8_t *sc) {
    size_t qrow, srow;
    if (!th_cu_split_sizes(type, K, &qrow, &srow)) return;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = (const uint8_t *)src + (size_t)r * row_bytes;
        uint8_t *q = qs + (size_t)r * qrow, *s = sc + (size_t)r * srow;
        if (th_is_qn(type)) { repack_qn_row(th_qn_bits(type), row, K, qrow, q, s); continue; }
        if (type == TH_Q4_K) { repack_q4_k_row((const th_block_q4_K *)row, K / 256, q, s); continue; }
        if (type == TH_Q4_1 || type == TH_Q5_0 || type == TH_Q5_1) { repack_legacy_row(type, row, K / 32, q, s); continue; }
        if (type == TH_IQ4_XS) { repack_iq4_xs_row((const th_block_iq4_xs *)row, K / 256, q, s); continue; }
        if (type == TH_Q5_K) { repack_q5_k_row((const th_block_q5_K *)row, K / 256, q, s); continue; }
        if (type == TH_Q6_K) { repack_q6_k_row((const th_block_q6_K *)row, K / 256, q, s); continue; }
        if (type == TH_Q2_K) { repack_q2_k_row((const th_block_q2_K *)row, K / 256, q, s); continue; }
        if (type == TH_Q3_K) { repack_q3_k_row((const th_block_q3_K *)row, K / 256, q, s); continue; }
        /* Q8_0, Q4_0, IQ4_NL: {fp16 d, codes}; MXFP4: {e8m0 byte, codes} */
        size_t bsz = type == TH_Q8_0 ? 34 : type == TH_MXFP4 ? 17 : 18, qb = type == TH_Q8_0 ? 32 : 16;
        size_t sb = type == TH_MXFP4 ? 1 : 2;
        for (int64_t b = 0; b < K / 32; b++) {
            memcpy(s + b * sb, row + (size_t)b * bsz, sb);
            memcpy(q + (size_t)b * qb, row + (size_t)b * bsz + sb, qb);
        }
    }
}
