/*
 * shdict_int.h - the layout of a shared dictionary's mapping, shared by
 * shdict.c (operations, the public calls) and shdict_heap.c (the block
 * allocator, the index and LRU links, repair after a crash, the checker).
 *
 * One mapping: [header | bucket array | arena]. Everything inside refers
 * to everything else by offset from the header, never by pointer. The
 * arena is a heap of blocks, each opening with a 16-byte header (its size
 * with a state in the low bits, and the previous block's size): walking
 * from the start by sizes always reaches the end, because every change of
 * a size is one aligned store made in an order that keeps the walk valid.
 * A block is FREE (in a bin), USED (taken, being written) or LIVE (an
 * entry): storing LIVE is the commit of a write. The bins, hash chains,
 * LRU list and counters are derived data that repair rebuilds by walking.
 */
#ifndef PAGID_SHDICT_INT_H
#define PAGID_SHDICT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "shdict.h"

#define SD_MAGIC 0x7061676964736431ULL /* "pagidsd1" */
#define SD_ALIGN 16u
#define SD_NBINS 48
#define SD_MIN_BLOCK 64u /* smallest block a split leaves behind */
#define SD_EVICT_MAX 128 /* entries one write may evict */
#define SD_BIN_SCAN 32   /* blocks looked at in the first bin before moving up */

enum { SD_FREE = 0, SD_USED = 1, SD_LIVE = 2 };
enum { SD_BYTES = 0, SD_INT = 1 };

struct pagi_shared {
    uint64_t magic;
    uint64_t map_size;
    char name[SHDICT_NAME_MAX + 1];
    pthread_mutex_t lock; /* process-shared, robust */
    uint64_t seed;        /* of the key hash */
    uint64_t nbuckets;    /* a power of two */
    uint64_t buckets_off, arena_off, arena_end;
    uint64_t lru_head, lru_tail; /* most / least recently used entry */
    uint64_t bins[SD_NBINS];     /* free blocks by log2 of their size */
    uint64_t seq;                /* of the last write: repair keeps the newer of two */
    _Atomic uint64_t used, entries, evictions, expired, full, repairs;
};

typedef struct sd_blk {
    uint64_t word; /* size | state; stored with release order */
    uint64_t prev; /* size of the block before (0 for the first) */
} sd_blk;

typedef struct sd_free {
    sd_blk h;
    uint64_t fnext, fprev;
} sd_free;

typedef struct sd_ent {
    sd_blk h;
    uint64_t seq;
    uint64_t hnext;        /* next in the bucket's chain */
    uint64_t lprev, lnext; /* towards the most / least recently used */
    uint64_t expires;      /* CLOCK_MONOTONIC ms; 0 never */
    uint32_t hash, flags;
    uint32_t klen, vlen;
    uint32_t kind, pad;
    /* then: key, padded to 8, then the value (an int64_t for SD_INT) */
} sd_ent;

#define SD_ENT_HDR ((uint64_t)sizeof(sd_ent))

static inline void *sd_at(shdict *d, uint64_t off)
{
    return (char *)d + off;
}
static inline uint64_t sd_off(shdict *d, const void *p)
{
    return (uint64_t)((const char *)p - (const char *)d);
}
static inline uint64_t *sd_buckets(shdict *d)
{
    return (uint64_t *)sd_at(d, d->buckets_off);
}
static inline uint64_t sd_bsize(const sd_blk *b)
{
    return __atomic_load_n(&b->word, __ATOMIC_ACQUIRE) & ~(uint64_t)(SD_ALIGN - 1);
}
static inline unsigned sd_bstate(const sd_blk *b)
{
    return (unsigned)(__atomic_load_n(&b->word, __ATOMIC_ACQUIRE) & (SD_ALIGN - 1));
}
static inline void sd_bset(sd_blk *b, uint64_t size, unsigned state)
{
    __atomic_store_n(&b->word, size | state, __ATOMIC_RELEASE);
}
static inline char *sd_key(sd_ent *e)
{
    return (char *)(e + 1);
}
static inline char *sd_val(sd_ent *e)
{
    return sd_key(e) + ((e->klen + 7u) & ~7u);
}
static inline uint64_t sd_need(size_t klen, size_t vlen)
{
    return (SD_ENT_HDR + ((klen + 7u) & ~(uint64_t)7u) + vlen + SD_ALIGN - 1) &
           ~(uint64_t)(SD_ALIGN - 1);
}
static inline void sd_count(_Atomic uint64_t *c, int64_t n)
{
    atomic_fetch_add_explicit(c, (uint64_t)n, memory_order_relaxed);
}

/** Take the lock, repairing first when its holder died: 0, or -1 (unusable). */
int sd_lock(shdict *d);
uint32_t sd_hash(const shdict *d, const void *key, size_t klen);

/* shdict_heap.c: all with the lock held. */
/** Reset the arena to one free block and empty the index. */
void sd_heap_init(shdict *d);
/** A block of at least need bytes in state USED, or 0. */
uint64_t sd_alloc(shdict *d, uint64_t need);
/** Return a block (any state) to the heap, merged with free neighbours. */
void sd_release(shdict *d, uint64_t off);
/** The live entry for key (hash h), or 0; *link the slot that points to it. */
uint64_t sd_find(shdict *d, uint32_t h, const void *key, size_t klen, uint64_t **link);
/** Put a committed entry in its chain and at the head of the LRU list; count it. */
void sd_index(shdict *d, sd_ent *e);
/** Take an entry out of the index and the LRU list, uncount and release it. */
void sd_remove(shdict *d, sd_ent *e);
void sd_lru_touch(shdict *d, sd_ent *e);
/** Rebuild everything derived from the heap walk (after EOWNERDEAD). */
void sd_repair(shdict *d);

#endif
