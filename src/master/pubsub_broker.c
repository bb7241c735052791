/*
 * pubsub_broker.c - the master's side of pub/sub: reads SUB/UNSUB/PUB frames
 * from each worker's socket, keeps the routing table, and copies each PUB
 * into the output queue of every other subscribed worker. The master's
 * memory stays bounded: input is read a frame at a time (at most
 * PUBSUB_MAX_FRAME buffered per peer) and each output queue is capped at
 * PUBSUB_PEER_QUEUE_MAX, past which frames are dropped and counted.
 * With a backend (pubsub_redis.c) it also stands for all its workers there:
 * it subscribes a channel when the first worker does and unsubscribes when
 * the last goes, sends each PUB on, and hands what other instances publish
 * to every subscribed worker.
 */
#include "pubsub_broker.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/log.h"
#include "common/pubsub_msg.h"
#include "common/redis_url.h"
#include "common/shm.h"
#include "pubsub_redis.h"
#include "pubsub_routes.h"

#define READ_CHUNK 65536u
/* Channels one worker may subscribe to: the routing table is master memory,
 * and app code in a worker must not grow it without bound. */
#define PEER_CHANNELS_MAX 65536u
/* An empty queue whose buffer grew past this gives its memory back. */
#define KEEP_CAP 65536u

typedef struct peer {
    int used; /* the entry belongs to a worker slot until broker_peer_close */
    int fd;   /* -1: free, or its channel ended (EOF, error) before the slot let go */
    pid_t pid;
    size_t channels; /* routes through it */
    int refused;     /* a SUB over PEER_CHANNELS_MAX was logged */
    buf in, out;
} peer;

struct pubsub_broker {
    peer *peers;
    size_t n; /* entries used or free below n */
    pubsub_routes *routes;
    _Atomic uint64_t *dropped;
    pubsub_redis *backend;              /* NULL: local only */
    char *backend_url, *backend_prefix; /* what it was made from, to see a change */
    buf scratch;                        /* a frame built from a backend's message */
};

pubsub_broker *broker_new(_Atomic uint64_t *dropped)
{
    pubsub_broker *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->routes = routes_new();
    if (!b->routes) {
        free(b);
        return NULL;
    }
    b->dropped = dropped;
    return b;
}

static void channel_emptied(void *ud, const char *channel, size_t len)
{
    pubsub_broker *b = ud;
    if (b->backend)
        redis_backend_unsubscribe(b->backend, channel, len);
}

static void peer_reset(pubsub_broker *b, int id)
{
    peer *p = &b->peers[id];
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->pid = 0;
    p->channels = 0;
    p->refused = 0;
    buf_free(&p->in);
    buf_free(&p->out);
    routes_drop_peer(b->routes, id, channel_emptied, b);
}

void broker_free(pubsub_broker *b)
{
    if (!b)
        return;
    /* First, so closing the peers sends Redis no UNSUBSCRIBE on the way out. */
    redis_backend_free(b->backend);
    b->backend = NULL;
    for (size_t i = 0; i < b->n; i++)
        if (b->peers[i].used)
            peer_reset(b, (int)i);
    free(b->peers);
    free(b->backend_url);
    free(b->backend_prefix);
    buf_free(&b->scratch);
    routes_free(b->routes);
    free(b);
}

int broker_peer_new(pubsub_broker *b, int *child_fd)
{
    *child_fd = -1;
    size_t id = 0;
    /* An entry is reused only once its slot let go of it, so a slot's
     * late close can never hit the next worker's channel. */
    while (id < b->n && b->peers[id].used)
        id++;
    if (id == b->n) {
        peer *np = realloc(b->peers, (b->n + 1) * sizeof *np);
        if (!np) {
            log_error("pubsub: out of memory for a worker's channel");
            return -1;
        }
        b->peers = np;
        b->peers[b->n++] = (peer){.used = 0, .fd = -1};
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
        log_error("pubsub: socketpair: %s; the worker's pub/sub stays local", strerror(errno));
        return -1;
    }
    /* The worker's end is blocking-agnostic: its loop sets what it needs. */
    b->peers[id] = (peer){.used = 1, .fd = sv[0]};
    *child_fd = sv[1];
    return (int)id;
}

void broker_peer_forked(pubsub_broker *b, int id, int child_fd, pid_t pid)
{
    if (child_fd >= 0)
        close(child_fd);
    if (id >= 0 && (size_t)id < b->n)
        b->peers[id].pid = pid;
}

void broker_peer_close(pubsub_broker *b, int id)
{
    if (id >= 0 && (size_t)id < b->n && b->peers[id].used) {
        peer_reset(b, id);
        b->peers[id].used = 0;
    }
}

