/* kernels_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) kernels. Starts from the AVX2 level. */
#include "cpu/kernels.h"

void th_kernels_fill_avx512(th_kernels *k) { th_kernels_fill_avx2(k); }
