/*
 * conn.c - connection I/O and lifecycle: reading into the input buffer,
 * writing the output queue (coalesced at the loop's safe point), the one
 * timer per connection, the state machine, and the single release path.
 */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shm.h"
#include "memtrim.h"
#include "reason.h"
#include "worker/scope/scope.h"
#include "tls_conn.h"

#define READ_CHUNK 16384
#define LINGER_SECONDS 1.0

static void conn_on_read(struct ev_loop *ev, ev_io *w, int revents);
static void conn_on_write(struct ev_loop *ev, ev_io *w, int revents);
static void conn_on_timer(struct ev_loop *ev, ev_timer *w, int revents);

conn *conn_new(worker_ctx *w, int fd, const struct sockaddr *peer, const char *server_host,
               int server_port, const conn_proto *proto, const struct tls_server *tls)
{
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->w = w;
    c->fd = fd;
    c->server_host = server_host;
    c->server_port = server_port;
    if (peer && peer->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)peer;
        memcpy(c->peer_addr, &a->sin_addr, sizeof a->sin_addr);
        c->peer_family = AF_INET;
        c->peer_port = ntohs(a->sin_port);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else if (peer && peer->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)peer;
        memcpy(c->peer_addr, &a->sin6_addr, sizeof a->sin6_addr);
        c->peer_family = AF_INET6;
        c->peer_port = ntohs(a->sin6_port);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    outq_init(&c->out);
    c->proto = proto;
    if (tls && !(c->tls = tls_conn_new(tls, fd))) {
        close(fd);
        free(c);
        return NULL;
    }
    if (proto->init && proto->init(c) < 0) {
        tls_conn_free(c->tls);
        close(fd);
        free(c);
        return NULL;
    }
    ev_io_init(&c->rio, conn_on_read, fd, EV_READ);
    c->rio.data = c;
    ev_io_init(&c->wio, conn_on_write, fd, EV_WRITE);
    c->wio.data = c;
    ev_init(&c->timer, conn_on_timer);
    c->timer.data = c;

    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    if (w->stats) {
        atomic_fetch_add_explicit(&w->stats->open_connections, 1, memory_order_relaxed);
        if (c->tls)
            atomic_fetch_add_explicit(&w->stats->tls_open, 1, memory_order_relaxed);
    }
    c->state = c->tls ? CONN_HANDSHAKE : CONN_WAIT_REQUEST;
    conn_set_state(c, c->state);
    return c;
}

/* The text of the last address asked for is kept: keep-alive requests and
 * most clients of one worker come from few addresses, and inet_ntop costs
 * about as much as the rest of a small request's scope. */
const char *conn_peer_host(const conn *c)
{
    worker_ctx *w = c->w;
    char *t = w->peer_text;
    size_t alen = c->peer_family == AF_INET6 ? 16 : 4;
    if (!c->peer_family) {
        t[0] = 0;
        w->peer_text_family = 0;
        return t;
    }
    if (w->peer_text_family == c->peer_family && !memcmp(w->peer_text_addr, c->peer_addr, alen))
        return t;
    if (!inet_ntop(c->peer_family, c->peer_addr, t, sizeof w->peer_text)) {
        t[0] = 0;
        w->peer_text_family = 0;
        return t;
    }
    memcpy(w->peer_text_addr, c->peer_addr, alen);
    w->peer_text_family = c->peer_family;
    return t;
}

/* ---- timer ---- */

/*
 * The timer is moved lazily, as nginx does and libev's manual advises for
 * timeouts that move with every request: c->deadline is when the current
 * timeout (c->tmo) is due, and the ev_timer runs until c->timer_at, never
 * later than that deadline. A deadline that moves later, or no timeout at
 * all, leaves the timer alone; when it fires early, conn_on_timer sets it
 * again for what is left, or lets it stop. Only a deadline sooner than the
 * running timer moves it. So a keep-alive request (keepalive -> none ->
 * keepalive) costs no timer heap work; the timer fires about once per
 * timeout period instead.
 */
