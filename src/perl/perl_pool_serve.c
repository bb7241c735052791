/*
 * perl_pool_serve.c - a pool process's per-request I/O in C (Pool.pm has the
 * wire): the links its workers keep to it (accepted once), its pool_state
 * in the shared region (idle again just before a response's last frames go,
 * so the worker reading them can claim it at once), reading a request's
 * frames on the raw descriptor, building a PSGI request's env from its Q
 * frame, writing the frames back, and telling the workers whose requests
 * wait that it is idle, so that no PerlIO handle and no Perl frame parsing
 * runs per request (docs/psgi.md, "The worker pool").
 */
#include "perl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/pool.h"
#include "common/proctitle.h"
#include "worker/core/loop.h"
#include "common/hexdigit.h"

/* A request body up to this stays in memory (PSGI.pm's $MEMORY_MAX). */
#define BODY_MEM_MAX (64 * 1024)
/* Body frames of 256 KiB at most, as the worker relays them (Pool.pm). */
#define BODY_FRAME_MAX (256 * 1024)
/* No frame of the worker comes near this: a larger length is not from it. */
#define FRAME_LEN_MAX (1u << 30)
/* Fields of a Q frame before its header names and values; the last names
 * the app (its spec: every PSGI app of the config is served here). */
#define Q_FIXED 13

/* The link's unread bytes. One per process, reused by every request (a
 * pool process serves one at a time; a worker sends nothing past a
 * request's Z before it claims the process again); it lives as long as the
 * process. */
static buf rbuf;
/* The frames of a response, built whole and written at once; reused too. */
static buf wbuf;

/* The links: each worker's connection and its pid (SO_PEERCRED), so that
 * an idle process can tell a worker with waiting requests. */
typedef struct peer {
    int fd, pid;
} peer;
static peer *peers;
static size_t n_peers, cap_peers;
static long served;  /* requests and calls finished: max_requests */
static int retiring; /* a harakiri waits for the request claimed meanwhile */

static int buf_add(buf *b, const void *p, size_t n)
{
    return buf_append(b, p, n);
}

static int buf_u32(buf *b, uint32_t v)
{
    unsigned char c[4] = {v >> 24, v >> 16, v >> 8, v};
    return buf_add(b, c, 4);
}

static int buf_frame_head(buf *b, char type, size_t len)
{
    return buf_add(b, &type, 1) || buf_u32(b, (uint32_t)len);
}

static uint32_t get_u32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The next whole frame on fd (blocking): its type, payload and length; 0 at
 * EOF, on an error or on a frame no worker writes. The payload stays valid
 * until the next call. */
