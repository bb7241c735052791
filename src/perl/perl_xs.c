/*
 * perl_xs.c - the XS functions the Perl glue calls (PAGI::Server::Pagid::XS)
 * on a scope handle: receive/send/finish, pagi.connection and
 * pagi.transport, write_now; and the worker's log and harakiri. The loop
 * services behind Future::IO are in perl_watch_xs.c.
 */
#include "perl_int.h"

#include <stdlib.h>
#include <string.h>

#include "worker/scope/scope.h"
#include "worker/core/loop.h"

#define HANDLE_CLASS "PAGI::Server::Pagid::Handle"

/* ---- holds: SVs the server side may still call back into ------------ */

perl_hold *perl_hold_add(perl_handle *h, SV *sv)
{
    perl_hold *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    dPERL;
    n->h = h;
    n->sv = SvREFCNT_inc(sv);
    n->next = h->holds;
    if (h->holds)
        h->holds->prev = n;
    h->holds = n;
    return n;
}

void perl_hold_drop(perl_hold *n)
{
    dPERL;
    if (n->prev)
        n->prev->next = n->next;
    else
        n->h->holds = n->next;
    if (n->next)
        n->next->prev = n->prev;
    SV *sv = n->sv;
    free(n);
    if (sv)
        SvREFCNT_dec(sv);
}

static void handle_release(pagi_scope *s, void *data)
{
    perl_handle *h = data;
    h->s = NULL;
    h->releasing = 1; /* dropping a hold may DESTROY the Perl handle: not yet free h */
    while (h->holds)
        perl_hold_drop(h->holds);
    h->releasing = 0;
    free(h->finish_err);
    h->finish_err = NULL;
    if (!h->perl_alive)
        free(h);
}

/* The handle object is gone: free h once the scope is released too. Free
 * magic on the object rather than a DESTROY method: no Perl call per scope. */
static int handle_free(pTHX_ SV *sv, MAGIC *mg)
{
    perl_handle *h = (perl_handle *)mg->mg_ptr;
    h->perl_alive = 0;
    if (!h->s && !h->releasing)
        free(h);
    return 0;
}

static MGVTBL handle_vtbl = {.svt_free = handle_free};
static HV *handle_stash;

SV *perl_handle_new(pTHX_ pagi_scope *s, perl_handle **out)
{
    perl_handle *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->s = s;
    h->perl_alive = 1;
    pagi_scope_set_userdata(s, h, handle_release);
    *out = h;
    SV *obj = newSViv(PTR2IV(h));
    sv_magicext(obj, NULL, PERL_MAGIC_ext, &handle_vtbl, (const char *)h, 0);
    return sv_bless(newRV_noinc(obj), handle_stash);
}

static perl_handle *get_handle(pTHX_ SV *sv)
{
    if (!SvROK(sv) || !sv_derived_from(sv, HANDLE_CLASS))
        croak("not a pagid scope handle");
    return INT2PTR(perl_handle *, SvIV(SvRV(sv)));
}

/* Call $obj->$method(@args) (G_EVAL: a die in a callback is logged, not fatal). */
static void call_method_sv(pTHX_ SV *obj, const char *method, SV *arg)
{
    dSP;
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    XPUSHs(obj);
    if (arg)
        XPUSHs(sv_2mortal(arg));
    PUTBACK;
    call_method(method, G_DISCARD | G_EVAL);
    perl_child_guard();
    if (SvTRUE(ERRSV))
        pagi_log(perl_host_loop, 0, "perl: %s", SvPV_nolen(ERRSV));
    FREETMPS;
    LEAVE;
}

void perl_call_cb(pTHX_ SV *cb, SV *arg)
{
    dSP;
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    if (arg)
        XPUSHs(sv_2mortal(arg));
    PUTBACK;
    call_sv(cb, G_DISCARD | G_EVAL);
    perl_child_guard();
    if (SvTRUE(ERRSV))
        pagi_log(perl_host_loop, 0, "perl: callback died: %s", SvPV_nolen(ERRSV));
    FREETMPS;
    LEAVE;
}

/* ---- receive / send / finish ----------------------------------------- */

static void on_receive(pagi_scope *s, const pagi_event *ev, void *ud)
{
    dPERL;
    perl_hold *n = ud;
    SV *f = SvREFCNT_inc(n->sv);
    perl_hold_drop(n);
    call_method_sv(aTHX_ f, "done", perl_event_to_hv(aTHX_ ev));
    SvREFCNT_dec(f);
}

