/* gemm_x8.c (avx2) — AVX2 batch gemm for the unsigned-code types Q4_0, Q4_1, Q5_0, Q5_1
 * (and Q4_K, at the end of the file) in tiles of 8 weight rows x 4 activation rows, with the weight rows
 * interleaved on the fly so that no horizontal sums are needed:
 *   - the 8 rows' blocks are decoded to 32 unsigned bytes each and transposed as an
 *     8 x 8 matrix of 4-byte groups: register g holds elements 4g..4g+3 of all 8 rows;
 *   - for each activation row, elements 4g..4g+3 are broadcast and vpmaddubsw'ed with
 *     register g; the 16-bit sums over g are exact (4-bit codes: 8 groups * 2 * 15 * 127
 *     < 32768; 5-bit codes: summed 4 groups at a time), and one vpmaddwd gives the 8
 *     rows' block sums in 8 lanes, scaled by the 8 rows' d times the activation's d.
 * Offsets (Q4_0: 8, Q5_0: 16) are removed with the activation block sum; mins (Q4_1,
 * Q5_1) are added as m * s (s = d * sum of the Q8_1 block). Results of a tile are 8
 * consecutive rows of one output row: one store. Edge tiles repeat the last valid
 * row/column pointer and store only the valid outputs. */
#include "cpu/avx2/util.h"

/* r[g] <- the g-th 4-byte group of every row (row i in 32-bit lane i). */
static inline void transpose8x8_epi32(__m256i r[8]) {
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

static inline __m256i dec_q4(const void *b, size_t qs_off) { return avx2_nibbles32((const uint8_t *)b + qs_off); }
static inline __m256i dec_q5(const void *b, size_t qh_off, size_t qs_off) {
    const uint8_t *p = b;
    return _mm256_or_si256(avx2_nibbles32(p + qs_off), _mm256_and_si256(avx2_bits32(p + qh_off), _mm256_set1_epi8(0x10)));
}

static inline uint16_t u16_at(const void *p, size_t off) { uint16_t h; memcpy(&h, (const char *)p + off, 2); return h; }

/* f16 at byte offset `off` of 8 blocks -> 8 floats */
static inline __m256 f16x8(const char *const b[8], size_t off) {
    __m128i h = _mm_setr_epi16((short)u16_at(b[0], off), (short)u16_at(b[1], off), (short)u16_at(b[2], off),
                               (short)u16_at(b[3], off), (short)u16_at(b[4], off), (short)u16_at(b[5], off),
                               (short)u16_at(b[6], off), (short)u16_at(b[7], off));
    return _mm256_cvtph_ps(h);
}

static inline __m256i bcast32(const int8_t *p) { int32_t v; memcpy(&v, p, 4); return _mm256_set1_epi32(v); }

/* KIND 0: offset OFF (Q4_0/Q5_0, Q8_0 activations); KIND 1: min (Q4_1/Q5_1, Q8_1). */
#define X8_TILE(NAME, WBYTES, ABYTES, DECODE, KIND, OFF, GROUPS_PER_SUM)                        \
    static void NAME(int64_t nblk, const char *const w[8], const char *const x[4], __m256 out[4]) { \
        __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() }; \
        const __m256i ones16 = _mm256_set1_epi16(1);                                           \
        for (int64_t b = 0; b < nblk; b++) {                                                   \
            const char *wb[8];                                                                 \
            __m256i g[8];                                                                      \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                              \
                wb[i] = w[i] + b * WBYTES;                                                     \
                g[i] = DECODE(wb[i]);                                                          \
            }                                                                                  \
            transpose8x8_epi32(g);                                                             \
            const __m256 dw = f16x8(wb, 0);                                                    \
            __m256 mw = _mm256_setzero_ps();                                                   \
            if (KIND == 1) mw = f16x8(wb, 2);                                                  \
            __m256i corr = _mm256_setzero_si256(); /* OFF * block sum of activation j, lanes j, j+4 */ \
            if (KIND == 0) {                                                                   \
                const __m256i ones8 = _mm256_set1_epi8(1);                                     \
                __m128i s4 = avx2_reduce4(                                                     \
                    avx2_dot_u8s8(ones8, _mm256_loadu_si256((const __m256i *)(x[0] + b * ABYTES + 2))), \
                    avx2_dot_u8s8(ones8, _mm256_loadu_si256((const __m256i *)(x[1] + b * ABYTES + 2))), \
                    avx2_dot_u8s8(ones8, _mm256_loadu_si256((const __m256i *)(x[2] + b * ABYTES + 2))), \
                    avx2_dot_u8s8(ones8, _mm256_loadu_si256((const __m256i *)(x[3] + b * ABYTES + 2)))); \
                corr = _mm256_broadcastsi128_si256(_mm_mullo_epi32(s4, _mm_set1_epi32(OFF)));  \
            }                                                                                  \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                              \
                const char *xb = x[j] + b * ABYTES;                                            \
                const int8_t *aq = (const int8_t *)(xb + (KIND == 1 ? 4 : 2));                 \
                __m256i sum = _mm256_setzero_si256();                                          \
                _Pragma("GCC unroll 2") for (int h = 0; h < 8; h += GROUPS_PER_SUM) {          \
                    __m256i p16 = _mm256_maddubs_epi16(g[h], bcast32(aq + 4 * h));             \
                    _Pragma("GCC unroll 8") for (int k = 1; k < GROUPS_PER_SUM; k++)           \
                        p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(g[h + k], bcast32(aq + 4 * (h + k)))); \
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p16, ones16));               \
                }                                                                              \
                if (KIND == 0) sum = _mm256_sub_epi32(sum, _mm256_permutevar8x32_epi32(corr, _mm256_set1_epi32(j))); \
                const float da = avx2_f16(u16_at(xb, 0));                                      \
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(da)), acc[j]); \
                if (KIND == 1) acc[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(avx2_f16(u16_at(xb, 2))), acc[j]); \
            }                                                                                  \
        }                                                                                      \
        for (int j = 0; j < 4; j++) out[j] = acc[j];                                           \
    }

