/* cmd_bench.c — `theseus bench`: llama-bench-style throughput rows for one model.
 *
 *   pp N : one batch of N random token ids into an empty KV cache (cleared
 *          between repetitions); tok/s = N / time of that th_decode call.
 *   tg N : N single-token decodes after a short prompt (PROMPT_TG tokens, not
 *          timed); tok/s = N / time of the N calls. Each step also takes its
 *          greedy token (th_get_argmax), as greedy generation does; the input
 *          tokens stay random. On the GPU the context is created with
 *          logits_argmax_only, so the argmax is taken on the device and only
 *          4 bytes a step come back (--full-logits: the whole logits row is
 *          copied to the host and scanned there, the path of a non-greedy
 *          sampler); the line under the table says which path ran.
 *
 * Each test runs once untimed (warm-up), then -r times; the row shows the median
 * tok/s ± the sample standard deviation. For tg it also shows the weight bytes
 * read per token × tok/s (GB/s, 1 GB = 1e9 bytes) and that as a fraction of the
 * machine's read bandwidth ("% BW"): a STREAM-like read pass (with software
 * prefetch) over a buffer much larger than the caches (1 GiB by default), split
 * over the same number of threads. It is measured first (best of BW_PASSES passes,
 * the bandwidth printed under the table) and again right before each tg repetition
 * (best of BW_REP_PASSES); "% BW" is the median over the repetitions of each one's
 * GB/s over the bandwidth measured just before it, which keeps the ratio meaningful
 * when the memory bandwidth drifts during the run (shared or virtual machines).
 *
 * With --parallel N (bench_batched.c) a row of N concurrent streams follows, llama-batched-bench's
 * method (N prompts of --npp tokens, then --ntg steps of N tokens): S_PP, S_TG and S tok/s.
 *
 * With --spec/--draft/--draft-layers (bench_spec.c) two more rows follow: greedy
 * generation of tgN tokens through the runtime from a real prompt (-f FILE, or a
 * built-in code-rewriting prompt), plain and speculative, alternating in the same
 * run, with the acceptance, the mean accepted length and the speed-up.
 *
 * Bytes read per decoded token = all weight bytes (th_model_size_bytes) minus
 * token_embd.weight when the model has a separate output.weight: the embedding
 * lookup reads one row, not the matrix. With a tied output the embedding matrix
 * is read in full as the output projection, so it counts. The KV cache reads
 * (small at these lengths) and activations are not counted.
 */
#include "cli.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { PROMPT_TG = 8, BW_PASSES = 5, BW_REP_PASSES = 2 };

typedef struct bench_opts {
    const char *model;
    long pp, tg, threads, reps, bw_mib;
    long n_par, npp, ntg;       /* --parallel row (bench_batched.c); n_par 0: none */
    bool gpu, verbose, full_logits;
    cli_spec spec;              /* speculative rows (bench_spec.c) */
    const char *prompt_file;    /* -f: their prompt */
} bench_opts;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
    fprintf(f, "usage: theseus bench -m MODEL [options]\n"
               "  -m, --model FILE    GGUF model\n"
               "  -p, --n-prompt N    prompt-processing test: one batch of N tokens (default 128; 0 = skip)\n"
               "  -n, --n-gen N       generation test: N single-token decodes (default 64; 0 = skip)\n"
               "  -t, --threads N     threads (default: all cores)\n"
               "  -r, --reps N        timed repetitions per test (default 5); median ± sd is shown\n"
               "  --gpu               run the model on the GPU (CUDA build); tg takes its argmax on the device\n"
               "  --gpu-layers SPEC   some layers on the GPU, the rest on the CPU: N (the last N, = -ngl N) or\n"
               "                      ranges 0-11:cpu,12-23:gpu (docs/hybrid.md)\n"
               "  --full-logits       with --gpu: copy every logits row to the host instead (as a non-greedy sampler needs)\n"
               "  --bw-mib N          buffer of the read-bandwidth pass in MiB (default 1024; 0 = skip)\n"
               "  -v, --verbose       print load information\n"
               "  --parallel N        also a row of N streams, llama-batched-bench's method: N prompts of --npp\n"
               "                      tokens (default 128), then --ntg steps (default 128) of one token a stream\n"
               "  speculative rows (greedy generation of -n tokens through the runtime, plain and\n"
               "  speculative alternating in the same run; speed-up = median speculative / median plain):\n"
               "  -f, --file FILE     their prompt (default: a built-in request to rewrite a C file with one change)\n");
    cli_spec_usage(f);
}

