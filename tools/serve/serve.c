/* serve.c — `theseus serve`: an OpenAI-compatible HTTP server. Parses the
 * command line, starts the HTTP daemon first (so /health answers "loading"),
 * loads the model, starts the scheduler, then waits for SIGINT/SIGTERM and
 * shuts down in order: scheduler (outstanding jobs fail cleanly), HTTP, model. */
#include "serve.h"
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: theseus serve -m MODEL [options]\n"
               "  -m, --model FILE       GGUF model\n"
               "  --host ADDR            address to bind (default 127.0.0.1: loopback only)\n"
               "  --port N               TCP port (default 8080)\n"
               "  --parallel N           sequences decoded together (default 4)\n"
               "  -c, --ctx N            KV cache tokens over all sequences (default 4096);\n"
               "                         each sequence may hold ctx/parallel tokens\n"
               "  -b, --batch N          tokens per forward pass (default 256, with --gpu 1024);\n"
               "                         long prompts are fed in chunks so running streams keep going\n"
               "  -t, --threads N        threads (default: all cores)\n"
               "  --gpu                  run the model on the GPU (CUDA build)\n"
               "  --gpu-layers SPEC      some layers on the GPU: N (the last N; -ngl N the same) or\n"
               "                         ranges 0-11:cpu,12-23:gpu (docs/hybrid.md)\n"
               "  --queue N              requests that may wait for a slot (default 64); more get 503\n"
               "  --api-key KEY          require Authorization: Bearer KEY (all but /health)\n"
               "  --api-key-file FILE    the same, the key read from FILE's first line\n"
               "  --alias NAME           model id reported by /v1/models (default: file name)\n"
               "  --max-body BYTES       largest request body (default 8 MiB)\n"
               "  --timeout S            a request (head and body) must arrive within S seconds of the\n"
               "                         connection (or the previous answer); bytes trickling in do\n"
               "                         not extend it (default 60)\n"
               "  --max-conns N          connections served at once (default 256; beyond: the oldest idle\n"
               "                         one is closed, else 503; /health and /metrics have 16 more)\n"
               "  --max-conns-per-ip N   connections from one address (default 64; 0 = no cap)\n"
               "  --mem-budget BYTES     request bodies, parsed JSON and chat-template renders in\n"
               "                         flight, all requests together (default 1 GiB); beyond: 503\n"
               "  --no-mmap              read the model into memory (a change of the file on disk\n"
               "                         cannot hurt then; mapped, a changed file fails the model)\n"
               "  --precision-file FILE  live precision (docs/precision.md): FILE is re-read when it changes\n"
               "                         (at most once a second, between steps); changed tensors are\n"
               "                         re-quantized from --source SOURCE.gguf in the background and\n"
               "                         swapped in between two steps; GET /precision shows the assignment\n"
               "  -v, --verbose          log requests and load progress\n");
    cli_spec_usage(f);
    fprintf(f, "                         (per request: \"draft_max\": -1 off, 0 the server's, K a cap;\n"
               "                         /metrics: theseus_spec_*)\n");
}

static char *read_key_file(const char *path) {
    size_t len;
    char *s = cli_read_file(path, &len);
    if (!s) return NULL;
    s[strcspn(s, "\r\n")] = 0;
    return s;
}

/* Returns 0 ok, 1 help shown, 2 usage error. */
static cli_spec g_spec;          /* --spec / --draft / --draft-layers */

