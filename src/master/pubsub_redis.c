/*
 * pubsub_redis.c - the master's Redis backend (pubsub_redis.h). hiredis
 * parses the replies (redisReader); the sockets, the commands and the
 * timers are ours, so they run in the master's ppoll loop and the
 * SUBSCRIBE/UNSUBSCRIBE bookkeeping is exact (hiredis 0.14's async context
 * loses a channel that is unsubscribed and subscribed again before the
 * UNSUBSCRIBE reply arrives, which a chat room's last and next visitor do).
 *
 * Two connections, since a subscribed Redis connection accepts no PUBLISH:
 * `pub` carries PUBLISH commands (its output queue is also the buffer kept
 * while Redis is away: whole commands, bounded), `sub` carries SUBSCRIBE/
 * UNSUBSCRIBE and receives the messages (rebuilt from the routes at each
 * connect, so nothing of it is kept while down).
 *
 * Opening a link (lookup, socket, handshake) is pubsub_redis_connect.c;
 * the subscribe side (batches of SUBSCRIBE, messages) pubsub_redis_sub.c.
 */
#include "pubsub_redis_int.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/pubsub_msg.h"
#include "pubsub_broker.h"
#include "redis_resolve.h"
#include "redis_wire.h"
#define READ_CHUNK 65536u
/* Reads per wakeup: one busy channel cannot hold the master's loop. */
#define READ_ROUNDS 16
/* An empty output buffer that grew past this gives its memory back. */
#define KEEP_CAP 65536u
/* Publishes written to Redis and not answered yet: at most about this many
 * bytes (one more message may start below it). It bounds what a Redis that
 * stops reading can leave unconfirmed in the kernels' buffers, which is
 * counted as dropped if the link then fails; the rest waits in the queue. */
#define UNANSWERED_MAX (256u * 1024)
/* One send(2) of pub: enough for the kernel, and a bounded walk of cmds. */
#define WRITE_CHUNK (256u * 1024)
/* A ready link sends PING this often and fails without its answer within
 * PING_TIMEOUT_S: a Redis that stops answering but keeps TCP alive. */
#define PING_EVERY_S 10.0
#define PING_TIMEOUT_S 10.0

double rlink_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void rlink_count(pubsub_redis *r, _Atomic uint64_t *field, uint64_t n)
{
    (void)r;
    if (field)
        atomic_fetch_add_explicit(field, n, memory_order_relaxed);
}

/* ---- the links ---- */

static void set_up(pubsub_redis *r, int up)
{
    r->up = up;
    if (r->shm)
        atomic_store(&r->shm->pubsub_backend_up, up);
}

static void link_close_fd(rlink *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    if (l->rd)
        redisReaderFree(l->rd);
    l->rd = NULL;
    l->skip = (redis_skipper){0};
}

/* Drop the first command of pub's queue (what is left of it). */
static void pop_cmd(pubsub_redis *r, rlink *l, int count_drop)
{
    cmd_rec c;
    memcpy(&c, buf_head(&l->cmds), sizeof c);
    buf_consume(&l->out, c.len - l->head_sent);
    buf_consume(&l->cmds, sizeof c);
    l->head_sent = 0;
    if (c.kind == CMD_MSG) {
        l->queued -= c.len;
        if (count_drop)
            COUNT(r, pubsub_backend_dropped, 1);
    }
}

/* pub's commands written and not answered are lost with their connection:
 * Redis may have taken some (a slow Redis, not a dead one), but nothing
 * says which, and sending them again could deliver a message twice. So the
 * messages among them are counted as dropped, never as sent. */
static void drop_unanswered(pubsub_redis *r, rlink *l)
{
    const char *p = buf_head(&l->waiting);
    for (size_t i = 0; i + sizeof(cmd_rec) <= buf_size(&l->waiting); i += sizeof(cmd_rec)) {
        cmd_rec c;
        memcpy(&c, p + i, sizeof c);
        if (c.kind == CMD_MSG)
            COUNT(r, pubsub_backend_dropped, 1);
    }
    buf_free(&l->waiting);
    l->unanswered = 0;
}

/* The link failed (why: for the log): close it, keep what can be resent,
 * and schedule the next attempt. */
