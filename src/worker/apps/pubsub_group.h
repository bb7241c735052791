/*
 * pubsub_group.h - the `pubsub` built-in's group mode (?policy=...): its
 * clients are members of pagi_easy groups fed from their channel.
 */
#ifndef PAGID_APPS_PUBSUB_GROUP_H
#define PAGID_APPS_PUBSUB_GROUP_H

#include <pagi/pagi_easy.h>

/** The app instance's groups, one per channel and policy; NULL on OOM. */
typedef struct ps_groups ps_groups;
ps_groups *ps_groups_new(void);
/** Free every group (members are closed with 1001, subscriptions end). */
void ps_groups_free(ps_groups *t);

/** The policy a query asks for: a pagi_group_policy, 0 for none, -1 for an unknown one. */
int ps_group_policy(pagi_str query);

/** Hand s (a websocket or sse scope on /channel) to channel's group of that policy. */
void ps_group_handle(ps_groups *t, pagi_scope *s, const char *channel, pagi_group_policy policy);

#endif
