/*
 * redis_resolve.h - one name lookup at a time off the master's loop: a
 * detached thread runs getaddrinfo (which can wait tens of seconds when DNS
 * is down) and hands the result back through a socket the loop polls.
 */
#ifndef PAGID_REDIS_RESOLVE_H
#define PAGID_REDIS_RESOLVE_H

#include <netdb.h>

typedef struct redis_resolver redis_resolver;

/** A resolver (its socket pair made): NULL when out of memory or descriptors. */
redis_resolver *redis_resolver_new(void);
/** Free it; a lookup still running frees its own result when it ends. */
void redis_resolver_free(redis_resolver *rs);
/** In a forked child: close the descriptor, touch nothing else. */
void redis_resolver_child_close(redis_resolver *rs);
/** The descriptor to poll for POLLIN while a lookup runs; -1 when none runs. */
int redis_resolver_pollfd(const redis_resolver *rs);
/** 1 while a lookup runs. */
int redis_resolver_busy(const redis_resolver *rs);
/** Look host:port up (TCP, numeric port): 0 started (or one runs already), -1 (errno). */
int redis_resolver_start(redis_resolver *rs, const char *host, const char *port);
/**
 * After POLLIN: 1 with the lookup's getaddrinfo code in *rc and, when 0,
 * its result in *res (the caller's to freeaddrinfo); 0 when nothing finished.
 */
int redis_resolver_take(redis_resolver *rs, struct addrinfo **res, int *rc);

#endif
