/*
 * perl_pubsub.c - the C half of the pagi.pubsub extension for Perl apps
 * (docs/perl.md): publish on a scope's handle, and subscription objects
 * whose C subscription ends with the scope, as in pagi(3). Messages go to
 * the app's callback, or to the object's queue read with `next` (Pagid.pm).
 */
#include "perl_int.h"

#include <stdlib.h>
#include <string.h>

#define SUB_CLASS "PAGI::Server::Pagid::Subscription"

/*
 * One Perl subscription. Owned by the Perl object (freed by its free
 * magic); the object holds the scope's handle object, so h stays
 * allocated as long as ps. While subscribed, h's holds keep the object and
 * the callback: the scope's release drops them, which ends every
 * subscription of the scope without a list of its own.
 */
typedef struct perl_sub {
    pagi_subscription *sub; /* valid only while sub_live() */
    perl_handle *h;
    perl_hold *obj_hold;        /* a reference to the object, so deliveries can name it */
    perl_hold *cb_hold;         /* the app's callback; NULL: the queue form */
    unsigned long long dropped; /* as last seen, for after the end */
} perl_sub;

/* The C subscription still exists: not unsubscribed, and the scope not
 * released (its release frees its subscriptions just before the handle's
 * release sets h->s to NULL; the holds went with it). */
static int sub_live(const perl_sub *ps)
{
    return ps->sub && ps->h->s;
}

static int sub_free_magic(pTHX_ SV *sv, MAGIC *mg)
{
    (void)sv;
    /* The holds keep the object while the subscription lives, so it is
     * gone only after the end. */
    free(mg->mg_ptr);
    return 0;
}

static MGVTBL sub_vtbl = {.svt_free = sub_free_magic};

static perl_sub *get_sub(pTHX_ SV *obj)
{
    if (!SvROK(obj) || !sv_derived_from(obj, SUB_CLASS))
        croak("not a pagid subscription");
    MAGIC *mg = mg_findext(SvRV(obj), PERL_MAGIC_ext, &sub_vtbl);
    if (!mg)
        croak("not a pagid subscription");
    return (perl_sub *)mg->mg_ptr;
}

/* The scope's handle from a hash-based object's `h` key. */
static perl_handle *object_handle(pTHX_ SV *self)
{
    SV **svp;
    if (!SvROK(self) || SvTYPE(SvRV(self)) != SVt_PVHV ||
        !(svp = hv_fetchs((HV *)SvRV(self), "h", 0)))
        croak("not a pagid pub/sub object");
    return perl_xs_handle(aTHX_ *svp);
}

/* A channel name as the C interface wants it: characters as UTF-8, 1 to
 * PAGI_CHANNEL_MAX bytes, no NUL. NULL with msg set when it is not one. */
static const char *channel_bytes(pTHX_ SV *sv, const char *what, char *msg, size_t msglen)
{
    if (!sv || !SvOK(sv) || SvROK(sv)) {
        snprintf(msg, msglen, "%s: the channel must be a string", what);
        return NULL;
    }
    STRLEN len;
    const char *p = SvPVutf8(sv_2mortal(newSVsv(sv)), len);
    if (len == 0 || len > PAGI_CHANNEL_MAX || memchr(p, 0, len)) {
        snprintf(msg, msglen, "%s: a channel name is 1 to %d bytes (as UTF-8), without NUL", what,
                 PAGI_CHANNEL_MAX);
        return NULL;
    }
    return p;
}

/* ---- publish ----------------------------------------------------------- */

/* $pubsub->publish($channel, $bytes): a Future, done once the server took
 * the message, failed with the reason when it refused it. */
