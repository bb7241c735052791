/*
 * generation_pool.c - a generation's worker pool, from the master's side:
 * its listening sockets, one per process (made before any fork, so the
 * workers and the pool processes inherit them), its slots in the process table (numbers past
 * POOL_NUM_BASE, started, respawned and recycled as workers are), and its
 * drain, which waits for the generation's workers (docs/psgi.md).
 */
#include "generation.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pool.h"

int gen_is_pool_slot(const worker_slot *w)
{
    return pool_is_process_num(w->num);
}

const char *gen_slot_label(const worker_slot *w, char *buf, size_t len)
{
    if (gen_is_pool_slot(w))
        snprintf(buf, len, "pool process %d", w->num - POOL_NUM_BASE);
    else
        snprintf(buf, len, "worker %d", w->num);
    return buf;
}

/*
 * The pool's sockets: one per pool process, AF_UNIX stream in the abstract
 * namespace (no file to leave behind, gone with its last holder), under a
 * random name. Each worker keeps one connection to each process, made once
 * (docs/ARCHITECTURE.md, "The worker pool"); the socket belongs to the
 * process's slot, not to its pid, so a replacement process accepts the
 * connections its workers make after its predecessor died. Pool processes
 * take only peers of their own uid (SO_PEERCRED), so another local user
 * that finds a name gets nothing.
 */
static int pool_listen_one(const generation *g, int num, const unsigned char rnd[8])
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        log_error("worker pool: socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1,
                     "pagid-pool/%d/%u/%02x%02x%02x%02x%02x%02x%02x%02x/%d", (int)getpid(), g->id,
                     rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7], num);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    /* A connection per worker, and their replacements while one waits. */
    if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 128) < 0) {
        log_error("worker pool: bind/listen: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int gen_pool_open(generation *g)
{
    pagid_pool *p = &g->cfg->worker_pool;
    g->pool_fds = NULL;
    p->fds = NULL;
    if (p->processes <= 0)
        return 0;
    unsigned char rnd[8] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        log_warn("worker pool: getrandom: %s", strerror(errno));
    int *fds = calloc((size_t)p->processes, sizeof *fds);
    if (!fds) {
        log_error("worker pool: out of memory");
        return -1;
    }
    for (int i = 0; i < p->processes; i++) {
        if ((fds[i] = pool_listen_one(g, i + 1, rnd)) < 0) {
            while (i-- > 0)
                close(fds[i]);
            free(fds);
            return -1;
        }
    }
    g->pool_fds = fds;
    p->fds = fds;
    return 0;
}

void gen_pool_close(generation *g)
{
    if (!g->pool_fds)
        return;
    for (int i = 0; i < g->cfg->worker_pool.processes; i++)
        close(g->pool_fds[i]);
    free(g->pool_fds);
    g->pool_fds = NULL;
    g->cfg->worker_pool.fds = NULL;
}

int gen_pool_add_slots(generation *g)
{
    int n = g->cfg->worker_pool.processes;
    for (int i = 1; i <= n; i++) {
        worker_slot *w = gen_append_slot(g);
        if (!w)
            return -1;
        w->num = POOL_NUM_BASE + i;
        w->respawn = 1;
    }
    return 0;
}

const char *gen_describe_counts(int workers, int pool, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%d worker%s", workers, workers == 1 ? "" : "s");
    if (pool > 0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " and %d pool process%s", pool, pool == 1 ? "" : "es");
    return buf;
}

int gen_count_workers(const generation *g)
{
    int c = 0;
    for (int i = 0; i < g->n; i++)
        c += g->slots[i].state == WS_RUNNING && !gen_is_pool_slot(&g->slots[i]);
    return c;
}

void gen_pool_drain_step(generation *g)
{
    if (!g->pool_fds || (g->state != GEN_DRAINING && g->state != GEN_FAILED) ||
        gen_count_workers(g) > 0)
        return;
    /* The generation's workers are gone: nobody sends its pool work any
     * more, so its processes drain now (each ends after its request). */
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (!gen_is_pool_slot(w) || w->state != WS_RUNNING || w->pid <= 0 || w->draining)
            continue;
        w->draining = 1;
        if (kill(w->pid, SIGTERM) < 0 && errno != ESRCH)
            log_error("cannot send SIGTERM to pool process %d (pid %d): %s", w->num - POOL_NUM_BASE,
                      (int)w->pid, strerror(errno));
    }
}
