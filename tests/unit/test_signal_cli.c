/*
 * test_signal_cli.c - Check suite for src/master/signal_cli.c: the signal
 * names, every pid file check (missing, garbage, pid 0/1, stale, not a
 * pagid), refusing a reload of an invalid config, and the -s upgrade wait
 * both as a pure step and against a fake master that plays the pid-file
 * dance of upgrade.c.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "master/signal_cli.h"

static char dir[64];
static char pid_path[128], oldbin_path[160], conf_path[128];
static char *out_text, *err_text;

static void setup(void)
{
    strcpy(dir, "/tmp/pagid-sigcli-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(pid_path, sizeof pid_path, "%s/pagid.pid", dir);
    snprintf(oldbin_path, sizeof oldbin_path, "%s/pagid.pid.oldbin", dir);
    snprintf(conf_path, sizeof conf_path, "%s/pagid.yaml", dir);
}

static void teardown(void)
{
    unlink(pid_path);
    unlink(oldbin_path);
    unlink(conf_path);
    rmdir(dir);
    free(out_text);
    free(err_text);
    out_text = err_text = NULL;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_pid(const char *path, long pid)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%ld\n", pid);
    write_text(path, buf);
}

/* pagid -s NAME -c conf_path, with stdout and stderr captured. */
static int run(const char *name)
{
    char *argv[] = {"pagid", "-s", (char *)name, "-c", conf_path, NULL};
    cli_options o;
    ck_assert_int_eq(cli_parse(5, argv, &o, stderr), 0);
    size_t len;
    free(out_text);
    free(err_text);
    FILE *out = open_memstream(&out_text, &len), *err = open_memstream(&err_text, &len);
    int rc = signal_cli_run(&o, out, err);
    fclose(out);
    fclose(err);
    cli_options_free(&o);
    return rc;
}

static void use_config(const char *extra)
{
    char text[512];
    snprintf(text, sizeof text, "pid_file: %s\napp: hello\n%s", pid_path, extra);
    write_text(conf_path, text);
}

/*
 * A fake master: a child of ours (same comm) that reports each signal it
 * gets on a pipe. On SIGUSR2 it plays upgrade.c: rename the pid file to
 * .oldbin, then either hand over (the pid file names a live process, our
 * test process standing in for the new master, and .oldbin goes) or fail
 * (.oldbin renamed back).
 */
typedef struct fake {
    pid_t pid;
    int rd;
} fake;

static fake start_fake(int upgrade_succeeds)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGHUP, SIGUSR1, SIGTERM, SIGQUIT, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&set, sigs[i]);
    sigset_t saved;
    sigprocmask(SIG_BLOCK, &set, &saved);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        for (;;) {
            int sig;
            if (sigwait(&set, &sig) != 0)
                _exit(1);
            unsigned char b = (unsigned char)sig;
            if (write(p[1], &b, 1) != 1)
                _exit(1);
            if (sig != SIGUSR2)
                continue;
            struct timespec ts = {0, 50 * 1000 * 1000};
            rename(pid_path, oldbin_path);
            nanosleep(&ts, NULL);
            if (upgrade_succeeds) {
                write_pid(pid_path, (long)getppid()); /* the "new master" */
                nanosleep(&ts, NULL);
                unlink(oldbin_path);
            } else {
                rename(oldbin_path, pid_path);
            }
        }
    }
    sigprocmask(SIG_SETMASK, &saved, NULL);
    close(p[1]);
    write_pid(pid_path, (long)pid);
    return (fake){pid, p[0]};
}

/* The next signal the fake got (waits up to 5 s), or 0. */
static int fake_got(fake *f)
{
    struct timeval tv = {5, 0};
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(f->rd, &rd);
    unsigned char b = 0;
    if (select(f->rd + 1, &rd, NULL, NULL, &tv) == 1 && read(f->rd, &b, 1) == 1)
        return b;
    return 0;
}

static void stop_fake(fake *f)
{
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
    close(f->rd);
}

/* ---- names ---------------------------------------------------------------- */

