/*
 * http1_exchange.c - HTTP/1.1 as the carrier of an http exchange
 * (h1_http_carrier, worker/http/http_exchange.h): the head, chunk framing,
 * the last chunk and trailers, the connection's fate after the server's own
 * 500/504; and the http scope's receive side: request body delivery to pull
 * receives, 100 Continue on the first receive, PSGI's write_now.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shm.h"
#include "worker/core/access_log.h"
#include "worker/core/conn.h"
#include "http1_conn.h"
#include "http1_exchange.h"
#include "worker/core/pagi_buf.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"

static conn *exchange_conn(const pagi_scope *s) { return scope_proto(s); }

/* ---- the carrier: HTTP/1.1 framing of the exchange's events ---- */

static http_exchange *h1_exchange_of(const pagi_scope *s)
{
    conn *c = exchange_conn(s);
    h1_conn *h = c ? h1_of(c) : NULL;
    return h && h->scope == s ? &h->x : NULL;
}

static conn *x_conn(const http_exchange *x)
{
    return x->owner;
}

static int h1c_start(http_exchange *x, pagi_scope *s, const pagi_event *ev, const char *what)
{
    conn *c = x_conn(x);
    h1_conn *h = h1_of(c);
    h1_response_ctx ctx = {
        .http_minor = h->http_minor,
        .head_request = h->head_request,
        /* A body the app never read keeps the connection from being reused. */
        .keep_alive = h->req_keep_alive && h->msg_complete && !c->w->draining && !h->close_after,
        .trailers = x->trailers_announced,
        .announce_keep_alive = h->announce_keep_alive,
        .date = h1_date_now((long)ev_now(c->w->loop.ev)),
    };
    buf *head = &c->w->scratch;
    buf_reset(head);
    const char *err = NULL;
    if (h1_response_head(head, ev->status, ev->headers, ev->header_count, &ctx, &h->plan, &err) < 0)
        return scope_fail(s, "%s: %s", what, err ? err : "invalid response");
    if (outq_append(&c->out, buf_head(head), buf_size(head)) < 0)
        return scope_fail(s, "%s: out of memory", what);
    x->content_length = h->plan.content_length;
    x->no_body = h->plan.no_body;
    x->framed = h->plan.chunked;
    x->trailers_announced = ctx.trailers;
    h->continue_pending = 0;
    return 0;
}

int h1x_append_chunk_header(conn *c, size_t n)
{
    char line[32];
    int k = snprintf(line, sizeof line, "%zx\r\n", n);
    return outq_append(&c->out, line, (size_t)k);
}

static int h1c_body_file(http_exchange *x, pagi_scope *s, int fd, off_t off, size_t len)
{
    conn *c = x_conn(x);
    int chunked = h1_of(c)->plan.chunked;
    int rc = chunked ? h1x_append_chunk_header(c, len) : 0;
    if (rc == 0)
        rc = outq_append_file(&c->out, fd, off, len);
    else
        close(fd);
    if (rc == 0 && chunked)
        rc = outq_append(&c->out, "\r\n", 2);
    return rc < 0 ? scope_fail(s, "http.response.body: out of memory") : 0;
}

static int h1c_body_mem(http_exchange *x, pagi_scope *s, const char *p, size_t len)
{
    conn *c = x_conn(x);
    int chunked = h1_of(c)->plan.chunked;
    /* pagi_send_buf: the body goes out from the app's buffer, framed by the
     * chunk lines around it. */
    pagi_buf *lent = scope_send_buf(s, p, len);
    int rc = chunked ? h1x_append_chunk_header(c, len) : 0;
    if (rc == 0)
        rc = lent ? pagi_buf_queue(lent, &c->out) : outq_append(&c->out, p, len);
    if (rc == 0 && chunked)
        rc = outq_append(&c->out, "\r\n", 2);
    return rc < 0 ? scope_fail(s, "http.response.body: out of memory") : 0;
}

static int h1c_body_end(http_exchange *x, pagi_scope *s, int trailers_follow, int short_of_length)
{
    conn *c = x_conn(x);
    h1_conn *h = h1_of(c);
    if (trailers_follow)
        return 0;
    if (h->plan.chunked && !h->plan.no_body)
        outq_append(&c->out, "0\r\n\r\n", 5);
    if (short_of_length) {
        /* The client would wait for bytes that never come: close after. */
        log_warn("response to %s shorter than its content-length; closing", pagi_scope_method(s));
        h->plan.keep_alive = 0;
    }
    return 0;
}

static int h1c_trailers(http_exchange *x, pagi_scope *s, const pagi_event *ev)
{
    conn *c = x_conn(x);
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    const char *err = NULL;
    if (h1_chunk_last(tmp, ev->headers, ev->header_count, &err) < 0)
        return scope_fail(s, "http.response.trailers: %s", err ? err : "invalid trailer");
    if (!h1_of(c)->plan.no_body && outq_append(&c->out, buf_head(tmp), buf_size(tmp)) < 0)
        return scope_fail(s, "http.response.trailers: out of memory");
    return 0;
}

static void h1c_pushed(http_exchange *x)
{
    conn_schedule_flush(x_conn(x));
}

static size_t h1c_queued(const http_exchange *x)
{
    return outq_buffered(&x_conn(x)->out);
}

/*
 * The server's answer in the app's place ends the exchange (the scope hears
 * reason). The 500 closes the connection after it; the 504 of
 * timeouts.response (may_keep) keeps a keep-alive HTTP/1.1 connection whose
 * request was read whole, and closes one whose body is still due (the rest
 * of it is not worth reading to stay in sync).
 */
