/*
 * h2_mem.c - nghttp2's allocator in a worker: blocks of up to 2 KiB come
 * from short per-size free lists, larger ones from malloc. A session
 * allocates and frees several small blocks for every stream (the stream,
 * its header copies, each outbound item): with ten streams a read, more
 * than glibc's per-size cache keeps, malloc took its slow path for most.
 * The streams themselves (h2_stream.c) come from the same lists.
 */
#include "h2_mem.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Size classes 64 B .. 2 KiB; each list keeps at most H2_MEM_KEEP blocks,
 * so a worker holds at most ~64 KiB of them whatever the traffic was. */
#define H2_MEM_CLASSES 6
#define H2_MEM_MIN 64
#define H2_MEM_MAX (H2_MEM_MIN << (H2_MEM_CLASSES - 1))
#if defined(__SANITIZE_ADDRESS__)
#define H2_MEM_KEEP 0 /* AddressSanitizer sees every block's use after free */
#else
#define H2_MEM_KEEP 16
#endif

/* In front of every block: what it can hold (a class size, or more than
 * H2_MEM_MAX for a block of its own); the union keeps the payload aligned. */
typedef union block_head {
    size_t capacity;
    max_align_t align;
} block_head;

typedef struct free_block {
    struct free_block *next;
} free_block;

/* One worker is one thread: the lists are the process's. */
static free_block *free_lists[H2_MEM_CLASSES];
static unsigned free_counts[H2_MEM_CLASSES];

/* The smallest class that holds size (<= H2_MEM_MAX): by the bit length
 * of size - 1, not a loop (every block of every session comes here). */
static int class_of(size_t size)
{
    if (size <= H2_MEM_MIN)
        return 0;
    int bits = (int)(sizeof(unsigned long) * 8) - __builtin_clzl((unsigned long)(size - 1));
    return bits - 6; /* 2^6 = H2_MEM_MIN */
}
_Static_assert(H2_MEM_MIN == 64, "class_of counts classes from 2^6");

static void *mem_malloc(size_t size, void *ud)
{
    (void)ud;
    size_t capacity = size;
    int k = -1;
    if (size <= H2_MEM_MAX) {
        k = class_of(size);
        capacity = (size_t)H2_MEM_MIN << k;
        if (free_lists[k]) {
            free_block *b = free_lists[k];
            free_lists[k] = b->next;
            free_counts[k]--;
            return b;
        }
    }
    if (capacity > SIZE_MAX - sizeof(block_head))
        return NULL;
    block_head *h = malloc(sizeof *h + capacity);
    if (!h)
        return NULL;
    h->capacity = capacity;
    return h + 1;
}

static size_t capacity_of(void *p)
{
    return ((block_head *)p - 1)->capacity;
}

static void mem_free(void *p, void *ud)
{
    (void)ud;
    if (!p)
        return;
    size_t capacity = capacity_of(p);
    if (capacity <= H2_MEM_MAX) {
        int k = class_of(capacity);
        if (free_counts[k] + 1 <= H2_MEM_KEEP) { /* not "<": KEEP is 0 under ASan (-Wtype-limits) */
            free_block *b = p;
            b->next = free_lists[k];
            free_lists[k] = b;
            free_counts[k]++;
            return;
        }
    }
    free((block_head *)p - 1);
}

static void *mem_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = mem_malloc(n * size, ud);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static void *mem_realloc(void *p, size_t size, void *ud)
{
    if (!p)
        return mem_malloc(size, ud);
    if (size == 0) { /* as glibc's realloc: freed */
        mem_free(p, ud);
        return NULL;
    }
    size_t capacity = capacity_of(p);
    if (size <= capacity)
        return p;
    void *q = mem_malloc(size, ud);
    if (!q)
        return NULL;
    memcpy(q, p, capacity);
    mem_free(p, ud);
    return q;
}

void *h2_mem_calloc(size_t size)
{
    return mem_calloc(1, size, NULL);
}

void h2_mem_free(void *p)
{
    mem_free(p, NULL);
}

nghttp2_mem *h2_mem(void)
{
    static nghttp2_mem mem = {NULL, mem_malloc, mem_free, mem_calloc, mem_realloc};
    return &mem;
}

void h2_mem_release(void)
{
    for (int k = 0; k < H2_MEM_CLASSES; k++) {
        while (free_lists[k]) {
            free_block *b = free_lists[k];
            free_lists[k] = b->next;
            free((block_head *)(void *)b - 1);
        }
        free_counts[k] = 0;
    }
}

size_t h2_mem_kept(void)
{
    size_t n = 0;
    for (int k = 0; k < H2_MEM_CLASSES; k++)
        n += free_counts[k];
    return n;
}
