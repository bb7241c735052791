/*
 * runq.c - the run queue (see runq.h): a growable ring of small closures.
 */
#include "runq.h"
#include "reason.h"

#include <stdlib.h>
#include <string.h>

/* The interned reason words live here: the run queue is what carries them. */
const char reason_client_closed[] = "client_closed";
const char reason_client_timeout[] = "client_timeout";
const char reason_idle_timeout[] = "idle_timeout";
const char reason_keepalive_timeout[] = "keepalive_timeout";
const char reason_write_timeout[] = "write_timeout";
const char reason_write_error[] = "write_error";
const char reason_read_error[] = "read_error";
const char reason_protocol_error[] = "protocol_error";
const char reason_server_shutdown[] = "server_shutdown";
const char reason_server_error[] = "server_error";
const char reason_body_too_large[] = "body_too_large";
const char reason_queue_overflow[] = "queue_overflow";
const char reason_response_timeout[] = "x-response-timeout";

void runq_init(runq *q) { memset(q, 0, sizeof *q); }

void runq_free(runq *q)
{
    free(q->items);
    memset(q, 0, sizeof *q);
}

static int runq_grow(runq *q)
{
    size_t ncap = q->cap ? q->cap * 2 : 256;
    runq_item *n = malloc(ncap * sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < q->count; i++)
        n[i] = q->items[(q->head + i) % q->cap];
    free(q->items);
    q->items = n;
    q->cap = ncap;
    q->head = 0;
    return 0;
}

int runq_push(runq *q, runq_fn fn, runq_any_fn cb, void *a, void *b, void *c)
{
    if (q->count == q->cap && runq_grow(q) < 0)
        return -1;
    runq_item *it = &q->items[(q->head + q->count) % q->cap];
    it->fn = fn;
    it->cb = cb;
    it->a = a;
    it->b = b;
    it->c = c;
    q->count++;
    return 0;
}

size_t runq_drain(runq *q)
{
    size_t n = q->count;
    for (size_t i = 0; i < n; i++) {
        /* Copy out before running: the callback may push and grow the ring. */
        runq_item it = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        it.fn(&it);
    }
    return n;
}

int runq_pop(runq *q, runq_item *out)
{
    if (!q->count)
        return 0;
    *out = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    return 1;
}

size_t runq_shrink(runq *q, size_t keep_cap)
{
    if (q->count || q->cap <= keep_cap)
        return 0;
    size_t bytes = q->cap * sizeof *q->items;
    runq_free(q);
    return bytes;
}
