/* repack.h — weight layouts made at load time for faster CPU kernels. A matrix whose
 * rows come in groups of 8 is copied into a layout of the same size where each
 * group's 8 rows are interleaved block by block (the layout of each type is described
 * in gemm_packed_avx2.c); row r (a multiple of 8) starts at the same byte offset as
 * in the original, so row ranges and per-expert offsets carry over unchanged. */
#ifndef TH_CPU_REPACK_H
#define TH_CPU_REPACK_H

#include "cpu/kernels.h"
#include <stdbool.h>

/* Whether `type` has a packed layout here and rows fits it (rows % 8 == 0). */
bool th_repack_supported(const th_kernels *k, uint32_t type, int64_t rows);
/* Copy `rows` rows (a multiple of 8) of row_bytes each from src into dst, packed. */
void th_repack_rows(uint32_t type, const void *src, void *dst, int64_t rows, size_t row_bytes);

#endif
