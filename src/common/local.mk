# src/common: config model and loader, logging, buffers.
libpagid_common_a_SOURCES += \
	src/common/buf.c src/common/buf.h \
	src/common/log.c src/common/log.h \
	src/common/log_handover.c src/common/log_handover.h \
	src/common/config.c src/common/config.h \
	src/common/config_listen.c \
	src/common/config_yaml.c src/common/config_yaml_app.c src/common/config_yaml_listen.c \
	src/common/config_yaml_tls.c src/common/config_yaml_pubsub.c src/common/config_yaml_shdict.c \
	src/common/config_yaml_pool.c \
	src/common/redis_url.c src/common/redis_url.h \
	src/common/origin.c src/common/origin.h \
	src/common/config_yaml_int.h \
	src/common/config_yaml_load.c src/common/config_yaml_include.c src/common/config_yaml_doc.c \
	src/common/config_suggest.c src/common/config_suggest.h \
	src/common/strtab.c src/common/strtab.h \
	src/common/module_abi.c src/common/module_abi.h \
	src/common/ydoc.c src/common/ydoc.h \
	src/common/config_dump.c src/common/config_dump.h \
	src/common/shm.c src/common/shm.h \
	src/common/shdict.c src/common/shdict.h src/common/shdict_int.h src/common/shdict_heap.c \
	src/common/pool.c src/common/pool.h \
	src/common/pidfile.c src/common/pidfile.h \
	src/common/path.c src/common/path.h \
	src/common/proctitle.c src/common/proctitle.h \
	src/common/pubsub_msg.c src/common/pubsub_msg.h \
	src/common/exitcodes.h src/common/hexdigit.h

# TLS server contexts: built by the master, used by the workers.
libpagid_common_a_SOURCES += src/common/tls_server.c src/common/tls_server.h \
	src/common/tls_tickets.c src/common/tls_tickets.h src/common/tls_ocsp.c src/common/tls_ocsp.h

# The access log's format compiler (used by the config check and the worker).
libpagid_common_a_SOURCES += src/common/access_format.c src/common/access_format.h
