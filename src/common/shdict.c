/*
 * shdict.c - shared dictionaries (pagi_shared(3)): making the mapping, the
 * robust process-shared lock and its repair, and every public
 * pagi_shared_* operation. One lock per dictionary; each call holds it
 * for a bounded time (a key's hash chain, at most SD_EVICT_MAX evictions,
 * a copy of the value). Layout and allocator: shdict_int.h, shdict_heap.c.
 *
 * Crash safety: a write takes a fresh block, fills it, then commits it
 * with one store of its state (LIVE); only then is the old entry freed.
 * A process killed anywhere in a call leaves the lock "owner died"; the
 * next locker rebuilds the bins, index and LRU list by walking the heap
 * (sd_repair), so every committed entry survives, the one being written
 * is dropped, and of an old and a new value of one key the newer stays.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "shdict_int.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t expiry(double ttl, uint64_t now)
{
    if (!(ttl > 0))
        return 0;
    if (ttl > 1e12)
        ttl = 1e12;
    uint64_t ms = (uint64_t)(ttl * 1000.0);
    return now + (ms ? ms : 1);
}

static int expired(const sd_ent *e, uint64_t now)
{
    return e->expires && e->expires <= now;
}

uint32_t sd_hash(const shdict *d, const void *key, size_t klen)
{
    const unsigned char *p = key;
    uint64_t h = d->seed ^ ((uint64_t)klen * 0x9E3779B97F4A7C15ULL);
    for (size_t i = 0; i < klen; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (uint32_t)h;
}

shdict *shdict_create(const char *name, size_t size)
{
    if (!name || strlen(name) > SHDICT_NAME_MAX || size < SHDICT_MIN_SIZE ||
        size > SHDICT_MAX_SIZE) {
        errno = EINVAL;
        return NULL;
    }
    shdict *d = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (d == MAP_FAILED)
        return NULL;
    pthread_mutexattr_t a;
    int rc = pthread_mutexattr_init(&a);
    if (!rc)
        rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (!rc)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (!rc)
        rc = pthread_mutex_init(&d->lock, &a);
    pthread_mutexattr_destroy(&a);
    if (rc) {
        munmap(d, size);
        errno = rc;
        return NULL;
    }
    d->magic = SD_MAGIC;
    d->map_size = size;
    snprintf(d->name, sizeof d->name, "%s", name);
    if (getrandom(&d->seed, sizeof d->seed, GRND_NONBLOCK) != (ssize_t)sizeof d->seed)
        d->seed = now_ms() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
    /* About one bucket per 512 bytes: short chains for entries of ~100 bytes and up. */
    uint64_t nb = 64;
    while (nb * 2 <= size / 512)
        nb *= 2;
    d->nbuckets = nb;
    d->buckets_off = (sizeof *d + 63) & ~(uint64_t)63;
    d->arena_off = (d->buckets_off + nb * sizeof(uint64_t) + 63) & ~(uint64_t)63;
    d->arena_end = size & ~(uint64_t)(SD_ALIGN - 1);
    sd_heap_init(d);
    return d;
}

void shdict_destroy(shdict *d)
{
    if (d)
        munmap(d, d->map_size);
}

const char *shdict_name(const shdict *d)
{
    return d->name;
}
size_t shdict_map_size(const shdict *d)
{
    return d->map_size;
}

void shdict_stats_get(const shdict *d, shdict_stats *o)
{
    shdict *m = (shdict *)d;
    o->capacity = d->arena_end - d->arena_off;
    o->used = atomic_load_explicit(&m->used, memory_order_relaxed);
    o->entries = atomic_load_explicit(&m->entries, memory_order_relaxed);
    o->evictions = atomic_load_explicit(&m->evictions, memory_order_relaxed);
    o->expired = atomic_load_explicit(&m->expired, memory_order_relaxed);
    o->full = atomic_load_explicit(&m->full, memory_order_relaxed);
    o->repairs = atomic_load_explicit(&m->repairs, memory_order_relaxed);
}

int sd_lock(shdict *d)
{
    int rc = pthread_mutex_lock(&d->lock);
    if (rc == EOWNERDEAD) {
        /* Its holder died inside a call: rebuild what it may have left half done. */
        sd_repair(d);
        rc = pthread_mutex_consistent(&d->lock);
    }
    return rc ? -1 : 0;
}

static void unlock(shdict *d)
{
    pthread_mutex_unlock(&d->lock);
}

static int bad_key(const shdict *d, const void *key, size_t klen)
{
    return !d || !key || klen == 0 || klen > PAGI_SHARED_MAX_KEY;
}

