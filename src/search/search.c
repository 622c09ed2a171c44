/* search.c — th_search_run: the setup (candidate types, units, reference base
 * files cached beside the log), the per-unit sensitivity measurement on the
 * calibration slice, and the uniform reference points; the knapsack and the
 * descent are solve.c's, the evaluation of an assignment eval.c's. */
#include "search/search_int.h"
#include "core/threadpool.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

th_search_params th_search_default_params(void) {
    return (th_search_params){ .max_flips = -1, .per_expert = true, .n_ctx = 512, .n_chunks = -1, .calib_ctx = 256,
                               .calib_chunks = 1, .max_gate_evals = 40 };
}

double th_search_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------------- candidate types */

static const char *const DEFAULT_TYPES = "Q2_K,Q3_K,Q4_0,Q4_K,Q5_0,Q5_K,Q6_K,Q8_0,IQ4_NL,q2,q3,q4,q5,q6,q8";
static const char *const GGML_TYPES = "Q2_K,Q3_K,Q4_0,Q4_1,Q4_K,Q5_0,Q5_1,Q5_K,Q6_K,Q8_0,IQ4_NL";

static th_status parse_types(th_search *S, const char *list) {
    if (!list || !strcmp(list, "default")) list = DEFAULT_TYPES;
    else if (!strcmp(list, "ggml")) list = GGML_TYPES;
    char name[32];
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ", ");
        if (n == 0) { p++; continue; }
        if (n >= sizeof name) return th_set_error(TH_ERR_ARG, "search --types: '%.*s' is not a type", (int)n, p);
        memcpy(name, p, n);
        name[n] = 0;
        uint32_t t;
        if (!th_prec_type_from_name(name, &t))
            return th_set_error(TH_ERR_ARG, "search --types: unknown type '%s' (valid: %s)", name, th_quantize_type_names());
        if (S->n_types == TH_SEARCH_MAX_TYPES)
            return th_set_error(TH_ERR_ARG, "search --types: more than %d types", TH_SEARCH_MAX_TYPES);
        bool dup = false;
        for (int i = 0; i < S->n_types; i++) dup |= S->types[i] == t;
        if (!dup) S->types[S->n_types++] = t;
        p += n;
    }
    if (S->n_types == 0) return th_set_error(TH_ERR_ARG, "search --types: no type given");
    return TH_OK;
}

/* ---------------------------------------------------------------- units */

static int32_t layer_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    return (int32_t)strtol(name + 4, NULL, 10);
}

static uint64_t tensor_elements(const th_qtensor *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims && d < 4; d++) n *= t->ne[d];
    return n;
}

static th_status make_units(th_search *S) {
    size_t cap = 0;
    for (size_t i = 0; i < S->pf.n; i++) {
        const th_qtensor *t = &S->pf.t[i];
        S->total_elements += tensor_elements(t);
        bool q = th_qtensor_quantizable(t);
        size_t k = q ? (S->p->per_expert && S->pf.a.n_expert[i] > 1 ? S->pf.a.n_expert[i] : 1) : 0;
        cap += k;
        if (!q) {
            uint64_t rb = 0;
            if (th_row_bytes(t->type, t->ne[0], &rb)) S->fixed_bytes += rb * (tensor_elements(t) / t->ne[0]);
        }
    }
    if (cap == 0) return th_set_error(TH_ERR_ARG, "search: the model has no tensor that can be quantized");
    if (!(S->u = calloc(cap, sizeof *S->u))) return th_set_error(TH_ERR_NOMEM, "search: out of memory");
    for (size_t i = 0; i < S->pf.n; i++) {
        const th_qtensor *t = &S->pf.t[i];
        if (!th_qtensor_quantizable(t)) continue;
        uint32_t nx = S->p->per_expert && S->pf.a.n_expert[i] > 1 ? S->pf.a.n_expert[i] : 1;
        uint64_t rows = tensor_elements(t) / t->ne[0] / nx;
        for (uint32_t e = 0; e < nx; e++) {
            th_search_unit *u = &S->u[S->n_u++];
            u->tensor = i;
            u->expert = nx > 1 ? (int32_t)e : -1;
            u->layer = layer_of(t->name);
            u->elements = rows * t->ne[0];
            u->src_type = th_prec_type_of(&S->pf.a, i, u->expert < 0 ? 0 : (uint32_t)e);
            uint64_t rb = 0;
            if (!th_row_bytes(u->src_type, t->ne[0], &rb))
                return th_set_error(TH_ERR_FORMAT, "search: tensor %s: its type has no row size", t->name);
            u->src_bytes = rb * rows;
            for (int k = 0; k < S->n_types; k++) {
                if (!th_row_bytes(S->types[k], t->ne[0], &rb) || rb * rows >= u->src_bytes) continue;
                u->c[u->n_c++] = (th_search_cost){ .type = S->types[k], .bytes = rb * rows, .allowed = true };
            }
            /* cheapest first */
            for (int a = 1; a < u->n_c; a++)
                for (int b = a; b > 0 && u->c[b].bytes < u->c[b - 1].bytes; b--) {
                    th_search_cost x = u->c[b]; u->c[b] = u->c[b - 1]; u->c[b - 1] = x;
                }
        }
    }
    return TH_OK;
}

