/*
 * test_supervisor.c - Check suite for src/master/supervisor.c: the restart
 * backoff, and the master cycle run for real (fork, crash loop, fatal
 * workers, graceful and fast stop, SIGTTIN/SIGTTOU, recycling, a stale
 * heartbeat, a kill refused for want of CAP_KILL, operator signals without
 * a command line) with a scripted worker_run defined here, which the
 * linker takes instead of the real worker's.
 *
 * No test depends on how fast the machine is: each waits for a condition
 * (a worker start reported through a pipe, a process count) with a bound
 * far above the nominal time, and what is timed is checked from below,
 * where the supervisor guarantees a minimum (a backoff delay, a heartbeat
 * limit), never from above, where a loaded machine (make distcheck -j)
 * adds any delay it likes.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "common/shm.h"
#include "common/log.h"
#include "master/respawn.h"
#include "master/supervisor.h"

/* ---- the scripted worker ---------------------------------------------- */

typedef enum worker_script {
    RUN_UNTIL_TERM, /* pause until SIGTERM/SIGQUIT (default dispositions) */
    EXIT_FATAL,     /* app cannot start */
    EXIT_CRASH,     /* exit(1) at once: a crash loop */
    IGNORE_TERM,    /* a stuck worker: reports SIGTERM, only SIGQUIT/SIGKILL stop it */
    EXIT_RECYCLED,  /* exit(EXIT_RECYCLE) after 50 ms: max_requests reached */
    NO_HEARTBEAT,   /* claims its shm slot, says ready, never beats again */
} worker_script;

/* What a worker reports through the pipe: one record per write (atomic,
 * being far below PIPE_BUF), so records from several workers never mix. */
typedef enum report_kind { REP_START, REP_GOT_TERM } report_kind;
typedef struct report {
    report_kind kind;
    int num;
    pid_t pid;
    double t; /* CLOCK_MONOTONIC, the clock the supervisor schedules with */
} report;

static worker_script script;
static int as_nobody;      /* workers switch to uid 65534 (the suite runs as root) */
static int master_no_kill; /* the master runs without CAP_KILL */
static int spawn_pipe[2] = {-1, -1};
static int log_pipe[2] = {-1, -1}; /* the master's error log (its stderr), at level info */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void send_report(report_kind kind, int num)
{
    report r = {.kind = kind, .num = num, .pid = getpid(), .t = now()};
    if (spawn_pipe[1] >= 0 && write(spawn_pipe[1], &r, sizeof r) != (ssize_t)sizeof r)
        _exit(9);
}

static int worker_num_for_term;

static void on_term(int signo)
{
    (void)signo;
    send_report(REP_GOT_TERM, worker_num_for_term);
}

/* The zygote's preload, never reached: these configs run built-in apps. */
int worker_preload(const pagid_config *cfg, char *err, size_t errlen);
int worker_preload(const pagid_config *cfg, char *err, size_t errlen)
{
    (void)cfg;
    snprintf(err, errlen, "not in this test");
    return -1;
}

void worker_preload_before_fork(void);
void worker_preload_before_fork(void)
{
}

int worker_run(const pagid_config *cfg, const worker_listener *l, size_t n, int num,
               int under_master, struct shm_region *shm, unsigned generation, int pubsub_fd,
               const worker_logs *logs)
{
    (void)logs;
    (void)cfg;
    (void)l;
    (void)n;
    (void)under_master;
    if (script == IGNORE_TERM) {
        /* Before reporting the start: a SIGTERM sent after the report is
         * always seen (and survived). */
        worker_num_for_term = num;
        signal(SIGTERM, on_term);
    }
    send_report(REP_START, num);
    if (as_nobody && (setgid(65534) < 0 || setuid(65534) < 0))
        _exit(8);
    /* Like the real worker: a slot, and ready once "lifespan startup" passed. */
    if (script != EXIT_FATAL) {
        shm_worker *w = shm_claim(shm, (int)getpid(), num, generation);
        if (w)
            atomic_store(&w->ready, 1);
    }
    switch (script) {
    case EXIT_FATAL:
        return EXIT_WORKER_FATAL;
    case EXIT_CRASH:
        return 1;
    case EXIT_RECYCLED:
        usleep(50000);
        return EXIT_RECYCLE;
    case NO_HEARTBEAT:
    case IGNORE_TERM:
    case RUN_UNTIL_TERM:
        for (;;)
            pause();
    }
    return 0;
}