/* The last send callback of an app that has ended: finish for it now. */
static void finish_owed(perl_handle *h)
{
    if (--h->sends_pending > 0 || !h->finish_owed || !h->s)
        return;
    char *err = h->finish_err;
    h->finish_owed = 0;
    h->finish_err = NULL;
    pagi_scope_finish(h->s, err);
    free(err);
}

static void on_sent(pagi_scope *s, const char *err, void *ud)
{
    dPERL;
    perl_hold *n = ud;
    perl_handle *h = n->h;
    if (!n->sv) { /* the future was completed when the send was accepted */
        perl_hold_drop(n);
        finish_owed(h);
        return;
    }
    SV *f = SvREFCNT_inc(n->sv);
    perl_hold_drop(n);
    if (err)
        call_method_sv(aTHX_ f, "fail", newSVpv(err, 0));
    else
        call_method_sv(aTHX_ f, "done", NULL);
    SvREFCNT_dec(f);
    finish_owed(h);
}

static const char *usable(perl_handle *h)
{
    if (!h->s || h->finished)
        return "the scope has finished";
    return NULL;
}

/* Future->$method(@arg): a new Future owned by the caller, or NULL. */
static SV *future_call(pTHX_ const char *method, SV *arg)
{
    dSP;
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    XPUSHs(sv_2mortal(newSVpvs("Future")));
    if (arg)
        XPUSHs(sv_2mortal(arg));
    PUTBACK;
    int n = call_method(method, G_SCALAR);
    SPAGAIN;
    SV *f = n > 0 ? newSVsv(POPs) : NULL;
    PUTBACK;
    FREETMPS;
    LEAVE;
    return f;
}

/* A failed Future; "\n" so that awaiting it dies with the message, not Future.pm's line. */
static SV *failed_future(pTHX_ const char *err)
{
    return future_call(aTHX_ "fail", newSVpvf("%s\n", err));
}

/* Every send that completes at once returns this one done Future: making a
 * Future per send was a tenth of a hello request's time. A done Future keeps
 * no callbacks (on_ready, then and the rest run at once on it). Its class
 * (DONE_CLASS, a Future) answers await's questions in XS, which spares
 * `await $send->(...)` four Perl calls. */
static SV *done_future;
#define DONE_CLASS "PAGI::Server::Pagid::Done"

/* "Future" when it is Future::PP's hash-based class (checked once), else NULL. */
static HV *pp_future_stash;

void perl_xs_ready(pTHX)
{
    perl_events_init(aTHX);
    done_future = future_call(aTHX_ "done", NULL);
    if (done_future && SvROK(done_future))
        sv_bless(done_future, gv_stashpvs(DONE_CLASS, GV_ADD));
    SV *pp = eval_pv("Future->can('is_done') == \\&Future::PP::is_done"
                     " && Future->can('is_ready') == \\&Future::PP::is_ready",
                     FALSE);
    pp_future_stash = pp && SvTRUE(pp) ? gv_stashpvs("Future", 0) : NULL;
}

/* AWAIT_IS_READY, is_ready, is_done: always */
XS_INTERNAL(xs_done_yes)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    XSRETURN_YES;
}

/* AWAIT_GET, AWAIT_RESULT, result, get: done with no values */
XS_INTERNAL(xs_done_result)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    if (GIMME_V == G_LIST)
        XSRETURN_EMPTY;
    XSRETURN_UNDEF;
}

void perl_xs_unready(pTHX)
{
    SvREFCNT_dec(done_future);
    done_future = NULL;
    pp_future_stash = NULL;
    perl_events_fini(aTHX);
}

perl_handle *perl_xs_handle(pTHX_ SV *sv)
{
    return get_handle(aTHX_ sv);
}

SV *perl_xs_failed_future(pTHX_ const char *err)
{
    return failed_future(aTHX_ err);
}

SV *perl_xs_done_future(pTHX)
{
    return done_future ? SvREFCNT_inc(done_future) : future_call(aTHX_ "done", NULL);
}

