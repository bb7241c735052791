# tests/unit for the worker engine (runq, loop, outq, state_table, scope, scope_drain, scope_debug, app_registry,
# sse, http1_exchange, tls_info): one Check suite per source file, named after it.
check_PROGRAMS += tests/unit/test_runq tests/unit/test_loop tests/unit/test_outq \
	tests/unit/test_state_table tests/unit/test_scope tests/unit/test_scope_drain \
	tests/unit/test_scope_debug tests/unit/test_app_registry tests/unit/test_sse \
	tests/unit/test_http_exchange tests/unit/test_tls_info
TESTS += tests/unit/test_runq tests/unit/test_loop tests/unit/test_outq \
	tests/unit/test_state_table tests/unit/test_scope tests/unit/test_scope_drain \
	tests/unit/test_scope_debug tests/unit/test_app_registry tests/unit/test_sse \
	tests/unit/test_http_exchange tests/unit/test_tls_info

tests_unit_test_tls_info_SOURCES = tests/unit/test_tls_info.c
tests_unit_test_tls_info_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_tls_info_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_runq_SOURCES = tests/unit/test_runq.c
tests_unit_test_runq_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_runq_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_loop_SOURCES = tests/unit/test_loop.c
tests_unit_test_loop_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_loop_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_outq_SOURCES = tests/unit/test_outq.c
tests_unit_test_outq_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_outq_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_state_table_SOURCES = tests/unit/test_state_table.c
tests_unit_test_state_table_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_state_table_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_scope_SOURCES = tests/unit/test_scope.c
tests_unit_test_scope_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_scope_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_scope_drain_SOURCES = tests/unit/test_scope_drain.c
tests_unit_test_scope_drain_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_scope_drain_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_sse_SOURCES = tests/unit/test_sse.c
tests_unit_test_sse_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_sse_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_http_exchange_SOURCES = tests/unit/test_http_exchange.c
tests_unit_test_http_exchange_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_http_exchange_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_scope_debug_SOURCES = tests/unit/test_scope_debug.c
tests_unit_test_scope_debug_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_scope_debug_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# The test compiles small .so modules at run time against the public header;
# like pagid, it exports its symbols so a module can call the pagi_* functions.
# The built-in apps include pubsub, whose group mode calls pagi_easy (linked into pagid itself).
tests_unit_test_app_registry_SOURCES = tests/unit/test_app_registry.c $(PAGI_EASY_SOURCES)
tests_unit_test_app_registry_CPPFLAGS = $(AM_CPPFLAGS) -DTOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_app_registry_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_app_registry_LDFLAGS = $(AM_LDFLAGS) -Wl,--export-dynamic
tests_unit_test_app_registry_LDADD = $(WORKER_LIBS) $(CHECK_LIBS) -ldl

# pagi_easy(3): broadcast groups over a fake websocket driver (the layer is
# not in a library: it is linked into pagid directly, so here too).
check_PROGRAMS += tests/unit/test_pagi_easy
TESTS += tests/unit/test_pagi_easy
tests_unit_test_pagi_easy_SOURCES = tests/unit/test_pagi_easy.c $(PAGI_EASY_SOURCES)
tests_unit_test_pagi_easy_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pagi_easy_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# pagi_easy(3): responses, the body reader and lifespan over a fake http driver.
check_PROGRAMS += tests/unit/test_pagi_easy_body
TESTS += tests/unit/test_pagi_easy_body
tests_unit_test_pagi_easy_body_SOURCES = tests/unit/test_pagi_easy_body.c $(PAGI_EASY_SOURCES)
tests_unit_test_pagi_easy_body_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pagi_easy_body_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# pagi_router(3): the path router over a fake driver; malloc and friends
# wrapped to count allocations during a dispatch (there must be none).
check_PROGRAMS += tests/unit/test_pagi_easy_router
TESTS += tests/unit/test_pagi_easy_router
tests_unit_test_pagi_easy_router_SOURCES = tests/unit/test_pagi_easy_router.c $(PAGI_EASY_SOURCES)
tests_unit_test_pagi_easy_router_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pagi_easy_router_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc \
	-Wl,--wrap=realloc
tests_unit_test_pagi_easy_router_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# pubsub.c: a worker's publish/subscribe (delivery, policies, lifetimes, frames).
check_PROGRAMS += tests/unit/test_pubsub
TESTS += tests/unit/test_pubsub
tests_unit_test_pubsub_SOURCES = tests/unit/test_pubsub.c
tests_unit_test_pubsub_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pubsub_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)
