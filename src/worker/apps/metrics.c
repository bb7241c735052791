/*
 * metrics.c - Prometheus text exposition (format 0.0.4) of pagid's shared
 * region. Counters are summed over every slot, including slots of workers
 * that exited and were not yet replaced, so a restart does not make them go
 * back; gauges (open connections and scopes, workers) count live workers.
 * The shared dictionaries' figures are read from each dict's own mapping.
 */
#include "metrics.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/shdict.h"
#include "common/pool.h"
#include "common/shm.h"
#include "worker/worker_ctx.h"

static const char *const reason_words[SHM_R__COUNT] = {
    "client_closed",      "client_timeout", "idle_timeout",   "keepalive_timeout",
    "write_timeout",      "write_error",    "read_error",     "protocol_error",
    "server_shutdown",    "server_error",   "body_too_large", "queue_overflow",
    "x-response-timeout", "other",
};
static const char *const scope_words[SHM_SCOPE__COUNT] = {"http", "websocket", "sse"};
static const char *const tls_words[SHM_TLS__COUNT] = {"ok", "failed", "timeout", "closed",
                                                      "no_application_protocol"};
static const char *const class_words[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

typedef struct totals {
    uint64_t requests[6], bytes_in, bytes_out, disconnects[SHM_R__COUNT], log_dropped;
    uint64_t limit_reached, response_timeouts;
    uint64_t ps_published, ps_delivered, ps_dropped;
    uint64_t tls_handshakes[SHM_TLS__COUNT];
    uint64_t tls_resumed;
    uint64_t h2_connections, h2_streams, h2_resets, h2_calm, h2_refused, h2_websockets;
    int64_t open_connections, open_scopes[SHM_SCOPE__COUNT], tls_open;
    uint64_t scopes_unfinished;
    unsigned workers_up, workers_ready;
} totals;

#define LOAD(p) atomic_load_explicit(p, memory_order_relaxed)

static void sum(totals *t, const shm_region *r)
{
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < r->n_slots; i++) {
        shm_worker *w = (shm_worker *)&r->slots[i];
        int pid = LOAD(&w->pid);
        if (pid < 0)
            continue; /* being claimed: its counters are being zeroed */
        for (int k = 0; k < 6; k++)
            t->requests[k] += LOAD(&w->requests[k]);
        t->bytes_in += LOAD(&w->bytes_in);
        t->bytes_out += LOAD(&w->bytes_out);
        t->log_dropped += LOAD(&w->access_log_dropped);
        t->limit_reached += LOAD(&w->max_connections_reached);
        t->response_timeouts += LOAD(&w->response_timeouts);
        t->ps_published += LOAD(&w->pubsub_published);
        t->ps_delivered += LOAD(&w->pubsub_delivered);
        t->ps_dropped += LOAD(&w->pubsub_dropped);
        for (int k = 0; k < SHM_R__COUNT; k++)
            t->disconnects[k] += LOAD(&w->disconnects[k]);
        for (int k = 0; k < SHM_TLS__COUNT; k++)
            t->tls_handshakes[k] += LOAD(&w->tls_handshakes[k]);
        t->tls_resumed += LOAD(&w->tls_resumed);
        t->h2_connections += LOAD(&w->h2_connections);
        t->h2_streams += LOAD(&w->h2_streams);
        t->h2_resets += LOAD(&w->h2_resets);
        t->h2_calm += LOAD(&w->h2_calm);
        t->h2_refused += LOAD(&w->h2_refused);
        t->h2_websockets += LOAD(&w->h2_websockets);
        t->scopes_unfinished += LOAD(&w->scopes_unfinished);
        if (pid == 0)
            continue; /* exited: its gauges are stale */
        if (pool_is_process_num(LOAD(&w->worker_num)))
            continue; /* a pool process: pagid_pool_* below */
        t->workers_up++;
        t->workers_ready += LOAD(&w->ready) ? 1u : 0u;
        t->open_connections += LOAD(&w->open_connections);
        t->tls_open += LOAD(&w->tls_open);
        for (int k = 0; k < SHM_SCOPE__COUNT; k++)
            t->open_scopes[k] += LOAD(&w->open_scopes[k]);
    }
}

