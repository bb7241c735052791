/*
 * perl_events.c - conversions for the Perl host: received pagi_events to
 * event hashrefs, sent event hashrefs to pagi_events (with the server's
 * style of validation messages), and the $scope hashref itself.
 */
#include "perl_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define HSTORE(hv, k, v) (void)hv_store((hv), (k), (I32)strlen(k), (v), 0)

/* The keys of the hashes made per scope and event, as shared-key SVs made
 * once: a store with one skips hashing the key and finding it in Perl's
 * shared string table. */
#define EVENT_KEYS(X) \
    X(TYPE, "type") \
    X(BODY, "body") \
    X(MORE, "more") \
    X(REASON, "reason") \
    X(TEXT, "text") \
    X(BYTES, "bytes") \
    X(CODE, "code") \
    X(VERSION, "version") \
    X(SPEC_VERSION, "spec_version") \
    X(PAGI, "pagi") \
    X(IS_WORKER, "is_worker") \
    X(WORKER_NUM, "worker_num") \
    X(STATE, "state") \
    X(HTTP_VERSION, "http_version") \
    X(METHOD, "method") \
    X(SCHEME, "scheme") \
    X(PATH, "path") \
    X(RAW_PATH, "raw_path") \
    X(QUERY_STRING, "query_string") \
    X(ROOT_PATH, "root_path") \
    X(HEADERS, "headers") \
    X(CLIENT, "client") \
    X(SERVER, "server") \
    X(SUBPROTOCOLS, "subprotocols") \
    X(EXTENSIONS, "extensions") \
    X(H, "h") \
    X(PAGI_TRANSPORT, "pagi.transport") \
    X(PAGI_CONNECTION, "pagi.connection") \
    X(PAGID_SERVER, "pagid.server") \
    X(PAGI_PUBSUB, "pagi.pubsub") \
    X(PAGI_SHARED, "pagi.shared") \
    X(TLS, "tls") \
    X(SERVER_CERT, "server_cert") \
    X(CLIENT_CERT_CHAIN, "client_cert_chain") \
    X(CLIENT_CERT_NAME, "client_cert_name") \
    X(CLIENT_CERT_ERROR, "client_cert_error") \
    X(TLS_VERSION, "tls_version") \
    X(CIPHER_SUITE, "cipher_suite")
#define KEY_ENUM(id, str) K_##id,
enum { EVENT_KEYS(KEY_ENUM) K__COUNT };
static SV *key_svs[K__COUNT];
#define KSTORE(hv, id, v) (void)hv_store_ent((hv), key_svs[id], (v), 0)

/* Classes of the pagi.transport and pagi.connection objects, looked up once;
 * a lifespan scope's pagi.pubsub object (other scopes reuse their transport). */
static HV *transport_stash, *connection_stash, *pubsub_stash;

/* The `pagi` hash of every request scope: the same values for each, so one
 * per interpreter, its values read-only (a lifespan scope gets its own, with
 * the worker's facts). */
static SV *request_pagi;

static HV *pagi_hv(pTHX)
{
    HV *pagi = newHV();
    KSTORE(pagi, K_VERSION, newSVpvs(PAGI_SPEC_VERSION));
    KSTORE(pagi, K_SPEC_VERSION, newSVpvs(PAGI_SPEC_VERSION));
    return pagi;
}

void perl_events_init(pTHX)
{
    static const char *const names[K__COUNT] = {
#define KEY_NAME(id, str) str,
        EVENT_KEYS(KEY_NAME)
    };
    for (int i = 0; i < K__COUNT; i++)
        key_svs[i] = newSVpvn_share(names[i], (I32)strlen(names[i]), 0);
    transport_stash = gv_stashpvs("PAGI::Server::Pagid::Transport", GV_ADD);
    connection_stash = gv_stashpvs("PAGI::Server::Pagid::Connection", GV_ADD);
    pubsub_stash = gv_stashpvs("PAGI::Server::Pagid::PubSub", GV_ADD);
    HV *pagi = pagi_hv(aTHX);
    HE *he;
    hv_iterinit(pagi);
    while ((he = hv_iternext(pagi)))
        SvREADONLY_on(hv_iterval(pagi, he));
    request_pagi = newRV_noinc((SV *)pagi);
}

