# tests/unit: one Check suite per source file, named after it.
UNIT_TEST_LIBS = $(PAGID_LIBS) $(CHECK_LIBS)
UNIT_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)

include $(srcdir)/tests/unit/common.mk
include $(srcdir)/tests/unit/worker.mk
include $(srcdir)/tests/unit/worker_engine.mk
include $(srcdir)/tests/unit/master.mk
include $(srcdir)/tests/unit/static.mk
include $(srcdir)/tests/unit/websocket.mk
include $(srcdir)/tests/unit/logs.mk
include $(srcdir)/tests/unit/tls.mk