static void conn_arm(conn *c, conn_timeout kind, double seconds)
{
    struct ev_loop *ev = c->w->loop.ev;
    if (kind == TMO_NONE || seconds <= 0) {
        c->tmo = TMO_NONE; /* a running timer finds nothing due when it fires */
        return;
    }
    double deadline = ev_now(ev) + seconds;
    c->tmo = kind;
    c->deadline = deadline;
    if (ev_is_active(&c->timer) && c->timer_at <= deadline)
        return; /* it fires first, and is set again for the rest */
    ev_timer_stop(ev, &c->timer);
    ev_timer_set(&c->timer, seconds, 0.);
    ev_timer_start(ev, &c->timer);
    c->timer_at = deadline;
}

/* What made progress since the timer was last armed. */
enum { PROGRESS_NONE = 0, PROGRESS_READ = 1, PROGRESS_WRITE = 2 };

/*
 * Which timeout applies now. Deadlines that measure a whole phase (header,
 * idle) are kept; the write and request deadlines measure time without
 * progress in their own direction only.
 */
static void conn_update_timer(conn *c, int progress)
{
    const pagid_timeouts *t = &c->w->cfg->timeouts;
    switch (c->state) {
    case CONN_HANDSHAKE:
        /* The handshake is part of the head: a client stalling in it is
         * cut like one stalling in its request line. */
        if (c->tmo != TMO_HANDSHAKE)
            conn_arm(c, TMO_HANDSHAKE, t->header);
        break;
    case CONN_WAIT_REQUEST:
        if (c->tmo != TMO_IDLE && c->tmo != TMO_KEEPALIVE)
            conn_arm(c, c->served ? TMO_KEEPALIVE : TMO_IDLE, c->served ? t->keepalive : t->idle);
        break;
    case CONN_READ_HEAD:
        /* The whole head must arrive within `header`: slowloris gets no refills. */
        if (c->tmo != TMO_HEADER)
            conn_arm(c, TMO_HEADER, t->header);
        break;
    case CONN_ACTIVE:
    case CONN_CLOSING:
        if (outq_buffered(&c->out) > 0 && c->write_blocked) {
            if (c->tmo != TMO_WRITE || (progress & PROGRESS_WRITE))
                conn_arm(c, TMO_WRITE, t->write);
        } else if (c->state == CONN_ACTIVE && c->proto->waiting_for_input(c)) {
            if (c->tmo != TMO_REQUEST || (progress & PROGRESS_READ))
                conn_arm(c, TMO_REQUEST, t->request);
        } else {
            conn_arm(c, TMO_NONE, 0);
        }
        break;
    case CONN_LINGER:
        if (c->tmo != TMO_LINGER)
            conn_arm(c, TMO_LINGER, LINGER_SECONDS);
        break;
    case CONN_CLOSED:
        conn_arm(c, TMO_NONE, 0);
        break;
    }
}

static void conn_update_read(conn *c)
{
    struct ev_loop *ev = c->w->loop.ev;
    int want;
    switch (c->state) {
    case CONN_HANDSHAKE:
        want = !c->tls_want_write;
        break;
    case CONN_WAIT_REQUEST:
    case CONN_READ_HEAD:
    case CONN_LINGER:
        want = !c->eof;
        break;
    case CONN_ACTIVE:
        want = !c->eof && c->proto->wants_read(c);
        break;
    default:
        want = 0;
    }
    /* A TLS read that must write first waits for the write watcher, which
     * brings reading back (conn_on_write): a readable socket would spin. */
    if (c->tls_want_write)
        want = 0;
    if (want && !c->reading) {
        ev_io_start(ev, &c->rio);
        c->reading = 1;
        /* Records OpenSSL read ahead never make the socket readable. At
         * most one wasted read when it holds only part of one: that read
         * ends on EAGAIN, and then nothing is re-fed (conn_on_read). */
        if (c->tls && c->state != CONN_HANDSHAKE && tls_conn_has_buffered(c->tls))
            ev_feed_event(ev, &c->rio, EV_READ);
    } else if (!want && c->reading) {
        ev_io_stop(ev, &c->rio);
        c->reading = 0;
    }
}

