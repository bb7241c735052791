/*
 * metrics.h - the built-in app behind status.listen: Prometheus text
 * exposition of the shared region (every worker's counters summed). It is
 * reachable only there: http1_conn.c hands it the requests of status
 * connections instead of the configured app, and it is not in the registry.
 */
#ifndef PAGID_APP_METRICS_H
#define PAGID_APP_METRICS_H

#include <pagi/pagi.h>

#include "common/buf.h"

struct shm_region;

/** handle(scope, worker_ctx *): GET/HEAD status.path -> 200, else 404/405. */
extern const pagi_app app_metrics;

/** Append the exposition text for r (NULL: no shared region, single-process mode). */
int metrics_render(buf *out, const struct shm_region *r);

struct pagid_shared_dict;
/** Append the families of the n shared dictionaries (pagid_shared_dict_*); none when n is 0. */
void metrics_render_shdicts(buf *out, const struct pagid_shared_dict *dicts, size_t n);

#endif
