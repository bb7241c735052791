/*
 * signal_cli.c - pagid -s SIGNAL. The pid file is read strictly and the
 * pid checked (not 0 or 1, running, and a pagid by its comm name, which
 * pagid never changes) before anything is sent: a stale pid file must not
 * make us signal whatever process reuses the number. -s upgrade then
 * watches the pid file pair until the new master serves (upgrade.c tells
 * the story through the files, see upgrade_watch_step).
 */
#include "signal_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "common/pidfile.h"
#include "master_timing.h"
#include "preflight_tls.h"

/* How often -s upgrade looks at the pid files: a failed upgrade renames
 * .oldbin back within milliseconds, and we would like to see it first. */
#define POLL_S 0.01
/* A master that has not renamed its pid file by then did not start an
 * upgrade (it refused, or it is a single process with -w 0). */
#define START_GRACE_S 5.0
/* Beyond the master's own deadline, so we report its verdict, not ours. */
#define DEADLINE_MARGIN_S 5.0

/* nginx's names, mapped by meaning: in pagid SIGTERM drains and SIGQUIT
 * stops at once (the other way round from nginx). */
static const struct {
    const char *name;
    int signo;
    const char *signame;
} signals[] = {
    {"reload", SIGHUP, "SIGHUP"}, {"reopen", SIGUSR1, "SIGUSR1"},  {"quit", SIGTERM, "SIGTERM"},
    {"stop", SIGQUIT, "SIGQUIT"}, {"upgrade", SIGUSR2, "SIGUSR2"},
};

int signal_cli_signo(const char *name)
{
    for (size_t i = 0; name && i < sizeof signals / sizeof signals[0]; i++)
        if (strcmp(name, signals[i].name) == 0)
            return signals[i].signo;
    return -1;
}

static const char *signame(int signo)
{
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (signals[i].signo == signo)
            return signals[i].signame;
    return "?";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A small /proc file's first line, or "" when it cannot be read. */
static void read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
    char path[64];
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    else
        snprintf(path, sizeof path, "/proc/self/%s", what);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

/* 1: running; 0: no such process, or a zombie nobody reaped yet. */
static int running(pid_t pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return 0;
    char stat[512];
    read_proc(pid, "stat", stat, sizeof stat);
    /* "pid (comm) S ...": the state follows the last ')'. */
    const char *rp = strrchr(stat, ')');
    return !(rp && rp[1] == ' ' && rp[2] == 'Z');
}

/* pid runs a program of our comm name: pagid never renames itself (titles
 * change the command line only), so a reused pid is told apart. */
static int same_program(pid_t pid, char *theirs, size_t tlen, char *ours, size_t olen)
{
    read_proc(pid, "comm", theirs, tlen);
    read_proc(0, "comm", ours, olen);
    return !(*theirs && *ours && strcmp(theirs, ours) != 0);
}

upgrade_verdict upgrade_watch_step(upgrade_watch *w, const upgrade_view *v, double elapsed)
{
    int new_serving = v->current > 0 && v->current != w->old && v->current_alive;
    if (v->oldbin_is_old || v->pidfile_moved)
        w->started = 1;
    if (!v->old_alive) {
        if (new_serving)
            return UPGRADE_DONE; /* handed over and already drained */
        snprintf(w->why, sizeof w->why,
                 "the master (pid %d) exited and no new master runs; see the error log",
                 (int)w->old);
        return UPGRADE_FAILED;
    }
    if (!v->oldbin_is_old) {
        if (new_serving)
            return UPGRADE_DONE;
        if (w->started && v->current == w->old) {
            snprintf(w->why, sizeof w->why,
                     "the new master did not take over; the old master (pid %d) keeps serving "
                     "(its error log says why)",
                     (int)w->old);
            return UPGRADE_FAILED;
        }
    }
    if (!w->started && elapsed >= w->start_grace) {
        snprintf(w->why, sizeof w->why,
                 "the master (pid %d) did not start an upgrade within %.0fs (a reload or "
                 "another upgrade in progress? -w 0? see its error log)",
                 (int)w->old, w->start_grace);
        return UPGRADE_FAILED;
    }
    if (elapsed >= w->deadline) {
        snprintf(w->why, sizeof w->why, "no new master took over within %.0fs", w->deadline);
        return UPGRADE_FAILED;
    }
    return UPGRADE_WAIT;
}

/* What identifies the pid file itself: a rename (to .oldbin and back) keeps
 * the inode but changes the ctime; a new file changes the inode. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
} file_id;

static file_id file_id_of(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return (file_id){0};
    return (file_id){st.st_dev, st.st_ino, st.st_ctim};
}

static int same_file_id(file_id a, file_id b)
{
    return a.dev == b.dev && a.ino == b.ino && a.ctime.tv_sec == b.ctime.tv_sec &&
           a.ctime.tv_nsec == b.ctime.tv_nsec;
}

static void look(const char *pid_file, const char *oldbin, pid_t old, file_id before,
                 upgrade_view *v)
{
    pid_t p;
    v->pidfile_moved = !same_file_id(file_id_of(pid_file), before);
    /* .oldbin first: a failed upgrade renames it back over the pid file in
     * one step, so having seen it gone, the pid file read next is final. */
    v->oldbin_is_old = pidfile_read(oldbin, &p) == 0 && p == old;
    v->current = pidfile_read(pid_file, &p) == 0 ? p : 0;
    v->current_alive = v->current > 1 && running(v->current);
    v->old_alive = running(old);
}

