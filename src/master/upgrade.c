/*
 * upgrade.c - SIGUSR2, the binary upgrade, after nginx: the master forks and
 * re-executes its binary with the listening sockets left open across exec
 * and named in PAGID_INHERITED_FDS. The new master starts its own workers on
 * the very same sockets (no connection refused: one accept queue per
 * address all along) and, once every one of them passed lifespan startup,
 * sends SIGWINCH to us: we hand over (pid file, MAINPID) and drain. Until
 * then we serve as if nothing happened, and if the new master dies or is
 * not ready in time, we restore the pid file and carry on.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pidfile.h"
#include "common/proctitle.h"
#include "notify.h"
#include "supervisor_int.h"

static void oldbin_path(const supervisor *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s.oldbin", s->opts->pid_file);
}

static int has_pid_file(const supervisor *s)
{
    return s->opts && s->opts->pid_file && *s->opts->pid_file;
}

/* The child: make the sockets survive exec, say where they are, exec. */
static void __attribute__((noreturn)) exec_new_master(supervisor *s, const char *fds)
{
    for (size_t i = 0; i < s->active->ls.n; i++)
        if (s->active->ls.items[i].fd >= 0)
            fcntl(s->active->ls.items[i].fd, F_SETFD, 0);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)s->pid);
    setenv(LISTENERS_ENV, fds, 1);
    setenv(SUPERVISOR_UPGRADE_ENV, pid, 1);
    /* Which sockets are systemd's: the new master serves them when no
     * listener is configured, as we do, and never unlinks their files. */
    const cli_options *o = s->opts->cli;
    char act[8192];
    if (o && o->n_activated &&
        listeners_specs_format(o->activated, o->n_activated, act, sizeof act) >= 0)
        setenv(LISTENERS_ACTIVATED_ENV, act, 1);
    else
        unsetenv(LISTENERS_ACTIVATED_ENV);
    /* systemd's watchdog is per pid: this pid is the new master's. */
    if (getenv("WATCHDOG_USEC")) {
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        setenv("WATCHDOG_PID", pid, 1);
    }
    /* exec keeps the signal mask: the new master must start with none blocked. */
    sigset_t none;
    sigemptyset(&none);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && sig != SIGPIPE)
            signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(s->opts->exe, s->opts->argv);
    log_error("upgrade: cannot execute %s: %s", s->opts->exe, strerror(errno));
    _exit(127);
}

void upgrade_start(supervisor *s)
{
    if (!s->opts || !s->opts->exe || !s->opts->argv) {
        log_warn("SIGUSR2: the binary's path is unknown; no upgrade");
        return;
    }
    if (s->up != UP_NONE) {
        log_warn("SIGUSR2 ignored: an upgrade is already in progress (new master pid %d)",
                 (int)s->up_pid);
        return;
    }
    if (!s->active || s->reloading) {
        log_warn("SIGUSR2 ignored: a reload is in progress; try again when it is done");
        return;
    }
    char fds[8192];
    if (listeners_env_format(&s->active->ls, fds, sizeof fds) < 0) {
        log_error("upgrade: too many listening sockets to hand over");
        return;
    }
    char old[4096];
    if (has_pid_file(s)) {
        oldbin_path(s, old, sizeof old);
        if (rename(s->opts->pid_file, old) < 0 && errno != ENOENT)
            log_warn("upgrade: cannot rename %s to %s: %s", s->opts->pid_file, old,
                     strerror(errno));
    }
    log_info("SIGUSR2: starting a new master from %s", s->opts->exe);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        exec_new_master(s, fds);
    if (pid < 0) {
        log_error("upgrade: fork: %s; carrying on", strerror(errno));
        if (has_pid_file(s))
            rename(old, s->opts->pid_file);
        return;
    }
    s->up = UP_STARTING;
    s->up_pid = pid;
    s->env.upgrade_pid = pid; /* a child of the master that is no worker */
    proctitle_master("old, upgrading");
    s->up_deadline = supervisor_now() + master_upgrade_timeout(s->active->cfg);
}

void upgrade_on_ready_signal(supervisor *s, pid_t from)
{
    if (s->up != UP_STARTING || from != s->up_pid) {
        log_warn("SIGWINCH from pid %d ignored (not our new master)", (int)from);
        return;
    }
    log_info("upgrade: the new master (pid %d) is ready; handing over and draining",
             (int)s->up_pid);
    s->up = UP_HANDED_OVER;
    /* Our sockets and files are the new master's now. .oldbin goes at once:
     * with it gone and the pid file naming the new master, pagid -s upgrade
     * knows the handover happened (the drain may take timeouts.shutdown). */
    s->owns_files = 0;
    if (has_pid_file(s)) {
        char old[4096];
        oldbin_path(s, old, sizeof old);
        pidfile_remove(old, s->pid);
    }
    notify_sendf("MAINPID=%d\nSTATUS=handed over to pid %d", (int)s->up_pid, (int)s->up_pid);
    supervisor_begin_drain(s, 0);
}

static void describe(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

void upgrade_child_exited(supervisor *s, int status)
{
    char how[32];
    describe(status, how, sizeof how);
    if (s->up == UP_HANDED_OVER) {
        log_warn("upgrade: the new master (pid %d) exited (%s) after taking over", (int)s->up_pid,
                 how);
        s->up_pid = 0;
        s->env.upgrade_pid = 0;
        return;
    }
    log_error("upgrade failed: the new master (pid %d) exited before it was ready (%s); this "
              "master keeps serving",
              (int)s->up_pid, how);
    if (has_pid_file(s)) {
        char old[4096];
        oldbin_path(s, old, sizeof old);
        if (rename(old, s->opts->pid_file) < 0)
            log_warn("upgrade: cannot restore %s: %s", s->opts->pid_file, strerror(errno));
    }
    s->up = UP_NONE;
    s->up_pid = 0;
    s->env.upgrade_pid = 0;
    if (s->state == MS_RUNNING)
        proctitle_master(NULL);
}

void upgrade_check_deadline(supervisor *s, double now)
{
    if (s->up != UP_STARTING || now < s->up_deadline)
        return;
    log_error("upgrade failed: the new master (pid %d) was not ready in time; stopping it",
              (int)s->up_pid);
    s->up = UP_ABANDONED;
    kill(s->up_pid, SIGQUIT);
    proctitle_master(NULL);
}
