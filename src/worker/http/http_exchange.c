/*
 * http_exchange.c - the protocol-neutral half of an http (and sse) scope's
 * exchange: what a send may do in which state (start -> body... -> final,
 * or -> trailers -> final), content-length and body-source checks, send
 * completion parked under the watermarks, what the app's completion means
 * (the 500 backstop, a truncated response, or nothing), the 504 of
 * timeouts.response and the access log's facts. Framing, the connection's
 * fate and the bytes' way out are the carrier's (http_exchange.h).
 */
#include "http_exchange.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shm.h"
#include "worker/core/access_log.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"

static const char *const state_names[] = {"none", "started", "trailers", "final"};

void http_exchange_begin(http_exchange *x, const http_carrier *car, void *owner, double log_start)
{
    http_parked_send *parked = x->parked;
    uint32_t cap = x->cap_parked;
    memset(x, 0, sizeof *x);
    x->car = car;
    x->owner = owner;
    x->content_length = -1;
    x->log_start = log_start;
    x->parked = parked;
    x->cap_parked = cap;
}

void http_exchange_free(http_exchange *x)
{
    free(x->parked);
    x->parked = NULL;
    x->n_parked = x->cap_parked = 0;
}

/*
 * The arrows of the response machine. NONE -> FINAL is the server's own
 * answer in the app's place (a refusal, the 500 and 504 backstops);
 * FINAL -> FINAL is the carrier saying the last byte went out.
 */
void http_exchange_set_state(http_exchange *x, http_resp_state to)
{
    static const unsigned char arrow[4][4] = {
        [HX_NONE] = {[HX_STARTED] = 1, [HX_FINAL] = 1},
        [HX_STARTED] = {[HX_TRAILERS] = 1, [HX_FINAL] = 1},
        [HX_TRAILERS] = {[HX_FINAL] = 1},
        [HX_FINAL] = {[HX_FINAL] = 1},
    };
    if (!arrow[x->resp][to])
        log_error("bug: %s exchange moved from %s to %s", x->car ? x->car->name : "?",
                  state_names[x->resp], state_names[to]);
    x->resp = to;
}

/* ---- completion and backpressure ---- */

static void park_send(http_exchange *x, pagi_scope *s, pagi_send_cb cb, void *ud)
{
    if (x->n_parked == x->cap_parked) {
        uint32_t ncap = x->cap_parked ? x->cap_parked * 2 : 4;
        http_parked_send *v = ncap > x->cap_parked ? realloc(x->parked, ncap * sizeof *v) : NULL;
        if (!v) {
            /* Cannot park: complete now rather than lose the completion. */
            scope_complete_send(s, cb, ud, NULL);
            return;
        }
        x->parked = v;
        x->cap_parked = ncap;
    }
    x->parked[x->n_parked].cb = cb;
    x->parked[x->n_parked].ud = ud;
    x->n_parked++;
}

void http_exchange_settle_parked(http_exchange *x, pagi_scope *s, const char *err)
{
    for (uint32_t i = 0; i < x->n_parked; i++)
        scope_complete_send(s, x->parked[i].cb, x->parked[i].ud, err);
    x->n_parked = 0;
}

/*
 * The mark is the carrier's measure of what it holds for this exchange:
 * HTTP/1.1 the connection's output queue, HTTP/2 the stream's own bytes
 * not yet framed (a connection-wide mark would let one stream whose window
 * stays shut stall the completions of every other).
 */
void http_exchange_after_append(http_exchange *x, pagi_scope *s, pagi_send_cb cb, void *ud)
{
    x->car->pushed(x);
    if (!x->above_high && x->car->queued(x) >= scope_worker(s)->cfg->high_watermark) {
        x->above_high = 1;
        scope_notify_high_water(s);
    }
    if (!cb)
        return;
    if (x->above_high)
        park_send(x, s, cb, ud);
    else
        scope_complete_send(s, cb, ud, NULL);
}

void http_exchange_written(http_exchange *x, pagi_scope *s, size_t low_watermark)
{
    if (x->above_high && x->car->queued(x) < low_watermark) {
        x->above_high = 0;
        scope_notify_drain(s);
        http_exchange_settle_parked(x, s, NULL);
    }
}

