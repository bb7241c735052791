/*
 * shdict_heap.c - inside a shared dictionary (layout in shdict_int.h): the
 * block allocator (segregated free lists with splitting and merging), the
 * hash index and LRU list, the repair that rebuilds all of these from a
 * walk of the heap after a process died holding the lock, and the checker
 * the tests use. Every function here runs with the dictionary's lock held.
 */
#include <stdio.h>
#include <string.h>

#include "shdict_int.h"

static unsigned bin_of(uint64_t size)
{
    unsigned b = 63u - (unsigned)__builtin_clzll(size);
    b = b > 5 ? b - 5 : 0; /* 32..63 bytes: bin 0 */
    return b < SD_NBINS ? b : SD_NBINS - 1;
}

static void bin_insert(shdict *d, uint64_t off)
{
    sd_free *f = sd_at(d, off);
    unsigned b = bin_of(sd_bsize(&f->h));
    f->fprev = 0;
    f->fnext = d->bins[b];
    if (f->fnext)
        ((sd_free *)sd_at(d, f->fnext))->fprev = off;
    d->bins[b] = off;
}

static void bin_remove(shdict *d, uint64_t off)
{
    sd_free *f = sd_at(d, off);
    if (f->fprev)
        ((sd_free *)sd_at(d, f->fprev))->fnext = f->fnext;
    else
        d->bins[bin_of(sd_bsize(&f->h))] = f->fnext;
    if (f->fnext)
        ((sd_free *)sd_at(d, f->fnext))->fprev = f->fprev;
}

/* The block after off's, or NULL at the end of the arena. */
static sd_blk *next_blk(shdict *d, uint64_t off, uint64_t size)
{
    return off + size < d->arena_end ? sd_at(d, off + size) : NULL;
}

void sd_heap_init(shdict *d)
{
    memset(sd_buckets(d), 0, d->nbuckets * sizeof(uint64_t));
    memset(d->bins, 0, sizeof d->bins);
    d->lru_head = d->lru_tail = 0;
    sd_blk *b = sd_at(d, d->arena_off);
    b->prev = 0;
    sd_bset(b, d->arena_end - d->arena_off, SD_FREE);
    bin_insert(d, d->arena_off);
    atomic_store_explicit(&d->used, 0, memory_order_relaxed);
    atomic_store_explicit(&d->entries, 0, memory_order_relaxed);
}

/* Take block off (free, size bytes) for need bytes, splitting off the rest. */
static void take(shdict *d, uint64_t off, uint64_t size, uint64_t need)
{
    sd_blk *b = sd_at(d, off);
    bin_remove(d, off);
    if (size - need < SD_MIN_BLOCK) {
        sd_bset(b, size, SD_USED);
        return;
    }
    /* The rest's header first: until b shrinks it lies inside b, unseen by a walk. */
    sd_blk *r = sd_at(d, off + need);
    r->prev = need;
    sd_bset(r, size - need, SD_FREE);
    sd_bset(b, need, SD_USED);
    sd_blk *n = next_blk(d, off + need, size - need);
    if (n)
        n->prev = size - need;
    bin_insert(d, off + need);
}

uint64_t sd_alloc(shdict *d, uint64_t need)
{
    for (unsigned b = bin_of(need); b < SD_NBINS; b++) {
        unsigned scan = 0;
        for (uint64_t off = d->bins[b]; off && scan < SD_BIN_SCAN; scan++) {
            sd_free *f = sd_at(d, off);
            uint64_t size = sd_bsize(&f->h);
            if (size >= need) {
                take(d, off, size, need);
                return off;
            }
            off = f->fnext;
        }
    }
    return 0;
}

void sd_release(shdict *d, uint64_t off)
{
    sd_blk *b = sd_at(d, off);
    uint64_t size = sd_bsize(b);
    sd_bset(b, size, SD_FREE); /* a delete's commit */
    sd_blk *n = next_blk(d, off, size);
    if (n && sd_bstate(n) == SD_FREE) {
        bin_remove(d, off + size);
        size += sd_bsize(n);
        sd_bset(b, size, SD_FREE);
    }
    if (b->prev) {
        uint64_t poff = off - b->prev;
        sd_blk *p = sd_at(d, poff);
        if (sd_bstate(p) == SD_FREE) {
            bin_remove(d, poff);
            size += sd_bsize(p);
            sd_bset(p, size, SD_FREE);
            off = poff;
        }
    }
    n = next_blk(d, off, size);
    if (n)
        n->prev = size;
    bin_insert(d, off);
}

