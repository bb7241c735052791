/*
 * memtrim.h - giving freed memory back to the kernel at a quiet point.
 * Code that lets go of large buffers (a drained WebSocket queue, a closed
 * connection's messages) notes how much; once enough was freed, a short
 * one-shot timer calls malloc_trim(0), so a worker's RSS returns near its
 * baseline after a flood instead of keeping the high-water mark forever.
 */
#ifndef PAGID_MEMTRIM_H
#define PAGID_MEMTRIM_H

#include <ev.h>
#include <stddef.h>

/** Trim when this much was noted since the last trim. */
#define MEMTRIM_THRESHOLD (1024 * 1024)
/** A single free this big is worth noting; smaller ones are malloc's cache. */
#define MEMTRIM_BIG (64 * 1024)
/** Seconds between the first note and the trim: a burst of frees becomes one trim. */
#define MEMTRIM_DELAY 1.0
/** At most one trim this often: malloc_trim walks the heap (milliseconds on a
 * big fragmented one) and every connection of the worker waits for it. */
#define MEMTRIM_MIN_INTERVAL 5.0

/** bytes were freed on ev's worker (NULL: the last loop seen); arm the trim once they add up. */
void memtrim_note(struct ev_loop *ev, size_t bytes);
/** The worker's loop ends: no trim is pending on it any more. */
void memtrim_stop(void);
/** Bytes noted and not trimmed yet (for tests). */
size_t memtrim_pending(void);

#endif
