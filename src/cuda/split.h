/* split.h — the host side of the CUDA backend's SPLIT weight layouts (split.c has
 * the byte layouts): which types have one, the two arrays' sizes, and the
 * repacking from GGUF rows. Plain C with no CUDA header, so that split.c is also
 * built into the CPU-only library and tests/test_split.c checks the layouts on
 * any machine. backend.h includes it. */
#ifndef TH_CUDA_SPLIT_H
#define TH_CUDA_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Repack `rows` GGUF rows (row_bytes apart) of a splittable type into the SPLIT
 * layout: quants to qs (qrow bytes a row), scales to sc (srow bytes a row). */
void th_cu_repack_split(uint32_t type, const void *src, size_t row_bytes, int64_t rows, int64_t K, uint8_t *qs,
                        uint8_t *sc);
/* Bytes per row of the two SPLIT arrays; false when the type or K has no split form. */
bool th_cu_split_sizes(uint32_t type, int64_t K, size_t *qrow, size_t *srow);
bool th_cu_type_splittable(uint32_t type);

#ifdef __cplusplus
}
#endif
#endif
