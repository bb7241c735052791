/*
 * config_yaml_app.c - the YAML loader's `app` key (a spec string, or a
 * mapping such as {static: DIR, listing: true}) and the `mounts` list, each
 * problem reported with its FILE:LINE:COLUMN like the rest of the loader.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_suggest.h"
#include "config_yaml_int.h"
#include "strtab.h"

/* YAML 1.1 booleans, as people write them. */
int parse_bool(load_ctx *x, const ynode *n, const char *path, int *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                     "NO",    "off",   "Off",   "OFF"};
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return -1;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcmp(s, yes[i]) || !strcmp(s, no[i])) {
            *out = !strcmp(s, yes[i]);
            return 0;
        }
    }
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off", NULL};
    const char *near = config_suggest_among(s, strlen(s), words);
    if (near)
        report(x, n, "'%s' must be true or false, not '%s' (did you mean '%s'?)", path,
               printable(n, shown, sizeof shown), near);
    else
        report(x, n, "'%s' must be true or false, not '%s'", path,
               printable(n, shown, sizeof shown));
    return -1;
}

void set_preload(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    (void)k;
    int on;
    if (parse_bool(x, n, path, &on) == 0)
        x->c->preload = on;
}

void set_debug(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    (void)k;
    int on;
    if (parse_bool(x, n, path, &on) == 0)
        x->c->debug = on;
}

/*
 * Add one @INC directory to the load's perl_lib (config_yaml_load.c joins it
 * to the config at the end). A directory already there is skipped: it adds
 * nothing to @INC, and lists repeated through aliases would otherwise make
 * the string grow with the product of their sizes.
 */
static int add_perl_lib(load_ctx *x, const ynode *n, const char *path)
{
    const char *dir = scalar(x, n, path);
    if (!dir)
        return -1;
    if (!*dir || strchr(dir, ':')) {
        report(x, n, "'%s' entries must be non-empty directories without ':'", path);
        return -1;
    }
    load_state *st = x->st;
    int added;
    if (!strtab_get(&st->lib_seen, dir, strlen(dir), 1, &added) ||
        (added && buf_printf(&st->perl_lib, "%s%s", buf_size(&st->perl_lib) ? ":" : "", dir))) {
        report(x, n, "out of memory");
        return -1;
    }
    return 0;
}

/*
 * What this file's app mappings and lib lists came to, by node, so that an
 * alias of one is not worked out again: a generated config aliases one app
 * thousands of times, each with a list of lib directories to look up. Only
 * anchored nodes (the only ones aliases share) and successes are kept; a
 * failing node is parsed (and reported) at each use.
 */
typedef struct app_done {
    char *spec;
    pagid_static_opts opts;
} app_done;

struct app_memo {
    strtab apps; /* app mapping node -> 1 + index in done */
    app_done *done;
    size_t n_done, cap_done;
    strtab libs; /* lib lists whose directories are all in perl_lib */
};

void app_memo_free(load_ctx *x)
{
    struct app_memo *m = x->app_memo;
    if (!m)
        return;
    for (size_t i = 0; i < m->n_done; i++)
        free(m->done[i].spec);
    free(m->done);
    strtab_free(&m->apps);
    strtab_free(&m->libs);
    free(m);
    x->app_memo = NULL;
}

/* x's memo, made on first use; NULL when out of memory (which only costs the memo). */
static struct app_memo *memo(load_ctx *x)
{
    if (!x->app_memo)
        x->app_memo = calloc(1, sizeof *x->app_memo);
    return x->app_memo;
}

/* Node n's value in t, a table of the memo; NULL when absent (with add: out of memory). */
static size_t *node_slot(const load_ctx *x, strtab *t, const ynode *n, int add)
{
    size_t node = ydoc_index(x->doc, n);
    return strtab_get(t, (const char *)&node, sizeof node, add, NULL);
}