static void head(buf *o, const char *name, const char *type, const char *help)
{
    buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The master's backend across machines (docs/pubsub.md): only when one is configured. */
static void pubsub_backend_metrics(buf *o, const shm_region *r)
{
    shm_region *m = (shm_region *)r;
    if (!LOAD(&m->pubsub_backend))
        return;
    buf_printf(o, "pagid_pubsub_dropped_total{where=\"backend\"} %llu\n",
               (unsigned long long)LOAD(&m->pubsub_backend_dropped));
    buf_printf(o, "pagid_pubsub_dropped_total{where=\"backend_too_large\"} %llu\n",
               (unsigned long long)LOAD(&m->pubsub_backend_too_large));
    head(o, "pagid_pubsub_backend_messages_total", "counter",
         "Messages the master sent to the backend (redis) and received from it for this "
         "instance's subscribers.");
    buf_printf(o, "pagid_pubsub_backend_messages_total{direction=\"sent\"} %llu\n",
               (unsigned long long)LOAD(&m->pubsub_backend_sent));
    buf_printf(o, "pagid_pubsub_backend_messages_total{direction=\"received\"} %llu\n",
               (unsigned long long)LOAD(&m->pubsub_backend_received));
    head(o, "pagid_pubsub_backend_up", "gauge",
         "1 while the master's connections to the backend work, else 0.");
    buf_printf(o, "pagid_pubsub_backend_up %d\n", (int)LOAD(&m->pubsub_backend_up));
    head(o, "pagid_pubsub_backend_reconnects_total", "counter",
         "Times the backend came back after its connection was lost.");
    buf_printf(o, "pagid_pubsub_backend_reconnects_total %llu\n",
               (unsigned long long)LOAD(&m->pubsub_backend_reconnects));
}

int metrics_render(buf *o, const shm_region *r)
{
    if (!r) {
        head(o, "pagid_up", "gauge", "1: pagid answers (no shared counters without a master).");
        buf_printf(o, "pagid_up 1\n");
        return 0;
    }
    totals t;
    sum(&t, r);
    head(o, "pagid_up", "gauge", "1: pagid answers.");
    buf_printf(o, "pagid_up 1\n");
    head(o, "pagid_requests_total", "counter",
         "Responses started (or sent by the server), by status class.");
    for (int k = 1; k <= 6; k++) /* 1xx..5xx, then other */
        buf_printf(o, "pagid_requests_total{class=\"%s\"} %llu\n", class_words[k % 6],
                   (unsigned long long)t.requests[k % 6]);
    head(o, "pagid_open_connections", "gauge", "Client connections open now.");
    buf_printf(o, "pagid_open_connections %lld\n", (long long)t.open_connections);
    head(o, "pagid_open_scopes", "gauge", "Scopes not yet released, by type.");
    for (int k = 0; k < SHM_SCOPE__COUNT; k++)
        buf_printf(o, "pagid_open_scopes{type=\"%s\"} %lld\n", scope_words[k],
                   (long long)t.open_scopes[k]);
    head(o, "pagid_scopes_unfinished_total", "counter",
         "Scopes whose connection ended while the app had not finished them and waited for "
         "nothing that would tell it (a missing pagi_scope_finish).");
    buf_printf(o, "pagid_scopes_unfinished_total %llu\n", (unsigned long long)t.scopes_unfinished);
    head(o, "pagid_received_bytes_total", "counter", "Bytes read from clients.");
    buf_printf(o, "pagid_received_bytes_total %llu\n", (unsigned long long)t.bytes_in);
    head(o, "pagid_sent_bytes_total", "counter", "Bytes written to clients.");
    buf_printf(o, "pagid_sent_bytes_total %llu\n", (unsigned long long)t.bytes_out);
    head(o, "pagid_disconnects_total", "counter",
         "Exchanges that ended with a disconnect, by reason.");
    for (int k = 0; k < SHM_R__COUNT; k++)
        buf_printf(o, "pagid_disconnects_total{reason=\"%s\"} %llu\n", reason_words[k],
                   (unsigned long long)t.disconnects[k]);
    head(o, "pagid_access_log_dropped_total", "counter",
         "Access log lines dropped (buffer full or write errors).");
    buf_printf(o, "pagid_access_log_dropped_total %llu\n", (unsigned long long)t.log_dropped);
    head(o, "pagid_max_connections_reached_total", "counter",
         "Times a worker reached limits.max_connections and left new connections in the listen "
         "queue.");
    buf_printf(o, "pagid_max_connections_reached_total %llu\n",
               (unsigned long long)t.limit_reached);
    head(o, "pagid_response_timeouts_total", "counter",
         "Requests answered 504 because their app had not started a response within "
         "timeouts.response.");
    buf_printf(o, "pagid_response_timeouts_total %llu\n", (unsigned long long)t.response_timeouts);
    head(o, "pagid_pubsub_published_total", "counter", "Messages apps published (pagi_publish).");
    buf_printf(o, "pagid_pubsub_published_total %llu\n", (unsigned long long)t.ps_published);
    head(o, "pagid_pubsub_delivered_total", "counter",
         "Messages handed to subscription callbacks, in every worker.");
    buf_printf(o, "pagid_pubsub_delivered_total %llu\n", (unsigned long long)t.ps_delivered);
    head(o, "pagid_pubsub_dropped_total", "counter",
         "Messages dropped: a worker's queue in the master or to the master was full, a "
         "subscription's queue overflowed, or an app dropped for a slow client.");
    buf_printf(o, "pagid_pubsub_dropped_total{where=\"worker\"} %llu\n",
               (unsigned long long)t.ps_dropped);
    buf_printf(o, "pagid_pubsub_dropped_total{where=\"master\"} %llu\n",
               (unsigned long long)LOAD(&((shm_region *)r)->pubsub_master_dropped));
    pubsub_backend_metrics(o, r);
    head(o, "pagid_open_tls_connections", "gauge", "Client connections open on TLS listeners.");
    buf_printf(o, "pagid_open_tls_connections %lld\n", (long long)t.tls_open);
    head(o, "pagid_tls_handshakes_total", "counter",
         "TLS handshakes by outcome: ok, failed (protocol error), timeout (timeouts.header), "
         "closed (by the peer), no_application_protocol (ALPN offered nothing we speak).");
    for (int k = 0; k < SHM_TLS__COUNT; k++)
        buf_printf(o, "pagid_tls_handshakes_total{result=\"%s\"} %llu\n", tls_words[k],
                   (unsigned long long)t.tls_handshakes[k]);
    head(o, "pagid_tls_sessions_resumed_total", "counter",
         "Of the ok handshakes, those that resumed a session (by ticket) instead of a full one.");
    buf_printf(o, "pagid_tls_sessions_resumed_total %llu\n", (unsigned long long)t.tls_resumed);
    head(o, "pagid_http2_connections_total", "counter", "Connections that spoke HTTP/2 (h2 or h2c).");
    buf_printf(o, "pagid_http2_connections_total %llu\n", (unsigned long long)t.h2_connections);
    head(o, "pagid_http2_streams_total", "counter", "HTTP/2 streams the clients opened.");
    buf_printf(o, "pagid_http2_streams_total %llu\n", (unsigned long long)t.h2_streams);
    head(o, "pagid_http2_resets_total", "counter", "RST_STREAM frames the clients sent.");
    buf_printf(o, "pagid_http2_resets_total %llu\n", (unsigned long long)t.h2_resets);
    head(o, "pagid_http2_calm_total", "counter",
         "HTTP/2 connections ended with ENHANCE_YOUR_CALM (rapid reset, a frame flood).");
    buf_printf(o, "pagid_http2_calm_total %llu\n", (unsigned long long)t.h2_calm);
    head(o, "pagid_http2_refused_total", "counter",
         "HTTP/2 streams refused (REFUSED_STREAM): the connection's streams, with reset ones whose "
         "apps still run, were at the limit.");
    buf_printf(o, "pagid_http2_refused_total %llu\n", (unsigned long long)t.h2_refused);
    head(o, "pagid_http2_websockets_total", "counter",
         "HTTP/2 streams that became websocket scopes (RFC 8441 extended CONNECT).");
    buf_printf(o, "pagid_http2_websockets_total %llu\n", (unsigned long long)t.h2_websockets);
    head(o, "pagid_worker_restarts_total", "counter", "Crashed workers replaced by the master.");
    buf_printf(o, "pagid_worker_restarts_total %llu\n",
               (unsigned long long)LOAD(&((shm_region *)r)->worker_restarts));
    head(o, "pagid_reloads_total", "counter", "Successful configuration reloads.");
    buf_printf(o, "pagid_reloads_total %llu\n",
               (unsigned long long)LOAD(&((shm_region *)r)->reloads));
    head(o, "pagid_generation", "gauge", "Configuration generation now current.");
    buf_printf(o, "pagid_generation %u\n", LOAD(&((shm_region *)r)->generation));
    head(o, "pagid_workers_up", "gauge", "Worker processes running.");
    buf_printf(o, "pagid_workers_up %u\n", t.workers_up);
    head(o, "pagid_workers_ready", "gauge", "Workers past lifespan startup, accepting.");
    buf_printf(o, "pagid_workers_ready %u\n", t.workers_ready);
    /* The current generation's worker pool (docs/psgi.md). */
    pool_figures pf;
    pool_figures_read(r, LOAD(&((shm_region *)r)->generation), &pf);
    head(o, "pagid_pool_processes", "gauge", "Worker pool processes running.");
    buf_printf(o, "pagid_pool_processes %d\n", pf.workers);
    head(o, "pagid_pool_busy", "gauge", "Pool processes running a request or call.");
    buf_printf(o, "pagid_pool_busy %d\n", pf.busy);
    head(o, "pagid_pool_idle", "gauge", "Pool processes waiting for work.");
    buf_printf(o, "pagid_pool_idle %d\n", pf.idle);
    head(o, "pagid_pool_queue_depth", "gauge", "Requests and calls waiting for a pool process.");
    buf_printf(o, "pagid_pool_queue_depth %lld\n", (long long)pf.queue_depth);
    head(o, "pagid_pool_rejected_total", "counter",
         "Requests (503) and calls refused: the pool's queue was full.");
    buf_printf(o, "pagid_pool_rejected_total %llu\n", (unsigned long long)pf.rejected);
    head(o, "pagid_pool_timeouts_total", "counter",
         "Requests (504) and calls past worker_pool.timeout or their own.");
    buf_printf(o, "pagid_pool_timeouts_total %llu\n", (unsigned long long)pf.timeouts);
    head(o, "pagid_pool_served_total", "counter", "Requests and calls pool processes finished.");
    buf_printf(o, "pagid_pool_served_total %llu\n", (unsigned long long)pf.served);
    return 0;
}

void metrics_render_shdicts(buf *o, const pagid_shared_dict *dicts, size_t n)
{
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } fam[] = {
        {"pagid_shared_dict_capacity_bytes", "gauge", "Bytes a shared dict's entries may occupy.",
         offsetof(shdict_stats, capacity)},
        {"pagid_shared_dict_bytes", "gauge", "Bytes a shared dict's entries occupy now.",
         offsetof(shdict_stats, used)},
        {"pagid_shared_dict_entries", "gauge", "Entries in a shared dict.",
         offsetof(shdict_stats, entries)},
        {"pagid_shared_dict_evictions_total", "counter",
         "Live entries evicted (least recently used) to make room.",
         offsetof(shdict_stats, evictions)},
        {"pagid_shared_dict_expired_total", "counter", "Expired entries removed.",
         offsetof(shdict_stats, expired)},
        {"pagid_shared_dict_full_total", "counter",
         "Writes refused with \"no memory\": no room even after evicting.",
         offsetof(shdict_stats, full)},
        {"pagid_shared_dict_repairs_total", "counter",
         "Rebuilds after a process died holding the dict's lock.",
         offsetof(shdict_stats, repairs)},
    };
    if (n == 0)
        return;
    shdict_stats *st = calloc(n, sizeof *st);
    if (!st)
        return;
    for (size_t i = 0; i < n; i++)
        if (dicts[i].dict)
            shdict_stats_get(dicts[i].dict, &st[i]);
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        head(o, fam[f].name, fam[f].type, fam[f].help);
        for (size_t i = 0; i < n; i++)
            buf_printf(o, "%s{name=\"%s\"} %llu\n", fam[f].name, dicts[i].name,
                       (unsigned long long)*(const uint64_t *)(const void *)((const char *)&st[i] +
                                                                              fam[f].off));
    }
    free(st);
}

