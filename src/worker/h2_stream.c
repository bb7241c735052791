/*
 * h2_stream.c - one HTTP/2 stream as a PAGI http scope: the request head
 * collected from HPACK fields (limits applied, pseudo-headers turned into
 * the scope's method/path/host), the body delivered to pull receives with
 * WINDOW_UPDATEs released only as the app takes it, and the response
 * framed by nghttp2 from a data source that respects the send windows.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/shm.h"
#include "access_log.h"
#include "apps/metrics.h"
#include "h2_int.h"
#include "http1_exchange.h"
#include "http1_parser.h"
#include "http1_response.h"
#include "reason.h"
#include "scope.h"
#include "sse.h"
#include "tls_conn.h"

enum { P_METHOD, P_PATH, P_SCHEME, P_AUTHORITY, P__COUNT };
enum { R_NONE, R_STARTED, R_TRAILERS, R_FINAL };

/* Offsets of one field in hbuf: name NUL value NUL. */
typedef struct h2_field {
    uint32_t name, nlen, value, vlen;
} h2_field;

typedef struct h2_parked {
    pagi_send_cb cb;
    void *ud;
} h2_parked;

struct h2_stream {
    h2_session *h;
    int32_t id;
    h2_stream *prev, *next;
    pagi_scope *scope;
    int ready;      /* the head is whole: start it after the read */
    int peer_reset; /* the client's RST_STREAM ended it */
    int started;    /* its scope was made (or it was refused): no longer waiting to start */
    int refuse;     /* answer this status without the app (431, 400, 501) */
    /* request head, while it comes */
    buf hbuf;
    h2_field *fv;
    size_t nf, capf, hbytes;
    int pseudo[P__COUNT];
    double log_start;
    /* request body */
    buf body;
    int req_end, end_delivered;
    /* response */
    int resp, status, no_body, trailers_announced, submitted, deferred, above_high;
    int64_t content_length, body_sent;
    buf out;     /* body bytes not yet framed */
    int file_fd; /* a file body after them, or -1 */
    off_t file_off;
    size_t file_left;
    buf trailers; /* name NUL value NUL ..., once sent by the app */
    size_t n_trailers;
    int trailers_ready;
    h2_parked *parked;
    size_t n_parked, cap_parked;
    sse_stream *sse; /* the event stream of an sse scope (owned), else NULL */
};

static const scope_ops h2_scope_ops;
static const scope_ops h2_sse_ops;
static const sse_carrier h2_sse_carrier;

static conn *st_conn(const h2_stream *st)
{
    return st->h->c;
}

static size_t st_pending(const h2_stream *st)
{
    return buf_size(&st->out) + st->file_left;
}

h2_stream *h2_stream_new(h2_session *h, int32_t id)
{
    h2_stream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->h = h;
    st->id = id;
    st->file_fd = -1;
    st->content_length = -1;
    for (int i = 0; i < P__COUNT; i++)
        st->pseudo[i] = -1;
    st->log_start = ev_now(h->c->w->loop.ev);
    st->next = h->streams;
    if (h->streams)
        h->streams->prev = st;
    h->streams = st;
    h->n_streams++;
    h2_session_streams_changed(h);
    return st;
}

int h2_stream_answered(const h2_stream *st)
{
    return st->resp != R_NONE || st->refuse;
}

/* ---- the request head ---- */

static const char *field_name(const h2_stream *st, const h2_field *f)
{
    return buf_head(&st->hbuf) + f->name;
}

static const char *field_value(const h2_stream *st, const h2_field *f)
{
    return buf_head(&st->hbuf) + f->value;
}

