/* gemm_packed.h — what the packed gemms of the x86 levels (avx2/gemm_packed.c,
 * avx512/gemm_packed.c) share: the walk over activation rows in chunks, each with a
 * per-block side table on the stack (made once per chunk, read by every row tile).
 * Header-only, no ISA code. */
#ifndef TH_CPU_GEMM_PACKED_H
#define TH_CPU_GEMM_PACKED_H

#include "cpu/kernels.h"
#include <stdio.h>
#include <stdlib.h>

enum { TH_PACKED_TAB_BYTES = 64 << 10, TH_PACKED_CHUNK_ROWS = 32 };

/* Activation rows per chunk for a side table of tab_bytes per activation row (0: none):
 * 32 stay in L2; fewer (a multiple of 4) when their tables would not fit
 * TH_PACKED_TAB_BYTES. Aborts when not even 4 fit (th_repack_supported's TH_REPACK_MAX_N
 * keeps every table at most 8 bytes per 32 elements, so this does not happen). */
static inline int64_t th_packed_chunk_rows(size_t tab_bytes) {
    if (!tab_bytes) return TH_PACKED_CHUNK_ROWS;
    if (tab_bytes * 4 > TH_PACKED_TAB_BYTES) {
        fprintf(stderr, "theseus: packed gemm: rows too wide for the side table (TH_REPACK_MAX_N)\n");
        abort();
    }
    int64_t rows = (int64_t)(TH_PACKED_TAB_BYTES / tab_bytes) / 4 * 4;
    return rows < TH_PACKED_CHUNK_ROWS ? rows : TH_PACKED_CHUNK_ROWS;
}

#endif
