/*
 * pubsub_msg.c - encoding and strict decoding of the pub/sub frames shared by
 * the worker (worker/pubsub.c) and the master's broker (master/pubsub_broker.c).
 */
#include "pubsub_msg.h"

#include <string.h>

static int valid(pubsub_type type, size_t channel_len, size_t len)
{
    if (channel_len == 0 || channel_len > PUBSUB_MAX_CHANNEL)
        return 0;
    switch (type) {
    case PUBSUB_SUB:
    case PUBSUB_UNSUB:
        return len == 0;
    case PUBSUB_PUB:
        return len <= PUBSUB_MAX_MESSAGE;
    }
    return 0;
}

size_t pubsub_frame_size(const pubsub_frame *f)
{
    if (!valid(f->type, f->channel_len, f->len))
        return 0;
    return PUBSUB_HEAD + f->channel_len + f->len;
}

int pubsub_encode(const pubsub_frame *f, buf *out)
{
    size_t size = pubsub_frame_size(f);
    if (size == 0)
        return -1;
    unsigned char *p = (unsigned char *)buf_reserve(out, size);
    if (!p)
        return -1;
    uint32_t rest = (uint32_t)(size - 4);
    p[0] = (unsigned char)(rest >> 24);
    p[1] = (unsigned char)(rest >> 16);
    p[2] = (unsigned char)(rest >> 8);
    p[3] = (unsigned char)rest;
    p[4] = (unsigned char)f->type;
    p[5] = (unsigned char)f->channel_len;
    memcpy(p + PUBSUB_HEAD, f->channel, f->channel_len);
    if (f->len)
        memcpy(p + PUBSUB_HEAD + f->channel_len, f->data, f->len);
    buf_commit(out, size);
    return 0;
}

long pubsub_decode(const void *bytes, size_t n, pubsub_frame *f)
{
    const unsigned char *p = bytes;
    if (n < 4)
        return 0;
    uint32_t rest = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    if (rest < PUBSUB_HEAD - 4 || rest > PUBSUB_MAX_FRAME - 4)
        return -1;
    if (n >= PUBSUB_HEAD) {
        /* The type and channel length can be judged before the rest arrives. */
        size_t chlen = p[5];
        if (chlen == 0 || (size_t)rest < PUBSUB_HEAD - 4 + chlen)
            return -1;
        if (p[4] != PUBSUB_SUB && p[4] != PUBSUB_UNSUB && p[4] != PUBSUB_PUB)
            return -1;
    }
    if (n < 4 + (size_t)rest)
        return 0;
    pubsub_type type = (pubsub_type)p[4];
    size_t chlen = p[5];
    size_t len = rest - (PUBSUB_HEAD - 4) - chlen;
    if (!valid(type, chlen, len))
        return -1;
    f->type = type;
    f->channel = (const char *)p + PUBSUB_HEAD;
    f->channel_len = chlen;
    f->data = len ? p + PUBSUB_HEAD + chlen : NULL;
    f->len = len;
    return (long)(4 + rest);
}
