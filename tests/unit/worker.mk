# tests/unit for src/worker
check_PROGRAMS += tests/unit/test_h1_arena
TESTS += tests/unit/test_h1_arena
tests_unit_test_h1_arena_SOURCES = tests/unit/test_h1_arena.c
tests_unit_test_h1_arena_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_h1_arena_LDADD = $(HTTP1_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_http1_parser
TESTS += tests/unit/test_http1_parser
tests_unit_test_http1_parser_SOURCES = tests/unit/test_http1_parser.c
tests_unit_test_http1_parser_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_http1_parser_LDADD = $(HTTP1_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_http1_response
TESTS += tests/unit/test_http1_response
tests_unit_test_http1_response_SOURCES = tests/unit/test_http1_response.c
tests_unit_test_http1_response_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_http1_response_LDADD = $(HTTP1_LIBS) $(CHECK_LIBS)

# app_call: the record of the app call a worker is inside (the blocked-loop kill's).
check_PROGRAMS += tests/unit/test_app_call
TESTS += tests/unit/test_app_call
tests_unit_test_app_call_SOURCES = tests/unit/test_app_call.c
tests_unit_test_app_call_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_app_call_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# accept_gate: the fair-accept share test over the shared region.
check_PROGRAMS += tests/unit/test_accept_gate
TESTS += tests/unit/test_accept_gate
tests_unit_test_accept_gate_SOURCES = tests/unit/test_accept_gate.c
tests_unit_test_accept_gate_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_accept_gate_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# scope_request: a scope's copy of its request, small blocks kept for reuse.
check_PROGRAMS += tests/unit/test_scope_request
TESTS += tests/unit/test_scope_request
tests_unit_test_scope_request_SOURCES = tests/unit/test_scope_request.c
tests_unit_test_scope_request_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_scope_request_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# h2_mem: nghttp2's allocator, small blocks kept on bounded free lists.
check_PROGRAMS += tests/unit/test_h2_mem
TESTS += tests/unit/test_h2_mem
tests_unit_test_h2_mem_SOURCES = tests/unit/test_h2_mem.c
tests_unit_test_h2_mem_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_h2_mem_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# h2_request: an HTTP/2 request head from HPACK fields to a scope's facts.
check_PROGRAMS += tests/unit/test_h2_request
TESTS += tests/unit/test_h2_request
tests_unit_test_h2_request_SOURCES = tests/unit/test_h2_request.c
tests_unit_test_h2_request_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_h2_request_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)
