/*
 * pubsub_redis.h - the master's connection to Redis for pub/sub across
 * machines (docs/pubsub.md, "Across machines: Redis"): two non-blocking
 * connections driven from the master's ppoll loop, one that PUBLISHes and
 * one that SUBSCRIBEs, with reconnection on a capped backoff and a bounded
 * buffer of publishes while Redis is away. Never blocks, except for the
 * lookup of a host *name* (an address or a unix socket needs none).
 */
#ifndef PAGID_PUBSUB_REDIS_H
#define PAGID_PUBSUB_REDIS_H

#include <poll.h>
#include <stddef.h>

#include "common/redis_url.h"
#include "common/shm.h"

typedef struct pubsub_redis pubsub_redis;

/* A message from another instance for the local subscribers of channel. */
typedef void (*redis_deliver_fn)(void *ud, const char *channel, size_t channel_len,
                                 const unsigned char *data, size_t len);
/* The subscribe connection (re)opened: call redis_backend_subscribe for
 * every channel with local subscribers. */
typedef void (*redis_resubscribe_fn)(void *ud, pubsub_redis *r);
/* 1 while channel has local subscribers (a resubscription's later batch
 * skips a channel whose last subscriber went meanwhile). */
typedef int (*redis_routed_fn)(void *ud, const char *channel, size_t len);

/**
 * A backend for url (copied), putting prefix (copied) before channel
 * names, keeping up to buffer bytes of publishes while down. Counters go
 * to shm (may be NULL). It connects at the first redis_backend_tick.
 * NULL when out of memory.
 */
pubsub_redis *redis_backend_new(const redis_url *url, const char *prefix, size_t buffer,
                                shm_region *shm, redis_deliver_fn deliver,
                                redis_resubscribe_fn resubscribe, redis_routed_fn routed, void *ud);
/** Close its connections and free (publishes still buffered are dropped, counted). */
void redis_backend_free(pubsub_redis *r);
/** In a forked child: close the descriptors, touch nothing else. */
void redis_backend_child_close(pubsub_redis *r);
/** The master stops: a lost connection is not made again. */
void redis_backend_stopping(pubsub_redis *r);
/** A new bound for the publishes buffered while down. */
void redis_backend_set_buffer(pubsub_redis *r, size_t buffer);

/** The first local subscriber of channel came / the last one went. */
void redis_backend_subscribe(pubsub_redis *r, const char *channel, size_t len);
void redis_backend_unsubscribe(pubsub_redis *r, const char *channel, size_t len);
/** Send a local publish to the other instances (buffered, or dropped and counted). */
void redis_backend_publish(pubsub_redis *r, const char *channel, size_t channel_len,
                           const unsigned char *data, size_t len);

/** Its descriptors to poll (at most 3: two links and a name lookup): how many were filled. */
size_t redis_backend_pollfds(const pubsub_redis *r, struct pollfd *pfd, size_t max);
/** Act on p if its fd is one of ours: 1, else 0 (not ours). */
int redis_backend_io(pubsub_redis *r, const struct pollfd *p);
/** Connect when a retry is due, give up on a connection that took too long. */
void redis_backend_tick(pubsub_redis *r, double now);
/** When redis_backend_tick next has something to do (CLOCK_MONOTONIC s); INFINITY when never. */
double redis_backend_next(const pubsub_redis *r);
/** 1 while both connections work. */
int redis_backend_up(const pubsub_redis *r);

#include "redis_wire.h" /* the protocol pieces, unit-tested on their own */

#endif
