/*
 * perl_watch_xs.c - the loop services behind Future::IO
 * (PAGI::Server::Pagid::XS::timer_start/stop, io_watch/stop): one-shot
 * timers and fd watches on the worker's loop, each holding a Perl callback,
 * kept in a list so the host's teardown can stop what a handler left running.
 */
#include "perl_int.h"

#include <stdlib.h>

/* Live timers and fd watches, so the host's teardown can stop what an
 * abandoned handler left running (each one holds a Perl callback). */
typedef struct perl_watch {
    struct perl_watch *prev, *next;
    int is_io;
    /* Stopped by the host's teardown: no watcher, no callback. Perl may
     * still hold the id (a Future's on_cancel), so the entry stays until
     * Perl stops it or the last sweep after perl_destruct frees it. */
    int dead;
} perl_watch;
static perl_watch *live_watches;

static void watch_link(perl_watch *n)
{
    n->prev = NULL;
    n->next = live_watches;
    if (live_watches)
        live_watches->prev = n;
    live_watches = n;
}

static void watch_unlink(perl_watch *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        live_watches = n->next;
    if (n->next)
        n->next->prev = n->prev;
}

typedef struct perl_timer {
    perl_watch link; /* first: a perl_watch * is a perl_timer * or perl_io * */
    pagi_timer *t;
    SV *cb;
} perl_timer;

static void on_timer(pagi_timer *t, void *ud)
{
    dPERL;
    perl_timer *pt = ud;
    SV *cb = pt->cb;
    pagi_timer_stop(t);
    watch_unlink(&pt->link);
    free(pt);
    perl_call_cb(aTHX_ cb, NULL);
    SvREFCNT_dec(cb);
}

/* timer_start($after, $cb): an id for timer_stop; one-shot */
XS_INTERNAL(xs_timer_start)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "after, cb");
    perl_timer *pt = calloc(1, sizeof *pt);
    if (!pt)
        croak("out of memory");
    if (!perl_host_loop) {
        free(pt);
        perl_no_loop_yet(aTHX);
    }
    NV after = SvNV(ST(0));
    pt->cb = SvREFCNT_inc(ST(1));
    pt->t = pagi_timer_start(perl_host_loop, after > 0 ? after : 0, 0, on_timer, pt);
    if (!pt->t) {
        SvREFCNT_dec(pt->cb);
        free(pt);
        croak("cannot start a timer");
    }
    watch_link(&pt->link);
    ST(0) = sv_2mortal(newSViv(PTR2IV(pt)));
    XSRETURN(1);
}

XS_INTERNAL(xs_timer_stop)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "id");
    perl_timer *pt = INT2PTR(perl_timer *, SvIV(ST(0)));
    if (!pt->link.dead)
        pagi_timer_stop(pt->t);
    watch_unlink(&pt->link);
    SV *cb = pt->cb;
    free(pt);
    SvREFCNT_dec(cb); /* NULL once dead */
    XSRETURN_EMPTY;
}

typedef struct perl_io {
    perl_watch link;
    pagi_io *w;
    SV *cb;
} perl_io;

static void on_io(pagi_io *w, int fd, int events, void *ud)
{
    dPERL;
    perl_io *pi = ud;
    SV *cb = SvREFCNT_inc(pi->cb); /* the callback may stop (free) its own watch */
    perl_call_cb(aTHX_ cb, newSViv(events));
    SvREFCNT_dec(cb);
}

/* io_watch($fd, $events, $cb): an id for io_stop */
XS_INTERNAL(xs_io_watch)
{
    dXSARGS;
    if (items != 3)
        croak_xs_usage(cv, "fd, events, cb");
    perl_io *pi = calloc(1, sizeof *pi);
    if (!pi)
        croak("out of memory");
    if (!perl_host_loop) {
        free(pi);
        perl_no_loop_yet(aTHX);
    }
    pi->cb = SvREFCNT_inc(ST(2));
    pi->w = pagi_io_watch(perl_host_loop, (int)SvIV(ST(0)), (int)SvIV(ST(1)), on_io, pi);
    if (!pi->w) {
        SvREFCNT_dec(pi->cb);
        free(pi);
        croak("cannot watch fd %d", (int)SvIV(ST(0)));
    }
    pi->link.is_io = 1;
    watch_link(&pi->link);
    ST(0) = sv_2mortal(newSViv(PTR2IV(pi)));
    XSRETURN(1);
}

XS_INTERNAL(xs_io_stop)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "id");
    perl_io *pi = INT2PTR(perl_io *, SvIV(ST(0)));
    if (!pi->link.dead)
        pagi_io_stop(pi->w);
    watch_unlink(&pi->link);
    SV *cb = pi->cb;
    free(pi);
    SvREFCNT_dec(cb); /* NULL once dead */
    XSRETURN_EMPTY;
}

/* Stop one live watch and let go of its callback; the entry stays (dead). */
static void watch_kill(pTHX_ perl_watch *n)
{
    SV *cb;
    if (n->is_io) {
        perl_io *pi = (perl_io *)n;
        pagi_io_stop(pi->w);
        cb = pi->cb;
        pi->cb = NULL;
    } else {
        perl_timer *pt = (perl_timer *)n;
        pagi_timer_stop(pt->t);
        cb = pt->cb;
        pt->cb = NULL;
    }
    n->dead = 1;
    SvREFCNT_dec(cb);
}

void perl_watch_stop_all(pTHX)
{
    /* Dropping a callback may run Perl (DESTROY) that stops another watch:
     * start over from the head after each one. */
    for (perl_watch *n = live_watches; n;) {
        if (n->dead) {
            n = n->next;
            continue;
        }
        watch_kill(aTHX_ n);
        n = live_watches;
    }
}

void perl_watch_free_all(void)
{
    /* After perl_destruct: nothing can stop these any more. Watches started
     * during destruction (END blocks, DESTROY) are still live: stop them. */
    while (live_watches) {
        perl_watch *n = live_watches;
        watch_unlink(n);
        if (!n->dead) {
            if (n->is_io)
                pagi_io_stop(((perl_io *)n)->w);
            else
                pagi_timer_stop(((perl_timer *)n)->t);
        }
        free(n); /* the callbacks went with the interpreter */
    }
}

void perl_watch_boot(pTHX)
{
    static const char file[] = __FILE__;
    newXS("PAGI::Server::Pagid::XS::timer_start", xs_timer_start, file);
    newXS("PAGI::Server::Pagid::XS::timer_stop", xs_timer_stop, file);
    newXS("PAGI::Server::Pagid::XS::io_watch", xs_io_watch, file);
    newXS("PAGI::Server::Pagid::XS::io_stop", xs_io_stop, file);
}
