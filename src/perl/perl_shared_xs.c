/*
 * perl_shared_xs.c - the pagi.shared extension for Perl apps (docs/perl.md):
 * $scope->{extensions}{'pagi.shared'} holds one object per worker, a hash
 * of the configured shared dictionaries by name, each a blessed reference
 * to the pagi_shared pointer with XS methods over pagi_shared.h. The
 * dictionaries live as long as the worker, so the pointers never dangle.
 */
#include "perl_int.h"

#include <pagi/pagi_shared.h>

#include "common/config.h"
#include "worker/core/loop.h"

#define DICT_CLASS "PAGI::Server::Pagid::SharedDict"
#define SET_CLASS "PAGI::Server::Pagid::SharedDicts"

enum { SD_W_SET, SD_W_SAFE_SET, SD_W_ADD, SD_W_SAFE_ADD, SD_W_REPLACE };

static SV *shared_obj;         /* the extension's object, made on first use; NULL when no dicts */
static pagi_loop *shared_loop; /* the loop it was made for */

static pagi_shared *dict_of(pTHX_ SV *self)
{
    if (!SvROK(self) || !sv_derived_from(self, DICT_CLASS))
        croak("not a pagid shared dict");
    return INT2PTR(pagi_shared *, SvIV(SvRV(self)));
}

/* The bytes of a key or value (wide characters refused). */
static const char *bytes_of(pTHX_ SV *sv, STRLEN *len, const char *what)
{
    if (!SvOK(sv) || SvROK(sv))
        croak("pagi.shared: the %s must be a byte string", what);
    if (SvUTF8(sv)) {
        sv = sv_2mortal(newSVsv(sv));
        if (!sv_utf8_downgrade(sv, TRUE))
            croak("pagi.shared: the %s has wide characters: encode it first", what);
    }
    return SvPV(sv, *len);
}

/* In list context (undef, error text); in scalar context undef. */
#define FAIL(rc)                                                                                   \
    do {                                                                                           \
        ST(0) = &PL_sv_undef;                                                                      \
        if (GIMME_V == G_LIST) {                                                                   \
            ST(1) = sv_2mortal(newSVpv(pagi_shared_strerror(rc), 0));                              \
            XSRETURN(2);                                                                           \
        }                                                                                          \
        XSRETURN(1);                                                                               \
    } while (0)

/* $d->set($key, $value [, $ttl [, $flags]]) and set's siblings (by XSANY). */
XS_INTERNAL(xs_write)
{
    dXSARGS;
    if (items < 3 || items > 5)
        croak_xs_usage(cv, "dict, key, value [, ttl [, flags]]");
    pagi_shared *d = dict_of(aTHX_ ST(0));
    STRLEN kl, vl;
    const char *k = bytes_of(aTHX_ ST(1), &kl, "key"), *v = bytes_of(aTHX_ ST(2), &vl, "value");
    double ttl = items > 3 ? SvNV(ST(3)) : 0;
    uint32_t flags = items > 4 ? (uint32_t)SvUV(ST(4)) : 0;
    int rc;
    switch (XSANY.any_i32) {
    case SD_W_SAFE_SET:
        rc = pagi_shared_safe_set(d, k, kl, v, vl, ttl, flags);
        break;
    case SD_W_ADD:
        rc = pagi_shared_add(d, k, kl, v, vl, ttl, flags);
        break;
    case SD_W_SAFE_ADD:
        rc = pagi_shared_safe_add(d, k, kl, v, vl, ttl, flags);
        break;
    case SD_W_REPLACE:
        rc = pagi_shared_replace(d, k, kl, v, vl, ttl, flags);
        break;
    default:
        rc = pagi_shared_set(d, k, kl, v, vl, ttl, flags);
        break;
    }
    if (rc)
        FAIL(rc);
    XSRETURN_YES;
}

/* $d->get($key): the value (undef when missing); in list context (value, flags). */
XS_INTERNAL(xs_get)
{
    dXSARGS;
    if (items != 2)
        croak_xs_usage(cv, "dict, key");
    pagi_shared *d = dict_of(aTHX_ ST(0));
    STRLEN kl;
    const char *k = bytes_of(aTHX_ ST(1), &kl, "key");
    SV *out = sv_2mortal(newSV(256));
    size_t len = 0;
    uint32_t flags = 0;
    int rc;
    /* The value may grow between two reads: ask again with its new length. */
    while ((rc = pagi_shared_get(d, k, kl, SvPVX(out), SvLEN(out) - 1, &len, &flags)) == 0 &&
           len > SvLEN(out) - 1)
        SvGROW(out, len + 1);
    if (rc)
        FAIL(rc);
    SvPOK_only(out);
    SvCUR_set(out, len);
    *SvEND(out) = '\0';
    ST(0) = out;
    if (GIMME_V == G_LIST) {
        ST(1) = sv_2mortal(newSVuv(flags));
        XSRETURN(2);
    }
    XSRETURN(1);
}

/* $d->incr($key, $delta [, $init [, $init_ttl]]): the new value. */
XS_INTERNAL(xs_incr)
{
    dXSARGS;
    if (items < 3 || items > 5)
        croak_xs_usage(cv, "dict, key, delta [, init [, init_ttl]]");
    pagi_shared *d = dict_of(aTHX_ ST(0));
    STRLEN kl;
    const char *k = bytes_of(aTHX_ ST(1), &kl, "key");
    int64_t init = items > 3 && SvOK(ST(3)) ? (int64_t)SvIV(ST(3)) : 0, out = 0;
    int has_init = items > 3 && SvOK(ST(3));
    int rc = pagi_shared_incr(d, k, kl, (int64_t)SvIV(ST(2)), has_init ? &init : NULL,
                              items > 4 ? SvNV(ST(4)) : 0, &out);
    if (rc)
        FAIL(rc);
    ST(0) = sv_2mortal(newSViv((IV)out));
    XSRETURN(1);
}

