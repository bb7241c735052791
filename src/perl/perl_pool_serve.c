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

#include <perliol.h>

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

/* A request body up to this stays in memory (PSGI.pm's $MEMORY_MAX). */
#define BODY_MEM_MAX (64 * 1024)
/* Body frames of 256 KiB at most, as the worker relays them (Pool.pm). */
#define BODY_FRAME_MAX (256 * 1024)
/* No frame of the worker comes near this: a larger length is not from it. */
#define FRAME_LEN_MAX (1u << 30)

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

/* ---- the common PSGI request, served in one call ---------------------- */

/* The shared psgi.input of requests without a body (a handle opened on an
 * empty string once, Pool.pm's): usable again when it is still what it was,
 * one read-only scalar layer on nothing, rewound. An app that closed it,
 * pushed a layer or reopened it spoils it: the request goes to Pool.pm,
 * which opens a new one (an empty body is the same for every request, so
 * sharing it is not visible to an app). */
static int empty_input_ready(pTHX_ SV *in)
{
    if (!SvROK(in) || SvTYPE(SvRV(in)) != SVt_PVGV || SvOBJECT(SvRV(in)))
        return 0;
    GV *gv = (GV *)SvRV(in);
    IO *io = isGV_with_GP(gv) ? GvIOp(gv) : NULL;
    if (!io || SvRMAGICAL(io) || IoOFP(io) || !IoIFP(io) || IoTYPE(io) != IoTYPE_RDONLY)
        return 0;
    PerlIO *f = IoIFP(io);
    PerlIOl *top = PerlIOValid(f) ? PerlIOBase(f) : NULL;
    if (!top || top->next || !top->tab || strcmp(top->tab->name, "scalar") ||
        !(top->flags & PERLIO_F_CANREAD) ||
        (top->flags & (PERLIO_F_CANWRITE | PERLIO_F_UTF8 | PERLIO_F_CRLF)))
        return 0;
    if (PerlIO_seek(f, 0, SEEK_SET) != 0 || PerlIO_get_cnt(f) != 0)
        return 0;
    PerlIO_clearerr(f);
    IoLINES(io) = 0;
    return 1;
}

/* Whether psgi.errors (Errors.pm's tied handle) holds a line without its
 * newline yet (then flush_pending logs it); 1 when it cannot tell. */
static int errors_pending(pTHX_ SV *errors)
{
    if (!SvROK(errors) || SvTYPE(SvRV(errors)) != SVt_PVGV)
        return 1;
    GV *gv = (GV *)SvRV(errors);
    IO *io = isGV_with_GP(gv) ? GvIOp(gv) : NULL;
    MAGIC *mg = io ? mg_find((SV *)io, PERL_MAGIC_tiedscalar) : NULL;
    if (!mg || !mg->mg_obj || !SvROK(mg->mg_obj))
        return 1;
    SV *pending = SvRV(mg->mg_obj);
    /* Tied by the app to its own class: flush_pending makes it ours again. */
    if (!SvOBJECT(pending) ||
        SvSTASH(pending) != gv_stashpvs("PAGI::Server::Pagid::PSGI::Errors", 0))
        return 1;
    return !SvPOK(pending) || SvCUR(pending) > 0;
}

static void call_with_env(pTHX_ const char *sub, SV *envref)
{
    dSP;
    PUSHMARK(SP);
    XPUSHs(envref);
    PUTBACK;
    call_pv(sub, G_DISCARD);
}

/* Runs the PSGI app of a request without a body: the env completed as
 * PSGI.pm's _prepare_env does, the app called as Pool.pm's _serve_psgi
 * calls it, and its response, when the common form, written as pool_respond
 * writes it, then the cleanup handlers (PSGI.pm's _cleanup) when there are
 * any. Returns 1 + pool_finish's retire when all that was done; 0 with
 * *res and *err (mortal) when Pool.pm must answer (another response form,
 * or the app died). */
static int serve_common(pTHX_ const pool_info *pool, int fd, SV *app, SV *envref, SV *errors,
                        SV *input, SV **res, SV **err)
{
    HV *env = (HV *)SvRV(envref);
    perl_pool_env_complete(aTHX_ env, input, errors);
    dSP;
    PUSHMARK(SP);
    XPUSHs(envref);
    PUTBACK;
    int n = call_sv(app, G_SCALAR | G_EVAL);
    SPAGAIN;
    *res = sv_2mortal(newSVsv(n > 0 ? POPs : &PL_sv_undef));
    PUTBACK;
    *err = sv_2mortal(newSVsv(ERRSV));
    if (errors_pending(aTHX_ errors)) { /* a last line without its newline */
        PUSHMARK(SP);
        call_pv("PAGI::Server::Pagid::PSGI::Errors::flush_pending", G_DISCARD | G_NOARGS);
    }
    if (SvTRUE(*err) || !SvROK(*res) || SvTYPE(SvRV(*res)) != SVt_PVAV || SvRMAGICAL(SvRV(*res)))
        return 0;
    int built = build_simple_response(aTHX_(AV *) SvRV(*res));
    if (built < 0)
        croak("worker pool: out of memory");
    if (!built)
        return 0;
    int ok = 1, retire = finish_request(pool, fd, buf_head(&wbuf), buf_size(&wbuf), &ok);
    /* The cleanup handlers run after the response, as after any. */
    if (perl_pool_env_needs_cleanup(aTHX_ env))
        call_with_env(aTHX_ "PAGI::Server::Pagid::PSGI::Request::_cleanup", envref);
    return 1 + retire;
}

