/*
 * pubsub.c - publish/subscribe in a worker (docs/pubsub.md): channels of
 * local subscriptions, delivery through the run queue with a bounded queue
 * per subscription, and the stream to the master's broker (SUB when a
 * channel gets its first local subscriber, UNSUB when it loses its last,
 * PUB for each publish; the master sends back other workers' PUBs).
 */
#include "pubsub.h"

#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/log.h"
#include "common/pubsub_msg.h"
#include "common/shm.h"
#include "worker/core/app_call.h"
#include "worker/core/handle.h"
#include "worker/core/loop.h"
#include "scope.h"

#define DEFAULT_MAX_PENDING 1024u
/* What the worker may have queued towards the master before it drops. */
#define OUT_MAX (4u << 20)
#define READ_CHUNK 65536u
#define KEEP_CAP 65536u
/* Bounds of what one wakeup reads from the master (see on_link_read). */
#define READ_BUDGET_MIN 4096u
#define READ_BUDGET_MAX (256u << 10)

/* One published message, shared by every local subscription it is queued on. */
typedef struct ps_msg {
    unsigned refs;
    size_t len;
    unsigned char data[];
} ps_msg;

typedef struct ps_channel {
    struct ps_channel *next; /* hash chain */
    pagi_subscription *subs; /* doubly linked through ch_prev/ch_next */
    size_t len;
    char name[]; /* len bytes, then a NUL */
} ps_channel;

#define SUB_MAGIC 0x5B5C81BEu

struct pagi_subscription {
    handle_hdr h; /* first: from ps->pool, so a stale handle is recognised (handle.h) */
    pubsub *ps;
    ps_channel *ch;    /* NULL once unsubscribed */
    pagi_scope *scope; /* NULL: owned by the server's code (pubsub_subscribe_owned) */
    pagi_subscription *ch_prev, *ch_next;
    pagi_subscription *sc_prev, *sc_next; /* the scope's list */
    pagi_message_cb cb;
    void *ud;
    ps_msg **ring; /* pending messages: count from head, cap a power of two */
    size_t head, count, cap;
    size_t max_pending;
    pagi_sub_policy policy;
    unsigned long long dropped;
    int queued;     /* a delivery job is on the run queue */
    int delivering; /* its job is running its callbacks */
};

struct pubsub {
    worker_ctx *w;
    int fd;
    ev_io rio, wio;
    buf in, out;
    ps_channel **buckets;
    size_t nbuckets, nchannels;
    handle_pool pool; /* the subscriptions */
};

/* Is sub a live subscription? If not, fn's misuse is logged once. A
 * subscription ended by its scope's release but not yet freed (the app's
 * release callback is running) is live: unsubscribing it there is the
 * documented no-op. */
static int sub_ok(const pagi_subscription *sub, const char *fn)
{
    if (!sub)
        return 0;
    if (__builtin_expect(handle_live(sub, SUB_MAGIC), 1))
        return 1;
    handle_misuse(0, fn,
                  "subscription %p was released (its scope's release callback has "
                  "returned, or it was unsubscribed before)",
                  (const void *)sub);
    return 0;
}

static void count(worker_ctx *w, size_t field_offset, uint64_t n)
{
    if (w->stats)
        shm_add((_Atomic uint64_t *)((char *)w->stats + field_offset), n);
}
#define COUNT(w, field, n) count((w), offsetof(shm_worker, field), (n))

static void msg_unref(ps_msg *m)
{
    if (m && --m->refs == 0)
        free(m);
}

/* ---- the stream to the master ---- */

/* The channel's watchers never keep a draining worker's loop alive: each
 * is unref'd while active, so it is ref'd again before it stops. */
static void watch_start(pubsub *ps, ev_io *io)
{
    if (!ev_is_active(io)) {
        ev_io_start(ps->w->loop.ev, io);
        ev_unref(ps->w->loop.ev);
    }
}

static void watch_stop(pubsub *ps, ev_io *io)
{
    if (ev_is_active(io)) {
        ev_ref(ps->w->loop.ev);
        ev_io_stop(ps->w->loop.ev, io);
    }
}

