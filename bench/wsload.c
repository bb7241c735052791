/*
 * wsload.c - the load clients of bench/ws_sse.sh, one epoll loop each:
 *   wsload ws  HOST PORT PATH CONNS SECONDS SIZE  WebSocket echo round trips
 *   wsload sse HOST PORT PATH CONNS SECONDS       concurrent SSE streams
 * ws: every connection sends a SIZE-byte masked text frame, waits for the
 * echo, sends the next; prints round trips/s and latency percentiles.
 * sse: opens CONNS streams (at most 500 handshakes in flight, so the listen
 * queue never overflows), holds them for SECONDS, prints a status line per
 * second ("open=N events=M") and a summary. Bounded in time; exits by itself.
 *
 * Build: cc -O2 -std=c11 -D_GNU_SOURCE -o wsload bench/wsload.c
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { ST_CONNECTING, ST_HANDSHAKE, ST_OPEN, ST_DEAD };

typedef struct cl {
    int fd, state;
    size_t outlen, outoff;
    char out[512];
    char in[65536];
    size_t inlen;
    double sent_at;
    char tail[2]; /* sse: last two bytes, to find "\n\n" across reads */
} cl;

static const char *mode, *host, *path;
static int port, nconn, seconds, msgsize = 64;
static int epfd;
static long long round_trips, events, failures;
static uint32_t *lat;
static size_t nlat, caplat;
static int open_count, inflight;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void kill_conn(cl *c)
{
    if (c->state == ST_DEAD)
        return;
    if (c->state == ST_OPEN)
        open_count--;
    else
        inflight--;
    failures++;
    c->state = ST_DEAD;
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
}

static void start_conn(cl *c)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "wsload: %s is not an IPv4 address\n", host);
        exit(2);
    }
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket (raise ulimit -n)");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS)
        die("connect");
    c->state = ST_CONNECTING;
    c->inlen = 0;
    inflight++;
    if (!strcmp(mode, "ws"))
        c->outlen = (size_t)snprintf(c->out, sizeof c->out,
                                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                                     "Connection: Upgrade\r\n"
                                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                     "Sec-WebSocket-Version: 13\r\n\r\n",
                                     path, host, port);
    else
        c->outlen = (size_t)snprintf(c->out, sizeof c->out,
                                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\n"
                                     "Accept: text/event-stream\r\n\r\n",
                                     path, host, port);
    c->outoff = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        die("epoll_ctl");
}

/* One masked text frame of msgsize bytes (client frames must be masked). */
static void queue_frame(cl *c)
{
    static const unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
    size_t n = 0;
    c->out[n++] = (char)0x81;
    if (msgsize < 126) {
        c->out[n++] = (char)(0x80 | msgsize);
    } else {
        c->out[n++] = (char)(0x80 | 126);
        c->out[n++] = (char)(msgsize >> 8);
        c->out[n++] = (char)(msgsize & 0xff);
    }
    memcpy(c->out + n, mask, 4);
    n += 4;
    for (int i = 0; i < msgsize; i++)
        c->out[n + (size_t)i] = (char)(('a' + i % 26) ^ mask[i % 4]);
    c->outlen = n + (size_t)msgsize;
    c->outoff = 0;
    c->sent_at = now();
}

static int flush_out(cl *c)
{
    while (c->outoff < c->outlen) {
        ssize_t w = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
        if (w < 0)
            return errno == EAGAIN ? 0 : -1;
        c->outoff += (size_t)w;
    }
    return 0;
}

/* ws: consume complete echo frames; each one is a round trip. */
static void ws_input(cl *c)
{
    for (;;) {
        if (c->inlen < 2)
            return;
        unsigned char *p = (unsigned char *)c->in;
        size_t len = p[1] & 0x7f, off = 2;
        if (len == 126) {
            if (c->inlen < 4)
                return;
            len = (size_t)p[2] << 8 | p[3];
            off = 4;
        }
        if (c->inlen < off + len)
            return;
        memmove(c->in, c->in + off + len, c->inlen - off - len);
        c->inlen -= off + len;
        if ((p[0] & 0x0f) == 0x8) { /* close */
            kill_conn(c);
            return;
        }
        round_trips++;
        if (nlat < caplat)
            lat[nlat++] = (uint32_t)((now() - c->sent_at) * 1e6);
        queue_frame(c);
        if (flush_out(c) < 0) {
            kill_conn(c);
            return;
        }
    }
}

/* sse: count event terminators ("\n\n"), including across reads. */
static void sse_count(cl *c, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n' && c->tail[1] == '\n')
            events++;
        c->tail[0] = c->tail[1];
        c->tail[1] = p[i];
    }
}