/* The live, unexpired entry for key, or NULL (an expired one is removed). */
static sd_ent *lookup(shdict *d, uint32_t h, const void *key, size_t klen, uint64_t now)
{
    uint64_t off = sd_find(d, h, key, klen, NULL);
    if (!off)
        return NULL;
    sd_ent *e = sd_at(d, off);
    if (expired(e, now)) {
        sd_remove(d, e);
        sd_count(&d->expired, 1);
        return NULL;
    }
    return e;
}

/* Room for need bytes: free blocks, then the least recently used entries
 * (only expired ones when safe), at most SD_EVICT_MAX of them. */
static uint64_t alloc_room(shdict *d, uint64_t need, int safe, uint64_t now)
{
    uint64_t off = sd_alloc(d, need);
    uint64_t cur = d->lru_tail;
    for (int i = 0; !off && cur && i < SD_EVICT_MAX; i++) {
        sd_ent *e = sd_at(d, cur);
        cur = e->lprev;
        if (expired(e, now))
            sd_count(&d->expired, 1);
        else if (safe)
            continue;
        else
            sd_count(&d->evictions, 1);
        sd_remove(d, e);
        off = sd_alloc(d, need);
    }
    return off;
}

enum { W_SET, W_ADD, W_REPLACE, W_CAS };

typedef struct write_req {
    const void *key, *val, *old;
    size_t klen, vlen, olen;
    int mode, safe, kind, stop; /* stop: shdict_set_stopped's stage, or -1 */
    double ttl;
    uint32_t flags;
    int keep_meta; /* incr converting text: keep the old expiry and flags */
} write_req;

static int value_is(sd_ent *e, const void *v, size_t len)
{
    if (e->kind == SD_INT) {
        char num[24];
        int64_t x;
        memcpy(&x, sd_val(e), sizeof x);
        int n = snprintf(num, sizeof num, "%" PRId64, x);
        return (size_t)n == len && !memcmp(num, v, len);
    }
    return e->vlen == len && (len == 0 || !memcmp(sd_val(e), v, len));
}

/* The write path of set/add/replace/cas (and incr's conversions); locked. */
static int write_locked(shdict *d, const write_req *r, uint64_t now)
{
    uint32_t h = sd_hash(d, r->key, r->klen);
    sd_ent *old = lookup(d, h, r->key, r->klen, now);
    if (r->mode == W_ADD && old)
        return PAGI_SHARED_EXISTS;
    if ((r->mode == W_REPLACE || r->mode == W_CAS) && !old)
        return PAGI_SHARED_NOT_FOUND;
    if (r->mode == W_CAS && !value_is(old, r->old, r->olen))
        return PAGI_SHARED_MISMATCH;
    if (r->stop == SHDICT_STOP_LOCKED)
        return 0;
    uint64_t need = sd_need(r->klen, r->vlen);
    if (need > (d->arena_end - d->arena_off) / 2)
        return PAGI_SHARED_TOO_LARGE;
    uint64_t expires = r->keep_meta && old ? old->expires : expiry(r->ttl, now);
    uint32_t flags = r->keep_meta && old ? old->flags : r->flags;
    uint64_t off = sd_alloc(d, need);
    if (!off && old) {
        /* As ngx does: the old value goes first when there is no room beside it. */
        sd_remove(d, old);
        old = NULL;
    }
    if (!off)
        off = alloc_room(d, need, r->safe, now);
    if (!off) {
        sd_count(&d->full, 1);
        return PAGI_SHARED_FULL;
    }
    sd_ent *e = sd_at(d, off);
    uint64_t size = sd_bsize(&e->h);
    e->seq = ++d->seq;
    e->hnext = e->lprev = e->lnext = 0;
    e->expires = expires;
    e->hash = h;
    e->flags = flags;
    e->klen = (uint32_t)r->klen;
    e->vlen = (uint32_t)r->vlen;
    e->kind = (uint32_t)r->kind;
    e->pad = 0;
    memcpy(sd_key(e), r->key, r->klen);
    if (r->stop == SHDICT_STOP_ALLOCATED)
        return 0;
    if (r->vlen)
        memcpy(sd_val(e), r->val, r->vlen);
    sd_bset(&e->h, size, SD_LIVE); /* the commit */
    if (r->stop == SHDICT_STOP_COMMITTED)
        return 0;
    if (old)
        sd_remove(d, old);
    sd_index(d, e);
    return 0;
}

static int write_op(shdict *d, write_req *r)
{
    if (bad_key(d, r->key, r->klen) || (!r->val && r->vlen) || r->vlen > UINT32_MAX ||
        (r->mode == W_CAS && !r->old && r->olen))
        return PAGI_SHARED_INVALID;
    if (sd_lock(d) < 0)
        return PAGI_SHARED_BROKEN;
    int rc = write_locked(d, r, now_ms());
    unlock(d);
    return rc;
}

