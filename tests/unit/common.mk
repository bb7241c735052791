# tests/unit for src/common: one Check suite per source file.
check_PROGRAMS += tests/unit/test_buf tests/unit/test_config
TESTS += tests/unit/test_buf tests/unit/test_config

tests_unit_test_buf_SOURCES = tests/unit/test_buf.c
tests_unit_test_buf_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_buf_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

tests_unit_test_config_SOURCES = tests/unit/test_config.c
tests_unit_test_config_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_config_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# TOP_SRCDIR lets the test load conf/pagid.yaml from an out-of-tree build.
check_PROGRAMS += tests/unit/test_config_yaml
TESTS += tests/unit/test_config_yaml
tests_unit_test_config_yaml_SOURCES = tests/unit/test_config_yaml.c tests/unit/config_load_check.h
tests_unit_test_config_yaml_CPPFLAGS = $(AM_CPPFLAGS) -DTOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_config_yaml_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_config_yaml_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# config_yaml_tls.c: a listen entry's tls: mapping.
check_PROGRAMS += tests/unit/test_config_yaml_tls
TESTS += tests/unit/test_config_yaml_tls
tests_unit_test_config_yaml_tls_SOURCES = tests/unit/test_config_yaml_tls.c tests/unit/config_load_check.h
tests_unit_test_config_yaml_tls_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_config_yaml_tls_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# tls_server.c and tls_tickets.c: in-memory handshakes.
check_PROGRAMS += tests/unit/test_tls_server
TESTS += tests/unit/test_tls_server
tests_unit_test_tls_server_SOURCES = tests/unit/test_tls_server.c
tests_unit_test_tls_server_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_tls_server_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_config_suggest
TESTS += tests/unit/test_config_suggest
tests_unit_test_config_suggest_SOURCES = tests/unit/test_config_suggest.c tests/unit/config_load_check.h
tests_unit_test_config_suggest_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_config_suggest_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_config_yaml_include
TESTS += tests/unit/test_config_yaml_include
tests_unit_test_config_yaml_include_SOURCES = tests/unit/test_config_yaml_include.c
tests_unit_test_config_yaml_include_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_config_yaml_include_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# config_dump.c: load, dump, load the dump, compare.
check_PROGRAMS += tests/unit/test_config_dump
TESTS += tests/unit/test_config_dump
tests_unit_test_config_dump_SOURCES = tests/unit/test_config_dump.c
tests_unit_test_config_dump_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_config_dump_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# pidfile.c: the strict reader, removal only of our own pid file.
check_PROGRAMS += tests/unit/test_pidfile
TESTS += tests/unit/test_pidfile
tests_unit_test_pidfile_SOURCES = tests/unit/test_pidfile.c
tests_unit_test_pidfile_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pidfile_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# pool.c: a claim of an idle pool process, the queue depth, the figures.
check_PROGRAMS += tests/unit/test_pool
TESTS += tests/unit/test_pool
tests_unit_test_pool_SOURCES = tests/unit/test_pool.c
tests_unit_test_pool_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pool_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# proctitle.c: process titles over the argv/environ area.
check_PROGRAMS += tests/unit/test_proctitle
TESTS += tests/unit/test_proctitle
tests_unit_test_proctitle_SOURCES = tests/unit/test_proctitle.c
tests_unit_test_proctitle_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_proctitle_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# log.c: log_open_append (the root cases run when the suite runs as root).
check_PROGRAMS += tests/unit/test_log
TESTS += tests/unit/test_log
tests_unit_test_log_SOURCES = tests/unit/test_log.c
tests_unit_test_log_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_log_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_strtab
TESTS += tests/unit/test_strtab
tests_unit_test_strtab_SOURCES = tests/unit/test_strtab.c
tests_unit_test_strtab_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_strtab_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_ydoc
TESTS += tests/unit/test_ydoc
tests_unit_test_ydoc_SOURCES = tests/unit/test_ydoc.c
tests_unit_test_ydoc_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_ydoc_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# pubsub_msg.c: the worker/broker frames, encoded and strictly decoded.
check_PROGRAMS += tests/unit/test_pubsub_msg
TESTS += tests/unit/test_pubsub_msg
tests_unit_test_pubsub_msg_SOURCES = tests/unit/test_pubsub_msg.c
tests_unit_test_pubsub_msg_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pubsub_msg_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# redis_url.c: pubsub.url forms, accepted and refused.
check_PROGRAMS += tests/unit/test_redis_url
TESTS += tests/unit/test_redis_url
tests_unit_test_redis_url_SOURCES = tests/unit/test_redis_url.c
tests_unit_test_redis_url_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_redis_url_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# shdict.c and shdict_heap.c: shared dictionaries, with forked children killed mid-operation.
check_PROGRAMS += tests/unit/test_shdict
TESTS += tests/unit/test_shdict
tests_unit_test_shdict_SOURCES = tests/unit/test_shdict.c
tests_unit_test_shdict_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_shdict_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)
