/*
 * test_shdict.c - Check suite for src/common/shdict.c and shdict_heap.c:
 * every operation against a model, TTL, LRU eviction and the counted
 * "full", exact increments from several processes, and children killed
 * holding the lock (at each stage of a write, and at random) after which
 * the parent repairs and every invariant holds.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/shdict.h"

#define S(x) x, strlen(x)

static void assert_sane(shdict *d)
{
    char why[256] = "";
    int rc = shdict_check(d, why, sizeof why);
    ck_assert_msg(rc == 0, "invariant: %s", why);
}

static int get_str(shdict *d, const char *key, char *out, size_t cap)
{
    size_t len = 0;
    int rc = pagi_shared_get(d, key, strlen(key), out, cap - 1, &len, NULL);
    if (rc == 0)
        out[len < cap - 1 ? len : cap - 1] = 0;
    return rc;
}

START_TEST(test_basic)
{
    shdict *d = shdict_create("t", 256 * 1024);
    ck_assert_ptr_nonnull(d);
    char v[64];
    uint32_t flags = 0;
    size_t len = 0;
    ck_assert_int_eq(get_str(d, "a", v, sizeof v), PAGI_SHARED_NOT_FOUND);
    ck_assert_int_eq(pagi_shared_set(d, S("a"), S("one"), 0, 7), 0);
    ck_assert_int_eq(pagi_shared_get(d, S("a"), v, sizeof v, &len, &flags), 0);
    ck_assert_uint_eq(len, 3);
    ck_assert_uint_eq(flags, 7);
    ck_assert_int_eq(memcmp(v, "one", 3), 0);
    /* Too small a buffer: cut short, the full length reported. */
    ck_assert_int_eq(pagi_shared_get(d, S("a"), v, 1, &len, NULL), 0);
    ck_assert_uint_eq(len, 3);
    ck_assert_int_eq(pagi_shared_add(d, S("a"), S("two"), 0, 0), PAGI_SHARED_EXISTS);
    ck_assert_int_eq(pagi_shared_replace(d, S("b"), S("two"), 0, 0), PAGI_SHARED_NOT_FOUND);
    ck_assert_int_eq(pagi_shared_replace(d, S("a"), S("three"), 0, 0), 0);
    ck_assert_int_eq(get_str(d, "a", v, sizeof v), 0);
    ck_assert_str_eq(v, "three");
    ck_assert_int_eq(pagi_shared_add(d, S("b"), "", 0, 0, 0), 0); /* empty value */
    ck_assert_int_eq(pagi_shared_get(d, S("b"), v, sizeof v, &len, NULL), 0);
    ck_assert_uint_eq(len, 0);
    ck_assert_uint_eq(pagi_shared_count(d), 2);
    ck_assert_int_eq(pagi_shared_delete(d, S("a")), 0);
    ck_assert_int_eq(pagi_shared_delete(d, S("a")), PAGI_SHARED_NOT_FOUND);
    /* Keys are bytes: NUL inside is part of the key. */
    ck_assert_int_eq(pagi_shared_set(d, "k\0x", 3, "1", 1, 0, 0), 0);
    ck_assert_int_eq(pagi_shared_get(d, "k", 1, v, sizeof v, &len, NULL), PAGI_SHARED_NOT_FOUND);
    ck_assert_int_eq(pagi_shared_set(d, "", 0, "1", 1, 0, 0), PAGI_SHARED_INVALID);
    ck_assert_int_eq(pagi_shared_set(NULL, S("a"), "1", 1, 0, 0), PAGI_SHARED_INVALID);
    ck_assert_str_eq(pagi_shared_strerror(PAGI_SHARED_FULL), "no memory");
    assert_sane(d);
    pagi_shared_flush_all(d);
    ck_assert_uint_eq(pagi_shared_count(d), 0);
    ck_assert_uint_eq(pagi_shared_free_space(d), pagi_shared_capacity(d));
    assert_sane(d);
    shdict_destroy(d);
}
END_TEST

