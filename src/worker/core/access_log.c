/*
 * access_log.c - the worker's buffered access log (see access_log.h). The
 * master opens the file (as root) and hands each worker its descriptor, at
 * start and after a SIGUSR1 reopen (gen_logs.h); alone (-w 0) the process
 * reopens by path. Lines of different workers never interleave: every
 * write(2) carries whole lines, and O_APPEND writes to a regular file land
 * atomically.
 */
#include "access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/access_format.h"
#include "common/log.h"
#include "common/shm.h"
#include "conn.h"
#include "worker/scope/scope.h"
#include "tls_conn.h"

#define BUF_CAP (4 * ACCESS_FORMAT_LINE_MAX) /* 128 KiB per worker */
#define FLUSH_AT (BUF_CAP / 2)
#define FLUSH_INTERVAL 0.1

struct access_log {
    access_format fmt;
    char *path;
    int fd;
    struct ev_loop *ev;
    ev_timer timer;
    char *buf;
    size_t used;
    size_t lines; /* lines in buf (counted as dropped if a write fails) */
    uint64_t dropped;
    struct shm_worker *stats; /* the worker's shared slot (metrics), or NULL */
    int pid;                  /* getpid() is a system call: once per worker */
    int warned;               /* a drop was reported since the last good write */
    time_t cached_sec;        /* the time strings below are for this second */
    char clf[40], iso_head[24], iso_tz[8], iso[48];
};

static void al_on_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    access_log_flush(t->data);
}

static int open_path(const char *path)
{
    /* '-' (--access-log -) is the standard error the worker inherited: a
     * copy of the fd, so it works after privileges drop (nobody cannot
     * open /dev/stderr) and a reopen is a no-op. */
    if (config_path_is_stderr(path))
        return fcntl(2, F_DUPFD_CLOEXEC, 3);
    /* O_NONBLOCK: a FIFO with a stalled reader must not stall the worker.
     * log_open_append: a worker that kept root must not follow a planted link. */
    return log_open_append(path, 1, O_NONBLOCK);
}

int access_log_open(access_log **out, const pagid_config *cfg, int fd, struct ev_loop *ev,
                    struct shm_worker *stats, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg->access_log_path || !*cfg->access_log_path) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    access_log *al = calloc(1, sizeof *al);
    if (!al) {
        if (fd >= 0)
            close(fd);
        snprintf(err, errlen, "access log: out of memory");
        return -1;
    }
    const char *msg = NULL;
    size_t off;
    al->fd = fd; /* owned from here: access_log_close closes it */
    if (access_format_compile(&al->fmt,
                              cfg->access_log_format ? cfg->access_log_format : "combined", &msg,
                              &off) < 0) {
        snprintf(err, errlen, "access log format: %s", msg);
        goto fail;
    }
    al->path = strdup(cfg->access_log_path);
    al->buf = malloc(BUF_CAP);
    if (!al->path || !al->buf) {
        snprintf(err, errlen, "access log: out of memory");
        goto fail;
    }
    if (al->fd < 0)
        al->fd = open_path(al->path);
    if (al->fd < 0) {
        snprintf(err, errlen, "cannot open access log %s: %s", al->path, log_open_strerror(errno));
        goto fail;
    }
    al->ev = ev;
    al->stats = stats;
    al->pid = (int)getpid();
    al->cached_sec = (time_t)-1;
    ev_timer_init(&al->timer, al_on_timer, FLUSH_INTERVAL, 0.);
    al->timer.data = al;
    *out = al;
    return 0;
fail:
    access_log_close(al);
    return -1;
}

static void count_dropped(access_log *al, uint64_t n)
{
    al->dropped += n;
    if (al->stats)
        shm_add(&al->stats->access_log_dropped, n);
}

