/*
 * redis_url.h - the `pubsub.url` of the Redis backend, parsed strictly so
 * the config loader reports a bad one at its FILE:LINE:COLUMN and the
 * master never meets a half-understood address. Pure: unit-tested alone.
 */
#ifndef PAGID_REDIS_URL_H
#define PAGID_REDIS_URL_H

#include <stddef.h>

#define REDIS_URL_HOST_MAX 255
#define REDIS_URL_PATH_MAX 107 /* sun_path less its NUL */
#define REDIS_URL_SECRET_MAX 255
#define REDIS_DEFAULT_PORT 6379

typedef struct redis_url {
    int is_unix;                             /* 1: path names a unix socket */
    char host[REDIS_URL_HOST_MAX + 1];       /* TCP: a name or address, no brackets */
    int port;                                /* TCP: 1..65535 (6379 by default) */
    char path[REDIS_URL_PATH_MAX + 1];       /* unix: absolute socket path */
    char user[REDIS_URL_SECRET_MAX + 1];     /* "" = none (AUTH with the password alone) */
    char password[REDIS_URL_SECRET_MAX + 1]; /* "" = no AUTH */
    int db;                                  /* 0..; Redis pub/sub ignores it (see docs) */
} redis_url;

/**
 * Parse one of
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]   (HOST may be [IPV6])
 *   redis+unix://[[USER]:PASSWORD@]/PATH[?db=N]
 *   unix:/PATH
 * USER and PASSWORD may be percent-encoded. 0, or -1 with *msg set (a
 * static string saying what is wrong).
 */
int redis_url_parse(const char *s, redis_url *out, const char **msg);

/** "HOST:PORT", "[V6]:PORT" or "unix:PATH", never the password: for logs. */
void redis_url_where(const redis_url *u, char *out, size_t outlen);

/**
 * url as written with its password replaced by "***" (for pagid -T and
 * anything else that shows the setting): a new string, the caller's to
 * free; NULL when out of memory. A url without credentials comes back as is.
 */
char *redis_url_masked(const char *url);

#endif
