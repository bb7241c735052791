/*
 * h2_response.c - the response side of an HTTP/2 stream, the carrier half
 * of its http exchange (worker/http/http_exchange.h; the carrier table is in
 * h2_stream.c): the head as HPACK fields (lower-cased names, the fields
 * HTTP/2 forbids dropped, a date added), body bytes queued on the stream
 * and handed to nghttp2's data source as the send windows allow (memory,
 * then a file by pread), and trailers.
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
#include "worker/http1/http1_response.h"
#include "worker/scope/scope.h"

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

/* The exchange's bytes were queued on the stream: frame them. */
void h2_resp_pushed(http_exchange *x)
{
    h2_stream *st = x->owner;
    h2_session *h = st->h;
    if (st->deferred) {
        st->deferred = 0;
        nghttp2_session_resume_data(h->ng, st->id);
    }
    h2_session_kick(h);
}

size_t h2_resp_queued(const http_exchange *x)
{
    return st_pending(x->owner);
}

void h2_stream_after_write(h2_session *h)
{
    size_t low = h->c->w->cfg->low_watermark;
    for (h2_stream *st = h->streams; st; st = st->next) {
        if (st->scope)
            http_exchange_written(&st->x, st->scope, low);
        if (st->ws && st->scope)
            h2_ws_after_write(st);
    }
}

/* Fields a response head holds without an allocation for its field list. */
#define H2_HEAD_STACK_FIELDS 16

/* Every status as three digits, so :status points here and nghttp2 does
 * not copy it (NGHTTP2_NV_FLAG_NO_COPY_VALUE needs it to outlive the frame). */
static char status_digits[3 * 600];

static const uint8_t *status_text(int status)
{
    if (!status_digits[0])
        for (int i = 0; i < 600; i++) {
            status_digits[3 * i] = (char)('0' + i / 100);
            status_digits[3 * i + 1] = (char)('0' + i / 10 % 10);
            status_digits[3 * i + 2] = (char)('0' + i % 10);
        }
    return (const uint8_t *)status_digits + 3 * (status >= 100 && status < 600 ? status : 500);
}

/* lit when n is exactly its first len bytes, else NULL; inlined where len
 * is a constant, so memcmp compares words and makes no call. */
static inline const char *same(pagi_str n, const char *lit, size_t len)
{
    return n.len == len && !memcmp(n.ptr, lit, len) ? lit : NULL;
}

/*
 * The name as a string that outlives the frame, when it is a common
 * response field written in lower case: nghttp2 then neither copies nor
 * lower-cases it (NGHTTP2_NV_FLAG_NO_COPY_NAME: lower case, and alive
 * until the HEADERS frame is sent). Whatever is returned holds n's very
 * bytes (same). Any other name, or one with an upper-case letter, NULL:
 * nghttp2 copies it and lower-cases the copy, so what goes on the wire is
 * the same either way.
 */
static const char *static_name(pagi_str n)
{
    const char *r = NULL;
    switch (n.len) { /* at most three compares */
    case 4:
        if ((r = same(n, "etag", 4)) || (r = same(n, "vary", 4)) || (r = same(n, "link", 4)))
            return r;
        return NULL;
    case 6:
        return same(n, "server", 6);
    case 7:
        return same(n, "expires", 7);
    case 8:
        return same(n, "location", 8);
    case 10:
        return same(n, "set-cookie", 10);
    case 12:
        return same(n, "content-type", 12);
    case 13:
        if ((r = same(n, "last-modified", 13)) || (r = same(n, "accept-ranges", 13)) ||
            (r = same(n, "cache-control", 13)))
            return r;
        return NULL;
    case 14:
        return same(n, "content-length", 14);
    case 16:
        return same(n, "content-encoding", 16);
    default:
        return NULL;
    }
}

/*
 * Submit the response head with the stream's data source behind it.
 * nghttp2_submit_response copies the app's names and values before it
 * returns, and lower-cases the names it copies (HTTP/2 wants them so; the
 * app may have written Content-Type); common names are given as static
 * lower-case strings instead (static_name). :status and date live on, so they
 * are not copied: the status table, and h1_date_now's buffer (a frame
 * framed a second later says the later second, the same length).
 */