/* $receive->(): a Future, pending until the next event, or failed */
XS_INTERNAL(xs_receive)
{
    dXSARGS;
    PERL_UNUSED_VAR(items);
    perl_child_guard(); /* a forked child must not act on the worker's connections */
    perl_handle *h = CvXSUBANY(cv).any_ptr;
    const char *err = usable(h);
    SV *f = NULL;
    if (!err && !(f = future_call(aTHX_ "new", NULL)))
        err = "cannot create a Future";
    if (!err) {
        perl_hold *n = perl_hold_add(h, f);
        if (!n)
            err = "out of memory";
        else if (pagi_receive(h->s, on_receive, n) < 0) {
            perl_hold_drop(n);
            err = pagi_scope_error(h->s);
        }
    }
    if (err) {
        SvREFCNT_dec(f);
        f = failed_future(aTHX_ err);
    }
    ST(0) = f ? sv_2mortal(f) : &PL_sv_undef;
    XSRETURN(1);
}

/* Say where a send was refused, for apps written for laxer servers: once
 * per message and scope, at most 8 messages a scope. */
static void log_refused(pTHX_ perl_handle *h, const char *msg)
{
    uint32_t hash = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        hash = (hash ^ *p) * 16777619u;
    for (int i = 0; i < h->nrefused; i++)
        if (h->refused[i] == hash)
            return;
    if (h->nrefused >= 8)
        return;
    h->refused[h->nrefused++] = hash;
    if (strstr(msg, "after the scope finished"))
        return;
    /* $send is an XSUB: the statement running is the app's own call. */
    const COP *cop = PL_curcop;
    pagi_log(perl_host_loop, 1, "perl: send refused at %s line %u: %s", CopFILE(cop),
             (unsigned)CopLINE(cop), msg);
}

/*
 * $send->($event): a Future. The shared done one when the send has already
 * completed (accepted below the high-water mark: pagi_send's callback will
 * report success at once, so the app is spared a suspension); a pending one
 * done when the buffer drains; else a failed one with the validation message.
 */
XS_INTERNAL(xs_send)
{
    dXSARGS;
    perl_handle *h = CvXSUBANY(cv).any_ptr;
    SV *event = items > 0 ? ST(0) : NULL;
    perl_child_guard(); /* a forked child must not act on the worker's connections */
    char buf[256];
    const char *err = usable(h);
    pagi_event ev;
    pagi_header *hdrs = NULL, *extra = NULL;
    if (!err)
        err = perl_event_from_sv(aTHX_ event, &ev, &hdrs, &extra, buf, sizeof buf);
    SV *ret = NULL;
    if (!err && !pagi_conn_is_connected(h->s)) {
        /* The spec's no-op after a disconnect: it completes at once and nothing
         * is called back, so nothing is held or queued. An app that streams on
         * regardless sends in a tight loop; a hold and a queued job per send
         * made that cost memory (the run queue's ring never shrank). */
        SV *f;
        if (pagi_send(h->s, &ev, NULL, NULL) < 0) {
            snprintf(buf, sizeof buf, "%s", pagi_scope_error(h->s));
            err = buf;
        } else if (done_future) {
            ret = done_future;
        } else if ((f = future_call(aTHX_ "done", NULL))) {
            ret = sv_2mortal(f);
        } else {
            err = "cannot create a Future";
        }
    } else if (!err) {
        perl_hold *n = perl_hold_add(h, &PL_sv_undef);
        if (!n) {
            err = "out of memory";
        } else {
            SvREFCNT_dec(n->sv);
            n->sv = NULL;
            int rc = pagi_send(h->s, &ev, on_sent, n);
            if (rc == 0)
                h->sends_pending++;
            if (rc < 0) {
                perl_hold_drop(n);
                snprintf(buf, sizeof buf, "%s", pagi_scope_error(h->s));
                err = buf;
            } else if (!ev.file && !ev.use_fd && done_future &&
                       pagi_transport_buffered_amount(h->s) <
                           pagi_transport_high_water_mark(h->s)) {
                ret = done_future; /* nothing can fail it any more and it completes at once */
            } else if (!(n->sv = future_call(aTHX_ "new", NULL))) {
                err = "cannot create a Future";
            } else {
                ret = sv_2mortal(SvREFCNT_inc(n->sv));
            }
        }
    }
    free(hdrs);
    free(extra);
    if (!ret) {
        log_refused(aTHX_ h, err);
        SV *f = failed_future(aTHX_ err);
        ret = f ? sv_2mortal(f) : &PL_sv_undef;
    }
    ST(0) = ret;
    XSRETURN(1);
}

/* Marks the magic by which a scope's $send or $receive holds its handle object. */
static MGVTBL bound_vtbl;

/* An anonymous XSUB bound to one scope: h in its XSUBANY, the handle object
 * held by its magic, so h outlives the sub even if the app keeps it. Cheaper
 * than a Perl closure to make, and to call (no Perl frame around the XS). */
