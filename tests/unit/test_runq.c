/*
 * test_runq.c - Check suite for src/worker/runq.c: FIFO order, a drain runs only
 * what was queued before it began, growth (also while wrapped), runq_pending,
 * and the shrink after a burst.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "worker/core/runq.h"

/* What the jobs record, in the order they ran. */
static intptr_t order[4096];
static size_t n_order;

static void record_job(const runq_item *it)
{
    order[n_order++] = (intptr_t)it->a;
}

static int push_rec(runq *q, intptr_t v)
{
    return runq_push(q, record_job, NULL, (void *)v, NULL, NULL);
}

START_TEST(fifo_order)
{
    runq q;
    runq_init(&q);
    n_order = 0;
    ck_assert_uint_eq(runq_pending(&q), 0);
    ck_assert_uint_eq(runq_drain(&q), 0);
    for (intptr_t i = 0; i < 10; i++)
        ck_assert_int_eq(push_rec(&q, i), 0);
    ck_assert_uint_eq(runq_pending(&q), 10);
    ck_assert_uint_eq(runq_drain(&q), 10);
    ck_assert_uint_eq(runq_pending(&q), 0);
    ck_assert_uint_eq(n_order, 10);
    for (intptr_t i = 0; i < 10; i++)
        ck_assert_int_eq(order[i], i);
    runq_free(&q);
}
END_TEST

/* A job that queues one more job (value + 100) the first time it runs. */
static runq *g_q;

static void requeue_job(const runq_item *it)
{
    intptr_t v = (intptr_t)it->a;
    order[n_order++] = v;
    if (v < 100)
        runq_push(g_q, requeue_job, NULL, (void *)(v + 100), NULL, NULL);
}

START_TEST(drain_runs_only_items_queued_before)
{
    runq q;
    runq_init(&q);
    g_q = &q;
    n_order = 0;
    for (intptr_t i = 0; i < 3; i++)
        runq_push(&q, requeue_job, NULL, (void *)i, NULL, NULL);
    ck_assert_uint_eq(runq_drain(&q), 3);
    /* The three pushed during the drain wait for the next one. */
    ck_assert_uint_eq(n_order, 3);
    ck_assert_uint_eq(runq_pending(&q), 3);
    ck_assert_uint_eq(runq_drain(&q), 3);
    ck_assert_uint_eq(n_order, 6);
    intptr_t want[] = {0, 1, 2, 100, 101, 102};
    for (size_t i = 0; i < 6; i++)
        ck_assert_int_eq(order[i], want[i]);
    ck_assert_uint_eq(runq_pending(&q), 0);
    ck_assert_uint_eq(runq_drain(&q), 0);
    runq_free(&q);
}
END_TEST

START_TEST(growth_keeps_order)
{
    runq q;
    runq_init(&q);
    n_order = 0;
    for (intptr_t i = 0; i < 3000; i++)
        ck_assert_int_eq(push_rec(&q, i), 0);
    ck_assert_uint_eq(runq_pending(&q), 3000);
    ck_assert_uint_ge(q.cap, 3000);
    ck_assert_uint_eq(runq_drain(&q), 3000);
    for (intptr_t i = 0; i < 3000; i++)
        ck_assert_int_eq(order[i], i);
    runq_free(&q);
}
END_TEST

/* Push and drain so the ring's head sits in the middle, then grow while wrapped. */
START_TEST(growth_while_wrapped)
{
    runq q;
    runq_init(&q);
    n_order = 0;
    for (intptr_t i = 0; i < 200; i++)
        push_rec(&q, -1);
    runq_drain(&q);
    size_t cap = q.cap;
    ck_assert_uint_gt(cap, 0);
    ck_assert_uint_eq(q.head, 200 % cap);
    n_order = 0;
    /* Fill to capacity: the tail wraps past the end of the array. */
    for (intptr_t i = 0; i < (intptr_t)cap; i++)
        push_rec(&q, i);
    ck_assert_uint_eq(q.cap, cap);
    ck_assert_uint_eq(runq_pending(&q), cap);
    /* One more forces growth while wrapped. */
    for (intptr_t i = (intptr_t)cap; i < (intptr_t)cap + 50; i++)
        push_rec(&q, i);
    ck_assert_uint_gt(q.cap, cap);
    ck_assert_uint_eq(runq_pending(&q), cap + 50);
    ck_assert_uint_eq(runq_drain(&q), cap + 50);
    ck_assert_uint_eq(n_order, cap + 50);
    for (intptr_t i = 0; i < (intptr_t)cap + 50; i++)
        ck_assert_int_eq(order[i], i);
    runq_free(&q);
}
END_TEST