static int submit_head(h2_stream *st, int status, const pagi_header *hdr, size_t n,
                       const char **err, int with_body)
{
    conn *c = st_conn(st);
    nghttp2_nv on_stack[H2_HEAD_STACK_FIELDS];
    nghttp2_nv *nva = n + 2 <= H2_HEAD_STACK_FIELDS ? on_stack : calloc(n + 2, sizeof *nva);
    if (!nva) {
        *err = "out of memory";
        return -1;
    }
    const uint8_t kept = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    size_t k = 0;
    nva[k++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)status_text(status), 7, 3, kept};
    int have_date = 0;
    for (size_t i = 0; i < n; i++) {
        pagi_str nm = hdr[i].name;
        if (hop_by_hop(nm))
            continue;
        if (nm.len == 4 && name_is(nm, "date"))
            have_date = 1;
        const char *fixed = static_name(nm);
        nva[k++] = (nghttp2_nv){(uint8_t *)(fixed ? fixed : nm.ptr), (uint8_t *)hdr[i].value.ptr,
                                nm.len, hdr[i].value.len,
                                fixed ? NGHTTP2_NV_FLAG_NO_COPY_NAME : NGHTTP2_NV_FLAG_NONE};
    }
    if (!have_date)
        nva[k++] =
            (nghttp2_nv){(uint8_t *)"date", (uint8_t *)h1_date_now((long)ev_now(c->w->loop.ev)), 4,
                         H1_DATE_LEN, kept};
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
    st->x.status = status;
    shm_count_request(c->w->stats, status);
    if (log_line && c->w->alog)
        access_log_request(c->w->alog, c, NULL, st->x.log_start, status, 0, NULL);
    /* 426 is only the websocket version refusal: it says which one (RFC 6455 4.4). */
    static const pagi_header hv[] = {{{"content-type", 12}, {"text/plain; charset=utf-8", 25}},
                                     {{"sec-websocket-version", 21}, {"13", 2}}};
    const char *err = NULL;
    if (buf_append(&st->out, text, strlen(text)) < 0 || buf_append(&st->out, "\n", 1) < 0) {
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    } else {
        st->h->pending += buf_size(&st->out);
        http_exchange_set_state(&st->x, HX_FINAL);
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

/* The head's fields as HTTP/2 must have them, then the head submitted (or
 * kept, for a response without a body, until its end is known). */
int h2_resp_start(http_exchange *x, pagi_scope *s, const pagi_event *ev, const char *what)
{
    h2_stream *st = x->owner;
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
        x->no_body = 1;
    x->content_length = x->no_body ? -1 : clen;
    x->framed = 1; /* HTTP/2 carries trailers on any response */
    if (x->no_body && !ev->trailers) {
        /* No body (HEAD, 204, 304): the head goes out with END_STREAM once
         * the app's final body says the response is whole; keep a copy. */
        if (keep_head(st, ev) < 0)
            return scope_fail(s, "%s: out of memory", what);
    } else if (submit_head(st, ev->status, ev->headers, ev->header_count, &err, 1) < 0) {
        return scope_fail(s, "%s: %s", what, err);
    }
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

int h2_resp_body_file(http_exchange *x, pagi_scope *s, int fd, off_t off, size_t len)
{
    h2_stream *st = x->owner;
    size_t before = st_pending(st);
    if (take_file(s, st, fd, off, len) < 0)
        return -1;
    st->h->pending += st_pending(st) - before;
    return 0;
}

int h2_resp_body_mem(http_exchange *x, pagi_scope *s, const char *p, size_t len)
{
    h2_stream *st = x->owner;
    size_t before = st_pending(st);
    pagi_buf *lent = scope_send_buf(s, p, len);
    if (lent && !buf_size(&st->out) && !st->held && st->file_fd < 0) {
        /* pagi_send_buf's bytes stay the app's buffer until framed. */
        st->held = pagi_buf_ref(lent);
        st->held_off = (size_t)(p - (const char *)pagi_buf_data(lent));
        st->held_left = len;
    } else {
        /* Order is kept: what a held buffer has left goes before these bytes. */
        if (st->held && buf_append(&st->out, (const char *)pagi_buf_data(st->held) + st->held_off,
                                   st->held_left) < 0)
            return scope_fail(s, "http.response.body: out of memory");
        st_release_held(st);
        if (buf_append(&st->out, p, len) < 0)
            return scope_fail(s, "http.response.body: out of memory");
    }
    st->h->pending += st_pending(st) - before;
    return 0;
}

/* The body ended: a response without one sends its kept head now. */
int h2_resp_body_end(http_exchange *x, pagi_scope *s, int trailers_follow, int short_of_length)
{
    (void)trailers_follow;
    (void)short_of_length; /* strict_length: refused before it got here */
    h2_stream *st = x->owner;
    const char *err = NULL;
    if (st->kept_head && submit_kept_head(st, &err) < 0)
        return scope_fail(s, "http.response.start: %s", err);
    return 0;
}

int h2_resp_trailers(http_exchange *x, pagi_scope *s, const pagi_event *ev)
{
    h2_stream *st = x->owner;
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
    return 0;
}

/*
 * nghttp2 asks for the next DATA payload of st's response. The bytes are
 * not copied here (NGHTTP2_DATA_FLAG_NO_COPY): h2_stream_send_data puts
 * the frame's header and its payload into the output queue itself, in the
 * same mem_send call, from the one source this picks (memory, a held
 * buffer, then the file), so a file is read once, straight into the queue,
 * and a held buffer goes by reference. Here only the length is decided,
 * and whether the stream ends with it.
 */
ssize_t h2_stream_read(nghttp2_session *ng, int32_t id, uint8_t *dst, size_t len, uint32_t *flags,
                       nghttp2_data_source *src, void *ud)
{
    (void)ud;
    (void)dst;
    h2_stream *st = src->ptr;
    size_t n = 0;
    if (buf_size(&st->out))
        n = buf_size(&st->out) < len ? buf_size(&st->out) : len;
    else if (st->held_left)
        n = st->held_left < len ? st->held_left : len;
    else if (st->file_left)
        n = st->file_left < len ? st->file_left : len;
    if (n)
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st_pending(st) > n)
        return (ssize_t)n;
    if (st->x.resp == HX_FINAL && !st->x.trailers_announced) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (st->x.resp == HX_FINAL && st->trailers_ready) {
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

/* A held buffer's payload of at least this many bytes is queued by
 * reference (a segment of its own); a smaller one is cheaper copied. */
#define H2_BY_REF_MIN 1024

static void held_release(void *ud)
{
    pagi_buf_unref(ud);
}

/* pread exactly n bytes of the stream's file at its offset into p: 0, or -1 (logged). */
static int read_file_into(h2_stream *st, char *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(st->file_fd, p + got, n - got, st->file_off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            log_error("HTTP/2 stream %d: reading the response file: %s", st->id,
                      r < 0 ? strerror(errno) : "file shrank");
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/*
 * The DATA frame h2_stream_read sized: its 9-byte header (and padding,
 * were any asked for) and length bytes from the stream's first source,
 * straight into the connection's output queue. What is not queued is not
 * taken from the stream: a failure resets the stream (nghttp2 sends
 * RST_STREAM) with nothing half-written. Past the high watermark the
 * session is paused, so mem_send returns and h2_pump looks at the queue.
 */
int h2_stream_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud)
{
    (void)ng;
    h2_session *h = ud;
    h2_stream *st = src->ptr;
    conn *c = st_conn(st);
    outq *q = &c->out;
    size_t padlen = frame->data.padlen; /* 0: pagid asks for no padding */
    size_t head = 9 + (padlen ? 1 : 0), tail = padlen ? padlen - 1 : 0;
    if (!buf_size(&st->out) && st->held_left && length >= H2_BY_REF_MIN && !padlen) {
        const char *p = (const char *)pagi_buf_data(st->held) + st->held_off;
        if (outq_append(q, framehd, 9) < 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (outq_append_ext(q, p, length, held_release, pagi_buf_ref(st->held)) < 0) {
            pagi_buf_unref(st->held);            /* the reference the segment did not take */
            return NGHTTP2_ERR_CALLBACK_FAILURE; /* a header without its payload went */
        }
    } else {
        char *w = outq_reserve(q, head + length + tail);
        if (!w)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        memcpy(w, framehd, 9);
        if (padlen)
            w[9] = (char)(padlen - 1);
        char *payload = w + head;
        if (buf_size(&st->out))
            memcpy(payload, buf_head(&st->out), length);
        else if (st->held_left)
            memcpy(payload, (const char *)pagi_buf_data(st->held) + st->held_off, length);
        else if (read_file_into(st, payload, length) < 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (tail)
            memset(payload + length, 0, tail);
        outq_commit(q, head + length + tail);
    }
    /* The bytes are queued: the stream lets them go. */
    if (buf_size(&st->out)) {
        buf_consume(&st->out, length);
        if (!buf_size(&st->out))
            buf_free(&st->out);
    } else if (st->held_left) {
        st->held_off += length;
        st->held_left -= length;
        if (!st->held_left)
            st_release_held(st);
    } else {
        st->file_off += (off_t)length;
        st->file_left -= length;
        if (!st->file_left)
            st_close_file(st);
    }
    h->pending -= length;
    if (length)
        h->data_at = ev_now(c->w->loop.ev);
    if (outq_buffered(q) >= c->w->cfg->high_watermark) {
        h->send_paused = 1;
        return NGHTTP2_ERR_PAUSE;
    }
    return 0;
}