static void drop_buffer(access_log *al, int saved_errno)
{
    count_dropped(al, al->lines);
    if (!al->warned)
        log_warn("access log %s: %s; dropping lines (%llu so far)", al->path,
                 saved_errno ? strerror(saved_errno) : "not open", (unsigned long long)al->dropped);
    al->warned = 1;
    al->used = 0;
    al->lines = 0;
}

void access_log_flush(access_log *al)
{
    if (!al)
        return;
    if (al->ev && ev_is_active(&al->timer))
        ev_timer_stop(al->ev, &al->timer);
    size_t done = 0;
    while (done < al->used) {
        if (al->fd < 0) {
            drop_buffer(al, 0);
            return;
        }
        ssize_t n = write(al->fd, al->buf + done, al->used - done);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* A FIFO that is full: keep the rest for the next round. */
            memmove(al->buf, al->buf + done, al->used - done);
            al->used -= done;
            if (al->ev)
                ev_timer_start(al->ev, &al->timer);
            return;
        }
        drop_buffer(al, n < 0 ? errno : ENOSPC);
        return;
    }
    al->used = 0;
    al->lines = 0;
    al->warned = 0;
}

int access_log_reopen(access_log *al)
{
    if (!al)
        return 0;
    access_log_flush(al); /* what was logged before the signal belongs to the old file */
    int fd = open_path(al->path);
    if (fd < 0) {
        log_error("cannot reopen access log %s: %s", al->path, log_open_strerror(errno));
        return -1; /* keep writing to the old file rather than losing lines */
    }
    if (al->fd >= 0)
        close(al->fd);
    al->fd = fd;
    return 0;
}

void access_log_adopt(access_log *al, int fd)
{
    if (!al) {
        if (fd >= 0)
            close(fd);
        return;
    }
    if (fd < 0)
        return;
    access_log_flush(al); /* what was logged before the reopen belongs to the old file */
    if (al->fd >= 0)
        close(al->fd);
    al->fd = fd;
}

uint64_t access_log_dropped(const access_log *al)
{
    return al ? al->dropped : 0;
}

void access_log_close(access_log *al)
{
    if (!al)
        return;
    if (al->buf && al->used)
        access_log_flush(al);
    if (al->ev && ev_is_active(&al->timer))
        ev_timer_stop(al->ev, &al->timer);
    if (al->dropped)
        log_warn("access log %s: %llu line(s) dropped", al->path, (unsigned long long)al->dropped);
    if (al->fd >= 0)
        close(al->fd);
    access_format_free(&al->fmt);
    free(al->path);
    free(al->buf);
    free(al);
}

/* ---- one line ---- */

/* CLF and ISO 8601 strings, recomputed once per second. */
static void time_strings(access_log *al, double t)
{
    time_t sec = (time_t)t;
    if (sec != al->cached_sec) {
        struct tm tm;
        localtime_r(&sec, &tm);
        strftime(al->clf, sizeof al->clf, "%d/%b/%Y:%H:%M:%S %z", &tm);
        strftime(al->iso_head, sizeof al->iso_head, "%Y-%m-%dT%H:%M:%S", &tm);
        char z[8];
        strftime(z, sizeof z, "%z", &tm); /* +0100 -> +01:00 */
        snprintf(al->iso_tz, sizeof al->iso_tz, "%.3s:%.2s", z, z + 3);
        al->cached_sec = sec;
    }
    int ms = (int)((t - (double)sec) * 1000.0);
    snprintf(al->iso, sizeof al->iso, "%s.%03d%s", al->iso_head,
             ms < 0     ? 0
             : ms > 999 ? 999
                        : ms,
             al->iso_tz);
}

static int req_header(void *ud, const char *name, const char **value, size_t *len)
{
    pagi_str v;
    if (!pagi_scope_header(ud, name, &v))
        return 0;
    *value = v.ptr;
    *len = v.len;
    return 1;
}