void rlink_fail(pubsub_redis *r, rlink *l, const char *why)
{
    double now = rlink_now();
    link_close_fd(l);
    l->state = LINK_DOWN;
    l->ready = 0;
    l->pong_by = 0;
    if (l == &r->pub) {
        /* A command cut in the middle may or may not have reached Redis:
         * it is dropped (counted), as are those written and unanswered.
         * The handshake and PINGs belonged to this connection; whole
         * messages not written yet wait for the next one. */
        drop_unanswered(r, l);
        if (l->head_sent > 0)
            pop_cmd(r, l, 1);
        size_t keep = 0;
        buf msgs = BUF_INIT, recs = BUF_INIT;
        const char *p = buf_head(&l->cmds), *o = buf_head(&l->out);
        int oom = 0;
        for (size_t i = 0; i + sizeof(cmd_rec) <= buf_size(&l->cmds); i += sizeof(cmd_rec)) {
            cmd_rec c;
            memcpy(&c, p + i, sizeof c);
            if (c.kind == CMD_MSG && !oom &&
                (buf_append(&msgs, o + keep, c.len) < 0 || buf_append(&recs, &c, sizeof c) < 0))
                oom = 1; /* what was copied stays; the rest is dropped below */
            if (c.kind == CMD_MSG && oom) {
                l->queued -= c.len;
                COUNT(r, pubsub_backend_dropped, 1);
            }
            keep += c.len;
        }
        buf_free(&l->out);
        buf_free(&l->cmds);
        l->out = msgs;
        l->cmds = recs;
        /* Connected, the queue may hold more than pubsub.buffer: what is
         * kept while down is that bound (the oldest go, counted). */
        while (l->queued > r->buffer && buf_size(&l->cmds) > 0)
            pop_cmd(r, l, 1);
    } else {
        buf_free(&l->out); /* rebuilt from the routes at the next connect */
        buf_free(&r->resub);
    }
    l->failures++;
    l->retry_at = now + redis_backoff_ms(l->failures) / 1000.0;
    if (r->up) {
        set_up(r, 0);
        r->down_since = now;
        log_warn("pubsub: lost the connection to redis at %s (%s: %s); local delivery goes on, "
                 "publishes for other instances are kept up to %zu bytes; reconnecting",
                 r->where, l->role, why, r->buffer);
        r->down_logged = 1;
    } else if (!r->down_logged) {
        log_warn("pubsub: cannot connect to redis at %s (%s: %s); retrying every %u ms up to %u s",
                 r->where, l->role, why, REDIS_BACKOFF_MIN_MS, REDIS_BACKOFF_MAX_MS / 1000);
        r->down_logged = 1;
    }
}

static void link_ready(pubsub_redis *r, rlink *l)
{
    l->pong_by = 0;
    if (l->ready)
        return;
    l->ready = 1;
    l->ping_at = rlink_now() + PING_EVERY_S;
    l->failures = 0;
    if (r->pub.ready && r->sub.ready && !r->up) {
        set_up(r, 1);
        if (r->was_up) {
            COUNT(r, pubsub_backend_reconnects, 1);
            log_info("pubsub: reconnected to redis at %s after %.1f s", r->where,
                     rlink_now() - r->down_since);
        } else {
            log_info("pubsub: connected to redis at %s", r->where);
        }
        r->was_up = 1;
        r->down_logged = 0;
        r->drop_logged = 0;
    }
}

/* What of l's queue may be written now (up to about WRITE_CHUNK). On pub:
 * until Redis has answered the handshake, only the handshake (messages
 * kept while down are not written into a connection Redis may still
 * refuse); then messages while less than UNANSWERED_MAX of them wait for
 * their replies (a command already started is always finished). */
static size_t sendable(const pubsub_redis *r, const rlink *l)
{
    if (l != &r->pub)
        return buf_size(&l->out);
    size_t n = 0, sent = l->head_sent, pending = l->unanswered;
    const char *p = buf_head(&l->cmds);
    for (size_t i = 0; i + sizeof(cmd_rec) <= buf_size(&l->cmds) && n < WRITE_CHUNK;
         i += sizeof(cmd_rec)) {
        cmd_rec c;
        memcpy(&c, p + i, sizeof c);
        if (c.kind == CMD_MSG && sent == 0 && (!l->ready || pending >= UNANSWERED_MAX))
            break;
        if (c.kind == CMD_MSG)
            pending += c.len;
        n += c.len - sent;
        sent = 0;
    }
    return n;
}