static void link_close(pubsub *ps, const char *why)
{
    if (ps->fd < 0)
        return;
    log_warn("pub/sub channel to the master %s: messages stay within this worker", why);
    watch_stop(ps, &ps->rio);
    watch_stop(ps, &ps->wio);
    close(ps->fd);
    ps->fd = -1;
    buf_free(&ps->in);
    buf_free(&ps->out);
}

static void link_flush(pubsub *ps)
{
    while (ps->fd >= 0 && buf_size(&ps->out) > 0) {
        ssize_t n = send(ps->fd, buf_head(&ps->out), buf_size(&ps->out), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                watch_start(ps, &ps->wio);
                return;
            }
            link_close(ps, "failed");
            return;
        }
        buf_consume(&ps->out, (size_t)n);
    }
    if (ps->fd >= 0)
        watch_stop(ps, &ps->wio);
    if (ps->out.cap > KEEP_CAP)
        buf_free(&ps->out);
}

/* Queue a frame for the master: 0, or -1 when it was dropped. SUB/UNSUB
 * are never dropped for room (they are tiny and the routes depend on them). */
static int link_send(pubsub *ps, pubsub_type type, const char *ch, size_t chlen, const void *data,
                     size_t len)
{
    if (ps->fd < 0)
        return 0;
    pubsub_frame f = {.type = type, .channel = ch, .channel_len = chlen, .data = data, .len = len};
    if (type == PUBSUB_PUB && buf_size(&ps->out) + pubsub_frame_size(&f) > OUT_MAX)
        return -1;
    if (pubsub_encode(&f, &ps->out) < 0)
        return -1;
    link_flush(ps);
    return 0;
}

static void deliver_local(pubsub *ps, const char *ch, size_t chlen, const void *data, size_t len);

static void on_link_write(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    (void)revents;
    link_flush(io->data);
}

static void on_link_read(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    (void)revents;
    pubsub *ps = io->data;
    /* The messages read are delivered in this loop round, before the
     * clients' output is flushed at its end: reading at most half the
     * high-water mark per wakeup keeps the burst one round hands a client
     * that reads well below the mark, so a broadcast group (pagi_easy.h)
     * only ever finds a really slow client at or above it. */
    size_t budget = ps->w->cfg->high_watermark / 2;
    if (budget < READ_BUDGET_MIN)
        budget = READ_BUDGET_MIN;
    if (budget > READ_BUDGET_MAX)
        budget = READ_BUDGET_MAX;
    while (budget > 0 && ps->fd >= 0) {
        size_t want = budget < READ_CHUNK ? budget : READ_CHUNK;
        char *p = buf_reserve(&ps->in, want);
        if (!p) {
            link_close(ps, "ran out of memory");
            return;
        }
        ssize_t n = recv(ps->fd, p, want, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                link_close(ps, "failed");
            return;
        }
        if (n == 0) {
            link_close(ps, "closed");
            return;
        }
        buf_commit(&ps->in, (size_t)n);
        budget -= (size_t)n;
        for (;;) {
            pubsub_frame f;
            long used = pubsub_decode(buf_head(&ps->in), buf_size(&ps->in), &f);
            if (used < 0 || (used > 0 && f.type != PUBSUB_PUB)) {
                link_close(ps, "sent a malformed frame");
                return;
            }
            if (used == 0)
                break;
            deliver_local(ps, f.channel, f.channel_len, f.data, f.len);
            buf_consume(&ps->in, (size_t)used);
        }
        if (buf_size(&ps->in) == 0 && ps->in.cap > KEEP_CAP)
            buf_free(&ps->in);
    }
}

/* ---- channels ---- */

static uint64_t hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static ps_channel **chan_slot(pubsub *ps, const char *name, size_t len)
{
    ps_channel **pp = &ps->buckets[hash(name, len) & (ps->nbuckets - 1)];
    while (*pp && !((*pp)->len == len && memcmp((*pp)->name, name, len) == 0))
        pp = &(*pp)->next;
    return pp;
}

