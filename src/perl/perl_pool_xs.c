/*
 * perl_pool_xs.c - what the worker pool's Perl side (PAGI/Server/Pagid/Pool.pm)
 * needs of C: the pool's facts (pagi_loop.pool: its sockets, sizes, timeout,
 * handlers file), its figures from the shared region, the counters a worker
 * or pool process keeps there, a pool process's title, and a worker_pool
 * call sent through the worker's links (perl_pool_link.c).
 */
#include "perl_int.h"

#include "common/pool.h"
#include "common/proctitle.h"
#include "worker/core/loop.h"

static const pool_info *the_pool(void)
{
    return perl_host_loop ? perl_host_loop->pool : NULL;
}

static void put_iv(pTHX_ HV *hv, const char *key, IV v)
{
    (void)hv_store(hv, key, (I32)strlen(key), newSViv(v), 0);
}

/* pool_info(): undef without a pool, else {process, num, fd, processes,
 * queue_limit, timeout, handlers} */
XS_INTERNAL(xs_pool_info)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    const pool_info *p = the_pool();
    if (!p)
        XSRETURN_UNDEF;
    HV *hv = newHV();
    put_iv(aTHX_ hv, "process", p->process);
    put_iv(aTHX_ hv, "num", p->num);
    if (p->process) /* its own listener: its workers' links come there */
        put_iv(aTHX_ hv, "fd", p->fds[p->num - 1]);
    put_iv(aTHX_ hv, "processes", p->processes);
    put_iv(aTHX_ hv, "queue_limit", p->queue_limit);
    put_iv(aTHX_ hv, "max_requests", p->max_requests);
    (void)hv_stores(hv, "timeout", newSVnv(p->timeout));
    if (p->handlers)
        (void)hv_stores(hv, "handlers", newSVpv(p->handlers, 0));
    ST(0) = sv_2mortal(newRV_noinc((SV *)hv));
    XSRETURN(1);
}

/* pool_stats(): {workers, busy, idle, queue_depth, queue_limit, rejected, timeouts, served} */
XS_INTERNAL(xs_pool_stats)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    const pool_info *p = the_pool();
    if (!p)
        XSRETURN_UNDEF;
    pool_figures f;
    pool_figures_read(p->shm, p->generation, &f);
    if (!p->shm) { /* nothing shared to read: what is configured */
        f.workers = f.idle = p->processes;
    }
    HV *hv = newHV();
    put_iv(aTHX_ hv, "workers", f.workers);
    put_iv(aTHX_ hv, "busy", f.busy);
    put_iv(aTHX_ hv, "idle", f.idle);
    put_iv(aTHX_ hv, "queue_depth", (IV)f.queue_depth);
    put_iv(aTHX_ hv, "queue_limit", p->queue_limit);
    put_iv(aTHX_ hv, "rejected", (IV)f.rejected);
    put_iv(aTHX_ hv, "timeouts", (IV)f.timeouts);
    put_iv(aTHX_ hv, "served", (IV)f.served);
    ST(0) = sv_2mortal(newRV_noinc((SV *)hv));
    XSRETURN(1);
}

/* pool_count($what, $n): this process's counters in its slot. 'waiting'
 * adds n (a worker's queued requests), 'rejected', 'timeouts' and 'served'
 * add n, 'busy' sets it (a pool process; its title follows). */
XS_INTERNAL(xs_pool_count)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "what, n");
    const pool_info *p = the_pool();
    const char *what = SvPV_nolen(ST(0));
    IV n = SvIV(ST(1));
    shm_worker *s = p ? p->self : NULL;
    if (p && p->process && !strcmp(what, "busy"))
        proctitle_pool(p->num, p->generation, n ? "busy" : "idle");
    if (!s)
        XSRETURN_EMPTY;
    if (!strcmp(what, "waiting"))
        atomic_fetch_add_explicit(&s->pool_waiting, (int64_t)n, memory_order_relaxed);
    else if (!strcmp(what, "rejected"))
        shm_add(&s->pool_rejected, (uint64_t)n);
    else if (!strcmp(what, "timeouts"))
        shm_add(&s->pool_timeouts, (uint64_t)n);
    else if (!strcmp(what, "served"))
        shm_add(&s->pool_served, (uint64_t)n);
    else if (!strcmp(what, "busy")) {
        atomic_store_explicit(&s->pool_busy, n != 0, memory_order_relaxed);
        /* A request starts now: the master's deadline counts from here. */
        atomic_store_explicit(&s->heartbeat_ms, shm_now_ms(), memory_order_relaxed);
    } else
        croak("pool_count: unknown counter '%s'", what);
    XSRETURN_EMPTY;
}

