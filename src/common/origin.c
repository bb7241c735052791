/*
 * origin.c - web origins in one normal form and the same-origin-or-listed
 * rule (origin.h), shared by the config loader (pubsub.allowed_origins,
 * checked at FILE:LINE:COLUMN) and the `pubsub` app's check of each request.
 */
#include "origin.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

int origin_normalize(const char *s, size_t len, char *out, size_t outlen, const char **why)
{
    const char *scheme;
    size_t skip;
    unsigned defport;
    if (len >= 7 && !strncasecmp(s, "http://", 7)) {
        scheme = "http";
        skip = 7;
        defport = 80;
    } else if (len >= 8 && !strncasecmp(s, "https://", 8)) {
        scheme = "https";
        skip = 8;
        defport = 443;
    } else {
        *why = "an origin is http://HOST[:PORT] or https://HOST[:PORT]";
        return -1;
    }
    char host[256];
    size_t h = 0, i = skip;
    if (i < len && s[i] == '[') { /* an IPv6 literal, kept with its brackets */
        while (i < len && s[i] != ']' && h + 2 < sizeof host)
            host[h++] = lower(s[i++]);
        if (i == len || s[i] != ']') {
            *why = "an IPv6 address is written [ADDRESS]";
            return -1;
        }
        host[h++] = s[i++];
        for (size_t k = 1; k + 1 < h; k++)
            if (!((host[k] >= '0' && host[k] <= '9') || (host[k] >= 'a' && host[k] <= 'f') ||
                  host[k] == ':' || host[k] == '.')) {
                *why = "an IPv6 address is written [ADDRESS]";
                return -1;
            }
    } else {
        while (i < len && s[i] != ':' && s[i] != '/' && h + 1 < sizeof host) {
            char c = lower(s[i++]);
            if (!host_char(c)) {
                *why = "a host name has letters, digits, '-' and '.' only";
                return -1;
            }
            host[h++] = c;
        }
    }
    if (h == 0 || (h == 2 && host[0] == '[')) {
        *why = "the host is missing";
        return -1;
    }
    unsigned port = defport;
    if (i < len && s[i] == ':') {
        i++;
        size_t digits = 0;
        port = 0;
        for (; i < len && s[i] >= '0' && s[i] <= '9' && digits < 6; i++, digits++)
            port = port * 10 + (unsigned)(s[i] - '0');
        if (digits == 0 || digits > 5 || port == 0 || port > 65535) {
            *why = "the port is a number from 1 to 65535";
            return -1;
        }
    }
    if (i != len) {
        *why = "an origin has no path, query or trailing '/' (scheme://host[:port])";
        return -1;
    }
    int n = port == defport ? snprintf(out, outlen, "%s://%.*s", scheme, (int)h, host)
                            : snprintf(out, outlen, "%s://%.*s:%u", scheme, (int)h, host, port);
    if (n < 0 || (size_t)n >= outlen) {
        *why = "too long";
        return -1;
    }
    return 0;
}

/*
 * Does the Host header name the server by an address (an IPv4 literal, a
 * bracketed IPv6 literal, or localhost), with an optional port? Only then
 * can "Origin equals scheme://Host" prove a page is the server's own: a DNS
 * name is the client's to choose, and DNS rebinding points an attacker's
 * name at the server, so its page sends that name as both Host and Origin.
 */
static int host_is_address(const char *host, size_t len)
{
    size_t end = len;
    if (len && host[0] == '[') {
        const char *close = memchr(host, ']', len);
        if (!close || close == host + 1)
            return 0;
        for (const char *p = host + 1; p < close; p++)
            if (!(isxdigit((unsigned char)*p) || *p == ':' || *p == '.'))
                return 0;
        end = (size_t)(close - host) + 1;
        return end == len || host[end] == ':';
    }
    const char *colon = memchr(host, ':', len);
    if (colon)
        end = (size_t)(colon - host);
    if (end == 9 && !strncasecmp(host, "localhost", 9))
        return 1;
    int dots = 0, digits = 0;
    for (size_t i = 0; i < end; i++) {
        if (host[i] == '.') {
            if (!digits)
                return 0;
            dots++;
            digits = 0;
        } else if (host[i] >= '0' && host[i] <= '9' && ++digits <= 3) {
            continue;
        } else {
            return 0;
        }
    }
    return dots == 3 && digits > 0;
}

int origin_allowed(const char *origin, size_t len, const char *scheme, const char *host,
                   size_t host_len, char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], "*"))
            return 1;
    char got[ORIGIN_MAX], own[ORIGIN_MAX], self[ORIGIN_MAX];
    const char *why;
    if (origin_normalize(origin, len, got, sizeof got, &why) < 0)
        return 0; /* "null" (a sandboxed page, a file) or garbage */
    /* The request's own origin: its scheme (a websocket's ws/wss is the
     * page's http/https) and its Host header. */
    int tls = scheme && (!strcmp(scheme, "https") || !strcmp(scheme, "wss"));
    int k = snprintf(self, sizeof self, "%s://%.*s", tls ? "https" : "http",
                     (int)(host_len < 256 ? host_len : 256), host ? host : "");
    if (host && host_len > 0 && host_is_address(host, host_len) && k > 0 &&
        (size_t)k < sizeof self &&
        origin_normalize(self, (size_t)k, own, sizeof own, &why) == 0 && !strcmp(got, own))
        return 1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], got))
            return 1;
    return 0;
}
