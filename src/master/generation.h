/*
 * generation.h - a generation of workers: one config, the listeners opened
 * for it, and a process table with one slot per worker number. A reload
 * starts a new generation beside the live one and drains the old once the
 * new is ready; the master's loop (supervisor.c) drives the transitions.
 */
#ifndef PAGID_GENERATION_H
#define PAGID_GENERATION_H

#include <sys/types.h>

#include "common/config.h"
#include "common/shm.h"
#include "listeners.h"
#include "zygote.h"

typedef enum gen_state {
    GEN_STARTING, /* workers forked, not all past lifespan startup: the previous one serves */
    GEN_ACTIVE,   /* the generation that serves; crashed workers are respawned */
    GEN_DRAINING, /* SIGTERM sent (superseded, or stopping): waiting for the workers */
    GEN_FAILED,   /* could not start: its workers are being stopped, the old one serves */
} gen_state;

typedef enum worker_state {
    WS_EMPTY,   /* not started yet */
    WS_RUNNING, /* pid is alive (or not reaped yet) */
    WS_BACKOFF, /* crashed; restart at restart_at */
    WS_FATAL,   /* exited with EXIT_WORKER_FATAL: never restarted */
    WS_EXITED,  /* exited and not to be restarted (stop, drain, SIGTTOU) */
} worker_state;

typedef struct worker_slot {
    pid_t pid;
    int num; /* 1..N, kept by the replacement */
    worker_state state;
    double started;        /* monotonic seconds at fork */
    int respawn;           /* restart it when it exits */
    int ready;             /* its shm slot said: lifespan startup passed */
    int hb_killed;         /* SIGKILLed because its heartbeat went stale */
    int hb_reported;       /* its stale heartbeat was logged (the kill may be retried) */
    int kill_errno;        /* the last kill(2) of it failed so (logged once), or 0 */
    int retired;           /* recycling itself; its number has a new process already */
    int draining;          /* draining already (told with SIGTERM, or by itself): a second
                              SIGTERM would make it stop at once */
    unsigned fast_crashes; /* consecutive deaths within FAST_CRASH_MS of start */
    double restart_at;     /* WS_BACKOFF: monotonic time of the restart */
    uint32_t spawn_seq;    /* WS_RUNNING with pid 0: asked of the zygote, request number */
    int pubsub_peer;       /* its pub/sub channel in the broker: peer id + 1; 0 = none */
    int log_chan;          /* the master's end of its log channel (gen_logs.h) + 1; 0 = none */
} worker_slot;

typedef struct generation {
    unsigned id;
    gen_state state;
    pagid_config *cfg;
    int owns_cfg;       /* generation 1 borrows main's config */
    listener_set ls;    /* this generation's copies (dups) of the sockets */
    worker_slot *slots; /* n used, cap allocated */
    int n, cap;
    double deadline; /* STARTING: give up; DRAINING/FAILED: SIGKILL (then give up) */
    int killed;      /* SIGKILL already sent */
    int preload;     /* workers come from the zygote (config_preload_wanted) */
    zygote zy;
    int access_fd;           /* its access log, opened by the master (gen_logs.h), or -1 */
    int *pool_fds;           /* the worker pool's sockets, one per process, or NULL (generation_pool.c) */
    struct generation *next; /* older generations follow */
} generation;

/* What a fork needs beyond the generation itself. */
typedef struct gen_env {
    pid_t master_pid;
    shm_region *shm;
    generation *all;   /* every live generation: the child closes their sockets */
    int subreaper;     /* the master adopts orphans (PR_SET_CHILD_SUBREAPER): preload works */
    pid_t upgrade_pid; /* the new master of a binary upgrade: a child, never a worker */
    struct pubsub_broker *broker; /* pub/sub between workers, or NULL */
} gen_env;

/** A generation of nworkers (not started); takes ls. NULL when out of memory. */
generation *gen_new(unsigned id, pagid_config *cfg, int owns_cfg, listener_set *ls, int nworkers);
/**
 * Free g (already unlinked from the list). Unix socket files are removed
 * only when unlink_files and no generation of others holds the same socket.
 */
void gen_free(generation *g, const generation *others, int unlink_files);

/**
 * Start worker w: forked here, or asked of the zygote when g preloads. A
 * slot asked of the zygote is WS_RUNNING with pid 0 until its report comes
 * (gen_zygote_input); it is not signalled before then.
 */
void gen_spawn(const gen_env *e, generation *g, worker_slot *w);
/* A slot's process has just started (pid 0 while the zygote forks it): fresh state. */
void gen_slot_started(worker_slot *w, pid_t pid, double now);
void gen_spawn_all(const gen_env *e, generation *g);
/** The slot's pub/sub channel (if any) closes: its worker exited or never started. */
void gen_slot_pubsub_close(const gen_env *e, worker_slot *w);
/** The slot running pid, in any generation of list. */
worker_slot *gen_find(generation *list, pid_t pid, generation **owner);
/**
 * A worker of g exited: decide what its slot becomes (respawn now, later,
 * never). respawn_ok is 0 while the master stops.
 */
void gen_on_exit(const gen_env *e, generation *g, worker_slot *w, int status, double now,
                 int respawn_ok);
