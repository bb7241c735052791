/*
 * perl_pool_relay.c - the worker's side of a PSGI app served by the worker
 * pool (docs/psgi.md, "The worker pool"), in C and through pagi.h only: the
 * request is read whole (spooled to an unlinked file past 64 KiB), its head
 * and body written to a pool process as frames (Pool.pm has the wire), and
 * the process's response is read as fast as the process writes it and sent
 * to the client with flow control. Bytes the client has not taken wait in
 * memory up to RESP_MEM_MAX, past that in an unlinked temporary file, so a
 * client that does not read holds neither a pool process nor the worker's
 * memory. No Perl runs in the worker for such a request.
 */
#include "perl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/pool.h"
#include "worker/core/loop.h"

/* A request body up to this stays in memory (PSGI.pm's $MEMORY_MAX). */
#define REQ_MEM_MAX (64 * 1024)
/* Response bytes the client has not taken yet, kept in memory up to this;
 * past it they go to the spool file (nginx's proxy_buffers, then its
 * proxy_temp_file). */
#define RESP_MEM_MAX (256 * 1024)
/* The pool process sends body frames of 256 KiB at most (Pool.pm); a frame
 * much larger is not from it. */
#define FRAME_MAX (16 * 1024 * 1024)
#define READ_CHUNK (256 * 1024)

typedef struct bytes {
    char *p;
    size_t len, cap;
} bytes;

typedef struct relay {
    pagi_scope *s;
    pagi_loop *loop;
    const pool_info *pool;
    int sse;        /* an sse scope: its sse.http.response.* events */
    char what[200]; /* "GET /path" for the log */
    /* the request: the body in memory, or in req_spool past REQ_MEM_MAX */
    bytes body;
    int req_spool;
    off_t req_spool_len, req_spool_at;
    int64_t body_len;
    int receiving; /* a pagi_receive is pending */
    /* the connection to the pool process */
    int fd;
    pagi_io *rio, *wio;
    bytes out; /* frames still to write */
    size_t out_at;
    int out_done; /* the Z frame is in out */
    bytes in;
    pagi_timer *timer;
    int waiting; /* counted in the slot's pool_waiting */
    long pid;
    /* the response */
    int started, ended; /* S and E (or X) frames seen */
    bytes mem;
    int resp_spool;
    off_t spool_w, spool_r;
    int sending; /* a body send waits for its completion */
    int done;    /* pagi_scope_finish called */
} relay;

/* Room for n more bytes after b->len. */
static int bytes_reserve(bytes *b, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    return 0;
}

