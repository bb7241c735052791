/*
 * perl_pool_xs.c - what the worker pool's Perl side (PAGI/Server/Pagid/Pool.pm)
 * needs of C: the pool's facts (pagi_loop.pool: its socket, sizes, timeout,
 * handlers file), its figures from the shared region, the counters a worker
 * or pool process keeps there, and a pool process's title.
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
    put_iv(aTHX_ hv, "fd", p->fd);
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

void perl_pool_boot(pTHX)
{
    const char *file = __FILE__;
    newXS("PAGI::Server::Pagid::XS::pool_info", xs_pool_info, file);
    newXS("PAGI::Server::Pagid::XS::pool_stats", xs_pool_stats, file);
    newXS("PAGI::Server::Pagid::XS::pool_count", xs_pool_count, file);
}
