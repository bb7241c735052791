/*
 * tls_conn.c - one connection's TLS session over its non-blocking socket.
 * OpenSSL does the records; this file maps its results onto the socket
 * calls' contract, gathers small queued segments into one record, and
 * (without kernel TLS) writes up to TLS_BATCH_RECORDS records with one
 * write(2), as h2o does: one syscall and one loopback/TCP send per 64 KiB,
 * not per 16 KiB record.
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

/* Records encrypted per write(2), and the room they take: a record's
 * overhead is at most 5 (header) + 1 (TLS 1.3 type) + 16 (tag) + 8 (TLS 1.2
 * explicit nonce); 256 leaves room for any AEAD. Shared by every connection
 * of the worker: it lives for one call, and what the socket did not take
 * moves to the connection's own tls_conn.pend, reported written only as
 * the socket takes it. */
#define TLS_BATCH_RECORDS 4
#define TLS_RECORD_ROOM (TLS_GATHER + 256)
/* After the full records, a tail this small rides along in one more
 * record rather than a write(2) of its own (HTTP/2 frames are 9 bytes
 * longer than a record: 64 KiB of frames leaves such a tail). */
#define TLS_BATCH_TAIL 4096
#define TLS_BATCH (TLS_BATCH_RECORDS * TLS_RECORD_ROOM + TLS_BATCH_TAIL + 256)
static unsigned char tls_batch_buf[TLS_BATCH];
/* A file's bytes for one batch (tls_conn_sendfile without kernel TLS). */
static unsigned char tls_file_buf[TLS_BATCH_RECORDS * TLS_GATHER];

static int tls_ktls_disabled(void);

struct tls_conn {
    SSL *ssl;
    int fd;
    /* The write BIO after the handshake (without kernel TLS): records go
     * to tls_batch_buf while batching, else straight to the socket; what
     * a batch's write(2) left over waits in pend (owned, malloc'd) and goes
     * out before any other byte. */
    int batch_bio;
    int batching;
    size_t batch_len;
    unsigned char *pend;
    size_t pend_off, pend_len;
    /* pend's records: where each ends in pend and the plaintext it holds.
     * A record's plaintext counts as written (the output queue lets it go)
     * only once its last byte went, so what waits here stays counted as
     * buffered (write timeout, watermarks), and the queue offers those bytes
     * again first, as OpenSSL's own retry contract has it. */
    size_t rec_end[TLS_BATCH_RECORDS + 1], rec_plain[TLS_BATCH_RECORDS + 1];
    int n_rec, rec_first;
    size_t unreported; /* plaintext of records gone, not yet reported written */
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
    t->fd = fd;
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
    free(t->pend);
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

/* ---- the batching write BIO ---- */

/* Write what pend holds; records whose last byte went move their
 * plaintext to unreported. 0 when pend is empty, -1 with errno otherwise. */
static int pend_flush(tls_conn *t)
{
    int rc = 0;
    while (t->pend_off < t->pend_len) {
        ssize_t n = write(t->fd, t->pend + t->pend_off, t->pend_len - t->pend_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = -1;
            break;
        }
        t->pend_off += (size_t)n;
    }
    int e = errno;
    while (t->rec_first < t->n_rec && t->rec_end[t->rec_first] <= t->pend_off)
        t->unreported += t->rec_plain[t->rec_first++];
    if (rc == 0) {
        free(t->pend);
        t->pend = NULL;
        t->pend_off = t->pend_len = 0;
        t->n_rec = t->rec_first = 0;
    }
    errno = e;
    return rc;
}

static int batch_bio_write(BIO *b, const char *p, int len)
{
    tls_conn *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (len <= 0)
        return 0;
    if (t->batching) {
        /* tls_conn_writev leaves room for every record it asks for. */
        if ((size_t)len > TLS_BATCH - t->batch_len) {
            errno = ENOBUFS;
            return -1;
        }
        memcpy(tls_batch_buf + t->batch_len, p, (size_t)len);
        t->batch_len += (size_t)len;
        return len;
    }
    /* Outside a batch (close_notify, a KeyUpdate's answer): after pend
     * (whose records' plaintext is then reported by the next write). */
    if (t->pend && pend_flush(t) < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            BIO_set_retry_write(b);
        return -1;
    }
    ssize_t n;
    do
        n = write(t->fd, p, (size_t)len);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return (int)n;
}

static long batch_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    tls_conn *t = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        BIO_clear_retry_flags(b);
        if (t->pend && pend_flush(t) < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                BIO_set_retry_write(b);
            return 0;
        }
        return 1;
    case BIO_CTRL_WPENDING:
        return (long)(t->pend_len - t->pend_off);
    case BIO_CTRL_DUP:
        return 1;
    default:
        return 0;
    }
}