uint64_t th_search_bytes(const th_search *S, const int *choice) {
    uint64_t b = S->fixed_bytes;
    for (size_t i = 0; i < S->n_u; i++) b += choice[i] < 0 ? S->u[i].src_bytes : S->u[i].c[choice[i]].bytes;
    return b;
}

double th_search_bpw(const th_search *S, uint64_t bytes) {
    return S->total_elements ? 8.0 * (double)bytes / (double)S->total_elements : 0;
}

uint64_t th_search_hash(const th_search *S, const int *choice) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < S->n_u; i++) {
        uint32_t t = choice[i] < 0 ? S->u[i].src_type : S->u[i].c[choice[i]].type;
        for (int k = 0; k < 4; k++) h = (h ^ ((t >> (8 * k)) & 0xff)) * 1099511628211ull;
    }
    return h;
}

double th_search_gate_value(const th_search *S, double kld, double ppl_ratio) {
    return S->p->max_kld > 0 ? kld : ppl_ratio - 1.0;
}

void th_search_report_progress(th_search *S, const char *phase, int64_t done, int64_t total, double phase_t0,
                               const char *what) {
    if (!S->p->progress) return;
    double now = th_search_now(), el = now - phase_t0;
    th_search_progress pr = { .phase = phase, .done = done, .total = total, .seconds = now - S->t0,
                              .eta_seconds = done > 0 && total > done ? el / (double)done * (double)(total - done) : 0,
                              .best_bpw = S->r->best.bytes ? S->r->best.bpw : 0,
                              .best_gate = S->r->best.bytes ? S->r->best.gate : 0, .what = what };
    S->p->progress(&pr, S->p->ud);
}

/* ---------------------------------------------------------------- reference */

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* A cached base file fits when its chunk size and the text's tokens agree. */
static bool base_fits(const th_kld_base *b, int32_t n_ctx, int32_t n_chunks, const th_token *tok, size_t n_tok) {
    if (th_kld_base_n_ctx(b) != n_ctx) return false;
    int32_t have = (int32_t)(n_tok / (size_t)n_ctx);
    if (n_chunks > 0 && n_chunks < have) have = n_chunks;
    if (th_kld_base_n_chunks(b) != have) return false;
    const th_token *bt = th_kld_base_tokens(b);
    for (size_t i = 0; i < (size_t)have * (size_t)n_ctx; i++)
        if (i % (size_t)n_ctx && bt[i] != tok[i]) return false;
    return true;
}

static th_status make_context(th_search *S, const th_kld_base *b, th_context **ctx) {
    th_eval_params ep = th_eval_default_params();
    ep.n_ctx = 0;
    ep.kld_base = b;
    th_context_params cp = th_context_default_params();
    th_eval_context_params(&ep, &cp);
    cp.n_threads = S->p->n_threads;
    cp.gpu = S->p->gpu;
    return th_context_new(S->m, &cp, ctx);
}

/* The reference run of one slice: its base file (and router file) written once
 * and reused when it fits the text. */
