/* router.c — mixture-of-experts router agreement (th_eval_params.router_base_out /
 * router_base). On the reference run the context's observer (th_observer.routing)
 * hands over, for every MoE layer and every scored position, the k experts chosen
 * and the n_expert selection scores; we keep the ids and the k+1 best scores in our
 * own router file. On the candidate run the same positions are compared with the
 * file: per layer, how many positions chose a different expert set, and for each of
 * them the reference's gap between its k-th and (k+1)-th score (a near-tie flipped).
 *
 * Router file (little-endian; our extension, llama.cpp has none):
 *   u32 magic "THRT" | u32 version 1 | i32 n_ctx | i32 n_chunk | i32 n_scored |
 *   i32 k | i32 n_expert | i32 n_moe | i32 layer[n_moe] |
 *   n_chunk * n_scored * n_moe records of { i32 ids[k] (best first), f32 score[k+1]
 *   (the k+1 best selection scores, descending; score[k] = -inf when k == n_expert) }
 * in chunk, scored position, layer order; scored position j is chunk position
 * n_ctx/2 + j. The reader (a parser of untrusted bytes) checks every count, the
 * exact size and every expert id. */
#include "eval/eval.h"
#include "core/core.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { RT_MAGIC = 0x54524854, RT_VERSION = 1, RT_HEADER = 8 * 4, RT_MAX_K = 64, RT_MAX_EXPERT = 1 << 16 };

struct th_router_file {
    char *name;
    uint8_t *data;            /* the whole file (owned) */
    size_t size;
    int32_t n_ctx, n_chunk, n_scored, k, n_expert, n_moe;
    int32_t *layers;          /* [n_moe] */
    size_t rec_bytes;         /* one record */
    size_t recs_offset;
    bool owned;               /* data is freed on close (th_router_file_open) */
};

static int32_t rd_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

static size_t rec_bytes(int32_t k) { return (size_t)k * 4 + ((size_t)k + 1) * 4; }

th_status th_router_file_parse(const uint8_t *data, size_t size, const char *name, th_router_file **out) {
    *out = NULL;
    const char *nm = name ? name : "router file";
    if (size < RT_HEADER || rd_i32(data) != RT_MAGIC)
        return th_set_error(TH_ERR_FORMAT, "%s: not a theseus router file (no \"THRT\" header%s)", nm,
                            size < RT_HEADER ? ", file too short" : "");
    if (rd_i32(data + 4) != RT_VERSION)
        return th_set_error(TH_ERR_FORMAT, "%s: router file version %d, this build reads %d", nm, rd_i32(data + 4), RT_VERSION);
    int32_t n_ctx = rd_i32(data + 8), n_chunk = rd_i32(data + 12), n_scored = rd_i32(data + 16);
    int32_t k = rd_i32(data + 20), n_expert = rd_i32(data + 24), n_moe = rd_i32(data + 28);
    if (n_ctx < 3 || n_ctx > (1 << 24) || n_scored != n_ctx - 1 - n_ctx / 2)
        return th_set_error(TH_ERR_FORMAT, "%s: n_ctx %d / n_scored %d do not fit (n_scored must be n_ctx-1-n_ctx/2)",
                            nm, n_ctx, n_scored);
    if (n_chunk < 1) return th_set_error(TH_ERR_FORMAT, "%s: n_chunk %d is not positive", nm, n_chunk);
    if (n_expert < 1 || n_expert > RT_MAX_EXPERT || k < 1 || k > RT_MAX_K || k > n_expert)
        return th_set_error(TH_ERR_FORMAT, "%s: %d experts, %d used: outside 1 <= k <= n_expert <= %d, k <= %d", nm,
                            n_expert, k, RT_MAX_EXPERT, RT_MAX_K);
    if (n_moe < 1 || n_moe > 65536) return th_set_error(TH_ERR_FORMAT, "%s: %d MoE layers is outside [1, 65536]", nm, n_moe);
    uint64_t hdr = RT_HEADER + 4 * (uint64_t)n_moe, n_rec, body, total;
    if (!th_mul_u64((uint64_t)n_chunk, (uint64_t)n_scored, &n_rec) || !th_mul_u64(n_rec, (uint64_t)n_moe, &n_rec) ||
        !th_mul_u64(n_rec, rec_bytes(k), &body) || !th_add_u64(hdr, body, &total))
        return th_set_error(TH_ERR_FORMAT, "%s: the header's sizes overflow", nm);
    if (size != total)
        return th_set_error(TH_ERR_FORMAT, "%s: %zu bytes, the header (%d chunks of %d positions, %d layers, k %d) "
                            "implies %llu%s", nm, size, n_chunk, n_scored, n_moe, k, (unsigned long long)total,
                            size < total ? " (truncated)" : "");
    th_router_file *f = calloc(1, sizeof *f);
    if (!f || !(f->layers = malloc((size_t)n_moe * sizeof *f->layers)) || !(f->name = strdup(nm))) {
        if (f) { free(f->layers); free(f); }
        return th_set_error(TH_ERR_NOMEM, "%s: out of memory", nm);
    }
    for (int32_t i = 0; i < n_moe; i++) {
        f->layers[i] = rd_i32(data + RT_HEADER + 4 * (size_t)i);
        if (f->layers[i] < 0 || (i > 0 && f->layers[i] <= f->layers[i - 1])) {
            th_status s = th_set_error(TH_ERR_FORMAT, "%s: layer list entry %d (%d) is not an increasing index", nm, i,
                                       f->layers[i]);
            th_router_file_close(f);
            return s;
        }
    }
    f->data = (uint8_t *)data;
    f->size = size;
    f->n_ctx = n_ctx; f->n_chunk = n_chunk; f->n_scored = n_scored;
    f->k = k; f->n_expert = n_expert; f->n_moe = n_moe;
    f->rec_bytes = rec_bytes(k);
    f->recs_offset = (size_t)hdr;
    *out = f;
    return TH_OK;
}

