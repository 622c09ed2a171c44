/* kernels.c — builds the CPU kernel table once: the generic (reference) level,
 * then the best level the CPU and OS support (cpuid + XGETBV; on aarch64 HWCAP),
 * or the one TH_CPU forces. */
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static th_kernels table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* Reference wrappers: one function per type would be a lot of boilerplate, so
 * the generic level dispatches on the type through these small trampolines. */
#define REF_TRAMPOLINES(T) \
    static void ref_dot_##T(int64_t n, float *s, const void *w, const void *a) { *s = th_ref_vec_dot(TH_##T, n, w, a); } \
    static void ref_q_##T(const float *x, void *y, int64_t n) { th_ref_quantize(TH_##T, x, y, n); } \
    static void ref_dq_##T(const void *x, float *y, int64_t n) { th_ref_dequantize(TH_##T, x, y, n); }

#define TYPES(X) X(F32) X(F16) X(BF16) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q8_1) \
    X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(Q8_K) X(IQ4_NL) X(IQ4_XS) X(MXFP4)
TYPES(REF_TRAMPOLINES)

#define GEMM_BY_DOT(T) \
    static void ref_gemm_##T(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, \
                             const void *x, size_t xs, float *y, int64_t ys) { \
        th_gemm_by_vec_dot(TH_##T, th_cpu_kernels(), n, r0, r1, w, ws, nb, x, xs, y, ys); }
TYPES(GEMM_BY_DOT)

void th_gemm_by_vec_dot(uint32_t type, const th_kernels *k, int64_t n, int64_t r0, int64_t r1,
                        const void *w, size_t w_stride, int64_t nb, const void *x,
                        size_t x_stride, float *y, int64_t y_stride) {
    th_vec_dot_fn dot = k->vec_dot[type];
    for (int64_t r = r0; r < r1; r++) {
        const char *wr = (const char *)w + (size_t)r * w_stride;
        for (int64_t b = 0; b < nb; b++)
            dot(n, &y[b * y_stride + r], wr, (const char *)x + (size_t)b * x_stride);
    }
}

void th_kernels_fill_generic(th_kernels *k) {
    memset(k, 0, sizeof *k);
    k->level = "generic";
#define FILL(T) k->vec_dot[TH_##T] = ref_dot_##T; k->quantize[TH_##T] = ref_q_##T; \
    k->dequant[TH_##T] = ref_dq_##T; k->gemm[TH_##T] = ref_gemm_##T;
    TYPES(FILL)
#undef FILL
    k->attn_chunk = th_attn_chunk_generic;
    k->swiglu = th_op_swiglu;
}

#if defined(__x86_64__)
#include <cpuid.h>
static unsigned long long read_xcr0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
static int detect_x86_level(void) { /* 0 generic, 1 avx2, 2 avx512 */
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
    if (!osxsave || !avx) return 0;
    unsigned long long xcr0 = read_xcr0();
    if ((xcr0 & 6) != 6) return 0;                 /* XMM + YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
    if (!(avx2 && fma && f16c && bmi2)) return 0;
    bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (b & (1u << 17)) /* F BW VL DQ */
                  && (c & (1u << 11));                                                         /* VNNI */
    if (avx512 && (xcr0 & 0xe6) == 0xe6) return 2;  /* opmask + ZMM state */
    return 1;
}
#endif

#if defined(__aarch64__)
/* aarch64: the neon level needs the dot-product instructions (HWCAP_ASIMDDP, which the
 * kernel reports only when the OS supports them); TH_CPU=generic|neon forces a level. */
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
static void init_table_aarch64(void) {
    bool neon = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    const char *force = getenv("TH_CPU");
    if (force && *force) {
        if (!strcmp(force, "generic"))
            neon = false;
        else if (strcmp(force, "neon"))
            fprintf(stderr, "theseus: TH_CPU=%s is not one of generic|neon; ignored\n", force);
        else if (!neon)
            fprintf(stderr, "theseus: TH_CPU=neon is not supported by this CPU (no dotprod); using generic\n");
    }
    if (neon) { th_kernels_fill_neon(&table); table.level = "neon"; }
}
#endif

static void init_table(void) {
    th_kernels_fill_generic(&table);
#if defined(__aarch64__)
    init_table_aarch64();
    return;
#endif
    int level = 0;
#if defined(__x86_64__)
    level = detect_x86_level();
#endif
    const char *force = getenv("TH_CPU");
    if (force && *force) {
        int want = !strcmp(force, "generic") ? 0 : !strcmp(force, "avx2") ? 1 : !strcmp(force, "avx512") ? 2 : -1;
        if (want < 0)
            fprintf(stderr, "theseus: TH_CPU=%s is not one of generic|avx2|avx512; ignored\n", force);
        else if (want > level)
            fprintf(stderr, "theseus: TH_CPU=%s is not supported by this CPU; using the best available\n", force);
        else
            level = want;
    }
#if defined(__x86_64__)
    if (level >= 1) { th_kernels_fill_avx2(&table); table.level = "avx2"; }
    if (level >= 2) { th_kernels_fill_avx512(&table); table.level = "avx512"; }
#endif
}

const th_kernels *th_cpu_kernels(void) {
    pthread_once(&table_once, init_table);
    return &table;
}

const char *th_cpu_level(void) { return th_cpu_kernels()->level; }
