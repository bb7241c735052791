/*
 * h1_arena.h - the bytes of one request head: a growable block that both
 * parsers (the byte machine and the head semantics) append to and address
 * by offset. Its growth is clamped so a head never holds more than its
 * limit (a slowloris head costs what it sent, not the next power of two).
 */
#ifndef PAGID_H1_ARENA_H
#define PAGID_H1_ARENA_H

#include <stddef.h>
#include <string.h>

typedef struct h1_arena {
    char *data; /* NULL until the first byte; moves while it grows */
    size_t len;
    size_t cap;
    size_t grow_limit; /* doubling stops here; past it, growth is exact */
    size_t max;        /* reserve fails past this many bytes */
} h1_arena;

/**
 * An empty arena (no memory yet). grow_limit bounds the slack of doubling;
 * max is the hard ceiling (0: none). grow_limit <= max.
 */
void h1_arena_init(h1_arena *a, size_t grow_limit, size_t max);
/** Room for n more bytes; offsets stay valid, pointers don't. 0 or -1. */
int h1_arena_reserve(h1_arena *a, size_t n);
/** Append n bytes (n may be 0). 0 or -1. Inline: the parser appends a few
 * short spans per header field, and a call per span showed in profiles. */
static inline int h1_arena_put(h1_arena *a, const void *data, size_t n)
{
    if (a->cap - a->len < n && h1_arena_reserve(a, n) < 0)
        return -1;
    if (n)
        memcpy(a->data + a->len, data, n);
    a->len += n;
    return 0;
}
/** Forget the bytes, keep the memory. */
static inline void h1_arena_reset(h1_arena *a)
{
    a->len = 0;
}
/** Release the memory; the arena stays usable (empty). */
void h1_arena_free(h1_arena *a);

#endif