XS_INTERNAL(xs_publish)
{
    dXSARGS;
    char msg[256];
    const char *err = NULL;
    if (items != 3)
        croak_xs_usage(cv, "pubsub, channel, message");
    perl_child_guard(); /* a forked child must not publish as the worker */
    perl_handle *h = object_handle(aTHX_ ST(0));
    SV *m = ST(2);
    const char *ch = channel_bytes(aTHX_ ST(1), "publish", msg, sizeof msg);
    STRLEN len = 0;
    const char *data = NULL;
    if (!ch) {
        err = msg;
    } else if (!h->s) {
        err = "publish: the scope has ended";
    } else if (!SvOK(m) || SvROK(m)) {
        err = "publish: the message must be a byte string";
    } else {
        if (SvUTF8(m)) { /* characters below 256 are bytes; wider ones are not */
            m = sv_2mortal(newSVsv(m));
            if (!sv_utf8_downgrade(m, TRUE))
                err = "publish: the message has wide characters: publish bytes (encode text "
                      "first, e.g. with Encode::encode_utf8)";
        }
        if (!err) {
            data = SvPV(m, len);
            if (pagi_publish(h->s, ch, data, len) < 0) {
                snprintf(msg, sizeof msg, "%s", pagi_scope_error(h->s));
                err = msg;
            }
        }
    }
    char where[512];
    if (err) { /* an XSUB: the statement running is the app's own call */
        snprintf(where, sizeof where, "%s at %s line %u.", err, CopFILE(PL_curcop),
                 (unsigned)CopLINE(PL_curcop));
        err = where;
    }
    SV *f = err ? perl_xs_failed_future(aTHX_ err) : perl_xs_done_future(aTHX);
    ST(0) = f ? sv_2mortal(f) : &PL_sv_undef;
    XSRETURN(1);
}

/* ---- deliveries -------------------------------------------------------- */

static void log_died(pTHX_ SV *obj, SV *err)
{
    STRLEN len;
    const char *e = SvPV(err, len);
    while (len && isSPACE(e[len - 1]))
        len--;
    SV **chp = hv_fetchs((HV *)SvRV(obj), "channel", 0);
    STRLEN clen = 0;
    const char *c = chp ? SvPVutf8(*chp, clen) : "";
    pagi_log(perl_host_loop, PAGI_LOG_ERROR, "perl: pub/sub callback on channel '%.*s' died: %.*s",
             (int)clen, c, (int)len, len ? e : "died");
}

/* Call cb or the glue with (message, channel, object); returns what it
 * returned (mortal) or NULL when it died (logged). */
static SV *deliver(pTHX_ SV *fn, int is_method, SV *obj, const void *data, size_t len)
{
    dSP;
    SV **chp = hv_fetchs((HV *)SvRV(obj), "channel", 0);
    PUSHMARK(SP);
    if (is_method)
        XPUSHs(obj);
    mXPUSHs(newSVpvn(data ? data : "", len));
    if (!is_method) {
        mXPUSHs(chp ? newSVsv(*chp) : newSV(0));
        XPUSHs(obj);
    }
    PUTBACK;
    int n = call_sv(fn, G_SCALAR | G_EVAL);
    perl_child_guard();
    SPAGAIN;
    SV *r = n > 0 ? POPs : NULL;
    PUTBACK;
    if (SvTRUE(ERRSV)) {
        log_died(aTHX_ obj, ERRSV);
        return NULL;
    }
    return r;
}

static SV *queue_cv, *callback_future_cv;

