/* live.c — live promotion: a precision config file watched for a loaded model
 * (th_precision_live). The runtime's between-steps hook looks at the file at most
 * once a second; a changed file that parses and resolves (its rules on top of the
 * model file's own assignment, so removing a rule reverts it) is planned against
 * the model's current weights and re-quantized from the source in a background
 * thread; a later hook call — between two forward passes — swaps the result in
 * (on the GPU: the backend's dev_refresh re-makes the device copies then).
 * A bad file is logged and ignored. The current assignment (config text, bytes,
 * hash) is kept for /precision and /metrics. */
#include "precision/internal.h"
#include "gguf/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

struct th_precision_live {
    th_model *m;
    char *cfg_path, *src_path;
    int n_threads;
    gguf_file *src;
    th_prec_file pf;             /* the model file's tensors and own assignment */
    /* the file as last looked at */
    double last_check;
    int64_t mtime_ns;
    int64_t size;
    uint64_t cfg_hash;           /* of the text now applied (or being applied) */
    /* the plan in the background */
    pthread_t worker;
    bool running;
    atomic_bool ready;
    th_prec_assign cur, want;
    th_prec_plan plan;
    th_status plan_status;
    char plan_err[512];
    uint64_t pending_hash;
    /* what /precision and /metrics report */
    pthread_mutex_t mu;
    char *text;
    uint64_t bytes, hash, swaps;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t assigned_bytes(const th_prec_file *pf, const th_prec_assign *a) {
    uint64_t sum = 0;
    for (size_t i = 0; i < pf->n; i++) {
        const th_qtensor *t = &pf->t[i];
        uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3], per = rows / (a->n_expert[i] ? a->n_expert[i] : 1), rb;
        for (uint32_t e = 0; e < a->n_expert[i]; e++)
            if (th_row_bytes(th_prec_type_of(a, i, e), t->ne[0], &rb)) sum += rb * per;
    }
    return sum;
}

/* The model's assignment now: text, bytes, hash (under mu). */
static th_status refresh_info(th_precision_live *L) {
    th_prec_file view = L->pf;
    th_status s = th_prec_model_assign(L->m, &L->pf, &view.a);
    if (s) return s;
    char *text = NULL;
    s = th_prec_describe(&view, L->cfg_path, &text);
    uint64_t bytes = assigned_bytes(&L->pf, &view.a);
    th_prec_assign_free(&view.a);
    if (s) return s;
    pthread_mutex_lock(&L->mu);
    free(L->text);
    L->text = text;
    L->bytes = bytes;
    L->hash = fnv1a(text, strlen(text));
    pthread_mutex_unlock(&L->mu);
    return TH_OK;
}

static void *plan_worker(void *arg) {
    th_precision_live *L = arg;
    L->plan_status = th_prec_make_plan(L->m, L->src, &L->pf, &L->cur, &L->want, L->n_threads, false, &L->plan);
    if (L->plan_status) snprintf(L->plan_err, sizeof L->plan_err, "%s", th_last_error());
    atomic_store(&L->ready, true);
    return NULL;
}

/* A finished plan: swapped in (CPU), or dropped with a log line. */
static void finish_plan(th_precision_live *L) {
    pthread_join(L->worker, NULL);
    L->running = false;
    if (L->plan_status) {
        fprintf(stderr, "theseus: precision %s: re-quantizing failed, the old assignment stays: %s\n", L->cfg_path, L->plan_err);
    } else if (L->plan.n == 0) {
        L->cfg_hash = L->pending_hash;   /* nothing differs from the model: no swap */
    } else if (th_prec_swap(L->m, &L->plan) == TH_OK) {
        /* GPU: the device copies are re-made from the swapped weights, still between two steps */
        if (L->m->dev_store && (!L->m->dev_refresh || L->m->dev_refresh(L->m)))
            fprintf(stderr, "theseus: precision %s: the GPU's copies of the weights could not be updated, the GPU runs the old assignment: %s\n",
                    L->cfg_path, L->m->dev_refresh ? th_last_error() : "no refresh for this backend");
        L->cfg_hash = L->pending_hash;
        pthread_mutex_lock(&L->mu);
        L->swaps++;
        pthread_mutex_unlock(&L->mu);
        fprintf(stderr, "theseus: precision %s: %zu tensors or experts swapped in (%.2f MiB re-quantized)\n", L->cfg_path,
                L->plan.n, (double)L->plan.bytes / (1 << 20));
        refresh_info(L);
    } else {
        fprintf(stderr, "theseus: precision %s: swap failed: %s\n", L->cfg_path, th_last_error());
    }
    th_prec_plan_free(&L->plan);
    th_prec_assign_free(&L->cur);
    th_prec_assign_free(&L->want);
}