/* ---- helpers ---------------------------------------------------------- */

/* Bounds for waiting on a condition: far above the nominal times (tens of
 * milliseconds), so only a broken supervisor reaches them. */
#define WAIT_S 10.0

static pagid_config cfg;
static listener_set ls;
static report reports[512];
static int n_reports;
static char log_text[65536];
static size_t log_len;

static void setup(void)
{
    log_open(NULL, LOG_LVL_ERROR);
    memset(&cfg, 0, sizeof cfg);
    cfg.timeouts.shutdown = 0.2;
    memset(&ls, 0, sizeof ls);
    n_reports = 0;
    as_nobody = master_no_kill = 0;
    log_len = 0;
    log_text[0] = '\0';
    ck_assert_int_eq(pipe(spawn_pipe), 0);
    ck_assert_int_eq(pipe2(log_pipe, O_NONBLOCK), 0);
}

static void teardown(void)
{
    close(spawn_pipe[0]);
    close(spawn_pipe[1]);
    spawn_pipe[0] = spawn_pipe[1] = -1;
    close(log_pipe[0]);
    close(log_pipe[1]);
    log_pipe[0] = log_pipe[1] = -1;
}

/* What a unit's CapabilityBoundingSet= without CAP_KILL leaves a root master. */
static int drop_cap_kill(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return -1;
    d[0].effective &= ~(1u << CAP_KILL);
    d[0].permitted &= ~(1u << CAP_KILL);
    return (int)syscall(SYS_capset, &h, d);
}

/* Run supervisor_run in a child (it installs handlers and blocks signals). */
static pid_t start_master(worker_script s, int nworkers)
{
    script = s;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (master_no_kill && drop_cap_kill() < 0)
            _exit(99);
        /* Non-blocking: a full pipe drops lines instead of stalling the master. */
        dup2(log_pipe[1], 2);
        log_set_level(LOG_LVL_INFO);
        _exit(supervisor_run(&cfg, &ls, nworkers, NULL));
    }
    return pid;
}

/* Append what the master logged so far to log_text; how many bytes came. */
static ssize_t read_log(void)
{
    ssize_t r = read(log_pipe[0], log_text + log_len, sizeof log_text - 1 - log_len);
    if (r > 0) {
        log_len += (size_t)r;
        log_text[log_len] = '\0';
    }
    return r;
}

/* Wait until the master logged a line containing what (at most WAIT_S). */
static int wait_log(const char *what)
{
    double end = now() + WAIT_S;
    for (;;) {
        ssize_t r = read_log();
        if (strstr(log_text, what))
            return 1;
        if (now() >= end || log_len == sizeof log_text - 1)
            return 0;
        if (r <= 0)
            usleep(10000);
    }
}

/* Wait for the master's exit, at most secs; its exit code or -1. */
static int wait_master(pid_t pid, double secs)
{
    double end = now() + secs;
    int status;
    while (now() < end) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* Read whatever reports arrived, waiting at most secs for the first one. */
static void collect(double secs)
{
    for (;;) {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(spawn_pipe[0], &rd);
        struct timeval tv = {(time_t)secs, (suseconds_t)((secs - (double)(time_t)secs) * 1e6)};
        if (select(spawn_pipe[0] + 1, &rd, NULL, NULL, &tv) <= 0)
            return;
        report r;
        if (read(spawn_pipe[0], &r, sizeof r) != (ssize_t)sizeof r)
            return;
        if (n_reports < (int)(sizeof reports / sizeof reports[0]))
            reports[n_reports++] = r;
        secs = 0;
    }
}

static int count(report_kind kind)
{
    int c = 0;
    for (int i = 0; i < n_reports; i++)
        c += reports[i].kind == kind;
    return c;
}

/* The i-th (0-based) report of a kind; NULL when there is none yet. */
static const report *nth(report_kind kind, int i)
{
    for (int k = 0; k < n_reports; k++)
        if (reports[k].kind == kind && i-- == 0)
            return &reports[k];
    return NULL;
}

/* Wait until n reports of kind arrived in total (at most secs); how many did. */
static int wait_reports(report_kind kind, int n, double secs)
{
    double end = now() + secs;
    collect(0);
    while (count(kind) < n && now() < end)
        collect(0.05);
    return count(kind);
}

static int wait_starts(int n)
{
    return wait_reports(REP_START, n, WAIT_S);
}

/* Live (not zombie) children of pid, read from /proc. */
static int children_of(pid_t pid)
{
    DIR *d = opendir("/proc");
    ck_assert_ptr_nonnull(d);
    int c = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        /* pid (comm) state ppid ...: comm may hold spaces and parentheses */
        char *rp = strrchr(buf, ')');
        char state;
        int ppid;
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == pid && state != 'Z')
            c++;
    }
    closedir(d);
    return c;
}

