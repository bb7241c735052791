/*
 * pubsub_redis_sub.c - the subscribe side of the master's Redis backend:
 * SUBSCRIBE/UNSUBSCRIBE as local channels come and go, the resubscription
 * of every channel after a connect (in batches that leave as the output
 * drains), and the messages Redis pushes.
 */
#include <errno.h>
#include <string.h>

#include "common/buf.h"
#include "common/pubsub_msg.h"
#include "pubsub_redis_int.h"
#include "redis_wire.h"

/* Subscribe commands waiting to be written: past this Redis is not reading
 * them, the link is dropped (a reconnect rebuilds them from the routes).
 * The resubscription's batches are not counted against it: they are added
 * only while less than one batch waits. */
#define SUB_QUEUE_MAX (1u << 20)
/* One SUBSCRIBE of a resubscription carries channels up to about this many
 * bytes; the next is added once less than this waits to be written. With
 * 10,000 channels of 255 bytes (2.6 MB) no more than ~128 KiB is queued. */
#define RESUB_BATCH (64u * 1024)

/* "VERB prefix+channel": SUBSCRIBE and UNSUBSCRIBE. */
static int channel_cmd(pubsub_redis *r, buf *b, const char *verb, const char *ch, size_t len)
{
    if (buf_append_str(b, "*2\r\n") < 0 || redis_word(b, verb) < 0 ||
        redis_bulk3(b, r->prefix, r->prefix_len, ch, len, "", 0) < 0)
        return -1;
    return 0;
}

/* Queue one command on sub and write it if nothing was waiting. */
static void sub_command(pubsub_redis *r, const char *verb, const char *channel, size_t len)
{
    rlink *l = &r->sub;
    int was_empty = buf_size(&l->out) == 0;
    if (channel_cmd(r, &l->out, verb, channel, len) < 0) {
        rlink_fail(r, l, "out of memory");
        return;
    }
    if (buf_size(&l->out) > SUB_QUEUE_MAX) {
        rlink_fail(r, l, "redis does not read the subscriptions");
        return;
    }
    if (was_empty && rlink_flush(r, l) < 0)
        rlink_fail(r, l, strerror(errno));
}

void redis_backend_subscribe(pubsub_redis *r, const char *channel, size_t len)
{
    if (r->sub.state != LINK_OPEN)
        return; /* every channel is subscribed at the next connect */
    if (r->collecting) {
        /* rlink_sub_resubscribe's walk of the routes: kept, sent in batches. */
        unsigned char n = (unsigned char)len;
        if (len == 0 || len > PUBSUB_MAX_CHANNEL || buf_append(&r->resub, &n, 1) < 0 ||
            buf_append(&r->resub, channel, len) < 0)
            r->collecting = -1; /* out of memory: the link fails once the walk is over */
        return;
    }
    sub_command(r, "SUBSCRIBE", channel, len);
}

void redis_backend_unsubscribe(pubsub_redis *r, const char *channel, size_t len)
{
    if (r->sub.state != LINK_OPEN)
        return;
    /* A channel still in resub is skipped when its batch is made (routed). */
    sub_command(r, "UNSUBSCRIBE", channel, len);
}

void rlink_sub_resubscribe(pubsub_redis *r)
{
    buf_free(&r->resub);
    if (!r->resubscribe)
        return;
    r->collecting = 1;
    r->resubscribe(r->ud, r);
    int failed = r->collecting < 0;
    r->collecting = 0;
    if (failed) {
        buf_free(&r->resub);
        rlink_fail(r, &r->sub, "out of memory");
    }
}

/* One SUBSCRIBE of the channels at the head of resub, up to RESUB_BATCH
 * bytes, skipping those with no local subscriber any more: 0, or -1 when
 * out of memory. */
static int sub_batch(pubsub_redis *r)
{
    buf names = BUF_INIT;
    size_t count = 0, used = 0;
    const unsigned char *p = (const unsigned char *)buf_head(&r->resub);
    size_t have = buf_size(&r->resub);
    while (used < have && buf_size(&names) < RESUB_BATCH) {
        size_t len = p[used];
        const char *ch = (const char *)p + used + 1;
        used += 1 + len;
        if (r->routed && !r->routed(r->ud, ch, len))
            continue;
        if (redis_bulk3(&names, r->prefix, r->prefix_len, ch, len, "", 0) < 0) {
            buf_free(&names);
            return -1;
        }
        count++;
    }
    buf_consume(&r->resub, used);
    if (buf_size(&r->resub) == 0)
        buf_free(&r->resub);
    int rc = 0;
    if (count > 0 && (buf_printf(&r->sub.out, "*%zu\r\n", count + 1) < 0 ||
                      redis_word(&r->sub.out, "SUBSCRIBE") < 0 ||
                      buf_append(&r->sub.out, buf_head(&names), buf_size(&names)) < 0))
        rc = -1;
    buf_free(&names);
    return rc;
}

int rlink_sub_refill(pubsub_redis *r)
{
    while (buf_size(&r->resub) > 0 && buf_size(&r->sub.out) < RESUB_BATCH)
        if (sub_batch(r) < 0)
            return -1;
    return 0;
}

void rlink_sub_message(pubsub_redis *r, const redisReply *ch, const redisReply *payload)
{
    if (ch->type != REDIS_REPLY_STRING)
        return;
    if (ch->len < r->prefix_len || memcmp(ch->str, r->prefix, r->prefix_len))
        return;
    if (payload->type == REDIS_REPLY_NIL) {
        /* Its bytes were skipped by the reader (redis_skip_feed): larger
         * than any message pagid carries, published by another program. */
        COUNT(r, pubsub_backend_too_large, 1);
        return;
    }
    if (payload->type != REDIS_REPLY_STRING)
        return;
    const unsigned char *msg;
    size_t len;
    if (!redis_untag(r->id, (const unsigned char *)payload->str, payload->len, &msg, &len))
        return; /* ours, back from Redis: delivered here already */
    size_t name_len = ch->len - r->prefix_len;
    if (len > PUBSUB_MAX_MESSAGE) {
        COUNT(r, pubsub_backend_too_large, 1);
        return;
    }
    if (name_len == 0 || name_len > PUBSUB_MAX_CHANNEL) {
        COUNT(r, pubsub_backend_dropped, 1);
        return;
    }
    COUNT(r, pubsub_backend_received, 1);
    if (r->deliver)
        r->deliver(r->ud, ch->str + r->prefix_len, name_len, msg, len);
}
