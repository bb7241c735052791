/*
 * fd_audit.c - the zygote's warning about descriptors an app opened while
 * it was loaded: they are shared by the zygote and every worker it forks
 * (two processes talking on one database connection corrupt its protocol).
 */
#include "fd_audit.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"

static int is_set(const fd_audit *a, int fd)
{
    return fd >= 0 && fd < FD_AUDIT_MAX && (a->open[fd / 8] & (1u << (fd % 8)));
}

void fd_audit_snapshot(fd_audit *a)
{
    memset(a, 0, sizeof *a);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd < FD_AUDIT_MAX && fd != dirfd(d))
            a->open[fd / 8] |= (unsigned char)(1u << (fd % 8));
    }
    closedir(d);
}

/* "a TCP connection to 127.0.0.1:5432", "a unix socket to /run/x", or the
 * link's text ("socket:[123]", a path). */
static void describe(int fd, const char *link, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (strncmp(link, "socket:", 7) != 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(out, len, "%s%s", link[0] == '/' ? "the file " : "", link);
        return;
    }
    char addr[INET6_ADDRSTRLEN] = "?";
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
        snprintf(out, len, "a socket connected to %s:%u", addr, ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
        snprintf(out, len, "a socket connected to [%s]:%u", addr, ntohs(in6->sin6_port));
    } else if (ss.ss_family == AF_UNIX) {
        struct sockaddr_un *un = (struct sockaddr_un *)&ss;
        snprintf(out, len, "a unix socket connected to %s",
                 un->sun_path[0] ? un->sun_path : "an abstract address");
    } else {
        snprintf(out, len, "%s", link);
    }
}

const char *fd_audit_advice(const pagid_config *c)
{
    /* A PAGI app (or a module) has a lifespan to open it in; a PSGI app has
     * none, and neither has a pool process, so it opens it on first use. */
    int psgi = config_perl_app_kind(c->app) == CONFIG_PERL_PSGI, other = 0;
    if (!psgi && (config_perl_app_kind(c->app) || config_module_path_len(c->app)))
        other = 1;
    for (size_t i = 0; i < c->n_mounts; i++) {
        int kind = config_perl_app_kind(c->mounts[i].app);
        if (kind == CONFIG_PERL_PSGI)
            psgi = 1;
        else if (kind || config_module_path_len(c->mounts[i].app))
            other = 1;
    }
    if (psgi && !other)
        return "open it lazily on first use, in each process (a PSGI app has no lifespan), or "
               "use --no-preload (docs/psgi.md, Preloading)";
    if (psgi)
        return "open it in lifespan startup or per worker (a PAGI app), lazily on first use in "
               "each process (a PSGI app), or use --no-preload (docs/perl.md, Preloading)";
    return "open it in lifespan startup or per worker (docs/perl.md, Preloading)";
}

size_t fd_audit_report(const fd_audit *before, const char *advice)
{
    fd_audit now;
    fd_audit_snapshot(&now);
    size_t n = 0;
    for (int fd = 0; fd < FD_AUDIT_MAX; fd++) {
        if (!is_set(&now, fd) || is_set(before, fd))
            continue;
        char path[64], link[512], what[600];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k < 0)
            continue; /* closed meanwhile */
        link[k] = '\0';
        describe(fd, link, what, sizeof what);
        log_warn("the app opened %s (fd %d) while it was loaded: the zygote and every worker "
                 "forked from it share it; %s",
                 what, fd, advice);
        n++;
    }
    return n;
}
