/*
 * h2_response.c - the response side of an HTTP/2 stream: the head as
 * HPACK fields (lower-cased names, the fields HTTP/2 forbids dropped, a
 * date added), body bytes queued on the stream and handed to nghttp2's
 * data source as the send windows allow (memory, then a file by pread),
 * trailers, and send completion parked under the stream's watermark.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shm.h"
#include "worker/core/access_log.h"
#include "h2_int.h"
#include "worker/http1/http1_exchange.h"
#include "worker/http1/http1_response.h"
#include "worker/scope/scope.h"

void h2_resp_settle_parked(h2_stream *st)
{
    for (size_t i = 0; i < st->n_parked; i++)
        scope_complete_send(st->scope, st->parked[i].cb, st->parked[i].ud, NULL);
    st->n_parked = 0;
}

/* ---- the response ---- */

static int name_is(pagi_str n, const char *lower)
{
    size_t k = strlen(lower);
    return n.len == k && !strncasecmp(n.ptr, lower, k);
}

/* Fields HTTP/2 forbids (RFC 9113 8.2.2) or the server owns. Sorted by
 * length first: this runs for every field of every response. */
static int hop_by_hop(pagi_str n)
{
    switch (n.len) {
    case 7:
        return name_is(n, "upgrade");
    case 10:
        return name_is(n, "connection") || name_is(n, "keep-alive");
    case 16:
        return name_is(n, "proxy-connection");
    case 17:
        return name_is(n, "transfer-encoding");
    default:
        return 0;
    }
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
 * stream's own watermark (bytes it holds, not yet framed). A connection-wide
 * mark would let one stream whose window the client keeps shut stall the
 * completions of every other; the connection's share is bounded by the
 * pump, which frames into the output only up to the high watermark. */
void h2_resp_after_append(h2_stream *st, pagi_send_cb cb, void *ud)
{
    h2_session *h = st->h;
    if (st->deferred) {
        st->deferred = 0;
        nghttp2_session_resume_data(h->ng, st->id);
    }
    h2_session_kick(h);
    if (!st->above_high && st_pending(st) >= st_conn(st)->w->cfg->high_watermark) {
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
    size_t low = h->c->w->cfg->low_watermark;
    for (h2_stream *st = h->streams; st; st = st->next) {
        if (st->above_high && st->scope && st_pending(st) < low) {
            st->above_high = 0;
            scope_notify_drain(st->scope);
            h2_resp_settle_parked(st);
        }
        if (st->ws && st->scope)
            h2_ws_after_write(st);
    }
}

/* Fields a response head holds without an allocation for its field list. */
#define H2_HEAD_STACK_FIELDS 16

/* Submit the response head with the stream's data source behind it.
 * nghttp2_submit_response copies every name and value before it returns,
 * so names already in lower case are passed as the app wrote them. */
static int submit_head(h2_stream *st, int status, const pagi_header *hdr, size_t n,
                       const char **err, int with_body)
{
    conn *c = st_conn(st);
    nghttp2_nv on_stack[H2_HEAD_STACK_FIELDS];
    nghttp2_nv *nva = n + 2 <= H2_HEAD_STACK_FIELDS ? on_stack : calloc(n + 2, sizeof *nva);
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
        if (nva != on_stack)
            free(nva);
        *err = "out of memory";
        return -1;
    }
    size_t k = 0;
    nva[k++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE};
    int have_date = 0;
    for (size_t i = 0; i < n; i++) {
        pagi_str nm = hdr[i].name;
        if (hop_by_hop(nm))
            continue;
        if (nm.len == 4 && name_is(nm, "date"))
            have_date = 1;
        size_t j = 0;
        while (j < nm.len && !(nm.ptr[j] >= 'A' && nm.ptr[j] <= 'Z'))
            j++;
        const char *name = nm.ptr;
        if (j < nm.len) {
            /* HTTP/2 field names are lower case; the app may have written Content-Type. */
            char *lower = buf_reserve(names, nm.len);
            memcpy(lower, nm.ptr, j);
            for (; j < nm.len; j++) {
                char ch = nm.ptr[j];
                lower[j] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
            }
            buf_commit(names, nm.len);
            name = lower;
        }
        nva[k++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)hdr[i].value.ptr, nm.len,
                                hdr[i].value.len, NGHTTP2_NV_FLAG_NONE};
    }
    const char *date = h1_date_now((long)ev_now(c->w->loop.ev));
    if (!have_date)
        nva[k++] =
            (nghttp2_nv){(uint8_t *)"date", (uint8_t *)date, 4, strlen(date), NGHTTP2_NV_FLAG_NONE};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = h2_stream_read};
    int rv = nghttp2_submit_response(st->h->ng, st->id, nva, k, with_body ? &prd : NULL);
    if (nva != on_stack)
        free(nva);
    if (rv != 0) {
        *err = nghttp2_strerror(rv);
        return -1;
    }
    st->submitted = 1;
    return 0;
}

