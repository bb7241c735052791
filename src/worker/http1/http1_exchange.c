/*
 * http1_exchange.c - the http scope's side of one HTTP/1.1 request: send
 * validation and the response state machine (start -> body... -> final ->
 * [trailers]), send completion under the watermarks, request body delivery
 * to pull receives, 100 Continue on the first receive, and what the app's
 * completion means (the 500 backstop, truncation, or nothing).
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

/* ---- completion and backpressure ---- */

static void park_send(conn *c, pagi_send_cb cb, void *ud)
{
    h1_conn *h = &c->h1;
    if (h->n_parked == h->cap_parked) {
        size_t ncap = h->cap_parked ? h->cap_parked * 2 : 4;
        h1_parked_send *v = realloc(h->parked, ncap * sizeof *v);
        if (!v) {
            /* Cannot park: complete now rather than lose the completion. */
            scope_complete_send(h->scope, cb, ud, NULL);
            return;
        }
        h->parked = v;
        h->cap_parked = ncap;
    }
    h->parked[h->n_parked].cb = cb;
    h->parked[h->n_parked].ud = ud;
    h->n_parked++;
}

void h1_exchange_settle_parked(conn *c, const char *err)
{
    h1_conn *h = &c->h1;
    for (size_t i = 0; i < h->n_parked; i++)
        scope_complete_send(h->scope, h->parked[i].cb, h->parked[i].ud, err);
    h->n_parked = 0;
}

void h1_exchange_after_append(conn *c, pagi_send_cb cb, void *ud)
{
    h1_conn *h = &c->h1;
    conn_schedule_flush(c);
    if (!h->above_high && outq_buffered(&c->out) >= c->w->cfg->high_watermark) {
        h->above_high = 1;
        scope_notify_high_water(h->scope);
    }
    if (!cb)
        return;
    if (h->above_high)
        park_send(c, cb, ud);
    else
        scope_complete_send(h->scope, cb, ud, NULL);
}

/* ---- sends ---- */

int h1x_send_start(pagi_scope *s, conn *c, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    h1_conn *h = &c->h1;
    if (h->resp != RESP_NONE)
        return scope_fail(s, "http.response.start: a response was already started");
    if (ev->status < 200 || ev->status > 999)
        return scope_fail(s, "http.response.start: status must be 200-999 (got %d)", ev->status);
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "http.response.start: header_count without headers");
    h1_response_ctx ctx = {
        .http_minor = h->http_minor,
        .head_request = h->head_request,
        /* A body the app never read keeps the connection from being reused. */
        .keep_alive = h->req_keep_alive && h->msg_complete && !c->w->draining && !h->close_after,
        .trailers = ev->trailers ? 1 : 0,
        .announce_keep_alive = h->announce_keep_alive,
        .date = h1_date_now((long)ev_now(c->w->loop.ev)),
    };
    buf *head = &c->w->scratch;
    buf_reset(head);
    const char *err = NULL;
    if (h1_response_head(head, ev->status, ev->headers, ev->header_count, &ctx, &h->plan, &err) < 0)
        return scope_fail(s, "http.response.start: %s", err ? err : "invalid response");
    if (outq_append(&c->out, buf_head(head), buf_size(head)) < 0)
        return scope_fail(s, "http.response.start: out of memory");
    h->resp = RESP_STARTED;
    h->continue_pending = 0;
    h->trailers_announced = ctx.trailers;
    h->log_status = ev->status;
    if (c->w->alog)
        access_log_response_start(c->w->alog, s, ev);
    shm_count_request(c->w->stats, ev->status);
    scope_mark_started(s);
    h1_exchange_after_append(c, cb, ud);
    return 0;
}

int h1x_append_chunk_header(conn *c, size_t n)
{
    char line[32];
    int k = snprintf(line, sizeof line, "%zx\r\n", n);
    return outq_append(&c->out, line, (size_t)k);
}

