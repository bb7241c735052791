/*
 * pubsub_routes.c - channel name -> subscribed peer ids, a chained hash that
 * doubles as it fills. A channel's peers are a small array: a channel has at
 * most one entry per worker process.
 */
#include "pubsub_routes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct route {
    struct route *next; /* hash chain */
    int *peers;
    size_t n, cap;
    size_t len;
    char name[]; /* len bytes */
} route;

struct pubsub_routes {
    route **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
};

static uint64_t hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

pubsub_routes *routes_new(void)
{
    pubsub_routes *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->nbuckets = 64;
    r->buckets = calloc(r->nbuckets, sizeof *r->buckets);
    if (!r->buckets) {
        free(r);
        return NULL;
    }
    return r;
}

void routes_free(pubsub_routes *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nbuckets; i++)
        for (route *x = r->buckets[i], *nx; x; x = nx) {
            nx = x->next;
            free(x->peers);
            free(x);
        }
    free(r->buckets);
    free(r);
}

static route **slot_of(const pubsub_routes *r, const char *channel, size_t len)
{
    route **pp = &r->buckets[hash(channel, len) & (r->nbuckets - 1)];
    while (*pp && !((*pp)->len == len && memcmp((*pp)->name, channel, len) == 0))
        pp = &(*pp)->next;
    return pp;
}

static void grow(pubsub_routes *r)
{
    size_t nb = r->nbuckets * 2;
    route **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < r->nbuckets; i++)
        for (route *x = r->buckets[i], *nx; x; x = nx) {
            nx = x->next;
            route **head = &b[hash(x->name, x->len) & (nb - 1)];
            x->next = *head;
            *head = x;
        }
    free(r->buckets);
    r->buckets = b;
    r->nbuckets = nb;
}

int routes_add(pubsub_routes *r, const char *channel, size_t len, int peer)
{
    route **pp = slot_of(r, channel, len);
    route *x = *pp;
    if (!x) {
        x = calloc(1, sizeof *x + len);
        if (!x)
            return -1;
        memcpy(x->name, channel, len);
        x->len = len;
        *pp = x;
        r->count++;
    }
    for (size_t i = 0; i < x->n; i++)
        if (x->peers[i] == peer)
            return 0;
    if (x->n == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 4;
        int *np = realloc(x->peers, nc * sizeof *np);
        if (!np) {
            if (x->n == 0)
                routes_remove(r, channel, len, peer); /* frees the empty route */
            return -1;
        }
        x->peers = np;
        x->cap = nc;
    }
    x->peers[x->n++] = peer;
    if (r->count > r->nbuckets)
        grow(r);
    return 1;
}

static int drop_peer(route *x, int peer)
{
    for (size_t i = 0; i < x->n; i++)
        if (x->peers[i] == peer) {
            /* Order among peers does not matter: each gets its own copy. */
            x->peers[i] = x->peers[--x->n];
            return 1;
        }
    return 0;
}

int routes_remove(pubsub_routes *r, const char *channel, size_t len, int peer)
{
    route **pp = slot_of(r, channel, len);
    route *x = *pp;
    if (!x)
        return 0;
    int removed = drop_peer(x, peer);
    if (x->n == 0) {
        *pp = x->next;
        free(x->peers);
        free(x);
        r->count--;
    }
    return removed;
}

size_t routes_remove_peer(pubsub_routes *r, int peer)
{
    return routes_drop_peer(r, peer, NULL, NULL);
}

size_t routes_drop_peer(pubsub_routes *r, int peer, routes_channel_fn emptied, void *ud)
{
    size_t removed = 0;
    for (size_t i = 0; i < r->nbuckets; i++) {
        route **pp = &r->buckets[i];
        while (*pp) {
            route *x = *pp;
            removed += (size_t)drop_peer(x, peer);
            if (x->n == 0) {
                if (emptied)
                    emptied(ud, x->name, x->len);
                *pp = x->next;
                free(x->peers);
                free(x);
                r->count--;
            } else {
                pp = &x->next;
            }
        }
    }
    return removed;
}

const int *routes_find(const pubsub_routes *r, const char *channel, size_t len, size_t *n)
{
    route *x = *slot_of(r, channel, len);
    *n = x ? x->n : 0;
    return x ? x->peers : NULL;
}

void routes_each(const pubsub_routes *r, routes_channel_fn fn, void *ud)
{
    for (size_t i = 0; i < r->nbuckets; i++)
        for (const route *x = r->buckets[i]; x; x = x->next)
            fn(ud, x->name, x->len);
}

size_t routes_channels(const pubsub_routes *r)
{
    return r->count;
}
