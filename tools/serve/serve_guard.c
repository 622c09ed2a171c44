/* serve_guard.c — the model file changing under a running server.
 *
 * Mapped weights (the default) are pages of the file: if the file is truncated,
 * reading a page past its new end raises SIGBUS, which would kill the process.
 * The choice made here: the server stays up and the model counts as failed.
 *   - SIGBUS inside the model's mapping: th_model_fault_recover replaces the
 *     mapping with zeros (so the faulting read, and every later one, returns
 *     zeros instead of faulting again), the model is marked lost, and the
 *     handler returns. The forward pass in flight finishes on zeros; the HTTP
 *     side (serve_http.c) turns every request in flight into an error (a
 *     non-streamed one gets 503, a stream an error event and [DONE]), /health
 *     says "error" and new requests get 503 naming the reason. A SIGBUS
 *     anywhere else is not ours: the default action (the process dies) stands.
 *   - Before each admission (and for /health), guard_check compares the file on
 *     disk (device, inode, size, mtime) with the one loaded; a change fails the
 *     model the same way, before anything reads a missing page.
 * A restart loads the new file. With --no-mmap the weights are a private copy in
 * memory: neither can happen and the file may change freely. */
#include "serve.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static srv_server *g_server;
static volatile sig_atomic_t g_lost;
static char g_reason[512];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *si, void *uctx) {
    (void)uctx;
    if (g_server && g_server->model && th_model_fault_recover(g_server->model, si->si_addr)) {
        if (!g_lost) {
            static const char msg[] = "theseus serve: SIGBUS reading the model's mapped file (truncated on disk?); "
                                      "the model is marked failed, requests get errors; restart the server\n";
            ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
            (void)w;
        }
        g_lost = 1;
        atomic_store(&g_server->state, 2);
        return;   /* the read is retried and now sees zeros */
    }
    /* not the model's mapping: a real bug; die the default way */
    signal(sig, SIG_DFL);
}

void guard_install(srv_server *S) {
    g_server = S;
    if (!S->model || !th_model_is_mapped(S->model)) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

bool guard_model_lost(void) {
    if (g_lost) return true;
    pthread_mutex_lock(&g_mu);
    bool lost = g_reason[0] != 0;
    pthread_mutex_unlock(&g_mu);
    return lost;
}

const char *guard_reason(void) {
    static _Thread_local char copy[sizeof g_reason];
    pthread_mutex_lock(&g_mu);
    if (!g_reason[0] && g_lost)
        snprintf(g_reason, sizeof g_reason, "the model's file was truncated or changed on disk while it was mapped "
                 "(a read of its memory faulted); restart the server to load it again");
    snprintf(copy, sizeof copy, "%s", g_reason);
    pthread_mutex_unlock(&g_mu);
    return copy;
}

bool guard_check(srv_server *S) {
    if (guard_model_lost()) return false;
    if (!S->model || atomic_load(&S->state) != 1) return true;
    if (th_model_check_file(S->model) == TH_OK) return true;
    pthread_mutex_lock(&g_mu);
    if (!g_reason[0])
        snprintf(g_reason, sizeof g_reason, "%s; the server stopped using it (restart it to load the file again)",
                 th_last_error());
    pthread_mutex_unlock(&g_mu);
    atomic_store(&S->state, 2);
    fprintf(stderr, "theseus serve: %s\n", guard_reason());
    return false;
}