/* Open the file or duplicate the fd, and clamp offset/length to the file. */
static int open_body_file(pagi_scope *s, const pagi_event *ev, int *fd_out, off_t *off, size_t *len)
{
    if (ev->offset < 0)
        return scope_fail(s, "http.response.body: offset must be a non-negative integer");
    if (ev->length < 0)
        return scope_fail(s, "http.response.body: length must be a non-negative integer");
    int fd = ev->file ? open(ev->file, O_RDONLY | O_CLOEXEC) : fcntl(ev->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        if (ev->file)
            return scope_fail(s, "http.response.body: cannot open %s: %s", ev->file, strerror(errno));
        return scope_fail(s, "http.response.body: invalid fd %d: %s", ev->fd, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return scope_fail(s, "http.response.body: not a regular file");
    }
    int64_t size = st.st_size;
    int64_t o = ev->offset > size ? size : ev->offset;
    int64_t l = size - o;
    if (ev->length > 0 && ev->length < l) /* 0: to EOF */
        l = ev->length;
    *fd_out = fd;
    *off = (off_t)o;
    *len = (size_t)l;
    return 0;
}

h1x_body_source h1x_body_source_of(const pagi_event *ev)
{
    int from_file = ev->file != NULL, from_fd = ev->use_fd != 0;
    if (from_file + from_fd > 1 || ((from_file || from_fd) && ev->body.len > 0))
        return H1X_BODY_CONFLICT;
    return from_file ? H1X_BODY_FILE : from_fd ? H1X_BODY_FD : H1X_BODY_MEMORY;
}

const char *h1x_trailers_refusal(int not_started, int announced, int framed)
{
    if (not_started)
        return "http.response.trailers: http.response.start was not sent";
    if (!announced)
        return "http.response.trailers: the http.response.start did not declare trailers => 1";
    if (!framed)
        return "http.response.trailers: this response cannot carry trailers (a content-length "
               "was set, or the client speaks HTTP/1.0)";
    return "http.response.trailers: the response already ended (trailers were sent)";
}

int h1x_send_body(pagi_scope *s, conn *c, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    h1_conn *h = &c->h1;
    if (h->resp == RESP_NONE)
        return scope_fail(s, "http.response.body: http.response.start was not sent");
    if (h->resp != RESP_STARTED)
        return scope_fail(s, "http.response.body: the body was already finished");
    h1x_body_source src = h1x_body_source_of(ev);
    if (src == H1X_BODY_CONFLICT)
        return scope_fail(s, "http.response.body: body, file and fd are mutually exclusive");
    int from_file = src == H1X_BODY_FILE, from_fd = src == H1X_BODY_FD;
    if (ev->body.len && !ev->body.ptr)
        return scope_fail(s, "http.response.body: body length without data");
    int64_t cl = h->plan.content_length;
    int final;
    if (from_file || from_fd) {
        int fd = -1;
        off_t off = 0;
        size_t len = 0;
        if (open_body_file(s, ev, &fd, &off, &len) < 0)
            return -1;
        if (cl >= 0 && h->body_sent + (int64_t)len > cl) {
            close(fd);
            return scope_fail(s, "http.response.body: body exceeds content-length");
        }
        if (h->plan.no_body || len == 0) {
            close(fd);
        } else {
            int rc = h->plan.chunked ? h1x_append_chunk_header(c, len) : 0;
            if (rc == 0)
                rc = outq_append_file(&c->out, fd, off, len);
            else
                close(fd);
            if (rc == 0 && h->plan.chunked)
                rc = outq_append(&c->out, "\r\n", 2);
            if (rc < 0)
                return scope_fail(s, "http.response.body: out of memory");
        }
        h->body_sent += (int64_t)len;
        final = 1; /* a file response is implicitly complete */
    } else {
        size_t len = ev->body.len;
        if (cl >= 0 && h->body_sent + (int64_t)len > cl)
            return scope_fail(s, "http.response.body: body exceeds content-length");
        if (!h->plan.no_body && len > 0) {
            /* pagi_send_buf: the body goes out from the app's buffer, framed
             * by the chunk lines around it. */
            pagi_buf *lent = scope_send_buf(s, ev->body.ptr, len);
            int rc = h->plan.chunked ? h1x_append_chunk_header(c, len) : 0;
            if (rc == 0)
                rc = lent ? pagi_buf_queue(lent, &c->out) : outq_append(&c->out, ev->body.ptr, len);
            if (rc == 0 && h->plan.chunked)
                rc = outq_append(&c->out, "\r\n", 2);
            if (rc < 0)
                return scope_fail(s, "http.response.body: out of memory");
        }
        h->body_sent += (int64_t)len;
        final = !ev->more;
    }
    if (final) {
        if (h->trailers_announced && h->plan.chunked) {
            h->resp = RESP_TRAILERS;
        } else {
            if (h->plan.chunked && !h->plan.no_body)
                outq_append(&c->out, "0\r\n\r\n", 5);
            if (cl >= 0 && h->body_sent < cl && !h->plan.no_body) {
                /* The client would wait for bytes that never come: close after. */
                log_warn("response to %s shorter than its content-length; closing",
                         pagi_scope_method(s));
                h->plan.keep_alive = 0;
            }
            h->resp = RESP_FINAL;
        }
    }
    h1_exchange_after_append(c, cb, ud);
    return 0;
}

static int send_trailers(pagi_scope *s, conn *c, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    h1_conn *h = &c->h1;
    /* Www.pod: "after trailers are transmitted the server MUST consider the
     * response body complete": they also end a body left open (more => 1). */
    if (h->resp == RESP_STARTED && h->trailers_announced && h->plan.chunked)
        h->resp = RESP_TRAILERS;
    if (h->resp != RESP_TRAILERS)
        return scope_fail(
            s, "%s",
            h1x_trailers_refusal(h->resp == RESP_NONE, h->trailers_announced, h->plan.chunked));
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    const char *err = NULL;
    if (h1_chunk_last(tmp, ev->headers, ev->header_count, &err) < 0)
        return scope_fail(s, "http.response.trailers: %s", err ? err : "invalid trailer");
    if (!h->plan.no_body && outq_append(&c->out, buf_head(tmp), buf_size(tmp)) < 0)
        return scope_fail(s, "http.response.trailers: out of memory");
    h->resp = RESP_FINAL;
    h1_exchange_after_append(c, cb, ud);
    return 0;
}

static int h1x_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    conn *c = exchange_conn(s);
    int go = scope_http_send_gate(s, ev, c != NULL, cb, ud);
    if (go <= 0)
        return go;
    switch (ev->type) {
    case PAGI_EV_HTTP_RESPONSE_START:
        return h1x_send_start(s, c, ev, cb, ud);
    case PAGI_EV_HTTP_RESPONSE_BODY:
        return h1x_send_body(s, c, ev, cb, ud);
    default:
        return send_trailers(s, c, ev, cb, ud);
    }
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
    h1_conn *h = &c->h1;
    if (buf_size(&h->body) == 0 && !(h->msg_complete && !h->body_end_delivered))
        return 0; /* more body to come, or the body is done and only a disconnect is left */
    if (!take)
        return 1;
    scope_deliver_body(s, &h->body, h->msg_complete, req_type, ev);
    if (h->msg_complete)
        h->body_end_delivered = 1;
    conn_refresh(c); /* room again: resume reading */
    if (!h->msg_complete && buf_size(&c->in) > 0) {
        h1_conn_on_input(c);
        conn_refresh(c);
    }
    return 1;
}