/* lib: a directory or a list of them, added to the Perl app's @INC. */
static int parse_perl_lib(load_ctx *x, const ynode *n, const char *path)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return add_perl_lib(x, n, path);
    if (x->app_memo && node_slot(x, &x->app_memo->libs, n, 0))
        return 0; /* an alias of a list already added */
    int rc = 0;
    for (size_t i = 0; i < n->len; i++) {
        if (add_perl_lib(x, item_at(x, n, i), path) < 0)
            rc = -1;
    }
    if (rc == 0 && (n->flags & YNODE_ANCHORED) && memo(x))
        node_slot(x, &x->app_memo->libs, n, 1);
    return rc;
}

/* "path.name" into out (cut short like snprintf): the name of a key for its
 * messages, made for every app mapping, where snprintf was a cost of its own. */
static const char *key_path(char *out, size_t outlen, const char *path, const char *name)
{
    size_t plen = strlen(path), nlen = strlen(name), j = 0;
    for (size_t i = 0; i < plen && j + 1 < outlen; i++)
        out[j++] = path[i];
    if (j + 1 < outlen)
        out[j++] = '.';
    for (size_t i = 0; i < nlen && j + 1 < outlen; i++)
        out[j++] = name[i];
    out[j] = '\0';
    return out;
}

/* A static app's cache_entries (a count), cache_bytes (a size) or cache_valid
 * (a duration); 0, or -1 after reporting. */
static int parse_cache_option(load_ctx *x, const char *name, const ynode *n, const char *path,
                              pagid_static_opts *opts)
{
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return -1;
    if (!strcmp(name, "cache_valid")) {
        if (config_parse_duration(s, &opts->cache_valid) == 0)
            return 0;
        report(x, n,
               "invalid duration '%s' for '%s' (expected e.g. 500ms, 1s, 1m; 0 checks "
               "every request)",
               printable(n, shown, sizeof shown), path);
        return -1;
    }
    size_t v;
    int entries = !strcmp(name, "cache_entries");
    if (!entries && strcmp(name, "cache_bytes") != 0) {
        report(x, n, "unknown key '%s' (expected cache_entries, cache_bytes or cache_valid)", path);
        return -1;
    }
    /* A count is a size without a suffix: the same parser, then the stricter look. */
    if (config_parse_size(s, &v) < 0 || (entries && strspn(s, "0123456789") != strlen(s))) {
        report(x, n,
               entries ? "invalid number '%s' for '%s' (expected a whole number; 0 = no cache)"
                       : "invalid size '%s' for '%s' (expected e.g. 0, 512k, 8m)",
               printable(n, shown, sizeof shown), path);
        return -1;
    }
    if (entries && v > 1000000) {
        report(x, n, "'%s' must be at most 1000000", path);
        return -1;
    }
    *(entries ? &opts->cache_entries : &opts->cache_bytes) = v;
    return 0;
}

/* The mapping form: {static: DIR [, listing: BOOL] [, follow_symlinks: BOOL]},
 * {module: PATH [, arg: STRING]}, {perl: FILE [, lib: DIRS]} or
 * {psgi: FILE [, lib: DIRS]}. */