static int read_frame(int fd, char *type, const char **payload, size_t *plen)
{
    for (;;) {
        size_t have = buf_size(&rbuf);
        if (have >= 5) {
            uint32_t n = get_u32(buf_head(&rbuf) + 1);
            if (n > FRAME_LEN_MAX)
                return 0;
            if (have >= 5 + (size_t)n) {
                *type = buf_head(&rbuf)[0];
                *payload = buf_head(&rbuf) + 5;
                *plen = n;
                buf_consume(&rbuf, 5 + (size_t)n);
                return 1;
            }
        }
        char *to = buf_reserve(&rbuf, 64 * 1024);
        if (!to)
            return 0;
        ssize_t r = read(fd, to, rbuf.cap - rbuf.len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        buf_commit(&rbuf, (size_t)r);
    }
}

typedef struct field {
    const char *p;
    size_t n;
} field;

static SV *field_sv(pTHX_ field f)
{
    return newSVpvn(f.p, f.n);
}

/* PATH_INFO's source: the raw path %XX-decoded once (RFC 3875). */
static SV *percent_decoded(pTHX_ field raw)
{
    SV *sv = newSV(raw.n + 1);
    SvPOK_on(sv);
    char *d = SvPVX(sv);
    size_t o = 0;
    for (size_t i = 0; i < raw.n; i++) {
        int hi, lo;
        if (raw.p[i] == '%' && i + 2 < raw.n &&
            (hi = hex_digit_value((unsigned char)raw.p[i + 1])) >= 0 &&
            (lo = hex_digit_value((unsigned char)raw.p[i + 2])) >= 0) {
            d[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else
            d[o++] = raw.p[i];
    }
    d[o] = 0;
    SvCUR_set(sv, o);
    return sv;
}

static void env_put(pTHX_ HV *env, const char *key, size_t klen, SV *v)
{
    (void)hv_store(env, key, (I32)klen, v, 0);
}
#define ENV_PUT(env, lit, v) env_put(aTHX_ env, "" lit "", sizeof(lit) - 1, v)

/* A header as PSGI.pm's _env puts it: names with '_' dropped, content-length
 * left to the body's length, repeats joined (cookies with '; '). */
static void env_header(pTHX_ HV *env, field name, field value, int *declared)
{
    char key[512];
    size_t klen;
    if (memchr(name.p, '_', name.n))
        return;
    if (name.n == 14 && !memcmp(name.p, "content-length", 14)) {
        *declared = 1;
        return;
    }
    if (name.n == 12 && !memcmp(name.p, "content-type", 12)) {
        memcpy(key, "CONTENT_TYPE", klen = 12);
    } else {
        if (name.n + 5 > sizeof key)
            return; /* the worker's header limits keep names far shorter */
        memcpy(key, "HTTP_", 5);
        for (size_t i = 0; i < name.n; i++) {
            char c = name.p[i];
            key[5 + i] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
        }
        klen = 5 + name.n;
    }
    SV **old = hv_fetch(env, key, (I32)klen, 0);
    if (old && *old) {
        int cookie = name.n == 6 && !memcmp(name.p, "cookie", 6);
        sv_catpvn(*old, cookie ? "; " : ", ", 2);
        sv_catpvn(*old, value.p, value.n);
    } else
        env_put(aTHX_ env, key, klen, field_sv(aTHX_ value));
}

/* The env of a Q frame (Pool.pm's wire; PSGI.pm's _env for a pool process),
 * without psgi.input, psgi.errors and psgix.cleanup*, and in *app the app
 * it is for; NULL when malformed. */
static HV *env_of_head(pTHX_ const char *p, size_t n, field *app)
{
    field f[Q_FIXED];
    size_t at = 0;
    for (int i = 0; i < Q_FIXED; i++) {
        if (n - at < 4 || n - at - 4 < get_u32(p + at))
            return NULL;
        f[i] = (field){p + at + 4, get_u32(p + at)};
        at += 4 + f[i].n;
    }
    field method = f[0], scheme = f[1], version = f[2], raw = f[3], query = f[4], root = f[5],
          path = f[6], sh = f[7], sp = f[8], ch = f[9], cp = f[10], len = f[11];
    *app = f[12];
    HV *env = newHV();
    hv_ksplit(env, 48);
    ENV_PUT(env, "REQUEST_METHOD", field_sv(aTHX_ method));
    ENV_PUT(env, "SCRIPT_NAME", field_sv(aTHX_ root));
    SV *pi = percent_decoded(aTHX_ raw);
    if (root.n) {
        if (SvCUR(pi) >= root.n && !memcmp(SvPVX(pi), root.p, root.n))
            sv_chop(pi, SvPVX(pi) + root.n);
        else if (path.n >= root.n)
            sv_setpvn(pi, path.p + root.n, path.n - root.n);
        else
            sv_setsv(pi, &PL_sv_undef); /* substr past the end, as PSGI.pm */
    }
    ENV_PUT(env, "PATH_INFO", pi);
    SV *uri = field_sv(aTHX_ raw);
    if (query.n) {
        sv_catpvn(uri, "?", 1);
        sv_catpvn(uri, query.p, query.n);
    }
    ENV_PUT(env, "REQUEST_URI", uri);
    ENV_PUT(env, "QUERY_STRING", field_sv(aTHX_ query));
    int has_server = sh.n && sp.n;
    ENV_PUT(env, "SERVER_NAME", has_server ? field_sv(aTHX_ sh) : newSVpvs("localhost"));
    ENV_PUT(env, "SERVER_PORT", has_server ? field_sv(aTHX_ sp) : newSViv(0));
    SV *proto = newSVpvs("HTTP/");
    sv_catpvn(proto, version.p, version.n);
    ENV_PUT(env, "SERVER_PROTOCOL", proto);
    AV *pv = newAV();
    av_push(pv, newSViv(1));
    av_push(pv, newSViv(1));
    ENV_PUT(env, "psgi.version", newRV_noinc((SV *)pv));
    int https = scheme.n == 5 && !memcmp(scheme.p, "https", 5);
    ENV_PUT(env, "psgi.url_scheme", https ? newSVpvs("https") : newSVpvs("http"));
    ENV_PUT(env, "psgi.multithread", newSViv(0));
    ENV_PUT(env, "psgi.multiprocess", newSViv(1));
    ENV_PUT(env, "psgi.run_once", newSViv(0));
    ENV_PUT(env, "psgi.nonblocking", newSViv(0));
    ENV_PUT(env, "psgi.streaming", newSViv(1));
    ENV_PUT(env, "psgix.input.buffered", newSViv(1));
    ENV_PUT(env, "psgix.harakiri", newSViv(1));
    if (ch.n) { /* none on a unix socket */
        ENV_PUT(env, "REMOTE_ADDR", field_sv(aTHX_ ch));
        ENV_PUT(env, "REMOTE_PORT", field_sv(aTHX_ cp));
    }
    int declared = 0;
    while (at < n) {
        field hf[2];
        for (int i = 0; i < 2; i++) {
            if (n - at < 4 || n - at - 4 < get_u32(p + at)) {
                SvREFCNT_dec((SV *)env);
                return NULL;
            }
            hf[i] = (field){p + at + 4, get_u32(p + at)};
            at += 4 + hf[i].n;
        }
        env_header(aTHX_ env, hf[0], hf[1], &declared);
    }
    /* The body was read whole: its length is known even when it came chunked. */
    int has_len = len.n && !(len.n == 1 && len.p[0] == '0');
    if (has_len)
        ENV_PUT(env, "CONTENT_LENGTH", field_sv(aTHX_ len));
    else if (declared)
        ENV_PUT(env, "CONTENT_LENGTH", newSViv(0));
    return env;
}

static const pool_info *the_pool(void)
{
    return perl_host_loop ? perl_host_loop->pool : NULL;
}

/* This process runs a request now: its slot and title. */
static void mark_busy(const pool_info *p)
{
    proctitle_pool(p->num, p->generation, "busy");
    shm_worker *s = p->self;
    if (!s)
        return;
    /* Claimed already by the worker that sent it; set for a request that
     * came with no claim (a worker without the shared region). */
    atomic_store_explicit(&s->pool_state, POOL_CLAIMED, memory_order_relaxed);
    atomic_store_explicit(&s->pool_busy, 1, memory_order_relaxed);
    /* A request starts now: the master's deadline counts from here. */
    atomic_store_explicit(&s->heartbeat_ms, shm_now_ms(), memory_order_relaxed);
}

/* A peer of our own uid: one of our workers (see gen_pool_open); its pid. */
static int peer_pid(int fd)
{
    static uid_t uid;
    static int have_uid;
    if (!have_uid) { /* after the fork: privileges are dropped by then */
        uid = getuid();
        have_uid = 1;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != uid)
        return 0;
    return cred.pid > 0 ? cred.pid : 0;
}

static int peer_fd_of_pid(int pid)
{
    for (size_t i = 0; i < n_peers; i++)
        if (peers[i].pid == pid)
            return peers[i].fd;
    return -1;
}

static const char idle_frame[5] = {'I', 0, 0, 0, 0};

/* Tells every worker with requests waiting for a process (its pool_waiting)
 * that this one is idle, but the worker at skip_fd (its response's last
 * frames just went: it looks at its queue then). Never waits for a worker. */
static void tell_waiting_workers(const pool_info *p, int skip_fd)
{
    if (!p->shm)
        return;
    size_t n = shm_slots_used(p->shm);
    for (size_t i = 0; i < n; i++) {
        shm_worker *s = &p->shm->slots[i];
        /* seq_cst: paired with the worker's count before its last claim */
        if (atomic_load(&s->pool_waiting) <= 0 ||
            atomic_load_explicit(&s->generation, memory_order_relaxed) != p->generation ||
            pool_is_process_num(atomic_load_explicit(&s->worker_num, memory_order_relaxed)))
            continue;
        int fd = peer_fd_of_pid(atomic_load_explicit(&s->pid, memory_order_relaxed));
        if (fd >= 0 && fd != skip_fd)
            (void)send(fd, idle_frame, sizeof idle_frame, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
}

/* The request or call on fd is over; last (n bytes) are its final frames.
 * The process is idle again before they go (or OFF when it leaves after
 * this: max_requests, a harakiri asked meanwhile). Returns 0, or 1 when
 * max_requests was reached, 2 when a deferred harakiri is due; *ok is 0
 * when the worker was gone. */
static int finish_request(const pool_info *p, int fd, const char *last, size_t n, int *ok)
{
    served++;
    int retire = retiring ? 2 : (p->max_requests && served >= p->max_requests) ? 1 : 0;
    shm_worker *s = p->self;
    if (s) {
        atomic_store_explicit(&s->pool_busy, 0, memory_order_relaxed);
        shm_add(&s->pool_served, 1);
        atomic_store(&s->pool_state, retire ? POOL_OFF : POOL_IDLE);
    }
    *ok = send_all(fd, last, n) == 0;
    proctitle_pool(p->num, p->generation, "idle");
    if (!retire)
        tell_waiting_workers(p, *ok ? fd : -1);
    return retire;
}

int perl_pool_retire(void)
{
    const pool_info *p = perl_host_loop ? perl_host_loop->pool : NULL;
    if (!p || !p->process || !p->self)
        return 1;
    int expected = POOL_IDLE;
    if (atomic_compare_exchange_strong(&p->self->pool_state, &expected, POOL_OFF) ||
        expected == POOL_OFF)
        return 1;
    retiring = 1; /* claimed: that request is served first */
    return 0;
}

/* The body frames after a Q, up to Z: in *mem, or past BODY_MEM_MAX in an
 * unlinked file at offset 0 (*spool). 0 when the connection ended first. */
static int read_body(pTHX_ int fd, SV *mem, int *spool)
{
    char type;
    const char *p;
    size_t n;
    *spool = -1;
    while (read_frame(fd, &type, &p, &n)) {
        if (type == 'Z') {
            if (*spool >= 0 && lseek(*spool, 0, SEEK_SET) < 0)
                break;
            return 1;
        }
        if (type != 'D')
            break;
        if (*spool < 0) {
            sv_catpvn(mem, p, n);
            if (SvCUR(mem) <= BODY_MEM_MAX)
                continue;
            if ((*spool = perl_pool_spool_open()) < 0)
                break;
            p = SvPVX(mem);
            n = SvCUR(mem);
            SvCUR_set(mem, 0);
        }
        ssize_t w = 0;
        for (size_t at = 0; at < n; at += (size_t)w)
            if ((w = write(*spool, p + at, n - at)) <= 0 && errno != EINTR)
                goto fail;
            else if (w < 0)
                w = 0;
    }
fail:
    if (*spool >= 0)
        close(*spool);
    *spool = -1;
    return 0;
}

/* pool_ready(): this process takes requests now (its listener watched): its
 * listener non-blocking, its slot IDLE. */
XS_INTERNAL(xs_pool_ready)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    const pool_info *pool = the_pool();
    if (!pool || !pool->process)
        XSRETURN_EMPTY;
    int lfd = pool->fds[pool->num - 1];
    int fl = fcntl(lfd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(lfd, F_SETFL, fl | O_NONBLOCK);
    if (pool->self)
        atomic_store(&pool->self->pool_state, POOL_IDLE);
    XSRETURN_EMPTY;
}

/* pool_accept(): a worker's new link: its fd, -1 for a peer of another uid
 * (refused), () when none waits. An idle process says so on it at once (a
 * worker may have queued requests before this process took its link). */
XS_INTERNAL(xs_pool_accept)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    const pool_info *pool = the_pool();
    if (!pool || !pool->process)
        XSRETURN_EMPTY;
    int fd = accept4(pool->fds[pool->num - 1], NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        XSRETURN_EMPTY;
    int pid = peer_pid(fd);
    if (pid && n_peers == cap_peers) {
        size_t cap = cap_peers * 2 + 8;
        peer *more = realloc(peers, cap * sizeof *peers);
        if (more) {
            peers = more;
            cap_peers = cap;
        }
    }
    if (!pid || n_peers == cap_peers) { /* another uid's, or no memory for it */
        close(fd);
        ST(0) = sv_2mortal(newSViv(-1));
        XSRETURN(1);
    }
    peers[n_peers++] = (peer){fd, pid};
    /* Who took the link: the worker sends a request on it only to the
     * process it claimed (a link made before a replacement may still reach
     * the process that is leaving). */
    uint32_t me = (uint32_t)getpid();
    const char hello[9] = {'H',     0, 0, 0, 4, (char)(me >> 24), (char)(me >> 16), (char)(me >> 8),
                           (char)me};
    (void)send(fd, hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (pool->self && atomic_load(&pool->self->pool_state) == POOL_IDLE)
        (void)send(fd, idle_frame, sizeof idle_frame, MSG_NOSIGNAL | MSG_DONTWAIT);
    ST(0) = sv_2mortal(newSViv(fd));
    XSRETURN(1);
}

/* pool_drop($fd): a worker's link ended (the worker left or cut it). */
XS_INTERNAL(xs_pool_drop)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "fd");
    int fd = (int)SvIV(ST(0));
    for (size_t i = 0; i < n_peers; i++)
        if (peers[i].fd == fd) {
            peers[i] = peers[--n_peers];
            break;
        }
    close(fd);
    XSRETURN_EMPTY;
}

/* pool_take($fd): the request on link $fd, read whole: () when the link
 * ended instead (pool_drop it); else (type, ...) with this process marked
 * busy: ('C', $payload), or ('Q', \%env, $body, $spool_fd, $app) where
 * $spool_fd (-1: the body is in $body) holds a body past 64 KiB and $app is
 * the spec of the PSGI app the request is for. */
XS_INTERNAL(xs_pool_take)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "fd");
    const pool_info *pool = the_pool();
    int fd = (int)SvIV(ST(0));
    if (!pool)
        XSRETURN_EMPTY;
    buf_reset(&rbuf);
    char type;
    const char *p;
    size_t n;
    if (!read_frame(fd, &type, &p, &n) || (type != 'C' && type != 'Q'))
        XSRETURN_EMPTY;
    mark_busy(pool);
    if (type == 'C') {
        ST(0) = sv_2mortal(newSVpvs("C"));
        ST(1) = sv_2mortal(newSVpvn(p, n));
        XSRETURN(2);
    }
    field app;
    HV *env = env_of_head(aTHX_ p, n, &app);
    /* Before the body's frames reuse rbuf, where app points. */
    SV *app_sv = sv_2mortal(env ? field_sv(aTHX_ app) : newSVpvs(""));
    SV *body = sv_2mortal(newSVpvs(""));
    int spool;
    if (!env || !read_body(aTHX_ fd, body, &spool)) {
        /* The worker cut the link mid-request: nobody to answer. */
        SvREFCNT_dec((SV *)env);
        int ok;
        (void)finish_request(pool, fd, NULL, 0, &ok);
        XSRETURN_EMPTY;
    }
    EXTEND(SP, 5);
    ST(0) = sv_2mortal(newSVpvs("Q"));
    ST(1) = sv_2mortal(newRV_noinc((SV *)env));
    ST(2) = body;
    ST(3) = sv_2mortal(newSViv(spool));
    ST(4) = app_sv;
    XSRETURN(5);
}

/* pool_write($fd, $bytes): all of it, blocking; false when the worker left. */
XS_INTERNAL(xs_pool_write)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "fd, bytes");
    STRLEN n;
    const char *p = SvPVbyte(ST(1), n);
    if (send_all((int)SvIV(ST(0)), p, n) < 0)
        XSRETURN_NO;
    XSRETURN_YES;
}