static int wait_upgrade(const pagid_config *c, const char *oldbin, pid_t old, file_id before,
                        FILE *out, FILE *err)
{
    upgrade_watch w = {.old = old,
                       .start_grace = START_GRACE_S,
                       .deadline = master_upgrade_timeout(c) + DEADLINE_MARGIN_S};
    double t0 = now_s();
    for (;;) {
        upgrade_view v;
        look(c->pid_file, oldbin, old, before, &v);
        switch (upgrade_watch_step(&w, &v, now_s() - t0)) {
        case UPGRADE_DONE:
            fprintf(out,
                    "pagid: upgraded: the new master (pid %d) serves; the old one (pid %d) drains "
                    "and exits\n",
                    (int)v.current, (int)old);
            return EXIT_OK;
        case UPGRADE_FAILED:
            fprintf(err, "pagid: upgrade failed: %s\n", w.why);
            return EXIT_SIGNAL;
        case UPGRADE_WAIT:
            break;
        }
        struct timespec ts = {0, (long)(POLL_S * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* The pid in pid_file, checked to be a running pagid; 0, or an exit code after a message. */
static int find_master(const char *pid_file, pid_t *out, FILE *err)
{
    pid_t pid;
    if (pidfile_read(pid_file, &pid) < 0) {
        if (errno == ENOENT) {
            fprintf(err, "pagid: %s does not exist: is pagid running?\n", pid_file);
            return EXIT_NOT_RUNNING;
        }
        if (errno == EINVAL)
            fprintf(err, "pagid: %s does not hold a pid\n", pid_file);
        else
            fprintf(err, "pagid: cannot read %s: %s\n", pid_file, strerror(errno));
        return EXIT_SIGNAL;
    }
    if (pid <= 1) {
        fprintf(err, "pagid: %s holds pid %d; refusing to signal it\n", pid_file, (int)pid);
        return EXIT_SIGNAL;
    }
    if (!running(pid)) {
        fprintf(err, "pagid: %s names pid %d, which is not running (stale pid file)\n", pid_file,
                (int)pid);
        return EXIT_NOT_RUNNING;
    }
    char theirs[64], ours[64];
    if (!same_program(pid, theirs, sizeof theirs, ours, sizeof ours)) {
        fprintf(err, "pagid: %s names pid %d, which is '%s', not %s (stale pid file)\n", pid_file,
                (int)pid, theirs, ours);
        return EXIT_NOT_RUNNING;
    }
    *out = pid;
    return 0;
}

static int deliver(const pagid_config *c, int signo, FILE *out, FILE *err)
{
    char oldbin[4096];
    pid_t pid, busy;
    snprintf(oldbin, sizeof oldbin, "%s.oldbin", c->pid_file);
    char theirs[64], ours[64];
    if (signo == SIGUSR2 && pidfile_read(oldbin, &busy) == 0 && busy > 1 && running(busy) &&
        same_program(busy, theirs, sizeof theirs, ours, sizeof ours)) {
        fprintf(err,
                "pagid: an upgrade is in progress (%s names the old master, pid %d); try again "
                "when it is over\n",
                oldbin, (int)busy);
        return EXIT_SIGNAL;
    }
    int rc = find_master(c->pid_file, &pid, err);
    if (rc)
        return rc;
    /* Before the signal: an upgrade that fails within one poll renames the
     * file away and back unseen, but not without changing its ctime. */
    file_id before = file_id_of(c->pid_file);
    if (kill(pid, signo) < 0) {
        int e = errno;
        fprintf(err, "pagid: cannot send %s to pid %d: %s%s\n", signame(signo), (int)pid,
                strerror(e), e == EPERM ? " (run as the master's user or root)" : "");
        return e == ESRCH ? EXIT_NOT_RUNNING : EXIT_SIGNAL;
    }
    return signo == SIGUSR2 ? wait_upgrade(c, oldbin, pid, before, out, err) : EXIT_OK;
}

int signal_cli_run(const cli_options *o, FILE *out, FILE *err)
{
    int signo = signal_cli_signo(o->signal_name);
    if (signo < 0)
        return EXIT_USAGE;
    pagid_config c;
    memset(&c, 0, sizeof c);
    char *msgs = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&msgs, &len);
    int errors = cli_build_config(o, &c, mem ? mem : err);
    /* The TLS contexts as the master will build them (certificates, keys,
     * groups): a reload the master would refuse is not sent. Not the rest
     * of pagid -t's host checks: they depend on who the workers run as, and
     * the master may have been started with -u this command was not given. */
    for (size_t i = 0; !errors && (signo == SIGHUP || signo == SIGUSR2) && i < c.n_listens; i++)
        if (c.listens[i].tls)
            errors += preflight_tls_check(&c, &c.listens[i], mem ? mem : err);
    if (mem)
        fclose(mem);
    int rc;
    if (errors && (signo == SIGHUP || signo == SIGUSR2)) {
        /* The master would refuse it and only its log would say so. */
        fprintf(err, "%spagid: invalid configuration: not sending %s\n", msgs ? msgs : "",
                o->signal_name);
        rc = EXIT_CONFIG;
    } else if (!c.pid_file || !*c.pid_file) {
        fprintf(err, "%spagid: -s %s finds the master through its pid file: %s\n",
                errors && msgs ? msgs : "", o->signal_name,
                o->config_file ? "the configuration sets no pid_file"
                               : "give -c FILE, the configuration that sets pid_file");
        rc = EXIT_CONFIG;
    } else {
        if (errors)
            fprintf(err,
                    "pagid: warning: the configuration has %d error%s (see pagid -t); using its "
                    "pid_file %s\n",
                    errors, errors == 1 ? "" : "s", c.pid_file);
        rc = deliver(&c, signo, out, err);
    }
    free(msgs);
    config_free(&c);
    return rc;
}