void perl_events_fini(pTHX)
{
    for (int i = 0; i < K__COUNT; i++) {
        SvREFCNT_dec(key_svs[i]);
        key_svs[i] = NULL;
    }
    transport_stash = connection_stash = pubsub_stash = NULL;
    SvREFCNT_dec(request_pagi);
    request_pagi = NULL;
}

static SV *bytes_sv(pTHX_ pagi_str s)
{
    return newSVpvn(s.ptr ? s.ptr : "", s.len);
}

/* Characters when the bytes are valid UTF-8, else the bytes as they are. */
static SV *chars_sv(pTHX_ pagi_str s)
{
    SV *sv = bytes_sv(aTHX_ s);
    sv_utf8_decode(sv);
    return sv;
}

SV *perl_event_to_hv(pTHX_ const pagi_event *ev)
{
    HV *hv = newHV();
    const char *name = pagi_event_type_name(ev->type);
    KSTORE(hv, K_TYPE, newSVpv(name ? name : "unknown", 0));
    switch (ev->type) {
    case PAGI_EV_HTTP_REQUEST:
    case PAGI_EV_SSE_REQUEST:
        KSTORE(hv, K_BODY, bytes_sv(aTHX_ ev->body));
        KSTORE(hv, K_MORE, newSViv(ev->more ? 1 : 0));
        break;
    case PAGI_EV_HTTP_DISCONNECT:
    case PAGI_EV_SSE_DISCONNECT:
        if (ev->reason.len)
            KSTORE(hv, K_REASON, bytes_sv(aTHX_ ev->reason));
        break;
    case PAGI_EV_WEBSOCKET_RECEIVE:
        if (ev->is_text)
            KSTORE(hv, K_TEXT, chars_sv(aTHX_ ev->text));
        else
            KSTORE(hv, K_BYTES, bytes_sv(aTHX_ ev->bytes));
        break;
    case PAGI_EV_WEBSOCKET_DISCONNECT:
        KSTORE(hv, K_CODE, newSViv(ev->code));
        KSTORE(hv, K_REASON, chars_sv(aTHX_ ev->reason));
        break;
    default:
        break;
    }
    return newRV_noinc((SV *)hv);
}

/* ---- sending ---------------------------------------------------------- */

static SV *field(pTHX_ HV *hv, const char *k)
{
    SV **svp = hv_fetch(hv, k, (I32)strlen(k), 0);
    if (!svp || !SvOK(*svp))
        return NULL;
    return *svp;
}

static int get_bytes(pTHX_ SV *sv, pagi_str *out)
{
    if (SvROK(sv))
        return -1;
    STRLEN len;
    if (SvUTF8(sv) && !sv_utf8_downgrade(sv, TRUE))
        return -1;
    out->ptr = SvPV(sv, len);
    out->len = len;
    return 0;
}

static int get_text(pTHX_ SV *sv, pagi_str *out)
{
    if (SvROK(sv))
        return -1;
    STRLEN len;
    out->ptr = SvPVutf8(sv, len);
    out->len = len;
    return 0;
}

static int get_int(pTHX_ SV *sv, int64_t *out)
{
    if (SvROK(sv) || !looks_like_number(sv))
        return -1;
    *out = (int64_t)SvIV(sv);
    return 0;
}

static const char *get_headers(pTHX_ SV *sv, const pagi_header **hp, size_t *count,
                               pagi_header **store, const char *tname, char *err, size_t errlen)
{
    if (!SvROK(sv) || SvTYPE(SvRV(sv)) != SVt_PVAV) {
        snprintf(err, errlen, "%s: headers must be an array of [name, value] pairs", tname);
        return err;
    }
    AV *av = (AV *)SvRV(sv);
    SSize_t n = av_len(av) + 1;
    pagi_header *h = calloc(n ? (size_t)n : 1, sizeof *h);
    if (!h)
        return "out of memory";
    *store = h;
    for (SSize_t i = 0; i < n; i++) {
        SV **pair = av_fetch(av, i, 0);
        AV *p;
        SV **nm, **val;
        if (!pair || !SvROK(*pair) || SvTYPE(SvRV(*pair)) != SVt_PVAV ||
            !(p = (AV *)SvRV(*pair), nm = av_fetch(p, 0, 0)) || !(val = av_fetch(p, 1, 0)) ||
            !SvOK(*nm) || !SvOK(*val) || get_bytes(aTHX_ *nm, &h[i].name) < 0 ||
            get_bytes(aTHX_ *val, &h[i].value) < 0) {
            snprintf(err, errlen, "%s: header %ld must be a [name, value] pair of byte strings",
                     tname, (long)i);
            return err;
        }
    }
    *hp = h;
    *count = (size_t)n;
    return NULL;
}

