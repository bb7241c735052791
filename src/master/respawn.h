/*
 * respawn.h - the master's respawn policy, in one place: what a dead
 * worker's slot becomes (never again, not now, at once, after a crash-loop
 * backoff), when a failed fork is retried, when a generation gives up on
 * its zygote. Pure functions of the facts; generation.c and
 * generation_zygote.c apply the verdicts and log them.
 */
#ifndef PAGID_RESPAWN_H
#define PAGID_RESPAWN_H

/* A worker that dies within RESPAWN_FAST_CRASH_MS of its start counts as a
 * fast crash; consecutive fast crashes back off from MIN to MAX. */
#define RESPAWN_FAST_CRASH_MS 1000
#define RESPAWN_BACKOFF_MIN_MS 100
#define RESPAWN_BACKOFF_MAX_MS 10000
/* A fork that failed (no memory, no pids) is retried after this long. */
#define RESPAWN_FORK_RETRY_S 1.0
/* A zygote that dies this soon after its start, this many times in a row,
 * is given up on for its generation (loading a large app takes seconds). */
#define RESPAWN_ZYGOTE_FAST_CRASH_S 10.0
#define RESPAWN_ZYGOTE_MAX_FAST_CRASHES 3

typedef enum respawn_action {
    RESPAWN_FATAL,   /* it could not start (EXIT_WORKER_FATAL): never restarted */
    RESPAWN_NONE,    /* not wanted any more (stop, drain, superseded): stays down */
    RESPAWN_RECYCLE, /* a planned replacement (max_requests): at once, no backoff */
    RESPAWN_NOW,     /* died unexpectedly: at once */
    RESPAWN_LATER,   /* died in a crash loop: after delay_ms */
} respawn_action;

/** What the master knows when a worker exits. */
typedef struct respawn_facts {
    int status;            /* the wait(2) status */
    int wanted;            /* the master still wants this slot running */
    double uptime_s;       /* since its fork */
    unsigned fast_crashes; /* consecutive fast crashes before this death */
} respawn_facts;

typedef struct respawn_verdict {
    respawn_action action;
    unsigned fast_crashes; /* the count to keep for the slot's next death */
    unsigned delay_ms;     /* RESPAWN_LATER: how long to wait */
    int as_asked;          /* RESPAWN_NONE: the exit was the one asked for (log at info) */
} respawn_verdict;

/** The verdict on a worker's exit. */
respawn_verdict respawn_decide(const respawn_facts *f);

/**
 * Delay in milliseconds before restarting a worker that has just crashed
 * for the n-th time in a row within RESPAWN_FAST_CRASH_MS of starting
 * (n >= 1): 0 for the first, then 100, 200, 400 ... capped at 10 s.
 */
unsigned respawn_backoff_ms(unsigned fast_crashes);

/**
 * A zygote died with worker requests unanswered: what each such slot
 * becomes. fatal: it exited with EXIT_WORKER_FATAL (the apps do not load).
 * Only RESPAWN_FATAL, RESPAWN_NONE or RESPAWN_NOW.
 */
respawn_action respawn_after_zygote(int fatal, int wanted);

/** A zygote died after uptime_s: its new count of consecutive fast deaths. */
unsigned respawn_zygote_fast_crashes(unsigned prev, double uptime_s);

/** 1 when a generation stops using its zygote (it forks workers directly). */
int respawn_zygote_given_up(unsigned fast_crashes);

#endif