uint64_t sd_find(shdict *d, uint32_t h, const void *key, size_t klen, uint64_t **link)
{
    uint64_t *slot = &sd_buckets(d)[h & (d->nbuckets - 1)];
    while (*slot) {
        sd_ent *e = sd_at(d, *slot);
        if (e->hash == h && e->klen == klen && !memcmp(sd_key(e), key, klen)) {
            if (link)
                *link = slot;
            return *slot;
        }
        slot = &e->hnext;
    }
    return 0;
}

static void lru_unlink(shdict *d, sd_ent *e)
{
    if (e->lprev)
        ((sd_ent *)sd_at(d, e->lprev))->lnext = e->lnext;
    else
        d->lru_head = e->lnext;
    if (e->lnext)
        ((sd_ent *)sd_at(d, e->lnext))->lprev = e->lprev;
    else
        d->lru_tail = e->lprev;
}

static void lru_push(shdict *d, sd_ent *e)
{
    uint64_t off = sd_off(d, e);
    e->lprev = 0;
    e->lnext = d->lru_head;
    if (e->lnext)
        ((sd_ent *)sd_at(d, e->lnext))->lprev = off;
    else
        d->lru_tail = off;
    d->lru_head = off;
}

void sd_lru_touch(shdict *d, sd_ent *e)
{
    if (d->lru_head != sd_off(d, e)) {
        lru_unlink(d, e);
        lru_push(d, e);
    }
}

void sd_index(shdict *d, sd_ent *e)
{
    uint64_t *slot = &sd_buckets(d)[e->hash & (d->nbuckets - 1)];
    e->hnext = *slot;
    *slot = sd_off(d, e);
    lru_push(d, e);
    sd_count(&d->used, (int64_t)sd_bsize(&e->h));
    sd_count(&d->entries, 1);
}

void sd_remove(shdict *d, sd_ent *e)
{
    uint64_t *link = NULL;
    if (sd_find(d, e->hash, sd_key(e), e->klen, &link) == sd_off(d, e))
        *link = e->hnext;
    lru_unlink(d, e);
    sd_count(&d->used, -(int64_t)sd_bsize(&e->h));
    sd_count(&d->entries, -1);
    sd_release(d, sd_off(d, e));
}

/* A live entry whose lengths fit its block and whose kind is known. */
static int ent_sane(const sd_ent *e, uint64_t size)
{
    return e->klen > 0 && e->klen <= PAGI_SHARED_MAX_KEY && e->kind <= SD_INT &&
           (e->kind != SD_INT || e->vlen == 8) && sd_need(e->klen, e->vlen) <= size;
}

/*
 * The first walk: every block's size is trusted as far as it is plausible
 * (a torn one ends the heap there: the rest becomes free space). Blocks not
 * LIVE, and LIVE ones that do not hold together, become free; runs of
 * free blocks merge into one; prev fields are rewritten; the bins refilled.
 */
static void rebuild_heap(shdict *d)
{
    memset(d->bins, 0, sizeof d->bins);
    uint64_t off = d->arena_off, run = 0, prev = 0;
    while (off < d->arena_end) {
        sd_blk *b = sd_at(d, off);
        uint64_t size = sd_bsize(b);
        unsigned st = sd_bstate(b);
        if (size < 32 || off + size > d->arena_end) {
            size = d->arena_end - off;
            st = SD_FREE;
        }
        if (st == SD_LIVE && !ent_sane((sd_ent *)b, size))
            st = SD_FREE;
        if (st != SD_LIVE) {
            if (run) {
                sd_blk *r = sd_at(d, run);
                sd_bset(r, sd_bsize(r) + size, SD_FREE);
            } else {
                run = off;
                b->prev = prev;
                sd_bset(b, size, SD_FREE);
            }
        } else {
            if (run) {
                bin_insert(d, run);
                prev = sd_bsize((sd_blk *)sd_at(d, run));
                run = 0;
            }
            b->prev = prev;
            prev = size;
        }
        off += size;
    }
    if (run)
        bin_insert(d, run);
}

