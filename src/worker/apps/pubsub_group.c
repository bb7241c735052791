/*
 * pubsub_group.c - the `pubsub` built-in's ?policy=conflate|drop|disconnect
 * mode: websocket and sse clients of /CHANNEL join a pagi_easy group fed from
 * CHANNEL (pagi_group_subscribe), one group per channel and policy in the
 * worker, so a client that does not read gets the group's policy.
 */
#include "pubsub_group.h"

#include <pagi/pagi_easy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One group per (channel, policy) that has had a member since the last sweep. */
typedef struct ps_group {
    struct ps_group *next;
    pagi_group *g;
    pagi_group_policy policy;
    char channel[PAGI_CHANNEL_MAX + 1];
} ps_group;

struct ps_groups {
    ps_group *head;
};

ps_groups *ps_groups_new(void)
{
    return calloc(1, sizeof(ps_groups));
}

void ps_groups_free(ps_groups *t)
{
    if (t == NULL)
        return;
    while (t->head != NULL) {
        ps_group *e = t->head;
        t->head = e->next;
        pagi_group_free(e->g); /* ends its subscription too */
        free(e);
    }
    free(t);
}

int ps_group_policy(pagi_str query)
{
    const char *p = query.ptr, *end = query.ptr + query.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        size_t n = (size_t)((amp ? amp : end) - p);
        if (n > 7 && memcmp(p, "policy=", 7) == 0) {
            pagi_str v = {p + 7, n - 7};
            if (v.len == 8 && memcmp(v.ptr, "conflate", 8) == 0)
                return PAGI_GROUP_CONFLATE;
            if (v.len == 4 && memcmp(v.ptr, "drop", 4) == 0)
                return PAGI_GROUP_DROP;
            if (v.len == 10 && memcmp(v.ptr, "disconnect", 10) == 0)
                return PAGI_GROUP_DISCONNECT;
            return -1;
        }
        p += n + 1;
    }
    return 0;
}

/* Groups left empty are freed when the next client comes: the table holds
 * at most the groups in use then, whatever names clients try. */
static void sweep(ps_groups *t)
{
    for (ps_group **pp = &t->head; *pp != NULL;) {
        ps_group *e = *pp;
        if (pagi_group_size(e->g) == 0) {
            *pp = e->next;
            pagi_group_free(e->g);
            free(e);
        } else {
            pp = &e->next;
        }
    }
}

static ps_group *group_for(ps_groups *t, pagi_scope *s, const char *channel,
                           pagi_group_policy policy)
{
    for (ps_group *e = t->head; e != NULL; e = e->next)
        if (e->policy == policy && strcmp(e->channel, channel) == 0)
            return e;
    ps_group *e = calloc(1, sizeof *e);
    if (e == NULL || (e->g = pagi_group_new(policy)) == NULL) {
        free(e);
        return NULL;
    }
    e->policy = policy;
    snprintf(e->channel, sizeof e->channel, "%s", channel);
    if (pagi_group_subscribe(e->g, s, channel, NULL) < 0) {
        pagi_group_free(e->g);
        free(e);
        return NULL;
    }
    e->next = t->head;
    t->head = e;
    return e;
}

/* A member's websocket text message is published on the group's channel. */
static void on_member_message(pagi_group *g, pagi_scope *member, pagi_str msg, int is_text,
                              void *ud)
{
    (void)g;
    ps_group *e = ud;
    if (is_text && pagi_publish(member, e->channel, msg.ptr, msg.len) < 0)
        pagi_log(pagi_scope_loop(member), PAGI_LOG_WARN, "pubsub: %s", pagi_scope_error(member));
}

void ps_group_handle(ps_groups *t, pagi_scope *s, const char *channel, pagi_group_policy policy)
{
    pagi_scope_type type = pagi_scope_type_of(s);
    if (type != PAGI_SCOPE_WEBSOCKET && type != PAGI_SCOPE_SSE) {
        pagi_scope_finish(s, "pubsub: ?policy= is for a websocket or an sse stream");
        return;
    }
    if (t == NULL) {
        pagi_scope_finish(s, "pubsub: out of memory");
        return;
    }
    sweep(t);
    ps_group *e = group_for(t, s, channel, policy);
    if (e == NULL) {
        const char *err = pagi_scope_error(s);
        pagi_scope_finish(s, err ? err : "pubsub: out of memory");
        return;
    }
    /* Members' messages are published by ud's channel: e outlives them,
     * since a group is freed only once it has none (or with the app). */
    if (pagi_group_join(e->g, s, on_member_message, e) < 0)
        return; /* s is finished; an empty group goes at the next sweep */
    int is_worker = 0, num = pagi_scope_worker_num(s, &is_worker);
    char hello[32];
    int n = snprintf(hello, sizeof hello, "worker %d", is_worker ? num : 0);
    pagi_group_send_to(e->g, s, NULL, hello, (size_t)n);
}
