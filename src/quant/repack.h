/* repack.h (quant) — the 8-row interleaved weight layouts that the CPU's packed gemms
 * read (src/cpu/avx2/gemm_packed.c, src/cpu/avx512/gemm_packed.c): a group of 8 rows
 * is copied block by block into one run where the 8 rows' scales and codes are
 * interleaved (each layout is described in repack.c). The type table (types.c) holds,
 * per type, the packed bytes per block and row (th_type_info.packed_bytes: the
 * original's, except Q4_K's 148 instead of 144, its scales and mins unpacked to bytes,
 * and IQ4_XS's 138 instead of 136, its scales unpacked to signed bytes)
 * and the function below that packs one group; cpu/repack.h has the entry points. */
#ifndef TH_QUANT_REPACK_H
#define TH_QUANT_REPACK_H

#include "quant/quant.h"

enum { TH_Q4_K_PACKED_BYTES = 148 };   /* per 256 elements and row, in a group of 8 */
enum { TH_IQ4_XS_PACKED_BYTES = 138 }; /* the same (136 originally: 6-bit scales as bytes) */

/* Pack rows[0..7] (nblk blocks each) into dst (8 * nblk * packed_bytes bytes). */
void th_repack8_q4_0(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst);
void th_repack8_q8_0(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst);
void th_repack8_q4_K(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst);
void th_repack8_q6_K(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst);
void th_repack8_iq4_xs(const uint8_t *const rows[8], int64_t nblk, uint8_t *dst);
/* qN (quant/qn.h): same size as the original; layout in repack.c */
void th_repack8_q2(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst);
void th_repack8_q3(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst);
void th_repack8_q4(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst);
void th_repack8_q5(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst);
void th_repack8_q6(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst);
void th_repack8_q7(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst);
void th_repack8_q8(const uint8_t *const rows[8], int64_t ngr, uint8_t *dst);
/* F16, BF16: element k of the 8 rows side by side (dst[8k + i] = row i's element k) */
void th_repack8_16bit(const uint8_t *const rows[8], int64_t n, uint8_t *dst);

#endif
