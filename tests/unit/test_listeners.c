/*
 * test_listeners.c - Check suite for src/master/listeners.c: socket options
 * on TCP (IPv4, IPv6) listeners, bind errors, a second instance on an
 * address refused (but not our own sockets), and the unix socket rules
 * (stale file removed, live socket or non-socket refused, unlink only ours,
 * configured mode and owner, never through a symlink); sockets kept across
 * a reload (a changed mode applied), and the inherited-fd environment
 * variable of the binary upgrade (format, parse, take over by address or by
 * name).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "master/listeners.h"

static char tmpdir[64];
static char sock_path[128];

static void setup(void)
{
    log_open(NULL, LOG_LVL_ERROR);
    strcpy(tmpdir, "/tmp/pagid-ltest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(sock_path, sizeof sock_path, "%s/s.sock", tmpdir);
}

static void teardown(void)
{
    unlink(sock_path);
    rmdir(tmpdir);
}

/* A one-listener config; port 0 asks the kernel for a free port. */
static pagid_config one(listen_kind kind, const char *spec, const char *host, int port,
                        const char *path, pagid_listen *l)
{
    *l = (pagid_listen){.kind = kind,
                        .spec = (char *)spec,
                        .host = (char *)host,
                        .port = port,
                        .path = (char *)path};
    pagid_config c;
    memset(&c, 0, sizeof c);
    c.listens = l;
    c.n_listens = 1;
    return c;
}

static int int_opt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof v;
    ck_assert_int_eq(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

START_TEST(tcp4_options)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, "127.0.0.1:0", "127.0.0.1", 0, NULL, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), 0);
    ck_assert_uint_eq(ls.n, 1);
    int fd = ls.items[0].fd;
    ck_assert_ptr_eq(ls.items[0].conf, &l);
    ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
    ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    ck_assert_int_eq(int_opt(fd, SOL_SOCKET, SO_REUSEADDR), 1);
    ck_assert_int_eq(int_opt(fd, SOL_SOCKET, SO_REUSEPORT), 1);
    ck_assert_int_eq(int_opt(fd, SOL_SOCKET, SO_ACCEPTCONN), 1);

    /* A client connects through the kernel queue without anyone accepting. */
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    int cl = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(cl, (struct sockaddr *)&sin, len), 0);
    close(cl);
    listeners_destroy(&ls);
    ck_assert_uint_eq(ls.n, 0);
}
END_TEST

START_TEST(tcp6_v6only)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, "[::1]:0", "::1", 0, NULL, &l);
    listener_set ls;
    char err[256];
    if (listeners_open(&c, &ls, err, sizeof err) < 0) {
        /* No IPv6 loopback in this sandbox: nothing to check. */
        ck_assert_ptr_nonnull(strstr(err, "cannot listen on [::1]:0: "));
        return;
    }
    ck_assert_uint_eq(ls.n, 1);
    ck_assert_int_eq(int_opt(ls.items[0].fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
    listeners_destroy(&ls);
}
END_TEST

START_TEST(tcp_in_use)
{
    /* A foreign listener without SO_REUSEPORT holds the port. */
    int other = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    ck_assert_int_eq(bind(other, (struct sockaddr *)&sin, len), 0);
    ck_assert_int_eq(listen(other, 1), 0);
    ck_assert_int_eq(getsockname(other, (struct sockaddr *)&sin, &len), 0);
    int port = ntohs(sin.sin_port);

    char spec[64], want[256], err[256];
    snprintf(spec, sizeof spec, "127.0.0.1:%d", port);
    snprintf(want, sizeof want,
             "cannot listen on %s: address already in use (is another pagid running?)", spec);
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, spec, "127.0.0.1", port, NULL, &l);
    listener_set ls;
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), -1);
    ck_assert_str_eq(err, want);
    ck_assert_uint_eq(ls.n, 0);
    close(other);
}
END_TEST

START_TEST(tcp_bad_host)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, "256.1.1.1:80", "256.1.1.1", 80, NULL, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cannot listen on 256.1.1.1:80: "));
}
END_TEST