static th_status reference(th_search *S, const char *suffix, int32_t n_ctx, int32_t n_chunks, const th_token *tok,
                           size_t n_tok, th_kld_base **base, char **router) {
    size_t L = strlen(S->p->log_path) + 32;
    char *kp = malloc(L), *rp = malloc(L);
    if (!kp || !rp) { free(kp); free(rp); return th_set_error(TH_ERR_NOMEM, "search: out of memory"); }
    snprintf(kp, L, "%s.%s.kld", S->p->log_path, suffix);
    snprintf(rp, L, "%s.%s.router", S->p->log_path, suffix);
    th_status s = TH_OK;
    if (file_exists(kp) && (!S->moe || file_exists(rp)) && th_kld_base_open(kp, base) == TH_OK) {
        if (base_fits(*base, n_ctx, n_chunks, tok, n_tok)) {
            fprintf(stderr, "search: reusing the reference %s\n", kp);
            goto done;
        }
        th_kld_base_close(*base);
        *base = NULL;
    }
    th_clear_error();
    th_search_report_progress(S, "reference", 0, 1, th_search_now(), suffix);
    th_eval_params ep = th_eval_default_params();
    ep.n_ctx = n_ctx;
    ep.n_chunks = n_chunks;
    ep.n_threads = S->p->n_threads;
    ep.kld_base_out = kp;
    ep.router_base_out = S->moe ? rp : NULL;
    th_context_params cp = th_context_default_params();
    th_eval_context_params(&ep, &cp);
    cp.n_threads = S->p->n_threads;
    cp.gpu = S->p->gpu;
    th_context *ctx = NULL;
    th_eval_result r;
    if ((s = th_context_new(S->m, &cp, &ctx))) goto done;
    s = th_eval_run(S->m, ctx, tok, n_tok, &ep, &r);
    th_context_free(ctx);
    if (s) goto done;
    fprintf(stderr, "search: reference %s: %d chunks of %d, PPL %.4f (%.1f s)\n", suffix, r.n_chunks, n_ctx, r.ppl,
            r.seconds);
    th_eval_result_free(&r);
    s = th_kld_base_open(kp, base);
done:
    free(kp);
    if (!s && S->moe) *router = rp;
    else free(rp);
    return s;
}

/* ---------------------------------------------------------------- sensitivity */

static void log_rec(th_search *S, const th_slog_rec *r) {
    th_slog_write(S->log, r);
    fflush(S->log);
}

static th_status measure_unit(th_search *S, size_t i, int *choice) {
    th_search_unit *u = &S->u[i];
    const char *name = S->pf.t[u->tensor].name;
    th_status s = TH_OK;
    for (int k = 0; k < u->n_c && !s; k++) {
        th_search_cost *c = &u->c[k];
        const char *tn = th_type_name(c->type);
        const th_slog_rec *m = th_search_memo_sens(&S->memo, name, u->expert, tn);
        if (m) {
            c->kld = m->kld; c->ppl_ratio = m->ppl_ratio; c->flips = m->flips; c->gap_min = m->gap_min;
            S->r->n_sens_reused++;
        } else {
            choice[i] = k;
            if ((s = th_search_apply(S, choice))) break;
            S->x_from = th_search_unit_start(S, i);
            s = th_search_eval(S, true, &c->kld, &c->ppl_ratio, &c->flips, &c->gap_min);
            S->x_from = 0;
            if (s) break;
            th_slog_rec rec = { .kind = TH_SLOG_SENS, .expert = u->expert, .bytes = c->bytes, .kld = c->kld,
                                .ppl_ratio = c->ppl_ratio, .flips = c->flips, .gap_min = c->gap_min };
            snprintf(rec.tensor, sizeof rec.tensor, "%s", name);
            snprintf(rec.type, sizeof rec.type, "%s", tn);
            log_rec(S, &rec);
            th_search_memo_add(&S->memo, &rec);
        }
        c->measured = true;
        c->allowed = S->p->max_flips < 0 || c->flips <= S->p->max_flips;
        S->r->n_sens++;
    }
    choice[i] = -1;
    if (s) return s;
    /* monotone in bytes? (cheaper should not be better) — logged where it fails */
    for (int a = 0; a < u->n_c; a++)
        for (int b = a + 1; b < u->n_c; b++)
            if (u->c[b].bytes > u->c[a].bytes && u->c[b].kld > u->c[a].kld) {
                fprintf(S->log,
                        "{\"kind\":\"nonmonotone\",\"tensor\":\"%s\",\"expert\":%d,\"cheaper\":\"%s\",\"kld_cheaper\":%.9g,"
                        "\"dearer\":\"%s\",\"kld_dearer\":%.9g}\n",
                        name, u->expert, th_type_name(u->c[a].type), u->c[a].kld, th_type_name(u->c[b].type), u->c[b].kld);
                S->r->n_nonmonotone++;
            }
    return TH_OK;
}

