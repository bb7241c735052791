/*
 * perl_pool_env.c - a PSGI request's env in a pool process, built from the
 * Q frame its worker wrote (Pool.pm has the wire; PSGI.pm's _env is the same
 * env for a PSGI app run in the worker itself).
 */
#include "perl_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hexdigit.h"

/* Fields of a Q frame before its header names and values; the last names
 * the app (its spec: every PSGI app of the config is served here). */
#define Q_FIXED 13

static uint32_t get_u32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
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

/* The env's fixed keys, made once per interpreter (perl_pool_env_boot) as
 * shared keys with their hashes: each request's env stores them without
 * hashing them again. The interpreter owns them. */
enum env_key {
    K_REQUEST_METHOD,
    K_SCRIPT_NAME,
    K_PATH_INFO,
    K_REQUEST_URI,
    K_QUERY_STRING,
    K_SERVER_NAME,
    K_SERVER_PORT,
    K_SERVER_PROTOCOL,
    K_PSGI_VERSION,
    K_PSGI_URL_SCHEME,
    K_PSGI_MULTITHREAD,
    K_PSGI_MULTIPROCESS,
    K_PSGI_RUN_ONCE,
    K_PSGI_NONBLOCKING,
    K_PSGI_STREAMING,
    K_PSGIX_INPUT_BUFFERED,
    K_PSGIX_HARAKIRI,
    K_REMOTE_ADDR,
    K_REMOTE_PORT,
    K_CONTENT_LENGTH,
    K_PSGI_INPUT,
    K_PSGI_ERRORS,
    K_PSGIX_CLEANUP,
    K_PSGIX_CLEANUP_HANDLERS,
    K_PSGIX_HARAKIRI_COMMIT,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {
    [K_REQUEST_METHOD] = "REQUEST_METHOD",
    [K_SCRIPT_NAME] = "SCRIPT_NAME",
    [K_PATH_INFO] = "PATH_INFO",
    [K_REQUEST_URI] = "REQUEST_URI",
    [K_QUERY_STRING] = "QUERY_STRING",
    [K_SERVER_NAME] = "SERVER_NAME",
    [K_SERVER_PORT] = "SERVER_PORT",
    [K_SERVER_PROTOCOL] = "SERVER_PROTOCOL",
    [K_PSGI_VERSION] = "psgi.version",
    [K_PSGI_URL_SCHEME] = "psgi.url_scheme",
    [K_PSGI_MULTITHREAD] = "psgi.multithread",
    [K_PSGI_MULTIPROCESS] = "psgi.multiprocess",
    [K_PSGI_RUN_ONCE] = "psgi.run_once",
    [K_PSGI_NONBLOCKING] = "psgi.nonblocking",
    [K_PSGI_STREAMING] = "psgi.streaming",
    [K_PSGIX_INPUT_BUFFERED] = "psgix.input.buffered",
    [K_PSGIX_HARAKIRI] = "psgix.harakiri",
    [K_REMOTE_ADDR] = "REMOTE_ADDR",
    [K_REMOTE_PORT] = "REMOTE_PORT",
    [K_CONTENT_LENGTH] = "CONTENT_LENGTH",
    [K_PSGI_INPUT] = "psgi.input",
    [K_PSGI_ERRORS] = "psgi.errors",
    [K_PSGIX_CLEANUP] = "psgix.cleanup",
    [K_PSGIX_CLEANUP_HANDLERS] = "psgix.cleanup.handlers",
    [K_PSGIX_HARAKIRI_COMMIT] = "psgix.harakiri.commit",
};
static SV *key_svs[K_COUNT];

void perl_pool_env_boot(pTHX)
{
    for (int i = 0; i < K_COUNT; i++)
        key_svs[i] = newSVpvn_share(key_names[i], (I32)strlen(key_names[i]), 0);
}

static void env_put_key(pTHX_ HV *env, enum env_key k, SV *v)
{
    (void)hv_store_ent(env, key_svs[k], v, 0);
}

/* A header as PSGI.pm's _env puts it: names with '_' dropped, content-length
 * left to the body's length, repeats joined (cookies with '; '). */
static void env_header(pTHX_ HV *env, field name, field value, int *declared)
{
    char small[512], *key = small;
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
        /* A name as long as the worker's header limits allow: PSGI.pm's
         * _env keeps it too. */
        if (name.n + 5 > sizeof small && !(key = malloc(name.n + 5)))
            return;
        memcpy(key, "HTTP_", 5);
        for (size_t i = 0; i < name.n; i++) {
            char c = name.p[i];
            key[5 + i] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
        }
        klen = 5 + name.n;
    }
    /* One lookup: the entry, made (undef) when the name is new. */
    SV **slot = hv_fetch(env, key, (I32)klen, 1);
    if (key != small)
        free(key);
    if (!slot)
        return;
    if (SvOK(*slot)) {
        int cookie = name.n == 6 && !memcmp(name.p, "cookie", 6);
        sv_catpvn(*slot, cookie ? "; " : ", ", 2);
        sv_catpvn(*slot, value.p, value.n);
    } else
        sv_setpvn(*slot, value.p, value.n);
}

