/*
 * test_supervisor.c - Check suite for src/master/supervisor.c: the restart
 * backoff, and the master cycle run for real (fork, crash loop, fatal
 * workers, graceful and fast stop, SIGTTIN/SIGTTOU, recycling, a stale
 * heartbeat, operator signals without a command line) with a scripted
 * worker_run defined here,
 * which the linker takes instead of the real worker's.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "common/shm.h"
#include "common/log.h"
#include "master/supervisor.h"

/* ---- the scripted worker ---------------------------------------------- */

typedef enum worker_script {
    RUN_UNTIL_TERM, /* pause until SIGTERM/SIGQUIT (default dispositions) */
    EXIT_FATAL,     /* app cannot start */
    EXIT_CRASH,     /* exit(1) at once: a crash loop */
    IGNORE_TERM,    /* a stuck worker: only SIGQUIT/SIGKILL stop it */
    EXIT_RECYCLED,  /* exit(EXIT_RECYCLE) after 0.2 s: max_requests reached */
    NO_HEARTBEAT,   /* claims its shm slot, says ready, never beats again */
} worker_script;

static worker_script script;
static int spawn_pipe[2] = {-1, -1}; /* each worker writes its number here */

int worker_run(const pagid_config *cfg, const worker_listener *l, size_t n, int num,
               int under_master, struct shm_region *shm, unsigned generation)
{
    char b = (char)num;
    if (spawn_pipe[1] >= 0 && write(spawn_pipe[1], &b, 1) != 1)
        return 9;
    /* Like the real worker: a slot, and ready once "lifespan startup" passed. */
    if (script != EXIT_FATAL && script != NO_HEARTBEAT) {
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
        usleep(200000);
        return EXIT_RECYCLE;
    case NO_HEARTBEAT: {
        shm_worker *w = shm_claim(shm, (int)getpid(), num, generation);
        if (w)
            atomic_store(&w->ready, 1);
        for (;;)
            pause();
    }
    case IGNORE_TERM:
        signal(SIGTERM, SIG_IGN);
        /* fall through */
    case RUN_UNTIL_TERM:
        for (;;)
            pause();
    }
    return 0;
}

/* ---- helpers ---------------------------------------------------------- */

static pagid_config cfg;
static listener_set ls;

static void setup(void)
{
    log_open(NULL, LOG_LVL_ERROR);
    memset(&cfg, 0, sizeof cfg);
    cfg.timeouts.shutdown = 0.2;
    memset(&ls, 0, sizeof ls);
    ck_assert_int_eq(pipe(spawn_pipe), 0);
}

static void teardown(void)
{
    close(spawn_pipe[0]);
    close(spawn_pipe[1]);
    spawn_pipe[0] = spawn_pipe[1] = -1;
}

/* Run supervisor_run in a child (it installs handlers and blocks signals). */
static pid_t start_master(worker_script s, int nworkers)
{
    script = s;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(supervisor_run(&cfg, &ls, nworkers, NULL));
    return pid;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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

/* Number of worker starts reported so far (non-blocking read). */
static int spawns(void)
{
    int n = 0;
    char buf[256];
    ssize_t r;
    for (;;) {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(spawn_pipe[0], &rd);
        struct timeval tv = {0, 0};
        if (select(spawn_pipe[0] + 1, &rd, NULL, NULL, &tv) <= 0)
            break;
        r = read(spawn_pipe[0], buf, sizeof buf);
        if (r <= 0)
            break;
        n += (int)r;
    }
    return n;
}

/* ---- tests ------------------------------------------------------------ */

START_TEST(backoff_sequence)
{
    ck_assert_uint_eq(supervisor_backoff_ms(0), 0);
    ck_assert_uint_eq(supervisor_backoff_ms(1), 0);
    ck_assert_uint_eq(supervisor_backoff_ms(2), 100);
    ck_assert_uint_eq(supervisor_backoff_ms(3), 200);
    ck_assert_uint_eq(supervisor_backoff_ms(4), 400);
    ck_assert_uint_eq(supervisor_backoff_ms(8), 6400);
    ck_assert_uint_eq(supervisor_backoff_ms(9), 10000);
    ck_assert_uint_eq(supervisor_backoff_ms(1000000), 10000);
}
END_TEST

START_TEST(graceful_stop)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 3);
    usleep(200000);
    ck_assert_int_eq(spawns(), 3);
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
}
END_TEST

/* Workers that ignore SIGTERM are killed after timeouts.shutdown + grace. */
START_TEST(drain_escalates_to_fast)
{
    pid_t m = start_master(IGNORE_TERM, 2);
    usleep(200000);
    kill(m, SIGTERM);
    usleep(100000);
    double t0 = now();
    kill(m, SIGINT); /* second request: fast stop, SIGQUIT kills them */
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
    ck_assert(now() - t0 < 1.0);
}
END_TEST

