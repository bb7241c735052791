/*
 * static_http.c - validators, dates and ranges for the static app. Pure
 * functions over header values, so the unit suite can pin the RFC 9110
 * corner cases down without a server.
 */
#include "static_http.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const wkday[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const month[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

size_t static_etag(char out[STATIC_ETAG_MAX], int64_t mtime, int64_t size)
{
    int n = snprintf(out, STATIC_ETAG_MAX, "\"%" PRIx64 "-%" PRIx64 "\"", (uint64_t)mtime,
                     (uint64_t)size);
    return n > 0 ? (size_t)n : 0;
}

size_t static_http_date(char out[STATIC_DATE_MAX], int64_t t)
{
    struct tm tm;
    time_t tt = (time_t)t;
    if (!gmtime_r(&tt, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        out[0] = '\0';
        return 0;
    }
    int n =
        snprintf(out, STATIC_DATE_MAX, "%s, %02d %s %04d %02d:%02d:%02d GMT", wkday[tm.tm_wday],
                 tm.tm_mday, month[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return n > 0 ? (size_t)n : 0;
}

/* ---- HTTP-date parsing: a cursor over the value ---- */

typedef struct cur {
    const char *p, *end;
} cur;

static int digits(cur *c, int min, int max, int *out)
{
    int n = 0, v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && n < max) {
        v = v * 10 + (*c->p++ - '0');
        n++;
    }
    *out = v;
    return n >= min ? 0 : -1;
}

static int lit(cur *c, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return -1;
    c->p += n;
    return 0;
}

static int month_of(cur *c, int *mon)
{
    for (int i = 0; i < 12; i++)
        if (lit(c, month[i]) == 0) {
            *mon = i;
            return 0;
        }
    return -1;
}

static int hms(cur *c, struct tm *tm)
{
    if (digits(c, 2, 2, &tm->tm_hour) || lit(c, ":") || digits(c, 2, 2, &tm->tm_min) ||
        lit(c, ":") || digits(c, 2, 2, &tm->tm_sec))
        return -1;
    return 0;
}

int static_parse_http_date(const char *s, size_t len, int64_t *t)
{
    cur c = {s, s + len};
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
        c.p++;
    while (c.end > c.p && (c.end[-1] == ' ' || c.end[-1] == '\t'))
        c.end--;
    const char *comma = memchr(c.p, ',', (size_t)(c.end - c.p));
    if (comma) {
        c.p = comma + 1;
        if (lit(&c, " ") || digits(&c, 2, 2, &tm.tm_mday))
            return -1;
        if (c.p < c.end && *c.p == '-') { /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
            int yy;
            if (lit(&c, "-") || month_of(&c, &tm.tm_mon) || lit(&c, "-") || digits(&c, 2, 2, &yy))
                return -1;
            tm.tm_year = yy < 70 ? yy + 100 : yy;
        } else { /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
            int y;
            if (lit(&c, " ") || month_of(&c, &tm.tm_mon) || lit(&c, " ") || digits(&c, 4, 4, &y))
                return -1;
            tm.tm_year = y - 1900;
        }
        if (lit(&c, " ") || hms(&c, &tm) || lit(&c, " GMT") || c.p != c.end)
            return -1;
    } else { /* asctime: Sun Nov  6 08:49:37 1994 */
        int y;
        if (c.end - c.p < 4)
            return -1;
        c.p += 3;
        if (lit(&c, " ") || month_of(&c, &tm.tm_mon) || lit(&c, " "))
            return -1;
        if (c.p < c.end && *c.p == ' ')
            c.p++;
        if (digits(&c, 1, 2, &tm.tm_mday) || lit(&c, " ") || hms(&c, &tm) || lit(&c, " ") ||
            digits(&c, 4, 4, &y) || c.p != c.end)
            return -1;
        tm.tm_year = y - 1900;
    }
    if (tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    *t = (int64_t)timegm(&tm);
    return 0;
}

/* ---- entity tags ---- */

int static_etag_list_match(pagi_str list, const char *etag, size_t etag_len, int weak)
{
    const char *p = list.ptr, *end = list.ptr + list.len;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        if (p >= end)
            return 0;
        if (*p == '*')
            return 1;
        int is_weak = 0;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/') {
            is_weak = 1;
            p += 2;
        }
        if (p >= end || *p != '"')
            return 0; /* malformed: nothing further can be trusted */
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!q)
            return 0;
        size_t n = (size_t)(q - p + 1);
        if ((weak || !is_weak) && n == etag_len && memcmp(p, etag, n) == 0)
            return 1;
        p = q + 1;
    }
}

