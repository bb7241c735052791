/*
 * respawn.c - the master's respawn policy (see respawn.h): one table of
 * verdicts for every way a worker or zygote can end, so the supervisor,
 * the generations and the zygote's bookkeeping cannot drift apart.
 */
#include "respawn.h"

#include <signal.h>
#include <sys/wait.h>

#include "common/exitcodes.h"

unsigned respawn_backoff_ms(unsigned fast_crashes)
{
    if (fast_crashes <= 1)
        return 0;
    unsigned ms = RESPAWN_BACKOFF_MIN_MS;
    for (unsigned i = 2; i < fast_crashes && ms < RESPAWN_BACKOFF_MAX_MS; i++)
        ms *= 2;
    return ms < RESPAWN_BACKOFF_MAX_MS ? ms : RESPAWN_BACKOFF_MAX_MS;
}

respawn_verdict respawn_decide(const respawn_facts *f)
{
    respawn_verdict v = {.action = RESPAWN_NONE, .fast_crashes = f->fast_crashes};
    int code = WIFEXITED(f->status) ? WEXITSTATUS(f->status) : -1;

    if (code == EXIT_WORKER_FATAL) {
        v.action = RESPAWN_FATAL;
        return v;
    }
    if (!f->wanted) {
        /* A clean exit, or death by the SIGQUIT of a fast stop, is what was
         * asked for; anything else is worth a warning. */
        v.as_asked = code == EXIT_OK || code == EXIT_RECYCLE ||
                     (WIFSIGNALED(f->status) && WTERMSIG(f->status) == SIGQUIT);
        return v;
    }
    if (code == EXIT_RECYCLE) {
        /* It served max_requests and drained itself: it did real work, so
         * no crash backoff applies. */
        v.action = RESPAWN_RECYCLE;
        v.fast_crashes = 0;
        return v;
    }
    v.fast_crashes = f->uptime_s * 1000.0 < RESPAWN_FAST_CRASH_MS ? f->fast_crashes + 1 : 0;
    v.delay_ms = respawn_backoff_ms(v.fast_crashes);
    v.action = v.delay_ms ? RESPAWN_LATER : RESPAWN_NOW;
    return v;
}

respawn_action respawn_after_zygote(int fatal, int wanted)
{
    if (fatal)
        return RESPAWN_FATAL;
    /* The request itself is retried at once: the worker never ran, so it
     * did not crash, and the zygote's own deaths are counted apart. */
    return wanted ? RESPAWN_NOW : RESPAWN_NONE;
}

unsigned respawn_zygote_fast_crashes(unsigned prev, double uptime_s)
{
    return uptime_s < RESPAWN_ZYGOTE_FAST_CRASH_S ? prev + 1 : 0;
}

int respawn_zygote_given_up(unsigned fast_crashes)
{
    return fast_crashes >= RESPAWN_ZYGOTE_MAX_FAST_CRASHES;
}