static int batch_bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

/* The method, made once per process (workers inherit it). */
static BIO_METHOD *batch_bio_method(void)
{
    static BIO_METHOD *m;
    if (!m) {
        m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "pagid tls batch");
        if (m &&
            (!BIO_meth_set_write(m, batch_bio_write) || !BIO_meth_set_ctrl(m, batch_bio_ctrl) ||
             !BIO_meth_set_create(m, batch_bio_create))) {
            BIO_meth_free(m);
            m = NULL;
        }
    }
    return m;
}

/* Once established without kernel TLS, records are written through the
 * batching BIO (the socket BIO stays the read side). Under kernel TLS the
 * kernel makes the records: the socket BIO stays, and nothing is batched.
 * Failing to set it up only costs the batching. */
static void batch_bio_install(tls_conn *t)
{
    if (BIO_get_ktls_send(SSL_get_wbio(t->ssl)) || BIO_wpending(SSL_get_wbio(t->ssl)))
        return;
    BIO_METHOD *m = batch_bio_method();
    BIO *b = m ? BIO_new(m) : NULL;
    if (!b) {
        ERR_clear_error();
        return;
    }
    BIO_set_data(b, t);
    /* SSL_set_fd gave rbio and wbio one BIO with a reference each: this
     * drops the wbio's, the rbio keeps its own. */
    SSL_set0_wbio(t->ssl, b);
    t->batch_bio = 1;
}

tls_step tls_conn_handshake(tls_conn *t)
{
    ERR_clear_error();
    errno = 0; /* SSL_ERROR_SYSCALL with errno 0 is the peer's EOF */
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        batch_bio_install(t);
        return TLS_STEP_DONE;
    }
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

const char *tls_conn_failure(const tls_conn *t)
{
    return t->failure;
}

int tls_conn_no_protocol(const tls_conn *t)
{
    return t->no_protocol;
}

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

/*
 * Encrypt up to TLS_BATCH_RECORDS records of the bytes in iov (from the
 * start) into tls_batch_buf, then one write(2). Reports the plaintext of
 * the records the socket took whole; the rest waits in pend, and the next
 * call (offered the same bytes first) sends it before anything new.
 */