static int bytes_add(bytes *b, const void *p, size_t n)
{
    if (bytes_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static void bytes_free(bytes *b)
{
    free(b->p);
    *b = (bytes){0};
}

static int put_u32(bytes *b, uint32_t v)
{
    unsigned char c[4] = {v >> 24, v >> 16, v >> 8, v};
    return bytes_add(b, c, 4);
}

static uint32_t get_u32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static int put_frame_head(bytes *b, char type, size_t len)
{
    return bytes_add(b, &type, 1) || put_u32(b, (uint32_t)len);
}

static int put_field(bytes *b, const char *p, size_t n)
{
    return put_u32(b, (uint32_t)n) || bytes_add(b, p, n);
}

static int put_cstr(bytes *b, const char *p)
{
    return put_field(b, p ? p : "", p ? strlen(p) : 0);
}

/* An unlinked temporary file in TMPDIR (as PSGI.pm's open '+>', undef). */
int perl_pool_spool_open(void)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
#ifdef O_TMPFILE
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
#endif
    char path[4096];
    snprintf(path, sizeof path, "%s/pagid-pool-XXXXXX", dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

static int pwrite_all(int fd, const char *p, size_t n, off_t at)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

static shm_worker *slot_of(const relay *r)
{
    return r->pool->self;
}

static void unwait(relay *r)
{
    if (r->waiting && slot_of(r))
        atomic_fetch_add_explicit(&slot_of(r)->pool_waiting, -1, memory_order_relaxed);
    r->waiting = 0;
}

/* Closes the connection to the pool process (its next write fails). */
static void pool_close(relay *r)
{
    unwait(r);
    if (r->rio)
        pagi_io_stop(r->rio);
    if (r->wio)
        pagi_io_stop(r->wio);
    r->rio = r->wio = NULL;
    if (r->timer)
        pagi_timer_stop(r->timer);
    r->timer = NULL;
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    bytes_free(&r->out);
    bytes_free(&r->in);
}

static void relay_cleanup(relay *r)
{
    pool_close(r);
    bytes_free(&r->body);
    bytes_free(&r->mem);
    if (r->req_spool >= 0)
        close(r->req_spool);
    if (r->resp_spool >= 0)
        close(r->resp_spool);
    r->req_spool = r->resp_spool = -1;
}

static void relay_finish(relay *r, const char *err)
{
    if (r->done)
        return;
    r->done = 1;
    relay_cleanup(r);
    pagi_scope_finish(r->s, err);
}

static void relay_release(pagi_scope *s, void *data)
{
    (void)s;
    relay *r = data;
    relay_cleanup(r);
    free(r);
}

static pagi_event_type start_type(const relay *r)
{
    return r->sse ? PAGI_EV_SSE_HTTP_RESPONSE_START : PAGI_EV_HTTP_RESPONSE_START;
}

static pagi_event_type body_type(const relay *r)
{
    return r->sse ? PAGI_EV_SSE_HTTP_RESPONSE_BODY : PAGI_EV_HTTP_RESPONSE_BODY;
}

/* A response of pagid's own (502, 503, 504), then the end of the scope. */
static void answer(relay *r, int status, const char *text, int retry_after)
{
    char len[24];
    snprintf(len, sizeof len, "%zu", strlen(text));
    pagi_header h[3] = {
        {PAGI_STR("content-type"), PAGI_STR("text/plain")},
        {PAGI_STR("content-length"), {len, strlen(len)}},
        {PAGI_STR("retry-after"), PAGI_STR("1")},
    };
    pagi_event start = pagi_event_init(start_type(r));
    start.status = status;
    start.headers = h;
    start.header_count = retry_after ? 3 : 2;
    pagi_event body = pagi_event_init(body_type(r));
    body.body = (pagi_str){text, strlen(text)};
    if (pagi_send(r->s, &start, NULL, NULL) < 0 || pagi_send(r->s, &body, NULL, NULL) < 0) {
        relay_finish(r, pagi_scope_error(r->s));
        return;
    }
    relay_finish(r, NULL);
}

/* ---- the response, toward the client ----------------------------------- */

static void pump(relay *r);

static void on_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)s;
    relay *r = ud;
    r->sending = 0;
    if (r->done)
        return;
    if (err) { /* the client is gone: nothing more to send */
        relay_finish(r, NULL);
        return;
    }
    pump(r);
}

/* Sends what waits, one body event at a time: the next goes when the last
 * completed (below the high watermark, or once the socket drained). */
static void pump(relay *r)
{
    if (r->done || r->sending || !r->started)
        return;
    if (!r->mem.len && r->spool_r < r->spool_w) {
        size_t want = (size_t)(r->spool_w - r->spool_r);
        if (want > RESP_MEM_MAX)
            want = RESP_MEM_MAX;
        if (bytes_reserve(&r->mem, want) < 0) {
            relay_finish(r, "worker pool: out of memory");
            return;
        }
        ssize_t n = pread(r->resp_spool, r->mem.p, want, r->spool_r);
        if (n <= 0) {
            relay_finish(r, "worker pool: cannot read the response's spool file");
            return;
        }
        r->mem.len = (size_t)n;
        r->spool_r += n;
        if (r->spool_r == r->spool_w) { /* all read back: the file starts over */
            r->spool_r = r->spool_w = 0;
            if (ftruncate(r->resp_spool, 0) < 0) { /* only disk space is at stake */
            }
        }
    }
    int last = r->ended && r->spool_r == r->spool_w;
    if (!r->mem.len && !last)
        return;
    pagi_event ev = pagi_event_init(body_type(r));
    ev.body = (pagi_str){r->mem.p, r->mem.len};
    ev.more = !last;
    int rc = pagi_send(r->s, &ev, last ? NULL : on_sent, r);
    r->mem.len = 0;
    if (rc < 0) {
        relay_finish(r, pagi_scope_error(r->s));
        return;
    }
    if (last)
        relay_finish(r, NULL);
    else
        r->sending = 1;
    /* A response that was large once gives its memory back. */
    if (r->mem.cap > RESP_MEM_MAX)
        bytes_free(&r->mem);
}

static int take_body(relay *r, const char *p, size_t n)
{
    if (r->spool_w > r->spool_r || r->mem.len + n > RESP_MEM_MAX) {
        if (r->resp_spool < 0 && (r->resp_spool = perl_pool_spool_open()) < 0)
            return -1;
        if (pwrite_all(r->resp_spool, p, n, r->spool_w) < 0)
            return -1;
        r->spool_w += (off_t)n;
        return 0;
    }
    return bytes_add(&r->mem, p, n);
}

static void on_timeout(pagi_timer *t, void *ud)
{
    (void)t;
    relay *r = ud;
    r->timer = NULL;
    if (slot_of(r))
        shm_add(&slot_of(r)->pool_timeouts, 1);
    pagi_log(r->loop, 0,
             "worker pool: %s ran past worker_pool.timeout (%gs) in pool process pid %ld: %s; "
             "the master kills the process",
             r->what, r->pool->timeout, r->pid, r->started ? "connection closed" : "answered 504");
    pool_close(r);
    if (!r->started)
        answer(r, 504, "Gateway Timeout\n", 0);
    else
        relay_finish(r, "the pool process ran past worker_pool.timeout");
}

static int on_start(relay *r, const char *p, size_t n)
{
    if (n < 4)
        return -1;
    int status = (int)get_u32(p);
    pagi_header h[256];
    size_t count = 0, at = 4;
    while (at < n) {
        pagi_str f[2];
        for (int i = 0; i < 2; i++) {
            if (n - at < 4 || get_u32(p + at) > n - at - 4)
                return -1;
            f[i] = (pagi_str){p + at + 4, get_u32(p + at)};
            at += 4 + f[i].len;
        }
        if (count == sizeof h / sizeof h[0])
            return -1;
        h[count++] = (pagi_header){f[0], f[1]};
    }
    pagi_event ev = pagi_event_init(start_type(r));
    ev.status = status;
    ev.headers = h;
    ev.header_count = count;
    r->started = 1;
    if (pagi_send(r->s, &ev, NULL, NULL) < 0) {
        relay_finish(r, pagi_scope_error(r->s));
        return 1;
    }
    return 0;
}

/* One frame from the pool process; -1 on a frame it would never send, 1
 * when the scope finished. */
static int on_frame(relay *r, char type, const char *p, size_t n)
{
    switch (type) {
    case 'A': {
        char pid[24];
        snprintf(pid, sizeof pid, "%.*s", (int)(n < 20 ? n : 20), p);
        r->pid = strtol(pid, NULL, 10);
        unwait(r);
        if (r->pool->timeout > 0)
            r->timer = pagi_timer_start(r->loop, r->pool->timeout, 0, on_timeout, r);
        return 0;
    }
    case 'S':
        return r->started ? -1 : on_start(r, p, n);
    case 'B':
        if (!r->started)
            return -1;
        if (take_body(r, p, n) < 0) {
            pagi_log(r->loop, 0, "worker pool: %s: cannot keep the response for the client: %s",
                     r->what, strerror(errno));
            relay_finish(r, "worker pool: cannot keep the response");
            return 1;
        }
        return 0;
    case 'E':
        if (!r->started)
            return -1;
        r->ended = 1;
        pool_close(r);
        return 0;
    case 'X': {
        /* The app failed: the server's 500 (or a cut response) and log line. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%.*s", (int)(n < sizeof msg - 1 ? n : sizeof msg - 1), p);
        r->ended = 1;
        pool_close(r);
        relay_finish(r, msg);
        return 1;
    }
    default:
        return -1;
    }
}

static void pool_gone(relay *r)
{
    pagi_log(r->loop, 0, "worker pool: pool process pid %ld died running %s: %s", r->pid, r->what,
             r->started ? "connection closed" : "answered 502");
    pool_close(r);
    if (!r->started)
        answer(r, 502, "Bad Gateway\n", 0);
    else
        relay_finish(r, "the pool process died mid-response");
}

static void on_readable(pagi_io *w, int fd, int events, void *ud)
{
    (void)w;
    (void)events;
    relay *r = ud;
    int eof = 0;
    for (int round = 0; round < 4 && !eof; round++) {
        if (bytes_reserve(&r->in, READ_CHUNK) < 0) {
            relay_finish(r, "worker pool: out of memory");
            return;
        }
        ssize_t n = read(fd, r->in.p + r->in.len, r->in.cap - r->in.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            eof = 1;
            break;
        }
        r->in.len += (size_t)n;
        if ((size_t)n < READ_CHUNK)
            break;
    }
    size_t at = 0;
    while (r->fd >= 0 && r->in.len - at >= 5) {
        uint32_t len = get_u32(r->in.p + at + 1);
        if (len > FRAME_MAX) {
            pagi_log(r->loop, 0, "worker pool: %s: a malformed frame from pool process pid %ld",
                     r->what, r->pid);
            eof = 1;
            break;
        }
        if (r->in.len - at < 5 + (size_t)len)
            break;
        int rc = on_frame(r, r->in.p[at], r->in.p + at + 5, len);
        if (rc > 0)
            return; /* finished: everything was released */
        if (rc < 0) {
            pagi_log(r->loop, 0,
                     "worker pool: %s: an unexpected frame '%c' from pool process pid %ld", r->what,
                     r->in.p[at], r->pid);
            eof = 1;
            break;
        }
        at += 5 + (size_t)len;
    }
    if (r->fd >= 0 && at) {
        memmove(r->in.p, r->in.p + at, r->in.len - at);
        r->in.len -= at;
    }
    if (eof && r->fd >= 0 && !r->ended) {
        pool_gone(r);
        return;
    }
    pump(r);
}

/* ---- the request, toward the pool process ------------------------------ */

static void write_request(relay *r);

static void on_writable(pagi_io *w, int fd, int events, void *ud)
{
    (void)w;
    (void)fd;
    (void)events;
    write_request(ud);
}

/* Refills out from the spooled body, in frames of 64 KiB; the end frame Z
 * after the last. */
static int refill(relay *r)
{
    bytes_free(&r->out);
    r->out_at = 0;
    if (r->req_spool >= 0 && r->req_spool_at < r->req_spool_len) {
        char buf[65536];
        size_t want = (size_t)(r->req_spool_len - r->req_spool_at);
        if (want > sizeof buf)
            want = sizeof buf;
        ssize_t n = pread(r->req_spool, buf, want, r->req_spool_at);
        if (n <= 0)
            return -1;
        r->req_spool_at += n;
        return put_frame_head(&r->out, 'D', (size_t)n) || bytes_add(&r->out, buf, (size_t)n);
    }
    r->out_done = 1;
    return put_frame_head(&r->out, 'Z', 0);
}

static void write_request(relay *r)
{
    while (r->fd >= 0) {
        if (r->out_at == r->out.len) {
            if (r->out_done) {
                if (r->wio)
                    pagi_io_stop(r->wio);
                r->wio = NULL;
                bytes_free(&r->out);
                if (r->req_spool >= 0)
                    close(r->req_spool);
                r->req_spool = -1;
                return;
            }
            if (refill(r) < 0) {
                relay_finish(r, "worker pool: cannot read the request's spool file");
                return;
            }
        }
        ssize_t n = send(r->fd, r->out.p + r->out_at, r->out.len - r->out_at, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!r->wio)
                r->wio = pagi_io_watch(r->loop, r->fd, PAGI_IO_WRITE, on_writable, r);
            return;
        }
        if (n <= 0) { /* the process is gone: the read side sees it */
            if (r->wio)
                pagi_io_stop(r->wio);
            r->wio = NULL;
            return;
        }
        r->out_at += (size_t)n;
    }
}

/* The pool socket's address, read once from the inherited socket. */
static int pool_connect(const pool_info *pool)
{
    static struct sockaddr_un addr;
    static socklen_t addrlen;
    if (!addrlen) {
        socklen_t l = sizeof addr;
        if (getsockname(pool->fd, (struct sockaddr *)&addr, &l) < 0)
            return -1;
        addrlen = l;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&addr, addrlen) < 0) { /* EAGAIN: the backlog is full */
        close(fd);
        return -1;
    }
    return fd;
}

