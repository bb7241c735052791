/*
 * psload.c - the load client of bench/pubsub.sh, one epoll loop: fan-out of
 * published messages to many WebSocket subscribers, publish-to-receive
 * latency measured with the send time carried in each message.
 *
 *   psload HOST PORT PATH SUBS RATE SECONDS [SIZE]
 *
 * Opens SUBS WebSocket subscribers on PATH (a server that relays what any
 * client sends on PATH to every client on PATH: the `pubsub` built-in, or
 * bench/pubsub_redis_app.py), then one more as the publisher. The publisher
 * sends "w:" messages until every subscriber has seen one (the routes are
 * up), then RATE messages a second for SECONDS: "t:SEQ:NANOSECONDS" padded
 * to SIZE bytes (monotonic clock: sender and receivers are this process).
 * Other messages ("worker N" hellos) are ignored. Waits 2 s for the last
 * deliveries and prints one line:
 *   subs=N published=P expected=E delivered=D lost=L msgs_per_s=R
 *   p50_ms=A p99_ms=B max_ms=C client_cpu_s=S workers=W:n,...
 * Bounded in time; exits by itself (status 1 when it could not set up).
 *
 * Build: cc -O2 -std=c11 -D_GNU_SOURCE -o psload bench/psload.c
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define INCAP 16384
#define MAX_SIZE 4096
#define MAX_WORKERS 64

typedef struct cl {
    int fd;
    int open;   /* handshake answered */
    int warmed; /* saw a "w:" message */
    int worker; /* from the "worker N" hello, -1 unknown */
    size_t inlen;
    unsigned char in[INCAP];
} cl;

static cl *cls; /* subscribers, then the publisher last */
static int nsubs;
static uint32_t *lat_us; /* one per delivery */
static size_t nlat, caplat;
static long long delivered;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "psload: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int dial(const char *host, int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "psload: bad host %s\n", host);
        exit(1);
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     path, host, port);
    if (write(fd, req, (size_t)n) != n)
        die("handshake write");
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* One masked text frame (zero mask key: valid, the payload needs no XOR). */
static void send_text(int fd, const char *p, size_t n)
{
    unsigned char f[MAX_SIZE + 16];
    size_t h = 0;
    f[h++] = 0x81;
    if (n < 126) {
        f[h++] = (unsigned char)(0x80 | n);
    } else {
        f[h++] = 0x80 | 126;
        f[h++] = (unsigned char)(n >> 8);
        f[h++] = (unsigned char)n;
    }
    memset(f + h, 0, 4);
    h += 4;
    memcpy(f + h, p, n);
    size_t off = 0, len = h + n;
    while (off < len) { /* the publisher's output is tiny: a short wait at most */
        ssize_t w = write(fd, f + off, len - off);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            die("publish");
        if (w > 0)
            off += (size_t)w;
    }
}

static void on_message(cl *c, const unsigned char *p, size_t n, int is_pub)
{
    if (n > 7 && memcmp(p, "worker ", 7) == 0) {
        int w = 0; /* p is not NUL-terminated: digits within the message only */
        for (size_t i = 7; i < n && p[i] >= '0' && p[i] <= '9' && w < 100000; i++)
            w = w * 10 + (p[i] - '0');
        c->worker = w;
        return;
    }
    if (is_pub)
        return;
    if (n >= 2 && p[0] == 'w' && p[1] == ':') {
        c->warmed = 1;
        return;
    }
    if (n < 4 || p[0] != 't' || p[1] != ':')
        return;
    const unsigned char *q = memchr(p + 2, ':', n - 2);
    if (!q)
        return;
    long long sent = 0; /* digits within the message only, as above */
    for (const unsigned char *d = q + 1; d < p + n && *d >= '0' && *d <= '9'; d++)
        sent = sent * 10 + (*d - '0');
    long long d = now_ns() - sent;
    delivered++;
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 1 << 20;
        lat_us = realloc(lat_us, caplat * sizeof *lat_us);
        if (!lat_us)
            die("memory");
    }
    lat_us[nlat++] = d > 0 ? (uint32_t)(d / 1000) : 0;
}

static void on_readable(cl *c, int is_pub)
{
    for (;;) {
        ssize_t r = read(c->fd, c->in + c->inlen, INCAP - c->inlen);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            fprintf(stderr, "psload: a connection closed\n");
            close(c->fd);
            c->fd = -1;
            return;
        }
        if (r < 0)
            break;
        /* A short read drained the socket (epoll is level-triggered and says
         * when more comes): no second read just to be told EAGAIN, which
         * would cost the client a syscall per message. */
        int drained = (size_t)r < INCAP - c->inlen;
        c->inlen += (size_t)r;
        size_t off = 0;
        if (!c->open) {
            unsigned char *e = memmem(c->in, c->inlen, "\r\n\r\n", 4);
            if (!e)
                continue;
            if (memcmp(c->in, "HTTP/1.1 101", 12) != 0) {
                fprintf(stderr, "psload: handshake refused: %.40s\n", (char *)c->in);
                exit(1);
            }
            c->open = 1;
            off = (size_t)(e - c->in) + 4;
        }
        for (;;) { /* whole frames */
            size_t have = c->inlen - off, len, hl = 2;
            if (have < 2)
                break;
            unsigned char *f = c->in + off;
            len = f[1] & 0x7f;
            if (len == 126) {
                if (have < 4)
                    break;
                len = (size_t)f[2] << 8 | f[3];
                hl = 4;
            } else if (len == 127) {
                if (have < 10)
                    break;
                len = 0;
                for (int i = 2; i < 10; i++)
                    len = len << 8 | f[i];
                hl = 10;
            }
            if (hl + len > INCAP) {
                fprintf(stderr, "psload: a %zu-byte message is over the client's limit\n", len);
                exit(1);
            }
            if (have < hl + len)
                break;
            if ((f[0] & 0x0f) == 1)
                on_message(c, f + hl, len, is_pub);
            off += hl + len;
        }
        memmove(c->in, c->in + off, c->inlen - off);
        c->inlen -= off;
        if (drained)
            break;
    }
}

