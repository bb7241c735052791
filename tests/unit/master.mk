# tests/unit for src/master: one Check suite per source file.
check_PROGRAMS += tests/unit/test_cli
TESTS += tests/unit/test_cli

tests_unit_test_cli_SOURCES = tests/unit/test_cli.c
tests_unit_test_cli_CPPFLAGS = $(AM_CPPFLAGS) -DTOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_cli_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_cli_LDADD = libpagid_master.a $(COMMON_LIBS) $(CHECK_LIBS)

# listeners.c and supervisor.c (master engineer). test_supervisor defines its
# own worker_run, so the real worker library is not linked in.
check_PROGRAMS += tests/unit/test_listeners tests/unit/test_supervisor
TESTS += tests/unit/test_listeners tests/unit/test_supervisor

tests_unit_test_listeners_SOURCES = tests/unit/test_listeners.c
tests_unit_test_listeners_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_listeners_LDADD = libpagid_master.a $(COMMON_LIBS) $(SYSTEMD_LIBS) $(CHECK_LIBS)

tests_unit_test_supervisor_SOURCES = tests/unit/test_supervisor.c
tests_unit_test_supervisor_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_supervisor_LDADD = libpagid_master.a $(HIREDIS_LIBS) $(COMMON_LIBS) $(SYSTEMD_LIBS) $(CHECK_LIBS)

# signal_cli.c (pagid -s): pid file checks and the upgrade wait, against fake masters.
check_PROGRAMS += tests/unit/test_signal_cli
TESTS += tests/unit/test_signal_cli
tests_unit_test_signal_cli_SOURCES = tests/unit/test_signal_cli.c
tests_unit_test_signal_cli_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_signal_cli_LDADD = libpagid_master.a $(COMMON_LIBS) $(CHECK_LIBS)

# privileges.c: who the workers run as; the switch itself when run as root.
check_PROGRAMS += tests/unit/test_privileges
TESTS += tests/unit/test_privileges

tests_unit_test_privileges_SOURCES = tests/unit/test_privileges.c
tests_unit_test_privileges_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_privileges_LDADD = libpagid_master.a $(COMMON_LIBS) $(CHECK_LIBS)

# preflight.c: pagid -t's look at the host.
check_PROGRAMS += tests/unit/test_preflight
TESTS += tests/unit/test_preflight

tests_unit_test_preflight_SOURCES = tests/unit/test_preflight.c
tests_unit_test_preflight_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_preflight_LDADD = libpagid_master.a $(COMMON_LIBS) $(CHECK_LIBS)

# zygote_msg.c: the master/zygote messages, encoded and strictly decoded.
check_PROGRAMS += tests/unit/test_zygote_msg
TESTS += tests/unit/test_zygote_msg

tests_unit_test_zygote_msg_SOURCES = tests/unit/test_zygote_msg.c
tests_unit_test_zygote_msg_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_zygote_msg_LDADD = libpagid_master.a $(COMMON_LIBS) $(CHECK_LIBS)

# pubsub_routes.c: the broker's channel -> peers table.
check_PROGRAMS += tests/unit/test_pubsub_routes
TESTS += tests/unit/test_pubsub_routes
tests_unit_test_pubsub_routes_SOURCES = tests/unit/test_pubsub_routes.c
tests_unit_test_pubsub_routes_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pubsub_routes_LDADD = libpagid_master.a $(COMMON_LIBS) $(CHECK_LIBS)

# redis_wire.c: the backoff schedule, the instance tag, the bounded reader, escaping.
check_PROGRAMS += tests/unit/test_pubsub_redis
TESTS += tests/unit/test_pubsub_redis
tests_unit_test_pubsub_redis_SOURCES = tests/unit/test_pubsub_redis.c
tests_unit_test_pubsub_redis_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_pubsub_redis_LDADD = libpagid_master.a $(HIREDIS_LIBS) $(COMMON_LIBS) $(CHECK_LIBS)

# respawn.c: the verdict on each way a worker or zygote ends, the backoff.
check_PROGRAMS += tests/unit/test_respawn
TESTS += tests/unit/test_respawn
tests_unit_test_respawn_SOURCES = tests/unit/test_respawn.c
tests_unit_test_respawn_CFLAGS = $(UNIT_TEST_CFLAGS)
tests_unit_test_respawn_LDADD = libpagid_master.a $(COMMON_LIBS) $(CHECK_LIBS)
