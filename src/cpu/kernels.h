/* kernels.h — the CPU kernel table. At start-up (first call of th_cpu_kernels())
 * cpuid + XGETBV pick the best level the CPU and OS support; TH_CPU=generic|avx2|avx512
 * forces one (on aarch64: HWCAP_ASIMDDP picks neon; TH_CPU=generic|neon). The generic level is the reference kernels of src/quant/. Each
 * ISA file (kernels_avx2.c, ...) fills the entries it accelerates and leaves the
 * rest to the level below. */
#ifndef TH_CPU_KERNELS_H
#define TH_CPU_KERNELS_H

#include "quant/quant.h"

/* *s = dot(weight row w of n elements, activation row act in the weight type's act_type) */
typedef void (*th_vec_dot_fn)(int64_t n, float *s, const void *w, const void *act);
/* Convert n f32 values to an activation type (F32/F16/BF16/Q8_0/Q8_1/Q8_K). */
typedef void (*th_quantize_fn)(const float *x, void *y, int64_t n);
/* Rows [r0, r1) of W (row stride w_stride bytes, n columns) times nb activation rows
 * (stride x_stride bytes, already quantized): y[b * y_stride + r] = dot(W_r, x_b). */
typedef void (*th_gemm_fn)(int64_t n, int64_t r0, int64_t r1, const void *w, size_t w_stride,
                           int64_t nb, const void *x, size_t x_stride, float *y, int64_t y_stride);
/* Decode n elements of a weight type to f32 (embedding rows). */
typedef void (*th_dequant_fn)(const void *src, float *dst, int64_t n);

/* Attention over one chunk of at most TH_ATTN_TK keys, for m query rows, with an online
 * softmax (flash-attention style): per row r, the scores s_j = scale · q_r·k_j
 * [softcap: cap · tanh(s_j / cap)] of its keys j in [j0[r], j1[r]) (none when
 * j0[r] >= j1[r]) update the running maximum mx[r], the running sum of exp(s - mx)
 * sum[r], and acc[r] = Σ exp(s_j - mx) v_j (all rescaled when mx grows). Start a row
 * with mx = -INFINITY, sum = 0, acc = 0; th_attn_finish (attention.h) divides. All f32:
 * q m rows of d floats; kt the chunk's keys transposed (kt[c * TH_ATTN_TK + j] = k_j[c]);
 * v and acc rows of dv floats at a stride of dv_stride (a multiple of 8 >= dv whose
 * extra lanes of v are zero). */
enum { TH_ATTN_TK = 64 };
/* a[i] = silu(gate[i]) * up[i] (th_op_swiglu of cpu/ops.h; a may be gate). */
typedef void (*th_glu_fn)(float *a, const float *gate, const float *up, int64_t n);
typedef struct th_attn_chunk {
    int32_t m, d, dv, dv_stride;
    const float *q, *kt, *v;
    const int32_t *j0, *j1;
    float scale, softcap;                    /* softcap 0: none */
    float *mx, *sum, *acc;
} th_attn_chunk;
typedef void (*th_attn_chunk_fn)(const th_attn_chunk *a);
void th_attn_chunk_generic(const th_attn_chunk *a);      /* attn.c */
/* out[0..dv) = a row's attention output from its final state: acc / sum, with the
 * softmax denominator also holding exp(*sink) when sink is not NULL. */
void th_attn_finish_row(float *out, const float *acc, int32_t dv, float mx, float sum, const float *sink);

typedef struct th_kernels {
    const char *level;                       /* "generic", "avx2", "avx512", "neon" */
    th_vec_dot_fn vec_dot[TH_TYPE_COUNT];    /* by weight type */
    th_gemm_fn gemm[TH_TYPE_COUNT];          /* by weight type */
    th_quantize_fn quantize[TH_TYPE_COUNT];  /* by activation type */
    th_dequant_fn dequant[TH_TYPE_COUNT];    /* by weight type */
    /* gemm on a weight repacked by th_repack_rows (cpu/repack.h): same arguments,
     * w the packed copy (row r at the same offset as in the original); NULL: the
     * level has no packed kernel for the type, so weights of it are not repacked */
    th_gemm_fn gemm_packed[TH_TYPE_COUNT];
    th_attn_chunk_fn attn_chunk;             /* prefill and decode attention (attention.c) */
    th_glu_fn swiglu;                        /* the FFN activation of most models */
} th_kernels;

const th_kernels *th_cpu_kernels(void);

/* Decode (one activation row) streams each weight byte once, so it runs at the memory's
 * read bandwidth only if enough cache-line fills are in flight. The hardware prefetchers
 * alone left 10-25 % of it unused with the packed kernels (they restart at every row
 * range a thread takes), so the packed single-row kernels also prefetch the weights
 * TH_PREFETCH_AHEAD bytes ahead in the stream they read: th_prefetch_span(p +
 * TH_PREFETCH_AHEAD, bytes consumed at p), with the stream read contiguously, touches
 * every line ahead once (addresses <= 64 apart). (Not in th_gemm_by_vec_dot: there a
 * whole row's prefetches come in one burst in front of the row's vec_dot, which made
 * Q6_K rows of 8192 15 % slower.) */
enum { TH_PREFETCH_AHEAD = 4096 };
static inline void th_prefetch_span(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)p + o, 0, 3);
}

/* Fill helpers, one per level; each starts from the level below. */
void th_kernels_fill_generic(th_kernels *k);
void th_kernels_fill_avx2(th_kernels *k);    /* kernels_avx2.c (x86-64 only) */
void th_kernels_fill_avx512(th_kernels *k);  /* kernels_avx512.c (x86-64 only) */
void th_kernels_fill_neon(th_kernels *k);    /* kernels_neon.c (aarch64 only, needs dotprod) */

/* A gemm built from the table's vec_dot for `type` (what levels use until they
 * have a real tiled kernel). */
void th_gemm_by_vec_dot(uint32_t type, const th_kernels *k, int64_t n, int64_t r0, int64_t r1,
                        const void *w, size_t w_stride, int64_t nb, const void *x,
                        size_t x_stride, float *y, int64_t y_stride);

#endif
