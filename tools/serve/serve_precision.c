/* serve_precision.c — `serve --precision-file FILE --source SOURCE.gguf`: the live
 * precision handle of the server (th_precision_live), the runtime hook that lets it
 * swap weights between two steps, GET /precision (the assignment now, as a config,
 * with its bytes, hash and swap count as JSON) and its lines of /metrics. */
#include "serve.h"
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static th_precision_live *g_live;

th_status serve_precision_start(th_model *m, const char *file, const char *source, int threads) {
    if (!file) return TH_OK;
    return th_precision_live_new(m, file, source, threads, &g_live);
}

void serve_precision_hook(th_runtime_params *rp) {
    if (!g_live) return;
    rp->between_steps = th_precision_live_between_steps;
    rp->between_user = g_live;
}

void serve_precision_free(void) {
    th_precision_live_free(g_live);
    g_live = NULL;
}

char *serve_precision_json(int *http) {
    char *text = NULL;
    uint64_t bytes = 0, hash = 0, swaps = 0;
    if (!g_live) {
        *http = 404;
        return strdup("{\"error\":{\"message\":\"no live precision (start with --precision-file FILE --source SOURCE.gguf)\"}}");
    }
    if (th_precision_live_info(g_live, &text, &bytes, &hash, &swaps)) { *http = 500; return strdup("{\"error\":{\"message\":\"out of memory\"}}"); }
    cJSON *o = cJSON_CreateObject();
    char hx[24];
    snprintf(hx, sizeof hx, "%016" PRIx64, hash);
    cJSON_AddStringToObject(o, "assignment", text);
    cJSON_AddNumberToObject(o, "bytes", (double)bytes);
    cJSON_AddStringToObject(o, "hash", hx);
    cJSON_AddNumberToObject(o, "swaps", (double)swaps);
    char *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    free(text);
    *http = 200;
    return out;
}

char *serve_precision_metrics(char *body) {
    if (!g_live || !body) return body;
    uint64_t bytes = 0, hash = 0, swaps = 0;
    th_precision_live_info(g_live, NULL, &bytes, &hash, &swaps);
    char add[600];
    int k = snprintf(add, sizeof add,
                     "# HELP theseus_precision_bytes Bytes of the weights under the current precision assignment.\n"
                     "# TYPE theseus_precision_bytes gauge\ntheseus_precision_bytes %" PRIu64 "\n"
                     "# HELP theseus_precision_swaps_total Live precision changes swapped in.\n"
                     "# TYPE theseus_precision_swaps_total counter\ntheseus_precision_swaps_total %" PRIu64 "\n"
                     "# HELP theseus_precision_info The current assignment's hash (FNV-1a of its config text).\n"
                     "# TYPE theseus_precision_info gauge\ntheseus_precision_info{hash=\"%016" PRIx64 "\"} 1\n",
                     bytes, swaps, hash);
    size_t n = strlen(body);
    char *nb = realloc(body, n + (size_t)k + 1);
    if (!nb) return body;
    memcpy(nb + n, add, (size_t)k + 1);
    return nb;
}
