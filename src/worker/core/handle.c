/*
 * handle.c - pools behind the API's handles (handle.h): chunked objects, a
 * delayed-reuse free FIFO with a generation per object, and the
 * once-per-kind misuse log. Memory stays mapped for the pool's lifetime, so
 * checking a stale handle is a plain load, never a use-after-free.
 */
#include "handle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#if defined(__SANITIZE_ADDRESS__)
#define HANDLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HANDLE_ASAN 1
#endif
#endif
#ifdef HANDLE_ASAN
#include <sanitizer/asan_interface.h>
/* The header stays readable (that is the check); the body is poisoned, so
 * pagid's own code touching a released object is still an ASan report. */
#define BODY_POISON(o, p)                                                                          \
    ASAN_POISON_MEMORY_REGION((char *)(o) + sizeof(handle_hdr), (p)->size - sizeof(handle_hdr))
#define BODY_UNPOISON(o, p)                                                                        \
    ASAN_UNPOISON_MEMORY_REGION((char *)(o) + sizeof(handle_hdr), (p)->size - sizeof(handle_hdr))
#else
#define BODY_POISON(o, p) ((void)0)
#define BODY_UNPOISON(o, p) ((void)0)
#endif

/* Objects per chunk: a chunk is one malloc, never freed before the pool. */
#define CHUNK_OBJECTS 64

struct handle_chunk {
    struct handle_chunk *next;
    _Alignas(max_align_t) unsigned char mem[];
};

/* Objects are laid out at this stride, so each is suitably aligned. */
static size_t stride(const handle_pool *p)
{
    size_t a = _Alignof(max_align_t);
    return (p->size + a - 1) / a * a;
}

void *handle_get(handle_pool *p, uint32_t magic)
{
    handle_hdr *h;
    if (p->nfree > p->reuse_after) {
        h = p->free_head;
        p->free_head = h->next_free;
        if (!p->free_head)
            p->free_tail = NULL;
        p->nfree--;
        BODY_UNPOISON(h, p);
    } else {
        if (!p->chunks || p->chunk_used == CHUNK_OBJECTS) {
            struct handle_chunk *c = malloc(sizeof *c + CHUNK_OBJECTS * stride(p));
            if (!c)
                return NULL;
            c->next = p->chunks;
            p->chunks = c;
            p->chunk_used = 0;
        }
        h = (handle_hdr *)(p->chunks->mem + p->chunk_used++ * stride(p));
        h->gen = 0;
    }
    uint32_t gen = h->gen;
    memset(h, 0, p->size);
    h->magic = magic;
    h->gen = gen;
    return h;
}

void handle_put(handle_pool *p, void *obj)
{
    handle_hdr *h = obj;
    h->magic = HANDLE_RELEASED;
    h->gen++;
    h->next_free = NULL;
    if (p->free_tail)
        p->free_tail->next_free = h;
    else
        p->free_head = h;
    p->free_tail = h;
    p->nfree++;
    BODY_POISON(h, p);
}

void handle_pool_free(handle_pool *p)
{
    while (p->chunks) {
        struct handle_chunk *c = p->chunks;
        p->chunks = c->next;
#ifdef HANDLE_ASAN
        ASAN_UNPOISON_MEMORY_REGION(c->mem, CHUNK_OBJECTS * stride(p));
#endif
        free(c);
    }
    p->free_head = p->free_tail = NULL;
    p->nfree = 0;
    p->chunk_used = 0;
}

/* Call names already logged (release builds log each once). */
#define LOGGED_MAX 64
static const char *logged[LOGGED_MAX];
static size_t n_logged;

static int first_time(const char *fn)
{
    for (size_t i = 0; i < n_logged; i++)
        if (logged[i] == fn || strcmp(logged[i], fn) == 0)
            return 0;
    if (n_logged < LOGGED_MAX)
        logged[n_logged++] = fn;
    return 1;
}

void handle_misuse(int debug, const char *fn, const char *fmt, ...)
{
    if (!debug && !first_time(fn))
        return;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    log_error("%s: %s%s", fn, what, debug ? "" : " (logged once per call; --debug logs each)");
}