/*
 * A connection's own input buffer exists only while it holds bytes. Input
 * left over earlier (a pipelined request, a paused queue, body past the mark)
 * may be consumed outside a read callback too, so every place that settles
 * the connection asks here. A lent buffer goes back through conn_return_input.
 */
static void conn_drop_empty_input(conn *c)
{
    if (!c->in_lent && buf_size(&c->in) == 0)
        buf_free(&c->in);
}

void conn_refresh(conn *c)
{
    if (c->state == CONN_CLOSED)
        return;
    conn_drop_empty_input(c);
    conn_update_read(c);
    conn_update_timer(c, PROGRESS_NONE);
}

void conn_set_state(conn *c, conn_state s)
{
    if (c->state == CONN_CLOSED)
        return;
    if (s != c->state)
        c->tmo = TMO_NONE; /* a new phase starts its own deadline */
    c->state = s;
    if (s == CONN_LINGER) {
        if (c->tls)
            tls_conn_close_notify(c->tls);
        shutdown(c->fd, SHUT_WR);
        buf_reset(&c->in);
    }
    conn_drop_empty_input(c);
    conn_update_read(c);
    conn_update_timer(c, PROGRESS_NONE);
}

static void conn_count_handshake(conn *c, enum shm_tls_result r)
{
    if (c->w->stats)
        shm_add(&c->w->stats->tls_handshakes[r], 1);
}

static void conn_on_timer(struct ev_loop *ev, ev_timer *w, int revents)
{
    conn *c = w->data;
    if (c->tmo == TMO_NONE)
        return; /* the timeout it ran for was met: the timer stops here */
    double left = c->deadline - ev_now(ev);
    if (left > 0) {
        /* Early: the deadline moved on since the timer was set (conn_arm). */
        ev_timer_set(&c->timer, left, 0.);
        ev_timer_start(ev, &c->timer);
        c->timer_at = c->deadline;
        return;
    }
    conn_timeout kind = c->tmo;
    c->tmo = TMO_NONE;
    switch (kind) {
    case TMO_IDLE:
    case TMO_KEEPALIVE: {
        const char *why = kind == TMO_IDLE ? reason_idle_timeout : reason_keepalive_timeout;
        if (c->proto->on_idle_timeout)
            c->proto->on_idle_timeout(c, why);
        else
            conn_close(c, why);
        break;
    }
    case TMO_HEADER:
        c->proto->on_header_timeout(c);
        break;
    case TMO_REQUEST:
        if (c->proto->on_request_timeout) {
            c->proto->on_request_timeout(c);
            conn_refresh(c);
        } else {
            conn_close(c, reason_client_timeout);
        }
        break;
    case TMO_WRITE:
        conn_close(c, reason_write_timeout);
        break;
    case TMO_LINGER:
        conn_close(c, NULL);
        break;
    case TMO_HANDSHAKE:
        log_debug("TLS handshake with %s timed out", conn_peer_host(c));
        conn_count_handshake(c, SHM_TLS_TIMEOUT);
        conn_close(c, reason_client_timeout);
        break;
    case TMO_NONE:
        break;
    }
}

/*
 * May the connection's alternative protocol take it over (HTTP/2 by ALPN
 * after the handshake, or by the h2c preface in the first bytes)? Asked
 * until it is decided either way; then it is forgotten.
 */
static conn_claim conn_ask_claim(conn *c, conn_claim_point point)
{
    if (!c->alt_proto)
        return CONN_CLAIM_DECLINED;
    conn_claim r = c->alt_proto->claim(c, point);
    if (r != CONN_CLAIM_UNDECIDED)
        c->alt_proto = NULL;
    return r;
}

