/*
 * redis_wire.h - the pieces of the Redis protocol the master's backend
 * (pubsub_redis.c) uses that need no connection: RESP command encoding, a
 * bounded reply reader, the instance tag, log-safe server text, backoff.
 */
#ifndef PAGID_REDIS_WIRE_H
#define PAGID_REDIS_WIRE_H

#include <stddef.h>

struct buf;

#define REDIS_BACKOFF_MIN_MS 100u
#define REDIS_BACKOFF_MAX_MS 5000u

/** One RESP bulk string made of up to three pieces (prefix + name, tag + data); 0 or -1. */
int redis_bulk3(struct buf *b, const void *a, size_t an, const void *c, size_t cn, const void *d,
                size_t dn);
/** A bulk string of the C string w; 0 or -1. */
int redis_word(struct buf *b, const char *w);

/** The delay before retry number `failures` (1-based): 100 ms doubling, capped at 5 s. */
unsigned redis_backoff_ms(unsigned failures);

/* Each message this instance publishes starts with REDIS_TAG_MAGIC and its
 * 8-byte instance id, so it can skip its own when Redis sends them back. */
#define REDIS_TAG_MAGIC "\xffpgd"
#define REDIS_TAG_LEN 12u

/* Replies on our links are flat arrays of at most this many elements
 * (message: kind, channel, payload; pmessage would be 4). */
#define REDIS_REPLY_MAX_ELEMENTS 4

/* Bytes of a Redis error reply that reach the log. */
#define REDIS_ERROR_LOG_MAX 120u

/**
 * The first max bytes of in[len] into out (NUL-terminated, cut to fit
 * outlen) with bytes outside printable ASCII and backslash as \xNN: server
 * text for the log, which must not carry line breaks or terminal codes.
 * The length written.
 */
size_t redis_escape(char *out, size_t outlen, const char *in, size_t len, size_t max);

struct redisReader;
/** A hiredis reader that refuses nested arrays and arrays longer than
 * REDIS_REPLY_MAX_ELEMENTS (redisReaderGetReply fails). NULL when out of memory. */
struct redisReader *redis_reader_new(void);
/** 1 when the partial reply rd holds, or a bulk string header it has read,
 * is over limit bytes: the peer is not a sane Redis, drop the link. */
int redis_reader_over(const struct redisReader *rd, size_t limit);

/*
 * A filter in front of the hiredis reader that lets a bulk string longer
 * than the caller's bound go by without holding it: its header becomes a
 * null bulk ($-1) and its bytes are discarded as they arrive, so the reply
 * around it parses (a "message" whose payload is nil) and the link goes on.
 * RESP is a pre-order walk of typed items, so no nesting is tracked: each
 * item is a type byte and a line, and a bulk string's body follows its line.
 */
typedef struct redis_skipper {
    int state;
    unsigned head_len;
    char head[24];           /* a bulk header's digits, held until its line ends */
    unsigned long long left; /* a bulk body's bytes (CRLF included) to pass or discard */
} redis_skipper;

/**
 * Feed n bytes of a RESP stream to rd (hiredis), replacing each bulk string
 * longer than max bytes by a null bulk. The number of bulk strings skipped
 * by this call (those whose header ended in it), or -1 on a malformed bulk
 * header or out of memory (the link is of no more use). k starts zeroed.
 */
long redis_skip_feed(redis_skipper *k, struct redisReader *rd, const char *p, size_t n, size_t max);

/**
 * A payload that came from Redis: 0 when it carries id (ours: skip it),
 * else 1 with *msg and *len the message (a tag of another instance removed; a
 * payload without a tag, from some other Redis client, is the message).
 */
int redis_untag(const unsigned char id[8], const unsigned char *payload, size_t n,
                const unsigned char **msg, size_t *len);

#endif
