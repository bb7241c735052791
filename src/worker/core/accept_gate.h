/*
 * accept_gate.h - whether a worker should take the next connection from a
 * listening queue it shares with its peers, judged from every worker's
 * count of open connections in the shared region (see ARCHITECTURE.md,
 * "Spreading connections over workers").
 */
#ifndef PAGID_ACCEPT_GATE_H
#define PAGID_ACCEPT_GATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/shm.h"

/* A peer whose heartbeat is older than this is not counted: its loop is
 * stuck, it would not take the connections left for it. */
#define ACCEPT_GATE_STALE_MS 2000

/* The share a worker may hold: 1.1 times the average (plus one). Every
 * connection a busy worker holds above the average is a write it does while
 * its peer idles; for a broadcast to 1,000 subscribers the busiest worker's
 * count is the delivery tail (1.25 allowed 614 of 1,000). Tighter than this
 * and the gate closes on nearly every accept of a burst. */
#define ACCEPT_GATE_SHARE_NUM 11
#define ACCEPT_GATE_SHARE_DEN 10

/**
 * 1 when the worker of slot `self`, holding `mine` connections, may accept
 * one more: afterwards it holds at most 1.1 times the average of the
 * workers that can accept (ready, heartbeat fresh, below `max_conns`)
 * plus one. 0 when a less loaded peer should take it. Always 1 without a
 * region or a slot, and when no peer can accept.
 */
int accept_gate_open(const shm_region *r, const shm_worker *self, size_t mine, size_t max_conns,
                     uint64_t now_ms);

/** Gate states in shm_worker.gated. */
enum { ACCEPT_GATE_WATCHING, ACCEPT_GATE_CLOSED, ACCEPT_GATE_WOKEN };

/**
 * After self accepted: the peers whose gate is closed but would now open
 * (self's count rose, or self left the set that can accept). Each is moved
 * from CLOSED to WOKEN, so only one caller wakes it, and its pid is put in
 * pids (at most cap of them). Returns how many. The caller signals them.
 */
size_t accept_gate_to_wake(shm_region *r, const shm_worker *self, size_t max_conns,
                           uint64_t now_ms, int *pids, size_t cap);

/**
 * The sum of the `accepted` counters of every other live worker: a gated
 * worker compares two readings to tell whether anyone is taking the
 * connections it leaves in the queue.
 */
uint64_t accept_gate_peer_accepts(const shm_region *r, const shm_worker *self);

#endif