START_TEST(test_names_map_by_meaning)
{
    ck_assert_int_eq(signal_cli_signo("reload"), SIGHUP);
    ck_assert_int_eq(signal_cli_signo("reopen"), SIGUSR1);
    ck_assert_int_eq(signal_cli_signo("quit"), SIGTERM); /* graceful: pagid drains on TERM */
    ck_assert_int_eq(signal_cli_signo("stop"), SIGQUIT); /* fast: pagid stops at once on QUIT */
    ck_assert_int_eq(signal_cli_signo("upgrade"), SIGUSR2);
    ck_assert_int_eq(signal_cli_signo("HUP"), -1);
    ck_assert_int_eq(signal_cli_signo(""), -1);
    ck_assert_int_eq(signal_cli_signo(NULL), -1);
}
END_TEST

/* ---- delivering ----------------------------------------------------------- */

START_TEST(test_each_signal_delivered)
{
    use_config("");
    fake f = start_fake(1);
    static const char *const names[] = {"reload", "reopen", "quit", "stop"};
    static const int sigs[] = {SIGHUP, SIGUSR1, SIGTERM, SIGQUIT};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(run(names[i]), EXIT_OK);
        ck_assert_str_eq(err_text, "");
        ck_assert_int_eq(fake_got(&f), sigs[i]);
    }
    stop_fake(&f);
}
END_TEST

START_TEST(test_pid_file_checks)
{
    use_config("");
    char want[512];

    ck_assert_int_eq(run("reload"), EXIT_NOT_RUNNING);
    snprintf(want, sizeof want, "pagid: %s does not exist: is pagid running?\n", pid_path);
    ck_assert_str_eq(err_text, want);

    static const char *const garbage[] = {
        "", "\n", "abc\n", "12 13\n", "-5\n", "+7\n", "99999999999\n", "1234\n\n", " 42\n"};
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        write_text(pid_path, garbage[i]);
        ck_assert_int_eq(run("reload"), EXIT_SIGNAL);
        snprintf(want, sizeof want, "pagid: %s does not hold a pid\n", pid_path);
        ck_assert_str_eq(err_text, want);
    }
    for (long pid = 0; pid <= 1; pid++) {
        write_pid(pid_path, pid);
        ck_assert_int_eq(run("stop"), EXIT_SIGNAL);
        snprintf(want, sizeof want, "pagid: %s holds pid %ld; refusing to signal it\n", pid_path,
                 pid);
        ck_assert_str_eq(err_text, want);
    }

    /* Stale: a child that has exited and been reaped. */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    write_pid(pid_path, (long)dead);
    ck_assert_int_eq(run("reload"), EXIT_NOT_RUNNING);
    snprintf(want, sizeof want, "pagid: %s names pid %d, which is not running (stale pid file)\n",
             pid_path, (int)dead);
    ck_assert_str_eq(err_text, want);

    /* A zombie is not a master either. */
    pid_t zombie = fork();
    if (zombie == 0)
        _exit(0);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    write_pid(pid_path, (long)zombie);
    ck_assert_int_eq(run("reload"), EXIT_NOT_RUNNING);
    waitpid(zombie, NULL, 0);

    /* Another program at that pid (the number was reused): not signalled. */
    pid_t other = fork();
    if (other == 0) {
        execlp("sleep", "sleep", "10", (char *)NULL);
        _exit(127);
    }
    /* Wait for the exec (not a fixed nap: a loaded machine takes longer),
     * else the child still has our own name. */
    char comm_path[64], comm[32] = "";
    snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)other);
    for (int i = 0; i < 500 && strncmp(comm, "sleep", 5) != 0; i++) {
        FILE *f = fopen(comm_path, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = '\0';
            fclose(f);
        }
        if (strncmp(comm, "sleep", 5) != 0)
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    write_pid(pid_path, (long)other);
    ck_assert_int_eq(run("stop"), EXIT_NOT_RUNNING);
    ck_assert_msg(strstr(err_text, "which is 'sleep', not "), "%s", err_text);
    ck_assert_int_eq(waitpid(other, NULL, WNOHANG), 0); /* still alive: not signalled */
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
}
END_TEST