static int parse_app_mapping(load_ctx *x, const ynode *n, const char *path, char **spec,
                             pagid_static_opts *opts, const ynode **at)
{
    const ynode *kind_key = NULL, *kind_val = NULL, *opt_key = NULL, *lib_key = NULL,
                *lib_val = NULL, *arg_key = NULL, *arg_val = NULL, *pool_key = NULL,
                *pool_val = NULL;
    char shown[80], sub[96];
    int bad = 0;
    for (size_t p = 0; p < n->len; p++) {
        const ynode *key = key_at(x, n, p), *val = value_at(x, n, p);
        const char *name = scalar(x, key, "app key");
        if (!name) {
            bad = 1;
            continue;
        }
        if (!strcmp(name, "static") || !strcmp(name, "module") || !strcmp(name, "perl") ||
            !strcmp(name, "psgi")) {
            if (kind_key) {
                report(x, n, "'%s' as a mapping takes exactly one of static, module, perl or psgi",
                       path);
                return -1;
            }
            kind_key = key;
            kind_val = val;
        } else if (!strcmp(name, "listing") || !strcmp(name, "follow_symlinks")) {
            key_path(sub, sizeof sub, path, name);
            opt_key = key;
            if (parse_bool(x, val, sub, name[0] == 'l' ? &opts->listing : &opts->follow_symlinks))
                bad = 1;
        } else if (!strcmp(name, "cache_entries") || !strcmp(name, "cache_bytes") ||
                   !strcmp(name, "cache_valid")) {
            key_path(sub, sizeof sub, path, name);
            opt_key = key;
            if (parse_cache_option(x, name, val, sub, opts) < 0)
                bad = 1;
        } else if (!strcmp(name, "lib")) {
            lib_key = key;
            lib_val = val;
        } else if (!strcmp(name, "arg")) {
            arg_key = key;
            arg_val = val;
        } else if (!strcmp(name, "worker_pool")) {
            pool_key = key;
            pool_val = val;
        } else {
            static const char *const keys[] = {
                "static",      "module",          "perl", "psgi",          "listing",
                "arg",         "follow_symlinks", "lib",  "cache_entries", "cache_bytes",
                "cache_valid", "worker_pool",     NULL};
            const char *near = config_suggest_among(name, strlen(name), keys);
            if (near)
                report(x, key, "unknown key '%s' in '%s' (did you mean '%s'?)",
                       printable(key, shown, sizeof shown), path, near);
            else
                report(x, key,
                       "unknown key '%s' in '%s' (expected static, module, perl, psgi, listing, "
                       "follow_symlinks, cache_entries, cache_bytes, cache_valid, lib, arg or "
                       "worker_pool)",
                       printable(key, shown, sizeof shown), path);
            bad = 1;
        }
    }
    if (!kind_key) {
        if (!bad)
            report(x, n, "'%s' as a mapping takes exactly one of static, module, perl or psgi",
                   path);
        return -1;
    }
    const char *kind = kind_key->value;
    int is_static = !strcmp(kind, "static");
    if (!is_static && opt_key) {
        report(x, opt_key, "'%s.%s' applies to static apps only", path, opt_key->value);
        bad = 1;
    }
    if (lib_key) {
        key_path(sub, sizeof sub, path, "lib");
        if (strcmp(kind, "perl") != 0 && strcmp(kind, "psgi") != 0) {
            report(x, lib_key, "'%s' applies to perl apps only", sub);
            bad = 1;
        } else if (parse_perl_lib(x, lib_val, sub) < 0) {
            bad = 1;
        }
    }
    if (pool_key) {
        key_path(sub, sizeof sub, path, "worker_pool");
        if (strcmp(kind, "perl") != 0 && strcmp(kind, "psgi") != 0) {
            report(x, pool_key, "'%s' applies to perl and psgi apps only", sub);
            bad = 1;
        } else if (strcmp(path, "app") != 0) {
            report(x, pool_key,
                   "'%s': the worker pool serves every PSGI app of the config, mounted ones "
                   "too; size it with the top-level 'worker_pool' (or app.worker_pool)",
                   sub);
            bad = 1;
        } else if (parse_worker_pool(x, pool_val, sub, kind, &x->st->pool) < 0) {
            bad = 1;
        } else {
            x->st->pool_set = 1;
        }
    }
    const char *arg = NULL;
    if (arg_key) {
        key_path(sub, sizeof sub, path, "arg");
        if (strcmp(kind, "module") != 0) {
            report(x, arg_key, "'%s' applies to module apps only", sub);
            bad = 1;
        } else if (!(arg = scalar(x, arg_val, sub))) {
            bad = 1;
        }
    }
    key_path(sub, sizeof sub, path, kind);
    const char *s = scalar(x, kind_val, sub);
    if (!s || bad)
        return -1;
    if (arg) {
        /* Carried as PATH.so:ARG, the command line's form. */
        size_t slen = strlen(s);
        if (config_module_path_len(s) != slen) {
            report(x, kind_val, "'%s' with an arg must name a .so module (PATH.so)", sub);
            return -1;
        }
        *at = kind_val;
        if ((*spec = malloc(slen + strlen(arg) + 2)))
            sprintf(*spec, "%s:%s", s, arg);
        return 0;
    }
    *at = kind_val;
    if (!strcmp(kind, "perl") && config_perl_app_kind(s) != CONFIG_PERL_PAGI) {
        report(x, kind_val, "'%s' must name a PAGI Perl app file (.pl)", sub);
        return -1;
    }
    /* The spec carries the kind by its extension, as -a FILE.psgi does
     * (plackup's rule), so the file must have it. */
    if (!strcmp(kind, "psgi") && config_perl_app_kind(s) != CONFIG_PERL_PSGI) {
        report(x, kind_val, "'%s' must name a PSGI app file (.psgi)", sub);
        return -1;
    }
    if (!is_static) {
        *spec = strdup(s);
    } else if ((*spec = malloc(strlen(s) + 8))) {
        sprintf(*spec, "static:%s", s);
    }
    return 0;
}

