/*
 * pubsub_msg.h - the frames of the pub/sub channel between a worker and the
 * master's broker (docs/pubsub.md): length-prefixed on a stream socket,
 * decoded strictly so a bad frame ends the peer instead of confusing it.
 */
#ifndef PAGID_PUBSUB_MSG_H
#define PAGID_PUBSUB_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define PUBSUB_MAX_CHANNEL 255u
#define PUBSUB_MAX_MESSAGE (1u << 20) /* bytes of one published message */
/* u32 length, u8 type, u8 channel length */
#define PUBSUB_HEAD 6u
#define PUBSUB_MAX_FRAME (PUBSUB_HEAD + PUBSUB_MAX_CHANNEL + PUBSUB_MAX_MESSAGE)

typedef enum pubsub_type {
    PUBSUB_SUB = 1,   /* this peer has a subscriber to channel */
    PUBSUB_UNSUB = 2, /* ... no longer */
    PUBSUB_PUB = 3,   /* payload published to channel */
} pubsub_type;

typedef struct pubsub_frame {
    pubsub_type type;
    const char *channel; /* points into the decoded bytes, not NUL-terminated */
    size_t channel_len;
    const unsigned char *data; /* PUB only; NULL with 0 otherwise */
    size_t len;
} pubsub_frame;

/** Bytes the frame takes on the wire; 0 when its fields are invalid. */
size_t pubsub_frame_size(const pubsub_frame *f);
/** Append f's encoding to out: 0, or -1 (invalid frame, or out of memory; out unchanged). */
int pubsub_encode(const pubsub_frame *f, buf *out);
/**
 * Decode the frame at the head of p[0..n): its size (f points into p), 0
 * when more bytes are needed, -1 when the bytes can never be a valid frame
 * (unknown type, empty or oversized channel, payload on SUB/UNSUB, a length
 * beyond PUBSUB_MAX_FRAME).
 */
long pubsub_decode(const void *p, size_t n, pubsub_frame *f);

#endif