static inline __m256i dec_q4_0(const void *b) { return dec_q4(b, 2); }
static inline __m256i dec_q4_1(const void *b) { return dec_q4(b, 4); }
static inline __m256i dec_q5_0(const void *b) { return dec_q5(b, 2, 6); }
static inline __m256i dec_q5_1(const void *b) { return dec_q5(b, 4, 8); }

X8_TILE(x8_q4_0, 18, 34, dec_q4_0, 0, 8, 8)
X8_TILE(x8_q4_1, 20, 36, dec_q4_1, 1, 0, 8)
X8_TILE(x8_q5_0, 22, 34, dec_q5_0, 0, 16, 4)
X8_TILE(x8_q5_1, 24, 36, dec_q5_1, 1, 0, 4)

typedef void (*x8_tile_fn)(int64_t nblk, const char *const w[8], const char *const x[4], __m256 out[4]);

static void gemm_x8(x8_tile_fn tile, int64_t block, int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,
                    int64_t nb, const void *x, size_t xs, float *y, int64_t ys) {
    const int64_t nblk = n / block;
    __m256 out[4];
    float tmp[8];
    for (int64_t c0 = 0; c0 < nb; c0 += 32) {          /* 32 activation rows stay in L2 */
        const int64_t c1 = TH_MIN(nb, c0 + 32);
        for (int64_t r = r0; r < r1; r += 8) {
            const int rm = (int)TH_MIN(8, r1 - r);
            const char *wp[8];
            for (int i = 0; i < 8; i++) wp[i] = (const char *)w + (size_t)(r + TH_MIN(i, rm - 1)) * ws;
            for (int64_t c = c0; c < c1; c += 4) {
                const int cn = (int)TH_MIN(4, c1 - c);
                const char *xp[4];
                for (int j = 0; j < 4; j++) xp[j] = (const char *)x + (size_t)(c + TH_MIN(j, cn - 1)) * xs;
                tile(nblk, wp, xp, out);
                for (int j = 0; j < cn; j++) {
                    float *dst = y + (c + j) * ys + r;
                    if (rm == 8) { _mm256_storeu_ps(dst, out[j]); continue; }
                    _mm256_storeu_ps(tmp, out[j]);
                    for (int i = 0; i < rm; i++) dst[i] = tmp[i];
                }
            }
        }
    }
}

