/*
 * tls_conn.c - one connection's TLS session over its non-blocking socket.
 * OpenSSL does the records; this file maps its results onto the socket
 * calls' contract and keeps small writes to one record each: several
 * queued segments are gathered into one TLS record, not one record apiece.
 */
#include "tls_conn.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/tls_server.h"
#include "tls_info.h"

/* One TLS record's worth of plaintext. Shared by every connection of the
 * worker: it only lives for one call (a retry gathers the bytes again). */
#define TLS_GATHER 16384
static unsigned char tls_gather_buf[TLS_GATHER];

struct tls_conn {
    SSL *ssl;
    int want_write;
    int notified;
    char failure[120];
    struct tls_info *info; /* the PAGI tls extension's facts, shared (tls_conn_info) */
};

tls_conn *tls_conn_new(const struct tls_server *ts, int fd)
{
    tls_conn *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ssl = SSL_new(tls_server_ssl_ctx(ts));
    if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(t->ssl);
    return t;
}

void tls_conn_free(tls_conn *t)
{
    if (!t)
        return;
    tls_info_conn_gone(t->info); /* before the session goes: a scope may still ask */
    SSL_free(t->ssl);
    free(t);
}

/* Record why a call failed; the error queue is left empty for the next. */
static void tls_note_failure(tls_conn *t)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(t->failure, sizeof t->failure, "%s", r ? r : "TLS error");
    ERR_clear_error();
}

tls_step tls_conn_handshake(tls_conn *t)
{
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1)
        return TLS_STEP_DONE;
    int e = SSL_get_error(t->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        return TLS_STEP_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return TLS_STEP_WANT_WRITE;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        snprintf(t->failure, sizeof t->failure, "%s",
                 errno ? strerror(errno) : "connection closed during the handshake");
        return TLS_STEP_EOF;
    case SSL_ERROR_ZERO_RETURN:
        snprintf(t->failure, sizeof t->failure, "connection closed during the handshake");
        return TLS_STEP_EOF;
    default:
        tls_note_failure(t);
        return TLS_STEP_FAILED;
    }
}

const char *tls_conn_failure(const tls_conn *t) { return t->failure; }

/* Map a failed SSL call to errno; returns -1 or 0 (end of stream). */
static ssize_t tls_io_result(tls_conn *t, int rc)
{
    int e = SSL_get_error(t->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        t->want_write = 0;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        t->want_write = 1;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (errno == 0 || errno == EAGAIN)
            return 0; /* the peer's FIN without close_notify (IGNORE_UNEXPECTED_EOF) */
        return -1;
    default:
        tls_note_failure(t);
        errno = EPROTO;
        return -1;
    }
}

ssize_t tls_conn_read(tls_conn *t, void *p, size_t n)
{
    size_t got = 0;
    ERR_clear_error();
    errno = 0;
    if (SSL_read_ex(t->ssl, p, n, &got) == 1) {
        t->want_write = 0;
        return (ssize_t)got;
    }
    return tls_io_result(t, 0);
}

static ssize_t tls_write_bytes(tls_conn *t, const void *p, size_t n)
{
    size_t done = 0;
    ERR_clear_error();
    errno = 0;
    if (SSL_write_ex(t->ssl, p, n, &done) == 1) {
        t->want_write = 0;
        return (ssize_t)done;
    }
    ssize_t r = tls_io_result(t, 0);
    if (r == 0) {
        errno = EPIPE; /* the peer is gone: nothing more can be written */
        return -1;
    }
    return r;
}

ssize_t tls_conn_writev(tls_conn *t, const struct iovec *iov, int cnt)
{
    /* A big first segment goes as it is; small ones are gathered so that a
     * response head and its body share one record and one packet. */
    if (cnt == 1 || iov[0].iov_len >= TLS_GATHER)
        return tls_write_bytes(t, iov[0].iov_base, iov[0].iov_len);
    size_t have = 0;
    for (int i = 0; i < cnt && have < TLS_GATHER; i++) {
        size_t take = iov[i].iov_len;
        if (take > TLS_GATHER - have)
            take = TLS_GATHER - have;
        memcpy(tls_gather_buf + have, iov[i].iov_base, take);
        have += take;
    }
    return tls_write_bytes(t, tls_gather_buf, have);
}

ssize_t tls_conn_sendfile(tls_conn *t, int fd, off_t *offset, size_t len)
{
    if (BIO_get_ktls_send(SSL_get_wbio(t->ssl))) {
        ERR_clear_error();
        errno = 0;
        ossl_ssize_t n = SSL_sendfile(t->ssl, fd, *offset, len, 0);
        if (n >= 0) {
            *offset += n;
            return n;
        }
        ssize_t r = tls_io_result(t, (int)n);
        if (r == 0)
            errno = EPIPE;
        return -1;
    }
    size_t want = len < TLS_GATHER ? len : TLS_GATHER;
    ssize_t got = pread(fd, tls_gather_buf, want, *offset);
    if (got <= 0)
        return got; /* 0: the file shrank; the caller reports it */
    ssize_t n = tls_write_bytes(t, tls_gather_buf, (size_t)got);
    if (n > 0)
        *offset += n;
    return n;
}

int tls_conn_wants_write(const tls_conn *t) { return t->want_write; }

int tls_conn_has_pending(const tls_conn *t) { return SSL_has_pending(t->ssl); }

void tls_conn_close_notify(tls_conn *t)
{
    if (t->notified)
        return;
    t->notified = 1;
    ERR_clear_error();
    /* One attempt: a full queue or a peer already gone loses only the alert. */
    (void)SSL_shutdown(t->ssl);
    ERR_clear_error();
}

/* ---- the PAGI tls extension (tls_info.c) ---- */

struct tls_info *tls_conn_info(tls_conn *t)
{
    if (!t->info)
        t->info = tls_info_new(t->ssl);
    return t->info;
}