static int send_plain(pagi_scope *s, int status, const char *ctype, const char *body, size_t len,
                      int head_only)
{
    char cl[24];
    int n = snprintf(cl, sizeof cl, "%zu", len);
    pagi_header h[] = {
        {{"content-type", 12}, {ctype, strlen(ctype)}},
        {{"content-length", 14}, {cl, (size_t)n}},
        {{"cache-control", 13}, {"no-store", 8}},
    };
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = status;
    start.headers = h;
    start.header_count = sizeof h / sizeof h[0];
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    ev.body.ptr = head_only ? NULL : body;
    ev.body.len = head_only ? 0 : len;
    /* Both events are copied at once: nothing to wait for. */
    return pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &ev, NULL, NULL) < 0 ? -1 : 0;
}

static void metrics_handle(pagi_scope *s, void *instance)
{
    worker_ctx *w = instance;
    const char *method = pagi_scope_method(s);
    pagi_str path = pagi_scope_path(s);
    const char *want = w->cfg->status_path ? w->cfg->status_path : "/metrics";
    int rc;
    if (path.len != strlen(want) || memcmp(path.ptr, want, path.len) != 0) {
        static const char nf[] = "not found\n";
        rc = send_plain(s, 404, "text/plain", nf, sizeof nf - 1, 0);
    } else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        static const char na[] = "method not allowed\n";
        rc = send_plain(s, 405, "text/plain", na, sizeof na - 1, 0);
    } else {
        buf b = BUF_INIT;
        metrics_render(&b, w->shm);
        metrics_render_shdicts(&b, w->cfg->shared_dicts, w->cfg->n_shared_dicts);
        rc = send_plain(s, 200, "text/plain; version=0.0.4; charset=utf-8", buf_head(&b),
                        buf_size(&b), strcmp(method, "HEAD") == 0);
        buf_free(&b);
    }
    pagi_scope_finish(s, rc < 0 ? pagi_scope_error(s) : NULL);
}

const pagi_app app_metrics = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "metrics",
    .handle = metrics_handle,
};
