/*
 * shdict.h - the server's side of shared dictionaries (pagi_shared.h is
 * the apps' side): make one in an anonymous MAP_SHARED mapping (the
 * master, before forking), find one by name, read its counters without
 * its lock (metrics), and, for tests, check its invariants and stop a
 * write half way.
 */
#ifndef PAGID_SHDICT_H
#define PAGID_SHDICT_H

#include <stddef.h>
#include <stdint.h>

#include <pagi/pagi_shared.h>

typedef struct pagi_shared shdict;

/* Bounds of a dictionary's configured size (the whole mapping). */
#define SHDICT_MIN_SIZE ((size_t)32 * 1024)
#define SHDICT_MAX_SIZE ((size_t)1 << 40)
#define SHDICT_NAME_MAX 63

/**
 * Map a dictionary of size bytes (header, index and arena all inside) and
 * initialise it: a process-shared robust mutex, an empty index, one free
 * block. NULL (errno set) when the mapping or the mutex fails. Children
 * forked afterwards share it; each process unmaps its own view with
 * shdict_destroy, and the memory goes with the last one.
 */
shdict *shdict_create(const char *name, size_t size);
void shdict_destroy(shdict *d);
const char *shdict_name(const shdict *d);
size_t shdict_map_size(const shdict *d);

/* Read without the lock (each a relaxed atomic load). */
typedef struct shdict_stats {
    uint64_t capacity; /* arena bytes */
    uint64_t used;     /* bytes of blocks holding entries */
    uint64_t entries;
    uint64_t evictions; /* live entries dropped to make room */
    uint64_t expired;   /* expired entries removed */
    uint64_t full;      /* writes refused for want of room */
    uint64_t repairs;   /* rebuilds after a holder of the lock died */
} shdict_stats;
void shdict_stats_get(const shdict *d, shdict_stats *out);

/**
 * For tests: verify every invariant (the heap walks from start to end,
 * free blocks are exactly those in the bins, the index holds exactly the
 * live entries, the LRU list links them all, the counters match). 0, or
 * -1 with a reason in why.
 */
int shdict_check(shdict *d, char *why, size_t whylen);

/* Stages at which shdict_set_stopped returns with the lock held. */
enum {
    SHDICT_STOP_LOCKED,    /* just locked */
    SHDICT_STOP_ALLOCATED, /* a block taken from the heap, half written */
    SHDICT_STOP_COMMITTED  /* the new entry live, the old one not yet removed */
};
/**
 * For crash tests: a set of key that stops at stage and returns 0 with the
 * dictionary's lock still held; the caller is expected to die (SIGKILL)
 * so that the next locker repairs. -1 when it stopped early (no room).
 */
int shdict_set_stopped(shdict *d, const void *key, size_t klen, const void *val, size_t vlen,
                       int stage);

#endif