void broker_child_close(pubsub_broker *b)
{
    if (!b)
        return;
    /* Forgotten too: a worker forked later by a zygote runs this again on
     * the zygote's copy, where those numbers may by then name other
     * descriptors (its own channel, received by SCM_RIGHTS). */
    for (size_t i = 0; i < b->n; i++)
        if (b->peers[i].fd >= 0) {
            close(b->peers[i].fd);
            b->peers[i].fd = -1;
        }
    /* The Redis sockets too: a worker holding a copy would keep a
     * connection the master closed open. */
    redis_backend_child_close(b->backend);
}

size_t broker_npeers(const pubsub_broker *b)
{
    size_t k = 0;
    for (size_t i = 0; b && i < b->n; i++)
        k += b->peers[i].fd >= 0;
    return k + (b && b->backend ? 3 : 0);
}

size_t broker_pollfds(const pubsub_broker *b, struct pollfd *pfd, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; b && i < b->n && k < max; i++) {
        const peer *p = &b->peers[i];
        if (p->fd < 0)
            continue;
        pfd[k++] = (struct pollfd){.fd = p->fd,
                                   .events = (short)(POLLIN | (buf_size(&p->out) ? POLLOUT : 0))};
    }
    if (b && b->backend)
        k += redis_backend_pollfds(b->backend, pfd + k, max - k);
    return k;
}

/* Write what p's queue holds; -1 when the peer is gone. */
static int peer_flush(peer *p)
{
    while (buf_size(&p->out) > 0) {
        ssize_t w = send(p->fd, buf_head(&p->out), buf_size(&p->out), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        buf_consume(&p->out, (size_t)w);
    }
    if (p->out.cap > KEEP_CAP)
        buf_free(&p->out);
    return 0;
}

static void forward(pubsub_broker *b, int from, const pubsub_frame *f, const char *raw, size_t size)
{
    size_t n;
    const int *ids = routes_find(b->routes, f->channel, f->channel_len, &n);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == from)
            continue; /* the publisher delivered to its own subscribers */
        peer *to = &b->peers[ids[i]];
        if (buf_size(&to->out) + size > PUBSUB_PEER_QUEUE_MAX ||
            buf_append(&to->out, raw, size) < 0) {
            if (b->dropped)
                atomic_fetch_add_explicit(b->dropped, 1, memory_order_relaxed);
            continue;
        }
        /* Try now: most frames leave at once, without waiting for POLLOUT.
         * A failure is left for that peer's own poll (POLLHUP/POLLERR), so
         * the routes are not changed while we walk them. */
        if (buf_size(&to->out) == size)
            (void)peer_flush(to);
    }
}

/* Handle every whole frame in p's input; -1 on a bad frame. */
static int peer_frames(pubsub_broker *b, int id)
{
    peer *p = &b->peers[id];
    for (;;) {
        pubsub_frame f;
        long used = pubsub_decode(buf_head(&p->in), buf_size(&p->in), &f);
        if (used < 0)
            return -1;
        if (used == 0)
            break;
        switch (f.type) {
        case PUBSUB_SUB:
            if (p->channels >= PEER_CHANNELS_MAX) {
                if (!p->refused)
                    log_error("pubsub: worker pid %d subscribes to more than %u channels; "
                              "further channels of it get no messages from other workers",
                              (int)p->pid, PEER_CHANNELS_MAX);
                p->refused = 1;
                break;
            }
            switch (routes_add(b->routes, f.channel, f.channel_len, id)) {
            case 1:
                p->channels++;
                if (b->backend) {
                    size_t n;
                    routes_find(b->routes, f.channel, f.channel_len, &n);
                    if (n == 1) /* the first worker on it: this instance subscribes */
                        redis_backend_subscribe(b->backend, f.channel, f.channel_len);
                }
                break;
            case -1:
                log_error("pubsub: out of memory for a subscription");
                break;
            }
            break;
        case PUBSUB_UNSUB: {
            int removed = routes_remove(b->routes, f.channel, f.channel_len, id);
            p->channels -= (size_t)removed;
            size_t n;
            routes_find(b->routes, f.channel, f.channel_len, &n);
            if (removed && n == 0 && b->backend)
                redis_backend_unsubscribe(b->backend, f.channel, f.channel_len);
            break;
        }
        case PUBSUB_PUB:
            forward(b, id, &f, buf_head(&p->in), (size_t)used);
            if (b->backend)
                redis_backend_publish(b->backend, f.channel, f.channel_len, f.data, f.len);
            break;
        }
        buf_consume(&p->in, (size_t)used);
    }
    if (buf_size(&p->in) == 0 && p->in.cap > KEEP_CAP)
        buf_free(&p->in);
    return 0;
}