/* ---- the TLS handshake ---- */

/* The write watcher runs while output is blocked or while OpenSSL must
 * write before it can read on (ev_io_start/stop are idempotent). */
static void conn_update_write_watch(conn *c)
{
    struct ev_loop *ev = c->w->loop.ev;
    if (c->write_blocked || c->tls_want_write)
        ev_io_start(ev, &c->wio);
    else
        ev_io_stop(ev, &c->wio);
}

/* One step of the handshake, on either readiness. Failures are an everyday
 * sight on a public port (scanners, old clients): logged at debug only. */
static void conn_tls_step(conn *c)
{
    struct ev_loop *ev = c->w->loop.ev;
    tls_step st = tls_conn_handshake(c->tls);
    c->tls_want_write = st == TLS_STEP_WANT_WRITE;
    conn_update_write_watch(c);
    switch (st) {
    case TLS_STEP_DONE:
        conn_count_handshake(c, SHM_TLS_OK);
        if (c->w->stats && tls_conn_session_reused(c->tls))
            shm_add(&c->w->stats->tls_resumed, 1);
        conn_set_state(c, CONN_WAIT_REQUEST);
        if (conn_ask_claim(c, CONN_CLAIM_AT_HANDSHAKE) == CONN_CLAIM_FAILED) {
            conn_close(c, reason_server_error);
            break;
        }
        /* A request that came with the client's Finished may have been read
         * ahead with it: then the socket will not say so. If nothing is
         * buffered, the socket wakes us when the request comes. */
        if (c->state == CONN_WAIT_REQUEST && c->reading && tls_conn_has_buffered(c->tls))
            ev_feed_event(ev, &c->rio, EV_READ);
        break;
    case TLS_STEP_WANT_READ:
    case TLS_STEP_WANT_WRITE:
        conn_update_read(c);
        break;
    case TLS_STEP_EOF:
        conn_count_handshake(c, SHM_TLS_CLOSED);
        log_debug("TLS handshake with %s: %s", conn_peer_host(c), tls_conn_failure(c->tls));
        conn_close(c, reason_client_closed);
        break;
    case TLS_STEP_PLAIN_HTTP:
        conn_count_handshake(c, SHM_TLS_FAILED);
        log_debug("TLS handshake with %s: %s", conn_peer_host(c), tls_conn_failure(c->tls));
        if (!c->proto->on_plain_http) {
            conn_close(c, reason_protocol_error);
            break;
        }
        /* Like nginx, say so in clear (a 400) rather than just hang up: the
         * TLS session goes, the connection is a cleartext one until it ends. */
        tls_conn_free(c->tls);
        c->tls = NULL;
        c->tls_want_write = 0;
        conn_update_write_watch(c);
        if (c->w->stats)
            atomic_fetch_sub_explicit(&c->w->stats->tls_open, 1, memory_order_relaxed);
        c->proto->on_plain_http(c);
        break;
    case TLS_STEP_FAILED:
        /* An ALPN refusal apart: a jump in it is clients (or an attack)
         * speaking another protocol to this port, not broken TLS. */
        conn_count_handshake(c,
                             tls_conn_no_protocol(c->tls) ? SHM_TLS_NO_PROTOCOL : SHM_TLS_FAILED);
        log_debug("TLS handshake with %s failed: %s", conn_peer_host(c), tls_conn_failure(c->tls));
        conn_close(c, reason_protocol_error);
        break;
    }
}

/* ---- reading ---- */

/*
 * A connection with no buffered input reads into the worker's buffer, lent
 * to it for this callback; afterwards only the bytes the protocol left
 * unconsumed (a pipelined request, body beyond the flow-control mark, part
 * of a frame) are copied into a buffer of the connection's own. So c->in
 * holds memory only while it holds input, and the parser keeps what it
 * needs of a head in its own arena: no read buffer per idle connection.
 */