#define X8_BATCH(NAME, TILE)                                                                    \
    void NAME(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x, \
              size_t xs, float *y, int64_t ys) {                                                    \
        gemm_x8(TILE, TH_QK, n, r0, r1, w, ws, nb, x, xs, y, ys);                                   \
    }
X8_BATCH(th_avx2_batch_q4_0, x8_q4_0)
X8_BATCH(th_avx2_batch_q4_1, x8_q4_1)
X8_BATCH(th_avx2_batch_q5_0, x8_q5_0)
X8_BATCH(th_avx2_batch_q5_1, x8_q5_1)

/* ---- Q4_K, 8 rows x 4 activation rows. Per super-block the 8 rows' sub-block scales
 * are transposed like the codes (dword c of row r = its scale of chunk c, twice), so
 * vpmaddwd applies each row's own scale; the mins are transposed to dword k = (min 2k,
 * min 2k+1) per row and multiplied with the activation's 32-element sums. */

static inline void q4k_mins_transposed(const __m128i mn[8], __m256i m[4]) {
    __m256i v0 = _mm256_set_m128i(mn[4], mn[0]), v1 = _mm256_set_m128i(mn[5], mn[1]);
    __m256i v2 = _mm256_set_m128i(mn[6], mn[2]), v3 = _mm256_set_m128i(mn[7], mn[3]);
    __m256i t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1);
    __m256i t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3);
    m[0] = _mm256_unpacklo_epi64(t0, t2); /* lanes: rows 0..3 | rows 4..7 */
    m[1] = _mm256_unpackhi_epi64(t0, t2);
    m[2] = _mm256_unpacklo_epi64(t1, t3);
    m[3] = _mm256_unpackhi_epi64(t1, t3);
}

static void x8_q4_K(int64_t nsb, const char *const w[8], const char *const x[4], __m256 out[4]) {
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const th_block_q8_K *a[4];
    for (int j = 0; j < 4; j++) a[j] = (const th_block_q8_K *)x[j];
    for (int64_t i = 0; i < nsb; i++) {
        const char *wb[8];
        __m256i sc[8], mins[4];
        __m128i mn[8];
        for (int r = 0; r < 8; r++) {
            wb[r] = w[r] + i * (int64_t)sizeof(th_block_q4_K);
            avx2_k4_scales(((const th_block_q4_K *)wb[r])->scales, &sc[r], &mn[r]);
        }
        transpose8x8_epi32(sc);
        q4k_mins_transposed(mn, mins);
        __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
        for (int c = 0; c < 8; c++) {
            __m256i g[8];
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(((const th_block_q4_K *)wb[r])->qs + 32 * (c / 2)));
                g[r] = _mm256_and_si256(c & 1 ? _mm256_srli_epi16(q, 4) : q, low4);
            }
            transpose8x8_epi32(g);
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                const int8_t *aq = a[j][i].qs + 32 * c;
                __m256i p16 = _mm256_maddubs_epi16(g[0], bcast32(aq));
                _Pragma("GCC unroll 8") for (int k = 1; k < 8; k++)
                    p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(g[k], bcast32(aq + 4 * k)));
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p16, sc[c]));
            }
        }
        const __m256 d = f16x8(wb, 0), dmin = f16x8(wb, 2);
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            const int16_t *bs = a[j][i].bsums;
            /* the 8 sums of 32 activations, as i16; dword k = (sum 2k, sum 2k+1) */
            const __m256i pairs = _mm256_castsi128_si256(_mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                                                        _mm_loadu_si128((const __m128i *)(bs + 8))));
            __m256i ms = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
                ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mins[k], _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(k))));
            const __m256 da = _mm256_set1_ps(a[j][i].d);
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(ms), acc[j]);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = acc[j];
}

void th_avx2_batch_q4_K(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, int64_t nb, const void *x,
                        size_t xs, float *y, int64_t ys) {
    gemm_x8(x8_q4_K, TH_QK_K, n, r0, r1, w, ws, nb, x, xs, y, ys);
}