void sd_repair(shdict *d)
{
    rebuild_heap(d);
    memset(sd_buckets(d), 0, d->nbuckets * sizeof(uint64_t));
    d->lru_head = d->lru_tail = 0;
    atomic_store_explicit(&d->used, 0, memory_order_relaxed);
    atomic_store_explicit(&d->entries, 0, memory_order_relaxed);
    /* The second walk indexes the live entries; of two with one key (a
     * replace cut short) the newer stays, the older is freed in place. */
    uint64_t off = d->arena_off, maxseq = d->seq;
    while (off < d->arena_end) {
        sd_ent *e = sd_at(d, off);
        uint64_t size = sd_bsize(&e->h);
        if (sd_bstate(&e->h) == SD_LIVE) {
            e->hash = sd_hash(d, sd_key(e), e->klen);
            if (e->seq > maxseq)
                maxseq = e->seq;
            uint64_t other = sd_find(d, e->hash, sd_key(e), e->klen, NULL);
            sd_ent *o = other ? sd_at(d, other) : NULL;
            if (o && o->seq > e->seq) {
                sd_bset(&e->h, size, SD_FREE);
                bin_insert(d, off);
            } else {
                if (o) {
                    uint64_t osize = sd_bsize(&o->h);
                    uint64_t *link = NULL;
                    sd_find(d, o->hash, sd_key(o), o->klen, &link);
                    *link = o->hnext;
                    lru_unlink(d, o);
                    sd_count(&d->used, -(int64_t)osize);
                    sd_count(&d->entries, -1);
                    sd_bset(&o->h, osize, SD_FREE);
                    bin_insert(d, other);
                }
                sd_index(d, e);
            }
        }
        off += size;
    }
    d->seq = maxseq;
    sd_count(&d->repairs, 1);
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(why, whylen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

static int check_locked(shdict *d, char *why, size_t whylen)
{
    uint64_t off = d->arena_off, prev = 0, nfree = 0, nlive = 0, used = 0;
    while (off < d->arena_end) {
        sd_blk *b = sd_at(d, off);
        uint64_t size = sd_bsize(b);
        if (size < 32 || off + size > d->arena_end)
            FAIL("block at %llu: bad size %llu", (unsigned long long)off, (unsigned long long)size);
        if (b->prev != prev)
            FAIL("block at %llu: prev %llu, expected %llu", (unsigned long long)off,
                 (unsigned long long)b->prev, (unsigned long long)prev);
        unsigned st = sd_bstate(b);
        if (st == SD_USED)
            FAIL("block at %llu left USED", (unsigned long long)off);
        if (st == SD_FREE)
            nfree++;
        if (st == SD_LIVE) {
            sd_ent *e = (sd_ent *)b;
            nlive++;
            used += size;
            if (!ent_sane(e, size))
                FAIL("entry at %llu does not fit its block", (unsigned long long)off);
            if (sd_find(d, e->hash, sd_key(e), e->klen, NULL) != off)
                FAIL("entry at %llu not in the index", (unsigned long long)off);
        }
        prev = size;
        off += size;
    }
    if (off != d->arena_end)
        FAIL("heap walk overran the arena");
    uint64_t inbins = 0;
    for (unsigned i = 0; i < SD_NBINS; i++)
        for (uint64_t f = d->bins[i], last = 0; f; last = f, f = ((sd_free *)sd_at(d, f))->fnext) {
            sd_free *fb = sd_at(d, f);
            if (sd_bstate(&fb->h) != SD_FREE || bin_of(sd_bsize(&fb->h)) != i || fb->fprev != last)
                FAIL("bin %u holds a bad block at %llu", i, (unsigned long long)f);
            if (++inbins > nfree)
                FAIL("bins hold more blocks than the heap has free");
        }
    if (inbins != nfree)
        FAIL("%llu free blocks, %llu in bins", (unsigned long long)nfree,
             (unsigned long long)inbins);
    uint64_t nlru = 0;
    for (uint64_t e = d->lru_head, last = 0; e; last = e, e = ((sd_ent *)sd_at(d, e))->lnext) {
        if (((sd_ent *)sd_at(d, e))->lprev != last || ++nlru > nlive)
            FAIL("LRU list broken at %llu", (unsigned long long)e);
        if (!((sd_ent *)sd_at(d, e))->lnext && d->lru_tail != e)
            FAIL("LRU tail is not the last entry");
    }
    if (nlru != nlive || atomic_load(&d->entries) != nlive || atomic_load(&d->used) != used)
        FAIL("counts: %llu live, %llu in LRU, entries %llu, used %llu of %llu",
             (unsigned long long)nlive, (unsigned long long)nlru,
             (unsigned long long)atomic_load(&d->entries),
             (unsigned long long)atomic_load(&d->used), (unsigned long long)used);
    return 0;
}

int shdict_check(shdict *d, char *why, size_t whylen)
{
    if (sd_lock(d) != 0) {
        snprintf(why, whylen, "cannot lock");
        return -1;
    }
    int rc = check_locked(d, why, whylen);
    pthread_mutex_unlock(&d->lock);
    return rc;
}