#define WRITE(mode_, safe_)                                                                        \
    write_req r = {.key = key,                                                                     \
                   .klen = klen,                                                                   \
                   .val = val,                                                                     \
                   .vlen = vlen,                                                                   \
                   .mode = (mode_),                                                                \
                   .safe = (safe_),                                                                \
                   .kind = SD_BYTES,                                                               \
                   .stop = -1,                                                                     \
                   .ttl = ttl,                                                                     \
                   .flags = flags};                                                                \
    return write_op(d, &r)

int pagi_shared_set(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                    double ttl, uint32_t flags)
{
    WRITE(W_SET, 0);
}

int pagi_shared_safe_set(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                         double ttl, uint32_t flags)
{
    WRITE(W_SET, 1);
}

int pagi_shared_add(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                    double ttl, uint32_t flags)
{
    WRITE(W_ADD, 0);
}

int pagi_shared_safe_add(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                         double ttl, uint32_t flags)
{
    WRITE(W_ADD, 1);
}

int pagi_shared_replace(pagi_shared *d, const void *key, size_t klen, const void *val, size_t vlen,
                        double ttl, uint32_t flags)
{
    WRITE(W_REPLACE, 0);
}

int pagi_shared_cas(pagi_shared *d, const void *key, size_t klen, const void *old, size_t olen,
                    const void *val, size_t vlen, double ttl, uint32_t flags)
{
    write_req r = {.key = key,
                   .klen = klen,
                   .val = val,
                   .vlen = vlen,
                   .old = old,
                   .olen = olen,
                   .mode = W_CAS,
                   .kind = SD_BYTES,
                   .stop = -1,
                   .ttl = ttl,
                   .flags = flags};
    return write_op(d, &r);
}

int shdict_set_stopped(shdict *d, const void *key, size_t klen, const void *val, size_t vlen,
                       int stage)
{
    write_req r = {.key = key,
                   .klen = klen,
                   .val = val,
                   .vlen = vlen,
                   .mode = W_SET,
                   .kind = SD_BYTES,
                   .stop = stage};
    if (bad_key(d, key, klen) || sd_lock(d) < 0)
        return -1;
    if (write_locked(d, &r, now_ms()) < 0) {
        unlock(d);
        return -1;
    }
    return 0; /* still locked: the caller dies holding it */
}

int pagi_shared_get(pagi_shared *d, const void *key, size_t klen, void *buf, size_t cap,
                    size_t *len, uint32_t *flags)
{
    if (bad_key(d, key, klen) || (!buf && cap))
        return PAGI_SHARED_INVALID;
    if (sd_lock(d) < 0)
        return PAGI_SHARED_BROKEN;
    sd_ent *e = lookup(d, sd_hash(d, key, klen), key, klen, now_ms());
    if (!e) {
        unlock(d);
        return PAGI_SHARED_NOT_FOUND;
    }
    char num[24];
    const char *v = sd_val(e);
    size_t n = e->vlen;
    if (e->kind == SD_INT) {
        int64_t x;
        memcpy(&x, v, sizeof x);
        n = (size_t)snprintf(num, sizeof num, "%" PRId64, x);
        v = num;
    }
    if (n && cap)
        memcpy(buf, v, n < cap ? n : cap);
    if (len)
        *len = n;
    if (flags)
        *flags = e->flags;
    sd_lru_touch(d, e);
    unlock(d);
    return 0;
}

int pagi_shared_delete(pagi_shared *d, const void *key, size_t klen)
{
    if (bad_key(d, key, klen))
        return PAGI_SHARED_INVALID;
    if (sd_lock(d) < 0)
        return PAGI_SHARED_BROKEN;
    sd_ent *e = lookup(d, sd_hash(d, key, klen), key, klen, now_ms());
    if (e)
        sd_remove(d, e);
    unlock(d);
    return e ? 0 : PAGI_SHARED_NOT_FOUND;
}

/* A whole decimal int64 (optional sign, no spaces); 0, or -1. */
static int parse_i64(const char *s, size_t n, int64_t *out)
{
    char tmp[24];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (errno || *end || tmp[0] == ' ' || tmp[0] == '+' || (tmp[0] < '0' && tmp[0] != '-'))
        return -1;
    *out = v;
    return 0;
}

