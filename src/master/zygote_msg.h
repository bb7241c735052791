/*
 * zygote_msg.h - the messages between the master and a generation's zygote,
 * one per SOCK_SEQPACKET datagram: the master asks for a worker, the zygote
 * (its short-lived middle child, in fact) says which pid it got, or why not.
 */
#ifndef PAGID_ZYGOTE_MSG_H
#define PAGID_ZYGOTE_MSG_H

#include <stddef.h>
#include <stdint.h>

typedef enum zmsg_type {
    ZMSG_SPAWN = 1,   /* master -> zygote: fork worker num (request seq) */
    ZMSG_SPAWNED = 2, /* zygote -> master: worker num of request seq is pid */
    ZMSG_FAILED = 3,  /* zygote -> master: no worker for request seq: errno err */
} zmsg_type;

typedef struct zygote_msg {
    zmsg_type type;
    uint32_t seq; /* the master's request number, echoed: a stale report matches no slot */
    int num;      /* worker number, 1..ZMSG_MAX_NUM */
    int pid;      /* ZMSG_SPAWNED only */
    int err;      /* ZMSG_FAILED only: an errno value */
} zygote_msg;

/** The encoded size: a magic word and five 32-bit fields, in host order. */
#define ZMSG_SIZE 24
#define ZMSG_MAX_NUM 65535

/** Encode m into out; ZMSG_SIZE, or 0 when m is not a valid message. */
size_t zmsg_encode(const zygote_msg *m, unsigned char out[ZMSG_SIZE]);

/**
 * Decode one datagram of len bytes. 0, or -1 when it is not exactly one
 * valid message (size, magic, type, and the fields the type allows).
 */
int zmsg_decode(const unsigned char *buf, size_t len, zygote_msg *out);

#endif