th_status th_router_file_open(const char *path, th_router_file **out) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return th_set_error(TH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    th_status s = TH_OK;
    for (;;) {
        if (size == cap) {
            size_t nc = cap ? cap * 2 : 1 << 16;
            uint8_t *nd = nc > cap ? realloc(data, nc) : NULL;
            if (!nd) { s = th_set_error(TH_ERR_NOMEM, "%s: out of memory reading it", path); break; }
            data = nd; cap = nc;
        }
        size_t got = fread(data + size, 1, cap - size, fp);
        size += got;
        if (got == 0) {
            if (ferror(fp)) s = th_set_error(TH_ERR_IO, "%s: read error", path);
            break;
        }
    }
    fclose(fp);
    if (!s) s = th_router_file_parse(data, size, path, out);
    if (s) free(data);
    else (*out)->owned = true;
    return s;
}

void th_router_file_close(th_router_file *f) {
    if (!f) return;
    if (f->owned) free(f->data);
    free(f->layers);
    free(f->name);
    free(f);
}

/* Record (chunk, j, layer slot m): ids and scores; false (error set) on a bad id. */
static bool file_record(const th_router_file *f, int32_t chunk, int32_t j, int32_t m, int32_t *ids, float *sc) {
    size_t idx = ((size_t)chunk * (size_t)f->n_scored + (size_t)j) * (size_t)f->n_moe + (size_t)m;
    const uint8_t *p = f->data + f->recs_offset + idx * f->rec_bytes;
    for (int32_t i = 0; i < f->k; i++) {
        ids[i] = rd_i32(p + 4 * (size_t)i);
        if (ids[i] < 0 || ids[i] >= f->n_expert) {
            th_set_error(TH_ERR_FORMAT, "%s: chunk %d, position %d, layer %d: expert id %d is outside [0, %d)", f->name,
                         chunk + 1, f->n_ctx / 2 + j, f->layers[m], ids[i], f->n_expert);
            return false;
        }
    }
    memcpy(sc, p + 4 * (size_t)f->k, ((size_t)f->k + 1) * 4);
    return true;
}

/* Touch every record (the fuzz target's way through the reader). */
th_status th_router_file_check(const th_router_file *f) {
    int32_t ids[RT_MAX_K];
    float sc[RT_MAX_K + 1];
    for (int32_t c = 0; c < f->n_chunk; c++)
        for (int32_t j = 0; j < f->n_scored; j++)
            for (int32_t m = 0; m < f->n_moe; m++)
                if (!file_record(f, c, j, m, ids, sc)) return TH_ERR_FORMAT;
    return TH_OK;
}

/* ------------------------------------------------------------ one run's router work */

