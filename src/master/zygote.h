/*
 * zygote.h - a generation's zygote: a process the master forks after the
 * config is loaded and the listeners bound, which drops privileges as a
 * worker does, loads the apps once (worker_preload) and then forks workers
 * when the master asks, so their compiled code is shared copy-on-write.
 * The master is a child subreaper and the zygote double-forks: each worker
 * is the master's child, supervised as if the master had forked it.
 */
#ifndef PAGID_ZYGOTE_H
#define PAGID_ZYGOTE_H

#include <stdint.h>
#include <sys/types.h>

#include "zygote_msg.h"

struct generation;
struct gen_env;

/* A worker's pid as reported, not trusted yet: app code runs in the
 * zygote and can write any report. It becomes a slot's pid once
 * /proc shows it is the master's own child (gen_zygote_settle). */
typedef struct zygote_report {
    pid_t pid;
    int num;
    uint32_t seq;
    double at; /* monotonic seconds when read */
} zygote_report;

#define ZYGOTE_REPORTS 16

/** The master's view of one generation's zygote. */
typedef struct zygote {
    pid_t pid;             /* running (or not reaped yet), else 0 */
    int fd;                /* the master's end of the socketpair, or -1 */
    int log_chan;          /* the master's end of its log channel (gen_logs.h), or -1 */
    double started;        /* monotonic seconds at fork */
    unsigned fast_crashes; /* consecutive deaths soon after start */
    int fallback;          /* given up on: the generation forks workers directly */
    int hung;              /* SIGKILLed for not answering in time */
    uint32_t next_seq;     /* the last request number sent */
    zygote_report reports[ZYGOTE_REPORTS]; /* read, not verified yet */
    int n_reports;
} zygote;

void zygote_init(zygote *z);

/**
 * Fork the zygote of g: it closes every other generation's sockets, drops
 * privileges, loads g's apps (exiting EXIT_WORKER_FATAL when they cannot
 * load), then serves spawn requests until its channel closes. 0, or -1
 * after logging (fork or socketpair failed).
 */
int zygote_start(const struct gen_env *e, struct generation *g);

/**
 * Ask for worker num, passing log_fd (the worker's log channel, always)
 * and pubsub_fd (its pub/sub channel, or -1: none), in that order, with
 * SCM_RIGHTS; the caller still closes its copies. Returns the request's
 * number (never 0), echoed in the report, or 0 when the request could not
 * be sent (the zygote died).
 */
uint32_t zygote_request(zygote *z, int num, int log_fd, int pubsub_fd);

/**
 * One report from the zygote, without blocking: 1 with *m filled, 0 when
 * nothing waits, -1 when the channel is closed (the zygote is gone).
 * Malformed datagrams are logged and skipped.
 */
int zygote_read(zygote *z, zygote_msg *m);

/** Close the master's end; a zygote that reads EOF exits. */
void zygote_close(zygote *z);

/**
 * Shut the channel both ways before its last reads: the zygote reads EOF
 * (and exits), and a middle process's report sent from now on fails, so
 * the middle kills its worker instead of leaving it unsupervised.
 */
void zygote_shutdown(zygote *z);

#endif
