/*
 * static_cache.c - the static app's open-file cache (see static_cache.h):
 * a chained hash table of entries on a least-recently-used list. The
 * content of small files is a pagi_buf, so a response in flight keeps its
 * own reference and an entry can be evicted or replaced at any time.
 */
#include "static_cache.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Files up to this size are read into memory (and their fd closed), as long
 * as they fit a quarter of cache_bytes: one writev instead of a sendfile,
 * and HTTP/2 DATA frames from memory instead of a read each time. */
#define INLINE_MAX (64 * 1024)

typedef struct entry {
    static_file f;
    char *key;
    size_t key_len;
    uint64_t hash;
    double checked_at;
    struct entry *hnext;         /* bucket chain */
    struct entry *newer, *older; /* LRU list: head is the newest */
} entry;

struct static_cache {
    entry **buckets;
    size_t mask;
    size_t n, max_entries;
    size_t bytes, max_bytes, inline_max;
    double valid;
    entry *newest, *oldest;
};

static uint64_t hash_of(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static_cache *static_cache_new(size_t max_entries, size_t max_bytes, double valid)
{
    if (max_entries == 0)
        return NULL;
    static_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    size_t nb = 16;
    while (nb < max_entries * 2 && nb < ((size_t)1 << 21))
        nb *= 2;
    if (!(c->buckets = calloc(nb, sizeof *c->buckets))) {
        free(c);
        return NULL;
    }
    c->mask = nb - 1;
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    c->inline_max = max_bytes / 4 < INLINE_MAX ? max_bytes / 4 : INLINE_MAX;
    c->valid = valid;
    return c;
}

static void lru_unlink(static_cache *c, entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(static_cache *c, entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest)
        c->newest->newer = e;
    c->newest = e;
    if (!c->oldest)
        c->oldest = e;
}

static entry **slot_of(static_cache *c, const char *key, size_t len, uint64_t h)
{
    entry **p = &c->buckets[h & c->mask];
    while (*p && !((*p)->hash == h && (*p)->key_len == len && memcmp((*p)->key, key, len) == 0))
        p = &(*p)->hnext;
    return p;
}

/* The one release path of an entry. */
static void entry_remove(static_cache *c, entry **slot)
{
    entry *e = *slot;
    *slot = e->hnext;
    lru_unlink(c, e);
    if (e->f.body) {
        c->bytes -= (size_t)e->f.size;
        pagi_buf_unref(e->f.body);
    }
    if (e->f.fd >= 0)
        close(e->f.fd);
    free(e->key);
    free(e);
    c->n--;
}

static void evict_oldest(static_cache *c)
{
    entry *e = c->oldest;
    entry_remove(c, slot_of(c, e->key, e->key_len, e->hash));
}

void static_cache_free(static_cache *c)
{
    if (!c)
        return;
    while (c->oldest)
        evict_oldest(c);
    free(c->buckets);
    free(c);
}

const static_file *static_cache_peek(static_cache *c, const char *key, size_t key_len)
{
    entry *e = *slot_of(c, key, key_len, hash_of(key, key_len));
    return e ? &e->f : NULL;
}

const static_file *static_cache_get(static_cache *c, const char *key, size_t key_len, double now)
{
    entry *e = *slot_of(c, key, key_len, hash_of(key, key_len));
    if (!e || (e->checked_at != now && now - e->checked_at >= c->valid))
        return NULL;
    if (c->newest != e) {
        lru_unlink(c, e);
        lru_push(c, e);
    }
    return &e->f;
}

void static_cache_touch(static_cache *c, const char *key, size_t key_len, double now)
{
    entry *e = *slot_of(c, key, key_len, hash_of(key, key_len));
    if (!e)
        return;
    e->checked_at = now;
    if (c->newest != e) {
        lru_unlink(c, e);
        lru_push(c, e);
    }
}

void static_cache_drop(static_cache *c, const char *key, size_t key_len)
{
    entry **slot = slot_of(c, key, key_len, hash_of(key, key_len));
    if (*slot)
        entry_remove(c, slot);
}

static void free_content(void *ptr, void *ud)
{
    (void)ud;
    free(ptr);
}

/* The whole content of a small file, or NULL (then it is served from its fd). */
static pagi_buf *read_content(int fd, size_t size)
{
    char *p = malloc(size ? size : 1);
    if (!p)
        return NULL;
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, p + got, size - got, (off_t)got);
        if (r <= 0)
            break; /* an error, or the file shrank under us: serve it from the fd */
        got += (size_t)r;
    }
    pagi_buf *b = got == size ? pagi_buf_wrap(p, size, free_content, NULL) : NULL;
    if (!b)
        free(p);
    return b;
}

const static_file *static_cache_put(static_cache *c, const char *key, size_t key_len,
                                    const static_file *f, double now)
{
    uint64_t h = hash_of(key, key_len);
    entry **slot = slot_of(c, key, key_len, h);
    if (*slot)
        entry_remove(c, slot);
    /* Descriptors are kept only when entries are trusted for a while: checked at
     * each loop turn, a large file's lookup is small beside its sendfile, and a
     * worker holding no fd for files it served is what operators expect. */
    int small = f->size >= 0 && (size_t)f->size <= c->inline_max;
    if (!small && c->valid <= 0)
        return NULL;
    entry *e = calloc(1, sizeof *e);
    char *k = malloc(key_len + 1);
    if (!e || !k) {
        free(e);
        free(k);
        return NULL;
    }
    memcpy(k, key, key_len);
    k[key_len] = '\0';
    e->f = *f;
    e->f.body = NULL;
    e->key = k;
    e->key_len = key_len;
    e->hash = h;
    e->checked_at = now;
    if (small) {
        while (c->oldest && c->bytes + (size_t)f->size > c->max_bytes)
            evict_oldest(c);
        if (c->bytes + (size_t)f->size <= c->max_bytes &&
            (e->f.body = read_content(f->fd, (size_t)f->size))) {
            c->bytes += (size_t)f->size;
            close(e->f.fd);
            e->f.fd = -1;
        }
    }
    if (!e->f.body && c->valid <= 0) {
        free(k);
        free(e);
        return NULL; /* could not be read: served from its fd this once */
    }
    while (c->n >= c->max_entries)
        evict_oldest(c);
    slot = slot_of(c, key, key_len, h); /* evictions may have moved it */
    e->hnext = NULL;
    *slot = e;
    lru_push(c, e);
    c->n++;
    return &e->f;
}

size_t static_cache_entries(const static_cache *c)
{
    return c ? c->n : 0;
}

size_t static_cache_bytes(const static_cache *c)
{
    return c ? c->bytes : 0;
}

size_t static_cache_inline_max(const static_cache *c)
{
    return c ? c->inline_max : 0;
}
