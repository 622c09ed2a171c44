/* kernels.h — the CPU kernel table. At start-up (first call of th_cpu_kernels())
 * cpuid + XGETBV pick the best level the CPU and OS support; TH_CPU=generic|avx2|avx512
 * forces one (on aarch64: HWCAP_ASIMDDP picks neon; TH_CPU=generic|neon). The generic
 * level is the type table's reference kernels (src/quant/ref_*.c) plus attn.c and
 * ops.c. Each SIMD level lives in its own folder, src/cpu/avx2/, avx512/, neon/, with
 * the same file names in each (util.h, quantize.c, dot_float.c, dot_legacy.c,
 * dot_kquant.c, gemm_*.c, attn.c, ops.c, kernels.c where the level has them), compiled
 * with that level's flags; its kernels.c fills the table over the level below (avx512
 * over avx2, which every AVX-512 CPU runs) and composes each gemm entry from the
 * level's own kernels (TH_GEMM_ENTRY), never from the process-wide table, so that any
 * level can be filled and tested on its own whatever th_cpu_kernels() chose. */
#ifndef TH_CPU_KERNELS_H
#define TH_CPU_KERNELS_H

#include "quant/quant.h"

/* th_vec_dot_fn, th_quantize_fn (here: f32 to an activation type, F32/F16/BF16/Q8_0/
 * Q8_1/Q8_K) and th_dequant_fn are quant.h's, the reference kernels' signatures. */
/* Rows [r0, r1) of W (row stride w_stride bytes, n columns) times nb activation rows
 * (stride x_stride bytes, already quantized): y[b * y_stride + r] = dot(W_r, x_b). */
typedef void th_gemm_kernel(int64_t n, int64_t r0, int64_t r1, const void *w, size_t w_stride,
                            int64_t nb, const void *x, size_t x_stride, float *y, int64_t y_stride);
typedef th_gemm_kernel *th_gemm_fn;   /* (th_gemm_kernel declares the levels' gemm kernels) */

/* Attention over one chunk of at most TH_ATTN_TK keys, for m query rows, with an online
 * softmax (flash-attention style): per row r, the scores s_j = scale · q_r·k_j
 * [softcap: cap · tanh(s_j / cap)] of its keys j in [j0[r], j1[r]) (none when
 * j0[r] >= j1[r]) update the running maximum mx[r], the running sum of exp(s - mx)
 * sum[r], and acc[r] = Σ exp(s_j - mx) v_j (all rescaled when mx grows). Start a row
 * with mx = -INFINITY, sum = 0, acc = 0; th_attn_finish_row (below) divides. All f32:
 * q m rows of d floats; kt the chunk's keys transposed (kt[c * TH_ATTN_TK + j] = k_j[c]);
 * v and acc rows of dv floats at a stride of dv_stride (a multiple of 8 >= dv whose
 * extra lanes of v are zero). */
enum { TH_ATTN_TK = 64 };
/* a[i] = silu(gate[i]) * up[i] (th_op_swiglu of cpu/ops.h; a may be gate). */
typedef void (*th_glu_fn)(float *a, const float *gate, const float *up, int64_t n);
typedef void (*th_dn_step_fn)(int32_t dk, float *S, const float *q, const float *k, const float *v, float beta,
                              float decay, float scale, float *out);
/* The delta rule over a chunk of L <= TH_DN_CHUNK tokens of one head (cpu/dn_chunk.h):
 * q, k, v rows at a stride of xs, beta and log-decay at gs, out rows at os; work holds
 * th_dn_chunk_work(dk, L) floats. Equal to L dn_steps (exp(lg) the decay) within float
 * rounding while the state stays inside the ±1e6 clamp. */
typedef void (*th_dn_chunk_fn)(int32_t dk, int32_t L, float *S, const float *q, const float *k, const float *v,
                               int64_t xs, const float *beta, const float *lg, int64_t gs, float scale, float *out,
                               int64_t os, float *work);
typedef struct th_attn_chunk {
    int32_t m, d, dv, dv_stride;
    const float *q, *kt, *v;
    const int32_t *j0, *j1;
    float scale, softcap;                    /* softcap 0: none */
    float *mx, *sum, *acc;
} th_attn_chunk;
typedef void (*th_attn_chunk_fn)(const th_attn_chunk *a);
void th_attn_chunk_generic(const th_attn_chunk *a);      /* attn.c (avx2/attn.c: the SIMD form) */
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
    th_attn_chunk_fn attn_chunk;             /* prefill and decode attention (attention.c drives it) */
    th_glu_fn swiglu;                        /* the FFN activation of most models */
    th_dn_step_fn dn_step;                   /* one head's gated delta-rule step (th_op_dn_step) */
    th_dn_chunk_fn dn_chunk;                 /* the same over a chunk of tokens (th_op_dn_chunk), prefill */
    int32_t dn_chunk_min;                    /* prefill runs of at least this many tokens of one sequence use
                                              * dn_chunk; 0: never (at this level the step is faster:
                                              * bench/bench_dn_chunk, docs/hybrid.md) */
} th_kernels;

/* The process-wide table (built once, thread-safe). */
const th_kernels *th_cpu_kernels(void);

/* The levels. A build has generic plus its architecture's SIMD levels (x86-64: avx2,
 * avx512; aarch64: neon). */