/* Returns 0 on success, 1 = handled (help), 2 = usage error. */
static int parse_opts(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){ .pp = 128, .tg = 64, .reps = 5, .bw_mib = 1024, .npp = 128, .ntg = 128 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int sa = cli_spec_arg("bench", a, v, &o->spec);
        if (sa < 0) return 2;
        if (sa > 0) { i += sa - 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        else if (!strcmp(a, "--gpu")) o->gpu = true;
        else if (!strcmp(a, "--full-logits")) o->full_logits = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true;
        else if (!v) { fprintf(stderr, "theseus bench: unknown or incomplete option '%s'\n", a); return 2; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { o->model = v; i++; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { o->prompt_file = v; i++; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) { if (!cli_int("bench", a, v, 0, 65536, &o->pp)) return 2; i++; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) { if (!cli_int("bench", a, v, 0, 1 << 20, &o->tg)) return 2; i++; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_int("bench", a, v, 1, 1024, &o->threads)) return 2; i++; }
        else if (!strcmp(a, "-r") || !strcmp(a, "--reps")) { if (!cli_int("bench", a, v, 1, 1000, &o->reps)) return 2; i++; }
        else if (!strcmp(a, "--parallel")) { if (!cli_int("bench", a, v, 1, 512, &o->n_par)) return 2; i++; }
        else if (!strcmp(a, "--npp")) { if (!cli_int("bench", a, v, 1, 65536, &o->npp)) return 2; i++; }
        else if (!strcmp(a, "--ntg")) { if (!cli_int("bench", a, v, 0, 65536, &o->ntg)) return 2; i++; }
        else if (!strcmp(a, "--bw-mib")) { if (!cli_int("bench", a, v, 0, 1 << 20, &o->bw_mib)) return 2; i++; }
        else { fprintf(stderr, "theseus bench: unknown option '%s'\n", a); return 2; }
    }
    if (!o->model) { usage(stderr); return 2; }
    if (!o->threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n > 0 ? n : 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- read bandwidth */

typedef struct bw_slice { const uint64_t *p; size_t n; uint64_t sum; bool touch; } bw_slice;

/* The read loop prefetches 4 KiB ahead, as the decode kernels do (src/cpu/kernels.h):
 * without it one such loop reached only 85-90 % of the bandwidth that the prefetching
 * kernels then exceeded, which made it no ceiling. */
static void *bw_worker(void *arg) {
    bw_slice *s = arg;
    if (s->touch) {   /* first touch: fault the pages in from the thread that reads them */
        memset((void *)s->p, 1, s->n * sizeof *s->p);
        return NULL;
    }
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 8 <= s->n; i += 8) {
        __builtin_prefetch(s->p + i + 512, 0, 3);
        a += s->p[i]; b ^= s->p[i + 1]; c += s->p[i + 2]; d ^= s->p[i + 3];
        a ^= s->p[i + 4]; b += s->p[i + 5]; c ^= s->p[i + 6]; d += s->p[i + 7];
    }
    for (; i < s->n; i++) a += s->p[i];
    s->sum = a + b + c + d;
    return NULL;
}

static bool bw_run(bw_slice *sl, int nt, bool touch) {
    pthread_t tid[1024];
    int started = 0;
    for (int t = 0; t < nt; t++) {
        sl[t].touch = touch;
        if (pthread_create(&tid[t], NULL, bw_worker, &sl[t])) break;
        started++;
    }
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    return started == nt;
}

/* A buffer much larger than the caches, split over nt threads; kept for the whole
 * run so that the bandwidth can be measured again next to each tg repetition (the
 * memory of a shared or virtual machine does not give the same bandwidth all along). */
typedef struct bw_meter { uint64_t *buf; bw_slice *sl; size_t bytes; int nt; } bw_meter;

static void bw_close(bw_meter *m) {
    free(m->buf);
    free(m->sl);
    *m = (bw_meter){ 0 };
}

static bool bw_open(bw_meter *m, long mib, int nt) {
    size_t words = ((size_t)mib << 20) / sizeof(uint64_t);
    *m = (bw_meter){ .buf = malloc(words * sizeof(uint64_t)), .sl = calloc((size_t)nt, sizeof(bw_slice)),
                     .bytes = words * sizeof(uint64_t), .nt = nt };
    if (m->buf && m->sl) {
        for (int t = 0; t < nt; t++) {
            size_t lo = words * (size_t)t / (size_t)nt, hi = words * (size_t)(t + 1) / (size_t)nt;
            m->sl[t] = (bw_slice){ m->buf + lo, hi - lo, 0, false };
        }
        if (bw_run(m->sl, nt, true)) return true;
    }
    bw_close(m);
    return false;
}

/* Best read bandwidth in GB/s (1e9 bytes/s) over `passes` passes; 0 on failure. */
static double bw_measure(bw_meter *m, int passes) {
    double best = 0;
    volatile uint64_t sink = 0;
    for (int pass = 0; m->buf && pass < passes; pass++) {
        double t0 = now_s();
        if (!bw_run(m->sl, m->nt, false)) return 0;
        double dt = now_s() - t0;
        for (int t = 0; t < m->nt; t++) sink += m->sl[t].sum;
        if (dt > 0 && (double)m->bytes / dt / 1e9 > best) best = (double)m->bytes / dt / 1e9;
    }
    (void)sink;
    return best;
}

/* ---------------------------------------------------------------- statistics */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double stddev(const double *v, long n) {
    if (n < 2) return 0;
    double mean = 0, ss = 0;
    for (long i = 0; i < n; i++) mean += v[i];
    mean /= (double)n;
    for (long i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
    return sqrt(ss / (double)(n - 1));
}

/* ---------------------------------------------------------------- the tests */

typedef struct bench_run {
    th_model *m;
    th_context *ctx;
    th_token *tok;   /* random ids, max(pp, PROMPT_TG + tg) of them */
    uint64_t rng;
} bench_run;

static th_token random_token(bench_run *R) {
    R->rng ^= R->rng << 13; R->rng ^= R->rng >> 7; R->rng ^= R->rng << 17;
    return (th_token)(R->rng % (uint64_t)th_model_n_vocab(R->m));
}

static void fill_tokens(bench_run *R, long n) {
    for (long i = 0; i < n; i++) R->tok[i] = random_token(R);
}

/* One pp repetition: *secs = time of one th_decode of n tokens into an empty cache. */
static th_status run_pp(bench_run *R, long n, double *secs) {
    th_status s = th_kv_seq_clear(R->ctx, 0);
    if (s) return s;
    fill_tokens(R, n);
    th_batch b = { .n_tokens = (int32_t)n, .token = R->tok };
    double t0 = now_s();
    s = th_decode(R->ctx, &b);
    *secs = now_s() - t0;
    return s;
}

/* One tg repetition: an untimed prompt of PROMPT_TG tokens, then n timed
 * single-token decodes. */
static th_status run_tg(bench_run *R, long n, double *secs) {
    th_status s = th_kv_seq_clear(R->ctx, 0);
    if (s) return s;
    fill_tokens(R, PROMPT_TG + n);
    th_batch b = { .n_tokens = PROMPT_TG, .token = R->tok };
    if ((s = th_decode(R->ctx, &b))) return s;
    double t0 = now_s();
    for (long i = 0; i < n && !s; i++) {
        th_batch one = { .n_tokens = 1, .token = R->tok + PROMPT_TG + i };
        if (!(s = th_decode(R->ctx, &one)) && th_get_argmax(R->ctx, 0) < 0) s = TH_ERR_INTERNAL;
    }
    *secs = now_s() - t0;
    return s;
}

/* ---------------------------------------------------------------- table */

typedef struct table {
    int w_model;
    char size[32], params[32], backend[32];
    long threads;
} table;

static void fmt_size(char *buf, size_t cap, uint64_t bytes) {
    double b = (double)bytes;
    if (b >= (double)(1u << 30)) snprintf(buf, cap, "%.2f GiB", b / (double)(1u << 30));
    else snprintf(buf, cap, "%.2f MiB", b / (double)(1u << 20));
}

static void fmt_params(char *buf, size_t cap, uint64_t n) {
    double p = (double)n;
    if (p >= 1e9) snprintf(buf, cap, "%.2f B", p / 1e9);
    else if (p >= 1e6) snprintf(buf, cap, "%.2f M", p / 1e6);
    else snprintf(buf, cap, "%.2f K", p / 1e3);
}

static void dashes(int n, bool right) {
    putchar(' ');
    for (int i = 0; i < n - (right ? 1 : 0); i++) putchar('-');
    if (right) putchar(':');
    fputs(" |", stdout);
}

static void print_header(const table *T) {
    printf("| %-*s | %10s | %10s | %-12s | %7s | %8s | %20s | %8s | %7s |\n", T->w_model, "model", "size",
           "params", "backend", "threads", "test", "t/s", "GB/s", "% BW");
    putchar('|');
    dashes(T->w_model, false); dashes(10, true); dashes(10, true); dashes(12, false); dashes(7, true);
    dashes(8, true); dashes(20, true); dashes(8, true); dashes(7, true);
    putchar('\n');
}

/* frac: the row's "% BW" as a fraction (0: not shown) */
static void print_row(const table *T, const char *desc, const char *test, double med, double sd, double gbs,
                      double frac) {
    char ts[48], g[24] = "-", pct[24] = "-";
    snprintf(ts, sizeof ts, "%.2f ± %.2f", med, sd);
    if (gbs > 0) snprintf(g, sizeof g, "%.2f", gbs);
    if (gbs > 0 && frac > 0) snprintf(pct, sizeof pct, "%.1f %%", 100.0 * frac);
    /* "±" is two bytes but one column: pad the field by one more byte */
    printf("| %-*s | %10s | %10s | %-12s | %7ld | %8s | %21s | %8s | %7s |\n", T->w_model, desc, T->size,
           T->params, T->backend, T->threads, test, ts, g, pct);
    fflush(stdout);
}

/* Read bandwidth next to the tg repetitions (bench_test), for the summary line. */
typedef struct bw_seen { double lo, hi; } bw_seen;

/* Runs warm-up + reps of one test and prints its row. bytes_per_tok > 0 for tg; then,
 * with a meter, the read bandwidth is measured again (best of BW_REP_PASSES) right
 * before each repetition and "% BW" is the median over the repetitions of the
 * repetition's GB/s over that bandwidth. */
static th_status bench_test(bench_run *R, const table *T, const bench_opts *o, bool pp, double bytes_per_tok,
                            bw_meter *meter, bw_seen *seen) {
    long n = pp ? o->pp : o->tg;
    double *tps = calloc((size_t)o->reps, sizeof *tps), *frac = calloc((size_t)o->reps, sizeof *frac), secs = 0;
    if (!tps || !frac) { free(tps); free(frac); return th_set_error(TH_ERR_NOMEM, "out of memory"); }
    bool rel = !pp && meter && meter->buf;
    th_status s = pp ? run_pp(R, n, &secs) : run_tg(R, TH_MIN_SZ(n, 4), &secs);   /* warm-up */
    for (long r = 0; r < o->reps && !s; r++) {
        double bw = rel ? bw_measure(meter, BW_REP_PASSES) : 0;
        s = pp ? run_pp(R, n, &secs) : run_tg(R, n, &secs);
        tps[r] = secs > 0 ? (double)n / secs : 0;
        frac[r] = bw > 0 ? tps[r] * bytes_per_tok / 1e9 / bw : 0;
        if (bw > 0 && (seen->lo == 0 || bw < seen->lo)) seen->lo = bw;
        if (bw > seen->hi) seen->hi = bw;
    }
    if (!s) {
        double sd = stddev(tps, o->reps), med = median(tps, o->reps);
        char test[24];
        snprintf(test, sizeof test, "%s%ld", pp ? "pp" : "tg", n);
        print_row(T, th_model_desc(R->m), test, med, sd, pp ? 0 : med * bytes_per_tok / 1e9,
                  rel ? median(frac, o->reps) : 0);
    }
    free(tps);
    free(frac);
    return s;
}

/* Weight bytes read per decoded token (see the top of the file). */
static double weight_bytes_per_token(const th_model *m, const char *path) {
    uint64_t total = th_model_size_bytes(m), embd = 0;
    bool has_output = false;
    th_file *f;
    if (th_file_open(path, &f) == TH_OK) {
        for (int64_t i = 0; i < th_file_n_tensors(f); i++) {
            th_tensor_info ti;
            if (th_file_tensor(f, i, &ti) != TH_OK) continue;
            if (!strcmp(ti.name, "token_embd.weight")) embd = ti.nbytes;
            if (!strcmp(ti.name, "output.weight")) has_output = true;
        }
        th_file_close(f);
    }
    return (double)(has_output && embd <= total ? total - embd : total);
}

static th_status open_run(const bench_opts *o, bench_run *R) {
    th_model_params mp = cli_model_params();
    mp.verbose = o->verbose;
    th_status s = th_model_load(o->model, &mp, &R->m);
    if (s) return s;
    th_context_params cp = th_context_default_params();
    long need = o->pp > PROMPT_TG + o->tg ? o->pp : PROMPT_TG + o->tg;
    cp.n_ctx = (uint32_t)(need + 16);
    cp.n_batch = (uint32_t)(o->pp > PROMPT_TG ? o->pp : PROMPT_TG);
    cp.n_threads = (int32_t)o->threads;
    cp.gpu = o->gpu;
    cp.gpu_layers = cli_gpu_layers();
    cp.logits_argmax_only = o->gpu && !o->full_logits;
    if ((s = th_context_new(R->m, &cp, &R->ctx))) return s;
    R->tok = malloc((size_t)need * sizeof *R->tok);
    R->rng = 0x9E3779B97F4A7C15ULL;
    return R->tok ? TH_OK : th_set_error(TH_ERR_NOMEM, "out of memory");
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.gpu) {
        char dev[256] = "";
        th_status s = th_gpu_available(dev, sizeof dev);
        if (s) return cli_fail("bench", s);
    }
    /* Bandwidth first, before the model is mapped, so the two do not compete for memory. */
    bw_meter meter = { 0 };
    bw_seen seen = { 0 };
    double bw = o.bw_mib && bw_open(&meter, o.bw_mib, (int)o.threads) ? bw_measure(&meter, BW_PASSES) : 0;
    if (o.gpu) bw_close(&meter);
    bench_run R = { 0 };
    th_status s = open_run(&o, &R);
    if (!s) {
        table T = { .threads = o.threads };
        int w = (int)strlen(th_model_desc(R.m));
        T.w_model = w > 20 ? w : 20;   /* a common width, so that tables of several runs line up */
        fmt_size(T.size, sizeof T.size, th_model_size_bytes(R.m));
        fmt_params(T.params, sizeof T.params, th_model_n_params(R.m));
        snprintf(T.backend, sizeof T.backend, "%s", o.gpu ? "CUDA" : th_cpu_level());
        if (!o.gpu) snprintf(T.backend, sizeof T.backend, "CPU %s", th_cpu_level());
        if (cli_gpu_layers()) snprintf(T.backend, sizeof T.backend, "ngl %.18s", cli_gpu_layers());   /* --gpu-layers */
        double bpt = weight_bytes_per_token(R.m, o.model);
        print_header(&T);
        if (o.pp) s = bench_test(&R, &T, &o, true, bpt, NULL, &seen);
        if (!s && o.tg) s = bench_test(&R, &T, &o, false, bpt, &meter, &seen);
        if (!s && o.tg && o.spec.p.kind != TH_SPEC_NONE) {
            bench_spec_opts bo = { .spec = &o.spec, .prompt_file = o.prompt_file, .n_gen = o.tg, .reps = o.reps,
                                   .threads = o.threads, .gpu = o.gpu, .argmax_only = o.gpu && !o.full_logits,
                                   .verbose = o.verbose, .w_model = T.w_model, .size = T.size, .params = T.params,
                                   .backend = T.backend };
            s = bench_spec(R.m, &bo);
        }
        if (!s && o.n_par) {
            bench_batched_opts bb = { .n_par = o.n_par, .npp = o.npp, .ntg = o.ntg, .reps = o.reps, .threads = o.threads,
                                      .gpu = o.gpu, .argmax_only = o.gpu && !o.full_logits, .w_model = T.w_model,
                                      .size = T.size, .params = T.params, .backend = T.backend };
            s = bench_batched(R.m, &bb);
        }
        if (!s) {
            printf("\nweights read per generated token: %.2f MiB; ", bpt / (1 << 20));
            if (bw > 0)
                printf("read bandwidth: %.2f GB/s (%ld threads, %ld MiB, best of %d)%s\n", bw, o.threads, o.bw_mib,
                       BW_PASSES, o.gpu ? " (host memory; % BW not shown for the GPU)" : "");
            else
                printf("read bandwidth: not measured\n");
            if (o.tg && o.gpu && !o.full_logits)
                printf("tg: greedy token by th_get_argmax, argmax taken on the GPU (logits_argmax_only: 4 bytes a step copied back)\n");
            else if (o.tg)
                printf("tg: greedy token by th_get_argmax, a host scan of the full logits row (%.0f KiB a step%s)\n",
                       th_model_n_vocab(R.m) * 4.0 / 1024, o.gpu ? " copied back from the GPU" : "");
            if (seen.hi > 0)
                printf("read bandwidth before each tg repetition: %.2f-%.2f GB/s (best of %d); %% BW = median of "
                       "each repetition's GB/s over the one before it\n", seen.lo, seen.hi, BW_REP_PASSES);
        }
    }
    if (s) rc = cli_fail("bench", s);
    bw_close(&meter);
    free(R.tok);
    th_context_free(R.ctx);
    th_model_free(R.m);
    return rc;
}
