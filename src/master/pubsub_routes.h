/*
 * pubsub_routes.h - the broker's routing table: for each channel, the peers
 * (workers) with at least one subscriber to it. No sockets here, so the
 * table is unit-tested alone (tests/unit/test_pubsub_routes.c).
 */
#ifndef PAGID_PUBSUB_ROUTES_H
#define PAGID_PUBSUB_ROUTES_H

#include <stddef.h>

typedef struct pubsub_routes pubsub_routes;

/** An empty table, or NULL when out of memory. */
pubsub_routes *routes_new(void);
void routes_free(pubsub_routes *r);
/** peer subscribes to channel: 1 added, 0 already there, -1 out of memory. */
int routes_add(pubsub_routes *r, const char *channel, size_t len, int peer);
/** peer unsubscribes: 1 removed, 0 it was not subscribed. An empty channel is freed. */
int routes_remove(pubsub_routes *r, const char *channel, size_t len, int peer);
/** Every route through peer goes (it closed); returns how many. */
size_t routes_remove_peer(pubsub_routes *r, int peer);
/** A channel, for the callbacks below (not NUL-terminated). */
typedef void (*routes_channel_fn)(void *ud, const char *channel, size_t len);
/** routes_remove_peer, calling emptied (may be NULL) for each channel it left with no peer. */
size_t routes_drop_peer(pubsub_routes *r, int peer, routes_channel_fn emptied, void *ud);
/** Call fn for every channel with at least one peer (fn must not change r). */
void routes_each(const pubsub_routes *r, routes_channel_fn fn, void *ud);
/**
 * The peers subscribed to channel: *n of them in the returned array, owned by
 * the table and valid until its next change; NULL with *n = 0 when none.
 */
const int *routes_find(const pubsub_routes *r, const char *channel, size_t len, size_t *n);
/** Channels with at least one peer. */
size_t routes_channels(const pubsub_routes *r);

#endif
