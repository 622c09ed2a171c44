/* repack.h — weight layouts made at load time for faster CPU kernels. A matrix whose
 * rows come in groups of 8 is copied into a layout of the same size where each
 * group's 8 rows are interleaved block by block (the layouts are quant/repack.c's;
 * the type table says which types have one). The packed "row size"
 * th_repack_row_bytes is the original's, except Q4_K (148 bytes per 256 elements
 * instead of 144: scales and mins unpacked to bytes) and IQ4_XS (138 instead of
 * 136: scales unpacked to bytes); row r (a multiple of 8) starts
 * at r times it, so row ranges and per-expert offsets carry over, and gemm_packed
 * takes it as the row stride. */
#ifndef TH_CPU_REPACK_H
#define TH_CPU_REPACK_H

#include "cpu/kernels.h"
#include "quant/repack.h"
#include <stdbool.h>

/* Whether `type` has a packed layout and a packed gemm at the level of k, and a rows x n
 * matrix fits it (rows % 8 == 0, n <= TH_REPACK_MAX_N: the gemm keeps per-block
 * activation sums on its stack). */
enum { TH_REPACK_MAX_N = 65536 };
bool th_repack_supported(const th_kernels *k, uint32_t type, int64_t rows, int64_t n);

/* Bytes per row of the packed copy (see above). */
size_t th_repack_row_bytes(uint32_t type, size_t row_bytes);
/* Copy `rows` rows (a multiple of 8) of row_bytes each from src into dst, packed
 * (dst holds rows * th_repack_row_bytes bytes; a type without a layout is copied as is). */
void th_repack_rows(uint32_t type, const void *src, void *dst, int64_t rows, size_t row_bytes);

#endif
