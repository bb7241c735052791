/*
 * access_format.c - compiles access log formats into atoms and renders a
 * request record with them. Text formats escape '"', '\' and every byte
 * outside printable ASCII as \xHH (as nginx does), so a hostile path or
 * header can neither break a line nor forge a field; json escapes to valid
 * JSON whatever the bytes.
 */
#include "access_format.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FMT_CLF "%h - - %t \"%r\" %>s %b"
#define FMT_COMBINED FMT_CLF " \"%{Referer}i\" \"%{User-Agent}i\""
#define MAX_ATOMS 256
#define MAX_HEADER_NAME 128
/* Output bytes one untrusted field may take: keeps a json line whole within
 * ACCESS_FORMAT_LINE_MAX however long the path and headers are. */
#define MAX_FIELD_OUT 4096

/* ---- compiling ---- */

static int add_atom(access_format *f, af_kind kind, const char *text, size_t len)
{
    if (f->n == MAX_ATOMS)
        return -1;
    char *copy = NULL;
    if (text) {
        copy = malloc(len + 1);
        if (!copy)
            return -1;
        for (size_t i = 0; i < len; i++) /* header names are matched lower-case */
            copy[i] = kind == AF_LITERAL ? text[i] : (char)tolower((unsigned char)text[i]);
        copy[len] = '\0';
    }
    f->atoms[f->n++] = (af_atom){.kind = kind, .text = copy, .len = len};
    return 0;
}

/* A %{arg}X atom: the letter after the braces gives the meaning of arg. */
static int braced_kind(char letter, const char *arg, size_t len, af_kind *kind)
{
#define ARG_IS(s) (len == sizeof(s) - 1 && memcmp(arg, s, len) == 0)
    switch (letter) {
    case 'i':
        *kind = AF_REQ_HEADER;
        return len > 0 && len <= MAX_HEADER_NAME ? 0 : -1;
    case 'o':
        *kind = AF_RESP_HEADER;
        return len > 0 && len <= MAX_HEADER_NAME ? 0 : -1;
    case 't':
        if (ARG_IS("iso"))
            *kind = AF_TIME_ISO;
        else if (ARG_IS("msec"))
            *kind = AF_TIME_MSEC;
        else if (ARG_IS("clf"))
            *kind = AF_TIME_CLF;
        else
            return -1;
        return 0;
    case 'T':
        if (ARG_IS("ms"))
            *kind = AF_DURATION_MS;
        else if (ARG_IS("us"))
            *kind = AF_DURATION_US;
        else if (ARG_IS("s"))
            *kind = AF_DURATION_S;
        else
            return -1;
        return 0;
    case 'x': /* the connection's TLS facts; mod_ssl's names work too */
        if (ARG_IS("tls_version") || ARG_IS("SSL_PROTOCOL"))
            *kind = AF_TLS_VERSION;
        else if (ARG_IS("tls_cipher") || ARG_IS("SSL_CIPHER"))
            *kind = AF_TLS_CIPHER;
        else if (ARG_IS("tls_session_reused"))
            *kind = AF_TLS_REUSED;
        else
            return -1;
        return 0;
    default:
        return -1;
    }
#undef ARG_IS
}

static int simple_kind(char letter, af_kind *kind)
{
    static const struct {
        char letter;
        af_kind kind;
    } table[] = {
        {'h', AF_CLIENT},     {'a', AF_CLIENT},    {'t', AF_TIME_CLF}, {'r', AF_REQUEST},
        {'m', AF_METHOD},     {'U', AF_PATH},      {'q', AF_QUERY},    {'H', AF_PROTOCOL},
        {'s', AF_STATUS},     {'b', AF_BYTES_CLF}, {'B', AF_BYTES},    {'D', AF_DURATION_US},
        {'T', AF_DURATION_S}, {'P', AF_PID},       {'X', AF_REASON},   {'y', AF_TYPE},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].letter == letter) {
            *kind = table[i].kind;
            return 0;
        }
    }
    return -1;
}

