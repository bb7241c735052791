/*
 * pubsub.h - a worker's side of publish/subscribe (docs/pubsub.md): local
 * channels and subscriptions, and the stream to the master's broker.
 */
#ifndef PAGID_WORKER_PUBSUB_H
#define PAGID_WORKER_PUBSUB_H

#include <pagi/pagi.h>

#include "worker/worker_ctx.h"

typedef struct pubsub pubsub;

/** The worker's pub/sub; fd is its channel to the master (taken), or -1: local only. */
pubsub *pubsub_new(worker_ctx *w, int fd);
/** Free; every subscription must be gone (scopes released, apps destroyed). */
void pubsub_free(pubsub *ps);
/**
 * s is being released: its subscriptions end (before the app's release
 * callback: no message reaches it), but stay valid handles during that
 * callback, where pagi_unsubscribe on them is a no-op.
 */
void pubsub_scope_released(pagi_scope *s);
/** After the release callback: free what pubsub_scope_released ended. */
void pubsub_scope_free_subs(pagi_scope *s);
/**
 * pagi_subscribe, but the subscription belongs to no scope: s (any live
 * scope of this worker) only gives the worker and takes the error. It ends
 * with pagi_unsubscribe only, which the caller owes before the app is
 * destroyed (pagi_easy's groups fed from a channel: the group owns it).
 */
pagi_subscription *pubsub_subscribe_owned(pagi_scope *s, const char *channel, pagi_message_cb cb,
                                          void *ud);

#endif