#define BAD(fmt) do { snprintf(err, errlen, "%s: " fmt, tname); return err; } while (0)
#define BYTES(key, dst) do { SV *v_ = field(aTHX_ hv, key); \
    if (v_ && get_bytes(aTHX_ v_, &(dst)) < 0) BAD("'" key "' must be a byte string"); } while (0)
#define TEXT(key, dst) do { SV *v_ = field(aTHX_ hv, key); \
    if (v_ && get_text(aTHX_ v_, &(dst)) < 0) BAD("'" key "' must be a string"); } while (0)
#define INT(key, dst) do { SV *v_ = field(aTHX_ hv, key); int64_t i_; \
    if (v_) { if (get_int(aTHX_ v_, &i_) < 0) BAD("'" key "' must be an integer"); (dst) = i_; } } while (0)
#define NUM(key, dst) do { SV *v_ = field(aTHX_ hv, key); \
    if (v_) { if (SvROK(v_) || !looks_like_number(v_)) BAD("'" key "' must be a number"); \
              (dst) = SvNV(v_); } } while (0)
#define BOOL(key, dst) do { SV *v_ = field(aTHX_ hv, key); (dst) = v_ && SvTRUE(v_); } while (0)

const char *perl_event_from_sv(pTHX_ SV *ref, pagi_event *ev, pagi_header **hdrs,
                               pagi_header **hdrs2, char *err, size_t errlen)
{
    *hdrs = *hdrs2 = NULL;
    if (!ref || !SvROK(ref) || SvTYPE(SvRV(ref)) != SVt_PVHV)
        return "send: the event must be a hash reference";
    HV *hv = (HV *)SvRV(ref);
    SV *t = field(aTHX_ hv, "type");
    if (!t)
        return "send: event has no 'type'";
    STRLEN tlen;
    const char *tname = SvPV(t, tlen);
    pagi_event_type type = PAGI_EV_NONE;
    for (int i = 1; i < PAGI_EV__COUNT; i++) {
        const char *n = pagi_event_type_name((pagi_event_type)i);
        if (n && strlen(n) == tlen && memcmp(n, tname, tlen) == 0) {
            type = (pagi_event_type)i;
            break;
        }
    }
    if (type == PAGI_EV_NONE) {
        snprintf(err, errlen, "send: unknown event type '%.100s'", tname);
        return err;
    }
    *ev = PAGI_EVENT_INIT(type);
    tname = pagi_event_type_name(type);
    SV *v;
    switch (type) {
    case PAGI_EV_HTTP_RESPONSE_START:
    case PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START:
    case PAGI_EV_SSE_START:
    case PAGI_EV_SSE_HTTP_RESPONSE_START: {
        int64_t st = 200; /* sse.start: status defaults to 200 (Www.pod) */
        if (!(v = field(aTHX_ hv, "status"))) {
            if (type != PAGI_EV_SSE_START)
                BAD("missing 'status'");
        } else if (get_int(aTHX_ v, &st) < 0)
            BAD("'status' must be an integer");
        ev->status = (int)st;
        BOOL("trailers", ev->trailers);
        if ((v = field(aTHX_ hv, "headers")))
            return get_headers(aTHX_ v, &ev->headers, &ev->header_count, hdrs, tname, err, errlen);
        break;
    }
    case PAGI_EV_HTTP_RESPONSE_TRAILERS:
        if ((v = field(aTHX_ hv, "headers")))
            return get_headers(aTHX_ v, &ev->headers, &ev->header_count, hdrs, tname, err, errlen);
        break;
    case PAGI_EV_HTTP_RESPONSE_BODY:
    case PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY:
    case PAGI_EV_SSE_HTTP_RESPONSE_BODY: {
        pagi_str file = {0};
        BYTES("body", ev->body);
        BOOL("more", ev->more);
        BYTES("file", file);
        INT("offset", ev->offset);
        /* Perl's length => 0 sends nothing; C's length 0 means "to EOF". */
        int zero_length = 0;
        if ((v = field(aTHX_ hv, "length"))) {
            INT("length", ev->length); /* a negative one is refused by the server */
            zero_length = ev->length == 0;
        }
        if ((v = field(aTHX_ hv, "fh"))) {
            IO *io = sv_2io(v);
            PerlIO *pio = io ? IoIFP(io) : NULL;
            if (!pio)
                BAD("'fh' must be an open file handle");
            ev->use_fd = 1;
            ev->fd = PerlIO_fileno(pio);
        }
        if (zero_length && !ev->body.len && (file.ptr != NULL) + ev->use_fd == 1) {
            /* An empty body, as the spec's length => 0 asks; a file that
             * can't be read still fails the send, as it would with a length. */
            if (file.ptr) {
                char path[4096];
                snprintf(path, sizeof path, "%.*s", (int)file.len, file.ptr);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                    snprintf(err, errlen, "%s: cannot open %s: %s", tname, path, strerror(errno));
                    return err;
                }
                close(fd);
            }
            ev->use_fd = 0;
            ev->fd = 0;
            file.ptr = NULL;
        }
        if (file.ptr) {
            char *f = malloc(file.len + 1);
            if (!f)
                return "out of memory";
            memcpy(f, file.ptr, file.len);
            f[file.len] = 0;
            ev->file = f;
            *hdrs2 = (pagi_header *)f; /* freed by the caller */
        }
        break;
    }
    case PAGI_EV_WEBSOCKET_ACCEPT:
        BYTES("subprotocol", ev->subprotocol);
        if ((v = field(aTHX_ hv, "headers")))
            return get_headers(aTHX_ v, &ev->headers, &ev->header_count, hdrs, tname, err, errlen);
        break;
    case PAGI_EV_WEBSOCKET_SEND:
        /* Www.pod: exactly one of them non-null; sending one and dropping the other hides a bug. */
        if (field(aTHX_ hv, "text") && field(aTHX_ hv, "bytes"))
            BAD("needs exactly one of 'bytes' or 'text', not both");
        if ((v = field(aTHX_ hv, "text"))) {
            TEXT("text", ev->text);
            ev->is_text = 1;
        } else if ((v = field(aTHX_ hv, "bytes"))) {
            BYTES("bytes", ev->bytes);
        } else {
            BAD("needs 'bytes' or 'text'");
        }
        break;
    case PAGI_EV_WEBSOCKET_KEEPALIVE:
        NUM("interval", ev->interval);
        NUM("timeout", ev->timeout);
        break;
    case PAGI_EV_WEBSOCKET_CLOSE: {
        int64_t code = 1000;
        INT("code", code);
        ev->code = (int)code;
        TEXT("reason", ev->reason);
        break;
    }
    case PAGI_EV_SSE_SEND:
        /* Www.pod: data is the one required field ('' is a valid, empty payload). */
        if (!field(aTHX_ hv, "data"))
            BAD("needs 'data'");
        TEXT("data", ev->data);
        TEXT("event", ev->event);
        TEXT("id", ev->id);
        if (field(aTHX_ hv, "retry")) {
            INT("retry", ev->retry);
            ev->has_retry = 1; /* Perl's retry => 0 writes "retry: 0" */
        }
        break;
    case PAGI_EV_SSE_COMMENT:
        TEXT("comment", ev->comment);
        break;
    case PAGI_EV_SSE_KEEPALIVE:
        NUM("interval", ev->interval);
        TEXT("comment", ev->comment);
        break;
    case PAGI_EV_LIFESPAN_STARTUP_FAILED:
    case PAGI_EV_LIFESPAN_SHUTDOWN_FAILED:
        TEXT("message", ev->message);
        break;
    default:
        break;
    }
    return NULL;
}

