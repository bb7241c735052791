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
 * upgraded binary can bind beside the live socket. It would also let a
 * second pagid of the same user bind the same port and silently take half
 * of the connections, so an address this process does not hold already is
 * first probed with a socket that has no SO_REUSEPORT (see in_use()): a
 * listener there makes it fail, and startup stops with a clear message.
 *
 * A TCP host that names several addresses (localhost -> 127.0.0.1 and ::1)
 * gets one socket per address; no host means 0.0.0.0, as in nginx ("[::]"
 * asks for IPv6). IPv6 sockets are IPV6_V6ONLY so "[::]:80" and
 * "0.0.0.0:80" can coexist.
 */
#include "listeners.h"

#include <errno.h>
#include <fcntl.h>
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

#include "common/log.h"
#include "common/tls_server.h"
#include "preflight_tls.h"

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
static int push(listener_set *ls, int fd, const pagid_listen *conf, dev_t dev, ino_t ino,
                int keep_file)
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
    unsigned char *keep = realloc(ls->keep_file, n);
    if (!keep)
        return -1;
    ls->keep_file = keep;
    keep[ls->n] = (unsigned char)keep_file;
    items[ls->n] = (worker_listener){.fd = fd, .conf = conf};
    devs[ls->n] = dev;
    inos[ls->n] = ino;
    ls->n = n;
    return 0;
}

/* Where existing sockets may come from (see listeners_open_with). */
typedef struct open_ctx {
    const pagid_config *cfg;
    const listener_set *const *reuse;
    size_t n_reuse;
    inherited_set *inh;
    const listener_set *cur; /* the set being opened */
} open_ctx;

/* Same family, port and address (getsockname pads; compare the fields). */
static int sockaddr_same(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    if (a->sa_family == AF_UNIX) {
        const struct sockaddr_un *x = (const void *)a, *y = (const void *)b;
        return strncmp(x->sun_path, y->sun_path, sizeof x->sun_path) == 0;
    }
    return 0;
}

static int fd_bound_to(int fd, const struct sockaddr *addr)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    return getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
           sockaddr_same((struct sockaddr *)&ss, addr);
}

/*
 * An existing socket for addr: an inherited one is taken over (moved), a
 * live set's is duplicated (close-on-exec, like ours). -1 when none.
 */
static int existing_socket(const open_ctx *x, const struct sockaddr *addr, dev_t *dev, ino_t *ino,
                           int *keep_file)
{
    *dev = 0;
    *ino = 0;
    *keep_file = 0;
    for (size_t i = 0; x->inh && i < x->inh->n; i++) {
        int fd = x->inh->items[i].fd;
        if (fd >= 0 && fd_bound_to(fd, addr)) {
            x->inh->items[i].fd = -1;
            *keep_file = x->inh->items[i].systemd;
            return fd;
        }
    }
    for (size_t k = 0; k < x->n_reuse; k++) {
        const listener_set *r = x->reuse[k];
        for (size_t i = 0; r && i < r->n; i++) {
            if (r->items[i].fd < 0 || !fd_bound_to(r->items[i].fd, addr))
                continue;
            if (addr->sa_family == AF_UNIX) {
                /* The path must still name this very socket. */
                struct stat st;
                const struct sockaddr_un *sun = (const void *)addr;
                if (!r->unix_ino || r->unix_ino[i] == 0 || lstat(sun->sun_path, &st) < 0 ||
                    st.st_dev != r->unix_dev[i] || st.st_ino != r->unix_ino[i])
                    continue;
                *dev = r->unix_dev[i];
                *ino = r->unix_ino[i];
                *keep_file = r->keep_file ? r->keep_file[i] : 0;
            }
            return fcntl(r->items[i].fd, F_DUPFD_CLOEXEC, 3);
        }
    }
    return -1;
}

