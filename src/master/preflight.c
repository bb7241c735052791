/*
 * preflight.c - pagid -t beyond the file. The loader checks what the file
 * says; this checks that this host can start it, as nginx -t opens its
 * files: users and groups, listen addresses, socket directories, logs, the
 * pid file. Nothing is bound, created or started: an existing log is
 * opened for appending and closed at once, for a missing one only its
 * directory is looked at. As root, what the workers open themselves (the
 * access log, app modules) is tried in a child switched to their user,
 * since permissions are theirs, not root's.
 */
#include "preflight.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/module_abi.h"
#include "common/path.h"
#include "common/pidfile.h"
#include "common/strtab.h"
#include "listeners.h"
#include "preflight_tls.h"
#include "privileges.h"

/* CAP_NET_BIND_SERVICE, from linux/capability.h (not worth the header). */
#define CAP_BIT_NET_BIND_SERVICE 10

typedef struct pf {
    const pagid_config *c;
    FILE *out, *err;
    int errors;
    struct ifaddrs *ifs; /* this host's addresses; NULL when unknown */
    /* The access log as the master could not open it: the workers will
     * (gen_logs.h); why not, said if they cannot either. */
    const char *access_why;
} pf;

static void say(pf *p, int is_error, pagid_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void say(pf *p, int is_error, pagid_pos pos, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    config_report(p->c, pos, p->err, "%s%s", is_error ? "" : "warning: ", msg);
    p->errors += is_error;
}

static int read_proc_int(const char *path, int dflt)
{
    FILE *f = fopen(path, "re");
    int v = dflt;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = dflt;
        fclose(f);
    }
    return v;
}

/* Does this process have cap in its effective set (root usually does)? */
static int has_capability(int cap)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned long long eff = 0;
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &eff) == 1) {
            found = 1;
            break;
        }
    if (f)
        fclose(f);
    if (!found)
        return geteuid() == 0;
    return (eff >> cap) & 1;
}

/* Can this host bind sa: a wildcard, IPv4 loopback (127/8 is all local),
 * an address of one of its interfaces, or anything with ip_nonlocal_bind. */
static int addr_is_local(const pf *p, const struct sockaddr *sa)
{
    if (!p->ifs)
        return 1; /* cannot tell: do not cry wolf */
    if (sa->sa_family == AF_INET) {
        const struct in_addr *a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        uint32_t h = ntohl(a->s_addr);
        if (h == INADDR_ANY || (h >> 24) == 127 ||
            read_proc_int("/proc/sys/net/ipv4/ip_nonlocal_bind", 0) == 1)
            return 1;
        for (const struct ifaddrs *i = p->ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                ((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr ==
                    a->s_addr)
                return 1;
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_UNSPECIFIED(a) ||
            read_proc_int("/proc/sys/net/ipv6/ip_nonlocal_bind", 0) == 1)
            return 1;
        for (const struct ifaddrs *i = p->ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
                memcmp(&((const struct sockaddr_in6 *)(const void *)i->ifa_addr)->sin6_addr, a,
                       sizeof *a) == 0)
                return 1;
        return 0;
    }
    return 1;
}

/* The address as text, for messages. */
static const char *addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    const void *a = sa->sa_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    if (!inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
        snprintf(buf, len, "?");
    return buf;
}

/* What listeners_open would do with a TCP entry, short of socket(). */
static void check_tcp(pf *p, const pagid_listen *l)
{
    struct addrinfo *res = NULL;
    int rc = listeners_resolve(l, &res);
    if (rc != 0) {
        say(p, 1, l->pos, "cannot resolve listen address '%s': %s", l->spec,
            rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return;
    }
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        char text[INET6_ADDRSTRLEN];
        if (!addr_is_local(p, ai->ai_addr)) {
            say(p, 1, l->pos,
                "listen address '%s': %s is not an address of this host (binding it would "
                "fail: %s)",
                l->spec, addr_text(ai->ai_addr, text, sizeof text), strerror(EADDRNOTAVAIL));
            break;
        }
    }
    freeaddrinfo(res);
    /* A warning only: systemd socket activation may hand the socket over. */
    int first_free = read_proc_int("/proc/sys/net/ipv4/ip_unprivileged_port_start", 1024);
    if (l->port < first_free && !has_capability(CAP_BIT_NET_BIND_SERVICE))
        say(p, 0, l->pos,
            "listen address '%s': port %d needs root or CAP_NET_BIND_SERVICE, unless systemd "
            "passes the socket",
            l->spec, l->port);
}

static void check_unix(pf *p, const pagid_listen *l)
{
    struct stat st;
    char why[4200];
    if (lstat(l->path, &st) == 0) {
        /* A socket is fine: stale ones are replaced, and a live one may be
         * this very configuration's, served while it is being checked. */
        if (!S_ISSOCK(st.st_mode))
            say(p, 1, l->pos, "listen address '%s': %s exists and is not a socket", l->spec,
                l->path);
        return;
    }
    if (errno != ENOENT)
        say(p, 1, l->pos, "listen address '%s': %s", l->spec, strerror(errno));
    else if (path_creatable(l->path, why, sizeof why) < 0)
        say(p, 1, l->pos, "listen address '%s': %s", l->spec, why);
}

/* Could this process open a log at path for appending, as pagid would
 * (log_open_append's rules)? 0, or -1 with why set. Creates nothing. */
static int log_problem(const char *path, char *why, size_t len)
{
    int fd = log_open_append(path, 0, O_NONBLOCK);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno != ENOENT) {
        snprintf(why, len, "%s", log_open_strerror(errno));
        return -1;
    }
    return path_creatable(path, why, len);
}

