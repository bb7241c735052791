/*
 * mount.h - the worker's mount table: the top-level app serves "/", and each
 * `mounts` entry serves a path prefix. Each app gets its own instance
 * (create/destroy); a dispatcher app picks one per scope by longest prefix.
 */
#ifndef PAGID_MOUNT_H
#define PAGID_MOUNT_H

#include <stddef.h>
#include <pagi/pagi.h>

#include "common/config.h"
#include "worker/app_registry.h"
#include "worker/worker_ctx.h"

typedef struct mount_entry {
    const char *prefix; /* "" for the top-level app; points into the config */
    size_t len;
    const char *spec;
    app_handle h;
    void *instance;
    int created; /* create ran (so destroy must) */
} mount_entry;

typedef struct mount_table {
    mount_entry *v; /* v[0]: the top-level app; then the mounts, longest prefix first */
    size_t n;
} mount_table;

/**
 * Load and create every app of cfg (the top-level app and the mounts).
 * 0, or -1 with a message in err; the table is then partly built, and
 * mount_table_free releases what exists.
 */
int mount_table_load(mount_table *t, const pagid_config *cfg, pagi_loop *loop, char *err,
                     size_t errlen);
/** Make the worker run the table: the app itself when nothing is mounted, else the dispatcher. */
void mount_table_install(mount_table *t, worker_ctx *w);
/** Destroy the instances (reverse order) and unload. */
void mount_table_free(mount_table *t);

/**
 * Drive the worker's lifespan scope s for a table of several apps: each app
 * gets a lifespan scope of its own, started in table order and stopped in
 * reverse (mount_lifespan.c).
 */
void mount_lifespan_run(pagi_scope *s, const mount_table *t);

/** Does prefix (no trailing '/') cover the decoded path at a segment boundary? */
int mount_prefix_matches(const char *prefix, size_t plen, const char *path, size_t len);
/** The entry for a decoded path: the longest matching prefix, or 0 (the top-level app). */
size_t mount_match(const mount_table *t, const char *path, size_t len);

#endif