/* $d->cas($key, $old, $new [, $ttl [, $flags]]). */
XS_INTERNAL(xs_cas)
{
    dXSARGS;
    if (items < 4 || items > 6)
        croak_xs_usage(cv, "dict, key, old, new [, ttl [, flags]]");
    pagi_shared *d = dict_of(aTHX_ ST(0));
    STRLEN kl, ol, nl;
    const char *k = bytes_of(aTHX_ ST(1), &kl, "key"), *o = bytes_of(aTHX_ ST(2), &ol, "value");
    const char *n = bytes_of(aTHX_ ST(3), &nl, "value");
    int rc = pagi_shared_cas(d, k, kl, o, ol, n, nl, items > 4 ? SvNV(ST(4)) : 0,
                             items > 5 ? (uint32_t)SvUV(ST(5)) : 0);
    if (rc)
        FAIL(rc);
    XSRETURN_YES;
}

/* $d->delete($key), $d->ttl($key), $d->expire($key, $ttl) (by XSANY: 0, 1, 2). */
XS_INTERNAL(xs_key)
{
    dXSARGS;
    int op = XSANY.any_i32;
    if (items != (op == 2 ? 3 : 2))
        croak_xs_usage(cv, op == 2 ? "dict, key, ttl" : "dict, key");
    pagi_shared *d = dict_of(aTHX_ ST(0));
    STRLEN kl;
    const char *k = bytes_of(aTHX_ ST(1), &kl, "key");
    double ttl = 0;
    int rc = op == 0   ? pagi_shared_delete(d, k, kl)
             : op == 1 ? pagi_shared_ttl(d, k, kl, &ttl)
                       : pagi_shared_expire(d, k, kl, SvNV(ST(2)));
    if (rc)
        FAIL(rc);
    ST(0) = op == 1 ? sv_2mortal(newSVnv(ttl)) : &PL_sv_yes;
    XSRETURN(1);
}

/* capacity, free_space, count, flush_all, flush_expired([$max]) (by XSANY: 0..4). */
XS_INTERNAL(xs_whole)
{
    dXSARGS;
    if (items < 1 || items > 2)
        croak_xs_usage(cv, "dict [, max]");
    pagi_shared *d = dict_of(aTHX_ ST(0));
    size_t v = 0;
    switch (XSANY.any_i32) {
    case 0:
        v = pagi_shared_capacity(d);
        break;
    case 1:
        v = pagi_shared_free_space(d);
        break;
    case 2:
        v = pagi_shared_count(d);
        break;
    case 3:
        pagi_shared_flush_all(d);
        break;
    default:
        v = pagi_shared_flush_expired(d, items > 1 ? (size_t)SvUV(ST(1)) : 0);
        break;
    }
    ST(0) = sv_2mortal(newSVuv(v));
    XSRETURN(1);
}

static void def(pTHX_ const char *name, XSUBADDR_t fn, int op)
{
    char full[128];
    snprintf(full, sizeof full, DICT_CLASS "::%s", name);
    CV *c = newXS(full, fn, __FILE__);
    CvXSUBANY(c).any_i32 = op;
}

void perl_shared_boot(pTHX)
{
    static const char *const writes[] = {"set", "safe_set", "add", "safe_add", "replace"};
    for (int i = 0; i < 5; i++)
        def(aTHX_ writes[i], xs_write, i);
    def(aTHX_ "get", xs_get, 0);
    def(aTHX_ "incr", xs_incr, 0);
    def(aTHX_ "cas", xs_cas, 0);
    def(aTHX_ "delete", xs_key, 0);
    def(aTHX_ "ttl", xs_key, 1);
    def(aTHX_ "expire", xs_key, 2);
    static const char *const whole[] = {"capacity", "free_space", "count", "flush_all",
                                        "flush_expired"};
    for (int i = 0; i < 5; i++)
        def(aTHX_ whole[i], xs_whole, i);
}

SV *perl_shared_ext(pTHX)
{
    if (shared_loop == perl_host_loop || !perl_host_loop)
        return shared_obj;
    SvREFCNT_dec(shared_obj); /* made for another loop (a preloading zygote's) */
    shared_obj = NULL;
    shared_loop = perl_host_loop;
    if (perl_host_loop->n_shared_dicts == 0)
        return NULL;
    HV *all = newHV();
    HV *stash = gv_stashpvs(DICT_CLASS, GV_ADD);
    for (size_t i = 0; i < perl_host_loop->n_shared_dicts; i++) {
        const pagid_shared_dict *e = &perl_host_loop->shared_dicts[i];
        if (!e->dict)
            continue;
        SV *obj = sv_bless(newRV_noinc(newSViv(PTR2IV(e->dict))), stash);
        (void)hv_store(all, e->name, (I32)strlen(e->name), obj, 0);
    }
    shared_obj = sv_bless(newRV_noinc((SV *)all), gv_stashpvs(SET_CLASS, GV_ADD));
    return shared_obj;
}

void perl_shared_unready(pTHX)
{
    SvREFCNT_dec(shared_obj);
    shared_obj = NULL;
    shared_loop = NULL;
}
