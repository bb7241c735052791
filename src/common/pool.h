/*
 * pool.h - the worker pool's facts shared by the master, its workers and
 * its processes (docs/psgi.md, "The worker pool"): which slot numbers are
 * pool processes, what a worker or pool process knows of its pool, and the
 * pool's figures read from the shared region (busy, idle, queue depth).
 */
#ifndef PAGID_POOL_H
#define PAGID_POOL_H

#include <stdint.h>

#include "shm.h"

/* Slot numbers of a generation's pool processes: POOL_NUM_BASE + 1 .. + N
 * (workers are 1 .. CONFIG_MAX_WORKERS); the number travels to the zygote
 * as a worker's does. */
#define POOL_NUM_BASE 10000

static inline int pool_is_process_num(int num)
{
    return num > POOL_NUM_BASE;
}

/* What a worker (client) or a pool process knows of its generation's pool;
 * reached by the Perl host through pagi_loop.pool. */
typedef struct pool_info {
    int process;    /* 1 in a pool process, 0 in a worker */
    int num;        /* a pool process's number, 1..processes */
    const int *fds; /* a listening socket per pool process, [num - 1] (inherited) */
    int processes;  /* as configured */
    int queue_limit;
    double timeout;       /* seconds, 0 = none */
    long max_requests;    /* a pool process is replaced after this many; 0 = never */
    const char *handlers; /* the handlers file of a PAGI app, or NULL */
    const char *app;      /* the top-level app's spec: the app the pool serves */
    shm_region *shm;      /* NULL without the shared region (then no figures) */
    shm_worker *self;     /* this process's slot, or NULL */
    unsigned generation;
} pool_info;

/* A pool process's pool_state in its slot. It sets IDLE when it can take a
 * request; a worker that wants it changes IDLE to CLAIMED with a CAS and
 * then sends the request on its kept connection to that process; the
 * process sets IDLE again just before it writes its response's last frames
 * (or OFF when it will exit after it). */
enum { POOL_OFF = 0, POOL_IDLE = 1, POOL_CLAIMED = 2 };

/** Claim an idle pool process of generation gen: its number (1..) with its
 * slot (*slot) set CLAIMED, or 0 when none is idle. *cursor spreads the
 * claims. */
int pool_claim(shm_region *shm, unsigned gen, unsigned *cursor, shm_worker **slot);

/** The requests and calls the workers of generation gen keep waiting for a
 * free process (their queues), summed. */
int64_t pool_queued(const shm_region *shm, unsigned gen);

/* The pool's state now, summed over the generation's slots. */
typedef struct pool_figures {
    int workers;         /* pool processes running */
    int busy, idle;      /* of those: running a request or call, waiting for one */
    int64_t queue_depth; /* requests and calls that wait for a free process */
    uint64_t rejected;   /* refused because the queue was full */
    uint64_t timeouts;   /* answered 504 / failed past worker_pool.timeout */
    uint64_t served;     /* requests and calls the processes finished */
} pool_figures;

/** Read the figures of generation gen's pool from shm (zeros when NULL). */
void pool_figures_read(const shm_region *shm, unsigned gen, pool_figures *out);

#endif
