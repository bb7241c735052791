/*
 * acceptors.c - the worker's listening sockets (acceptors.h): which are
 * watched, the accept loop, limits.max_connections and the fair-accept gate
 * (its policy in accept_gate.c; the peers wake a gated worker with SIGURG).
 */
#include "acceptors.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shm.h"
#include "worker/core/accept_gate.h"
#include "worker/core/conn.h"
#include "worker/http1/http1_conn.h"
#include "worker/http2/h2_conn.h"
#define ACCEPT_BATCH 64
/* Fair accept (accept_gate.h): a worker past its share is woken by the
 * peer whose accept lets it in again (SIGURG); besides, it looks again this
 * often while connections wait, and takes them itself when no peer has
 * accepted anything for GATE_STALL (peers busy in long handlers, stuck). */
#define GATE_TICK 0.02
#define GATE_STALL 0.2
#define GATE_WAKE_SIGNAL SIGURG /* ignored by default: harmless to a process not listening */
#define GATE_WAKE_MAX 16
#define LIMIT_LOG_INTERVAL 10.0 /* limits.max_connections reached: one line per this, at most */

/* Watch each listener while accepting, except app listeners while gated or
 * at the connection limit (the status listener is neither: it is not the
 * app's load, and it must answer most when the app's side is full). */
static void acceptors_update(acceptors *as)
{
    for (size_t i = 0; i < as->n; i++) {
        acceptor *a = &as->list[i];
        int want = as->accepting && a->fd >= 0 && (a->status || (!as->gated && !as->at_limit));
        if (want && !ev_is_active(&a->io))
            ev_io_start(as->w->loop.ev, &a->io);
        else if (!want && ev_is_active(&a->io))
            ev_io_stop(as->w->loop.ev, &a->io);
    }
}

static void accepting_set(acceptors *as, int on)
{
    if (as->accepting == on)
        return;
    as->accepting = on;
    acceptors_update(as);
}

static int gate_allows(acceptors *as);

/* The connections limits.max_connections counts: the status listener's are not. */
static size_t app_conns(const worker_ctx *w)
{
    return w->n_conns - w->n_status_conns;
}

/*
 * At limits.max_connections: the app listeners are left alone until one of
 * our connections closes; what arrives meanwhile waits in the shared listen
 * queue (a peer with room takes it). Counted each time, logged at most once
 * per LIMIT_LOG_INTERVAL with how often it happened since the last line.
 */
static void limit_reached(acceptors *as)
{
    worker_ctx *w = as->w;
    if (as->at_limit)
        return;
    as->at_limit = 1;
    acceptors_update(as);
    if (w->stats)
        shm_add(&w->stats->max_connections_reached, 1);
    as->limit_unlogged++;
    double now = ev_now(w->loop.ev);
    if (as->limit_logged_at > 0 && now - as->limit_logged_at < LIMIT_LOG_INTERVAL)
        return;
    if (as->limit_unlogged > 1)
        log_warn("limits.max_connections (%zu) reached %lu times in the last %.0f s: new "
                 "connections wait in the listen queue until one of this worker's closes",
                 w->cfg->limits.max_connections, as->limit_unlogged, now - as->limit_logged_at);
    else
        log_warn("limits.max_connections (%zu) reached: new connections wait in the listen "
                 "queue until one of this worker's closes",
                 w->cfg->limits.max_connections);
    as->limit_logged_at = now;
    as->limit_unlogged = 0;
}

/* Publish the gate state for the peers that wake gated workers. */
static void gate_publish(acceptors *as, int state)
{
    if (as->w->stats)
        atomic_store(&as->w->stats->gated, state);
}

static void gate_set(acceptors *as, int gated)
{
    if (as->gated == gated)
        return;
    as->gated = gated;
    gate_publish(as, gated ? ACCEPT_GATE_CLOSED : ACCEPT_GATE_WATCHING);
    if (gated) {
        as->gate_progress = accept_gate_peer_accepts(as->w->shm, as->w->stats);
        as->gate_since = ev_now(as->w->loop.ev);
        ev_timer_set(&as->gate_timer, GATE_TICK, GATE_TICK);
        ev_timer_again(as->w->loop.ev, &as->gate_timer);
    } else {
        ev_timer_stop(as->w->loop.ev, &as->gate_timer);
    }
    acceptors_update(as);
}