/* Keep what app mapping n came to, for its aliases (out of memory: not kept). */
static void remember_app(load_ctx *x, const ynode *n, const char *spec,
                         const pagid_static_opts *opts)
{
    struct app_memo *m = memo(x);
    if (!m)
        return;
    if (m->n_done == m->cap_done) {
        size_t cap = m->cap_done ? 2 * m->cap_done : 16;
        app_done *grown = realloc(m->done, cap * sizeof *grown);
        if (!grown)
            return;
        m->done = grown;
        m->cap_done = cap;
    }
    char *copy = strdup(spec);
    size_t *slot = copy ? node_slot(x, &m->apps, n, 1) : NULL;
    if (!slot) {
        free(copy);
        return;
    }
    m->done[m->n_done] = (app_done){copy, *opts};
    *slot = ++m->n_done;
}

/*
 * An app value: a spec, or the mapping form. On success *spec is allocated
 * and has passed config_check_app; 0, or -1 after reporting.
 */
static int parse_app(load_ctx *x, const ynode *n, const char *path, char **spec,
                     pagid_static_opts *opts)
{
    char msg[512];
    const ynode *at = n;
    config_static_opts_init(opts);
    *spec = NULL;
    size_t *done =
        n->type == YAML_MAPPING_NODE && x->app_memo ? node_slot(x, &x->app_memo->apps, n, 0) : NULL;
    if (done) {
        const app_done *d = &x->app_memo->done[*done - 1];
        *opts = d->opts;
        if (!(*spec = strdup(d->spec))) {
            report(x, n, "out of memory");
            return -1;
        }
        return 0;
    }
    if (n->type == YAML_MAPPING_NODE) {
        if (parse_app_mapping(x, n, path, spec, opts, &at) < 0)
            return -1;
    } else {
        const char *s = scalar(x, n, path);
        if (!s)
            return -1;
        *spec = strdup(s);
    }
    if (!*spec) {
        report(x, at, "out of memory");
        return -1;
    }
    /* Generated configs mount one app file under many paths: look at it once. */
    size_t *checked = strtab_get(&x->st->apps_ok, *spec, strlen(*spec), 0, NULL);
    if (!checked && config_check_app(*spec, msg, sizeof msg) < 0) {
        report(x, at, "%s", msg);
        free(*spec);
        *spec = NULL;
        return -1;
    }
    if (!checked && !strtab_get(&x->st->apps_ok, *spec, strlen(*spec), 1, NULL)) {
        report(x, at, "out of memory");
        free(*spec);
        *spec = NULL;
        return -1;
    }
    if (n->type == YAML_MAPPING_NODE && (n->flags & YNODE_ANCHORED))
        remember_app(x, n, *spec, opts);
    return 0;
}