/* ---- sends ---- */

int http_exchange_start(http_exchange *x, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                        void *ud, const char *what)
{
    if (x->resp != HX_NONE)
        return scope_fail(s, "%s: a response was already started", what);
    if (ev->status < 200 || ev->status > 999)
        return scope_fail(s, "%s: status must be 200-999 (got %d)", what, ev->status);
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "%s: header_count without headers", what);
    x->trailers_announced = ev->trailers ? 1 : 0;
    if (x->car->start(x, s, ev, what) < 0)
        return -1;
    worker_ctx *w = scope_worker(s);
    http_exchange_set_state(x, HX_STARTED);
    x->status = ev->status;
    if (w->alog)
        access_log_response_start(w->alog, s, ev);
    shm_count_request(w->stats, ev->status);
    scope_mark_started(s);
    http_exchange_after_append(x, s, cb, ud);
    return 0;
}

http_body_source http_body_source_of(const pagi_event *ev)
{
    int from_file = ev->file != NULL, from_fd = ev->use_fd != 0;
    if (from_file + from_fd > 1 || ((from_file || from_fd) && ev->body.len > 0))
        return HX_BODY_CONFLICT;
    return from_file ? HX_BODY_FILE : from_fd ? HX_BODY_FD : HX_BODY_MEMORY;
}

const char *http_trailers_refusal(int not_started, int announced, int framed)
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
            return scope_fail(s, "http.response.body: cannot open %s: %s", ev->file,
                              strerror(errno));
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

int http_exchange_body(http_exchange *x, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                       void *ud)
{
    const http_carrier *car = x->car;
    if (x->resp == HX_NONE)
        return scope_fail(s, "http.response.body: http.response.start was not sent");
    if (x->resp != HX_STARTED)
        return scope_fail(s, "http.response.body: the body was already finished");
    http_body_source src = http_body_source_of(ev);
    if (src == HX_BODY_CONFLICT)
        return scope_fail(s, "http.response.body: body, file and fd are mutually exclusive");
    if (ev->body.len && !ev->body.ptr)
        return scope_fail(s, "http.response.body: body length without data");
    int64_t cl = x->content_length;
    int final, short_of_length;
    if (src != HX_BODY_MEMORY) {
        int fd = -1;
        off_t off = 0;
        size_t len = 0;
        if (open_body_file(s, ev, &fd, &off, &len) < 0)
            return -1;
        int64_t total = x->body_sent + (int64_t)len;
        short_of_length = cl >= 0 && total < cl; /* a file response is implicitly complete */
        if ((cl >= 0 && total > cl) || (short_of_length && car->strict_length)) {
            close(fd);
            return scope_fail(s, "http.response.body: body %s content-length",
                              total > cl ? "exceeds" : "falls short of");
        }
        if (x->no_body || len == 0)
            close(fd);
        else if (car->body_file(x, s, fd, off, len) < 0)
            return -1;
        x->body_sent = total;
        final = 1;
    } else {
        size_t len = ev->body.len;
        int64_t total = x->body_sent + (int64_t)len;
        final = !ev->more;
        short_of_length = final && cl >= 0 && total < cl;
        if (cl >= 0 && total > cl)
            return scope_fail(s, "http.response.body: body exceeds content-length");
        if (short_of_length && car->strict_length)
            return scope_fail(s, "http.response.body: body falls short of content-length");
        if (!x->no_body && len > 0 && car->body_mem(x, s, ev->body.ptr, len) < 0)
            return -1;
        x->body_sent = total;
    }
    if (final) {
        int trailers_follow = x->trailers_announced && x->framed;
        http_exchange_set_state(x, trailers_follow ? HX_TRAILERS : HX_FINAL);
        if (car->body_end(x, s, trailers_follow, short_of_length && !x->no_body) < 0)
            return -1;
    }
    http_exchange_after_append(x, s, cb, ud);
    return 0;
}