static int gate_allows(acceptors *as)
{
    const worker_ctx *w = as->w;
    return accept_gate_open(w->shm, w->stats, app_conns(w), w->cfg->limits.max_connections,
                            shm_now_ms());
}

/*
 * Close the gate unless a peer's accept, between the look that found this
 * worker past its share and now, let it in again. A peer adds to its count
 * and then reads the gate states; this worker publishes its state and then
 * reads the counts: with a full fence on both sides one of the two sees the
 * other, so a gate never stays closed unnoticed.
 */
static int gate_close(acceptors *as)
{
    gate_set(as, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (!gate_allows(as))
        return 1;
    gate_set(as, 0);
    return 0;
}

/* After this worker accepted or left: wake the gated peers it let in. */
static void gate_wake_peers(acceptors *as)
{
    worker_ctx *w = as->w;
    int pids[GATE_WAKE_MAX];
    if (!w->shm)
        return;
    atomic_thread_fence(memory_order_seq_cst);
    size_t n = accept_gate_to_wake(w->shm, w->stats, w->cfg->limits.max_connections, shm_now_ms(),
                                   pids, GATE_WAKE_MAX);
    for (size_t i = 0; i < n; i++)
        kill(pids[i], GATE_WAKE_SIGNAL);
}

/*
 * Accept up to ACCEPT_BATCH connections from a. Before each one of an app
 * listener the gate is asked (unless force: nobody else is taking them):
 * past this worker's share, the rest is left in the shared queue, where a
 * peer's loop, woken by the same readiness, takes it.
 */
static int accept_batch(acceptor *a, int force)
{
    acceptors *as = a->set;
    worker_ctx *w = as->w;
    struct ev_loop *ev = w->loop.ev;
    int taken = 0;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        if (!a->status && app_conns(w) >= w->cfg->limits.max_connections) {
            /* At the limit: leave the rest in the shared queue for other workers. */
            limit_reached(as);
            return taken;
        }
        if (!a->status && !force && !gate_allows(as) && gate_close(as))
            return taken;
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(a->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return taken;
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                log_warn("accept: %s; pausing accepts for 100ms", strerror(errno));
                accepting_set(as, 0);
                ev_timer_set(&as->accept_retry, 0.1, 0.);
                ev_timer_start(ev, &as->accept_retry);
                return taken;
            }
            log_error("accept: %s", strerror(errno));
            return taken;
        }
        taken++;
        if (w->stats)
            shm_add(&w->stats->accepted, 1);
        conn *c = conn_new(w, fd, (struct sockaddr *)&peer, a->host, a->port, &h1_proto, a->tls);
        if (c && a->status) {
            c->status_listener = 1; /* conn_close counts it out again */
            w->n_status_conns++;
        }
        if (c && a->h2)
            c->alt_proto = &h2_proto; /* ALPN h2, or an h2c preface, may claim it */
    }
    return taken;
}

static void acceptor_on_readable(struct ev_loop *ev, ev_io *io, int revents)
{
    acceptor *a = io->data;
    if (accept_batch(a, 0) > 0 && !a->status)
        gate_wake_peers(a->set);
}

