# tests/unit for the static app and the mount table: one Check suite per
# source file (static_path, static_http, static_mime, mount).
check_PROGRAMS += tests/unit/test_static_path tests/unit/test_static_http \
	tests/unit/test_static_mime tests/unit/test_mount
TESTS += tests/unit/test_static_path tests/unit/test_static_http \
	tests/unit/test_static_mime tests/unit/test_mount

tests_unit_test_static_path_SOURCES = tests/unit/test_static_path.c
tests_unit_test_static_path_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_static_path_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_static_http_SOURCES = tests/unit/test_static_http.c
tests_unit_test_static_http_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_static_http_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

tests_unit_test_static_mime_SOURCES = tests/unit/test_static_mime.c
tests_unit_test_static_mime_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_static_mime_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# The built-in apps include pubsub, whose group mode calls pagi_easy (linked into pagid itself).
tests_unit_test_mount_SOURCES = tests/unit/test_mount.c $(PAGI_EASY_SOURCES)
tests_unit_test_mount_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_mount_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)

# static_cache.c: trust rules, memory and fd bounds, the one release path.
check_PROGRAMS += tests/unit/test_static_cache
TESTS += tests/unit/test_static_cache
tests_unit_test_static_cache_SOURCES = tests/unit/test_static_cache.c
tests_unit_test_static_cache_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_static_cache_LDADD = $(WORKER_LIBS) $(CHECK_LIBS)