static void h1c_answer(http_exchange *x, pagi_scope *s, int status, const char *text,
                       const char *reason, int may_keep)
{
    (void)s;
    conn *c = x_conn(x);
    h1_conn *h = h1_of(c);
    int keep = may_keep && h->msg_complete && h->req_keep_alive && h->http_minor == 1 &&
               !h->close_after && !c->w->draining && !c->eof;
    h1_abort_exchange(c, reason);
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    shm_count_request(c->w->stats, status);
    if (h1_error_response(tmp, status, text, h1_date_now((long)ev_now(c->w->loop.ev)), keep) == 0)
        outq_append(&c->out, buf_head(tmp), buf_size(tmp));
    if (!keep) {
        conn_close_after_write(c);
        return;
    }
    conn_schedule_flush(c);
    c->served++; /* answered: the keep-alive timeout applies now */
    if (h1_exchange_next(c, 1) == CONN_GONE)
        return; /* a pipelined request behind it closed the connection: nothing left to do */
}

static void h1c_abort(http_exchange *x, pagi_scope *s, const char *reason)
{
    (void)s;
    conn *c = x_conn(x);
    h1_abort_exchange(c, reason);
    conn_close_after_write(c);
}

const http_carrier h1_http_carrier = {
    .name = "HTTP/1.1",
    .strict_length = 0,
    .abort_says = "connection closed",
    .exchange = h1_exchange_of,
    .start = h1c_start,
    .body_mem = h1c_body_mem,
    .body_file = h1c_body_file,
    .body_end = h1c_body_end,
    .trailers = h1c_trailers,
    .pushed = h1c_pushed,
    .queued = h1c_queued,
    .answer = h1c_answer,
    .abort = h1c_abort,
};

static int h1x_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    return http_exchange_send(&h1_http_carrier, s, ev, cb, ud);
}

/* ---- receive ---- */

int h1x_next_body_event(pagi_scope *s, pagi_event *ev, int take, pagi_event_type req_type,
                        pagi_event_type disc_type)
{
    conn *c = exchange_conn(s);
    if (!c || !scope_is_connected(s) || scope_is_complete(s)) {
        if (take) {
            ev->type = disc_type;
            const char *r = pagi_conn_disconnect_reason(s);
            ev->reason.ptr = r ? r : "";
            ev->reason.len = r ? strlen(r) : 0;
        }
        return 1;
    }
    h1_conn *h = h1_of(c);
    if (buf_size(&h->body) == 0 && !(h->msg_complete && !h->body_end_delivered))
        return 0; /* more body to come, or the body is done and only a disconnect is left */
    if (!take)
        return 1;
    scope_deliver_body(s, &h->body, h->msg_complete, req_type, ev);
    if (h->msg_complete)
        h->body_end_delivered = 1;
    conn_refresh(c); /* room again: resume reading */
    if (!h->msg_complete && buf_size(&c->in) > 0 && h1_conn_on_input(c) == CONN_ALIVE)
        conn_refresh(c);
    return 1;
}

void h1x_receive_wanted(pagi_scope *s)
{
    conn *c = exchange_conn(s);
    if (!c)
        return;
    h1_conn *h = h1_of(c);
    if (h->continue_pending && h->x.resp == HX_NONE) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        outq_append(&c->out, cont, sizeof cont - 1);
        conn_schedule_flush(c);
    }
    h->continue_pending = 0;
    conn_refresh(c);
}

/* ---- the app finished; timeouts.response ---- */

void h1x_finished(pagi_scope *s, const char *error)
{
    http_exchange_finished(&h1_http_carrier, s, error);
}

void h1x_response_timeout(pagi_scope *s)
{
    http_exchange_response_timeout(&h1_http_carrier, s);
}

size_t h1x_buffered(const pagi_scope *s)
{
    conn *c = exchange_conn(s);
    return c ? outq_buffered(&c->out) : 0;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int h1x_write_now(pagi_scope *s, int block)
{
    conn *c = exchange_conn(s);
    if (!c || c->state == CONN_CLOSED || !scope_is_connected(s))
        return -1;
    const pagid_config *cfg = c->w->cfg;
    double limit = cfg->timeouts.write;
    if (cfg->timeouts.heartbeat > 0 && (limit <= 0 || limit > cfg->timeouts.heartbeat / 2))
        limit = cfg->timeouts.heartbeat / 2;
    double deadline = mono_now() + limit;
    for (;;) {
        /* Mid-response: it completes nothing, so starts no next request. */
        if (conn_flush(c) == CONN_GONE || !scope_is_connected(s))
            return -1; /* a write error closed it */
        if (!block || outq_buffered(&c->out) <= cfg->high_watermark)
            return 0;
        double left = deadline - mono_now();
        if (left <= 0) {
            log_info("write timeout: the client of %s read nothing for %.1fs while a PSGI app "
                     "streamed to it",
                     pagi_scope_method(s), limit);
            conn_close(c, reason_write_timeout);
            return -1;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLOUT};
        if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
            return -1;
    }
}

int h1x_above_high(const pagi_scope *s)
{
    conn *c = exchange_conn(s);
    return c && h1_of(c) ? h1_of(c)->x.above_high : 0;
}

static int h1x_next_event(pagi_scope *s, pagi_event *ev, int take)
{
    return h1x_next_body_event(s, ev, take, PAGI_EV_HTTP_REQUEST, PAGI_EV_HTTP_DISCONNECT);
}

const scope_ops h1_exchange_ops = {
    .send = h1x_send,
    .next_event = h1x_next_event,
    .receive_wanted = h1x_receive_wanted,
    .finished = h1x_finished,
    .buffered = h1x_buffered,
    .above_high = h1x_above_high,
    .write_now = h1x_write_now,
    .response_timeout = h1x_response_timeout,
};