static void on_event(cl *c, uint32_t evs)
{
    if (c->state == ST_DEAD)
        return;
    if (evs & (EPOLLERR | EPOLLHUP)) {
        kill_conn(c);
        return;
    }
    if (c->state == ST_CONNECTING && (evs & EPOLLOUT)) {
        c->state = ST_HANDSHAKE;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
    }
    if (flush_out(c) < 0) {
        kill_conn(c);
        return;
    }
    if (!(evs & EPOLLIN))
        return;
    for (;;) {
        ssize_t r = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
        if (r < 0 && errno == EAGAIN)
            return;
        if (r <= 0) {
            kill_conn(c);
            return;
        }
        if (c->state == ST_OPEN && !strcmp(mode, "sse")) {
            sse_count(c, c->in, (size_t)r); /* streams are not kept, only counted */
            continue;
        }
        c->inlen += (size_t)r;
        if (c->state == ST_HANDSHAKE) {
            char *end = memmem(c->in, c->inlen, "\r\n\r\n", 4);
            if (!end)
                continue;
            int want = !strcmp(mode, "ws") ? 101 : 200;
            if (c->inlen < 12 || atoi(c->in + 9) != want) {
                kill_conn(c);
                return;
            }
            size_t head = (size_t)(end + 4 - c->in);
            memmove(c->in, c->in + head, c->inlen - head);
            c->inlen -= head;
            c->state = ST_OPEN;
            inflight--;
            open_count++;
            if (!strcmp(mode, "ws")) {
                queue_frame(c);
                if (flush_out(c) < 0) {
                    kill_conn(c);
                    return;
                }
            } else {
                sse_count(c, c->in, c->inlen);
                c->inlen = 0;
            }
        }
        if (c->state == ST_OPEN && !strcmp(mode, "ws"))
            ws_input(c);
        if (c->state == ST_DEAD)
            return;
    }
}

int main(int argc, char **argv)
{
    if (argc < 7 || (strcmp(argv[1], "ws") && strcmp(argv[1], "sse"))) {
        fprintf(stderr, "usage: wsload ws|sse HOST PORT PATH CONNS SECONDS [SIZE]\n");
        return 2;
    }
    mode = argv[1];
    host = argv[2];
    port = atoi(argv[3]);
    path = argv[4];
    nconn = atoi(argv[5]);
    seconds = atoi(argv[6]);
    if (argc > 7)
        msgsize = atoi(argv[7]);
    if (nconn < 1 || seconds < 1 || msgsize < 1 || msgsize > 400) {
        fprintf(stderr, "wsload: bad CONNS, SECONDS or SIZE (1..400)\n");
        return 2;
    }
    cl *cls = calloc((size_t)nconn, sizeof *cls);
    caplat = 8u << 20;
    lat = malloc(caplat * sizeof *lat);
    if (!cls || !lat)
        die("calloc");
    if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        die("epoll_create1");

    int started = 0;
    double t0 = now(), last_report = t0, t_open = 0, end = t0 + seconds;
    long long ev_at_open = 0, rt_at_open = 0;
    struct epoll_event evs[256];
    while (now() < end) {
        /* Keep at most 500 handshakes in flight. */
        while (started < nconn && inflight < 500)
            start_conn(&cls[started++]);
        int n = epoll_wait(epfd, evs, 256, 100);
        for (int i = 0; i < n; i++)
            on_event(evs[i].data.ptr, evs[i].events);
        if (!t_open && started == nconn && inflight == 0) {
            t_open = now(); /* measure from when every connection is open */
            ev_at_open = events;
            rt_at_open = round_trips;
            nlat = 0;
            if (!strcmp(mode, "sse"))
                end = t_open + seconds;
            fprintf(stderr, "wsload: %d open after %.2fs (%lld failed)\n", open_count, t_open - t0,
                    failures);
        }
        if (!strcmp(mode, "sse") && now() - last_report >= 1.0) {
            last_report = now();
            printf("t=%.0f open=%d events=%lld failed=%lld\n", last_report - t0, open_count, events,
                   failures);
            fflush(stdout);
        }
    }
    double t1 = now();
    if (!t_open) {
        t_open = t0;
        ev_at_open = 0;
        rt_at_open = 0;
    }
    if (!strcmp(mode, "ws")) {
        qsort(lat, nlat, sizeof *lat, cmp_u32);
        double p50 = nlat ? lat[nlat / 2] / 1000.0 : 0;
        double p99 = nlat ? lat[(size_t)(nlat * 0.99)] / 1000.0 : 0;
        printf("RESULT ws conns=%d open=%d msgs=%lld secs=%.2f rate=%.0f p50_ms=%.3f "
               "p99_ms=%.3f failed=%lld\n",
               nconn, open_count, round_trips - rt_at_open, t1 - t_open,
               (round_trips - rt_at_open) / (t1 - t_open), p50, p99, failures);
    } else {
        printf("RESULT sse conns=%d open=%d events=%lld secs=%.2f rate=%.0f failed=%lld\n", nconn,
               open_count, events - ev_at_open, t1 - t_open, (events - ev_at_open) / (t1 - t_open),
               failures);
    }
    return open_count == nconn ? 0 : 1;
}
