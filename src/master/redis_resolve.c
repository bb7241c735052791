/*
 * redis_resolve.c - getaddrinfo in a detached thread (redis_resolve.h), so
 * a DNS outage cannot hold the master's loop (and its watchdog) hostage.
 * A job belongs to its thread until the thread has sent its address over
 * the socket pair; from then on to the reader, who frees it.
 */
#include "redis_resolve.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct job {
    int fd; /* the thread's end (its own dup: it closes it) */
    char *host, *port;
    struct addrinfo *res;
    int rc;
} job;

struct redis_resolver {
    int fd; /* the master's end */
    int busy;
};

static void job_free(job *j)
{
    if (j->res)
        freeaddrinfo(j->res);
    free(j->host);
    free(j->port);
    free(j);
}

static void *lookup(void *arg)
{
    job *j = arg;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    j->rc = getaddrinfo(j->host, j->port, &hints, &j->res);
    int fd = j->fd;
    /* The reader is gone (resolver freed) when this fails: the job is still ours. */
    if (send(fd, &j, sizeof j, MSG_NOSIGNAL) != (ssize_t)sizeof j)
        job_free(j);
    close(fd);
    return NULL;
}

redis_resolver *redis_resolver_new(void)
{
    redis_resolver *rs = calloc(1, sizeof *rs);
    if (!rs)
        return NULL;
    rs->fd = -1;
    return rs;
}

void redis_resolver_free(redis_resolver *rs)
{
    if (!rs)
        return;
    if (rs->fd >= 0)
        close(rs->fd);
    free(rs);
}

void redis_resolver_child_close(redis_resolver *rs)
{
    if (rs && rs->fd >= 0)
        close(rs->fd);
    if (rs)
        rs->fd = -1;
}

int redis_resolver_pollfd(const redis_resolver *rs)
{
    return rs->busy ? rs->fd : -1;
}

int redis_resolver_busy(const redis_resolver *rs)
{
    return rs->busy;
}

int redis_resolver_start(redis_resolver *rs, const char *host, const char *port)
{
    if (rs->busy)
        return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    job *j = calloc(1, sizeof *j);
    if (!j || !(j->host = strdup(host)) || !(j->port = strdup(port))) {
        if (j)
            job_free(j);
        close(sv[0]);
        close(sv[1]);
        errno = ENOMEM;
        return -1;
    }
    j->fd = sv[1];
    pthread_attr_t at;
    pthread_t t;
    int e = pthread_attr_init(&at);
    if (!e)
        e = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (!e)
        e = pthread_create(&t, &at, lookup, j);
    pthread_attr_destroy(&at);
    if (e) {
        job_free(j);
        close(sv[0]);
        close(sv[1]);
        errno = e;
        return -1;
    }
    /* One socket pair per lookup: a lookup abandoned by a reload or free
     * writes into its own pair, never into the next one's. */
    if (rs->fd >= 0)
        close(rs->fd);
    rs->fd = sv[0];
    rs->busy = 1;
    return 0;
}

int redis_resolver_take(redis_resolver *rs, struct addrinfo **res, int *rc)
{
    if (!rs->busy || rs->fd < 0)
        return 0;
    job *j = NULL;
    ssize_t n = recv(rs->fd, &j, sizeof j, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    rs->busy = 0;
    close(rs->fd);
    rs->fd = -1;
    if (n != (ssize_t)sizeof j) {
        *rc = EAI_SYSTEM;
        *res = NULL;
        return 1;
    }
    *rc = j->rc;
    *res = j->res;
    j->res = NULL;
    job_free(j);
    return 1;
}