/* A second listener failing closes the first one too. */
START_TEST(partial_failure_closes_all)
{
    pagid_listen l[2] = {
        {.kind = LISTEN_UNIX, .spec = "unix:ok", .path = sock_path},
        {.kind = LISTEN_UNIX, .spec = "unix:bad", .path = "/nonexistent-dir/x.sock"},
    };
    pagid_config c;
    memset(&c, 0, sizeof c);
    c.listens = l;
    c.n_listens = 2;
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cannot listen on unix:bad: "));
    ck_assert_int_eq(access(sock_path, F_OK), -1);
}
END_TEST

START_TEST(unix_mode_and_unlink)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), 0);
    struct stat st;
    ck_assert_int_eq(lstat(sock_path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0666);
    listeners_destroy(&ls);
    ck_assert_int_eq(access(sock_path, F_OK), -1);
}
END_TEST

/* The mapping form's mode and owner land on the file before anyone can connect. */
START_TEST(unix_mode_and_owner_configured)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    /* As root, daemon's ids (1:1 on Debian-like systems); otherwise our own, always allowed. */
    uid_t uid = geteuid() == 0 ? 1 : geteuid();
    gid_t gid = geteuid() == 0 ? 1 : getegid();
    l.has_mode = l.has_uid = l.has_gid = 1;
    l.mode = 0640;
    l.uid = uid;
    l.gid = gid;
    mode_t before = umask(022);
    listener_set ls;
    char err[256];
    ck_assert_msg(listeners_open(&c, &ls, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(umask(before), 022); /* the restrictive bind umask was undone */
    struct stat st;
    ck_assert_int_eq(lstat(sock_path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    ck_assert_int_eq(st.st_mode & 07777, 0640);
    ck_assert_uint_eq(st.st_uid, uid);
    ck_assert_uint_eq(st.st_gid, gid);
    listeners_destroy(&ls);
    ck_assert_int_eq(access(sock_path, F_OK), -1);

    l.has_uid = l.has_gid = 0;
    l.mode = 0;
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), 0);
    ck_assert_int_eq(lstat(sock_path, &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0); /* 0 is a mode, not "unset" */
    listeners_destroy(&ls);
}
END_TEST

/* A socket file nobody listens on (a crashed server's) is replaced. */
START_TEST(unix_stale_removed)
{
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, sock_path);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sun, sizeof sun), 0);
    close(s);

    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), 0);
    listeners_destroy(&ls);
}
END_TEST

START_TEST(unix_live_refused)
{
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, sock_path);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sun, sizeof sun), 0);
    ck_assert_int_eq(listen(s, 8), 0);

    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), -1);
    ck_assert_str_eq(err, "cannot listen on unix:s: another process is listening on this socket: "
                          "address already in use (is another pagid running?)");
    ck_assert_int_eq(access(sock_path, F_OK), 0);
    close(s);
}
END_TEST

START_TEST(unix_not_a_socket)
{
    FILE *f = fopen(sock_path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "exists and is not a socket"));
    ck_assert_int_eq(access(sock_path, F_OK), 0);
}
END_TEST

/* If someone replaced the file after we bound, it is not ours to remove. */
START_TEST(unix_unlink_only_ours)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), 0);
    ck_assert_int_eq(unlink(sock_path), 0);
    FILE *f = fopen(sock_path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    listeners_destroy(&ls);
    ck_assert_int_eq(access(sock_path, F_OK), 0);
}
END_TEST

START_TEST(unix_path_too_long)
{
    char path[200];
    memset(path, 'x', sizeof path - 1);
    path[0] = '/';
    path[sizeof path - 1] = '\0';
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:long", NULL, 0, path, &l);
    listener_set ls;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "socket path longer than"));
}
END_TEST

/* ---- reuse across generations, inherited sockets (reload, upgrade) ---- */

static ino_t sock_ino(int fd)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    return st.st_ino;
}

