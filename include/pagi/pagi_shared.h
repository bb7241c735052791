/*
 * pagi_shared.h - shared dictionaries (see pagi_shared(3)): bounded
 * key/value stores that every worker of a pagid instance sees, configured
 * with `shared_dicts:` in pagid.yaml and made by the master before it
 * forks. They survive worker restarts and, when name and size are
 * unchanged, reloads. Modelled on OpenResty's ngx.shared.DICT.
 */
#ifndef PAGI_PAGI_SHARED_H
#define PAGI_PAGI_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include <pagi/pagi.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A dictionary: lives as long as the worker process; never freed by the app. */
typedef struct pagi_shared pagi_shared;

/* Results: 0 or one of these (pagi_shared_strerror names them). */
enum {
    PAGI_SHARED_OK = 0,
    PAGI_SHARED_NOT_FOUND = -1,  /* no such key (or it expired) */
    PAGI_SHARED_EXISTS = -2,     /* add: the key is there */
    PAGI_SHARED_FULL = -3,       /* no room even after evicting (counted) */
    PAGI_SHARED_TOO_LARGE = -4,  /* the entry could never fit */
    PAGI_SHARED_NOT_NUMBER = -5, /* incr on a value that is not a decimal integer */
    PAGI_SHARED_MISMATCH = -6,   /* cas: the value is not the expected one */
    PAGI_SHARED_INVALID = -7,    /* a NULL dictionary, an empty or too long key */
    PAGI_SHARED_OVERFLOW = -8,   /* incr would leave int64_t */
    PAGI_SHARED_BROKEN = -9      /* the lock cannot be taken (should not happen) */
};

/** Longest key, in bytes. */
#define PAGI_SHARED_MAX_KEY 65535

/**
 * The dictionary called name in this instance's `shared_dicts`, or NULL
 * when there is none. l is the worker's loop (pagi_scope_loop, or the one
 * given to the app's create). Cheap: a walk of the configured list.
 */
pagi_shared *pagi_shared_dict(pagi_loop *l, const char *name);

/**
 * Copy key's value into buf (at most cap bytes) and set *len to its full
 * length (so *len > cap means it was cut short: ask again with more room)
 * and *flags (either may be NULL). A counter made by incr reads as its
 * decimal text. A hit makes the key the most recently used. 0, or
 * PAGI_SHARED_NOT_FOUND.
 */
int pagi_shared_get(pagi_shared *d, const void *key, size_t klen, void *buf, size_t cap,
                    size_t *len, uint32_t *flags);

/**
 * Store a value (copied), replacing any; ttl in seconds (0: never
 * expires), flags an integer kept with it. When the dictionary is full the
 * least recently used entries are evicted (a bounded number per call:
 * fragmentation may still leave no room, then PAGI_SHARED_FULL, counted).
 */
int pagi_shared_set(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                    double ttl, uint32_t flags);
/** set, but never evicts a live entry (only expired ones): PAGI_SHARED_FULL instead. */
int pagi_shared_safe_set(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                         double ttl, uint32_t flags);
/** set only when key is absent (or expired): else PAGI_SHARED_EXISTS. */
int pagi_shared_add(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                    double ttl, uint32_t flags);
/** add, but never evicts a live entry. */
int pagi_shared_safe_add(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                         double ttl, uint32_t flags);
/** set only when key is present: else PAGI_SHARED_NOT_FOUND. */
int pagi_shared_replace(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                        double ttl, uint32_t flags);
/**
 * Compare and set: store val only when key's value is exactly old (olen
 * bytes; a counter compares as its decimal text). PAGI_SHARED_NOT_FOUND,
 * PAGI_SHARED_MISMATCH, or what set returns.
 */
int pagi_shared_cas(pagi_shared *d, const void *key, size_t klen, const void *old, size_t olen,
                    const void *val, size_t vlen, double ttl, uint32_t flags);
/** Remove key: 0, or PAGI_SHARED_NOT_FOUND. */
int pagi_shared_delete(pagi_shared *d, const void *key, size_t klen);

/**
 * Add delta to key's integer value and set *out (may be NULL) to the
 * result, atomically across workers. A missing key is created as *init +
 * delta with init_ttl when init is not NULL, else PAGI_SHARED_NOT_FOUND. A
 * value set as decimal text ("41") is taken as its number; anything else
 * is PAGI_SHARED_NOT_NUMBER. The key keeps its ttl and flags.
 */
int pagi_shared_incr(pagi_shared *d, const void *key, size_t klen, int64_t delta,
                     const int64_t *init, double init_ttl, int64_t *out);

/** Seconds key has left in *ttl (0: it never expires): 0, or PAGI_SHARED_NOT_FOUND. */
int pagi_shared_ttl(pagi_shared *d, const void *key, size_t klen, double *ttl);
/** Give key a new ttl (0: never expires): 0, or PAGI_SHARED_NOT_FOUND. */
int pagi_shared_expire(pagi_shared *d, const void *key, size_t klen, double ttl);

/**
 * Remove expired entries, at most max of them (0: no limit), looking at
 * no more than 4096 entries from the least recently used end per call.
 * Returns how many were removed. Expired entries are otherwise removed
 * when met (lazy expiry) or when room is needed.
 */
size_t pagi_shared_flush_expired(pagi_shared *d, size_t max);
/** Remove every entry. */
void pagi_shared_flush_all(pagi_shared *d);

/** Bytes entries may occupy in all (the configured size less the index). */
size_t pagi_shared_capacity(pagi_shared *d);
/** Bytes not occupied by entries (not necessarily in one piece). */
size_t pagi_shared_free_space(pagi_shared *d);
/** Entries stored now (expired ones not yet removed included). */
size_t pagi_shared_count(pagi_shared *d);

/** A short text for a result: "not found", "exists", "no memory", ... */
const char *pagi_shared_strerror(int rc);

#ifdef __cplusplus
}
#endif

#endif
