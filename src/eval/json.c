/* json.c — an evaluation result as one JSON object (cJSON): the run's shape, the
 * final and per-chunk perplexities and, with a base file, every KL-divergence
 * figure under "kld" (fractions, not percent; names as in th_kld_stats). */
#include "eval/eval.h"
#include "core/core.h"
#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void add_kld(cJSON *o, const th_kld_stats *s) {
    struct { const char *k; double v; } f[] = {
        { "count", (double)s->count },
        { "ppl", s->ppl }, { "ppl_unc", s->ppl_unc },
        { "ppl_base", s->ppl_base }, { "ppl_base_unc", s->ppl_base_unc },
        { "cor_ln_ppl", s->cor_ln_ppl },
        { "ln_ppl_ratio", s->ln_ppl_ratio }, { "ln_ppl_ratio_unc", s->ln_ppl_ratio_unc },
        { "ppl_ratio", s->ppl_ratio }, { "ppl_ratio_unc", s->ppl_ratio_unc },
        { "ppl_diff", s->ppl_diff }, { "ppl_diff_unc", s->ppl_diff_unc },
        { "kld", s->kld }, { "kld_unc", s->kld_unc },
        { "kld_max", s->kld_max }, { "kld_p99_9", s->kld_p999 }, { "kld_p99", s->kld_p99 },
        { "kld_p95", s->kld_p95 }, { "kld_p90", s->kld_p90 }, { "kld_median", s->kld_median },
        { "kld_p10", s->kld_p10 }, { "kld_p5", s->kld_p5 }, { "kld_p1", s->kld_p1 },
        { "kld_p0_1", s->kld_p01 }, { "kld_min", s->kld_min },
        { "dp", s->dp }, { "dp_unc", s->dp_unc },
        { "dp_max", s->dp_max }, { "dp_p99_9", s->dp_p999 }, { "dp_p99", s->dp_p99 }, { "dp_p95", s->dp_p95 },
        { "dp_p90", s->dp_p90 }, { "dp_p75", s->dp_p75 }, { "dp_median", s->dp_median }, { "dp_p25", s->dp_p25 },
        { "dp_p10", s->dp_p10 }, { "dp_p5", s->dp_p5 }, { "dp_p1", s->dp_p1 }, { "dp_p0_1", s->dp_p01 },
        { "dp_min", s->dp_min },
        { "dp_rms", s->dp_rms }, { "dp_rms_unc", s->dp_rms_unc },
        { "same_top", s->same_top }, { "same_top_unc", s->same_top_unc },
        { "cor_p", s->cor_p },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cJSON_AddNumberToObject(o, f[i].k, f[i].v);
}

/* "router": {"k", "n_expert", "layers": [{"layer", "positions", "flips", "flip_rate",
 * "gap_min", "gap_median", "gap_max", "flip_list": [{"chunk", "pos", "gap"}]}]} */
static void add_router(cJSON *o, const th_eval_result *r) {
    cJSON *ro = cJSON_AddObjectToObject(o, "router");
    if (!ro) return;
    cJSON_AddNumberToObject(ro, "k", r->router_k);
    cJSON_AddNumberToObject(ro, "n_expert", r->router_n_expert);
    cJSON *ls = cJSON_AddArrayToObject(ro, "layers");
    for (int32_t i = 0; ls && i < r->n_router_layers; i++) {
        const th_router_layer *L = &r->router[i];
        cJSON *l = cJSON_CreateObject();
        if (!l) return;
        cJSON_AddItemToArray(ls, l);
        cJSON_AddNumberToObject(l, "layer", L->layer);
        cJSON_AddNumberToObject(l, "positions", (double)L->n_positions);
        cJSON_AddNumberToObject(l, "flips", (double)L->n_flips);
        cJSON_AddNumberToObject(l, "flip_rate", L->n_positions ? (double)L->n_flips / (double)L->n_positions : 0.0);
        cJSON_AddNumberToObject(l, "gap_min", L->gap_min);
        cJSON_AddNumberToObject(l, "gap_median", L->gap_median);
        cJSON_AddNumberToObject(l, "gap_max", L->gap_max);
        cJSON *fl = cJSON_AddArrayToObject(l, "flip_list");
        for (int64_t j = 0; fl && j < L->n_flips; j++) {
            cJSON *f = cJSON_CreateObject();
            if (!f) return;
            cJSON_AddItemToArray(fl, f);
            cJSON_AddNumberToObject(f, "chunk", L->flips[j].chunk);
            cJSON_AddNumberToObject(f, "pos", L->flips[j].pos);
            cJSON_AddNumberToObject(f, "gap", L->flips[j].gap);
        }
    }
}

th_status th_eval_json(const th_eval_result *r, char **out) {
    if (!r || !out) return th_set_error(TH_ERR_ARG, "th_eval_json: no result or output");
    *out = NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *run = o ? cJSON_AddObjectToObject(o, "run") : NULL;
    if (!run) { cJSON_Delete(o); return th_set_error(TH_ERR_NOMEM, "th_eval_json: out of memory"); }
    cJSON_AddStringToObject(run, "model", r->model_desc);
    cJSON_AddNumberToObject(run, "n_vocab", r->n_vocab);
    cJSON_AddNumberToObject(run, "n_params", (double)r->n_params);
    cJSON_AddNumberToObject(run, "model_bytes", (double)r->model_bytes);
    if (r->n_params) cJSON_AddNumberToObject(run, "bpw", 8.0 * (double)r->model_bytes / (double)r->n_params);
    cJSON_AddNumberToObject(run, "n_ctx", r->n_ctx);
    cJSON_AddNumberToObject(run, "n_batch", r->n_batch);
    cJSON_AddNumberToObject(run, "n_seq", r->n_seq);
    cJSON_AddNumberToObject(run, "n_chunks", r->n_chunks);
    cJSON_AddNumberToObject(run, "n_tokens", (double)r->n_tokens);
    cJSON_AddNumberToObject(run, "count", (double)r->count);
    cJSON_AddNumberToObject(run, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "ppl", r->ppl);
    cJSON_AddNumberToObject(o, "ppl_unc", r->ppl_unc);
    cJSON *run_ppl = cJSON_AddArrayToObject(o, "running_ppl");
    cJSON *chunk_ppl = cJSON_AddArrayToObject(o, "chunk_ppl");
    for (int32_t i = 0; run_ppl && chunk_ppl && i < r->n_chunks; i++) {
        cJSON_AddItemToArray(run_ppl, cJSON_CreateNumber(r->running_ppl[i]));
        cJSON_AddItemToArray(chunk_ppl, cJSON_CreateNumber(r->chunk_ppl[i]));
    }
    if (r->has_kld) {
        cJSON *k = cJSON_AddObjectToObject(o, "kld");
        if (k) add_kld(k, &r->kld);
    }
    if (r->router) add_router(o, r);
    *out = cJSON_Print(o);
    cJSON_Delete(o);
    return *out ? TH_OK : th_set_error(TH_ERR_NOMEM, "th_eval_json: out of memory");
}

th_status th_eval_write_json(const th_eval_result *r, const char *path) {
    char *text;
    th_status s = th_eval_json(r, &text);
    if (s) return s;
    FILE *f = fopen(path, "w");
    if (!f) { s = th_set_error(TH_ERR_IO, "%s: cannot write: %s", path, strerror(errno)); free(text); return s; }
    bool ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = fclose(f) == 0 && ok;
    free(text);
    return ok ? TH_OK : th_set_error(TH_ERR_IO, "%s: write failed", path);
}
