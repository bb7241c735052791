/*
 * h2_mem.h - the allocator a worker's nghttp2 sessions use (h2_mem.c):
 * small blocks recycled through bounded free lists; the HTTP/2 module's
 * own per-stream blocks come from the same lists.
 */
#ifndef PAGID_H2_MEM_H
#define PAGID_H2_MEM_H

#include <stddef.h>

#include <nghttp2/nghttp2.h>

/** The allocator to pass to nghttp2_session_server_new3; one per process. */
nghttp2_mem *h2_mem(void);

/**
 * A zeroed block of size bytes from the same lists, for the HTTP/2
 * module's own per-stream objects (a stream: ten opened and closed by
 * every read of a busy connection, more than glibc's cache of seven a
 * size keeps). Freed with h2_mem_free only; NULL when out of memory.
 */
void *h2_mem_calloc(size_t size);
/** Give back a block of h2_mem_calloc (NULL: nothing). */
void h2_mem_free(void *p);

/** Give every kept block back to malloc (a worker's exit, a memory trim). */
void h2_mem_release(void);

/** Blocks kept for reuse now (at most 16 in each of six sizes; none under ASan). */
size_t h2_mem_kept(void);

#endif