/* A drain whose jobs push enough to grow the ring mid-drain. */
static void flood_job(const runq_item *it)
{
    order[n_order++] = (intptr_t)it->a;
    if ((intptr_t)it->a == 0)
        for (intptr_t i = 0; i < 1000; i++)
            runq_push(g_q, record_job, NULL, (void *)(1000 + i), NULL, NULL);
}

START_TEST(growth_during_drain)
{
    runq q;
    runq_init(&q);
    g_q = &q;
    n_order = 0;
    for (intptr_t i = 0; i < 5; i++)
        runq_push(&q, flood_job, NULL, (void *)i, NULL, NULL);
    ck_assert_uint_eq(runq_drain(&q), 5);
    ck_assert_uint_eq(n_order, 5);
    for (intptr_t i = 0; i < 5; i++)
        ck_assert_int_eq(order[i], i);
    ck_assert_uint_eq(runq_pending(&q), 1000);
    ck_assert_uint_eq(runq_drain(&q), 1000);
    for (intptr_t i = 0; i < 1000; i++)
        ck_assert_int_eq(order[5 + i], 1000 + i);
    runq_free(&q);
}
END_TEST

static void dummy_cb(void) {}
static int seen_fields;

static void fields_job(const runq_item *it)
{
    ck_assert(it->cb == dummy_cb);
    ck_assert_ptr_eq(it->a, (void *)1);
    ck_assert_ptr_eq(it->b, (void *)2);
    ck_assert_ptr_eq(it->c, (void *)3);
    seen_fields++;
}

START_TEST(item_fields_passed)
{
    runq q;
    runq_init(&q);
    seen_fields = 0;
    runq_push(&q, fields_job, dummy_cb, (void *)1, (void *)2, (void *)3);
    runq_drain(&q);
    ck_assert_int_eq(seen_fields, 1);
    runq_free(&q);
    ck_assert_uint_eq(runq_pending(&q), 0);
    /* A freed queue is reusable. */
    runq_push(&q, fields_job, dummy_cb, (void *)1, (void *)2, (void *)3);
    ck_assert_uint_eq(runq_drain(&q), 1);
    ck_assert_int_eq(seen_fields, 2);
    runq_free(&q);
}
END_TEST

/* A burst's ring goes once it is empty; a small one, or one still in use, stays. */
START_TEST(shrink_after_burst)
{
    runq q;
    runq_init(&q);
    n_order = 0;
    for (intptr_t i = 0; i < 3000; i++)
        ck_assert_int_eq(push_rec(&q, i), 0);
    ck_assert_uint_eq(runq_shrink(&q, 1024), 0); /* not empty */
    runq_drain(&q);
    ck_assert_uint_eq(n_order, 3000);
    ck_assert_uint_eq(runq_shrink(&q, 4096), 0); /* within what is kept */
    ck_assert_uint_eq(runq_shrink(&q, 1024), 4096 * sizeof(runq_item));
    ck_assert_ptr_null(q.items);
    ck_assert_uint_eq(runq_shrink(&q, 0), 0);
    /* Usable again, from the small size. */
    ck_assert_int_eq(push_rec(&q, 7), 0);
    ck_assert_uint_eq(runq_drain(&q), 1);
    ck_assert_int_eq(order[3000], 7);
    runq_free(&q);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runq");
    TCase *t = tcase_create("core");
    tcase_add_test(t, fifo_order);
    tcase_add_test(t, drain_runs_only_items_queued_before);
    tcase_add_test(t, growth_keeps_order);
    tcase_add_test(t, growth_while_wrapped);
    tcase_add_test(t, growth_during_drain);
    tcase_add_test(t, item_fields_passed);
    tcase_add_test(t, shrink_after_burst);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