int http_exchange_trailers(http_exchange *x, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                           void *ud)
{
    const http_carrier *car = x->car;
    /* Www.pod: "after trailers are transmitted the server MUST consider the
     * response body complete": they also end a body left open (more => 1). */
    if (x->resp == HX_STARTED && x->trailers_announced && x->framed) {
        if (car->strict_length && x->content_length >= 0 && x->body_sent < x->content_length)
            return scope_fail(s, "http.response.trailers: the body falls short of content-length");
        http_exchange_set_state(x, HX_TRAILERS);
        if (car->body_end(x, s, 1, 0) < 0)
            return -1;
    }
    if (x->resp != HX_TRAILERS)
        return scope_fail(
            s, "%s", http_trailers_refusal(x->resp == HX_NONE, x->trailers_announced, x->framed));
    if (car->trailers(x, s, ev) < 0)
        return -1;
    http_exchange_set_state(x, HX_FINAL);
    http_exchange_after_append(x, s, cb, ud);
    return 0;
}

int http_exchange_send(const http_carrier *car, pagi_scope *s, const pagi_event *ev,
                       pagi_send_cb cb, void *ud)
{
    http_exchange *x = car->exchange(s);
    int go = scope_http_send_gate(s, ev, x != NULL, cb, ud);
    if (go <= 0)
        return go;
    switch (ev->type) {
    case PAGI_EV_HTTP_RESPONSE_START:
        return http_exchange_start(x, s, ev, cb, ud, "http.response.start");
    case PAGI_EV_HTTP_RESPONSE_BODY:
        return http_exchange_body(x, s, ev, cb, ud);
    default:
        return http_exchange_trailers(x, s, ev, cb, ud);
    }
}

/* ---- the server's own answers ---- */

/* A response the server makes for the app: the scope counts as started (the
 * app may no longer start one), the access log shows status. */
static void answer_for_app(http_exchange *x, pagi_scope *s, int status, const char *text,
                           const char *reason, int may_keep)
{
    scope_mark_started(s);
    x->status = status;
    x->car->answer(x, s, status, text, reason, may_keep);
}

void http_exchange_finished(const http_carrier *car, pagi_scope *s, const char *error)
{
    http_exchange *x = car->exchange(s);
    const char *method = pagi_scope_method(s);
    pagi_str path = pagi_scope_raw_path(s);
    int plen = path.len > 200 ? 200 : (int)path.len;
    if (!x || !scope_is_connected(s)) {
        /* The client already left (or the response completed): not an app error to report. */
        if (error)
            log_info("app error on %s %.*s after the exchange ended: %s", method, plen, path.ptr,
                     error);
        return;
    }
    if (x->resp == HX_NONE) {
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
        answer_for_app(x, s, 500, "Internal Server Error", reason_server_error, 0);
        return;
    }
    if (x->resp != HX_FINAL) {
        log_error("app %s%s after starting its response to %s %.*s; %s",
                  error ? "failed: " : "finished without completing the body", error ? error : "",
                  method, plen, path.ptr, car->abort_says);
        /* What the app already sent still goes out; the missing end tells the client. */
        car->abort(x, s, reason_server_error);
        return;
    }
    if (error)
        log_warn("app error after its response to %s %.*s was sent: %s", method, plen, path.ptr,
                 error);
}

/* timeouts.response (scope_response.c logged it): 504 in the response's
 * place; whether the connection stays is the carrier's to say. */
void http_exchange_response_timeout(const http_carrier *car, pagi_scope *s)
{
    http_exchange *x = car->exchange(s);
    if (!x || x->resp != HX_NONE)
        return;
    answer_for_app(x, s, 504, "the application did not respond in time", reason_response_timeout,
                   1);
}

size_t http_exchange_buffered(const http_carrier *car, const pagi_scope *s)
{
    http_exchange *x = car->exchange(s);
    return x ? car->queued(x) : 0;
}

int http_exchange_above_high(const http_carrier *car, const pagi_scope *s)
{
    http_exchange *x = car->exchange(s);
    return x ? x->above_high : 0;
}

void http_exchange_log(const http_exchange *x, conn *c, pagi_scope *s, const char *reason)
{
    worker_ctx *w = scope_worker(s);
    if (!w->alog)
        return;
    uint64_t bytes =
        x->resp == HX_NONE || x->no_body || x->body_sent < 0 ? 0 : (uint64_t)x->body_sent;
    access_log_request(w->alog, c, s, x->log_start, x->status, bytes, reason);
}