/*
 * Give the socket file at l->path its configured mode and owner. A fresh
 * socket (fresh=1) gets 0666 when no mode is set: proxies usually run as
 * another user and access control then belongs to the directory. An
 * existing one (reload, upgrade, systemd) only gets what is set, so a
 * socket unit's SocketMode= is not overridden by a default. The file is
 * opened O_PATH|O_NOFOLLOW and checked to be the expected socket first:
 * as root, chmod/chown on a name someone swapped for a symlink would hand
 * out any file. 0, or -1 with err set.
 */
static int apply_unix_attrs(const pagid_listen *l, int fresh, dev_t dev, ino_t ino, char *err,
                            size_t errlen)
{
    int chmod_it = fresh || l->has_mode;
    mode_t mode = l->has_mode ? (mode_t)l->mode : 0666;
    uid_t uid = l->has_uid ? l->uid : (uid_t)-1;
    gid_t gid = l->has_gid ? l->gid : (gid_t)-1;
    if (!chmod_it && !l->has_uid && !l->has_gid)
        return 0;
    int fd = open(l->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        set_err(err, errlen, l, "%s: %s", l->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISSOCK(st.st_mode) || (ino && (st.st_dev != dev || st.st_ino != ino))) {
        set_err(err, errlen, l, "%s is %s; mode and owner not applied", l->path,
                S_ISSOCK(st.st_mode) ? "no longer this socket" : "not a socket");
        close(fd);
        return -1;
    }
    /*
     * Mode first, owner second: the master may hold CAP_CHOWN but not
     * CAP_FOWNER (the packaged unit), so it can chmod only a file it owns.
     * A socket already given to another owner (a reload changing its mode)
     * is taken back first. Nothing is changed that already is as configured.
     */
    int need_mode = chmod_it && (st.st_mode & 07777) != mode;
    int need_owner = (l->has_uid && st.st_uid != uid) || (l->has_gid && st.st_gid != gid);
    if (need_mode && st.st_uid != geteuid()) {
        if (fchownat(fd, "", geteuid(), (gid_t)-1, AT_EMPTY_PATH) == 0)
            need_owner = 1;
    }
    if (need_mode) {
        /* fchmod() refuses O_PATH descriptors; the /proc link reaches the very inode. */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        int rc = chmod(proc, mode);
        if (rc < 0 && errno == ENOENT) /* no /proc: the name, just checked */
            rc = chmod(l->path, mode);
        if (rc < 0) {
            set_err(err, errlen, l, "cannot set mode %04o on %s: %s", (unsigned)mode, l->path,
                    strerror(errno));
            close(fd);
            return -1;
        }
    }
    if (need_owner) {
        /* The owner we took back above goes back to what it was unless configured. */
        uid_t to_uid = l->has_uid ? uid : st.st_uid;
        gid_t to_gid = l->has_gid ? gid : (gid_t)-1;
        if (fchownat(fd, "", to_uid, to_gid, AT_EMPTY_PATH) < 0) {
            char u[24] = "-", g[24] = "-";
            if (l->has_uid)
                snprintf(u, sizeof u, "%lu", (unsigned long)uid);
            if (l->has_gid)
                snprintf(g, sizeof g, "%lu", (unsigned long)gid);
            set_err(err, errlen, l, "cannot change owner of %s to %s:%s: %s", l->path, u, g,
                    strerror(errno));
            close(fd);
            return -1;
        }
    }
    close(fd);
    return 0;
}

/* Inherited sockets whose name is the listen spec: all of them serve it. */
static int take_named(const open_ctx *x, listener_set *ls, const pagid_listen *l, int *taken,
                      char *err, size_t errlen)
{
    *taken = 0;
    for (size_t i = 0; x->inh && i < x->inh->n; i++) {
        inherited_fd *f = &x->inh->items[i];
        if (f->fd < 0 || !f->name || !l->spec || strcmp(f->name, l->spec) != 0)
            continue;
        dev_t dev = 0;
        ino_t ino = 0;
        struct stat st;
        if (l->kind == LISTEN_UNIX && l->path && lstat(l->path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            dev = st.st_dev;
            ino = st.st_ino;
        }
        if (l->kind == LISTEN_UNIX && apply_unix_attrs(l, 0, dev, ino, err, errlen) < 0)
            return -1;
        if (push(ls, f->fd, l, dev, ino, f->systemd) < 0)
            return -1;
        f->fd = -1;
        (*taken)++;
    }
    return 0;
}

/* Family and port of fd's local address: whether it matches addr's. */
static int same_port(int fd, const struct sockaddr *addr)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
        ss.ss_family != addr->sa_family)
        return 0;
    if (addr->sa_family == AF_INET)
        return ((struct sockaddr_in *)&ss)->sin_port ==
               ((const struct sockaddr_in *)(const void *)addr)->sin_port;
    if (addr->sa_family == AF_INET6)
        return ((struct sockaddr_in6 *)&ss)->sin6_port ==
               ((const struct sockaddr_in6 *)(const void *)addr)->sin6_port;
    return 0;
}

