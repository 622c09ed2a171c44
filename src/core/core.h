/* core.h — internal basics shared by every part of the library:
 * error reporting (th_set_error), checked arithmetic for untrusted sizes,
 * half/bfloat16 conversion, and small helpers. */
#ifndef TH_CORE_H
#define TH_CORE_H

#include "theseus.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* th_set_error() / th_clear_error() (declared in theseus.h) record the
 * failure message that th_last_error() returns. */

/* Checked arithmetic: return false on overflow. */
static inline bool th_mul_u64(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool th_add_u64(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_add_overflow(a, b, r); }

#define TH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TH_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- fp16 / bf16 <-> fp32 (IEEE-exact, round-to-nearest-even) ---- */

static inline float th_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t th_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float th_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return th_bits_f32(sign);
        float f = (float)man * (1.0f / 16777216.0f); /* subnormal: man * 2^-24 */
        return sign ? -f : f;
    }
    if (exp == 31) return th_bits_f32(sign | 0x7f800000u | (man << 13));
    return th_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t th_f32_to_f16(float f) {
    uint32_t x = th_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);      /* rounds to inf */
    if (ax < 0x38800000u) {                                        /* subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign;               /* < 2^-25: 0 */
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;                                  /* 14..24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

static inline float th_bf16_to_f32(uint16_t h) { return th_bits_f32((uint32_t)h << 16); }

static inline uint16_t th_f32_to_bf16(float f) {
    uint32_t x = th_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64); /* quiet NaN */
    return (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

#endif
