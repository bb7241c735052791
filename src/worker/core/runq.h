/*
 * runq.h - the worker's run queue. Every callback pagid makes into an app
 * (receive delivery, send completion, on_disconnect, ...) is queued here and
 * run at a safe point of the loop, so no callback ever runs inside the
 * interface call that caused it, and stack depth stays constant however
 * long an app chains sends from completions.
 */
#ifndef PAGID_RUNQ_H
#define PAGID_RUNQ_H

#include <stddef.h>

typedef struct runq_item runq_item;
typedef void (*runq_fn)(const runq_item *it);
/** Any function pointer, cast back to its real type by the runq_fn. */
typedef void (*runq_any_fn)(void);

struct runq_item {
    runq_fn fn;
    runq_any_fn cb; /* the app callback the job will call, if any */
    void *a, *b, *c;
};

typedef struct runq {
    runq_item *items; /* ring buffer */
    size_t cap, head, count;
} runq;

void runq_init(runq *q);
void runq_free(runq *q);
/** Queue fn(item); 0 or -1 on allocation failure. */
int runq_push(runq *q, runq_fn fn, runq_any_fn cb, void *a, void *b, void *c);
/**
 * Run the items that were queued when the drain began (not those they
 * queue), so I/O gets its turn between rounds. Returns how many ran.
 */
size_t runq_drain(runq *q);
/** Take the oldest item into *out: 1, or 0 when empty. */
int runq_pop(runq *q, runq_item *out);
static inline size_t runq_pending(const runq *q) { return q->count; }
/**
 * An empty ring over keep_cap items is freed (the next push starts small
 * again): a burst must not pin its high-water mark for the worker's life.
 * Returns the bytes freed.
 */
size_t runq_shrink(runq *q, size_t keep_cap);

#endif
