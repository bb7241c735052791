/*
 * perl_pool_relay.c - the worker's side of a PSGI app served by the worker
 * pool (docs/psgi.md, "The worker pool"), in C and through pagi.h only: the
 * request is read whole (spooled to an unlinked file past 64 KiB), its head
 * and body written to a pool process as frames (Pool.pm has the wire), and
 * the process's response is read as fast as the process writes it and sent
 * to the client with flow control. The link to the process, the claim and
 * the queue are perl_pool_link.c's. Bytes the client has not taken wait in
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
#include <unistd.h>

#include "common/pool.h"
#include "worker/core/loop.h"

/* A request body up to this stays in memory (PSGI.pm's $MEMORY_MAX). */
#define REQ_MEM_MAX (64 * 1024)
/* Response bytes the client has not taken yet, kept in memory up to this;
 * past it they go to the spool file (nginx's proxy_buffers, then its
 * proxy_temp_file). */
#define RESP_MEM_MAX (256 * 1024)
/* Fields of a Q frame before its header names and values (Pool.pm's wire). */
#define Q_FIELDS 13
typedef struct relay {
    pool_job job; /* first: the link hands back &job */
    pagi_scope *s;
    pagi_loop *loop;
    const pool_info *pool;
    const char *app; /* its spec, the Q frame's app field (the perl host's) */
    int sse;         /* an sse scope: its sse.http.response.* events */
    /* the request: the body in memory, or in req_spool past REQ_MEM_MAX */
    buf body;
    int req_spool;
    off_t req_spool_len, req_spool_at;
    int64_t body_len;
    int receiving; /* a pagi_receive is pending */
    int submitted; /* given to the link (queued or sent) */
    pagi_timer *timer;
    /* the response */
    int started, ended; /* S and E (or X) frames seen */
    buf mem;
    int resp_spool;
    off_t spool_w, spool_r;
    int sending; /* a body send waits for its completion */
    int done;    /* pagi_scope_finish called */
} relay;

static int put_u32(buf *b, uint32_t v)
{
    unsigned char c[4] = {v >> 24, v >> 16, v >> 8, v};
    return buf_append(b, c, 4);
}