static int compile_custom(access_format *f, const char *spec, const char **msg, size_t *err_off)
{
    const char *p = spec, *lit = spec;
    while (*p) {
        if (*p != '%') {
            p++;
            continue;
        }
        if (p > lit && add_atom(f, AF_LITERAL, lit, (size_t)(p - lit)) < 0)
            goto too_many;
        const char *start = p++;
        if (*p == '%') { /* "%%" is a literal '%' */
            lit = p++;
            continue;
        }
        if (*p == '>') /* Apache's "final status" marker: we only have one */
            p++;
        af_kind kind;
        const char *arg = NULL;
        size_t arglen = 0;
        if (*p == '{') {
            arg = ++p;
            while (*p && *p != '}')
                p++;
            if (!*p) {
                *msg = "unterminated %{";
                *err_off = (size_t)(start - spec);
                return -1;
            }
            arglen = (size_t)(p - arg);
            p++;
            if (!*p || braced_kind(*p, arg, arglen, &kind) < 0) {
                *msg = "invalid %{...} atom (expected %{name}i, %{name}o, %{iso}t, %{msec}t, "
                       "%{ms}T, %{us}T, %{s}T, %{tls_version}x, %{tls_cipher}x or "
                       "%{tls_session_reused}x)";
                *err_off = (size_t)(start - spec);
                return -1;
            }
        } else if (!*p || simple_kind(*p, &kind) < 0) {
            *msg = *p ? "unknown % atom" : "format ends with a lone %";
            *err_off = (size_t)(start - spec);
            return -1;
        }
        p++;
        int has_arg = kind == AF_REQ_HEADER || kind == AF_RESP_HEADER;
        if (add_atom(f, kind, has_arg ? arg : NULL, has_arg ? arglen : 0) < 0)
            goto too_many;
        lit = p;
    }
    if (p > lit && add_atom(f, AF_LITERAL, lit, (size_t)(p - lit)) < 0)
        goto too_many;
    return 0;
too_many:
    *msg = "format too long (too many atoms, or out of memory)";
    *err_off = (size_t)(p - spec);
    return -1;
}

int access_format_compile(access_format *f, const char *spec, const char **msg, size_t *err_off)
{
    memset(f, 0, sizeof *f);
    *err_off = 0;
    if (strcmp(spec, "json") == 0) {
        f->json = 1;
        f->needs = AF_NEED_TIME_ISO;
        return 0;
    }
    if (strcmp(spec, "clf") == 0)
        spec = FMT_CLF;
    else if (strcmp(spec, "combined") == 0)
        spec = FMT_COMBINED;
    else if (!strchr(spec, '%')) {
        *msg = "expected clf, combined, json or a custom format containing %";
        return -1;
    }
    f->atoms = calloc(MAX_ATOMS, sizeof *f->atoms);
    if (!f->atoms) {
        *msg = "out of memory";
        return -1;
    }
    if (compile_custom(f, spec, msg, err_off) < 0) {
        access_format_free(f);
        return -1;
    }
    for (size_t i = 0; i < f->n; i++) {
        af_atom *a = &f->atoms[i];
        if (a->kind == AF_TIME_CLF)
            f->needs |= AF_NEED_TIME_CLF;
        else if (a->kind == AF_TIME_ISO)
            f->needs |= AF_NEED_TIME_ISO;
        else if (a->kind == AF_RESP_HEADER)
            a->index = f->n_resp++;
    }
    if (f->n_resp) {
        f->needs |= AF_NEED_RESP_HEADERS;
        f->resp_names = calloc(f->n_resp, sizeof *f->resp_names);
        if (!f->resp_names) {
            *msg = "out of memory";
            access_format_free(f);
            return -1;
        }
        for (size_t i = 0; i < f->n; i++)
            if (f->atoms[i].kind == AF_RESP_HEADER)
                f->resp_names[f->atoms[i].index] = f->atoms[i].text;
    }
    return 0;
}

void access_format_free(access_format *f)
{
    for (size_t i = 0; i < f->n; i++)
        free((char *)f->atoms[i].text);
    free(f->atoms);
    free(f->resp_names);
    memset(f, 0, sizeof *f);
}

/* ---- rendering ---- */

