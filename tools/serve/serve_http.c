/* serve_http.c — the HTTP side of `theseus serve`, on libmicrohttpd with one
 * thread per connection behind our own front door (serve_conn.c: accept loop,
 * request-head checks, connection caps, deadlines): framing checks for the
 * requests of kept-alive connections, the API-key check (SHA-256 digests,
 * before any routing), routing, body size limit (checked before the body is
 * read), the shared memory budget for request bodies, non-streamed answers
 * (the thread waits for its job) and SSE streams (a content-reader callback
 * that waits for new text). While waiting it watches the socket: a client that
 * goes away has its job cancelled at once, which frees its KV blocks. It also
 * watches the model (serve_guard.c): once its file changed or its mapping
 * faulted, what is in flight ends with an error and new requests get 503. */
#include "serve.h"
#include "serve_conn.h"
#include "serve_frame.h"
#include <microhttpd.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct conn_state {
    char *body;
    size_t n, cap;
    size_t charged;               /* bytes of the memory budget this body holds */
    bool too_big, over_budget, answered, counted;
} conn_state;

static srv_gate *g_gate_of_daemon;   /* one server per process */

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
    srv_gate *const *slot = cls;
    gate_notify(*slot, c, socket_context, toe);
}

/* ---------------------------------------------------------------- replies */

static enum MHD_Result reply_ex(struct MHD_Connection *c, int status, char *body, const char *type, bool close) {
    if (!body) { status = 500; body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}"); }
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", type);
    if (close) MHD_add_response_header(r, "Connection", "close");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, char *body, const char *type) {
    return reply_ex(c, status, body, type, false);
}

static enum MHD_Result reply_json(struct MHD_Connection *c, int status, char *body) {
    return reply(c, status, body, "application/json");
}

static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *msg) {
    return reply_json(c, status, resp_error(status, msg));
}

/* ---------------------------------------------------------------- client liveness */

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* True when the peer closed or reset the connection (pipelined bytes are not a close). */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char b;
        ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
}

/* Waits until the job changes past *seen (or the model is lost: the caller
 * checks guard_model_lost). False if the client went away (checked every 100 ms
 * while nothing happens, and at every change). */
static bool wait_change(srv_job *j, uint64_t *seen, int fd) {
    pthread_mutex_lock(&j->mu);
    while (j->version == *seen) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT && j->version == *seen) {
            pthread_mutex_unlock(&j->mu);
            if (client_gone(fd)) return false;
            if (guard_model_lost()) return true;
            pthread_mutex_lock(&j->mu);
        }
    }
    *seen = j->version;
    pthread_mutex_unlock(&j->mu);
    /* a running job changes more often than the 100 ms timeout: look at every change */
    return !client_gone(fd);
}

/* ---------------------------------------------------------------- streaming */

typedef struct stream {
    srv_server *S;
    srv_job *job;
    int fd;
    uint64_t seen;
    char *buf;
    size_t n, cap, off;
    size_t sent[SRV_MAX_N], lp_sent[SRV_MAX_N];
    bool first_sent[SRV_MAX_N], fin_sent[SRV_MAX_N];
    bool ended;
} stream;

static void stream_error(stream *st, int http, const char *msg) {
    char *e = resp_error(http, msg);
    if (e) { buf_append(&st->buf, &st->n, &st->cap, "data: ", 6); buf_append(&st->buf, &st->n, &st->cap, e, strlen(e));
             buf_append(&st->buf, &st->n, &st->cap, "\n\n", 2); free(e); }
    buf_append(&st->buf, &st->n, &st->cap, "data: [DONE]\n\n", 14);
    st->ended = true;
}