struct th_router_run {
    th_context *ctx;
    int32_t n_layer, n_batch, n_ctx, n_chunks, first, n_scored;
    int32_t k, n_expert;          /* from the first routing call (0 before) */
    bool *seen;                   /* [n_layer]: layers that route */
    int32_t *slot;                /* [n_layer]: position of a layer in the MoE list, -1 */
    int32_t n_moe;
    int32_t *ids;                 /* [n_batch][n_layer][k] this pass */
    float *scores;                /* [n_batch][n_layer][k+1] this pass */
    float *tmp;                   /* [n_expert] */
    th_status err;                /* first failure inside a callback */
    /* this pass */
    int32_t n;
    const int8_t *want;
    const int32_t *chunk, *pos;
    /* writing */
    FILE *out;
    char *out_path;
    bool header_done;
    /* comparing */
    th_router_file *base;
    th_router_layer *layers;      /* [n_moe] once known */
};

/* The k+1 best of n scores, descending (ties keep the lower index first). */
static void top_scores(const float *s, int32_t n, int32_t m, float *out, float *tmp) {
    memcpy(tmp, s, (size_t)n * sizeof *tmp);
    for (int32_t j = 0; j < m; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n; e++)
            if (!isnan(tmp[e]) && (best < 0 || tmp[e] > tmp[best])) best = e;
        if (best < 0) { out[j] = -INFINITY; continue; }
        out[j] = tmp[best];
        tmp[best] = NAN;   /* taken */
    }
}

static void on_routing(void *ud, int32_t layer, int32_t token, int32_t k, const int32_t *ids, const float *scores,
                       int32_t n_expert) {
    th_router_run *R = ud;
    if (R->err) return;
    if (layer < 0 || layer >= R->n_layer) {
        R->err = th_set_error(TH_ERR_ARG, "router agreement: routing reported for layer %d of %d", layer, R->n_layer);
        return;
    }
    if (!R->k) {
        if (k < 1 || k > RT_MAX_K || n_expert < k || n_expert > RT_MAX_EXPERT) {
            R->err = th_set_error(TH_ERR_UNSUPPORTED, "router agreement: %d of %d experts a token is outside what the "
                                  "router file holds (k <= %d)", k, n_expert, RT_MAX_K);
            return;
        }
        size_t cells = (size_t)R->n_batch * (size_t)R->n_layer;
        R->ids = malloc(cells * (size_t)k * sizeof *R->ids);
        R->scores = malloc(cells * ((size_t)k + 1) * sizeof *R->scores);
        R->tmp = malloc((size_t)n_expert * sizeof *R->tmp);
        if (!R->ids || !R->scores || !R->tmp) { R->err = th_set_error(TH_ERR_NOMEM, "router agreement: out of memory"); return; }
        R->k = k;
        R->n_expert = n_expert;
    } else if (k != R->k || n_expert != R->n_expert) {
        R->err = th_set_error(TH_ERR_UNSUPPORTED, "router agreement: layer %d routes %d of %d experts, an earlier one %d of %d",
                              layer, k, n_expert, R->k, R->n_expert);
        return;
    }
    R->seen[layer] = true;   /* every routed token, scored or not: the first pass finds the MoE layers */
    if (token < 0 || token >= R->n || !R->want[token]) return;
    size_t cell = (size_t)token * (size_t)R->n_layer + (size_t)layer;
    memcpy(R->ids + cell * (size_t)k, ids, (size_t)k * sizeof *ids);
    top_scores(scores, n_expert, k + 1, R->scores + cell * ((size_t)k + 1), R->tmp);
}