static int bound_port(int fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

/* A reload's set shares the live set's kernel sockets (dups, close-on-exec). */
START_TEST(reuse_keeps_socket)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, "127.0.0.1:0", "127.0.0.1", 0, NULL, &l);
    listener_set a, b;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &a, err, sizeof err), 0);
    l.port = bound_port(a.items[0].fd);
    const listener_set *reuse[] = {&a};
    ck_assert_int_eq(listeners_open_with(&c, &b, reuse, 1, NULL, err, sizeof err), 0);
    ck_assert_uint_eq(b.n, 1);
    ck_assert_int_ne(b.items[0].fd, a.items[0].fd);
    ck_assert_uint_eq(sock_ino(b.items[0].fd), sock_ino(a.items[0].fd));
    ck_assert(fcntl(b.items[0].fd, F_GETFD) & FD_CLOEXEC);
    listeners_destroy(&a);
    ck_assert_int_eq(int_opt(b.items[0].fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
    listeners_destroy(&b);
}
END_TEST

/*
 * Another pagid (a SO_REUSEPORT listener of the same user) on the address:
 * refused, where SO_REUSEPORT alone would have bound beside it and split
 * the connections; the message points at the pid file.
 */
START_TEST(tcp_second_instance_refused)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, "127.0.0.1:0", "127.0.0.1", 0, NULL, &l);
    listener_set first, second;
    char err[256], want[256];
    ck_assert_int_eq(listeners_open(&c, &first, err, sizeof err), 0);
    l.port = bound_port(first.items[0].fd);
    c.pid_file = "/run/pagid/pagid.pid";
    ck_assert_int_eq(listeners_open(&c, &second, err, sizeof err), -1);
    snprintf(want, sizeof want,
             "cannot listen on 127.0.0.1:0: address already in use (is another pagid running? see "
             "pid file /run/pagid/pagid.pid)");
    ck_assert_str_eq(err, want);
    ck_assert_uint_eq(second.n, 0);
    /* A wildcard listener covers 127.0.0.1 too. */
    pagid_listen w;
    pagid_config cw = one(LISTEN_TCP, "*:0", NULL, l.port, NULL, &w);
    ck_assert_int_eq(listeners_open(&cw, &second, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "address already in use (is another pagid running?)"));
    listeners_destroy(&first);
    /* Gone: the address is free again (the probe left nothing behind). */
    ck_assert_int_eq(listeners_open(&c, &second, err, sizeof err), 0);
    listeners_destroy(&second);
}
END_TEST

/* Our own sockets on the port are not "another pagid": a config with
 * 0.0.0.0:P and 127.0.0.1:P, or a reload adding 127.0.0.1:P beside a live
 * 0.0.0.0:P, binds with SO_REUSEPORT as before. */
START_TEST(tcp_own_port_not_a_conflict)
{
    pagid_listen l[2] = {
        {.kind = LISTEN_TCP, .spec = "wild", .port = 0},
        {.kind = LISTEN_TCP, .spec = "lo", .host = "127.0.0.1"},
    };
    pagid_config c;
    memset(&c, 0, sizeof c);
    c.listens = l;
    c.n_listens = 1;
    listener_set a, b;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &a, err, sizeof err), 0);
    l[0].port = l[1].port = bound_port(a.items[0].fd);
    listeners_destroy(&a);

    c.n_listens = 2; /* both in one config */
    ck_assert_int_eq(listeners_open(&c, &a, err, sizeof err), 0);
    ck_assert_uint_eq(a.n, 2);

    const listener_set *reuse[] = {&a}; /* a reload that keeps both */
    ck_assert_int_eq(listeners_open_with(&c, &b, reuse, 1, NULL, err, sizeof err), 0);
    listeners_destroy(&b);
    c.listens = &l[1]; /* a reload that only has the loopback one: dup'd */
    c.n_listens = 1;
    ck_assert_int_eq(listeners_open_with(&c, &b, reuse, 1, NULL, err, sizeof err), 0);
    ck_assert_uint_eq(sock_ino(b.items[0].fd), sock_ino(a.items[1].fd));
    listeners_destroy(&b);
    listeners_destroy(&a);
}
END_TEST

