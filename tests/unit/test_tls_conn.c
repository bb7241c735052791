/*
 * test_tls_conn.c - Check suite for src/worker/tls_conn.c: the server side on
 * one end of a non-blocking socketpair, an in-process OpenSSL client on the
 * other (through memory BIOs, so the test sees and paces every raw byte).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/tls_server.h"
#include "tls_test_cert.h"
#include "worker/core/outq.h"
#include "worker/core/tls_conn.h"

static struct tls_server *ts;
static SSL_CTX *cctx;

static int sp[2]; /* sp[0]: the server's socket; sp[1]: the client's raw end */
static tls_conn *sv;
static SSL *cl;
static BIO *c_in, *c_out; /* what the client reads; what it wrote */

/* Deterministic, position-dependent bytes: a reordering or gap shows. */
static void pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131u + (i >> 8) * 7u + seed) & 0xff);
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    ck_assert_int_eq(fcntl(sp[0], F_SETFL, O_NONBLOCK), 0);
    ck_assert_int_eq(fcntl(sp[1], F_SETFL, O_NONBLOCK), 0);
    sv = tls_conn_new(ts, sp[0]);
    ck_assert_ptr_nonnull(sv);
    cl = SSL_new(cctx);
    ck_assert_ptr_nonnull(cl);
    c_in = BIO_new(BIO_s_mem());
    c_out = BIO_new(BIO_s_mem());
    SSL_set_bio(cl, c_in, c_out);
    SSL_set_connect_state(cl);
}

static void teardown(void)
{
    tls_conn_free(sv);
    SSL_free(cl);
    close(sp[0]);
    close(sp[1]);
}

static void write_raw(const void *p, size_t n)
{
    ck_assert_int_eq(write(sp[1], p, n), (ssize_t)n);
}

/* Up to max bytes the client wrote, onto the server's socket. */
static size_t to_server_n(size_t max)
{
    unsigned char b[65536];
    size_t moved = 0;
    while (moved < max) {
        size_t want = max - moved < sizeof b ? max - moved : sizeof b;
        int n = BIO_read(c_out, b, (int)want);
        if (n <= 0)
            break;
        write_raw(b, (size_t)n);
        moved += (size_t)n;
    }
    return moved;
}

static void to_server(void)
{
    to_server_n(SIZE_MAX);
}

/* Raw bytes the server sent, appended to raw (when given), into the client. */
static size_t from_server(unsigned char *raw, size_t rawcap, size_t *rawlen)
{
    unsigned char b[65536];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(sp[1], b, sizeof b);
        if (n <= 0)
            break;
        if (raw) {
            ck_assert_uint_le(*rawlen + (size_t)n, rawcap);
            memcpy(raw + *rawlen, b, (size_t)n);
            *rawlen += (size_t)n;
        }
        ck_assert_int_eq(BIO_write(c_in, b, (int)n), (int)n);
        got += (size_t)n;
    }
    return got;
}

/* Everything the client can decrypt now, appended to out; the last
 * SSL_get_error (SSL_ERROR_WANT_READ when it simply needs more). */
static int client_read(unsigned char *out, size_t cap, size_t *len)
{
    from_server(NULL, 0, NULL);
    for (;;) {
        unsigned char scratch[16384];
        size_t got = 0;
        unsigned char *dst = out ? out + *len : scratch;
        size_t room = out ? cap - *len : sizeof scratch;
        if (room == 0)
            return SSL_ERROR_NONE;
        if (SSL_read_ex(cl, dst, room, &got) != 1)
            return SSL_get_error(cl, 0);
        if (out)
            *len += got;
    }
}

static void client_write(const void *p, size_t n)
{
    size_t done = 0;
    ck_assert_int_eq(SSL_write_ex(cl, p, n, &done), 1);
    ck_assert_uint_eq(done, n);
}

