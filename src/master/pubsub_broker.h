/*
 * pubsub_broker.h - the master as the pub/sub broker between its workers
 * (docs/pubsub.md): one stream socketpair per worker process, a routing
 * table of channels, and a bounded output queue per worker.
 */
#ifndef PAGID_PUBSUB_BROKER_H
#define PAGID_PUBSUB_BROKER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A worker's output queue in the master holds at most this many bytes. */
#define PUBSUB_PEER_QUEUE_MAX (4u << 20)

typedef struct pubsub_broker pubsub_broker;
struct pagid_pubsub;
struct shm_region;

/** An empty broker; dropped counts frames it drops (may be NULL). NULL when out of memory. */
pubsub_broker *broker_new(_Atomic uint64_t *dropped);
/** Close every peer and free. */
void broker_free(pubsub_broker *b);
/**
 * A channel for a worker about to be forked: the peer's id (>= 0) and in
 * *child_fd the worker's end (close-on-exec), or -1 (logged) when no
 * socketpair could be made: the worker then runs with local pub/sub only.
 */
int broker_peer_new(pubsub_broker *b, int *child_fd);
/** After the fork, in the master: close the worker's end, remember its pid. */
void broker_peer_forked(pubsub_broker *b, int peer, int child_fd, pid_t pid);
/** The worker exited (or never started): its socket closes, its routes go. */
void broker_peer_close(pubsub_broker *b, int peer);
/** In a forked child: close every master-side descriptor (keep none of them). */
void broker_child_close(pubsub_broker *b);
/** Fill up to max pollfds for the peers (POLLIN, POLLOUT too with output queued): how many. */
size_t broker_pollfds(const pubsub_broker *b, struct pollfd *pfd, size_t max);
/** Peers with a descriptor (the size broker_pollfds may need). */
size_t broker_npeers(const pubsub_broker *b);
/** Act on the revents of pfd (filled by broker_pollfds): read, route, write. */
void broker_io(pubsub_broker *b, const struct pollfd *pfd, size_t n);
/**
 * Use the backend cfg names (pagid.yaml `pubsub:`; at start and when a
 * reload's generation becomes active): kept when its url and prefix are
 * unchanged, else the old one is closed and the new one connects, and
 * subscribes every routed channel. Counters go to shm (may be NULL).
 */
void broker_set_backend(pubsub_broker *b, const struct pagid_pubsub *cfg, struct shm_region *shm);
/** The backend's timers (reconnect, connect timeout): act when due. */
void broker_tick(pubsub_broker *b, double now);
/** The master stops fast: the Redis backend makes no new connection. */
void broker_stopping(pubsub_broker *b);
/** When broker_tick next has something to do (CLOCK_MONOTONIC s), INFINITY when never. */
double broker_next_timer(const pubsub_broker *b);
/** Channels with subscribers (tests, STATUS). */
size_t broker_channels(const pubsub_broker *b);

#endif