/* Answer status with a short text body, without (or no longer with) the app. */
void h2_resp_refuse(h2_stream *st, int status, const char *text, int log_line)
{
    conn *c = st_conn(st);
    st->refuse = status;
    st->status = status;
    shm_count_request(c->w->stats, status);
    if (log_line && c->w->alog)
        access_log_request(c->w->alog, c, NULL, st->log_start, status, 0, NULL);
    /* 426 is only the websocket version refusal: it says which one (RFC 6455 4.4). */
    static const pagi_header hv[] = {{{"content-type", 12}, {"text/plain; charset=utf-8", 25}},
                                     {{"sec-websocket-version", 21}, {"13", 2}}};
    const char *err = NULL;
    if (buf_append(&st->out, text, strlen(text)) < 0 || buf_append(&st->out, "\n", 1) < 0) {
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    } else {
        st->h->pending += buf_size(&st->out);
        st->resp = R_FINAL;
        if (submit_head(st, status, hv, status == 426 ? 2 : 1, &err, 1) < 0)
            nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    }
    h2_session_kick(st->h);
}

/* RFC 9113 8.2.1: a field value may not begin or end with SP or HTAB. */
static int value_padded(pagi_str v)
{
    return v.len && (v.ptr[0] == ' ' || v.ptr[0] == '\t' || v.ptr[v.len - 1] == ' ' ||
                     v.ptr[v.len - 1] == '\t');
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

/* A copy of the app's head (an array of headers, then their bytes) in one block. */
static int keep_head(h2_stream *st, const pagi_event *ev)
{
    size_t n = ev->header_count, bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += ev->headers[i].name.len + ev->headers[i].value.len;
    char *m = malloc(n * sizeof(pagi_header) + bytes + 1);
    if (!m)
        return -1;
    pagi_header *h = (pagi_header *)m;
    char *p = m + n * sizeof(pagi_header);
    for (size_t i = 0; i < n; i++) {
        pagi_str nm = ev->headers[i].name, v = ev->headers[i].value;
        if (nm.len)
            memcpy(p, nm.ptr, nm.len);
        h[i].name = (pagi_str){p, nm.len};
        p += nm.len;
        if (v.len)
            memcpy(p, v.ptr, v.len);
        h[i].value = (pagi_str){p, v.len};
        p += v.len;
    }
    free(st->kept_head);
    st->kept_head = m;
    st->n_kept = n;
    st->kept_status = ev->status;
    return 0;
}

/* The final body of a response without one: its head ends the stream. */
static int submit_kept_head(h2_stream *st, const char **err)
{
    int rv =
        submit_head(st, st->kept_status, (const pagi_header *)st->kept_head, st->n_kept, err, 0);
    free(st->kept_head);
    st->kept_head = NULL;
    st->n_kept = 0;
    return rv;
}

int h2_resp_start(pagi_scope *s, h2_stream *st, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    return h2_resp_start_as(s, st, ev, cb, ud, "http.response.start");
}

int h2_resp_start_as(pagi_scope *s, h2_stream *st, const pagi_event *ev, pagi_send_cb cb, void *ud,
                     const char *what)
{
    if (st->resp != R_NONE)
        return scope_fail(s, "%s: a response was already started", what);
    if (ev->status < 200 || ev->status > 999)
        return scope_fail(s, "%s: status must be 200-999 (got %d)", what, ev->status);
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "%s: header_count without headers", what);
    const char *err = NULL;
    int64_t clen = -1;
    for (size_t i = 0; i < ev->header_count; i++) {
        if (h1_header_check(&ev->headers[i], &err) < 0)
            return scope_fail(s, "%s: %s", what, err);
        if (value_padded(ev->headers[i].value))
            return scope_fail(s,
                              "%s: header %.*s: the value begins or ends with whitespace (not "
                              "allowed over HTTP/2)",
                              what, (int)ev->headers[i].name.len, ev->headers[i].name.ptr);
        if (name_is(ev->headers[i].name, "content-length")) {
            int64_t v;
            if (parse_clen(ev->headers[i].value, &v) < 0 || (clen >= 0 && v != clen))
                return scope_fail(s, "%s: invalid content-length", what);
            clen = v;
        }
    }
    if (ev->status == 204 || ev->status == 304)
        st->no_body = 1;
    st->content_length = st->no_body ? -1 : clen;
    if (st->no_body && !ev->trailers) {
        /* No body (HEAD, 204, 304): the head goes out with END_STREAM once
         * the app's final body says the response is whole; keep a copy. */
        if (keep_head(st, ev) < 0)
            return scope_fail(s, "%s: out of memory", what);
    } else if (submit_head(st, ev->status, ev->headers, ev->header_count, &err, 1) < 0) {
        return scope_fail(s, "%s: %s", what, err);
    }
    conn *c = st_conn(st);
    st->resp = R_STARTED;
    st->status = ev->status;
    st->trailers_announced = ev->trailers ? 1 : 0;
    if (c->w->alog)
        access_log_response_start(c->w->alog, s, ev);
    shm_count_request(c->w->stats, ev->status);
    scope_mark_started(s);
    h2_resp_after_append(st, cb, ud);
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

/*
 * Each stream's file body holds an fd until it is framed, for as long as
 * the client keeps its window shut: 100 streams, 100 fds, for the price of
 * one socket. A connection holds at most limits.http2_max_open_files;
 * past them a file no larger than high_watermark (what a parked memory
 * body may hold) is read now and holds none, and a larger one is refused
 * (the app's send fails, its stream is reset). 0, or -1 with the error set.
 */
static int take_file(pagi_scope *s, h2_stream *st, int fd, off_t off, size_t len)
{
    const pagid_config *cfg = st_conn(st)->w->cfg;
    if (st->h->open_files < cfg->limits.http2_max_open_files) {
        st->file_fd = fd;
        st->file_off = off;
        st->file_left = len;
        st->h->open_files++;
        return 0;
    }
    if (len > cfg->high_watermark) {
        close(fd);
        return scope_fail(s,
                          "http.response.body: the connection already holds "
                          "limits.http2_max_open_files (%zu) file bodies open",
                          cfg->limits.http2_max_open_files);
    }
    char *p = buf_reserve(&st->out, len);
    size_t got = 0;
    ssize_t r = 0;
    while (p && got < len) {
        r = pread(fd, p + got, len - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!p)
        return scope_fail(s, "http.response.body: out of memory");
    if (got < len)
        return scope_fail(s, "http.response.body: reading the file: %s",
                          r < 0 ? strerror(errno) : "file shrank");
    buf_commit(&st->out, len);
    return 0;
}

int h2_resp_body(pagi_scope *s, h2_stream *st, const pagi_event *ev, pagi_send_cb cb, void *ud)
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
        if (cl >= 0 && st->body_sent + (int64_t)len != cl) {
            close(fd);
            return scope_fail(s, "http.response.body: body %s content-length",
                              st->body_sent + (int64_t)len > cl ? "exceeds" : "falls short of");
        }
        if (st->no_body || len == 0)
            close(fd);
        else if (take_file(s, st, fd, off, len) < 0)
            return -1;
        st->body_sent += (int64_t)len;
        final = 1;
    } else {
        size_t len = ev->body.len;
        if (cl >= 0 && st->body_sent + (int64_t)len > cl)
            return scope_fail(s, "http.response.body: body exceeds content-length");
        /* A final body short of the content-length would end the stream as
         * if whole: the app's error, the stream reset (h2_finished). */
        if (cl >= 0 && !ev->more && st->body_sent + (int64_t)len < cl)
            return scope_fail(s, "http.response.body: body falls short of content-length");
        pagi_buf *lent = st->no_body || !len ? NULL : scope_send_buf(s, ev->body.ptr, len);
        if (lent && !buf_size(&st->out) && !st->held && st->file_fd < 0) {
            /* pagi_send_buf's bytes stay the app's buffer until framed. */
            st->held = pagi_buf_ref(lent);
            st->held_off = (size_t)(ev->body.ptr - (const char *)pagi_buf_data(lent));
            st->held_left = len;
        } else if (!st->no_body && len) {
            /* Order is kept: what a held buffer has left goes before these bytes. */
            if (st->held &&
                buf_append(&st->out, (const char *)pagi_buf_data(st->held) + st->held_off,
                           st->held_left) < 0)
                return scope_fail(s, "http.response.body: out of memory");
            st_release_held(st);
            if (buf_append(&st->out, ev->body.ptr, len) < 0)
                return scope_fail(s, "http.response.body: out of memory");
        }
        st->body_sent += (int64_t)len;
        final = !ev->more;
    }
    st->h->pending += st_pending(st) - before;
    if (final)
        st->resp = st->trailers_announced ? R_TRAILERS : R_FINAL;
    if (final && st->kept_head) {
        const char *err = NULL;
        if (submit_kept_head(st, &err) < 0)
            return scope_fail(s, "http.response.start: %s", err);
    }
    h2_resp_after_append(st, cb, ud);
    return 0;
}

