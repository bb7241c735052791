/*
 * http1_response.c - HTTP/1.1 response serialisation (see http1_response.h).
 * This is the single point that guards the wire: every header the app hands
 * us is checked for CR/LF/NUL before a byte is written (PAGI Www, "Header
 * byte safety"), and the server owns framing, Connection and Date.
 */
#include "http1_response.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http1_parser_int.h" /* h1_tchar */

static int name_is(const pagi_header *h, const char *lit)
{
    size_t n = strlen(lit);
    return h->name.len == n && strncasecmp(h->name.ptr, lit, n) == 0;
}

/*
 * Whether any byte of p is below 14 (where CR, LF and NUL are), eight bytes
 * a step: every value of every response head is checked, and almost none
 * has such a byte, so the exact byte loop runs only after this says yes.
 */
static int value_has_ctl_below_14(const char *p, size_t n)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        if ((x - 14 * ones) & ~x & highs) /* a byte below 14 (or a false alarm at >= 0x80) */
            return 1;
    }
    if (n >= 8 && i < n) { /* the tail: the last eight bytes, overlapping the loop's */
        uint64_t x;
        memcpy(&x, p + n - 8, 8);
        return ((x - 14 * ones) & ~x & highs) != 0;
    }
    for (; i < n; i++)
        if ((unsigned char)p[i] < 14)
            return 1;
    return 0;
}

/* Whether every byte of a name is a token character: four bytes a step,
 * one test per step (each name of every response head comes here). */
static int name_is_token(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        if (!(h1_tchar[u[i]] & h1_tchar[u[i + 1]] & h1_tchar[u[i + 2]] & h1_tchar[u[i + 3]]))
            return 0;
    for (; i < n; i++)
        if (!h1_tchar[u[i]])
            return 0;
    return 1;
}

int h1_header_check(const pagi_header *h, const char **err)
{
    if (!h->name.ptr || h->name.len == 0) {
        *err = "empty header name";
        return -1;
    }
    if (!name_is_token(h->name.ptr, h->name.len)) {
        *err = "header name is not a token";
        return -1;
    }
    if (h->value.len && !h->value.ptr) {
        *err = "header value is NULL";
        return -1;
    }
    if (value_has_ctl_below_14(h->value.ptr, h->value.len)) {
        for (size_t i = 0; i < h->value.len; i++) {
            char c = h->value.ptr[i];
            if (c == '\r' || c == '\n' || c == '\0') {
                *err = "header value contains CR/LF/NUL";
                return -1;
            }
        }
    }
    return 0;
}

static int check_all(const pagi_header *h, size_t n, const char **err)
{
    for (size_t i = 0; i < n; i++)
        if (h1_header_check(&h[i], err) < 0)
            return -1;
    return 0;
}