static void on_message(pagi_subscription *sub, pagi_str channel, const void *data, size_t len,
                       void *ud)
{
    (void)channel;
    dPERL;
    perl_sub *ps = ud;
    ps->dropped = pagi_subscription_dropped(sub);
    /* The app's Future for a request scope is done: its sends would fail
     * and nobody reads `next`; the subscription ends with the scope soon.
     * A lifespan handler that returned keeps its subscriptions (they live
     * with the app). */
    if (ps->h->finished && pagi_scope_type_of(ps->h->s) != PAGI_SCOPE_LIFESPAN)
        return;
    ENTER;
    SAVETMPS;
    /* Both held for the call: the callback may unsubscribe, dropping the holds. */
    SV *obj = sv_2mortal(newRV_inc(SvRV(ps->obj_hold->sv)));
    if (ps->cb_hold) {
        SV *cb = sv_2mortal(SvREFCNT_inc(ps->cb_hold->sv));
        SV *r = deliver(aTHX_ cb, 0, obj, data, len);
        /* An async callback: a pending or failed Future goes to the glue,
         * which logs its failure; a done one (or no Future) costs nothing. */
        if (r && SvROK(r) && SvOBJECT(SvRV(r)) && !perl_future_done(aTHX_ r) &&
            callback_future_cv) {
            dSP;
            PUSHMARK(SP);
            XPUSHs(obj);
            XPUSHs(r);
            PUTBACK;
            call_sv(callback_future_cv, G_DISCARD | G_EVAL);
            perl_child_guard();
            if (SvTRUE(ERRSV))
                log_died(aTHX_ obj, ERRSV);
        }
    } else if (queue_cv) {
        deliver(aTHX_ queue_cv, 1, obj, data, len);
    }
    FREETMPS;
    LEAVE;
}

/* ---- subscriptions ----------------------------------------------------- */

/* _subscribe($object, $channel, $callback_or_undef): the object (a hash
 * with `h`, made by the glue) becomes a live subscription; dies with the
 * reason when the server refuses. */
XS_INTERNAL(xs_subscribe)
{
    dXSARGS;
    char msg[256];
    if (items != 3)
        croak_xs_usage(cv, "object, channel, callback");
    perl_child_guard();
    SV *obj = ST(0), *cb = ST(2);
    perl_handle *h = object_handle(aTHX_ obj);
    const char *ch = channel_bytes(aTHX_ ST(1), "subscribe", msg, sizeof msg);
    if (!ch)
        croak("%s\n", msg);
    if (!h->s)
        croak("subscribe: the scope has ended\n");
    if (SvOK(cb) && !(SvROK(cb) && SvTYPE(SvRV(cb)) == SVt_PVCV))
        croak("subscribe: the callback must be a code reference\n");
    if (mg_findext(SvRV(obj), PERL_MAGIC_ext, &sub_vtbl))
        croak("subscribe: already a subscription\n");
    perl_sub *ps = calloc(1, sizeof *ps);
    if (!ps)
        croak("subscribe: out of memory\n");
    ps->h = h;
    sv_magicext(SvRV(obj), NULL, PERL_MAGIC_ext, &sub_vtbl, (const char *)ps, 0);
    /* From here the object owns ps; it stays to the end of the statement
     * whatever is dropped below. The holds take references of their own:
     * the caller's SVs may be lexicals that change. */
    sv_2mortal(SvREFCNT_inc(SvRV(obj)));
    perl_hold *o = perl_hold_add(h, sv_2mortal(newRV_inc(SvRV(obj))));
    perl_hold *c = o && SvOK(cb) ? perl_hold_add(h, sv_2mortal(newSVsv(cb))) : NULL;
    pagi_subscription *sub = NULL;
    if (!o || (SvOK(cb) && !c))
        snprintf(msg, sizeof msg, "subscribe: out of memory");
    else if (!(sub = pagi_subscribe(h->s, ch, on_message, ps)))
        snprintf(msg, sizeof msg, "%s", pagi_scope_error(h->s));
    if (!sub) {
        if (c)
            perl_hold_drop(c);
        if (o)
            perl_hold_drop(o);
        croak("%s\n", msg);
    }
    ps->obj_hold = o;
    ps->cb_hold = c;
    ps->sub = sub;
    XSRETURN_EMPTY;
}