/* The request head: the scope's strings as length-prefixed fields, in the
 * order Pool.pm unpacks them ('(N/a)*'). */
static int put_head(relay *r)
{
    pagi_scope *s = r->s;
    bytes *b = &r->out;
    size_t at = b->len;
    if (put_frame_head(b, 'Q', 0))
        return -1;
    pagi_str raw = pagi_scope_raw_path(s), q = pagi_scope_query_string(s),
             root = pagi_scope_root_path(s), path = pagi_scope_path(s);
    int sport = -1, cport = -1;
    const char *server = pagi_scope_server(s, &sport), *client = pagi_scope_client(s, &cport);
    char sp[16] = "", cp[16] = "";
    if (server && sport >= 0)
        snprintf(sp, sizeof sp, "%d", sport);
    if (client)
        snprintf(cp, sizeof cp, "%d", cport);
    if (put_cstr(b, pagi_scope_method(s)) || put_cstr(b, pagi_scope_scheme(s)) ||
        put_cstr(b, pagi_scope_http_version(s)) || put_field(b, raw.ptr, raw.len) ||
        put_field(b, q.ptr, q.len) || put_field(b, root.ptr, root.len) ||
        put_field(b, path.ptr, path.len) || put_cstr(b, server) || put_cstr(b, sp) ||
        put_cstr(b, client) || put_cstr(b, cp))
        return -1;
    char len[24];
    snprintf(len, sizeof len, "%lld", (long long)r->body_len);
    if (put_cstr(b, len))
        return -1;
    size_t n = 0;
    const pagi_header *h = pagi_scope_headers(s, &n);
    for (size_t i = 0; i < n; i++)
        if (put_field(b, h[i].name.ptr, h[i].name.len) ||
            put_field(b, h[i].value.ptr, h[i].value.len))
            return -1;
    size_t flen = b->len - at - 5;
    unsigned char *l = (unsigned char *)b->p + at + 1;
    l[0] = (unsigned char)(flen >> 24);
    l[1] = (unsigned char)(flen >> 16);
    l[2] = (unsigned char)(flen >> 8);
    l[3] = (unsigned char)flen;
    return 0;
}