/* Connections wait on some app listener. */
static int gate_queue_waiting(acceptors *as)
{
    for (size_t i = 0; i < as->n; i++) {
        acceptor *a = &as->list[i];
        struct pollfd p = {.fd = a->fd, .events = POLLIN};
        if (!a->status && a->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
            return 1;
    }
    return 0;
}

/*
 * Gated: back to watching the listeners once the share allows another
 * connection or nothing waits (the next arrival asks the gate again).
 * Returns 1 when still gated, wakeable again by a peer.
 */
static int gate_recheck(acceptors *as)
{
    if (!as->gated)
        return 0;
    if (as->accepting && !gate_allows(as) && gate_queue_waiting(as)) {
        gate_publish(as, ACCEPT_GATE_CLOSED); /* woken: wakeable again */
        atomic_thread_fence(memory_order_seq_cst);
        if (!gate_allows(as))
            return 1;
    }
    gate_set(as, 0);
    return 0;
}

static void acceptors_on_gate_wake(struct ev_loop *ev, ev_signal *s, int revents)
{
    gate_recheck(s->data);
}

/*
 * The gated worker's own look: while connections wait and the peers'
 * accept count does not move for GATE_STALL, nobody else is taking them:
 * take a batch regardless, so the queue is never left unserved.
 */
static void acceptors_on_gate_tick(struct ev_loop *ev, ev_timer *t, int revents)
{
    acceptors *as = t->data;
    if (!gate_recheck(as))
        return;
    uint64_t seen = accept_gate_peer_accepts(as->w->shm, as->w->stats);
    double now = ev_now(ev);
    if (seen != as->gate_progress) {
        as->gate_progress = seen;
        as->gate_since = now;
        return;
    }
    if (now - as->gate_since < GATE_STALL)
        return;
    as->gate_since = now;
    int taken = 0;
    for (size_t i = 0; i < as->n && as->accepting; i++)
        if (!as->list[i].status && as->list[i].fd >= 0)
            taken += accept_batch(&as->list[i], 1);
    if (taken)
        gate_wake_peers(as);
}

static void acceptors_on_accept_retry(struct ev_loop *ev, ev_timer *t, int revents)
{
    acceptors *as = t->data;
    if (!as->w->draining)
        accepting_set(as, 1);
}

static void acceptor_describe(acceptor *a, const worker_listener *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    a->port = -1;
    snprintf(a->host, sizeof a->host, "%s", l->conf && l->conf->path ? l->conf->path : "");
    if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, a->host, sizeof a->host);
        a->port = ntohs(in->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, a->host, sizeof a->host);
        a->port = ntohs(in6->sin6_port);
    }
}

int acceptors_init(acceptors *as, worker_ctx *w, const worker_listener *listeners, size_t n)
{
    memset(as, 0, sizeof *as);
    as->w = w;
    as->list = calloc(n ? n : 1, sizeof *as->list);
    if (!as->list)
        return -1;
    as->n = n;
    for (size_t i = 0; i < n; i++) {
        acceptor *a = &as->list[i];
        a->fd = listeners[i].fd;
        a->set = as;
        a->status = listeners[i].conf && listeners[i].conf->status;
        a->tls = listeners[i].tls;
        a->h2 = listeners[i].conf && config_listen_h2(listeners[i].conf);
        acceptor_describe(a, &listeners[i]);
        ev_io_init(&a->io, acceptor_on_readable, a->fd, EV_READ);
        a->io.data = a;
    }
    ev_init(&as->accept_retry, acceptors_on_accept_retry);
    as->accept_retry.data = as;
    ev_init(&as->gate_timer, acceptors_on_gate_tick);
    as->gate_timer.data = as;
    ev_signal_init(&as->sig_gate, acceptors_on_gate_wake, GATE_WAKE_SIGNAL);
    as->sig_gate.data = as;
    ev_signal_start(w->loop.ev, &as->sig_gate);
    return 0;
}

void acceptors_set_accepting(acceptors *as, int on)
{
    accepting_set(as, on);
}

void acceptors_on_conn_closed(acceptors *as)
{
    const worker_ctx *w = as->w;
    if (as->at_limit && app_conns(w) < w->cfg->limits.max_connections) {
        as->at_limit = 0;
        acceptors_update(as);
    }
    if (as->gated && gate_allows(as))
        gate_set(as, 0); /* a connection of ours went: our share has room again */
}

void acceptors_close(acceptors *as)
{
    worker_ctx *w = as->w;
    accepting_set(as, 0);
    gate_set(as, 0);
    ev_timer_stop(w->loop.ev, &as->accept_retry);
    for (size_t i = 0; i < as->n; i++) {
        close(as->list[i].fd);
        as->list[i].fd = -1;
    }
    if (w->stats)
        atomic_store(&w->stats->ready, 0); /* no longer accepting */
    gate_wake_peers(as);                   /* our share is theirs now */
}

void acceptors_free(acceptors *as)
{
    struct ev_loop *ev = as->w ? as->w->loop.ev : NULL;
    if (!ev)
        return;
    ev_signal_stop(ev, &as->sig_gate);
    gate_set(as, 0);
    ev_timer_stop(ev, &as->accept_retry);
    ev_timer_stop(ev, &as->gate_timer);
    accepting_set(as, 0);
    free(as->list);
    as->list = NULL;
    as->n = 0;
}