/* Appends to st->buf whatever the job has that was not sent (caller holds mu). */
static void stream_fill(stream *st) {
    srv_job *j = st->job;
    if (guard_model_lost()) {   /* what was computed since is garbage: end with an error */
        atomic_store(&j->cancelled, true);
        stream_error(st, 503, guard_reason());
        return;
    }
    if (j->err_http) {
        char *e = resp_error(j->err_http, j->err_msg);
        if (e) { buf_append(&st->buf, &st->n, &st->cap, "data: ", 6); buf_append(&st->buf, &st->n, &st->cap, e, strlen(e));
                 buf_append(&st->buf, &st->n, &st->cap, "\n\n", 2); free(e); }
        buf_append(&st->buf, &st->n, &st->cap, "data: [DONE]\n\n", 14);
        st->ended = true;
        return;
    }
    if (j->state == JOB_QUEUED) return;
    bool all = true;
    for (int c = 0; c < j->p.n; c++) {
        if (st->fin_sent[c]) continue;
        bool fin = j->choices[c].finish != FINISH_NONE;
        resp_stream_delta(st->S, j, c, &st->sent[c], &st->lp_sent[c], j->p.chat && !st->first_sent[c], fin, &st->buf, &st->n, &st->cap);
        st->first_sent[c] = true;
        st->fin_sent[c] = fin;
        all = all && fin;
    }
    if (all && j->state == JOB_DONE) {
        if (j->p.include_usage) resp_stream_usage(st->S, j, &st->buf, &st->n, &st->cap);
        buf_append(&st->buf, &st->n, &st->cap, "data: [DONE]\n\n", 14);
        st->ended = true;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    stream *st = cls;
    while (st->off == st->n) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        st->n = st->off = 0;
        pthread_mutex_lock(&st->job->mu);
        stream_fill(st);
        pthread_mutex_unlock(&st->job->mu);
        if (st->n == 0 && !st->ended && !wait_change(st->job, &st->seen, st->fd)) {
            atomic_store(&st->job->cancelled, true);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t k = st->n - st->off < max ? st->n - st->off : max;
    memcpy(out, st->buf + st->off, k);
    st->off += k;
    return (ssize_t)k;
}

static void stream_free(void *cls) {
    stream *st = cls;
    if (!st->ended) atomic_store(&st->job->cancelled, true);   /* the client left early */
    job_release(st->job);
    free(st->buf);
    free(st);
}

static enum MHD_Result start_stream(struct MHD_Connection *c, srv_server *S, srv_job *j) {
    stream *st = calloc(1, sizeof *st);
    if (!st) { atomic_store(&j->cancelled, true); job_release(j); return reply_error(c, 500, "out of memory"); }
    st->S = S;
    st->job = j;
    st->fd = conn_fd(c);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!r) { stream_free(st); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---------------------------------------------------------------- endpoints */

static enum MHD_Result do_completion(struct MHD_Connection *c, srv_server *S, conn_state *cs, bool chat) {
    int http = 400;
    char msg[512];
    atomic_fetch_add(&g_metrics.requests, 1);
    atomic_fetch_add(&S->inflight, 1);   /* until completed() */
    cs->counted = true;
    if (!guard_check(S)) { atomic_fetch_add(&g_metrics.requests_failed, 1); return reply_error(c, 503, guard_reason()); }
    srv_job *j = req_parse_completion(S, cs->body, cs->n, chat, &http, msg, sizeof msg);
    if (!j) { atomic_fetch_add(&g_metrics.requests_failed, 1); return reply_error(c, http, msg); }
    if ((http = sched_submit(S->sched, j, msg, sizeof msg))) {
        job_release(j);
        atomic_fetch_add(&g_metrics.requests_failed, 1);
        return reply_error(c, http, msg);
    }
    atomic_fetch_add(&g_metrics.prompt_tokens, (unsigned long long)j->n_prompt);
    /* the idle timeout guards the request phase (slow clients); while the job
     * waits and runs we watch the socket ourselves. Restored in completed(). */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    if (j->p.stream) return start_stream(c, S, j);
    uint64_t seen = 0;
    int fd = conn_fd(c);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        bool done = j->state == JOB_DONE;
        pthread_mutex_unlock(&j->mu);
        if (done || guard_model_lost()) break;
        if (!wait_change(j, &seen, fd)) {   /* client gone: cancel, free its slots, drop the connection */
            atomic_store(&j->cancelled, true);
            job_release(j);
            return MHD_NO;
        }
    }
    if (guard_model_lost()) {   /* the weights turned to zeros under this job: its text is garbage */
        atomic_store(&j->cancelled, true);
        job_release(j);
        atomic_fetch_add(&g_metrics.requests_failed, 1);
        return reply_error(c, 503, guard_reason());
    }
    enum MHD_Result r = j->err_http ? reply_error(c, j->err_http, j->err_msg) : reply_json(c, 200, resp_completion(S, j));
    job_release(j);
    return r;
}

static enum MHD_Result do_models(struct MHD_Connection *c, srv_server *S) {
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", S->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "theseus");
    cJSON_AddItemToArray(d, m);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return reply_json(c, 200, s);
}

static enum MHD_Result do_health(struct MHD_Connection *c, srv_server *S) {
    guard_check(S);
    int st = atomic_load(&S->state);
    const char *name = st == 1 ? "ok" : st == 0 ? "loading" : "error";
    char body[96];
    snprintf(body, sizeof body, "{\"status\":\"%s\"}", name);
    return reply_json(c, st == 1 ? 200 : 503, strdup(body));
}

static bool authorized(struct MHD_Connection *c, const srv_config *cfg) {
    if (!cfg->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    return auth_key_equal(h, strlen(h), cfg->api_key);
}

typedef enum { R_NONE, R_CHAT, R_COMPLETION, R_MODELS, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE, R_PRECISION } route;

static route find_route(const char *url, const char *method, bool *method_ok) {
    static const struct { const char *path, *method; route r; } table[] = {
        { "/v1/chat/completions", "POST", R_CHAT }, { "/chat/completions", "POST", R_CHAT },
        { "/v1/completions", "POST", R_COMPLETION }, { "/completions", "POST", R_COMPLETION },
        { "/v1/models", "GET", R_MODELS }, { "/models", "GET", R_MODELS },
        { "/health", "GET", R_HEALTH }, { "/metrics", "GET", R_METRICS },
        { "/tokenize", "POST", R_TOKENIZE }, { "/detokenize", "POST", R_DETOKENIZE },
        { "/precision", "GET", R_PRECISION },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(url, table[i].path)) { *method_ok = !strcmp(method, table[i].method); return table[i].r; }
    *method_ok = false;
    return R_NONE;
}

static enum MHD_Result dispatch(struct MHD_Connection *c, srv_server *S, conn_state *cs, route r) {
    int http = 200;
    char *out;
    switch (r) {
    case R_HEALTH: return do_health(c, S);
    case R_METRICS: return reply(c, 200, serve_precision_metrics(metrics_render()), "text/plain; version=0.0.4");
    default: break;
    }
    if (atomic_load(&S->state) != 1)
        return reply_error(c, 503, atomic_load(&S->state) == 0 ? "the model is loading"
                                   : guard_model_lost() ? guard_reason() : "the model failed to load");
    switch (r) {
    case R_MODELS: return do_models(c, S);
    case R_CHAT: return do_completion(c, S, cs, true);
    case R_COMPLETION: return do_completion(c, S, cs, false);
    case R_TOKENIZE: out = req_tokenize(S, cs->body, cs->n, &http); return reply_json(c, http, out);
    case R_DETOKENIZE: out = req_detokenize(S, cs->body, cs->n, &http); return reply_json(c, http, out);
    case R_PRECISION: out = serve_precision_json(&http); return reply_json(c, http, out);
    default: return reply_error(c, 404, "no such endpoint");
    }
}

/* Framing of a request libmicrohttpd parsed itself (the later requests of a
 * kept-alive connection; the first one was checked byte by byte at the gate). */
static enum MHD_Result frame_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    frame_field(cls, key, strlen(key), value ? value : "", value ? strlen(value) : 0);
    return MHD_YES;
}

static bool framing_ok(struct MHD_Connection *c, const char *version, uint64_t max_body, frame_result *fr) {
    frame_state st;
    frame_init(&st, version && !strcmp(version, "HTTP/1.0"));
    MHD_get_connection_values(c, MHD_HEADER_KIND, frame_header, &st);
    frame_finish(&st, max_body, fr);
    return fr->status == 0;
}

static enum MHD_Result too_big(struct MHD_Connection *c, const srv_server *S) {
    char msg[128];
    snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes", S->cfg->max_body);
    return reply_error(c, 413, msg);
}

/* First call: the head is in, the body is not. Refuses early what it can: bad
 * framing (400, connection closed), a missing or wrong key (401, before any
 * routing, so routes cannot be probed without it), 404, 405, a declared body
 * over the limit (413). MHD_YES with no response: go on reading the body. */
static enum MHD_Result first_call(struct MHD_Connection *c, srv_server *S, conn_state *cs, const char *url,
                                  const char *method, const char *version) {
    gate_request_begin(c);
    frame_result fr;
    if (!framing_ok(c, version, S->cfg->max_body, &fr)) {
        cs->answered = true;
        gate_request_working(c);
        return reply_ex(c, fr.status, resp_error(fr.status, fr.msg), "application/json", true);
    }
    bool method_ok;
    route r = find_route(url, method, &method_ok);
    enum MHD_Result res = MHD_YES;
    if (r != R_HEALTH && !authorized(c, S->cfg))
        res = reply_error(c, 401, "invalid or missing API key (Authorization: Bearer KEY)");
    else if (r == R_NONE) res = reply_error(c, 404, "no such endpoint");
    else if (!method_ok) res = reply_error(c, 405, "method not allowed on this endpoint");
    else if (fr.content_length > S->cfg->max_body) res = too_big(c, S);
    else return MHD_YES;
    cs->answered = true;
    gate_request_working(c);
    return res;
}

/* Body bytes: kept while under the size limit and the shared memory budget. */
static void take_body(srv_server *S, conn_state *cs, const char *upload, size_t n) {
    if (cs->answered || cs->too_big || cs->over_budget) return;
    if (cs->n + n > S->cfg->max_body) cs->too_big = true;
    else {
        size_t need = cs->n + n + 1 > cs->cap ? (cs->n + n + 1) * 2 : cs->cap;   /* buf_append's growth */
        if (need < 256) need = 256;
        if (need > cs->charged && !th_mem_budget_take(S->budget, need - cs->charged)) cs->over_budget = true;
        else {
            if (need > cs->charged) cs->charged = need;
            if (!buf_append(&cs->body, &cs->n, &cs->cap, upload, n)) cs->over_budget = true;
        }
    }
    if (cs->too_big || cs->over_budget) {   /* keep nothing more of it */
        free(cs->body);
        cs->body = NULL;
        cs->n = cs->cap = 0;
        th_mem_budget_give(S->budget, cs->charged);
        cs->charged = 0;
    }
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    srv_server *S = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        return first_call(c, S, cs, url, method, version);
    }
    if (*upload_size) {
        take_body(S, cs, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->answered) return MHD_YES;
    cs->answered = true;
    gate_request_working(c);
    if (cs->too_big) return too_big(c, S);
    if (cs->over_budget)
        return reply_error(c, 503, "the server's memory budget for requests in flight (--mem-budget) is exhausted; "
                                   "try again later");
    bool method_ok;
    route r = find_route(url, method, &method_ok);
    enum MHD_Result res = dispatch(c, S, cs, r);
    if (S->cfg->verbose) fprintf(stderr, "theseus serve: %s %s\n", method, url);
    return res;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc) {
    conn_state *cs = *con_cls;
    srv_server *S = cls;
    gate_request_end(c);
    if (!cs) return;
    if (cs->counted) atomic_fetch_sub(&S->inflight, 1);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)S->cfg->timeout_s);
    th_mem_budget_give(S->budget, cs->charged);
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* libmicrohttpd does not listen itself (MHD_USE_NO_LISTEN_SOCKET): the gate
 * accepts and hands connections over once their head is in. Its own limit is
 * above the gate's caps plus the reserve, so it never refuses one. */
struct MHD_Daemon *http_start(srv_server *S, const struct sockaddr *addr, bool ipv6) {
    if (!S->budget && th_mem_budget_new(S->cfg->mem_budget ? S->cfg->mem_budget : (size_t)1 << 30, &S->budget))
        return NULL;
    int lfd = gate_listen(addr, ipv6);
    if (lfd < 0) return NULL;
    int max_conns = S->cfg->max_conns > 0 ? S->cfg->max_conns : 256;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC | (ipv6 ? MHD_USE_IPv6 : 0);
    static srv_gate *gate_slot;   /* filled right after the daemon starts; read by gate_notify through cls */
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handler, S,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)S->cfg->timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(max_conns + GATE_RESERVE + 16),
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
                            MHD_OPTION_NOTIFY_COMPLETED, completed, S,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, &gate_slot,
                            MHD_OPTION_END);
    if (!d) { close(lfd); return NULL; }
    gate_slot = gate_start(S, d, lfd);
    if (!gate_slot) { MHD_stop_daemon(d); close(lfd); return NULL; }
    g_gate_of_daemon = gate_slot;
    return d;
}

void http_stop(struct MHD_Daemon *d) {
    gate_stop(g_gate_of_daemon);
    if (d) MHD_stop_daemon(d);
    gate_free(g_gate_of_daemon);
    g_gate_of_daemon = NULL;
}