static void dispatch(relay *r)
{
    const pool_info *pool = r->pool;
    int room = 1;
    if (pool->shm) { /* a free process, or room in the queue */
        pool_figures f;
        pool_figures_read(pool->shm, pool->generation, &f);
        room = f.busy + f.queue_depth < (int64_t)f.workers + pool->queue_limit;
    }
    r->fd = room ? pool_connect(pool) : -1;
    if (r->fd < 0) {
        if (slot_of(r))
            shm_add(&slot_of(r)->pool_rejected, 1);
        pagi_log(r->loop, 1,
                 "worker pool: queue full (%d processes, queue_limit %d): %s answered 503",
                 pool->processes, pool->queue_limit, r->what);
        answer(r, 503, "Service Unavailable: the server is busy, retry shortly\n", 1);
        return;
    }
    if (slot_of(r))
        atomic_fetch_add_explicit(&slot_of(r)->pool_waiting, 1, memory_order_relaxed);
    r->waiting = 1;
    if (put_head(r) < 0 ||
        (r->req_spool < 0 && (put_frame_head(&r->out, 'D', r->body.len) ||
                              bytes_add(&r->out, r->body.p, r->body.len))) ||
        (r->req_spool < 0 && put_frame_head(&r->out, 'Z', 0))) {
        relay_finish(r, "worker pool: out of memory");
        return;
    }
    r->out_done = r->req_spool < 0;
    bytes_free(&r->body);
    r->rio = pagi_io_watch(r->loop, r->fd, PAGI_IO_READ, on_readable, r);
    if (!r->rio) {
        relay_finish(r, "worker pool: cannot watch the pool connection");
        return;
    }
    write_request(r);
}

