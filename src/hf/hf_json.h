/* hf_json.h — reading integers out of cJSON numbers without undefined behaviour:
 * cJSON keeps every number as a double, and casting one outside int64_t's range
 * (1e300, inf, nan from a hostile config.json) to an integer is undefined. */
#ifndef TH_HF_JSON_H
#define TH_HF_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* j's value as an integer when j is a number within ±2^53 (exact in a double),
 * truncated toward zero; `fallback` otherwise (not a number, too large, nan). */
static inline int64_t hf_json_i64(const cJSON *j, int64_t fallback) {
    if (!cJSON_IsNumber(j)) return fallback;
    const double v = j->valuedouble, lim = 9007199254740992.0;
    return v >= -lim && v <= lim ? (int64_t)v : fallback;
}

#endif
