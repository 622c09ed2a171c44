/* serve.h — shared types of `theseus serve`: the server configuration, a job
 * (one HTTP completion request and its growing output, shared between an HTTP
 * connection thread and the scheduler thread), the scheduler and the metrics.
 *
 *   serve.c        command line, start-up, shutdown
 *   serve_http.c   libmicrohttpd handler: routing, body limits, auth, SSE
 *   serve_req.c    JSON request parsing and validation into a job
 *   serve_tools.c  tools / tool_choice, tool-call history, teaching templates that ignore tools
 *   serve_resp.c   JSON responses, stream chunks, errors
 *   serve_sched.c  jobs onto the runtime (src/runtime/: continuous batching) and back
 *   serve_metrics.c counters, histograms, Prometheus text
 */
#ifndef TH_SERVE_H
#define TH_SERVE_H

#include "../cli.h"
#include <cJSON.h>
#include <pthread.h>
#include <stdatomic.h>

/* Limits on what a request may ask for. */
#define SRV_MAX_N            16        /* choices per request (also ≤ --parallel) */
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_MAX_STOP         4         /* stop strings, as OpenAI */
#define SRV_MAX_STOP_LEN     256       /* bytes per stop string */
#define SRV_MAX_BIAS         1024      /* logit_bias entries */

typedef struct srv_config {
    const char *model_path, *host, *api_key, *alias;
    int port, parallel, ctx, batch, threads, queue, timeout_s;
    size_t max_body;
    bool verbose, gpu;
    int max_conns, max_conns_per_ip;   /* connection caps (serve_conn.c); 0 per ip: no cap */
    size_t mem_budget;                 /* bytes of request bodies, parsed JSON and template renders in flight */
    cli_spec *spec;                    /* speculative decoding (--spec, --draft, --draft-layers), NULL: none */
    const char *precision_file;        /* --precision-file: live precision (serve_precision.c), or NULL */
} srv_config;

/* Live precision (serve_precision.c): the handle, the runtime hook, GET /precision, /metrics lines. */
th_status serve_precision_start(th_model *m, const char *file, const char *source, int threads);
void serve_precision_hook(th_runtime_params *rp);
void serve_precision_free(void);
char *serve_precision_json(int *http);
char *serve_precision_metrics(char *body);

/* ---------------------------------------------------------------- jobs */

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };
enum { FINISH_NONE = 0, FINISH_STOP, FINISH_LENGTH };

typedef struct srv_logprob {      /* one generated token's log-probabilities */
    th_token token;
    float logprob;
    int32_t n_top;
    th_token_logprob top[SRV_MAX_TOP_LOGPROBS];
    uint32_t text_offset;         /* where the token's text starts in the choice's text */
} srv_logprob;

typedef struct srv_choice {
    char *text;                   /* emitted text (stop strings cut off) */
    size_t n, cap;
    size_t ready;                 /* bytes of text safe to send (complete UTF-8, no stop prefix) */
    srv_logprob *lp;              /* per generated token, when logprobs were asked */
    size_t n_lp, cap_lp;
    int32_t n_tokens;             /* sampled tokens (EOG excluded) */
    int finish;                   /* FINISH_* */
} srv_choice;

typedef struct srv_params {       /* what the request asked for, validated */
    bool chat, stream, include_usage, echo;
    int32_t max_tokens, n, top_logprobs;
    bool logprobs;
    th_sampler_params sp;
    bool seed_given;
    int32_t n_stop;
    char *stop[SRV_MAX_STOP];
    int32_t n_bias;
    th_token bias_tok[SRV_MAX_BIAS];
    float bias_val[SRV_MAX_BIAS];
    /* structured output (docs/grammar.md): `grammar`, `json_schema`, `response_format`, or
     * tool_choice required / a named function; NULL: unconstrained */
    th_grammar *grammar;
    th_tool_format tools;         /* chat with `tools` (tool_choice not "none"): calls are parsed out of
                                   * the text in this format (TH_TOOLS_NONE: no tools) */
    int32_t draft_max;            /* "draft_max": -1 no speculative decoding, 0 the server's, > 0 a cap */
} srv_params;

/* Frees what srv_params owns (stop strings, the grammar). */
void req_params_clear(srv_params *p);

typedef struct srv_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;                     /* HTTP side + scheduler */
    srv_params p;
    th_token *prompt;
    int32_t n_prompt;
    char id[40];
    int64_t created;
    double t_arrive;              /* monotonic seconds */
    /* written by the scheduler under mu */
    int state;                    /* JOB_* */
    int err_http;                 /* != 0: failed with this status */
    char err_msg[256];
    srv_choice *choices;          /* p.n of them */
    uint64_t version;             /* bumped on every change (wakes waiters) */
    atomic_bool cancelled;        /* set by the HTTP side */
} srv_job;

