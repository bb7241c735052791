# tests/unit for logs and metrics: one Check suite per source file
# (access_format: the access log's format compiler and renderer; metrics:
# the exposition text of the shared region).
check_PROGRAMS += tests/unit/test_access_format tests/unit/test_metrics
TESTS += tests/unit/test_access_format tests/unit/test_metrics

tests_unit_test_access_format_SOURCES = tests/unit/test_access_format.c
tests_unit_test_access_format_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_access_format_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

tests_unit_test_metrics_SOURCES = tests/unit/test_metrics.c
tests_unit_test_metrics_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_metrics_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)