/* ---- the scope hashref ------------------------------------------------ */

static SV *addr_av(pTHX_ const char *host, int port, int unix_ok)
{
    AV *av = newAV();
    av_push(av, newSVpv(host, 0));
    av_push(av, (port < 0 && unix_ok) ? newSV(0) : newSViv(port));
    return newRV_noinc((SV *)av);
}

static SV *text_or_undef(pTHX_ const char *p)
{
    return p ? newSVpv(p, 0) : newSV(0);
}

/* Tls.pod's hash: undef where the server has nothing, the chain an array
 * (empty without a client certificate). The subject is text (UTF-8 as
 * characters); PEM is ASCII. */
static SV *tls_hv(pTHX_ const pagi_tls_info *t)
{
    HV *hv = newHV();
    KSTORE(hv, K_SERVER_CERT, text_or_undef(aTHX_ t->server_cert));
    AV *chain = newAV();
    if (t->client_cert_count)
        av_extend(chain, (SSize_t)t->client_cert_count - 1);
    for (size_t i = 0; i < t->client_cert_count; i++)
        av_push(chain, newSVpv(t->client_cert_chain[i], 0));
    KSTORE(hv, K_CLIENT_CERT_CHAIN, newRV_noinc((SV *)chain));
    SV *name = text_or_undef(aTHX_ t->client_cert_name);
    if (t->client_cert_name)
        sv_utf8_decode(name);
    KSTORE(hv, K_CLIENT_CERT_NAME, name);
    KSTORE(hv, K_CLIENT_CERT_ERROR, text_or_undef(aTHX_ t->client_cert_error));
    KSTORE(hv, K_TLS_VERSION, t->tls_version ? newSViv(t->tls_version) : newSV(0));
    KSTORE(hv, K_CIPHER_SUITE, t->cipher_suite ? newSViv(t->cipher_suite) : newSV(0));
    return newRV_noinc((SV *)hv);
}

