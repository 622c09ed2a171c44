/* kernels.c — the generic level of the CPU kernel table (the type table's reference
 * kernels), the level detection (cpuid + XGETBV on x86-64, HWCAP on aarch64), and the
 * process-wide table, built once: the best level the CPU and OS support, or the one
 * TH_CPU forces. The SIMD levels fill themselves (avx2/kernels.c, avx512/kernels.c,
 * neon/kernels.c). */
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The generic gemm of type id T: every (weight row, activation row) through the type's
 * reference dot product. th_gemm_fn carries no type, so there is one function per type
 * id (0..39, and the qN ids); th_kernels_fill_generic puts those of the types with a reference dot
 * product in the table. */
#define REF_GEMM(T)                                                                                         \
    static void ref_gemm_##T(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb,      \
                             const void *x, size_t xs, float *y, int64_t ys) {                              \
        th_gemm_rows(th_type_info_get(T)->vec_dot, n, r0, r1, w, ws, nb, x, xs, y, ys);                     \
    }
#define TEN(D, F) F(D##0) F(D##1) F(D##2) F(D##3) F(D##4) F(D##5) F(D##6) F(D##7) F(D##8) F(D##9)
#define ALL_IDS(F) TEN(, F) TEN(1, F) TEN(2, F) TEN(3, F)
#define QN_IDS(F) F(1002) F(1003) F(1004) F(1005) F(1006) F(1007) F(1008)   /* TH_Q2..TH_Q8 */
#define IK_IDS(F) F(41) F(134) F(135)   /* TH_Q1_0_G128, TH_IQ1_BN, TH_IQ2_BN */
_Static_assert(TH_GGML_TYPE_COUNT == 40 && TH_Q2 == 1002 && TH_Q8 == 1008 && TH_TYPE_COUNT == 1009,
               "ALL_IDS enumerates the ggml ids 0..39, QN_IDS the qN ids");
_Static_assert(TH_Q1_0_G128 == 41 && TH_IQ1_BN == 134 && TH_IQ2_BN == 135, "IK_IDS: ik_llama.cpp's ids beyond 39");
ALL_IDS(REF_GEMM)
QN_IDS(REF_GEMM)
IK_IDS(REF_GEMM)
#define REF_GEMM_AT(T) [T] = ref_gemm_##T,
static const th_gemm_fn ref_gemm[TH_TYPE_COUNT] = { ALL_IDS(REF_GEMM_AT) QN_IDS(REF_GEMM_AT) IK_IDS(REF_GEMM_AT) };

void th_gemm_by_vec_dot(uint32_t type, const th_kernels *k, int64_t n, int64_t r0, int64_t r1,
                        const void *w, size_t w_stride, int64_t nb, const void *x,
                        size_t x_stride, float *y, int64_t y_stride) {
    th_gemm_rows(k->vec_dot[type], n, r0, r1, w, w_stride, nb, x, x_stride, y, y_stride);
}

/* The generic level: the type table's reference kernels (src/quant/ref_*.c). */
void th_kernels_fill_generic(th_kernels *k) {
    memset(k, 0, sizeof *k);
    k->level = "generic";
    for (uint32_t t = 0; t < TH_TYPE_COUNT; t++) {
        const th_type_info *ti = th_type_info_get(t);
        if (!ti) continue;
        k->vec_dot[t] = ti->vec_dot;
        k->quantize[t] = ti->quantize;
        k->dequant[t] = ti->dequantize;
        if (ti->vec_dot) k->gemm[t] = ref_gemm[t];
    }
    k->attn_chunk = th_attn_chunk_generic;
    k->swiglu = th_op_swiglu;
    k->dn_step = th_op_dn_step;
    k->dn_chunk = th_op_dn_chunk;
    k->dn_chunk_min = 8;
}

/* ---------------------------------------------------------------- detection */

