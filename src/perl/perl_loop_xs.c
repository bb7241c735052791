/*
 * perl_loop_xs.c - the native half of the foreign event loops a Perl app may
 * bring (IO::Async::Loop::Pagid, AnyEvent::Impl::Pagid): fd, timer, signal
 * and child-process watchers on the worker's own libev loop, as Perl objects
 * (PAGI::Server::Pagid::Watcher), the pagid modules embedded in the binary,
 * and what a process forked from the worker must not inherit.
 */
#include "perl_int.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/proctitle.h"
#include "worker/core/loop.h"

#define WATCHER_CLASS "PAGI::Server::Pagid::Watcher"

enum { LW_IO, LW_TIMER, LW_SIGNAL, LW_CHILD };

/*
 * One watcher. The Perl object owns it (DESTROY frees it); a one-shot timer
 * or a child watch that has fired only stops, so a stale Perl object never
 * points at freed memory. The live list lets the host's teardown stop what
 * an app left running.
 */
typedef struct loop_watcher {
    struct loop_watcher *prev, *next;
    int kind;
    int firing;   /* inside its callback: DESTROY must not free it yet */
    int orphaned; /* the Perl object went away while firing: free after */
    SV *cb;       /* NULL once the teardown stopped it */
    union {
        ev_io io;
        ev_timer timer;
        ev_signal sig;
        ev_child child;
    } w;
} loop_watcher;

static loop_watcher *live;
static pid_t worker_pid; /* the process whose loop these are */
int perl_forked_child;

static struct ev_loop *ev_of_host(void)
{
    return loop_ev(perl_host_loop);
}

static void lw_link(loop_watcher *n)
{
    n->next = live;
    if (live)
        live->prev = n;
    live = n;
}