int h2_stream_header(h2_stream *st, const uint8_t *name, size_t nl, const uint8_t *value, size_t vl)
{
    const pagid_limits *l = &st_conn(st)->w->cfg->limits;
    st->hbytes += nl + vl + 32; /* RFC 9113's accounting of a header list */
    if (st->refuse)
        /* Past the limit: stop storing; far past it, stop the stream. */
        return st->hbytes > 2 * l->max_header_size + 65536 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
                                                           : 0;
    if (st->hbytes > l->max_header_size || st->nf >= l->max_header_count) {
        st->refuse = 431;
        buf_free(&st->hbuf);
        free(st->fv);
        st->fv = NULL;
        st->nf = st->capf = 0;
        return 0;
    }
    int slot = -1;
    if (nl && name[0] == ':') {
        static const char *const names[P__COUNT] = {":method", ":path", ":scheme", ":authority"};
        for (int i = 0; i < P__COUNT; i++)
            if (strlen(names[i]) == nl && !memcmp(names[i], name, nl))
                slot = i;
        if (slot < 0) {
            /* :protocol (extended CONNECT) is not enabled; nghttp2 refuses others. */
            st->refuse = 400;
            return 0;
        }
    }
    if (st->nf == st->capf) {
        size_t ncap = st->capf ? st->capf * 2 : 16;
        h2_field *v = realloc(st->fv, ncap * sizeof *v);
        if (!v)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        st->fv = v;
        st->capf = ncap;
    }
    h2_field *f = &st->fv[st->nf];
    f->name = (uint32_t)buf_size(&st->hbuf);
    f->nlen = (uint32_t)nl;
    f->value = f->name + (uint32_t)nl + 1;
    f->vlen = (uint32_t)vl;
    if (buf_append(&st->hbuf, name, nl) < 0 || buf_append(&st->hbuf, "", 1) < 0 ||
        buf_append(&st->hbuf, value, vl) < 0 || buf_append(&st->hbuf, "", 1) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (slot >= 0)
        st->pseudo[slot] = (int)st->nf;
    st->nf++;
    return 0;
}

void h2_stream_headers_done(h2_stream *st, int end_stream)
{
    st->ready = 1;
    if (end_stream)
        st->req_end = 1;
}

/* The scope's headers: regular fields in order, cookies joined with "; "
 * (RFC 9113 8.2.3), :authority as host (replacing one the client sent). */
static int build_headers(h2_stream *st, pagi_header **out, size_t *n, buf *cookies)
{
    pagi_header *hv = calloc(st->nf + 1, sizeof *hv);
    if (!hv)
        return -1;
    size_t k = 0;
    int have_auth = st->pseudo[P_AUTHORITY] >= 0;
    if (have_auth) {
        const h2_field *a = &st->fv[st->pseudo[P_AUTHORITY]];
        hv[k].name = (pagi_str){"host", 4};
        hv[k].value = (pagi_str){field_value(st, a), a->vlen};
        k++;
    }
    size_t cookie_at = SIZE_MAX;
    for (size_t i = 0; i < st->nf; i++) {
        const h2_field *f = &st->fv[i];
        const char *nm = field_name(st, f);
        if (f->nlen && nm[0] == ':')
            continue;
        if (have_auth && f->nlen == 4 && !memcmp(nm, "host", 4))
            continue;
        if (f->nlen == 6 && !memcmp(nm, "cookie", 6)) {
            if (buf_size(cookies) && buf_append(cookies, "; ", 2) < 0)
                goto oom;
            if (buf_append(cookies, field_value(st, f), f->vlen) < 0)
                goto oom;
            if (cookie_at != SIZE_MAX)
                continue;
            cookie_at = k;
        }
        hv[k].name = (pagi_str){nm, f->nlen};
        hv[k].value = (pagi_str){field_value(st, f), f->vlen};
        k++;
    }
    if (cookie_at != SIZE_MAX)
        hv[cookie_at].value = (pagi_str){buf_head(cookies), buf_size(cookies)};
    *out = hv;
    *n = k;
    return 0;
oom:
    free(hv);
    return -1;
}

static void submit_refusal(h2_stream *st, int status, const char *text, int log_line);
static void drop_body(h2_stream *st);

/* Accept: text/event-stream (any method) makes an sse scope, as over HTTP/1.1. */
static int accepts_event_stream(const h2_stream *st)
{
    for (size_t i = 0; i < st->nf; i++) {
        const h2_field *f = &st->fv[i];
        if (f->nlen == 6 && !memcmp(field_name(st, f), "accept", 6) &&
            strcasestr(field_value(st, f), "text/event-stream"))
            return 1;
    }
    return 0;
}

/* Make the scope of a stream whose head is whole; 0, or an HTTP status to refuse with. */
static int stream_make_scope(h2_stream *st)
{
    conn *c = st_conn(st);
    if (st->pseudo[P_METHOD] < 0)
        return 400;
    const char *method = field_value(st, &st->fv[st->pseudo[P_METHOD]]);
    if (!strcmp(method, "CONNECT"))
        return 501; /* RFC 8441 (WebSockets over HTTP/2) is not enabled yet */
    if (st->pseudo[P_PATH] < 0)
        return 400;
    const h2_field *pf = &st->fv[st->pseudo[P_PATH]];
    const char *target = field_value(st, pf);
    const char *qm = memchr(target, '?', pf->vlen);
    size_t rawlen = qm ? (size_t)(qm - target) : pf->vlen;
    char *path = malloc(rawlen + 1);
    if (!path)
        return 500;
    size_t plen = h1_percent_decode(path, target, rawlen);
    path[plen] = 0;
    if (memchr(path, 0, plen)) {
        free(path);
        return 400; /* a decoded NUL would cut the path short as a C string */
    }
    pagi_header *hv = NULL;
    size_t nh = 0;
    buf cookies = BUF_INIT;
    if (build_headers(st, &hv, &nh, &cookies) < 0) {
        free(path);
        return 500;
    }
    const char *scheme = c->tls ? "https" : "http";
    if (st->pseudo[P_SCHEME] >= 0) {
        const char *sv = field_value(st, &st->fv[st->pseudo[P_SCHEME]]);
        if (!strcmp(sv, "https") || !strcmp(sv, "http"))
            scheme = sv;
    }
    scope_request sr = {
        .method = method,
        .http_version = "2",
        .scheme = scheme,
        .path = {path, plen},
        .raw_path = {target, rawlen},
        .query = {qm ? qm + 1 : "", qm ? pf->vlen - rawlen - 1 : 0},
        .headers = hv,
        .header_count = nh,
        .client_host = c->peer_family ? conn_peer_host(c) : NULL,
        .client_port = c->peer_port,
        .server_host = c->server_host,
        .server_port = c->server_port,
        .tls = c->tls ? tls_conn_info(c->tls) : NULL,
    };
    pagi_scope *s = NULL;
    pagi_scope_type type = PAGI_SCOPE_HTTP;
    const scope_ops *ops = &h2_scope_ops;
    if (!c->status_listener && accepts_event_stream(st)) {
        st->sse = sse_stream_new(c->w, &h2_sse_carrier, st);
        type = PAGI_SCOPE_SSE;
        ops = &h2_sse_ops;
    }
    if ((!c->tls || sr.tls) && (type == PAGI_SCOPE_HTTP || st->sse))
        s = scope_new(c->w, type, ops, st, &sr);
    free(path);
    free(hv);
    buf_free(&cookies);
    if (!s) {
        sse_stream_free(st->sse);
        st->sse = NULL;
        return 500;
    }
    st->scope = s;
    st->no_body = !strcmp(method, "HEAD");
    return 0;
}

static void stream_start_one(h2_stream *st)
{
    conn *c = st_conn(st);
    st->ready = 0;
    st->started = 1;
    int status = st->refuse ? st->refuse : stream_make_scope(st);
    /* The head's storage is the scope's now (copied), or no longer needed. */
    buf_free(&st->hbuf);
    free(st->fv);
    st->fv = NULL;
    st->nf = st->capf = 0;
    if (status) {
        drop_body(st);
        log_info("HTTP/2 stream %d from %s: refused with %d", st->id, conn_peer_host(c), status);
        submit_refusal(st, status,
                       status == 431   ? "request header fields too large"
                       : status == 501 ? "CONNECT is not supported"
                       : status == 500 ? "out of memory"
                                       : "malformed request",
                       1);
        return;
    }
    pagi_scope *s = st->scope;
    scope_ref(s);
    if (c->status_listener)
        app_metrics.handle(s, c->w);
    else
        scope_start_app(s);
    scope_unref(s);
}

void h2_stream_start_ready(h2_session *h)
{
    /* Starting an app may end streams (a synchronous answer does not, but a
     * connection closed by it would): walk from a stream we hold still. */
    int again = 1;
    while (again && h->c->state != CONN_CLOSED) {
        again = 0;
        for (h2_stream *st = h->streams; st; st = st->next) {
            if (st->ready) {
                stream_start_one(st);
                again = 1;
                break;
            }
        }
    }
}

/* ---- the request body ---- */

int h2_stream_data(h2_stream *st, const uint8_t *data, size_t len)
{
    if (st->started && (!st->scope || !scope_is_connected(st->scope) || st->end_delivered)) {
        /* Nobody will read it: give the window back at once. (Before its
         * app starts, a body waits: the stream window bounds it.) */
        nghttp2_session_consume(st->h->ng, st->id, len);
        h2_session_kick(st->h);
        return 0;
    }
    if (buf_append(&st->body, data, len) < 0)
        return -1;
    if (st->scope)
        scope_poke_receive(st->scope);
    return 0;
}

void h2_stream_request_end(h2_stream *st)
{
    st->req_end = 1;
    if (st->scope)
        scope_poke_receive(st->scope);
}

static int body_event(pagi_scope *s, pagi_event *ev, int take, pagi_event_type req_type,
                      pagi_event_type disc_type)
{
    h2_stream *st = scope_proto(s);
    if (!st || !scope_is_connected(s) || scope_is_complete(s)) {
        if (take) {
            ev->type = disc_type;
            const char *r = pagi_conn_disconnect_reason(s);
            ev->reason.ptr = r ? r : "";
            ev->reason.len = r ? strlen(r) : 0;
        }
        return 1;
    }
    if (buf_size(&st->body) == 0 && !(st->req_end && !st->end_delivered))
        return 0;
    if (!take)
        return 1;
    buf *d = scope_delivery_buf(s);
    buf tmp = *d;
    *d = st->body;
    st->body = tmp;
    buf_reset(&st->body);
    ev->type = req_type;
    ev->body.ptr = buf_size(d) ? buf_head(d) : "";
    ev->body.len = buf_size(d);
    ev->more = !st->req_end;
    if (st->req_end)
        st->end_delivered = 1;
    if (buf_size(d)) {
        /* The app took these bytes: the client may send as many more. */
        nghttp2_session_consume(st->h->ng, st->id, buf_size(d));
        h2_session_kick(st->h);
    }
    return 1;
}

static int h2_next_event(pagi_scope *s, pagi_event *ev, int take)
{
    return body_event(s, ev, take, PAGI_EV_HTTP_REQUEST, PAGI_EV_HTTP_DISCONNECT);
}

static void h2_receive_wanted(pagi_scope *s)
{
    h2_stream *st = scope_proto(s);
    if (st)
        conn_refresh(st_conn(st)); /* the request timeout may apply now */
}

int h2_stream_any_waiting(const h2_session *h)
{
    for (const h2_stream *st = h->streams; st; st = st->next) {
        if (!st->started && !st->ready)
            return 1; /* a header block still coming: no slowloris by CONTINUATION */
        if (st->scope && !st->req_end && buf_size(&st->body) == 0 &&
            scope_receive_waiting(st->scope))
            return 1;
    }
    return 0;
}

/* ---- ending ---- */

static void stream_end_scope(h2_stream *st, const char *reason);

void h2_stream_timeout_waiting(h2_session *h)
{
    for (h2_stream *st = h->streams; st; st = st->next) {
        int head = !st->started && !st->ready;
        int body = st->scope && !st->req_end && buf_size(&st->body) == 0 &&
                   scope_receive_waiting(st->scope);
        if (!head && !body)
            continue;
        log_info("HTTP/2 stream %d from %s: request timeout", st->id, conn_peer_host(h->c));
        stream_end_scope(st, reason_client_timeout);
        st->started = 1; /* no scope to make for it any more */
        st->ready = 0;
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    }
    h2_session_kick(h);
}

static void settle_parked(h2_stream *st)
{
    for (size_t i = 0; i < st->n_parked; i++)
        scope_complete_send(st->scope, st->parked[i].cb, st->parked[i].ud, NULL);
    st->n_parked = 0;
}

/* The one way a stream lets go of its scope: completed (reason NULL) or
 * not. Idempotent, so exactly one end per scope whatever comes first. */
static void stream_end_scope(h2_stream *st, const char *reason)
{
    pagi_scope *s = st->scope;
    if (!s)
        return;
    conn *c = st_conn(st);
    if (c->w->alog)
        access_log_request(c->w->alog, c, s, st->log_start, st->status,
                           st->no_body || st->body_sent < 0 ? 0 : (uint64_t)st->body_sent, reason);
    if (reason) {
        scope_disconnect(s, reason);
        settle_parked(st);
    } else {
        scope_mark_complete(s);
        settle_parked(st);
        c->served++;
        if (c->w->on_request_done)
            c->w->on_request_done(c->w);
    }
    sse_stream_free(st->sse); /* its timers stop with it */
    st->sse = NULL;
    st->scope = NULL;
    scope_detach(s);
}

/* Body bytes no app will take: the connection's window gets them back. */
static void drop_body(h2_stream *st)
{
    if (buf_size(&st->body))
        nghttp2_session_consume(st->h->ng, st->id, buf_size(&st->body));
    buf_free(&st->body);
}

void h2_stream_response_sent(h2_stream *st)
{
    st->resp = R_FINAL;
    stream_end_scope(st, NULL);
    drop_body(st);
    /* The answer is whole while the request is not: tell the client to stop
     * sending it (RFC 9113 8.1), rather than take a body nobody reads. */
    if (!st->req_end)
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
}

static void stream_free(h2_stream *st)
{
    h2_session *h = st->h;
    h->pending -= st_pending(st);
    if (st->prev)
        st->prev->next = st->next;
    else
        h->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    h->n_streams--;
    if (st->file_fd >= 0)
        close(st->file_fd);
    buf_free(&st->hbuf);
    free(st->fv);
    buf_free(&st->body);
    buf_free(&st->out);
    buf_free(&st->trailers);
    free(st->parked);
    sse_stream_free(st->sse);
    free(st);
}

void h2_stream_peer_reset(h2_stream *st)
{
    st->peer_reset = 1;
}

void h2_stream_closed(h2_stream *st, uint32_t error_code)
{
    h2_session *h = st->h;
    if (st->scope) {
        /* A client's RST_STREAM (CANCEL, usually) is the client leaving this
         * request; our own reset is a protocol or server error. */
        const char *reason = st->peer_reset || error_code == NGHTTP2_NO_ERROR ? reason_client_closed
                             : error_code == NGHTTP2_INTERNAL_ERROR           ? reason_server_error
                                                                    : reason_protocol_error;
        stream_end_scope(st, reason);
    }
    stream_free(st);
    h2_session_streams_changed(h);
}

void h2_stream_abort_all(h2_session *h, const char *reason)
{
    for (h2_stream *st = h->streams; st; st = st->next)
        stream_end_scope(st, reason ? reason : reason_server_shutdown);
}

void h2_stream_free_all(h2_session *h)
{
    while (h->streams)
        stream_free(h->streams);
}

/* ---- the response ---- */

static int name_is(pagi_str n, const char *lower)
{
    size_t k = strlen(lower);
    return n.len == k && !strncasecmp(n.ptr, lower, k);
}

/* Fields HTTP/2 forbids (RFC 9113 8.2.2) or the server owns. */
static int hop_by_hop(pagi_str n)
{
    return name_is(n, "connection") || name_is(n, "keep-alive") || name_is(n, "proxy-connection") ||
           name_is(n, "transfer-encoding") || name_is(n, "upgrade");
}

static void park_send(h2_stream *st, pagi_send_cb cb, void *ud)
{
    if (st->n_parked == st->cap_parked) {
        size_t ncap = st->cap_parked ? st->cap_parked * 2 : 4;
        h2_parked *v = realloc(st->parked, ncap * sizeof *v);
        if (!v) {
            scope_complete_send(st->scope, cb, ud, NULL);
            return;
        }
        st->parked = v;
        st->cap_parked = ncap;
    }
    st->parked[st->n_parked].cb = cb;
    st->parked[st->n_parked].ud = ud;
    st->n_parked++;
}

/* After a send queued bytes: pump, and complete or park under the
 * connection's watermark (bytes held across all its streams). */
static void after_append(h2_stream *st, pagi_send_cb cb, void *ud)
{
    h2_session *h = st->h;
    if (st->deferred) {
        st->deferred = 0;
        nghttp2_session_resume_data(h->ng, st->id);
    }
    h2_session_kick(h);
    if (!st->above_high && h->pending >= st_conn(st)->w->cfg->high_watermark) {
        st->above_high = 1;
        scope_notify_high_water(st->scope);
    }
    if (!cb)
        return;
    if (st->above_high)
        park_send(st, cb, ud);
    else
        scope_complete_send(st->scope, cb, ud, NULL);
}

void h2_stream_after_write(h2_session *h)
{
    if (h->pending >= h->c->w->cfg->low_watermark)
        return;
    for (h2_stream *st = h->streams; st; st = st->next) {
        if (st->above_high && st->scope) {
            st->above_high = 0;
            scope_notify_drain(st->scope);
            settle_parked(st);
        }
    }
}

/* Submit the response head with the stream's data source behind it. */
static int submit_head(h2_stream *st, int status, const pagi_header *hdr, size_t n,
                       const char **err)
{
    conn *c = st_conn(st);
    nghttp2_nv *nva = calloc(n + 2, sizeof *nva);
    char code[4] = {(char)('0' + status / 100), (char)('0' + status / 10 % 10),
                    (char)('0' + status % 10), 0};
    buf *names = &c->w->scratch;
    buf_reset(names);
    if (!nva) {
        *err = "out of memory";
        return -1;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += hdr[i].name.len;
    if (buf_reserve(names, total + 1) == NULL) {
        free(nva);
        *err = "out of memory";
        return -1;
    }
    size_t k = 0;
    nva[k++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE};
    int have_date = 0;
    for (size_t i = 0; i < n; i++) {
        if (hop_by_hop(hdr[i].name))
            continue;
        if (name_is(hdr[i].name, "date"))
            have_date = 1;
        /* HTTP/2 field names are lower case; the app may have written Content-Type. */
        char *lower = buf_reserve(names, hdr[i].name.len);
        for (size_t j = 0; j < hdr[i].name.len; j++) {
            char ch = hdr[i].name.ptr[j];
            lower[j] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
        }
        buf_commit(names, hdr[i].name.len);
        nva[k++] = (nghttp2_nv){(uint8_t *)lower, (uint8_t *)hdr[i].value.ptr, hdr[i].name.len,
                                hdr[i].value.len, NGHTTP2_NV_FLAG_NONE};
    }
    const char *date = h1_date_now((long)ev_now(c->w->loop.ev));
    if (!have_date)
        nva[k++] =
            (nghttp2_nv){(uint8_t *)"date", (uint8_t *)date, 4, strlen(date), NGHTTP2_NV_FLAG_NONE};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = h2_stream_read};
    int rv = nghttp2_submit_response(st->h->ng, st->id, nva, k, &prd);
    free(nva);
    if (rv != 0) {
        *err = nghttp2_strerror(rv);
        return -1;
    }
    st->submitted = 1;
    return 0;
}

/* Answer status with a short text body, without (or no longer with) the app. */
static void submit_refusal(h2_stream *st, int status, const char *text, int log_line)
{
    conn *c = st_conn(st);
    st->refuse = status;
    st->status = status;
    shm_count_request(c->w->stats, status);
    if (log_line && c->w->alog)
        access_log_request(c->w->alog, c, NULL, st->log_start, status, 0, NULL);
    static const pagi_header ct = {{"content-type", 12}, {"text/plain; charset=utf-8", 25}};
    const char *err = NULL;
    if (buf_append(&st->out, text, strlen(text)) < 0 || buf_append(&st->out, "\n", 1) < 0) {
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    } else {
        st->h->pending += buf_size(&st->out);
        st->resp = R_FINAL;
        if (submit_head(st, status, &ct, 1, &err) < 0)
            nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    }
    h2_session_kick(st->h);
}

static int parse_clen(pagi_str v, int64_t *out)
{
    int64_t n = 0;
    size_t i = 0;
    while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
        i++;
    size_t digits = 0;
    for (; i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9'; i++, digits++) {
        if (n > (INT64_MAX - 9) / 10)
            return -1;
        n = n * 10 + (v.ptr[i] - '0');
    }
    while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
        i++;
    if (!digits || i != v.len)
        return -1;
    *out = n;
    return 0;
}

static int send_start(pagi_scope *s, h2_stream *st, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    if (st->resp != R_NONE)
        return scope_fail(s, "http.response.start: a response was already started");
    if (ev->status < 200 || ev->status > 999)
        return scope_fail(s, "http.response.start: status must be 200-999 (got %d)", ev->status);
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "http.response.start: header_count without headers");
    const char *err = NULL;
    int64_t clen = -1;
    for (size_t i = 0; i < ev->header_count; i++) {
        if (h1_header_check(&ev->headers[i], &err) < 0)
            return scope_fail(s, "http.response.start: %s", err);
        if (name_is(ev->headers[i].name, "content-length")) {
            int64_t v;
            if (parse_clen(ev->headers[i].value, &v) < 0 || (clen >= 0 && v != clen))
                return scope_fail(s, "http.response.start: invalid content-length");
            clen = v;
        }
    }
    if (ev->status == 204 || ev->status == 304)
        st->no_body = 1;
    st->content_length = st->no_body ? -1 : clen;
    if (submit_head(st, ev->status, ev->headers, ev->header_count, &err) < 0)
        return scope_fail(s, "http.response.start: %s", err);
    conn *c = st_conn(st);
    st->resp = R_STARTED;
    st->status = ev->status;
    st->trailers_announced = ev->trailers ? 1 : 0;
    shm_count_request(c->w->stats, ev->status);
    scope_mark_started(s);
    after_append(st, cb, ud);
    return 0;
}

