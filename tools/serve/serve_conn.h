/* serve_conn.h — the front door of `theseus serve` (serve_conn.c): our own
 * listening socket and accept loop in front of libmicrohttpd. A new connection
 * stays with the gate (a file descriptor in one poll set, no thread) until its
 * whole request head has arrived and passed serve_frame.c's checks; only then
 * is it handed to libmicrohttpd (MHD_add_connection). The gate also enforces
 * the connection caps (per client address and in total, with a reserve for
 * GET /health and /metrics) and the per-request deadline (--timeout: the whole
 * request, head and body, must arrive in time; bytes trickling in do not
 * extend it). Used by serve_http.c only. */
#ifndef TH_SERVE_CONN_H
#define TH_SERVE_CONN_H

#include "serve.h"
#include <microhttpd.h>

#define GATE_RESERVE 16      /* connections over the caps kept for /health and /metrics */

typedef struct srv_gate srv_gate;

/* Binds and listens (SO_REUSEADDR); -1 with errno on failure. */
int gate_listen(const struct sockaddr *addr, bool ipv6);
/* Starts the accept thread over listen_fd (taken over) for daemon d. */
srv_gate *gate_start(srv_server *S, struct MHD_Daemon *d, int listen_fd);
/* Stops accepting, closes the connections still at the gate. Before MHD_stop_daemon;
 * gate_free after it (the daemon's close notifications use the gate). */
void gate_stop(srv_gate *g);
void gate_free(srv_gate *g);
/* The MHD_OPTION_NOTIFY_CONNECTION callback (cls: the gate). */
void gate_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe);

/* The request phases of a connection, as the handler sees them:
 * begin   — a request's head has been parsed (first handler call);
 * working — its body is in (or an early answer was queued): no deadline while
 *           it is answered;
 * end     — the answer is done (keep-alive: the next request's deadline starts). */
void gate_request_begin(struct MHD_Connection *c);
void gate_request_working(struct MHD_Connection *c);
void gate_request_end(struct MHD_Connection *c);

/* The first bytes of an error answer the gate writes itself (also for tests). */
size_t gate_error_response(int status, const char *msg, char *out, size_t cap);

#endif