th_status th_router_run_new(th_model *m, th_context *ctx, const char *out_path, const char *base_path,
                            int32_t n_ctx, int32_t n_chunks, int32_t n_batch, th_router_run **out) {
    *out = NULL;
    th_router_run *R = calloc(1, sizeof *R);
    if (!R) return th_set_error(TH_ERR_NOMEM, "router agreement: out of memory");
    R->ctx = ctx;
    R->n_layer = th_model_n_layer(m);
    R->n_batch = n_batch;
    R->n_ctx = n_ctx;
    R->n_chunks = n_chunks;
    R->first = n_ctx / 2;
    R->n_scored = n_ctx - 1 - n_ctx / 2;
    th_status s = TH_OK;
    R->seen = calloc((size_t)TH_MAX(R->n_layer, 1), sizeof *R->seen);
    R->slot = malloc((size_t)TH_MAX(R->n_layer, 1) * sizeof *R->slot);
    if (!R->seen || !R->slot) s = th_set_error(TH_ERR_NOMEM, "router agreement: out of memory");
    if (!s && base_path && !(s = th_router_file_open(base_path, &R->base))) {
        const th_router_file *f = R->base;
        if (f->n_ctx != n_ctx)
            s = th_set_error(TH_ERR_ARG, "%s: the router file was made with chunks of %d tokens, this run uses %d",
                             f->name, f->n_ctx, n_ctx);
        else if (f->n_chunk < n_chunks)
            s = th_set_error(TH_ERR_ARG, "%s: the router file holds %d chunks, this run evaluates %d", f->name,
                             f->n_chunk, n_chunks);
    }
    if (!s && out_path) {
        R->out = fopen(out_path, "wb");
        R->out_path = strdup(out_path);
        if (!R->out || !R->out_path) s = th_set_error(TH_ERR_IO, "%s: cannot write: %s", out_path, strerror(errno));
    }
    if (!s) {
        th_observer o = { .ud = R, .routing = on_routing };
        if (th_context_set_observer(ctx, &o))
            s = th_set_error(TH_ERR_UNSUPPORTED, "router agreement needs routing reports from the context (a CPU "
                             "context; not --gpu): %s", th_last_error());
    }
    if (s) { th_router_run_free(R, false); return s; }
    *out = R;
    return TH_OK;
}

th_status th_router_pass_begin(th_router_run *R, int32_t n, const int8_t *want, const int32_t *chunk,
                               const int32_t *pos) {
    if (n > R->n_batch) return th_set_error(TH_ERR_ARG, "router agreement: a pass of %d rows, at most %d", n, R->n_batch);
    R->n = n;
    R->want = want;
    R->chunk = chunk;
    R->pos = pos;
    return R->err;
}

/* After the first pass: which layers route (the MoE list), checked against the file. */
static th_status layers_known(th_router_run *R) {
    R->n_moe = 0;
    for (int32_t l = 0; l < R->n_layer; l++) R->slot[l] = R->seen[l] ? R->n_moe++ : -1;
    if (!R->n_moe)
        return th_set_error(TH_ERR_UNSUPPORTED, "router agreement: the model has no mixture-of-experts layer "
                            "(no routing was reported)");
    if (R->out) {
        int32_t h[8] = { RT_MAGIC, RT_VERSION, R->n_ctx, R->n_chunks, R->n_scored, R->k, R->n_expert, R->n_moe };
        bool ok = fwrite(h, 4, 8, R->out) == 8;
        for (int32_t l = 0; l < R->n_layer; l++)
            if (R->seen[l]) ok = ok && fwrite(&l, 4, 1, R->out) == 1;
        if (!ok) return th_set_error(TH_ERR_IO, "%s: write failed", R->out_path);
    }
    if (R->base) {
        const th_router_file *f = R->base;
        bool same = f->k == R->k && f->n_expert == R->n_expert && f->n_moe == R->n_moe;
        for (int32_t m = 0, l = 0; same && l < R->n_layer; l++)
            if (R->seen[l]) same = f->layers[m++] == l;
        if (!same)
            return th_set_error(TH_ERR_FORMAT, "%s: the router file is for %d MoE layers choosing %d of %d experts; "
                                "the model has %d such layers choosing %d of %d (another model?)", f->name, f->n_moe,
                                f->k, f->n_expert, R->n_moe, R->k, R->n_expert);
        R->layers = calloc((size_t)R->n_moe, sizeof *R->layers);
        if (!R->layers) return th_set_error(TH_ERR_NOMEM, "router agreement: out of memory");
        for (int32_t m = 0; m < R->n_moe; m++) R->layers[m].layer = f->layers[m];
    }
    R->header_done = true;
    return TH_OK;
}

static bool same_set(const int32_t *a, const int32_t *b, int32_t k) {
    for (int32_t i = 0; i < k; i++) {
        bool found = false;
        for (int32_t j = 0; j < k && !found; j++) found = a[i] == b[j];
        if (!found) return false;
    }
    return true;
}

static th_status push_flip(th_router_layer *L, int32_t chunk, int32_t pos, float gap) {
    if (L->n_flips == L->cap_flips) {
        int64_t nc = L->cap_flips ? 2 * L->cap_flips : 64;
        th_router_flip *nf = realloc(L->flips, (size_t)nc * sizeof *nf);
        if (!nf) return th_set_error(TH_ERR_NOMEM, "router agreement: out of memory for flips");
        L->flips = nf;
        L->cap_flips = nc;
    }
    L->flips[L->n_flips++] = (th_router_flip){ .chunk = chunk, .pos = pos, .gap = gap };
    return TH_OK;
}