/* Read the config if it changed; start a plan when it differs from the model. */
static void check_file(th_precision_live *L) {
    struct stat st;
    if (stat(L->cfg_path, &st) != 0) return;   /* gone for a moment (an editor's rename): keep what we have */
    int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (mt == L->mtime_ns && (int64_t)st.st_size == L->size) return;
    L->mtime_ns = mt;
    L->size = (int64_t)st.st_size;
    th_prec_config *c = NULL;
    FILE *f = fopen(L->cfg_path, "rb");
    char *buf = NULL;
    size_t n = 0;
    if (f) {
        buf = malloc((size_t)st.st_size + 1);
        if (buf) n = fread(buf, 1, (size_t)st.st_size, f);
        fclose(f);
    }
    if (!buf) return;
    uint64_t h = fnv1a(buf, n);
    th_status s = TH_OK;
    if (h != L->cfg_hash) {
        s = th_prec_parse(buf, n, L->cfg_path, &c);
        if (!s) s = th_prec_model_assign(L->m, &L->pf, &L->cur);
        if (!s && (s = th_prec_resolve(c, L->pf.t, L->pf.n, &L->pf.a, &L->want))) th_prec_assign_free(&L->cur);
        if (s) fprintf(stderr, "theseus: precision: ignoring %s (the old assignment stays): %s\n", L->cfg_path, th_last_error());
        else {
            L->pending_hash = h;
            atomic_store(&L->ready, false);
            L->running = pthread_create(&L->worker, NULL, plan_worker, L) == 0;
            if (!L->running) {
                fprintf(stderr, "theseus: precision %s: cannot start the re-quantizing thread\n", L->cfg_path);
                th_prec_assign_free(&L->cur);
                th_prec_assign_free(&L->want);
            }
        }
    }
    th_prec_config_free(c);
    free(buf);
}

void th_precision_live_between_steps(void *arg) {
    th_precision_live *L = arg;
    if (!L) return;
    if (L->running) {
        if (atomic_load(&L->ready)) finish_plan(L);
        return;
    }
    double t = now_s();
    if (t - L->last_check < 1.0) return;
    L->last_check = t;
    check_file(L);
}

th_status th_precision_live_new(th_model *m, const char *config_path, const char *source_path, int32_t n_threads,
                                th_precision_live **out) {
    *out = NULL;
    if (!m || !config_path || !source_path)
        return th_set_error(TH_ERR_ARG, "live precision needs a model, a config file and a source file (--source)");
    th_precision_live *L = calloc(1, sizeof *L);
    if (!L) return th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    pthread_mutex_init(&L->mu, NULL);
    L->m = m;
    L->n_threads = n_threads;
    L->cfg_path = strdup(config_path);
    L->src_path = strdup(source_path);
    L->mtime_ns = -1;
    th_status s = L->cfg_path && L->src_path ? TH_OK : th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    if (!s) s = gguf_open(source_path, &L->src);
    if (!s) s = th_prec_file_read(m->file, &L->pf);
    if (!s) s = refresh_info(L);
    if (s) { th_precision_live_free(L); return s; }
    /* the file as it is now, applied before the first step */
    L->last_check = now_s();
    check_file(L);
    if (L->running) finish_plan(L);
    *out = L;
    return TH_OK;
}

th_status th_precision_live_info(th_precision_live *L, char **text, uint64_t *bytes, uint64_t *hash, uint64_t *swaps) {
    if (!L) return th_set_error(TH_ERR_ARG, "th_precision_live_info: NULL");
    pthread_mutex_lock(&L->mu);
    th_status s = TH_OK;
    if (text && !(*text = strdup(L->text ? L->text : ""))) s = th_set_error(TH_ERR_NOMEM, "precision: out of memory");
    if (bytes) *bytes = L->bytes;
    if (hash) *hash = L->hash;
    if (swaps) *swaps = L->swaps;
    pthread_mutex_unlock(&L->mu);
    return s;
}

void th_precision_live_free(th_precision_live *L) {
    if (!L) return;
    if (L->running) {
        pthread_join(L->worker, NULL);
        th_prec_plan_free(&L->plan);
        th_prec_assign_free(&L->cur);
        th_prec_assign_free(&L->want);
    }
    th_prec_file_free(&L->pf);
    gguf_close(L->src);
    free(L->cfg_path);
    free(L->src_path);
    free(L->text);
    pthread_mutex_destroy(&L->mu);
    free(L);
}

void th_prec_live_stop(th_model *m) { (void)m; /* the live handle is the client's: freed before the model */ }