static th_status sensitivity(th_search *S) {
    int *choice = malloc(S->n_u * sizeof *choice);
    if (!choice) return th_set_error(TH_ERR_NOMEM, "search: out of memory");
    for (size_t i = 0; i < S->n_u; i++) choice[i] = -1;
    int64_t total = 0, done = 0;
    for (size_t i = 0; i < S->n_u; i++) total += S->u[i].n_c;
    double t0 = th_search_now();
    th_status s = th_search_layer_resume_init(S);
    for (size_t i = 0; i < S->n_u && !s; i++) {
        s = measure_unit(S, i, choice);
        done += S->u[i].n_c;
        char what[200];
        const th_search_unit *u = &S->u[i];
        if (u->expert >= 0) snprintf(what, sizeof what, "%s[%d]", S->pf.t[u->tensor].name, u->expert);
        else snprintf(what, sizeof what, "%s", S->pf.t[u->tensor].name);
        th_search_report_progress(S, "sensitivity", done, total, t0, what);
    }
    if (!s) s = th_search_apply(S, choice);   /* back to the source */
    free(choice);
    return s;
}

/* Uniform type T: every unit at T where it fits, else the cheapest candidate of at
 * least T's bits per weight, else the source type. */
static th_status uniform_points(th_search *S) {
    int *choice = malloc(S->n_u * sizeof *choice);
    if (!choice) return th_set_error(TH_ERR_NOMEM, "search: out of memory");
    th_status s = TH_OK;
    double t0 = th_search_now();
    for (int k = 0; k < S->n_types && !s; k++) {
        uint32_t T = S->types[k];
        double tb = 0;
        uint64_t rb;
        if (th_row_bytes(T, 256 * 9, &rb)) tb = 8.0 * (double)rb / (256 * 9);   /* T's bits per weight */
        bool any = false;
        for (size_t i = 0; i < S->n_u; i++) {
            th_search_unit *u = &S->u[i];
            choice[i] = -1;
            for (int c = 0; c < u->n_c; c++)
                if (u->c[c].type == T) { choice[i] = c; break; }
            if (choice[i] < 0)
                for (int c = 0; c < u->n_c; c++)
                    if (8.0 * (double)u->c[c].bytes / (double)u->elements >= tb - 1e-9) { choice[i] = c; break; }
            any |= choice[i] >= 0 && u->c[choice[i]].type == T;
        }
        if (!any) continue;
        char label[48];
        snprintf(label, sizeof label, "uniform %s", th_type_name(T));
        th_search_point pt;
        s = th_search_gate(S, choice, label, true, &pt);
        if (!s && pt.feasible && (!S->uniform_best || pt.bytes < th_search_bytes(S, S->uniform_best))) {
            if (!S->uniform_best && !(S->uniform_best = malloc(S->n_u * sizeof *choice))) s = th_set_error(TH_ERR_NOMEM, "search: out of memory");
            else memcpy(S->uniform_best, choice, S->n_u * sizeof *choice);
        }
        th_search_report_progress(S, "uniform", k + 1, S->n_types, t0, label);
    }
    free(choice);
    return s;
}

/* ---------------------------------------------------------------- the run */

/* The source through the gate first: its value is the floor of the gate (the
 * reference's own rounding); a limit below it cannot be met by anything. */
static th_status source_gate(th_search *S, const int *src) {
    th_search_point pt;
    th_status s = th_search_gate(S, src, "source", false, &pt);
    if (s || pt.feasible) return s;
    const bool kld = S->p->max_kld > 0;
    if (pt.gate > S->gate_max)
        return th_set_error(TH_ERR_ARG,
                            "search: the gate cannot be met: the source itself measures %s %.6g on the gate chunks "
                            "against its own reference (the base file's rounding), above the limit %.6g; raise %s",
                            kld ? "KLD" : "PPL increase", pt.gate, S->gate_max, kld ? "--max-kld" : "--max-ppl-increase");
    return th_set_error(TH_ERR_ARG,
                        "search: the gate cannot be met: the source itself flips %" PRId64
                        " router choices against its own reference, more than --max-flips %d",
                        pt.flips, S->p->max_flips);
}

static void search_free(th_search *S) {
    th_context_free(S->gate_ctx);
    th_context_free(S->calib_ctx);
    th_kld_base_close(S->gate_base);
    th_kld_base_close(S->calib_base);
    free(S->gate_router);
    free(S->calib_router);
    th_search_memo_free(&S->memo);
    th_prec_assign_free(&S->live);
    th_prec_file_free(&S->pf);
    gguf_close(S->src);
    free(S->u);
    free(S->uniform_best);
    free(S->x_saved);
    free(S->x_mem);
    if (S->log) fclose(S->log);
}

