/*
 * mount.c - apps under path prefixes. The table is built once per worker;
 * the dispatcher matches the decoded path (longest prefix, at a segment
 * boundary), moves the prefix into root_path and hands the scope over.
 * The lifespan scope fans out to every app (mount_lifespan.c).
 */
#include "mount.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/apps/builtin.h"
#include "scope.h"

int mount_prefix_matches(const char *prefix, size_t plen, const char *path, size_t len)
{
    if (len < plen || memcmp(prefix, path, plen) != 0)
        return 0;
    return len == plen || path[plen] == '/'; /* "/static" covers "/static/x", not "/staticx" */
}

size_t mount_match(const mount_table *t, const char *path, size_t len)
{
    /* Entries are sorted longest first: the first match is the longest. */
    for (size_t i = 1; i < t->n; i++)
        if (mount_prefix_matches(t->v[i].prefix, t->v[i].len, path, len))
            return i;
    return 0;
}

static void mount_handle(pagi_scope *s, void *instance)
{
    mount_table *t = instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        mount_lifespan_run(s, t); /* every app of the table gets its own */
        return;
    }
    pagi_str p = pagi_scope_path(s);
    size_t i = mount_match(t, p.ptr, p.len);
    if (i)
        scope_set_mount(s, t->v[i].len);
    t->v[i].h.app->handle(s, t->v[i].instance);
}

static const pagi_app mount_app = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "mounts",
    .handle = mount_handle,
};

static int entry_load(mount_entry *e, const pagid_static_opts *so, const pagid_pubsub *ps,
                      pagi_loop *loop, char *err, size_t errlen)
{
    if (app_registry_load(e->spec, &e->h, err, errlen) < 0)
        return -1;
    const char *cerr = NULL;
    if (e->h.app == &app_static) {
        static_options o = {.listing = so->listing,
                            .follow_symlinks = so->follow_symlinks,
                            .cache_entries = so->cache_entries,
                            .cache_bytes = so->cache_bytes,
                            .cache_valid = so->cache_valid};
        e->instance = static_app_create(e->h.arg, &o, loop, &cerr);
    } else if (e->h.app == &app_pubsub) {
        e->instance = pubsub_app_create(ps->allowed_origins, ps->n_allowed_origins, loop, &cerr);
    } else if (e->h.app->create) {
        e->instance = e->h.app->create(e->h.arg, loop, &cerr);
    } else {
        return 0;
    }
    if (cerr) {
        snprintf(err, errlen, "app %s failed to start: %s", e->spec, cerr);
        return -1;
    }
    e->created = 1;
    return 0;
}

static int by_length_desc(const void *a, const void *b)
{
    const mount_entry *x = a, *y = b;
    return (x->len < y->len) - (x->len > y->len);
}

int mount_table_load(mount_table *t, const pagid_config *cfg, pagi_loop *loop, char *err,
                     size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->v = calloc(cfg->n_mounts + 1, sizeof *t->v);
    if (!t->v) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->v[0].prefix = "";
    t->v[0].spec = cfg->app;
    for (size_t i = 0; i < cfg->n_mounts; i++) {
        t->v[i + 1].prefix = cfg->mounts[i].path;
        t->v[i + 1].len = strlen(cfg->mounts[i].path);
        t->v[i + 1].spec = cfg->mounts[i].app;
    }
    /* Create in config order (top-level app first), so logs read like the file. */
    for (size_t i = 0; i <= cfg->n_mounts; i++) {
        const pagid_static_opts *so = i ? &cfg->mounts[i - 1].static_opts : &cfg->app_static;
        t->n = i + 1;
        if (entry_load(&t->v[i], so, &cfg->pubsub, loop, err, errlen) < 0)
            return -1;
    }
    if (t->n > 2)
        qsort(t->v + 1, t->n - 1, sizeof *t->v, by_length_desc);
    return 0;
}

void mount_table_install(mount_table *t, worker_ctx *w)
{
    if (t->n == 1) {
        w->app = t->v[0].h.app; /* nothing mounted: no dispatch on the request path */
        w->app_instance = t->v[0].instance;
    } else {
        w->app = &mount_app;
        w->app_instance = t;
    }
}

void mount_table_free(mount_table *t)
{
    for (size_t i = t->n; i-- > 0;) {
        mount_entry *e = &t->v[i];
        if (e->created && e->instance && e->h.app->destroy)
            e->h.app->destroy(e->instance);
        app_registry_unload(&e->h);
    }
    free(t->v);
    memset(t, 0, sizeof *t);
}