START_TEST(test_incr_cas)
{
    shdict *d = shdict_create("t", 64 * 1024);
    int64_t out = 0, zero = 0;
    char v[64];
    ck_assert_int_eq(pagi_shared_incr(d, S("n"), 1, NULL, 0, &out), PAGI_SHARED_NOT_FOUND);
    ck_assert_int_eq(pagi_shared_incr(d, S("n"), 5, &zero, 0, &out), 0);
    ck_assert_int_eq(out, 5);
    ck_assert_int_eq(pagi_shared_incr(d, S("n"), -7, NULL, 0, &out), 0);
    ck_assert_int_eq(out, -2);
    ck_assert_int_eq(get_str(d, "n", v, sizeof v), 0);
    ck_assert_str_eq(v, "-2");
    /* Decimal text counts as a number, and keeps its flags. */
    ck_assert_int_eq(pagi_shared_set(d, S("t"), S("41"), 0, 9), 0);
    ck_assert_int_eq(pagi_shared_incr(d, S("t"), 1, NULL, 0, &out), 0);
    ck_assert_int_eq(out, 42);
    uint32_t flags = 0;
    size_t len;
    ck_assert_int_eq(pagi_shared_get(d, S("t"), v, sizeof v, &len, &flags), 0);
    ck_assert_uint_eq(flags, 9);
    ck_assert_int_eq(pagi_shared_set(d, S("s"), S("4x"), 0, 0), 0);
    ck_assert_int_eq(pagi_shared_incr(d, S("s"), 1, NULL, 0, &out), PAGI_SHARED_NOT_NUMBER);
    ck_assert_int_eq(pagi_shared_set(d, S("s"), S(" 4"), 0, 0), 0);
    ck_assert_int_eq(pagi_shared_incr(d, S("s"), 1, NULL, 0, &out), PAGI_SHARED_NOT_NUMBER);
    ck_assert_int_eq(pagi_shared_set(d, S("m"), S("9223372036854775807"), 0, 0), 0);
    ck_assert_int_eq(pagi_shared_incr(d, S("m"), 1, NULL, 0, &out), PAGI_SHARED_OVERFLOW);
    /* cas: a counter compares as its text. */
    ck_assert_int_eq(pagi_shared_cas(d, S("n"), S("-3"), S("x"), 0, 0), PAGI_SHARED_MISMATCH);
    ck_assert_int_eq(pagi_shared_cas(d, S("n"), S("-2"), S("x"), 0, 0), 0);
    ck_assert_int_eq(get_str(d, "n", v, sizeof v), 0);
    ck_assert_str_eq(v, "x");
    ck_assert_int_eq(pagi_shared_cas(d, S("zz"), S("x"), S("y"), 0, 0), PAGI_SHARED_NOT_FOUND);
    assert_sane(d);
    shdict_destroy(d);
}
END_TEST

START_TEST(test_ttl)
{
    shdict *d = shdict_create("t", 64 * 1024);
    double ttl = -1;
    char v[16];
    ck_assert_int_eq(pagi_shared_set(d, S("a"), S("1"), 0.05, 0), 0);
    ck_assert_int_eq(pagi_shared_set(d, S("b"), S("1"), 0, 0), 0);
    ck_assert_int_eq(pagi_shared_ttl(d, S("a"), &ttl), 0);
    ck_assert(ttl > 0 && ttl <= 0.05);
    ck_assert_int_eq(pagi_shared_ttl(d, S("b"), &ttl), 0);
    ck_assert(ttl == 0);
    ck_assert_int_eq(pagi_shared_expire(d, S("b"), 0.05), 0);
    ck_assert_int_eq(pagi_shared_set(d, S("c"), S("1"), 0.05, 0), 0);
    ck_assert_int_eq(pagi_shared_expire(d, S("c"), 0), 0); /* never expires now */
    usleep(80 * 1000);
    ck_assert_int_eq(get_str(d, "a", v, sizeof v), PAGI_SHARED_NOT_FOUND);
    ck_assert_int_eq(pagi_shared_add(d, S("a"), S("2"), 0, 0), 0); /* expired: add works */
    ck_assert_int_eq(get_str(d, "c", v, sizeof v), 0);
    ck_assert_uint_eq(pagi_shared_count(d), 3); /* a (new), b (expired, not yet removed), c */
    ck_assert_uint_eq(pagi_shared_flush_expired(d, 0), 1);
    ck_assert_uint_eq(pagi_shared_count(d), 2);
    shdict_stats st;
    shdict_stats_get(d, &st);
    ck_assert_uint_eq(st.expired, 2);
    assert_sane(d);
    shdict_destroy(d);
}
END_TEST

