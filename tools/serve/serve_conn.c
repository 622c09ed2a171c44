/* serve_conn.c — the front door (see serve_conn.h).
 *
 * One thread polls the listening socket and every connection still at the gate.
 * A connection's bytes are only peeked (MSG_PEEK) until the blank line that ends
 * its request head: libmicrohttpd reads them again once it has the connection.
 * SO_RCVLOWAT is raised past what was peeked, so an incomplete head wakes the
 * poll only when more bytes come (no busy loop). A trickling client thus costs
 * one descriptor and no thread, whatever its number; when the gate is full the
 * oldest waiting connection is dropped.
 *
 * Connections handed over are tracked (libmicrohttpd's connect/close
 * notifications) with their phase, so that the same thread can enforce
 * deadlines — a request's body must be in by its deadline (408, then the socket
 * is shut down, which ends libmicrohttpd's thread for it), a kept-alive
 * connection must send its next request head within the timeout — and the caps:
 * at most --max-conns handed over, at most --max-conns-per-ip from one address;
 * at a cap the oldest connection that is only waiting (idle between requests or
 * slow in sending its body) is closed to make room, /health and /metrics may use
 * GATE_RESERVE connections beyond the caps, and anything else gets 503. */
#include "serve_conn.h"
#include "serve_frame.h"
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { C_PENDING, C_LINGER, C_BODY, C_WORKING, C_IDLE, C_CLOSING };

typedef struct conn {
    int fd, state;
    bool reserved, mhd_known;
    uint8_t ip[16];
    struct sockaddr_storage addr;
    socklen_t alen;
    double since, deadline;          /* deadline 0: none */
    size_t drained;                  /* linger: bytes read and dropped */
    struct conn *prev, *next;        /* handed-over list */
} conn;

struct srv_gate {
    srv_server *S;
    struct MHD_Daemon *d;
    int lfd, wake[2];
    pthread_t th;
    double timeout;
    uint64_t max_body;
    int max_conns, max_per_ip;
    /* gate thread only */
    conn **wait;                     /* pending and lingering */
    size_t n_wait, max_wait;
    double listen_paused_until;
    char *peek;
    /* shared with libmicrohttpd's threads */
    pthread_mutex_t mu;
    conn *head;
    int n_normal, n_reserved;
};

static srv_gate *g_gate;   /* for the handler-side calls; one server per process */

/* ---------------------------------------------------------------- small helpers */