static void handshake(void)
{
    int sdone = 0, cdone = 0;
    for (int i = 0; i < 50 && !(sdone && cdone); i++) {
        if (!cdone) {
            int r = SSL_do_handshake(cl);
            if (r == 1)
                cdone = 1;
            else
                ck_assert_int_eq(SSL_get_error(cl, r), SSL_ERROR_WANT_READ);
        }
        to_server();
        if (!sdone) {
            tls_step st = tls_conn_handshake(sv);
            if (st == TLS_STEP_DONE)
                sdone = 1;
            else
                ck_assert_int_eq(st, TLS_STEP_WANT_READ);
        }
        from_server(NULL, 0, NULL);
    }
    ck_assert(sdone && cdone);
    /* TLS 1.3 session tickets follow the handshake: let the client take
     * them so the socket holds only what a test sends. */
    ck_assert_int_eq(client_read(NULL, 0, NULL), SSL_ERROR_WANT_READ);
    ck_assert_int_eq(tls_conn_has_pending(sv), 0);
}

/* Server reads until it has n bytes (the client's records already sent). */
static void server_read_exact(unsigned char *out, size_t n)
{
    size_t have = 0;
    while (have < n) {
        ssize_t r = tls_conn_read(sv, out + have, n - have);
        ck_assert_msg(r > 0, "tls_conn_read: %zd (%s)", r, strerror(errno));
        have += (size_t)r;
    }
}

/* The TLS records in raw[0..n): how many, and their content types in types. */
static int count_records(const unsigned char *raw, size_t n, unsigned char *types, int max)
{
    int k = 0;
    size_t i = 0;
    while (i + 5 <= n) {
        size_t len = ((size_t)raw[i + 3] << 8) | raw[i + 4];
        if (k < max)
            types[k] = raw[i];
        k++;
        i += 5 + len;
    }
    ck_assert_uint_eq(i, n); /* whole records only */
    return k;
}

START_TEST(handshake_done)
{
    handshake();
    const unsigned char *alpn = NULL;
    unsigned alen = 0;
    SSL_get0_alpn_selected(cl, &alpn, &alen);
    ck_assert_uint_eq(alen, 8);
    ck_assert(memcmp(alpn, "http/1.1", 8) == 0);
    ck_assert_int_ge(SSL_version(cl), TLS1_2_VERSION);
    unsigned char b[16];
    errno = 0;
    ck_assert_int_eq(tls_conn_read(sv, b, sizeof b), -1);
    ck_assert_int_eq(errno, EAGAIN); /* nothing sent: the socket's EAGAIN */
}
END_TEST

START_TEST(read_write_round_trips)
{
    handshake();
    for (int round = 0; round < 5; round++) {
        char req[64], resp[64];
        int rl = snprintf(req, sizeof req, "GET /%d HTTP/1.1\r\n\r\n", round);
        int pl = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\n\r\nround %d", round);
        client_write(req, (size_t)rl);
        to_server();
        unsigned char got[64];
        server_read_exact(got, (size_t)rl);
        ck_assert(memcmp(got, req, (size_t)rl) == 0);
        struct iovec iov = {resp, (size_t)pl};
        ck_assert_int_eq(tls_conn_writev(sv, &iov, 1), pl);
        unsigned char back[64];
        size_t blen = 0;
        ck_assert_int_eq(client_read(back, sizeof back, &blen), SSL_ERROR_WANT_READ);
        ck_assert_uint_eq(blen, (size_t)pl);
        ck_assert(memcmp(back, resp, (size_t)pl) == 0);
    }
}
END_TEST