START_TEST(test_config_needs_pid_file)
{
    write_text(conf_path, "app: hello\n");
    ck_assert_int_eq(run("reload"), EXIT_CONFIG);
    ck_assert_str_eq(err_text, "pagid: -s reload finds the master through its pid file: the "
                               "configuration sets no pid_file\n");
    char *argv[] = {"pagid", "-s", "quit", NULL};
    cli_options o;
    ck_assert_int_eq(cli_parse(3, argv, &o, stderr), 0);
    size_t len;
    free(out_text);
    free(err_text);
    FILE *err = open_memstream(&err_text, &len), *out = open_memstream(&out_text, &len);
    ck_assert_int_eq(signal_cli_run(&o, out, err), EXIT_CONFIG);
    fclose(err);
    fclose(out);
    cli_options_free(&o);
    ck_assert_msg(strstr(err_text, "give -c FILE"), "%s", err_text);
}
END_TEST

START_TEST(test_invalid_config_not_reloaded)
{
    use_config("bogus_key: 1\n");
    fake f = start_fake(1);
    ck_assert_int_eq(run("reload"), EXIT_CONFIG);
    ck_assert_msg(strstr(err_text, ":3:1: unknown key 'bogus_key'"), "%s", err_text);
    ck_assert_msg(strstr(err_text, "pagid: invalid configuration: not sending reload\n"), "%s",
                  err_text);
    ck_assert_int_eq(run("upgrade"), EXIT_CONFIG);
    /* Stopping still works with a broken file, with a warning. */
    ck_assert_int_eq(run("quit"), EXIT_OK);
    ck_assert_msg(strstr(err_text, "warning: the configuration has 1 error"), "%s", err_text);
    ck_assert_int_eq(fake_got(&f), SIGTERM); /* the first signal it saw */
    stop_fake(&f);
}
END_TEST

/* ---- upgrade -------------------------------------------------------------- */

START_TEST(test_upgrade_waits_for_handover)
{
    use_config("");
    fake f = start_fake(1);
    ck_assert_int_eq(run("upgrade"), EXIT_OK);
    ck_assert_int_eq(fake_got(&f), SIGUSR2);
    char want[256];
    snprintf(want, sizeof want,
             "pagid: upgraded: the new master (pid %d) serves; the old one (pid %d) drains and "
             "exits\n",
             (int)getpid(), (int)f.pid);
    ck_assert_str_eq(out_text, want);
    ck_assert_int_eq(access(oldbin_path, F_OK), -1); /* it returned after the handover */
    stop_fake(&f);
}
END_TEST

START_TEST(test_upgrade_failure_reported)
{
    use_config("");
    fake f = start_fake(0);
    ck_assert_int_eq(run("upgrade"), EXIT_SIGNAL);
    ck_assert_msg(strstr(err_text, "pagid: upgrade failed: the new master did not take over; "
                                   "the old master (pid "),
                  "%s", err_text);
    ck_assert_str_eq(out_text, "");
    stop_fake(&f);
}
END_TEST

START_TEST(test_upgrade_refused_while_one_runs)
{
    use_config("");
    fake f = start_fake(1);
    write_pid(oldbin_path, (long)f.pid); /* an earlier upgrade has not handed over yet */
    ck_assert_int_eq(run("upgrade"), EXIT_SIGNAL);
    ck_assert_msg(strstr(err_text, "an upgrade is in progress"), "%s", err_text);
    kill(f.pid, SIGHUP); /* the fake got nothing before this */
    ck_assert_int_eq(fake_got(&f), SIGHUP);
    stop_fake(&f);
}
END_TEST