typedef struct out {
    char *p;
    size_t n, cap; /* cap excludes the byte kept for the newline */
    int json;
} out;

static void put(out *o, const char *s, size_t len)
{
    if (len > o->cap - o->n)
        len = o->cap - o->n;
    memcpy(o->p + o->n, s, len);
    o->n += len;
}

static void puts_(out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void putf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(out *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        put(o, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* Untrusted bytes: escaped for the line's syntax. */
static void put_esc(out *o, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t limit = o->n + MAX_FIELD_OUT < o->cap ? o->n + MAX_FIELD_OUT : o->cap;
    for (size_t i = 0; i < len && o->n < limit; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        size_t k = 0;
        if (o->json) {
            if (ch == '"' || ch == '\\') {
                e[k++] = '\\';
                e[k++] = (char)ch;
            } else if (ch < 0x20 || ch >= 0x7f) {
                /* \u00XX keeps the line valid JSON even for bytes that are not UTF-8. */
                memcpy(e, "\\u00", 4);
                k = 4;
                e[k++] = hex[ch >> 4];
                e[k++] = hex[ch & 15];
            } else {
                e[k++] = (char)ch;
            }
        } else if (ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f) {
            e[k++] = '\\';
            e[k++] = 'x';
            e[k++] = hex[ch >> 4];
            e[k++] = hex[ch & 15];
        } else {
            e[k++] = (char)ch;
        }
        if (k > limit - o->n)
            break; /* never cut an escape in half */
        put(o, e, k);
    }
}

static void put_esc_or_dash(out *o, const char *s, size_t len)
{
    if (s && len)
        put_esc(o, s, len);
    else
        put(o, "-", 1);
}

/* The n-th '\0'-separated captured response header value. */
static const char *resp_value(const access_record *r, size_t index, size_t *len)
{
    const char *p = r->resp_values, *end = p ? p + r->resp_values_len : NULL;
    for (size_t i = 0; p && p < end; i++) {
        const char *z = memchr(p, '\0', (size_t)(end - p));
        if (!z)
            break;
        if (i == index) {
            *len = (size_t)(z - p);
            return p;
        }
        p = z + 1;
    }
    *len = 0;
    return NULL;
}

static void put_request_line(out *o, const access_record *r)
{
    if (!r->method) {
        put(o, "-", 1);
        return;
    }
    put_esc(o, r->method, strlen(r->method));
    put(o, " ", 1);
    put_esc(o, r->path, r->path_len);
    if (r->query_len) {
        put(o, "?", 1);
        put_esc(o, r->query, r->query_len);
    }
    put(o, " ", 1);
    puts_(o, r->protocol ? r->protocol : "-"); /* a refused request's version is unknown */
}

static void render_atom(out *o, const af_atom *a, const access_record *r)
{
    const char *v;
    size_t len;
    switch (a->kind) {
    case AF_LITERAL:
        put(o, a->text, a->len);
        break;
    case AF_CLIENT:
        put_esc_or_dash(o, r->client, r->client ? strlen(r->client) : 0);
        break;
    case AF_TIME_CLF:
        putf(o, "[%s]", r->time_clf ? r->time_clf : "-");
        break;
    case AF_TIME_ISO:
        puts_(o, r->time_iso ? r->time_iso : "-");
        break;
    case AF_TIME_MSEC:
        putf(o, "%.3f", r->time);
        break;
    case AF_REQUEST:
        put_request_line(o, r);
        break;
    case AF_METHOD:
        put_esc_or_dash(o, r->method, r->method ? strlen(r->method) : 0);
        break;
    case AF_PATH:
        put_esc_or_dash(o, r->path, r->path_len);
        break;
    case AF_QUERY:
        if (r->query_len) {
            put(o, "?", 1);
            put_esc(o, r->query, r->query_len);
        }
        break;
    case AF_PROTOCOL:
        puts_(o, r->protocol ? r->protocol : "-");
        break;
    case AF_STATUS:
        putf(o, "%d", r->status);
        break;
    case AF_BYTES_CLF:
        if (r->bytes)
            putf(o, "%llu", (unsigned long long)r->bytes);
        else
            put(o, "-", 1);
        break;
    case AF_BYTES:
        putf(o, "%llu", (unsigned long long)r->bytes);
        break;
    case AF_DURATION_US:
        putf(o, "%lld", (long long)(r->duration * 1e6));
        break;
    case AF_DURATION_MS:
        putf(o, "%.3f", r->duration * 1e3);
        break;
    case AF_DURATION_S:
        putf(o, "%lld", (long long)r->duration);
        break;
    case AF_REQ_HEADER:
        v = NULL;
        len = 0;
        if (!r->req_header || !r->req_header(r->ud, a->text, &v, &len))
            v = NULL;
        put_esc_or_dash(o, v, len);
        break;
    case AF_RESP_HEADER:
        v = resp_value(r, a->index, &len);
        put_esc_or_dash(o, v, len);
        break;
    case AF_PID:
        putf(o, "%d", r->pid);
        break;
    case AF_REASON:
        puts_(o, r->reason ? r->reason : "-");
        break;
    case AF_TYPE:
        puts_(o, r->type ? r->type : "http");
        break;
    case AF_TLS_VERSION:
        puts_(o, r->tls_version ? r->tls_version : "-");
        break;
    case AF_TLS_CIPHER:
        puts_(o, r->tls_cipher ? r->tls_cipher : "-");
        break;
    case AF_TLS_REUSED: /* nginx's $ssl_session_reused letters */
        puts_(o, !r->tls_version ? "-" : r->tls_reused ? "r" : ".");
        break;
    }
}

/* "key":"escaped" or "key":null */
static void json_str(out *o, const char *key, const char *s, size_t len, int first)
{
    putf(o, "%s\"%s\":", first ? "" : ",", key);
    if (!s) {
        puts_(o, "null");
        return;
    }
    put(o, "\"", 1);
    put_esc(o, s, len);
    put(o, "\"", 1);
}

static void json_header(out *o, const char *key, const access_record *r, const char *name)
{
    const char *v = NULL;
    size_t len = 0;
    if (!r->req_header || !r->req_header(r->ud, name, &v, &len))
        v = NULL;
    json_str(o, key, v, len, 0);
}

static void render_json(out *o, const access_record *r)
{
    put(o, "{", 1);
    json_str(o, "time", r->time_iso, r->time_iso ? strlen(r->time_iso) : 0, 1);
    json_str(o, "client", r->client, r->client ? strlen(r->client) : 0, 0);
    json_str(o, "type", r->type ? r->type : "http", strlen(r->type ? r->type : "http"), 0);
    json_str(o, "method", r->method, r->method ? strlen(r->method) : 0, 0);
    json_str(o, "path", r->method ? r->path : NULL, r->path_len, 0);
    json_str(o, "query", r->method ? r->query : NULL, r->query_len, 0);
    json_str(o, "protocol", r->protocol, r->protocol ? strlen(r->protocol) : 0, 0);
    json_str(o, "tls_version", r->tls_version, r->tls_version ? strlen(r->tls_version) : 0, 0);
    json_str(o, "tls_cipher", r->tls_cipher, r->tls_cipher ? strlen(r->tls_cipher) : 0, 0);
    if (r->tls_version)
        putf(o, ",\"tls_session_reused\":%s", r->tls_reused ? "true" : "false");
    putf(o, ",\"status\":%d,\"bytes\":%llu,\"duration_ms\":%.3f", r->status,
         (unsigned long long)r->bytes, r->duration * 1e3);
    json_header(o, "referer", r, "referer");
    json_header(o, "user_agent", r, "user-agent");
    json_str(o, "reason", r->reason, r->reason ? strlen(r->reason) : 0, 0);
    putf(o, ",\"pid\":%d}", r->pid);
}

size_t access_format_render(const access_format *f, const access_record *r, char *buf, size_t cap)
{
    out o = {.p = buf, .n = 0, .cap = cap - 1, .json = f->json};
    if (f->json) {
        render_json(&o, r);
    } else {
        for (size_t i = 0; i < f->n; i++)
            render_atom(&o, &f->atoms[i], r);
    }
    buf[o.n++] = '\n';
    return o.n;
}