START_TEST(test_eviction_full)
{
    shdict *d = shdict_create("t", 64 * 1024);
    char key[32], val[200], v[256];
    memset(val, 'v', sizeof val);
    ck_assert_int_eq(pagi_shared_set(d, S("hot"), val, sizeof val, 0, 0), 0);
    for (int i = 0; i < 2000; i++) {
        int n = snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(pagi_shared_set(d, key, (size_t)n, val, sizeof val, 0, 0), 0);
        if (i % 50 == 0) /* used often: stays while colder entries go */
            ck_assert_int_eq(get_str(d, "hot", v, sizeof v), 0);
    }
    shdict_stats st;
    shdict_stats_get(d, &st);
    ck_assert_uint_gt(st.evictions, 1000);
    ck_assert_uint_eq(st.full, 0);
    ck_assert_int_eq(get_str(d, "hot", v, sizeof v), 0);
    ck_assert_int_eq(get_str(d, "k0", v, sizeof v), PAGI_SHARED_NOT_FOUND);
    ck_assert_int_eq(get_str(d, "k1999", v, sizeof v), 0);
    assert_sane(d);
    /* safe_set and safe_add evict nothing live: "no memory", counted. */
    ck_assert_int_eq(pagi_shared_safe_set(d, S("new"), val, sizeof val, 0, 0), PAGI_SHARED_FULL);
    ck_assert_int_eq(pagi_shared_safe_add(d, S("new"), val, sizeof val, 0, 0), PAGI_SHARED_FULL);
    shdict_stats_get(d, &st);
    ck_assert_uint_eq(st.full, 2);
    /* Larger than half the arena: never fits, not counted as full. */
    static char big[40 * 1024];
    ck_assert_int_eq(pagi_shared_set(d, S("big"), big, sizeof big, 0, 0), PAGI_SHARED_TOO_LARGE);
    /* A value needing more evictions than one call may make: full. */
    pagi_shared_flush_all(d);
    for (int i = 0; pagi_shared_free_space(d) > 200; i++) {
        int n = snprintf(key, sizeof key, "s%d", i);
        ck_assert_int_eq(pagi_shared_set(d, key, (size_t)n, "1", 1, 0, 0), 0);
    }
    static char mid[30 * 1024];
    ck_assert_int_eq(pagi_shared_set(d, S("mid"), mid, sizeof mid, 0, 0), PAGI_SHARED_FULL);
    shdict_stats_get(d, &st);
    ck_assert_uint_eq(st.full, 3);
    assert_sane(d);
    shdict_destroy(d);
}
END_TEST

/* Random operations against a model of 64 keys; invariants checked as it goes. */
START_TEST(test_model)
{
    shdict *d = shdict_create("t", 1024 * 1024);
    enum { K = 64 };
    char model[K][300];
    int present[K] = {0};
    unsigned seed = 12345;
    char key[16], val[300], got[400];
    for (int step = 0; step < 20000; step++) {
        int k = (int)(rand_r(&seed) % K), op = (int)(rand_r(&seed) % 4);
        int kl = snprintf(key, sizeof key, "key%d", k);
        size_t vl = rand_r(&seed) % 290;
        for (size_t i = 0; i < vl; i++)
            val[i] = (char)('a' + (rand_r(&seed) % 26));
        val[vl] = 0;
        if (op <= 1) {
            ck_assert_int_eq(pagi_shared_set(d, key, (size_t)kl, val, vl, 0, 0), 0);
            memcpy(model[k], val, vl + 1);
            present[k] = 1;
        } else if (op == 2) {
            int rc = pagi_shared_delete(d, key, (size_t)kl);
            ck_assert_int_eq(rc, present[k] ? 0 : PAGI_SHARED_NOT_FOUND);
            present[k] = 0;
        } else {
            int rc = get_str(d, key, got, sizeof got);
            ck_assert_int_eq(rc, present[k] ? 0 : PAGI_SHARED_NOT_FOUND);
            if (present[k])
                ck_assert_str_eq(got, model[k]);
        }
        if (step % 1000 == 0)
            assert_sane(d);
    }
    assert_sane(d);
    shdict_destroy(d);
}
END_TEST