/* pool_serve($fd, \%psgi, $errors, $empty_input): the request on link $fd,
 * read whole, with this process marked busy; a PSGI request without a body
 * for an app of %psgi (spec => [$app, ...]) is served here at once. Returns
 * () when the link ended instead (pool_drop it); ('D', $retire) when it was
 * answered (pool_respond's common form; $retire as pool_finish's);
 * ('R', \%env, $res, $err, $app) when the app ran and Pool.pm answers;
 * ('C', $payload) for a worker_pool call; else ('Q', \%env, $body,
 * $spool_fd, $app) for Pool.pm to serve, where $spool_fd (-1: the body is
 * in $body) holds a body past 64 KiB and $app is the app's spec. */
XS_INTERNAL(xs_pool_serve)
{
    dXSARGS;
    if (items != 4)
        croak_xs_usage(cv, "fd, psgi, errors, empty_input");
    const pool_info *pool = the_pool();
    int fd = (int)SvIV(ST(0));
    SV *psgi = ST(1), *errors = ST(2), *input = ST(3);
    if (!pool || !SvROK(psgi) || SvTYPE(SvRV(psgi)) != SVt_PVHV)
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
    const char *app;
    size_t app_len;
    HV *env = perl_pool_env_of_head(aTHX_ p, n, &app, &app_len);
    /* Before the body's frames reuse rbuf, where app points. */
    SV *app_sv = sv_2mortal(env ? newSVpvn(app, app_len) : newSVpvs(""));
    SV **entry = env ? hv_fetch((HV *)SvRV(psgi), app, (I32)app_len, 0) : NULL;
    SV *body = sv_2mortal(newSVpvs(""));
    int spool;
    if (!env || !read_body(aTHX_ fd, body, &spool)) {
        SvREFCNT_dec((SV *)env);
        int ok;
        (void)finish_request(pool, fd, NULL, 0, &ok);
        XSRETURN_EMPTY;
    }
    SV *envref = sv_2mortal(newRV_noinc((SV *)env));
    SV **code = entry && SvROK(*entry) && SvTYPE(SvRV(*entry)) == SVt_PVAV
                    ? av_fetch((AV *)SvRV(*entry), 0, 0)
                    : NULL;
    if (spool < 0 && !SvCUR(body) && code && SvROK(*code) && empty_input_ready(aTHX_ input)) {
        SV *res, *err;
        /* The stack may move while the app runs: ST() is written after. */
        int served = serve_common(aTHX_ pool, fd, *code, envref, errors, input, &res, &err);
        SPAGAIN;
        SP = PL_stack_base + ax - 1;
        if (served) {
            EXTEND(SP, 2);
            ST(0) = sv_2mortal(newSVpvs("D"));
            ST(1) = sv_2mortal(newSViv(served - 1));
            XSRETURN(2);
        }
        EXTEND(SP, 5);
        ST(0) = sv_2mortal(newSVpvs("R"));
        ST(1) = envref;
        ST(2) = res;
        ST(3) = err;
        ST(4) = app_sv;
        XSRETURN(5);
    }
    EXTEND(SP, 5);
    ST(0) = sv_2mortal(newSVpvs("Q"));
    ST(1) = envref;
    ST(2) = body;
    ST(3) = sv_2mortal(newSViv(spool));
    ST(4) = app_sv;
    XSRETURN(5);
}

void perl_pool_serve_boot(pTHX)
{
    const char *file = __FILE__;
    perl_pool_env_boot(aTHX);
    newXS("PAGI::Server::Pagid::XS::pool_ready", xs_pool_ready, file);
    newXS("PAGI::Server::Pagid::XS::pool_accept", xs_pool_accept, file);
    newXS("PAGI::Server::Pagid::XS::pool_drop", xs_pool_drop, file);
    newXS("PAGI::Server::Pagid::XS::pool_write", xs_pool_write, file);
    newXS("PAGI::Server::Pagid::XS::pool_finish", xs_pool_finish, file);
    newXS("PAGI::Server::Pagid::XS::pool_respond", xs_pool_respond, file);
    newXS("PAGI::Server::Pagid::XS::pool_serve", xs_pool_serve, file);
}