int h2_resp_trailers(pagi_scope *s, h2_stream *st, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    /* Www.pod: after trailers the body is complete, so they also end a body
     * left open (more => 1), as a final empty body would. */
    if (st->resp == R_STARTED && st->trailers_announced) {
        if (st->content_length >= 0 && st->body_sent < st->content_length)
            return scope_fail(s, "http.response.trailers: the body falls short of content-length");
        st->resp = R_TRAILERS;
        const char *err = NULL;
        if (st->kept_head && submit_kept_head(st, &err) < 0)
            return scope_fail(s, "http.response.start: %s", err);
    }
    if (st->resp != R_TRAILERS)
        return scope_fail(s, "%s",
                          h1x_trailers_refusal(st->resp == R_NONE, st->trailers_announced, 1));
    const char *err = NULL;
    for (size_t i = 0; i < ev->header_count; i++)
        if (h1_header_check(&ev->headers[i], &err) < 0 || value_padded(ev->headers[i].value))
            return scope_fail(s, "http.response.trailers: %s",
                              err ? err : "a value begins or ends with whitespace");
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
    h2_resp_after_append(st, cb, ud);
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
    } else if (st->held_left) {
        n = st->held_left < len ? st->held_left : len;
        memcpy(dst, (const char *)pagi_buf_data(st->held) + st->held_off, n);
        st->held_off += n;
        st->held_left -= n;
        if (!st->held_left)
            st_release_held(st);
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
        if (!st->file_left)
            st_close_file(st);
    }
    h->pending -= n;
    if (n)
        h->data_at = ev_now(st_conn(st)->w->loop.ev);
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