/* pool_finish($fd, $last): the request is over, $last its final frames:
 * (retire, ok), retire 0, or 1 (max_requests) / 2 (a harakiri) when this
 * process leaves now; ok false when the worker was gone. */
XS_INTERNAL(xs_pool_finish)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "fd, last");
    const pool_info *pool = the_pool();
    STRLEN n;
    const char *p = SvPVbyte(ST(1), n);
    int ok = 1, retire = 0;
    if (pool)
        retire = finish_request(pool, (int)SvIV(ST(0)), p, n, &ok);
    ST(0) = sv_2mortal(newSViv(retire));
    ST(1) = sv_2mortal(newSViv(ok));
    XSRETURN(2);
}

static int is_token_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+.^_`|~-", c) != NULL);
}

/* The response frames of [status, headers, body] (an array body of byte
 * strings) in wbuf, as PSGI.pm's _respond would send them; 0 for any other
 * response, which PSGI.pm then handles (and reports) itself. */
static int build_simple_response(pTHX_ AV *res)
{
    if (av_len(res) != 2)
        return 0;
    SV **st = av_fetch(res, 0, 0), **hd = av_fetch(res, 1, 0), **bd = av_fetch(res, 2, 0);
    if (!st || !hd || !bd || !SvOK(*st) || !SvROK(*hd) || SvTYPE(SvRV(*hd)) != SVt_PVAV ||
        !SvROK(*bd) || SvTYPE(SvRV(*bd)) != SVt_PVAV || SvRMAGICAL(SvRV(*hd)) ||
        SvRMAGICAL(SvRV(*bd)) || SvROK(*st) || SvGMAGICAL(*st))
        return 0;
    STRLEN sl;
    const char *s = SvPV(*st, sl);
    if (sl != 3 || !isDIGIT(s[0]) || !isDIGIT(s[1]) || !isDIGIT(s[2]) || s[0] == '0')
        return 0;
    int status = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
    AV *h = (AV *)SvRV(*hd), *b = (AV *)SvRV(*bd);
    SSize_t nh = av_len(h) + 1, nb = av_len(b) + 1;
    if (nh % 2)
        return 0;
    size_t body_len = 0;
    for (SSize_t i = 0; i < nb; i++) {
        SV **c = av_fetch(b, i, 0);
        if (!c || !SvOK(*c))
            continue;
        if (SvROK(*c) || SvUTF8(*c) || SvGMAGICAL(*c))
            return 0;
        STRLEN cl;
        (void)SvPV(*c, cl);
        body_len += cl;
    }
    buf_reset(&wbuf);
    if (buf_frame_head(&wbuf, 'S', 0) || buf_u32(&wbuf, (uint32_t)status))
        return -1;
    int has_length = 0;
    for (SSize_t i = 0; i < nh; i += 2) {
        SV **nsv = av_fetch(h, i, 0), **vsv = av_fetch(h, i + 1, 0);
        if (!nsv || !vsv || !SvOK(*nsv) || !SvOK(*vsv) || SvROK(*nsv) || SvROK(*vsv) ||
            SvGMAGICAL(*nsv) || SvGMAGICAL(*vsv))
            return 0;
        STRLEN nl, vl;
        const char *name = SvPV(*nsv, nl), *value = SvPV(*vsv, vl);
        if (!nl || SvUTF8(*nsv) || SvUTF8(*vsv))
            return 0;
        for (STRLEN k = 0; k < nl; k++)
            if (!is_token_char((unsigned char)name[k]))
                return 0;
        for (STRLEN k = 0; k < vl; k++)
            if (value[k] == '\r' || value[k] == '\n' || value[k] == '\0')
                return 0;
        if (nl == 17 && !strncasecmp(name, "transfer-encoding", 17))
            return 0; /* the app's own framing: PSGI.pm takes it off */
        has_length |= nl == 14 && !strncasecmp(name, "content-length", 14);
        if (buf_u32(&wbuf, (uint32_t)nl) || !buf_reserve(&wbuf, nl))
            return -1;
        for (STRLEN k = 0; k < nl; k++)
            wbuf.data[wbuf.len++] = (char)toLOWER(name[k]);
        if (buf_u32(&wbuf, (uint32_t)vl) || buf_add(&wbuf, value, vl))
            return -1;
    }
    /* The whole body is known: a content-length rather than chunks. */
    if (!has_length && status >= 200 && status != 204 && status != 304) {
        char num[24];
        int k = snprintf(num, sizeof num, "%zu", body_len);
        if (buf_u32(&wbuf, 14) || buf_add(&wbuf, "content-length", 14) ||
            buf_u32(&wbuf, (uint32_t)k) || buf_add(&wbuf, num, (size_t)k))
            return -1;
    }
    uint32_t slen = (uint32_t)(wbuf.len - 5);
    unsigned char lenb[4] = {slen >> 24, slen >> 16, slen >> 8, slen};
    memcpy(wbuf.data + 1, lenb, 4);
    /* The body in frames of 256 KiB at most, then the end. */
    size_t in_frame = 0, frame_at = 0;
    for (SSize_t i = 0; i < nb; i++) {
        SV **c = av_fetch(b, i, 0);
        if (!c || !SvOK(*c))
            continue;
        STRLEN cl;
        const char *cp = SvPV(*c, cl);
        while (cl) {
            if (!in_frame || in_frame == BODY_FRAME_MAX) {
                if (in_frame) {
                    uint32_t fl = (uint32_t)in_frame;
                    unsigned char fb[4] = {fl >> 24, fl >> 16, fl >> 8, fl};
                    memcpy(wbuf.data + frame_at + 1, fb, 4);
                }
                frame_at = wbuf.len;
                in_frame = 0;
                if (buf_frame_head(&wbuf, 'B', 0))
                    return -1;
            }
            size_t take = BODY_FRAME_MAX - in_frame < cl ? BODY_FRAME_MAX - in_frame : cl;
            if (buf_add(&wbuf, cp, take))
                return -1;
            in_frame += take;
            cp += take;
            cl -= take;
        }
    }
    if (in_frame) {
        uint32_t fl = (uint32_t)in_frame;
        unsigned char fb[4] = {fl >> 24, fl >> 16, fl >> 8, fl};
        memcpy(wbuf.data + frame_at + 1, fb, 4);
    }
    if (buf_frame_head(&wbuf, 'E', 0))
        return -1;
    return 1;
}

/* pool_respond($fd, $res): the app's response written at once, the request
 * finished (pool_finish), when it is the common form, [status, [headers],
 * [byte strings]], valid: 1 + pool_finish's retire. 0: PSGI.pm's adapter
 * must handle it (nothing written, nothing finished). */
XS_INTERNAL(xs_pool_respond)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "fd, res");
    SV *res = ST(1);
    if (!SvROK(res) || SvTYPE(SvRV(res)) != SVt_PVAV || SvRMAGICAL(SvRV(res)))
        XSRETURN_IV(0);
    int built = build_simple_response(aTHX_(AV *) SvRV(res));
    if (built < 0)
        croak("worker pool: out of memory");
    if (!built)
        XSRETURN_IV(0);
    const pool_info *pool = the_pool();
    int ok = 1, retire = pool ? finish_request(pool, (int)SvIV(ST(0)), buf_head(&wbuf),
                                               buf_size(&wbuf), &ok)
                              : 0;
    XSRETURN_IV(1 + retire);
}

void perl_pool_serve_boot(pTHX)
{
    const char *file = __FILE__;
    newXS("PAGI::Server::Pagid::XS::pool_ready", xs_pool_ready, file);
    newXS("PAGI::Server::Pagid::XS::pool_accept", xs_pool_accept, file);
    newXS("PAGI::Server::Pagid::XS::pool_drop", xs_pool_drop, file);
    newXS("PAGI::Server::Pagid::XS::pool_take", xs_pool_take, file);
    newXS("PAGI::Server::Pagid::XS::pool_write", xs_pool_write, file);
    newXS("PAGI::Server::Pagid::XS::pool_finish", xs_pool_finish, file);
    newXS("PAGI::Server::Pagid::XS::pool_respond", xs_pool_respond, file);
}
