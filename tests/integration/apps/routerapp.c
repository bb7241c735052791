/*
 * routerapp.c - a module routed by pagi_router (pagi_router(3)), for
 * test_router.py: each route answers with its name, its parameters and the
 * scope's root_path, so a test sees what matched under which mount.
 *   GET /                       "root"
 *   GET, DELETE /polls/:id      "poll ID" / "delete ID"
 *   POST /polls/:id/vote/:k     "vote ID K"
 *   GET /files/ then *path      "file PATH" (the rest of the path)
 *   SSE /feed                   an event stream of one event "feed", then its end
 *   WEBSOCKET /ws/:room         accepts, sends "room ROOM", then echoes until closed
 * Every body ends with " root=ROOT_PATH\n".
 */
#include <pagi/pagi.h>
#include <pagi/pagi_easy.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "what a b root=R\n" answered with 200. */
static void answer(pagi_scope *s, const char *what, pagi_str a, pagi_str b)
{
    char body[8192];
    pagi_str root = pagi_scope_root_path(s);
    int n = snprintf(body, sizeof body, "%s%s%.*s%s%.*s root=%.*s\n", what, a.ptr ? " " : "",
                     (int)a.len, a.ptr ? a.ptr : "", b.ptr ? " " : "", (int)b.len,
                     b.ptr ? b.ptr : "", (int)root.len, root.ptr);
    pagi_respond(s, 200, "text/plain", body, n < (int)sizeof body ? (size_t)n : sizeof body - 1);
}

static const pagi_str none = {NULL, 0};

static void root(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    (void)p;
    (void)ud;
    answer(s, "root", none, none);
}

static void poll(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    answer(s, ud, pagi_route_param(p, "id"), none);
}

static void vote(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    (void)ud;
    answer(s, "vote", pagi_route_param(p, "id"), pagi_route_param(p, "k"));
}

static void file(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    (void)ud;
    answer(s, "file", pagi_route_param(p, "path"), none);
}

/* ---- sse: one event, then the end of the stream ---- */

static void finish_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

static void feed(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    (void)p;
    (void)ud;
    char data[256];
    pagi_str root = pagi_scope_root_path(s);
    int n = snprintf(data, sizeof data, "feed root=%.*s", (int)root.len, root.ptr);
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    start.status = 200;
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = (pagi_str){data, (size_t)n};
    ev.event = PAGI_STR("feed");
    if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &ev, finish_sent, NULL) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* ---- websocket: "room ROOM root=R", then an echo ---- */

static void ws_event(pagi_scope *s, const pagi_event *ev, void *ud);

static void ws_next(pagi_scope *s, const char *err, void *ud)
{
    if (err != NULL || pagi_receive(s, ws_event, ud) != 0)
        pagi_scope_finish(s, err ? err : pagi_scope_error(s));
}

static void ws_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    char *hello = ud; /* the scope's userdata: freed at its release */
    pagi_event out;
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_CONNECT:
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
        if (pagi_send(s, &out, NULL, NULL) != 0)
            break;
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        out.is_text = 1;
        out.text = (pagi_str){hello, strlen(hello)};
        if (pagi_send(s, &out, ws_next, hello) != 0)
            break;
        return;
    case PAGI_EV_WEBSOCKET_RECEIVE:
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        out.is_text = ev->is_text;
        out.text = ev->text;
        out.bytes = ev->bytes;
        if (pagi_send(s, &out, ws_next, hello) != 0)
            break;
        return;
    default: /* the disconnect */
        pagi_scope_finish(s, NULL);
        return;
    }
    pagi_scope_finish(s, pagi_scope_error(s));
}

static void release_hello(pagi_scope *s, void *data)
{
    (void)s;
    free(data);
}

static void ws(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    (void)ud;
    pagi_str room = pagi_route_param(p, "room"), rp = pagi_scope_root_path(s);
    char *hello = malloc(room.len + rp.len + 32);
    if (hello == NULL) {
        pagi_scope_finish(s, "out of memory");
        return;
    }
    sprintf(hello, "room %.*s root=%.*s", (int)room.len, room.ptr, (int)rp.len, rp.ptr);
    pagi_scope_set_userdata(s, hello, release_hello);
    if (pagi_receive(s, ws_event, hello) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* ---- module ---- */

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)arg;
    (void)loop;
    static char why[256];
    pagi_router *r = pagi_router_new();
    if (r == NULL || pagi_router_add(r, "GET", "/", root, NULL) != 0 ||
        pagi_router_add(r, "GET", "/polls/:id", poll, "poll") != 0 ||
        pagi_router_add(r, "DELETE", "/polls/:id", poll, "delete") != 0 ||
        pagi_router_add(r, "POST", "/polls/:id/vote/:k", vote, NULL) != 0 ||
        pagi_router_add(r, "GET", "/files/*path", file, NULL) != 0 ||
        pagi_router_add(r, PAGI_ROUTE_SSE, "/feed", feed, NULL) != 0 ||
        pagi_router_add(r, PAGI_ROUTE_WEBSOCKET, "/ws/:room", ws, NULL) != 0) {
        snprintf(why, sizeof why, "%s", r ? pagi_router_error(r) : "out of memory");
        *err = why;
        pagi_router_free(r);
        return NULL;
    }
    /* A refused pattern is refused at add time, not matched silently. */
    if (pagi_router_add(r, "GET", "/polls/:id/:id", root, NULL) == 0) {
        *err = "a pattern with a name used twice was accepted";
        pagi_router_free(r);
        return NULL;
    }
    return r;
}

static void handle(pagi_scope *s, void *instance)
{
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        pagi_lifespan_run(s, NULL, NULL, NULL, NULL);
        return;
    }
    pagi_router_dispatch(instance, s);
}

static void destroy(void *instance)
{
    pagi_router_free(instance);
}

const pagi_app pagi_module = PAGI_APP_INIT("routerapp", create, handle, destroy);
