# src/worker: the event loop, connections, the PAGI scope engine, apps.
# One section per room (src/worker/<room>/); docs/ARCHITECTURE.md has the map.

# http1/ (parser, head arena, response writer): also a library of its own,
# linked by the unit tests and fuzzers that need only the parser.
libpagid_http1_a_SOURCES += \
	src/worker/http1/h1_arena.c src/worker/http1/h1_arena.h \
	src/worker/http1/http1_parser.c src/worker/http1/http1_parser.h \
	src/worker/http1/http1_parser_head.c src/worker/http1/http1_parser_feed.c src/worker/http1/http1_parser_int.h \
	src/worker/http1/http1_response.c src/worker/http1/http1_response.h

# The top: the worker process, its app registry, preload.
libpagid_worker_a_SOURCES += \
	src/worker/worker.c src/worker/worker.h src/worker/worker_ctx.h \
	src/worker/app_registry.c src/worker/app_registry.h \
	src/worker/pagi_version.c \
	src/worker/preload.c src/worker/preload.h

# core/: the loop, connections, output, the run queue, TLS, access log.
libpagid_worker_a_SOURCES += \
	src/worker/core/accept_gate.c src/worker/core/accept_gate.h \
	src/worker/core/acceptors.c src/worker/core/acceptors.h \
	src/worker/core/runq.c src/worker/core/runq.h \
	src/worker/core/loop.c src/worker/core/loop.h \
	src/worker/core/conn.c src/worker/core/conn.h \
	src/worker/core/tls_conn.c src/worker/core/tls_conn.h \
	src/worker/core/tls_info.c src/worker/core/tls_info.h \
	src/worker/core/outq.c src/worker/core/outq.h \
	src/worker/core/pagi_buf.c src/worker/core/pagi_buf.h \
	src/worker/core/handle.c src/worker/core/handle.h \
	src/worker/core/crash.c src/worker/core/crash.h \
	src/worker/core/app_call.c src/worker/core/app_call.h \
	src/worker/core/state_table.c src/worker/core/state_table.h \
	src/worker/core/reason.h \
	src/worker/core/memtrim.c src/worker/core/memtrim.h \
	src/worker/core/access_log.c src/worker/core/access_log.h \
	src/worker/core/log_channel.c src/worker/core/log_channel.h

# http/: the protocol-neutral HTTP exchange over an http_carrier.
libpagid_worker_a_SOURCES += \
	src/worker/http/http_exchange.c src/worker/http/http_exchange.h

# http1/: the HTTP/1.1 connection protocol and request/response exchange.
libpagid_worker_a_SOURCES += \
	src/worker/http1/http1_conn.c src/worker/http1/http1_conn.h \
	src/worker/http1/http1_exchange.c src/worker/http1/http1_exchange.h

# http2/: the HTTP/2 connection protocol (nghttp2), streams, websockets over h2.
libpagid_worker_a_SOURCES += \
	src/worker/http2/h2_conn.c src/worker/http2/h2_conn.h src/worker/http2/h2_int.h \
	src/worker/http2/h2_stream.c src/worker/http2/h2_websocket.c \
	src/worker/http2/h2_request.c src/worker/http2/h2_request.h \
	src/worker/http2/h2_response.c src/worker/http2/h2_mem.c src/worker/http2/h2_mem.h

# ws/: WebSocket: handshake and scope, the protocol, framing, UTF-8, permessage-deflate.
libpagid_worker_a_SOURCES += \
	src/worker/ws/websocket.c src/worker/ws/websocket.h src/worker/ws/websocket_int.h \
	src/worker/ws/websocket_io.c src/worker/ws/websocket_h1.c \
	src/worker/ws/ws_frame.c src/worker/ws/ws_frame.h src/worker/ws/utf8.c src/worker/ws/utf8.h \
	src/worker/ws/ws_deflate.c src/worker/ws/ws_deflate.h

# sse/: server-sent events over either carrier.
libpagid_worker_a_SOURCES += \
	src/worker/sse/sse.c src/worker/sse/sse.h

# scope/: the PAGI scope engine, lifespan, the mount table, the pub/sub client.
libpagid_worker_a_SOURCES += \
	src/worker/scope/scope.c src/worker/scope/scope.h src/worker/scope/scope_api.c \
	src/worker/scope/scope_internal.h src/worker/scope/scope_debug.c \
	src/worker/scope/scope_request.c \
	src/worker/scope/scope_response.c \
	src/worker/scope/lifespan.c src/worker/scope/lifespan.h \
	src/worker/scope/mount.c src/worker/scope/mount.h src/worker/scope/mount_lifespan.c \
	src/worker/scope/pubsub.c src/worker/scope/pubsub.h

# apps/: the built-in apps (hello, echo, demo, pubsub, static, metrics).
libpagid_worker_a_SOURCES += \
	src/worker/apps/hello.c src/worker/apps/echo.c src/worker/apps/builtin.h \
	src/worker/apps/demo.c src/worker/apps/demo_page.h \
	src/worker/apps/pubsub.c src/worker/apps/pubsub_group.c src/worker/apps/pubsub_group.h \
	src/worker/apps/static.c \
	src/worker/apps/static_cache.c src/worker/apps/static_cache.h \
	src/worker/apps/static_path.c src/worker/apps/static_path.h \
	src/worker/apps/static_http.c src/worker/apps/static_http.h \
	src/worker/apps/static_mime.c src/worker/apps/static_mime.h \
	src/worker/apps/metrics.c src/worker/apps/metrics.h

# pagi_easy(3): the convenience layer over pagi.h (linked into pagid itself, see src/master/local.mk).
PAGI_EASY_SOURCES = src/worker/scope/pagi_easy.c src/worker/scope/pagi_easy_group.c src/worker/scope/pagi_easy_policy.h \
	src/worker/scope/pagi_easy_member.c src/worker/scope/pagi_easy_member.h \
	src/worker/scope/pagi_easy_router.c