static SV *bound_sub(pTHX_ XSUBADDR_t fn, SV *hsv, perl_handle *h)
{
    CV *cv = newXS_flags(NULL, fn, __FILE__, NULL, 0);
    CvXSUBANY(cv).any_ptr = h;
    sv_magicext((SV *)cv, hsv, PERL_MAGIC_ext, &bound_vtbl, NULL, 0);
    return newRV_noinc((SV *)cv);
}

void perl_scope_subs(pTHX_ SV *hsv, perl_handle *h, SV **receive, SV **send)
{
    *receive = bound_sub(aTHX_ xs_receive, hsv, h);
    *send = bound_sub(aTHX_ xs_send, hsv, h);
}

void perl_handle_finish(perl_handle *h, const char *err)
{
    if (h->s && !h->finished) {
        h->finished = 1;
        if (h->sends_pending > 0) { /* after the last send callback (finish_owed) */
            h->finish_owed = 1;
            h->finish_err = err ? strdup(err) : NULL;
            if (!err || h->finish_err)
                return;
            h->finish_owed = 0; /* out of memory: finish now rather than lose the error */
        }
        pagi_scope_finish(h->s, err);
    }
}

/* finish($h, $error_or_undef) */
XS_INTERNAL(xs_finish)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "h, error");
    perl_child_guard(); /* a forked child must not act on the worker's connections */
    perl_handle *h = get_handle(aTHX_ ST(0));
    perl_handle_finish(h, SvOK(ST(1)) ? SvPV_nolen(ST(1)) : NULL);
    XSRETURN_EMPTY;
}

int perl_future_done(pTHX_ SV *f)
{
    if (!SvROK(f) || !SvOBJECT(SvRV(f)))
        return 0;
    HV *stash = SvSTASH(SvRV(f));
    if (done_future && stash == SvSTASH(SvRV(done_future)))
        return 1;
    if (!pp_future_stash || stash != pp_future_stash || SvTYPE(SvRV(f)) != SVt_PVHV)
        return 0;
    /* Future::PP's is_done: $self->{ready} && !$self->{failure} && !$self->{cancelled} */
    HV *hv = (HV *)SvRV(f);
    SV **v = hv_fetchs(hv, "ready", 0);
    if (!v || !SvTRUE(*v))
        return 0;
    v = hv_fetchs(hv, "failure", 0);
    if (v && SvTRUE(*v))
        return 0;
    v = hv_fetchs(hv, "cancelled", 0);
    return !(v && SvTRUE(*v));
}

/* ---- pagi.connection / pagi.transport --------------------------------- */

enum { Q_CONNECTED, Q_REASON, Q_STARTED, Q_COMPLETE, Q_BUFFERED, Q_HIGH, Q_LOW, Q_DRAINING };

/* query($h, $what) */
XS_INTERNAL(xs_query)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "h, what");
    perl_handle *h = get_handle(aTHX_ ST(0));
    IV what = SvIV(ST(1));
    SV *r = &PL_sv_undef;
    if (!h->s) {
        if (what == Q_CONNECTED || what == Q_BUFFERED)
            r = sv_2mortal(newSViv(0));
    } else {
        switch (what) {
        case Q_CONNECTED:
            r = sv_2mortal(newSViv(pagi_conn_is_connected(h->s)));
            break;
        case Q_REASON: {
            const char *reason = pagi_conn_disconnect_reason(h->s);
            if (reason)
                r = sv_2mortal(newSVpv(reason, 0));
            break;
        }
        case Q_STARTED:
            r = sv_2mortal(newSViv(pagi_conn_response_started(h->s)));
            break;
        case Q_COMPLETE:
            r = sv_2mortal(newSViv(pagi_conn_response_complete(h->s)));
            break;
        case Q_BUFFERED:
            r = sv_2mortal(newSVuv(pagi_transport_buffered_amount(h->s)));
            break;
        case Q_HIGH:
            r = sv_2mortal(newSVuv(pagi_transport_high_water_mark(h->s)));
            break;
        case Q_LOW:
            r = sv_2mortal(newSVuv(pagi_transport_low_water_mark(h->s)));
            break;
        case Q_DRAINING:
            r = sv_2mortal(newSViv(pagi_server_draining(h->s)));
            break;
        default:
            break;
        }
    }
    ST(0) = r;
    XSRETURN(1);
}