void h1x_receive_wanted(pagi_scope *s)
{
    conn *c = exchange_conn(s);
    if (!c)
        return;
    h1_conn *h = &c->h1;
    if (h->continue_pending && h->resp == RESP_NONE) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        outq_append(&c->out, cont, sizeof cont - 1);
        conn_schedule_flush(c);
    }
    h->continue_pending = 0;
    conn_refresh(c);
}

/* ---- the app finished ---- */

void h1x_finished(pagi_scope *s, const char *error)
{
    conn *c = exchange_conn(s);
    const char *method = pagi_scope_method(s);
    pagi_str path = pagi_scope_raw_path(s);
    int plen = path.len > 200 ? 200 : (int)path.len;
    if (!c || !scope_is_connected(s)) {
        /* The client already left (or the response completed): not an app error to report. */
        if (error)
            log_info("app error on %s %.*s after the exchange ended: %s", method, plen, path.ptr,
                     error);
        return;
    }
    h1_conn *h = &c->h1;
    if (h->resp == RESP_NONE) {
        if (error)
            log_error("app failed before responding to %s %.*s: %s; sent 500", method, plen,
                      path.ptr, error);
        else if (*pagi_scope_error(s))
            /* The likely cause: a call the server refused, that the app did not report. */
            log_error("app finished without responding to %s %.*s (its last refused call: %s); "
                      "sent 500",
                      method, plen, path.ptr, pagi_scope_error(s));
        else
            log_error("app finished without responding to %s %.*s; sent 500", method, plen,
                      path.ptr);
        scope_mark_started(s);
        h->log_status = 500;
        h1_abort_exchange(c, reason_server_error);
        buf *tmp = &c->w->scratch;
        buf_reset(tmp);
        shm_count_request(c->w->stats, 500);
        if (h1_error_response(tmp, 500, "Internal Server Error",
                              h1_date_now((long)ev_now(c->w->loop.ev)), 0) == 0)
            outq_append(&c->out, buf_head(tmp), buf_size(tmp));
        conn_close_after_write(c);
        return;
    }
    if (h->resp != RESP_FINAL) {
        log_error("app %s%s after starting its response to %s %.*s; connection closed",
                  error ? "failed: " : "finished without completing the body", error ? error : "",
                  method, plen, path.ptr);
        /* What the app already sent still goes out; the missing end tells the client. */
        h1_abort_exchange(c, reason_server_error);
        conn_close_after_write(c);
        return;
    }
    if (error)
        log_warn("app error after its response to %s %.*s was sent: %s", method, plen, path.ptr,
                 error);
}

