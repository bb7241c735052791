/*
 * perl_pool_env.c - a PSGI request's env in a pool process, built from the
 * Q frame its worker wrote (Pool.pm has the wire; PSGI.pm's _env is the same
 * env for a PSGI app run in the worker itself).
 */
#include "perl_int.h"

#include <stdint.h>
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
