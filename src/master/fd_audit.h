/*
 * fd_audit.h - what a preloaded app left open: the zygote compares its open
 * descriptors before and after loading the apps and names each new one, as
 * every worker forked from it will share it (a DBI handle, a socket).
 */
#ifndef PAGID_FD_AUDIT_H
#define PAGID_FD_AUDIT_H

#include <stddef.h>

#include "common/config.h"

#define FD_AUDIT_MAX 1024 /* descriptors above this are not audited */

typedef struct fd_audit {
    unsigned char open[FD_AUDIT_MAX / 8];
} fd_audit;

/** Record the descriptors open now (from /proc/self/fd). */
void fd_audit_snapshot(fd_audit *a);
/**
 * What the warning tells the app to do, for the apps c serves: a PAGI app
 * opens it in lifespan startup, a PSGI app (no lifespan) on first use.
 * A static string.
 */
const char *fd_audit_advice(const pagid_config *c);
/**
 * Log a warning for each descriptor open now that was not in before, naming
 * what it is (a file's path, a socket's peer) and then advice
 * (fd_audit_advice). Returns their count.
 */
size_t fd_audit_report(const fd_audit *before, const char *advice);

#endif
