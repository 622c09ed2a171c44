/* fuzz_layers.c — th_parse_layer_list (src/context.c: th_context_params.layers, the
 * layer-skip draft of speculative decoding). Input: one byte of layer count (1..256),
 * then the list text. A parsed list selects at least one layer, all inside the
 * count, and every digit run of the text names a selected layer or a range end;
 * a refusal sets a message naming the layer list. */
#include "context.h"
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
    bool run[256];
    th_status s = th_parse_layer_list(text, n_layer, run);
    if (s == TH_OK) {
        int on = 0;
        for (int32_t i = 0; i < n_layer; i++) on += run[i];
        if (on < 1) abort();
        for (const char *p = text; *p;) {   /* single indices (not range interiors) are selected */
            if (*p < '0' || *p > '9') { p++; continue; }
            long v = strtol(p, (char **)&p, 10);
            if (v < 0 || v >= n_layer || !run[v]) abort();
        }
    } else if (!strstr(th_last_error(), "layer list")) {
        abort();
    }
    free(text);
    return 0;
}