static double cpu_s(void) /* this process's user + system time */
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void pump(int ep, double until)
{
    struct epoll_event evs[256];
    for (;;) {
        double left = until - now_s();
        if (left <= 0)
            return;
        int n = epoll_wait(ep, evs, 256, (int)(left * 1000) + 1);
        for (int i = 0; i < n; i++) {
            int idx = (int)evs[i].data.u32;
            if (cls[idx].fd >= 0)
                on_readable(&cls[idx], idx == nsubs);
        }
        if (n == 0)
            return;
    }
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: psload HOST PORT PATH SUBS RATE SECONDS [SIZE]\n");
        return 2;
    }
    const char *host = argv[1], *path = argv[3];
    int port = atoi(argv[2]), rate = atoi(argv[5]), seconds = atoi(argv[6]);
    int size = argc > 7 ? atoi(argv[7]) : 64;
    nsubs = atoi(argv[4]);
    if (nsubs < 1 || rate < 1 || seconds < 1 || size < 40 || size > MAX_SIZE) {
        fprintf(stderr, "psload: SUBS, RATE, SECONDS >= 1; SIZE 40..%d\n", MAX_SIZE);
        return 2;
    }
    cls = calloc((size_t)nsubs + 1, sizeof *cls);
    int ep = epoll_create1(0);
    if (!cls || ep < 0)
        die("setup");
    for (int i = 0; i <= nsubs; i++) {
        cls[i].fd = dial(host, port, path);
        cls[i].worker = -1;
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, cls[i].fd, &e) < 0)
            die("epoll_ctl");
        if (i % 100 == 99)
            pump(ep, now_s() + 0.01); /* answer handshakes as they come */
    }
    cl *pub = &cls[nsubs];
    double deadline = now_s() + 30;
    int open = 0;
    while (now_s() < deadline) {
        pump(ep, now_s() + 0.05);
        open = 0;
        for (int i = 0; i <= nsubs; i++)
            open += cls[i].open;
        if (open == nsubs + 1)
            break;
    }
    if (open != nsubs + 1) {
        fprintf(stderr, "psload: only %d of %d connections opened\n", open, nsubs + 1);
        return 1;
    }
    /* Warm-up: until every subscriber got a message (the routes are up). */
    deadline = now_s() + 30;
    int warmed = 0;
    while (now_s() < deadline) {
        send_text(pub->fd, "w:", 2);
        pump(ep, now_s() + 0.05);
        warmed = 0;
        for (int i = 0; i < nsubs; i++)
            warmed += cls[i].warmed;
        if (warmed == nsubs)
            break;
    }
    if (warmed != nsubs) {
        fprintf(stderr, "psload: only %d of %d subscribers heard the warm-up\n", warmed, nsubs);
        return 1;
    }
    pump(ep, now_s() + 0.5); /* late warm-up messages */
    delivered = 0;
    nlat = 0;
    /* The measured run: RATE messages a second, each stamped when sent. */
    long long published = 0, total = (long long)rate * seconds;
    double t0 = now_s(), interval = 1.0 / rate, cpu0 = cpu_s();
    char msg[MAX_SIZE];
    while (published < total) {
        double due = t0 + (double)published * interval;
        if (now_s() >= due) {
            int n = snprintf(msg, sizeof msg, "t:%lld:%lld:", published, now_ns());
            memset(msg + n, 'x', (size_t)(size - n));
            send_text(pub->fd, msg, (size_t)size);
            published++;
            continue;
        }
        pump(ep, due);
    }
    double sent_for = now_s() - t0;
    pump(ep, now_s() + 2.0);
    double client_cpu = cpu_s() - cpu0;
    long long expected = published * nsubs;
    qsort(lat_us, nlat, sizeof *lat_us, cmp_u32);
    double p50 = nlat ? lat_us[nlat / 2] / 1000.0 : -1;
    double p99 = nlat ? lat_us[(size_t)((double)nlat * 0.99)] / 1000.0 : -1;
    double mx = nlat ? lat_us[nlat - 1] / 1000.0 : -1;
    int per[MAX_WORKERS + 1] = {0};
    for (int i = 0; i < nsubs; i++)
        per[cls[i].worker >= 0 && cls[i].worker < MAX_WORKERS ? cls[i].worker : MAX_WORKERS]++;
    printf("subs=%d published=%lld expected=%lld delivered=%lld lost=%lld msgs_per_s=%.0f "
           "p50_ms=%.3f p99_ms=%.3f max_ms=%.3f client_cpu_s=%.2f workers=",
           nsubs, published, expected, delivered, expected - delivered,
           (double)delivered / sent_for, p50, p99, mx, client_cpu);
    const char *sep = "";
    for (int w = 0; w <= MAX_WORKERS; w++)
        if (per[w]) {
            if (w == MAX_WORKERS)
                printf("%s?:%d", sep, per[w]);
            else
                printf("%s%d:%d", sep, w, per[w]);
            sep = ",";
        }
    printf("\n");
    return 0;
}
