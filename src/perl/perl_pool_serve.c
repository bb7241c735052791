/*
 * perl_pool_serve.c - a pool process's per-request I/O in C (Pool.pm has the
 * wire): taking a connection from the pool's socket, reading the worker's
 * frames on the raw descriptor, building a PSGI request's env from its Q
 * frame, and writing the frames back, so that no PerlIO handle and no Perl
 * frame parsing runs per request (docs/psgi.md, "The worker pool").
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
/* Fields of a Q frame before its header names and values. */
#define Q_FIXED 12

/* The connection's unread bytes. One per process, reused by every request
 * (a pool process serves one at a time); it lives as long as the process. */
typedef struct conn_buf {
    char *p;
    size_t len, at, cap;
} conn_buf;
static conn_buf rbuf;
/* The frames of a response, built whole and written at once; reused too. */
static conn_buf wbuf;

static int buf_reserve(conn_buf *b, size_t n)
{
    if (b->len + n <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64 * 1024;
    while (cap < b->len + n)
        cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q)
        return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static int buf_add(conn_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int buf_u32(conn_buf *b, uint32_t v)
{
    unsigned char c[4] = {v >> 24, v >> 16, v >> 8, v};
    return buf_add(b, c, 4);
}

static int buf_frame_head(conn_buf *b, char type, size_t len)
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
        size_t have = rbuf.len - rbuf.at;
        if (have >= 5) {
            uint32_t n = get_u32(rbuf.p + rbuf.at + 1);
            if (n > FRAME_LEN_MAX)
                return 0;
            if (have >= 5 + (size_t)n) {
                *type = rbuf.p[rbuf.at];
                *payload = rbuf.p + rbuf.at + 5;
                *plen = n;
                rbuf.at += 5 + (size_t)n;
                return 1;
            }
        }
        if (rbuf.at && rbuf.at == rbuf.len)
            rbuf.at = rbuf.len = 0;
        else if (rbuf.at > rbuf.cap / 2) { /* room at the end again */
            memmove(rbuf.p, rbuf.p + rbuf.at, rbuf.len - rbuf.at);
            rbuf.len -= rbuf.at;
            rbuf.at = 0;
        }
        if (buf_reserve(&rbuf, 64 * 1024) < 0)
            return 0;
        ssize_t r = read(fd, rbuf.p + rbuf.len, rbuf.cap - rbuf.len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        rbuf.len += (size_t)r;
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
 * without psgi.input, psgi.errors and psgix.cleanup*; NULL when malformed. */
static HV *env_of_head(pTHX_ const char *p, size_t n)
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

/* This process is busy (a request taken) or idle again: its slot and title. */
static void mark_busy(const pool_info *p, int busy)
{
    proctitle_pool(p->num, p->generation, busy ? "busy" : "idle");
    shm_worker *s = p->self;
    if (!s)
        return;
    atomic_store_explicit(&s->pool_busy, busy, memory_order_relaxed);
    if (busy) /* a request starts now: the master's deadline counts from here */
        atomic_store_explicit(&s->heartbeat_ms, shm_now_ms(), memory_order_relaxed);
    else
        shm_add(&s->pool_served, 1);
}

/* A peer of our own uid: one of our workers (see gen_pool_open). */
static int peer_is_ours(int fd)
{
    static uid_t uid;
    static int have_uid;
    if (!have_uid) { /* after the fork: privileges are dropped by then */
        uid = getuid();
        have_uid = 1;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == uid;
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

/* pool_take($pid): the next connection waiting on the pool's socket, its
 * request read. () when none waits; (-1) when a peer of another uid was
 * refused; else (fd, type, ...) with this process marked busy and the A
 * frame sent: (fd, '') when no whole request came (serve nothing), (fd,
 * 'C', $payload), or (fd, 'Q', \%env, $body, $spool_fd) where $spool_fd
 * (-1: the body is in $body) holds a body past 64 KiB. */
XS_INTERNAL(xs_pool_take)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "pid");
    const pool_info *pool = the_pool();
    if (!pool)
        XSRETURN_EMPTY;
    int fd = accept4(pool->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) /* another process took it, or none waits */
        XSRETURN_EMPTY;
    if (!peer_is_ours(fd)) {
        close(fd);
        ST(0) = sv_2mortal(newSViv(-1));
        XSRETURN(1);
    }
    mark_busy(pool, 1);
    rbuf.at = rbuf.len = 0;
    STRLEN pidlen;
    const char *pid = SvPV(ST(0), pidlen);
    wbuf.len = 0;
    if (buf_frame_head(&wbuf, 'A', pidlen) || buf_add(&wbuf, pid, pidlen))
        croak("worker pool: out of memory");
    (void)send_all(fd, wbuf.p, wbuf.len); /* a worker gone: the read ends it */
    char type;
    const char *p;
    size_t n;
    ST(0) = sv_2mortal(newSViv(fd));
    if (!read_frame(fd, &type, &p, &n) || (type != 'C' && type != 'Q')) {
        ST(1) = sv_2mortal(newSVpvs(""));
        XSRETURN(2);
    }
    if (type == 'C') {
        ST(1) = sv_2mortal(newSVpvs("C"));
        ST(2) = sv_2mortal(newSVpvn(p, n));
        XSRETURN(3);
    }
    HV *env = env_of_head(aTHX_ p, n);
    SV *body = sv_2mortal(newSVpvs(""));
    int spool;
    if (!env || !read_body(aTHX_ fd, body, &spool)) {
        SvREFCNT_dec((SV *)env);
        ST(1) = sv_2mortal(newSVpvs(""));
        XSRETURN(2);
    }
    EXTEND(SP, 5);
    ST(1) = sv_2mortal(newSVpvs("Q"));
    ST(2) = sv_2mortal(newRV_noinc((SV *)env));
    ST(3) = body;
    ST(4) = sv_2mortal(newSViv(spool));
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

/* pool_close($fd): the request is over: the connection closed, this process
 * idle again and one more served. */
XS_INTERNAL(xs_pool_close)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "fd");
    close((int)SvIV(ST(0)));
    const pool_info *pool = the_pool();
    if (pool)
        mark_busy(pool, 0);
    XSRETURN_EMPTY;
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
    wbuf.len = 0;
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
        if (buf_u32(&wbuf, (uint32_t)nl) || buf_reserve(&wbuf, nl))
            return -1;
        for (STRLEN k = 0; k < nl; k++)
            wbuf.p[wbuf.len++] = (char)toLOWER(name[k]);
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
    memcpy(wbuf.p + 1, lenb, 4);
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
                    memcpy(wbuf.p + frame_at + 1, fb, 4);
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
        memcpy(wbuf.p + frame_at + 1, fb, 4);
    }
    if (buf_frame_head(&wbuf, 'E', 0))
        return -1;
    return 1;
}

/* pool_respond($fd, $res): the app's response written at once when it is
 * the common form, [status, [headers], [byte strings]], valid: 1, or 2 when
 * the worker is gone. 0: PSGI.pm's adapter must handle it (nothing written). */
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
    XSRETURN_IV(send_all((int)SvIV(ST(0)), wbuf.p, wbuf.len) < 0 ? 2 : 1);
}

void perl_pool_serve_boot(pTHX)
{
    const char *file = __FILE__;
    newXS("PAGI::Server::Pagid::XS::pool_take", xs_pool_take, file);
    newXS("PAGI::Server::Pagid::XS::pool_write", xs_pool_write, file);
    newXS("PAGI::Server::Pagid::XS::pool_close", xs_pool_close, file);
    newXS("PAGI::Server::Pagid::XS::pool_respond", xs_pool_respond, file);
}