/* Overlaps after resolution: what listeners_check_overlap reports, and how often. */
static int overlaps(const char *const *specs, size_t n, int last_is_status, char *out, size_t len)
{
    pagid_config c;
    memset(&c, 0, sizeof c);
    const char *msg;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(config_add_listen(&c, specs[i], &msg), 0);
        c.listens[i].pos = (pagid_pos){1, (unsigned)i + 1, "t.yaml"};
    }
    c.listens[n - 1].status = last_is_status;
    FILE *f = fmemopen(out, len, "w");
    ck_assert_ptr_nonnull(f);
    int rc = listeners_check_overlap(&c, f);
    fclose(f);
    config_free(&c);
    return rc;
}

START_TEST(overlap_after_resolution)
{
    char out[2048];
    const char *status_lo[] = {"127.0.0.1:7001", "localhost:7001"};
    ck_assert_int_eq(overlaps(status_lo, 2, 1, out, sizeof out), 1);
    ck_assert_str_eq(out, "t.yaml:1:2: status.listen 'localhost:7001' (127.0.0.1:7001) overlaps "
                          "listen address '127.0.0.1:7001' at t.yaml:1:1: the metrics would be "
                          "answered on the app's address and app requests on the metrics'\n");
    const char *wild[] = {"127.0.0.1:7002", "0.0.0.0:7002", "127.0.0.2:7002"};
    ck_assert_int_eq(overlaps(wild, 3, 0, out, sizeof out), 2); /* each later entry once */
    const char *v6[] = {"[::]:7003", "[::1]:7003"};
    ck_assert_int_eq(overlaps(v6, 2, 0, out, sizeof out), 1);
    /* Apart: other ports, other addresses, IPv6 sockets beside IPv4 ones (v6-only). */
    const char *apart[] = {"127.0.0.1:7004", "127.0.0.2:7004", "127.0.0.1:7005", "[::]:7004",
                           "unix:/tmp/a.sock", "unix:/tmp/b.sock"};
    ck_assert_int_eq(overlaps(apart, 6, 1, out, sizeof out), 0);
    const char *unix2[] = {"unix:/tmp/x.sock", "unix:/tmp/./x.sock"};
    ck_assert_int_eq(overlaps(unix2, 2, 0, out, sizeof out), 1);
}
END_TEST

/* A unix socket is reused while its file still names it; the old set may not unlink it then. */
START_TEST(reuse_unix_socket)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    listener_set a, b;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &a, err, sizeof err), 0);
    const listener_set *reuse[] = {&a};
    ck_assert_int_eq(listeners_open_with(&c, &b, reuse, 1, NULL, err, sizeof err), 0);
    ck_assert_uint_eq(sock_ino(b.items[0].fd), sock_ino(a.items[0].fd));
    ck_assert(listeners_has_unix(&b, a.unix_dev[0], a.unix_ino[0]));
    a.unix_ino[0] = 0; /* what gen_free does when another set holds it */
    listeners_destroy(&a);
    ck_assert_int_eq(access(sock_path, F_OK), 0);
    listeners_destroy(&b);
    ck_assert_int_ne(access(sock_path, F_OK), 0);
}
END_TEST

/* A reload keeps the socket, and a changed mode or owner goes to its file;
 * what the new config leaves unset stays as it is. */