/* _end($sub): unsubscribe now; true when it was live. */
XS_INTERNAL(xs_end)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "subscription");
    perl_child_guard();
    perl_sub *ps = get_sub(aTHX_ ST(0));
    if (!sub_live(ps)) {
        ps->sub = NULL;
        XSRETURN_NO;
    }
    ps->dropped = pagi_subscription_dropped(ps->sub);
    pagi_unsubscribe(ps->sub);
    ps->sub = NULL;
    /* Keep the object (and so ps) to the end of the statement: the hold
     * may be its last reference. */
    sv_2mortal(SvREFCNT_inc(SvRV(ST(0))));
    perl_hold *o = ps->obj_hold, *c = ps->cb_hold;
    ps->obj_hold = ps->cb_hold = NULL;
    if (c)
        perl_hold_drop(c);
    perl_hold_drop(o);
    XSRETURN_YES;
}

XS_INTERNAL(xs_active)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "subscription");
    perl_sub *ps = get_sub(aTHX_ ST(0));
    ST(0) = sub_live(ps) ? &PL_sv_yes : &PL_sv_no;
    XSRETURN(1);
}

XS_INTERNAL(xs_dropped)
{
    dXSARGS;
    if (items != 1)
        croak_xs_usage(cv, "subscription");
    perl_sub *ps = get_sub(aTHX_ ST(0));
    if (sub_live(ps))
        ps->dropped = pagi_subscription_dropped(ps->sub);
    ST(0) = sv_2mortal(newSVnv((NV)ps->dropped));
    XSRETURN(1);
}

/* _count_dropped($sub, $n): the app (or the queue) dropped n messages. */
XS_INTERNAL(xs_count_dropped)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "subscription, n");
    perl_sub *ps = get_sub(aTHX_ ST(0));
    IV n = SvIV(ST(1));
    if (n > 0 && sub_live(ps)) {
        pagi_subscription_count_dropped(ps->sub, n > (IV)UINT32_MAX ? UINT32_MAX : (unsigned)n);
        ps->dropped = pagi_subscription_dropped(ps->sub);
    }
    XSRETURN_EMPTY;
}

/* _policy($sub, $policy, $max_pending): pagi_subscription_set_policy. */
XS_INTERNAL(xs_policy)
{
    dXSARGS;
    if (items != 3)
        croak_xs_usage(cv, "subscription, policy, max_pending");
    perl_sub *ps = get_sub(aTHX_ ST(0));
    IV policy = SvIV(ST(1)), max = SvIV(ST(2));
    if (sub_live(ps) &&
        pagi_subscription_set_policy(ps->sub, (pagi_sub_policy)policy, (size_t)max) < 0)
        croak("set_policy: refused by the server\n");
    XSRETURN_EMPTY;
}

void perl_pubsub_boot(pTHX)
{
    static const char file[] = __FILE__;
    newXS("PAGI::Server::Pagid::PubSub::publish", xs_publish, file);
    newXS("PAGI::Server::Pagid::XS::ps_subscribe", xs_subscribe, file);
    newXS("PAGI::Server::Pagid::XS::ps_end", xs_end, file);
    newXS("PAGI::Server::Pagid::XS::ps_active", xs_active, file);
    newXS("PAGI::Server::Pagid::XS::ps_dropped", xs_dropped, file);
    newXS("PAGI::Server::Pagid::XS::ps_count_dropped", xs_count_dropped, file);
    newXS("PAGI::Server::Pagid::XS::ps_policy", xs_policy, file);
}

/* After the glue loaded: the glue's subs deliveries call (looked up once). */
void perl_pubsub_ready(pTHX)
{
    CV *q = get_cv(SUB_CLASS "::_queue", 0), *f = get_cv(SUB_CLASS "::_callback_future", 0);
    queue_cv = q ? newRV_inc((SV *)q) : NULL;
    callback_future_cv = f ? newRV_inc((SV *)f) : NULL;
}

void perl_pubsub_unready(pTHX)
{
    SvREFCNT_dec(queue_cv);
    SvREFCNT_dec(callback_future_cv);
    queue_cv = callback_future_cv = NULL;
}