static void lw_unlink(loop_watcher *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        live = n->next;
    if (n->next)
        n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

/*
 * libev sets a signal to SIG_DFL when its last watcher stops, but the worker
 * ignores some (PIPE, HUP, ...): an app that dropped a watcher would leave
 * the worker to die of the next one. The disposition before our first watcher
 * of a signal comes back after our last one stops, if libev reset it (a
 * watcher of pagid's own may still hold the signal, or be the one saved).
 */
static struct sigaction sig_saved[NSIG];
static void (*sig_libev[NSIG])(int); /* the handler libev installed */
static unsigned sig_watching[NSIG];  /* our active watchers per signal */

static void sig_start(struct ev_loop *ev, ev_signal *w)
{
    int first = sig_watching[w->signum]++ == 0;
    if (first)
        sigaction(w->signum, NULL, &sig_saved[w->signum]);
    ev_signal_start(ev, w);
    if (first) {
        struct sigaction now;
        sigaction(w->signum, NULL, &now);
        sig_libev[w->signum] = now.sa_handler;
    }
}

static void sig_stop(struct ev_loop *ev, ev_signal *w)
{
    if (!ev_is_active(w))
        return;
    int signum = w->signum;
    ev_signal_stop(ev, w);
    if (--sig_watching[signum] != 0)
        return;
    struct sigaction now;
    const struct sigaction *saved = &sig_saved[signum];
    if (sigaction(signum, NULL, &now) == 0 && now.sa_handler == SIG_DFL &&
        !(now.sa_flags & SA_SIGINFO) &&
        ((saved->sa_flags & SA_SIGINFO) || saved->sa_handler != sig_libev[signum]))
        sigaction(signum, saved, NULL);
}

static void lw_stop(loop_watcher *n)
{
    struct ev_loop *ev = ev_of_host();
    switch (n->kind) {
    case LW_IO:
        ev_io_stop(ev, &n->w.io);
        break;
    case LW_TIMER:
        ev_timer_stop(ev, &n->w.timer);
        break;
    case LW_SIGNAL:
        sig_stop(ev, &n->w.sig);
        break;
    case LW_CHILD:
        ev_child_stop(ev, &n->w.child);
        break;
    default:
        break;
    }
}

/* Run the Perl callback; a die is logged (the loop has no caller to give it to). */
static void lw_fire(loop_watcher *n, SV *a1, SV *a2)
{
    dPERL;
    if (!n->cb)
        return;
    SV *cb = SvREFCNT_inc(n->cb); /* the callback may drop its own watcher */
    n->firing = 1;
    dSP;
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    if (a1)
        XPUSHs(sv_2mortal(a1));
    if (a2)
        XPUSHs(sv_2mortal(a2));
    PUTBACK;
    call_sv(cb, G_DISCARD | G_EVAL);
    perl_child_guard();
    if (SvTRUE(ERRSV))
        pagi_log(perl_host_loop, 0, "perl: event loop callback died: %s", SvPV_nolen(ERRSV));
    FREETMPS;
    LEAVE;
    SvREFCNT_dec(cb);
    n->firing = 0;
    if (n->orphaned)
        free(n);
}

static void on_io(struct ev_loop *ev, ev_io *w, int revents)
{
    lw_fire(w->data, NULL, NULL);
}

static void on_timer(struct ev_loop *ev, ev_timer *w, int revents)
{
    lw_fire(w->data, NULL, NULL); /* a one-shot libev timer is stopped already */
}

static void on_signal(struct ev_loop *ev, ev_signal *w, int revents)
{
    lw_fire(w->data, NULL, NULL);
}

static void on_child(struct ev_loop *ev, ev_child *w, int revents)
{
    dPERL;
    loop_watcher *n = w->data;
    /* A PID's watch ends with that process (the PID may be reused); pid 0 watches them all. */
    if (w->pid != 0)
        ev_child_stop(ev, w);
    lw_fire(n, newSViv(w->rpid), newSViv(w->rstatus));
}

static loop_watcher *lw_new(pTHX_ int kind, SV *cb)
{
    if (getpid() != worker_pid)
        croak("pagid's event loop is not in this process (a child forked from the worker)");
    if (!perl_host_loop)
        perl_no_loop_yet(aTHX);
    if (!SvROK(cb) || SvTYPE(SvRV(cb)) != SVt_PVCV)
        croak("expected a CODE reference");
    loop_watcher *n = calloc(1, sizeof *n);
    if (!n)
        croak("out of memory");
    n->kind = kind;
    n->cb = newSVsv(cb);
    return n;
}

static SV *lw_object(pTHX_ loop_watcher *n)
{
    lw_link(n);
    SV *obj = newSViv(PTR2IV(n));
    return sv_2mortal(sv_bless(newRV_noinc(obj), gv_stashpv(WATCHER_CLASS, GV_ADD)));
}

static loop_watcher *lw_get(pTHX_ SV *sv)
{
    if (!SvROK(sv) || !sv_derived_from(sv, WATCHER_CLASS))
        croak("not a pagid watcher");
    return INT2PTR(loop_watcher *, SvIV(SvRV(sv)));
}

/* io($fd, $events, $cb): events 1 read, 2 write */
XS_INTERNAL(xs_io)
{
    dXSARGS;
    if (items != 3)
        croak_xs_usage(cv, "fd, events, cb");
    int fd = (int)SvIV(ST(0)), events = (int)SvIV(ST(1));
    if (fd < 0 || !(events & 3))
        croak("io: bad fd %d or events %d", fd, events);
    loop_watcher *n = lw_new(aTHX_ LW_IO, ST(2));
    ev_io_init(&n->w.io, on_io, fd, ((events & 1) ? EV_READ : 0) | ((events & 2) ? EV_WRITE : 0));
    n->w.io.data = n;
    ev_io_start(ev_of_host(), &n->w.io);
    ST(0) = lw_object(aTHX_ n);
    XSRETURN(1);
}

/* timer($after, $repeat, $cb): seconds; repeat 0 is one-shot */
XS_INTERNAL(xs_timer)
{
    dXSARGS;
    if (items != 3)
        croak_xs_usage(cv, "after, repeat, cb");
    NV after = SvNV(ST(0)), repeat = SvOK(ST(1)) ? SvNV(ST(1)) : 0;
    loop_watcher *n = lw_new(aTHX_ LW_TIMER, ST(2));
    struct ev_loop *ev = ev_of_host();
    /* ev_now is the start of this loop turn: a long Perl callback before us
     * would make the timer early. */
    ev_now_update(ev);
    ev_timer_init(&n->w.timer, on_timer, after > 0 ? after : 0, repeat > 0 ? repeat : 0);
    n->w.timer.data = n;
    ev_timer_start(ev, &n->w.timer);
    ST(0) = lw_object(aTHX_ n);
    XSRETURN(1);
}

/* signal($signum, $cb) */
XS_INTERNAL(xs_signal)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "signum, cb");
    IV sig = SvIV(ST(0));
    if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
        croak("cannot watch signal %d", (int)sig);
    loop_watcher *n = lw_new(aTHX_ LW_SIGNAL, ST(1));
    ev_signal_init(&n->w.sig, on_signal, (int)sig);
    n->w.sig.data = n;
    sig_start(ev_of_host(), &n->w.sig);
    ST(0) = lw_object(aTHX_ n);
    XSRETURN(1);
}

