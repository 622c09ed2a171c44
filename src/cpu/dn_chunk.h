/* dn_chunk.h — the chunked (parallel) form of the gated delta rule for one head
 * over a chunk of L <= TH_DN_CHUNK tokens, as one static function that each kernel
 * level includes and compiles with its own flags (cpu/ops.c: the reference,
 * cpu/avx2/ops.c: the same source under AVX2/FMA, which the compiler vectorises;
 * the products are written as 4 × 16 register tiles for that).
 *
 * The recurrence (th_op_dn_step), per token t with decay g_t = exp(lg_t):
 *   n_t = β_t (v_t − g_t S_{t−1}ᵀ k_t),  S_t = g_t S_{t−1} + k_t n_tᵀ,  o_t = scale · S_tᵀ q_t.
 * Unrolled over a chunk from its start state S0, with γ_t = Π_{s<=t} g_s (from the
 * cumulative log decay c_t, in double) and r(t, i) = γ_t / γ_i = exp(c_t − c_i):
 *   S_t = γ_t S0 + Σ_{i<=t} r(t, i) k_i n_iᵀ
 *   n_t = β_t (v_t − γ_t S0ᵀ k_t) − Σ_{i<t} β_t r(t, i) (k_t·k_i) n_i   (forward substitution:
 *         the WY / UT form's lower-triangular solve, done row by row)
 *   o_t = scale · (γ_t S0ᵀ q_t + Σ_{i<=t} r(t, i) (q_t·k_i) n_i)
 *   S_L = γ_L S0 + Σ_i r(L, i) k_i n_iᵀ, clamped to ±1e6 (the recurrence clamps after
 *         every token; the two agree while the state stays inside ±1e6).
 * Products: K·S0, Q·S0 (L × dk × dk), K·Kᵀ, Q·Kᵀ (L × L × dk), P·N (L × L × dk),
 * Kᵀ·N (dk × L × dk) — matrix-matrix, where the recurrence is L matrix-vector steps.
 * q, k, v: row t at t·xs (dk floats each); beta, lg: token t at t·gs; out: row t at
 * t·os; work: th_dn_chunk_work(dk, L) floats. A level with its own product kernel
 * defines DNC_GEMM (dnc_gemm's arguments) before including this file. */
#ifndef TH_DN_CHUNK_H
#define TH_DN_CHUNK_H

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { TH_DN_CHUNK = 64 };

static inline int64_t th_dn_chunk_work(int32_t dk, int32_t L) { return 2 * (int64_t)dk * L + 2 * (int64_t)L * L; }

/* C (+)= A · B: A m × kk (row stride lda), B kk × n (ldb), C m × n (ldc). 4 × 16 tiles
 * of C held in locals across the kk loop; scalar tails. */
static inline void dnc_gemm(int32_t m, int32_t n, int32_t kk, const float *A, int64_t lda, const float *B, int64_t ldb,
                            float *C, int64_t ldc, int acc) {
    int32_t m4 = m & ~3, n16 = n & ~15;
    for (int32_t i = 0; i < m4; i += 4)
        for (int32_t j = 0; j < n16; j += 16) {
            float t[4][16];
            for (int r = 0; r < 4; r++)
                for (int x = 0; x < 16; x++) t[r][x] = acc ? C[(i + r) * ldc + j + x] : 0.0f;
            for (int32_t p = 0; p < kk; p++) {
                const float *b = B + p * ldb + j;
                float a0 = A[i * lda + p], a1 = A[(i + 1) * lda + p], a2 = A[(i + 2) * lda + p], a3 = A[(i + 3) * lda + p];
                for (int x = 0; x < 16; x++) {
                    t[0][x] += a0 * b[x];
                    t[1][x] += a1 * b[x];
                    t[2][x] += a2 * b[x];
                    t[3][x] += a3 * b[x];
                }
            }
            for (int r = 0; r < 4; r++)
                for (int x = 0; x < 16; x++) C[(i + r) * ldc + j + x] = t[r][x];
        }
    for (int32_t i = 0; i < m; i++)
        for (int32_t j = i < m4 ? n16 : 0; j < n; j++) {
            float s = acc ? C[i * ldc + j] : 0.0f;
            for (int32_t p = 0; p < kk; p++) s += A[i * lda + p] * B[p * ldb + j];
            C[i * ldc + j] = s;
        }
}