/** Send signo to every running worker of g (SIGTERM once per worker); failures are logged. */
void gen_signal(generation *g, int signo);
/** Workers of g the master could not signal for want of permission (EPERM). */
int gen_count_unkillable(const generation *g);
int gen_count(const generation *g, worker_state st);
/** Running workers plus those waiting to restart. */
int gen_live(const generation *g);
void gen_restart_due(const gen_env *e, generation *g, double now);
/** Refresh each slot's ready flag from shm; 1 when every running slot is ready. */
int gen_poll_ready(const gen_env *e, generation *g);
/**
 * Workers of g that stopped being ready on their own (max_requests: they
 * drain themselves) get their replacement now, not when they exit: the
 * old process moves to a retired slot and finishes its requests there.
 */
void gen_poll_recycling(const gen_env *e, generation *g);
/**
 * SIGKILL workers whose heartbeat is older than timeouts.heartbeat (a
 * blocked loop would never act on SIGTERM); returns how many have a fresh
 * one (at most 2 s old), for STATUS.
 */
int gen_check_heartbeats(const gen_env *e, generation *g, uint64_t now_ms);
/** Stop respawning and send SIGTERM; the deadline is timeouts.shutdown plus grace. */
void gen_drain(generation *g, double now);
/** SIGTTIN: one more worker (the lowest free number). 0, or -1 at the limit. */
int gen_add_worker(const gen_env *e, generation *g);
/** SIGTTOU: drain the highest-numbered worker; 0, or -1 when only one is left. */
int gen_remove_worker(generation *g);
/** Earliest backoff restart, or INFINITY. */
double gen_next_restart(const generation *g);
const char *gen_state_name(gen_state st);

/* ---- the worker pool (generation_pool.c) ---- */

/** One more slot at the end of g's table (NULL when out of memory). */
worker_slot *gen_append_slot(generation *g);
/** w is one of the pool's processes (its number is past POOL_NUM_BASE). */
int gen_is_pool_slot(const worker_slot *w);
/** "worker N" or "pool process N", for messages. */
const char *gen_slot_label(const worker_slot *w, char *buf, size_t len);
/** g's pool sockets, one per process, when its config has a pool (sets
 * cfg->worker_pool.fds); 0 or -1. */
int gen_pool_open(generation *g);
void gen_pool_close(generation *g);
/** The pool's slots after the workers' (gen_new); 0 or -1 (out of memory). */
int gen_pool_add_slots(generation *g);
/** "N workers", or "N workers and M pool processes" when pool > 0, in buf
 * (the master's messages count the two apart: -w 2 is 2 workers). */
const char *gen_describe_counts(int workers, int pool, char *buf, size_t len);
/** Running workers of g, pool processes not counted. */
int gen_count_workers(const generation *g);
/** A draining g whose workers are all gone: SIGTERM its pool processes. */
void gen_pool_drain_step(generation *g);

/* ---- in a child of the master (a worker, the zygote, a worker of the zygote) ---- */

/** Signal dispositions of a worker, the log role, and only g's sockets kept. */
void gen_child_prepare(const gen_env *e, generation *g, const char *role);
/** Die with the master (PR_SET_PDEATHSIG, after any change of user); exit if it is gone. */
void gen_child_attach(const gen_env *e);
/** Run worker num of g with its pub/sub channel and its log channel (-1:
 * none); never returns. */
void gen_child_work(const gen_env *e, generation *g, int num, int pubsub_fd, int log_chan)
    __attribute__((noreturn));

/* ---- the zygote, from the master's side (generation_zygote.c) ---- */

/** Reports waiting on g's zygote channel, kept until gen_zygote_settle verifies them. */
void gen_zygote_input(const gen_env *e, generation *g);
/**
 * Act on g's reported pids: one that /proc shows is the master's own child
 * becomes its slot's pid (or is SIGKILLed when no slot waits for it: ours,
 * and unsupervised); one that cannot be is logged and dropped; one whose
 * middle process has not exited yet waits. Returns how many still wait.
 */
int gen_zygote_settle(const gen_env *e, generation *g);
/**
 * The master reaped pid, which is no slot's: the slot a report of it was
 * waiting for, given that pid (a reaped child is the master's own), or NULL.
 */
worker_slot *gen_zygote_claim(generation *list, pid_t pid, generation **owner);
/** g drains or stops: its zygote's channel is shut (the zygote exits), its last reports read. */
void gen_zygote_end(generation *g);
/** The generation of list whose zygote is pid, or NULL. */
generation *gen_find_zygote(generation *list, pid_t pid);
/**
 * g's zygote exited: its unanswered requests are retried (or fatal, when
 * it could not load the apps), and a crashed zygote is started again, or
 * after repeated fast crashes given up on: the generation then forks
 * workers that load the apps themselves.
 */
void gen_zygote_exited(const gen_env *e, generation *g, int status, double now, int respawn_ok);
/** SIGKILL g's zygote when a request waits longer than the startup's deadline. */
void gen_zygote_check(generation *g, double now);
/** Ask g's zygote (starting it if needed) for worker w; -1 when g must fork it itself. */
int gen_zygote_spawn(const gen_env *e, generation *g, worker_slot *w, double now);

#endif
