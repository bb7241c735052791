/*
 * kv.c - an in-memory key-value store as a PAGI module, built only against
 * the installed <pagi/pagi.h> and <pagi/pagi_easy.h> (see README.md):
 *   GET/PUT/DELETE /kv/KEY   bodies up to 1 MiB (413 beyond), 404 if missing
 *   GET /watch               SSE: every change as an event "change"
 *   /ws                      WebSocket: "set KEY VALUE" stores and broadcasts
 * Changes reach every WebSocket and watch client as "set KEY VALUE" or
 * "del KEY". The store and its router (pagi_router(3): paths below the
 * mount point; a KEY is one segment, a '/' in it written %2F; other
 * methods get 405) live per worker: created and freed in lifespan.
 */
#include <pagi/pagi.h>
#include <pagi/pagi_easy.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BODY (1024 * 1024)
#define NBUCKETS 1024

typedef struct entry {
    struct entry *next;
    char *key, *val; /* owned; val holds len bytes plus a NUL */
    size_t klen, len;
} entry;

/* One per worker, owned by the lifespan (kv_create / kv_destroy). */
typedef struct kv {
    entry *bucket[NBUCKETS];
    pagi_group *ws;    /* WebSocket clients: a slow one misses messages */
    pagi_group *watch; /* SSE clients: a slow one is disconnected, it reconnects */
    pagi_router *routes;
} kv;

/* ---- the store ---- */

static entry **kv_slot(kv *k, const char *key, size_t klen)
{
    unsigned h = 2166136261u;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (unsigned char)key[i]) * 16777619u;
    entry **e = &k->bucket[h % NBUCKETS];
    while (*e && ((*e)->klen != klen || memcmp((*e)->key, key, klen) != 0))
        e = &(*e)->next;
    return e; /* the matching entry's link, or the list's NULL end */
}

static void entry_free(entry *e)
{
    free(e->key);
    free(e->val);
    free(e);
}

/* Tell every WebSocket and watch client: "set KEY VALUE" or "del KEY". */
static void kv_notify(kv *k, const char *op, pagi_str key, const char *val, size_t len)
{
    size_t olen = strlen(op), n = olen + 1 + key.len + (val ? 1 + len : 0);
    char *msg = malloc(n);
    if (msg == NULL)
        return;
    memcpy(msg, op, olen);
    msg[olen] = ' ';
    memcpy(msg + olen + 1, key.ptr, key.len);
    if (val) {
        msg[olen + 1 + key.len] = ' ';
        memcpy(msg + olen + 2 + key.len, val, len);
    }
    pagi_group_send_text(k->ws, msg, n); /* copied: msg is ours to free */
    pagi_group_send_event(k->watch, "change", msg, n);
    free(msg);
}

static int kv_set(kv *k, pagi_str key, const char *val, size_t len)
{
    char *v = malloc(len + 1);
    if (v == NULL)
        return -1;
    memcpy(v, val, len);
    v[len] = '\0';
    entry **slot = kv_slot(k, key.ptr, key.len);
    if (*slot == NULL) {
        entry *e = calloc(1, sizeof *e);
        if (e == NULL || (e->key = malloc(key.len)) == NULL) {
            free(e);
            free(v);
            return -1;
        }
        memcpy(e->key, key.ptr, key.len);
        e->klen = key.len;
        *slot = e;
    }
    free((*slot)->val);
    (*slot)->val = v;
    (*slot)->len = len;
    kv_notify(k, "set", key, val, len);
    return 0;
}

static int kv_delete(kv *k, pagi_str key)
{
    entry **slot = kv_slot(k, key.ptr, key.len);
    entry *e = *slot;
    if (e == NULL)
        return 0;
    *slot = e->next;
    entry_free(e);
    kv_notify(k, "del", key, NULL, 0);
    return 1;
}

/* ---- lifespan: the store and its two groups ---- */

static void kv_destroy(void *obj, void *ud)
{
    kv *k = obj;
    (void)ud;
    pagi_group_free(k->ws); /* open clients are closed (1001 / end of stream) */
    pagi_group_free(k->watch);
    pagi_router_free(k->routes);
    for (size_t i = 0; i < NBUCKETS; i++)
        while (k->bucket[i]) {
            entry *e = k->bucket[i];
            k->bucket[i] = e->next;
            entry_free(e);
        }
    free(k);
}

/* ---- http ---- */

/* PUT: the store and the key (a view into the scope's path) for the body
 * callback; the scope's userdata, freed at its release however it ends. */
typedef struct put_req {
    kv *k;
    pagi_str key;
} put_req;