/* child($pid, $cb): $cb->($pid, $status) when it ends; pid 0 for every child */
XS_INTERNAL(xs_child)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "pid, cb");
    IV pid = SvIV(ST(0));
    if (pid < 0)
        croak("cannot watch pid %ld", (long)pid);
    struct ev_loop *ev = perl_host_loop ? ev_of_host() : NULL;
    /* libev reaps children only on its default loop (the worker's). */
    if (ev && !ev_is_default_loop(ev))
        croak("child watchers need pagid's loop to be libev's default loop");
    loop_watcher *n = lw_new(aTHX_ LW_CHILD, ST(1));
    ev_child_init(&n->w.child, on_child, (int)pid, 0);
    n->w.child.data = n;
    ev_child_start(ev, &n->w.child);
    ST(0) = lw_object(aTHX_ n);
    XSRETURN(1);
}

/* $watcher->stop: no more callbacks (the object stays valid) */
XS_INTERNAL(xs_watcher_stop)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "watcher");
    loop_watcher *n = lw_get(aTHX_ ST(0));
    if (n->cb && getpid() == worker_pid)
        lw_stop(n);
    XSRETURN_EMPTY;
}

/* $watcher->is_active: still watching (a one-shot timer that fired is not) */
XS_INTERNAL(xs_watcher_active)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "watcher");
    loop_watcher *n = lw_get(aTHX_ ST(0));
    ST(0) = boolSV(n->cb && ev_is_active(&n->w.io)); /* ev_is_active reads the common head */
    XSRETURN(1);
}

XS_INTERNAL(xs_watcher_destroy)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "watcher");
    loop_watcher *n = INT2PTR(loop_watcher *, SvIV(SvRV(ST(0))));
    /* In a forked child the loop is a dead copy: leave it alone. */
    if (n->cb && getpid() == worker_pid)
        lw_stop(n);
    lw_unlink(n);
    SV *cb = n->cb;
    n->cb = NULL;
    if (n->firing)
        n->orphaned = 1; /* lw_fire frees it when the callback returns */
    else
        free(n);
    if (cb)
        SvREFCNT_dec(cb);
    XSRETURN_EMPTY;
}

/* ---- embedded modules ------------------------------------------------- */

/* module_source($file): the text of a module pagid carries for `require`, or undef */
XS_INTERNAL(xs_module_source)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "file");
    const char *file = SvPV_nolen(ST(0));
    ST(0) = &PL_sv_undef;
    for (const perl_module *m = perl_modules; m->name; m++)
        if (strcmp(m->name, file) == 0) {
            ST(0) = sv_2mortal(newSVpv(m->source, 0));
            break;
        }
    XSRETURN(1);
}

