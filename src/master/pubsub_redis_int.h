/*
 * pubsub_redis_int.h - what the parts of the master's Redis backend share:
 * pubsub_redis.c (the interface, writing, replies, timers),
 * pubsub_redis_sub.c (the subscribe side: SUBSCRIBE in batches, messages)
 * and pubsub_redis_connect.c (opening a link: name lookup, socket,
 * handshake). Nothing else includes it.
 */
#ifndef PAGID_PUBSUB_REDIS_INT_H
#define PAGID_PUBSUB_REDIS_INT_H

#include <hiredis/hiredis.h>
#include <netdb.h>
#include <stdint.h>

#include "common/buf.h"
#include "pubsub_redis.h"
#include "redis_resolve.h"

/* Connect and the first PING answered within this, or the attempt fails. */
#define CONNECT_TIMEOUT_S 5.0
/* A name's addresses serve the connects of this long (both links, one
 * backoff cycle), then it is looked up again. */
#define ADDRS_FRESH_S 1.0

enum link_state { LINK_DOWN, LINK_RESOLVING, LINK_CONNECTING, LINK_OPEN };

/* What a command of pub's queue is: the handshake of one connection (its
 * replies counted by hs_pending), a message (PUBLISH: counted as sent once
 * Redis answers it), or a PING. */
enum cmd_kind { CMD_HANDSHAKE, CMD_MSG, CMD_PING };

/* A command in pub's output queue, or written and waiting for its reply. */
typedef struct cmd_rec {
    uint32_t len;
    uint32_t kind;
} cmd_rec;

typedef struct rlink {
    const char *role; /* "publish" or "subscribe", for the logs */
    int fd;
    enum link_state state;
    int ready;      /* its PING was answered: Redis is really there */
    int hs_pending; /* replies to the handshake (AUTH, PING) still to come */
    int err_logged; /* an error reply after the handshake was logged */
    double ping_at; /* ready: when to send the next PING */
    double pong_by; /* a PING is out: its answer is due by then; 0 when none */
    buf out;
    buf cmds;          /* pub only: one cmd_rec per command in out */
    size_t head_sent;  /* pub only: bytes of the first command already written */
    size_t queued;     /* pub only: bytes of messages in out */
    buf waiting;       /* pub only: one cmd_rec per command written, its reply still to come */
    size_t unanswered; /* pub only: bytes of the messages in waiting */
    redisReader *rd;
    redis_skipper skip; /* in front of rd: a reply too large to hold is skipped */
    double retry_at;    /* DOWN: when to connect again */
    double deadline;    /* RESOLVING, CONNECTING, or OPEN and not ready: when to give up */
    unsigned failures;  /* attempts failed since it was last ready */
    unsigned addr_next; /* TCP: which of the host's addresses to try next */
} rlink;

struct pubsub_redis {
    redis_url url;
    char where[REDIS_URL_HOST_MAX + 32];
    char *prefix;
    size_t prefix_len;
    size_t buffer;
    unsigned char id[8];
    rlink pub, sub;
    /* TCP: the host's addresses; a literal address is parsed once and kept
     * (numeric), a name is looked up off the loop by dns. */
    struct addrinfo *addrs;
    int numeric;
    double addrs_at;
    redis_resolver *dns;
    int up;     /* both links ready */
    int was_up; /* up at least once: later ups are reconnections */
    int down_logged, drop_logged;
    int stopping; /* the master stops: no new connection */
    double down_since;
    shm_region *shm;
    redis_deliver_fn deliver;
    redis_resubscribe_fn resubscribe;
    redis_routed_fn routed;
    void *ud;
    /* The channels to subscribe again after sub connected: one length byte
     * and the name each, sent a batch at a time as the output drains. */
    buf resub;
    int collecting; /* resubscribe is running: redis_backend_subscribe adds to resub */
};

/** CLOCK_MONOTONIC in seconds. */
double rlink_now(void);
/** The link failed (why: for the log): close it, keep what can be resent,
 *  and schedule the next attempt. */
void rlink_fail(pubsub_redis *r, rlink *l, const char *why);
/** Write what l's queue holds: 0, or -1 (errno) when the link is broken. */
int rlink_flush(pubsub_redis *r, rlink *l);
/** Add n to one of the shared region's counters (when there is one). */
void rlink_count(pubsub_redis *r, _Atomic uint64_t *field, uint64_t n);
#define COUNT(r, field, n) rlink_count((r), (r)->shm ? &(r)->shm->field : NULL, (n))

/* pubsub_redis_sub.c */
/** sub's output ran low: add the next batch of channels to subscribe again. */
int rlink_sub_refill(pubsub_redis *r);
/** Subscribe every routed channel again, in batches, on a sub link just opened. */
void rlink_sub_resubscribe(pubsub_redis *r);
/** A "message" from the subscribe link (payload nil: one too large, skipped). */
void rlink_sub_message(pubsub_redis *r, const redisReply *ch, const redisReply *payload);

/* pubsub_redis_connect.c */
/** Connect now, or once the host's name is looked up. */
void rlink_connect(pubsub_redis *r, rlink *l, double now);
/** The socket is connected: send the handshake (and, for sub, every channel). */
void rlink_open(pubsub_redis *r, rlink *l);
/** The name lookup ended: the links waiting for it connect (or fail). */
void rlink_resolved(pubsub_redis *r);

#endif