/* Write what l's queue holds: 0, or -1 (errno) when the link is broken. */
int rlink_flush(pubsub_redis *r, rlink *l)
{
    size_t want;
    while ((want = sendable(r, l)) > 0) {
        ssize_t w = send(l->fd, buf_head(&l->out), want, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        buf_consume(&l->out, (size_t)w);
        if (l != &r->pub) {
            if (rlink_sub_refill(r) < 0) {
                errno = ENOMEM;
                return -1;
            }
            continue;
        }
        size_t done = (size_t)w;
        while (done > 0) {
            cmd_rec c;
            memcpy(&c, buf_head(&l->cmds), sizeof c);
            size_t left = c.len - l->head_sent;
            if (done < left) {
                l->head_sent += done;
                break;
            }
            done -= left;
            buf_consume(&l->cmds, sizeof c);
            l->head_sent = 0;
            if (c.kind == CMD_MSG)
                l->queued -= c.len;
            /* Its reply is what counts it as sent (the handshake's replies
             * are counted by hs_pending). */
            if (c.kind != CMD_HANDSHAKE && buf_append(&l->waiting, &c, sizeof c) < 0) {
                errno = ENOMEM;
                return -1;
            }
            if (c.kind == CMD_MSG)
                l->unanswered += c.len;
        }
    }
    if (buf_size(&l->out) == 0 && l->out.cap > KEEP_CAP)
        buf_free(&l->out);
    if (buf_size(&l->cmds) == 0 && l->cmds.cap > KEEP_CAP)
        buf_free(&l->cmds);
    if (buf_size(&l->waiting) == 0 && l->waiting.cap > KEEP_CAP)
        buf_free(&l->waiting);
    return 0;
}

static int is_str(const redisReply *x, const char *s)
{
    return x && (x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS) &&
           x->len == strlen(s) && !strncasecmp(x->str, s, x->len);
}

/* What a partial reply may hold: one message, its channel, the prefix and
 * the array around them. */
static size_t reader_limit(const pubsub_redis *r)
{
    return PUBSUB_MAX_MESSAGE + REDIS_TAG_LEN + PUBSUB_MAX_CHANNEL + r->prefix_len + 4096;
}

/* pub: the command x answers, from waiting (Redis answers in order). A
 * message is sent once answered; refused, it is dropped (counted). 1 when
 * it was a PING, 0 otherwise. */
static int answered(pubsub_redis *r, rlink *l, const redisReply *x)
{
    if (buf_size(&l->waiting) < sizeof(cmd_rec))
        return 0; /* nothing written waits: not an answer of ours */
    cmd_rec c;
    memcpy(&c, buf_head(&l->waiting), sizeof c);
    buf_consume(&l->waiting, sizeof c);
    if (c.kind != CMD_MSG)
        return c.kind == CMD_PING && x->type != REDIS_REPLY_ERROR;
    l->unanswered -= c.len;
    if (x->type != REDIS_REPLY_ERROR)
        COUNT(r, pubsub_backend_sent, 1);
    return 0;
}

/* One reply: 0, or -1 after failing the link. */
static int on_reply(pubsub_redis *r, rlink *l, const redisReply *x)
{
    int handshake_reply = l->hs_pending > 0;
    if (handshake_reply)
        l->hs_pending--;
    else if (l == &r->pub && answered(r, l, x)) {
        link_ready(r, l); /* the answer to a PING (PONG) */
        return 0;
    }
    if (x->type == REDIS_REPLY_ERROR) {
        char why[REDIS_ERROR_LOG_MAX * 4 + 32];
        size_t k = (size_t)snprintf(why, sizeof why, "redis said: ");
        redis_escape(why + k, sizeof why - k, x->str, x->len, REDIS_ERROR_LOG_MAX);
        if (handshake_reply) {
            /* AUTH or PING refused: this connection is of no use. */
            rlink_fail(r, l, why);
            return -1;
        }
        /* One command refused (an ACL on a channel, say): that command is
         * lost, the connection and the others go on. */
        COUNT(r, pubsub_backend_dropped, 1);
        if (!l->err_logged) {
            log_warn("pubsub: redis at %s refused a command on the %s connection (%s); "
                     "counted in pagid_pubsub_dropped_total{where=\"backend\"}, further "
                     "refusals on this connection are not logged",
                     r->where, l->role, why);
            l->err_logged = 1;
        }
        return 0;
    }
    if (is_str(x, "PONG")) {
        link_ready(r, l);
        return 0;
    }
    if (x->type != REDIS_REPLY_ARRAY || x->elements < 1)
        return 0; /* +OK of AUTH, :N of PUBLISH */
    const redisReply *kind = x->element[0];
    if (is_str(kind, "pong"))
        link_ready(r, l);
    else if (is_str(kind, "message") && x->elements == 3)
        rlink_sub_message(r, x->element[1], x->element[2]);
    return 0;
}

/* Read and handle what Redis sent: 0, or -1 after failing the link. */
static int link_read(pubsub_redis *r, rlink *l)
{
    char chunk[READ_CHUNK];
    for (int round = 0; round < READ_ROUNDS; round++) {
        ssize_t n = recv(l->fd, chunk, sizeof chunk, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            rlink_fail(r, l, strerror(errno));
            return -1;
        }
        if (n == 0) {
            rlink_fail(r, l, "closed by the server");
            return -1;
        }
        /* A bulk string larger than any message (published into Redis by
         * another program) is skipped by the filter, not held: its reply
         * comes with a nil payload, counted as too large. */
        if (redis_skip_feed(&l->skip, l->rd, chunk, (size_t)n, PUBSUB_MAX_MESSAGE + REDIS_TAG_LEN) <
            0) {
            rlink_fail(r, l, "protocol error");
            return -1;
        }
        for (;;) {
            void *reply = NULL;
            if (redisReaderGetReply(l->rd, &reply) != REDIS_OK) {
                rlink_fail(r, l, "protocol error");
                return -1;
            }
            if (!reply)
                break;
            int rc = on_reply(r, l, reply);
            freeReplyObject(reply);
            if (rc < 0)
                return -1;
        }
        if (redis_reader_over(l->rd, reader_limit(r))) {
            rlink_fail(r, l, "reply too large");
            return -1;
        }
    }
    return 0;
}

/* ---- the interface ---- */

pubsub_redis *redis_backend_new(const redis_url *url, const char *prefix, size_t buffer,
                                shm_region *shm, redis_deliver_fn deliver,
                                redis_resubscribe_fn resubscribe, redis_routed_fn routed, void *ud)
{
    pubsub_redis *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->prefix = strdup(prefix ? prefix : "");
    if (!r->prefix) {
        free(r);
        return NULL;
    }
    r->prefix_len = strlen(r->prefix);
    r->url = *url;
    redis_url_where(url, r->where, sizeof r->where);
    r->buffer = buffer;
    r->shm = shm;
    r->deliver = deliver;
    r->resubscribe = resubscribe;
    r->routed = routed;
    r->ud = ud;
    /* Unique per master: a clash would make two instances skip each other's
     * messages, so it comes from the kernel, with time and pid as a fallback. */
    if (getrandom(r->id, sizeof r->id, GRND_NONBLOCK) != (ssize_t)sizeof r->id) {
        uint64_t v = (uint64_t)time(NULL) * 2654435761u ^ ((uint64_t)getpid() << 32);
        memcpy(r->id, &v, sizeof v);
    }
    if (!url->is_unix) {
        char port[16];
        snprintf(port, sizeof port, "%d", url->port);
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_NUMERICSERV | AI_NUMERICHOST};
        if (getaddrinfo(url->host, port, &hints, &r->addrs) == 0) {
            r->numeric = 1; /* an address: no lookup ever */
        } else {
            r->addrs = NULL;
            r->dns = redis_resolver_new();
            if (!r->dns) {
                free(r->prefix);
                free(r);
                return NULL;
            }
        }
    }
    r->pub = (rlink){.role = "publish", .fd = -1};
    r->sub = (rlink){.role = "subscribe", .fd = -1};
    if (shm) {
        atomic_store(&shm->pubsub_backend, 1);
        atomic_store(&shm->pubsub_backend_up, 0);
    }
    return r;
}