static const char *reason(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

size_t gate_error_response(int status, const char *msg, char *out, size_t cap) {
    char *body = resp_error(status, msg);
    int k = snprintf(out, cap, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", status, reason(status), body ? strlen(body) : 0, body ? body : "");
    free(body);
    return k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
}

static void send_error(int fd, int status, const char *msg) {
    char buf[1024];
    size_t n = gate_error_response(status, msg, buf, sizeof buf);
    if (send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* the client is gone: nothing to do */ }
}

static void set_lowat(int fd, int n) { setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &n, sizeof n); }

/* The client address as 16 bytes (IPv4 as IPv4-mapped IPv6). */
static void addr_key(const struct sockaddr_storage *a, uint8_t out[16]) {
    memset(out, 0, 16);
    if (a->ss_family == AF_INET) {
        out[10] = out[11] = 0xFF;
        memcpy(out + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
    } else if (a->ss_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
    }
}

int gate_listen(const struct sockaddr *addr, bool ipv6) {
    int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t len = ipv6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (bind(fd, addr, len) != 0 || listen(fd, 511) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* ---------------------------------------------------------------- the waiting set (gate thread) */

static void wait_remove(srv_gate *g, size_t i) {
    conn *c = g->wait[i];
    close(c->fd);
    free(c);
    g->wait[i] = g->wait[--g->n_wait];
}

/* Answer (status != 0) and let the connection linger briefly so the answer is
 * read before the close (unread bytes at close would reset it). */
static void wait_refuse(srv_gate *g, conn *c, int status, const char *msg, double now) {
    set_lowat(c->fd, 1);
    if (status) send_error(c->fd, status, msg);
    shutdown(c->fd, SHUT_WR);
    c->state = C_LINGER;
    c->deadline = now + 1.0;
    (void)g;
}

static size_t oldest_pending(const srv_gate *g) {
    size_t best = g->n_wait;
    for (size_t i = 0; i < g->n_wait; i++)
        if (best == g->n_wait || g->wait[i]->since < g->wait[best]->since) best = i;
    return best;
}

/* ---------------------------------------------------------------- handed over (shared) */

static void link_conn(srv_gate *g, conn *c) {
    c->prev = NULL;
    c->next = g->head;
    if (g->head) g->head->prev = c;
    g->head = c;
    if (c->reserved) g->n_reserved++; else g->n_normal++;
}

static void unlink_conn(srv_gate *g, conn *c) {
    if (c->prev) c->prev->next = c->next; else g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->state != C_CLOSING) { if (c->reserved) g->n_reserved--; else g->n_normal--; }
}

/* Close a handed-over connection from outside libmicrohttpd (caller holds mu):
 * a 408 if it was sending a request, then shutdown, which makes its thread see
 * the end of the connection and close it. It stops counting at once. */
static void close_handed(srv_gate *g, conn *c, int status, const char *msg) {
    if (c->state == C_CLOSING) return;
    if (status && c->state == C_BODY) send_error(c->fd, status, msg);
    shutdown(c->fd, SHUT_RDWR);
    if (c->reserved) g->n_reserved--; else g->n_normal--;
    c->state = C_CLOSING;
}

/* The oldest handed-over connection that is only waiting on its client, among
 * the reserved ones or the others, from address ip if given (caller holds mu). */
static conn *evictable(srv_gate *g, const uint8_t *ip, bool reserved) {
    conn *best = NULL;
    for (conn *c = g->head; c; c = c->next) {
        if ((c->state != C_IDLE && c->state != C_BODY) || c->reserved != reserved) continue;
        if (ip && memcmp(c->ip, ip, 16)) continue;
        /* idle connections go first, then the slowest request */
        if (!best || (c->state == C_IDLE) > (best->state == C_IDLE) ||
            ((c->state == C_IDLE) == (best->state == C_IDLE) && c->since < best->since))
            best = c;
    }
    return best;
}

static int count_ip(const srv_gate *g, const uint8_t *ip) {
    int n = 0;
    for (const conn *c = g->head; c; c = c->next)
        if (c->state != C_CLOSING && !c->reserved && !memcmp(c->ip, ip, 16)) n++;
    return n;
}

/* A complete, acceptable head: hand the connection over if the caps allow
 * (making room if they do not), else 503. Returns false if c was refused. */
static bool admit(srv_gate *g, conn *c, const frame_result *fr, double now) {
    bool probe = !strcmp(fr->method, "GET") && (!strcmp(fr->path, "/health") || !strcmp(fr->path, "/metrics"));
    static const char *const evicted = "the request was not received in time (the connection made room for a newer one)";
    pthread_mutex_lock(&g->mu);
    bool ok = true;
    if (g->max_per_ip > 0 && count_ip(g, c->ip) >= g->max_per_ip) {
        conn *v = evictable(g, c->ip, false);
        if (v) close_handed(g, v, 408, evicted);
        else ok = false;
    }
    if (ok && g->n_normal >= g->max_conns) {
        conn *v = evictable(g, NULL, false);
        if (v) close_handed(g, v, 408, evicted);
        else ok = false;
    }
    if (!ok && probe) {   /* the reserve: beyond the caps, for health checks and scrapes only */
        conn *v = g->n_reserved >= GATE_RESERVE ? evictable(g, NULL, true) : NULL;
        if (v) close_handed(g, v, 0, NULL);
        if (g->n_reserved < GATE_RESERVE) { c->reserved = true; ok = true; }
    }
    if (ok) {
        c->state = C_BODY;
        c->since = now;
        link_conn(g, c);
    }
    pthread_mutex_unlock(&g->mu);
    if (!ok) return false;
    set_lowat(c->fd, 1);
    if (MHD_add_connection(g->d, c->fd, (const struct sockaddr *)&c->addr, c->alen) != MHD_YES) {
        /* libmicrohttpd closed the socket; forget c unless its close notification already did */
        pthread_mutex_lock(&g->mu);
        for (conn *x = g->head; x; x = x->next)
            if (x == c && !c->mhd_known) { unlink_conn(g, c); free(c); break; }
        pthread_mutex_unlock(&g->mu);
    }
    return true;
}

/* ---------------------------------------------------------------- events of the gate thread */

static void on_accept(srv_gate *g, double now) {
    for (int k = 0; k < 64; k++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(g->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                size_t o = oldest_pending(g);   /* free a descriptor, or wait a little */
                if (o < g->n_wait) wait_remove(g, o);
                else g->listen_paused_until = now + 0.1;
            }
            return;
        }
        if (g->n_wait >= g->max_wait) {
            size_t o = oldest_pending(g);
            if (o < g->n_wait) { send_error(g->wait[o]->fd, 408, "the request head was not received in time"); wait_remove(g, o); }
        }
        conn *c = calloc(1, sizeof *c);
        if (!c || g->n_wait >= g->max_wait) { free(c); close(fd); continue; }
        c->fd = fd;
        c->state = C_PENDING;
        c->addr = ss;
        c->alen = len;
        addr_key(&ss, c->ip);
        c->since = now;
        c->deadline = now + g->timeout;
        g->wait[g->n_wait++] = c;
    }
}

/* Readable pending connection i: is its head complete? Returns true if it
 * left the waiting set. */
static bool on_pending(srv_gate *g, size_t i, short revents, double now) {
    conn *c = g->wait[i];
    ssize_t r = recv(c->fd, g->peek, FRAME_HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (r <= 0) { wait_remove(g, i); return true; }
    frame_result fr;
    int v = frame_parse_head(g->peek, (size_t)r, g->max_body, &fr);
    if (v == 0) {
        if (revents & (POLLRDHUP | POLLHUP | POLLERR)) { wait_remove(g, i); return true; }   /* gave up */
        set_lowat(c->fd, (int)r + 1);
        return false;
    }
    if (v > 0 && fr.chunked && frame_scan_chunks(g->peek + fr.head_len, (size_t)r - fr.head_len, g->max_body, &fr) < 0)
        v = -1;   /* the sizes of the chunks already here (the rest: the deadline) */
    if (v < 0) { wait_refuse(g, c, fr.status, fr.msg, now); return false; }
    g->wait[i] = g->wait[--g->n_wait];   /* leaves the waiting set either way */
    if (!admit(g, c, &fr, now)) {
        g->wait[g->n_wait++] = c;
        wait_refuse(g, c, 503, "the server has too many open connections; try again later", now);
        return false;
    }
    return true;
}

static bool on_linger(srv_gate *g, size_t i) {
    conn *c = g->wait[i];
    char buf[16384];
    ssize_t r = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (r > 0 && (c->drained += (size_t)r) < (256u << 10)) return false;
    wait_remove(g, i);
    return true;
}

/* Deadlines of the waiting set and of handed-over connections. */
static void expire(srv_gate *g, double now) {
    for (size_t i = 0; i < g->n_wait;) {
        conn *c = g->wait[i];
        if (c->deadline > now) { i++; continue; }
        if (c->state == C_PENDING) { wait_refuse(g, c, 408, "the request head was not received in time", now); i++; }
        else wait_remove(g, i);
    }
    pthread_mutex_lock(&g->mu);
    for (conn *c = g->head; c; c = c->next)
        if ((c->state == C_BODY || c->state == C_IDLE) && c->deadline > 0 && c->deadline <= now)
            close_handed(g, c, 408, "the request was not received in time");
    pthread_mutex_unlock(&g->mu);
}

static void *gate_main(void *arg) {
    srv_gate *g = arg;
    struct pollfd *pf = malloc((g->max_wait + 2) * sizeof *pf);
    if (!pf) return NULL;
    for (;;) {
        double now = srv_now();
        size_t np = 0;
        pf[np++] = (struct pollfd){ .fd = g->wake[0], .events = POLLIN };
        bool listening = now >= g->listen_paused_until;
        pf[np++] = (struct pollfd){ .fd = listening ? g->lfd : -1, .events = POLLIN };
        size_t n_polled = g->n_wait;
        for (size_t i = 0; i < n_polled; i++) pf[np++] = (struct pollfd){ .fd = g->wait[i]->fd, .events = POLLIN | POLLRDHUP };
        int r = poll(pf, np, 100);
        if (r < 0 && errno != EINTR) break;
        if (pf[0].revents) break;   /* gate_stop */
        now = srv_now();
        /* walk back to front: a removal moves the last entry into the hole, one
         * that was already handled (its fd differs from the hole's pollfd) */
        for (size_t k = n_polled; k-- > 0;) {
            short ev = pf[2 + k].revents;
            if (!ev || k >= g->n_wait || g->wait[k]->fd != pf[2 + k].fd) continue;
            if (g->wait[k]->state == C_PENDING) on_pending(g, k, ev, now);
            else on_linger(g, k);
        }
        if (listening && (pf[1].revents & POLLIN)) on_accept(g, now);
        expire(g, now);
    }
    free(pf);
    return NULL;
}

/* ---------------------------------------------------------------- libmicrohttpd's side */

void gate_notify(void *cls, struct MHD_Connection *mc, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
    srv_gate *g = cls;
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        for (conn *c = g->head; c && ci; c = c->next)
            if (c->fd == ci->connect_fd && !c->mhd_known) { c->mhd_known = true; *socket_context = c; break; }
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conn *c = *socket_context;
        unlink_conn(g, c);
        free(c);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&g->mu);
}

static conn *conn_of(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *mc, int from_mask, int state, bool fresh_deadline) {
    srv_gate *g = g_gate;
    conn *c = g ? conn_of(mc) : NULL;
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->state != C_CLOSING && (from_mask & (1 << c->state))) {
        double now = srv_now();
        c->state = state;
        c->since = now;
        if (state == C_WORKING) c->deadline = 0;
        else if (fresh_deadline) c->deadline = now + g->timeout;
    }
    pthread_mutex_unlock(&g->mu);
}

/* A kept-alive connection's next head has come in time: its body gets a full timeout. */
void gate_request_begin(struct MHD_Connection *mc) { set_phase(mc, 1 << C_IDLE, C_BODY, true); }
void gate_request_working(struct MHD_Connection *mc) { set_phase(mc, (1 << C_BODY) | (1 << C_IDLE), C_WORKING, false); }
void gate_request_end(struct MHD_Connection *mc) { set_phase(mc, (1 << C_BODY) | (1 << C_WORKING), C_IDLE, true); }

/* ---------------------------------------------------------------- start, stop */

srv_gate *gate_start(srv_server *S, struct MHD_Daemon *d, int listen_fd) {
    srv_gate *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->S = S;
    g->d = d;
    g->lfd = listen_fd;
    g->timeout = S->cfg->timeout_s;
    g->max_body = S->cfg->max_body;
    g->max_conns = S->cfg->max_conns > 0 ? S->cfg->max_conns : 256;
    g->max_per_ip = S->cfg->max_conns_per_ip;
    /* descriptors: as many as allowed (raise the soft limit), minus what the
     * handed-over connections and the rest of the process may need */
    struct rlimit rl;
    rlim_t nofile = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) { rl.rlim_cur = rl.rlim_max; setrlimit(RLIMIT_NOFILE, &rl); getrlimit(RLIMIT_NOFILE, &rl); }
        nofile = rl.rlim_cur;
    }
    long spare = (long)(nofile > 1u << 20 ? 1u << 20 : nofile) - g->max_conns - GATE_RESERVE - 64;
    g->max_wait = spare < 64 ? 64 : spare > 4096 ? 4096 : (size_t)spare;
    g->wait = calloc(g->max_wait, sizeof *g->wait);
    g->peek = malloc(FRAME_HEAD_MAX);
    pthread_mutex_init(&g->mu, NULL);
    if (!g->wait || !g->peek || pipe2(g->wake, O_CLOEXEC) != 0) { free(g->wait); free(g->peek); free(g); return NULL; }
    g_gate = g;
    if (pthread_create(&g->th, NULL, gate_main, g)) {
        g_gate = NULL;
        close(g->wake[0]); close(g->wake[1]); free(g->wait); free(g->peek); free(g);
        return NULL;
    }
    return g;
}

void gate_stop(srv_gate *g) {
    if (!g) return;
    char b = 1;
    if (write(g->wake[1], &b, 1) != 1) { /* the thread polls wake[0]; a failed write leaves it to the 100 ms tick */ }
    pthread_join(g->th, NULL);
    while (g->n_wait) wait_remove(g, g->n_wait - 1);
    close(g->lfd);
    close(g->wake[0]);
    close(g->wake[1]);
    free(g->wait);
    free(g->peek);
    /* handed-over records are freed by their close notifications (MHD_stop_daemon) */
}

void gate_free(srv_gate *g) {
    if (!g) return;
    if (g_gate == g) g_gate = NULL;
    pthread_mutex_destroy(&g->mu);
    free(g);
}