int pagi_shared_incr(pagi_shared *d, const void *key, size_t klen, int64_t delta,
                     const int64_t *init, double init_ttl, int64_t *out)
{
    if (bad_key(d, key, klen))
        return PAGI_SHARED_INVALID;
    if (sd_lock(d) < 0)
        return PAGI_SHARED_BROKEN;
    uint64_t now = now_ms();
    sd_ent *e = lookup(d, sd_hash(d, key, klen), key, klen, now);
    int64_t v, res;
    int rc = 0;
    if (!e && !init)
        rc = PAGI_SHARED_NOT_FOUND;
    else if (!e)
        v = *init;
    else if (e->kind == SD_INT)
        memcpy(&v, sd_val(e), sizeof v);
    else if (parse_i64(sd_val(e), e->vlen, &v) < 0)
        rc = PAGI_SHARED_NOT_NUMBER;
    if (!rc && __builtin_add_overflow(v, delta, &res))
        rc = PAGI_SHARED_OVERFLOW;
    if (!rc && e && e->kind == SD_INT) {
        /* In place: one aligned 8-byte store, whole or not at all. */
        __atomic_store_n((int64_t *)(void *)sd_val(e), res, __ATOMIC_RELEASE);
        sd_lru_touch(d, e);
    } else if (!rc) {
        write_req r = {.key = key,
                       .klen = klen,
                       .val = &res,
                       .vlen = sizeof res,
                       .mode = W_SET,
                       .kind = SD_INT,
                       .stop = -1,
                       .ttl = init_ttl,
                       .keep_meta = e != NULL};
        rc = write_locked(d, &r, now);
    }
    unlock(d);
    if (!rc && out)
        *out = res;
    return rc;
}

int pagi_shared_ttl(pagi_shared *d, const void *key, size_t klen, double *ttl)
{
    if (bad_key(d, key, klen))
        return PAGI_SHARED_INVALID;
    if (sd_lock(d) < 0)
        return PAGI_SHARED_BROKEN;
    uint64_t now = now_ms();
    sd_ent *e = lookup(d, sd_hash(d, key, klen), key, klen, now);
    if (e && ttl)
        *ttl = e->expires ? (double)(e->expires - now) / 1000.0 : 0;
    unlock(d);
    return e ? 0 : PAGI_SHARED_NOT_FOUND;
}

int pagi_shared_expire(pagi_shared *d, const void *key, size_t klen, double ttl)
{
    if (bad_key(d, key, klen))
        return PAGI_SHARED_INVALID;
    if (sd_lock(d) < 0)
        return PAGI_SHARED_BROKEN;
    uint64_t now = now_ms();
    sd_ent *e = lookup(d, sd_hash(d, key, klen), key, klen, now);
    if (e)
        __atomic_store_n(&e->expires, expiry(ttl, now), __ATOMIC_RELEASE);
    unlock(d);
    return e ? 0 : PAGI_SHARED_NOT_FOUND;
}

size_t pagi_shared_flush_expired(pagi_shared *d, size_t max)
{
    if (!d || sd_lock(d) < 0)
        return 0;
    uint64_t now = now_ms(), cur = d->lru_tail;
    size_t n = 0;
    for (int i = 0; cur && i < 4096 && (max == 0 || n < max); i++) {
        sd_ent *e = sd_at(d, cur);
        cur = e->lprev;
        if (expired(e, now)) {
            sd_remove(d, e);
            sd_count(&d->expired, 1);
            n++;
        }
    }
    unlock(d);
    return n;
}

void pagi_shared_flush_all(pagi_shared *d)
{
    if (!d || sd_lock(d) < 0)
        return;
    sd_heap_init(d);
    unlock(d);
}

size_t pagi_shared_capacity(pagi_shared *d)
{
    return d ? (size_t)(d->arena_end - d->arena_off) : 0;
}

size_t pagi_shared_free_space(pagi_shared *d)
{
    if (!d)
        return 0;
    uint64_t used = atomic_load_explicit(&d->used, memory_order_relaxed);
    return (size_t)(d->arena_end - d->arena_off - used);
}

size_t pagi_shared_count(pagi_shared *d)
{
    return d ? (size_t)atomic_load_explicit(&d->entries, memory_order_relaxed) : 0;
}

const char *pagi_shared_strerror(int rc)
{
    switch (rc) {
    case PAGI_SHARED_OK:
        return "ok";
    case PAGI_SHARED_NOT_FOUND:
        return "not found";
    case PAGI_SHARED_EXISTS:
        return "exists";
    case PAGI_SHARED_FULL:
        return "no memory";
    case PAGI_SHARED_TOO_LARGE:
        return "too large";
    case PAGI_SHARED_NOT_NUMBER:
        return "not a number";
    case PAGI_SHARED_MISMATCH:
        return "value mismatch";
    case PAGI_SHARED_INVALID:
        return "invalid argument";
    case PAGI_SHARED_OVERFLOW:
        return "integer overflow";
    case PAGI_SHARED_BROKEN:
        return "dictionary unusable";
    default:
        return "unknown error";
    }
}
