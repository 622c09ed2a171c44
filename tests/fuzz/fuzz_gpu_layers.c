/* fuzz_gpu_layers.c — th_parse_gpu_layers (src/place.c: th_context_params.gpu_layers,
 * --gpu-layers). Input: one byte of layer count (1..256), then the spec text. A parsed
 * spec gives every layer device 0 or 1; a plain count N puts exactly the last
 * min(N, n_layer) layers on the GPU; a range spec puts every layer named ":gpu" there
 * and every layer not named on the CPU; a refusal sets a message naming gpu_layers. */
#include "place.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    int32_t n_layer = (int32_t)data[0] + 1;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    int8_t dev[256];
    memset(dev, 7, sizeof dev);
    th_status s = th_parse_gpu_layers(text, n_layer, dev);
    if (s == TH_OK) {
        int32_t on = 0;
        for (int32_t i = 0; i < n_layer; i++) {
            if (dev[i] != 0 && dev[i] != 1) abort();
            on += dev[i];
        }
        if (text[0] && strspn(text, "0123456789") == strlen(text)) {
            long n = strtol(text, NULL, 10);
            int32_t want = n < n_layer ? (int32_t)n : n_layer;
            if (on != want) abort();
            for (int32_t i = 0; i < n_layer; i++)
                if (dev[i] != (i >= n_layer - want)) abort();
        } else {
            for (const char *p = text; *p;) {   /* "A:gpu" / "A-B:gpu": A is on the GPU */
                if (*p < '0' || *p > '9') { p++; continue; }
                long a = strtol(p, (char **)&p, 10), b = a;
                if (*p == '-') b = strtol(p + 1, (char **)&p, 10);
                if (a < 0 || b >= n_layer || a > b) abort();
                if (!strncmp(p, ":gpu", 4) && dev[a] != 1) abort();
                if (!strncmp(p, ":cpu", 4) && dev[a] != 0) abort();
            }
        }
    } else if (!strstr(th_last_error(), "gpu_layers")) {
        abort();
    }
    free(text);
    return 0;
}
