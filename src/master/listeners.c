/*
 * listeners.c - binds every configured address (TCP over IPv4/IPv6, unix
 * sockets) once, before any worker exists, so workers never need privileges
 * to bind and a bind error stops startup with a clear message.
 *
 * DESIGN DECISION: one listening socket per address, shared by all workers.
 * The master creates the socket and every worker inherits the same fd, so
 * they all accept from one kernel accept queue. When a worker dies, the
 * connections waiting in that queue are not lost: the queue belongs to the
 * socket, which the master and the other workers still hold open, and the
 * surviving or replacement workers accept them. Per-worker SO_REUSEPORT
 * sockets would give each worker its own queue, and whatever sat in a dead
 * worker's queue would be reset with it.
 * SO_REUSEPORT is still set so that a future generation (reload) or an
 * upgraded binary can bind beside the live socket. Side effect: a second
 * pagid run by the same user on the same port binds too, instead of
 * failing with EADDRINUSE; a foreign (non-REUSEPORT) listener still fails.
 *
 * A TCP host that names several addresses (localhost -> 127.0.0.1 and ::1)
 * gets one socket per address; no host means 0.0.0.0, as in nginx ("[::]"
 * asks for IPv6). IPv6 sockets are IPV6_V6ONLY so "[::]:80" and
 * "0.0.0.0:80" can coexist.
 */
#include "listeners.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/log.h"

