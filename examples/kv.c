/*
 * kv.c - an in-memory key-value store as a PAGI module, built only against
 * the installed <pagi/pagi.h> and <pagi/pagi_easy.h> (see README.md):
 *   GET/PUT/DELETE /kv/KEY   bodies up to 1 MiB (413 beyond), 404 if missing
 *   GET /watch               SSE: every change as an event "change"
 *   /ws                      WebSocket: "set KEY VALUE" stores and broadcasts
 * Changes reach every WebSocket and watch client as "set KEY VALUE" or
 * "del KEY". The store lives per worker: created and freed in lifespan.
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
    for (size_t i = 0; i < NBUCKETS; i++)
        while (k->bucket[i]) {
            entry *e = k->bucket[i];
            k->bucket[i] = e->next;
            entry_free(e);
        }
    free(k);
}

static void *kv_create(pagi_scope *s, void *ud, const char **err)
{
    (void)s;
    (void)ud;
    kv *k = calloc(1, sizeof *k);
    if (k != NULL) {
        k->ws = pagi_group_new(PAGI_GROUP_DROP);
        k->watch = pagi_group_new(PAGI_GROUP_DISCONNECT);
    }
    if (k == NULL || k->ws == NULL || k->watch == NULL) {
        if (k != NULL)
            kv_destroy(k, NULL);
        *err = "kv: out of memory";
        return NULL;
    }
    /* A drain (stop, reload) closes every client at once; watchers hear why. */
    pagi_group_set_drain_event(k->watch, "shutdown", "server shutting down", 20);
    return k;
}

/* ---- http ---- */

/* The KEY of /kv/KEY (below the mount point), or an empty string. */
static pagi_str key_of(const pagi_scope *s)
{
    pagi_str p = pagi_scope_path(s);
    size_t skip = pagi_scope_root_path(s).len + 4;
    if (p.len <= skip || memcmp(p.ptr + skip - 4, "/kv/", 4) != 0)
        return (pagi_str){"", 0};
    return (pagi_str){p.ptr + skip, p.len - skip};
}

/* PUT: the whole body is here (over 1 MiB was answered 413 by the reader). */
static void put_body(pagi_scope *s, const char *body, size_t len, const char *err, void *ud)
{
    if (err != NULL)
        return; /* the layer finishes the scope */
    if (kv_set(ud, key_of(s), body, len) != 0)
        pagi_respond_text(s, 500, "out of memory\n");
    else
        pagi_respond_text(s, 200, "stored\n");
}

static void http(pagi_scope *s, kv *k)
{
    const char *m = pagi_scope_method(s);
    pagi_str key = key_of(s);
    if (key.len == 0) {
        pagi_respond_text(s, 404, "not found\n");
    } else if (strcmp(m, "PUT") == 0) {
        pagi_read_body(s, MAX_BODY, put_body, k);
    } else if (strcmp(m, "GET") == 0) {
        entry *e = *kv_slot(k, key.ptr, key.len);
        if (e != NULL)
            pagi_respond(s, 200, "application/octet-stream", e->val, e->len);
        else
            pagi_respond_text(s, 404, "no such key\n");
    } else if (strcmp(m, "DELETE") == 0) {
        pagi_respond_text(s, kv_delete(k, key) ? 200 : 404, "\n");
    } else {
        pagi_header allow = {{"allow", 5}, {"GET, PUT, DELETE", 16}};
        pagi_respond_headers(s, 405, "text/plain", &allow, 1, "method not allowed\n", 19);
    }
}

/* ---- websocket: "set KEY VALUE" ---- */

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

/* ---- module ---- */

static int path_is(const pagi_scope *s, const char *want)
{
    pagi_str p = pagi_scope_path(s);
    size_t r = pagi_scope_root_path(s).len;
    return p.len - r == strlen(want) && memcmp(p.ptr + r, want, p.len - r) == 0;
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        pagi_lifespan_run(s, "kv", kv_create, kv_destroy, NULL);
        return;
    }
    kv *k = pagi_state_get(s, "kv");
    if (k == NULL) {
        pagi_scope_finish(s, "kv: no store (lifespan did not run)");
        return;
    }
    switch (pagi_scope_type_of(s)) {
    case PAGI_SCOPE_HTTP:
        http(s, k);
        return;
    case PAGI_SCOPE_SSE:
        if (path_is(s, "/watch"))
            pagi_group_join(k->watch, s, NULL, NULL);
        else
            pagi_respond_text(s, 404, "not found\n");
        return;
    case PAGI_SCOPE_WEBSOCKET:
        if (path_is(s, "/ws"))
            pagi_group_join(k->ws, s, ws_message, k);
        else
            pagi_scope_finish(s, NULL); /* refused: 403 */
        return;
    default:
        pagi_scope_finish(s, "unsupported scope type");
    }
}

const pagi_app pagi_module = PAGI_APP_INIT("kv", NULL, handle, NULL);