static void on_body(pagi_scope *s, const pagi_event *ev, void *ud)
{
    relay *r = ud;
    r->receiving = 0;
    if (ev->type != PAGI_EV_HTTP_REQUEST && ev->type != PAGI_EV_SSE_REQUEST) {
        relay_finish(r, NULL); /* the client left: nobody to answer */
        return;
    }
    if (ev->body.len) {
        r->body_len += (int64_t)ev->body.len;
        if (r->req_spool < 0 && r->body.len + ev->body.len > REQ_MEM_MAX) {
            if ((r->req_spool = perl_pool_spool_open()) < 0 ||
                pwrite_all(r->req_spool, r->body.p, r->body.len, 0) < 0) {
                relay_finish(r, "cannot spool the request body");
                return;
            }
            r->req_spool_len = (off_t)r->body.len;
            bytes_free(&r->body);
        }
        if (r->req_spool >= 0) {
            if (pwrite_all(r->req_spool, ev->body.ptr, ev->body.len, r->req_spool_len) < 0) {
                relay_finish(r, "cannot spool the request body");
                return;
            }
            r->req_spool_len += (off_t)ev->body.len;
        } else if (bytes_add(&r->body, ev->body.ptr, ev->body.len) < 0) {
            relay_finish(r, "worker pool: out of memory");
            return;
        }
    }
    if (ev->more) {
        if (pagi_receive(s, on_body, r) < 0)
            relay_finish(r, pagi_scope_error(s));
        else
            r->receiving = 1;
        return;
    }
    dispatch(r);
}