/* The app's content-length: digits with optional surrounding OWS. */
static int parse_clen(pagi_str v, int64_t *out)
{
    size_t i = 0, e = v.len;
    while (i < e && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
        i++;
    while (e > i && (v.ptr[e - 1] == ' ' || v.ptr[e - 1] == '\t'))
        e--;
    if (i == e)
        return -1;
    int64_t n = 0;
    for (; i < e; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return -1;
        int d = v.ptr[i] - '0';
        if (n > (INT64_MAX - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    *out = n;
    return 0;
}

/* Names go out lower-cased, as over HTTP/2 (pagi(3)): one rule for every
 * carrier, and a name is a token, so only A-Z change. */
static int put_header(buf *out, pagi_str name, pagi_str value)
{
    char *w = buf_reserve(out, name.len + value.len + 4);
    if (!w)
        return -1;
    for (size_t i = 0; i < name.len; i++) {
        char c = name.ptr[i];
        *w++ = (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
    }
    *w++ = ':';
    *w++ = ' ';
    if (value.len)
        memcpy(w, value.ptr, value.len);
    w += value.len;
    *w++ = '\r';
    *w++ = '\n';
    buf_commit(out, name.len + value.len + 4);
    return 0;
}

static inline pagi_str S(const char *s)
{
    return (pagi_str){s, strlen(s)};
}

/* "HTTP/1.1 200 OK\r\n" without printf, which costs more than the rest of
 * a small response head. */
static int put_status_line(buf *out, int status)
{
    if (status < 100 || status > 999)
        return buf_printf(out, "HTTP/1.1 %d %s\r\n", status, h1_reason_phrase(status));
    const char *reason = h1_reason_phrase(status);
    size_t rlen = strlen(reason);
    char *w = buf_reserve(out, 13 + rlen + 2);
    if (!w)
        return -1;
    memcpy(w, "HTTP/1.1 ", 9);
    w[9] = (char)('0' + status / 100);
    w[10] = (char)('0' + status / 10 % 10);
    w[11] = (char)('0' + status % 10);
    w[12] = ' ';
    memcpy(w + 13, reason, rlen);
    memcpy(w + 13 + rlen, "\r\n", 2);
    buf_commit(out, 13 + rlen + 2);
    return 0;
}

/* n in hex followed by CRLF, into tmp (at least 19 bytes); returns the length. */
static size_t chunk_size_line(char *tmp, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char rev[16];
    size_t k = 0;
    do {
        rev[k++] = hex[n & 15];
        n >>= 4;
    } while (n);
    for (size_t i = 0; i < k; i++)
        tmp[i] = rev[k - 1 - i];
    tmp[k] = '\r';
    tmp[k + 1] = '\n';
    return k + 2;
}

int h1_response_head(buf *out, int status, const pagi_header *headers, size_t n,
                     const h1_response_ctx *ctx, h1_response_plan *plan, const char **err)
{
    if (status < 100 || status > 999) {
        *err = "invalid status";
        return -1;
    }
    if (check_all(headers, n, err) < 0)
        return -1;

    int64_t clen = -1;
    int have_date = 0;
    for (size_t i = 0; i < n; i++) {
        if (name_is(&headers[i], "content-length")) {
            int64_t v;
            if (parse_clen(headers[i].value, &v) < 0) {
                *err = "invalid content-length";
                return -1;
            }
            if (clen >= 0 && v != clen) {
                *err = "conflicting content-length headers";
                return -1;
            }
            clen = v;
        } else if (name_is(&headers[i], "date")) {
            have_date = 1;
        }
    }

    int informational = status < 200;
    int no_body = informational || status == 204 || status == 304 || ctx->head_request;
    /* Content-Length never goes out on 1xx/204 (RFC 9110 §8.6); HEAD and 304
     * keep the app's, which describes the representation. */
    int drop_clen = informational || status == 204;
    int chunked = 0, keep_alive = ctx->keep_alive;
    if (!no_body) {
        if (ctx->trailers && ctx->http_minor == 1) {
            chunked = 1; /* trailers need chunked framing; the length goes */
            drop_clen = 1;
        } else if (clen < 0) {
            if (ctx->http_minor == 1)
                chunked = 1;
            else
                keep_alive = 0; /* HTTP/1.0: the close delimits the body */
        }
    }
    if (status == 101)
        keep_alive = 1; /* the connection switches protocols, it stays */

    plan->chunked = chunked;
    plan->keep_alive = keep_alive;
    plan->no_body = no_body;
    plan->content_length = drop_clen ? -1 : clen;

    size_t mark = buf_size(out); /* not len: appends may compact */
    int rc = put_status_line(out, status);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const pagi_header *h = &headers[i];
        if (name_is(h, "transfer-encoding"))
            continue;
        /* 101's Connection: upgrade belongs to the handshake: keep it */
        if (name_is(h, "connection") && status != 101)
            continue;
        if (drop_clen && name_is(h, "content-length"))
            continue;
        rc = put_header(out, h->name, h->value);
    }
    /* interim responses carry neither Date nor connection management */
    int interim = informational && status != 101;
    if (rc == 0 && !have_date && !interim && ctx->date)
        rc = put_header(out, S("date"), S(ctx->date));
    if (rc == 0 && chunked)
        rc = put_header(out, S("transfer-encoding"), S("chunked"));
    if (rc == 0 && !interim && status != 101) {
        if (ctx->http_minor == 0 || (keep_alive && ctx->announce_keep_alive))
            rc = put_header(out, S("connection"), S(keep_alive ? "keep-alive" : "close"));
        else if (!keep_alive)
            rc = put_header(out, S("connection"), S("close"));
    }
    if (rc == 0)
        rc = buf_append(out, "\r\n", 2);
    if (rc < 0) {
        out->len = out->off + mark;
        *err = "out of memory";
        return -1;
    }
    return 0;
}

int h1_chunk_header(buf *out, size_t n)
{
    char tmp[32];
    return buf_append(out, tmp, chunk_size_line(tmp, n));
}

int h1_chunk_append(buf *out, const char *data, size_t n)
{
    if (n == 0)
        return 0; /* a zero-size chunk would end the body */
    char tmp[32];
    size_t k = chunk_size_line(tmp, n);
    char *w = buf_reserve(out, k + n + 2);
    if (!w)
        return -1;
    memcpy(w, tmp, k);
    memcpy(w + k, data, n);
    memcpy(w + k + n, "\r\n", 2);
    buf_commit(out, k + n + 2);
    return 0;
}

int h1_chunk_last(buf *out, const pagi_header *trailers, size_t n, const char **err)
{
    const char *dummy;
    if (!err)
        err = &dummy;
    if (check_all(trailers, n, err) < 0)
        return -1;
    size_t mark = buf_size(out); /* not len: appends may compact */
    int rc = buf_append(out, "0\r\n", 3);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const pagi_header *h = &trailers[i];
        /* framing fields are forbidden in trailers (RFC 9110 §6.5.1) */
        if (name_is(h, "transfer-encoding") || name_is(h, "content-length") ||
            name_is(h, "connection"))
            continue;
        rc = put_header(out, h->name, h->value);
    }
    if (rc == 0)
        rc = buf_append(out, "\r\n", 2);
    if (rc < 0) {
        out->len = out->off + mark;
        *err = "out of memory";
    }
    return rc;
}

int h1_error_response(buf *out, int status, const char *text, const char *date, int keep_alive)
{
    if (!text)
        text = h1_reason_phrase(status);
    if (!date)
        date = h1_date_now((long)time(NULL));
    size_t tl = strlen(text);
    size_t mark = buf_size(out); /* not len: appends may compact */
    int rc = buf_printf(out,
                        "HTTP/1.1 %d %s\r\n"
                        "content-type: text/plain; charset=utf-8\r\n"
                        "content-length: %zu\r\n"
                        "date: %s\r\n"
                        "%s"
                        "\r\n",
                        status, h1_reason_phrase(status), tl + 1, date,
                        keep_alive ? "" : "connection: close\r\n");
    if (rc == 0)
        rc = buf_append(out, text, tl);
    if (rc == 0)
        rc = buf_append(out, "\n", 1);
    if (rc < 0)
        out->len = out->off + mark;
    return rc;
}

const char *h1_reason_phrase(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 102:
        return "Processing";
    case 103:
        return "Early Hints";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 203:
        return "Non-Authoritative Information";
    case 204:
        return "No Content";
    case 205:
        return "Reset Content";
    case 206:
        return "Partial Content";
    case 207:
        return "Multi-Status";
    case 208:
        return "Already Reported";
    case 226:
        return "IM Used";
    case 300:
        return "Multiple Choices";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 305:
        return "Use Proxy";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 407:
        return "Proxy Authentication Required";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 418:
        return "I'm a teapot";
    case 421:
        return "Misdirected Request";
    case 422:
        return "Unprocessable Content";
    case 423:
        return "Locked";
    case 424:
        return "Failed Dependency";
    case 425:
        return "Too Early";
    case 426:
        return "Upgrade Required";
    case 428:
        return "Precondition Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 506:
        return "Variant Also Negotiates";
    case 507:
        return "Insufficient Storage";
    case 508:
        return "Loop Detected";
    case 510:
        return "Not Extended";
    case 511:
        return "Network Authentication Required";
    default:
        return "Unknown";
    }
}

const char *h1_date_now(long now)
{
    /* Single-threaded worker: one cache, rebuilt when the second changes. */
    static char cache[32];
    static long cached = -1;
    if (now != cached) {
        static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
        static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        time_t t = (time_t)now;
        struct tm tm;
        gmtime_r(&t, &tm);
        /* by hand, not strftime: IMF-fixdate is English whatever the locale */
        snprintf(cache, sizeof cache, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
                 tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                 tm.tm_sec);
        cached = now;
    }
    return cache;
}