static const char *me(char *who, size_t len)
{
    struct passwd *pw = getpwuid(geteuid());
    if (pw)
        snprintf(who, len, "%s", pw->pw_name);
    else
        snprintf(who, len, "uid %u", (unsigned)geteuid());
    return who;
}

/*
 * The log files are opened by the master, as whoever runs pagid (root, as
 * a rule), and handed to the workers (gen_logs.h): so they are checked as
 * this process. An access log the master cannot open the workers open
 * themselves (the packaged layout): then it is checked as them too
 * (check_worker_side), and reported only when neither can.
 */
static void check_log(pf *p, const char *key, const char *path, pagid_pos pos, int workers_too,
                      char *why, size_t whylen)
{
    char who[64];
    if (!path || !*path || !strcmp(path, "stderr") || config_path_is_stderr(path) ||
        log_problem(path, why, whylen) == 0)
        return;
    if (workers_too) {
        p->access_why = why;
        return;
    }
    say(p, 1, pos, "%s %s: cannot open for append as user %s: %s", key, path, me(who, sizeof who),
        why);
}

/* What the workers open themselves, checked as whoever runs this. */
static void check_worker_side(pf *p, const priv_identity *id)
{
    const pagid_config *c = p->c;
    char why[4200];
    if (p->access_why && log_problem(c->access_log_path, why, sizeof why) < 0)
        say(p, 1, c->access_log_pos,
            "access_log.path %s: cannot open for append as user root: %s, "
            "nor as user %s: %s",
            c->access_log_path, p->access_why, id->user, why);
    if (!id->change)
        return; /* the loader checked the app files as us already */
    /* Each file once: a generated config mounts one app under thousands of paths. */
    strtab seen = STRTAB_INIT;
    for (size_t i = 0; i <= c->n_mounts; i++) {
        const char *app = i == 0 ? c->app : c->mounts[i - 1].app;
        char file[4096];
        size_t n = app ? strlen(app) : 0;
        int mlen = app ? config_module_path(app, file, sizeof file) : 0;
        if (mlen < 0)
            continue; /* too long: the loader reported it */
        if (mlen > 0)
            n = (size_t)mlen; /* PATH.so:ARG: the file is PATH.so */
        else if (n < sizeof file && config_perl_app_kind(app))
            memcpy(file, app, n + 1);
        else
            continue; /* a built-in or a static directory: no app file */
        int added = 1;
        if (!strtab_get(&seen, file, n, 1, &added))
            added = 1; /* out of memory: checked again, no harm */
        if (!added)
            continue;
        if (access(file, R_OK) < 0)
            say(p, 1, (pagid_pos){0}, "app %s: the workers' user %s cannot read it: %s", file,
                id->user, strerror(errno));
    }
    strtab_free(&seen);
}

/* As root: the worker side in a child that became the workers' user; its
 * lines come back through a pipe, so err may be any stream. */