static th_status setup(th_search *S, const th_token *tok, size_t n_tok) {
    const th_search_params *p = S->p;
    th_status s;
    if (!p->log_path) return th_set_error(TH_ERR_ARG, "search: a log file is needed (--log FILE)");
    if (!p->source_path) return th_set_error(TH_ERR_ARG, "search: the source file's path is needed");
    if ((p->max_kld > 0) == (p->max_ppl_increase > 0))
        return th_set_error(TH_ERR_ARG, "search: give exactly one gate: --max-kld X or --max-ppl-increase P%%");
    if (p->calib_ctx < 8 || (p->n_ctx > 0 && p->n_ctx < 8)) return th_set_error(TH_ERR_ARG, "search: chunks of fewer than 8 tokens");
    S->gate_max = p->max_kld > 0 ? p->max_kld : p->max_ppl_increase;
    S->moe = S->m->hp.n_expert > 0;
    if ((s = parse_types(S, p->types))) return s;
    if ((s = gguf_open(p->source_path, &S->src))) return s;
    if ((s = th_prec_file_read(S->m->file, &S->pf))) return s;
    if ((s = make_units(S))) return s;
    if (p->resume_path) {
        const int32_t want[4] = { p->n_ctx, p->n_chunks, p->calib_ctx, p->calib_chunks };
        if ((s = th_slog_check_start(p->resume_path, want)) || (s = th_search_memo_load(&S->memo, p->resume_path)))
            return s;
    }
    bool same = p->resume_path && !strcmp(p->resume_path, p->log_path);
    if (!(S->log = fopen(p->log_path, same ? "ab" : "wb")))
        return th_set_error(TH_ERR_IO, "search: cannot write the log %s", p->log_path);
    fprintf(S->log, "{\"kind\":\"start\",\"source\":\"%s\",\"units\":%zu,\"n_ctx\":%d,\"chunks\":%d,\"calib_ctx\":%d,"
                    "\"calib_chunks\":%d,\"gate\":\"%s\",\"gate_max\":%.9g,\"max_flips\":%d}\n",
            p->source_path, S->n_u, p->n_ctx, p->n_chunks, p->calib_ctx, p->calib_chunks,
            p->max_kld > 0 ? "kld" : "ppl", S->gate_max, p->max_flips);
    fflush(S->log);
    if ((s = reference(S, "gate", p->n_ctx, p->n_chunks, tok, n_tok, &S->gate_base, &S->gate_router))) return s;
    if ((s = reference(S, "calib", p->calib_ctx, p->calib_chunks, tok, n_tok, &S->calib_base, &S->calib_router)))
        return s;
    if ((s = make_context(S, S->gate_base, &S->gate_ctx))) return s;
    if ((s = make_context(S, S->calib_base, &S->calib_ctx))) return s;
    return th_prec_model_assign(S->m, &S->pf, &S->live);
}

th_status th_search_run(th_model *model, const th_token *tok, size_t n_tok, const th_search_params *p,
                        th_search_result *r) {
    memset(r, 0, sizeof *r);
    if (!model || !p || !tok) return th_set_error(TH_ERR_ARG, "th_search_run: NULL argument");
    th_search S = { .p = p, .m = model, .r = r, .t0 = th_search_now() };
    th_status s = setup(&S, tok, n_tok);
    if (!s) {
        int *src = malloc(S.n_u * sizeof *src);
        if (!src) s = th_set_error(TH_ERR_NOMEM, "search: out of memory");
        for (size_t i = 0; src && i < S.n_u; i++) src[i] = -1;
        r->n_units = (int64_t)S.n_u;
        r->gate_max = S.gate_max;
        if (src) {
            r->source_bytes = th_search_bytes(&S, src);
            r->source_bpw = th_search_bpw(&S, r->source_bytes);
            s = source_gate(&S, src);
        }
        free(src);
    }
    if (!s) s = sensitivity(&S);
    if (!s) s = uniform_points(&S);
    if (!s) s = th_search_solve(&S);
    r->seconds = th_search_now() - S.t0;
    if (!s) fprintf(S.log, "{\"kind\":\"done\",\"seconds\":%.1f,\"best_bytes\":%" PRIu64 ",\"best_gate\":%.9g}\n",
                    r->seconds, r->best.bytes, r->best.gate);
    search_free(&S);
    if (s) th_search_result_free(r);
    return s;
}

void th_search_result_free(th_search_result *r) {
    if (!r) return;
    free(r->config);
    free(r->summary);
    free(r->table);
    free(r->points);
    memset(r, 0, sizeof *r);
}