START_TEST(reuse_unix_applies_mode)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    l.has_mode = 1;
    l.mode = 0600;
    listener_set a, b, d;
    char err[256];
    struct stat st;
    ck_assert_int_eq(listeners_open(&c, &a, err, sizeof err), 0);
    ck_assert_int_eq(lstat(sock_path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);

    gid_t gid = geteuid() == 0 ? 4 : getegid();
    l.mode = 0660;
    l.has_gid = 1;
    l.gid = gid;
    const listener_set *reuse[] = {&a};
    ck_assert_msg(listeners_open_with(&c, &b, reuse, 1, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(sock_ino(b.items[0].fd), sock_ino(a.items[0].fd));
    ck_assert_int_eq(lstat(sock_path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0660);
    ck_assert_uint_eq(st.st_gid, gid);

    l.has_mode = l.has_gid = 0;
    const listener_set *reuse2[] = {&b};
    ck_assert_int_eq(listeners_open_with(&c, &d, reuse2, 1, NULL, err, sizeof err), 0);
    ck_assert_int_eq(lstat(sock_path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0660);
    ck_assert_uint_eq(st.st_gid, gid);
    a.unix_ino[0] = b.unix_ino[0] = 0;
    listeners_destroy(&a);
    listeners_destroy(&b);
    listeners_destroy(&d);
}
END_TEST

/* An inherited socket whose path is now a symlink: chmod would follow it. */
START_TEST(inherited_symlink_not_followed)
{
    char target[160];
    snprintf(target, sizeof target, "%s/target", tmpdir);
    FILE *f = fopen(target, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(chmod(target, 0600), 0);
    ck_assert_int_eq(symlink(target, sock_path), 0);

    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    l.has_mode = 1;
    l.mode = 0666;
    int spare = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(spare, 0);
    char *name = strdup("unix:s");
    inherited_fd items[1] = {{.fd = spare, .name = name}};
    inherited_set inh = {.items = items, .n = 1, .origin = "test"};
    listener_set b;
    char err[256];
    ck_assert_int_eq(listeners_open_with(&c, &b, NULL, 0, &inh, err, sizeof err), -1);
    char want[256];
    snprintf(want, sizeof want,
             "cannot listen on unix:s: %s is not a socket; mode and owner not applied", sock_path);
    ck_assert_str_eq(err, want);
    struct stat st;
    ck_assert_int_eq(stat(target, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    close(spare);
    free(name);
    unlink(target);
}
END_TEST

START_TEST(env_roundtrip)
{
    pagid_listen l[2] = {
        {.kind = LISTEN_TCP, .spec = "127.0.0.1:0", .host = "127.0.0.1"},
        {.kind = LISTEN_UNIX, .spec = "unix:a;b%c", .path = sock_path},
    };
    pagid_config c;
    memset(&c, 0, sizeof c);
    c.listens = l;
    c.n_listens = 2;
    listener_set ls;
    char err[256], env[512];
    ck_assert_int_eq(listeners_open(&c, &ls, err, sizeof err), 0);
    ck_assert_int_gt(listeners_env_format(&ls, env, sizeof env), 0);
    char want[128];
    snprintf(want, sizeof want, "%d:127.0.0.1:0;%d:unix:a%%3Bb%%25c", ls.items[0].fd,
             ls.items[1].fd);
    ck_assert_str_eq(env, want);
    ck_assert_int_eq(listeners_env_format(&ls, env, 8), -1);
    ck_assert_int_gt(listeners_env_format(&ls, env, sizeof env), 0);

    inherited_set inh;
    ck_assert_int_eq(listeners_env_parse(env, &inh, err, sizeof err), 0);
    ck_assert_uint_eq(inh.n, 2);
    ck_assert_int_eq(inh.items[0].fd, ls.items[0].fd);
    ck_assert_str_eq(inh.items[0].name, "127.0.0.1:0");
    ck_assert_str_eq(inh.items[1].name, "unix:a;b%c");
    /* the parser leaves them non-blocking and close-on-exec */
    ck_assert(fcntl(inh.items[1].fd, F_GETFL) & O_NONBLOCK);
    ck_assert(fcntl(inh.items[1].fd, F_GETFD) & FD_CLOEXEC);
    for (size_t i = 0; i < inh.n; i++)
        inh.items[i].fd = -1; /* still ls's */
    inherited_set_free(&inh, 0);
    listeners_destroy(&ls);
}
END_TEST

START_TEST(env_parse_rejects)
{
    inherited_set inh;
    char err[256], v[64];
    ck_assert_int_eq(listeners_env_parse("", &inh, err, sizeof err), 0);
    ck_assert_uint_eq(inh.n, 0);
    ck_assert_int_eq(listeners_env_parse("abc", &inh, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "malformed"));
    ck_assert_int_eq(listeners_env_parse("7", &inh, err, sizeof err), -1);
    /* stdin is no listening socket */
    ck_assert_int_eq(listeners_env_parse("0:127.0.0.1:80", &inh, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a listening socket"));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    snprintf(v, sizeof v, "%d:a%%zz", fd);
    ck_assert_int_eq(listeners_env_parse(v, &inh, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "escape"));
    snprintf(v, sizeof v, "%d:a%%2", fd);
    ck_assert_int_eq(listeners_env_parse(v, &inh, err, sizeof err), -1);
    close(fd);
}
END_TEST

/* An inherited socket bound to the listen address is taken over, not bound again. */
START_TEST(inherited_taken_by_address)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, "127.0.0.1:0", "127.0.0.1", 0, NULL, &l);
    listener_set a, b;
    char err[256];
    ck_assert_int_eq(listeners_open(&c, &a, err, sizeof err), 0);
    int fd = a.items[0].fd;
    l.port = bound_port(fd);
    int spare = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(spare, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(spare, 4), 0);
    inherited_fd items[2] = {{.fd = spare, .name = NULL}, {.fd = fd, .name = NULL}};
    inherited_set inh = {.items = items, .n = 2, .origin = "test"};
    ck_assert_int_eq(listeners_open_with(&c, &b, NULL, 0, &inh, err, sizeof err), 0);
    ck_assert_int_eq(b.items[0].fd, fd);
    ck_assert_int_eq(items[1].fd, -1);
    ck_assert_int_eq(items[0].fd, spare); /* another address: left alone */
    close(spare);
    a.items[0].fd = -1;
    listeners_destroy(&a);
    listeners_destroy(&b);
}
END_TEST

/* A systemd-style name equal to the listen spec wins over the address. */
/* What systemd passed, as listen specs; the list an upgrade passes on. */
START_TEST(inherited_specs_and_their_env)
{
    int t = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(t, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(t, 1), 0);
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, sock_path);
    ck_assert_int_eq(bind(u, (struct sockaddr *)&sun, sizeof sun), 0);
    ck_assert_int_eq(listen(u, 1), 0);
    int a = socket(AF_UNIX, SOCK_STREAM, 0); /* abstract: no spec names it */
    struct sockaddr_un abs = {.sun_family = AF_UNIX};
    memcpy(abs.sun_path, "\0pagid-test-abstract", 21);
    ck_assert_int_eq(bind(a, (struct sockaddr *)&abs, offsetof(struct sockaddr_un, sun_path) + 21),
                     0);
    ck_assert_int_eq(listen(a, 1), 0);

    inherited_fd items[] = {{.fd = t}, {.fd = u}, {.fd = a}, {.fd = -1}};
    inherited_set inh = {.items = items, .n = 4, .origin = "systemd"};
    char **specs;
    size_t n;
    ck_assert_int_eq(listeners_inherited_specs(&inh, &specs, &n), 0);
    ck_assert_uint_eq(n, 2);
    char want[160];
    snprintf(want, sizeof want, "127.0.0.1:%d", bound_port(t));
    ck_assert_str_eq(specs[0], want);
    snprintf(want, sizeof want, "unix:%s", sock_path);
    ck_assert_str_eq(specs[1], want);

    /* Through the environment of an upgrade, ';' and '%' included. */
    char *odd[] = {specs[0], "unix:/tmp/a;b%c.sock"};
    char env[256];
    ck_assert_int_gt(listeners_specs_format(odd, 2, env, sizeof env), 0);
    char **back;
    size_t nb;
    ck_assert_int_eq(listeners_specs_parse(env, &back, &nb), 0);
    ck_assert_uint_eq(nb, 2);
    ck_assert_str_eq(back[0], specs[0]);
    ck_assert_str_eq(back[1], "unix:/tmp/a;b%c.sock");
    ck_assert_int_eq(listeners_specs_format(odd, 2, env, 8), -1);
    for (size_t i = 0; i < nb; i++)
        free(back[i]);
    free(back);
    for (size_t i = 0; i < n; i++)
        free(specs[i]);
    free(specs);
    close(t);
    close(u);
    close(a);
}
END_TEST

/* A unix socket systemd passed is served but its file is systemd's: never
 * unlinked, also by a set that reused it (reload). */
START_TEST(systemd_unix_file_kept)
{
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, sock_path);
    ck_assert_int_eq(bind(u, (struct sockaddr *)&sun, sizeof sun), 0);
    ck_assert_int_eq(listen(u, 1), 0);
    inherited_fd *items = calloc(1, sizeof *items);
    items[0] = (inherited_fd){.fd = u, .systemd = 1};
    inherited_set inh = {.items = items, .n = 1, .origin = "systemd"};
    pagid_listen l;
    pagid_config c = one(LISTEN_UNIX, "unix:s", NULL, 0, sock_path, &l);
    listener_set a, b;
    char err[256];
    ck_assert_int_eq(listeners_open_with(&c, &a, NULL, 0, &inh, err, sizeof err), 0);
    inherited_set_free(&inh, 0);
    ck_assert_uint_eq(a.n, 1);
    ck_assert_int_eq(a.items[0].fd, u);
    const listener_set *reuse[] = {&a};
    ck_assert_int_eq(listeners_open_with(&c, &b, reuse, 1, NULL, err, sizeof err), 0);
    ck_assert_uint_eq(sock_ino(b.items[0].fd), sock_ino(u));
    listeners_destroy(&a);
    listeners_destroy(&b);
    ck_assert_int_eq(access(sock_path, F_OK), 0);
}
END_TEST

START_TEST(inherited_taken_by_name)
{
    pagid_listen l;
    pagid_config c = one(LISTEN_TCP, "8080", "127.0.0.1", 8080, NULL, &l);
    int spare = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(spare, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(spare, 4), 0);
    char *name = strdup("8080");
    inherited_fd items[1] = {{.fd = spare, .name = name}};
    inherited_set inh = {.items = items, .n = 1, .origin = "test"};
    listener_set b;
    char err[256];
    ck_assert_int_eq(listeners_open_with(&c, &b, NULL, 0, &inh, err, sizeof err), 0);
    ck_assert_uint_eq(b.n, 1);
    ck_assert_int_eq(b.items[0].fd, spare);
    ck_assert_int_eq(items[0].fd, -1);
    free(name);
    listeners_destroy(&b);
}
END_TEST

static Suite *listeners_suite(void)
{
    Suite *s = suite_create("listeners");
    TCase *tcp = tcase_create("tcp");
    tcase_add_checked_fixture(tcp, setup, teardown);
    tcase_add_test(tcp, tcp4_options);
    tcase_add_test(tcp, tcp6_v6only);
    tcase_add_test(tcp, tcp_in_use);
    tcase_add_test(tcp, tcp_bad_host);
    suite_add_tcase(s, tcp);
    TCase *un = tcase_create("unix");
    tcase_add_checked_fixture(un, setup, teardown);
    tcase_add_test(un, partial_failure_closes_all);
    tcase_add_test(un, unix_mode_and_unlink);
    tcase_add_test(un, unix_mode_and_owner_configured);
    tcase_add_test(un, unix_stale_removed);
    tcase_add_test(un, unix_live_refused);
    tcase_add_test(un, unix_not_a_socket);
    tcase_add_test(un, unix_unlink_only_ours);
    tcase_add_test(un, unix_path_too_long);
    suite_add_tcase(s, un);
    TCase *re = tcase_create("reuse");
    tcase_add_checked_fixture(re, setup, teardown);
    tcase_add_test(re, reuse_keeps_socket);
    tcase_add_test(re, tcp_second_instance_refused);
    tcase_add_test(re, tcp_own_port_not_a_conflict);
    tcase_add_test(re, reuse_unix_socket);
    tcase_add_test(re, reuse_unix_applies_mode);
    tcase_add_test(re, inherited_symlink_not_followed);
    tcase_add_test(re, env_roundtrip);
    tcase_add_test(re, env_parse_rejects);
    tcase_add_test(re, inherited_taken_by_address);
    tcase_add_test(re, inherited_taken_by_name);
    tcase_add_test(re, inherited_specs_and_their_env);
    tcase_add_test(re, systemd_unix_file_kept);
    tcase_add_test(re, overlap_after_resolution);
    suite_add_tcase(s, re);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(listeners_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