/* ---- a worker_pool call, from a worker ------------------------------- */

typedef struct pool_call {
    pool_job job; /* first: the link hands back &job */
    SV *cb;       /* $cb->([$type, $payload]) once: R, F, D (died), T (timeout) */
    pagi_timer *timer;
    int submitted;
} pool_call;

/* The call ends: its callback told, everything freed. */
static void call_end(pool_call *c, char type, const char *p, size_t n)
{
    dPERL;
    if (c->timer)
        pagi_timer_stop(c->timer);
    c->timer = NULL;
    if (c->submitted)
        pool_job_cancel(&c->job);
    buf_free(&c->job.out);
    SV *cb = c->cb;
    free(c);
    AV *av = newAV();
    av_push(av, newSVpvn(&type, 1));
    av_push(av, newSVpvn(p, n));
    perl_call_cb(aTHX_ cb, newRV_noinc((SV *)av));
    SvREFCNT_dec(cb);
}

static int call_on_frame(pool_job *j, char type, const char *p, size_t n)
{
    pool_call *c = (pool_call *)j;
    if (type != 'R' && type != 'F')
        return -1;
    c->submitted = 0; /* an end frame: it left its link */
    call_end(c, type, p, n);
    return 0;
}

static void call_on_lost(pool_job *j)
{
    pool_call *c = (pool_call *)j;
    c->submitted = 0;
    call_end(c, 'D', "", 0);
}

static void call_on_timeout(pagi_timer *t, void *ud)
{
    (void)t;
    pool_call *c = ud;
    c->timer = NULL;
    if (perl_host_loop && perl_host_loop->pool && perl_host_loop->pool->self)
        shm_add(&perl_host_loop->pool->self->pool_timeouts, 1);
    call_end(c, 'T', "", 0);
}

static void call_on_started(pool_job *j)
{
    (void)j;
}

static int call_refill(pool_job *j)
{
    j->out_done = 1;
    return 0;
}

static const pool_job_ops call_ops = {.on_frame = call_on_frame,
                                      .on_lost = call_on_lost,
                                      .on_started = call_on_started,
                                      .refill = call_refill};

/* pool_call($payload, $timeout, $cb): sends a C frame of $payload (a
 * Storable {name, args}) to a free pool process, or queues it; false when
 * the queue is full (nothing will be called). $timeout (seconds, 0: none)
 * counts from now. */
XS_INTERNAL(xs_pool_call)
{
    dXSARGS;
    if (items != 3)
        croak_xs_usage(cv, "payload, timeout, cb");
    if (!perl_host_loop || !perl_host_loop->pool || perl_host_loop->pool->process)
        XSRETURN_NO;
    STRLEN n;
    const char *p = SvPVbyte(ST(0), n);
    NV timeout = SvNV(ST(1));
    pool_call *c = calloc(1, sizeof *c);
    if (!c)
        croak("worker pool: out of memory");
    c->job.ops = &call_ops;
    unsigned char head[5] = {'C', (unsigned char)(n >> 24), (unsigned char)(n >> 16),
                             (unsigned char)(n >> 8), (unsigned char)n};
    if (buf_append(&c->job.out, head, 5) || buf_append(&c->job.out, p, n)) {
        buf_free(&c->job.out);
        free(c);
        croak("worker pool: out of memory");
    }
    c->job.out_done = 1;
    c->submitted = 1;
    if (pool_job_submit(perl_host_loop, &c->job) < 0) {
        buf_free(&c->job.out);
        free(c);
        XSRETURN_NO;
    }
    c->cb = newSVsv(ST(2)); /* nothing is called back before the loop turns */
    if (timeout > 0)
        c->timer = pagi_timer_start(perl_host_loop, timeout, 0, call_on_timeout, c);
    XSRETURN_YES;
}

void perl_pool_boot(pTHX)
{
    const char *file = __FILE__;
    newXS("PAGI::Server::Pagid::XS::pool_info", xs_pool_info, file);
    newXS("PAGI::Server::Pagid::XS::pool_stats", xs_pool_stats, file);
    newXS("PAGI::Server::Pagid::XS::pool_count", xs_pool_count, file);
    newXS("PAGI::Server::Pagid::XS::pool_call", xs_pool_call, file);
}