static th_status compare_row(th_router_run *R, int32_t row) {
    int32_t k = R->k, ids[RT_MAX_K];
    float sc[RT_MAX_K + 1];
    int32_t c = R->chunk[row], j = R->pos[row] - R->first;
    for (int32_t l = 0; l < R->n_layer; l++) {
        int32_t m = R->slot[l];
        if (m < 0) continue;
        if (!file_record(R->base, c, j, m, ids, sc)) return TH_ERR_FORMAT;
        th_router_layer *L = &R->layers[m];
        L->n_positions++;
        const int32_t *mine = R->ids + ((size_t)row * (size_t)R->n_layer + (size_t)l) * (size_t)k;
        if (!same_set(mine, ids, k)) {
            th_status s = push_flip(L, c, R->pos[row], sc[k - 1] - sc[k]);
            if (s) return s;
        }
    }
    return TH_OK;
}

static th_status write_row(th_router_run *R, int32_t row) {
    int32_t k = R->k;
    bool ok = true;
    for (int32_t l = 0; l < R->n_layer && ok; l++) {
        if (R->slot[l] < 0) continue;
        size_t cell = (size_t)row * (size_t)R->n_layer + (size_t)l;
        ok = fwrite(R->ids + cell * (size_t)k, 4, (size_t)k, R->out) == (size_t)k &&
             fwrite(R->scores + cell * ((size_t)k + 1), 4, (size_t)k + 1, R->out) == (size_t)k + 1;
    }
    return ok ? TH_OK : th_set_error(TH_ERR_IO, "%s: write failed", R->out_path);
}

th_status th_router_pass_end(th_router_run *R) {
    if (R->err) return R->err;
    th_status s;
    if (!R->header_done && (s = layers_known(R))) return s;
    for (int32_t i = 0; i < R->n; i++) {
        if (!R->want[i]) continue;
        if (R->base && (s = compare_row(R, i))) return s;
        if (R->out && (s = write_row(R, i))) return s;
    }
    return TH_OK;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

th_status th_router_run_finish(th_router_run *R, th_eval_result *r) {
    if (R->out) {
        int rc = fclose(R->out);
        R->out = NULL;
        if (rc) return th_set_error(TH_ERR_IO, "%s: write failed", R->out_path);
        free(R->out_path);
        R->out_path = NULL;
    }
    if (!R->base) return TH_OK;
    for (int32_t m = 0; m < R->n_moe; m++) {
        th_router_layer *L = &R->layers[m];
        if (!L->n_flips) continue;
        float *g = malloc((size_t)L->n_flips * sizeof *g);
        if (!g) return th_set_error(TH_ERR_NOMEM, "router agreement: out of memory");
        for (int64_t i = 0; i < L->n_flips; i++) g[i] = L->flips[i].gap;
        qsort(g, (size_t)L->n_flips, sizeof *g, cmp_float);
        L->gap_min = g[0];
        L->gap_max = g[L->n_flips - 1];
        L->gap_median = L->n_flips % 2 ? g[L->n_flips / 2] : 0.5 * ((double)g[L->n_flips / 2 - 1] + g[L->n_flips / 2]);
        free(g);
    }
    r->router = R->layers;
    r->n_router_layers = R->n_moe;
    r->router_k = R->k;
    r->router_n_expert = R->n_expert;
    R->layers = NULL;
    return TH_OK;
}

void th_router_run_free(th_router_run *R, bool ok) {
    if (!R) return;
    th_context_set_observer(R->ctx, NULL);
    if (R->out) {
        fclose(R->out);
        if (!ok && R->out_path) remove(R->out_path);
    }
    if (!ok && !R->out && R->out_path) remove(R->out_path);
    free(R->out_path);
    th_router_file_close(R->base);
    th_router_layers_free(R->layers, R->n_moe);
    free(R->seen);
    free(R->slot);
    free(R->ids);
    free(R->scores);
    free(R->tmp);
    free(R);
}

void th_router_layers_free(th_router_layer *layers, int32_t n) {
    if (!layers) return;
    for (int32_t i = 0; i < n; i++) free(layers[i].flips);
    free(layers);
}