enum th_level { TH_LEVEL_GENERIC, TH_LEVEL_AVX2, TH_LEVEL_AVX512, TH_LEVEL_NEON, TH_LEVEL_COUNT };
/* "generic", "avx2", "avx512", "neon" (NULL out of range). */
const char *th_level_name(int level);
/* Whether this CPU and OS can run `level`: generic always; avx2 needs AVX2, FMA, F16C,
 * BMI2 and the YMM state; avx512 also F, BW, VL, DQ, VNNI and the ZMM state (cpuid +
 * XGETBV); neon dotprod (HWCAP_ASIMDDP); false for a level of another architecture. */
bool th_cpu_has_level(int level);
/* *k = the table of `level` (the generic level, then the SIMD level's kernels over it).
 * False, *k the generic level, when the CPU lacks the level. Tests use it to check
 * every level the CPU has, not only the one th_cpu_kernels() picked. */
bool th_kernels_fill(th_kernels *k, int level);

/* Decode (one activation row) streams each weight byte once, so it runs at the memory's
 * read bandwidth only if enough cache-line fills are in flight. The hardware prefetchers
 * alone left 10-25 % of it unused with the packed kernels (they restart at every row
 * range a thread takes), so the packed single-row kernels, and the vec_dot of the AVX2
 * float types and of the avx512 level, also prefetch the weights TH_PREFETCH_AHEAD bytes
 * ahead in the stream they read: th_prefetch_span(p + TH_PREFETCH_AHEAD, bytes consumed
 * at p), with the stream read contiguously, touches every line ahead once (addresses
 * <= 64 apart). (Inside the kernels' loops, not in th_gemm_rows: there a whole row's
 * prefetches come in one burst in front of the row's vec_dot, which made Q6_K rows of
 * 8192 15 % slower.) */
enum { TH_PREFETCH_AHEAD = 4096 };
static inline void th_prefetch_span(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)p + o, 0, 3);
}

/* Fill helpers, one per level; each expects *k to hold the level below (the generic
 * level for avx2 and neon; th_kernels_fill_avx512 runs th_kernels_fill_avx2 first). */
void th_kernels_fill_generic(th_kernels *k);
void th_kernels_fill_avx2(th_kernels *k);    /* avx2/kernels.c (x86-64 only) */
void th_kernels_fill_avx512(th_kernels *k);  /* avx512/kernels.c (x86-64 only) */
void th_kernels_fill_neon(th_kernels *k);    /* neon/kernels.c (aarch64 only, needs dotprod) */

/* AMX off (th_model_params.no_amx): *k's packed BF16 gemm, if it is the AMX kernel
 * (avx512/gemm_amx.c), replaced by the one the level picks without AMX; a no-op
 * elsewhere. th_cpu_kernels_no_amx() is the process-wide table so changed (the CPU
 * backend takes it for a model loaded with no_amx). */
void th_kernels_no_amx(th_kernels *k);
void th_kernels_drop_amx_avx512(th_kernels *k);   /* avx512/kernels.c: th_kernels_no_amx's x86 part */
const th_kernels *th_cpu_kernels_no_amx(void);
/* Measurement switch (tests and bench/, not a user option): the avx512 level's packed
 * BF16 gemm, for the th_kernels_fill calls after it: 0 by the vendor rule (default),
 * 1 vdpbf16ps, 2 conversion and FMA (avx512/kernels.c; no-op off x86-64). */
void th_kernels_set_bf16_dot(int mode);

/* Rows [r0, r1) of W times nb activation rows, one dot product per output (row-major:
 * every activation row for one weight row, then the next weight row). */
static inline void th_gemm_rows(th_vec_dot_fn dot, int64_t n, int64_t r0, int64_t r1, const void *w,
                                size_t w_stride, int64_t nb, const void *x, size_t x_stride, float *y,
                                int64_t y_stride) {
    for (int64_t r = r0; r < r1; r++) {
        const char *wr = (const char *)w + (size_t)r * w_stride;
        for (int64_t b = 0; b < nb; b++)
            dot(n, &y[b * y_stride + r], wr, (const char *)x + (size_t)b * x_stride);
    }
}

/* A level's gemm entry NAME (static, a th_gemm_fn): a batch of one activation row
 * (decode's matrix-vector product) through the level's own dot product DOT, larger
 * batches through BATCH, a th_gemm_fn of the level's tiled kernels (which take any nb).
 * Without a tiled kernel, TH_GEMM_BY_DOT: DOT for every batch. */
#define TH_GEMM_ENTRY(NAME, DOT, BATCH)                                                                   \
    static void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
                     size_t xs, float *y, int64_t ys) {                                                   \
        if (nb < 2) th_gemm_rows(DOT, n, r0, r1, w, ws, nb, x, xs, y, ys);                                \
        else BATCH(n, r0, r1, w, ws, nb, x, xs, y, ys);                                                   \
    }
#define TH_GEMM_BY_DOT(NAME, DOT)                                                                         \
    static void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
                     size_t xs, float *y, int64_t ys) {                                                   \
        th_gemm_rows(DOT, n, r0, r1, w, ws, nb, x, xs, y, ys);                                            \
    }

/* th_gemm_rows with table k's vec_dot for `type` (the tests' and the bench's loop). */
void th_gemm_by_vec_dot(uint32_t type, const th_kernels *k, int64_t n, int64_t r0, int64_t r1,
                        const void *w, size_t w_stride, int64_t nb, const void *x,
                        size_t x_stride, float *y, int64_t y_stride);

#endif
