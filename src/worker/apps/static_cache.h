/*
 * static_cache.h - the static app's open-file cache, one per app instance
 * in each worker (nginx's open_file_cache, h2o's filecache): what a request
 * path resolved to: the open fd, the stat facts, the validators and the type
 * prepared once, and the whole content of small files. An entry is trusted
 * for the rest of the loop iteration that checked it (as h2o's filecache,
 * cleared every iteration) or for cache_valid seconds (as nginx's
 * open_file_cache_valid); after that the app checks it with one stat before
 * use. Bounded in entries and bytes, least recently used out first.
 */
#ifndef PAGID_STATIC_CACHE_H
#define PAGID_STATIC_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <pagi/pagi.h>

#include "static_http.h"

/* What a served file is, prepared for its response headers. */
typedef struct static_file {
    int fd;           /* open read-only; -1 when body holds the whole content */
    pagi_buf *body;   /* small files: the content (the cache's reference); or NULL */
    int64_t size;     /* bytes */
    int64_t mtime;    /* seconds, for Last-Modified and If-Modified-Since */
    int64_t mtime_ns; /* nanoseconds, in the ETag */
    int64_t ctime_ns; /* a chmod, rename or link changes it: checked, never shown */
    dev_t dev;
    ino_t ino;
    char etag[STATIC_ETAG_MAX];
    size_t etag_len;
    char last_modified[STATIC_DATE_MAX];
    size_t last_modified_len;
    char size_text[24]; /* size in decimal: the whole file's content-length */
    size_t size_text_len;
    const char *type; /* static_mime's string, lives as long as the app */
} static_file;

typedef struct static_cache static_cache;

/**
 * A cache of at most max_entries files and max_bytes of content, each entry
 * trusted for valid seconds; NULL when max_entries is 0 (no cache) or out
 * of memory.
 */
static_cache *static_cache_new(size_t max_entries, size_t max_bytes, double valid);
void static_cache_free(static_cache *c);

/**
 * The entry for key (the normalised relative path that was asked for), if
 * one is there and was checked at this loop time (now, the iteration's
 * cached time) or less than `valid` seconds before; NULL
 * otherwise (a stale entry stays until static_cache_put replaces it or
 * static_cache_drop removes it). The entry stays valid until the next call
 * into the cache.
 */
const static_file *static_cache_get(static_cache *c, const char *key, size_t key_len, double now);

/** The stale entry for key, whatever its age (to compare with a fresh stat), or NULL. */
const static_file *static_cache_peek(static_cache *c, const char *key, size_t key_len);

/** A stale entry proved unchanged: trusted again from now. */
void static_cache_touch(static_cache *c, const char *key, size_t key_len, double now);

/**
 * Keep f under key (replacing what was there), taking its fd: small files'
 * content is read now and the fd closed; larger files keep their fd, but
 * only with a cache_valid above 0. Returns the cache's entry, or NULL when
 * it was not kept (then f->fd is still the caller's).
 */
const static_file *static_cache_put(static_cache *c, const char *key, size_t key_len,
                                    const static_file *f, double now);

/** Forget key (its file changed or vanished). */
void static_cache_drop(static_cache *c, const char *key, size_t key_len);

/** Entries and content bytes held (for tests and metrics). */
size_t static_cache_entries(const static_cache *c);
size_t static_cache_bytes(const static_cache *c);

/** Largest file kept in memory: smaller ones are read into the cache. */
size_t static_cache_inline_max(const static_cache *c);

#endif
