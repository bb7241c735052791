/*
 * gen_logs.c - the master's side of log handover (gen_logs.h). Each worker
 * slot and each zygote holds the master's end of a datagram socketpair
 * (log_handover.h); a message on it carries the error log and the
 * generation's access log. We chose this over nginx's way (the master
 * chowns the files to the workers' user and the workers reopen by path)
 * because a directory of mode 0700 owned by root cannot be entered by the
 * workers at all, whoever owns the files in it.
 */
#include "gen_logs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/log_handover.h"

int gen_logs_open(const pagid_config *c, int *fd, char *err, size_t errlen)
{
    const char *path = c->access_log_path;
    *fd = -1;
    /* '-' is each worker's inherited standard error: nothing to open here. */
    if (!path || !*path || config_path_is_stderr(path))
        return 0;
    /* O_NONBLOCK: a FIFO with a stalled reader must not stall a worker. */
    *fd = log_open_append(path, 1, O_NONBLOCK);
    if (*fd < 0) {
        snprintf(err, errlen, "access log %s: the master cannot open it (%s); each worker opens it",
                 path, log_open_strerror(errno));
        log_info("%s", err);
    }
    return 0;
}

void gen_logs_close(generation *g)
{
    if (g->access_fd >= 0)
        close(g->access_fd);
    g->access_fd = -1;
}

int gen_logs_channel(const generation *g, int *master_end)
{
    int sv[2];
    *master_end = -1;
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) {
        log_error("cannot create a log channel: %s", strerror(errno));
        return -1;
    }
    if (log_handover_send(sv[0], log_file_fd(), g->access_fd) < 0) {
        log_error("cannot hand the log files over: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    *master_end = sv[0];
    return sv[1];
}

void gen_slot_logs_close(worker_slot *w)
{
    if (w->log_chan > 0)
        close(w->log_chan - 1);
    w->log_chan = 0;
}

static void hand_over(int chan, const generation *g, const char *who, int num)
{
    if (log_handover_send(chan, log_file_fd(), g->access_fd) < 0)
        log_error("SIGUSR1: cannot hand the reopened logs to %s %d of generation %u: %s", who, num,
                  g->id, strerror(errno));
}

void gen_logs_reopen(generation *all)
{
    if (log_reopen() < 0)
        log_error("SIGUSR1: cannot reopen the error log: %s", log_open_strerror(errno));
    for (generation *g = all; g; g = g->next) {
        char err[4200];
        int fd;
        /* A file the master cannot open (now) the workers reopen by path,
         * told so by a handover without it. */
        gen_logs_open(g->cfg, &fd, err, sizeof err);
        if (g->access_fd >= 0)
            close(g->access_fd);
        g->access_fd = fd;
        for (int i = 0; i < g->n; i++)
            if (g->slots[i].log_chan > 0)
                hand_over(g->slots[i].log_chan - 1, g, "worker", g->slots[i].num);
        if (g->zy.log_chan >= 0 && g->zy.pid > 0) {
            hand_over(g->zy.log_chan, g, "zygote", 0);
            kill(g->zy.pid, SIGUSR1); /* it waits in recvmsg: the signal makes it look */
        }
    }
    log_info("SIGUSR1: log files reopened and handed to the workers");
}
