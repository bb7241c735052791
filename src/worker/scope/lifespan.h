/*
 * lifespan.h - the per-worker lifespan scope: lifespan.startup before the
 * worker accepts, lifespan.shutdown when it stops, and the app's answer.
 */
#ifndef PAGID_LIFESPAN_H
#define PAGID_LIFESPAN_H

#include "worker/worker_ctx.h"

typedef enum lifespan_outcome {
    LIFESPAN_OK,          /* startup.complete, or the app declined lifespan */
    LIFESPAN_FAILED,      /* startup.failed, or the startup timeout */
} lifespan_outcome;

typedef void (*lifespan_done_fn)(worker_ctx *w, lifespan_outcome outcome, const char *message);

/** Start the lifespan scope and send lifespan.startup; done runs once (from the loop). */
int lifespan_start(worker_ctx *w, lifespan_done_fn done);
/** Send lifespan.shutdown (if lifespan is supported); done runs once. */
void lifespan_stop(worker_ctx *w, void (*done)(worker_ctx *w));
/** Free what is left (worker exit). */
void lifespan_free(worker_ctx *w);

#endif