static int open_body_file(pagi_scope *s, const pagi_event *ev, int *fd_out, off_t *off, size_t *len)
{
    if (ev->offset < 0 || ev->length < 0)
        return scope_fail(s, "http.response.body: offset and length must be non-negative");
    int fd = ev->file ? open(ev->file, O_RDONLY | O_CLOEXEC) : fcntl(ev->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        if (ev->file)
            return scope_fail(s, "http.response.body: cannot open %s: %s", ev->file,
                              strerror(errno));
        return scope_fail(s, "http.response.body: invalid fd %d: %s", ev->fd, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return scope_fail(s, "http.response.body: not a regular file");
    }
    int64_t size = sb.st_size;
    int64_t o = ev->offset > size ? size : ev->offset;
    int64_t l = size - o;
    if (ev->length > 0 && ev->length < l)
        l = ev->length;
    *fd_out = fd;
    *off = (off_t)o;
    *len = (size_t)l;
    return 0;
}

static int send_body(pagi_scope *s, h2_stream *st, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    if (st->resp == R_NONE)
        return scope_fail(s, "http.response.body: http.response.start was not sent");
    if (st->resp != R_STARTED)
        return scope_fail(s, "http.response.body: the body was already finished");
    h1x_body_source src = h1x_body_source_of(ev);
    if (src == H1X_BODY_CONFLICT)
        return scope_fail(s, "http.response.body: body, file and fd are mutually exclusive");
    if (ev->body.len && !ev->body.ptr)
        return scope_fail(s, "http.response.body: body length without data");
    int64_t cl = st->content_length;
    size_t before = st_pending(st);
    int final;
    if (src != H1X_BODY_MEMORY) {
        int fd = -1;
        off_t off = 0;
        size_t len = 0;
        if (open_body_file(s, ev, &fd, &off, &len) < 0)
            return -1;
        if (cl >= 0 && st->body_sent + (int64_t)len > cl) {
            close(fd);
            return scope_fail(s, "http.response.body: body exceeds content-length");
        }
        if (st->no_body || len == 0) {
            close(fd);
        } else {
            st->file_fd = fd;
            st->file_off = off;
            st->file_left = len;
        }
        st->body_sent += (int64_t)len;
        final = 1;
    } else {
        size_t len = ev->body.len;
        if (cl >= 0 && st->body_sent + (int64_t)len > cl)
            return scope_fail(s, "http.response.body: body exceeds content-length");
        if (!st->no_body && len && buf_append(&st->out, ev->body.ptr, len) < 0)
            return scope_fail(s, "http.response.body: out of memory");
        st->body_sent += (int64_t)len;
        final = !ev->more;
    }
    st->h->pending += st_pending(st) - before;
    if (final)
        st->resp = st->trailers_announced ? R_TRAILERS : R_FINAL;
    after_append(st, cb, ud);
    return 0;
}

static int send_trailers(pagi_scope *s, h2_stream *st, const pagi_event *ev, pagi_send_cb cb,
                         void *ud)
{
    if (st->resp != R_TRAILERS)
        return scope_fail(s, "http.response.trailers: needs trailers=1 on the start and the final "
                             "body sent first");
    const char *err = NULL;
    for (size_t i = 0; i < ev->header_count; i++)
        if (h1_header_check(&ev->headers[i], &err) < 0)
            return scope_fail(s, "http.response.trailers: %s", err);
    for (size_t i = 0; i < ev->header_count; i++) {
        pagi_str nm = ev->headers[i].name, v = ev->headers[i].value;
        if (hop_by_hop(nm) || name_is(nm, "content-length"))
            continue;
        char *lower = buf_reserve(&st->trailers, nm.len + v.len + 2);
        if (!lower)
            return scope_fail(s, "http.response.trailers: out of memory");
        for (size_t j = 0; j < nm.len; j++)
            lower[j] = nm.ptr[j] >= 'A' && nm.ptr[j] <= 'Z' ? (char)(nm.ptr[j] + 32) : nm.ptr[j];
        lower[nm.len] = 0;
        if (v.len)
            memcpy(lower + nm.len + 1, v.ptr, v.len);
        lower[nm.len + 1 + v.len] = 0;
        buf_commit(&st->trailers, nm.len + v.len + 2);
        st->n_trailers++;
    }
    st->trailers_ready = 1;
    st->resp = R_FINAL;
    after_append(st, cb, ud);
    return 0;
}

/* nghttp2 asks for the next DATA payload of st's response. */
ssize_t h2_stream_read(nghttp2_session *ng, int32_t id, uint8_t *dst, size_t len, uint32_t *flags,
                       nghttp2_data_source *src, void *ud)
{
    (void)ud;
    h2_stream *st = src->ptr;
    h2_session *h = st->h;
    size_t n = 0;
    if (buf_size(&st->out)) {
        n = buf_size(&st->out) < len ? buf_size(&st->out) : len;
        memcpy(dst, buf_head(&st->out), n);
        buf_consume(&st->out, n);
        if (!buf_size(&st->out))
            buf_free(&st->out);
    } else if (st->file_left) {
        size_t want = st->file_left < len ? st->file_left : len;
        ssize_t r = pread(st->file_fd, dst, want, st->file_off);
        if (r <= 0) {
            log_error("HTTP/2 stream %d: reading the response file: %s", id,
                      r < 0 ? strerror(errno) : "file shrank");
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        n = (size_t)r;
        st->file_off += (off_t)n;
        st->file_left -= n;
        if (!st->file_left) {
            close(st->file_fd);
            st->file_fd = -1;
        }
    }
    h->pending -= n;
    if (st_pending(st))
        return (ssize_t)n;
    if (st->resp == R_FINAL && !st->trailers_announced) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (st->resp == R_FINAL && st->trailers_ready) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->n_trailers) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            nghttp2_nv *nva = calloc(st->n_trailers, sizeof *nva);
            if (!nva)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            const char *p = buf_head(&st->trailers);
            for (size_t i = 0; i < st->n_trailers; i++) {
                size_t nl = strlen(p);
                const char *v = p + nl + 1;
                size_t vl = strlen(v);
                nva[i] = (nghttp2_nv){(uint8_t *)p, (uint8_t *)v, nl, vl, NGHTTP2_NV_FLAG_NONE};
                p = v + vl + 1;
            }
            int rv = nghttp2_submit_trailer(ng, id, nva, st->n_trailers);
            free(nva);
            if (rv)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    } else if (n == 0) {
        st->deferred = 1; /* resumed by the app's next send */
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

/* ---- scope ops ---- */

static int h2_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    switch (ev->type) {
    case PAGI_EV_HTTP_RESPONSE_START:
    case PAGI_EV_HTTP_RESPONSE_BODY:
    case PAGI_EV_HTTP_RESPONSE_TRAILERS:
        break;
    default:
        return scope_fail(s, "send: '%s' is not an event an http scope can send",
                          pagi_event_type_name(ev->type));
    }
    h2_stream *st = scope_proto(s);
    if (scope_is_complete(s))
        return scope_fail(s, "send: the response is already complete");
    if (!st || !scope_is_connected(s)) {
        scope_complete_send(s, cb, ud, NULL);
        return 0;
    }
    switch (ev->type) {
    case PAGI_EV_HTTP_RESPONSE_START:
        return send_start(s, st, ev, cb, ud);
    case PAGI_EV_HTTP_RESPONSE_BODY:
        return send_body(s, st, ev, cb, ud);
    default:
        return send_trailers(s, st, ev, cb, ud);
    }
}

static void h2_finished(pagi_scope *s, const char *error)
{
    h2_stream *st = scope_proto(s);
    const char *method = pagi_scope_method(s);
    pagi_str path = pagi_scope_raw_path(s);
    int plen = path.len > 200 ? 200 : (int)path.len;
    if (!st || !scope_is_connected(s)) {
        if (error)
            log_info("app error on %s %.*s after the exchange ended: %s", method, plen, path.ptr,
                     error);
        return;
    }
    if (st->resp == R_NONE) {
        log_error("app %s before responding to %s %.*s%s%s; sent 500",
                  error ? "failed" : "finished", method, plen, path.ptr, error ? ": " : "",
                  error ? error : "");
        scope_mark_started(s);
        st->status = 500;
        stream_end_scope(st, reason_server_error);
        submit_refusal(st, 500, "Internal Server Error", 0);
        return;
    }
    if (st->resp != R_FINAL) {
        log_error("app %s%s after starting its response to %s %.*s; stream reset",
                  error ? "failed: " : "finished without completing the body", error ? error : "",
                  method, plen, path.ptr);
        stream_end_scope(st, reason_server_error);
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        h2_session_kick(st->h);
        return;
    }
    if (error)
        log_warn("app error after its response to %s %.*s was sent: %s", method, plen, path.ptr,
                 error);
}

static size_t h2_buffered(const pagi_scope *s)
{
    const h2_stream *st = scope_proto(s);
    return st ? st_pending(st) : 0;
}

static int h2_above_high(const pagi_scope *s)
{
    const h2_stream *st = scope_proto(s);
    return st ? st->above_high : 0;
}

static const scope_ops h2_scope_ops = {
    .send = h2_send,
    .next_event = h2_next_event,
    .receive_wanted = h2_receive_wanted,
    .finished = h2_finished,
    .buffered = h2_buffered,
    .above_high = h2_above_high,
};

/* ---- sse scopes on a stream: sse.c's carrier ---- */

static int sse_start(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud, int decline)
{
    (void)decline; /* a declined stream simply ends; no connection to close */
    return send_start(s, scope_proto(s), ev, cb, ud);
}

static int sse_body(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    return send_body(s, scope_proto(s), ev, cb, ud);
}

static int sse_next(pagi_scope *s, pagi_event *ev, int take)
{
    return body_event(s, ev, take, PAGI_EV_SSE_REQUEST, PAGI_EV_SSE_DISCONNECT);
}

static pagi_scope *sse_scope(void *owner)
{
    return ((h2_stream *)owner)->scope;
}

static sse_stream *sse_of(const pagi_scope *s)
{
    const h2_stream *st = scope_proto(s);
    return st ? st->sse : NULL;
}

/* timeouts.sse_idle: this stream ends (reset), the connection's others go on. */
static void sse_idle(void *owner)
{
    h2_stream *st = owner;
    h2_session *h = st->h;
    int32_t id = st->id;
    stream_end_scope(st, reason_idle_timeout);
    nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    h2_session_kick(h);
}

static size_t sse_queued(void *owner)
{
    return st_pending(owner);
}

static const sse_carrier h2_sse_carrier = {
    .start = sse_start,
    .body = sse_body,
    .next_event = sse_next,
    .finished = h2_finished,
    .end = NULL,
    .scope = sse_scope,
    .stream = sse_of,
    .idle = sse_idle,
    .queued = sse_queued,
};

static int h2_sse_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    return sse_send_with(&h2_sse_carrier, s, ev, cb, ud);
}

static void h2_sse_finished(pagi_scope *s, const char *error)
{
    sse_finished_with(&h2_sse_carrier, s, error);
}

static const scope_ops h2_sse_ops = {
    .send = h2_sse_send,
    .next_event = sse_next,
    .receive_wanted = h2_receive_wanted,
    .finished = h2_sse_finished,
    .buffered = h2_buffered,
    .above_high = h2_above_high,
};