START_TEST(test_upgrade_step)
{
    upgrade_watch w = {.old = 100, .start_grace = 5, .deadline = 60};
    /* Before the master acted: the pid file still names it, no .oldbin. */
    upgrade_view v = {.old_alive = 1, .current = 100, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 0.1), UPGRADE_WAIT);
    /* Renamed; the new master has not written its pid yet. */
    v = (upgrade_view){.old_alive = 1, .oldbin_is_old = 1, .current = 0};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 0.2), UPGRADE_WAIT);
    ck_assert_int_eq(w.started, 1);
    /* The new master wrote its pid, not ready yet. */
    v = (upgrade_view){.old_alive = 1, .oldbin_is_old = 1, .current = 200, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 1), UPGRADE_WAIT);
    /* Handed over: .oldbin gone, the pid file names the live new master. */
    v = (upgrade_view){.old_alive = 1, .current = 200, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 2), UPGRADE_DONE);

    /* Renamed back: failed. */
    w = (upgrade_watch){.old = 100, .start_grace = 5, .deadline = 60, .started = 1};
    v = (upgrade_view){.old_alive = 1, .current = 100, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 3), UPGRADE_FAILED);
    ck_assert_msg(strstr(w.why, "did not take over"), "%s", w.why);

    /* Renamed away and back between two looks (an upgrade that failed in a
     * few ms): .oldbin was never seen, but the pid file moved. */
    w = (upgrade_watch){.old = 100, .start_grace = 5, .deadline = 60};
    v = (upgrade_view){.old_alive = 1, .current = 100, .current_alive = 1, .pidfile_moved = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 0.05), UPGRADE_FAILED);
    ck_assert_msg(strstr(w.why, "did not take over"), "%s", w.why);

    /* A new pid that is not alive is no success. */
    w = (upgrade_watch){.old = 100, .start_grace = 5, .deadline = 60, .started = 1};
    v = (upgrade_view){.old_alive = 1, .current = 200, .current_alive = 0};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 3), UPGRADE_WAIT);

    /* Never started (refused, or -w 0): failed after the grace, not before. */
    w = (upgrade_watch){.old = 100, .start_grace = 5, .deadline = 60};
    v = (upgrade_view){.old_alive = 1, .current = 100, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 4.9), UPGRADE_WAIT);
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 5), UPGRADE_FAILED);
    ck_assert_msg(strstr(w.why, "did not start an upgrade"), "%s", w.why);

    /* A new master that is ready at once: done even without seeing .oldbin. */
    w = (upgrade_watch){.old = 100, .start_grace = 5, .deadline = 60};
    v = (upgrade_view){.old_alive = 1, .current = 200, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 0.5), UPGRADE_DONE);

    /* Stuck starting: the deadline. */
    w = (upgrade_watch){.old = 100, .start_grace = 5, .deadline = 60};
    v = (upgrade_view){.old_alive = 1, .oldbin_is_old = 1, .current = 200, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 59), UPGRADE_WAIT);
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 60), UPGRADE_FAILED);
    ck_assert_msg(strstr(w.why, "within 60s"), "%s", w.why);

    /* The old master gone: fine if a new one serves, a failure otherwise. */
    w = (upgrade_watch){.old = 100, .start_grace = 5, .deadline = 60};
    v = (upgrade_view){.old_alive = 0, .current = 200, .current_alive = 1};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 10), UPGRADE_DONE);
    v = (upgrade_view){.old_alive = 0, .oldbin_is_old = 1, .current = 0};
    ck_assert_int_eq(upgrade_watch_step(&w, &v, 10), UPGRADE_FAILED);
    ck_assert_msg(strstr(w.why, "exited"), "%s", w.why);
}
END_TEST

static Suite *signal_cli_suite(void)
{
    Suite *s = suite_create("signal_cli");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_names_map_by_meaning);
    tcase_add_test(tc, test_each_signal_delivered);
    tcase_add_test(tc, test_pid_file_checks);
    tcase_add_test(tc, test_config_needs_pid_file);
    tcase_add_test(tc, test_invalid_config_not_reloaded);
    tcase_add_test(tc, test_upgrade_waits_for_handover);
    tcase_add_test(tc, test_upgrade_failure_reported);
    tcase_add_test(tc, test_upgrade_refused_while_one_runs);
    tcase_add_test(tc, test_upgrade_step);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(signal_cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
