/*
 * fuzz_tls.c - libFuzzer harness for the TLS record path: pagid's server
 * side (src/worker/tls_conn.c on a context from src/common/tls_server.c,
 * built from a config as pagid builds it) on a non-blocking socketpair.
 *
 * First byte even: the rest is what a client sends, raw (ClientHello,
 * records, alerts, garbage), fed in pieces sized by the first byte, with
 * or without a FIN at the end; the handshake and reads must end in a
 * defined result. First byte odd: a real in-process OpenSSL client makes
 * the handshake (TLS 1.3 or 1.2), then the bytes are a script of steps:
 * the client's writes, partial deliveries, raw bytes spliced into its
 * record stream, key updates, close_notify, FIN; the server's reads,
 * writev and sendfile (with the output queue's retry rule after EAGAIN),
 * close_notify. Checked: the bytes each side decrypts are exactly what the
 * other sent, in order; results keep the syscalls' contracts; "pending"
 * always means a read returns data.
 *
 * The certificate and key are made afresh at start-up (tls_test_cert.c);
 * OpenSSL itself is not instrumented, so coverage guides only through
 * pagid's side and this harness.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../unit/tls_test_cert.h"
#include "worker/core/tls_conn.h"

static struct tls_server *ts;
static SSL_CTX *cctx;
static int stream_fd = -1; /* the server's outgoing stream as a file, for sendfile */

#define STREAM_MAX (1u << 20)
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_tls: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Byte i of a direction's plaintext stream: any gap, repeat or reordering
 * shows on the other side. */
static unsigned char stream_byte(uint64_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + (i >> 8) * 7u + (i >> 16) + seed) & 0xff);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    char dir[PATH_MAX];
    ts = tls_test_server(NULL, dir);
    tls_test_cleanup(dir); /* the context holds the certificate and key now */
    cctx = SSL_CTX_new(TLS_client_method());
    if (!ts || !cctx)
        abort();
    SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(cctx, alpn, sizeof alpn - 1);
    stream_fd = memfd_create("fuzz_tls_stream", 0);
    if (stream_fd < 0)
        abort();
    static unsigned char chunk[65536];
    for (uint64_t off = 0; off < STREAM_MAX; off += sizeof chunk) {
        for (size_t i = 0; i < sizeof chunk; i++)
            chunk[i] = stream_byte(off + i, 1);
        if (pwrite(stream_fd, chunk, sizeof chunk, (off_t)off) != (ssize_t)sizeof chunk)
            abort();
    }
    return 0;
}

typedef struct run {
    int sp[2]; /* sp[0]: the server's socket; sp[1]: the client's raw end */
    tls_conn *sv;
    SSL *cl;
    BIO *c_in, *c_out;
    const uint8_t *p, *end; /* the script */
    uint64_t c_sent, s_got; /* client -> server plaintext: sent, received */
    uint64_t s_sent, c_got; /* server -> client */
    uint64_t s_raw;         /* bytes of records the server wrote (its progress, data or not) */
    size_t must_offer;      /* after EAGAIN or a short count: the next write offers at least this */
    int retry_kind;         /* 1 writev, 2 sendfile: what the retry must be */
    int spliced;            /* raw bytes went into the client's record stream */
    int s_dead, c_dead, fin;
} run;

static unsigned next(run *r)
{
    return r->p < r->end ? *r->p++ : 0;
}

static unsigned next16(run *r)
{
    return next(r) | next(r) << 8;
}

/* The server's output, into the client (and dropped when it is gone). */
static void from_server(run *r)
{
    unsigned char b[65536];
    ssize_t n;
    while ((n = read(r->sp[1], b, sizeof b)) > 0) {
        r->s_raw += (uint64_t)n;
        if (r->cl && !r->c_dead)
            BIO_write(r->c_in, b, (int)n);
    }
}