#if defined(__x86_64__)
#include <cpuid.h>
static unsigned long long read_xcr0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
static int detect_level(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return TH_LEVEL_GENERIC;
    bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
    if (!osxsave || !avx) return TH_LEVEL_GENERIC;
    unsigned long long xcr0 = read_xcr0();
    if ((xcr0 & 6) != 6) return TH_LEVEL_GENERIC;  /* XMM + YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return TH_LEVEL_GENERIC;
    bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
    if (!(avx2 && fma && f16c && bmi2)) return TH_LEVEL_GENERIC;
    bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (b & (1u << 17)) /* F BW VL DQ */
                  && (c & (1u << 11));                                                         /* VNNI */
    if (avx512 && (xcr0 & 0xe6) == 0xe6) return TH_LEVEL_AVX512;  /* opmask + ZMM state */
    return TH_LEVEL_AVX2;
}
#elif defined(__aarch64__)
/* The neon level needs the dot-product instructions (HWCAP_ASIMDDP, which the kernel
 * reports only when the OS supports them). */
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
static int detect_level(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? TH_LEVEL_NEON : TH_LEVEL_GENERIC; }
#else
static int detect_level(void) { return TH_LEVEL_GENERIC; }
#endif

static const char *const level_names[TH_LEVEL_COUNT] = { "generic", "avx2", "avx512", "neon" };

const char *th_level_name(int level) { return level >= 0 && level < TH_LEVEL_COUNT ? level_names[level] : NULL; }

static int best;  /* the best level of this CPU (detect_level, once) */
static pthread_once_t best_once = PTHREAD_ONCE_INIT;
static void find_best(void) { best = detect_level(); }

bool th_cpu_has_level(int level) {
    pthread_once(&best_once, find_best);
    if (level == TH_LEVEL_GENERIC || level == best) return true;
    return level == TH_LEVEL_AVX2 && best == TH_LEVEL_AVX512;   /* the levels of one architecture nest */
}

bool th_kernels_fill(th_kernels *k, int level) {
    th_kernels_fill_generic(k);
    if (level == TH_LEVEL_GENERIC) return true;
    if (!th_cpu_has_level(level)) return false;
#if defined(__x86_64__)
    if (level == TH_LEVEL_AVX2) th_kernels_fill_avx2(k);
    if (level == TH_LEVEL_AVX512) th_kernels_fill_avx512(k);
#elif defined(__aarch64__)
    if (level == TH_LEVEL_NEON) th_kernels_fill_neon(k);
#endif
    k->level = level_names[level];
    return true;
}

/* ---------------------------------------------------------------- the process-wide table */

static th_kernels table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* TH_CPU: the level it names if this CPU has it, with a message otherwise (ignored when
 * it names none of this architecture's levels; the best level when the CPU lacks it). */
static int forced_level(int level) {
    const char *force = getenv("TH_CPU");
    if (!force || !*force) return level;
#if defined(__aarch64__)
    if (!strcmp(force, "generic")) return TH_LEVEL_GENERIC;
    if (strcmp(force, "neon"))
        fprintf(stderr, "theseus: TH_CPU=%s is not one of generic|neon; ignored\n", force);
    else if (level != TH_LEVEL_NEON)
        fprintf(stderr, "theseus: TH_CPU=neon is not supported by this CPU (no dotprod); using generic\n");
    return level;
#else
    int want = !strcmp(force, "generic") ? TH_LEVEL_GENERIC : !strcmp(force, "avx2") ? TH_LEVEL_AVX2
             : !strcmp(force, "avx512") ? TH_LEVEL_AVX512 : -1;
    if (want < 0)
        fprintf(stderr, "theseus: TH_CPU=%s is not one of generic|avx2|avx512; ignored\n", force);
    else if (want > level)
        fprintf(stderr, "theseus: TH_CPU=%s is not supported by this CPU; using the best available\n", force);
    else
        level = want;
    return level;
#endif
}

static void init_table(void) {
    pthread_once(&best_once, find_best);
    th_kernels_fill(&table, forced_level(best));
}

const th_kernels *th_cpu_kernels(void) {
    pthread_once(&table_once, init_table);
    return &table;
}

void th_kernels_no_amx(th_kernels *k) {
#if defined(__x86_64__)
    if (k->level && !strcmp(k->level, "avx512")) th_kernels_drop_amx_avx512(k);
#else
    (void)k;
#endif
}

static th_kernels table_no_amx;
static pthread_once_t table_no_amx_once = PTHREAD_ONCE_INIT;
static void init_table_no_amx(void) {
    table_no_amx = *th_cpu_kernels();
    th_kernels_no_amx(&table_no_amx);
}

const th_kernels *th_cpu_kernels_no_amx(void) {
    pthread_once(&table_no_amx_once, init_table_no_amx);
    return &table_no_amx;
}

#if !defined(__x86_64__)
void th_kernels_set_bf16_dot(int mode) { (void)mode; }
#endif

const char *th_cpu_level(void) { return th_cpu_kernels()->level; }