static int set_has_port(const listener_set *ls, const struct sockaddr *addr)
{
    for (size_t i = 0; ls && i < ls->n; i++)
        if (same_port(ls->items[i].fd, addr))
            return 1;
    return 0;
}

/* Does this process hold a socket on addr's port (any address of the
 * family): a live generation's, an inherited one, or one just opened? Then
 * a conflict found by the probe could be our own (0.0.0.0:80 while
 * 127.0.0.1:80 is added), and SO_REUSEPORT decides, as before. */
static int port_held(const open_ctx *x, const struct sockaddr *addr)
{
    if (set_has_port(x->cur, addr))
        return 1;
    for (size_t k = 0; k < x->n_reuse; k++)
        if (set_has_port(x->reuse[k], addr))
            return 1;
    for (size_t i = 0; x->inh && i < x->inh->n; i++)
        if (same_port(x->inh->items[i].fd, addr))
            return 1;
    return 0;
}

/*
 * Is something already listening on ai's address? A socket without
 * SO_REUSEPORT cannot bind beside a listener (with SO_REUSEADDR, so
 * connections in TIME_WAIT do not count). 1 in use, 0 free (the probe is
 * closed at once, never listens); other errors are left to the real bind.
 */
static int in_use(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    int busy = bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno == EADDRINUSE;
    close(fd);
    return busy;
}