/* worker_pid(): the process pagid's loop runs in */
XS_INTERNAL(xs_worker_pid)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    ST(0) = sv_2mortal(newSViv(worker_pid));
    XSRETURN(1);
}

/* ---- fork ------------------------------------------------------------- */

/*
 * A process forked from the worker (IO::Async's Function and Process
 * children, the app's own fork) inherits libev's C signal handlers, which
 * would swallow SIGTERM and friends into a loop that no longer runs there
 * (writing to a descriptor the child may have closed and reused). Give the
 * child the default disposition for every signal handled in C, except
 * those Perl's %SIG owns and the crash signals (a sanitizer's).
 */
static void child_after_fork(void)
{
    PerlInterpreter *my_perl = perl_host_interp;
    if (!my_perl || getpid() == worker_pid)
        return;
    perl_forked_child = 1;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
            sig == SIGTRAP || sig == SIGKILL || sig == SIGSTOP)
            continue;
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) < 0)
            continue;
        void (*h)(int) = sa.sa_handler;
        if (!(sa.sa_flags & SA_SIGINFO) && (h == SIG_DFL || h == SIG_IGN))
            continue;
        if (PL_psig_ptr && PL_psig_ptr[sig])
            continue; /* a %SIG handler: Perl's (IO::Async resets those it must) */
        signal(sig, SIG_DFL);
    }
    /* Not a worker: ps, and whoever counts workers by their title, tell them apart. */
    proctitle_set("pagid: app process (forked by worker pid %d)", (int)worker_pid);
}

void perl_child_exit(void)
{
    dPERL;
    const char *e = SvTRUE(ERRSV) ? SvPV_nolen(ERRSV) : "returned\n";
    fprintf(stderr,
            "pagid: a process forked by the app (pid %d) came back into the worker's code, "
            "ending it: %s",
            (int)getpid(), e);
    fflush(stderr);
    _exit(255);
}

void perl_loop_adopt_process(void)
{
    /* A worker forked by the zygote (preload): the interpreter was booted
     * there, and the atfork hook took the fork for an app's. This process
     * is the one whose loop the watchers belong to. */
    worker_pid = getpid();
    perl_forked_child = 0;
}

void perl_loop_boot(pTHX)
{
    static const char file[] = __FILE__;
    static int atfork_done;
    worker_pid = getpid();
    if (!atfork_done && pthread_atfork(NULL, NULL, child_after_fork) == 0)
        atfork_done = 1;
    newXS("PAGI::Server::Pagid::Loop::io", xs_io, file);
    newXS("PAGI::Server::Pagid::Loop::timer", xs_timer, file);
    newXS("PAGI::Server::Pagid::Loop::signal", xs_signal, file);
    newXS("PAGI::Server::Pagid::Loop::child", xs_child, file);
    newXS("PAGI::Server::Pagid::Loop::module_source", xs_module_source, file);
    newXS("PAGI::Server::Pagid::Loop::worker_pid", xs_worker_pid, file);
    newXS(WATCHER_CLASS "::stop", xs_watcher_stop, file);
    newXS(WATCHER_CLASS "::is_active", xs_watcher_active, file);
    newXS(WATCHER_CLASS "::DESTROY", xs_watcher_destroy, file);
}

void perl_loop_stop_watchers(pTHX)
{
    /* Dropping a callback may run Perl (DESTROY) that frees another
     * watcher: start over from the head after each one. */
    for (loop_watcher *n = live; n;) {
        if (!n->cb) {
            n = n->next;
            continue;
        }
        lw_stop(n);
        SV *cb = n->cb;
        n->cb = NULL;
        SvREFCNT_dec(cb);
        n = live;
    }
}

void perl_loop_free_watchers(void)
{
    /* After perl_destruct: the objects left (leaked by the app) go here;
     * watchers started during destruction are still running: stop them. */
    while (live) {
        loop_watcher *n = live;
        lw_unlink(n);
        if (n->cb)
            lw_stop(n);
        free(n); /* the callbacks went with the interpreter */
    }
}