START_TEST(fatal_not_respawned)
{
    pid_t m = start_master(EXIT_FATAL, 3);
    ck_assert_int_eq(wait_master(m, 3), EXIT_STARTUP);
    ck_assert_int_eq(spawns(), 3);
}
END_TEST

/* Starts at 0, 0, +100, +200, +400 ms: five within ~0.7 s, not six before 1.5 s. */
START_TEST(crash_loop_backs_off)
{
    pid_t m = start_master(EXIT_CRASH, 1);
    usleep(1100000);
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
    int n = spawns();
    ck_assert_int_ge(n, 5);
    ck_assert_int_le(n, 6);
}
END_TEST

/* A killed worker is replaced at once, under the same number. */
START_TEST(kill9_replaced_fast)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 1);
    usleep(200000);
    ck_assert_int_eq(spawns(), 1);
    char path[64], buf[64] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)m, (int)m);
    FILE *f = fopen(path, "r");
    if (f) {
        ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
        fclose(f);
        pid_t w = (pid_t)atoi(buf);
        double t0 = now();
        kill(w, SIGKILL);
        while (spawns() == 0 && now() - t0 < 1.0)
            usleep(1000);
        ck_assert(now() - t0 < 0.5);
    }
    kill(m, SIGQUIT);
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
}
END_TEST

/* SIGTTIN adds a worker, SIGTTOU drains one but never the last. */
START_TEST(ttin_ttou)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 2);
    usleep(200000);
    ck_assert_int_eq(spawns(), 2);
    kill(m, SIGTTIN);
    usleep(200000);
    ck_assert_int_eq(spawns(), 1);
    kill(m, SIGTTOU);
    usleep(100000);
    kill(m, SIGTTOU);
    usleep(100000);
    kill(m, SIGTTOU); /* refused: one left */
    usleep(200000);
    ck_assert_int_eq(spawns(), 0); /* drained workers are not replaced */
    kill(m, SIGTTIN);
    usleep(200000);
    ck_assert_int_eq(spawns(), 1);
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
}
END_TEST

/* A recycled worker (max_requests) is replaced at once: no crash backoff. */
START_TEST(recycle_respawns_at_once)
{
    pid_t m = start_master(EXIT_RECYCLED, 1);
    usleep(1100000);
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
    /* every 0.2 s: starts at 0, .2, .4, .6, .8, 1.0; the crash backoff
     * (+100, +200, +400 ms) would allow 4 */
    int n = spawns();
    ck_assert_int_ge(n, 5);
    ck_assert_int_le(n, 7);
}
END_TEST

/* A worker whose heartbeat goes stale is killed and replaced. */
START_TEST(stale_heartbeat_killed)
{
    cfg.timeouts.heartbeat = 0.3;
    pid_t m = start_master(NO_HEARTBEAT, 1);
    usleep(1500000);
    int n = spawns();
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
    /* 0.3 s stale + up to a 0.25 s tick: a few generations of it in 1.5 s */
    ck_assert_int_ge(n, 2);
    ck_assert_int_le(n, 5);
}
END_TEST

/* Without a command line (tests, embedders) SIGHUP and SIGUSR2 are refused, harmlessly. */
START_TEST(hup_usr2_without_opts)
{
    pid_t m = start_master(RUN_UNTIL_TERM, 1);
    usleep(200000);
    kill(m, SIGHUP);
    kill(m, SIGUSR2);
    kill(m, SIGUSR1);
    usleep(200000);
    ck_assert_int_eq(spawns(), 1);
    kill(m, SIGTERM);
    ck_assert_int_eq(wait_master(m, 3), EXIT_OK);
}
END_TEST

static Suite *supervisor_suite(void)
{
    Suite *s = suite_create("supervisor");
    TCase *b = tcase_create("backoff");
    tcase_add_test(b, backoff_sequence);
    suite_add_tcase(s, b);
    TCase *c = tcase_create("cycle");
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_set_timeout(c, 10);
    tcase_add_test(c, graceful_stop);
    tcase_add_test(c, drain_escalates_to_fast);
    tcase_add_test(c, fatal_not_respawned);
    tcase_add_test(c, crash_loop_backs_off);
    tcase_add_test(c, kill9_replaced_fast);
    tcase_add_test(c, ttin_ttou);
    tcase_add_test(c, recycle_respawns_at_once);
    tcase_add_test(c, stale_heartbeat_killed);
    tcase_add_test(c, hup_usr2_without_opts);
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
