/*
 * config_yaml_pool.c - the YAML loader's `worker_pool:` mapping (of the
 * top-level app, or at the top level): processes, queue_limit, timeout and
 * (PAGI apps) the handlers file, each problem reported at its FILE:LINE:COLUMN.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_suggest.h"
#include "config_yaml_int.h"

/* A whole number in [lo, hi] for key path; 0, or -1 after reporting. */
static int pool_int(load_ctx *x, const ynode *n, const char *path, long lo, long hi, int *out)
{
    const char *s = scalar(x, n, path);
    char shown[80], *end;
    if (!s)
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        report(x, n, "'%s' must be a whole number from %ld to %ld, not '%s'", path, lo, hi,
               printable(n, shown, sizeof shown));
        return -1;
    }
    *out = (int)v;
    return 0;
}

int parse_worker_pool(load_ctx *x, const ynode *n, const char *path, const char *kind,
                      pagid_pool *out)
{
    static const char *const keys[] = {"processes", "queue_limit", "timeout", "handlers", NULL};
    char shown[80], sub[128];
    int bad = 0;
    *out = (pagid_pool){.processes = config_pool_default_processes(),
                        .set = 1,
                        .queue_limit = CONFIG_POOL_DEFAULT_QUEUE,
                        .timeout = CONFIG_POOL_DEFAULT_TIMEOUT};
    if (n->type == YAML_SCALAR_NODE && is_null(n))
        return 0; /* worker_pool: (the defaults) */
    if (n->type != YAML_MAPPING_NODE) {
        report(x, n, "'%s' must be a mapping ({processes: N, queue_limit: M, ...}), not %s", path,
               kind_name(n));
        return -1;
    }
    for (size_t p = 0; p < n->len; p++) {
        const ynode *key = key_at(x, n, p), *val = value_at(x, n, p);
        const char *name = scalar(x, key, "worker_pool key");
        if (!name) {
            bad = 1;
            continue;
        }
        snprintf(sub, sizeof sub, "%s.%s", path, name);
        if (!strcmp(name, "processes")) {
            bad |= pool_int(x, val, sub, 0, CONFIG_POOL_MAX_PROCESSES, &out->processes) < 0;
        } else if (!strcmp(name, "queue_limit")) {
            bad |= pool_int(x, val, sub, 0, 1000000, &out->queue_limit) < 0;
        } else if (!strcmp(name, "timeout")) {
            const char *s = scalar(x, val, sub);
            if (!s || config_parse_duration(s, &out->timeout) < 0) {
                if (s)
                    report(x, val,
                           "invalid duration '%s' for '%s' (expected e.g. 500ms, 30s; 0 = "
                           "no limit)",
                           printable(val, shown, sizeof shown), sub);
                bad = 1;
            }
        } else if (!strcmp(name, "handlers")) {
            const char *s = scalar(x, val, sub);
            if (!s) {
                bad = 1;
            } else if (strcmp(kind, "perl") != 0) {
                report(x, key,
                       "'%s' applies to a perl (PAGI) app's own worker_pool only (app: {perl: "
                       "FILE, worker_pool: ...}): a PSGI app runs whole in the pool",
                       sub);
                bad = 1;
            } else if (access(s, R_OK) < 0) {
                report(x, val, "handlers file '%s': %s", s, strerror(errno));
                bad = 1;
            } else {
                free(out->handlers);
                out->handlers = strdup(s);
            }
        } else {
            const char *near = config_suggest_among(name, strlen(name), keys);
            if (near)
                report(x, key, "unknown key '%s' in '%s' (did you mean '%s'?)",
                       printable(key, shown, sizeof shown), path, near);
            else
                report(x, key,
                       "unknown key '%s' in '%s' (expected processes, queue_limit, "
                       "timeout or handlers)",
                       printable(key, shown, sizeof shown), path);
            bad = 1;
        }
    }
    if (!bad && !strcmp(kind, "perl") && !out->handlers) {
        report(x, n,
               "'%s' of a PAGI app needs 'handlers: FILE' (the named handlers its "
               "processes run)",
               path);
        bad = 1;
    }
    if (bad) {
        free(out->handlers);
        out->handlers = NULL;
        return -1;
    }
    return 0;
}
