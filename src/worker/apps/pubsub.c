/*
 * pubsub.c - the `pubsub` built-in app, a publish/subscribe endpoint for
 * tests and demos: a websocket on /CHANNEL is accepted, sent the text
 * "worker N" (which worker holds it), then every message published on
 * CHANNEL (by any worker); each text message it receives is published on
 * CHANNEL. When the worker drains, the websocket is closed with 1001,
 * unless the query is stay=1 (it then serves until the drain's deadline or
 * its client goes). A client that does not read has messages dropped once
 * its output holds more than MAX_BUFFERED (counted in the worker's
 * pubsub_dropped), so it never grows the worker without bound. With
 * ?policy=conflate|drop|disconnect the client (websocket or sse) joins a
 * broadcast group fed from CHANNEL instead (pubsub_group.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "pubsub_group.h"

/* Not the transport's high-water mark (64 KiB): one loop round may deliver
 * a burst larger than that to a client that reads perfectly well, before
 * the output is flushed at the end of the round. */
#define MAX_BUFFERED (1u << 20)

typedef struct ps_client {
    pagi_subscription *sub;
    int stay; /* ?stay=1: keep serving while the worker drains (tests of a reload) */
    char channel[PAGI_CHANNEL_MAX + 1];
} ps_client;

static void ps_release(pagi_scope *s, void *data)
{
    (void)s;
    free(data); /* the subscription died with the scope, just before */
}

static void ps_on_message(pagi_subscription *sub, pagi_str channel, const void *data, size_t len,
                          void *ud)
{
    (void)channel;
    pagi_scope *s = ud;
    if (!pagi_conn_is_connected(s))
        return;
    if (pagi_transport_buffered_amount(s) > MAX_BUFFERED) {
        pagi_subscription_count_dropped(sub, 1);
        return;
    }
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    out.is_text = 1;
    out.text = (pagi_str){data, len};
    pagi_send(s, &out, NULL, NULL); /* refused only once the client is gone */
}

static void ps_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    ps_client *c = ud;
    pagi_event out;
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_CONNECT: {
        if (pagi_server_draining(s) && !c->stay) {
            pagi_scope_finish(s, NULL);
            return;
        }
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
        if (pagi_send(s, &out, NULL, NULL) < 0)
            break;
        c->sub = pagi_subscribe(s, c->channel, ps_on_message, s);
        if (!c->sub)
            break;
        int is_worker = 0, num = pagi_scope_worker_num(s, &is_worker);
        char hello[32];
        int n = snprintf(hello, sizeof hello, "worker %d", is_worker ? num : 0);
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        out.is_text = 1;
        out.text = (pagi_str){hello, (size_t)n};
        if (pagi_send(s, &out, NULL, NULL) < 0)
            break;
        if (pagi_receive(s, ps_on_event, c) < 0)
            break;
        return;
    }
    case PAGI_EV_WEBSOCKET_RECEIVE:
        if (ev->is_text && (c->stay || !pagi_server_draining(s)) &&
            pagi_publish(s, c->channel, ev->text.ptr, ev->text.len) < 0)
            break;
        if (pagi_receive(s, ps_on_event, c) < 0)
            break;
        return;
    default: /* websocket.disconnect */
        pagi_scope_finish(s, NULL);
        return;
    }
    pagi_scope_finish(s, pagi_scope_error(s));
}

static void ps_on_server_drain(pagi_scope *s, void *ud)
{
    (void)ud;
    pagi_event close = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
    close.code = 1001;
    close.reason = (pagi_str){"server shutting down", 20};
    pagi_send(s, &close, NULL, NULL);
}

static void ps_handle(pagi_scope *s, void *instance)
{
    pagi_str q = pagi_scope_query_string(s);
    int policy = ps_group_policy(q);
    if (policy < 0) {
        pagi_scope_finish(s, "pubsub: the policy is conflate, drop or disconnect");
        return;
    }
    if (policy == 0 && pagi_scope_type_of(s) != PAGI_SCOPE_WEBSOCKET) {
        pagi_scope_finish(s, "pubsub: a websocket endpoint (/CHANNEL)");
        return;
    }
    pagi_str path = pagi_scope_path(s);
    while (path.len && path.ptr[0] == '/') {
        path.ptr++;
        path.len--;
    }
    if (path.len == 0 || path.len > PAGI_CHANNEL_MAX || memchr(path.ptr, 0, path.len)) {
        pagi_scope_finish(s, "pubsub: the path names a channel of 1 to 255 bytes");
        return;
    }
    if (policy > 0) {
        char channel[PAGI_CHANNEL_MAX + 1];
        memcpy(channel, path.ptr, path.len);
        channel[path.len] = 0;
        ps_group_handle(instance, s, channel, (pagi_group_policy)policy);
        return;
    }
    ps_client *c = calloc(1, sizeof *c);
    if (!c) {
        pagi_scope_finish(s, "pubsub: out of memory");
        return;
    }
    pagi_scope_set_userdata(s, c, ps_release);
    memcpy(c->channel, path.ptr, path.len);
    c->stay = q.len == 6 && memcmp(q.ptr, "stay=1", 6) == 0;
    if ((!c->stay && pagi_scope_on_server_drain(s, ps_on_server_drain, NULL) < 0) ||
        pagi_receive(s, ps_on_event, c) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* The instance is the group mode's table (see pubsub_group.h). */
static void *ps_create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)arg;
    (void)loop;
    void *t = ps_groups_new();
    if (!t)
        *err = "pubsub: out of memory";
    return t;
}

static void ps_destroy(void *instance)
{
    ps_groups_free(instance);
}

const pagi_app app_pubsub = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "pubsub",
    .create = ps_create,
    .handle = ps_handle,
    .destroy = ps_destroy,
};
