/*
 * test_metrics.c - Check suite for src/worker/apps/metrics.c: the
 * exposition text sums counters over every slot (exited workers' too),
 * gauges over live workers only, and says so when there is no region.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/shm.h"
#include "worker/apps/metrics.h"

static char *render(const shm_region *r)
{
    buf b = BUF_INIT;
    ck_assert_int_eq(metrics_render(&b, r), 0);
    buf_append(&b, "", 1);
    char *s = strdup(buf_head(&b));
    buf_free(&b);
    return s;
}

static void has(const char *text, const char *line)
{
    char want[256];
    snprintf(want, sizeof want, "\n%s\n", line);
    ck_assert_msg(strstr(text, want) != NULL, "missing line '%s' in:\n%s", line, text);
}

START_TEST(test_sums)
{
    shm_region *r = shm_create(4);
    ck_assert_ptr_nonnull(r);
    shm_worker *a = shm_claim(r, 101, 1, 1), *b = shm_claim(r, 102, 2, 1);
    shm_worker *gone = shm_claim(r, 103, 3, 1);
    atomic_store(&a->ready, 1);
    shm_count_request(a, 200);
    shm_count_request(a, 204);
    shm_count_request(b, 404);
    shm_count_request(b, 413);
    shm_count_request(gone, 500);
    shm_count_request(a, 999);
    shm_add(&a->bytes_in, 100);
    shm_add(&b->bytes_out, 7);
    shm_add(&gone->access_log_dropped, 4);
    shm_count_disconnect(a, "client_closed");
    shm_count_disconnect(gone, "client_closed");
    shm_count_disconnect(b, "no_such_reason");
    atomic_store(&a->open_connections, 2);
    atomic_store(&gone->open_connections, 5); /* stale: must not count */
    atomic_store(&b->open_scopes[SHM_SCOPE_WEBSOCKET], 3);
    atomic_store(&r->worker_restarts, 1);
    atomic_store(&r->reloads, 2);
    atomic_store(&r->generation, 3);
    shm_release(r, 103);

    char *t = render(r);
    has(t, "pagid_requests_total{class=\"2xx\"} 2");
    has(t, "pagid_requests_total{class=\"4xx\"} 2");
    has(t, "pagid_requests_total{class=\"5xx\"} 1"); /* the exited worker's counters stay */
    has(t, "pagid_requests_total{class=\"1xx\"} 0");
    has(t, "pagid_requests_total{class=\"other\"} 1");
    has(t, "pagid_received_bytes_total 100");
    has(t, "pagid_sent_bytes_total 7");
    has(t, "pagid_access_log_dropped_total 4");
    has(t, "pagid_disconnects_total{reason=\"client_closed\"} 2");
    has(t, "pagid_disconnects_total{reason=\"other\"} 1");
    has(t, "pagid_open_connections 2");
    has(t, "pagid_open_scopes{type=\"websocket\"} 3");
    has(t, "pagid_open_scopes{type=\"http\"} 0");
    has(t, "pagid_worker_restarts_total 1");
    has(t, "pagid_reloads_total 2");
    has(t, "pagid_generation 3");
    has(t, "pagid_workers_up 2");
    has(t, "pagid_workers_ready 1");
    has(t, "# TYPE pagid_requests_total counter");
    has(t, "# TYPE pagid_open_connections gauge");
    free(t);
    shm_destroy(r);
}
END_TEST

START_TEST(test_no_region)
{
    char *t = render(NULL);
    ck_assert_ptr_nonnull(strstr(t, "pagid_up 1\n"));
    ck_assert_ptr_null(strstr(t, "pagid_requests_total"));
    free(t);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sums);
    tcase_add_test(tc, test_no_region);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(metrics_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