srv_job *job_new(void);
void job_release(srv_job *j);    /* drops one reference; frees at zero */
/* Scheduler side: mark the job failed (locks mu, wakes waiters). */
void job_fail(srv_job *j, int http, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- scheduler */

typedef struct srv_sched srv_sched;

th_status sched_start(th_model *m, const srv_config *cfg, srv_sched **out);
/* Hands a job to the scheduler (takes a reference). Returns 0, or an HTTP
 * status (503 when the queue is full or the server is stopping) with msg set. */
int sched_submit(srv_sched *s, srv_job *j, char *msg, size_t cap);
void sched_stop(srv_sched *s);    /* joins the thread, fails outstanding jobs; submits get 503 */
void sched_free(srv_sched *s);
int32_t sched_slot_ctx(const srv_sched *s);   /* tokens one sequence may hold */
int32_t sched_parallel(const srv_sched *s);

/* ---------------------------------------------------------------- metrics */

typedef struct srv_metrics {
    atomic_ullong requests, requests_failed, prompt_tokens, gen_tokens;
    atomic_int queue_depth, active_seqs;
    atomic_uint kv_used, kv_total;
    atomic_ullong spec_drafted, spec_accepted, spec_rounds;   /* the runtime's speculative counters */
} srv_metrics;

extern srv_metrics g_metrics;
void metrics_observe_ttft(double seconds);
void metrics_observe_token(double seconds);
char *metrics_render(void);       /* malloc'd Prometheus text */

/* ---------------------------------------------------------------- requests and responses */

typedef struct srv_server {      /* what the HTTP layer needs */
    const srv_config *cfg;
    th_model *model;
    srv_sched *sched;
    atomic_int state;             /* 0 loading, 1 ok, 2 error */
    atomic_int inflight;          /* completion requests not yet fully answered */
    char model_id[128];
    th_mem_budget *budget;        /* cfg->mem_budget, shared by all requests (serve_http.c) */
} srv_server;

/* Parses a /v1/chat/completions (chat = true) or /v1/completions body into a
 * new job (prompt tokenized, limits checked). Returns NULL with *http and msg set. */
srv_job *req_parse_completion(srv_server *S, const char *body, size_t len, bool chat, int *http, char *msg, size_t cap);

/* Response bodies (malloc'd JSON text). */
char *resp_error(int http, const char *msg);
char *resp_completion(srv_server *S, srv_job *j);             /* whole response, job done */
/* Stream chunk(s) for what choice c has ready beyond *sent bytes / *lp_sent tokens;
 * appends "data: ...\n\n" events to *out. first: include the role delta. */
bool resp_stream_delta(srv_server *S, srv_job *j, int c, size_t *sent, size_t *lp_sent, bool first, bool finish,
                       char **out, size_t *n, size_t *cap);
bool resp_stream_usage(srv_server *S, srv_job *j, char **out, size_t *n, size_t *cap);
bool buf_append(char **b, size_t *n, size_t *cap, const char *s, size_t len);

/* serve_tools.c: `tools` / `tool_choice` of a chat request (see the file's comment). */
#define SRV_MAX_TOOLS 128
enum { TOOLS_NONE = 0, TOOLS_AUTO, TOOLS_REQUIRED, TOOLS_NAMED };
typedef struct srv_tools {
    cJSON *tools;                 /* the request's tools (a copy) when tool_choice is not "none", else NULL */
    int choice;                   /* TOOLS_* */
    char name[128];               /* TOOLS_NAMED: the function */
    bool parallel;                /* parallel_tool_calls: true (the grammar then allows several calls) */
} srv_tools;
/* Each returns 0, or an HTTP status with msg set. */
int tools_parse(const cJSON *body, bool chat, srv_tools *t, char *msg, size_t cap);
/* A history message's tool_calls / tool_call_id / name into its clean copy c (message i). */
int tools_copy_message(const cJSON *m, cJSON *c, int i, char *msg, size_t cap);
/* For a template that ignores `tools`: the messages with the tools described in the
 * system message and earlier calls written out as <tool_call> text. NULL: out of memory. */
cJSON *tools_teach(const cJSON *msgs, const cJSON *tools);
/* tool_choice required / named: the grammar of a valid call in format f (else *out = NULL). */
int tools_grammar(const srv_tools *t, th_tool_format f, th_grammar **out, char *msg, size_t cap);
void tools_clear(srv_tools *t);

/* /tokenize and /detokenize bodies. */
char *req_tokenize(srv_server *S, const char *body, size_t len, int *http);
char *req_detokenize(srv_server *S, const char *body, size_t len, int *http);

double srv_now(void);
struct sockaddr;
struct MHD_Daemon *http_start(srv_server *S, const struct sockaddr *addr, bool ipv6);
void http_stop(struct MHD_Daemon *d);
void srv_random_hex(char *out, size_t n_hex);

/* ---------------------------------------------------------------- hardening (issue 27) */

/* serve_guard.c: a model file that changes under the server. guard_install (after
 * the model is loaded) catches SIGBUS on the model's mapping: the mapping becomes
 * zeros, the model counts as failed (/health "error", requests in flight end with
 * an error, new ones get 503). guard_check (before each admission, and by /health)
 * compares the file on disk with the one loaded; a change fails the model the same
 * way. Both leave the reason for guard_reason. */
void guard_install(srv_server *S);
bool guard_check(srv_server *S);          /* false: the model is failed */
bool guard_model_lost(void);              /* the mapping was lost (SIGBUS) or the file changed */
const char *guard_reason(void);

/* serve_auth.c: the API key compared as SHA-256 digests (time independent of
 * either length). */
void auth_sha256(const void *data, size_t n, uint8_t out[32]);
bool auth_key_equal(const char *given, size_t n_given, const char *key);

#endif