static void on_disconnect_cb(pagi_scope *s, const char *reason, void *ud)
{
    dPERL;
    perl_hold *n = ud;
    SV *cb = SvREFCNT_inc(n->sv); /* the scope may be released while it runs */
    perl_call_cb(aTHX_ cb, reason ? newSVpv(reason, 0) : NULL);
    SvREFCNT_dec(cb);
}

static void on_notify_cb(pagi_scope *s, void *ud)
{
    dPERL;
    perl_hold *n = ud;
    SV *cb = SvREFCNT_inc(n->sv); /* the scope may be released while it runs */
    perl_call_cb(aTHX_ cb, NULL);
    SvREFCNT_dec(cb);
}

enum { W_DISCONNECT, W_COMPLETE, W_HIGH, W_DRAIN, W_SERVER_DRAIN };

/* watch($h, $what, $callback): registers a callback until the scope is released */
XS_INTERNAL(xs_watch)
{
    dXSARGS;
    if (items != 3)
        croak_xs_usage(cv, "h, what, cb");
    perl_handle *h = get_handle(aTHX_ ST(0));
    IV what = SvIV(ST(1));
    if (!h->s)
        XSRETURN_NO;
    perl_hold *n = perl_hold_add(h, ST(2));
    if (!n)
        croak("out of memory");
    int rc = -1;
    switch (what) {
    case W_DISCONNECT:
        rc = pagi_conn_on_disconnect(h->s, on_disconnect_cb, n);
        break;
    case W_COMPLETE:
        rc = pagi_conn_on_complete(h->s, on_notify_cb, n);
        break;
    case W_HIGH:
        rc = pagi_transport_on_high_water(h->s, on_notify_cb, n);
        break;
    case W_DRAIN:
        rc = pagi_transport_on_drain(h->s, on_notify_cb, n);
        break;
    case W_SERVER_DRAIN:
        rc = pagi_scope_on_server_drain(h->s, on_notify_cb, n);
        break;
    default:
        break;
    }
    if (rc < 0) {
        perl_hold_drop(n);
        XSRETURN_NO;
    }
    XSRETURN_YES;
}

/* write_now($h, $block): scope_write_now, for the PSGI writer (a synchronous
 * app holds the loop, so its writes would otherwise leave when it returns). */
XS_INTERNAL(xs_write_now)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "h, block");
    perl_child_guard();
    perl_handle *h = get_handle(aTHX_ ST(0));
    if (h->s && scope_write_now(h->s, SvTRUE(ST(1))) == 0)
        XSRETURN_YES;
    XSRETURN_NO;
}

/* psgi_harakiri($why): psgix.harakiri.commit, this worker ends after its
 * work and the master replaces it; false when nothing would replace it. */
XS_INTERNAL(xs_psgi_harakiri)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "why");
    perl_child_guard();
    if (!perl_pool_retire())
        XSRETURN_YES; /* after the request a worker sent meanwhile */
    if (perl_host_loop && loop_recycle(perl_host_loop, SvPV_nolen(ST(0))) == 0)
        XSRETURN_YES;
    XSRETURN_NO;
}

/* log($level, $message) */
XS_INTERNAL(xs_log)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "level, message");
    pagi_log(perl_host_loop, (int)SvIV(ST(0)), "%s", SvPV_nolen(ST(1)));
    XSRETURN_EMPTY;
}

void perl_xs_boot(pTHX)
{
    static const char file[] = __FILE__;
    newXS("PAGI::Server::Pagid::XS::finish", xs_finish, file);
    newXS("PAGI::Server::Pagid::XS::query", xs_query, file);
    newXS("PAGI::Server::Pagid::XS::watch", xs_watch, file);
    newXS("PAGI::Server::Pagid::XS::log", xs_log, file);
    newXS("PAGI::Server::Pagid::XS::psgi_harakiri", xs_psgi_harakiri, file);
    newXS("PAGI::Server::Pagid::XS::write_now", xs_write_now, file);
    handle_stash = gv_stashpvs(HANDLE_CLASS, GV_ADD);
    static const char *const yes[] = {"AWAIT_IS_READY", "is_ready", "is_done"};
    static const char *const result[] = {"AWAIT_GET", "AWAIT_RESULT", "result", "get"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        newXS(form("%s::%s", DONE_CLASS, yes[i]), xs_done_yes, file);
    for (size_t i = 0; i < sizeof result / sizeof result[0]; i++)
        newXS(form("%s::%s", DONE_CLASS, result[i]), xs_done_result, file);
}
