/* gemm_amx.c (avx512) — BF16 batch gemm with AMX (tdpbf16ps) on the packed layout of
 * quant/repack.c th_repack8_16bit, where the CPU and OS offer AMX-BF16: cpuid leaf 7
 * (EDX bits 22 AMX-BF16, 24 AMX-TILE), XCR0 bits 17/18 (tile state enabled by the OS), and
 * the Linux permission for the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, once per
 * process); avx512/kernels.c then uses it for BF16 (th_model_params.no_amx, --no-amx, turns it off). Written on a
 * VM without AMX (indexing checked against a C emulation of the tile ops), checked on the
 * GPU machine's host CPU: tests/test_repack.c against the reference wherever AMX is
 * usable; bench_float_gemm there: 433-506 GFLOP/s at N = 512 on one core, 2.6-3.1x its
 * FMA roof; 70 at N = 8, so batches below 32 take the FMA kernel.
 *
 * Per call: the activation rows copied into a zero-padded bf16 block (width rounded up to
 * 32, rows to 32), and per panel of 32 weight rows the weights as bf16 pairs over the whole
 * width (pan[p][row][2], 128 bytes per pair of k, zero rows and k past the end). Tiles: C
 * 4 x (16 activation rows x 16 weight rows, f32), A 2 x (16 activation rows x 32 k, bf16,
 * the padded copy), B 2 x (16 pairs of k x 16 weight rows); per 32 k, 4 tdpbf16ps (16 x 16 x
 * 32 multiply-adds each, exact bf16 products, f32 sums). C goes through a 1 KiB buffer to
 * y (only the valid rows and activation rows). Decode and batches below 32 take the FMA
 * kernel (gemm_fpack.c). */
#include "cpu/avx512/util.h"
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ARCH_REQ_XCOMP_PERM_ = 0x1023, XFEATURE_XTILEDATA_ = 18 };

bool th_avx512_amx_bf16_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;   /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) == 0;
}

typedef struct __attribute__((packed, aligned(64))) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

/* pan[p * 64 + 2 * i + e] = row i (< 32) of the panel at element 2p + e, p < np; zeros
 * past n and for rows past ng groups. (The 8 rows at k and k + 1 are 2 x 16 bytes of the
 * packed group: interleaved by one unpacklo / unpackhi.) */
static void pair_panel_full(const uint16_t *w, int64_t n, int ng, int64_t np, uint16_t *pan) {
    const int64_t full = n / 2;
    for (int q = 0; q < ng; q++) {
        const uint16_t *g = w + (size_t)q * 8 * (size_t)n;
        for (int64_t p = 0; p < full; p++) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(g + 16 * p)), b = _mm_loadu_si128((const __m128i *)(g + 16 * p + 8));
            _mm_storeu_si128((__m128i *)(pan + p * 64 + 16 * q), _mm_unpacklo_epi16(a, b));
            _mm_storeu_si128((__m128i *)(pan + p * 64 + 16 * q + 8), _mm_unpackhi_epi16(a, b));
        }
        if (n & 1) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(g + 16 * full)), z = _mm_setzero_si128();
            _mm_storeu_si128((__m128i *)(pan + full * 64 + 16 * q), _mm_unpacklo_epi16(a, z));
            _mm_storeu_si128((__m128i *)(pan + full * 64 + 16 * q + 8), _mm_unpackhi_epi16(a, z));
        }
    }
    const int64_t used = full + (n & 1);
    if (ng < 4)
        for (int64_t p = 0; p < used; p++) memset(pan + p * 64 + 16 * ng, 0, (size_t)(4 - ng) * 32);
    if (np > used) memset(pan + used * 64, 0, (size_t)(np - used) * 128);
}

__attribute__((target("amx-tile,amx-bf16"))) static void amx_block(const uint16_t *xa, int64_t xstride, const uint16_t *pan,
                                                                   int64_t np, float *cbuf) {
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t p = 0; p < np; p += 16) {
        _tile_loadd(4, xa + 2 * p, xstride * 2);                    /* activation rows 0..15, k 2p.. 2p+31 */
        _tile_loadd(5, xa + 16 * xstride + 2 * p, xstride * 2);     /* rows 16..31 */
        _tile_loadd(6, pan + p * 64, 128);                         /* pairs p..p+15, weight rows 0..15 */
        _tile_loadd(7, pan + p * 64 + 32, 128);                    /* weight rows 16..31 */
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, cbuf, 64);
    _tile_stored(1, cbuf + 256, 64);
    _tile_stored(2, cbuf + 512, 64);
    _tile_stored(3, cbuf + 768, 64);
}

/* ldtilecfg through our own asm with the whole 64-byte struct as its operand: GCC 12's
 * _tile_loadconfig declares only 8 bytes read ("m" (*(const void **)p)), so the compiler
 * dropped the stores of rows and colsb as dead (seen in the object code: a config of
 * empty tiles, and the first run on an AMX host died in its first test). */
__attribute__((target("amx-tile,amx-bf16"))) static void amx_config(void) {
    tile_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}
__attribute__((target("amx-tile"))) static void amx_release(void) { _tile_release(); }

void th_avx512_amx_bf16(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                        size_t xs, float *y, int64_t ys) {
    if (nb < 32) { th_avx512_fpack_bf16(n, r0, r1, w, ws, nb, x, xs, y, ys); return; }
    const int64_t n_pad = (n + 31) & ~(int64_t)31, np = n_pad / 2, nb_pad = (nb + 31) & ~(int64_t)31;
    uint16_t *xa = aligned_alloc(64, (size_t)(nb_pad * n_pad) * 2), *pan = aligned_alloc(64, (size_t)np * 128);
    float *cbuf = aligned_alloc(64, 4096);
    if (!xa || !pan || !cbuf) {
        free(xa); free(pan); free(cbuf);
        th_avx512_fpack_bf16(n, r0, r1, w, ws, nb, x, xs, y, ys);
        return;
    }
    memset(xa, 0, (size_t)(nb_pad * n_pad) * 2);
    for (int64_t b = 0; b < nb; b++) memcpy(xa + b * n_pad, (const char *)x + (size_t)b * xs, (size_t)n * 2);
    amx_config();
    for (int64_t r = r0; r < r1; r += 32) {
        const int pr = (int)TH_MIN(32, r1 - r);
        pair_panel_full((const uint16_t *)(const void *)((const char *)w + (size_t)r * ws), n, (pr + 7) / 8, np, pan);
        for (int64_t b0 = 0; b0 < nb; b0 += 32) {
            amx_block(xa + b0 * n_pad, n_pad, pan, np, cbuf);
            /* cbuf tile t = 2 * (activation half) + (weight-row half): [16 b][16 r] */
            for (int64_t b = b0; b < TH_MIN(nb, b0 + 32); b++)
                for (int i = 0; i < pr; i++) {
                    const int t = 2 * (int)((b - b0) / 16) + i / 16;
                    y[b * ys + r + i] = cbuf[t * 256 + ((b - b0) % 16) * 16 + i % 16];
                }
        }
    }
    amx_release();
    free(xa); free(pan); free(cbuf);
}
