/*
 * test_pool.c - Check suite for src/common/pool.c: a worker claims only an
 * idle pool process of its own generation (a compare-and-swap: one claim
 * wins), never a worker's slot or a free slot; the queue depth sums the
 * workers' waiting requests of one generation; the figures count busy and
 * idle processes.
 */
#include <check.h>
#include <stdlib.h>

#include "common/pool.h"

static shm_region *shm;

static void setup(void)
{
    ck_assert_ptr_nonnull(shm = shm_create(16));
}
static void teardown(void)
{
    shm_destroy(shm);
}

static shm_worker *process(int pid, int num, unsigned gen, int state)
{
    shm_worker *s = shm_claim(shm, pid, POOL_NUM_BASE + num, gen);
    ck_assert_ptr_nonnull(s);
    atomic_store(&s->pool_state, state);
    return s;
}

START_TEST(claims_only_idle_processes_of_its_generation)
{
    shm_worker *w = shm_claim(shm, 100, 1, 3); /* a worker: never claimed */
    atomic_store(&w->pool_state, POOL_IDLE);
    process(101, 1, 2, POOL_IDLE);    /* an older generation's */
    process(102, 2, 3, POOL_CLAIMED); /* taken */
    shm_worker *idle = process(103, 3, 3, POOL_IDLE);
    process(104, 4, 3, POOL_OFF); /* starting or leaving */
    unsigned cursor = 0;
    shm_worker *slot = NULL;
    ck_assert_int_eq(pool_claim(shm, 3, &cursor, &slot), 3);
    ck_assert_ptr_eq(slot, idle);
    ck_assert_int_eq(atomic_load(&idle->pool_state), POOL_CLAIMED);
    /* Claimed once: the next claim finds nothing. */
    ck_assert_int_eq(pool_claim(shm, 3, &cursor, &slot), 0);
    atomic_store(&idle->pool_state, POOL_IDLE);
    ck_assert_int_eq(pool_claim(shm, 3, &cursor, &slot), 3);
}
END_TEST

START_TEST(claims_spread_over_idle_processes)
{
    for (int i = 1; i <= 4; i++)
        process(200 + i, i, 1, POOL_IDLE);
    unsigned cursor = 0;
    shm_worker *slot;
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        int num = pool_claim(shm, 1, &cursor, &slot);
        ck_assert_int_ge(num, 1);
        ck_assert_int_le(num, 4);
        ck_assert(!(seen & (1 << num)));
        seen |= 1 << num;
    }
    ck_assert_int_eq(pool_claim(shm, 1, &cursor, &slot), 0);
}
END_TEST

START_TEST(queued_sums_the_workers_of_one_generation)
{
    shm_worker *a = shm_claim(shm, 300, 1, 5), *b = shm_claim(shm, 301, 2, 5),
               *old = shm_claim(shm, 302, 1, 4);
    shm_worker *p = process(303, 1, 5, POOL_IDLE);
    atomic_store(&a->pool_waiting, 3);
    atomic_store(&b->pool_waiting, 2);
    atomic_store(&old->pool_waiting, 7);
    atomic_store(&p->pool_waiting, 9); /* a process's slot holds no queue */
    ck_assert_int_eq(pool_queued(shm, 5), 5);
    ck_assert_int_eq(pool_queued(shm, 4), 7);
    pool_figures f;
    atomic_store(&p->pool_busy, 1);
    pool_figures_read(shm, 5, &f);
    ck_assert_int_eq(f.workers, 1);
    ck_assert_int_eq(f.busy, 1);
    ck_assert_int_eq(f.idle, 0);
    ck_assert_int_eq(f.queue_depth, 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("claim");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, claims_only_idle_processes_of_its_generation);
    tcase_add_test(tc, claims_spread_over_idle_processes);
    tcase_add_test(tc, queued_sums_the_workers_of_one_generation);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
