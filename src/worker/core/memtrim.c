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
    double last; /* ev_now of the last trim; 0 = none yet */
} trim;

static void memtrim_on_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)t, (void)revents;
    trim.noted = 0;
    malloc_trim(0);
    trim.last = ev_now(ev);
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
        double at = MEMTRIM_DELAY;
        if (trim.last > 0 && trim.last + MEMTRIM_MIN_INTERVAL - ev_now(ev) > at)
            at = trim.last + MEMTRIM_MIN_INTERVAL - ev_now(ev);
        ev_timer_set(&trim.timer, at, 0.);
        ev_timer_start(ev, &trim.timer);
    }
}

void memtrim_stop(void)
{
    if (trim.ev)
        ev_timer_stop(trim.ev, &trim.timer);
    trim.ev = NULL;
    trim.noted = 0;
}

size_t memtrim_pending(void)
{
    return trim.noted;
}
