/*
 * origin.h - web origins ("scheme://host[:port]", RFC 6454) for the checks
 * that keep pages of other sites away from an endpoint: parsed into one
 * normal form (lower case, no default port) so a configured origin and a
 * browser's Origin header compare as bytes.
 */
#ifndef PAGID_ORIGIN_H
#define PAGID_ORIGIN_H

#include <stddef.h>

/* The longest normal form kept: scheme, "://", a DNS name, ":65535". */
#define ORIGIN_MAX 300

/**
 * s[len], an http or https origin, in normal form into out (NUL-terminated):
 * 0, or -1 with *why saying what is wrong (no scheme, a path, a bad port...).
 */
int origin_normalize(const char *s, size_t len, char *out, size_t outlen, const char **why);

/**
 * Whether a request whose Origin header is origin[len] may go on: it is
 * the request's own (scheme "http"/"ws" or "https"/"wss", host[host_len]
 * the Host header) where that Host is an address (an IP literal or
 * localhost: a DNS name in Host proves nothing, see DNS rebinding), or one
 * of list (normal forms; "*" allows all). A header that is not an origin
 * ("null", garbage) is allowed only by "*".
 */
int origin_allowed(const char *origin, size_t len, const char *scheme, const char *host,
                   size_t host_len, char *const *list, size_t n);

#endif