static void set_err(char *err, size_t errlen, const pagid_listen *l, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set_err(char *err, size_t errlen, const pagid_listen *l, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    int n = snprintf(err, errlen, "cannot listen on %s: ", l->spec ? l->spec : "?");
    if (n < 0 || (size_t)n >= errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Append one open fd; the arrays grow together. */
static int push(listener_set *ls, int fd, const pagid_listen *conf, dev_t dev, ino_t ino)
{
    size_t n = ls->n + 1;
    worker_listener *items = realloc(ls->items, n * sizeof *items);
    if (!items)
        return -1;
    ls->items = items;
    dev_t *devs = realloc(ls->unix_dev, n * sizeof *devs);
    if (!devs)
        return -1;
    ls->unix_dev = devs;
    ino_t *inos = realloc(ls->unix_ino, n * sizeof *inos);
    if (!inos)
        return -1;
    ls->unix_ino = inos;
    items[ls->n] = (worker_listener){.fd = fd, .conf = conf};
    devs[ls->n] = dev;
    inos[ls->n] = ino;
    ls->n = n;
    return 0;
}

static int already_bound(const listener_set *ls, const pagid_listen *conf,
                         const struct addrinfo *ai)
{
    for (size_t i = 0; i < ls->n; i++) {
        if (ls->items[i].conf != conf)
            continue;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (getsockname(ls->items[i].fd, (struct sockaddr *)&ss, &len) == 0 &&
            len == ai->ai_addrlen && memcmp(&ss, ai->ai_addr, len) == 0)
            return 1;
    }
    return 0;
}

static int open_tcp(listener_set *ls, const pagid_listen *l, char *err, size_t errlen)
{
    char port[16];
    snprintf(port, sizeof port, "%d", l->port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
    };
    const char *host = (l->host && *l->host) ? l->host : "0.0.0.0";
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        set_err(err, errlen, l, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    int one = 1;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        /* /etc/hosts often lists an address twice; binding it twice would
         * fail (or, with REUSEPORT, silently split the accept queue). */
        if (already_bound(ls, l, ai))
            continue;
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            set_err(err, errlen, l, "socket: %s", strerror(errno));
            goto fail;
        }
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
            (ai->ai_family == AF_INET6 &&
             setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)) {
            set_err(err, errlen, l, "setsockopt: %s", strerror(errno));
            close(fd);
            goto fail;
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
            set_err(err, errlen, l, "%s", strerror(errno));
            close(fd);
            goto fail;
        }
        if (push(ls, fd, l, 0, 0) < 0) {
            set_err(err, errlen, l, "%s", strerror(ENOMEM));
            close(fd);
            goto fail;
        }
    }
    freeaddrinfo(res);
    return 0;
fail:
    freeaddrinfo(res);
    return -1;
}

/*
 * A socket file left by a crashed server would make bind() fail with
 * EADDRINUSE. Remove it only when it is a socket nobody accepts on: a
 * refused connect() proves that; anything else (accepted, backlog full,
 * permission denied) means it may be live and is not ours to delete.
 */
static int clear_stale_unix(const pagid_listen *l, const struct sockaddr_un *sun, char *err,
                            size_t errlen)
{
    struct stat st;
    if (lstat(l->path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        set_err(err, errlen, l, "%s", strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        set_err(err, errlen, l, "%s exists and is not a socket", l->path);
        return -1;
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (probe < 0) {
        set_err(err, errlen, l, "socket: %s", strerror(errno));
        return -1;
    }
    int rc = connect(probe, (const struct sockaddr *)sun, sizeof *sun);
    int saved = errno;
    close(probe);
    if (rc == 0 || saved == EAGAIN || saved == EINPROGRESS) {
        set_err(err, errlen, l, "another process is listening on this socket");
        return -1;
    }
    if (saved != ECONNREFUSED) {
        set_err(err, errlen, l, "cannot check existing socket: %s", strerror(saved));
        return -1;
    }
    if (unlink(l->path) < 0 && errno != ENOENT) {
        set_err(err, errlen, l, "cannot remove stale socket: %s", strerror(errno));
        return -1;
    }
    log_info("removed stale socket %s", l->path);
    return 0;
}

static int open_unix(listener_set *ls, const pagid_listen *l, char *err, size_t errlen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (!l->path || !*l->path) {
        set_err(err, errlen, l, "empty socket path");
        return -1;
    }
    if (strlen(l->path) >= sizeof sun.sun_path) {
        set_err(err, errlen, l, "socket path longer than %zu bytes", sizeof sun.sun_path - 1);
        return -1;
    }
    memcpy(sun.sun_path, l->path, strlen(l->path) + 1);
    if (clear_stale_unix(l, &sun, err, errlen) < 0)
        return -1;

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_err(err, errlen, l, "socket: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
        set_err(err, errlen, l, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    /* Proxies usually run as another user; access control belongs to the
     * directory the socket lives in. */
    if (chmod(l->path, 0666) < 0 || listen(fd, LISTEN_BACKLOG) < 0 || lstat(l->path, &st) < 0) {
        set_err(err, errlen, l, "%s", strerror(errno));
        close(fd);
        unlink(l->path);
        return -1;
    }
    if (push(ls, fd, l, st.st_dev, st.st_ino) < 0) {
        set_err(err, errlen, l, "%s", strerror(ENOMEM));
        close(fd);
        unlink(l->path);
        return -1;
    }
    return 0;
}

int listeners_open(const pagid_config *cfg, listener_set *ls, char *err, size_t errlen)
{
    *ls = (listener_set){0};
    if (err && errlen)
        err[0] = '\0';
    for (size_t i = 0; i < cfg->n_listens; i++) {
        const pagid_listen *l = &cfg->listens[i];
        int rc =
            l->kind == LISTEN_UNIX ? open_unix(ls, l, err, errlen) : open_tcp(ls, l, err, errlen);
        if (rc < 0) {
            listeners_destroy(ls);
            return -1;
        }
    }
    return 0;
}

void listeners_close(listener_set *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        if (ls->items[i].fd >= 0) {
            close(ls->items[i].fd);
            ls->items[i].fd = -1;
        }
    }
}

void listeners_destroy(listener_set *ls)
{
    listeners_close(ls);
    for (size_t i = 0; i < ls->n; i++) {
        const pagid_listen *l = ls->items[i].conf;
        if (l->kind != LISTEN_UNIX || !ls->unix_ino || ls->unix_ino[i] == 0)
            continue;
        struct stat st;
        if (lstat(l->path, &st) == 0 && st.st_dev == ls->unix_dev[i] &&
            st.st_ino == ls->unix_ino[i])
            unlink(l->path);
    }
    free(ls->items);
    free(ls->unix_dev);
    free(ls->unix_ino);
    *ls = (listener_set){0};
}
