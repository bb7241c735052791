/*
 * manysubs.c - a module that subscribes, at lifespan startup, to N channels
 * of LEN bytes (create argument "N:LEN"; channel i is "ch" + i, padded with
 * '.' to LEN bytes) and answers GET with "COUNT CHANNEL MESSAGE" for what it
 * last heard: many long channels from one process, cheaply, for the Redis
 * backend's resubscription test (test_pubsub_redis_bounds.py).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagi/pagi.h"

typedef struct state {
    unsigned n, len;
    unsigned long count;
    char last[PAGI_CHANNEL_MAX + 1];
    char msg[256];
} state;

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)loop;
    state *st = calloc(1, sizeof *st);
    if (!st) {
        *err = "out of memory";
        return NULL;
    }
    if (!arg || sscanf(arg, "%u:%u", &st->n, &st->len) != 2 || st->len < 8 ||
        st->len > PAGI_CHANNEL_MAX) {
        free(st);
        *err = "manysubs: the argument is N:LEN (8 <= LEN <= 255)";
        return NULL;
    }
    return st;
}

static void destroy(void *instance)
{
    free(instance);
}

static void on_message(pagi_subscription *sub, pagi_str channel, const void *data, size_t len,
                       void *ud)
{
    (void)sub;
    state *st = ud;
    st->count++;
    memcpy(st->last, channel.ptr, channel.len);
    st->last[channel.len] = 0;
    size_t n = len < sizeof st->msg - 1 ? len : sizeof st->msg - 1;
    memcpy(st->msg, data, n);
    st->msg[n] = 0;
}

static void name_of(const state *st, unsigned i, char *out)
{
    int k = snprintf(out, PAGI_CHANNEL_MAX + 1, "ch%u", i);
    memset(out + k, '.', st->len - (unsigned)k);
    out[st->len] = 0;
}

static void lifespan_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    state *st = ud;
    if (ev->type == PAGI_EV_LIFESPAN_STARTUP) {
        char ch[PAGI_CHANNEL_MAX + 1];
        for (unsigned i = 0; i < st->n; i++) {
            name_of(st, i, ch);
            if (!pagi_subscribe(s, ch, on_message, st)) {
                pagi_scope_finish(s, pagi_scope_error(s));
                return;
            }
        }
        pagi_event out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP_COMPLETE);
        if (pagi_send(s, &out, NULL, NULL) != 0 || pagi_receive(s, lifespan_recv, st) != 0)
            pagi_scope_finish(s, NULL);
        return;
    }
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
    pagi_send(s, &out, NULL, NULL);
    pagi_scope_finish(s, NULL);
}

static void handle(pagi_scope *s, void *instance)
{
    state *st = instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        if (pagi_receive(s, lifespan_recv, st) != 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "manysubs serves http only");
        return;
    }
    char body[PAGI_CHANNEL_MAX + 300];
    int n = snprintf(body, sizeof body, "%lu %s %s", st->count, st->last, st->msg);
    pagi_header h[] = {{{"content-type", 12}, {"text/plain", 10}}};
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = h;
    start.header_count = 1;
    pagi_event b = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    b.body = (pagi_str){body, (size_t)n};
    if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &b, NULL, NULL) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
    else
        pagi_scope_finish(s, NULL);
}

const pagi_app pagi_module = PAGI_APP_INIT("manysubs", create, handle, destroy);
