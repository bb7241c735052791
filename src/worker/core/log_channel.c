/*
 * log_channel.c - the worker's side of log handover (log_channel.h): the
 * master opens the files as root; the worker only adopts descriptors, so a
 * log directory it may not enter still works.
 */
#include "log_channel.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "access_log.h"
#include "common/log.h"
#include "common/log_handover.h"

/* The master reopened the logs (SIGUSR1) and sent us the new files. */
static void on_handover(struct ev_loop *ev, ev_io *io, int revents)
{
    log_channel *lc = io->data;
    int efd, afd, got;
    while ((got = log_handover_recv(lc->fd, &efd, &afd, 0)) == 1) {
        log_adopt_fd(efd);
        if (afd >= 0)
            access_log_adopt(*lc->alog, afd);
        else
            access_log_reopen(*lc->alog); /* the master could not: by path, as our user */
    }
    if (got < 0) {
        /* The master is gone (we follow it) or the channel broke: stop watching. */
        if (errno != ECONNRESET)
            log_error("log channel: %s; log files are no longer reopened", strerror(errno));
        ev_ref(ev);
        ev_io_stop(ev, io);
    }
}

void log_channel_init(log_channel *lc)
{
    lc->fd = -1;
    lc->alog = NULL;
    ev_init(&lc->io, on_handover);
    lc->io.data = lc;
}

int log_channel_start(log_channel *lc, int fd, struct ev_loop *ev, struct access_log **alog,
                      int *access_fd)
{
    int efd;
    lc->fd = fd;
    lc->alog = alog;
    /* Sent before the fork (or before the zygote was asked): already there. */
    if (log_handover_recv(fd, &efd, access_fd, 0) != 1) {
        log_error("no log files came from the master");
        return -1;
    }
    log_adopt_fd(efd);
    ev_io_set(&lc->io, fd, EV_READ);
    ev_io_start(ev, &lc->io);
    ev_unref(ev); /* the channel alone must not keep the loop running */
    return 0;
}

void log_channel_stop(log_channel *lc, struct ev_loop *ev)
{
    if (ev_is_active(&lc->io)) {
        ev_ref(ev);
        ev_io_stop(ev, &lc->io);
    }
    if (lc->fd >= 0)
        close(lc->fd);
    lc->fd = -1;
}