void redis_backend_free(pubsub_redis *r)
{
    if (!r)
        return;
    link_close_fd(&r->pub);
    link_close_fd(&r->sub);
    /* Messages still kept or unanswered never reach the other instances. */
    drop_unanswered(r, &r->pub);
    while (buf_size(&r->pub.cmds) > 0)
        pop_cmd(r, &r->pub, 1);
    buf_free(&r->pub.out);
    buf_free(&r->pub.cmds);
    buf_free(&r->sub.out);
    buf_free(&r->resub);
    redis_resolver_free(r->dns);
    if (r->addrs)
        freeaddrinfo(r->addrs);
    if (r->shm) {
        atomic_store(&r->shm->pubsub_backend, 0);
        atomic_store(&r->shm->pubsub_backend_up, 0);
    }
    free(r->prefix);
    free(r);
}

void redis_backend_child_close(pubsub_redis *r)
{
    if (!r)
        return;
    if (r->pub.fd >= 0)
        close(r->pub.fd);
    if (r->sub.fd >= 0)
        close(r->sub.fd);
    r->pub.fd = r->sub.fd = -1;
    redis_resolver_child_close(r->dns);
}

void redis_backend_stopping(pubsub_redis *r)
{
    r->stopping = 1;
}

void redis_backend_set_buffer(pubsub_redis *r, size_t buffer)
{
    r->buffer = buffer;
}

