/*
 * gen_logs.h - the log files a generation's workers write, opened by the
 * master as root and handed to each worker (and zygote) over its own log
 * channel: at its start, and again after every SIGUSR1 reopen. Workers
 * never open a log by path, so a log directory only root can enter works
 * with workers that run as nobody (the nginx convention).
 */
#ifndef PAGID_GEN_LOGS_H
#define PAGID_GEN_LOGS_H

#include <stddef.h>

#include "generation.h"

/**
 * Open the access log of c (if it has one) as this process, for a new
 * generation's access_fd: *fd is it, or -1. When the master cannot (the
 * packaged unit keeps root without CAP_DAC_OVERRIDE, and the packaged log
 * directory is the workers' user's), *fd is -1 and the workers open the
 * path themselves, as that user; said once at info level. Always 0.
 */
int gen_logs_open(const pagid_config *c, int *fd, char *err, size_t errlen);
/** Close g's access log (gen_free). */
void gen_logs_close(generation *g);

/**
 * A log channel for a process of g, with the current files already sent on
 * it: the master's end in *master_end, the child's end returned (the
 * caller closes it once the child has it). -1 after logging.
 */
int gen_logs_channel(const generation *g, int *master_end);

/** A slot's channel (its master end), closed when its worker is gone. */
void gen_slot_logs_close(worker_slot *w);

/**
 * SIGUSR1: reopen the error log and every generation's access log (a file
 * that cannot be opened keeps the old one, logged), then hand the files to
 * every worker and zygote that has a channel.
 */
void gen_logs_reopen(generation *all);

#endif