/*
 * timeouts.response: the app has not started its response. 504 in its
 * place and the scope hears the disconnect; a request read whole keeps the
 * connection (an HTTP/1.1 keep-alive one), one whose body is still due
 * closes it (the rest of the body is not worth reading to stay in sync).
 */
void h1x_response_timeout(pagi_scope *s)
{
    conn *c = exchange_conn(s);
    if (!c || c->h1.scope != s || c->h1.resp != RESP_NONE)
        return;
    h1_conn *h = &c->h1;
    int keep = h->msg_complete && h->req_keep_alive && h->http_minor == 1 && !h->close_after &&
               !c->w->draining && !c->eof;
    scope_mark_started(s);
    h->log_status = 504;
    h1_abort_exchange(c, reason_response_timeout);
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    shm_count_request(c->w->stats, 504);
    if (h1_error_response(tmp, 504, "the application did not respond in time",
                          h1_date_now((long)ev_now(c->w->loop.ev)), keep) == 0)
        outq_append(&c->out, buf_head(tmp), buf_size(tmp));
    conn_schedule_flush(c);
    if (keep) {
        c->served++; /* answered: the keep-alive timeout applies now */
        h1_exchange_next(c, 1);
    } else
        conn_close_after_write(c);
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
        conn_flush(c); /* mid-response: it completes nothing, so starts no next request */
        if (c->state == CONN_CLOSED || !scope_is_connected(s))
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
    return c ? c->h1.above_high : 0;
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