static void on_disconnect(pagi_scope *s, const char *reason, void *ud)
{
    (void)s;
    (void)reason;
    relay *r = ud;
    /* A pending receive gets the disconnect event itself; otherwise the
     * pool process loses its connection (its next write fails) and the
     * response, whatever is left of it, is dropped. */
    if (!r->done && !r->receiving)
        relay_finish(r, NULL);
}

void perl_pool_relay_handle(pagi_scope *s, pagi_loop *loop)
{
    relay *r = calloc(1, sizeof *r);
    if (!r) {
        pagi_scope_finish(s, "worker pool: out of memory");
        return;
    }
    r->s = s;
    r->loop = loop;
    r->pool = loop->pool;
    r->sse = pagi_scope_type_of(s) == PAGI_SCOPE_SSE;
    r->fd = r->req_spool = r->resp_spool = -1;
    pagi_str raw = pagi_scope_raw_path(s), q = pagi_scope_query_string(s);
    snprintf(r->what, sizeof r->what, "%s %.*s%s%.*s", pagi_scope_method(s), (int)raw.len, raw.ptr,
             q.len ? "?" : "", (int)q.len, q.ptr);
    pagi_scope_set_userdata(s, r, relay_release);
    pagi_conn_on_disconnect(s, on_disconnect, r);
    if (pagi_receive(s, on_body, r) < 0)
        relay_finish(r, pagi_scope_error(s));
    else
        r->receiving = 1;
}
