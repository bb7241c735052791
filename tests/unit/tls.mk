# tests/unit for the TLS layer: tls_conn over a socketpair against an
# in-process OpenSSL client (tls_test_cert.c makes the server's certificate).
check_PROGRAMS += tests/unit/test_tls_conn
TESTS += tests/unit/test_tls_conn
tests_unit_test_tls_conn_SOURCES = tests/unit/test_tls_conn.c tests/unit/tls_test_cert.c \
	tests/unit/tls_test_cert.h
tests_unit_test_tls_conn_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_tls_conn_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)