static void conn_lend_input(conn *c)
{
    buf_free(&c->in);
    c->in = c->w->rbuf;
    c->w->rbuf = (buf)BUF_INIT;
    buf_reset(&c->in);
    c->in_lent = 1;
}

/* Give the lent buffer back; keep a copy of what is left in it. 0 or -1. */
static int conn_return_input(conn *c)
{
    if (!c->in_lent) {
        conn_drop_empty_input(c);
        return 0;
    }
    buf lent = c->in;
    buf own = BUF_INIT;
    c->in_lent = 0;
    int rc = buf_append(&own, buf_head(&lent), buf_size(&lent));
    c->in = own;
    buf_reset(&lent);
    if (!c->w->rbuf.data)
        c->w->rbuf = lent;
    else
        buf_free(&lent);
    return rc;
}

static void conn_on_read(struct ev_loop *ev, ev_io *w, int revents)
{
    conn *c = w->data;
    if (c->state == CONN_HANDSHAKE) {
        conn_tls_step(c);
        return;
    }
    if (buf_size(&c->in) == 0)
        conn_lend_input(c);
    int drained = 0; /* the socket said EAGAIN: OpenSSL holds no whole record */
    for (int rounds = 0; rounds < 4; rounds++) {
        char *p = buf_reserve(&c->in, READ_CHUNK);
        if (!p) {
            conn_close(c, reason_server_error);
            return;
        }
        ssize_t n = c->tls ? tls_conn_read(c->tls, p, READ_CHUNK) : read(c->fd, p, READ_CHUNK);
        if (n > 0) {
            if (c->state == CONN_LINGER)
                continue; /* discard */
            buf_commit(&c->in, (size_t)n);
            if (c->w->stats)
                shm_add(&c->w->stats->bytes_in, (uint64_t)n);
            /* A short read drained the socket; over TLS, records read
             * ahead may still wait inside OpenSSL. */
            if ((size_t)n < READ_CHUNK && !(c->tls && tls_conn_has_buffered(c->tls)))
                break;
            continue;
        }
        if (n == 0) {
            c->eof = 1;
            if (c->state == CONN_LINGER) {
                conn_close(c, NULL);
                return;
            }
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            drained = 1;
            break;
        }
        /* A reset is the client going away; anything else is a read failure. */
        conn_close(c, errno == ECONNRESET ? reason_client_closed : reason_read_error);
        return;
    }
    if (conn_fate_of(c) == CONN_GONE)
        return;
    if (c->tls && tls_conn_wants_write(c->tls) && !c->tls_want_write) {
        c->tls_want_write = 1; /* e.g. a KeyUpdate to answer on a full socket */
        conn_update_write_watch(c);
    }
    if (c->alt_proto && c->state == CONN_WAIT_REQUEST && !c->served && buf_size(&c->in) > 0 &&
        conn_ask_claim(c, CONN_CLAIM_AT_INPUT) == CONN_CLAIM_FAILED) {
        conn_close(c, reason_server_error);
        return;
    }
    if (c->state != CONN_LINGER && buf_size(&c->in) > 0 && !c->alt_proto &&
        c->proto->on_input(c) == CONN_GONE)
        return;
    if (conn_return_input(c) < 0) {
        conn_close(c, reason_server_error);
        return;
    }
    if (c->state == CONN_LINGER)
        return;
    if (c->eof && c->proto->on_eof(c) == CONN_GONE)
        return;
    conn_update_read(c);
    conn_update_timer(c, PROGRESS_READ);
    /* What the app answered while this input was read goes out now, as
     * nginx writes in its handler: left for the round's safe point, the
     * first of several hundred ready connections would wait for all the
     * others, and the tail latency at high concurrency doubles. Only when
     * this connection was the last one scheduled (the head of the list):
     * unlinking from the middle would cost a walk. */
    if (c->in_flush_list && c->w->flush_list == c) {
        c->w->flush_list = c->flush_next;
        c->in_flush_list = 0;
        if (conn_flush(c) == CONN_GONE)
            return;
    }
    /* Records read ahead (or the rest of a big one) wait inside OpenSSL
     * when this round stopped before EAGAIN: read on without the socket. */
    if (c->tls && c->reading && !drained && tls_conn_has_buffered(c->tls))
        ev_feed_event(ev, &c->rio, EV_READ);
}

