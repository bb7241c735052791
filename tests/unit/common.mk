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
tests_unit_test_config_yaml_SOURCES = tests/unit/test_config_yaml.c
tests_unit_test_config_yaml_CPPFLAGS = $(AM_CPPFLAGS) -DTOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_config_yaml_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_config_yaml_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)

# log.c: log_open_append (the root cases run when the suite runs as root).
check_PROGRAMS += tests/unit/test_log
TESTS += tests/unit/test_log
tests_unit_test_log_SOURCES = tests/unit/test_log.c
tests_unit_test_log_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_log_LDADD = $(COMMON_LIBS) $(CHECK_LIBS)