static uint32_t get_u32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static int put_frame_head(buf *b, char type, size_t len)
{
    return buf_append(b, &type, 1) || put_u32(b, (uint32_t)len);
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

/* "GET /path?query" for a log line (only a log line needs it: not made per
 * request); into out (n bytes). */
static const char *what_of(const relay *r, char *out, size_t n)
{
    pagi_str raw = pagi_scope_raw_path(r->s), q = pagi_scope_query_string(r->s);
    snprintf(out, n, "%s %.*s%s%.*s", pagi_scope_method(r->s), (int)raw.len, raw.ptr,
             q.len ? "?" : "", (int)q.len, q.ptr);
    return out;
}

static shm_worker *slot_of(const relay *r)
{
    return r->pool->self;
}

/* Leaves the pool process: out of the queue, or its link cut (its next
 * write fails); the deadline stops. */
static void pool_close(relay *r)
{
    if (r->timer)
        pagi_timer_stop(r->timer);
    r->timer = NULL;
    if (r->submitted)
        pool_job_cancel(&r->job);
    r->submitted = 0;
    buf_free(&r->job.out);
}

static void relay_cleanup(relay *r)
{
    pool_close(r);
    buf_free(&r->body);
    buf_free(&r->mem);
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
    if (!buf_size(&r->mem) && r->spool_r < r->spool_w) {
        size_t want = (size_t)(r->spool_w - r->spool_r);
        if (want > RESP_MEM_MAX)
            want = RESP_MEM_MAX;
        char *to = buf_reserve(&r->mem, want);
        if (!to) {
            relay_finish(r, "worker pool: out of memory");
            return;
        }
        ssize_t n = pread(r->resp_spool, to, want, r->spool_r);
        if (n <= 0) {
            relay_finish(r, "worker pool: cannot read the response's spool file");
            return;
        }
        buf_commit(&r->mem, (size_t)n);
        r->spool_r += n;
        if (r->spool_r == r->spool_w) { /* all read back: the file starts over */
            r->spool_r = r->spool_w = 0;
            if (ftruncate(r->resp_spool, 0) < 0) { /* only disk space is at stake */
            }
        }
    }
    int last = r->ended && r->spool_r == r->spool_w;
    if (!buf_size(&r->mem) && !last)
        return;
    pagi_event ev = pagi_event_init(body_type(r));
    ev.body = (pagi_str){buf_head(&r->mem), buf_size(&r->mem)};
    ev.more = !last;
    int rc = pagi_send(r->s, &ev, last ? NULL : on_sent, r);
    buf_reset(&r->mem);
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
        buf_free(&r->mem);
}

static int take_body(relay *r, const char *p, size_t n)
{
    if (r->spool_w > r->spool_r || buf_size(&r->mem) + n > RESP_MEM_MAX) {
        if (r->resp_spool < 0 && (r->resp_spool = perl_pool_spool_open()) < 0)
            return -1;
        if (pwrite_all(r->resp_spool, p, n, r->spool_w) < 0)
            return -1;
        r->spool_w += (off_t)n;
        return 0;
    }
    return buf_append(&r->mem, p, n);
}

static void on_timeout(pagi_timer *t, void *ud)
{
    (void)t;
    relay *r = ud;
    r->timer = NULL;
    if (slot_of(r))
        shm_add(&slot_of(r)->pool_timeouts, 1);
    char what[200];
    pagi_log(r->loop, 0,
             "worker pool: %s ran past worker_pool.timeout (%gs) in pool process %d (pid %ld): "
             "%s; the master kills the process",
             what_of(r, what, sizeof what), r->pool->timeout, r->job.num, r->job.pid,
             r->started ? "connection closed" : "answered 504");
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

/* The link's: one frame from the pool process; -1 on a frame it would never
 * send. */
static int on_frame(pool_job *j, char type, const char *p, size_t n)
{
    relay *r = (relay *)j;
    switch (type) {
    case 'S':
        if (r->started)
            return -1;
        if (on_start(r, p, n) < 0) {
            relay_finish(r, "worker pool: a malformed response start from the pool process");
            return 0;
        }
        return 0;
    case 'B':
        if (!r->started)
            return -1;
        if (r->done)
            return 0;
        if (take_body(r, p, n) < 0) {
            char what[200];
            pagi_log(r->loop, 0, "worker pool: %s: cannot keep the response for the client: %s",
                     what_of(r, what, sizeof what), strerror(errno));
            relay_finish(r, "worker pool: cannot keep the response");
            return 0;
        }
        return 0; /* sent after the read (after_read), or with the end */
    case 'E':
        r->submitted = 0;
        if (r->timer)
            pagi_timer_stop(r->timer);
        r->timer = NULL;
        if (!r->started) {
            relay_finish(r, "worker pool: the pool process ended a response it never started");
            return 0;
        }
        r->ended = 1;
        pump(r);
        return 0;
    case 'X': {
        /* The app failed: the server's 500 (or a cut response) and log line. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%.*s", (int)(n < sizeof msg - 1 ? n : sizeof msg - 1), p);
        r->submitted = 0;
        r->ended = 1;
        relay_finish(r, msg);
        return 0;
    }
    default:
        r->submitted = 0;
        return -1;
    }
}

static void on_lost(pool_job *j)
{
    relay *r = (relay *)j;
    r->submitted = 0;
    char what[200];
    pagi_log(r->loop, 0, "worker pool: pool process %d (pid %ld) died running %s: %s", j->num,
             j->pid, what_of(r, what, sizeof what),
             r->started ? "connection closed" : "answered 502");
    pool_close(r);
    if (r->done)
        return;
    if (!r->started)
        answer(r, 502, "Bad Gateway\n", 0);
    else
        relay_finish(r, "the pool process died mid-response");
}

static void on_started(pool_job *j)
{
    relay *r = (relay *)j;
    if (r->pool->timeout > 0)
        r->timer = pagi_timer_start(r->loop, r->pool->timeout, 0, on_timeout, r);
}

/* ---- the request, toward the pool process ------------------------------ */

/* The link's: refills out from the spooled body, in frames of 64 KiB; the
 * end frame Z after the last. */
static int refill(pool_job *j)
{
    relay *r = (relay *)j;
    buf_reset(&j->out);
    if (r->req_spool >= 0 && r->req_spool_at < r->req_spool_len) {
        char chunk[65536];
        size_t want = (size_t)(r->req_spool_len - r->req_spool_at);
        if (want > sizeof chunk)
            want = sizeof chunk;
        ssize_t n = pread(r->req_spool, chunk, want, r->req_spool_at);
        if (n <= 0)
            return -1;
        r->req_spool_at += n;
        return put_frame_head(&j->out, 'D', (size_t)n) || buf_append(&j->out, chunk, (size_t)n);
    }
    j->out_done = 1;
    return put_frame_head(&j->out, 'Z', 0);
}

static void after_read(pool_job *j)
{
    pump((relay *)j);
}

static const pool_job_ops relay_ops = {.on_frame = on_frame,
                                       .on_lost = on_lost,
                                       .on_started = on_started,
                                       .refill = refill,
                                       .after_read = after_read};

/* n in decimal into out (24 bytes); its length. */
static size_t decimal(char *out, unsigned long long n)
{
    char tmp[24];
    size_t k = 0;
    do
        tmp[k++] = (char)('0' + n % 10);
    while ((n /= 10));
    for (size_t i = 0; i < k; i++)
        out[i] = tmp[k - 1 - i];
    return k;
}

static char *put_u32_at(char *to, size_t n)
{
    to[0] = (char)(n >> 24);
    to[1] = (char)(n >> 16);
    to[2] = (char)(n >> 8);
    to[3] = (char)n;
    return to + 4;
}

static char *put_field_at(char *to, const char *p, size_t n)
{
    to = put_u32_at(to, n);
    if (n)
        memcpy(to, p, n);
    return to + n;
}

/* The request head: the scope's strings as length-prefixed fields, in the
 * order Pool.pm unpacks them ('(N/a)*'): sized first, then written in one
 * piece (a request's only frame of any size on the common path). */
static int put_head(relay *r)
{
    pagi_scope *s = r->s;
    buf *b = &r->job.out;
    int sport = -1, cport = -1;
    const char *server = pagi_scope_server(s, &sport), *client = pagi_scope_client(s, &cport);
    char sp[24], cp[24], len[24];
    size_t spn = server && sport >= 0 ? decimal(sp, (unsigned long long)sport) : 0;
    size_t cpn = 0;
    if (client) { /* as "%d" always printed it */
        if (cport < 0) {
            cp[0] = '-';
            cpn = 1 + decimal(cp + 1, (unsigned long long)-(long long)cport);
        } else
            cpn = decimal(cp, (unsigned long long)cport);
    }
    size_t lenn = decimal(len, (unsigned long long)r->body_len);
    const char *method = pagi_scope_method(s), *scheme = pagi_scope_scheme(s),
               *version = pagi_scope_http_version(s);
    pagi_str f[Q_FIELDS] = {
        {method ? method : "", method ? strlen(method) : 0},
        {scheme ? scheme : "", scheme ? strlen(scheme) : 0},
        {version ? version : "", version ? strlen(version) : 0},
        pagi_scope_raw_path(s),
        pagi_scope_query_string(s),
        pagi_scope_root_path(s),
        pagi_scope_path(s),
        {server ? server : "", server ? strlen(server) : 0},
        {sp, spn},
        {client ? client : "", client ? strlen(client) : 0},
        {cp, cpn},
        {len, lenn},
        {r->app ? r->app : "", r->app ? strlen(r->app) : 0},
    };
    size_t nh = 0;
    const pagi_header *h = pagi_scope_headers(s, &nh);
    size_t flen = 0;
    for (size_t i = 0; i < Q_FIELDS; i++)
        flen += 4 + f[i].len;
    for (size_t i = 0; i < nh; i++)
        flen += 8 + h[i].name.len + h[i].value.len;
    if (flen > UINT32_MAX)
        return -1;
    char *to = buf_reserve(b, 5 + flen);
    if (!to)
        return -1;
    *to = 'Q';
    to = put_u32_at(to + 1, flen);
    for (size_t i = 0; i < Q_FIELDS; i++)
        to = put_field_at(to, f[i].ptr, f[i].len);
    for (size_t i = 0; i < nh; i++) {
        to = put_field_at(to, h[i].name.ptr, h[i].name.len);
        to = put_field_at(to, h[i].value.ptr, h[i].value.len);
    }
    buf_commit(b, 5 + flen);
    return 0;
}

static void dispatch(relay *r)
{
    const pool_info *pool = r->pool;
    buf *out = &r->job.out;
    r->job.ops = &relay_ops;
    if (put_head(r) < 0 ||
        (r->req_spool < 0 && (put_frame_head(out, 'D', buf_size(&r->body)) ||
                              buf_append(out, buf_head(&r->body), buf_size(&r->body)))) ||
        (r->req_spool < 0 && put_frame_head(out, 'Z', 0))) {
        relay_finish(r, "worker pool: out of memory");
        return;
    }
    r->job.out_done = r->req_spool < 0;
    buf_free(&r->body);
    r->submitted = 1;
    int rc = pool_job_submit(r->loop, &r->job);
    if (rc < 0) {
        r->submitted = 0;
        buf_free(out);
        if (slot_of(r))
            shm_add(&slot_of(r)->pool_rejected, 1);
        char what[200];
        pagi_log(r->loop, 1,
                 "worker pool: queue full (%d processes, queue_limit %d): %s answered 503",
                 pool->processes, pool->queue_limit, what_of(r, what, sizeof what));
        answer(r, 503, "Service Unavailable: the server is busy, retry shortly\n", 1);
        return;
    }
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
        if (r->req_spool < 0 && buf_size(&r->body) + ev->body.len > REQ_MEM_MAX) {
            if ((r->req_spool = perl_pool_spool_open()) < 0 ||
                pwrite_all(r->req_spool, buf_head(&r->body), buf_size(&r->body), 0) < 0) {
                relay_finish(r, "cannot spool the request body");
                return;
            }
            r->req_spool_len = (off_t)buf_size(&r->body);
            buf_free(&r->body);
        }
        if (r->req_spool >= 0) {
            if (pwrite_all(r->req_spool, ev->body.ptr, ev->body.len, r->req_spool_len) < 0) {
                relay_finish(r, "cannot spool the request body");
                return;
            }
            r->req_spool_len += (off_t)ev->body.len;
        } else if (buf_append(&r->body, ev->body.ptr, ev->body.len) < 0) {
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

void perl_pool_relay_handle(pagi_scope *s, pagi_loop *loop, const char *app)
{
    relay *r = calloc(1, sizeof *r);
    if (!r) {
        pagi_scope_finish(s, "worker pool: out of memory");
        return;
    }
    r->s = s;
    r->loop = loop;
    r->pool = loop->pool;
    r->app = app;
    r->sse = pagi_scope_type_of(s) == PAGI_SCOPE_SSE;
    r->req_spool = r->resp_spool = -1;
    pagi_scope_set_userdata(s, r, relay_release);
    pagi_conn_on_disconnect(s, on_disconnect, r);
    if (pagi_receive(s, on_body, r) < 0)
        relay_finish(r, pagi_scope_error(s));
    else
        r->receiving = 1;
}