int redis_backend_up(const pubsub_redis *r)
{
    return r->up;
}

void redis_backend_publish(pubsub_redis *r, const char *channel, size_t channel_len,
                           const unsigned char *data, size_t len)
{
    rlink *l = &r->pub;
    /* While connected the queue is a socket's worth of backlog (as much as
     * a worker's queue in the master); while down, the configured buffer. */
    size_t limit =
        l->ready && r->buffer < PUBSUB_PEER_QUEUE_MAX ? PUBSUB_PEER_QUEUE_MAX : r->buffer;
    size_t size = 64 + r->prefix_len + channel_len + REDIS_TAG_LEN + len;
    if (l->queued + size > limit) {
        COUNT(r, pubsub_backend_dropped, 1);
        if (!r->drop_logged) {
            log_warn("pubsub: %zu bytes of publishes wait for redis at %s: further ones are "
                     "dropped (pagid_pubsub_dropped_total{where=\"backend\"})",
                     l->queued, r->where);
            r->drop_logged = 1;
        }
        return;
    }
    size_t before = buf_size(&l->out);
    unsigned char tag[REDIS_TAG_LEN];
    memcpy(tag, REDIS_TAG_MAGIC, 4);
    memcpy(tag + 4, r->id, 8);
    if (buf_append_str(&l->out, "*3\r\n") < 0 || redis_word(&l->out, "PUBLISH") < 0 ||
        redis_bulk3(&l->out, r->prefix, r->prefix_len, channel, channel_len, "", 0) < 0 ||
        redis_bulk3(&l->out, tag, sizeof tag, data, len, "", 0) < 0) {
        l->out.len = l->out.off + before; /* take back the partial command */
        COUNT(r, pubsub_backend_dropped, 1);
        return;
    }
    cmd_rec c = {(uint32_t)(buf_size(&l->out) - before), CMD_MSG};
    if (buf_append(&l->cmds, &c, sizeof c) < 0) {
        l->out.len = l->out.off + before;
        COUNT(r, pubsub_backend_dropped, 1);
        return;
    }
    l->queued += c.len;
    /* Most publishes leave at once, without waiting for POLLOUT. */
    if (l->state == LINK_OPEN && before == 0 && rlink_flush(r, l) < 0)
        rlink_fail(r, l, strerror(errno));
}