static ssize_t batch_write(tls_conn *t, const struct iovec *iov, int cnt)
{
    if (t->pend && pend_flush(t) < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
    if (t->unreported) {
        size_t k = t->unreported;
        t->unreported = 0;
        t->want_write = 0;
        return (ssize_t)k;
    }
    if (t->pend) {
        t->want_write = 1;
        errno = EAGAIN;
        return -1;
    }
    size_t ends[TLS_BATCH_RECORDS + 1], plains[TLS_BATCH_RECORDS + 1];
    int nrec = 0;
    int nbig = 0, small = 0; /* records over TLS_BATCH_TAIL, and the one under it */
    int i = 0;
    size_t in_seg = 0; /* bytes of iov[i] already encrypted */
    ssize_t failed = 0;
    int err = 0;
    t->batching = 1;
    t->batch_len = 0;
    for (;;) {
        while (i < cnt && in_seg == iov[i].iov_len) {
            i++;
            in_seg = 0;
        }
        if (i == cnt)
            break;
        if (nbig == TLS_BATCH_RECORDS) {
            if (small)
                break;
            size_t rest = iov[i].iov_len - in_seg;
            for (int j = i + 1; j < cnt && rest <= TLS_BATCH_TAIL; j++)
                rest += iov[j].iov_len;
            if (rest > TLS_BATCH_TAIL)
                break;
        }
        /* A record straight from a segment that holds one, else gathered. */
        const unsigned char *rec;
        size_t len;
        if (iov[i].iov_len - in_seg >= TLS_GATHER) {
            rec = (const unsigned char *)iov[i].iov_base + in_seg;
            len = TLS_GATHER;
        } else {
            len = 0;
            for (int j = i; j < cnt && len < TLS_GATHER; j++) {
                size_t off = j == i ? in_seg : 0;
                size_t take = iov[j].iov_len - off;
                /* A segment that holds a record (an HTTP/2 DATA frame, a
                 * body) starts one: gathered into this one, its records
                 * and every later one would each be copied first. */
                if (len && take >= TLS_GATHER)
                    break;
                if (take > TLS_GATHER - len)
                    take = TLS_GATHER - len;
                memcpy(tls_gather_buf + len, (const char *)iov[j].iov_base + off, take);
                len += take;
            }
            rec = tls_gather_buf;
        }
        size_t w = 0;
        ERR_clear_error();
        errno = 0;
        if (SSL_write_ex(t->ssl, rec, len, &w) != 1 || w != len) {
            failed = tls_io_result(t, 0);
            err = failed == 0 ? EPIPE : errno;
            failed = -1;
            break; /* what was encrypted still goes; the error comes after */
        }
        ends[nrec] = t->batch_len; /* where this record's bytes end */
        plains[nrec++] = len;
        /* One small record (a response head before its body, or the tail)
         * rides beside the full ones: the buffer has room for it. */
        if (len <= TLS_BATCH_TAIL && !small)
            small = 1;
        else
            nbig++;
        /* Advance past the record's bytes. */
        for (size_t left = len; left;) {
            size_t k = iov[i].iov_len - in_seg < left ? iov[i].iov_len - in_seg : left;
            in_seg += k;
            left -= k;
            if (in_seg == iov[i].iov_len && left) {
                i++;
                in_seg = 0;
            }
        }
    }
    t->batching = 0;
    if (nrec == 0) {
        t->batch_len = 0;
        errno = err;
        return -1;
    }
    size_t off = 0;
    int werr = 0;
    while (off < t->batch_len) {
        ssize_t n = write(t->fd, tls_batch_buf + off, t->batch_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            werr = n < 0 ? errno : EPIPE;
            break;
        }
        off += (size_t)n;
    }
    size_t done = 0;
    int r = 0;
    for (; r < nrec && ends[r] <= off; r++)
        done += plains[r];
    if (r < nrec) {
        size_t rest = t->batch_len - off;
        t->pend = malloc(rest);
        if (!t->pend) {
            t->batch_len = 0;
            t->dead = 1;
            errno = ENOMEM;
            return -1;
        }
        memcpy(t->pend, tls_batch_buf + off, rest);
        t->pend_off = 0;
        t->pend_len = rest;
        t->n_rec = t->rec_first = 0;
        for (; r < nrec; r++) {
            t->rec_end[t->n_rec] = ends[r] - off;
            t->rec_plain[t->n_rec++] = plains[r];
        }
    }
    t->batch_len = 0;
    if (done == 0) {
        t->want_write = werr == EAGAIN || werr == EWOULDBLOCK;
        errno = werr ? werr : EAGAIN;
        return -1;
    }
    t->want_write = 0;
    return (ssize_t)done;
}

ssize_t tls_conn_writev(tls_conn *t, const struct iovec *iov, int cnt)
{
    if (t->batch_bio)
        return batch_write(t, iov, cnt);
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
    if (t->batch_bio) {
        /* A batch's worth read at once, then encrypted as for memory; what
         * waits from the last batch goes first (its bytes are the same). */
        if (t->pend || t->unreported) {
            ssize_t k = batch_write(t, NULL, 0);
            if (k > 0)
                *offset += k;
            return k;
        }
        size_t want = len < sizeof tls_file_buf ? len : sizeof tls_file_buf;
        ssize_t got = pread(fd, tls_file_buf, want, *offset);
        if (got <= 0)
            return got; /* 0: the file shrank; the caller reports it */
        struct iovec one = {tls_file_buf, (size_t)got};
        ssize_t n = batch_write(t, &one, 1);
        if (n > 0)
            *offset += n;
        return n;
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

int tls_conn_wants_write(const tls_conn *t)
{
    return t->want_write;
}

/* Decrypted bytes only: a read returns data now. */
int tls_conn_has_pending(const tls_conn *t)
{
    return SSL_pending(t->ssl) > 0;
}

/* Anything OpenSSL holds from the socket (read ahead): whole records a read
 * will return without the socket, or the start of one still arriving. */
int tls_conn_has_buffered(const tls_conn *t)
{
    return SSL_has_pending(t->ssl);
}

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
