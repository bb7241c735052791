/*
 * h1_arena.c - the request head's byte block (see h1_arena.h). Doubling keeps
 * appends amortised O(1) for ordinary heads; the clamp at grow_limit keeps
 * the worst case of a big head at its size plus a rounding, not twice it.
 */
#include "h1_arena.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_FIRST 512
#define ARENA_ROUND 256

void h1_arena_init(h1_arena *a, size_t grow_limit, size_t max)
{
    a->data = NULL;
    a->len = a->cap = 0;
    a->max = max ? max : (size_t)-1;
    a->grow_limit = grow_limit < a->max ? grow_limit : a->max;
}

int h1_arena_reserve(h1_arena *a, size_t n)
{
    if (a->cap - a->len >= n)
        return 0;
    if (n > a->max - a->len)
        return -1;
    size_t need = a->len + n;
    size_t cap = a->cap ? a->cap : (ARENA_FIRST < a->grow_limit ? ARENA_FIRST : a->grow_limit);
    while (cap < need) {
        if (cap >= a->grow_limit) {
            /* Past the doubling range: what is needed, rounded up. */
            cap = need + (ARENA_ROUND - 1);
            cap = cap < need ? need : cap - cap % ARENA_ROUND;
            break;
        }
        cap = cap > a->grow_limit / 2 ? a->grow_limit : cap * 2;
    }
    if (cap > a->max)
        cap = need;
    char *d = realloc(a->data, cap);
    if (!d)
        return -1;
    a->data = d;
    a->cap = cap;
    return 0;
}

void h1_arena_free(h1_arena *a)
{
    free(a->data);
    a->data = NULL;
    a->len = a->cap = 0;
}