size_t redis_backend_pollfds(const pubsub_redis *r, struct pollfd *pfd, size_t max)
{
    size_t k = 0;
    int dfd = r->dns ? redis_resolver_pollfd(r->dns) : -1;
    if (dfd >= 0 && k < max)
        pfd[k++] = (struct pollfd){.fd = dfd, .events = POLLIN};
    const rlink *ls[2] = {&r->pub, &r->sub};
    for (int i = 0; i < 2 && k < max; i++) {
        const rlink *l = ls[i];
        if (l->fd < 0)
            continue;
        short ev = l->state == LINK_CONNECTING ? POLLOUT
                                               : (short)(POLLIN | (sendable(r, l) ? POLLOUT : 0));
        pfd[k++] = (struct pollfd){.fd = l->fd, .events = ev};
    }
    return k;
}

int redis_backend_io(pubsub_redis *r, const struct pollfd *p)
{
    if (r->dns && p->fd >= 0 && p->fd == redis_resolver_pollfd(r->dns)) {
        if (p->revents)
            rlink_resolved(r);
        return 1;
    }
    rlink *l = p->fd == r->pub.fd ? &r->pub : p->fd == r->sub.fd ? &r->sub : NULL;
    if (!l || p->fd < 0)
        return 0;
    if (!p->revents)
        return 1;
    if (l->state == LINK_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            rlink_fail(r, l, strerror(err));
            return 1;
        }
        rlink_open(r, l);
        return 1;
    }
    if (p->revents & (POLLIN | POLLHUP | POLLERR))
        if (link_read(r, l) < 0)
            return 1;
    /* Replies on pub may open the window for publishes held back. */
    if (((p->revents & POLLOUT) || l == &r->pub) && l->state == LINK_OPEN && rlink_flush(r, l) < 0)
        rlink_fail(r, l, strerror(errno));
    return 1;
}

/* A PING on a ready link; on pub it is a command of the queue, not a message. */
static void link_ping(pubsub_redis *r, rlink *l, double now)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    size_t before = buf_size(&l->out);
    cmd_rec c = {(uint32_t)(sizeof ping - 1), CMD_PING};
    if (buf_append(&l->out, ping, sizeof ping - 1) < 0 ||
        (l == &r->pub && buf_append(&l->cmds, &c, sizeof c) < 0)) {
        l->out.len = l->out.off + before;
        rlink_fail(r, l, "out of memory");
        return;
    }
    l->ping_at = now + PING_EVERY_S;
    l->pong_by = now + PING_TIMEOUT_S;
    if (before == 0 && rlink_flush(r, l) < 0)
        rlink_fail(r, l, strerror(errno));
}

static void link_tick(pubsub_redis *r, rlink *l, double now)
{
    if (l->state == LINK_DOWN && r->stopping)
        return;
    if (l->state == LINK_OPEN && l->ready) {
        if (l->pong_by > 0 && now >= l->pong_by)
            rlink_fail(r, l, "no answer to PING");
        else if (l->pong_by == 0 && now >= l->ping_at)
            link_ping(r, l, now);
        return;
    }
    if (l->state == LINK_DOWN && now >= l->retry_at)
        rlink_connect(r, l, now);
    else if (l->state == LINK_RESOLVING && now >= l->deadline)
        rlink_fail(r, l, "name lookup timed out");
    else if ((l->state == LINK_CONNECTING || (l->state == LINK_OPEN && !l->ready)) &&
             now >= l->deadline)
        rlink_fail(r, l, "timed out");
}

void redis_backend_tick(pubsub_redis *r, double now)
{
    link_tick(r, &r->pub, now);
    link_tick(r, &r->sub, now);
}

static double link_next(const pubsub_redis *r, const rlink *l)
{
    if (l->state == LINK_DOWN)
        return r->stopping ? INFINITY : l->retry_at;
    if (l->state == LINK_RESOLVING || l->state == LINK_CONNECTING || !l->ready)
        return l->deadline;
    return l->pong_by > 0 ? l->pong_by : l->ping_at;
}

double redis_backend_next(const pubsub_redis *r)
{
    double a = link_next(r, &r->pub), b = link_next(r, &r->sub);
    return a < b ? a : b;
}
