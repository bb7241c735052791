/*
 * redis_wire.c - the Redis protocol as the master's backend speaks it
 * (redis_wire.h): RESP commands, a reply reader bounded against a hostile
 * peer, the instance tag, server text made safe for the log, the backoff.
 * No sockets and no state here: pubsub_redis.c drives the connections.
 */
#include "redis_wire.h"

#include <hiredis/hiredis.h>
#include <string.h>

#include "common/buf.h"

unsigned redis_backoff_ms(unsigned failures)
{
    unsigned ms = REDIS_BACKOFF_MIN_MS;
    for (unsigned i = 1; i < failures && ms < REDIS_BACKOFF_MAX_MS; i++)
        ms *= 2;
    return ms < REDIS_BACKOFF_MAX_MS ? ms : REDIS_BACKOFF_MAX_MS;
}

int redis_untag(const unsigned char id[8], const unsigned char *payload, size_t n,
                const unsigned char **msg, size_t *len)
{
    if (n >= REDIS_TAG_LEN && !memcmp(payload, REDIS_TAG_MAGIC, 4)) {
        if (!memcmp(payload + 4, id, 8))
            return 0;
        *msg = payload + REDIS_TAG_LEN;
        *len = n - REDIS_TAG_LEN;
        return 1;
    }
    *msg = payload;
    *len = n;
    return 1;
}

/* ---- RESP commands ---- */

static int bulk_head(buf *b, size_t n)
{
    return buf_printf(b, "$%zu\r\n", n);
}

int redis_bulk3(buf *b, const void *a, size_t an, const void *c, size_t cn, const void *d,
                size_t dn)
{
    if (bulk_head(b, an + cn + dn) < 0 || buf_append(b, a, an) < 0 || buf_append(b, c, cn) < 0 ||
        buf_append(b, d, dn) < 0 || buf_append(b, "\r\n", 2) < 0)
        return -1;
    return 0;
}

int redis_word(buf *b, const char *w)
{
    return redis_bulk3(b, w, strlen(w), "", 0, "", 0);
}

size_t redis_escape(char *out, size_t outlen, const char *in, size_t len, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    size_t j = 0;
    if (outlen == 0)
        return 0;
    for (size_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (j + 1 >= outlen)
                break;
            out[j++] = (char)c;
        } else {
            if (j + 4 >= outlen)
                break;
            out[j++] = '\\';
            out[j++] = 'x';
            out[j++] = hex[c >> 4];
            out[j++] = hex[c & 15];
        }
    }
    out[j] = '\0';
    return j;
}

/* ---- a bounded reader ----
 * hiredis 0.14 buffers a partial reply without limit and callocs an array
 * header's element count at once: a Redis (or anything at its address)
 * could grow the master without bound. Replies on these links are flat
 * arrays of a few elements, so deeper or longer ones are refused, and the
 * bytes of a partial reply are bounded by redis_reader_over. */

static redisReplyObjectFunctions bounded_fn;
static void *(*default_array)(const redisReadTask *, int);

static void *bounded_array(const redisReadTask *task, int elements)
{
    if (task->parent || elements < 0 || elements > REDIS_REPLY_MAX_ELEMENTS)
        return NULL; /* the reader reports an error: the link fails */
    return default_array(task, elements);
}

struct redisReader *redis_reader_new(void)
{
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return NULL;
    if (!default_array) {
        bounded_fn = *rd->fn;
        default_array = bounded_fn.createArray;
        bounded_fn.createArray = bounded_array;
    }
    rd->fn = &bounded_fn;
    return rd;
}

int redis_reader_over(const struct redisReader *rd, size_t limit)
{
    size_t left = rd->len - rd->pos;
    if (left > limit)
        return 1;
    /* A bulk string whose header is read: its announced length, before its
     * bytes arrive (a huge one would otherwise just wait). */
    if (rd->ridx < 0 || rd->rstack[rd->ridx].type != REDIS_REPLY_STRING)
        return 0;
    const char *p = rd->buf + rd->pos, *end = rd->buf + rd->len;
    unsigned long long n = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n > limit)
            return 1;
    }
    return 0;
}

/* ---- skipping a bulk string too large to hold ---- */

enum { SK_TYPE, SK_LINE, SK_BULKLEN, SK_BODY, SK_DISCARD };

static int feed(struct redisReader *rd, const char *p, size_t n)
{
    return n == 0 || redisReaderFeed(rd, p, n) == REDIS_OK ? 0 : -1;
}

/* A whole bulk header line ("123\r" held in k->head): what to feed in its
 * place and which state follows. -1 when it is not a length. */
static int bulk_header(redis_skipper *k, struct redisReader *rd, size_t max, long *skipped)
{
    unsigned n = k->head_len;
    if (n < 2 || k->head[n - 1] != '\r')
        return -1;
    n--;
    if (n == 2 && k->head[0] == '-' && k->head[1] == '1') {
        k->state = SK_TYPE; /* a null bulk: nothing follows */
        return feed(rd, "$-1\r\n", 5);
    }
    unsigned long long len = 0;
    for (unsigned i = 0; i < n; i++) {
        if (k->head[i] < '0' || k->head[i] > '9' || i >= 18)
            return -1;
        len = len * 10 + (unsigned)(k->head[i] - '0');
    }
    k->left = len + 2;
    if (len > max) {
        k->state = SK_DISCARD;
        (*skipped)++;
        return feed(rd, "$-1\r\n", 5);
    }
    k->state = SK_BODY;
    return feed(rd, "$", 1) < 0 || feed(rd, k->head, k->head_len) < 0 ? -1 : feed(rd, "\n", 1);
}

long redis_skip_feed(redis_skipper *k, struct redisReader *rd, const char *p, size_t n, size_t max)
{
    long skipped = 0;
    size_t i = 0, pass = 0; /* p[pass..i) goes to the reader as it is */
    while (i < n) {
        switch (k->state) {
        case SK_TYPE:
            if (p[i] == '$') {
                if (feed(rd, p + pass, i - pass) < 0)
                    return -1;
                k->state = SK_BULKLEN;
                k->head_len = 0;
                pass = ++i; /* the header is held until its line ends */
            } else {
                k->state = SK_LINE; /* +, -, :, * (or garbage, which hiredis refuses) */
                i++;
            }
            break;
        case SK_LINE: {
            const char *nl = memchr(p + i, '\n', n - i);
            i = nl ? (size_t)(nl - p) + 1 : n;
            if (nl)
                k->state = SK_TYPE;
            break;
        }
        case SK_BULKLEN: {
            char c = p[i++];
            pass = i;
            if (c != '\n') {
                if (k->head_len >= sizeof k->head)
                    return -1;
                k->head[k->head_len++] = c;
            } else if (bulk_header(k, rd, max, &skipped) < 0) {
                return -1;
            }
            break;
        }
        case SK_BODY:
        case SK_DISCARD: {
            size_t take = n - i < k->left ? n - i : (size_t)k->left;
            i += take;
            k->left -= take;
            if (k->state == SK_DISCARD)
                pass = i;
            if (k->left == 0)
                k->state = SK_TYPE;
            break;
        }
        }
    }
    return feed(rd, p + pass, n - pass) < 0 ? -1 : skipped;
}