START_TEST(writev_gathers_one_record)
{
    handshake();
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n";
    static const char blank[] = "\r\n";
    static const char body[] = "hello world";
    struct iovec iov[3] = {{(void *)head, sizeof head - 1},
                           {(void *)blank, sizeof blank - 1},
                           {(void *)body, sizeof body - 1}};
    size_t total = sizeof head - 1 + sizeof blank - 1 + sizeof body - 1;
    ck_assert_int_eq(tls_conn_writev(sv, iov, 3), (ssize_t)total);
    static unsigned char raw[4096];
    size_t rawlen = 0;
    from_server(raw, sizeof raw, &rawlen);
    unsigned char types[8];
    ck_assert_int_eq(count_records(raw, rawlen, types, 8), 1);
    ck_assert_int_eq(types[0], 23); /* application_data */
    unsigned char out[256];
    size_t olen = 0;
    ck_assert_int_eq(client_read(out, sizeof out, &olen), SSL_ERROR_WANT_READ);
    ck_assert_uint_eq(olen, total);
    ck_assert(memcmp(out, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", total) == 0);

    /* Segments past one record's worth: one call encrypts up to four
     * records (and a small tail) and writes them with one write(2); here
     * the socket takes all 40000 bytes at once, in order. */
    enum { BIG = 40000 };
    unsigned char *src = malloc(BIG), *dst = malloc(BIG);
    pattern(src, BIG, 3);
    size_t sent = 0;
    int calls = 0;
    olen = 0;
    while (sent < BIG) {
        calls++;
        struct iovec v[4];
        int cnt = 0;
        size_t off = sent;
        static const size_t cuts[] = {700, 9000, 12000, SIZE_MAX};
        for (int i = 0; i < 4 && off < BIG; i++) {
            size_t len = cuts[i] < BIG - off ? cuts[i] : BIG - off;
            v[cnt].iov_base = src + off;
            v[cnt++].iov_len = len;
            off += len;
        }
        ssize_t n = tls_conn_writev(sv, v, cnt);
        ck_assert_int_gt(n, 0);
        ck_assert_int_le(n, 4 * 16384 + 4096);
        sent += (size_t)n;
        client_read(dst, BIG, &olen);
    }
    ck_assert_int_eq(calls, 1);
    ck_assert_uint_eq(olen, BIG);
    ck_assert(memcmp(src, dst, BIG) == 0);
    free(src);
    free(dst);
}
END_TEST

/* The output queue's pattern on a full socket: after EAGAIN the next call
 * offers the same first bytes (in other iovec cuts, from other addresses)
 * and more behind them. */
START_TEST(eagain_retry_same_bytes_plus_more)
{
    handshake();
    int small = 4096;
    ck_assert_int_eq(setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    enum { TOTAL = 600000 };
    unsigned char *src = malloc(TOTAL), *dst = malloc(TOTAL);
    pattern(src, TOTAL, 7);
    /* Each attempt copies the bytes it offers, so a retry comes from a
     * different address (the queue may have been reallocated). */
    unsigned char *copy = malloc(TOTAL);
    size_t sent = 0, avail = 1000, olen = 0;
    int eagains = 0, retries_grown = 0, last_eagain = 0;
    unsigned cut = 1;
    for (int round = 0; sent < TOTAL && round < 200000; round++) {
        size_t offer = avail - sent;
        memcpy(copy + sent, src + sent, offer);
        struct iovec v[3];
        int cnt = 0;
        size_t off = sent;
        for (int i = 0; i < 3 && off < avail; i++) {
            cut = cut * 1103515245u + 12345u;
            size_t len = i == 2 ? avail - off : 1 + (cut >> 8) % 20000;
            if (len > avail - off)
                len = avail - off;
            v[cnt].iov_base = copy + off;
            v[cnt++].iov_len = len;
            off += len;
        }
        errno = 0;
        ssize_t n = tls_conn_writev(sv, v, cnt);
        if (n < 0) {
            ck_assert_msg(errno == EAGAIN, "writev: %s (%s)", strerror(errno),
                          tls_conn_failure(sv));
            ck_assert(tls_conn_wants_write(sv));
            eagains++;
            last_eagain = 1;
            /* The peer takes a little; the app queues more meanwhile. */
            client_read(dst, TOTAL, &olen);
            if (avail < TOTAL) {
                avail = avail + 3000 < TOTAL ? avail + 3000 : TOTAL;
                retries_grown++;
            }
            memset(copy + sent, 0xEE, offer); /* the old copy is gone */
            continue;
        }
        ck_assert_int_gt(n, 0);
        ck_assert_uint_le((size_t)n, offer);
        last_eagain = 0;
        sent += (size_t)n;
        if (avail < TOTAL)
            avail = avail + 5000 < TOTAL ? avail + 5000 : TOTAL;
    }
    (void)last_eagain;
    ck_assert_uint_eq(sent, TOTAL);
    for (int i = 0; i < 1000 && olen < TOTAL; i++)
        client_read(dst, TOTAL, &olen);
    ck_assert_uint_eq(olen, TOTAL);
    ck_assert(memcmp(src, dst, TOTAL) == 0);
    ck_assert_int_gt(eagains, 5);
    ck_assert_int_gt(retries_grown, 5);
    free(src);
    free(dst);
    free(copy);
}
END_TEST

static ssize_t sink_writev(void *ctx, const struct iovec *iov, int cnt)
{
    return tls_conn_writev(ctx, iov, cnt);
}

static ssize_t sink_sendfile(void *ctx, int fd, off_t *offset, size_t len)
{
    return tls_conn_sendfile(ctx, fd, offset, len);
}

static int tmpfile_with(const unsigned char *data, size_t n)
{
    char path[] = "/tmp/pagid-tls-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
    return fd;
}

START_TEST(sendfile_pread_path)
{
    handshake();
    enum { FSIZE = 100000 };
    unsigned char *src = malloc(FSIZE), *dst = malloc(FSIZE);
    pattern(src, FSIZE, 11);
    int fd = tmpfile_with(src, FSIZE);
    /* From an offset, not to the end: exactly [1234, 1234 + 90000). */
    off_t off = 1234;
    size_t left = 90000, olen = 0;
    while (left > 0) {
        ssize_t n = tls_conn_sendfile(sv, fd, &off, left);
        if (n < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            client_read(dst, FSIZE, &olen);
            continue;
        }
        ck_assert_int_gt(n, 0);
        ck_assert_int_le(n, 4 * 16384); /* a batch of records read at once */
        left -= (size_t)n;
        client_read(dst, FSIZE, &olen);
    }
    ck_assert_int_eq(off, 1234 + 90000);
    ck_assert_uint_eq(olen, 90000);
    ck_assert(memcmp(dst, src + 1234, 90000) == 0);
    /* At the end of the file: 0, as sendfile(2) says. */
    off = FSIZE;
    ck_assert_int_eq(tls_conn_sendfile(sv, fd, &off, 10), 0);
    close(fd);
    free(src);
    free(dst);
}
END_TEST

static void ext_release(void *ud)
{
    (*(int *)ud)++;
}

/* The output queue through the TLS sink on a small socket: memory, file
 * and borrowed segments, more appended while it waits. */
START_TEST(outq_through_tls_sink)
{
    handshake();
    int small = 4096;
    ck_assert_int_eq(setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    enum { PART = 50000, TOTAL = 6 * PART };
    unsigned char *src = malloc(TOTAL), *dst = malloc(TOTAL);
    pattern(src, TOTAL, 5);
    int fd = tmpfile_with(src + PART, PART);
    outq q;
    outq_init(&q);
    outq_sink sink = {sv, sink_writev, sink_sendfile};
    int released = 0;
    ck_assert_int_eq(outq_append(&q, src, PART), 0);
    ck_assert_int_eq(outq_append_file(&q, fd, 0, PART), 0);
    int stage = 2, again = 0;
    size_t olen = 0, total_written = 0;
    for (int round = 0; round < 100000; round++) {
        size_t w = 0;
        outq_result r = outq_write_sink(&q, &sink, &w);
        total_written += w;
        ck_assert_int_ne(r, OUTQ_ERROR);
        if (r == OUTQ_AGAIN) {
            again++;
            if (stage == 2) { /* queued while waiting: small pieces, then borrowed */
                for (size_t i = 0; i < PART; i += 700)
                    ck_assert_int_eq(
                        outq_append(&q, src + 2 * PART + i, PART - i < 700 ? PART - i : 700), 0);
                stage++;
            } else if (stage == 3) {
                ck_assert_int_eq(outq_append_ext(&q, src + 3 * PART, PART, ext_release, &released),
                                 0);
                stage++;
            } else if (stage == 4) {
                ck_assert_int_eq(outq_append(&q, src + 4 * PART, 2 * PART), 0);
                stage++;
            }
        } else if (stage == 5) {
            break;
        }
        client_read(dst, TOTAL, &olen);
    }
    ck_assert_int_eq(stage, 5);
    ck_assert_uint_eq(total_written, TOTAL);
    ck_assert_uint_eq(outq_buffered(&q), 0);
    ck_assert_int_eq(released, 1);
    for (int i = 0; i < 100 && olen < TOTAL; i++)
        client_read(dst, TOTAL, &olen);
    ck_assert_uint_eq(olen, TOTAL);
    ck_assert(memcmp(src, dst, TOTAL) == 0);
    ck_assert_int_gt(again, 3);
    outq_free(&q);
    free(src);
    free(dst);
}
END_TEST

START_TEST(close_notify_is_clean_shutdown)
{
    handshake();
    struct iovec iov = {"bye", 3};
    ck_assert_int_eq(tls_conn_writev(sv, &iov, 1), 3);
    tls_conn_close_notify(sv);
    tls_conn_close_notify(sv); /* once only */
    static unsigned char raw[1024];
    size_t rawlen = 0;
    from_server(raw, sizeof raw, &rawlen);
    unsigned char types[4];
    ck_assert_int_eq(count_records(raw, rawlen, types, 4), 2); /* the data, one alert */
    unsigned char out[16];
    size_t olen = 0;
    ck_assert_int_eq(client_read(out, sizeof out, &olen), SSL_ERROR_ZERO_RETURN);
    ck_assert_uint_eq(olen, 3);
    ck_assert(SSL_get_shutdown(cl) & SSL_RECEIVED_SHUTDOWN);
}
END_TEST

START_TEST(peer_close_notify_reads_zero)
{
    handshake();
    client_write("last", 4);
    ck_assert_int_eq(SSL_shutdown(cl), 0);
    to_server();
    unsigned char b[16];
    ck_assert_int_eq(tls_conn_read(sv, b, sizeof b), 4);
    ck_assert_int_eq(tls_conn_read(sv, b, sizeof b), 0);
}
END_TEST

START_TEST(peer_fin_without_close_notify_reads_zero)
{
    handshake();
    client_write("abc", 3);
    to_server();
    ck_assert_int_eq(shutdown(sp[1], SHUT_WR), 0);
    unsigned char b[16];
    ck_assert_int_eq(tls_conn_read(sv, b, sizeof b), 3);
    ck_assert_int_eq(tls_conn_read(sv, b, sizeof b), 0);
}
END_TEST

START_TEST(fin_mid_handshake_is_eof)
{
    ck_assert_int_eq(SSL_do_handshake(cl), -1);
    to_server_n(40); /* part of the ClientHello */
    ck_assert_int_eq(tls_conn_handshake(sv), TLS_STEP_WANT_READ);
    ck_assert_int_eq(shutdown(sp[1], SHUT_WR), 0);
    errno = EAGAIN; /* left by an earlier call: not the reason */
    ck_assert_int_eq(tls_conn_handshake(sv), TLS_STEP_EOF);
    ck_assert_str_ne(tls_conn_failure(sv), "");
    ck_assert_str_ne(tls_conn_failure(sv), strerror(EAGAIN));
}
END_TEST

START_TEST(garbage_after_handshake_is_eproto)
{
    handshake();
    /* A well-formed record header, then bytes that are no ciphertext. */
    unsigned char bad[5 + 64] = {23, 3, 3, 0, 64};
    pattern(bad + 5, 64, 1);
    write_raw(bad, sizeof bad);
    unsigned char b[128];
    errno = 0;
    ck_assert_int_eq(tls_conn_read(sv, b, sizeof b), -1);
    ck_assert_int_eq(errno, EPROTO);
    ck_assert_str_ne(tls_conn_failure(sv), "");
    ck_assert_int_eq(ERR_peek_error(), 0); /* the error queue is left empty */
    /* The session is dead: writing fails too, and close_notify is skipped. */
    struct iovec iov = {"x", 1};
    ck_assert_int_eq(tls_conn_writev(sv, &iov, 1), -1);
    unsigned char alert[256];
    while (read(sp[1], alert, sizeof alert) > 0)
        ; /* the fatal alert OpenSSL sent */
    tls_conn_close_notify(sv);
    ck_assert_int_eq(ERR_peek_error(), 0);
    ck_assert_int_eq(read(sp[1], alert, sizeof alert), -1); /* nothing after it */
}
END_TEST

/* A request line is told apart (the caller answers 400 in clear); other
 * cleartext is just a failed handshake. */
static const char *const cleartext_openings[] = {
    "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /f HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
    "CONNECT example.org:443 HTTP/1.1\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    "SSH-2.0-OpenSSH_9.2\r\n",
};

START_TEST(plain_http_handshake_fails)
{
    const char *req = cleartext_openings[_i];
    write_raw(req, strlen(req));
    ck_assert_int_eq(tls_conn_handshake(sv), _i < 3 ? TLS_STEP_PLAIN_HTTP : TLS_STEP_FAILED);
    ck_assert_str_ne(tls_conn_failure(sv), "");
    ck_assert_int_eq(ERR_peek_error(), 0);
    tls_conn_close_notify(sv); /* harmless on a failed session */
}
END_TEST

START_TEST(pending_after_partial_read)
{
    handshake();
    enum { N = 16000 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    pattern(src, N, 9);
    client_write(src, N); /* one record */
    to_server();
    ck_assert_int_eq(tls_conn_read(sv, dst, 100), 100);
    ck_assert_int_eq(tls_conn_has_pending(sv), 1);
    size_t have = 100;
    while (tls_conn_has_pending(sv)) {
        ssize_t r = tls_conn_read(sv, dst + have, 4096);
        ck_assert_int_gt(r, 0);
        have += (size_t)r;
    }
    ck_assert_uint_eq(have, N);
    ck_assert(memcmp(src, dst, N) == 0);
    free(src);
    free(dst);
}
END_TEST

/* Half a record on the socket is no decrypted byte: reporting it as pending
 * would make the connection read again and again without the socket
 * becoming readable (a busy loop until the rest arrives). */
START_TEST(no_pending_for_half_a_record)
{
    handshake();
    unsigned char src[3000], dst[3000];
    pattern(src, sizeof src, 4);
    client_write(src, sizeof src);
    size_t first = to_server_n(1000);
    ck_assert_uint_eq(first, 1000);
    errno = 0;
    ck_assert_int_eq(tls_conn_read(sv, dst, sizeof dst), -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(tls_conn_has_pending(sv), 0);
    to_server();
    server_read_exact(dst, sizeof dst);
    ck_assert(memcmp(src, dst, sizeof src) == 0);
}
END_TEST

START_TEST(tls12_round_trip)
{
    /* The client offers only TLS 1.2: the server's TLS 1.2 ciphers work. */
    SSL_set_max_proto_version(cl, TLS1_2_VERSION);
    handshake();
    ck_assert_int_eq(SSL_version(cl), TLS1_2_VERSION);
    client_write("ping", 4);
    to_server();
    unsigned char b[4];
    server_read_exact(b, 4);
    ck_assert(memcmp(b, "ping", 4) == 0);
    struct iovec iov[2] = {{"po", 2}, {"ng", 2}};
    ck_assert_int_eq(tls_conn_writev(sv, iov, 2), 4);
    unsigned char out[8];
    size_t olen = 0;
    client_read(out, sizeof out, &olen);
    ck_assert_uint_eq(olen, 4);
    ck_assert(memcmp(out, "pong", 4) == 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tls_conn");
    TCase *t = tcase_create("io");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, handshake_done);
    tcase_add_test(t, read_write_round_trips);
    tcase_add_test(t, writev_gathers_one_record);
    tcase_add_test(t, eagain_retry_same_bytes_plus_more);
    tcase_add_test(t, sendfile_pread_path);
    tcase_add_test(t, outq_through_tls_sink);
    tcase_add_test(t, tls12_round_trip);
    suite_add_tcase(s, t);

    t = tcase_create("ending");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, close_notify_is_clean_shutdown);
    tcase_add_test(t, peer_close_notify_reads_zero);
    tcase_add_test(t, peer_fin_without_close_notify_reads_zero);
    tcase_add_test(t, fin_mid_handshake_is_eof);
    tcase_add_test(t, garbage_after_handshake_is_eproto);
    tcase_add_loop_test(t, plain_http_handshake_fails, 0,
                        (int)(sizeof cleartext_openings / sizeof *cleartext_openings));
    suite_add_tcase(s, t);

    t = tcase_create("pending");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, pending_after_partial_read);
    tcase_add_test(t, no_pending_for_half_a_record);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    char dir[PATH_MAX];
    ts = tls_test_server(NULL, dir);
    if (!ts)
        return EXIT_FAILURE;
    cctx = SSL_CTX_new(TLS_client_method());
    if (!cctx)
        return EXIT_FAILURE;
    SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(cctx, alpn, sizeof alpn - 1);
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    SSL_CTX_free(cctx);
    tls_server_free(ts);
    tls_test_cleanup(dir);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