void access_log_request(access_log *al, conn *c, pagi_scope *s, double start, int status,
                        uint64_t bytes, const char *reason)
{
    if (BUF_CAP - al->used < ACCESS_FORMAT_LINE_MAX) {
        access_log_flush(al);
        if (BUF_CAP - al->used < ACCESS_FORMAT_LINE_MAX) {
            count_dropped(al, 1); /* never wait for the disk */
            return;
        }
    }
    char method[32];
    pagi_str m, target;
    double now = ev_time();
    if (start <= 0)
        start = now;
    access_record r = {
        .client = c->peer_family ? conn_peer_host(c) : NULL,
        .time = start,
        .duration = now > start ? now - start : 0,
        .status = status,
        .bytes = bytes,
        .reason = reason,
        .type = "http",
        .pid = al->pid,
    };
    if (c->tls) {
        r.tls_version = tls_conn_version(c->tls);
        r.tls_cipher = tls_conn_cipher(c->tls);
        r.tls_reused = tls_conn_session_reused(c->tls);
    }
    if (al->fmt.needs & (AF_NEED_TIME_CLF | AF_NEED_TIME_ISO)) {
        time_strings(al, start);
        r.time_clf = al->clf;
        r.time_iso = al->iso;
    }
    if (s) {
        pagi_str p = pagi_scope_raw_path(s), q = pagi_scope_query_string(s);
        r.method = pagi_scope_method(s);
        r.path = p.ptr;
        r.path_len = p.len;
        r.query = q.ptr;
        r.query_len = q.len;
        const char *hv = pagi_scope_http_version(s);
        r.protocol = !strcmp(hv, "1.0") ? "HTTP/1.0" : !strcmp(hv, "2") ? "HTTP/2.0" : "HTTP/1.1";
        r.type = pagi_scope_type_name(s);
        r.req_header = req_header;
        r.ud = s;
    } else if (c->proto->request_line && c->proto->request_line(c, &m, &target)) {
        /* Refused before any scope (413, 431, a bad handshake ...): what the parser read. */
        snprintf(method, sizeof method, "%.*s", (int)m.len, m.ptr);
        const char *qm = memchr(target.ptr, '?', target.len);
        size_t plen = qm ? (size_t)(qm - target.ptr) : target.len;
        r.method = method;
        r.path = target.ptr;
        r.path_len = plen;
        r.query = qm ? qm + 1 : NULL;
        r.query_len = qm ? target.len - plen - 1 : 0;
    }
    buf *resp = s ? scope_log_resp_buf(s) : NULL;
    if ((al->fmt.needs & AF_NEED_RESP_HEADERS) && status && resp && buf_size(resp)) {
        r.resp_values = buf_head(resp);
        r.resp_values_len = buf_size(resp);
    }
    al->used += access_format_render(&al->fmt, &r, al->buf + al->used, BUF_CAP - al->used);
    al->lines++;
    if (resp && resp->cap)
        buf_free(resp); /* logged: a scope that lives on keeps none */
    if (al->used >= FLUSH_AT)
        access_log_flush(al);
    else if (!ev_is_active(&al->timer))
        ev_timer_start(al->ev, &al->timer);
}

static int name_is(pagi_str n, const char *lower)
{
    size_t len = strlen(lower);
    if (n.len != len)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = n.ptr[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch - 'A' + 'a');
        if (ch != lower[i])
            return 0;
    }
    return 1;
}

void access_log_response_start(access_log *al, pagi_scope *s, const pagi_event *ev)
{
    if (!(al->fmt.needs & AF_NEED_RESP_HEADERS))
        return;
    buf *b = scope_log_resp_buf(s);
    buf_reset(b);
    for (size_t k = 0; k < al->fmt.n_resp; k++) {
        for (size_t i = 0; i < ev->header_count; i++) {
            if (name_is(ev->headers[i].name, al->fmt.resp_names[k])) {
                /* Header values cannot hold NUL (send validates): '\0' separates. */
                buf_append(b, ev->headers[i].value.ptr, ev->headers[i].value.len);
                break;
            }
        }
        buf_append(b, "", 1);
    }
}
