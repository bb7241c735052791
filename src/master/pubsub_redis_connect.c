/*
 * pubsub_redis_connect.c - how a link of the Redis backend opens: the name
 * lookup (off the loop), a non-blocking socket with keepalive and a user
 * timeout, then the handshake (AUTH, PING) ahead of what waited while down.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pubsub_redis_int.h"
#include "redis_wire.h"

/* AUTH (when the url has a password) and PING: what opens a connection. */
static int handshake(pubsub_redis *r, buf *b)
{
    if (r->url.password[0]) {
        int two = r->url.user[0] != 0;
        if (buf_printf(b, "*%d\r\n", two ? 3 : 2) < 0 || redis_word(b, "AUTH") < 0 ||
            (two && redis_word(b, r->url.user) < 0) || redis_word(b, r->url.password) < 0)
            return -1;
    }
    return buf_append_str(b, "*1\r\n") < 0 || redis_word(b, "PING") < 0 ? -1 : 0;
}

/* Unacknowledged data older than this breaks the TCP connection. */
#define TCP_USER_TIMEOUT_MS 25000

/* A socket to the url, connecting (non-blocking): the fd, or -1 with why. */
static int open_socket(pubsub_redis *r, rlink *l, int *in_progress, const char **why)
{
    *in_progress = 0;
    if (r->url.is_unix) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path, r->url.path, strlen(r->url.path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            *why = strerror(errno);
            return -1;
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            if (errno != EINPROGRESS && errno != EAGAIN) {
                *why = strerror(errno);
                close(fd);
                return -1;
            }
            *in_progress = 1;
        }
        return fd;
    }
    struct addrinfo *res = r->addrs;
    unsigned n = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next)
        n++;
    if (n == 0) {
        *why = "no address";
        return -1;
    }
    /* Each attempt takes the next address: "localhost" may be ::1 first
     * while Redis listens on 127.0.0.1 only. */
    struct addrinfo *a = res;
    for (unsigned i = 0; i < l->addr_next % n; i++)
        a = a->ai_next;
    l->addr_next++;
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    int one = 1, idle = 10, intvl = 5, cnt = 3, user_timeout = TCP_USER_TIMEOUT_MS;
    /* A Redis host that vanishes without a reset is noticed in ~25 s. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    /* ...and one that stops acknowledging what is sent, in ~25 s too. */
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
    if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            *why = strerror(errno);
            close(fd);
            return -1;
        }
        *in_progress = 1;
    }
    return fd;
}

/* The socket is connected: send the handshake (and, for sub, every channel). */
void rlink_open(pubsub_redis *r, rlink *l)
{
    l->state = LINK_OPEN;
    l->hs_pending = r->url.password[0] ? 2 : 1;
    l->err_logged = 0;
    l->rd = redis_reader_new();
    buf hs = BUF_INIT;
    if (!l->rd || handshake(r, &hs) < 0) {
        buf_free(&hs);
        rlink_fail(r, l, "out of memory");
        return;
    }
    if (l == &r->pub) {
        /* The handshake goes before the messages kept while down. */
        cmd_rec c = {(uint32_t)buf_size(&hs), CMD_HANDSHAKE};
        buf cmds = BUF_INIT;
        if (buf_append(&hs, buf_head(&l->out), buf_size(&l->out)) < 0 ||
            buf_append(&cmds, &c, sizeof c) < 0 ||
            buf_append(&cmds, buf_head(&l->cmds), buf_size(&l->cmds)) < 0) {
            buf_free(&hs);
            buf_free(&cmds);
            rlink_fail(r, l, "out of memory");
            return;
        }
        buf_free(&l->out);
        buf_free(&l->cmds);
        l->out = hs;
        l->cmds = cmds;
        l->head_sent = 0;
    } else {
        buf_free(&l->out);
        l->out = hs;
        /* Every routed channel is kept aside and subscribed in batches as
         * the output drains (rlink_flush), never queued all at once. */
        rlink_sub_resubscribe(r);
        if (l->state != LINK_OPEN)
            return; /* failed meanwhile (out of memory) */
    }
    if (rlink_flush(r, l) < 0)
        rlink_fail(r, l, strerror(errno));
}

static void link_connect_now(pubsub_redis *r, rlink *l, double now)
{
    const char *why = NULL;
    int in_progress;
    int fd = open_socket(r, l, &in_progress, &why);
    if (fd < 0) {
        rlink_fail(r, l, why);
        return;
    }
    l->fd = fd;
    l->deadline = now + CONNECT_TIMEOUT_S;
    if (in_progress)
        l->state = LINK_CONNECTING;
    else
        rlink_open(r, l);
}

static void port_str(const pubsub_redis *r, char *port, size_t n)
{
    snprintf(port, n, "%d", r->url.port);
}

/* Connect now, or once the host's name is looked up (never in this loop:
 * getaddrinfo may wait tens of seconds while DNS is down). */
void rlink_connect(pubsub_redis *r, rlink *l, double now)
{
    if (!r->url.is_unix && !r->numeric && (!r->addrs || now - r->addrs_at > ADDRS_FRESH_S)) {
        if (r->addrs)
            freeaddrinfo(r->addrs);
        r->addrs = NULL;
        char port[16];
        port_str(r, port, sizeof port);
        if (redis_resolver_start(r->dns, r->url.host, port) < 0) {
            rlink_fail(r, l, strerror(errno));
            return;
        }
        l->state = LINK_RESOLVING;
        l->deadline = now + CONNECT_TIMEOUT_S;
        return;
    }
    link_connect_now(r, l, now);
}

/* The lookup ended: the links waiting for it connect (or fail). */
void rlink_resolved(pubsub_redis *r)
{
    struct addrinfo *res = NULL;
    int rc;
    if (!redis_resolver_take(r->dns, &res, &rc))
        return;
    double now = rlink_now();
    if (r->addrs)
        freeaddrinfo(r->addrs);
    r->addrs = rc == 0 ? res : NULL;
    r->addrs_at = now;
    rlink *ls[2] = {&r->pub, &r->sub};
    for (int i = 0; i < 2; i++) {
        if (ls[i]->state != LINK_RESOLVING)
            continue;
        if (rc != 0) {
            char why[REDIS_URL_HOST_MAX + 160];
            snprintf(why, sizeof why, "looking up %s: %s", r->url.host, gai_strerror(rc));
            rlink_fail(r, ls[i], why);
        } else {
            link_connect_now(r, ls[i], now);
        }
    }
}