/* The end of an "address already in use" message: who to suspect, where to look. */
static const char *in_use_hint(const open_ctx *x, char *buf, size_t len)
{
    const char *pid = x->cfg && x->cfg->pid_file && *x->cfg->pid_file ? x->cfg->pid_file : NULL;
    snprintf(buf, len, "is another pagid running?%s%s", pid ? " see pid file " : "",
             pid ? pid : "");
    return buf;
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

int listeners_resolve(const pagid_listen *l, struct addrinfo **res)
{
    char port[16];
    snprintf(port, sizeof port, "%d", l->port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
    };
    const char *host = (l->host && *l->host) ? l->host : "0.0.0.0";
    *res = NULL;
    return getaddrinfo(host, port, &hints, res);
}

static int open_tcp(const open_ctx *x, listener_set *ls, const pagid_listen *l, char *err,
                    size_t errlen)
{
    struct addrinfo *res = NULL;
    int rc = listeners_resolve(l, &res);
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
        dev_t dev;
        ino_t ino;
        int keep;
        int fd = existing_socket(x, ai->ai_addr, &dev, &ino, &keep);
        if (fd >= 0) {
            if (push(ls, fd, l, 0, 0, 0) < 0) {
                set_err(err, errlen, l, "%s", strerror(ENOMEM));
                close(fd);
                goto fail;
            }
            continue;
        }
        char hint[4200];
        if (!port_held(x, ai->ai_addr) && in_use(ai)) {
            set_err(err, errlen, l, "address already in use (%s)",
                    in_use_hint(x, hint, sizeof hint));
            goto fail;
        }
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
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
        if (push(ls, fd, l, 0, 0, 0) < 0) {
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
static int clear_stale_unix(const open_ctx *x, const pagid_listen *l, const struct sockaddr_un *sun,
                            char *err, size_t errlen)
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
        char hint[4200];
        set_err(err, errlen, l,
                "another process is listening on this socket: address already in "
                "use (%s)",
                in_use_hint(x, hint, sizeof hint));
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

static int open_unix(const open_ctx *x, listener_set *ls, const pagid_listen *l, char *err,
                     size_t errlen)
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
    dev_t dev;
    ino_t ino;
    int keep;
    int fd = existing_socket(x, (const struct sockaddr *)&sun, &dev, &ino, &keep);
    if (fd >= 0) {
        struct stat cur;
        /* Inherited: the file is ours to remove once we own the service. */
        if (ino == 0 && lstat(l->path, &cur) == 0 && S_ISSOCK(cur.st_mode)) {
            dev = cur.st_dev;
            ino = cur.st_ino;
        }
        /* A reload keeps the socket, so a changed mode or owner goes to its file. */
        if (apply_unix_attrs(l, 0, dev, ino, err, errlen) < 0) {
            close(fd);
            return -1;
        }
        if (push(ls, fd, l, dev, ino, keep) < 0) {
            set_err(err, errlen, l, "%s", strerror(ENOMEM));
            close(fd);
            return -1;
        }
        return 0;
    }
    if (clear_stale_unix(x, l, &sun, err, errlen) < 0)
        return -1;

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_err(err, errlen, l, "socket: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    /* Born owner-only: until its mode and owner are set nobody else may
     * connect (umask is per process, and the master is single-threaded). */
    mode_t old_umask = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sun, sizeof sun);
    int saved = errno;
    umask(old_umask);
    if (rc < 0) {
        set_err(err, errlen, l, "%s", strerror(saved));
        close(fd);
        return -1;
    }
    if (lstat(l->path, &st) < 0) {
        set_err(err, errlen, l, "%s", strerror(errno));
        close(fd);
        unlink(l->path);
        return -1;
    }
    if (apply_unix_attrs(l, 1, st.st_dev, st.st_ino, err, errlen) < 0) {
        close(fd);
        unlink(l->path);
        return -1;
    }
    /* Only now can anyone connect: never with the wrong mode or owner. */
    if (listen(fd, LISTEN_BACKLOG) < 0) {
        set_err(err, errlen, l, "%s", strerror(errno));
        close(fd);
        unlink(l->path);
        return -1;
    }
    if (push(ls, fd, l, st.st_dev, st.st_ino, 0) < 0) {
        set_err(err, errlen, l, "%s", strerror(ENOMEM));
        close(fd);
        unlink(l->path);
        return -1;
    }
    return 0;
}

/* What pagid -t would say about the certificate files that loaded (expiry
 * soon, chain order, key modes): logged, never fatal, since the contexts
 * did build and the operator sees it on every reload. A server certificate
 * expired or not yet valid is fatal (every client would refuse it): -1, all
 * the findings in err then. */
static int listeners_check_tls_files(const pagid_config *cfg, const listener_set *ls, char *err,
                                     size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    FILE *notes = open_memstream(&text, &len);
    if (!notes)
        return 0;
    int fatal = 0;
    for (size_t i = 0; i < ls->n; i++)
        if (ls->items[i].tls)
            preflight_tls_files(cfg, ls->items[i].conf, notes, &fatal);
    fclose(notes);
    if (fatal) {
        while (len > 0 && text[len - 1] == '\n')
            text[--len] = '\0';
        if (err && errlen)
            snprintf(err, errlen, "%s", text ? text : "certificate not valid now");
        free(text);
        return -1;
    }
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char *w = strstr(line, ": warning: ");
        if (w)
            memmove(w + 2, w + 11, strlen(w + 11) + 1); /* the log says warn already */
        log_warn("%s", line);
    }
    free(text);
    return 0;
}

/*
 * The TLS listeners' contexts: certificates and keys are read here, by the
 * master while it is still root, so a key only root may read works with
 * `user:`. Every problem goes to err (its FILE:LINE:COLUMN lines joined).
 */
static int listeners_load_tls(const pagid_config *cfg, listener_set *ls, char *err,
                              size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    FILE *msgs = open_memstream(&text, &len);
    if (!msgs) {
        snprintf(err, errlen, "cannot set up TLS: out of memory");
        return -1;
    }
    int bad = 0;
    for (size_t i = 0; i < ls->n; i++) {
        const pagid_listen *l = ls->items[i].conf;
        if (l->tls && !(ls->items[i].tls = tls_server_new(cfg, l, msgs)))
            bad = 1;
    }
    fclose(msgs);
    if (!bad && listeners_check_tls_files(cfg, ls, err, errlen) < 0) {
        free(text);
        return -1;
    }
    if (bad && err && errlen) {
        while (len > 0 && text[len - 1] == '\n')
            text[--len] = '\0';
        snprintf(err, errlen, "%s", text ? text : "cannot set up TLS");
    }
    free(text);
    return bad ? -1 : 0;
}

int listeners_open(const pagid_config *cfg, listener_set *ls, char *err, size_t errlen)
{
    return listeners_open_with(cfg, ls, NULL, 0, NULL, err, errlen);
}

int listeners_open_with(const pagid_config *cfg, listener_set *ls, const listener_set *const *reuse,
                        size_t n_reuse, inherited_set *inh, char *err, size_t errlen)
{
    *ls = (listener_set){0};
    open_ctx x = {.cfg = cfg, .reuse = reuse, .n_reuse = n_reuse, .inh = inh, .cur = ls};
    if (err && errlen)
        err[0] = '\0';
    for (size_t i = 0; i < cfg->n_listens; i++) {
        const pagid_listen *l = &cfg->listens[i];
        int named = 0;
        int rc = take_named(&x, ls, l, &named, err, errlen);
        if (rc == 0 && named == 0)
            rc = l->kind == LISTEN_UNIX ? open_unix(&x, ls, l, err, errlen)
                                        : open_tcp(&x, ls, l, err, errlen);
        if (rc < 0) {
            /* Sockets that came from elsewhere are not ours to unlink. */
            for (size_t k = 0; k < ls->n && (reuse || inh); k++)
                ls->unix_ino[k] = 0;
            listeners_destroy(ls);
            return -1;
        }
    }
    if (listeners_load_tls(cfg, ls, err, errlen) < 0) {
        for (size_t k = 0; k < ls->n && (reuse || inh); k++)
            ls->unix_ino[k] = 0;
        listeners_destroy(ls);
        return -1;
    }
    return 0;
}

int listeners_has_unix(const listener_set *ls, dev_t dev, ino_t ino)
{
    for (size_t i = 0; ls->unix_ino && i < ls->n; i++)
        if (ls->items[i].fd >= 0 && ls->unix_ino[i] == ino && ls->unix_dev[i] == dev && ino)
            return 1;
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
        tls_server_free(ls->items[i].tls);
        ls->items[i].tls = NULL;
    }
    for (size_t i = 0; i < ls->n; i++) {
        const pagid_listen *l = ls->items[i].conf;
        if (l->kind != LISTEN_UNIX || !ls->unix_ino || ls->unix_ino[i] == 0 ||
            (ls->keep_file && ls->keep_file[i]))
            continue;
        struct stat st;
        if (lstat(l->path, &st) == 0 && st.st_dev == ls->unix_dev[i] &&
            st.st_ino == ls->unix_ino[i])
            unlink(l->path);
    }
    free(ls->items);
    free(ls->unix_dev);
    free(ls->unix_ino);
    free(ls->keep_file);
    *ls = (listener_set){0};
}