/* Wait until pid has n live children (at most WAIT_S); 1 when it did. */
static int wait_children(pid_t pid, int n)
{
    double end = now() + WAIT_S;
    while (children_of(pid) != n) {
        if (now() >= end)
            return 0;
        usleep(10000);
    }
    return 1;
}

/* Still running (not exited, not a zombie)? */
static int master_alive(pid_t pid)
{
    int status;
    return waitpid(pid, &status, WNOHANG) == 0;
}

/* ---- tests ------------------------------------------------------------ */

START_TEST(graceful_stop)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 3);
    ck_assert_int_eq(wait_starts(3), 3);
    ck_assert(wait_children(m, 3));
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_OK);
}
END_TEST

/*
 * Workers that ignore SIGTERM: a second SIGINT makes the drain a fast stop
 * (SIGQUIT) instead of waiting for timeouts.shutdown + grace. With a 30 s
 * shutdown the slow path takes at least 35 s, so a 20 s bound tells the two
 * apart whatever the load.
 */
START_TEST(drain_escalates_to_fast)
{
    cfg.timeouts.shutdown = 30;
    pid_t m = start_master(IGNORE_TERM, 2);
    ck_assert_int_eq(wait_starts(2), 2);
    kill(m, SIGTERM);
    /* Only once the master acted on SIGTERM (the workers got theirs) is a
     * SIGINT a second request rather than the same pending one. */
    ck_assert_int_eq(wait_reports(REP_GOT_TERM, 2, WAIT_S), 2);
    kill(m, SIGINT);
    ck_assert_int_eq(wait_master(m, 20), EXIT_OK);
}
END_TEST

START_TEST(fatal_not_respawned)
{
    pid_t m = start_master(EXIT_FATAL, 3);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_STARTUP);
    collect(0);
    ck_assert_int_eq(count(REP_START), 3);
}
END_TEST

/*
 * A crash loop backs off: the k-th restart in a row comes at least
 * respawn_backoff_ms(k) after the previous start (the delay counts from
 * the death, which follows the start). Checked from below only.
 */
START_TEST(crash_loop_backs_off)
{
    pid_t m = start_master(EXIT_CRASH, 1);
    ck_assert_int_eq(wait_reports(REP_START, 6, 30), 6);
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_OK);
    for (int k = 1; k < 6; k++) {
        double gap = nth(REP_START, k)->t - nth(REP_START, k - 1)->t;
        double min = respawn_backoff_ms((unsigned)k) / 1000.0;
        ck_assert_msg(gap >= min - 0.001,
                      "restart %d came %.3fs after the previous start, "
                      "before its %.3fs backoff",
                      k, gap, min);
    }
}
END_TEST

/* A killed worker is replaced, under the same number. */
START_TEST(kill9_replaced)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 1);
    ck_assert_int_eq(wait_starts(1), 1);
    const report *first = nth(REP_START, 0);
    ck_assert_int_eq(kill(first->pid, SIGKILL), 0);
    ck_assert_int_eq(wait_starts(2), 2);
    const report *second = nth(REP_START, 1);
    ck_assert_int_eq(second->num, first->num);
    ck_assert_int_ne(second->pid, first->pid);
    kill(m, SIGQUIT);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_OK);
}
END_TEST

/* SIGTTIN adds a worker, SIGTTOU drains one but never the last. Each
 * signal is sent only after the previous one took effect: two pending
 * signals of one kind would merge into one. */
START_TEST(ttin_ttou)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 2);
    ck_assert_int_eq(wait_starts(2), 2);
    ck_assert(wait_children(m, 2));
    /* SIGTTIN applies to the serving generation: there is one once ready. */
    ck_assert(wait_log("all workers ready"));
    kill(m, SIGTTIN);
    ck_assert_int_eq(wait_starts(3), 3);
    ck_assert(wait_children(m, 3));
    kill(m, SIGTTOU);
    ck_assert(wait_children(m, 2));
    kill(m, SIGTTOU);
    ck_assert(wait_children(m, 1));
    kill(m, SIGTTOU); /* refused: one left */
    usleep(300000);
    ck_assert_int_eq(children_of(m), 1);
    collect(0);
    ck_assert_int_eq(count(REP_START), 3); /* drained workers are not replaced */
    kill(m, SIGTTIN);
    ck_assert_int_eq(wait_starts(4), 4);
    ck_assert(wait_children(m, 2));
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_OK);
}
END_TEST