HV *perl_pool_env_of_head(pTHX_ const char *p, size_t n, const char **app, size_t *app_len)
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
    *app = f[12].p;
    *app_len = f[12].n;
    HV *env = newHV();
    hv_ksplit(env, 48);
    env_put_key(aTHX_ env, K_REQUEST_METHOD, field_sv(aTHX_ method));
    env_put_key(aTHX_ env, K_SCRIPT_NAME, field_sv(aTHX_ root));
    SV *pi = percent_decoded(aTHX_ raw);
    if (root.n) {
        if (SvCUR(pi) >= root.n && !memcmp(SvPVX(pi), root.p, root.n))
            sv_chop(pi, SvPVX(pi) + root.n);
        else if (path.n >= root.n)
            sv_setpvn(pi, path.p + root.n, path.n - root.n);
        else
            sv_setsv(pi, &PL_sv_undef); /* substr past the end, as PSGI.pm */
    }
    env_put_key(aTHX_ env, K_PATH_INFO, pi);
    SV *uri = field_sv(aTHX_ raw);
    if (query.n) {
        sv_catpvn(uri, "?", 1);
        sv_catpvn(uri, query.p, query.n);
    }
    env_put_key(aTHX_ env, K_REQUEST_URI, uri);
    env_put_key(aTHX_ env, K_QUERY_STRING, field_sv(aTHX_ query));
    int has_server = sh.n && sp.n;
    env_put_key(aTHX_ env, K_SERVER_NAME, has_server ? field_sv(aTHX_ sh) : newSVpvs("localhost"));
    env_put_key(aTHX_ env, K_SERVER_PORT, has_server ? field_sv(aTHX_ sp) : newSViv(0));
    SV *proto = newSVpvs("HTTP/");
    sv_catpvn(proto, version.p, version.n);
    env_put_key(aTHX_ env, K_SERVER_PROTOCOL, proto);
    AV *pv = newAV();
    av_push(pv, newSViv(1));
    av_push(pv, newSViv(1));
    env_put_key(aTHX_ env, K_PSGI_VERSION, newRV_noinc((SV *)pv));
    int https = scheme.n == 5 && !memcmp(scheme.p, "https", 5);
    env_put_key(aTHX_ env, K_PSGI_URL_SCHEME, https ? newSVpvs("https") : newSVpvs("http"));
    env_put_key(aTHX_ env, K_PSGI_MULTITHREAD, newSViv(0));
    env_put_key(aTHX_ env, K_PSGI_MULTIPROCESS, newSViv(1));
    env_put_key(aTHX_ env, K_PSGI_RUN_ONCE, newSViv(0));
    env_put_key(aTHX_ env, K_PSGI_NONBLOCKING, newSViv(0));
    env_put_key(aTHX_ env, K_PSGI_STREAMING, newSViv(1));
    env_put_key(aTHX_ env, K_PSGIX_INPUT_BUFFERED, newSViv(1));
    env_put_key(aTHX_ env, K_PSGIX_HARAKIRI, newSViv(1));
    if (ch.n) { /* none on a unix socket */
        env_put_key(aTHX_ env, K_REMOTE_ADDR, field_sv(aTHX_ ch));
        env_put_key(aTHX_ env, K_REMOTE_PORT, field_sv(aTHX_ cp));
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
        env_put_key(aTHX_ env, K_CONTENT_LENGTH, field_sv(aTHX_ len));
    else if (declared)
        env_put_key(aTHX_ env, K_CONTENT_LENGTH, newSViv(0));
    return env;
}

/* What PSGI.pm's _prepare_env adds in the process that runs the app. */
void perl_pool_env_complete(pTHX_ HV *env, SV *input, SV *errors)
{
    env_put_key(aTHX_ env, K_PSGI_INPUT, newSVsv(input));
    env_put_key(aTHX_ env, K_PSGI_ERRORS, newSVsv(errors));
    env_put_key(aTHX_ env, K_PSGIX_CLEANUP, newSViv(1));
    env_put_key(aTHX_ env, K_PSGIX_CLEANUP_HANDLERS, newRV_noinc((SV *)newAV()));
}

/* Whether PSGI.pm's _cleanup has work after the response: a handler was
 * pushed (or the list replaced by something else), or a harakiri asked. */
int perl_pool_env_needs_cleanup(pTHX_ HV *env)
{
    HE *h = hv_fetch_ent(env, key_svs[K_PSGIX_CLEANUP_HANDLERS], 0, 0);
    HE *commit = hv_fetch_ent(env, key_svs[K_PSGIX_HARAKIRI_COMMIT], 0, 0);
    SV *list = h ? HeVAL(h) : NULL;
    return !list || !SvROK(list) || SvTYPE(SvRV(list)) != SVt_PVAV || SvRMAGICAL(SvRV(list)) ||
           av_count((AV *)SvRV(list)) || (commit && SvTRUE(HeVAL(commit)));
}