START_TEST(test_processes_incr)
{
    shdict *d = shdict_create("t", 64 * 1024);
    enum { P = 4, N = 5000 };
    pid_t pids[P];
    for (int p = 0; p < P; p++) {
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0) {
            int64_t zero = 0;
            for (int i = 0; i < N; i++)
                if (pagi_shared_incr(d, S("votes"), 1, &zero, 0, NULL) != 0)
                    _exit(1);
            _exit(0);
        }
    }
    for (int p = 0; p < P; p++) {
        int st;
        ck_assert_int_eq(waitpid(pids[p], &st, 0), pids[p]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    char v[32];
    ck_assert_int_eq(get_str(d, "votes", v, sizeof v), 0);
    ck_assert_str_eq(v, "20000");
    shdict_destroy(d);
}
END_TEST

/* A child stops a set of key at stage, holding the lock, and is killed. */
static void kill_mid_set(shdict *d, const char *key, const char *val, int stage)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (shdict_set_stopped(d, key, strlen(key), val, strlen(val), stage) == 0)
            raise(SIGKILL);
        _exit(3);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

START_TEST(test_killed_holding_lock)
{
    shdict *d = shdict_create("t", 64 * 1024);
    char v[64];
    for (int i = 0; i < 20; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "keep%d", i);
        ck_assert_int_eq(pagi_shared_set(d, k, (size_t)n, k, (size_t)n, 0, 0), 0);
    }
    ck_assert_int_eq(pagi_shared_set(d, S("x"), S("old"), 0, 0), 0);
    shdict_stats st;

    /* Killed right after locking: nothing changed, the lock is recovered. */
    kill_mid_set(d, "x", "new0", SHDICT_STOP_LOCKED);
    ck_assert_int_eq(get_str(d, "x", v, sizeof v), 0);
    ck_assert_str_eq(v, "old");
    shdict_stats_get(d, &st);
    ck_assert_uint_eq(st.repairs, 1);
    assert_sane(d);

    /* Killed with the new block half written: the old value stays. */
    kill_mid_set(d, "x", "new1", SHDICT_STOP_ALLOCATED);
    ck_assert_int_eq(get_str(d, "x", v, sizeof v), 0);
    ck_assert_str_eq(v, "old");
    assert_sane(d);
    /* ... and a new key being written is simply not there. */
    kill_mid_set(d, "y", "new", SHDICT_STOP_ALLOCATED);
    ck_assert_int_eq(get_str(d, "y", v, sizeof v), PAGI_SHARED_NOT_FOUND);
    assert_sane(d);

    /* Killed after the commit, before the old entry went: the new one wins, once. */
    kill_mid_set(d, "x", "new2", SHDICT_STOP_COMMITTED);
    ck_assert_int_eq(get_str(d, "x", v, sizeof v), 0);
    ck_assert_str_eq(v, "new2");
    assert_sane(d);
    ck_assert_uint_eq(pagi_shared_count(d), 21);
    for (int i = 0; i < 20; i++) {
        char k[16];
        snprintf(k, sizeof k, "keep%d", i);
        ck_assert_int_eq(get_str(d, k, v, sizeof v), 0);
        ck_assert_str_eq(v, k);
    }
    shdict_stats_get(d, &st);
    ck_assert_uint_eq(st.repairs, 4);
    /* Usable as before. */
    ck_assert_int_eq(pagi_shared_set(d, S("z"), S("1"), 0, 0), 0);
    assert_sane(d);
    shdict_destroy(d);
}
END_TEST

/* Children doing random writes are killed at random moments: each time the
 * parent finds a consistent dictionary and the keys no child touches. */
START_TEST(test_killed_at_random)
{
    shdict *d = shdict_create("t", 128 * 1024);
    char v[64];
    ck_assert_int_eq(pagi_shared_set(d, S("stable"), S("here"), 0, 0), 0);
    unsigned seed = 777;
    for (int round = 0; round < 40; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            unsigned s = (unsigned)round;
            char k[16], val[500];
            memset(val, 'r', sizeof val);
            int64_t zero = 0;
            for (;;) {
                int n = snprintf(k, sizeof k, "r%u", rand_r(&s) % 300);
                size_t vl = rand_r(&s) % sizeof val;
                switch (rand_r(&s) % 4) {
                case 0:
                case 1:
                    pagi_shared_set(d, k, (size_t)n, val, vl, 0, 0);
                    break;
                case 2:
                    pagi_shared_delete(d, k, (size_t)n);
                    break;
                default:
                    pagi_shared_incr(d, S("ctr"), 1, &zero, 0, NULL);
                    break;
                }
            }
        }
        usleep(1000 + rand_r(&seed) % 5000);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        assert_sane(d);
        ck_assert_int_eq(get_str(d, "stable", v, sizeof v), 0);
        ck_assert_str_eq(v, "here");
    }
    shdict_stats st;
    shdict_stats_get(d, &st);
    /* About 40% of the kills find the child holding the lock. */
    ck_assert_uint_gt(st.repairs, 0);
    fprintf(stderr, "test_killed_at_random: %llu of 40 kills repaired\n",
            (unsigned long long)st.repairs);
    shdict_destroy(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shdict");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_basic);
    tcase_add_test(tc, test_incr_cas);
    tcase_add_test(tc, test_ttl);
    tcase_add_test(tc, test_eviction_full);
    tcase_add_test(tc, test_model);
    tcase_add_test(tc, test_processes_incr);
    tcase_add_test(tc, test_killed_holding_lock);
    tcase_add_test(tc, test_killed_at_random);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