/* ---- ranges ---- */

/* Digits into *v, saturating at INT64_MAX; 0, or -1 when there are none. */
static int range_num(cur *c, int64_t *v)
{
    const char *start = c->p;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int d = *c->p++ - '0';
        x = x > (INT64_MAX - d) / 10 ? INT64_MAX : x * 10 + d;
    }
    *v = x;
    return c->p > start ? 0 : -1;
}

static_range_rc static_parse_range(pagi_str value, int64_t size, int64_t *first, int64_t *last)
{
    cur c = {value.ptr, value.ptr + value.len};
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
        c.p++;
    while (c.end > c.p && (c.end[-1] == ' ' || c.end[-1] == '\t'))
        c.end--;
    if (c.end - c.p < 6 || strncasecmp(c.p, "bytes=", 6) != 0)
        return STATIC_RANGE_NONE;
    c.p += 6;
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
        c.p++;
    size_t left = c.p < c.end ? (size_t)(c.end - c.p) : 0;
    if (left && memchr(c.p, ',', left))
        return STATIC_RANGE_NONE; /* several ranges: the whole file (documented) */
    if (size <= 0)
        return STATIC_RANGE_NONE; /* nothing to cut: an empty 200 */
    int64_t a, b;
    if (c.p < c.end && *c.p == '-') {
        c.p++;
        if (range_num(&c, &b) < 0 || c.p != c.end)
            return STATIC_RANGE_NONE;
        if (b == 0)
            return STATIC_RANGE_UNSATISFIABLE;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return STATIC_RANGE_OK;
    }
    if (range_num(&c, &a) < 0 || c.p >= c.end || *c.p++ != '-')
        return STATIC_RANGE_NONE;
    if (c.p == c.end) {
        b = INT64_MAX;
    } else if (range_num(&c, &b) < 0 || c.p != c.end || b < a) {
        return STATIC_RANGE_NONE;
    }
    if (a >= size)
        return STATIC_RANGE_UNSATISFIABLE;
    *first = a;
    *last = b >= size ? size - 1 : b;
    return STATIC_RANGE_OK;
}

/* ---- preconditions ---- */

static_cond static_evaluate(const static_validators *v, const char *etag, size_t etag_len,
                            int64_t mtime)
{
    int64_t t;
    if (v->has_if_match) {
        if (!static_etag_list_match(v->if_match, etag, etag_len, 0))
            return STATIC_COND_PRECONDITION;
    } else if (v->has_if_unmodified &&
               static_parse_http_date(v->if_unmodified.ptr, v->if_unmodified.len, &t) == 0 &&
               mtime > t) {
        return STATIC_COND_PRECONDITION;
    }
    if (v->has_if_none_match) {
        if (static_etag_list_match(v->if_none_match, etag, etag_len, 1))
            return STATIC_COND_NOT_MODIFIED;
    } else if (v->has_if_modified &&
               static_parse_http_date(v->if_modified.ptr, v->if_modified.len, &t) == 0 &&
               mtime <= t) {
        return STATIC_COND_NOT_MODIFIED;
    }
    if (!v->has_if_range)
        return STATIC_COND_RANGE_ALLOWED;
    pagi_str ir = v->if_range;
    while (ir.len && (ir.ptr[0] == ' ' || ir.ptr[0] == '\t')) {
        ir.ptr++;
        ir.len--;
    }
    while (ir.len && (ir.ptr[ir.len - 1] == ' ' || ir.ptr[ir.len - 1] == '\t'))
        ir.len--;
    if (ir.len && (ir.ptr[0] == '"' || ir.ptr[0] == 'W')) {
        /* An entity tag: strong comparison, and exactly one tag. */
        return (ir.len == etag_len && memcmp(ir.ptr, etag, etag_len) == 0)
                   ? STATIC_COND_RANGE_ALLOWED
                   : STATIC_COND_FULL;
    }
    if (static_parse_http_date(ir.ptr, ir.len, &t) == 0 && t == mtime && v->now - mtime >= 1)
        return STATIC_COND_RANGE_ALLOWED;
    return STATIC_COND_FULL;
}