static void to_server(run *r, size_t max)
{
    unsigned char b[16384];
    while (max > 0 && !r->fin) {
        int n = BIO_read(r->c_out, b, (int)(max < sizeof b ? max : sizeof b));
        if (n <= 0)
            return;
        if (write(r->sp[1], b, (size_t)n) != n) {
            r->spliced = 1; /* the socket is full: the rest is lost, the stream cut */
            return;
        }
        max -= (size_t)n;
    }
}

/* The result of a server read or write must be one of the contract's. */
static void check_errno(ssize_t n)
{
    if (n >= 0)
        return;
    CHECK(n == -1);
    CHECK(errno == EAGAIN || errno == EPROTO || errno == ECONNRESET || errno == EPIPE);
}

static void server_read(run *r, size_t want)
{
    unsigned char b[20000];
    if (want > sizeof b)
        want = sizeof b;
    errno = 0;
    ssize_t n = tls_conn_read(r->sv, b, want);
    check_errno(n);
    CHECK(n <= (ssize_t)want);
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++)
            CHECK(b[i] == stream_byte(r->s_got + (uint64_t)i, 2));
        r->s_got += (uint64_t)n;
        CHECK(r->s_got <= r->c_sent);
    } else if (n == 0 || errno != EAGAIN) {
        r->s_dead = 1;
        CHECK(n != 0 || !tls_conn_has_pending(r->sv));
    }
}

static void client_read(run *r)
{
    from_server(r);
    if (r->c_dead)
        return;
    unsigned char b[16384];
    size_t got;
    while (SSL_read_ex(r->cl, b, sizeof b, &got) == 1) {
        for (size_t i = 0; i < got; i++)
            CHECK(b[i] == stream_byte(r->c_got + i, 1));
        r->c_got += got;
        /* A write that ended in EAGAIN may have sent whole records already:
         * OpenSSL counts them in the retry's result (it must offer them). */
        CHECK(r->c_got <= r->s_sent + r->must_offer);
    }
    int e = SSL_get_error(r->cl, 0);
    if (e != SSL_ERROR_WANT_READ)
        r->c_dead = 1;
    ERR_clear_error();
}

/* A server write of len stream bytes as writev (cut into cnt iovecs) or
 * sendfile, keeping the retry rule: after EAGAIN, the same bytes first. */
static void server_write(run *r, int kind, size_t len, unsigned cuts)
{
    static unsigned char buf[65536];
    if (r->retry_kind)
        kind = r->retry_kind;
    if (len < r->must_offer)
        len = r->must_offer;
    if (len > sizeof buf)
        len = sizeof buf;
    if (len == 0 || r->s_sent + len > STREAM_MAX)
        return;
    ssize_t n;
    errno = 0;
    if (kind == 2) {
        off_t off = (off_t)r->s_sent;
        n = tls_conn_sendfile(r->sv, stream_fd, &off, len);
        if (n > 0)
            CHECK((uint64_t)off == r->s_sent + (uint64_t)n);
        /* sendfile reads what one batch of records holds (four, without
         * kernel TLS): the retry needs no more */
        if (len > 4 * 16384)
            len = 4 * 16384;
    } else {
        for (size_t i = 0; i < len; i++)
            buf[i] = stream_byte(r->s_sent + i, 1);
        struct iovec v[4];
        int cnt = (int)(cuts % 4) + 1;
        size_t off = 0;
        for (int i = 0; i < cnt; i++) {
            size_t piece = i == cnt - 1 ? len - off : (len - off) * ((cuts >> (2 + 3 * i)) % 8) / 8;
            v[i].iov_base = buf + off;
            v[i].iov_len = piece;
            off += piece;
        }
        /* No empty segment: the output queue never queues one. */
        int k = 0;
        for (int i = 0; i < cnt; i++)
            if (v[i].iov_len)
                v[k++] = v[i];
        n = tls_conn_writev(r->sv, v, k);
    }
    check_errno(n);
    CHECK(n != 0 || kind == 2);
    CHECK(n <= (ssize_t)len);
    if (n > 0) {
        r->s_sent += (uint64_t)n;
        /* A short count may leave records of the rest on their way (the
         * batch's ciphertext the socket did not take): the rest is offered
         * again first, as the output queue does. */
        r->must_offer = (size_t)n < len ? len - (size_t)n : 0;
        r->retry_kind = r->must_offer ? kind : 0;
    } else if (n < 0 && errno == EAGAIN) {
        if (len > r->must_offer)
            r->must_offer = len;
        r->retry_kind = kind;
    } else {
        r->s_dead = 1;
    }
}