/* exp(x) as a float, 0 below e^-80: a decay product that small is flushed rather than
 * carried as a denormal (which costs the products a hundred cycles an operation). */
static inline float dnc_exp(double x) { return x < -80.0 ? 0.0f : expf((float)x); }

#ifndef DNC_GEMM
#define DNC_GEMM dnc_gemm
#endif

static inline void th_dn_chunk_body(int32_t dk, int32_t L, float *S, const float *q, const float *k, const float *v,
                                    int64_t xs, const float *beta, const float *lg, int64_t gs, float scale, float *out,
                                    int64_t os, float *work) {
    float *kt = work;                         /* dk × L: kᵀ, later scaled by r(L, i) */
    float *nn = kt + (int64_t)dk * L;         /* L × dk: S0ᵀk_t, then n_t */
    float *akk = nn + (int64_t)L * dk;        /* L × L: k_t·k_i */
    float *pqk = akk + (int64_t)L * L;        /* L × L: q_t·k_i */
    double cum[TH_DN_CHUNK];
    double c = 0.0;
    if (L < 1 || L > TH_DN_CHUNK) return;
    for (int32_t t = 0; t < L; t++) cum[t] = c += lg[t * gs];
    for (int32_t t = 0; t < L; t++)
        for (int32_t a = 0; a < dk; a++) kt[(int64_t)a * L + t] = k[t * xs + a];
    DNC_GEMM(L, dk, dk, k, xs, S, dk, nn, dk, 0);       /* S0ᵀ k_t */
    DNC_GEMM(L, dk, dk, q, xs, S, dk, out, os, 0);      /* S0ᵀ q_t */
    DNC_GEMM(L, L, dk, k, xs, kt, L, akk, L, 0);
    DNC_GEMM(L, L, dk, q, xs, kt, L, pqk, L, 0);
    for (int32_t t = 0; t < L; t++) {
        float b = beta[t * gs], gam = dnc_exp(cum[t]);
        float *n = nn + (int64_t)t * dk;
        const float *vt = v + t * xs;
        for (int32_t j = 0; j < dk; j++) n[j] = b * (vt[j] - gam * n[j]);
        for (int32_t i = 0; i < t; i++) {
            float w = b * dnc_exp(cum[t] - cum[i]) * akk[(int64_t)t * L + i];
            const float *ni = nn + (int64_t)i * dk;
            for (int32_t j = 0; j < dk; j++) n[j] -= w * ni[j];
        }
        float *o = out + t * os;
        for (int32_t j = 0; j < dk; j++) o[j] *= gam;
        for (int32_t i = 0; i < L; i++)
            pqk[(int64_t)t * L + i] = i <= t ? pqk[(int64_t)t * L + i] * dnc_exp(cum[t] - cum[i]) : 0.0f;
    }
    DNC_GEMM(L, dk, L, pqk, L, nn, dk, out, os, 1);
    for (int32_t t = 0; t < L; t++)
        for (int32_t j = 0; j < dk; j++) out[t * os + j] *= scale;
    float gl = dnc_exp(cum[L - 1]);
    for (int32_t i = 0; i < L; i++) {
        float r = dnc_exp(cum[L - 1] - cum[i]);
        for (int32_t a = 0; a < dk; a++) kt[(int64_t)a * L + i] *= r;
    }
    for (int64_t x = 0; x < (int64_t)dk * dk; x++) S[x] *= gl;
    DNC_GEMM(dk, dk, L, kt, L, nn, dk, S, dk, 1);
    for (int64_t x = 0; x < (int64_t)dk * dk; x++) S[x] = S[x] < -1e6f ? -1e6f : S[x] > 1e6f ? 1e6f : S[x];
}

#endif
