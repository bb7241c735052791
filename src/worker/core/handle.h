/*
 * handle.h - the memory behind the handles pagi.h gives out (scopes,
 * subscriptions, buffers): pools that never hand an object back to malloc
 * while the worker runs, so a stale handle always reads a valid header that
 * says "released", and the once-per-kind log of interface misuse.
 */
#ifndef PAGID_HANDLE_H
#define PAGID_HANDLE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The first member of every pooled object. magic is the kind's live value
 * while the object is in use and HANDLE_RELEASED once it is back in the
 * pool; gen counts the object's lives, so a holder that kept (pointer, gen)
 * knows for certain whether its object is still the one it meant.
 */
typedef struct handle_hdr {
    uint32_t magic;
    uint32_t gen;
    struct handle_hdr *next_free; /* in the pool's free FIFO */
} handle_hdr;

#define HANDLE_RELEASED 0xDEADF4EEu

/*
 * A pool of objects of one size. Released objects wait in a FIFO and are
 * reused only once more than reuse_after of them wait: a handle used after
 * its release is recognised until that many more objects of its kind were
 * released (then it names a newer object: a wrong but valid one, never freed
 * memory). Objects come in chunks and go back to malloc only in
 * handle_pool_free, when no handle can be used any more. One loop thread.
 */
typedef struct handle_pool {
    const char *kind;   /* "scope", "subscription", "buffer": for messages */
    size_t size;        /* bytes per object, the header included */
    size_t reuse_after; /* free objects kept before the oldest is reused */
    handle_hdr *free_head, *free_tail;
    size_t nfree;
    struct handle_chunk *chunks;
    size_t chunk_used; /* objects taken from chunks->mem */
} handle_pool;

#define HANDLE_POOL_INIT(kind, type, reuse_after)                                                  \
    {                                                                                              \
        (kind), sizeof(type), (reuse_after), 0, 0, 0, 0, 0                                         \
    }

/** A zeroed object with magic set (its gen kept); NULL when out of memory. */
void *handle_get(handle_pool *p, uint32_t magic);
/** Back to the pool: magic becomes HANDLE_RELEASED, gen advances. Under
 * AddressSanitizer the rest of the object is poisoned until it is reused. */
void handle_put(handle_pool *p, void *obj);
/** Give every chunk back to malloc (at exit: every handle is dead). */
void handle_pool_free(handle_pool *p);

/** Is obj (non-NULL, from a pool) live with that magic? One load and compare. */
static inline int handle_live(const void *obj, uint32_t magic)
{
    return ((const handle_hdr *)obj)->magic == magic;
}

/**
 * Log a misuse of the interface: always in debug mode, otherwise once per
 * call name (fn, e.g. "pagi_buf_unref"), so an app repeating a mistake in a
 * loop cannot flood the log. The message should name the call and the handle.
 */
void handle_misuse(int debug, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
