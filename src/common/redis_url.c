/*
 * redis_url.c - parsing `pubsub.url` (redis_url.h). Every field is copied
 * into fixed arrays of the result, so it owns nothing and needs no free.
 */
#include "redis_url.h"
#include "hexdigit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Percent-decode s[0..n) into out (size cap): 0, or -1 with *msg. */
static int decode(const char *s, size_t n, char *out, size_t cap, const char **msg)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n) {
                *msg = "a '%' in the user or password is not followed by two hex digits";
                return -1;
            }
            int a = hex_digit_value((unsigned char)s[i + 1]),
                b = hex_digit_value((unsigned char)s[i + 2]);
            if (a < 0 || b < 0) {
                *msg = "a '%' in the user or password is not followed by two hex digits";
                return -1;
            }
            c = a * 16 + b;
            i += 2;
        }
        if (c == 0 || c == '\r' || c == '\n') {
            *msg = "the user or password holds a NUL or line break";
            return -1;
        }
        if (j + 1 >= cap) {
            *msg = "the user or password is too long";
            return -1;
        }
        out[j++] = (char)c;
    }
    out[j] = '\0';
    return 0;
}

/* "[USER]:PASSWORD@" at the head of s (up to end): parsed into u, and
 * where the rest starts; s itself when there is none. NULL with *msg. */
static const char *userinfo(const char *s, const char *end, redis_url *u, const char **msg)
{
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p; /* the last one: a raw '@' in a password is forgiven */
    if (!at)
        return s;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    if (!colon) {
        *msg = "credentials must be written ':PASSWORD@' or 'USER:PASSWORD@'";
        return NULL;
    }
    if (decode(s, (size_t)(colon - s), u->user, sizeof u->user, msg) < 0 ||
        decode(colon + 1, (size_t)(at - colon - 1), u->password, sizeof u->password, msg) < 0)
        return NULL;
    if (!u->password[0]) {
        *msg = "the password after ':' is empty";
        return NULL;
    }
    return at + 1;
}

/* Digits only, within [lo, hi]: the value, or -1. */
static long number(const char *s, size_t n, long lo, long hi)
{
    if (n == 0 || n > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= lo && v <= hi ? v : -1;
}

static int set_path(redis_url *u, const char *p, size_t n, const char **msg)
{
    if (n == 0 || p[0] != '/') {
        *msg = "a unix socket path must be absolute (unix:/run/redis/redis.sock)";
        return -1;
    }
    if (n > REDIS_URL_PATH_MAX) {
        *msg = "the unix socket path is too long (at most 107 bytes)";
        return -1;
    }
    memcpy(u->path, p, n);
    u->path[n] = '\0';
    u->is_unix = 1;
    return 0;
}

static int parse_unix(const char *s, redis_url *u, const char **msg)
{
    const char *end = s + strlen(s);
    const char *q = strchr(s, '?');
    const char *rest = userinfo(s, q ? q : end, u, msg);
    if (!rest)
        return -1;
    if (set_path(u, rest, (size_t)((q ? q : end) - rest), msg) < 0)
        return -1;
    if (q) {
        long db = strncmp(q, "?db=", 4) ? -1 : number(q + 4, strlen(q + 4), 0, 1000000);
        if (db < 0) {
            *msg = "after the socket path only '?db=N' may follow";
            return -1;
        }
        u->db = (int)db;
    }
    return 0;
}

static int parse_tcp(const char *s, redis_url *u, const char **msg)
{
    const char *end = s + strlen(s);
    const char *slash = strchr(s, '/');
    const char *auth_end = slash ? slash : end;
    const char *h = userinfo(s, auth_end, u, msg);
    if (!h)
        return -1;
    const char *hend, *after;
    if (*h == '[') {
        hend = memchr(h, ']', (size_t)(auth_end - h));
        if (!hend) {
            *msg = "an IPv6 address needs its closing ']'";
            return -1;
        }
        after = hend + 1;
        h++;
    } else {
        hend = h;
        while (hend < auth_end && *hend != ':')
            hend++;
        after = hend;
    }
    size_t hn = (size_t)(hend - h);
    if (hn == 0) {
        *msg = "no host (expected redis://HOST[:PORT][/DB])";
        return -1;
    }
    if (hn > REDIS_URL_HOST_MAX) {
        *msg = "the host name is too long";
        return -1;
    }
    for (size_t i = 0; i < hn; i++) {
        unsigned char c = (unsigned char)h[i];
        if (c <= 0x20 || c == 0x7f || c == '@' || c == '?' || c == '#' || c == '%') {
            *msg = "the host holds a character no host name has";
            return -1;
        }
    }
    memcpy(u->host, h, hn);
    u->host[hn] = '\0';
    u->port = REDIS_DEFAULT_PORT;
    if (after < auth_end) {
        if (*after != ':') {
            *msg = "expected ':PORT' or '/DB' after the host";
            return -1;
        }
        long port = number(after + 1, (size_t)(auth_end - after - 1), 1, 65535);
        if (port < 0) {
            *msg = "the port must be a number from 1 to 65535";
            return -1;
        }
        u->port = (int)port;
    }
    if (slash && slash + 1 < end) {
        long db = number(slash + 1, (size_t)(end - slash - 1), 0, 1000000);
        if (db < 0) {
            *msg = "the database after '/' must be a number (redis://HOST:PORT/0)";
            return -1;
        }
        u->db = (int)db;
    }
    return 0;
}

int redis_url_parse(const char *s, redis_url *out, const char **msg)
{
    redis_url u;
    memset(&u, 0, sizeof u);
    int rc;
    if (!strncmp(s, "redis://", 8))
        rc = parse_tcp(s + 8, &u, msg);
    else if (!strncmp(s, "redis+unix://", 13))
        rc = parse_unix(s + 13, &u, msg);
    else if (!strncmp(s, "unix:", 5))
        rc = set_path(&u, s + 5, strlen(s + 5), msg);
    else {
        *msg = "expected redis://HOST[:PORT][/DB], redis+unix:///PATH or unix:/PATH";
        rc = -1;
    }
    if (rc == 0)
        *out = u;
    return rc;
}

void redis_url_where(const redis_url *u, char *out, size_t outlen)
{
    if (u->is_unix)
        snprintf(out, outlen, "unix:%s", u->path);
    else if (strchr(u->host, ':'))
        snprintf(out, outlen, "[%s]:%d", u->host, u->port);
    else
        snprintf(out, outlen, "%s:%d", u->host, u->port);
}

char *redis_url_masked(const char *url)
{
    const char *auth = strstr(url, "://");
    const char *at = NULL, *colon = NULL;
    if (auth) {
        auth += 3;
        /* The credentials end at the last '@' before the first '/', as parsed. */
        const char *end = strchr(auth, '/');
        if (!end)
            end = auth + strlen(auth);
        for (const char *p = auth; p < end; p++)
            if (*p == '@')
                at = p;
        if (at)
            colon = memchr(auth, ':', (size_t)(at - auth));
    }
    if (!at)
        return strdup(url);
    const char *keep_to = colon ? colon + 1 : auth; /* no ':': all of it hidden */
    size_t head = (size_t)(keep_to - url), tail = strlen(at);
    char *out = malloc(head + 3 + tail + 1);
    if (!out)
        return NULL;
    memcpy(out, url, head);
    memcpy(out + head, "***", 3);
    memcpy(out + head + 3, at, tail + 1);
    return out;
}
