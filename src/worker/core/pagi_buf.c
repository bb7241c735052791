/*
 * pagi_buf.c - reference-counted buffers the app lends to the server for
 * zero-copy sends (pagi.h): a count and the app's free function. A worker is
 * single-threaded, so the count is a plain integer.
 */
#include "pagi_buf.h"

#include <stdlib.h>

struct pagi_buf {
    const void *ptr;
    size_t len;
    unsigned long refs;
    pagi_buf_free_fn free_fn;
    void *ud;
};

pagi_buf *pagi_buf_wrap(const void *ptr, size_t len, pagi_buf_free_fn free_fn, void *ud)
{
    if (len && !ptr)
        return NULL;
    pagi_buf *b = malloc(sizeof *b);
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
    if (b)
        b->refs++;
    return b;
}

void pagi_buf_unref(pagi_buf *b)
{
    if (!b || --b->refs > 0)
        return;
    /* Read everything before free_fn: it may free memory b's fields name. */
    pagi_buf_free_fn fn = b->free_fn;
    void *ptr = (void *)b->ptr, *ud = b->ud;
    free(b);
    if (fn)
        fn(ptr, ud);
}

const void *pagi_buf_data(const pagi_buf *b)
{
    return b ? b->ptr : NULL;
}
size_t pagi_buf_len(const pagi_buf *b)
{
    return b ? b->len : 0;
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