static void check_worker_side_as(pf *p, const priv_identity *id)
{
    int fds[2];
    fflush(p->out);
    fflush(p->err);
    if (pipe2(fds, O_CLOEXEC) < 0) {
        say(p, 1, (pagid_pos){0}, "cannot check as the workers' user: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        say(p, 1, (pagid_pos){0}, "cannot check as the workers' user: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        FILE *w = fdopen(fds[1], "w");
        if (!w)
            _exit(1);
        pf child = {.c = p->c, .out = w, .err = w, .access_why = p->access_why};
        if (priv_drop(id) < 0)
            say(&child, 1, (pagid_pos){0}, "cannot switch to the workers' user %s: %s", id->user,
                strerror(errno));
        else
            check_worker_side(&child, id);
        fclose(w);
        _exit(child.errors > 100 ? 100 : child.errors);
    }
    close(fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            fwrite(buf, 1, (size_t)n, p->err);
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    p->errors += WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* A module of another ABI would only fail in the workers: read its
 * pagi_module.abi_version from the file (no code of it runs here). */
static void check_module_abi(pf *p)
{
    const pagid_config *c = p->c;
    strtab seen = STRTAB_INIT; /* each file once, as in the readability check */
    for (size_t i = 0; i <= c->n_mounts; i++) {
        const char *app = i == 0 ? c->app : c->mounts[i - 1].app;
        char file[4096], why[512];
        module_table_info t;
        const char *bad;
        int mlen = app ? config_module_path(app, file, sizeof file) : 0;
        if (mlen <= 0)
            continue;
        int added = 1;
        if (!strtab_get(&seen, file, (size_t)mlen, 1, &added))
            added = 1; /* out of memory: checked again, no harm */
        if (!added)
            continue;
        int rc = module_abi_read(file, &t, &bad);
        if (rc < 0 && bad)
            say(p, 1, (pagid_pos){0}, "app module %s %s", file, bad);
        if (rc < 0)
            continue; /* else unreadable: said elsewhere, and by the loader */
        if (module_abi_problem(t.abi, why, sizeof why))
            say(p, 1, (pagid_pos){0}, "app module %s %s", file, why);
        else if (t.reserved_set)
            say(p, 1, (pagid_pos){0}, "app module %s " MODULE_RESERVED_PROBLEM, file);
    }
    strtab_free(&seen);
}

int preflight_check(const pagid_config *c, FILE *out, FILE *err)
{
    pf p = {.c = c, .out = out, .err = err};
    char why[4200];

    priv_identity id;
    priv_problem problem;
    if (priv_resolve(c, geteuid(), &id, &problem, why, sizeof why) < 0) {
        say(&p, 1,
            problem == PRIV_BAD_USER    ? c->user_pos
            : problem == PRIV_BAD_GROUP ? c->group_pos
                                        : (pagid_pos){0},
            "%s", why);
        memset(&id, 0, sizeof id); /* check the rest as ourselves */
    } else {
        int warn;
        priv_describe(&id, why, sizeof why, &warn);
        if (*why && warn && !id.ignored)
            say(&p, 0, c->user_pos, "%s", why);
        else if (*why && !warn)
            fprintf(out, "pagid: %s\n", why);
    }

    if (getifaddrs(&p.ifs) < 0)
        p.ifs = NULL;
    for (size_t i = 0; i < c->n_listens; i++) {
        if (c->listens[i].kind == LISTEN_TCP)
            check_tcp(&p, &c->listens[i]);
        else
            check_unix(&p, &c->listens[i]);
        if (c->listens[i].tls)
            p.errors += preflight_tls_check(c, &c->listens[i], err);
    }
    if (p.ifs)
        freeifaddrs(p.ifs);

    char access_why[4200];
    check_log(&p, "error_log.path", c->error_log_path, c->error_log_pos, 0, why, sizeof why);
    check_log(&p, "access_log.path", c->access_log_path, c->access_log_pos, id.change, access_why,
              sizeof access_why);
    if (c->pid_file && *c->pid_file && pidfile_check(c->pid_file, why, sizeof why) < 0)
        say(&p, 1, c->pid_file_pos, "pid_file %s: %s", c->pid_file, why);

    check_module_abi(&p);
    if (id.change)
        check_worker_side_as(&p, &id);
    else
        check_worker_side(&p, &id);
    return p.errors;
}