/* ---- writing ---- */

static ssize_t conn_tls_writev(void *ctx, const struct iovec *iov, int cnt)
{
    return tls_conn_writev(ctx, iov, cnt);
}

static ssize_t conn_tls_sendfile(void *ctx, int fd, off_t *offset, size_t len)
{
    return tls_conn_sendfile(ctx, fd, offset, len);
}

void conn_schedule_flush(conn *c)
{
    if (c->in_flush_list || c->state == CONN_CLOSED || c->write_blocked)
        return;
    c->in_flush_list = 1;
    c->flush_next = c->w->flush_list;
    c->w->flush_list = c;
}

static void conn_flush_list_remove(conn *c)
{
    if (!c->in_flush_list)
        return;
    for (conn **pp = &c->w->flush_list; *pp; pp = &(*pp)->flush_next) {
        if (*pp == c) {
            *pp = c->flush_next;
            break;
        }
    }
    c->in_flush_list = 0;
}

void conn_write_last(conn *c)
{
    size_t written = 0;
    if (outq_buffered(&c->out) && c->tls) {
        outq_sink sink = {c->tls, conn_tls_writev, conn_tls_sendfile};
        (void)outq_write_sink(&c->out, &sink, &written);
    } else if (outq_buffered(&c->out)) {
        (void)outq_write(&c->out, c->fd, &written);
    }
    if (written && c->w->stats)
        shm_add(&c->w->stats->bytes_out, written);
    /* Input left unread would make the close a TCP reset, and a reset may
     * destroy those last bytes at the peer before it reads them. */
    char sink[4096];
    for (int i = 0; i < 16 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
}

conn_fate conn_flush(conn *c)
{
    if (c->state == CONN_CLOSED)
        return CONN_GONE;
    size_t written = 0;
    outq_result r = OUTQ_DONE;
    if (outq_buffered(&c->out) && c->tls) {
        outq_sink sink = {c->tls, conn_tls_writev, conn_tls_sendfile};
        r = outq_write_sink(&c->out, &sink, &written);
    } else if (outq_buffered(&c->out)) {
        r = outq_write(&c->out, c->fd, &written);
    }
    if (written && c->w->stats)
        shm_add(&c->w->stats->bytes_out, written);
    if (r == OUTQ_ERROR) {
        conn_close(c, reason_write_error);
        return CONN_GONE;
    }
    if (r == OUTQ_AGAIN && !c->write_blocked) {
        c->write_blocked = 1;
        conn_update_write_watch(c);
    } else if (r == OUTQ_DONE && c->write_blocked) {
        c->write_blocked = 0;
        conn_update_write_watch(c);
    }
    if (c->state == CONN_CLOSING) {
        if (r == OUTQ_DONE) {
            /* Linger only when the client may still be sending: else a plain close. */
            if (c->eof || (buf_size(&c->in) == 0 && !c->proto->peer_may_send(c))) {
                conn_close(c, NULL);
                return CONN_GONE;
            }
            conn_set_state(c, CONN_LINGER);
        } else {
            conn_update_timer(c, written > 0 ? PROGRESS_WRITE : PROGRESS_NONE);
        }
        return CONN_ALIVE;
    }
    if (c->proto->on_written(c) == CONN_GONE)
        return CONN_GONE;
    conn_update_timer(c, written > 0 ? PROGRESS_WRITE : PROGRESS_NONE);
    return CONN_ALIVE;
}

static void conn_on_write(struct ev_loop *ev, ev_io *w, int revents)
{
    conn *c = w->data;
    if (c->state == CONN_HANDSHAKE) {
        conn_tls_step(c);
        return;
    }
    int read_waited = c->tls_want_write;
    c->tls_want_write = 0;
    if (conn_flush(c) == CONN_GONE)
        return;
    /* A TLS read that had to write first (a key update) is retried now; it
     * sets tls_want_write again if the socket is still full. */
    if (read_waited) {
        conn_update_write_watch(c);
        conn_update_read(c);
        if (c->reading)
            ev_feed_event(ev, &c->rio, EV_READ);
    }
}

void conn_flush_all(worker_ctx *w)
{
    while (w->flush_list) {
        conn *c = w->flush_list;
        w->flush_list = c->flush_next;
        c->in_flush_list = 0;
        if (conn_flush(c) == CONN_GONE)
            continue; /* closed: freed at the safe point, off the list already */
    }
}

/* ---- ending ---- */

void conn_notice_drain(worker_ctx *w)
{
    conn *c = w->conns;
    while (c) {
        conn *next = c->next; /* on_drain may close c (freed later, still linked out) */
        if (c->state != CONN_CLOSED && c->proto->on_drain)
            c->proto->on_drain(c);
        c = next;
    }
}

/* A FIN alone cannot tell a client that half-closed and still reads from
 * one that closed for good; the second one's TCP answers any byte we send
 * after it with a reset, which the socket keeps as an error and a hang-up
 * (POLLERR, POLLHUP) that poll reports without consuming: a FIN only gives
 * POLLIN/POLLRDHUP. */
int conn_peer_reset(const conn *c)
{
    if (c->fd < 0)
        return 0;
    struct pollfd p = {.fd = c->fd, .events = 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

static void conn_free_job(const runq_item *it)
{
    free(it->a);
}

void conn_close_after_write(conn *c)
{
    if (c->state == CONN_CLOSED || c->state == CONN_CLOSING || c->state == CONN_LINGER)
        return;
    conn_set_state(c, CONN_CLOSING);
    conn_schedule_flush(c);
}

void conn_close(conn *c, const char *reason)
{
    if (c->state == CONN_CLOSED)
        return;
    worker_ctx *w = c->w;
    struct ev_loop *ev = w->loop.ev;
    c->proto->on_close(c, reason);
    c->state = CONN_CLOSED;
    ev_io_stop(ev, &c->rio);
    ev_io_stop(ev, &c->wio);
    ev_timer_stop(ev, &c->timer);
    conn_flush_list_remove(c);
    /* An orderly end says so (close_notify); a cut-off one just closes. */
    int was_tls = c->tls != NULL;
    if (c->tls && !reason)
        tls_conn_close_notify(c->tls);
    close(c->fd);
    c->fd = -1;
    tls_conn_free(c->tls);
    c->tls = NULL;
    /* A client cut off mid-stream leaves its queue (up to high_watermark, in
     * segments each too small to count alone): worth a trim once they add up. */
    memtrim_note(ev, outq_buffered(&c->out) + c->in.cap);
    outq_free(&c->out);
    buf_free(&c->in); /* if it was lent, the worker allocates another */
    c->in_lent = 0;
    c->proto->release(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->n_conns--;
    if (c->status_listener)
        w->n_status_conns--;
    if (w->stats) {
        atomic_fetch_sub_explicit(&w->stats->open_connections, 1, memory_order_relaxed);
        if (was_tls)
            atomic_fetch_sub_explicit(&w->stats->tls_open, 1, memory_order_relaxed);
    }
    /* Freed at the safe point: callers up the stack may still hold c. */
    if (loop_queue(&w->loop, conn_free_job, NULL, c, NULL, NULL) < 0)
        log_error("leaking a connection record (out of memory)");
    if (w->on_conn_count)
        w->on_conn_count(w);
}