void set_app(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    char *spec;
    pagid_static_opts opts;
    const char *m;
    if (parse_app(x, n, path, &spec, &opts) < 0)
        return;
    /* config_set_app drops the pool (another app from -a does not inherit
     * it); a top-level worker_pool written before app: must stay. */
    pagid_pool top = x->c->worker_pool;
    x->c->worker_pool = (pagid_pool){0};
    if (config_set_app(x->c, spec, &m) < 0) {
        report(x, n, "%s", m);
        x->c->worker_pool = top;
    } else {
        x->c->app_static = opts;
        x->c->worker_pool = top;
        if (x->st->pool_set && top.set) {
            report(x, n,
                   "'app.worker_pool' and the top-level 'worker_pool' are one pool: set "
                   "it once");
            free(x->st->pool.handlers);
        } else if (x->st->pool_set) { /* the mapping's worker_pool: the config owns it now */
            x->c->worker_pool = x->st->pool;
        }
        x->st->pool = (pagid_pool){0};
        x->st->pool_set = 0;
    }
    free(spec);
}

void set_worker_pool(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    (void)k;
    pagid_pool pool;
    if (parse_worker_pool(x, n, path, "top", &pool) < 0)
        return;
    if (x->c->worker_pool.set) {
        report(x, n, "'app.worker_pool' and the top-level 'worker_pool' are one pool: set it once");
        free(pool.handlers);
        return;
    }
    free(x->c->worker_pool.handlers);
    x->c->worker_pool = pool;
}

/* mounts: a list of {path: /prefix, app: SPEC or mapping form}. */
static void add_mount(load_ctx *x, const ynode *item)
{
    const ynode *pnode = NULL, *anode = NULL;
    char shown[80];
    for (size_t p = 0; p < item->len; p++) {
        const ynode *key = key_at(x, item, p), *val = value_at(x, item, p);
        const char *name = scalar(x, key, "mounts key");
        if (!name)
            return;
        const ynode **slot = !strcmp(name, "path") ? &pnode : !strcmp(name, "app") ? &anode : NULL;
        if (!slot) {
            static const char *const keys[] = {"path", "app", NULL};
            const char *near = config_suggest_among(name, strlen(name), keys);
            if (near)
                report(x, key, "unknown key '%s' in a 'mounts' entry (did you mean '%s'?)",
                       printable(key, shown, sizeof shown), near);
            else
                report(x, key, "unknown key '%s' in a 'mounts' entry (expected path and app)",
                       printable(key, shown, sizeof shown));
            return;
        }
        if (*slot) {
            report(x, key, "duplicate key '%s' in a 'mounts' entry", name);
            return;
        }
        *slot = val;
    }
    if (!pnode || !anode) {
        report(x, item, "a 'mounts' entry needs both path and app");
        return;
    }
    const char *path = scalar(x, pnode, "mounts.path");
    char *spec;
    pagid_static_opts opts;
    const char *msg;
    if (!path || parse_app(x, anode, "mounts.app", &spec, &opts) < 0)
        return;
    if (config_add_mount(x->c, path, spec, &opts, &msg) < 0)
        report(x, pnode, "mount path '%s' %s", printable(pnode, shown, sizeof shown), msg);
    free(spec);
}

void set_mounts(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    if (is_null(n))
        return;
    if (n->type != YAML_SEQUENCE_NODE) {
        report(x, n, "'%s' must be a list of {path, app} mappings, not %s", path, kind_name(n));
        return;
    }
    if (config_reserve_mounts(x->c, n->len) < 0) {
        report(x, n, "out of memory");
        return;
    }
    for (size_t i = 0; i < n->len; i++) {
        const ynode *item = item_at(x, n, i);
        if (item->type != YAML_MAPPING_NODE) {
            report(x, item, "each entry of '%s' must be a mapping with path and app, not %s", path,
                   kind_name(item));
            continue;
        }
        add_mount(x, item);
    }
}
