/* ref_dispatch.c — the type-generic reference entry points (th_ref_dequantize,
 * th_ref_quantize, th_ref_can_quantize, th_ref_vec_dot, th_quantize_weights): each
 * calls the kernel that the type table (types.c) names for the type. A type without
 * that kernel does not crash: decode writes NaNs, encode writes nothing (false from
 * th_quantize_weights), the dot product returns NaN (callers check
 * th_type_info_get(type)->supported first). */
#include "quant/ref_encode.h"
#include <assert.h>
#include <math.h>

/* n must be a non-negative multiple of the type's block (callers validate shapes). */
static bool whole_blocks(const th_type_info *ti, int64_t n) { return n >= 0 && n % ti->block == 0; }

static const th_type_info *info(uint32_t type) {
    static const th_type_info none = { .block = 1 };
    const th_type_info *ti = th_type_info_get(type);
    return ti ? ti : &none;
}

void th_ref_dequantize(uint32_t type, const void *src, float *dst, int64_t n) {
    const th_type_info *ti = info(type);
    assert(!ti->dequantize || whole_blocks(ti, n));
    if (ti->dequantize && whole_blocks(ti, n)) { ti->dequantize(src, dst, n); return; }
    for (int64_t i = 0; i < n; i++) dst[i] = NAN;
}

void th_ref_quantize(uint32_t type, const float *src, void *dst, int64_t n) {
    const th_type_info *ti = info(type);
    assert(!ti->quantize || whole_blocks(ti, n));
    if (ti->quantize && whole_blocks(ti, n)) ti->quantize(src, dst, n);
}

bool th_ref_can_quantize(uint32_t type) { return info(type)->quantize != NULL; }

float th_ref_vec_dot(uint32_t type, int64_t n, const void *w, const void *act) {
    const th_type_info *ti = info(type);
    assert(!ti->vec_dot || whole_blocks(ti, n));
    float s = NAN;
    if (ti->vec_dot && whole_blocks(ti, n)) ti->vec_dot(n, &s, w, act);
    return s;
}

bool th_can_quantize_weights(uint32_t type) { return info(type)->quantize_weights != NULL; }

bool th_quantize_weights(uint32_t type, const float *src, void *dst, int64_t n) {
    const th_type_info *ti = info(type);
    if (!ti->quantize_weights) return false;
    assert(whole_blocks(ti, n));
    if (whole_blocks(ti, n)) ti->quantize_weights(src, dst, n);
    return true;
}
