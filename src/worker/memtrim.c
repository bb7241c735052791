/*
 * memtrim.c - see memtrim.h. The state is per process, like the malloc
 * arenas it trims: one worker, one loop, one pending trim at most.
 */
#include "memtrim.h"

#include <malloc.h>

static struct {
    ev_timer timer;
    struct ev_loop *ev;
    size_t noted;
} trim;

static void memtrim_on_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev, (void)t, (void)revents;
    trim.noted = 0;
    malloc_trim(0);
}

void memtrim_note(struct ev_loop *ev, size_t bytes)
{
    trim.noted += bytes;
    if (!ev)
        ev = trim.ev; /* freed after its connection closed: the loop that last noted */
    if (trim.noted < MEMTRIM_THRESHOLD || !ev)
        return;
    if (trim.ev != ev) {
        if (trim.ev)
            ev_timer_stop(trim.ev, &trim.timer);
        ev_timer_init(&trim.timer, memtrim_on_timer, MEMTRIM_DELAY, 0.);
        trim.ev = ev;
    }
    if (!ev_is_active(&trim.timer)) {
        ev_timer_set(&trim.timer, MEMTRIM_DELAY, 0.);
        ev_timer_start(ev, &trim.timer);
    }
}

size_t memtrim_pending(void)
{
    return trim.noted;
}
