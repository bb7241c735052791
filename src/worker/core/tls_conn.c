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

#include "common/tls_server.h"
#include "tls_info.h"

/* One TLS record's worth of plaintext. Shared by every connection of the
 * worker: it only lives for one call (a retry gathers the bytes again). */
#define TLS_GATHER 16384
static unsigned char tls_gather_buf[TLS_GATHER];

static int tls_ktls_disabled(void);

struct tls_conn {
    SSL *ssl;
    int want_write;
    int notified;
    int dead;        /* a fatal error: OpenSSL forbids SSL_shutdown afterwards */
    int no_protocol; /* the handshake failed on ALPN: no protocol in common */
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
    if (tls_ktls_disabled())
        SSL_clear_options(t->ssl, SSL_OP_ENABLE_KTLS);
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
    t->dead = 1;
}

tls_step tls_conn_handshake(tls_conn *t)
{
    ERR_clear_error();
    errno = 0; /* SSL_ERROR_SYSCALL with errno 0 is the peer's EOF */
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
        t->dead = 1;
        snprintf(t->failure, sizeof t->failure, "%s",
                 errno ? strerror(errno) : "connection closed during the handshake");
        return TLS_STEP_EOF;
    case SSL_ERROR_ZERO_RETURN:
        snprintf(t->failure, sizeof t->failure, "connection closed during the handshake");
        return TLS_STEP_EOF;
    default: {
        /* OpenSSL knows an HTTP request line from a ClientHello (and sends
         * no alert for it): the caller may answer in the client's language. */
        int reason = ERR_GET_REASON(ERR_peek_last_error());
        t->no_protocol = reason == SSL_R_NO_APPLICATION_PROTOCOL ||
                         ERR_GET_REASON(ERR_peek_error()) == SSL_R_NO_APPLICATION_PROTOCOL;
        tls_note_failure(t);
        return reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST
                   ? TLS_STEP_PLAIN_HTTP
                   : TLS_STEP_FAILED;
    }
    }
}

const char *tls_conn_failure(const tls_conn *t) { return t->failure; }

int tls_conn_no_protocol(const tls_conn *t) { return t->no_protocol; }

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
        /* A failed socket call (errno says which), or with errno 0 an EOF
         * OpenSSL did not expect. EAGAIN cannot be meant here (that is
         * WANT_READ/WRITE) and would make the caller wait on a dead
         * session: an I/O error instead. */
        ERR_clear_error();
        t->dead = 1;
        if (errno == 0)
            return 0; /* the peer's FIN without close_notify (IGNORE_UNEXPECTED_EOF) */
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            errno = EIO; /* not a retry: OpenSSL gave up on the session */
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
     * response head and its body share one record and one packet. Not under
     * kernel TLS: there OpenSSL keeps a pointer to the bytes of a write the
     * socket did not take and sends them from that address on the retry, so
     * they must stay put (a queue segment does; the shared buffer would be
     * another connection's by then). */
    if (cnt == 1 || iov[0].iov_len >= TLS_GATHER || BIO_get_ktls_send(SSL_get_wbio(t->ssl)))
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

/* Decrypted bytes only: a read returns data now. */
int tls_conn_has_pending(const tls_conn *t) { return SSL_pending(t->ssl) > 0; }

/* Anything OpenSSL holds from the socket (read ahead): whole records a read
 * will return without the socket, or the start of one still arriving. */
int tls_conn_has_buffered(const tls_conn *t) { return SSL_has_pending(t->ssl); }

const char *tls_conn_version(const tls_conn *t)
{
    return SSL_get_version(t->ssl);
}

int tls_conn_session_reused(const tls_conn *t)
{
    return SSL_session_reused(t->ssl) == 1;
}

const char *tls_conn_cipher(const tls_conn *t)
{
    const char *c = SSL_get_cipher_name(t->ssl);
    return c && strcmp(c, "(NONE)") != 0 ? c : NULL;
}

void tls_conn_close_notify(tls_conn *t)
{
    /* Nothing to say after a fatal error, nor before the handshake ended
     * (SSL_shutdown would only fail with "shutdown while in init"). */
    if (t->notified || t->dead || !SSL_is_init_finished(t->ssl))
        return;
    t->notified = 1;
    ERR_clear_error();
    /* One attempt: a full queue or a peer already gone loses only the alert. */
    (void)SSL_shutdown(t->ssl);
    ERR_clear_error();
}

/* PAGID_NO_KTLS=1 in the environment: encrypt in user space even where the
 * kernel offers TLS (to compare, or to avoid a kernel's kTLS bugs). Read
 * once per process: workers inherit the master's environment. */
static int tls_ktls_disabled(void)
{
    static int off = -1;
    if (off < 0) {
        const char *v = getenv("PAGID_NO_KTLS");
        off = v && *v && strcmp(v, "0") != 0;
    }
    return off;
}

/* ---- the PAGI tls extension (tls_info.c) ---- */

struct tls_info *tls_conn_info(tls_conn *t)
{
    if (!t->info)
        t->info = tls_info_new(t->ssl);
    return t->info;
}

int tls_conn_alpn_h2(const tls_conn *t)
{
    const unsigned char *p = NULL;
    unsigned int n = 0;
    SSL_get0_alpn_selected(t->ssl, &p, &n);
    return n == 2 && p[0] == 'h' && p[1] == '2';
}