static void chan_grow(pubsub *ps)
{
    size_t nb = ps->nbuckets * 2;
    ps_channel **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < ps->nbuckets; i++)
        for (ps_channel *c = ps->buckets[i], *nx; c; c = nx) {
            nx = c->next;
            ps_channel **h = &b[hash(c->name, c->len) & (nb - 1)];
            c->next = *h;
            *h = c;
        }
    free(ps->buckets);
    ps->buckets = b;
    ps->nbuckets = nb;
}

pubsub *pubsub_new(worker_ctx *w, int fd)
{
    pubsub *ps = calloc(1, sizeof *ps);
    if (ps)
        ps->buckets = calloc(ps->nbuckets = 64, sizeof *ps->buckets);
    if (!ps || !ps->buckets) {
        free(ps);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    ps->w = w;
    ps->fd = fd;
    ps->pool = (handle_pool)HANDLE_POOL_INIT("subscription", pagi_subscription, 256);
    ev_io_init(&ps->rio, on_link_read, fd, EV_READ);
    ev_io_init(&ps->wio, on_link_write, fd, EV_WRITE);
    ps->rio.data = ps->wio.data = ps;
    if (fd >= 0)
        watch_start(ps, &ps->rio);
    return ps;
}

void pubsub_free(pubsub *ps)
{
    if (!ps)
        return;
    if (ps->fd >= 0) {
        watch_stop(ps, &ps->rio);
        watch_stop(ps, &ps->wio);
        close(ps->fd);
    }
    if (ps->nchannels)
        log_warn("pub/sub: %zu channels still had subscribers at exit", ps->nchannels);
    buf_free(&ps->in);
    buf_free(&ps->out);
    free(ps->buckets);
    handle_pool_free(&ps->pool);
    free(ps);
}

/* ---- subscriptions ---- */

static void sub_free(pagi_subscription *sub)
{
    while (sub->count) {
        msg_unref(sub->ring[sub->head]);
        sub->head = (sub->head + 1) & (sub->cap - 1);
        sub->count--;
    }
    free(sub->ring);
    handle_put(&sub->ps->pool, sub);
}

static void sub_deliver_job(const runq_item *it)
{
    pagi_subscription *sub = it->a;
    sub->queued = 0;
    sub->delivering = 1;
    /* Only what was pending when the job began: a callback that publishes
     * to its own channel gets that message in a later round. */
    size_t n = sub->count;
    while (n-- && sub->ch && sub->count) {
        ps_msg *m = sub->ring[sub->head];
        sub->ring[sub->head] = NULL;
        sub->head = (sub->head + 1) & (sub->cap - 1);
        sub->count--;
        COUNT(sub->ps->w, pubsub_delivered, 1);
        pagi_loop *l = &sub->ps->w->loop;
        double t0 = loop_hold_begin(l);
        app_call_enter(
            l, "pubsub message",
            &(app_call_request){.crash_path = sub->ch->name, .crash_path_len = sub->ch->len});
        sub->cb(sub, (pagi_str){sub->ch->name, sub->ch->len}, m->data, m->len, sub->ud);
        app_call_leave(l);
        double ms = loop_hold_end(l, t0);
        if (ms > 0)
            log_warn("debug: an app's pub/sub message callback held the loop for %.0f ms", ms);
        msg_unref(m);
    }
    sub->delivering = 0;
    if (!sub->ch)
        sub_free(sub); /* unsubscribed meanwhile */
}

/* Queue m on sub under its policy. */
static void sub_push(pagi_subscription *sub, ps_msg *m)
{
    worker_ctx *w = sub->ps->w;
    if (sub->policy == PAGI_SUB_CONFLATE) {
        while (sub->count) {
            msg_unref(sub->ring[sub->head]);
            sub->head = (sub->head + 1) & (sub->cap - 1);
            sub->count--;
            sub->dropped++;
            COUNT(w, pubsub_dropped, 1);
        }
    } else if (sub->count >= sub->max_pending) {
        msg_unref(sub->ring[sub->head]);
        sub->head = (sub->head + 1) & (sub->cap - 1);
        sub->count--;
        sub->dropped++;
        COUNT(w, pubsub_dropped, 1);
    }
    if (sub->count == sub->cap) {
        size_t nc = sub->cap ? sub->cap * 2 : 8;
        ps_msg **r = malloc(nc * sizeof *r);
        if (!r) {
            sub->dropped++;
            COUNT(w, pubsub_dropped, 1);
            return;
        }
        for (size_t i = 0; i < sub->count; i++)
            r[i] = sub->ring[(sub->head + i) & (sub->cap - 1)];
        free(sub->ring);
        sub->ring = r;
        sub->head = 0;
        sub->cap = nc;
    }
    m->refs++;
    sub->ring[(sub->head + sub->count) & (sub->cap - 1)] = m;
    sub->count++;
    /* One job per batch; while a job runs, what arrives waits for the next. */
    if (!sub->queued &&
        loop_queue(&w->loop, sub_deliver_job, (runq_any_fn)sub->cb, sub, NULL, NULL) == 0)
        sub->queued = 1;
}

static void deliver_local(pubsub *ps, const char *ch, size_t chlen, const void *data, size_t len)
{
    ps_channel *c = *chan_slot(ps, ch, chlen);
    if (!c)
        return;
    ps_msg *m = malloc(sizeof *m + len);
    if (!m) {
        COUNT(ps->w, pubsub_dropped, 1);
        return;
    }
    m->refs = 1; /* ours, until every subscription has its reference */
    m->len = len;
    if (len)
        memcpy(m->data, data, len);
    for (pagi_subscription *s = c->subs; s; s = s->ch_next)
        sub_push(s, m);
    msg_unref(m);
}

static pagi_subscription *subscribe(pagi_scope *s, const char *channel, pagi_message_cb cb,
                                    void *ud, int owned)
{
    worker_ctx *w = scope_worker(s);
    pubsub *ps = w->pubsub;
    size_t len = channel ? strlen(channel) : 0;
    if (!ps) {
        scope_fail(s, "subscribe: publish/subscribe is not available");
        return NULL;
    }
    if (len == 0 || len > PAGI_CHANNEL_MAX) {
        scope_fail(s, "subscribe: a channel name is 1 to %d bytes", PAGI_CHANNEL_MAX);
        return NULL;
    }
    if (!cb) {
        scope_fail(s, "subscribe: no callback");
        return NULL;
    }
    pagi_subscription *sub = handle_get(&ps->pool, SUB_MAGIC);
    if (!sub) {
        scope_fail(s, "subscribe: out of memory");
        return NULL;
    }
    ps_channel **slot = chan_slot(ps, channel, len), *c = *slot;
    if (!c) {
        c = calloc(1, sizeof *c + len + 1);
        if (!c) {
            handle_put(&ps->pool, sub);
            scope_fail(s, "subscribe: out of memory");
            return NULL;
        }
        memcpy(c->name, channel, len);
        c->len = len;
        *slot = c;
        ps->nchannels++;
        link_send(ps, PUBSUB_SUB, channel, len, NULL, 0);
        if (ps->nchannels > ps->nbuckets)
            chan_grow(ps);
    }
    sub->ps = ps;
    sub->ch = c;
    sub->scope = owned ? NULL : s;
    sub->cb = cb;
    sub->ud = ud;
    sub->max_pending = DEFAULT_MAX_PENDING;
    sub->ch_next = c->subs;
    if (c->subs)
        c->subs->ch_prev = sub;
    c->subs = sub;
    if (owned)
        return sub;
    pagi_subscription **head = scope_subs(s);
    sub->sc_next = *head;
    if (*head)
        (*head)->sc_prev = sub;
    *head = sub;
    return sub;
}

pagi_subscription *pagi_subscribe(pagi_scope *s, const char *channel, pagi_message_cb cb, void *ud)
{
    if (!scope_live(s, "pagi_subscribe"))
        return NULL;
    if (scope_is_finished(s)) {
        scope_fail(s, "subscribe: the scope is finished");
        return NULL;
    }
    return subscribe(s, channel, cb, ud, 0);
}

pagi_subscription *pubsub_subscribe_owned(pagi_scope *s, const char *channel, pagi_message_cb cb,
                                          void *ud)
{
    if (!scope_live(s, "pagi_group_subscribe"))
        return NULL;
    return subscribe(s, channel, cb, ud, 1);
}

/* Off its channel: no message reaches it any more (ch becomes NULL). */
static void sub_end(pagi_subscription *sub)
{
    pubsub *ps = sub->ps;
    ps_channel *c = sub->ch;
    if (sub->ch_prev)
        sub->ch_prev->ch_next = sub->ch_next;
    else
        c->subs = sub->ch_next;
    if (sub->ch_next)
        sub->ch_next->ch_prev = sub->ch_prev;
    sub->ch_prev = sub->ch_next = NULL;
    sub->ch = NULL;
    if (!c->subs) {
        link_send(ps, PUBSUB_UNSUB, c->name, c->len, NULL, 0);
        *chan_slot(ps, c->name, c->len) = c->next;
        ps->nchannels--;
        free(c);
    }
}

/* Off its scope's list, and freed unless its delivery job still holds it
 * (the job frees it: it sees ch NULL). */
static void sub_drop(pagi_subscription *sub)
{
    if (sub->scope) {
        pagi_subscription **head = scope_subs(sub->scope);
        if (sub->sc_prev)
            sub->sc_prev->sc_next = sub->sc_next;
        else
            *head = sub->sc_next;
        if (sub->sc_next)
            sub->sc_next->sc_prev = sub->sc_prev;
        sub->scope = NULL;
    }
    if (!sub->queued && !sub->delivering)
        sub_free(sub);
}

void pagi_unsubscribe(pagi_subscription *sub)
{
    /* ch NULL on a live one: ended by its scope's release, whose callback
     * is running now (pagi(3): unsubscribing there is a no-op). */
    if (!sub_ok(sub, "pagi_unsubscribe") || !sub->ch)
        return;
    sub_end(sub);
    sub_drop(sub);
}

void pubsub_scope_released(pagi_scope *s)
{
    for (pagi_subscription *sub = *scope_subs(s); sub; sub = sub->sc_next)
        if (sub->ch)
            sub_end(sub);
}

void pubsub_scope_free_subs(pagi_scope *s)
{
    pagi_subscription **head = scope_subs(s);
    while (*head)
        sub_drop(*head);
}

int pagi_subscription_set_policy(pagi_subscription *sub, pagi_sub_policy policy, size_t max_pending)
{
    if (!sub_ok(sub, "pagi_subscription_set_policy") || !sub->ch || max_pending == 0 ||
        (policy != PAGI_SUB_DROP_OLDEST && policy != PAGI_SUB_CONFLATE))
        return -1;
    sub->policy = policy;
    sub->max_pending = max_pending;
    return 0;
}

unsigned long long pagi_subscription_dropped(const pagi_subscription *sub)
{
    return sub_ok(sub, "pagi_subscription_dropped") ? sub->dropped : 0;
}

void pagi_subscription_count_dropped(pagi_subscription *sub, unsigned n)
{
    if (!sub_ok(sub, "pagi_subscription_count_dropped"))
        return;
    sub->dropped += n;
    COUNT(sub->ps->w, pubsub_dropped, n);
}

int pagi_publish(pagi_scope *s, const char *channel, const void *data, size_t len)
{
    if (!scope_live(s, "pagi_publish"))
        return -1;
    worker_ctx *w = scope_worker(s);
    pubsub *ps = w->pubsub;
    size_t chlen = channel ? strlen(channel) : 0;
    if (!ps)
        return scope_fail(s, "publish: publish/subscribe is not available");
    if (chlen == 0 || chlen > PAGI_CHANNEL_MAX)
        return scope_fail(s, "publish: a channel name is 1 to %d bytes", PAGI_CHANNEL_MAX);
    if (len > PAGI_MESSAGE_MAX)
        return scope_fail(s, "publish: %zu bytes is over the %d-byte limit", len, PAGI_MESSAGE_MAX);
    if (len && !data)
        return scope_fail(s, "publish: no data");
    COUNT(w, pubsub_published, 1);
    deliver_local(ps, channel, chlen, data, len);
    if (link_send(ps, PUBSUB_PUB, channel, chlen, data, len) < 0)
        COUNT(w, pubsub_dropped, 1);
    return 0;
}