/* Read what one peer sent; -1 when it is gone or misbehaved. */
static int peer_read(pubsub_broker *b, int id)
{
    /* A bounded amount per poll, so one busy publisher cannot hold the master. */
    for (int round = 0; round < 16; round++) {
        peer *p = &b->peers[id];
        char *w = buf_reserve(&p->in, READ_CHUNK);
        if (!w)
            return -1;
        ssize_t r = recv(p->fd, w, READ_CHUNK, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        if (r == 0)
            return -1;
        buf_commit(&p->in, (size_t)r);
        if (peer_frames(b, id) < 0) {
            log_error("pubsub: worker pid %d sent a malformed frame; its channel is closed",
                      (int)b->peers[id].pid);
            return -1;
        }
    }
    return 0;
}

void broker_io(pubsub_broker *b, const struct pollfd *pfd, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (!pfd[k].revents)
            continue;
        int id = -1;
        for (size_t i = 0; i < b->n; i++)
            if (b->peers[i].fd == pfd[k].fd) {
                id = (int)i;
                break;
            }
        if (id < 0) {
            if (b->backend)
                (void)redis_backend_io(b->backend, &pfd[k]);
            continue; /* else closed meanwhile by another peer's failure */
        }
        int gone = 0;
        if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
            gone = peer_read(b, id) < 0;
        if (!gone && (pfd[k].revents & POLLOUT))
            gone = peer_flush(&b->peers[id]) < 0;
        if (gone)
            peer_reset(b, id);
    }
}

size_t broker_channels(const pubsub_broker *b)
{
    return routes_channels(b->routes);
}

/* ---- the backend ---- */

/* A message another instance published: to every subscribed worker. */
static void backend_deliver(void *ud, const char *channel, size_t channel_len,
                            const unsigned char *data, size_t len)
{
    pubsub_broker *b = ud;
    pubsub_frame f = {.type = PUBSUB_PUB,
                      .channel = channel,
                      .channel_len = channel_len,
                      .data = data,
                      .len = len};
    buf_reset(&b->scratch);
    if (pubsub_encode(&f, &b->scratch) < 0) {
        if (b->dropped)
            atomic_fetch_add_explicit(b->dropped, 1, memory_order_relaxed);
        return;
    }
    forward(b, -1, &f, buf_head(&b->scratch), buf_size(&b->scratch));
    if (b->scratch.cap > KEEP_CAP)
        buf_free(&b->scratch);
}

static void subscribe_one(void *ud, const char *channel, size_t len)
{
    redis_backend_subscribe(ud, channel, len);
}

static void backend_resubscribe(void *ud, pubsub_redis *r)
{
    pubsub_broker *b = ud;
    routes_each(b->routes, subscribe_one, r);
}

static int channel_routed(void *ud, const char *channel, size_t len)
{
    pubsub_broker *b = ud;
    size_t n;
    return routes_find(b->routes, channel, len, &n) != NULL;
}

static int same(const char *a, const char *c)
{
    return (!a && !c) || (a && c && !strcmp(a, c));
}

void broker_set_backend(pubsub_broker *b, const struct pagid_pubsub *cfg, struct shm_region *shm)
{
    if (!b)
        return;
    int redis = cfg && cfg->backend == PUBSUB_BACKEND_REDIS && cfg->url;
    if (redis && b->backend && same(cfg->url, b->backend_url) &&
        same(cfg->prefix, b->backend_prefix)) {
        redis_backend_set_buffer(b->backend, cfg->buffer);
        return;
    }
    if (!redis && !b->backend)
        return;
    if (b->backend)
        log_info("pubsub: closing the redis backend%s",
                 redis ? " (its url or prefix changed)" : "");
    redis_backend_free(b->backend);
    b->backend = NULL;
    free(b->backend_url);
    free(b->backend_prefix);
    b->backend_url = b->backend_prefix = NULL;
    if (!redis)
        return;
    redis_url u;
    const char *msg;
    if (redis_url_parse(cfg->url, &u, &msg) < 0) { /* checked at load: not expected */
        log_error("pubsub: bad redis url: %s; messages stay on this machine", msg);
        return;
    }
    b->backend_url = strdup(cfg->url);
    b->backend_prefix = strdup(cfg->prefix ? cfg->prefix : "");
    if (b->backend_url && b->backend_prefix)
        b->backend = redis_backend_new(&u, b->backend_prefix, cfg->buffer, shm, backend_deliver,
                                       backend_resubscribe, channel_routed, b);
    if (!b->backend) {
        log_error("pubsub: out of memory for the redis backend; messages stay on this machine");
        free(b->backend_url);
        free(b->backend_prefix);
        b->backend_url = b->backend_prefix = NULL;
        return;
    }
    char where[REDIS_URL_HOST_MAX + 32];
    redis_url_where(&u, where, sizeof where);
    log_info("pubsub: backend redis at %s, channel prefix '%s'", where, b->backend_prefix);
    /* It connects at the next tick and subscribes the routed channels then. */
}

void broker_tick(pubsub_broker *b, double now)
{
    if (b && b->backend)
        redis_backend_tick(b->backend, now);
}

void broker_stopping(pubsub_broker *b)
{
    if (b && b->backend)
        redis_backend_stopping(b->backend);
}

double broker_next_timer(const pubsub_broker *b)
{
    return b && b->backend ? redis_backend_next(b->backend) : INFINITY;
}