static void put_release(pagi_scope *s, void *data)
{
    (void)s;
    free(data);
}

/* The whole body is here (over 1 MiB was answered 413 by the reader, which
 * then finishes the scope). */
static void put_body(pagi_scope *s, const char *body, size_t len, const char *err, void *ud)
{
    put_req *p = ud;
    if (err != NULL)
        return;
    if (kv_set(p->k, p->key, body, len) != 0)
        pagi_respond_text(s, 500, "out of memory\n");
    else
        pagi_respond_text(s, 200, "stored\n");
}

static void kv_put(pagi_scope *s, const pagi_route_params *params, void *ud)
{
    put_req *p = malloc(sizeof *p);
    if (p == NULL) {
        pagi_respond_text(s, 500, "out of memory\n");
        return;
    }
    *p = (put_req){ud, pagi_route_param(params, "key")};
    pagi_scope_set_userdata(s, p, put_release);
    pagi_read_body(s, MAX_BODY, put_body, p);
}

static void kv_get(pagi_scope *s, const pagi_route_params *params, void *ud)
{
    pagi_str key = pagi_route_param(params, "key");
    entry *e = *kv_slot(ud, key.ptr, key.len);
    if (e != NULL)
        pagi_respond(s, 200, "application/octet-stream", e->val, e->len);
    else
        pagi_respond_text(s, 404, "no such key\n");
}

static void kv_del(pagi_scope *s, const pagi_route_params *params, void *ud)
{
    pagi_respond_text(s, kv_delete(ud, pagi_route_param(params, "key")) ? 200 : 404, "\n");
}

/* ---- websocket: "set KEY VALUE"; sse: changes ---- */

static void ws_message(pagi_group *g, pagi_scope *s, pagi_str msg, int is_text, void *ud)
{
    const char *sp = msg.len > 4 ? memchr(msg.ptr + 4, ' ', msg.len - 4) : NULL;
    if (!is_text || sp == NULL || memcmp(msg.ptr, "set ", 4) != 0 || sp == msg.ptr + 4) {
        pagi_group_send_to(g, s, NULL, "error: expected set KEY VALUE", 29);
        return;
    }
    pagi_str key = {msg.ptr + 4, (size_t)(sp - msg.ptr) - 4};
    kv_set(ud, key, sp + 1, msg.len - (size_t)(sp + 1 - msg.ptr));
}

static void kv_ws(pagi_scope *s, const pagi_route_params *params, void *ud)
{
    (void)params;
    pagi_group_join(((kv *)ud)->ws, s, ws_message, ud);
}

static void kv_watch(pagi_scope *s, const pagi_route_params *params, void *ud)
{
    (void)params;
    pagi_group_join(((kv *)ud)->watch, s, NULL, NULL);
}

/* ---- lifespan: the store, its two groups and its routes ---- */

static void *kv_create(pagi_scope *s, void *ud, const char **err)
{
    (void)s;
    (void)ud;
    kv *k = calloc(1, sizeof *k);
    if (k == NULL) {
        *err = "kv: out of memory";
        return NULL;
    }
    k->ws = pagi_group_new(PAGI_GROUP_DROP);
    k->watch = pagi_group_new(PAGI_GROUP_DISCONNECT);
    k->routes = pagi_router_new();
    if (k->ws == NULL || k->watch == NULL || k->routes == NULL ||
        pagi_router_add(k->routes, "GET", "/kv/:key", kv_get, k) != 0 ||
        pagi_router_add(k->routes, "PUT", "/kv/:key", kv_put, k) != 0 ||
        pagi_router_add(k->routes, "DELETE", "/kv/:key", kv_del, k) != 0 ||
        pagi_router_add(k->routes, PAGI_ROUTE_SSE, "/watch", kv_watch, k) != 0 ||
        pagi_router_add(k->routes, PAGI_ROUTE_WEBSOCKET, "/ws", kv_ws, k) != 0) {
        kv_destroy(k, NULL);
        *err = "kv: out of memory";
        return NULL;
    }
    /* A drain (stop, reload) closes every client at once; watchers hear why. */
    pagi_group_set_drain_event(k->watch, "shutdown", "server shutting down", 20);
    return k;
}

/* ---- module ---- */

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        pagi_lifespan_run(s, "kv", kv_create, kv_destroy, NULL);
        return;
    }
    kv *k = pagi_state_get(s, "kv");
    if (k == NULL)
        pagi_scope_finish(s, "kv: no store (lifespan did not run)");
    else
        pagi_router_dispatch(k->routes, s); /* a route, or 404 / 405 */
}

const pagi_app pagi_module = PAGI_APP_INIT("kv", NULL, handle, NULL);
