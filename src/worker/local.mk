# src/worker: the event loop, connections, the PAGI scope engine, apps.
libpagid_http1_a_SOURCES += \
	src/worker/h1_arena.c src/worker/h1_arena.h \
	src/worker/http1_parser.c src/worker/http1_parser.h \
	src/worker/http1_parser_head.c src/worker/http1_parser_int.h \
	src/worker/http1_response.c src/worker/http1_response.h

libpagid_worker_a_SOURCES += \
	src/worker/worker.c src/worker/worker.h \
	src/worker/accept_gate.c src/worker/accept_gate.h \
	src/worker/runq.c src/worker/runq.h \
	src/worker/loop.c src/worker/loop.h \
	src/worker/conn.c src/worker/conn.h src/worker/tls_conn.c src/worker/tls_conn.h \
	src/worker/tls_info.c src/worker/tls_info.h \
	src/worker/outq.c src/worker/outq.h src/worker/pagi_buf.c src/worker/pagi_buf.h \
	src/worker/http1_conn.c src/worker/http1_conn.h \
	src/worker/h2_conn.c src/worker/h2_conn.h src/worker/h2_stream.c src/worker/h2_websocket.c src/worker/h2_int.h \
	src/worker/h2_request.c src/worker/h2_request.h src/worker/h2_response.c \
	src/worker/scope.c src/worker/scope.h src/worker/scope_api.c src/worker/scope_internal.h \
	src/worker/scope_debug.c src/worker/crash.c src/worker/crash.h \
	src/worker/state_table.c src/worker/state_table.h src/worker/worker_ctx.h \
	src/worker/http1_exchange.c src/worker/http1_exchange.h \
	src/worker/sse.c src/worker/sse.h \
	src/worker/lifespan.c src/worker/lifespan.h \
	src/worker/reason.h \
	src/worker/app_registry.c src/worker/app_registry.h \
	src/worker/pagi_version.c \
	src/worker/preload.c src/worker/preload.h \
	src/worker/apps/hello.c src/worker/apps/echo.c src/worker/apps/builtin.h \
	src/worker/apps/demo.c src/worker/apps/demo_page.h \
	src/worker/pubsub.c src/worker/pubsub.h src/worker/apps/pubsub.c \
	src/worker/apps/pubsub_group.c src/worker/apps/pubsub_group.h

# The static app and the mount table (path prefix -> app).
libpagid_worker_a_SOURCES += \
	src/worker/apps/static.c \
	src/worker/apps/static_path.c src/worker/apps/static_path.h \
	src/worker/apps/static_http.c src/worker/apps/static_http.h \
	src/worker/apps/static_mime.c src/worker/apps/static_mime.h \
	src/worker/mount.c src/worker/mount.h src/worker/mount_lifespan.c

# WebSocket: handshake and scope, the connection protocol, framing, UTF-8, permessage-deflate.
libpagid_worker_a_SOURCES += \
	src/worker/websocket.c src/worker/websocket.h src/worker/websocket_int.h \
	src/worker/websocket_io.c src/worker/websocket_h1.c \
	src/worker/ws_frame.c src/worker/ws_frame.h src/worker/utf8.c src/worker/utf8.h \
	src/worker/ws_deflate.c src/worker/ws_deflate.h \
	src/worker/memtrim.c src/worker/memtrim.h

# Logs and metrics: the buffered access log, the status listener's metrics app.
libpagid_worker_a_SOURCES += \
	src/worker/access_log.c src/worker/access_log.h \
	src/worker/apps/metrics.c src/worker/apps/metrics.h

# pagi_easy(3): the convenience layer over pagi.h (linked into pagid itself, see src/master/local.mk).
PAGI_EASY_SOURCES = src/worker/pagi_easy.c src/worker/pagi_easy_group.c src/worker/pagi_easy_policy.h