static int handshake(run *r)
{
    int sdone = 0, cdone = 0;
    for (int i = 0; i < 50 && !(sdone && cdone); i++) {
        if (!cdone) {
            int rc = SSL_do_handshake(r->cl);
            if (rc == 1)
                cdone = 1;
            else if (SSL_get_error(r->cl, rc) != SSL_ERROR_WANT_READ)
                return -1;
        }
        to_server(r, SIZE_MAX);
        if (!sdone) {
            tls_step st = tls_conn_handshake(r->sv);
            if (st == TLS_STEP_DONE)
                sdone = 1;
            else if (st != TLS_STEP_WANT_READ && st != TLS_STEP_WANT_WRITE)
                return -1;
        }
        from_server(r);
    }
    return sdone && cdone ? 0 : -1;
}

static void scripted(run *r, unsigned mode)
{
    r->cl = SSL_new(cctx);
    r->c_in = BIO_new(BIO_s_mem());
    r->c_out = BIO_new(BIO_s_mem());
    if (!r->cl || !r->c_in || !r->c_out)
        abort();
    SSL_set_bio(r->cl, r->c_in, r->c_out);
    SSL_set_connect_state(r->cl);
    if (mode & 2)
        SSL_set_max_proto_version(r->cl, TLS1_2_VERSION);
    if (mode & 4) {
        int small = 4096;
        setsockopt(r->sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    }
    CHECK(handshake(r) == 0);
    static unsigned char data[65536];
    while (r->p < r->end) {
        unsigned op = next(r);
        switch (op % 12) {
        case 0: { /* the client writes */
            size_t len = next16(r) % 20000 + 1;
            if (r->c_dead || SSL_get_shutdown(r->cl) & SSL_SENT_SHUTDOWN)
                break;
            for (size_t i = 0; i < len; i++)
                data[i] = stream_byte(r->c_sent + i, 2);
            size_t done = 0;
            if (SSL_write_ex(r->cl, data, len, &done) == 1)
                r->c_sent += done;
            else
                r->c_dead = 1;
            ERR_clear_error();
            break;
        }
        case 1: /* everything the client wrote reaches the server */
            to_server(r, SIZE_MAX);
            break;
        case 2: /* part of it */
            to_server(r, next16(r) % 4096 + 1);
            break;
        case 3: { /* raw bytes spliced into the client's record stream */
            size_t len = next(r) % 64 + 1;
            if (!r->fin && r->end - r->p >= (ptrdiff_t)len &&
                write(r->sp[1], r->p, len) == (ssize_t)len)
                r->spliced = 1;
            r->p += len <= (size_t)(r->end - r->p) ? len : (size_t)(r->end - r->p);
            break;
        }
        case 4:
            if (!r->s_dead)
                server_read(r, next16(r) % 20000 + 1);
            break;
        case 5:
            if (!r->s_dead)
                server_write(r, 1, next16(r) % 40000 + 1, next16(r));
            break;
        case 6:
            if (!r->s_dead)
                server_write(r, 2, next16(r) % 40000 + 1, 0);
            break;
        case 7:
            client_read(r);
            break;
        case 8: /* pending decrypted bytes must read at once */
            if (!r->s_dead && tls_conn_has_pending(r->sv)) {
                size_t before = r->s_got;
                server_read(r, 20000);
                CHECK(r->s_got > before);
            }
            break;
        case 9:
            if (!r->c_dead && SSL_version(r->cl) == TLS1_3_VERSION) {
                SSL_key_update(r->cl, next(r) & 1 ? SSL_KEY_UPDATE_REQUESTED
                                                  : SSL_KEY_UPDATE_NOT_REQUESTED);
                if (SSL_do_handshake(r->cl) != 1)
                    r->c_dead = 1;
                ERR_clear_error();
            }
            break;
        case 10: /* the client ends: close_notify, or a FIN without it */
            if (next(r) & 1) {
                if (!r->c_dead)
                    SSL_shutdown(r->cl);
                ERR_clear_error();
            } else if (!r->fin) {
                to_server(r, SIZE_MAX);
                shutdown(r->sp[1], SHUT_WR);
                r->fin = 1;
            }
            break;
        case 11:
            tls_conn_close_notify(r->sv);
            break;
        }
    }
    /* The end: whatever the client sent whole arrives intact. */
    to_server(r, SIZE_MAX);
    /* Records read ahead come out one per read: read on while reads make
     * progress (a stall of a few rounds means nothing more will come).
     * Progress is also the server's writing: a client that asked for many
     * key updates gets an answer to each before its data is read, and with
     * a small send buffer that takes many rounds. */
    for (int idle = 0; idle < 8 && !r->s_dead && r->s_got < r->c_sent;) {
        uint64_t before = r->s_got, wrote = r->s_raw;
        server_read(r, 20000);
        client_read(r); /* the server may have to write (a key update) to go on */
        idle = r->s_got > before || r->s_raw > wrote ? 0 : idle + 1;
    }
    if (!r->spliced && !r->fin && !r->s_dead && !r->c_dead)
        CHECK(r->s_got == r->c_sent);
    client_read(r);
}

/* Raw client bytes in pieces of 1 << (mode >> 2 & 7) (or all at once). */
static void raw(run *r, unsigned mode)
{
    size_t piece = mode >> 2 & 7 ? (size_t)1 << (mode >> 2 & 7) : SIZE_MAX;
    int done = 0;
    while (!done) {
        size_t left = (size_t)(r->end - r->p);
        size_t n = left < piece ? left : piece;
        if (n && write(r->sp[1], r->p, n) != (ssize_t)n)
            return;
        r->p += n;
        if (r->p == r->end && (mode & 2))
            shutdown(r->sp[1], SHUT_WR);
        tls_step st = tls_conn_handshake(r->sv);
        CHECK(st >= TLS_STEP_DONE && st <= TLS_STEP_PLAIN_HTTP);
        if (st == TLS_STEP_FAILED || st == TLS_STEP_EOF || st == TLS_STEP_PLAIN_HTTP)
            CHECK(tls_conn_failure(r->sv)[0] != '\0');
        if (st == TLS_STEP_DONE) {
            unsigned char b[4096];
            for (int i = 0; i < 8; i++) {
                errno = 0;
                ssize_t k = tls_conn_read(r->sv, b, sizeof b);
                check_errno(k);
                if (k <= 0)
                    break;
            }
            done = 1;
        } else if ((st != TLS_STEP_WANT_READ && st != TLS_STEP_WANT_WRITE) || r->p == r->end) {
            done = 1;
        }
        from_server(r);
    }
    CHECK(ERR_peek_error() == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    run r;
    memset(&r, 0, sizeof r);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, r.sp) < 0)
        abort();
    fcntl(r.sp[0], F_SETFL, O_NONBLOCK);
    fcntl(r.sp[1], F_SETFL, O_NONBLOCK);
    r.sv = tls_conn_new(ts, r.sp[0]);
    if (!r.sv)
        abort();
    r.p = data + 1;
    r.end = data + size;
    if (data[0] & 1)
        scripted(&r, data[0]);
    else
        raw(&r, data[0]);
    tls_conn_close_notify(r.sv);
    CHECK(ERR_peek_error() == 0);
    tls_conn_free(r.sv);
    SSL_free(r.cl); /* frees its BIOs */
    close(r.sp[0]);
    close(r.sp[1]);
    ERR_clear_error();
    return 0;
}