/*
 * A recycled worker (max_requests) is replaced at once: no crash backoff,
 * although each lives only 50 ms. Treated as crashes, the ninth start could
 * not come before 0.1 + 0.2 + 0.4 + 0.8 + 1.6 + 3.2 + 6.4 = 12.7 s; without
 * backoff it comes after about half a second.
 */
START_TEST(recycle_respawns_at_once)
{
    pid_t m = start_master(EXIT_RECYCLED, 1);
    double t0 = now();
    int n = wait_reports(REP_START, 9, 12.0);
    double took = now() - t0;
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_OK);
    ck_assert_msg(n >= 9, "%d starts in %.1fs: recycling backed off like a crash", n, took);
}
END_TEST

/* A worker whose heartbeat goes stale is killed and replaced; never before
 * its heartbeat is timeouts.heartbeat old. */
START_TEST(stale_heartbeat_killed)
{
    cfg.timeouts.heartbeat = 0.3;
    pid_t m = start_master(NO_HEARTBEAT, 1);
    ck_assert_int_eq(wait_reports(REP_START, 3, 30), 3);
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_OK);
    for (int k = 1; k < 3; k++) {
        double gap = nth(REP_START, k)->t - nth(REP_START, k - 1)->t;
        ck_assert_msg(gap >= 0.3 - 0.001, "killed %.3fs after its start (heartbeat 0.3s)", gap);
    }
}
END_TEST

/*
 * A master without CAP_KILL cannot kill a worker that switched to another
 * user: the stale heartbeat's SIGKILL fails with EPERM, which is logged
 * once, loudly, with the cause (and retried quietly).
 */
START_TEST(kill_refused_logged_once)
{
    if (geteuid() != 0)
        return; /* needs a worker of another user */
    cfg.timeouts.heartbeat = 0.3;
    as_nobody = master_no_kill = 1;
    pid_t m = start_master(NO_HEARTBEAT, 1);
    ck_assert_int_eq(wait_starts(1), 1);
    ck_assert(wait_log("cannot send SIGKILL to worker 1"));
    ck_assert(wait_log("Operation not permitted: the master lacks CAP_KILL"));
    usleep(1000000); /* four more ticks: retried, not logged again */
    while (read_log() > 0)
        ;
    int lines = 0;
    for (const char *p = log_text; (p = strstr(p, "cannot send SIGKILL")); p++)
        lines++;
    ck_assert_int_eq(lines, 1);
    ck_assert(master_alive(m));
    kill(m, SIGKILL);
    waitpid(m, NULL, 0);
    collect(0);
    for (int i = 0; i < n_reports; i++)
        kill(reports[i].pid, SIGKILL);
}
END_TEST

/* Without a command line (tests, embedders) SIGHUP and SIGUSR2 are refused, harmlessly. */
START_TEST(hup_usr2_without_opts)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 1);
    ck_assert_int_eq(wait_starts(1), 1);
    kill(m, SIGHUP);
    kill(m, SIGUSR2);
    kill(m, SIGUSR1);
    usleep(300000);
    collect(0);
    ck_assert_int_eq(count(REP_START), 1);
    ck_assert(master_alive(m));
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, WAIT_S), EXIT_OK);
}
END_TEST

static Suite *supervisor_suite(void)
{
    Suite *s = suite_create("supervisor");
    TCase *b = tcase_create("backoff");
    suite_add_tcase(s, b);
    TCase *c = tcase_create("cycle");
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_set_timeout(c, 60);
    tcase_add_test(c, graceful_stop);
    tcase_add_test(c, drain_escalates_to_fast);
    tcase_add_test(c, fatal_not_respawned);
    tcase_add_test(c, crash_loop_backs_off);
    tcase_add_test(c, kill9_replaced);
    tcase_add_test(c, ttin_ttou);
    tcase_add_test(c, recycle_respawns_at_once);
    tcase_add_test(c, stale_heartbeat_killed);
    tcase_add_test(c, hup_usr2_without_opts);
    tcase_add_test(c, kill_refused_logged_once);
    suite_add_tcase(s, c);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(supervisor_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
