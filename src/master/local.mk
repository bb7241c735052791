# src/master: command line, listeners, the supervisor; main().
sbin_PROGRAMS += pagid
# The pagi_easy(3) layer is linked in directly: nothing in the server calls
# it, so from a static library it would be left out; modules find it through
# --export-dynamic like every pagi_* function.
pagid_SOURCES = src/master/main.c $(PAGI_EASY_SOURCES)
pagid_LDADD = $(PAGID_LIBS)
pagid_LDFLAGS = $(AM_LDFLAGS) -Wl,--export-dynamic

libpagid_master_a_SOURCES += \
	src/master/cli.c src/master/cli.h src/master/cli_dev.c \
	src/master/devwatch.c src/master/devwatch.h src/master/check_apps.c src/master/check_apps.h \
	src/master/fd_audit.c src/master/fd_audit.h \
	src/master/listeners.c src/master/listeners.h \
	src/master/listeners_inherit.c src/master/listeners_overlap.c \
	src/master/generation.c src/master/generation.h src/master/generation_zygote.c \
	src/master/shdicts.c src/master/shdicts.h \
	src/master/gen_logs.c src/master/gen_logs.h \
	src/master/generation_pool.c \
	src/master/zygote.c src/master/zygote.h src/master/zygote_msg.c src/master/zygote_msg.h \
	src/master/notify.c src/master/notify.h \
	src/master/pubsub_broker.c src/master/pubsub_broker.h \
	src/master/pubsub_routes.c src/master/pubsub_routes.h \
	src/master/pubsub_redis.c src/master/pubsub_redis.h \
	src/master/pubsub_redis_connect.c src/master/pubsub_redis_int.h \
	src/master/pubsub_redis_sub.c \
	src/master/redis_resolve.c src/master/redis_resolve.h \
	src/master/redis_wire.c src/master/redis_wire.h \
	src/master/preflight.c src/master/preflight.h \
	src/master/preflight_tls.c src/master/preflight_tls.h \
	src/master/privileges.c src/master/privileges.h \
	src/master/upgrade.c \
	src/master/signal_cli.c src/master/signal_cli.h \
	src/master/cli_print.c src/master/cli_print.h \
	src/master/supervisor.c src/master/supervisor.h src/master/supervisor_int.h \
	src/master/supervisor_gen.c \
	src/master/respawn.c src/master/respawn.h src/master/master_timing.h
