# tests/unit for the WebSocket codec and memtrim: one Check suite per source file.
check_PROGRAMS += tests/unit/test_ws_frame tests/unit/test_utf8 tests/unit/test_ws_deflate
TESTS += tests/unit/test_ws_frame tests/unit/test_utf8 tests/unit/test_ws_deflate

tests_unit_test_ws_frame_SOURCES = tests/unit/test_ws_frame.c
tests_unit_test_ws_frame_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_ws_frame_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_utf8_SOURCES = tests/unit/test_utf8.c
tests_unit_test_utf8_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_utf8_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_ws_deflate_SOURCES = tests/unit/test_ws_deflate.c
tests_unit_test_ws_deflate_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_ws_deflate_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_memtrim
TESTS += tests/unit/test_memtrim
tests_unit_test_memtrim_SOURCES = tests/unit/test_memtrim.c
tests_unit_test_memtrim_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_memtrim_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)
