/* serve_metrics.c — the server's counters and latency histograms, and their
 * Prometheus text exposition for GET /metrics. */
#include "serve.h"
#include <stdlib.h>
#include <string.h>

srv_metrics g_metrics;

#define N_BUCKETS 12
static const double ttft_le[N_BUCKETS] = { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
static const double tok_le[N_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };

typedef struct histogram {
    pthread_mutex_t mu;
    const double *le;
    unsigned long long count[N_BUCKETS], total;
    double sum;
} histogram;

static histogram h_ttft = { PTHREAD_MUTEX_INITIALIZER, ttft_le, { 0 }, 0, 0 };
static histogram h_tok = { PTHREAD_MUTEX_INITIALIZER, tok_le, { 0 }, 0, 0 };

static void observe(histogram *h, double v) {
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < N_BUCKETS; i++) if (v <= h->le[i]) h->count[i]++;
    h->total++;
    h->sum += v;
    pthread_mutex_unlock(&h->mu);
}

void metrics_observe_ttft(double s) { observe(&h_ttft, s); }
void metrics_observe_token(double s) { observe(&h_tok, s); }

static void put_hist(char **b, size_t *n, size_t *cap, histogram *h, const char *name, const char *help) {
    char line[256];
    int k = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    buf_append(b, n, cap, line, (size_t)k);
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < N_BUCKETS; i++) {
        k = snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], h->count[i]);
        buf_append(b, n, cap, line, (size_t)k);
    }
    k = snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, h->total, name,
                 h->sum, name, h->total);
    pthread_mutex_unlock(&h->mu);
    buf_append(b, n, cap, line, (size_t)k);
}

static void put_metric(char **b, size_t *n, size_t *cap, const char *name, const char *type, const char *help,
                       unsigned long long v) {
    char line[256];
    int k = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, v);
    buf_append(b, n, cap, line, (size_t)k);
}

char *metrics_render(void) {
    char *b = NULL;
    size_t n = 0, cap = 0;
    put_metric(&b, &n, &cap, "theseus_requests_total", "counter", "Completion requests received.", g_metrics.requests);
    put_metric(&b, &n, &cap, "theseus_requests_failed_total", "counter", "Completion requests that ended in an error.",
               g_metrics.requests_failed);
    put_metric(&b, &n, &cap, "theseus_prompt_tokens_total", "counter", "Prompt tokens processed.", g_metrics.prompt_tokens);
    put_metric(&b, &n, &cap, "theseus_generated_tokens_total", "counter", "Tokens generated.", g_metrics.gen_tokens);
    put_metric(&b, &n, &cap, "theseus_queue_depth", "gauge", "Requests waiting for a sequence slot.",
               (unsigned long long)atomic_load(&g_metrics.queue_depth));
    put_metric(&b, &n, &cap, "theseus_active_sequences", "gauge", "Sequences being decoded.",
               (unsigned long long)atomic_load(&g_metrics.active_seqs));
    put_metric(&b, &n, &cap, "theseus_kv_blocks_used", "gauge", "KV cache blocks in use.", g_metrics.kv_used);
    put_metric(&b, &n, &cap, "theseus_kv_blocks_total", "gauge", "KV cache blocks in the pool.", g_metrics.kv_total);
    put_metric(&b, &n, &cap, "theseus_spec_draft_tokens_total", "counter", "Speculative decoding: draft tokens verified.",
               g_metrics.spec_drafted);
    put_metric(&b, &n, &cap, "theseus_spec_accepted_tokens_total", "counter", "Speculative decoding: draft tokens accepted.",
               g_metrics.spec_accepted);
    put_metric(&b, &n, &cap, "theseus_spec_verifications_total", "counter",
               "Speculative decoding: verifications (a sequence's drafts checked in a step).", g_metrics.spec_rounds);
    {   /* acceptance as a gauge in per mille (put_metric writes integers) */
        unsigned long long d = g_metrics.spec_drafted, a = g_metrics.spec_accepted;
        put_metric(&b, &n, &cap, "theseus_spec_acceptance_permille", "gauge",
                   "Speculative decoding: accepted / drafted tokens since start, in 1/1000.", d ? a * 1000 / d : 0);
    }
    put_hist(&b, &n, &cap, &h_ttft, "theseus_time_to_first_token_seconds", "Time from request arrival to its first token.");
    put_hist(&b, &n, &cap, &h_tok, "theseus_token_latency_seconds", "Time between consecutive tokens of a sequence.");
    return b;
}
