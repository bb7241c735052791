/*
 * pagi_buf.c - reference-counted buffers the app lends to the server for
 * zero-copy sends (pagi.h): a count and the app's free function. A worker is
 * single-threaded, so the count is a plain integer. Buffers come from a
 * handle pool (handle.h): one unref too many is refused and logged, not a
 * use-after-free.
 */
#include "pagi_buf.h"

#include <stdlib.h>

#include "handle.h"

#define BUF_MAGIC 0xB0FFE4EDu

struct pagi_buf {
    handle_hdr h;
    const void *ptr;
    size_t len;
    unsigned long refs;
    pagi_buf_free_fn free_fn;
    void *ud;
};

/* One pool per process: pagi_buf_wrap has no scope to find a worker by,
 * and a worker runs one loop thread (pagi.h: buffers are not thread-safe). */
static handle_pool pool = HANDLE_POOL_INIT("buffer", pagi_buf, 256);

/* Is b a live buffer? Otherwise the call fn is refused, logged once. */
static int buf_ok(const pagi_buf *b, const char *fn)
{
    if (!b) {
        handle_misuse(0, fn, "NULL buffer");
        return 0;
    }
    if (__builtin_expect(handle_live(b, BUF_MAGIC), 1))
        return 1;
    handle_misuse(0, fn, "buffer %p was released (its last reference was dropped before)",
                  (const void *)b);
    return 0;
}

int pagi_buf_live(const pagi_buf *b, const char *fn)
{
    return buf_ok(b, fn);
}

pagi_buf *pagi_buf_wrap(const void *ptr, size_t len, pagi_buf_free_fn free_fn, void *ud)
{
    if (len && !ptr) {
        handle_misuse(0, "pagi_buf_wrap", "NULL pointer with length %zu", len);
        return NULL;
    }
    pagi_buf *b = handle_get(&pool, BUF_MAGIC);
    if (!b)
        return NULL;
    b->ptr = ptr;
    b->len = len;
    b->refs = 1;
    b->free_fn = free_fn;
    b->ud = ud;
    return b;
}

pagi_buf *pagi_buf_ref(pagi_buf *b)
{
    if (!buf_ok(b, "pagi_buf_ref"))
        return NULL;
    b->refs++;
    return b;
}

void pagi_buf_unref(pagi_buf *b)
{
    /* NULL is documented as ignored; a released buffer is a misuse. */
    if (!b || !buf_ok(b, "pagi_buf_unref") || --b->refs > 0)
        return;
    /* Read everything before free_fn: it may free memory b's fields name. */
    pagi_buf_free_fn fn = b->free_fn;
    void *ptr = (void *)b->ptr, *ud = b->ud;
    handle_put(&pool, b);
    if (fn)
        fn(ptr, ud);
}

const void *pagi_buf_data(const pagi_buf *b)
{
    return b && buf_ok(b, "pagi_buf_data") ? b->ptr : NULL;
}
size_t pagi_buf_len(const pagi_buf *b)
{
    return b && buf_ok(b, "pagi_buf_len") ? b->len : 0;
}

static void queue_release(void *ud)
{
    pagi_buf_unref(ud);
}

int pagi_buf_queue(pagi_buf *b, outq *q)
{
    if (b->len == 0)
        return 0;
    pagi_buf_ref(b);
    if (outq_append_ext(q, b->ptr, b->len, queue_release, b) < 0) {
        b->refs--; /* the caller still holds one: never the last */
        return -1;
    }
    return 0;
}