SV *perl_scope_hv(pTHX_ pagi_scope *s, SV *handle, SV *state)
{
    HV *hv = newHV();
    hv_ksplit(hv, 32); /* room for every key at once: no split on the way */
    pagi_scope_type type = pagi_scope_type_of(s);
    KSTORE(hv, K_TYPE, newSVpv(pagi_scope_type_name(s), 0));
    if (type == PAGI_SCOPE_LIFESPAN) {
        HV *pagi = pagi_hv(aTHX);
        KSTORE(hv, K_PAGI, newRV_noinc((SV *)pagi));
        /* Lifespan.pod 0.2: is_worker 1 under a master (worker_num 1..N), else 0
         * with no worker_num (single-process mode, -w 0). */
        int is_worker = 0;
        int num = pagi_scope_worker_num(s, &is_worker);
        KSTORE(pagi, K_IS_WORKER, newSViv(is_worker ? 1 : 0));
        if (is_worker)
            KSTORE(pagi, K_WORKER_NUM, newSViv(num));
        KSTORE(hv, K_STATE, SvREFCNT_inc(state));
        /* pagi.pubsub: its subscriptions live as long as the app instance. */
        HV *ext = newHV(), *ps = newHV();
        KSTORE(ps, K_H, newSVsv(handle));
        KSTORE(ext, K_PAGI_PUBSUB, sv_bless(newRV_noinc((SV *)ps), pubsub_stash));
        SV *shared = perl_shared_ext(aTHX);
        if (shared) /* pagi.shared: one object per worker, in every scope */
            KSTORE(ext, K_PAGI_SHARED, SvREFCNT_inc(shared));
        KSTORE(hv, K_EXTENSIONS, newRV_noinc((SV *)ext));
        return newRV_noinc((SV *)hv);
    }
    KSTORE(hv, K_PAGI, SvREFCNT_inc(request_pagi));
    KSTORE(hv, K_HTTP_VERSION, newSVpv(pagi_scope_http_version(s), 0));
    KSTORE(hv, K_METHOD, newSVpv(pagi_scope_method(s), 0));
    KSTORE(hv, K_SCHEME, newSVpv(pagi_scope_scheme(s), 0));
    KSTORE(hv, K_PATH, chars_sv(aTHX_ pagi_scope_path(s)));
    KSTORE(hv, K_RAW_PATH, bytes_sv(aTHX_ pagi_scope_raw_path(s)));
    KSTORE(hv, K_QUERY_STRING, bytes_sv(aTHX_ pagi_scope_query_string(s)));
    KSTORE(hv, K_ROOT_PATH, chars_sv(aTHX_ pagi_scope_root_path(s)));
    size_t n = 0;
    const pagi_header *h = pagi_scope_headers(s, &n);
    AV *headers = newAV();
    av_extend(headers, (SSize_t)n);
    /* Filled in place: av_push checks and grows on every call. */
    SV **slot = AvARRAY(headers);
    for (size_t i = 0; i < n; i++) {
        AV *pair = newAV();
        av_extend(pair, 1);
        AvARRAY(pair)[0] = bytes_sv(aTHX_ h[i].name);
        AvARRAY(pair)[1] = bytes_sv(aTHX_ h[i].value);
        AvFILLp(pair) = 1;
        slot[i] = newRV_noinc((SV *)pair);
    }
    if (n)
        AvFILLp(headers) = (SSize_t)n - 1;
    KSTORE(hv, K_HEADERS, newRV_noinc((SV *)headers));
    int port = 0;
    const char *host = pagi_scope_client(s, &port);
    if (host)
        KSTORE(hv, K_CLIENT, addr_av(aTHX_ host, port, 0));
    host = pagi_scope_server(s, &port);
    if (host)
        KSTORE(hv, K_SERVER, addr_av(aTHX_ host, port, 1));
    if (type == PAGI_SCOPE_WEBSOCKET) {
        AV *sp = newAV();
        size_t k = pagi_scope_subprotocol_count(s);
        for (size_t i = 0; i < k; i++)
            av_push(sp, bytes_sv(aTHX_ pagi_scope_subprotocol(s, i)));
        KSTORE(hv, K_SUBPROTOCOLS, newRV_noinc((SV *)sp));
    }
    HV *ext = newHV();
    static const char *const known[] = {"websocket.http.response", "fullflush"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (pagi_scope_has_extension(s, known[i]))
            HSTORE(ext, known[i], newRV_noinc((SV *)newHV()));
    const pagi_tls_info *tls = pagi_scope_tls(s); /* NULL on cleartext: nothing made */
    if (tls)
        KSTORE(ext, K_TLS, tls_hv(aTHX_ tls));
    KSTORE(hv, K_EXTENSIONS, newRV_noinc((SV *)ext));
    if (state && SvROK(state)) {
        /* A shallow copy: keys private to the scope, values shared. */
        HV *src = (HV *)SvRV(state), *copy = newHV();
        HE *he;
        hv_iterinit(src);
        while ((he = hv_iternext(src)))
            (void)hv_store_ent(copy, hv_iterkeysv(he), newSVsv(hv_iterval(src, he)), 0);
        KSTORE(hv, K_STATE, newRV_noinc((SV *)copy));
    }
    /* pagi.transport (http, websocket, sse) and pagi.connection (http):
     * {h => handle}; for http one Connection (a Transport too) is both. */
    HV *t = newHV();
    KSTORE(t, K_H, newSVsv(handle));
    SV *obj = sv_bless(newRV_noinc((SV *)t),
                       type == PAGI_SCOPE_HTTP ? connection_stash : transport_stash);
    KSTORE(hv, K_PAGI_TRANSPORT, obj);
    if (type == PAGI_SCOPE_HTTP)
        KSTORE(hv, K_PAGI_CONNECTION, SvREFCNT_inc(obj));
    /* pagid.server (the drain notice) and extensions->{'pagi.pubsub'} are the
     * same object again (its class is a PAGI::Server::Pagid::PubSub): no new
     * one per scope. */
    KSTORE(hv, K_PAGID_SERVER, SvREFCNT_inc(obj));
    KSTORE(ext, K_PAGI_PUBSUB, SvREFCNT_inc(obj));
    SV *shared = perl_shared_ext(aTHX);
    if (shared)
        KSTORE(ext, K_PAGI_SHARED, SvREFCNT_inc(shared));
    return newRV_noinc((SV *)hv);
}