static int parse_args(int argc, char **argv, srv_config *c, char **key_buf) {
    *c = (srv_config){ .host = "127.0.0.1", .port = 8080, .parallel = 4, .ctx = 4096, .batch = 0,
                       .queue = 64, .timeout_s = 60, .max_body = 8u << 20,
                       .max_conns = 256, .max_conns_per_ip = 64, .mem_budget = (size_t)1 << 30 };
    const char *cmd = "serve";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) { c->verbose = true; continue; }
        if (!strcmp(a, "--gpu")) { c->gpu = true; continue; }
        int sa = cli_spec_arg(cmd, a, v, &g_spec);
        if (sa < 0) return 2;
        if (sa > 0) { i += sa - 1; if (g_spec.p.kind != TH_SPEC_NONE) c->spec = &g_spec; continue; }
        if (!v) { fprintf(stderr, "theseus serve: unknown or incomplete option '%s'\n", a); return 2; }
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) c->model_path = v;
        else if (!strcmp(a, "--host")) c->host = v;
        else if (!strcmp(a, "--precision-file")) c->precision_file = v;
        else if (!strcmp(a, "--alias")) c->alias = v;
        else if (!strcmp(a, "--api-key")) c->api_key = v;
        else if (!strcmp(a, "--api-key-file")) {
            if (!(*key_buf = read_key_file(v))) { fprintf(stderr, "theseus serve: cannot read the API key file '%s'\n", v); return 2; }
            c->api_key = *key_buf;
        }
        else if (!strcmp(a, "--port")) { if (!cli_int(cmd, a, v, 0, 65535, &l)) return 2; c->port = (int)l; }
        else if (!strcmp(a, "--parallel")) { if (!cli_int(cmd, a, v, 1, 256, &l)) return 2; c->parallel = (int)l; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (!cli_int(cmd, a, v, 64, 1 << 24, &l)) return 2; c->ctx = (int)l; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) { if (!cli_int(cmd, a, v, 1, 8192, &l)) return 2; c->batch = (int)l; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_int(cmd, a, v, 1, 1024, &l)) return 2; c->threads = (int)l; }
        else if (!strcmp(a, "--queue")) { if (!cli_int(cmd, a, v, 1, 1 << 16, &l)) return 2; c->queue = (int)l; }
        else if (!strcmp(a, "--timeout")) { if (!cli_int(cmd, a, v, 1, 86400, &l)) return 2; c->timeout_s = (int)l; }
        else if (!strcmp(a, "--max-body")) { if (!cli_int(cmd, a, v, 1024, 1L << 32, &l)) return 2; c->max_body = (size_t)l; }
        else if (!strcmp(a, "--max-conns")) { if (!cli_int(cmd, a, v, 1, 1 << 16, &l)) return 2; c->max_conns = (int)l; }
        else if (!strcmp(a, "--max-conns-per-ip")) { if (!cli_int(cmd, a, v, 0, 1 << 16, &l)) return 2; c->max_conns_per_ip = (int)l; }
        else if (!strcmp(a, "--mem-budget")) { if (!cli_int(cmd, a, v, 1 << 20, 1L << 40, &l)) return 2; c->mem_budget = (size_t)l; }
        else { fprintf(stderr, "theseus serve: unknown option '%s'\n", a); return 2; }
    }
    if (!c->model_path) { usage(stderr); return 2; }
    /* The default batch: 256 tokens on the CPU (a longer prefill step stalls the running
     * streams for longer), 1024 with --gpu — H200, 8B Q4_0, --parallel 16 and 16 streaming
     * clients of 128-token prompts (bench/serve-bench.py, 2026-12-04): aggregate decode
     * 2,452 / 2,632 / 2,880 tok/s and TTFT median 169 / 155 / 128 ms at -b 256 / 512 / 1024. */
    if (c->batch == 0) c->batch = c->gpu ? 1024 : 256;
    if (c->api_key && !*c->api_key) { fprintf(stderr, "theseus serve: the API key is empty\n"); return 2; }
    return 0;
}

static void set_model_id(srv_server *S) {
    const char *id = S->cfg->alias;
    if (!id) {
        id = strrchr(S->cfg->model_path, '/');
        id = id ? id + 1 : S->cfg->model_path;
    }
    snprintf(S->model_id, sizeof S->model_id, "%s", id);
}

int cmd_serve(int argc, char **argv) {
    srv_config cfg;
    char *key_buf = NULL;
    int rc = parse_args(argc, argv, &cfg, &key_buf);
    if (rc) { free(key_buf); return rc == 1 ? 0 : rc; }

    /* signals: handled by sigwait in this thread only; a broken pipe is an error code */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv_server S = { .cfg = &cfg };
    atomic_init(&S.state, 0);
    set_model_id(&S);
    char port[16];
    snprintf(port, sizeof port, "%d", cfg.port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai = NULL;
    int gai = getaddrinfo(cfg.host, port, &hints, &ai);
    if (gai) { fprintf(stderr, "theseus serve: cannot resolve --host '%s': %s\n", cfg.host, gai_strerror(gai)); free(key_buf); return 1; }
    struct MHD_Daemon *d = http_start(&S, ai->ai_addr, ai->ai_family == AF_INET6);
    freeaddrinfo(ai);
    if (!d) { fprintf(stderr, "theseus serve: cannot listen on %s:%d (in use? not an address of this host?)\n", cfg.host, cfg.port); free(key_buf); return 1; }
    fprintf(stderr, "theseus serve: listening on http://%s:%d (loading %s)\n", cfg.host, cfg.port, cfg.model_path);

    th_model_params mp = cli_model_params();
    mp.verbose = cfg.verbose;
    th_status s = th_model_load(cfg.model_path, &mp, &S.model);
    if (!s && cfg.spec) s = cli_spec_open(cfg.spec, cfg.verbose);
    if (!s && cfg.precision_file && !mp.source_path)
        s = th_set_error(TH_ERR_ARG, "--precision-file needs --source SOURCE.gguf");
    if (!s) s = serve_precision_start(S.model, cfg.precision_file, mp.source_path, cfg.threads);
    if (!s) s = sched_start(S.model, &cfg, &S.sched);
    if (s) {
        fprintf(stderr, "theseus serve: %s; /health reports the error, completions get 503\n", th_last_error());
        atomic_store(&S.state, 2);
    } else {
        guard_install(&S);
        atomic_store(&S.state, 1);
        fprintf(stderr, "theseus serve: ready: %s, %d sequences of up to %d tokens\n", th_model_desc(S.model),
                sched_parallel(S.sched), sched_slot_ctx(S.sched));
    }

    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "theseus serve: signal %d, shutting down\n", sig);
    atomic_store(&S.state, 2);
    sched_stop(S.sched);   /* outstanding jobs fail: their clients get an error (and [DONE]) */
    for (int i = 0; i < 50 && atomic_load(&S.inflight) > 0; i++) usleep(100 * 1000);
    http_stop(d);
    sched_free(S.sched);
    cli_spec_close(&g_spec);
    serve_precision_free();
    th_model_free(S.model);
    free(key_buf);
    return 0;
}
